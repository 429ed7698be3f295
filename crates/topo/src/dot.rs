//! A plan as a Graphviz graph.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use horde_impair::LinkSpec;

use crate::{Kind, Plan};

/// Groups (`count = N` nodes) larger than this are drawn as one node, and listed as one row
/// by `horde emu ls`, unless every node is asked for.
pub const GROUP_ABOVE: usize = 16;

/// Every node's addresses, in one pass over the links.
pub fn addresses(plan: &Plan) -> Vec<Vec<Ipv4Addr>> {
    let mut out = vec![Vec::new(); plan.nodes.len()];
    for l in &plan.links {
        for p in [&l.a, &l.b] {
            if let Some(a) = p.addr {
                out[p.node].push(a);
            }
        }
    }
    out
}

/// For each node, the group it is drawn in when groups larger than `above` are collapsed:
/// `Some((name, members))` for a member of such a group, `None` otherwise.
pub fn collapsed(plan: &Plan, above: Option<usize>) -> Vec<Option<(&str, &[usize])>> {
    let mut out = vec![None; plan.nodes.len()];
    let Some(above) = above else { return out };
    for (name, members) in &plan.groups {
        if members.len() > above {
            for &m in members {
                out[m] = Some((name.as_str(), members.as_slice()));
            }
        }
    }
    out
}

/// The topology as a Graphviz graph (`dot -Tsvg`): hosts as boxes, routers as ellipses,
/// switches and hubs as diamonds, links labelled with their addresses and, for emulated
/// links, their settings per direction. Names are quoted, so any node name is safe. With
/// `group_above`, a group of more nodes than that is one node (drawn stacked, labelled with its
/// size and address range) and its links to the same neighbour one edge labelled with their
/// number — so 10,000 hosts on a switch are two nodes and an edge, not a 10,000-node row.
pub fn dot(plan: &Plan, describe: impl Fn(&LinkSpec) -> String, group_above: Option<usize>) -> String {
    use std::fmt::Write as _;
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let q = |s: &str| format!("\"{}\"", esc(s));
    // a label of several lines: each escaped, joined by Graphviz's line break `\n`
    let lines = |v: &[String]| format!("\"{}\"", v.iter().map(|s| esc(s)).collect::<Vec<_>>().join("\\n"));
    let mut o = format!(
        "graph {} {{\n  graph [overlap=false, splines=true];\n  node [fontname=\"sans-serif\", fontsize=11];\n  edge [fontname=\"sans-serif\", fontsize=9];\n",
        q(&plan.name)
    );
    let addrs = addresses(plan);
    let group = collapsed(plan, group_above);
    // a node's name in the graph: its own, or its collapsed group's (prefixed, so a group and
    // a node of the same name stay apart)
    let id = |i: usize| match group[i] {
        Some((g, _)) => format!("group:{g}"),
        None => plan.nodes[i].name.clone(),
    };
    for (i, n) in plan.nodes.iter().enumerate() {
        let shape = match n.kind {
            Kind::Host => "box",
            Kind::Router => "ellipse",
            Kind::External => "house",
            _ => "diamond",
        };
        match group[i] {
            Some((g, members)) if members[0] == i => {
                let (first, last) = (members[0], members[members.len() - 1]);
                let mut label = vec![format!("{g} ×{}", members.len()), format!("{} … {}", plan.nodes[first].name, plan.nodes[last].name)];
                if let (Some(a), Some(b)) = (addrs[first].first(), addrs[last].last()) {
                    label.push(format!("{a} … {b}"));
                }
                let _ = writeln!(o, "  {} [shape={shape}, peripheries=2, label={}];", q(&id(i)), lines(&label));
            }
            Some(_) => {}
            None => {
                let label: Vec<String> = std::iter::once(n.name.clone()).chain(addrs[i].iter().map(|a| a.to_string())).collect();
                let _ = writeln!(o, "  {} [shape={shape}, label={}];", q(&n.name), lines(&label));
            }
        }
    }
    // links, with those between the same two drawn nodes and the same settings as one edge
    type Edge = (String, String, Vec<String>, bool);
    let mut edges: BTreeMap<Edge, usize> = BTreeMap::new();
    let mut order: Vec<Edge> = Vec::new();
    for l in &plan.links {
        let (a, b) = (id(l.a.node), id(l.b.node));
        let (na, nb) = (&plan.nodes[l.a.node].name, &plan.nodes[l.b.node].name);
        let (sa, sb) = if group[l.a.node].is_some() || group[l.b.node].is_some() {
            (a.trim_start_matches("group:"), b.trim_start_matches("group:"))
        } else {
            (na.as_str(), nb.as_str())
        };
        let mut label = Vec::new();
        if l.ab != LinkSpec::default() || l.trace_ab.is_some() {
            label.push(format!("{sa}→{sb}: {}", describe(&l.ab)));
        }
        if l.ba != LinkSpec::default() || l.trace_ba.is_some() {
            label.push(format!("{sb}→{sa}: {}", describe(&l.ba)));
        }
        let key = (a, b, label, l.impaired());
        let n = edges.entry(key.clone()).or_insert(0);
        if *n == 0 {
            order.push(key);
        }
        *n += 1;
    }
    for key in order {
        let n = edges[&key];
        let (a, b, mut label, impaired) = key;
        if n > 1 {
            label.insert(0, format!("×{n}"));
        }
        let style = if impaired { ", style=bold, color=\"#d62728\"" } else { "" };
        let _ = writeln!(o, "  {} -- {} [label={}{style}];", q(&a), q(&b), lines(&label));
    }
    o.push_str("}\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn star(hosts: usize) -> Plan {
        let text = format!(
            "name = \"s\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = {hosts}\n[[node]]\nname = \"r\"\nkind = \"router\"\n[[node]]\nname = \"sw\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"sw\"\nsubnet = \"10.0.0.0/16\"\n[[link]]\na = \"r\"\nb = \"sw\"\ndelay = \"5ms\"\n"
        );
        crate::plan(&text, "t.toml", "x1").expect("plans")
    }

    #[test]
    fn a_large_group_is_one_node_and_its_links_one_edge() {
        let p = star(10_000);
        let g = dot(&p, |s| format!("{} ns", s.delay_ns), Some(GROUP_ABOVE));
        assert!(g.lines().count() < 12, "{g}");
        assert!(!g.contains("\\\\n"), "a line break is Graphviz's \\n, not an escaped backslash: {g}");
        assert!(g.contains("\"group:h\" [shape=box, peripheries=2, label=\"h ×10000\\nh1 … h10000\\n10.0.0.2 … "), "{g}");
        assert!(g.contains("\"group:h\" -- \"sw\" [label=\"×10000\"]"), "{g}");
        assert!(g.contains("\"r\" -- \"sw\" [label=\"r→sw: 5000000 ns\\nsw→r: 5000000 ns\", style=bold"), "{g}");
        // every node when asked
        let all = dot(&p, |s| format!("{} ns", s.delay_ns), None);
        assert_eq!(all.lines().filter(|l| l.contains("shape=box")).count(), 10_000);
        assert_eq!(all.lines().filter(|l| l.contains(" -- ")).count(), 10_001);
    }

    #[test]
    fn a_small_group_is_drawn_node_by_node() {
        let p = star(GROUP_ABOVE);
        let g = dot(&p, |_| String::new(), Some(GROUP_ABOVE));
        assert_eq!(g.lines().filter(|l| l.contains("shape=box")).count(), GROUP_ABOVE);
        assert!(!g.contains("group:"));
    }
}
