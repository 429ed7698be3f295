//! A scenario's emulated topology (`[emu]`), up for the run and taken down after it (also on
//! errors and interruptions; after SIGKILL, `horde emu cleanup` removes it).

use horde_engine::clock::Stopwatch;
use std::net::SocketAddr;
use std::path::Path;
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
    pub fn up(p: &Placement, sc: &Scenario, exe: &Path, events: Events<'a>) -> Result<EmuRun<'a>, Error> {
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
        let opts = horde_emu::UpOptions { exp: None, daemon_exe: exe.to_path_buf(), userspace: true, live_all: false, stop: None, part: None };
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
    /// Takes every link between `a` and `b` down, or brings it back up; says what changed.
    pub fn set_link_state(&self, a: &str, b: &str, up: bool) -> Result<String, String> {
        horde_emu::state::set_link_state(&self.exp, a, b, up).map(|v| v.join("; ")).map_err(|e| e.to_string())
    }

    /// Changes an emulated link while the run goes on (the link emulator's own check and
    /// messages); returns its settings now, both directions.
    pub fn change_link(&self, a: &str, b: &str, dir: &str, set: horde_topo::RawImpair, clear: bool) -> Result<String, String> {
        use horde_emu::fwd::{request, Request};
        let change = horde_topo::LinkChange::parse(&set).map_err(|(f, m)| format!("{f}: {m}"))?;
        let r = request(&self.exp, &Request::Set { a: a.into(), b: b.into(), dir: dir.into(), change: Box::new(change), clear }).map_err(|e| e.to_string())?;
        if !r.ok {
            return Err(r.error.unwrap_or_else(|| "the link emulator refused it".into()));
        }
        let l = r.links.iter().find(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a)).ok_or_else(|| format!("no emulated link between {a} and {b}"))?;
        Ok(format!("{}→{}: {}; {}→{}: {}", l.a, l.b, l.ab.spec, l.b, l.a, l.ba.spec))
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
