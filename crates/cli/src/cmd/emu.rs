//! `horde emu`: the emulated environment (namespaces, veth, bridges, impaired links).

use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Context};
use horde_emu::fwd::{self, Request};
use horde_topo::{RawImpair, RawLoss};

pub use super::emu_agents::{Across, LinkArgs};
use crate::{bad_input, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once
pub enum Cmd {
    /// Builds a topology file (see docs/topology.md) and prints its experiment id. Needs root.
    Up {
        /// Topology .toml file
        file: PathBuf,
        /// Experiment id (1..=6 lowercase letters/digits); a fresh one by default
        #[arg(long)]
        id: Option<String>,
        /// Emulate every impaired link in userspace, even where the kernel has netem
        #[arg(long)]
        userspace: bool,
        /// Make every link changeable with `horde emu link` (each then runs through the
        /// userspace link emulator; without it, only impaired links and links marked
        /// `live = true` can be changed)
        #[arg(long)]
        live: bool,
        #[command(flatten)]
        across: Across,
    },
    /// Takes an experiment down: its processes, namespaces, links, bridges and state.
    Down {
        /// Experiment id(s)
        #[arg(required = true)]
        ids: Vec<String>,
        /// Also delete files written inside the nodes (logs of `emu exec … horde recv --log …`);
        /// by default they are moved to ./horde-emu-ID (or --keep-to) first
        #[arg(long)]
        purge: bool,
        /// Where to move the nodes' files (default: ./horde-emu-ID)
        #[arg(long, value_name = "DIR", conflicts_with = "purge")]
        keep_to: Option<PathBuf>,
        #[command(flatten)]
        across: Across,
    },
    /// Lists running experiments; with an id, that experiment's nodes and addresses.
    Ls {
        /// Experiment id (from `horde emu up`)
        id: Option<String>,
        /// Print the experiment's topology as a Graphviz graph (`| dot -Tsvg > topo.svg`)
        #[arg(long, requires = "id")]
        dot: bool,
        /// Every node on its own row (and in the graph); by default a group of more than 16
        /// nodes (`count = N`) is one row and one vertex
        #[arg(long, requires = "id")]
        all: bool,
        #[command(flatten)]
        across: Across,
    },
    /// Runs a command inside a node (its network namespace; working directory: the node's own directory).
    Exec {
        /// Experiment id (from `horde emu up`)
        id: String,
        /// Host or router name (as in `horde emu ls ID`)
        node: String,
        /// The command and its arguments, after `--`
        #[arg(last = true, required = true)]
        command: Vec<String>,
        /// With --agents: stop the command after this many seconds
        #[arg(long, default_value_t = 60, requires = "agents")]
        timeout: u64,
        /// With --agents: start the command in the background and return (its output goes to a
        /// file in the node's directory; `horde emu down` stops it), as `docker exec -d` does
        #[arg(long, requires = "agents")]
        detach: bool,
        #[command(flatten)]
        across: Across,
    },
    /// Copies a file to or from a node's own directory: `horde emu cp ID ./f NODE:f` or `... NODE:f ./f`.
    Cp {
        /// Experiment id (from `horde emu up`)
        id: String,
        /// A local path, or NODE:PATH inside the node's directory
        src: String,
        /// A local path (or directory), or NODE:PATH
        dst: String,
    },
    /// Changes an emulated link's impairments while it runs, or (with no option) shows its counters.
    Link(LinkArgs),
    /// Removes what Horde's emulator left behind after a crash (namespaces, links, bridges, helper processes) for the given experiments, or with --all for every one; it touches only Horde's own namespaces, state under /run/horde/emu and processes it can prove are its own
    Cleanup {
        /// Experiment id(s) to clean up
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        ids: Vec<String>,
        /// Every experiment on this machine, and link emulators whose experiment is gone
        #[arg(long)]
        all: bool,
        /// Only list what would be removed
        #[arg(long)]
        dry_run: bool,
    },
    /// (internal) the userspace link emulator of one experiment
    #[command(hide = true)]
    Daemon {
        /// Experiment id
        id: String,
    },
}

fn exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("horde"))
}

fn emu_err(e: horde_emu::EmuError) -> crate::Failure {
    match e {
        horde_emu::EmuError::Topology(_) | horde_emu::EmuError::BadId(_) => bad_input(anyhow!(e)),
        horde_emu::EmuError::Interrupted => crate::Failure { code: 130, err: anyhow!(e), quiet: false },
        e => crate::Failure::from(anyhow!(e)),
    }
}

pub fn run(args: Args, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Outcome {
    match args.cmd {
        Cmd::Up { file, id, live, across: Across { agents: Some(agents), credentials }, .. } => {
            super::emu_agents::up(&file, id, live, &agents, credentials, &stop)
        }
        Cmd::Down { ids, across: Across { agents: Some(agents), credentials }, .. } => super::emu_agents::down(&ids, &agents, credentials, &stop),
        Cmd::Ls { id: None, across: Across { agents: Some(agents), credentials }, .. } => super::emu_agents::ls(&agents, credentials, &stop),
        Cmd::Exec { id, node, command, timeout, detach, across: Across { agents: Some(agents), credentials } } => {
            super::emu_agents::exec(&id, &node, &command, timeout, detach, &agents, credentials, &stop)
        }
        Cmd::Link(a) if a.across.agents.is_some() => super::emu_agents::link(a, &stop),
        Cmd::Up { file, id, userspace, live, .. } => up(&file, id, userspace, live, stop),
        Cmd::Down { ids, purge, keep_to, .. } => {
            for id in ids {
                horde_emu::check_id(&id).map_err(emu_err)?;
                if !purge {
                    let dest = keep_to.clone().unwrap_or_else(|| PathBuf::from(format!("horde-emu-{id}")));
                    let n = keep_node_files(&id, &dest)?;
                    if n > 0 {
                        outln!("{id}: kept {n} file(s) written inside its nodes in {} (--purge deletes them)", dest.display())?;
                    }
                }
                let r = horde_emu::down(&id).map_err(emu_err)?;
                if r.namespaces == 0 && r.state_dirs == 0 {
                    return Err(bad_input(anyhow!("no experiment `{id}` here (see `horde emu ls`)")));
                }
                outln!("{id}: down ({} namespaces, {} processes removed)", r.namespaces, r.processes)?;
            }
            Ok(0)
        }
        Cmd::Ls { id: None, .. } => ls(),
        Cmd::Ls { id: Some(_), across: Across { agents: Some(_), .. }, .. } => {
            Err(bad_input(anyhow!("with --agents, `horde emu ls` lists every agent's parts; a part's nodes and addresses: `horde emu ls PART` on its machine")))
        }
        Cmd::Ls { id: Some(id), dot: true, all, .. } => {
            horde_topo::check_exp_id(&id).map_err(|m| bad_input(anyhow!(m)))?;
            let (_, plan) = horde_emu::load(&id).map_err(emu_err)?;
            crate::output::out(&horde_topo::dot(&plan, fwd::describe, grouping(all)))?;
            Ok(0)
        }
        Cmd::Ls { id: Some(id), dot: false, all, .. } => ls_one(&id, grouping(all)),
        Cmd::Exec { id, node, command, .. } => exec(&id, &node, &command),
        Cmd::Cp { id, src, dst } => cp(&id, &src, &dst),
        Cmd::Link(a) => link(a),
        Cmd::Cleanup { ids, all, dry_run } => {
            let target = if all { horde_emu::Target::All } else { horde_emu::Target::Ids(ids) };
            let r = horde_emu::cleanup(&target, dry_run).map_err(emu_err)?;
            let verb = if dry_run { "would remove" } else { "removed" };
            let mut o = String::new();
            for item in &r.items {
                o.push_str(&format!("  {verb} {item}\n"));
            }
            o.push_str(&format!("cleanup: {verb} {} namespaces, {} processes, {} experiment directories\n", r.namespaces, r.processes, r.state_dirs));
            crate::output::out(&o)?;
            Ok(0)
        }
        Cmd::Daemon { id } => {
            horde_emu::fwd::run_daemon(&id).map_err(|e| anyhow!(e))?;
            Ok(0)
        }
    }
}

fn up(file: &Path, id: Option<String>, userspace: bool, live_all: bool, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Outcome {
    if let Some(id) = &id {
        horde_emu::check_id(id).map_err(emu_err)?;
    }
    let text = horde_model::files::read_text(file, horde_model::files::MAX_TOML, "topology files").context("reading the topology").map_err(bad_input)?;
    let opts = horde_emu::UpOptions { exp: id, daemon_exe: exe(), userspace, live_all, stop: Some(stop), part: None };
    let r = horde_emu::up(&text, &file.display().to_string(), &opts).map_err(emu_err)?;
    for n in &r.notes {
        eprintln!("horde emu: {n}");
    }
    let m = &r.meta;
    let hosts = r.plan.nodes.iter().filter(|n| !n.kind.is_l2()).count();
    say!(
        "{}: {} nodes ({} with a namespace), {} links ({} emulated: {} by kernel netem, {} by the userspace link emulator) up in {:.2} s",
        m.name,
        m.nodes,
        hosts,
        m.links,
        m.impaired_links,
        m.netem_links.len(),
        m.impaired_links - m.netem_links.len(),
        m.up_seconds
    );
    say!("  horde emu ls {0}    horde emu exec {0} NODE -- CMD    horde emu down {0}", m.exp);
    outln!("{}", m.exp)?;
    Ok(0)
}

fn ls() -> Outcome {
    let exps = horde_emu::experiments();
    if exps.is_empty() {
        outln!("no experiments running")?;
        return Ok(0);
    }
    let mut o = format!("{:<8} {:<16} {:>6} {:>6} {:>9} {:>8}  status\n", "id", "name", "nodes", "links", "emulated", "up (s)");
    for e in exps {
        match horde_emu::load(&e) {
            Ok((m, _)) => {
                let daemon_ok = m.daemon_pid.is_none_or(|p| !horde_emu::daemons(Some(&e)).is_empty() || Path::new(&format!("/proc/{p}")).exists());
                let status = if daemon_ok { "up" } else { "broken: link emulator gone (horde emu down)" };
                o.push_str(&format!("{:<8} {:<16} {:>6} {:>6} {:>9} {:>8.2}  {status}\n", e, m.name, m.nodes, m.links, m.impaired_links, m.up_seconds));
            }
            Err(_) => o.push_str(&format!(
                "{:<8} {:<16} {:>6} {:>6} {:>9} {:>8}  leftover: {} namespaces (horde emu cleanup {e})\n",
                e,
                "?",
                "?",
                "?",
                "?",
                "?",
                horde_emu::ns::list(Some(&e)).len()
            )),
        }
    }
    crate::output::out(&o)?;
    Ok(0)
}

fn grouping(all: bool) -> Option<usize> {
    (!all).then_some(horde_topo::GROUP_ABOVE)
}

fn ls_one(id: &str, group_above: Option<usize>) -> Outcome {
    let (m, plan) = horde_emu::load(id).map_err(emu_err)?;
    let mut o = format!("{} ({}), from {}\n{:<16} {:<7} {:<22} addresses\n", m.exp, m.name, m.file, "node", "kind", "namespace");
    let addrs = horde_topo::addresses(&plan);
    let group = horde_topo::collapsed(&plan, group_above);
    let mut folded = 0usize;
    for (i, n) in plan.nodes.iter().enumerate() {
        let kind = format!("{:?}", n.kind).to_lowercase();
        match group[i] {
            // a large group: one row, its first and last member
            Some((_, members)) if members[0] == i => {
                let last = members[members.len() - 1];
                let name = format!("{} … {}", n.name, plan.nodes[last].name);
                let ns = format!("×{} ({} …)", members.len(), n.ns);
                let range = match (addrs[i].first(), addrs[last].last()) {
                    (Some(a), Some(b)) => format!("{a} … {b}"),
                    _ => String::new(),
                };
                o.push_str(&format!("{name:<16} {kind:<7} {ns:<22} {range}\n"));
                folded += 1;
            }
            Some(_) => {}
            None => {
                let a: Vec<String> = addrs[i].iter().map(|a| a.to_string()).collect();
                let ns = match &n.external {
                    Some(x) => format!("(bridge {}, interface {})", n.ns, x.interface),
                    None if n.kind.is_l2() => format!("(bridge {})", n.ns),
                    None => n.ns.clone(),
                };
                o.push_str(&format!("{:<16} {kind:<7} {ns:<22} {}\n", n.name, a.join(" ")));
            }
        }
    }
    if folded > 0 {
        o.push_str(&format!(
            "({folded} group(s) of more than {} nodes on one row each: `horde emu ls {id} --all` lists every node)\n",
            horde_topo::GROUP_ABOVE
        ));
    }
    if m.impaired_links > 0 {
        if let Ok(r) = fwd::request(id, &Request::Stats) {
            o.push_str(&fwd::links_table(&r.links));
        }
    }
    for &li in &m.down_links {
        if let Some(l) = plan.links.get(li) {
            o.push_str(&format!(
                "link {} – {}: down (horde emu link {id} {} {} --up)\n",
                plan.nodes[l.a.node].name, plan.nodes[l.b.node].name, plan.nodes[l.a.node].name, plan.nodes[l.b.node].name
            ));
        }
    }
    crate::output::out(&o)?;
    Ok(0)
}

fn exec(id: &str, node: &str, command: &[String]) -> Outcome {
    use std::os::unix::process::CommandExt;
    horde_emu::require_root().map_err(emu_err)?;
    let (_, plan) = horde_emu::load(id).map_err(emu_err)?;
    let nsf = horde_emu::open_node(id, &plan, node).map_err(emu_err)?;
    let dir = horde_emu::node_dir(id, node);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // `horde` inside a node is this binary, whether or not it is on root's PATH (sudo resets
    // PATH; a freshly built binary is in target/release).
    let program = if command[0] == "horde" && which("horde").is_none() {
        std::env::current_exe().context("locating the horde binary")?
    } else {
        PathBuf::from(&command[0])
    };
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&command[1..]).current_dir(&dir).env("HORDE_EXPERIMENT", id).env("HORDE_NODE", node);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&nsf);
    // the node's hostname, hosts file, /sys and state directories
    let identity = horde_emu::identity::Identity::prepare(id, &plan, node).map_err(emu_err)?;
    // SAFETY: getpid (before the fork), prctl, getppid, setns and Identity::apply are
    // async-signal-safe; fd stays open until spawn returns.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            // The command ends with `emu exec` (SIGTERM, so it can clean up), even when that is
            // SIGKILLed.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                return Err(std::io::Error::other("horde emu exec exited"));
            }
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            identity.apply()
        });
    }
    let mut child = cmd.spawn().with_context(|| format!("running `{}` in {node}", command[0]))?;
    // Recorded as Horde's, so that `down` and `cleanup` stop it (and no process Horde did not
    // start).
    let _ = horde_emu::record_process(id, child.id());
    let status = child.wait();
    horde_emu::forget_process(id, child.id());
    let status = status.with_context(|| format!("waiting for `{}` in {node}", command[0]))?;
    Ok(status.code().map(|c| c as u8).unwrap_or(1))
}

/// Copies the files written inside an experiment's nodes (`/run/horde/emu/ID/node/NODE/…`) to
/// `dest/NODE/…` before `down` removes them. Regular files and directories only (a link is
/// not followed). Returns how many files were kept.
fn keep_node_files(id: &str, dest: &Path) -> Result<usize, crate::Failure> {
    let src = horde_emu::node_dir(id, "x").parent().map(Path::to_path_buf).unwrap_or_default();
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
        return Err(bad_input(anyhow!(
            "{} exists and is not empty: name another place for the nodes' files with --keep-to DIR, or delete them with --purge",
            dest.display()
        )));
    }
    for f in &found {
        let rel = f.strip_prefix(&src).unwrap_or(f);
        let to = dest.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::copy(f, &to).with_context(|| format!("keeping {}", f.display()))?;
    }
    Ok(found.len())
}

/// The first `name` on PATH, if any.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

/// `NODE:path` → (node, path inside the node's directory).
fn node_path(s: &str) -> Option<(&str, &str)> {
    let (n, p) = s.split_once(':')?;
    (!n.is_empty() && !n.contains('/')).then_some((n, p))
}

fn inside(id: &str, node: &str, p: &str) -> Result<PathBuf, crate::Failure> {
    let rel = Path::new(p);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(bad_input(anyhow!("`{node}:{p}`: paths in a node are relative to its own directory and may not contain `..`")));
    }
    let dir = horde_emu::node_dir(id, node);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.join(rel))
}

fn cp(id: &str, src: &str, dst: &str) -> Outcome {
    let (_, plan) = horde_emu::load(id).map_err(emu_err)?;
    let resolve = |s: &str| -> Result<PathBuf, crate::Failure> {
        match node_path(s) {
            Some((node, p)) => {
                horde_emu::node_ns(&plan, node).map_err(emu_err)?;
                inside(id, node, p)
            }
            None => Ok(PathBuf::from(s)),
        }
    };
    if node_path(src).is_none() && node_path(dst).is_none() {
        return Err(bad_input(anyhow!("one of SRC and DST must be NODE:PATH")));
    }
    let from = resolve(src)?;
    let mut to = resolve(dst)?;
    if to.is_dir() {
        to = to.join(from.file_name().ok_or_else(|| bad_input(anyhow!("`{src}` names no file")))?);
    }
    let n = std::fs::copy(&from, &to).with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    outln!("{} → {} ({n} bytes)", from.display(), to.display())?;
    Ok(0)
}

fn link(a: LinkArgs) -> Outcome {
    if a.down || a.up {
        horde_topo::check_exp_id(&a.id).map_err(|m| bad_input(anyhow!(m)))?;
        if a.dir != "both" {
            return Err(bad_input(anyhow!("--dir: a link goes down or up as a whole (both directions); leave --dir out")));
        }
        let changed = horde_emu::state::set_link_state(&a.id, &a.a, &a.b, a.up).map_err(emu_err)?;
        crate::output::out(&(changed.join("\n") + "\n"))?;
        return Ok(0);
    }
    let set = RawImpair {
        rate: a.rate,
        delay: a.delay,
        jitter: a.jitter,
        loss: a.loss.map(RawLoss::Percent),
        duplicate: a.duplicate,
        corrupt: a.corrupt,
        queue: a.queue,
        reorder: None,
        ber: a.ber,
        reorder_prob: a.reorder_prob,
        reorder_gap: a.reorder_gap,
        trace: a.trace.map(|t| std::fs::canonicalize(&t).map(|p| p.display().to_string()).unwrap_or(t)),
    };
    // Checked here, with the topology file's rules, before anything is asked of the link.
    let change = horde_topo::LinkChange::parse(&set).map_err(|(f, m)| bad_input(anyhow!("--{f}: {m}")))?;
    horde_topo::check_exp_id(&a.id).map_err(|m| bad_input(anyhow!(m)))?;
    // A link on the kernel path: its netem qdiscs are replaced in place (no daemon needed).
    if !change.is_empty() || a.clear {
        if let Some(changed) = horde_emu::change_netem(&a.id, &a.a, &a.b, &a.dir, &change, a.clear).map_err(|e| bad_input(anyhow!(e)))? {
            let mut s = String::new();
            for (from, to, spec) in changed {
                s.push_str(&format!("{from} → {to}: {spec} (kernel netem, replaced in place)\n"));
            }
            crate::output::out(&s)?;
            return Ok(0);
        }
    }
    let (meta, _) = horde_emu::load(&a.id).map_err(emu_err)?;
    if meta.daemon_pid.is_none() {
        return Err(bad_input(anyhow!(
            "{} has no link going through the link emulator, so no link between {} and {} can be changed: only impaired links and links with `live = true` can be; bring the experiment up with `horde emu up FILE --live` to make every link changeable",
            a.id,
            a.a,
            a.b
        )));
    }
    let req = if change.is_empty() && !a.clear {
        Request::Stats
    } else {
        Request::Set { a: a.a.clone(), b: a.b.clone(), dir: a.dir, change: Box::new(change), clear: a.clear }
    };
    let r = fwd::request(&a.id, &req).map_err(|e| bad_input(anyhow!(e)))?;
    let links: Vec<_> = r.links.into_iter().filter(|l| (l.a == a.a && l.b == a.b) || (l.a == a.b && l.b == a.a)).collect();
    if links.is_empty() {
        return Err(bad_input(anyhow!(
            "no emulated link between {} and {} in {}: only impaired links and links with `live = true` can be changed; bring the experiment up with `horde emu up FILE --live` to make every link changeable",
            a.a,
            a.b,
            a.id
        )));
    }
    if a.json {
        crate::output::out(&format!("{}\n", serde_json::to_string_pretty(&links).expect("serializable")))?;
    } else {
        crate::output::out(&fwd::links_table(&links))?;
    }
    Ok(0)
}
