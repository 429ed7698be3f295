//! The fit as a service file, in `docs/services.md`'s schema, with the fit table as comments.

use std::fmt::Write;

use crate::apdu::{Direction, Transport};
use crate::families::Fit;
use crate::FitReport;

/// The service text for `report`, named `name` (a state or direction without a fit is left
/// out: the service then sends nothing there).
pub fn service_toml(report: &FitReport, name: &str, capture: &str) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "# Fitted by `horde fit` from {capture}: {} clients, {:.1} s,", report.clients, report.duration_s);
    let _ = writeln!(t, "# server {} ({}).", report.server.addr, report.server_chosen);
    let _ = writeln!(t, "# Per state and direction: the chosen family by AIC, its KS distance at n (5 % critical");
    let _ = writeln!(t, "# value in brackets) and the runner-up.");
    for d in &report.directions {
        for (what, f) in [("idt", &d.idt), ("size", &d.size)] {
            if let Some(f) = f {
                let _ = writeln!(t, "#   {} {} {what}: {}", d.state, dir(d.direction), table_row(f));
            }
        }
    }
    for n in &report.notes {
        let _ = writeln!(t, "# note: {n}");
    }
    let _ = writeln!(t, "name = {}", quote(name));
    let _ = writeln!(t, "description = {}", quote(&format!("fitted from the capture {capture}")));
    let _ = writeln!(t, "source = {}", quote(&format!("capture {capture}, fitted by horde fit")));
    let transport = match report.server.transport {
        Transport::Udp => "udp",
        Transport::Tcp => "tcp",
    };
    let _ = writeln!(t, "transport = \"{transport}\"");
    let _ = writeln!(t, "port = {}", report.server.addr.port());
    // the server's side over player counts: N is a variable, its default the capture's typical
    let holds = |f: &Option<crate::players::Formula>| f.as_ref().is_some_and(|f| f.holds);
    let typical = report.directions.iter().filter_map(|d| d.players.as_ref()).filter(|p| holds(&p.idt) || holds(&p.size)).map(|p| p.typical).max();
    let names: Vec<String> = report.states.iter().map(|s| quote(&s.name)).collect();
    let _ = writeln!(t, "states = [{}]", names.join(", "));
    let shares: Vec<String> = report.states.iter().map(|s| s.share.max(1e-6).to_string()).collect();
    let _ = writeln!(t, "first = [{}]   # each state's share of the labelled time", shares.join(", "));
    if typical.is_some() {
        let _ = writeln!(t, "players_variable = \"N\"   # a scenario's players online at the start, unless it sets N");
    }
    if let Some(n) = typical {
        let _ = writeln!(t, "\n[variables]\nN = {n}   # players on the server (the capture's median as the server sent)");
    }
    if report.states.len() > 1 {
        let _ = writeln!(t, "\n[transitions]   # moves seen between consecutive labelled ranges");
        for (i, s) in report.states.iter().enumerate() {
            let row: Vec<u64> = if s.transitions.iter().sum::<u64>() > 0 {
                s.transitions.clone()
            } else {
                // never left in the capture: stay, as the capture did
                (0..report.states.len()).map(|j| u64::from(i == j)).collect()
            };
            let row: Vec<String> = row.iter().map(u64::to_string).collect();
            let _ = writeln!(t, "{} = [{}]", key(&s.name), row.join(", "));
        }
    }
    for s in &report.states {
        let _ = writeln!(t, "\n[state.{}]", key(&s.name));
        if let Some(dwell) = &s.dwell {
            let _ = writeln!(t, "dwell = {}   # s, {}", quote(&dwell.dist), table_row(dwell));
        }
        for d in report.directions.iter().filter(|d| d.state == s.name) {
            let (Some(idt), Some(size)) = (&d.idt, &d.size) else {
                let _ = writeln!(t, "# {}: fewer than two APDUs in this state; left out", dir(d.direction));
                continue;
            };
            let over = d.players.as_ref();
            let law = |f: Option<&crate::players::Formula>| f.filter(|f| f.holds).map(|f| f.dist.clone());
            let idt_text = law(over.and_then(|p| p.idt.as_ref())).unwrap_or_else(|| idt_text(idt));
            let size_text = law(over.and_then(|p| p.size.as_ref())).unwrap_or_else(|| size.dist.clone());
            let vars: horde_model::dist::Vars = [("N".to_string(), f64::from(typical.unwrap_or(1)))].into();
            match horde_model::dist::Dist::parse_with(&idt_text, &vars).map_err(|e| e.to_string()).and_then(|d| d.check_advances()) {
                Ok(()) => {
                    let _ = writeln!(t, "{}.idt = {}", dir(d.direction), quote(&idt_text));
                    let _ = writeln!(t, "{}.size = {}", dir(d.direction), quote(&size_text));
                }
                Err(why) => {
                    let _ = writeln!(t, "# {}: the gaps {idt_text} cannot drive a sender ({why}); left out", dir(d.direction));
                }
            }
        }
    }
    t
}

/// An inter-departure time never below 0: a fitted normal or mixture is clamped at 0 (a
/// departure cannot precede the last).
fn idt_text(f: &Fit) -> String {
    match &f.model {
        Some(d) if d.cdf(0.0) > 0.0 || d.min.is_none() && matches!(d.family(), "normal" | "mix" | "extreme_largest") => d.clone().with_min(0.0).to_string(),
        _ => f.dist.clone(),
    }
}

fn table_row(f: &Fit) -> String {
    let runner = f.candidates.get(1).map_or(String::new(), |c| format!("; next {} (KS {:.4})", c.family, c.ks));
    format!("{} — KS {:.4} [{:.4}] at n = {}{runner}", f.dist, f.ks, f.ks_critical, f.n)
}

fn dir(d: Direction) -> &'static str {
    match d {
        Direction::Up => "up",
        Direction::Down => "down",
    }
}

fn quote(s: &str) -> String {
    let mut q = String::from('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if c.is_control() => q.push(' '),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// State names are letters, digits, '-' and '_' (the labels' rule): bare TOML keys.
fn key(s: &str) -> &str {
    s
}
