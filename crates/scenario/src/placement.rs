//! A scenario's emulated topology (`[emu]`), up for the run and taken down after it (also on
//! errors and interruptions; after SIGKILL, `horde emu cleanup` removes it).

use horde_engine::clock::Stopwatch;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use horde_model::scenario::{Placement, Scenario};

use crate::{Error, Event, Events};

/// The experiment a run placed its players in.
pub struct EmuRun<'a> {
    pub exp: String,
    _down: Down<'a>,
    /// The server host's namespace and the server side's address in it.
    pub server_ns: std::fs::File,
    pub server: SocketAddr,
    /// Client hosts' namespaces; player `p` goes on `clients[p % clients.len()]`.
    pub clients: Vec<Arc<std::fs::File>>,
    emulated: usize,
    /// The plan that was built, and the server host's name (for the report's picture).
    pub plan: horde_topo::Plan,
    pub server_name: String,
}

/// The hosts an `[emu]` placement names: each entry of `clients` is a host, or a group of hosts
/// (`[[node]]` with `count`), in the topology's order. Checked on the plan, before anything is
/// built.
pub fn client_hosts(plan: &horde_topo::Plan, p: &Placement, name: &str, file: &str) -> Result<Vec<String>, Error> {
    let is_host = |i: &usize| plan.nodes[*i].kind == horde_topo::Kind::Host;
    let mut names = Vec::new();
    for c in &p.clients {
        let members: Vec<usize> = match plan.hosts_of(c) {
            Some(g) => g.iter().copied().filter(is_host).collect(),
            None => plan.node(c).into_iter().filter(is_host).collect(),
        };
        if members.is_empty() {
            return Err(Error::BadInput(anyhow::anyhow!("{name}: emu.clients: `{c}` names no host or group of hosts in {file}")));
        }
        names.extend(members.into_iter().map(|i| plan.nodes[i].name.clone()));
    }
    Ok(names)
}

impl<'a> EmuRun<'a> {
    /// Brings the placement's topology up (userspace link emulation, so counters come from the
    /// daemon on every kernel). `exe` is the `horde` binary that runs the link emulator.
    pub fn up(p: &Placement, sc: &Scenario, events: Events<'a>) -> Result<EmuRun<'a>, Error> {
        let bad = |e: anyhow::Error| Error::BadInput(e);
        horde_emu::require_root().map_err(|e| bad(anyhow::anyhow!("{}: [emu]: {e}", sc.name)))?;
        let text = horde_model::files::read_text(&p.topology, horde_model::files::MAX_TOML, "topology files")
            .with_context(|| format!("{}: emu.topology", sc.name))
            .map_err(bad)?;
        let file = p.topology.display().to_string();
        let plan = horde_topo::plan(&text, &file, "check").map_err(|e| bad(e.into()))?;
        let server_i = plan
            .node(&p.server)
            .filter(|&i| plan.nodes[i].kind == horde_topo::Kind::Host)
            .ok_or_else(|| bad(anyhow::anyhow!("{}: emu.server: `{}` is not a host of {file}", sc.name, p.server)))?;
        let client_names = client_hosts(&plan, p, &sc.name, &file)?;
        let server_ip = plan.addrs(server_i).first().copied().ok_or_else(|| bad(anyhow::anyhow!("{}: emu.server: `{}` has no address", sc.name, p.server)))?;
        let opts = horde_emu::UpOptions { exp: None, userspace: true, live_all: false, stop: None, part: None };
        let t = Stopwatch::start();
        let r = horde_emu::up(&text, &file, &opts).map_err(|e| Error::Failed(anyhow::anyhow!("bringing up {file}: {e}")))?;
        let exp = r.meta.exp.clone();
        for n in &r.notes {
            events(&Event::Note(n.clone()));
        }
        let down = Down { exp: exp.clone(), events };
        let open = |n: &str| horde_emu::open_node(&exp, &r.plan, n).map_err(|e| Error::Failed(anyhow::anyhow!(e)));
        let server_ns = open(&p.server)?;
        let clients = client_names.iter().map(|c| open(c).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        events(&Event::Note(format!(
            "emulated topology `{}` up as experiment {exp} in {:.2} s: {} nodes, {} emulated links; {} client hosts, server {} at {server_ip}",
            r.plan.name,
            t.elapsed().as_secs_f64(),
            r.plan.nodes.len(),
            r.meta.impaired_links,
            client_names.len(),
            p.server
        )));
        Ok(EmuRun {
            exp,
            _down: down,
            server_ns,
            server: SocketAddr::new(server_ip.into(), sc.server.port()),
            clients,
            emulated: r.meta.impaired_links,
            plan: r.plan,
            server_name: p.server.clone(),
        })
    }

    /// The emulated links' counters now (`None` without emulated links, or if the link
    /// emulator does not answer).
    pub fn links(&self) -> Option<Vec<horde_emu::fwd::LinkReport>> {
        if self.emulated == 0 {
            return None;
        }
        horde_emu::fwd::request(&self.exp, &horde_emu::fwd::Request::Stats).ok().map(|r| r.links)
    }
}

impl EmuRun<'_> {
    /// Changes a link while the run goes on; says what it is now.
    pub fn link(&self, a: &str, b: &str, op: &horde_emu::links::LinkOp) -> Result<String, String> {
        let r = horde_emu::links::apply(&self.exp, a, b, op).map_err(|e| e.to_string())?;
        Ok(r.lines.join("; "))
    }
}

/// Takes an experiment down when dropped.
struct Down<'a> {
    exp: String,
    events: Events<'a>,
}

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let msg = match horde_emu::down(&self.exp) {
            Ok(_) => format!("experiment {} taken down", self.exp),
            Err(e) => format!("taking experiment {} down failed: {e}; run `horde emu cleanup {}`", self.exp, self.exp),
        };
        (self.events)(&Event::Note(msg));
    }
}
