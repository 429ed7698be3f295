//! Link failure and restore while an experiment runs (`horde emu link ID A B --down/--up`): both
//! ends of each link between A and B are set administratively down (a veth end set down takes
//! its peer's carrier with it, so a routing daemon on either side sees the link fail at once, as
//! with a pulled cable) or up again. The kernel drops the routes through an interface that goes
//! down; bringing it up puts the plan's static routes of the nodes at its ends back. Links on
//! every path (plain veth, kernel netem, the userspace link emulator) fail the same way: the
//! interfaces inside the nodes (or in the fabric, for a switch's port) are the ones that go down.

use horde_topo::Plan;

use crate::nl::Nl;
use crate::{load, ns, save_meta, EmuError};

/// The links of the plan between node (or group) `a` and node (or group) `b`, in plan order.
pub fn links_between(plan: &Plan, a: &str, b: &str) -> Result<Vec<usize>, EmuError> {
    let nodes = |name: &str| -> Result<Vec<usize>, EmuError> {
        plan.hosts_of(name)
            .map(|v| v.to_vec())
            .or_else(|| plan.node(name).map(|i| vec![i]))
            .ok_or_else(|| EmuError::Other(format!("no node `{name}` in experiment {} (see `horde emu ls {}`)", plan.exp, plan.exp)))
    };
    let (na, nb) = (nodes(a)?, nodes(b)?);
    let found: Vec<usize> = (0..plan.links.len())
        .filter(|&i| {
            let l = &plan.links[i];
            (na.contains(&l.a.node) && nb.contains(&l.b.node)) || (na.contains(&l.b.node) && nb.contains(&l.a.node))
        })
        .collect();
    if found.is_empty() {
        return Err(EmuError::Other(format!("no link between {a} and {b} in experiment {}", plan.exp)));
    }
    Ok(found)
}

/// Sets every link between `a` and `b` down (`up` false) or up; returns what changed, one line
/// per link. The experiment's record keeps which links are down (`emu ls` shows them).
pub fn set_link_state(exp: &str, a: &str, b: &str, up: bool) -> Result<Vec<String>, EmuError> {
    crate::require_root()?;
    let (mut meta, plan) = load(exp)?;
    let which = links_between(&plan, a, b)?;
    let mut out = Vec::new();
    let layout = crate::bridges::Layout::of(&plan);
    for &li in &which {
        let l = &plan.links[li];
        for (end, port) in [&l.a, &l.b].into_iter().enumerate() {
            let node = &plan.nodes[port.node];
            // across machines, a link to another machine has one end here (its tunnel
            // carries the other's frames): the far machine takes its own end down or up
            if node.away.is_some() {
                continue;
            }
            let nsname = crate::bridges::port_ns(&plan, &layout, exp, li, end);
            let fd = ns::open(&nsname)?;
            let ifname = port.ifname.clone();
            let routes: Vec<_> = if up && !node.kind.is_l2() { plan.routes.iter().filter(|r| r.node == port.node).cloned().collect() } else { Vec::new() };
            let what = format!("{}:{ifname}", node.name);
            ns::within(&fd, || -> Result<(), EmuError> {
                let c = std::ffi::CString::new(ifname.clone()).expect("no NUL in interface names");
                // SAFETY: a valid C string.
                let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
                if idx == 0 {
                    return Err(EmuError::io(&format!("finding {what}"), std::io::Error::last_os_error()));
                }
                let mut nl = Nl::open()?;
                nl.set_state(idx, up, &what)?;
                nl.flush()?;
                // The kernel removed the routes through it when it went down: the node's static
                // routes come back (replacing any still there). A route whose gateway is not
                // reachable yet (its own link still down) waits for that link.
                for r in &routes {
                    nl.route_with(r.dst.map(|d| (d.base, d.prefix)), r.via, true, &what)?;
                    if let Some(via) = plan.v6_of(r.via).filter(|_| plan.ipv6) {
                        nl.route6(r.dst.map(|d| (horde_topo::v6::subnet(&d), 64)), via, true, &what)?;
                    }
                    if let Err(e) = nl.flush() {
                        if !e.to_string().contains("unreachable") {
                            return Err(e);
                        }
                    }
                }
                Ok(())
            })??;
        }
        let (x, y) = (&plan.nodes[l.a.node].name, &plan.nodes[l.b.node].name);
        out.push(format!("{x} – {y}: {}", if up { "up" } else { "down" }));
        meta.down_links.retain(|&d| d != li);
        if !up {
            meta.down_links.push(li);
        }
    }
    meta.down_links.sort_unstable();
    save_meta(&meta)?;
    Ok(out)
}
