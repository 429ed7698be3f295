//! The experiment view's side on the server: emulated networks brought up, changed, entered
//! and taken down from the console through the emulator's own calls — the ones `horde emu
//! up|down|link|exec` make, so their checks and messages are the CLI's — on the blocking pool,
//! each bounded in time. Reads (the plan, the link counters) go to the emulator's state and its
//! link daemon directly. Actions need root, and say so before trying.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use horde_emu::links::{LinkDir, LinkOp};
use serde::{Deserialize, Serialize};

pub use horde_emu::exec::Ran;

/// Output kept from a command in a node (each stream).
const MAX_OUTPUT: usize = 256 * 1024;
/// `emu up` of a large topology takes seconds; of a broken machine, never: bounded (the build
/// is abandoned and what it made removed).
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

/// Runs `f` on the blocking pool; a panic is a 500.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, (u16, String)> + Send + 'static) -> Result<T, (u16, String)> {
    tokio::task::spawn_blocking(f).await.map_err(|_| (500, "the request's work failed".to_string()))?
}

/// An emulator error as the console answers it: what the user asked for is wrong (400), or the
/// machine failed (500).
fn refusal(e: horde_emu::EmuError) -> (u16, String) {
    use horde_emu::EmuError;
    match e {
        EmuError::Io { .. } | EmuError::Netlink { .. } => (500, e.to_string()),
        e => (400, e.to_string()),
    }
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

pub async fn up(req: &Up, allow_force: bool) -> Result<String, (u16, String)> {
    let text = crate::topo::open(&req.topology).map_err(|m| (400, m))?;
    let file = req.topology.display().to_string();
    if !allow_force {
        refuse_force(&text, &file)?;
    }
    if let Some(why) = needs_root() {
        return Err((403, why));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let opts = horde_emu::UpOptions { exp: None, userspace: false, live_all: req.live, stop: Some(stop.clone()), part: None };
    let timer = tokio::spawn(async move {
        tokio::time::sleep(UP_TIMEOUT).await;
        stop.store(true, Ordering::Relaxed);
    });
    let r = blocking(move || horde_emu::up(&text, &file, &opts).map_err(refusal)).await;
    timer.abort();
    Ok(r?.meta.exp)
}

/// `force = true` takes an interface this machine uses (it may cut the machine off a network):
/// from a token holder it is honoured only where the operator started the console with
/// `--allow-force`.
pub fn refuse_force(text: &str, file: &str) -> Result<(), (u16, String)> {
    let plan = horde_topo::plan(text, file, "check").map_err(|e| (400, e.to_string()))?;
    match plan.nodes.iter().find(|n| n.external.as_ref().is_some_and(|x| x.force)) {
        Some(n) => Err((
            403,
            format!(
                "node {}: `force = true` takes an interface this machine uses, and this console was not started with --allow-force: use a free interface, or ask its operator to start it with --allow-force",
                n.name
            ),
        )),
        None => Ok(()),
    }
}

/// What `DELETE /api/v1/emu/{id}` did.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Down {
    pub namespaces: usize,
    pub processes: usize,
    /// Files written inside the nodes, kept in `kept_in`.
    pub kept: usize,
    pub kept_in: String,
}

pub async fn down(id: &str, keep_to: &Path) -> Result<Down, (u16, String)> {
    if let Some(why) = needs_root() {
        return Err((403, why));
    }
    horde_topo::check_exp_id(id).map_err(|m| (400, m))?;
    let dest = keep_to.join(format!("emu-{id}"));
    let id = id.to_string();
    blocking(move || {
        let kept = horde_emu::keep_node_files(&id, &dest).map_err(refusal)?;
        let r = horde_emu::down(&id).map_err(refusal)?;
        if r.namespaces == 0 && r.state_dirs == 0 {
            return Err((404, format!("no experiment `{id}` here")));
        }
        Ok(Down { namespaces: r.namespaces, processes: r.processes, kept, kept_in: dest.display().to_string() })
    })
    .await
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

/// What one node pair's link is after a change: one line per direction or link changed.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LinkNow {
    pub a: String,
    pub b: String,
    pub lines: Vec<String>,
}

impl LinkSet {
    /// What the form asks of the link, checked with the topology file's rules (named as
    /// `horde emu link` names them).
    fn op(&self) -> Result<LinkOp, String> {
        let dir: LinkDir = self.dir.as_deref().unwrap_or("both").parse().map_err(|m| format!("dir: {m}"))?;
        let text = |v: &Option<String>| v.as_ref().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let raw = horde_topo::RawImpair {
            rate: text(&self.rate),
            delay: text(&self.delay),
            jitter: text(&self.jitter),
            loss: text(&self.loss).map(horde_topo::RawLoss::Percent),
            duplicate: text(&self.duplicate),
            corrupt: text(&self.corrupt),
            queue: text(&self.queue),
            reorder: None,
            ber: text(&self.ber),
            reorder_prob: text(&self.reorder_prob),
            reorder_gap: self.reorder_gap,
            trace: None,
        };
        let change = horde_topo::LinkChange::parse(&raw).map_err(|(f, m)| format!("--{f}: {m}"))?;
        let alone = change.is_empty() && !self.clear && dir == LinkDir::Both;
        match self.state.as_deref() {
            None => Ok(LinkOp::Set { dir, change: Box::new(change), clear: self.clear }),
            Some(_) if !alone => Err("state goes alone, as `horde emu link … --down/--up` (no settings, clear or dir)".into()),
            Some("down") => Ok(LinkOp::Down),
            Some("up") => Ok(LinkOp::Up),
            Some(x) => Err(format!("state `{x}`: use \"down\" or \"up\"")),
        }
    }
}

pub async fn link(id: &str, s: &LinkSet) -> Result<Vec<LinkNow>, (u16, String)> {
    if let Some(why) = needs_root() {
        return Err((403, why));
    }
    let op = s.op().map_err(|m| (400, m))?;
    let d = detail(id).map_err(|m| (404, m))?;
    let pairs = pairs(&d, &s.a, &s.b);
    if pairs.is_empty() {
        return Err((400, format!("no link between {} and {} in {id}", s.a, s.b)));
    }
    if pairs.len() > MAX_PAIRS {
        return Err((400, format!("the link between {} and {} stands for {} node pairs; change at most {MAX_PAIRS} at once", s.a, s.b, pairs.len())));
    }
    let id = id.to_string();
    let r = tokio::task::spawn_blocking(move || {
        pairs
            .into_iter()
            .map(|(a, b)| horde_emu::links::apply(&id, &a, &b, &op).map(|r| LinkNow { a, b, lines: r.lines }).map_err(|e| (400, e.to_string())))
            .collect::<Result<Vec<_>, _>>()
    });
    r.await.map_err(|_| (500, "the link change's work failed".to_string()))?
}

/// `POST /api/v1/emu/{id}/exec`: a command in a node, as `horde emu exec ID NODE -- ARGV`: its
/// argument vector, or a command line split as a POSIX shell splits words (quotes and
/// backslashes; nothing else of a shell: no variables, globs or pipes) — one of the two.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exec {
    pub node: String,
    /// The command and its arguments (no shell).
    pub argv: Option<Vec<String>>,
    /// A command line, e.g. `vtysh -c 'show ip ospf neighbor'`.
    pub command: Option<String>,
}

impl Exec {
    fn argv(&self) -> Result<Vec<String>, String> {
        let argv = match (&self.argv, &self.command) {
            (Some(a), None) => a.clone(),
            (None, Some(c)) => shell_words::split(c).map_err(|e| format!("command: {e} (close every quote)"))?,
            _ => return Err("give the command as `argv` (its arguments) or `command` (a line), one of the two".into()),
        };
        horde_emu::exec::check_argv(&argv).map_err(|e| format!("argv: {e}"))?;
        Ok(argv)
    }
}

pub async fn exec(id: &str, e: &Exec) -> Result<Ran, (u16, String)> {
    if let Some(why) = needs_root() {
        return Err((403, why));
    }
    let argv = e.argv().map_err(|m| (400, m))?;
    let (id, node) = (id.to_string(), e.node.clone());
    blocking(move || horde_emu::exec::run(&id, &node, &argv, EXEC_TIMEOUT, MAX_OUTPUT).map_err(refusal)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_is_split_as_a_shell_splits_words() {
        let e = |argv: Option<Vec<&str>>, command: Option<&str>| Exec {
            node: "r1".into(),
            argv: argv.map(|v| v.into_iter().map(String::from).collect()),
            command: command.map(String::from),
        };
        assert_eq!(e(None, Some("vtysh -c 'show ip ospf neighbor'")).argv().unwrap(), ["vtysh", "-c", "show ip ospf neighbor"]);
        assert_eq!(e(Some(vec!["ip", "-br", "addr"]), None).argv().unwrap(), ["ip", "-br", "addr"]);
        assert!(e(None, Some("echo 'open")).argv().unwrap_err().contains("close every quote"));
        assert!(e(None, None).argv().unwrap_err().contains("one of the two"));
        assert!(e(Some(vec!["a"]), Some("b")).argv().unwrap_err().contains("one of the two"));
        assert!(e(None, Some("   ")).argv().unwrap_err().contains("argv"));
    }
}
