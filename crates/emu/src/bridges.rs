//! Switches and hubs as Linux bridges, and the fabric namespaces that hold them.
//!
//! A bridge holds at most 1,024 ports (the kernel's `BR_MAX_PORTS`), so a switch with more
//! links is built as a small tree: its own bridge and as many more as it needs, each holding up
//! to [`PORTS`] of its ports and joined to the first by a veth trunk (no loop, so no STP is
//! needed). To the nodes it is one switch.
//!
//! The bridges live in the experiment's fabric namespace, split over more than one ("shards",
//! `horde-EXP-.fK`) once they hold more than [`SHARD_PORTS`] ports between them: a namespace
//! keeps one id per namespace its veths reach, in a table the kernel searches from the start on
//! every change of every such veth, so one fabric reaching 10,000 hosts made building quadratic
//! (at 10,000 hosts, most of `up`'s kernel time). A shard reaches at most a few hundred. The
//! first shard is the fabric itself: small topologies have no other, and the link emulator's
//! ends and external interfaces are always there. Where each bridge and port goes is a pure
//! function of the plan ([`Layout`]), so later commands find a port without a record of it.

use std::collections::HashMap;
use std::os::fd::AsRawFd;

use horde_topo::{Kind, Plan};

use crate::{ns, EmuError, NodeNs};

/// Ports per bridge (the kernel's limit is 1,024: room is left for the trunks).
pub const PORTS: usize = 200;

/// Ports per fabric namespace before the next bridge goes to a new one.
pub const SHARD_PORTS: usize = 600;

/// The namespace of fabric shard `k` (0: the fabric itself).
pub fn shard_ns(exp: &str, k: usize) -> String {
    if k == 0 {
        format!("{}{exp}", ns::PREFIX)
    } else {
        // `.` is not allowed in node names: no node's namespace can be called this
        format!("{}{exp}-.f{k}", ns::PREFIX)
    }
}

/// Where every switch's and hub's bridges and ports are: a pure function of the plan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    /// L2 node → the shard of each of its bridges (the first is the node's own).
    pub(crate) shards_of: HashMap<usize, Vec<usize>>,
    /// Shards beyond the fabric.
    pub(crate) extra: usize,
    /// Per link, per end (a, b): which of its node's bridges the port is on (switches and hubs).
    ports: Vec<[Option<usize>; 2]>,
}

impl Layout {
    pub(crate) fn of(plan: &Plan) -> Layout {
        let mut count: HashMap<usize, usize> = HashMap::new();
        let mut ports = Vec::with_capacity(plan.links.len());
        for l in &plan.links {
            let mut ends = [None, None];
            for (e, p) in [&l.a, &l.b].into_iter().enumerate() {
                if plan.nodes[p.node].kind.is_l2() && plan.nodes[p.node].away.is_none() {
                    let k = count.entry(p.node).or_insert(0);
                    ends[e] = Some(*k);
                    *k += 1;
                }
            }
            ports.push(ends);
        }
        let mut shards_of = HashMap::new();
        let (mut shard, mut filled) = (0usize, 0usize);
        for (i, n) in plan.nodes.iter().enumerate() {
            if !n.kind.is_l2() || n.away.is_some() {
                continue;
            }
            let total = count.get(&i).copied().unwrap_or(0);
            let n_bridges = total.div_ceil(PORTS).max(1);
            let mut list = Vec::with_capacity(n_bridges);
            for j in 0..n_bridges {
                if n.external.is_some() {
                    list.push(0); // its interface is moved into the fabric itself
                    continue;
                }
                let here = if j + 1 == n_bridges { total - j * PORTS } else { PORTS };
                if filled > 0 && filled + here > SHARD_PORTS {
                    shard += 1;
                    filled = 0;
                }
                filled += here;
                list.push(shard);
            }
            shards_of.insert(i, list);
        }
        // turn the ports' running numbers into bridge positions
        for (l, ends) in plan.links.iter().zip(ports.iter_mut()) {
            for (e, p) in [&l.a, &l.b].into_iter().enumerate() {
                if let Some(k) = ends[e] {
                    ends[e] = Some((k / PORTS).min(shards_of[&p.node].len() - 1));
                }
            }
        }
        Layout { shards_of, extra: shard, ports }
    }

    /// The shard holding end `end` (0: a, 1: b) of link `li`, if that end is a switch's port.
    pub(crate) fn port_shard(&self, plan: &Plan, li: usize, end: usize) -> Option<usize> {
        let node = if end == 0 { plan.links[li].a.node } else { plan.links[li].b.node };
        let j = self.ports.get(li)?[end]?;
        Some(self.shards_of[&node][j])
    }
}

/// The namespace holding end `end` of link `li`: its node's own, or for a switch's port the
/// fabric shard its bridge is in.
pub(crate) fn port_ns(plan: &Plan, layout: &Layout, exp: &str, li: usize, end: usize) -> String {
    match layout.port_shard(plan, li, end) {
        Some(k) => shard_ns(exp, k),
        None => {
            let l = &plan.links[li];
            plan.nodes[if end == 0 { l.a.node } else { l.b.node }].ns.clone()
        }
    }
}

/// Every switch's and hub's bridges (namespace slot and interface index), handing out their
/// ports in the order [`Layout`] assumes: link by link, end a before end b.
pub(crate) struct Bridges {
    of: HashMap<usize, Vec<(usize, u32)>>,
    used: HashMap<usize, usize>,
}

impl Bridges {
    /// Whether `node` is a switch or hub.
    pub(crate) fn is(&self, node: usize) -> bool {
        self.of.contains_key(&node)
    }

    /// The namespace slot and bridge the next port of `node` goes to (`None`: not a switch or hub).
    pub(crate) fn port(&mut self, node: usize) -> Option<(usize, u32)> {
        let bridges = self.of.get(&node)?;
        let k = self.used.entry(node).or_insert(0);
        let b = bridges[(*k / PORTS).min(bridges.len() - 1)];
        *k += 1;
        Some(b)
    }
}

/// Creates every switch's and hub's bridges, each in its shard; `slot[k]` is the index in
/// `spaces` of shard `k`.
pub(crate) fn build(plan: &Plan, exp: &str, layout: &Layout, spaces: &mut [NodeNs], slot: &[usize]) -> Result<Bridges, EmuError> {
    let mut of = HashMap::new();
    let mut trunks: Vec<(usize, u32, u32, String)> = Vec::new();
    let mut n_trunk = 0usize;
    for (i, n) in plan.nodes.iter().enumerate() {
        if !n.kind.is_l2() || n.away.is_some() {
            continue;
        }
        let hub = n.kind == Kind::Hub;
        let shards = &layout.shards_of[&i];
        let s0 = slot[shards[0]];
        let main = spaces[s0].index();
        spaces[s0].nl()?.bridge(&n.ns, main, hub)?;
        let mut list = vec![(s0, main)];
        for (k, &shard) in shards.iter().enumerate().skip(1) {
            let s = slot[shard];
            let sub = spaces[s].index();
            spaces[s].nl()?.bridge(&format!("{}x{k}", n.ns), sub, hub)?;
            // the trunk: one end on the switch's own bridge, the other on this one
            let (ta, tb) = (spaces[s0].index(), spaces[s].index());
            let name = format!("hd{exp}t{}", horde_topo::base36(n_trunk));
            n_trunk += 1;
            let peer = spaces[s].fd.as_raw_fd();
            spaces[s0].nl()?.veth(&format!("{name}a"), ta, Some(main), &format!("{name}b"), tb, peer)?;
            trunks.push((s, tb, sub, format!("{name}b")));
            list.push((s, sub));
        }
        of.insert(i, list);
    }
    for &k in slot {
        spaces[k].nl()?.flush()?;
    }
    for (s, idx, master, name) in &trunks {
        spaces[*s].nl()?.set_master(*idx, *master, name)?;
        spaces[*s].nl()?.up(*idx, name)?;
    }
    for &k in slot {
        spaces[k].nl()?.flush()?;
    }
    Ok(Bridges { of, used: HashMap::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn star(hosts: usize) -> Plan {
        let text = format!("name = \"s\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = {hosts}\n[[node]]\nname = \"sw\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"sw\"\nsubnet = \"10.0.0.0/16\"\n");
        horde_topo::plan(&text, "t.toml", "x1").expect("plans")
    }

    #[test]
    fn a_small_switch_stays_in_the_fabric() {
        let p = star(10);
        let l = Layout::of(&p);
        assert_eq!(l.extra, 0);
        for li in 0..p.links.len() {
            assert_eq!(port_ns(&p, &l, "x1", li, 1), "horde-x1");
            assert_eq!(port_ns(&p, &l, "x1", li, 0), p.nodes[p.links[li].a.node].ns);
        }
    }

    #[test]
    fn a_large_switch_is_spread_over_shards_of_bounded_size() {
        let p = star(10_000);
        let l = Layout::of(&p);
        let sw = p.node("sw").expect("switch");
        assert_eq!(l.shards_of[&sw].len(), 50);
        assert_eq!(l.extra, 50usize.div_ceil(SHARD_PORTS / PORTS) - 1);
        let mut per: HashMap<usize, usize> = HashMap::new();
        for li in 0..p.links.len() {
            *per.entry(l.port_shard(&p, li, 1).expect("a switch port")).or_default() += 1;
        }
        assert!(per.values().all(|&n| n <= SHARD_PORTS), "{per:?}");
        assert_eq!(per.values().sum::<usize>(), 10_000);
        // the same ports as Bridges hands out while building
        let mut b = Bridges { of: HashMap::from([(sw, l.shards_of[&sw].iter().map(|&s| (s, 0u32)).collect())]), used: HashMap::new() };
        for li in 0..p.links.len() {
            assert_eq!(b.port(sw).map(|x| x.0), l.port_shard(&p, li, 1));
        }
        assert_eq!(shard_ns("x1", 3), "horde-x1-.f3");
        assert_eq!(ns::experiment_of(&shard_ns("x1", 3)), Some("x1"));
    }
}
