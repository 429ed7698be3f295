//! `horde emu up|down|ls|exec --agents …`: one emulated network across machines, each part
//! built by the agent on its machine (see `horde_agent::emu`).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{anyhow, Context};
use horde_agent::msg::EmuReply;

use crate::{bad_input, Outcome};

/// One experiment across machines: the agents that build its parts.
#[derive(clap::Args, Debug, Clone)]
pub struct Across {
    /// Across machines: the agents (`horde agent --emu`) that build the experiment's parts,
    /// HOST:PORT,… (their IPv4 addresses as the other machines reach them: the tunnels between
    /// the parts run between these addresses), or @FILE. A node's `machine` in the topology
    /// places it; the rest are placed so that few links cross machines
    #[arg(long, value_name = "LIST")]
    pub agents: Option<String>,
    /// With --agents: the controller's credentials directory (ca.pem, controller.pem, controller.key)
    #[arg(long, value_name = "DIR", env = "HORDE_CREDENTIALS")]
    pub credentials: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct LinkArgs {
    /// Experiment id (from `horde emu up`)
    pub id: String,
    /// One end of the link (node name)
    pub a: String,
    /// The other end
    pub b: String,
    /// Direction to change: ab (from the first node named), ba, or both
    #[arg(long, default_value = "both")]
    pub dir: horde_emu::links::LinkDir,
    /// Rate, e.g. 10mbit
    #[arg(long)]
    pub rate: Option<String>,
    /// One-way delay, e.g. 50ms
    #[arg(long)]
    pub delay: Option<String>,
    /// Jitter around the delay, e.g. 5ms
    #[arg(long)]
    pub jitter: Option<String>,
    /// Random loss, e.g. 1%
    #[arg(long)]
    pub loss: Option<String>,
    /// Duplication, e.g. 0.1%
    #[arg(long)]
    pub duplicate: Option<String>,
    /// Corruption (a flipped bit), e.g. 0.1%
    #[arg(long)]
    pub corrupt: Option<String>,
    /// Queue limit before tail drop, e.g. 64kB; `default` (100 ms at the rate, as when none is
    /// given) or `unbounded`
    #[arg(long)]
    pub queue: Option<String>,
    /// Bit-error rate, e.g. 1e-6 (each bit flipped independently)
    #[arg(long)]
    pub ber: Option<String>,
    /// Reordering as netem's: an eligible packet goes at once, skipping its delay, e.g. 25%
    #[arg(long)]
    pub reorder_prob: Option<String>,
    /// Every this-many-th packet is eligible for --reorder-prob (default 1: every packet)
    #[arg(long)]
    pub reorder_gap: Option<u32>,
    /// Mahimahi trace file for capacity
    #[arg(long)]
    pub trace: Option<String>,
    /// Start from no impairment instead of the current settings
    #[arg(long)]
    pub clear: bool,
    /// Take the link down (both ends, as a pulled cable: routing daemons see it fail); with a
    /// group, every link between the two
    #[arg(long, conflicts_with_all = ["up", "rate", "delay", "jitter", "loss", "duplicate", "corrupt", "queue", "ber", "reorder_prob", "reorder_gap", "trace", "clear"])]
    pub down: bool,
    /// Bring a link taken down back up (the nodes' static routes through it return)
    #[arg(long, conflicts_with_all = ["rate", "delay", "jitter", "loss", "duplicate", "corrupt", "queue", "ber", "reorder_prob", "reorder_gap", "trace", "clear"])]
    pub up: bool,
    /// Print the link's counters (after any change) as JSON, each direction's fields as in
    /// docs/topology.md, instead of the table
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub across: Across,
}

fn agents<'a>(
    list: &str,
    credentials: &'a Option<PathBuf>,
    stop: &'a AtomicBool,
    specs: &'a mut Vec<horde_agent::controller::AgentSpec>,
) -> Result<horde_agent::emu::Agents<'a>, crate::Failure> {
    *specs = horde_agent::controller::parse_agents(list).map_err(bad_input)?;
    let credentials = credentials.as_deref().ok_or_else(|| {
        bad_input(anyhow!("--agents needs --credentials DIR (ca.pem, controller.pem, controller.key from `horde agent keygen`), or HORDE_CREDENTIALS"))
    })?;
    Ok(horde_agent::emu::Agents { agents: specs, credentials, stop, note: &|m| say!("horde emu: {m}") })
}

pub fn up(file: &Path, id: Option<String>, live: bool, list: &str, credentials: Option<PathBuf>, stop: &AtomicBool) -> Outcome {
    let text = horde_model::files::read_text(file, horde_model::files::MAX_TOML, "topology files").context("reading the topology").map_err(bad_input)?;
    let mut specs = Vec::new();
    let a = agents(list, &credentials, stop, &mut specs)?;
    let b = horde_agent::emu::up(&a, &text, &file.display().to_string(), id, live)?;
    let nodes: usize = b.parts.iter().map(|p| p.nodes.len()).sum();
    let mut o = format!("{}: {nodes} nodes on {} machines, {} link(s) between machines (VXLAN tunnels)\n", b.exp, b.parts.len(), b.cut.len());
    for p in &b.parts {
        let shown: Vec<&str> = p.nodes.iter().take(12).map(String::as_str).collect();
        o.push_str(&format!(
            "  {} ({}): part {}, {} nodes ({}{}), {} tunnel(s), up in {:.2} s\n",
            p.agent,
            p.addr,
            p.local,
            p.nodes.len(),
            shown.join(", "),
            if p.nodes.len() > shown.len() { ", …" } else { "" },
            p.tunnels,
            p.seconds
        ));
    }
    for (a, b2, ma, mb) in &b.cut {
        o.push_str(&format!("  link {a} ({ma}) – {b2} ({mb}): tunnelled, each direction impaired where it leaves\n"));
    }
    o.push_str(&format!("exec: horde emu exec {} NODE --agents {list} -- CMD; down: horde emu down {} --agents {list}\n", b.exp, b.exp));
    crate::output::out(&o)?;
    crate::output::out(&format!("{}\n", b.exp))?;
    Ok(0)
}

pub fn down(ids: &[String], list: &str, credentials: Option<PathBuf>, stop: &AtomicBool) -> Outcome {
    let mut specs = Vec::new();
    let a = agents(list, &credentials, stop, &mut specs)?;
    let mut failed = false;
    for id in ids {
        let answers = horde_agent::emu::down(&a, id).map_err(bad_input)?;
        let mut found = 0;
        for (name, r) in answers {
            match r {
                Ok(EmuReply::Down { local, namespaces, processes }) => {
                    found += 1;
                    outln!("{id}: {name}: part {local} down ({namespaces} namespaces, {processes} processes removed)")?;
                }
                Ok(EmuReply::Failed { message }) if message.contains("has no part") => outln!("{id}: {name}: no part here")?,
                Ok(other) => {
                    failed = true;
                    outln!("{id}: {name}: {}", describe(&other))?;
                }
                Err(e) => {
                    failed = true;
                    outln!("{id}: {name}: {e}")?;
                }
            }
        }
        if found == 0 && !failed {
            return Err(bad_input(anyhow!("no agent has a part of experiment {id} (see `horde emu ls --agents …`)")));
        }
    }
    Ok(if failed { 1 } else { 0 })
}

pub fn ls(list: &str, credentials: Option<PathBuf>, stop: &AtomicBool) -> Outcome {
    let mut specs = Vec::new();
    let a = agents(list, &credentials, stop, &mut specs)?;
    let mut o = String::new();
    for (name, r) in horde_agent::emu::ls(&a)? {
        match r {
            Ok(EmuReply::Ls { parts }) if parts.is_empty() => o.push_str(&format!("{name}: no part\n")),
            Ok(EmuReply::Ls { parts }) => {
                for (exp, local) in parts {
                    o.push_str(&format!("{name}: experiment {exp}, part {local}\n"));
                }
            }
            Ok(other) => o.push_str(&format!("{name}: {}\n", describe(&other))),
            Err(e) => o.push_str(&format!("{name}: {e}\n")),
        }
    }
    crate::output::out(&o)?;
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
pub fn exec(id: &str, node: &str, command: &[String], timeout: u64, detach: bool, list: &str, credentials: Option<PathBuf>, stop: &AtomicBool) -> Outcome {
    if !(1..=600).contains(&timeout) {
        return Err(bad_input(anyhow!("--timeout must be 1..=600 seconds")));
    }
    let mut specs = Vec::new();
    let a = agents(list, &credentials, stop, &mut specs)?;
    let (_, r) = horde_agent::emu::exec(&a, id, node, command, Duration::from_secs(timeout), detach).map_err(bad_input)?;
    let EmuReply::Exec { code, stdout, stderr, timed_out, .. } = r else { unreachable!("exec answers with Exec") };
    crate::output::out(&stdout)?;
    eprint!("{stderr}");
    if timed_out {
        say!("horde emu: `{}` in {node} was stopped after {timeout} s (--timeout)", command.join(" "));
        return Ok(124);
    }
    if detach {
        return Ok(0);
    }
    Ok(code.unwrap_or(1).clamp(0, 255) as u8)
}

/// `horde emu link ID A B … --agents …`: every machine that has the link changes the
/// directions that leave it, and prints its counters.
pub fn link(a: LinkArgs, stop: &AtomicBool) -> Outcome {
    if a.trace.is_some() {
        return Err(bad_input(anyhow!("--trace: a capacity trace is a file on this machine; across machines, give it in the topology of a single machine")));
    }
    // checked here with the topology's rules before anything is asked of the agents
    let op = a.op()?;
    let mut specs = Vec::new();
    let agents_list = a.across.agents.clone().unwrap_or_default();
    let ag = agents(&agents_list, &a.across.credentials, stop, &mut specs)?;
    let answers = horde_agent::emu::link(&ag, &a.id, &a.a, &a.b, &op).map_err(bad_input)?;
    let mut o = String::new();
    for (name, output) in answers {
        o.push_str(&format!("{name}:\n{output}"));
        if !output.ends_with('\n') {
            o.push('\n');
        }
    }
    crate::output::out(&o)?;
    Ok(0)
}

impl LinkArgs {
    /// What the flags ask of the link, checked with the topology file's rules.
    pub fn op(&self) -> Result<horde_emu::links::LinkOp, crate::Failure> {
        use horde_emu::links::{LinkDir, LinkOp};
        if self.down || self.up {
            if self.dir != LinkDir::Both {
                return Err(bad_input(anyhow!("--dir: a link goes down or up as a whole (both directions); leave --dir out")));
            }
            return Ok(if self.up { LinkOp::Up } else { LinkOp::Down });
        }
        let raw = horde_topo::RawImpair {
            rate: self.rate.clone(),
            delay: self.delay.clone(),
            jitter: self.jitter.clone(),
            loss: self.loss.clone().map(horde_topo::RawLoss::Percent),
            duplicate: self.duplicate.clone(),
            corrupt: self.corrupt.clone(),
            queue: self.queue.clone(),
            reorder: None,
            ber: self.ber.clone(),
            reorder_prob: self.reorder_prob.clone(),
            reorder_gap: self.reorder_gap,
            trace: self.trace.clone().map(|t| std::fs::canonicalize(&t).map(|p| p.display().to_string()).unwrap_or(t)),
        };
        let change = horde_topo::LinkChange::parse(&raw).map_err(|(f, m)| bad_input(anyhow!("--{f}: {m}")))?;
        Ok(if change.is_empty() && !self.clear { LinkOp::Show } else { LinkOp::Set { dir: self.dir, change: Box::new(change), clear: self.clear } })
    }
}

fn describe(r: &EmuReply) -> String {
    match r {
        EmuReply::Failed { message } => message.clone(),
        other => format!("unexpected answer {other:?}"),
    }
}
