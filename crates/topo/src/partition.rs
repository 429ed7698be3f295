//! Placing a topology's nodes on machines (issue 27's "one topology across machines"): every
//! node on one machine, links between machines cut (each to be carried by a tunnel), as few cut
//! links as the balance allows — what MaxiNet does with METIS, here by growing each machine's
//! part breadth-first from a seed and then moving single nodes across a cut while that removes
//! cut links and keeps the balance (Kernighan–Lin's single moves, Fiduccia–Mattheyses style).
//! Deterministic: the same plan and machines give the same placement. I/O-free.

use std::collections::VecDeque;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(text: &str) -> Plan {
        crate::plan(text, "t.toml", "t1").unwrap()
    }

    /// Two sites of three hosts behind a switch each, the switches joined by one link.
    const SITES: &str = r#"
name = "sites"
[[node]]
name = "a"
kind = "host"
count = 3
[[node]]
name = "b"
kind = "host"
count = 3
[[node]]
name = "swa"
kind = "switch"
[[node]]
name = "swb"
kind = "switch"
[[link]]
a = "a"
b = "swa"
[[link]]
a = "b"
b = "swb"
[[link]]
a = "swa"
b = "swb"
delay = "10ms"
"#;

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
