//! `horde emu`: the emulated environment (namespaces, veth, bridges, impaired links).

use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Context};
use horde_emu::fwd::{self, Request};

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
        /// Start the command in the background and return (its output goes to a file in the
        /// node's directory; what it starts runs on until it ends or `horde emu down`), as
        /// `docker exec -d` does. Without it, whatever the command leaves running ends with it
        /// (each command runs in a PID namespace of its own)
        #[arg(long)]
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
                    let n = horde_emu::keep_node_files(&id, &dest).map_err(|e| bad_input(anyhow!(e)))?;
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
        Cmd::Exec { id, node, command, detach: true, .. } => {
            let (pid, out) = horde_emu::exec::start_background(&id, &node, &command).map_err(emu_err)?;
            crate::output::out(&format!("started `{}` in {node} (pid {pid}); its output: {}; `horde emu down {id}` stops it\n", command[0], out.display()))?;
            Ok(0)
        }
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
    }
}

fn up(file: &Path, id: Option<String>, userspace: bool, live_all: bool, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Outcome {
    if let Some(id) = &id {
        horde_emu::check_id(id).map_err(emu_err)?;
    }
    let text = horde_model::files::read_text(file, horde_model::files::MAX_TOML, "topology files").context("reading the topology").map_err(bad_input)?;
    let opts = horde_emu::UpOptions { exp: id, userspace, live_all, stop: Some(stop), part: None };
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
    if m.services > 0 {
        say!("  {} service(s) started in their nodes (output: service-K.out in each node's directory)", m.services);
    }
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
    let inherit = || std::process::Stdio::inherit();
    let mut p = horde_emu::exec::spawn(id, node, command, [inherit(), inherit(), inherit()]).map_err(emu_err)?;
    let status = p.wait().with_context(|| format!("waiting for `{}` in {node}", command[0]))?;
    Ok(status.code().map(|c| c as u8).unwrap_or(1))
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
    let op = a.op()?;
    horde_topo::check_exp_id(&a.id).map_err(|m| bad_input(anyhow!(m)))?;
    let r = match horde_emu::links::apply(&a.id, &a.a, &a.b, &op) {
        Ok(r) => r,
        Err(e) if matches!(op, horde_emu::links::LinkOp::Down | horde_emu::links::LinkOp::Up) => return Err(emu_err(e)),
        Err(e) => return Err(bad_input(anyhow!(e))),
    };
    if r.links.is_empty() {
        crate::output::out(&(r.lines.join("\n") + "\n"))?;
    } else if a.json {
        crate::output::out(&format!("{}\n", serde_json::to_string_pretty(&r.links).expect("serializable")))?;
    } else {
        crate::output::out(&fwd::links_table(&r.links))?;
    }
    Ok(0)
}
