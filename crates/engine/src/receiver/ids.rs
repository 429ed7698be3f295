//! The receiver keys flows by (source address and port, flow id): two senders that both call
//! their flow 0 are two flows in its log and its report. The first source to use an id keeps
//! it; a later source's flow of the same id is logged under a free id counted down from
//! `u32::MAX`, with an alias record naming the id its sender uses (`horde_wire::log::Alias`).
//! I/O-free: [`FlowIds::id`] says which id to log and whether an alias record is due.

use std::collections::HashMap;
use std::net::SocketAddr;

use horde_wire::log::Alias;

/// (Source, flow id) pairs given an id at most; past this many, a new pair's packets are
/// logged under the sender's own id (as before version 5: the decode says "shared id"), so a
/// flood of sources cannot grow the receiver's memory without bound.
pub(super) const MAX_PAIRS: usize = 1 << 20;

#[derive(Default)]
pub(super) struct FlowIds {
    /// Which source each id in the log belongs to.
    owner: HashMap<u32, SocketAddr>,
    /// The id in the log of each (source, flow id) pair seen.
    of: HashMap<(SocketAddr, u32), u32>,
    /// The next alias to try (counting down from `u32::MAX`).
    next: Option<u32>,
}

impl FlowIds {
    /// The id under which the flow `flow` of `from` is logged, and the alias record to write
    /// first when this call gave the pair an id other than its own.
    pub(super) fn id(&mut self, from: SocketAddr, flow: u32) -> (u32, Option<Alias>) {
        if let Some(&id) = self.of.get(&(from, flow)) {
            return (id, None);
        }
        if self.of.len() >= MAX_PAIRS {
            return (flow, None);
        }
        let id = match self.owner.get(&flow) {
            None => flow,
            Some(_) => {
                let mut id = self.next.unwrap_or(u32::MAX);
                while self.owner.contains_key(&id) {
                    id = id.wrapping_sub(1);
                }
                self.next = Some(id.wrapping_sub(1));
                id
            }
        };
        self.owner.insert(id, from);
        self.of.insert((from, flow), id);
        (id, (id != flow).then_some(Alias { id, flow }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_first_source_keeps_its_id_and_later_ones_get_aliases() {
        let mut ids = FlowIds::default();
        assert_eq!(ids.id(a("10.0.0.1:4000"), 0), (0, None));
        assert_eq!(ids.id(a("10.0.0.1:4000"), 0), (0, None));
        assert_eq!(ids.id(a("10.0.0.2:4000"), 0), (u32::MAX, Some(Alias { id: u32::MAX, flow: 0 })));
        assert_eq!(ids.id(a("10.0.0.2:4000"), 0), (u32::MAX, None));
        assert_eq!(ids.id(a("10.0.0.1:4001"), 0), (u32::MAX - 1, Some(Alias { id: u32::MAX - 1, flow: 0 })));
        // a sender whose own id is an alias already given is aliased in turn
        assert_eq!(ids.id(a("10.0.0.3:4000"), u32::MAX), (u32::MAX - 2, Some(Alias { id: u32::MAX - 2, flow: u32::MAX })));
        assert_eq!(ids.id(a("10.0.0.3:4000"), 7), (7, None));
    }
}
