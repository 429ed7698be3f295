//! `run_part`: the one way a [`Part`] runs, whatever its placement — an agent (every kind), a
//! child of `horde run` or a thread of it (a scenario's server side). The placement gives the
//! part its directory, its hosts and its hooks ([`Env`]); [`prepare`] checks the part, plans it
//! and starts what must listen before the start (a server side, flows' receivers);
//! [`Running::start`] starts the rest at the common instant; each role's end comes back as a
//! [`Done`] with its report; [`Running::finish`] stops and joins what still runs.

use std::fs::File;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::Context as _;
use horde_engine::clock::Clock;
use horde_engine::logger::TapSlot;
use horde_engine::sender::{Joining, Progress};
use horde_model::scenario::Scenario;
use horde_proto::RunKey;

use crate::circuits::Config as CircuitConfig;
use crate::part::{Part, ScenarioPart, Work};
use crate::server::ServerSecond;
use crate::Players;

/// A role of a part ended: its report (a [`horde_engine::SendReport`], a
/// [`horde_engine::RecvReport`] for "recv", bots' or circuits' figures), or its error.
pub struct Done {
    pub role: &'static str,
    pub report: Result<serde_json::Value, String>,
}

fn done<T: serde::Serialize>(role: &'static str, r: Result<T, String>) -> Done {
    Done { role, report: r.map(|r| serde_json::to_value(&r).unwrap_or_default()) }
}

/// A server side's live figures each second: the one-way delay of what it received, and the
/// seconds of departures it closed.
pub type ServerLive = Box<dyn Fn(Option<horde_engine::live::Percentiles>, &[ServerSecond]) + Send + Sync>;
/// Once a scenario's players are planned: where its server side's records and its players'
/// also go (an agent's live summary), in that order.
pub type Planned = Box<dyn FnOnce(&Scenario, &Arc<Players>) -> (TapSlot, TapSlot) + Send>;
/// A flows part's log stream to a log server, by role and name suffix ("send", "recv").
pub type LogServer = Box<dyn Fn(horde_wire::Role, &str) -> anyhow::Result<TapSlot> + Send>;

/// What the placement gives a part.
pub struct Env {
    /// Where its logs and reports go (the placement made it).
    pub dir: PathBuf,
    /// A scenario with `[emu]`: the hosts its players go on in turn, and its server side's.
    pub clients_ns: Vec<Arc<File>>,
    pub server_ns: Option<File>,
    /// Each role's end.
    pub done: mpsc::Sender<Done>,
    pub server_live: Option<ServerLive>,
    pub planned: Option<Planned>,
    pub log_server: Option<LogServer>,
    /// The scenario's plan, when the placement has made it already (this process's driver):
    /// the part plans none of its own.
    pub players: Option<Arc<Players>>,
    /// Regulated circuits here: where their last closed second goes (a driver's progress).
    pub circuits_live: Option<CircuitsLive>,
    pub clock: &'static dyn Clock,
}

/// The regulated circuits' last closed second, as they close it.
pub type CircuitsLive = Arc<std::sync::Mutex<Option<crate::circuits::CircuitsLive>>>;

impl Env {
    /// A part in `dir` on this machine's network and clock, with no hooks.
    pub fn new(dir: PathBuf, done: mpsc::Sender<Done>) -> Env {
        Env {
            dir,
            clients_ns: Vec::new(),
            server_ns: None,
            done,
            server_live: None,
            planned: None,
            log_server: None,
            players: None,
            circuits_live: None,
            clock: &horde_engine::clock::System,
        }
    }
}

/// What a prepared part runs at the start.
pub enum Ready {
    /// A scenario's part: its players' client side and/or its server side; with a
    /// `[regulation]` table, every player is a regulated circuit (`circuits`). `players`: the
    /// plan, where this side needs one of its own (open-loop players here, a live summary).
    Scenario { sc: Box<Scenario>, players: Option<Arc<Players>>, circuits: Option<Box<CircuitConfig>>, netns: Vec<Arc<File>>, tap: TapSlot },
    /// Flows of a flow file to send (their receivers listen from [`prepare`]).
    Flows { send: Vec<horde_model::Flow>, tap: TapSlot },
    /// Bots against a game server.
    Bots { opts: Box<horde_engine::bots::BotsOptions> },
}

/// A prepared or running part.
pub struct Running {
    pub part: Part,
    pub dir: PathBuf,
    pub ready: Ready,
    pub key: RunKey,
    pub stop: Arc<AtomicBool>,
    /// The server side, or the flows' receiver: its thread, and where it listens.
    pub server: Option<(std::thread::JoinHandle<()>, SocketAddr)>,
    pub clients: Option<std::thread::JoinHandle<()>>,
    pub progress: Arc<Progress>,
    /// A scenario's server side here: its half of the command channel.
    pub server_commands: Option<crate::control::CommandSender>,
    /// Players this part starts while the run goes (its share of a raised target).
    pub joining: Arc<Joining>,
    circuits_live: Option<CircuitsLive>,
    done: mpsc::Sender<Done>,
    clock: &'static dyn Clock,
}

/// Checks and plans a part, and starts what listens before the start: a scenario's server side
/// (it answers only players that sign with the run's key; traffic starts at [`Running::start`]),
/// a flows part's receivers.
pub fn prepare(part: Part, env: Env) -> anyhow::Result<Running> {
    let key = RunKey::parse_hex(&part.shape.key).map_err(|e| anyhow::anyhow!("key: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut r = Running {
        dir: env.dir.clone(),
        ready: Ready::Flows { send: Vec::new(), tap: Default::default() },
        key,
        stop,
        server: None,
        clients: None,
        progress: Arc::new(Progress::default()),
        server_commands: None,
        joining: Default::default(),
        circuits_live: env.circuits_live.clone(),
        done: env.done.clone(),
        clock: env.clock,
        part,
    };
    match r.part.work.clone() {
        Work::Scenario(p) => scenario(&mut r, &p, env)?,
        Work::Flows(job) => flows(&mut r, &job, env)?,
        Work::Bots(job) => {
            let opts = job.options(r.part.shape.seed, r.part.shape.duration_ns).map_err(anyhow::Error::msg)?;
            r.ready = Ready::Bots { opts: Box::new(horde_engine::bots::BotsOptions { log: Some(r.dir.join("bots.hlog")), ..opts }) };
        }
    }
    Ok(r)
}

fn scenario(r: &mut Running, part: &ScenarioPart, env: Env) -> anyhow::Result<()> {
    // The scenario names no file this side would read (its service file came with it), nor any
    // value file its distributions name (the asker sent their values inline).
    let mut sc = part.scenario.resolve(r.part.shape.duration_ns, r.part.shape.seed).map_err(anyhow::Error::msg)?;
    if let Some(p) = &part.players {
        if p.end > sc.players {
            anyhow::bail!("players {}..{} are not players of a {}-player scenario", p.start, p.end, sc.players);
        }
    }
    let circuits = CircuitConfig::of(&sc).map_err(|e| e.into_anyhow())?.map(Box::new);
    // a raised target may plan players up to the run's stated limit (the driver's)
    let limit = part.scenario.max_players.unwrap_or(sc.players);
    // (a server side plans its own; a second plan here only where this side needs one)
    let players = match (env.players, circuits.is_none() && (part.players.is_some() || env.planned.is_some())) {
        (Some(p), _) => Some(p),
        (None, true) => Some(Arc::new(crate::plan(&sc, limit, &r.stop).map_err(|e| e.into_anyhow())?)),
        (None, false) => None,
    };
    let (server_tap, client_tap) = match (env.planned, &players) {
        (Some(f), Some(p)) => f(&sc, p),
        _ => Default::default(),
    };
    if let Some(listen) = part.server {
        sc.server = listen;
        let (tx, commands) = crate::control::Commands::channel();
        let (atx, arx) = mpsc::channel();
        let (sc2, dir, key, stop, done_tx, live, ns, clock) =
            (sc.clone(), r.dir.clone(), r.key.clone(), r.stop.clone(), r.done.clone(), env.server_live, env.server_ns, env.clock);
        let h = std::thread::Builder::new().name("horde-part-server".into()).spawn(move || {
            let (failed, heard) = (atx.clone(), AtomicBool::new(false));
            let listening = |addr| {
                heard.store(true, Ordering::Relaxed);
                let _ = atx.send(Ok(addr));
            };
            let hooks =
                crate::server::ServeHooks { commands: Some(&commands), live: live.as_deref().map(|l| l as _), log_tap: server_tap, clock, limit: Some(limit) };
            let serve = || serve(&sc2, &dir, key, &stop, listening, hooks);
            // with [emu], inside the server host (its sockets and threads are made there)
            let report = match ns {
                Some(ns) => {
                    horde_engine::net::within_netns(&ns, serve).unwrap_or_else(|e| Err(crate::Error::Failed(anyhow::anyhow!("entering the server host: {e}"))))
                }
                None => serve(),
            }
            .map_err(|e| format!("{:#}", e.into_anyhow()));
            if heard.load(Ordering::Relaxed) {
                let _ = done_tx.send(done("server", report));
            } else {
                // before it listened: the part fails with the reason
                let _ = failed.send(Err(report.err().unwrap_or_else(|| "it ended before it listened".into())));
            }
        })?;
        match arx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(addr)) => r.server = Some((h, addr)),
            not => {
                r.stop.store(true, Ordering::Relaxed);
                let _ = h.join();
                match not {
                    Ok(Err(m)) => anyhow::bail!("the server side did not start: {m}"),
                    _ => anyhow::bail!("the server side did not start listening on {listen}"),
                }
            }
        }
        r.server_commands = Some(tx);
    }
    r.ready = Ready::Scenario { sc: Box::new(sc), players, circuits, netns: env.clients_ns, tap: client_tap };
    Ok(())
}

/// A scenario's server side, open-loop or regulated; what it served.
fn serve(
    sc: &Scenario,
    dir: &std::path::Path,
    key: RunKey,
    stop: &AtomicBool,
    listening: impl FnOnce(SocketAddr),
    hooks: crate::ServeHooks,
) -> Result<serde_json::Value, crate::Error> {
    match CircuitConfig::of(sc)? {
        // the circuits are in the server side's file; the report counts them
        Some(cfg) => crate::circuits::serve(sc, &cfg, dir, key, stop, listening, hooks.clock).map(|c| serde_json::json!({ "circuits": c.len() })),
        None => crate::server::serve(sc, dir, key, stop, listening, hooks).map(|r| serde_json::to_value(r).unwrap_or_default()),
    }
}

/// Resolves the shipped flow file, keeps the flows this part sends, and starts its receiver if
/// it has one: it listens now, takes only hellos signed with the run's key, and ends at the
/// stop or after the run's duration.
fn flows(r: &mut Running, job: &crate::part::FlowsJob, env: Env) -> anyhow::Result<()> {
    horde_model::scenario::check_duration(r.part.shape.duration_ns).map_err(|m| anyhow::anyhow!("duration: {m}"))?;
    let all = horde_model::files::without_value_files(|| horde_model::flow::FlowFile::parse_and_resolve(&job.text, job.seed))
        .map_err(|e| anyhow::anyhow!("flow file: {e}"))?;
    let send: Vec<horde_model::Flow> = all.iter().filter(|f| job.send.iter().any(|r| r.contains(&f.id))).cloned().collect();
    let asked: u64 = job.send.iter().map(|r| (r.end - r.start) as u64).sum();
    if send.len() as u64 != asked {
        anyhow::bail!("the flow file has {} flows; {asked} were assigned here, {} of them exist", all.len(), send.len());
    }
    let receives = !job.recv_udp.is_empty() || !job.recv_tcp.is_empty();
    // Connected and authenticated to the log server before anything starts: a refusal fails
    // the part, with the server's reason.
    let tap = |role, suffix: &str| env.log_server.as_ref().map_or(Ok(TapSlot::default()), |f| f(role, suffix));
    let send_tap = if send.is_empty() { Default::default() } else { tap(horde_wire::Role::Sender, "send")? };
    let recv_tap = if receives { tap(horde_wire::Role::Receiver, "recv")? } else { Default::default() };
    if receives {
        let ropts = horde_engine::RecvOptions {
            log_tap: recv_tap,
            udp: job.recv_udp.clone(),
            tcp: job.recv_tcp.clone(),
            log: Some(r.dir.join("recv.hlog")),
            // The driver stops it when the senders are done; this bounds it if it cannot.
            duration: Some(Duration::from_nanos(r.part.shape.duration_ns) + Duration::from_secs(60)),
            key: r.key.clone(),
            ..Default::default()
        };
        let tx = r.done.clone();
        let ended = move |x| drop(tx.send(done("recv", x)));
        let rx = horde_engine::receiver::spawn(ropts, r.stop.clone(), None, "horde-part-recv".into(), Duration::from_secs(30), ended)
            .map_err(|e| anyhow::anyhow!("the receiver did not start: {e}"))?;
        r.server = Some((rx.handle, rx.bound.first().copied().unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)))));
    }
    r.ready = Ready::Flows { send, tap: send_tap };
    Ok(())
}

impl Running {
    /// Where its server side listens (not a flows part's receivers: their flows name them).
    pub fn listening(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(|s| s.1).filter(|_| !matches!(self.part.work, Work::Flows(_)))
    }

    /// The players this part runs, or its bots; 0 for flows.
    pub fn players(&self) -> u64 {
        match (&self.ready, self.part.scenario_part()) {
            (Ready::Bots { opts }, _) => opts.ids.as_ref().map_or(0, |r| r.len() as u64),
            (_, Some(p)) => p.players.as_ref().map_or(0, |r| (r.end - r.start) as u64),
            _ => 0,
        }
    }

    /// What it runs, for a log line.
    pub fn describe(&self) -> String {
        let players = self.part.scenario_part().and_then(|p| p.players.as_ref()).map(|p| format!(", players {}..{}", p.start, p.end)).unwrap_or_default();
        let what = match &self.ready {
            Ready::Flows { send, .. } => {
                format!(", {} flow(s) to send{}", send.len(), self.server.as_ref().map(|s| format!(", receiving on {}", s.1)).unwrap_or_default())
            }
            Ready::Bots { opts } => format!(", {} bot(s)", opts.ids.as_ref().map_or(0, |r| r.len())),
            Ready::Scenario { circuits, .. } => {
                let server = self.server.as_ref().map(|s| format!(", server side on {}", s.1)).unwrap_or_default();
                format!("{}{server}", if circuits.is_some() { " (regulated circuits)" } else { "" })
            }
        };
        format!("{players}{what}")
    }

    /// Starts the part's client side at `at_ns` (real): flows, bots, players or circuits.
    pub fn start(&mut self, at_ns: u64) {
        let (key, stop, progress, tx, clock) = (self.key.clone(), self.stop.clone(), self.progress.clone(), self.done.clone(), self.clock);
        let wait = move |stop: &AtomicBool| {
            // a sleep cut short every 100 ms to notice a stop
            while !stop.load(Ordering::Relaxed) && clock.real_ns() < at_ns {
                clock.sleep(Duration::from_nanos((at_ns.saturating_sub(clock.real_ns())).min(100_000_000)));
            }
        };
        let spawned = match &self.ready {
            Ready::Flows { send, .. } if send.is_empty() => return,
            Ready::Flows { send, tap } => {
                let (flows, log, log_tap) = (send.clone(), self.dir.join("send.hlog"), tap.clone());
                let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
                // the sockets open now; the schedule's zero is the common start
                std::thread::Builder::new().name("horde-part-send".into()).spawn(move || {
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
                    let _ = tx.send(done("send", report));
                })
            }
            Ready::Bots { opts } => {
                let opts = opts.clone();
                std::thread::Builder::new().name("horde-part-bots".into()).spawn(move || {
                    wait(&stop);
                    let report = horde_engine::bots::run(&opts, &stop).map_err(|e| format!("{e:#}"));
                    let _ = tx.send(done("bots", report));
                })
            }
            Ready::Scenario { sc, players, circuits, netns, tap } => {
                let Some(part) = self.part.scenario_part() else { return };
                let Some(shard) = part.players.clone() else { return };
                // Players go to the given server side, or to this part's own.
                let Some(server) = part.server_addr.or(self.server.as_ref().map(|s| s.1)) else { return };
                let (sc, netns) = (sc.clone(), netns.clone());
                match circuits {
                    Some(cfg) => {
                        let (cfg, file, live) = (cfg.clone(), self.dir.join(crate::circuits::CLIENT_FILE), self.circuits_live.clone());
                        std::thread::Builder::new().name("horde-part-circuits".into()).spawn(move || {
                            wait(&stop);
                            let r =
                                crate::circuits::run_clients(&sc, &cfg, shard, server, &key, &netns, &progress, &stop, live.as_deref(), clock).and_then(|c| {
                                    std::fs::write(&file, serde_json::to_vec(&c)?).with_context(|| format!("writing {}", file.display()))?;
                                    Ok(serde_json::json!({ "circuits": c.len(), "joined": c.iter().filter(|c| c.joined_s.is_some()).count() }))
                                });
                            let _ = tx.send(done("clients", r.map_err(|e| format!("{e:#}"))));
                        })
                    }
                    None => {
                        let Some(players) = players.clone() else { return };
                        let (log, joining, log_tap) = (self.dir.join("client.hlog"), self.joining.clone(), tap.clone());
                        // the players connect now; their schedules' zero is the common start
                        std::thread::Builder::new().name("horde-part-clients".into()).spawn(move || {
                            let c = crate::Clients {
                                players: &players,
                                shard,
                                server,
                                key,
                                log,
                                log_tap,
                                progress,
                                netns,
                                joining: Some(joining),
                                start_at_real_ns: Some(at_ns),
                            };
                            let report = match crate::run_clients(&sc, &c, &stop) {
                                // stopped while the players were still connecting: nothing was
                                // sent, and the report says so (a stop, not a failure)
                                Err(e) if stop.load(Ordering::Relaxed) && matches!(e.downcast_ref(), Some(horde_engine::EngineError::Interrupted)) => {
                                    Ok(horde_engine::SendReport { interrupted: true, threads: sc.threads, ..Default::default() })
                                }
                                r => r.map_err(|e| format!("{e:#}")),
                            };
                            drop(c);
                            let _ = tx.send(done("clients", report));
                        })
                    }
                }
            }
        };
        match spawned {
            Ok(h) => self.clients = Some(h),
            Err(_) => self.stop.store(true, Ordering::Relaxed),
        }
    }

    /// Sets the online target on this part's sides: its players' roster and its server
    /// side's. A target above the players planned so far plans the rest (every side keeps every
    /// player's stays); `start`: those of them this part starts.
    pub fn steer(&self, online: u32, at_ns: u64, start: Option<Range<u32>>) -> anyhow::Result<()> {
        let Ready::Scenario { sc, players: Some(players), circuits: None, .. } = &self.ready else {
            anyhow::bail!("this run has no online target (only a scenario's open-loop players have one)");
        };
        players.grow(online).map_err(anyhow::Error::msg)?;
        players.roster.set(at_ns, online)?;
        if let Some(r) = start {
            if r.start < sc.players || r.end > online || r.is_empty() {
                anyhow::bail!("players {}..{} are not players this raise to {online} adds", r.start, r.end);
            }
            self.start_more(r, at_ns)?;
        }
        if let Some(tx) = &self.server_commands {
            let c = crate::control::Command::Players { online, at_ns: Some(at_ns) };
            tx.send(crate::control::Incoming { id: 0, command: Ok(c) }).map_err(|_| anyhow::anyhow!("the server side has ended"))?;
        }
        Ok(())
    }

    /// Starts players `range` (planned already, beyond the start's) while the run goes: each
    /// connects when the change that admits it (at `at_ns`) and its own join offset have come.
    pub fn start_more(&self, range: Range<u32>, at_ns: u64) -> anyhow::Result<()> {
        let (Ready::Scenario { sc, players: Some(players), netns, .. }, Some(part)) = (&self.ready, self.part.scenario_part()) else {
            anyhow::bail!("this part runs no players");
        };
        let server = part.server_addr.or(self.server.as_ref().map(|s| s.1)).context("no server side to send the players to")?;
        let clients = crate::Clients {
            players,
            shard: range.clone(),
            server,
            key: self.key.clone(),
            log: self.dir.join("client.hlog"),
            log_tap: Default::default(),
            progress: self.progress.clone(),
            netns: netns.clone(),
            joining: Some(self.joining.clone()),
            start_at_real_ns: None,
        };
        clients.start_more(sc, range, at_ns);
        Ok(())
    }

    /// The logs the part writes, by its kind.
    pub fn log_files(&self) -> Vec<&'static str> {
        let mut files = Vec::new();
        match (&self.ready, &self.part.work) {
            (Ready::Bots { .. }, _) => files.push("bots.hlog"),
            (Ready::Flows { send, .. }, Work::Flows(job)) => {
                if !send.is_empty() {
                    files.push("send.hlog");
                }
                if !job.recv_udp.is_empty() || !job.recv_tcp.is_empty() {
                    files.push("recv.hlog");
                }
            }
            (Ready::Scenario { circuits, .. }, Work::Scenario(part)) => {
                let regulated = circuits.is_some();
                if part.players.is_some() {
                    files.push(if regulated { crate::circuits::CLIENT_FILE } else { "client.hlog" });
                }
                if part.server.is_some() {
                    files.push(if regulated { crate::circuits::SERVER_FILE } else { "server.hlog" });
                }
            }
            _ => {}
        }
        files
    }

    /// Stops what still runs and waits for it (a stopped client side ends within its linger).
    pub fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some((h, _)) = self.server {
            let _ = h.join();
        }
        if let Some(h) = self.clients {
            let _ = h.join();
        }
    }
}

/// Runs a server-side part in this process (a child of `horde run`): `input` carries the run's commands after the part's line, `output`
/// takes its [`PartEvent`]s; it ends with the server side (its duration, or `stop`).
pub fn child(part: &Part, input: impl BufRead + Send + 'static, output: impl Write + Send + 'static, stop: &AtomicBool) -> Result<(), crate::Error> {
    let (crate::part::Place::Child { out }, Some(ScenarioPart { server: Some(_), players: None, .. })) = (&part.place, part.scenario_part()) else {
        return Err(crate::Error::BadInput(anyhow::anyhow!("part {}: a child runs a scenario's server side only", part.run_id)));
    };
    part.scenario()?;
    part.key()?;
    let output = std::sync::Arc::new(std::sync::Mutex::new(output));
    // the parent reads these; if it is gone, so is the run
    let say = move |e: &crate::part::PartEvent| drop(horde_sys::own::write_line(&mut *output.lock().unwrap_or_else(|p| p.into_inner()), e));
    let (tx, done) = std::sync::mpsc::channel();
    let mut env = Env::new(out.clone(), tx);
    let live = say.clone();
    env.server_live =
        Some(Box::new(move |p, seconds| live(&crate::part::PartEvent::Live { delay_ms: p.map(|p| [p.p50_ms, p.p99_ms]), seconds: seconds.to_vec() })));
    let running = prepare(part.clone(), env).map_err(crate::Error::Failed)?;
    say(&crate::part::PartEvent::Listening { addr: running.listening().context("the server side's address").map_err(crate::Error::Failed)? });
    if let Some(tx) = running.server_commands.clone() {
        std::thread::Builder::new()
            .name("horde-part-commands".into())
            .spawn(move || crate::control::read(input, &tx))
            .context("starting a thread")
            .map_err(crate::Error::Failed)?;
    }
    let ended = loop {
        match done.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(d) => break d.report,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if stop.load(std::sync::atomic::Ordering::Relaxed) => {
                running.stop.store(true, std::sync::atomic::Ordering::Relaxed)
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break Err("the server side's thread ended without a report".into()),
        }
    };
    running.finish();
    ended.map(drop).map_err(|m| crate::Error::Failed(anyhow::anyhow!(m)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::part::Place;
    use std::path::Path;

    #[test]
    fn a_child_runs_only_a_server_side_placed_for_a_child() {
        let sc = Scenario::parse("service = \"wow\"\nplayers = 5\nduration = \"2s\"\n", "t.toml", Path::new(".")).unwrap();
        let p = Part::server(&sc, Path::new("."), &RunKey::from_bytes([1; 32]), "127.0.0.1:0".parse().unwrap(), Path::new("/tmp/r3"), sc.players).unwrap();
        let stop = AtomicBool::new(true);
        let agent = Part { place: Place::Agent { deadman_ms: 3000 }, ..p.clone() };
        let mut players = p.clone();
        let Work::Scenario(w) = &mut players.work else { unreachable!() };
        w.players = Some(0..5);
        for bad in [agent, players] {
            let e = child(&bad, std::io::empty(), Vec::new(), &stop).unwrap_err().into_anyhow().to_string();
            assert!(e.contains("a child runs a scenario's server side only"), "{e}");
        }
    }
}
