//! The emulated environment: a topology plan (horde-topo) built out of network namespaces, veth
//! pairs and bridges over batched rtnetlink, with impaired links forwarded by a userspace link
//! emulator (horde-impair behind AF_PACKET sockets) where the kernel has no netem.
//!
//! Layout of a running experiment `EXP`:
//! - `/run/netns/horde-EXP`: the *fabric* namespace. It holds every bridge (switch, hub), every
//!   switch port, and both ends the forwarder uses on impaired links. Nothing of an experiment
//!   lives in the host's own namespace, so deleting the namespaces removes every interface.
//! - `/run/netns/horde-EXP-NODE`: one namespace per host and router.
//! - `/run/horde/emu/EXP/`: the topology as given, its typed plan (`plan.json`), `meta.json`, the
//!   forwarder daemon's pid, socket and log, and one directory per node (`node/NODE`, the
//!   working directory of `emu exec`).
//!
//! Everything Horde makes carries the `horde-` prefix or lives under `/run/horde/emu`, which is
//! what `cleanup` looks for.

mod bridges;
pub mod exec;
pub mod external;
pub mod frr;
pub mod fwd;
mod fwd_io;
mod fwd_loop;
pub mod identity;
mod limits;
pub mod links;
pub mod nl;
pub mod ns;
mod offered;
mod procs;
pub mod root;
pub mod services;
mod spaces;
pub mod udp_gso;
use spaces::{addresses_and_routes, namespaces, NodeNs, NsRole};
pub mod state;
mod wire;

pub use procs::{daemons, forget_process, processes_in, record_process};
use procs::{describe_pid, kill_all, netns_inode, recorded_processes};

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use horde_impair::{Jitter, LinkSpec};
use horde_topo::{Kind, Plan, PlannedLink};
use serde::{Deserialize, Serialize};

use crate::nl::Nl;

pub const STATE_DIR: &str = "/run/horde/emu";

#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    #[error("{what}: {err}")]
    Io { what: String, err: std::io::Error },
    #[error("netlink refused {what}: {msg}")]
    Netlink { what: String, msg: String },
    #[error(transparent)]
    Topology(#[from] horde_topo::TopoError),
    #[error("{0}")]
    BadId(String),
    #[error("interrupted; everything built so far was removed")]
    Interrupted,
    #[error("{0}")]
    Other(String),
}

impl EmuError {
    pub fn io(what: &str, err: std::io::Error) -> EmuError {
        EmuError::Io { what: what.to_string(), err }
    }
}

/// Fails with advice unless we may create namespaces.
pub fn require_root() -> Result<(), EmuError> {
    // SAFETY: no arguments.
    if unsafe { libc::geteuid() } != 0 {
        return Err(EmuError::Other("the emulated environment needs root (CAP_SYS_ADMIN for namespaces, CAP_NET_ADMIN for links): run it with sudo".into()));
    }
    Ok(())
}

/// How impaired links are emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkPath {
    /// The userspace forwarder (horde-impair): works on every kernel.
    Userspace,
    /// Kernel netem on the veth ends.
    Netem,
}

/// What `up` records about an experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub exp: String,
    pub name: String,
    /// The topology file as given, and its directory (trace paths are relative to it).
    pub file: String,
    pub base_dir: String,
    pub created_unix: u64,
    pub nodes: usize,
    pub links: usize,
    pub impaired_links: usize,
    pub path: LinkPath,
    /// Links emulated by kernel netem (plan link index) with their current settings per
    /// direction; every other emulated link goes through the userspace link emulator.
    #[serde(default)]
    pub netem_links: Vec<(usize, LinkSpec, LinkSpec)>,
    pub daemon_pid: Option<u32>,
    pub up_seconds: f64,
    /// Every link was brought up changeable (`up --live`): all go through the link emulator.
    #[serde(default)]
    pub live_all: bool,
    /// Links (plan index) taken down with `horde emu link … --down` and not brought back.
    #[serde(default)]
    pub down_links: Vec<usize>,
    /// Routing daemons (FRR) started in the routers.
    #[serde(default)]
    pub routing_daemons: usize,
    /// Services started in the nodes (`services = [...]` in the topology file).
    #[serde(default)]
    pub services: usize,
}

/// Checks an experiment id before it names anything: ids are what `up` makes (1..=6 lowercase
/// letters or digits), never paths, so no command can reach outside Horde's own state.
pub fn check_id(exp: &str) -> Result<(), EmuError> {
    horde_topo::check_exp_id(exp).map_err(EmuError::BadId)
}

/// The state directory of experiment `exp` (an id checked by [`check_id`]).
pub fn state_dir(exp: &str) -> PathBuf {
    Path::new(STATE_DIR).join(exp)
}

pub fn node_dir(exp: &str, node: &str) -> PathBuf {
    state_dir(exp).join("node").join(node)
}

/// Reads a running experiment's record and plan.
pub fn load(exp: &str) -> Result<(Meta, Plan), EmuError> {
    check_id(exp)?;
    let dir = state_dir(exp);
    let meta: Meta = std::fs::read_to_string(dir.join("meta.json"))
        .map_err(|e| EmuError::io(&format!("experiment `{exp}` is not running here (see `horde emu ls`)"), e))
        .and_then(|t| serde_json::from_str(&t).map_err(|e| EmuError::Other(format!("{}: {e}", dir.join("meta.json").display()))))?;
    let plan = match std::fs::read(dir.join(PLAN_FILE)) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| EmuError::Other(format!("{}: {e}", dir.join(PLAN_FILE).display())))?,
        // An experiment brought up before plans were kept: plan its topology again.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let text = std::fs::read_to_string(dir.join("topology.toml")).map_err(|e| EmuError::io("reading the experiment's topology", e))?;
            let mut plan = horde_topo::plan(&text, &meta.file, exp)?;
            if meta.live_all {
                make_live(&mut plan);
            }
            plan
        }
        Err(e) => return Err(EmuError::io("reading the experiment's plan", e)),
    };
    Ok((meta, plan))
}

/// The experiment's plan as `emu up` made it (JSON), in its state directory.
const PLAN_FILE: &str = "plan.json";

/// Marks every link changeable (`up --live`): each then runs through the link emulator.
fn make_live(plan: &mut Plan) {
    for l in &mut plan.links {
        l.live = true;
    }
}

/// A fresh experiment id: 6 base-36 characters from the clock and pid, not in use.
pub fn new_id() -> String {
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0) as u64 ^ ((std::process::id() as u64) << 40);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    loop {
        let mut id = String::new();
        let mut v = x;
        for _ in 0..6 {
            id.push(b"abcdefghijklmnopqrstuvwxyz0123456789"[(v % 36) as usize] as char);
            v /= 36;
        }
        // start with a letter: reads as an id, not a number
        if id.as_bytes()[0].is_ascii_lowercase() && !state_dir(&id).exists() && ns::list(Some(&id)).is_empty() {
            return id;
        }
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    }
}

/// Whether the kernel has netem (the module is built in, loaded or loadable).
pub fn kernel_has_netem() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let release = release.trim();
    let in_file = |p: String| std::fs::read_to_string(p).map(|t| t.contains("sch_netem")).unwrap_or(false);
    in_file("/proc/modules".into()) || in_file(format!("/lib/modules/{release}/modules.builtin")) || in_file(format!("/lib/modules/{release}/modules.dep"))
}

/// Whether kernel netem gives a link exactly what the userspace path would: no capacity trace,
/// uniform jitter, and netem's ordering (in order with a rate, reordered by jitter without one).
pub fn netem_can(l: &PlannedLink) -> bool {
    let ok = |s: &LinkSpec| {
        s.trace.is_none() && s.jitter == Jitter::Uniform && (s.jitter_ns == 0 || s.reorder == s.rate_bps.is_none()) && s.ber == 0.0 && s.reorder_prob == 0.0
    };
    l.tunnel.is_none() && l.trace_ab.is_none() && l.trace_ba.is_none() && ok(&l.ab) && ok(&l.ba)
}

/// The links the userspace link emulator carries, in the order of its `hdEXPiN` interfaces.
pub fn userspace_links(plan: &Plan, meta: &Meta) -> Vec<usize> {
    (0..plan.links.len()).filter(|&i| plan.links[i].impaired() && plan.built_here(i) && !meta.netem_links.iter().any(|n| n.0 == i)).collect()
}

/// One direction changed: from, to, the new settings in words.
pub type Changed = (String, String, String);

/// Changes a netem link's settings while it runs (the kernel path of [`links::apply`]): the
/// root netem qdisc of each changed direction is replaced in place (`RTM_NEWQDISC` with
/// `NLM_F_REPLACE`), no daemon involved. `None` if `a`–`b` is not a netem link of `exp`.
pub(crate) fn change_netem(
    exp: &str,
    a: &str,
    b: &str,
    dir: links::LinkDir,
    change: &horde_topo::LinkChange,
    clear: bool,
) -> Result<Option<Vec<Changed>>, EmuError> {
    let (mut meta, plan) = load(exp)?;
    let Some(pos) = meta.netem_links.iter().position(|(i, _, _)| {
        let l = &plan.links[*i];
        let (x, y) = (&plan.nodes[l.a.node].name, &plan.nodes[l.b.node].name);
        (x == a && y == b) || (x == b && y == a)
    }) else {
        return Ok(None);
    };
    if change.trace.is_some() {
        return Err(EmuError::Other("netem cannot follow a capacity trace: bring the experiment up with --userspace".into()));
    }
    let li = meta.netem_links[pos].0;
    let l = &plan.links[li];
    let dirs = dir.plan_dirs(plan.nodes[l.a.node].name != a);
    let mut out = Vec::new();
    for d in dirs {
        let old = if d == 0 { &meta.netem_links[pos].1 } else { &meta.netem_links[pos].2 };
        let spec = change.apply(old, clear).map_err(|(f, m)| EmuError::Other(format!("{f}: {m}")))?;
        let probe = PlannedLink { ab: spec.clone(), ba: spec.clone(), trace_ab: None, trace_ba: None, ..l.clone() };
        if !netem_can(&probe) {
            return Err(EmuError::Other(
                "netem cannot give this link these settings (a trace, normal jitter, or an ordering netem does not have): bring the experiment up with --userspace".into(),
            ));
        }
        let port = if d == 0 { &l.a } else { &l.b };
        let nsname = bridges::port_ns(&plan, &bridges::Layout::of(&plan), exp, li, d);
        let fd = ns::open(&nsname)?;
        let ifname = port.ifname.clone();
        ns::within(&fd, || -> Result<(), EmuError> {
            let c = std::ffi::CString::new(ifname.clone()).expect("no NUL");
            // SAFETY: valid C string.
            let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
            if idx == 0 {
                return Err(EmuError::io(&format!("finding {ifname}"), std::io::Error::last_os_error()));
            }
            let mut nl = Nl::open()?;
            nl.netem(idx, &spec, true, &ifname)?;
            nl.flush()
        })??;
        let (from, to) =
            if d == 0 { (&plan.nodes[l.a.node].name, &plan.nodes[l.b.node].name) } else { (&plan.nodes[l.b.node].name, &plan.nodes[l.a.node].name) };
        out.push((from.clone(), to.clone(), fwd::describe(&spec)));
        if d == 0 {
            meta.netem_links[pos].1 = spec;
        } else {
            meta.netem_links[pos].2 = spec;
        }
    }
    save_meta(&meta)?;
    Ok(Some(out))
}

pub struct UpOptions {
    /// Experiment id; a fresh one when `None`.
    pub exp: Option<String>,
    /// Set (by SIGINT/SIGTERM) to abandon the build: what was made is removed again.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Force the userspace path even where netem exists.
    pub userspace: bool,
    /// Make every link changeable with `horde emu link` (each through the link emulator).
    pub live_all: bool,
    /// Build only this machine's part of a topology across machines (`horde emu up --agents`).
    pub part: Option<horde_topo::partition::Part>,
}

pub struct UpReport {
    pub meta: Meta,
    pub plan: Plan,
    /// What `up` changed on the machine besides the experiment (e.g. a raised kernel limit)
    /// and what the topology asked for that deserves a warning (an unbounded queue), one
    /// sentence each, for the caller to show.
    pub notes: Vec<String>,
}

/// A warning for each link direction with a rate whose queue was asked to be unbounded.
fn unbounded_queues(plan: &Plan) -> Vec<String> {
    let mut notes = Vec::new();
    for l in &plan.links {
        let (a, b) = (&plan.nodes[l.a.node].name, &plan.nodes[l.b.node].name);
        for (from, to, s) in [(a, b, &l.ab), (b, a, &l.ba)] {
            if s.queue_unbounded && (s.rate_bps.is_some() || l.trace_ab.is_some() || l.trace_ba.is_some()) {
                notes.push(format!(
                    "link {from} → {to}: queue = \"unbounded\": a load above its rate grows the queue, and the delay, for as long as it lasts \
                     (without `queue` it holds 100 ms at the rate)"
                ));
            }
        }
    }
    notes
}

/// Builds the topology. On failure, everything made so far is removed again.
pub fn up(text: &str, file: &str, opts: &UpOptions) -> Result<UpReport, EmuError> {
    require_root()?;
    let t0 = Instant::now();
    let exp = opts.exp.clone().unwrap_or_else(new_id);
    check_id(&exp)?;
    if state_dir(&exp).exists() || !ns::list(Some(&exp)).is_empty() {
        return Err(EmuError::Other(format!("experiment `{exp}` exists already: take it down with `horde emu down {exp}` or pick another id")));
    }
    let mut plan = horde_topo::plan(text, file, &exp)?;
    if opts.live_all {
        make_live(&mut plan);
    }
    if let Some(part) = &opts.part {
        horde_topo::partition::split(&mut plan, part).map_err(|m| EmuError::Other(format!("this machine's part of the topology: {m}")))?;
    }
    frr::check_installed(&plan)?;
    let with_ns = plan.nodes.iter().filter(|n| !n.kind.is_l2()).count() + 1;
    limits::memory(with_ns, plan.links.len(), frr::daemon_count(&plan))?;
    let taken = external::check(&plan)?;
    let dir = state_dir(&exp);
    std::fs::create_dir_all(dir.join("node")).map_err(|e| EmuError::io(&format!("creating {}", dir.display()), e))?;
    std::fs::write(dir.join("topology.toml"), text).map_err(|e| EmuError::io("saving the topology", e))?;
    // The plan, typed: every later command reads it back instead of planning the text again.
    std::fs::write(dir.join(PLAN_FILE), serde_json::to_vec(&plan).expect("serializable")).map_err(|e| EmuError::io("saving the plan", e))?;
    let mut notes = unbounded_queues(&plan);
    match build(&plan, &exp, file, opts, t0, &taken, &mut notes) {
        Ok(meta) => Ok(UpReport { meta, plan, notes }),
        Err(e) => {
            let _ = down(&exp);
            Err(e)
        }
    }
}

fn interrupted(opts: &UpOptions) -> Result<(), EmuError> {
    match &opts.stop {
        Some(s) if s.load(std::sync::atomic::Ordering::Relaxed) => Err(EmuError::Interrupted),
        _ => Ok(()),
    }
}

/// How long `up` has taken when it finishes a phase (`HORDE_LOG=horde_emu=debug`).
fn phase(name: &str, t0: Instant) {
    tracing::debug!(phase = name, seconds = t0.elapsed().as_secs_f64(), "emu up");
}

fn build(plan: &Plan, exp: &str, file: &str, opts: &UpOptions, t0: Instant, taken: &[external::Saved], notes: &mut Vec<String>) -> Result<Meta, EmuError> {
    ns::prepare()?;
    let impaired: Vec<usize> = (0..plan.links.len()).filter(|&i| plan.links[i].impaired() && plan.built_here(i)).collect();
    let netem = !opts.userspace && !impaired.is_empty() && (kernel_has_netem() || std::env::var("HORDE_EMU_NETEM").is_ok_and(|v| v == "force"));
    // Kernel path for the links netem represents exactly; the userspace path for the rest.
    let netem_links: Vec<usize> = if netem { impaired.iter().copied().filter(|&i| netem_can(&plan.links[i])).collect() } else { Vec::new() };
    let path = if netem_links.is_empty() { LinkPath::Userspace } else { LinkPath::Netem };
    // Namespaces: the fabric first, then one per host and router, then the fabric's other
    // shards (where large switches' bridges go), made on a helper thread so this thread stays
    // where it is.
    let layout = bridges::Layout::of(plan);
    let mut names = vec![(bridges::shard_ns(exp, 0), NsRole::Fabric)];
    let mut which: Vec<Option<usize>> = vec![None; plan.nodes.len()];
    for (i, n) in plan.nodes.iter().enumerate() {
        if !n.kind.is_l2() && n.away.is_none() {
            which[i] = Some(names.len());
            names.push((n.ns.clone(), if n.kind == Kind::Router { NsRole::Router } else { NsRole::Host }));
        }
    }
    let mut slot = vec![0];
    for k in 1..=layout.extra {
        slot.push(names.len());
        names.push((bridges::shard_ns(exp, k), NsRole::Fabric));
    }
    limits::descriptors(names.len())?;
    notes.extend(limits::neighbours(names.len())?);
    let mut spaces = namespaces(&names, opts, plan.ipv6)?;
    phase("namespaces", t0);
    interrupted(opts)?;
    // Bridges (a tree of them for a switch with more ports than one holds).
    let mut bridges = bridges::build(plan, exp, &layout, &mut spaces, &slot)?;
    phase("bridges", t0);
    let n_imp = wire::links(plan, exp, &mut spaces, &which, &mut bridges, &slot, &netem_links, opts)?;
    phase("links", t0);
    interrupted(opts)?;
    external::take(exp, plan, taken, &spaces[0].fd, |n| bridges.port(n).map(|(_, b)| b))?;
    let has_impaired = n_imp > 0;
    addresses_and_routes(plan, &mut spaces, &which, has_impaired, opts)?;
    phase("addresses and routes", t0);
    let netem_raw: Vec<(usize, LinkSpec, LinkSpec)> = netem_links.iter().map(|&i| (i, plan.links[i].ab.clone(), plan.links[i].ba.clone())).collect();
    drop(spaces);
    phase("descriptors closed", t0);
    interrupted(opts)?;
    let base_dir = Path::new(file).parent().map(|p| p.canonicalize().unwrap_or(p.to_path_buf())).unwrap_or_default();
    let mut meta = Meta {
        exp: exp.to_string(),
        name: plan.name.clone(),
        file: file.to_string(),
        base_dir: base_dir.display().to_string(),
        created_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        nodes: plan.nodes.len(),
        links: plan.links.len(),
        impaired_links: n_imp + netem_links.len(),
        path,
        netem_links: netem_raw,
        daemon_pid: None,
        up_seconds: 0.0,
        live_all: opts.live_all,
        down_links: Vec::new(),
        routing_daemons: 0,
        services: 0,
    };
    identity::write_hosts(exp, plan)?;
    for n in plan.nodes.iter().filter(|n| n.overlay && n.away.is_none()) {
        root::make(exp, &n.name)?;
    }
    save_meta(&meta)?;
    phase("hosts files", t0);
    if has_impaired {
        meta.daemon_pid = Some(fwd::spawn_daemon(exp)?);
    }
    interrupted(opts)?;
    meta.routing_daemons = frr::start(exp, plan)?;
    meta.services = services::start(exp, plan)?;
    meta.up_seconds = t0.elapsed().as_secs_f64();
    save_meta(&meta)?;
    Ok(meta)
}

fn save_meta(meta: &Meta) -> Result<(), EmuError> {
    let p = state_dir(&meta.exp).join("meta.json");
    let tmp = p.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(meta).expect("serializable")).map_err(|e| EmuError::io("writing meta.json", e))?;
    std::fs::rename(&tmp, &p).map_err(|e| EmuError::io("writing meta.json", e))
}

/// What `down` or `cleanup` removed (or, dry, would remove).
#[derive(Debug, Default, Clone, Serialize)]
pub struct Removed {
    pub namespaces: usize,
    pub processes: usize,
    pub state_dirs: usize,
    /// What exactly: `namespace NAME`, `process PID (EXE)`, `directory PATH`.
    pub items: Vec<String>,
}

impl Removed {
    fn add(&mut self, o: Removed) {
        self.namespaces += o.namespaces;
        self.processes += o.processes;
        self.state_dirs += o.state_dirs;
        self.items.extend(o.items);
    }
}

/// The state directory of `exp`, if present, checked to be a directory of Horde's state root
/// and not a link to somewhere else.
fn own_state_dir(exp: &str) -> Result<Option<PathBuf>, EmuError> {
    check_id(exp)?;
    let dir = state_dir(exp);
    let meta = match std::fs::symlink_metadata(&dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EmuError::io(&format!("inspecting {}", dir.display()), e)),
    };
    if !meta.is_dir() {
        // A file or a link where a state directory belongs: only the entry itself is ours.
        return Ok(Some(dir));
    }
    let root = Path::new(STATE_DIR).canonicalize().map_err(|e| EmuError::io(&format!("resolving {STATE_DIR}"), e))?;
    let real = dir.canonicalize().map_err(|e| EmuError::io(&format!("resolving {}", dir.display()), e))?;
    if real.parent() != Some(root.as_path()) {
        return Err(EmuError::Other(format!("{} resolves to {}, outside {STATE_DIR}: not removing it", dir.display(), real.display())));
    }
    Ok(Some(dir))
}

/// Takes an experiment down: stops its forwarder and every process inside its namespaces,
/// deletes the namespaces (with them every veth and bridge) and the state directory. With
/// `dry_run`, only says what it would remove.
pub fn down_with(exp: &str, dry_run: bool) -> Result<Removed, EmuError> {
    require_root()?;
    check_id(exp)?;
    let dir = own_state_dir(exp)?;
    // The namespaces are Horde's only if the experiment's state directory is (`up` makes it
    // before any namespace): a `horde-ID-…` namespace someone else made is left alone.
    let ours = dir.as_ref().is_some_and(|d| d.is_dir());
    let names = if ours { ns::list(Some(exp)) } else { Vec::new() };
    // Never the machine's own namespace, whatever a `horde-` mount in /run/netns points at.
    let host = netns_inode(1);
    let inodes: Vec<u64> = names.iter().filter_map(|n| ns::inode(n)).filter(|i| Some(*i) != host).collect();
    // Only processes Horde recorded starting (and its link emulator) are stopped.
    let mut pids = daemons(Some(exp));
    // Every process a command in a node started, wherever it went (each command's cgroup).
    let tree = ours.then(|| horde_sys::cgroup::Tree::open(&exec::experiment_tree(exp))).flatten();
    if ours {
        pids.extend(recorded_processes(exp));
        pids.extend(tree.iter().flat_map(|t| t.pids()));
    }
    pids.sort_unstable();
    pids.dedup();
    let strangers: Vec<i32> = processes_in(&inodes).into_iter().filter(|p| !pids.contains(p)).collect();
    let mut removed = Removed { processes: pids.len(), namespaces: names.len(), state_dirs: dir.is_some() as usize, ..Removed::default() };
    removed.items.extend(pids.iter().map(|p| describe_pid(*p)));
    removed.items.extend(names.iter().map(|n| format!("namespace {n}")));
    removed.items.extend(dir.iter().map(|d| format!("directory {}", d.display())));
    removed
        .items
        .extend(strangers.iter().map(|p| format!("left alone: {} (not started by Horde; it keeps its namespace alive until it exits)", describe_pid(*p))));
    let foreign = ns::list(Some(exp)).len() - names.len();
    if foreign > 0 {
        removed.items.push(format!("left alone: {foreign} namespace(s) named horde-{exp}-… that Horde has no record of (no {})", state_dir(exp).display()));
    }
    let taken = if ours { external::taken(exp) } else { Vec::new() };
    if dry_run {
        removed.items.extend(taken.iter().map(|t| format!("interface {} given back to the machine", t.interface)));
        return Ok(removed);
    }
    // Interfaces of this machine the experiment took go back before their namespace does.
    if ours && !taken.is_empty() {
        let fabric = names.iter().find(|n| **n == format!("{}{exp}", ns::PREFIX)).and_then(|n| ns::open(n).ok());
        removed.items.extend(external::give_back(exp, fabric.as_ref()));
    }
    kill_all(&pids);
    if let Some(t) = &tree {
        let (_, left) = t.remove();
        // the parent of every experiment's groups goes too once no experiment has one
        if let Some(parent) = t.path().parent() {
            let _ = std::fs::remove_dir(parent);
        }
        if left > 0 {
            removed.items.push(format!("still running: {left} process(es) in {} that SIGKILL did not end within 2 s", t.path().display()));
        }
    }
    ns::delete_all(&names)?;
    if let Some(dir) = dir {
        // nodes' roots (overlays of the machine's root) come off before anything is removed
        let left = root::unmount_under(&dir);
        if !left.is_empty() {
            return Err(EmuError::Other(format!(
                "{} stayed mounted; nothing of {} was removed (unmount it, then run down again)",
                left[0].display(),
                dir.display()
            )));
        }
        let r = if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) { std::fs::remove_dir_all(&dir) } else { std::fs::remove_file(&dir) };
        r.map_err(|e| EmuError::io(&format!("removing {}", dir.display()), e))?;
    }
    Ok(removed)
}

/// Copies the files written inside an experiment's nodes (`/run/horde/emu/ID/node/NODE/…`) to
/// `dest/NODE/…` before `down` removes them. Regular files and directories only (a link is not
/// followed); `dest` must not hold anything yet. Returns how many files were kept.
pub fn keep_node_files(exp: &str, dest: &Path) -> Result<usize, EmuError> {
    check_id(exp)?;
    let src = state_dir(exp).join("node");
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => files(&e.path(), out),
                Ok(t) if t.is_file() => out.push(e.path()),
                _ => {}
            }
        }
    }
    let mut found = Vec::new();
    files(&src, &mut found);
    if found.is_empty() {
        return Ok(0);
    }
    if dest.exists() && std::fs::read_dir(dest).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(EmuError::Other(format!(
            "{} exists and is not empty: name another place for the nodes' files with --keep-to DIR, or delete them with --purge",
            dest.display()
        )));
    }
    for f in &found {
        let rel = f.strip_prefix(&src).unwrap_or(f);
        let to = dest.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| EmuError::io(&format!("creating {}", parent.display()), e))?;
        }
        std::fs::copy(f, &to).map_err(|e| EmuError::io(&format!("keeping {}", f.display()), e))?;
    }
    Ok(found.len())
}

/// [`down_with`], for real.
pub fn down(exp: &str) -> Result<Removed, EmuError> {
    down_with(exp, false)
}

/// Experiments present on this machine: from state directories and namespaces both, so one
/// that crashed half-way is listed too. Entries that are not valid ids are not Horde's.
pub fn experiments() -> Vec<String> {
    // Experiments Horde recorded (a state directory); namespaces of the name alone are not
    // enough (anyone with root can name a namespace horde-…).
    let mut v: Vec<String> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(STATE_DIR) {
        v.extend(rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()));
    }
    v.retain(|e| check_id(e).is_ok());
    v.sort();
    v.dedup();
    v
}

/// What `cleanup` acts on.
#[derive(Debug, Clone)]
pub enum Target {
    /// These experiments.
    Ids(Vec<String>),
    /// Every experiment on the machine, and link-emulator daemons whose experiment is gone.
    All,
}

/// Removes what Horde's emulator left behind after a crash, for the given experiments or all.
pub fn cleanup(target: &Target, dry_run: bool) -> Result<Removed, EmuError> {
    require_root()?;
    let mut total = Removed::default();
    let ids = match target {
        Target::Ids(ids) => {
            ids.iter().try_for_each(|i| check_id(i))?;
            ids.clone()
        }
        Target::All => experiments(),
    };
    for exp in &ids {
        total.add(down_with(exp, dry_run)?);
    }
    if matches!(target, Target::All) {
        let orphans = daemons(None);
        total.processes += orphans.len();
        total.items.extend(orphans.iter().map(|p| describe_pid(*p)));
        if !dry_run {
            kill_all(&orphans);
        }
    }
    Ok(total)
}

/// The namespace of a node, or an error that lists the nodes.
pub fn node_ns(plan: &Plan, node: &str) -> Result<String, EmuError> {
    let i = plan.node(node).ok_or_else(|| {
        let some: Vec<&str> = plan.nodes.iter().filter(|n| !n.kind.is_l2()).take(8).map(|n| n.name.as_str()).collect();
        EmuError::Other(format!("no node `{node}` in experiment {} (nodes: {}{})", plan.exp, some.join(", "), if plan.nodes.len() > 8 { ", …" } else { "" }))
    })?;
    if plan.nodes[i].kind.is_l2() {
        return Err(EmuError::Other(format!("`{node}` is a {:?}; switches and hubs are bridges with no namespace of their own", plan.nodes[i].kind)));
    }
    if let Some(m) = &plan.nodes[i].away {
        return Err(EmuError::Other(format!("`{node}` runs on machine {m}, not here: reach it through that machine's agent")));
    }
    Ok(plan.nodes[i].ns.clone())
}

/// Opens a node's namespace (for exec and for placing players).
pub fn open_node(exp: &str, plan: &Plan, node: &str) -> Result<File, EmuError> {
    let name = node_ns(plan, node)?;
    File::open(ns::path(&name)).map_err(|e| EmuError::io(&format!("opening namespace of {node} in {exp}"), e))
}
