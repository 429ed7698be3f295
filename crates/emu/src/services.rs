//! A topology's services (`services = [...]` on a host or router, [`horde_topo::RawNode`]):
//! started in their nodes as the topology comes up, each as `horde emu exec --detach` starts a
//! command (in a PID namespace of its own, not tied to `up`), its output in the node's
//! directory as `service-K.out` (K from 1, in the file's order); `down` ends them with
//! everything else in the experiment's namespaces. A service that has ended within
//! [`SETTLE`] of its start fails the `up`, naming it and quoting its output's last lines; one
//! that ends later is started again by its init (`horde_sys::pidns::Restart::Always`).

use std::time::{Duration, Instant};

use horde_topo::Plan;

use crate::EmuError;

/// How long a service must keep running after its start for `up` to count it as started.
pub const SETTLE: Duration = Duration::from_millis(500);

/// Starts every service of this machine's nodes; returns how many it started.
pub fn start(exp: &str, plan: &Plan) -> Result<usize, EmuError> {
    let mut started = Vec::new();
    for n in plan.nodes.iter().filter(|n| n.away.is_none()) {
        for (k, argv) in n.services.iter().enumerate() {
            let (p, out) = crate::exec::start_service(exp, &n.name, argv, &format!("service-{}.out", k + 1))?;
            started.push((n.name.as_str(), argv, p, out));
        }
    }
    if started.is_empty() {
        return Ok(0);
    }
    let until = Instant::now() + SETTLE;
    while Instant::now() < until {
        for (node, argv, p, out) in started.iter_mut() {
            if let Ok(Some(status)) = p.child().try_wait() {
                let text = std::fs::read(&*out).unwrap_or_default();
                let tail: Vec<&str> = std::str::from_utf8(&text[text.len().saturating_sub(2048)..]).unwrap_or("").lines().rev().take(5).collect();
                let said = tail.into_iter().rev().collect::<Vec<_>>().join(" | ");
                return Err(EmuError::Other(format!(
                    "service `{}` on {node} ended at once ({status}); its output ({}): {}",
                    argv.join(" "),
                    out.display(),
                    if said.is_empty() { "(none)" } else { &said }
                )));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(started.len())
}
