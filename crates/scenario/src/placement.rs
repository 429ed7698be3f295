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
    pub fn up(p: &Placement, sc: &Scenario, players: &crate::players::Players, events: Events<'a>) -> Result<EmuRun<'a>, Error> {
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
        let server_ip: std::net::IpAddr = match p.ipv6 {
            false => plan.addrs(server_i).first().copied().map(Into::into),
            true if !plan.ipv6 => return Err(bad(anyhow::anyhow!("{}: emu.ipv6: {file} has no IPv6; give it `ipv6 = true`", sc.name))),
            true => plan.addrs6(server_i).first().copied().map(Into::into),
        }
        .ok_or_else(|| bad(anyhow::anyhow!("{}: emu.server: `{}` has no address", sc.name, p.server)))?;
        let opts = horde_emu::UpOptions { exp: None, userspace: true, live_all: false, stop: None, part: None };
        // before anything is built: a link the model's load overfills
        let hosts: Vec<usize> = client_names.iter().filter_map(|c| plan.node(c)).collect();
        for n in overload_notes(&plan, &hosts, server_i, &players.mean_bps_by_host(hosts.len()), sc.players, players.transport == horde_model::Transport::Tcp) {
            events(&Event::Note(n));
        }
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
            server: SocketAddr::new(server_ip, sc.server.port()),
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

/// A note for each rated link direction the players' mean load exceeds: `load[i]` ([up, down]
/// bit/s) comes from client host `hosts[i]` and goes up along its path to the server, down
/// along the server's path to it.
pub fn overload_notes(plan: &horde_topo::Plan, hosts: &[usize], server: usize, load: &[[f64; 2]], players: u32, tcp: bool) -> Vec<String> {
    let mut on: std::collections::BTreeMap<(usize, bool), [f64; 2]> = Default::default();
    for (&h, l) in hosts.iter().zip(load) {
        for (dir, from, to) in [(0, h, server), (1, server, h)] {
            for c in plan.path_links(from, to).unwrap_or_default() {
                on.entry((c.link, c.forward)).or_default()[dir] += l[dir];
            }
        }
    }
    let mut notes = Vec::new();
    for ((li, forward), bps) in on {
        let l = &plan.links[li];
        let (spec, from, to) = if forward { (&l.ab, l.a.node, l.b.node) } else { (&l.ba, l.b.node, l.a.node) };
        let Some(rate) = spec.rate_bps else { continue };
        for (dir, what) in [(0, "upstream"), (1, "downstream")] {
            if bps[dir] > rate as f64 {
                notes.push(format!(
                    "overload: the {players} players offer ≈ {:.1} Mbit/s {what} (the model's mean over the run, APDUs without headers) into link {} → {}'s {:.1} Mbit/s: {}",
                    bps[dir] / 1e6,
                    plan.nodes[from].name,
                    plan.nodes[to].name,
                    rate as f64 / 1e6,
                    if tcp {
                        "its queue fills and drops, the senders back off and APDUs wait in their sockets (delay grows; 'undelivered' at the end)"
                    } else {
                        "its queue fills and drops the excess (loss)"
                    }
                ));
            }
        }
    }
    notes
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

#[cfg(test)]
mod tests {
    /// The ISP example: 250 client hosts behind one 20 Mbit/s link. 36 Mbit/s down spread over
    /// them overfills r2 → r1 and is told once; 4 Mbit/s up fits r1 → r2 and is not.
    #[test]
    fn a_link_the_models_load_overfills_is_named_with_both_rates() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topologies/isp.toml")).unwrap();
        let plan = horde_topo::plan(&text, "isp.toml", "x").unwrap();
        let hosts = plan.hosts_of("client").unwrap().to_vec();
        let load = vec![[4e6 / 250.0, 36e6 / 250.0]; hosts.len()];
        let notes = super::overload_notes(&plan, &hosts, plan.node("server").unwrap(), &load, 1_000, true);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("1000 players offer ≈ 36.0 Mbit/s downstream") && notes[0].contains("link r2 → r1's 20.0 Mbit/s"), "{}", notes[0]);
        let light = vec![[4e6 / 250.0, 12e6 / 250.0]; hosts.len()];
        assert!(super::overload_notes(&plan, &hosts, plan.node("server").unwrap(), &light, 1_000, false).is_empty());
    }
}
