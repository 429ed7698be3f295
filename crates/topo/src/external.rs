//! External nodes: an interface of the machine Horde runs on, joined to the emulated network so
//! real equipment or another machine takes part (IMUNES's physical-interface node).
//!
//! ```toml
//! [[node]]
//! name = "lab"
//! kind = "external"
//! interface = "enp3s0"   # moved into the experiment while it runs, given back on down
//! force = true           # only if it has addresses or routes the host uses
//! ```
//!
//! An external node is a layer-2 node, like a hub with one real port: its links join the
//! interface's segment, and what is beyond the interface is on that segment (it takes an
//! address of the segment's subnet that no emulated node has).

use serde::{Deserialize, Serialize};

use crate::Kind;

/// A planned external node: which interface of the machine, and whether it may be taken while
/// the machine uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalPlan {
    pub interface: String,
    pub force: bool,
}

/// Checks an external node's fields; `None` for every other kind (which may not have them).
pub fn resolve(kind: Kind, interface: Option<&str>, force: Option<bool>, count: Option<u32>) -> Result<Option<ExternalPlan>, (&'static str, String)> {
    if kind != Kind::External {
        if interface.is_some() {
            return Err(("interface", "only an external node (kind = \"external\") takes an interface of this machine".into()));
        }
        if force.is_some() {
            return Err(("force", "only an external node takes `force`".into()));
        }
        return Ok(None);
    }
    if count.is_some_and(|c| c != 1) {
        return Err(("count", "an external node is one interface of this machine: give each its own [[node]]".into()));
    }
    let Some(name) = interface else {
        return Err((
            "interface",
            "an external node needs `interface = \"NAME\"`: the interface of this machine to join to the topology (see `ip link`)".into(),
        ));
    };
    check_ifname(name).map_err(|m| ("interface", m))?;
    Ok(Some(ExternalPlan { interface: name.to_string(), force: force.unwrap_or(false) }))
}

/// An interface may be taken by one external node only.
pub(crate) fn check_unique(nodes: &[crate::PlannedNode], new: Option<&ExternalPlan>) -> Result<(), String> {
    let Some(x) = new else { return Ok(()) };
    match nodes.iter().find(|o| o.external.as_ref().is_some_and(|e| e.interface == x.interface)) {
        Some(o) => Err(format!("node `{}` takes this interface already", o.name)),
        None => Ok(()),
    }
}

/// A Linux interface name: 1..=15 bytes, none of `/`, `:`, whitespace, not `.` or `..`.
pub fn check_ifname(name: &str) -> Result<(), String> {
    let ok = !name.is_empty() && name.len() <= 15 && name != "." && name != ".." && name.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b':');
    if !ok {
        return Err(format!("`{name}` is not an interface name (1 to 15 characters, no `/`, `:` or spaces)"));
    }
    if name == "lo" {
        return Err("`lo` is the machine's loopback: it cannot leave the machine's namespace".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        assert_eq!(resolve(Kind::External, Some("eth1"), None, None).unwrap().unwrap(), ExternalPlan { interface: "eth1".into(), force: false });
        assert_eq!(resolve(Kind::Host, None, None, Some(3)).unwrap(), None);
        for (kind, ifname, force, count, field) in [
            (Kind::External, None, None, None, "interface"),
            (Kind::External, Some("a/b"), None, None, "interface"),
            (Kind::External, Some("lo"), None, None, "interface"),
            (Kind::External, Some("abcdefghijklmnop"), None, None, "interface"),
            (Kind::External, Some("eth1"), None, Some(2), "count"),
            (Kind::Host, Some("eth1"), None, None, "interface"),
            (Kind::Switch, None, Some(true), None, "force"),
        ] {
            assert_eq!(resolve(kind, ifname, force, count).unwrap_err().0, field, "{kind:?} {ifname:?}");
        }
    }
}
