//! A run on the agent: prepared from an assignment by its kind (a scenario's players and/or
//! server side, regulated circuits, flows, bots), started at the common instant, finished, and
//! its logs streamed to the controller.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use horde_engine::clock::real_ns;
use horde_engine::sender::Progress;
use horde_model::scenario::Scenario;
use horde_proto::RunKey;
use horde_scenario::circuits::Config as CircuitConfig;

use super::{cpu_s, write, AgentOptions};
use crate::metrics::Metrics;
use crate::msg::{self, Part, ToController};

/// What a run's threads tell the session: a role ended with its report (a
/// [`horde_engine::SendReport`], or a [`horde_engine::RecvReport`] for "recv"), or failed.
pub(super) enum RunEvent {
    Finished { role: &'static str, report: Result<serde_json::Value, String> },
}

pub(super) fn finished<T: serde::Serialize>(role: &'static str, r: Result<T, String>) -> RunEvent {
    RunEvent::Finished { role, report: r.map(|r| serde_json::to_value(&r).unwrap_or_default()) }
}

/// What an assignment runs.
pub(super) enum Work {
    /// A scenario's part: its players' client side and/or its server side; with a
    /// `[regulation]` table, every player is a regulated circuit (`circuits`). With `[emu]`,
    /// `netns`: the emulated hosts its players go on in turn.
    Scenario { sc: Box<Scenario>, players: Arc<horde_scenario::Players>, circuits: Option<Box<CircuitConfig>>, netns: Vec<Arc<std::fs::File>> },
    /// Flows of a flow file to send (receivers start at prepare).
    Flows { send: Vec<horde_model::Flow>, tap: horde_engine::logger::TapSlot },
    /// Bots against a game server.
    Bots { opts: Box<horde_engine::bots::BotsOptions> },
}

/// A prepared or running assignment.
pub(super) struct Run {
    pub(super) dir: PathBuf,
    pub(super) work: Work,
    pub(super) assignment: Part,
    pub(super) key: RunKey,
    pub(super) stop: Arc<AtomicBool>,
    /// The server side, or the flows' receiver: its thread, and where it listens.
    pub(super) server: Option<(std::thread::JoinHandle<()>, SocketAddr)>,
    pub(super) clients: Option<std::thread::JoinHandle<()>>,
    pub(super) progress: Arc<Progress>,
    pub(super) cpu0: f64,
    pub(super) t0: Instant,
    /// A scenario's live summary (its players and server side here; not regulated circuits).
    pub(super) live: Option<super::live::Live>,
    /// A scenario's server side here: its half of the command channel.
    pub(super) server_commands: Option<horde_scenario::control::CommandSender>,
    /// Players this agent starts while the run goes (its share of a raised target).
    pub(super) joining: Arc<horde_engine::sender::Joining>,
}

impl Run {
    /// A prepared run: nothing runs on its clients' side yet.
    fn prepared(
        dir: PathBuf,
        work: Work,
        assignment: Part,
        key: RunKey,
        stop: Arc<AtomicBool>,
        server: Option<(std::thread::JoinHandle<()>, SocketAddr)>,
        progress: Arc<Progress>,
    ) -> Run {
        Run {
            dir,
            work,
            assignment,
            key,
            stop,
            server,
            clients: None,
            progress,
            cpu0: cpu_s(),
            t0: Instant::now(),
            live: None,
            server_commands: None,
            joining: Default::default(),
        }
    }

    /// Sets the online target on this agent's sides of the run: its players' roster and its
    /// server side's. A target above the players planned so far plans the rest (every side
    /// keeps every player's stays); `start`: those of them this agent starts.
    pub(super) fn steer(&self, online: u32, at_ns: u64, start: Option<std::ops::Range<u32>>, owners: &[(std::ops::Range<u32>, i64)]) -> anyhow::Result<()> {
        let Work::Scenario { sc, players, circuits: None, netns } = &self.work else {
            anyhow::bail!("this run has no online target (only a scenario's open-loop players have one)");
        };
        players.grow(online).map_err(anyhow::Error::msg)?;
        if let Some(l) = &self.live {
            l.owners(owners);
        }
        players.roster.set(at_ns, online)?;
        if let Some(r) = start {
            let part = self.assignment.scenario_part().context("no scenario part")?;
            if r.start < sc.players || r.end > online || r.is_empty() {
                anyhow::bail!("players {}..{} are not players this raise to {online} adds", r.start, r.end);
            }
            let server = part.server_addr.or(self.server.as_ref().map(|s| s.1)).context("no server side to send the players to")?;
            let clients = horde_scenario::Clients {
                players,
                shard: r.clone(),
                server,
                key: self.key.clone(),
                log: self.dir.join("client.hlog"),
                log_tap: Default::default(),
                progress: self.progress.clone(),
                netns: netns.clone(),
                joining: Some(self.joining.clone()),
                start_at_real_ns: None,
            };
            clients.start_more(sc, r, at_ns);
        }
        if let Some(tx) = &self.server_commands {
            let c = horde_scenario::control::Command::Players { online, at_ns: Some(at_ns) };
            tx.send(horde_scenario::control::Incoming { id: 0, command: Ok(c) }).map_err(|_| anyhow::anyhow!("the server side has ended"))?;
        }
        Ok(())
    }
}

/// Stops what still runs, waits for it, and removes the run's directory (Horde's own state)
/// unless asked to keep it.
pub(super) fn finish_run(r: Run, rx: &mpsc::Receiver<RunEvent>, opts: &AgentOptions, log: &(dyn Fn(&str) + Sync)) {
    r.stop.store(true, Ordering::Relaxed);
    if let Some((h, _)) = r.server {
        let _ = h.join();
    }
    // A stopped client side ends within its linger.
    if let Some(h) = r.clients {
        let _ = h.join();
    }
    while rx.try_recv().is_ok() {}
    if !opts.keep {
        if let Err(e) = std::fs::remove_dir_all(&r.dir) {
            log(&format!("removing {}: {e}", r.dir.display()));
        }
    }
}

/// Parses the shipped scenario, plans its players, and starts the server side if assigned
/// (it only answers players that sign with the run's key; traffic starts at Start).
pub(super) fn prepare(a: Part, opts: &AgentOptions, metrics: &Arc<Metrics>, tx: mpsc::Sender<RunEvent>) -> anyhow::Result<Run> {
    let key = RunKey::parse_hex(&a.shape.key).map_err(|e| anyhow::anyhow!("key: {e}"))?;
    let part = a.scenario_part().context("no scenario part")?.clone();
    // The scenario names no file the agent would read (its service file came with it), nor any
    // value file its distributions name (the controller sent their values inline).
    let mut sc = part.scenario.resolve(a.shape.duration_ns, a.shape.seed).map_err(anyhow::Error::msg)?;
    // [emu] through agents: the hosts of this machine's part the controller placed it in
    let (netns, server_ns) = match (&part.emu, sc.emu.is_some()) {
        (Some(e), true) => {
            let clients = super::emu::host_namespaces(opts, &e.exp, &e.clients).map_err(anyhow::Error::msg)?;
            let server = super::emu::host_namespaces(opts, &e.exp, e.server.as_slice()).map_err(anyhow::Error::msg)?;
            (clients.into_iter().map(Arc::new).collect::<Vec<_>>(), server.into_iter().next())
        }
        (None, true) => anyhow::bail!(
            "a scenario with [emu] goes through agents only placed in the emulated network they built (`horde run --agents` with agents started with --emu)"
        ),
        (Some(_), false) => anyhow::bail!("an emulated placement for a scenario without [emu]"),
        (None, false) => (Vec::new(), None),
    };
    if let Some(r) = &part.players {
        if r.end > sc.players {
            anyhow::bail!("players {}..{} are not players of a {}-player scenario", r.start, r.end, sc.players);
        }
    }
    let dir = opts.dir.join(&a.run_id);
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let circuits = CircuitConfig::of(&sc).map_err(|e| e.into_anyhow())?.map(Box::new);
    let stop = Arc::new(AtomicBool::new(false));
    // a raised target may plan players up to the run's stated limit (the controller's)
    let limit = part.scenario.max_players.unwrap_or(sc.players);
    let players = Arc::new(horde_scenario::plan(&sc, limit, &stop).map_err(|e| e.into_anyhow())?);
    metrics.players.store(part.players.as_ref().map_or(0, |r| (r.end - r.start) as u64), Ordering::Relaxed);
    metrics.runs.fetch_add(1, Ordering::Relaxed);
    let progress = Arc::new(Progress::default());
    *metrics.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(progress.clone());
    let (server_commands, commands) = horde_scenario::control::Commands::channel();
    let live = circuits.is_none().then(|| super::live::Live::new(&sc, &players));
    let server_tap = live.as_ref().map(|l| l.tap(horde_model::service::Direction::Down)).unwrap_or_default();
    let server = match part.server {
        Some(listen) => {
            sc.server = listen;
            let (atx, arx) = mpsc::channel();
            let (sc2, dir2, key2, stop2, cfg) = (sc.clone(), dir.clone(), key.clone(), stop.clone(), circuits.clone());
            let h = std::thread::Builder::new().name("horde-agent-server".into()).spawn(move || {
                let listening = |addr| {
                    let _ = atx.send(addr);
                };
                let serve = || match cfg {
                    // The circuits are in the server side's file (collected); the report counts them.
                    Some(cfg) => horde_scenario::circuits::serve(&sc2, &cfg, &dir2, key2, &stop2, listening, &horde_engine::clock::System)
                        .map(|c| serde_json::json!({ "circuits": c.len() })),
                    None => horde_scenario::serve(
                        &sc2,
                        &dir2,
                        key2,
                        &stop2,
                        listening,
                        horde_scenario::ServeHooks { commands: Some(&commands), log_tap: server_tap, limit: Some(limit), ..Default::default() },
                    )
                    .map(|r| serde_json::to_value(r).unwrap_or_default()),
                };
                // with [emu], inside the server host (its sockets and threads are made there)
                let report = match server_ns {
                    Some(ns) => horde_engine::net::within_netns(&ns, serve)
                        .unwrap_or_else(|e| Err(horde_scenario::Error::Failed(anyhow::anyhow!("entering the server host: {e}")))),
                    None => serve(),
                };
                let _ = tx.send(finished("server", report.map_err(|e| format!("{:#}", e.into_anyhow()))));
            })?;
            match arx.recv_timeout(Duration::from_secs(60)) {
                Ok(addr) => Some((h, addr)),
                Err(_) => {
                    stop.store(true, Ordering::Relaxed);
                    let _ = h.join();
                    anyhow::bail!("the server side did not start listening on {listen}");
                }
            }
        }
        None => None,
    };
    let server_commands = server.as_ref().map(|_| server_commands);
    let work = Work::Scenario { sc: Box::new(sc), players, circuits, netns };
    Ok(Run { server_commands, live, ..Run::prepared(dir, work, a, key, stop, server, progress) })
}

/// Resolves the shipped flow file, keeps the flows this agent sends, and starts its receiver if
/// assigned: it listens now, takes only hellos signed with the run's key, and ends at Stop or
/// after the run's duration.
pub(super) fn prepare_flows(a: Part, opts: &AgentOptions, metrics: &Arc<Metrics>, tx: mpsc::Sender<RunEvent>) -> anyhow::Result<Run> {
    let key = RunKey::parse_hex(&a.shape.key).map_err(|e| anyhow::anyhow!("key: {e}"))?;
    let crate::msg::Work::Flows(job) = a.work.clone() else { anyhow::bail!("no flows") };
    horde_model::scenario::check_duration(a.shape.duration_ns).map_err(|m| anyhow::anyhow!("duration: {m}"))?;
    let all = horde_model::files::without_value_files(|| horde_model::flow::FlowFile::parse_and_resolve(&job.text, job.seed))
        .map_err(|e| anyhow::anyhow!("flow file: {e}"))?;
    let wanted = |id: u32| job.send.iter().any(|r| r.contains(&id));
    let send: Vec<horde_model::Flow> = all.iter().filter(|f| wanted(f.id)).cloned().collect();
    let asked: u64 = job.send.iter().map(|r| (r.end - r.start) as u64).sum();
    if send.len() as u64 != asked {
        anyhow::bail!("the flow file has {} flows; {asked} were assigned here, {} of them exist", all.len(), send.len());
    }
    // Connected and authenticated to the log server before anything starts: a refusal fails
    // the assignment, with the server's reason.
    let tap = |role: horde_wire::Role, suffix: &str| -> anyhow::Result<horde_engine::logger::TapSlot> {
        let Some(l) = &job.log_server else { return Ok(Default::default()) };
        let k = RunKey::parse_hex(&l.key).map_err(|e| anyhow::anyhow!("log server key: {e}"))?;
        let s = crate::logstream::LogStream::connect(l.addr, &k, role, &format!("{}-{suffix}", l.name))?;
        Ok(horde_engine::logger::TapSlot::new(Box::new(s)))
    };
    let send_tap = if send.is_empty() { Default::default() } else { tap(horde_wire::Role::Sender, "send")? };
    let recv_tap = if job.recv_udp.is_empty() && job.recv_tcp.is_empty() { Default::default() } else { tap(horde_wire::Role::Receiver, "recv")? };
    let dir = opts.dir.join(&a.run_id);
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let stop = Arc::new(AtomicBool::new(false));
    metrics.players.store(0, Ordering::Relaxed);
    metrics.runs.fetch_add(1, Ordering::Relaxed);
    let progress = Arc::new(Progress::default());
    *metrics.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(progress.clone());
    let server = if job.recv_udp.is_empty() && job.recv_tcp.is_empty() {
        None
    } else {
        let ropts = horde_engine::RecvOptions {
            log_tap: recv_tap,
            udp: job.recv_udp.clone(),
            tcp: job.recv_tcp.clone(),
            log: Some(dir.join("recv.hlog")),
            // The controller stops it when the senders are done; this bounds it if it cannot.
            duration: Some(Duration::from_nanos(a.shape.duration_ns) + Duration::from_secs(60)),
            key: key.clone(),
            ..Default::default()
        };
        let ended = move |r| drop(tx.send(finished("recv", r)));
        match horde_engine::receiver::spawn(ropts, stop.clone(), None, "horde-agent-recv".into(), Duration::from_secs(30), ended) {
            Ok(r) => Some((r.handle, r.bound.first().copied().unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))))),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                anyhow::bail!("the receiver did not start: {e}");
            }
        }
    };
    Ok(Run::prepared(dir, Work::Flows { send, tap: send_tap }, a, key, stop, server, progress))
}

/// Checks the bots' part and opens its run directory; the bots start at Start.
pub(super) fn prepare_bots(a: Part, opts: &AgentOptions, metrics: &Arc<Metrics>) -> anyhow::Result<Run> {
    let key = RunKey::parse_hex(&a.shape.key).map_err(|e| anyhow::anyhow!("key: {e}"))?;
    let dir = opts.dir.join(&a.run_id);
    let crate::msg::Work::Bots(job) = &a.work else { anyhow::bail!("no bots part") };
    let bots = horde_engine::bots::BotsOptions {
        log: Some(dir.join("bots.hlog")),
        ..crate::bots::options(job, a.shape.seed, a.shape.duration_ns).map_err(anyhow::Error::msg)?
    };
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    metrics.players.store(bots.ids.as_ref().map_or(0, |r| r.len() as u64), Ordering::Relaxed);
    metrics.runs.fetch_add(1, Ordering::Relaxed);
    let progress = Arc::new(Progress::default());
    *metrics.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(progress.clone());
    let stop = Arc::new(AtomicBool::new(false));
    Ok(Run::prepared(dir, Work::Bots { opts: Box::new(bots) }, a, key, stop, None, progress))
}

/// Sleeps to the common start, a sleep cut short every 100 ms to notice a stop.
pub(super) fn wait_until(at_ns: u64, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let now = real_ns();
        if now >= at_ns {
            break;
        }
        std::thread::sleep(Duration::from_nanos((at_ns - now).min(100_000_000)));
    }
}

/// Starts the client side of a prepared run at `at_ns` (the agent's clock).
pub(super) fn start(r: &mut Run, at_ns: u64, tx: mpsc::Sender<RunEvent>, metrics: &Arc<Metrics>) {
    metrics.running.store(true, Ordering::Relaxed);
    r.cpu0 = cpu_s();
    r.t0 = Instant::now();
    let (key, stop, progress) = (r.key.clone(), r.stop.clone(), r.progress.clone());
    let spawned = match &r.work {
        Work::Flows { send, tap } => {
            if send.is_empty() {
                return;
            }
            let (flows, log, log_tap) = (send.clone(), r.dir.join("send.hlog"), tap.clone());
            let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            // the sockets open now; the schedule's zero is the common start
            std::thread::Builder::new().name("horde-agent-send".into()).spawn(move || {
                let opts = horde_engine::SendOptions {
                    threads: cores.min(flows.len()).max(1),
                    log: Some(log),
                    log_tap,
                    key,
                    greet: true,
                    progress: Some(progress),
                    start_at_real_ns: Some(at_ns),
                    ..Default::default()
                };
                let report = horde_engine::sender::run(flows, &opts, &stop).map_err(|e| format!("{e:#}"));
                drop(opts);
                let _ = tx.send(finished("send", report));
            })
        }
        Work::Bots { opts } => {
            let opts = opts.clone();
            std::thread::Builder::new().name("horde-agent-bots".into()).spawn(move || {
                wait_until(at_ns, &stop);
                let report = horde_engine::bots::run(&opts, &stop).map_err(|e| format!("{e:#}"));
                let _ = tx.send(finished("bots", report));
            })
        }
        Work::Scenario { sc, players, circuits, netns } => {
            let Some(part) = r.assignment.scenario_part() else { return };
            let Some(shard) = part.players.clone() else { return };
            // Players go to the given server side, or to this agent's own.
            let Some(server) = part.server_addr.or(r.server.as_ref().map(|s| s.1)) else { return };
            if let Some(cfg) = circuits {
                let (sc, cfg, file, netns) = (sc.clone(), cfg.clone(), r.dir.join(horde_scenario::circuits::CLIENT_FILE), netns.clone());
                let spawned = std::thread::Builder::new().name("horde-agent-circuits".into()).spawn(move || {
                    wait_until(at_ns, &stop);
                    let r = horde_scenario::circuits::run_clients(&sc, &cfg, shard, server, &key, &netns, &progress, &stop, None, &horde_engine::clock::System)
                        .and_then(|c| {
                            std::fs::write(&file, serde_json::to_vec(&c)?).with_context(|| format!("writing {}", file.display()))?;
                            Ok(serde_json::json!({ "circuits": c.len(), "joined": c.iter().filter(|c| c.joined_s.is_some()).count() }))
                        });
                    let _ = tx.send(finished("clients", r.map_err(|e| format!("{e:#}"))));
                });
                match spawned {
                    Ok(h) => r.clients = Some(h),
                    Err(_) => r.stop.store(true, Ordering::Relaxed),
                }
                return;
            }
            let (sc, players, log, netns) = (sc.clone(), players.clone(), r.dir.join("client.hlog"), netns.clone());
            let joining = r.joining.clone();
            let log_tap = r.live.as_ref().map(|l| l.tap(horde_model::service::Direction::Up)).unwrap_or_default();
            // the players connect now; their schedules' zero is the common start
            std::thread::Builder::new().name("horde-agent-clients".into()).spawn(move || {
                let c = horde_scenario::Clients {
                    players: &players,
                    shard,
                    server,
                    key,
                    log,
                    log_tap,
                    progress: progress.clone(),
                    netns,
                    joining: Some(joining),
                    start_at_real_ns: Some(at_ns),
                };
                let report = horde_scenario::run_clients(&sc, &c, &stop).map_err(|e| format!("{e:#}"));
                drop(c);
                drop(progress);
                let _ = tx.send(finished("clients", report));
            })
        }
    };
    match spawned {
        Ok(h) => r.clients = Some(h),
        Err(_) => r.stop.store(true, Ordering::Relaxed),
    }
}

/// Streams the run's logs: each as LogBegin, deflate pieces, LogEnd.
pub(super) fn send_logs(tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>, r: &Run) -> anyhow::Result<()> {
    send_files(tls, r, &log_files(r))
}

/// The logs a finished run wrote, by its kind.
pub(super) fn log_files(r: &Run) -> Vec<&'static str> {
    let mut files = Vec::new();
    match (&r.work, &r.assignment.work) {
        (Work::Bots { .. }, _) => files.push("bots.hlog"),
        (Work::Flows { send, .. }, crate::msg::Work::Flows(job)) => {
            if !send.is_empty() {
                files.push("send.hlog");
            }
            if !job.recv_udp.is_empty() || !job.recv_tcp.is_empty() {
                files.push("recv.hlog");
            }
        }
        (Work::Scenario { circuits, .. }, crate::msg::Work::Scenario(part)) => {
            let regulated = circuits.is_some();
            if part.players.is_some() {
                files.push(if regulated { horde_scenario::circuits::CLIENT_FILE } else { "client.hlog" });
            }
            if part.server.is_some() {
                files.push(if regulated { horde_scenario::circuits::SERVER_FILE } else { "server.hlog" });
            }
        }
        _ => {}
    }
    files
}

/// Streams `files` of the run's directory to the controller (deflate), then says how many.
pub(super) fn send_files(tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>, r: &Run, files: &[&str]) -> anyhow::Result<()> {
    use flate2::write::DeflateEncoder;
    let mut sent = 0u32;
    for &f in files {
        let path = r.dir.join(f);
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) => {
                write(tls, &msg::encode(&ToController::Error { message: format!("{f}: {e}") }))?;
                continue;
            }
        };
        let bytes = file.metadata()?.len();
        write(tls, &msg::encode(&ToController::LogBegin { file: f.into(), bytes }))?;
        let mut enc = DeflateEncoder::new(Vec::with_capacity(msg::LOG_PIECE * 2), flate2::Compression::fast());
        let mut chunk = vec![0u8; 1 << 20];
        let mut transferred = 0u64;
        loop {
            let n = file.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            enc.write_all(&chunk[..n])?;
            if enc.get_ref().len() >= msg::LOG_PIECE {
                let out = std::mem::take(enc.get_mut());
                for piece in out.chunks(msg::LOG_PIECE) {
                    write(tls, &msg::encode_log(piece))?;
                    transferred += piece.len() as u64;
                }
            }
        }
        let out = enc.finish()?;
        for piece in out.chunks(msg::LOG_PIECE) {
            write(tls, &msg::encode_log(piece))?;
            transferred += piece.len() as u64;
        }
        write(tls, &msg::encode(&ToController::LogEnd { file: f.into(), bytes, transferred }))?;
        sent += 1;
    }
    write(tls, &msg::encode(&ToController::Collected { files: sent }))?;
    Ok(())
}
