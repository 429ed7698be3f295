//! The experiment view's side on the server: emulated networks brought up, changed, entered
//! and taken down from the console. Every action is the CLI's own command run as a child —
//! `horde emu up|down|link|exec` — so its checks and messages are the CLI's; reads (the plan,
//! the link counters) go to the emulator's state and its link daemon directly. Actions need
//! root, and say so before trying.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

/// Output kept from a child (each stream).
const MAX_OUTPUT: usize = 256 * 1024;
/// `emu up` of a large topology takes seconds; of a broken machine, never: bounded.
const UP_TIMEOUT: Duration = Duration::from_secs(300);
/// A command run in a node from the console (`emu exec`) is stopped after this.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(20);
/// Pairs one change may touch (a link between groups changes every member pair).
const MAX_PAIRS: usize = 1_000;

/// Why an action that needs root cannot run, if it cannot.
pub fn needs_root() -> Option<String> {
    // SAFETY: geteuid cannot fail.
    (unsafe { libc::geteuid() } != 0).then(|| "emulated networks need root: start the console as root (sudo horde ui)".to_string())
}

/// What the experiment view lists.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Status {
    /// Why topologies cannot be brought up here (not root), if they cannot.
    pub cannot: Option<String>,
    pub experiments: Vec<Experiment>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Experiment {
    pub id: String,
    pub name: String,
    pub file: String,
    pub nodes: usize,
    pub links: usize,
    pub emulated_links: usize,
    pub up_seconds: f64,
    /// Every link goes through the link emulator (`up --live`).
    pub live_all: bool,
}

pub fn status() -> Status {
    let experiments = horde_emu::experiments()
        .into_iter()
        .take(256)
        .filter_map(|id| {
            let (m, _) = horde_emu::load(&id).ok()?;
            Some(Experiment {
                id,
                name: m.name,
                file: m.file,
                nodes: m.nodes,
                links: m.links,
                emulated_links: m.impaired_links,
                up_seconds: m.up_seconds,
                live_all: m.live_all,
            })
        })
        .collect();
    Status { cannot: needs_root(), experiments }
}

/// One experiment's nodes and links as the editor draws them.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Detail {
    pub id: String,
    pub name: String,
    pub file: String,
    pub nodes: Vec<NodeDetail>,
    pub links: Vec<LinkDetail>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct NodeDetail {
    pub name: String,
    /// The `[[node]]` entry it comes from (a group's name for its members).
    pub entry: String,
    pub kind: horde_topo::Kind,
    pub addrs: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LinkDetail {
    pub a: String,
    pub b: String,
    /// Through the link emulator: its counters are live and it can be changed.
    pub emulated: bool,
}

pub fn detail(id: &str) -> Result<Detail, String> {
    let (m, plan) = horde_emu::load(id).map_err(|e| e.to_string())?;
    let userspace: std::collections::HashSet<usize> = horde_emu::userspace_links(&plan, &m).into_iter().collect();
    let mut entry = vec![String::new(); plan.nodes.len()];
    for (g, members) in &plan.groups {
        for &i in members {
            if let Some(e) = entry.get_mut(i) {
                *e = g.clone();
            }
        }
    }
    let nodes = plan
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| NodeDetail { name: n.name.clone(), entry: entry[i].clone(), kind: n.kind, addrs: plan.addrs(i).iter().map(|a| a.to_string()).collect() })
        .collect();
    let name = |i: usize| plan.nodes[i].name.clone();
    let links = plan.links.iter().enumerate().map(|(k, l)| LinkDetail { a: name(l.a.node), b: name(l.b.node), emulated: userspace.contains(&k) }).collect();
    Ok(Detail { id: id.to_string(), name: m.name, file: m.file, nodes, links })
}

/// The link daemon's counters now, with the time they were read (the browser makes rates of
/// the change between two reads).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Counters {
    /// Milliseconds on the console's monotonic clock.
    pub at_ms: u64,
    pub links: Vec<horde_emu::fwd::LinkReport>,
}

pub fn counters(id: &str) -> Result<Counters, String> {
    let (m, _) = horde_emu::load(id).map_err(|e| e.to_string())?;
    let at_ms = horde_sys::clock::mono_ns() / 1_000_000;
    if m.daemon_pid.is_none() {
        return Ok(Counters { at_ms, links: Vec::new() });
    }
    let r = horde_emu::fwd::request(id, &horde_emu::fwd::Request::Stats).map_err(|e| e.to_string())?;
    Ok(Counters { at_ms, links: r.links })
}

/// What a child said.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Ran {
    /// Exit status (absent when it was stopped for taking too long).
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

async fn read_capped(r: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let Some(mut r) = r else { return String::new() };
    let mut buf = Vec::new();
    let _ = (&mut r).take(MAX_OUTPUT as u64).read_to_end(&mut buf).await;
    // drain the rest so the child never blocks on a full pipe
    let _ = tokio::io::copy(&mut r, &mut tokio::io::sink()).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// Runs `horde ARGS` with a bound on its time and on the output kept.
pub async fn horde(args: &[String], limit: Duration) -> Result<Ran, String> {
    let exe = std::env::current_exe().map_err(|e| format!("locating the horde binary: {e}"))?;
    let mut child = tokio::process::Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting horde {}: {e}", args.first().map_or("", |s| s)))?;
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let reading = async { tokio::join!(read_capped(out), read_capped(err)) };
    tokio::select! {
        (stdout, stderr) = reading => {
            let exit = child.wait().await.ok().and_then(|s| s.code());
            Ok(Ran { exit, stdout, stderr, timed_out: false })
        }
        _ = tokio::time::sleep(limit) => {
            let _ = child.kill().await;
            Ok(Ran { exit: None, stdout: String::new(), stderr: format!("stopped after {} s", limit.as_secs()), timed_out: true })
        }
    }
}

/// The message of a failed child: its last error line, without the tool's prefix.
pub fn failure(r: &Ran) -> String {
    let line = r.stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("failed without a message");
    line.trim().to_string()
}

/// `POST /api/v1/emu`: bring a topology file up.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Up {
    /// A topology file (as `horde emu up` takes it; relative to the console's directory).
    pub topology: PathBuf,
    /// Every link changeable and counted (through the link emulator), as `up --live`.
    #[serde(default)]
    pub live: bool,
}

pub async fn up(req: &Up) -> Result<String, (u16, String)> {
    if let Some(why) = needs_root() {
        return Err((403, why));
    }
    crate::topo::open(&req.topology).map_err(|m| (400, m))?;
    let mut args = vec!["emu".to_string(), "up".to_string(), req.topology.display().to_string()];
    if req.live {
        args.push("--live".into());
    }
    let r = horde(&args, UP_TIMEOUT).await.map_err(|m| (500, m))?;
    let id = r.stdout.lines().last().unwrap_or("").trim().to_string();
    if r.exit != Some(0) || horde_topo::check_exp_id(&id).is_err() {
        return Err((400, failure(&r)));
    }
    Ok(id)
}

pub async fn down(id: &str, keep_to: &Path) -> Result<Ran, (u16, String)> {
    if let Some(why) = needs_root() {
        return Err((403, why));
    }
    horde_topo::check_exp_id(id).map_err(|m| (400, m))?;
    let dest = keep_to.join(format!("emu-{id}"));
    let r = horde(&["emu".into(), "down".into(), id.into(), "--keep-to".into(), dest.display().to_string()], UP_TIMEOUT).await.map_err(|m| (500, m))?;
    if r.exit != Some(0) {
        return Err((400, failure(&r)));
    }
    Ok(r)
}

/// `POST /api/v1/emu/{id}/link`: the options of `horde emu link`, for the link between two
/// nodes or `[[node]]` entries (a group's link changes for each member).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkSet {
    pub a: String,
    pub b: String,
    /// "ab" (from a), "ba" or "both" (the default).
    pub dir: Option<String>,
    pub rate: Option<String>,
    pub delay: Option<String>,
    pub jitter: Option<String>,
    pub loss: Option<String>,
    pub duplicate: Option<String>,
    pub corrupt: Option<String>,
    pub queue: Option<String>,
    /// Bit-error rate, e.g. "1e-6".
    pub ber: Option<String>,
    /// netem's reorder: probability, e.g. "25%", and gap.
    pub reorder_prob: Option<String>,
    pub reorder_gap: Option<u32>,
    /// Start from no impairment instead of the current settings.
    #[serde(default)]
    pub clear: bool,
    /// "down": take the link down (both ends, as a pulled cable); "up": bring it back. Goes
    /// alone, as `horde emu link … --down/--up`.
    pub state: Option<String>,
}

/// The node pairs a link between `a` and `b` (nodes or entries) stands for, in plan order.
fn pairs(d: &Detail, a: &str, b: &str) -> Vec<(String, String)> {
    let is = |n: &str, x: &str| d.nodes.iter().any(|m| m.name == n && (m.entry == x || m.name == x));
    d.links
        .iter()
        .filter(|l| is(&l.a, a) && is(&l.b, b) || is(&l.a, b) && is(&l.b, a))
        .map(|l| if is(&l.a, a) { (l.a.clone(), l.b.clone()) } else { (l.b.clone(), l.a.clone()) })
        .collect()
}

pub async fn link(id: &str, s: &LinkSet) -> Result<Vec<Ran>, (u16, String)> {
    if let Some(why) = needs_root() {
        return Err((403, why));
    }
    let d = detail(id).map_err(|m| (404, m))?;
    let pairs = pairs(&d, &s.a, &s.b);
    if pairs.is_empty() {
        return Err((400, format!("no link between {} and {} in {id}", s.a, s.b)));
    }
    if pairs.len() > MAX_PAIRS {
        return Err((400, format!("the link between {} and {} stands for {} node pairs; change at most {MAX_PAIRS} at once", s.a, s.b, pairs.len())));
    }
    let mut ran = Vec::new();
    for (a, b) in pairs {
        let mut args = vec!["emu".into(), "link".into(), id.into(), a, b, "--dir".into(), s.dir.clone().unwrap_or_else(|| "both".into())];
        for (flag, v) in [
            ("--rate", &s.rate),
            ("--delay", &s.delay),
            ("--jitter", &s.jitter),
            ("--loss", &s.loss),
            ("--duplicate", &s.duplicate),
            ("--corrupt", &s.corrupt),
            ("--queue", &s.queue),
            ("--ber", &s.ber),
            ("--reorder-prob", &s.reorder_prob),
        ] {
            if let Some(v) = v.as_ref().filter(|v| !v.trim().is_empty()) {
                args.push(flag.into());
                args.push(v.trim().into());
            }
        }
        if let Some(g) = s.reorder_gap {
            args.push("--reorder-gap".into());
            args.push(g.to_string());
        }
        if s.clear {
            args.push("--clear".into());
        }
        match s.state.as_deref() {
            None => {}
            Some("down") => args.push("--down".into()),
            Some("up") => args.push("--up".into()),
            Some(x) => return Err((400, format!("state `{x}`: use \"down\" or \"up\""))),
        }
        let r = horde(&args, EXEC_TIMEOUT).await.map_err(|m| (500, m))?;
        if r.exit != Some(0) {
            return Err((400, failure(&r)));
        }
        ran.push(r);
    }
    Ok(ran)
}

/// `POST /api/v1/emu/{id}/exec`: a command in a node, as `horde emu exec ID NODE -- ARGV`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exec {
    pub node: String,
    /// The command and its arguments (no shell).
    pub argv: Vec<String>,
}

pub async fn exec(id: &str, e: &Exec) -> Result<Ran, (u16, String)> {
    if let Some(why) = needs_root() {
        return Err((403, why));
    }
    if e.argv.is_empty() || e.argv.len() > 256 || e.argv.iter().any(|a| a.len() > 4096 || a.contains('\0')) {
        return Err((400, "argv: a command and at most 255 arguments of at most 4096 bytes each".into()));
    }
    let mut args = vec!["emu".into(), "exec".into(), id.into(), e.node.clone(), "--".into()];
    args.extend(e.argv.iter().cloned());
    horde(&args, EXEC_TIMEOUT).await.map_err(|m| (500, m))
}
