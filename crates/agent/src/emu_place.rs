//! A scenario's `[emu]` players through agents (`horde run SCENARIO --agents …`, agents
//! started with `--emu`): the scenario's topology is brought up across the agents' machines
//! (one experiment, [`crate::emu::up`]: a node's `machine`, else a partition that keeps cut
//! links few), each agent's players go on the client hosts of its own part in turn, the server
//! side runs in the server host on whichever machine has it, and the experiment is taken down
//! on every machine when the run ends (also on errors and Ctrl-C).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use horde_model::scenario::{Placement, Scenario};

use crate::fleet::{AgentSpec, Event};
use crate::msg::EmuPlace;

/// The experiment a run through agents placed its players in; taken down when dropped.
pub(crate) struct EmuAcross<'a> {
    pub exp: String,
    /// Per agent (in the order given), the client hosts on its machine, in the placement's order.
    pub hosts: Vec<Vec<String>>,
    /// The agent whose machine has the server host, and the server side's address there.
    pub server_i: usize,
    pub server_host: String,
    pub server_ip: IpAddr,
    /// The topology as planned here, and the agent each node is on.
    pub plan: horde_topo::Plan,
    machine_of: Vec<usize>,
    agents: Vec<AgentSpec>,
    credentials: PathBuf,
    events: &'a (dyn Fn(&Event) + Sync),
}

impl<'a> EmuAcross<'a> {
    /// Brings the placement's topology up across `agents` and deals the client hosts to them.
    pub fn up(
        sc: &Scenario,
        p: &Placement,
        agents: &[AgentSpec],
        credentials: &std::path::Path,
        stop: &AtomicBool,
        events: &'a (dyn Fn(&Event) + Sync),
    ) -> anyhow::Result<Self> {
        let text =
            horde_model::files::read_text(&p.topology, horde_model::files::MAX_TOML, "topology files").with_context(|| format!("{}: emu.topology", sc.name))?;
        let file = p.topology.display().to_string();
        let plan = horde_topo::plan(&text, &file, "check")?;
        let clients = horde_scenario::placement::client_hosts(&plan, p, &sc.name, &file).map_err(|e| e.into_anyhow())?;
        let server_node = plan.node(&p.server).filter(|&i| plan.nodes[i].kind == horde_topo::Kind::Host);
        let server_node = server_node.with_context(|| format!("{}: emu.server: `{}` is not a host of {file}", sc.name, p.server))?;
        let server_ip = plan.addrs(server_node).first().copied().with_context(|| format!("{}: emu.server: `{}` has no address", sc.name, p.server))?;
        let note = |m: &str| events(&Event::Note(m.to_string()));
        let built = crate::emu::up(&crate::emu::Agents { agents, credentials, stop, note: &note }, &text, &file, None, false)?;
        let mut across = EmuAcross {
            exp: built.exp.clone(),
            hosts: vec![Vec::new(); agents.len()],
            server_i: 0,
            server_host: p.server.clone(),
            server_ip: IpAddr::V4(server_ip),
            machine_of: vec![usize::MAX; plan.nodes.len()],
            plan,
            agents: agents.to_vec(),
            credentials: credentials.to_path_buf(),
            events,
        };
        for part in &built.parts {
            for (k, n) in across.plan.nodes.iter().enumerate() {
                if part.nodes.contains(&n.name) {
                    across.machine_of[k] = part.index;
                }
            }
            let here = |n: &String| part.nodes.contains(n);
            across.hosts[part.index] = clients.iter().filter(|c| here(c)).cloned().collect();
            if here(&p.server) {
                across.server_i = part.index;
            }
        }
        let spread: Vec<String> = built.parts.iter().map(|m| format!("{} {} client host(s)", m.agent, across.hosts[m.index].len())).collect();
        note(&format!(
            "[emu] across {} machines as experiment {}: {}; server host {} on {}; {} link(s) between machines",
            built.parts.len(),
            built.exp,
            spread.join(", "),
            p.server,
            built.parts.iter().find(|m| m.index == across.server_i).map_or("?", |m| m.agent.as_str()),
            built.cut.len()
        ));
        Ok(across)
    }

    /// The agents with their shares of the players: their client hosts.
    pub fn weighted(&self) -> Vec<AgentSpec> {
        self.agents.iter().zip(&self.hosts).map(|(a, h)| AgentSpec { addr: a.addr, weight: h.len() as u32 }).collect()
    }

    /// Where the server side listens: the server host's address, at the scenario's port.
    pub fn listen(&self, sc: &Scenario) -> SocketAddr {
        SocketAddr::new(self.server_ip, sc.server.port())
    }

    /// Agent `i`'s placement.
    pub fn place(&self, i: usize) -> EmuPlace {
        EmuPlace { exp: self.exp.clone(), clients: self.hosts[i].clone(), server: (i == self.server_i).then(|| self.server_host.clone()) }
    }
}

impl EmuAcross<'_> {
    /// Every emulated link's counters as the run left them (asked of the agents after the run,
    /// before the experiment goes down): each direction from the machine it leaves, which is
    /// where it is impaired and counted; a link's two ends on one machine come from it whole.
    /// Only links of the plan are taken. `None` if no agent answered with any.
    pub fn links(&self) -> Option<Vec<horde_emu::fwd::LinkReport>> {
        let stop = AtomicBool::new(false);
        let note = |m: &str| (self.events)(&Event::Note(m.to_string()));
        let a = crate::emu::Agents { agents: &self.agents, credentials: &self.credentials, stop: &stop, note: &note };
        let answers = match crate::emu::stats(&a, &self.exp) {
            Ok(x) => x,
            Err(e) => {
                note(&format!("[emu] the emulated links' counters: {e:#}"));
                return None;
            }
        };
        let mut each = Vec::new();
        for (i, r) in answers {
            match r {
                Ok(crate::msg::EmuReply::Stats { links }) => each.push((i, links)),
                other => note(&format!("[emu] agent {}: no link counters ({other:?})", self.agents[i].addr)),
            }
        }
        let out = self.merge(each);
        (!out.is_empty()).then_some(out)
    }

    /// Each link whole from its agents' counters (agent index, its links): each direction from
    /// the machine it leaves. Only links of the plan are taken.
    pub fn merge(&self, answers: crate::msg::AgentLinks) -> Vec<horde_emu::fwd::LinkReport> {
        let node = |name: &str| self.plan.node(name).map(|k| self.machine_of[k]);
        let mut out: Vec<horde_emu::fwd::LinkReport> = Vec::new();
        for (i, links) in answers {
            for l in links {
                let (Some(ma), Some(mb)) = (node(&l.a), node(&l.b)) else { continue };
                let slot = match out.iter().position(|x| x.a == l.a && x.b == l.b) {
                    Some(k) => k,
                    None => {
                        out.push(horde_emu::fwd::LinkReport { a: l.a.clone(), b: l.b.clone(), ..Default::default() });
                        out.len() - 1
                    }
                };
                if ma == i {
                    out[slot].ab = l.ab.clone();
                }
                if mb == i {
                    out[slot].ba = l.ba.clone();
                }
            }
        }
        out
    }
}

impl Drop for EmuAcross<'_> {
    fn drop(&mut self) {
        // bounded (the agents' answers are awaited 120 s at most), Ctrl-C or not
        let stop = AtomicBool::new(false);
        let note = |m: &str| (self.events)(&Event::Note(m.to_string()));
        let a = crate::emu::Agents { agents: &self.agents, credentials: &self.credentials, stop: &stop, note: &note };
        let said = match crate::emu::down(&a, &self.exp) {
            Ok(answers) => {
                let failed: Vec<String> = answers
                    .iter()
                    .filter_map(|(name, r)| match r {
                        Ok(crate::msg::EmuReply::Down { .. }) => None,
                        other => Some(format!("{name}: {other:?}")),
                    })
                    .collect();
                if failed.is_empty() {
                    format!("[emu] experiment {} taken down on every machine", self.exp)
                } else {
                    format!("[emu] experiment {}: not taken down everywhere ({}): `horde emu down {} --agents …`", self.exp, failed.join("; "), self.exp)
                }
            }
            Err(e) => format!("[emu] experiment {}: taking it down: {e:#}; `horde emu down {} --agents …`", self.exp, self.exp),
        };
        note(&said);
    }
}
