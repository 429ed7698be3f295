//! A plan as a Graphviz graph.

use horde_impair::LinkSpec;

use crate::{Kind, Plan};

/// The topology as a Graphviz graph (`dot -Tsvg`): hosts as boxes, routers as ellipses,
/// switches and hubs as diamonds, links labelled with their addresses and, for emulated
/// links, their settings per direction. Names are quoted, so any node name is safe.
pub fn dot(plan: &Plan, describe: impl Fn(&LinkSpec) -> String) -> String {
    use std::fmt::Write as _;
    let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut o = format!(
        "graph {} {{\n  graph [overlap=false, splines=true];\n  node [fontname=\"sans-serif\", fontsize=11];\n  edge [fontname=\"sans-serif\", fontsize=9];\n",
        q(&plan.name)
    );
    for (i, n) in plan.nodes.iter().enumerate() {
        let shape = match n.kind {
            Kind::Host => "box",
            Kind::Router => "ellipse",
            Kind::External => "house",
            _ => "diamond",
        };
        let addrs: Vec<String> = plan.addrs(i).iter().map(|a| a.to_string()).collect();
        let label = if addrs.is_empty() { n.name.clone() } else { format!("{}\\n{}", n.name, addrs.join("\\n")) };
        let _ = writeln!(o, "  {} [shape={shape}, label={}];", q(&n.name), q(&label));
    }
    for l in &plan.links {
        let (a, b) = (&plan.nodes[l.a.node].name, &plan.nodes[l.b.node].name);
        let mut label = Vec::new();
        if l.ab != LinkSpec::default() || l.trace_ab.is_some() {
            label.push(format!("{a}→{b}: {}", describe(&l.ab)));
        }
        if l.ba != LinkSpec::default() || l.trace_ba.is_some() {
            label.push(format!("{b}→{a}: {}", describe(&l.ba)));
        }
        let style = if l.impaired() { ", style=bold, color=\"#d62728\"" } else { "" };
        let _ = writeln!(o, "  {} -- {} [label={}{style}];", q(a), q(b), q(&label.join("\\n")));
    }
    o.push_str("}\n");
    o
}
