//! One call to change a link of a running experiment ([`apply`]): its impairments, or its state
//! (down as a pulled cable, up again). It picks the path itself — the kernel's netem qdisc
//! replaced in place, or the userspace link emulator's control socket — so the CLI, the
//! console, a run's commands and agents all change a link the same way, with a typed
//! [`LinkOp`], and nobody spawns `horde emu link`.

use horde_topo::LinkChange;
use serde::{Deserialize, Serialize};

use crate::fwd::{self, LinkReport, Request};
use crate::EmuError;

pub use crate::fwd::LinkDir;

/// What is asked of a link: validated where it came in (a flag, a console form, a command, a
/// timeline entry), typed from there on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum LinkOp {
    /// Nothing changes: the link's counters (links through the link emulator only).
    Show,
    /// Impairments changed; settings left out keep their values (`clear`: from none instead).
    Set { dir: LinkDir, change: Box<LinkChange>, clear: bool },
    /// Both ends set administratively down (routing daemons see the link fail at once).
    Down,
    /// Both ends up again, with the static routes through them.
    Up,
}

impl LinkOp {
    /// Whether the link changes (anything but [`LinkOp::Show`]).
    pub fn changes(&self) -> bool {
        !matches!(self, LinkOp::Show)
    }
}

/// What a link is now: one line per changed direction or link, and (through the link emulator)
/// its settings and counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Applied {
    pub lines: Vec<String>,
    pub links: Vec<LinkReport>,
}

/// Applies `op` to the link(s) between `a` and `b` of experiment `exp` on this machine.
pub fn apply(exp: &str, a: &str, b: &str, op: &LinkOp) -> Result<Applied, EmuError> {
    horde_topo::check_exp_id(exp).map_err(EmuError::BadId)?;
    let (set, dir, clear) = match op {
        LinkOp::Down | LinkOp::Up => {
            let lines = crate::state::set_link_state(exp, a, b, *op == LinkOp::Up)?;
            return Ok(Applied { lines, links: Vec::new() });
        }
        LinkOp::Show => (None, LinkDir::Both, false),
        LinkOp::Set { dir, change, clear } => (Some(change.as_ref()), *dir, *clear),
    };
    if let Some(change) = set {
        // A link on the kernel path: its netem qdiscs are replaced in place (no daemon needed).
        if let Some(changed) = crate::change_netem(exp, a, b, dir, change, clear)? {
            let lines = changed.into_iter().map(|(from, to, spec)| format!("{from} → {to}: {spec} (kernel netem, replaced in place)")).collect();
            return Ok(Applied { lines, links: Vec::new() });
        }
    }
    let (meta, _) = crate::load(exp)?;
    let no_link = || {
        EmuError::Other(format!(
            "no emulated link between {a} and {b} in {exp}: only impaired links and links with `live = true` can be changed or counted; bring the experiment up with `horde emu up FILE --live` to make every link changeable"
        ))
    };
    if meta.daemon_pid.is_none() {
        return Err(no_link());
    }
    let req = match set {
        None => Request::Stats,
        Some(change) => Request::Set { a: a.into(), b: b.into(), dir, change: Box::new(change.clone()), clear },
    };
    let r = fwd::request(exp, &req)?;
    if !r.ok {
        return Err(EmuError::Other(r.error.unwrap_or_else(|| "the link emulator refused the change".into())));
    }
    let links: Vec<LinkReport> = r.links.into_iter().filter(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a)).collect();
    if links.is_empty() {
        return Err(no_link());
    }
    let lines =
        if set.is_some() { links.iter().map(|l| format!("{}→{}: {}; {}→{}: {}", l.a, l.b, l.ab.spec, l.b, l.a, l.ba.spec)).collect() } else { Vec::new() };
    Ok(Applied { lines, links })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_follow_the_order_the_user_named_the_ends() {
        assert_eq!(LinkDir::Both.plan_dirs(false), [0, 1]);
        assert_eq!(LinkDir::Ab.plan_dirs(false), [0]);
        assert_eq!(LinkDir::Ab.plan_dirs(true), [1]);
        assert_eq!(LinkDir::Ba.plan_dirs(true), [0]);
        for d in [LinkDir::Ab, LinkDir::Ba, LinkDir::Both] {
            for swapped in [false, true] {
                assert_eq!(LinkDir::of_plan_dirs(&d.plan_dirs(swapped), swapped), d);
            }
        }
    }

    #[test]
    fn an_op_travels_as_json_and_a_bad_direction_is_refused() {
        let op = LinkOp::Set { dir: LinkDir::Ba, change: Box::new(LinkChange { delay_ns: Some(5_000_000), ..Default::default() }), clear: false };
        let back: LinkOp = serde_json::from_str(&serde_json::to_string(&op).unwrap()).unwrap();
        assert_eq!(back, op);
        assert_eq!(serde_json::to_string(&LinkOp::Down).unwrap(), r#"{"op":"down"}"#);
        assert!(serde_json::from_str::<LinkOp>(r#"{"op":"set","dir":"sideways","change":{},"clear":false}"#).is_err());
    }

    #[test]
    fn a_bad_experiment_id_is_refused_before_anything_is_read() {
        let e = apply("../x", "a", "b", &LinkOp::Show).unwrap_err();
        assert!(matches!(e, EmuError::BadId(_)), "{e}");
    }
}
