//! Placing a topology's nodes on machines (issue 27's "one topology across machines"): every
//! node on one machine, links between machines cut (each to be carried by a tunnel), as few cut
//! links as the balance allows — what MaxiNet does with METIS, here by growing each machine's
//! part breadth-first from a seed and then moving single nodes across a cut while that removes
//! cut links and keeps the balance (Kernighan–Lin's single moves, Fiduccia–Mattheyses style).
//! Deterministic: the same plan and machines give the same placement. I/O-free.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use horde_impair::LinkSpec;

use crate::Plan;

/// Where every node goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Machine of each node (plan order).
    pub machine_of: Vec<usize>,
    /// Links (plan order) whose ends are on different machines.
    pub cut: Vec<usize>,
    /// Nodes per machine.
    pub load: Vec<usize>,
}

/// Why a placement cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    #[error("no machine to place nodes on")]
    NoMachines,
    #[error("node {node} is placed on machine {machine}, but there are only {machines}")]
    NoSuchMachine { node: String, machine: usize, machines: usize },
}

/// At most this many refinement passes (each pass moves every node at most once).
const PASSES: usize = 16;

/// Places the nodes of `plan` on `machines` machines. `fixed[i]`, when given, is node `i`'s
/// machine (the topology's placement); the rest are placed so that each machine holds at most
/// `ceil(nodes / machines)` nodes plus one (the fixed ones may exceed that: the user's word is
/// kept) and few links are cut.
pub fn place(plan: &Plan, machines: usize, fixed: &[Option<usize>]) -> Result<Placement, PlaceError> {
    if machines == 0 {
        return Err(PlaceError::NoMachines);
    }
    let n = plan.nodes.len();
    for (i, f) in fixed.iter().enumerate().take(n) {
        if let Some(m) = *f {
            if m >= machines {
                return Err(PlaceError::NoSuchMachine { node: plan.nodes[i].name.clone(), machine: m, machines });
            }
        }
    }
    // neighbours, with a link counted once per link (parallel links weigh more)
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for l in &plan.links {
        if l.a.node != l.b.node && l.a.node < n && l.b.node < n {
            adj[l.a.node].push(l.b.node);
            adj[l.b.node].push(l.a.node);
        }
    }
    let cap = n.div_ceil(machines) + 1;
    let mut machine_of: Vec<Option<usize>> = (0..n).map(|i| fixed.get(i).copied().flatten()).collect();
    let mut load = vec![0usize; machines];
    for m in machine_of.iter().flatten() {
        load[*m] += 1;
    }
    // grow each machine's part breadth-first, from its fixed nodes or else from the free node
    // with the most links (ties: plan order)
    let target = n.div_ceil(machines);
    #[allow(clippy::needless_range_loop)] // `m` is a machine: it indexes loads and names parts
    for m in 0..machines {
        let mut queue: VecDeque<usize> = (0..n).filter(|&i| machine_of[i] == Some(m)).collect();
        if queue.is_empty() {
            if let Some(seed) = (0..n).filter(|&i| machine_of[i].is_none()).max_by_key(|&i| (adj[i].len(), std::cmp::Reverse(i))) {
                machine_of[seed] = Some(m);
                load[m] += 1;
                queue.push_back(seed);
            }
        }
        while let Some(v) = queue.pop_front() {
            for &w in &adj[v] {
                if load[m] >= target {
                    break;
                }
                if machine_of[w].is_none() {
                    machine_of[w] = Some(m);
                    load[m] += 1;
                    queue.push_back(w);
                }
            }
            if load[m] >= target {
                break;
            }
        }
    }
    // what is left (unconnected, or beyond the targets): the least loaded machine
    for slot in machine_of.iter_mut().filter(|s| s.is_none()) {
        let m = (0..machines).min_by_key(|&m| (load[m], m)).unwrap_or(0);
        *slot = Some(m);
        load[m] += 1;
    }
    let mut at: Vec<usize> = machine_of.into_iter().map(|m| m.unwrap_or(0)).collect();
    refine(&adj, &mut at, &mut load, cap, fixed);
    let cut = plan.links.iter().enumerate().filter(|(_, l)| at.get(l.a.node) != at.get(l.b.node)).map(|(i, _)| i).collect();
    Ok(Placement { machine_of: at, cut, load })
}

/// Moves single free nodes to the machine most of their neighbours are on while that cuts
/// fewer links and keeps every machine within `cap`.
fn refine(adj: &[Vec<usize>], at: &mut [usize], load: &mut [usize], cap: usize, fixed: &[Option<usize>]) {
    let machines = load.len();
    for _ in 0..PASSES {
        let mut moved = false;
        for v in 0..at.len() {
            if fixed.get(v).copied().flatten().is_some() {
                continue;
            }
            let mut links_to = vec![0usize; machines];
            for &w in &adj[v] {
                links_to[at[w]] += 1;
            }
            let here = at[v];
            let best = (0..machines).filter(|&m| m != here && load[m] < cap).max_by_key(|&m| (links_to[m], std::cmp::Reverse(m)));
            if let Some(m) = best {
                if links_to[m] > links_to[here] {
                    load[here] -= 1;
                    load[m] += 1;
                    at[v] = m;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
}

/// The far end of a link between two machines' parts: a VXLAN tunnel between the machines.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunnel {
    /// VXLAN network identifier, the same at both ends (one per cut link).
    pub vni: u32,
    /// This machine's address and the far one's: the tunnel's UDP endpoints.
    pub local: Ipv4Addr,
    pub remote: Ipv4Addr,
    /// UDP port of the tunnel at both machines.
    pub port: u16,
    /// Which end of the link is on this machine: 0 its `a`, 1 its `b`.
    pub here: u8,
    /// The machine the far end is on.
    pub peer: String,
}

/// One machine's part of a placed topology.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Part {
    /// The machine of every node (plan order), as [`place`] made it.
    pub machine_of: Vec<usize>,
    /// This machine.
    pub me: usize,
    /// Every machine's name and tunnel address.
    pub names: Vec<String>,
    pub addrs: Vec<Ipv4Addr>,
    /// The first cut link's VXLAN id; the k-th cut link (plan order) has `vni_base + k`.
    pub vni_base: u32,
    pub port: u16,
}

/// The largest VXLAN id (24 bits).
pub const VNI_MAX: u32 = (1 << 24) - 1;

/// Makes `plan` this machine's part of the topology: nodes on other machines are marked
/// `away` (nothing is built for them), and each link between this machine and another gets
/// its tunnel and goes through the link emulator, which impairs only the direction that leaves
/// this machine (the far machine's emulator impairs the other: each direction once). Links
/// between two other machines stay in the plan (addresses, routes) and are not built here.
/// Returns how many tunnels this part has.
pub fn split(plan: &mut Plan, part: &Part) -> Result<usize, String> {
    let machines = part.names.len();
    if machines == 0 || part.addrs.len() != machines || part.me >= machines {
        return Err(format!(
            "a part needs one name and one address per machine and a machine of its own (got {machines} names, {} addresses, machine {})",
            part.addrs.len(),
            part.me
        ));
    }
    if part.machine_of.len() != plan.nodes.len() {
        return Err(format!("the placement has {} nodes, the topology {}: both sides must read the same topology", part.machine_of.len(), plan.nodes.len()));
    }
    if let Some(m) = part.machine_of.iter().find(|&&m| m >= machines) {
        return Err(format!("the placement names machine {m} of {machines}"));
    }
    let cut = plan.links.iter().filter(|l| part.machine_of[l.a.node] != part.machine_of[l.b.node]).count() as u64;
    if part.vni_base == 0 || part.vni_base as u64 + cut > VNI_MAX as u64 + 1 {
        return Err(format!("VXLAN ids {}.. for {cut} cut links do not fit in 1..={VNI_MAX}", part.vni_base));
    }
    for (i, n) in plan.nodes.iter_mut().enumerate() {
        let m = part.machine_of[i];
        n.away = (m != part.me).then(|| part.names[m].clone());
    }
    let (mut k, mut here_count) = (0u32, 0usize);
    for l in plan.links.iter_mut() {
        let (ma, mb) = (part.machine_of[l.a.node], part.machine_of[l.b.node]);
        if ma == mb {
            continue;
        }
        let vni = part.vni_base + k;
        k += 1;
        let (here, far) = if ma == part.me {
            (0u8, mb)
        } else if mb == part.me {
            (1u8, ma)
        } else {
            continue;
        };
        // what arrives through the tunnel was impaired on the far machine
        if here == 0 {
            l.ba = LinkSpec::default();
            l.trace_ba = None;
        } else {
            l.ab = LinkSpec::default();
            l.trace_ab = None;
        }
        l.live = true;
        l.tunnel = Some(Tunnel { vni, local: part.addrs[part.me], remote: part.addrs[far], port: part.port, here, peer: part.names[far].clone() });
        here_count += 1;
    }
    Ok(here_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(text: &str) -> Plan {
        crate::plan(text, "t.toml", "t1").unwrap()
    }

    /// Two sites of three hosts behind a switch each, the switches joined by one link.
    const SITES: &str = include_str!("../../../examples/topologies/two-sites.toml");

    #[test]
    fn each_part_builds_its_own_nodes_and_impairs_only_what_leaves_it() {
        let p = topo(SITES);
        let pl = place(&p, 2, &[]).unwrap();
        let part = |me| Part {
            machine_of: pl.machine_of.clone(),
            me,
            names: vec!["m0".into(), "m1".into()],
            addrs: vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)],
            vni_base: 100,
            port: 4789,
        };
        let li = pl.cut[0];
        let mut parts = Vec::new();
        for me in 0..2 {
            let mut q = p.clone();
            assert_eq!(split(&mut q, &part(me)).unwrap(), 1);
            let here = q.nodes.iter().filter(|n| n.away.is_none()).count();
            assert_eq!(here, pl.load[me]);
            let t = q.links[li].tunnel.clone().unwrap();
            assert_eq!((t.vni, t.port), (100, 4789));
            assert_eq!(t.local, part(me).addrs[me]);
            assert_eq!(t.remote, part(me).addrs[1 - me]);
            assert!(q.links.iter().enumerate().all(|(i, l)| (i == li) == l.tunnel.is_some()), "only the cut link is tunnelled");
            parts.push(q);
        }
        // each direction impaired on exactly one machine: where it leaves
        let l = &p.links[li];
        let a_on = pl.machine_of[l.a.node];
        assert_eq!(parts[a_on].links[li].ab, l.ab);
        assert_eq!(parts[a_on].links[li].ba, LinkSpec::default());
        assert_eq!(parts[1 - a_on].links[li].ba, l.ba);
        assert_eq!(parts[1 - a_on].links[li].ab, LinkSpec::default());
        // addresses are the whole topology's on both
        assert_eq!(parts[0].segments, parts[1].segments);
        let mut bad = part(0);
        bad.machine_of.pop();
        assert!(split(&mut p.clone(), &bad).unwrap_err().contains("same topology"));
        let mut bad = part(0);
        bad.vni_base = VNI_MAX;
        assert!(split(&mut p.clone(), &bad).is_ok(), "one cut link fits at the last id");
        bad.vni_base = 0;
        assert!(split(&mut p.clone(), &bad).is_err());
        let mut bad = part(2);
        bad.me = 2;
        assert!(split(&mut p.clone(), &bad).is_err());
    }

    #[test]
    fn two_sites_split_at_the_link_between_them() {
        let p = topo(SITES);
        let pl = place(&p, 2, &[]).unwrap();
        assert_eq!(pl.cut.len(), 1, "{pl:?}");
        assert_eq!(pl.load, vec![4, 4]);
        let cut = &p.links[pl.cut[0]];
        let names = [&p.nodes[cut.a.node].name, &p.nodes[cut.b.node].name];
        assert!(names.contains(&&"swa".to_string()) && names.contains(&&"swb".to_string()), "{names:?}");
        assert_eq!(place(&p, 2, &[]).unwrap(), pl, "deterministic");
    }

    #[test]
    fn a_users_placement_is_kept_and_one_machine_takes_everything() {
        let p = topo(SITES);
        let mut fixed = vec![None; p.nodes.len()];
        let a1 = p.node("a1").unwrap();
        fixed[a1] = Some(1);
        let pl = place(&p, 2, &fixed).unwrap();
        assert_eq!(pl.machine_of[a1], 1);
        let one = place(&p, 1, &[]).unwrap();
        assert!(one.cut.is_empty() && one.load == vec![p.nodes.len()]);
        assert!(place(&p, 0, &[]).is_err());
        fixed[a1] = Some(5);
        assert!(matches!(place(&p, 2, &fixed), Err(PlaceError::NoSuchMachine { .. })));
    }

    #[test]
    fn a_ring_splits_in_two_arcs() {
        let mut t = String::from("name = \"ring\"\n");
        for i in 0..8 {
            t.push_str(&format!("[[node]]\nname = \"r{i}\"\nkind = \"router\"\n"));
        }
        for i in 0..8 {
            t.push_str(&format!("[[link]]\na = \"r{i}\"\nb = \"r{}\"\n", (i + 1) % 8));
        }
        let p = topo(&t);
        let pl = place(&p, 2, &[]).unwrap();
        assert_eq!(pl.cut.len(), 2, "{pl:?}");
        assert_eq!(pl.load, vec![4, 4]);
        let four = place(&p, 4, &[]).unwrap();
        assert_eq!(four.cut.len(), 4, "{four:?}");
        assert!(four.load.iter().all(|&l| l == 2));
    }
}
