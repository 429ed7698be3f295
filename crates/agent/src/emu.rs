//! One emulated network across machines, from the controller (`horde emu … --agents`): the
//! topology is placed on the agents (a node's `machine`, else a partition that keeps cut links
//! few: [`horde_topo::partition::place`]), each agent builds its part with a VXLAN tunnel per
//! link to another machine, and `down`, `ls` and `exec` reach every part through the agents.
//! The controller keeps no state: each agent records the parts it built.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context as _};
use horde_topo::partition::{self, Part, Placement};

use crate::fleet::{AgentSpec, Event, Fleet};
use crate::msg::{EmuReply, EmuRequest};

/// The VXLAN port the tunnels use at every machine (IANA's).
pub const VXLAN_PORT: u16 = 4789;
/// How long an agent may take to build its part, and to answer anything else.
const UP_WITHIN: Duration = Duration::from_secs(300);
const OTHER_WITHIN: Duration = Duration::from_secs(120);
/// How long taking a failed `up`'s parts down again may take, Ctrl-C or not.
const UNDO_WITHIN: Duration = Duration::from_secs(30);

/// The agents to use and how to reach them.
pub struct Agents<'a> {
    pub agents: &'a [AgentSpec],
    pub credentials: &'a Path,
    pub stop: &'a AtomicBool,
    pub note: &'a (dyn Fn(&str) + Sync),
}

/// One machine's part as its agent built it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MachinePart {
    /// The agent's index in the list `up` was given.
    #[serde(skip)]
    pub index: usize,
    pub agent: String,
    pub addr: Ipv4Addr,
    /// The part's experiment id on that machine.
    pub local: String,
    pub nodes: Vec<String>,
    pub tunnels: usize,
    pub seconds: f64,
}

/// What `up` built.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Built {
    pub exp: String,
    pub parts: Vec<MachinePart>,
    /// Links between machines: (node, node, from machine, to machine).
    pub cut: Vec<(String, String, String, String)>,
}

fn connect<'a>(a: &Agents<'a>, ev: &'a (dyn Fn(&Event) + Sync)) -> anyhow::Result<Fleet<'a>> {
    let addrs: Vec<std::net::SocketAddr> = a.agents.iter().map(|s| s.addr).collect();
    Fleet::connect(&addrs, a.credentials, Duration::from_secs(10), ev, a.stop)
}

/// A fresh experiment id for a network across machines: 5 base-36 characters.
pub fn new_id() -> String {
    horde_emu::new_id()[..5].to_string()
}

/// The first VXLAN id of experiment `exp`: from its id, so that two experiments between the
/// same machines rarely share ids (the kernel refuses a tunnel whose id is in use).
fn vni_base(exp: &str, cut: usize) -> u32 {
    let h = exp.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let room = (partition::VNI_MAX as u64).saturating_sub(cut as u64 + 1).max(1);
    1 + (h % room) as u32
}

/// Which agent the topology asks each node to be on (a node's `machine`: an agent's name, its
/// `HOST:PORT` as given, or its address).
fn fixed(plan: &horde_topo::Plan, names: &[String], agents: &[AgentSpec]) -> anyhow::Result<Vec<Option<usize>>> {
    plan.nodes
        .iter()
        .map(|n| {
            let Some(m) = &n.machine else { return Ok(None) };
            let i = (0..names.len()).find(|&i| names[i] == *m || agents[i].addr.to_string() == *m || agents[i].addr.ip().to_string() == *m);
            i.map(Some).with_context(|| format!("node {} asks for machine `{m}`, which is none of the agents ({})", n.name, names.join(", ")))
        })
        .collect()
}

/// Places and builds `text` across the agents as experiment `exp` (a fresh id if `None`).
/// If any agent fails, every part already built is taken down again.
pub fn up(a: &Agents, text: &str, file: &str, exp: Option<String>, live_all: bool) -> anyhow::Result<Built> {
    let exp = exp.unwrap_or_else(new_id);
    crate::agent::emu::check_exp(&exp).map_err(anyhow::Error::msg)?;
    if a.agents.len() > crate::agent::emu::MAX_MACHINES {
        bail!("a topology spans at most {} machines (--agents names {})", crate::agent::emu::MAX_MACHINES, a.agents.len());
    }
    let addrs: Vec<Ipv4Addr> = a
        .agents
        .iter()
        .map(|s| match s.addr.ip() {
            IpAddr::V4(v) if !v.is_loopback() && !v.is_unspecified() => Ok(v),
            ip => bail!("agent {}: tunnels between machines need each agent's IPv4 address as other machines reach it, not {ip}", s.addr),
        })
        .collect::<anyhow::Result<_>>()?;
    // the whole topology, planned here as each agent will (addresses and routes are the whole
    // network's): errors are the user's to fix before anything is built
    let plan = horde_topo::plan(text, file, &crate::agent::emu::local_id(&exp, 0))?;
    crate::agent::emu::refuse_machine_files(text, file, &crate::agent::emu::local_id(&exp, 0)).map_err(anyhow::Error::msg)?;
    let ev = |e: &Event| {
        if let Event::Note(m) = e {
            (a.note)(m)
        }
    };
    let mut fleet = connect(a, &ev)?;
    let names = fleet.names();
    let placement = partition::place(&plan, names.len(), &fixed(&plan, &names, a.agents)?)?;
    let Placement { machine_of, cut, .. } = placement;
    let base = vni_base(&exp, cut.len());
    let reqs = (0..names.len())
        .map(|me| {
            let part = Part { machine_of: machine_of.clone(), me, names: names.clone(), addrs: addrs.clone(), vni_base: base, port: VXLAN_PORT };
            (me, EmuRequest::Up { exp: exp.clone(), topology: text.to_string(), file: file.to_string(), part, live_all })
        })
        .collect();
    let replies = fleet.emu(reqs, UP_WITHIN, false);
    let mut parts = Vec::new();
    let mut failed = Vec::new();
    // agents that refused (they built nothing)
    let mut refused = Vec::new();
    for (i, r) in replies {
        match r {
            Ok(EmuReply::Up { local, tunnels, seconds, .. }) => {
                let nodes = (0..plan.nodes.len()).filter(|&n| machine_of[n] == i).map(|n| plan.nodes[n].name.clone()).collect();
                parts.push(MachinePart { index: i, agent: names[i].clone(), addr: addrs[i], local, nodes, tunnels, seconds });
            }
            Ok(EmuReply::Failed { message }) => {
                refused.push(i);
                failed.push(format!("agent {}: {message}", names[i]))
            }
            Ok(other) => failed.push(format!("agent {}: answered {other:?}", names[i])),
            Err(why) => failed.push(format!("agent {}: {why}", names[i])),
        }
    }
    if !failed.is_empty() {
        // what was built goes down again: no half network is left behind. An agent that has not
        // answered (Ctrl-C, or its deadline) may still be building: its `down` follows its `up`.
        let undo: Vec<usize> = (0..names.len()).filter(|i| !refused.contains(i)).collect();
        let undo = fleet.emu(undo.into_iter().map(|i| (i, EmuRequest::Down { exp: exp.clone() })).collect(), UNDO_WITHIN, true);
        for (i, r) in undo {
            let nothing_built = matches!(&r, Ok(EmuReply::Failed { message }) if message.contains("has no part"));
            if !nothing_built && !matches!(r, Ok(EmuReply::Down { .. })) {
                failed.push(format!("agent {}: its part could not be taken down again ({r:?}): `horde emu down {exp} --agents …`", names[i]));
            }
        }
        bail!("experiment {exp} is not up: {}", failed.join("; "));
    }
    let cut = cut
        .iter()
        .map(|&li| {
            let l = &plan.links[li];
            (plan.nodes[l.a.node].name.clone(), plan.nodes[l.b.node].name.clone(), names[machine_of[l.a.node]].clone(), names[machine_of[l.b.node]].clone())
        })
        .collect();
    Ok(Built { exp, parts, cut })
}

/// Each agent's answer, by name.
pub type Answers = Vec<(String, Result<EmuReply, String>)>;

fn ask_all(a: &Agents, req: impl Fn() -> EmuRequest, within: Duration) -> anyhow::Result<Answers> {
    let ev = |e: &Event| {
        if let Event::Note(m) = e {
            (a.note)(m)
        }
    };
    let mut fleet = connect(a, &ev)?;
    let names = fleet.names();
    let replies = fleet.emu((0..names.len()).map(|i| (i, req())).collect(), within, false);
    Ok(replies.into_iter().map(|(i, r)| (names[i].clone(), r)).collect())
}

/// Takes every agent's part of `exp` down.
pub fn down(a: &Agents, exp: &str) -> anyhow::Result<Answers> {
    crate::agent::emu::check_exp(exp).map_err(anyhow::Error::msg)?;
    ask_all(a, || EmuRequest::Down { exp: exp.to_string() }, OTHER_WITHIN)
}

/// Every agent's emulated links of `exp` with their counters, by agent index.
pub fn stats(a: &Agents, exp: &str) -> anyhow::Result<Vec<(usize, Result<EmuReply, String>)>> {
    crate::agent::emu::check_exp(exp).map_err(anyhow::Error::msg)?;
    let ev = |e: &Event| {
        if let Event::Note(m) = e {
            (a.note)(m)
        }
    };
    let mut fleet = connect(a, &ev)?;
    let n = fleet.names().len();
    Ok(fleet.emu((0..n).map(|i| (i, EmuRequest::Stats { exp: exp.to_string() })).collect(), OTHER_WITHIN, true))
}

/// Every agent's parts.
pub fn ls(a: &Agents) -> anyhow::Result<Answers> {
    ask_all(a, || EmuRequest::Ls, OTHER_WITHIN)
}

/// Changes or shows link `a`–`b` of `exp` on every machine that has it: each machine's answer
/// (what changed, or the link's counters as JSON).
pub fn link(a: &Agents, exp: &str, x: &str, y: &str, op: &horde_emu::links::LinkOp) -> anyhow::Result<Vec<(String, String)>> {
    crate::agent::emu::check_exp(exp).map_err(anyhow::Error::msg)?;
    let req = || EmuRequest::Link { exp: exp.into(), a: x.into(), b: y.into(), op: op.clone() };
    let mut out = Vec::new();
    let mut why = Vec::new();
    for (name, r) in ask_all(a, req, OTHER_WITHIN)? {
        match r {
            Ok(EmuReply::Link { here: true, output }) => out.push((name, output)),
            Ok(EmuReply::Link { here: false, .. }) => {}
            Ok(EmuReply::Failed { message }) => why.push(format!("{name}: {message}")),
            Ok(other) => why.push(format!("{name}: answered {other:?}")),
            Err(e) => why.push(format!("{name}: {e}")),
        }
    }
    if !why.is_empty() {
        bail!("{}", why.join("; "));
    }
    if out.is_empty() {
        bail!("no agent has link {x} – {y} of experiment {exp} (or the direction asked)");
    }
    Ok(out)
}

/// Runs a command in `node` of `exp`, on whichever machine has it: that agent's answer.
pub fn exec(a: &Agents, exp: &str, node: &str, argv: &[String], timeout: Duration, detach: bool) -> anyhow::Result<(String, EmuReply)> {
    crate::agent::emu::check_exp(exp).map_err(anyhow::Error::msg)?;
    let ms = timeout.as_millis().clamp(1, 600_000) as u64;
    let answers =
        ask_all(a, || EmuRequest::Exec { exp: exp.to_string(), node: node.to_string(), argv: argv.to_vec(), timeout_ms: ms, detach }, timeout + OTHER_WITHIN)?;
    let mut why = Vec::new();
    for (name, r) in answers {
        match r {
            Ok(r @ EmuReply::Exec { here: true, .. }) => return Ok((name, r)),
            Ok(EmuReply::Exec { here: false, .. }) => {}
            Ok(EmuReply::Failed { message }) => why.push(format!("{name}: {message}")),
            Ok(other) => why.push(format!("{name}: answered {other:?}")),
            Err(e) => why.push(format!("{name}: {e}")),
        }
    }
    bail!("no agent has node {node} of experiment {exp}{}", if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) })
}
