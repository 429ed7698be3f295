//! A topology as data and back: [`parse`] reads a file into its raw form (what the console's
//! editor edits), [`render`] writes the raw form as the canonical TOML the editor saves. For a
//! file `render` wrote, `render(parse(f)) == f` exactly; any other file comes back with the
//! same meaning in canonical layout (comments and order of keys are not kept).

use std::fmt::Write as _;

use crate::routing::{Protocol, Timers};
use crate::{RawImpair, RawLink, RawLoss, RawTopology, TopoError};

/// Reads a topology file's text into its raw form (syntax and field names only; [`crate::plan`]
/// checks the meaning).
pub fn parse(text: &str, file: &str) -> Result<RawTopology, TopoError> {
    toml::from_str(text).map_err(|e| TopoError { file: file.to_string(), field: "syntax".into(), msg: horde_model::files::toml_error(text, &e) })
}

/// A TOML string literal (quoted and escaped).
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn impair_lines(out: &mut String, i: &RawImpair) {
    let mut kv = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            let _ = writeln!(out, "{k} = {}", q(v));
        }
    };
    kv("rate", &i.rate);
    kv("delay", &i.delay);
    kv("jitter", &i.jitter);
    match &i.loss {
        None => {}
        Some(RawLoss::Percent(p)) => {
            let _ = writeln!(out, "loss = {}", q(p));
        }
        Some(RawLoss::GilbertElliott { p, r, loss_bad, loss_good }) => {
            let mut t = format!("loss = {{ p = {}, r = {}", q(p), q(r));
            if let Some(b) = loss_bad {
                let _ = write!(t, ", loss_bad = {}", q(b));
            }
            if let Some(g) = loss_good {
                let _ = write!(t, ", loss_good = {}", q(g));
            }
            let _ = writeln!(out, "{t} }}");
        }
    }
    let mut kv = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            let _ = writeln!(out, "{k} = {}", q(v));
        }
    };
    kv("duplicate", &i.duplicate);
    kv("corrupt", &i.corrupt);
    kv("queue", &i.queue);
    if let Some(r) = i.reorder {
        let _ = writeln!(out, "reorder = {r}");
    }
    if let Some(b) = &i.ber {
        let _ = writeln!(out, "ber = {}", q(b));
    }
    if let Some(p) = &i.reorder_prob {
        let _ = writeln!(out, "reorder_prob = {}", q(p));
    }
    if let Some(g) = i.reorder_gap {
        let _ = writeln!(out, "reorder_gap = {g}");
    }
    if let Some(t) = &i.trace {
        let _ = writeln!(out, "trace = {}", q(t));
    }
}

fn link_lines(out: &mut String, l: &RawLink) {
    let _ = writeln!(out, "\n[[link]]\na = {}\nb = {}", q(&l.a), q(&l.b));
    if l.live {
        out.push_str("live = true\n");
    }
    if let Some(s) = &l.subnet {
        let _ = writeln!(out, "subnet = {}", q(s));
    }
    if let Some(c) = l.cost {
        let _ = writeln!(out, "cost = {c}");
    }
    impair_lines(out, &l.both());
    for (dir, i) in [("ab", &l.ab), ("ba", &l.ba)] {
        if let Some(i) = i {
            let _ = writeln!(out, "[link.{dir}]");
            impair_lines(out, i);
        }
    }
}

/// The canonical TOML of a topology: `name`, then every `[[node]]`, then every `[[link]]`, keys
/// in a fixed order, strings quoted as TOML does.
pub fn render(t: &RawTopology) -> String {
    let mut out = format!("name = {}\n", q(&t.name));
    if let Some(v6) = t.ipv6 {
        let _ = writeln!(out, "ipv6 = {v6}");
    }
    for n in &t.node {
        let kind = match n.kind {
            crate::Kind::Host => "host",
            crate::Kind::Router => "router",
            crate::Kind::Switch => "switch",
            crate::Kind::Hub => "hub",
            crate::Kind::External => "external",
        };
        let _ = writeln!(out, "\n[[node]]\nname = {}\nkind = \"{kind}\"", q(&n.name));
        if let Some(c) = n.count {
            let _ = writeln!(out, "count = {c}");
        }
        if let Some(r) = n.routing {
            let name = match r {
                Protocol::Static => "static",
                Protocol::Ospf => "ospf",
                Protocol::Rip => "rip",
                Protocol::Bgp => "bgp",
            };
            let _ = writeln!(out, "routing = \"{name}\"");
        }
        if let Some(a) = &n.area {
            let _ = writeln!(out, "area = {}", q(a));
        }
        if let Some(a) = n.asn {
            let _ = writeln!(out, "asn = {a}");
        }
        if let Some(t) = n.timers {
            let _ = writeln!(out, "timers = \"{}\"", if t == Timers::Fast { "fast" } else { "default" });
        }
        if let Some(b) = n.bfd {
            let _ = writeln!(out, "bfd = {b}");
        }
        if let Some(i) = &n.interface {
            let _ = writeln!(out, "interface = {}", q(i));
        }
        if let Some(f) = n.force {
            let _ = writeln!(out, "force = {f}");
        }
        if let Some(m) = &n.machine {
            let _ = writeln!(out, "machine = {}", q(m));
        }
        if let Some(sv) = &n.services {
            let list: Vec<String> = sv.iter().map(|c| q(c)).collect();
            let _ = writeln!(out, "services = [{}]", list.join(", "));
        }
        if let Some(r) = &n.root {
            let _ = writeln!(out, "root = {}", q(r));
        }
        if let Some(ui) = &n.ui {
            let page = ui.page.as_deref().map(|p| format!(", page = {}", q(p))).unwrap_or_default();
            let _ = writeln!(out, "ui = {{ x = {}, y = {}{page} }}", ui.x, ui.y);
        }
    }
    for l in &t.link {
        link_lines(&mut out, l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_roots_and_services_survive_the_canonical_layout() {
        let text = "name = \"t\"\nipv6 = true\n[[node]]\nname = \"a\"\nkind = \"host\"\nroot = \"overlay\"\nservices = [\"python3 -m http.server 8080\", \"sh -c 'echo \\\"hi\\\"'\"]\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\n";
        let raw = parse(text, "t.toml").unwrap();
        let out = render(&raw);
        assert!(out.starts_with("name = \"t\"\nipv6 = true\n"), "{out}");
        assert_eq!(parse(&out, "t.toml").unwrap(), raw, "{out}");
        assert_eq!(render(&parse(&out, "t.toml").unwrap()), out);
    }
}
