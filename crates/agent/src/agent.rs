//! `horde agent`: the daemon on a load machine. A thin shell around [`crate::session`]: it
//! accepts TLS connections on its control address, lets one authenticated controller at a time
//! drive it, runs what it is assigned (a shard of players, the server side, or both) and
//! streams the logs back.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use horde_engine::clock::real_ns;
use horde_engine::sender::Progress;
use horde_model::scenario::Scenario;
use horde_proto::RunKey;
use horde_scenario::circuits::Config as CircuitConfig;

use crate::metrics::Metrics;
use crate::msg::{self, Assignment, Frame, ToAgent, ToController};
use crate::session::{Action, Phase, Session};

/// How an agent runs.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The control address (TLS). An address must be given: nothing listens on all interfaces
    /// unless it is asked to (0.0.0.0).
    pub listen: SocketAddr,
    /// The credentials directory (ca.pem, agent.pem, agent.key).
    pub credentials: PathBuf,
    /// Where runs keep their logs until collected.
    pub dir: PathBuf,
    /// The name it reports (default: host name and port).
    pub name: String,
    /// Prometheus text metrics on this address (`/metrics`).
    pub metrics: Option<SocketAddr>,
    /// Keep each run's directory after its logs were collected.
    pub keep: bool,
    /// Most connections in their handshake at once (more are closed at once).
    pub max_handshakes: usize,
    /// The version it reports and requires of controllers (this build's; tests change it).
    pub version: String,
}

/// What the agent keeps across sessions.
struct Shared {
    seen_runs: Mutex<VecDeque<String>>,
    busy: AtomicBool,
    metrics: Arc<Metrics>,
    handshakes: AtomicU64,
    /// Handshakes in progress per source address.
    per_ip: Mutex<std::collections::HashMap<std::net::IpAddr, u32>>,
}

const SEEN_RUNS: usize = 4096;
/// A TLS handshake takes milliseconds on any network a run uses: 3 s is plenty, and short
/// enough that silent connections free their place soon.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(3);
/// Handshakes one source address may have in progress at once.
const HANDSHAKES_PER_IP: u32 = 4;

/// Runs the agent until `stop`. `log` gets one line per event (connections, refusals, runs).
pub fn serve(opts: &AgentOptions, stop: &AtomicBool, log: &(dyn Fn(&str) + Sync)) -> anyhow::Result<()> {
    let cfg = crate::tls::agent_config_for(&opts.credentials, &opts.name)?;
    std::fs::create_dir_all(&opts.dir).with_context(|| format!("creating the agent's run directory {}", opts.dir.display()))?;
    let listener = TcpListener::bind(opts.listen).with_context(|| format!("listening on {}", opts.listen))?;
    listener.set_nonblocking(true)?;
    let shared = Arc::new(Shared {
        seen_runs: Mutex::new(VecDeque::new()),
        busy: AtomicBool::new(false),
        metrics: Arc::new(Metrics::default()),
        handshakes: AtomicU64::new(0),
        per_ip: Mutex::new(std::collections::HashMap::new()),
    });
    log(&format!(
        "agent {} listening on {} (TLS 1.3, controllers must present a certificate of {})",
        opts.name,
        listener.local_addr()?,
        opts.credentials.join(crate::tls::CA_FILE).display()
    ));
    std::thread::scope(|s| -> anyhow::Result<()> {
        if let Some(m) = opts.metrics {
            let l = TcpListener::bind(m).with_context(|| format!("listening for /metrics on {m}"))?;
            l.set_nonblocking(true)?;
            log(&format!("metrics on http://{}/metrics", l.local_addr()?));
            let metrics = shared.metrics.clone();
            s.spawn(move || crate::metrics::serve(l, &metrics, stop));
            let metrics = shared.metrics.clone();
            s.spawn(move || crate::metrics::sample(&metrics, stop));
        }
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, peer)) => {
                    if shared.handshakes.load(Ordering::Relaxed) >= opts.max_handshakes as u64 {
                        shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
                        log(&format!("refused {peer}: {} handshakes already in progress", opts.max_handshakes));
                        continue;
                    }
                    // One address may hold only a few handshakes: silent connections from one
                    // host cannot lock every controller out.
                    {
                        let mut per = shared.per_ip.lock().unwrap_or_else(|p| p.into_inner());
                        let n = per.entry(peer.ip()).or_insert(0);
                        if *n >= HANDSHAKES_PER_IP {
                            shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
                            log(&format!("refused {peer}: {HANDSHAKES_PER_IP} handshakes from {} already in progress", peer.ip()));
                            continue;
                        }
                        *n += 1;
                    }
                    shared.handshakes.fetch_add(1, Ordering::Relaxed);
                    let (cfg, shared) = (cfg.clone(), shared.clone());
                    s.spawn(move || {
                        let r = connection(stream, peer, cfg, &shared, opts, stop, log);
                        if let Err(e) = r {
                            shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
                            log(&format!("{peer}: {e:#}"));
                        }
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => {
                    log(&format!("accept: {e}"));
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        Ok(())
    })
}

/// One connection: the handshake (bounded in time), then a session if the peer is a
/// controller of this authority and the agent is free.
fn connection(
    mut tcp: TcpStream,
    peer: SocketAddr,
    cfg: Arc<rustls::ServerConfig>,
    shared: &Shared,
    opts: &AgentOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<()> {
    struct Done<'a>(&'a Shared, std::net::IpAddr);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.handshakes.fetch_sub(1, Ordering::Relaxed);
            let mut per = self.0.per_ip.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = per.get_mut(&self.1) {
                *n -= 1;
                if *n == 0 {
                    per.remove(&self.1);
                }
            }
        }
    }
    let handshaking = Done(shared, peer.ip());
    tcp.set_nonblocking(false)?;
    tcp.set_nodelay(true)?;
    let mut conn = rustls::ServerConnection::new(cfg).context("TLS")?;
    let deadline = Instant::now() + HANDSHAKE_WITHIN;
    while conn.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            anyhow::bail!("refused: no TLS handshake within {} s", HANDSHAKE_WITHIN.as_secs());
        }
        tcp.set_read_timeout(Some(left))?;
        tcp.set_write_timeout(Some(left))?;
        if let Err(e) = conn.complete_io(&mut tcp) {
            // Tell the peer why, where TLS lets us (an alert is queued).
            let _ = conn.write_tls(&mut tcp);
            anyhow::bail!("refused: {}", crate::tls::describe(&e));
        }
    }
    drop(handshaking);
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    if shared.busy.swap(true, Ordering::AcqRel) {
        let _ = tls.write_all(&msg::encode(&ToController::Error { message: format!("agent {} is busy with another controller's run", opts.name) }));
        let _ = tls.flush();
        anyhow::bail!("refused an authenticated controller: busy with another run");
    }
    struct Free<'a>(&'a AtomicBool);
    impl Drop for Free<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    let _free = Free(&shared.busy);
    log(&format!("controller {peer} authenticated"));
    let r = session(&mut tls, shared, opts, stop, log);
    tls.conn.send_close_notify();
    let _ = tls.flush();
    r
}

/// What a run's threads tell the session: a role ended with its report (a
/// [`horde_engine::SendReport`], or a [`horde_engine::RecvReport`] for "recv"), or failed.
enum RunEvent {
    Finished { role: &'static str, report: Result<serde_json::Value, String> },
}

fn finished<T: serde::Serialize>(role: &'static str, r: Result<T, String>) -> RunEvent {
    RunEvent::Finished { role, report: r.map(|r| serde_json::to_value(&r).unwrap_or_default()) }
}

/// What an assignment runs.
enum Work {
    /// A scenario's part: its players' client side and/or its server side; with a
    /// `[regulation]` table, every player is a regulated circuit (`circuits`).
    Scenario { sc: Box<Scenario>, players: Arc<horde_scenario::Players>, circuits: Option<Box<CircuitConfig>> },
    /// Flows of a flow file to send (receivers start at prepare).
    Flows { send: Vec<horde_model::Flow> },
    /// Bots against a game server.
    Bots { opts: Box<horde_engine::bots::BotsOptions> },
}

/// A prepared or running assignment.
struct Run {
    dir: PathBuf,
    work: Work,
    assignment: Assignment,
    key: RunKey,
    stop: Arc<AtomicBool>,
    /// The server side, or the flows' receiver: its thread, and where it listens.
    server: Option<(std::thread::JoinHandle<()>, SocketAddr)>,
    clients: Option<std::thread::JoinHandle<()>>,
    progress: Arc<Progress>,
    cpu0: f64,
    t0: Instant,
}

fn session(
    tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    shared: &Shared,
    opts: &AgentOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<()> {
    tls.sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    tls.sock.set_write_timeout(Some(Duration::from_secs(10)))?;
    let cores = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    let mut sm = Session::new(real_ns(), &opts.version, &opts.name, cores);
    let mut dec = msg::Decoder::default();
    let mut buf = vec![0u8; 64 << 10];
    let (tx, rx) = mpsc::channel::<RunEvent>();
    let mut run: Option<Run> = None;
    let mut last_progress = Instant::now();
    let mut result = Ok(());
    let seen = |id: &str| shared.seen_runs.lock().map(|s| s.iter().any(|r| r == id)).unwrap_or(true);
    'outer: loop {
        let mut actions = Vec::new();
        match tls.read(&mut buf) {
            Ok(0) => actions.extend(sm.on_closed("the controller closed the connection")),
            Ok(n) => {
                dec.push(&buf[..n]);
                loop {
                    match dec.frame::<ToAgent>() {
                        Ok(Some(Frame::Msg(m))) => actions.extend(sm.on_msg(real_ns(), m, seen)),
                        Ok(Some(Frame::Log(_))) => {
                            actions.push(Action::Send(ToController::Error { message: "log frames go from agent to controller".into() }));
                            actions.extend(sm.on_closed("protocol error"));
                        }
                        Ok(None) => break,
                        Err(e) => {
                            actions.push(Action::Send(ToController::Error { message: format!("{e}") }));
                            actions.extend(sm.on_closed(&format!("protocol error: {e}")));
                            break;
                        }
                    }
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {}
            Err(e) => actions.extend(sm.on_closed(&format!("connection error: {}", crate::tls::describe(&e)))),
        }
        actions.extend(sm.on_tick(real_ns()));
        if stop.load(Ordering::Relaxed) {
            actions.push(Action::StopRun("the agent is shutting down".into()));
            actions.extend(sm.on_closed("the agent is shutting down"));
        }
        while let Ok(ev) = rx.try_recv() {
            let RunEvent::Finished { role, report } = ev;
            let (report, error) = match report {
                Ok(r) => (Some(r), None),
                Err(e) => (None, Some(e)),
            };
            let cpu = run.as_ref().map_or(0.0, |r| cpu_s() - r.cpu0);
            log(&format!(
                "run {}: {role} side finished{}",
                run.as_ref().map_or("?", |r| r.assignment.run_id.as_str()),
                error.as_ref().map(|e| format!(" with an error: {e}")).unwrap_or_default()
            ));
            actions.push(Action::Send(ToController::Finished { role: role.into(), report, error, cpu_s: cpu, max_rss_kb: max_rss_kb() }));
            sm.role_ended();
            if sm.phase() == Phase::Finished {
                shared.metrics.running.store(false, Ordering::Relaxed);
            }
        }
        if let Some(r) = &run {
            if sm.phase() == Phase::Running && last_progress.elapsed() >= Duration::from_secs(1) {
                last_progress = Instant::now();
                let p = &r.progress;
                actions.push(Action::Send(ToController::Progress(msg::Progress {
                    t_s: r.t0.elapsed().as_secs_f64(),
                    sent_packets: p.sent_packets.load(Ordering::Relaxed),
                    sent_bytes: p.sent_bytes.load(Ordering::Relaxed),
                    recv_packets: p.recv_packets.load(Ordering::Relaxed),
                    recv_bytes: p.recv_bytes.load(Ordering::Relaxed),
                    connections: p.connections.load(Ordering::Relaxed),
                })));
            }
        }
        for a in actions {
            match a {
                Action::Send(m) => {
                    if let Err(e) = write(tls, &msg::encode(&m)) {
                        if let Some(r) = &run {
                            r.stop.store(true, Ordering::Relaxed);
                        }
                        result = Err(anyhow::anyhow!("writing to the controller: {}", crate::tls::describe(&e)));
                        break 'outer;
                    }
                }
                Action::TimeReply { t1, t2 } => {
                    let m = ToController::Time { t1, t2, t3: real_ns() };
                    if write(tls, &msg::encode(&m)).is_err() {
                        break 'outer;
                    }
                }
                Action::Prepare(a) => {
                    {
                        let mut s = shared.seen_runs.lock().unwrap_or_else(|p| p.into_inner());
                        s.push_back(a.run_id.clone());
                        if s.len() > SEEN_RUNS {
                            s.pop_front();
                        }
                    }
                    let id = a.run_id.clone();
                    let a = *a;
                    let r = if a.bots.is_some() {
                        prepare_bots(a, opts, &shared.metrics)
                    } else if a.flows.is_some() {
                        prepare_flows(a, opts, &shared.metrics, tx.clone())
                    } else {
                        prepare(a, opts, &shared.metrics, tx.clone())
                    };
                    let addr = match r {
                        Ok(r) => {
                            let addr = r.server.as_ref().map(|s| s.1).filter(|_| r.assignment.flows.is_none());
                            let flows = match &r.work {
                                Work::Flows { send } => format!(
                                    ", {} flow(s) to send{}",
                                    send.len(),
                                    r.server.as_ref().map(|s| format!(", receiving on {}", s.1)).unwrap_or_default()
                                ),
                                Work::Bots { opts } => format!(", {} bot(s)", opts.ids.as_ref().map_or(0, |r| r.len())),
                                Work::Scenario { .. } => String::new(),
                            };
                            log(&format!(
                                "run {id}: prepared{}{}{flows}",
                                r.assignment.players.as_ref().map(|p| format!(", players {}..{}", p.start, p.end)).unwrap_or_default(),
                                addr.filter(|_| r.assignment.flows.is_none()).map(|a| format!(", server side on {a}")).unwrap_or_default()
                            ));
                            run = Some(r);
                            Ok(addr)
                        }
                        Err(e) => {
                            shared.metrics.errors.fetch_add(1, Ordering::Relaxed);
                            log(&format!("run {id}: {e:#}"));
                            Err(format!("{e:#}"))
                        }
                    };
                    for a2 in sm.prepared(addr) {
                        if let Action::Send(m) = a2 {
                            let _ = write(tls, &msg::encode(&m));
                        }
                    }
                }
                Action::Start { at_ns } => {
                    if let Some(r) = run.as_mut() {
                        start(r, at_ns, tx.clone(), &shared.metrics);
                        log(&format!("run {}: starting in {:.3} s", r.assignment.run_id, at_ns.saturating_sub(real_ns()) as f64 / 1e9));
                    }
                }
                Action::StopRun(why) => {
                    if let Some(r) = &run {
                        if !r.stop.swap(true, Ordering::Relaxed) {
                            log(&format!("run {}: stopping: {why}", r.assignment.run_id));
                        }
                    }
                }
                Action::Collect => {
                    if let Some(r) = &run {
                        if let Err(e) = send_logs(tls, r) {
                            result = Err(e.context("sending the logs"));
                        } else {
                            log(&format!("run {}: logs collected", r.assignment.run_id));
                        }
                    }
                    sm.collected();
                    log("session ended: run collected");
                    break 'outer;
                }
                Action::Close(why) => {
                    log(&format!("session ended: {why}"));
                    break 'outer;
                }
            }
        }
        if sm.phase() == Phase::Closed {
            log("session ended");
            break;
        }
    }
    if let Some(r) = run.take() {
        finish_run(r, &rx, opts, log);
    }
    shared.metrics.running.store(false, Ordering::Relaxed);
    result
}

fn write(tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>, b: &[u8]) -> std::io::Result<()> {
    tls.write_all(b)?;
    tls.flush()
}

/// Stops what still runs, waits for it, and removes the run's directory (Horde's own state)
/// unless asked to keep it.
fn finish_run(r: Run, rx: &mpsc::Receiver<RunEvent>, opts: &AgentOptions, log: &(dyn Fn(&str) + Sync)) {
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
fn prepare(a: Assignment, opts: &AgentOptions, metrics: &Arc<Metrics>, tx: mpsc::Sender<RunEvent>) -> anyhow::Result<Run> {
    let key = RunKey::parse_hex(&a.key).map_err(|e| anyhow::anyhow!("key: {e}"))?;
    // The scenario names no file the agent would read: a service file came with it.
    let nowhere = Path::new("/nonexistent/horde-agent");
    // Nor any value file its distributions name: the controller sent their values inline.
    let mut sc = horde_model::files::without_value_files(|| Scenario::parse_with(&a.scenario, "scenario", nowhere, a.service.as_deref()))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if sc.emu.is_some() {
        anyhow::bail!("a scenario with [emu] runs on one machine, not through agents");
    }
    if a.players_total == 0 || a.players_total > horde_model::scenario::MAX_PLAYERS {
        anyhow::bail!("players_total must be 1..={} (got {})", horde_model::scenario::MAX_PLAYERS, a.players_total);
    }
    horde_model::scenario::check_duration(a.duration_ns).map_err(|m| anyhow::anyhow!("duration: {m}"))?;
    sc.players = a.players_total;
    sc.duration_s = a.duration_ns as f64 / 1e9;
    sc.seed = a.seed;
    if let Some(r) = &a.players {
        if r.end > sc.players {
            anyhow::bail!("players {}..{} are not players of a {}-player scenario", r.start, r.end, sc.players);
        }
    }
    let dir = opts.dir.join(&a.run_id);
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let circuits = CircuitConfig::of(&sc).map_err(|e| e.into_anyhow())?.map(Box::new);
    let stop = Arc::new(AtomicBool::new(false));
    let players = Arc::new(horde_scenario::plan(&sc, &stop).map_err(|e| e.into_anyhow())?);
    metrics.players.store(a.players.as_ref().map_or(0, |r| (r.end - r.start) as u64), Ordering::Relaxed);
    metrics.runs.fetch_add(1, Ordering::Relaxed);
    let progress = Arc::new(Progress::default());
    *metrics.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(progress.clone());
    let server = match a.server {
        Some(listen) => {
            sc.server = listen;
            let (atx, arx) = mpsc::channel();
            let (sc2, dir2, key2, stop2, cfg) = (sc.clone(), dir.clone(), key.clone(), stop.clone(), circuits.clone());
            let h = std::thread::Builder::new().name("horde-agent-server".into()).spawn(move || {
                let listening = |addr| {
                    let _ = atx.send(addr);
                };
                let report = match cfg {
                    // The circuits are in the server side's file (collected); the report counts them.
                    Some(cfg) => {
                        horde_scenario::circuits::serve(&sc2, &cfg, &dir2, key2, &stop2, listening).map(|c| serde_json::json!({ "circuits": c.len() }))
                    }
                    None => horde_scenario::serve(&sc2, &dir2, key2, &stop2, listening).map(|r| serde_json::to_value(r).unwrap_or_default()),
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
    Ok(Run {
        dir,
        work: Work::Scenario { sc: Box::new(sc), players, circuits },
        assignment: a,
        key,
        stop,
        server,
        clients: None,
        progress,
        cpu0: cpu_s(),
        t0: Instant::now(),
    })
}

/// Resolves the shipped flow file, keeps the flows this agent sends, and starts its receiver if
/// assigned: it listens now, takes only hellos signed with the run's key, and ends at Stop or
/// after the run's duration.
fn prepare_flows(a: Assignment, opts: &AgentOptions, metrics: &Arc<Metrics>, tx: mpsc::Sender<RunEvent>) -> anyhow::Result<Run> {
    let key = RunKey::parse_hex(&a.key).map_err(|e| anyhow::anyhow!("key: {e}"))?;
    let job = a.flows.clone().context("no flows")?;
    horde_model::scenario::check_duration(a.duration_ns).map_err(|m| anyhow::anyhow!("duration: {m}"))?;
    let all = horde_model::files::without_value_files(|| horde_model::flow::FlowFile::parse_and_resolve(&job.text, job.seed))
        .map_err(|e| anyhow::anyhow!("flow file: {e}"))?;
    let wanted = |id: u32| job.send.iter().any(|r| r.contains(&id));
    let send: Vec<horde_model::Flow> = all.iter().filter(|f| wanted(f.id)).cloned().collect();
    let asked: u64 = job.send.iter().map(|r| (r.end - r.start) as u64).sum();
    if send.len() as u64 != asked {
        anyhow::bail!("the flow file has {} flows; {asked} were assigned here, {} of them exist", all.len(), send.len());
    }
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
            udp: job.recv_udp.clone(),
            tcp: job.recv_tcp.clone(),
            log: Some(dir.join("recv.hlog")),
            // The controller stops it when the senders are done; this bounds it if it cannot.
            duration: Some(Duration::from_nanos(a.duration_ns) + Duration::from_secs(60)),
            key: key.clone(),
            ..Default::default()
        };
        let (atx, arx) = mpsc::channel::<Result<SocketAddr, String>>();
        let failed = atx.clone();
        let stop2 = stop.clone();
        let h = std::thread::Builder::new().name("horde-agent-recv".into()).spawn(move || {
            let r = horde_engine::receiver::run(&ropts, &stop2, |bound| {
                let _ = atx.send(bound.first().copied().ok_or_else(|| "no address".to_string()));
            })
            .map_err(|e| format!("{e:#}"));
            if let Err(e) = &r {
                let _ = failed.send(Err(e.clone()));
            }
            let _ = tx.send(finished("recv", r));
        })?;
        match arx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(addr)) => Some((h, addr)),
            Ok(Err(e)) => {
                stop.store(true, Ordering::Relaxed);
                let _ = h.join();
                let _ = std::fs::remove_dir_all(&dir);
                anyhow::bail!("the receiver did not start: {e}");
            }
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                let _ = h.join();
                let _ = std::fs::remove_dir_all(&dir);
                anyhow::bail!("the receiver did not start listening within 30 s");
            }
        }
    };
    Ok(Run { dir, work: Work::Flows { send }, assignment: a, key, stop, server, clients: None, progress, cpu0: cpu_s(), t0: Instant::now() })
}

/// Checks the bots' part and opens its run directory; the bots start at Start.
fn prepare_bots(a: Assignment, opts: &AgentOptions, metrics: &Arc<Metrics>) -> anyhow::Result<Run> {
    let key = RunKey::parse_hex(&a.key).map_err(|e| anyhow::anyhow!("key: {e}"))?;
    let dir = opts.dir.join(&a.run_id);
    let bots = crate::bots::options(&a, dir.join("bots.hlog")).map_err(|e| anyhow::anyhow!("{e}"))?;
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    metrics.players.store(bots.ids.as_ref().map_or(0, |r| r.len() as u64), Ordering::Relaxed);
    metrics.runs.fetch_add(1, Ordering::Relaxed);
    let progress = Arc::new(Progress::default());
    *metrics.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(progress.clone());
    let stop = Arc::new(AtomicBool::new(false));
    Ok(Run {
        dir,
        work: Work::Bots { opts: Box::new(bots) },
        assignment: a,
        key,
        stop,
        server: None,
        clients: None,
        progress,
        cpu0: cpu_s(),
        t0: Instant::now(),
    })
}

/// Sleeps to the common start, a sleep cut short every 100 ms to notice a stop.
fn wait_until(at_ns: u64, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let now = real_ns();
        if now >= at_ns {
            break;
        }
        std::thread::sleep(Duration::from_nanos((at_ns - now).min(100_000_000)));
    }
}

/// Starts the client side of a prepared run at `at_ns` (the agent's clock).
fn start(r: &mut Run, at_ns: u64, tx: mpsc::Sender<RunEvent>, metrics: &Arc<Metrics>) {
    metrics.running.store(true, Ordering::Relaxed);
    r.cpu0 = cpu_s();
    r.t0 = Instant::now();
    let (key, stop, progress) = (r.key.clone(), r.stop.clone(), r.progress.clone());
    let spawned = match &r.work {
        Work::Flows { send } => {
            if send.is_empty() {
                return;
            }
            let (flows, log) = (send.clone(), r.dir.join("send.hlog"));
            let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            std::thread::Builder::new().name("horde-agent-send".into()).spawn(move || {
                wait_until(at_ns, &stop);
                let opts = horde_engine::SendOptions {
                    threads: cores.min(flows.len()).max(1),
                    log: Some(log),
                    key,
                    greet: true,
                    progress: Some(progress),
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
        Work::Scenario { sc, players, circuits } => {
            let Some(shard) = r.assignment.players.clone() else { return };
            // Players go to the given server side, or to this agent's own.
            let Some(server) = r.assignment.server_addr.or(r.server.as_ref().map(|s| s.1)) else { return };
            if let Some(cfg) = circuits {
                let (sc, cfg, file) = (sc.clone(), cfg.clone(), r.dir.join(horde_scenario::circuits::CLIENT_FILE));
                let spawned = std::thread::Builder::new().name("horde-agent-circuits".into()).spawn(move || {
                    wait_until(at_ns, &stop);
                    let r = horde_scenario::circuits::run_clients(&sc, &cfg, shard, server, &key, &[], &progress, &stop).and_then(|c| {
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
            let (sc, players, log) = (sc.clone(), players.clone(), r.dir.join("client.hlog"));
            std::thread::Builder::new().name("horde-agent-clients".into()).spawn(move || {
                wait_until(at_ns, &stop);
                let c = horde_scenario::Clients { players: &players, shard, server, key, log, progress: progress.clone(), netns: Vec::new() };
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
fn send_logs(tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>, r: &Run) -> anyhow::Result<()> {
    use flate2::write::DeflateEncoder;
    let mut sent = 0u32;
    let mut files = Vec::new();
    match (&r.work, &r.assignment.flows) {
        (Work::Bots { .. }, _) => files.push("bots.hlog"),
        (Work::Flows { send }, Some(job)) => {
            if !send.is_empty() {
                files.push("send.hlog");
            }
            if !job.recv_udp.is_empty() || !job.recv_tcp.is_empty() {
                files.push("recv.hlog");
            }
        }
        (Work::Scenario { circuits, .. }, _) => {
            let regulated = circuits.is_some();
            if r.assignment.players.is_some() {
                files.push(if regulated { horde_scenario::circuits::CLIENT_FILE } else { "client.hlog" });
            }
            if r.assignment.server.is_some() {
                files.push(if regulated { horde_scenario::circuits::SERVER_FILE } else { "server.hlog" });
            }
        }
        (Work::Flows { .. }, None) => {}
    }
    for f in files {
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

/// This process's CPU time so far (user + system), s.
pub fn cpu_s() -> f64 {
    // SAFETY: getrusage fills a plain struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// This process's peak resident memory, kB.
pub fn max_rss_kb() -> u64 {
    // SAFETY: as above.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as u64
}
