//! Which links a packet crosses between two nodes: along fewest links, through switches, hubs
//! and routers alike. The planner's routes take fewest router hops (static) or the routing
//! protocol's costs; on the trees and single-path networks emulated topologies mostly are, the
//! path is the same, and where it is not this is the shortest one — good for a note before a
//! run (the model's load against a link's rate), never for forwarding.

use std::collections::VecDeque;

use crate::Plan;

/// A link crossed on a path: its index in [`Plan::links`], and whether it is crossed from its
/// `a` end to its `b` end (then its `ab` impairments apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossing {
    pub link: usize,
    pub forward: bool,
}

impl Plan {
    /// The links from node `from` to node `to` along fewest links, in order; empty when they
    /// are the same node, `None` when nothing connects them.
    pub fn path_links(&self, from: usize, to: usize) -> Option<Vec<Crossing>> {
        let n = self.nodes.len();
        if from >= n || to >= n {
            return None;
        }
        let mut by_node: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, l) in self.links.iter().enumerate() {
            by_node[l.a.node].push(i);
            by_node[l.b.node].push(i);
        }
        // breadth first from `from`, each node reached once, by the crossing that reached it
        let mut came: Vec<Option<Crossing>> = vec![None; n];
        let mut seen = vec![false; n];
        seen[from] = true;
        let mut q = VecDeque::from([from]);
        while let Some(x) = q.pop_front() {
            if x == to {
                break;
            }
            for &li in &by_node[x] {
                let l = &self.links[li];
                let (next, forward) = if l.a.node == x { (l.b.node, true) } else { (l.a.node, false) };
                if !seen[next] {
                    seen[next] = true;
                    came[next] = Some(Crossing { link: li, forward });
                    q.push_back(next);
                }
            }
        }
        if !seen[to] {
            return None;
        }
        let mut path = Vec::new();
        let mut at = to;
        while at != from {
            let c = came[at]?;
            path.push(c);
            let l = &self.links[c.link];
            at = if c.forward { l.a.node } else { l.b.node };
        }
        path.reverse();
        Some(path)
    }
}
