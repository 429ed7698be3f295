//! An agent's part of an emulated network that spans machines (`horde agent --emu`, driven by
//! `horde emu … --agents`): it builds, lists, runs commands in and takes down its own parts.
//!
//! A part is the topology planned in full (every address and route is the whole network's)
//! with the nodes placed on other machines left out and each link to them ending in a VXLAN
//! tunnel to that machine ([`horde_topo::partition::split`]). Its id on this machine is the
//! controller's id plus the machine's letter, so two parts on one host (namespaces standing in
//! for machines) never share a name.
//!
//! What it built is recorded in the agent's directory (`emu-parts.json`) before anything is
//! built: an agent that crashed takes its parts down when it starts again, and the controller
//! can take down only what this agent built.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::msg::{EmuReply, EmuRequest};
use horde_emu::links::LinkOp;

use super::AgentOptions;

const RECORD: &str = "emu-parts.json";
/// Most machines one topology spans (a part's id adds one letter).
pub const MAX_MACHINES: usize = 26;
/// Most of a command's output kept per stream.
const OUTPUT_MAX: usize = 64 << 10;
/// Longest a command may run.
const EXEC_MAX_MS: u64 = 600_000;

/// The id of machine `me`'s part of experiment `exp` (checked by the caller).
pub fn local_id(exp: &str, me: usize) -> String {
    format!("{exp}{}", (b'a' + me as u8) as char)
}

/// Checks the controller's experiment id: 1..=5 lowercase letters or digits.
pub fn check_exp(exp: &str) -> Result<(), String> {
    if exp.is_empty() || exp.len() > 5 || !exp.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return Err(format!("experiment id `{}` across machines must be 1..=5 lowercase letters or digits", exp.escape_debug()));
    }
    Ok(())
}

fn record_path(opts: &AgentOptions) -> PathBuf {
    opts.dir.join(RECORD)
}

fn read_record(p: &Path) -> Vec<(String, String)> {
    let parts: Vec<(String, String)> = std::fs::read(p).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    // only ids an agent could have made
    parts.into_iter().filter(|(e, l)| check_exp(e).is_ok() && horde_emu::check_id(l).is_ok()).collect()
}

fn write_record(p: &Path, parts: &[(String, String)]) -> Result<(), String> {
    let tmp = p.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(parts).expect("serializable"))
        .and_then(|()| std::fs::rename(&tmp, p))
        .map_err(|e| format!("recording the agent's emulator parts in {}: {e}", p.display()))
}

/// At start-up: takes down every part a previous run of this agent left (a crash, a kill).
pub fn clean_up_left_parts(opts: &AgentOptions, log: &(dyn Fn(&str) + Sync)) {
    let p = record_path(opts);
    let parts = read_record(&p);
    for (exp, local) in &parts {
        match horde_emu::down(local) {
            Ok(r) => log(&format!(
                "emu: took down part {local} of experiment {exp}, left by an earlier run ({} namespaces, {} processes)",
                r.namespaces, r.processes
            )),
            Err(e) => log(&format!("emu: could not take down part {local} of experiment {exp}: {e}")),
        }
    }
    if !parts.is_empty() {
        let _ = write_record(&p, &[]);
    }
}

/// The link emulator's counters of this machine's part of `exp` (none without emulated links).
fn stats(opts: &AgentOptions, exp: &str) -> Result<EmuReply, String> {
    check_exp(exp)?;
    let Some(local) = read_record(&record_path(opts)).into_iter().find(|(e, _)| e == exp).map(|p| p.1) else {
        return Err(format!("agent {} has no part of experiment {exp}", opts.name));
    };
    let (meta, _) = horde_emu::load(&local).map_err(|e| e.to_string())?;
    if meta.impaired_links == 0 {
        return Ok(EmuReply::Stats { links: Vec::new() });
    }
    let r = horde_emu::fwd::request(&local, &horde_emu::fwd::Request::Stats).map_err(|e| format!("the link emulator of part {local}: {e}"))?;
    Ok(EmuReply::Stats { links: r.links })
}

/// The namespaces of `hosts` of this agent's part of experiment `exp`, for a scenario's
/// `[emu]` players and server side through agents: each must be a host built on this machine.
pub fn host_namespaces(opts: &AgentOptions, exp: &str, hosts: &[String]) -> Result<Vec<std::fs::File>, String> {
    check_exp(exp)?;
    if !opts.emu {
        return Err(format!("agent {} was started without --emu: it has no emulated hosts to run a scenario's [emu] part in", opts.name));
    }
    let Some(local) = read_record(&record_path(opts)).into_iter().find(|(e, _)| e == exp).map(|p| p.1) else {
        return Err(format!("agent {} has no part of experiment {exp}", opts.name));
    };
    let (_, plan) = horde_emu::load(&local).map_err(|e| e.to_string())?;
    hosts
        .iter()
        .map(|h| {
            let i = plan.node(h).ok_or_else(|| format!("no node `{h}` in experiment {exp}"))?;
            if plan.nodes[i].away.is_some() || plan.nodes[i].kind != horde_topo::Kind::Host {
                return Err(format!("`{h}` is not a host of this machine's part of experiment {exp}"));
            }
            horde_emu::open_node(&local, &plan, h).map_err(|e| e.to_string())
        })
        .collect()
}

/// Does what the controller asked. `own` is this agent's address on the control connection
/// (what the controller dialled: the tunnels' local address must be it).
pub fn handle(req: EmuRequest, opts: &AgentOptions, own: Option<IpAddr>, log: &(dyn Fn(&str) + Sync)) -> EmuReply {
    if !opts.emu {
        return EmuReply::Failed { message: format!("agent {} was started without --emu: it builds no emulated network", opts.name) };
    }
    let r = match req {
        EmuRequest::Up { exp, topology, file, part, live_all } => up(opts, own, &exp, &topology, &file, part, live_all, log),
        EmuRequest::Down { exp } => down(opts, &exp, log),
        EmuRequest::Ls => Ok(EmuReply::Ls { parts: read_record(&record_path(opts)) }),
        EmuRequest::Exec { exp, node, argv, timeout_ms, detach } => exec(opts, &exp, &node, &argv, timeout_ms, detach),
        EmuRequest::Link { exp, a, b, op } => link(opts, &exp, &a, &b, &op),
        EmuRequest::Stats { exp } => stats(opts, &exp),
    };
    r.unwrap_or_else(|message| EmuReply::Failed { message })
}

#[allow(clippy::too_many_arguments)]
fn up(
    opts: &AgentOptions,
    own: Option<IpAddr>,
    exp: &str,
    topology: &str,
    file: &str,
    part: horde_topo::partition::Part,
    live_all: bool,
    log: &(dyn Fn(&str) + Sync),
) -> Result<EmuReply, String> {
    check_exp(exp)?;
    horde_emu::require_root().map_err(|e| e.to_string())?;
    if part.names.len() > MAX_MACHINES || part.me >= part.names.len() {
        return Err(format!("a topology spans at most {MAX_MACHINES} machines, and this one must be among them"));
    }
    let mine = part.addrs.get(part.me).copied().unwrap_or(Ipv4Addr::UNSPECIFIED);
    if own != Some(IpAddr::V4(mine)) {
        return Err(format!(
            "the tunnels' address for this machine is {mine}, but the controller reached it at {}: give --agents the address other machines reach this one at (IPv4)",
            own.map_or("?".into(), |a| a.to_string())
        ));
    }
    let local = local_id(exp, part.me);
    refuse_machine_files(topology, file, &local)?;
    let rec = record_path(opts);
    let mut parts = read_record(&rec);
    if parts.iter().any(|(e, _)| e == exp) {
        return Err(format!("this agent already has a part of experiment {exp}: take it down first (horde emu down {exp} --agents …)"));
    }
    // recorded before anything is built: a crash half-way is cleaned up at the next start
    parts.push((exp.to_string(), local.clone()));
    write_record(&rec, &parts)?;
    let uo = horde_emu::UpOptions { exp: Some(local.clone()), stop: None, userspace: true, live_all, part: Some(part) };
    match horde_emu::up(topology, file, &uo) {
        Ok(r) => {
            let nodes = r.plan.nodes.iter().filter(|n| n.away.is_none()).count();
            let tunnels = r.plan.links.iter().filter(|l| l.tunnel.is_some()).count();
            log(&format!("emu: part {local} of experiment {exp} up: {nodes} nodes, {tunnels} tunnel(s), in {:.2} s", r.meta.up_seconds));
            Ok(EmuReply::Up { local, nodes, tunnels, emulated_links: r.meta.impaired_links, seconds: r.meta.up_seconds })
        }
        Err(e) => {
            // `up` removed what it made
            parts.retain(|(e2, _)| e2 != exp);
            let _ = write_record(&rec, &parts);
            Err(format!("building part {local}: {e}"))
        }
    }
}

/// A topology from a controller may not reach this machine's own interfaces or files: no
/// external node (it would take an interface of the machine) and no capacity trace (a path).
pub fn refuse_machine_files(topology: &str, file: &str, id: &str) -> Result<(), String> {
    let plan = horde_topo::plan(topology, file, id).map_err(|e| e.to_string())?;
    if let Some(n) = plan.nodes.iter().find(|n| n.external.is_some()) {
        return Err(format!(
            "node {}: an external node takes an interface of one machine; across machines it is not built (bring that part up on its machine)",
            n.name
        ));
    }
    if let Some(l) = plan.links.iter().find(|l| l.trace_ab.is_some() || l.trace_ba.is_some()) {
        return Err(format!(
            "link {} – {}: a capacity trace is a file on one machine; across machines it is not read",
            plan.nodes[l.a.node].name, plan.nodes[l.b.node].name
        ));
    }
    Ok(())
}

fn down(opts: &AgentOptions, exp: &str, log: &(dyn Fn(&str) + Sync)) -> Result<EmuReply, String> {
    check_exp(exp)?;
    let rec = record_path(opts);
    let mut parts = read_record(&rec);
    let Some(local) = parts.iter().find(|(e, _)| e == exp).map(|p| p.1.clone()) else {
        return Err(format!("agent {} has no part of experiment {exp}", opts.name));
    };
    let r = horde_emu::down(&local).map_err(|e| format!("taking part {local} down: {e}"))?;
    parts.retain(|(e, _)| e != exp);
    write_record(&rec, &parts)?;
    log(&format!("emu: part {local} of experiment {exp} down ({} namespaces, {} processes)", r.namespaces, r.processes));
    Ok(EmuReply::Down { local, namespaces: r.namespaces, processes: r.processes })
}

fn exec(opts: &AgentOptions, exp: &str, node: &str, argv: &[String], timeout_ms: u64, detach: bool) -> Result<EmuReply, String> {
    check_exp(exp)?;
    horde_emu::exec::check_argv(argv).map_err(|e| e.to_string())?;
    if !(1..=EXEC_MAX_MS).contains(&timeout_ms) {
        return Err(format!("a command's time limit is 1..={EXEC_MAX_MS} ms"));
    }
    let Some(local) = read_record(&record_path(opts)).into_iter().find(|(e, _)| e == exp).map(|p| p.1) else {
        return Err(format!("agent {} has no part of experiment {exp}", opts.name));
    };
    let (_, plan) = horde_emu::load(&local).map_err(|e| e.to_string())?;
    let Some(i) = plan.node(node) else {
        return Err(format!("no node `{node}` in experiment {exp}"));
    };
    if plan.nodes[i].away.is_some() {
        return Ok(EmuReply::Exec { here: false, code: None, stdout: String::new(), stderr: String::new(), timed_out: false });
    }
    if opts.no_exec {
        return Err(format!(
            "agent {} was started with --no-exec: it runs no command in its nodes (start it without --no-exec to allow `emu exec`)",
            opts.name
        ));
    }
    if detach {
        let (pid, out) = horde_emu::exec::start_detached(&local, node, argv).map_err(|e| format!("starting `{}` in {node}: {e}", argv[0]))?;
        let stdout = format!("started in {node}: pid {pid}, output in {}\n", out.display());
        return Ok(EmuReply::Exec { here: true, code: None, stdout, stderr: String::new(), timed_out: false });
    }
    let r =
        horde_emu::exec::run(&local, node, argv, Duration::from_millis(timeout_ms), OUTPUT_MAX).map_err(|e| format!("running `{}` in {node}: {e}", argv[0]))?;
    Ok(EmuReply::Exec { here: true, code: r.exit, stdout: r.stdout, stderr: r.stderr, timed_out: r.timed_out })
}

/// Changes or shows link `a`–`b` of `exp` where this machine built it. A capacity trace is a
/// file of the controller's machine: refused across machines.
fn link(opts: &AgentOptions, exp: &str, a: &str, b: &str, op: &LinkOp) -> Result<EmuReply, String> {
    check_exp(exp)?;
    if matches!(op, LinkOp::Set { change, .. } if change.trace.is_some()) {
        return Err("a capacity trace is a file on the controller's machine: across machines, give it in the topology of a single machine".into());
    }
    let local = read_record(&record_path(opts)).into_iter().find(|(e, _)| e == exp).map(|p| p.1);
    let Some(local) = local else {
        return Err(format!("agent {} has no part of experiment {exp}", opts.name));
    };
    let (_, plan) = horde_emu::load(&local).map_err(|e| e.to_string())?;
    let found = (0..plan.links.len()).find(|&i| {
        let l = &plan.links[i];
        let (x, y) = (&plan.nodes[l.a.node].name, &plan.nodes[l.b.node].name);
        (x == a && y == b) || (x == b && y == a)
    });
    let Some(li) = found else {
        return Err(format!("no link {a} – {b} in experiment {exp}"));
    };
    let l = &plan.links[li];
    let nothing = || Ok(EmuReply::Link { here: false, output: String::new() });
    if !plan.built_here(li) {
        return nothing();
    }
    let mut op = op.clone();
    if let LinkOp::Set { dir, .. } = &mut op {
        // the directions asked, as the plan has them (0: its a → b); across machines each
        // machine changes the direction that leaves it
        let swapped = plan.nodes[l.a.node].name != a;
        let mut dirs = dir.plan_dirs(swapped);
        if let Some(t) = &l.tunnel {
            dirs.retain(|&d| d == t.here as usize);
        }
        if dirs.is_empty() {
            return nothing();
        }
        *dir = horde_emu::links::LinkDir::of_plan_dirs(&dirs, swapped);
    }
    let r = horde_emu::links::apply(&local, a, b, &op).map_err(|e| format!("link {a} – {b} on {}: {e}", opts.name))?;
    // what changed, one line each; with nothing changed (a show), the counters as JSON
    let output =
        if !r.lines.is_empty() || r.links.is_empty() { r.lines.join("\n") } else { serde_json::to_string_pretty(&r.links).map_err(|e| e.to_string())? };
    Ok(EmuReply::Link { here: true, output })
}
