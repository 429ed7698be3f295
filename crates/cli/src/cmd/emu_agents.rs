//! `horde emu up|down|ls|exec --agents …`: one emulated network across machines, each part
//! built by the agent on its machine (see `horde_agent::emu`).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{anyhow, Context};
use horde_agent::msg::EmuReply;

use crate::{bad_input, Outcome};

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

fn describe(r: &EmuReply) -> String {
    match r {
        EmuReply::Failed { message } => message.clone(),
        other => format!("unexpected answer {other:?}"),
    }
}
