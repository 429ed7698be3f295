//! The controller: `horde run SCENARIO --agents …`. It connects to every agent over mutually
//! authenticated TLS, checks versions, measures clocks, places the server side and shards the
//! players, starts every shard at one instant, watches progress and faults, collects the logs
//! and writes one report computed over all agents' records.
//!
//! One thread per agent ([`crate::link`]) owns its TLS connection; the main thread drives the
//! run through commands and learns through events.

use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use horde_engine::clock::real_ns;
use horde_model::scenario::Scenario;

use crate::clock::Estimate;
use crate::link::{Cmd, Collected, Ev};
use crate::msg::{self, Assignment};

/// One agent as the user named it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub addr: SocketAddr,
    /// Its share of the players (relative; default 1).
    pub weight: u32,
}

/// Parses an agent list: comma-separated `HOST:PORT[*WEIGHT]`, `dns:NAME:PORT` (every address
/// the name resolves to: a Kubernetes headless service), or `@FILE` (one entry per line, `#`
/// comments).
pub fn parse_agents(list: &str) -> anyhow::Result<Vec<AgentSpec>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(f) = item.strip_prefix('@') {
            let text = horde_model::files::read_text(Path::new(f), 1 << 20, "agent lists").with_context(|| format!("--agents @{f}"))?;
            for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
                if line.starts_with('@') {
                    bail!("--agents @{f}: `{line}`: an agent file cannot name another file");
                }
                out.extend(parse_agents(line)?);
            }
            continue;
        }
        let (entry, weight) = match item.rsplit_once('*') {
            Some((e, w)) => (
                e,
                w.parse::<u32>().ok().filter(|w| (1..=1000).contains(w)).with_context(|| format!("--agents `{item}`: the weight after * must be 1..=1000"))?,
            ),
            None => (item, 1),
        };
        if let Some(name) = entry.strip_prefix("dns:") {
            let mut addrs: Vec<SocketAddr> = name
                .to_socket_addrs()
                .with_context(|| format!("--agents `{item}`: resolving {name} (dns:NAME:PORT, e.g. dns:horde-agents.default.svc.cluster.local:7800)"))?
                .collect();
            addrs.sort();
            addrs.dedup();
            if addrs.is_empty() {
                bail!("--agents `{item}`: {name} resolves to no address");
            }
            out.extend(addrs.into_iter().map(|addr| AgentSpec { addr, weight }));
            continue;
        }
        let addr = entry
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .with_context(|| format!("--agents `{item}`: not HOST:PORT (e.g. 10.0.0.5:7800), dns:NAME:PORT or @FILE"))?;
        out.push(AgentSpec { addr, weight });
    }
    if out.is_empty() {
        bail!("--agents names no agent");
    }
    for (i, a) in out.iter().enumerate() {
        if out[..i].iter().any(|b| b.addr == a.addr) {
            bail!("--agents names {} twice", a.addr);
        }
    }
    Ok(out)
}

/// How the controller runs a scenario.
pub struct ControllerOptions<'a> {
    pub agents: Vec<AgentSpec>,
    /// The agent that runs the server side (an index into `agents`, or an extra agent that runs
    /// only the server side).
    pub server: ServerPlace,
    /// The controller's credentials (ca.pem, controller.pem, controller.key).
    pub credentials: PathBuf,
    pub out: &'a Path,
    /// The scenario file's directory (its service file is shipped to the agents).
    pub scenario_dir: PathBuf,
    /// An agent that hears nothing from the controller for this long stops its traffic.
    pub deadman: Duration,
    /// A running agent silent for this long is lost.
    pub lost_after: Duration,
    pub events: &'a (dyn Fn(&Event) + Sync),
    pub stop: &'a AtomicBool,
}

/// Where the server side runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerPlace {
    /// On this one of the client agents (it runs both).
    Agent(usize),
    /// On an agent that runs no players.
    Dedicated(SocketAddr),
}

/// What the controller reports while it runs.
#[derive(Debug, Clone)]
pub enum Event {
    Note(String),
    /// Once a second while running: the run's time, and each agent's rates over the last
    /// second (sent pkt/s, sent bit/s, received pkt/s, received bit/s).
    Progress {
        t_s: f64,
        agents: Vec<(String, [u64; 4])>,
    },
}

struct Link {
    addr: SocketAddr,
    name: String,
    cmd: mpsc::Sender<Cmd>,
    handle: Option<std::thread::JoinHandle<()>>,
    clock: Estimate,
    /// Player ids it runs.
    players: Option<Range<u32>>,
    server: bool,
    status: String,
    lost_at_s: Option<f64>,
    roles_left: u32,
    last: msg::Progress,
    prev: msg::Progress,
    client_report: Option<horde_engine::SendReport>,
    server_report: Option<horde_engine::SendReport>,
    cpu_s: f64,
    max_rss_kb: u64,
    log_bytes: u64,
    log_transferred: u64,
    collected: bool,
}

/// The outcome of a distributed run.
pub struct Outcome {
    pub summary: horde_scenario::Summary,
    pub lost: Vec<String>,
}

/// Runs `sc` on the agents and writes the merged report into `opts.out`.
pub fn run(sc: &Scenario, opts: &ControllerOptions) -> anyhow::Result<Outcome> {
    let ev = opts.events;
    if sc.emu.is_some() {
        bail!("{}: [emu] places players on one machine's emulated hosts; a run through agents places them on the agents (run `horde emu` hosts with agents in them instead)", sc.name);
    }
    std::fs::create_dir_all(opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    let cfg = crate::tls::controller_config(&opts.credentials)?;
    // The agents open no file a scenario names: value files go inline, read here.
    let service = sc.service_text(&opts.scenario_dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let service = service.map(|t| horde_model::dist::inline_value_files(&t)).transpose().map_err(|e| anyhow::anyhow!("{}: service: {e}", sc.name))?;
    let scenario_text = horde_model::dist::inline_value_files(&sc.text).map_err(|e| anyhow::anyhow!("{}: {e}", sc.name))?;
    let key = horde_scenario::run_key(sc).map_err(|e| e.into_anyhow())?;
    let run_id = format!("{:016x}-{:08x}", real_ns(), std::process::id());

    // Every agent: client agents first, then a dedicated server agent.
    let mut addrs: Vec<SocketAddr> = opts.agents.iter().map(|a| a.addr).collect();
    let server_i = match &opts.server {
        ServerPlace::Agent(i) if *i < addrs.len() => *i,
        ServerPlace::Agent(i) => bail!("the server agent index {i} names no agent"),
        ServerPlace::Dedicated(a) => match addrs.iter().position(|x| x == a) {
            Some(i) => i,
            None => {
                addrs.push(*a);
                addrs.len() - 1
            }
        },
    };
    let (conns, erx) = crate::link::connect_all(&addrs, cfg, opts.deadman, opts.stop, &|m| ev(&Event::Note(m)))?;
    let mut links: Vec<Link> = conns
        .into_iter()
        .enumerate()
        .map(|(i, c)| Link {
            addr: c.addr,
            name: c.name,
            cmd: c.cmd,
            handle: c.handle,
            clock: c.clock,
            players: None,
            server: i == server_i,
            status: "connected".into(),
            lost_at_s: None,
            roles_left: 0,
            last: msg::Progress::default(),
            prev: msg::Progress::default(),
            client_report: None,
            server_report: None,
            cpu_s: 0.0,
            max_rss_kb: 0,
            log_bytes: 0,
            log_transferred: 0,
            collected: false,
        })
        .collect();
    let close_all = |links: &mut Vec<Link>| {
        for l in links.iter() {
            let _ = l.cmd.send(Cmd::Close);
        }
        for l in links.iter_mut() {
            if let Some(h) = l.handle.take() {
                let _ = h.join();
            }
        }
    };

    // 2. Plan (for the report), place the server side, shard the players.
    let t_plan = Instant::now();
    let players = std::sync::Arc::new(horde_scenario::plan(sc, opts.stop).map_err(|e| e.into_anyhow())?);
    // What each player may log, from our own plan, counted while the run goes: it bounds the
    // logs the agents hand over (whatever they report) and every record in them.
    let counting = {
        let p = players.clone();
        std::thread::Builder::new().name("horde-plan-count".into()).spawn(move || p.planned_apdus()).context("starting the plan count")?
    };
    ev(&Event::Note(format!(
        "{} {} players for {:.0} s planned in {:.2} s (seed {})",
        sc.players,
        sc.service.name,
        sc.duration_s,
        t_plan.elapsed().as_secs_f64(),
        sc.seed
    )));
    let client_agents = opts.agents.len();
    let weights: Vec<u32> = opts.agents.iter().map(|a| a.weight).collect();
    let shards = horde_scenario::shards(sc.players, &weights).map_err(|e| e.into_anyhow())?;
    let deadman_ms = opts.deadman.as_millis() as u64;
    let assignment = |players: Option<Range<u32>>, server: Option<SocketAddr>, server_addr: Option<SocketAddr>| Assignment {
        run_id: run_id.clone(),
        scenario: scenario_text.clone(),
        service: service.clone(),
        players_total: sc.players,
        duration_ns: (sc.duration_s * 1e9).round() as u64,
        seed: sc.seed,
        key: key.to_hex(),
        server,
        players,
        server_addr,
        deadman_ms,
        flows: None,
    };
    // The server side listens on the server agent's address (the one the controller reached),
    // at the scenario's port.
    let listen = SocketAddr::new(links[server_i].addr.ip(), sc.server.port());
    let server_players = (server_i < client_agents).then(|| shards[server_i].clone()).filter(|r| !r.is_empty());
    links[server_i].players = server_players.clone();
    let _ = links[server_i].cmd.send(Cmd::Assign(Box::new(assignment(server_players.clone(), Some(listen), None))));
    links[server_i].roles_left = 1 + server_players.is_some() as u32;
    let names: Vec<String> = links.iter().map(|l| l.name.clone()).collect();
    let server_addr = match crate::link::await_ready(&erx, &names, vec![server_i], opts.stop) {
        Ok(r) => r.into_iter().find(|(i, _)| *i == server_i).and_then(|(_, a)| a),
        Err(e) => {
            close_all(&mut links);
            bail!("not starting: {e}");
        }
    };
    let Some(server_addr) = server_addr else {
        close_all(&mut links);
        bail!("not starting: the server agent {} did not say where its server side listens", links[server_i].name);
    };
    ev(&Event::Note(format!("server side on agent {} at {server_addr}", links[server_i].name)));
    let mut waiting = Vec::new();
    for (i, r) in shards.iter().enumerate() {
        if i == server_i || r.is_empty() {
            continue;
        }
        links[i].players = Some(r.clone());
        links[i].roles_left = 1;
        let _ = links[i].cmd.send(Cmd::Assign(Box::new(assignment(Some(r.clone()), None, Some(server_addr)))));
        waiting.push(i);
    }
    if let Err(e) = crate::link::await_ready(&erx, &names, waiting, opts.stop) {
        close_all(&mut links);
        bail!("not starting: {e}");
    }
    for l in &links {
        if let Some(r) = &l.players {
            ev(&Event::Note(format!("agent {}: players {}..{} ({})", l.name, r.start, r.end, r.end - r.start)));
        }
    }

    // 3. Start together: one instant of the controller's clock, told to each agent in its own.
    let lead = Duration::from_millis(500 + 20 * links.len() as u64);
    let t0 = real_ns() + lead.as_nanos() as u64;
    for l in &links {
        let _ = l.cmd.send(Cmd::Start { at_controller_ns: t0 });
    }
    let start = Instant::now() + lead;
    ev(&Event::Note(format!("run {run_id}: starting {} agents together in {:.1} s", links.len(), lead.as_secs_f64())));

    // 4. Run: progress, faults, the end.
    let mut stopped_server = false;
    let mut stopped_all = false;
    let mut next_tick = start + Duration::from_secs(1);
    let hard_end = start + Duration::from_secs_f64(sc.duration_s) + OVERRUN;
    let mut signalled = false;
    // Once a stop is sent, the agents it went to must say they finished by this time: no
    // message from an agent extends it.
    let mut finish_by: Option<Instant> = None;
    loop {
        let clients_left = links.iter().filter(|l| l.players.is_some() && l.lost_at_s.is_none() && l.client_report.is_none() && l.roles_left > 0).count();
        if clients_left == 0 && !stopped_server {
            stopped_server = true;
            let _ = links[server_i].cmd.send(Cmd::Stop);
            finish_by.get_or_insert(Instant::now() + FINISH_WITHIN);
        }
        if links.iter().all(|l| l.roles_left == 0 || l.lost_at_s.is_some()) {
            break;
        }
        if (opts.stop.load(Ordering::Relaxed) || Instant::now() > hard_end) && !stopped_all {
            signalled = opts.stop.load(Ordering::Relaxed);
            stopped_all = true;
            ev(&Event::Note(if signalled {
                "interrupted: stopping every agent, then collecting the logs".into()
            } else {
                format!("the agents overran the run by {} s: stopping them", OVERRUN.as_secs())
            }));
            for l in &links {
                let _ = l.cmd.send(Cmd::Stop);
            }
            let within = if signalled { FINISH_AFTER_SIGNAL } else { FINISH_WITHIN };
            finish_by = Some(finish_by.map_or(Instant::now() + within, |f| f.min(Instant::now() + within)));
        }
        if opts.stop.load(Ordering::Relaxed) && stopped_all && !signalled {
            // Ctrl-C after the run had been stopped: the short wait applies from now.
            signalled = true;
            finish_by = finish_by.map(|f| f.min(Instant::now() + FINISH_AFTER_SIGNAL));
        }
        if finish_by.is_some_and(|f| Instant::now() >= f) {
            let t_s = Instant::now().saturating_duration_since(start).as_secs_f64();
            for l in links.iter_mut().filter(|l| l.roles_left > 0 && l.lost_at_s.is_none()) {
                l.lost_at_s = Some(t_s);
                l.status = format!("did not finish within {:.0} s of the stop", if signalled { FINISH_AFTER_SIGNAL } else { FINISH_WITHIN }.as_secs_f64());
                ev(&Event::Note(format!("agent {}: {}; its logs are not collected", l.name, l.status)));
                let _ = l.cmd.send(Cmd::Close);
            }
            break;
        }
        let now = Instant::now();
        if now >= next_tick {
            next_tick += Duration::from_secs(1);
            let agents = links
                .iter_mut()
                .map(|l| {
                    let r = l.last.since(&l.prev);
                    l.prev = l.last;
                    (l.name.clone(), r)
                })
                .collect();
            ev(&Event::Progress { t_s: now.saturating_duration_since(start).as_secs_f64(), agents });
        }
        match erx.recv_timeout(next_tick.saturating_duration_since(Instant::now()).min(Duration::from_millis(250))) {
            Ok((i, e)) => {
                let t_s = Instant::now().saturating_duration_since(start).as_secs_f64();
                let l = &mut links[i];
                match e {
                    Ev::Progress(p) => l.last = p,
                    Ev::Finished { role, report, error, cpu_s, max_rss_kb } => {
                        l.roles_left = l.roles_left.saturating_sub(1);
                        l.cpu_s = l.cpu_s.max(cpu_s);
                        l.max_rss_kb = l.max_rss_kb.max(max_rss_kb);
                        if let Some(e) = &error {
                            ev(&Event::Note(format!("agent {}: its {role} side failed: {e}", l.name)));
                            l.status = format!("{role} side failed: {e}");
                        }
                        let report = report.and_then(|r| serde_json::from_value::<horde_engine::SendReport>(r).ok());
                        match role.as_str() {
                            "server" => l.server_report = report,
                            _ => l.client_report = report,
                        }
                    }
                    Ev::Lost(why) if l.lost_at_s.is_none() => {
                        l.lost_at_s = Some(t_s);
                        l.status = format!("lost at {t_s:.1} s: {why}");
                        ev(&Event::Note(format!(
                            "agent {} lost {t_s:.1} s into the run: {why}{}",
                            l.name,
                            l.players.as_ref().map(|r| format!("; its players {}..{} are missing from the report", r.start, r.end)).unwrap_or_default()
                        )));
                        if i == server_i {
                            ev(&Event::Note("the server side was on it: stopping the others".into()));
                            for l in &links {
                                let _ = l.cmd.send(Cmd::Stop);
                            }
                            stopped_all = true;
                            finish_by = Some(finish_by.map_or(Instant::now() + FINISH_WITHIN, |f| f.min(Instant::now() + FINISH_WITHIN)));
                        }
                    }
                    _ => {}
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }

    // 5. Collect every live agent's logs, each bounded by what our plan lets it log.
    let agents_dir = opts.out.join("agents");
    let dirs = dir_names(&links.iter().map(|l| l.name.clone()).collect::<Vec<_>>());
    let planned = counting.join().map_err(|_| anyhow::anyhow!("counting the planned APDUs failed"))?;
    let all: Range<u32> = 0..sc.players;
    let mut collecting = 0;
    for (i, l) in links.iter_mut().enumerate().filter(|(_, l)| l.lost_at_s.is_none()) {
        let dir = agents_dir.join(&dirs[i]);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let client = l.players.as_ref().map_or(0, |r| log_bound(&planned, r.clone()));
        let server = if l.server { log_bound(&planned, all.clone()) } else { 0 };
        let _ = l.cmd.send(Cmd::Collect { dir, limits: vec![("client.hlog", client), ("server.hlog", server)] });
        collecting += 1;
    }
    let t_collect = Instant::now();
    crate::link::await_collections(&erx, collecting, opts.stop, |i, how| {
        let l = &mut links[i];
        match how {
            Collected::Logs { bytes, transferred } => {
                l.log_bytes += bytes;
                l.log_transferred += transferred;
                l.collected = true;
                true
            }
            Collected::Lost(why) if l.lost_at_s.is_none() && !l.collected => {
                l.lost_at_s = Some(start.elapsed().as_secs_f64());
                l.status = format!("lost while collecting its logs: {why}");
                ev(&Event::Note(format!("agent {}: {}", l.name, l.status)));
                true
            }
            Collected::Lost(_) => false,
        }
    });
    for l in links.iter_mut().filter(|l| l.lost_at_s.is_none() && !l.collected) {
        l.lost_at_s = Some(start.elapsed().as_secs_f64());
        l.status = "its logs were not collected in time".into();
        ev(&Event::Note(format!("agent {}: {}", l.name, l.status)));
    }
    let (raw, sent): (u64, u64) = links.iter().map(|l| (l.log_bytes, l.log_transferred)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    ev(&Event::Note(format!(
        "logs collected in {:.1} s: {:.1} MB written by the agents, {:.1} MB transferred",
        t_collect.elapsed().as_secs_f64(),
        raw as f64 / 1e6,
        sent as f64 / 1e6
    )));
    close_all(&mut links);

    // 6. One report over all records.
    let t_merge = Instant::now();
    let parts: Vec<crate::merge::Part> = links
        .iter()
        .zip(&dirs)
        .map(|(l, dir)| crate::merge::Part {
            name: l.name.clone(),
            dir: agents_dir.join(dir),
            offset_ns: l.clock.offset_ns,
            players: l.players.clone(),
            server: l.server,
            ok: l.collected && l.lost_at_s.is_none(),
            client: l.client_report.clone(),
            server_report: l.server_report.clone(),
        })
        .collect();
    let t0_ctl = t0.saturating_sub(PLAN_MARGIN.as_nanos() as u64);
    let plan = crate::merge::Plan {
        from_ns: t0_ctl,
        to_ns: t0 + (sc.duration_s * 1e9) as u64 + (OVERRUN + FINISH_WITHIN + PLAN_MARGIN).as_nanos() as u64,
        apdus: planned,
    };
    let merged = crate::merge::merge(sc, &parts, &plan)?;
    for (name, why) in &merged.refused {
        if let Some(l) = links.iter_mut().find(|l| &l.name == name) {
            l.lost_at_s.get_or_insert(start.elapsed().as_secs_f64());
            l.status = format!("log refused: {why}");
            ev(&Event::Note(format!("agent {name}: {}; its records are left out of the report", l.status)));
        }
    }
    let rows: Vec<horde_scenario::AgentRow> = links
        .iter()
        .map(|l| horde_scenario::AgentRow {
            name: l.name.clone(),
            address: l.addr.to_string(),
            role: match (l.server, l.players.is_some()) {
                (true, true) => "server+clients",
                (true, false) => "server",
                _ => "clients",
            }
            .into(),
            players: l.players.clone(),
            apdus_sent: l.client_report.as_ref().map_or(0, |r| r.packets) + l.server_report.as_ref().map_or(0, |r| r.packets),
            apdus_received: l.client_report.as_ref().map_or(0, |r| r.received) + l.server_report.as_ref().map_or(0, |r| r.received),
            cpu_s: l.cpu_s,
            max_rss_kb: l.max_rss_kb,
            clock_offset_ms: l.clock.offset_ns as f64 / 1e6,
            clock_uncertainty_ms: l.clock.uncertainty_ns as f64 / 1e6,
            rtt_ms: l.clock.rtt_ns as f64 / 1e6,
            status: if l.lost_at_s.is_none() && l.status == "connected" { "finished".into() } else { l.status.clone() },
            log_bytes: l.log_bytes,
            log_bytes_transferred: l.log_transferred,
        })
        .collect();
    let missing: Vec<Range<u32>> = links.iter().filter(|l| l.lost_at_s.is_some()).filter_map(|l| l.players.clone()).collect();
    let present: Vec<Range<u32>> = links.iter().filter(|l| l.lost_at_s.is_none()).filter_map(|l| l.players.clone()).collect();
    let lost: Vec<String> = links.iter().filter(|l| l.lost_at_s.is_some()).map(|l| l.name.clone()).collect();
    let distributed = horde_scenario::Distributed {
        agents: rows,
        server_agent: links[server_i].name.clone(),
        partial: !lost.is_empty(),
        missing_players: missing,
        log_bytes: raw,
        log_bytes_transferred: sent,
    };
    let server_lost = links[server_i].lost_at_s;
    let interruption = if signalled || server_lost.is_some() {
        let at_s = server_lost.unwrap_or_else(|| merged.client.end_real_ns.saturating_sub(merged.client.t0_real_ns) as f64 / 1e9).min(sc.duration_s);
        let reason = if server_lost.is_some() { format!("the server agent {} was lost", links[server_i].name) } else { "interrupted".into() };
        let grace = horde_scenario::report::IN_FLIGHT_GRACE_S + if server_lost.is_some() { horde_engine::logger::FLUSH_EVERY_NS as f64 / 1e9 } else { 0.0 };
        Some(horde_scenario::Interruption { at_s, analysed_s: (at_s - grace).max(0.0), reason })
    } else {
        None
    };
    let cpu = |f: &dyn Fn(&Link) -> bool| links.iter().filter(|l| f(l)).map(|l| l.cpu_s).sum::<f64>();
    let rss = |f: &dyn Fn(&Link) -> bool| links.iter().filter(|l| f(l)).map(|l| l.max_rss_kb).max().unwrap_or(0);
    let usage = horde_scenario::Usage {
        client_cpu_s: cpu(&|l| l.players.is_some()),
        client_max_rss_kb: rss(&|l| l.players.is_some()),
        server_cpu_s: cpu(&|l| l.server),
        server_max_rss_kb: rss(&|l| l.server),
    };
    let outcomes = horde_scenario::report::Outcomes {
        client: merged.client,
        server: merged.server,
        usage,
        links: None,
        link_series: Vec::new(),
        topology_svg: None,
        interruption,
        present,
        distributed: Some(distributed),
    };
    let summary = horde_scenario::report::write_records(sc, opts.out, &players, outcomes, &merged.client_records, &merged.server_records)?;
    ev(&Event::Note(format!(
        "merged {} + {} records and analysed them in {:.1} s",
        merged.client_records.len(),
        merged.server_records.len(),
        t_merge.elapsed().as_secs_f64()
    )));
    Ok(Outcome { summary, lost })
}

/// How long agents may overrun the run's end before they are stopped: 15 s (no departure
/// leaves after the run's end; a side lingers 0.5 s for what is in flight and flushes its log
/// within a second).
const OVERRUN: Duration = Duration::from_secs(15);
/// After a stop, how long agents may take to say they finished: 10 s (a server side flushes
/// its log within a second); after Ctrl-C, 2 s, so that the controller ends within 5 s.
pub(crate) const FINISH_WITHIN: Duration = Duration::from_secs(10);
pub(crate) const FINISH_AFTER_SIGNAL: Duration = Duration::from_secs(2);
/// Records may carry times this far outside the run (clock offsets measured to well under a
/// millisecond; a start lead of under a second).
const PLAN_MARGIN: Duration = Duration::from_secs(10);

/// The most bytes a log of the players `range` may have by our plan: a header and one record
/// per APDU planned each way (a side logs what it sends and what it receives), plus 1 % and 1,024
/// records for duplicates an emulated link may add.
fn log_bound(planned: &[[u64; 2]], range: Range<u32>) -> u64 {
    let apdus: u64 = planned.get(range.start as usize..(range.end as usize).min(planned.len())).map_or(0, |p| p.iter().map(|c| c[0] + c[1]).sum());
    let records = apdus + apdus / 100 + 1024;
    horde_wire::LOG_HEADER_LEN as u64 + horde_wire::RECORD_LEN as u64 * records
}

/// One directory per agent under `agents/`: its name made safe, made unique by its place in
/// the list when two names come out alike (so one agent's logs never overwrite another's).
pub fn dir_names(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let mut d = safe_name(n);
        if out.contains(&d) {
            d = format!("{d}-{i}");
        }
        out.push(d);
    }
    out
}

/// A name safe as a directory name.
pub(crate) fn safe_name(n: &str) -> String {
    let s: String = n.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).take(64).collect();
    if s.is_empty() || s.starts_with('.') {
        format!("agent{s}")
    } else {
        s
    }
}
