//! Switches and hubs as Linux bridges. A bridge holds at most 1,024 ports (the kernel's
//! `BR_MAX_PORTS`), so a switch with more links is built as a small tree: its own bridge and as
//! many more as it needs, each holding up to [`PORTS`] of its ports and joined to the first by
//! a veth trunk (no loop, so no STP is needed). To the nodes it is one switch.

use std::collections::HashMap;
use std::os::fd::AsRawFd;

use horde_topo::{Kind, Plan};

use crate::{EmuError, NodeNs};

/// Ports per bridge (the kernel's limit is 1,024: room is left for the trunks).
pub const PORTS: usize = 200;

/// Every switch's and hub's bridges (interface indexes in the fabric), handing out their ports.
pub(crate) struct Bridges {
    /// L2 node → its bridges (the first is the node's own).
    of: HashMap<usize, Vec<u32>>,
    /// L2 node → ports handed out so far.
    used: HashMap<usize, usize>,
}

impl Bridges {
    /// Whether `node` is a switch or hub.
    pub(crate) fn is(&self, node: usize) -> bool {
        self.of.contains_key(&node)
    }

    /// The bridge the next port of `node` goes to (`None`: not a switch or hub).
    pub(crate) fn port(&mut self, node: usize) -> Option<u32> {
        let bridges = self.of.get(&node)?;
        let k = self.used.entry(node).or_insert(0);
        let b = bridges[(*k / PORTS).min(bridges.len() - 1)];
        *k += 1;
        Some(b)
    }
}

/// Creates every switch's and hub's bridges in the fabric namespace.
pub(crate) fn build(plan: &Plan, exp: &str, fabric: &mut NodeNs) -> Result<Bridges, EmuError> {
    let mut ports: HashMap<usize, usize> = HashMap::new();
    for l in &plan.links {
        for p in [&l.a, &l.b] {
            if plan.nodes[p.node].kind.is_l2() {
                *ports.entry(p.node).or_insert(0) += 1;
            }
        }
    }
    let fd = fabric.fd.as_raw_fd();
    let mut of = HashMap::new();
    let mut trunks: Vec<(u32, u32, String)> = Vec::new();
    let mut n_trunk = 0usize;
    for (i, n) in plan.nodes.iter().enumerate() {
        if !n.kind.is_l2() {
            continue;
        }
        let hub = n.kind == Kind::Hub;
        let main = fabric.index();
        fabric.nl()?.bridge(&n.ns, main, hub)?;
        fabric.nl()?.no_ipv6(main, &n.ns)?;
        let mut list = vec![main];
        let extra = ports.get(&i).copied().unwrap_or(0).div_ceil(PORTS).saturating_sub(1);
        for k in 1..=extra {
            let sub = fabric.index();
            fabric.nl()?.bridge(&format!("{}x{k}", n.ns), sub, hub)?;
            fabric.nl()?.no_ipv6(sub, &n.ns)?;
            // the trunk: one end on the switch's own bridge, the other on this one
            let (ta, tb) = (fabric.index(), fabric.index());
            let name = format!("hd{exp}t{}", horde_topo::base36(n_trunk));
            n_trunk += 1;
            fabric.nl()?.veth(&format!("{name}a"), ta, Some(main), &format!("{name}b"), tb, fd)?;
            fabric.nl()?.no_ipv6(ta, &name)?;
            trunks.push((tb, sub, format!("{name}b")));
            list.push(sub);
        }
        of.insert(i, list);
    }
    fabric.nl()?.flush()?;
    for (idx, master, name) in &trunks {
        fabric.nl()?.set_master(*idx, *master, name)?;
        fabric.nl()?.no_ipv6(*idx, name)?;
        fabric.nl()?.up(*idx, name)?;
    }
    fabric.nl()?.flush()?;
    Ok(Bridges { of, used: HashMap::new() })
}
