//! The controller: `horde run SCENARIO --agents …`. It connects to every agent over mutually
//! authenticated TLS, checks versions, measures clocks, places the server side and shards the
//! players, starts every shard at one instant, watches progress and faults, collects the logs
//! and writes one report computed over all agents' records.
//!
//! One thread per agent (the link) owns its TLS connection; the main thread drives the run
//! through commands and learns through events.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use horde_engine::clock::real_ns;
use horde_model::scenario::Scenario;

use crate::clock::{Estimate, Filter, Sample};
use crate::msg::{self, Assignment, Frame, ToAgent, ToController, PROTOCOL};

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

/// Commands to a link thread.
enum Cmd {
    Assign(Assignment),
    Start {
        at_controller_ns: u64,
    },
    Stop,
    /// Collect the logs into this directory; the most bytes each log may have (from the
    /// record counts the agent reported: a log is a header and one record per count).
    Collect {
        dir: PathBuf,
        client_max: u64,
        server_max: u64,
    },
    Close,
}

/// What a link thread reports.
#[derive(Debug)]
enum Ev {
    Connected {
        name: String,
        cores: u32,
        clock: Estimate,
    },
    Ready {
        server_addr: Option<SocketAddr>,
    },
    Progress(msg::Progress),
    Finished {
        role: String,
        report: Option<Box<horde_engine::SendReport>>,
        error: Option<String>,
        cpu_s: f64,
        max_rss_kb: u64,
    },
    Collected {
        bytes: u64,
        transferred: u64,
    },
    /// The agent refused, failed, or was lost; the link is over.
    Lost(String),
}

/// Clock samples per agent, and their spacing.
const CLOCK_SAMPLES: usize = 16;
const CLOCK_GAP: Duration = Duration::from_millis(20);
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

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
    let service = sc.service_text(&opts.scenario_dir).map_err(|e| anyhow::anyhow!("{e}"))?;
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
    let (etx, erx) = mpsc::channel::<(usize, Ev)>();
    let mut links: Vec<Link> = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let (ctx, crx) = mpsc::channel();
        let (cfg, etx, deadman) = (cfg.clone(), etx.clone(), opts.deadman);
        let addr = *addr;
        let handle = std::thread::Builder::new()
            .name(format!("horde-link-{i}"))
            .spawn(move || link(i, addr, cfg, crx, &etx, deadman))
            .context("starting a link thread")?;
        links.push(Link {
            addr,
            name: addr.to_string(),
            cmd: ctx,
            handle: Some(handle),
            clock: Estimate::default(),
            players: None,
            server: i == server_i,
            status: "connecting".into(),
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
        });
    }
    drop(etx);
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

    // 1. Connect, authenticate, check versions, measure clocks.
    let mut pending = links.len();
    let deadline = Instant::now() + CONNECT_WITHIN + CLOCK_GAP * CLOCK_SAMPLES as u32 + Duration::from_secs(2);
    let mut failures = Vec::new();
    while pending > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        match erx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok((i, Ev::Connected { name, cores, clock })) => {
                let l = &mut links[i];
                l.name = name;
                l.clock = clock;
                l.status = "connected".into();
                ev(&Event::Note(format!(
                    "agent {} at {}: {cores} cores, clock offset {:+.3} ms ± {:.3} ms (best RTT {:.3} ms of {} samples)",
                    l.name,
                    l.addr,
                    clock.offset_ns as f64 / 1e6,
                    clock.uncertainty_ns as f64 / 1e6,
                    clock.rtt_ns as f64 / 1e6,
                    clock.samples
                )));
                pending -= 1;
            }
            Ok((i, Ev::Lost(why))) => {
                failures.push(format!("agent {}: {why}", links[i].addr));
                pending -= 1;
            }
            Ok(_) => {}
            Err(_) => {
                for l in links.iter().filter(|l| l.status == "connecting") {
                    failures.push(format!("agent {}: no answer within {} s", l.addr, CONNECT_WITHIN.as_secs()));
                }
                break;
            }
        }
        if opts.stop.load(Ordering::Relaxed) {
            failures.push("interrupted while connecting".into());
            break;
        }
    }
    if !failures.is_empty() {
        close_all(&mut links);
        bail!("not starting: {}", failures.join("; "));
    }
    for (i, l) in links.iter().enumerate() {
        if links[..i].iter().any(|o| o.name == l.name) {
            let name = l.name.clone();
            close_all(&mut links);
            bail!("not starting: two agents call themselves {name} (give each agent its own --name)");
        }
    }

    // 2. Plan (for the report), place the server side, shard the players.
    let t_plan = Instant::now();
    let players = horde_scenario::plan(sc, opts.stop).map_err(|e| e.into_anyhow())?;
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
        scenario: sc.text.clone(),
        service: service.clone(),
        players_total: sc.players,
        duration_ns: (sc.duration_s * 1e9).round() as u64,
        seed: sc.seed,
        key: key.to_hex(),
        server,
        players,
        server_addr,
        deadman_ms,
    };
    // The server side listens on the server agent's address (the one the controller reached),
    // at the scenario's port.
    let listen = SocketAddr::new(links[server_i].addr.ip(), sc.server.port());
    let server_players = (server_i < client_agents).then(|| shards[server_i].clone()).filter(|r| !r.is_empty());
    links[server_i].players = server_players.clone();
    let _ = links[server_i].cmd.send(Cmd::Assign(assignment(server_players.clone(), Some(listen), None)));
    links[server_i].roles_left = 1 + server_players.is_some() as u32;
    let server_addr = loop {
        match erx.recv_timeout(Duration::from_secs(120)) {
            Ok((i, Ev::Ready { server_addr: Some(a) })) if i == server_i => break a,
            Ok((i, Ev::Lost(why))) => {
                close_all(&mut links);
                bail!("not starting: agent {} ({}): {why}", links[i].name, links[i].addr);
            }
            Ok(_) => {}
            Err(_) => {
                close_all(&mut links);
                bail!("not starting: the server agent {} did not get ready within 120 s", links[server_i].name);
            }
        }
    };
    ev(&Event::Note(format!("server side on agent {} at {server_addr}", links[server_i].name)));
    let mut waiting = 0;
    for (i, r) in shards.iter().enumerate() {
        if i == server_i || r.is_empty() {
            continue;
        }
        links[i].players = Some(r.clone());
        links[i].roles_left = 1;
        let _ = links[i].cmd.send(Cmd::Assign(assignment(Some(r.clone()), None, Some(server_addr))));
        waiting += 1;
    }
    while waiting > 0 {
        match erx.recv_timeout(Duration::from_secs(120)) {
            Ok((_, Ev::Ready { .. })) => waiting -= 1,
            Ok((i, Ev::Lost(why))) => {
                close_all(&mut links);
                bail!("not starting: agent {} ({}): {why}", links[i].name, links[i].addr);
            }
            Ok(_) => {}
            Err(_) => {
                close_all(&mut links);
                bail!("not starting: agents did not get ready within 120 s");
            }
        }
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
    let hard_end = start + Duration::from_secs_f64(sc.duration_s) + Duration::from_secs(60);
    let mut signalled = false;
    loop {
        let clients_left = links.iter().filter(|l| l.players.is_some() && l.lost_at_s.is_none() && l.client_report.is_none() && l.roles_left > 0).count();
        if clients_left == 0 && !stopped_server {
            stopped_server = true;
            let _ = links[server_i].cmd.send(Cmd::Stop);
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
                "the agents overran the run by 60 s: stopping them".into()
            }));
            for l in &links {
                let _ = l.cmd.send(Cmd::Stop);
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            next_tick += Duration::from_secs(1);
            let agents = links
                .iter_mut()
                .map(|l| {
                    let d = |a: u64, b: u64| a.saturating_sub(b);
                    let r = [
                        d(l.last.sent_packets, l.prev.sent_packets),
                        d(l.last.sent_bytes, l.prev.sent_bytes) * 8,
                        d(l.last.recv_packets, l.prev.recv_packets),
                        d(l.last.recv_bytes, l.prev.recv_bytes) * 8,
                    ];
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
                        match role.as_str() {
                            "server" => l.server_report = report.map(|r| *r),
                            _ => l.client_report = report.map(|r| *r),
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
                        }
                    }
                    _ => {}
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }

    // 5. Collect every live agent's logs.
    let agents_dir = opts.out.join("agents");
    let mut collecting = 0;
    for l in links.iter_mut().filter(|l| l.lost_at_s.is_none()) {
        let dir = agents_dir.join(safe_name(&l.name));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let max = |r: &Option<horde_engine::SendReport>| {
            r.as_ref().map_or(0, |r| (horde_wire::LOG_HEADER_LEN + horde_wire::RECORD_LEN * 16) as u64 + horde_wire::RECORD_LEN as u64 * r.log_records)
        };
        let _ = l.cmd.send(Cmd::Collect { dir, client_max: max(&l.client_report), server_max: max(&l.server_report) });
        collecting += 1;
    }
    let t_collect = Instant::now();
    while collecting > 0 {
        match erx.recv_timeout(Duration::from_secs(300)) {
            Ok((i, Ev::Collected { bytes, transferred })) => {
                let l = &mut links[i];
                l.log_bytes += bytes;
                l.log_transferred += transferred;
                l.collected = true;
                collecting -= 1;
            }
            Ok((i, Ev::Lost(why))) => {
                let l = &mut links[i];
                if l.lost_at_s.is_none() && !l.collected {
                    l.lost_at_s = Some(start.elapsed().as_secs_f64());
                    l.status = format!("lost while collecting its logs: {why}");
                    ev(&Event::Note(format!("agent {}: {}", l.name, l.status)));
                    collecting -= 1;
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
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
        .map(|l| crate::merge::Part {
            name: l.name.clone(),
            dir: agents_dir.join(safe_name(&l.name)),
            offset_ns: l.clock.offset_ns,
            players: l.players.clone(),
            server: l.server,
            ok: l.collected && l.lost_at_s.is_none(),
            client: l.client_report.clone(),
            server_report: l.server_report.clone(),
        })
        .collect();
    let merged = crate::merge::merge(sc, &parts)?;
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

/// A name safe as a directory name.
fn safe_name(n: &str) -> String {
    let s: String = n.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).take(64).collect();
    if s.is_empty() || s.starts_with('.') {
        format!("agent{s}")
    } else {
        s
    }
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// One agent's link: connect, authenticate, hello, clock samples; then commands until Close.
fn link(i: usize, addr: SocketAddr, cfg: Arc<rustls::ClientConfig>, cmds: mpsc::Receiver<Cmd>, ev: &mpsc::Sender<(usize, Ev)>, deadman: Duration) {
    let send = |e: Ev| {
        let _ = ev.send((i, e));
    };
    let mut tls = match connect(addr, cfg) {
        Ok(t) => t,
        Err(e) => return send(Ev::Lost(format!("{e:#}"))),
    };
    let mut dec = msg::Decoder::default();
    let mut buf = vec![0u8; 256 << 10];
    // Hello and clock samples, with a deadline.
    let deadline = Instant::now() + CONNECT_WITHIN;
    let hello = (|| -> anyhow::Result<(String, u32, Estimate)> {
        write(&mut tls, &msg::encode(&ToAgent::Hello { protocol: PROTOCOL, version: env!("CARGO_PKG_VERSION").into() }))?;
        let (name, cores) = match read_msg(&mut tls, &mut dec, &mut buf, deadline)? {
            ToController::Hello { protocol, version, name, cores } => {
                if protocol != PROTOCOL || version != env!("CARGO_PKG_VERSION") {
                    bail!(
                        "it runs horde {version} (control protocol {protocol}), this controller horde {} (protocol {PROTOCOL}): run the same version on both",
                        env!("CARGO_PKG_VERSION")
                    );
                }
                (name, cores)
            }
            ToController::Error { message } => bail!("it refused: {message}"),
            other => bail!("it answered hello with {other:?}"),
        };
        let mut f = Filter::default();
        for _ in 0..CLOCK_SAMPLES {
            let t1 = real_ns();
            write(&mut tls, &msg::encode(&ToAgent::Time { t1 }))?;
            match read_msg(&mut tls, &mut dec, &mut buf, deadline)? {
                ToController::Time { t1: e1, t2, t3 } if e1 == t1 => f.add(Sample { t1, t2, t3, t4: real_ns() }),
                other => bail!("it answered a clock sample with {other:?}"),
            }
            std::thread::sleep(CLOCK_GAP);
        }
        Ok((name, cores, f.estimate().context("no usable clock sample")?))
    })();
    let clock = match hello {
        Ok((name, cores, clock)) => {
            send(Ev::Connected { name, cores, clock });
            clock
        }
        Err(e) => return send(Ev::Lost(format!("{e:#}"))),
    };
    let _ = tls.sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut last_ping = Instant::now();
    let mut last_heard = Instant::now();
    let mut running = false;
    let mut collecting: Option<Collect> = None;
    let lost_after = deadman.max(Duration::from_secs(1));
    loop {
        // Commands from the run.
        loop {
            let c = match cmds.try_recv() {
                Ok(c) => c,
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return,
            };
            let m = match c {
                Cmd::Assign(a) => ToAgent::Assign(a),
                Cmd::Start { at_controller_ns } => {
                    running = true;
                    last_heard = Instant::now();
                    ToAgent::Start { at_ns: (at_controller_ns as i128 + clock.offset_ns as i128).max(0) as u64 }
                }
                Cmd::Stop => ToAgent::Stop,
                Cmd::Collect { dir, client_max, server_max } => {
                    running = false;
                    collecting = Some(Collect { dir, client_max, server_max, file: None, bytes: 0, transferred: 0, total: 0, total_transferred: 0, files: 0 });
                    ToAgent::Collect
                }
                Cmd::Close => return,
            };
            if let Err(e) = write(&mut tls, &msg::encode(&m)) {
                return send(Ev::Lost(format!("writing to it: {}", crate::tls::describe(&e))));
            }
        }
        if last_ping.elapsed() >= Duration::from_secs(1) {
            last_ping = Instant::now();
            if let Err(e) = write(&mut tls, &msg::encode(&ToAgent::Ping)) {
                return send(Ev::Lost(format!("writing to it: {}", crate::tls::describe(&e))));
            }
        }
        match tls.read(&mut buf) {
            Ok(0) => return send(Ev::Lost("it closed the control connection".into())),
            Ok(n) => {
                last_heard = Instant::now();
                dec.push(&buf[..n]);
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {}
            Err(e) => return send(Ev::Lost(format!("control connection: {}", crate::tls::describe(&e)))),
        }
        loop {
            let f = match dec.frame::<ToController>() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => return send(Ev::Lost(format!("protocol error: {e}"))),
            };
            match (f, collecting.as_mut()) {
                (Frame::Msg(ToController::Ready { server_addr }), _) => send(Ev::Ready { server_addr }),
                (Frame::Msg(ToController::Progress(p)), _) => send(Ev::Progress(p)),
                (Frame::Msg(ToController::Finished { role, report, error, cpu_s, max_rss_kb }), _) => {
                    let report = report.and_then(|r| serde_json::from_value::<horde_engine::SendReport>(r).ok()).map(Box::new);
                    send(Ev::Finished { role, report, error, cpu_s, max_rss_kb })
                }
                (Frame::Msg(ToController::Error { message }), None) => return send(Ev::Lost(format!("it reported: {message}"))),
                (Frame::Msg(ToController::LogBegin { file, bytes }), Some(c)) => {
                    if let Err(e) = c.begin(&file, bytes) {
                        return send(Ev::Lost(format!("{e:#}")));
                    }
                }
                (Frame::Log(piece), Some(c)) => {
                    if let Err(e) = c.piece(&piece) {
                        return send(Ev::Lost(format!("{e:#}")));
                    }
                }
                (Frame::Msg(ToController::LogEnd { file, bytes, transferred }), Some(c)) => match c.end(&file, bytes, transferred) {
                    Ok(()) => {}
                    Err(e) => return send(Ev::Lost(format!("{e:#}"))),
                },
                (Frame::Msg(ToController::Collected { files }), Some(c)) => {
                    if c.file.is_some() || c.files != files {
                        return send(Ev::Lost(format!("it ended the collection after {} of {files} logs", c.files)));
                    }
                    send(Ev::Collected { bytes: c.total, transferred: c.total_transferred });
                    // Nothing more is expected from it: wait for the run to close the link.
                    let _ = cmds.recv();
                    return;
                }
                (Frame::Msg(ToController::Error { message }), Some(_)) => return send(Ev::Lost(format!("it could not send its logs: {message}"))),
                (other, _) => return send(Ev::Lost(format!("unexpected {:?}", std::mem::discriminant(&other)))),
            }
        }
        if running && last_heard.elapsed() > lost_after {
            return send(Ev::Lost(format!("silent for {:.1} s", last_heard.elapsed().as_secs_f64())));
        }
    }
}

/// A log being received: deflate pieces into a file, bounded by the size the agent declared.
struct Collect {
    dir: PathBuf,
    client_max: u64,
    server_max: u64,
    file: Option<(String, flate2::write::DeflateDecoder<std::fs::File>)>,
    bytes: u64,
    transferred: u64,
    total: u64,
    total_transferred: u64,
    files: u32,
}

impl Collect {
    fn begin(&mut self, file: &str, bytes: u64) -> anyhow::Result<()> {
        if !matches!(file, "client.hlog" | "server.hlog") || self.file.is_some() {
            bail!("it offered an unexpected log `{}`", file.escape_debug());
        }
        let max = if file == "client.hlog" { self.client_max } else { self.server_max };
        if bytes > max {
            bail!("it offered {file} of {bytes} bytes, more than the {max} bytes of the records it reported");
        }
        let f = std::fs::File::create(self.dir.join(file)).with_context(|| format!("creating {}", self.dir.join(file).display()))?;
        self.file = Some((file.to_string(), flate2::write::DeflateDecoder::new(f)));
        self.bytes = bytes;
        self.transferred = 0;
        Ok(())
    }

    fn piece(&mut self, p: &[u8]) -> anyhow::Result<()> {
        let Some((name, d)) = self.file.as_mut() else { bail!("log data outside a log") };
        d.write_all(p).with_context(|| format!("{name}: bad compressed data"))?;
        self.transferred += p.len() as u64;
        // Bounded: never more than the agent declared (a hostile agent cannot fill the disk
        // beyond it, and the declared size itself is checked against the run at merge).
        let written = d.total_out();
        if written > self.bytes {
            bail!("{name}: more data than the {} bytes it declared", self.bytes);
        }
        Ok(())
    }

    fn end(&mut self, file: &str, bytes: u64, transferred: u64) -> anyhow::Result<()> {
        let Some((name, d)) = self.file.take() else { bail!("end of a log that did not begin") };
        if name != file {
            bail!("end of {file} inside {name}");
        }
        let mut f = d.finish().with_context(|| format!("{name}: bad compressed data"))?;
        f.flush()?;
        let len = f.metadata()?.len();
        if len != bytes || bytes != self.bytes || transferred != self.transferred {
            bail!("{name}: received {len} bytes ({} transferred) of the {bytes} declared ({transferred} transferred)", self.transferred);
        }
        self.total += bytes;
        self.total_transferred += transferred;
        self.files += 1;
        Ok(())
    }
}

fn connect(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> anyhow::Result<Tls> {
    let mut tcp =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| format!("connecting to {addr} (is `horde agent` running there?)"))?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(CONNECT_WITHIN))?;
    tcp.set_write_timeout(Some(CONNECT_WITHIN))?;
    let mut conn = rustls::ClientConnection::new(cfg, crate::tls::agent_server_name()).context("TLS")?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut tcp) {
            bail!("TLS handshake: {}", crate::tls::describe(&e));
        }
    }
    Ok(rustls::StreamOwned::new(conn, tcp))
}

fn write(tls: &mut Tls, b: &[u8]) -> std::io::Result<()> {
    tls.write_all(b)?;
    tls.flush()
}

fn read_msg(tls: &mut Tls, dec: &mut msg::Decoder, buf: &mut [u8], deadline: Instant) -> anyhow::Result<ToController> {
    loop {
        match dec.frame::<ToController>()? {
            Some(Frame::Msg(m)) => return Ok(m),
            Some(Frame::Log(_)) => bail!("a log piece before any run"),
            None => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("no answer within {} s", CONNECT_WITHIN.as_secs());
        }
        tls.sock.set_read_timeout(Some(left))?;
        match tls.read(buf) {
            Ok(0) => bail!("it closed the connection"),
            Ok(n) => dec.push(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted) => {}
            Err(e) => bail!("{}", crate::tls::describe(&e)),
        }
    }
}
