//! `horde agent`: the daemon on a load machine. A thin shell around [`crate::session`]: it
//! accepts TLS connections on its control address, lets one authenticated controller at a time
//! drive it, runs what it is assigned (a shard of players, the server side, or both) and
//! streams the logs back.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use horde_engine::clock::real_ns;

pub mod emu;
mod run;
mod summary;

use horde_scenario::run_part::Done;
use run::{finish_run, prepare, send_logs, start, Run};

use crate::metrics::Metrics;
use crate::msg::{self, Frame, Part, ToAgent, ToController};
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
    /// Most connections in their handshake at once: beyond, a newcomer sheds one
    /// ([`horde_proto::admission`]).
    pub max_handshakes: usize,
    /// Networks whose connections are always trusted by the admission policy (`--exempt`).
    pub exempt: Vec<(std::net::IpAddr, u8)>,
    /// The version it reports and requires of controllers (this build's; tests change it).
    pub version: String,
    /// Build its part of emulated networks across machines when a controller asks (needs root).
    pub emu: bool,
    /// Refuse `emu exec` in its nodes (`--no-exec`): the controller's certificate builds and
    /// steers the emulated network, but runs no command in it.
    pub no_exec: bool,
}

/// What the agent keeps across sessions.
struct Shared {
    seen_runs: Mutex<VecDeque<String>>,
    busy: AtomicBool,
    /// What the busy session does, since when, and until when at most (an `emu exec` with its
    /// timeout): told to a controller that finds the agent busy.
    doing: Mutex<(String, Instant, Option<Instant>)>,
    metrics: Arc<Metrics>,
    /// Who may hold a place before authenticating (one policy for every listener), on the
    /// clock since the agent started; and the pending connections' sockets, to close one that
    /// is evicted.
    admission: Mutex<(Instant, horde_proto::admission::Admission)>,
    pending: Mutex<std::collections::HashMap<horde_proto::admission::Id, TcpStream>>,
    /// Refusals are told at most once per interval, the others counted (an attacker's flood of
    /// connections must not become a flood of log lines: 230 a second before).
    quiet: Mutex<(Instant, horde_proto::quiet::Quiet)>,
}

impl Shared {
    /// Notes what an emulator request makes the session do (an `emu exec`: until its time
    /// limit at most); returns what it did before.
    fn doing_now(&self, req: &msg::EmuRequest) -> (String, Instant, Option<Instant>) {
        let mut d = self.doing.lock().unwrap_or_else(|p| p.into_inner());
        let before = d.clone();
        if let msg::EmuRequest::Exec { node, timeout_ms, .. } = req {
            let until = (*timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(*timeout_ms));
            *d = (format!("its `emu exec` in node {node}"), Instant::now(), until);
        }
        before
    }

    /// A pending connection ended (see [`horde_proto::admission::Outcome`]).
    fn finished(&self, id: horde_proto::admission::Id, outcome: horde_proto::admission::Outcome) {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        let mut a = self.admission.lock().unwrap_or_else(|p| p.into_inner());
        let now = a.0.elapsed().as_nanos() as u64;
        a.1.finished(id, outcome, now);
    }

    /// Counts a refused connection and tells it as `peer: reason`, unless one of the same
    /// reason was told in this interval.
    fn refused(&self, log: &(dyn Fn(&str) + Sync), peer: SocketAddr, reason: &str) {
        self.metrics.refused.fetch_add(1, Ordering::Relaxed);
        let mut q = self.quiet.lock().unwrap_or_else(|p| p.into_inner());
        let now = q.0.elapsed().as_nanos() as u64;
        for l in q.1.refused(now, reason, || format!("{peer}: {reason}")) {
            log(&l);
        }
    }
}

const SEEN_RUNS: usize = 4096;
/// A TLS handshake takes milliseconds on any network a run uses: 3 s is plenty, and short
/// enough that silent connections free their place soon.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(3);
/// How long an authenticated controller waits for the agent's session to end before it is
/// told the agent is busy.
const BUSY_GRACE: Duration = Duration::from_millis(1000);
/// Handshakes one source address may have in progress at once.
const HANDSHAKES_PER_IP: usize = 4;

/// Runs the agent until `stop`. `log` gets one line per event (connections, refusals, runs).
pub fn serve(opts: &AgentOptions, stop: &AtomicBool, log: &(dyn Fn(&str) + Sync)) -> anyhow::Result<()> {
    let cfg = crate::tls::agent_config_for(&opts.credentials, &opts.name)?;
    std::fs::create_dir_all(&opts.dir).with_context(|| format!("creating the agent's run directory {}", opts.dir.display()))?;
    let listener = horde_sys::listen::bind(opts.listen).with_context(|| format!("listening on {}", opts.listen))?;
    if opts.emu {
        horde_emu::require_root()?;
        emu::clean_up_left_parts(opts, log);
    }
    let shared = Arc::new(Shared {
        seen_runs: Mutex::new(VecDeque::new()),
        busy: AtomicBool::new(false),
        doing: Mutex::new((String::new(), Instant::now(), None)),
        metrics: Arc::new(Metrics::default()),
        admission: Mutex::new((
            Instant::now(),
            horde_proto::admission::Admission::new(
                horde_proto::admission::AdmissionConfig::new(opts.max_handshakes, HANDSHAKES_PER_IP).exempting(opts.exempt.clone()),
            ),
        )),
        pending: Mutex::new(std::collections::HashMap::new()),
        quiet: Mutex::new((Instant::now(), Default::default())),
    });
    log(&format!(
        "agent {} listening on {} (TLS 1.3, controllers must present a certificate of {})",
        opts.name,
        listener.local_addr()?,
        opts.credentials.join(crate::tls::CA_FILE).display()
    ));
    std::thread::scope(|s| -> anyhow::Result<()> {
        if let Some(m) = opts.metrics {
            let l = horde_sys::listen::bind(m).with_context(|| format!("listening for /metrics on {m}"))?;
            log(&format!("metrics on http://{}/metrics", l.local_addr()?));
            let metrics = shared.metrics.clone();
            s.spawn(move || crate::metrics::serve(l, &metrics, stop));
            let metrics = shared.metrics.clone();
            s.spawn(move || crate::metrics::sample(&metrics, stop));
        }
        while !stop.load(Ordering::Relaxed) {
            // the counts of refusals held back, once their interval is over, even if no other comes
            let due = {
                let mut q = shared.quiet.lock().unwrap_or_else(|p| p.into_inner());
                let now = q.0.elapsed().as_nanos() as u64;
                q.1.due(now)
            };
            for l in due {
                log(&l);
            }
            match horde_sys::listen::accept(&listener, Duration::from_millis(200)) {
                Ok(None) => {}
                Ok(Some((stream, peer))) => {
                    // Silent, slow or churning connections cannot hold every place, from one
                    // address or many: a newcomer sheds one (horde_proto::admission).
                    let offer = {
                        let mut a = shared.admission.lock().unwrap_or_else(|p| p.into_inner());
                        let now = a.0.elapsed().as_nanos() as u64;
                        a.1.offer(peer.ip(), now)
                    };
                    let id = match offer {
                        horde_proto::admission::Offer::Refuse(why) => {
                            shared.refused(log, peer, &format!("refused: {why}"));
                            continue;
                        }
                        horde_proto::admission::Offer::Admit { id, evict } => {
                            let mut pending = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
                            if let Some(old) = evict.and_then(|old| pending.remove(&old)) {
                                let _ = old.shutdown(std::net::Shutdown::Both);
                                if let Ok(p) = old.peer_addr() {
                                    shared.refused(log, p, "shed: an unauthenticated connection made room for a newcomer");
                                }
                            }
                            if let Ok(c) = stream.try_clone() {
                                pending.insert(id, c);
                            }
                            id
                        }
                    };
                    let (cfg, shared) = (cfg.clone(), shared.clone());
                    s.spawn(move || {
                        let r = connection(stream, peer, id, cfg, &shared, opts, stop, log);
                        if let Err(e) = r {
                            shared.refused(log, peer, &format!("{e:#}"));
                        }
                    });
                }
                Err(e) => {
                    // EMFILE and the like: a pending connection keeps the listener readable, so
                    // wait a moment rather than spin
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
#[allow(clippy::too_many_arguments)] // the connection's own state: its socket, peer and place
fn connection(
    mut tcp: TcpStream,
    peer: SocketAddr,
    id: horde_proto::admission::Id,
    cfg: Arc<rustls::ServerConfig>,
    shared: &Shared,
    opts: &AgentOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<()> {
    use horde_proto::admission::Outcome;
    // A handshake that reaches its deadline penalises its address; one that is refused frees
    // its place; one that succeeds leaves the budget.
    struct Done<'a>(&'a Shared, horde_proto::admission::Id, Outcome);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.finished(self.1, self.2);
        }
    }
    let mut handshaking = Done(shared, id, Outcome::Closed);
    tcp.set_nonblocking(false)?;
    tcp.set_nodelay(true)?;
    let mut conn = rustls::ServerConnection::new(cfg).context("TLS")?;
    let deadline = Instant::now() + HANDSHAKE_WITHIN;
    while conn.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            handshaking.2 = Outcome::TimedOut;
            anyhow::bail!("refused: no TLS handshake within {} s", HANDSHAKE_WITHIN.as_secs());
        }
        tcp.set_read_timeout(Some(left))?;
        tcp.set_write_timeout(Some(left))?;
        if let Err(e) = conn.complete_io(&mut tcp) {
            if Instant::now() >= deadline {
                handshaking.2 = Outcome::TimedOut;
            }
            // Tell the peer why, where TLS lets us (an alert is queued).
            let _ = conn.write_tls(&mut tcp);
            anyhow::bail!("refused: {}", crate::tls::describe(&e));
        }
    }
    handshaking.2 = Outcome::Authenticated;
    drop(handshaking);
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    // A controller that comes back as its last session ends (its link counters, its next
    // command) finds the agent free: the session ending is given a moment before "busy".
    let free_within = Instant::now() + BUSY_GRACE;
    let mut taken = shared.busy.swap(true, Ordering::AcqRel);
    while taken && Instant::now() < free_within && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
        taken = shared.busy.swap(true, Ordering::AcqRel);
    }
    if taken {
        let doing = {
            let d = shared.doing.lock().unwrap_or_else(|p| p.into_inner());
            let until = d.2.map(|u| format!(", at most {:.0} s more", u.saturating_duration_since(Instant::now()).as_secs_f64().ceil())).unwrap_or_default();
            format!(" ({} for {:.0} s{until})", d.0, d.1.elapsed().as_secs_f64())
        };
        let _ = tls.write_all(&msg::encode(&ToController::Error { message: format!("agent {} is busy with another controller{doing}", opts.name) }));
        let _ = tls.flush();
        anyhow::bail!("refused an authenticated controller: busy with another run");
    }
    struct Free<'a>(&'a AtomicBool);
    impl Drop for Free<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    *shared.doing.lock().unwrap_or_else(|p| p.into_inner()) = (format!("a session of controller {peer}"), Instant::now(), None);
    let _free = Free(&shared.busy);
    log(&format!("controller {peer} authenticated"));
    let r = session(&mut tls, shared, opts, stop, log);
    tls.conn.send_close_notify();
    let _ = tls.flush();
    linger(&mut tls.sock);
    r
}

/// Half-closes our side and reads (and discards) what the controller still sends until it
/// closes too, for 2 s at most. Closing a socket with unread bytes (a ping that crossed our last
/// message) sends a reset, and a reset can make the controller drop our last frames unread: the
/// podman run in CI lost an agent "while collecting its logs" that had sent them all.
fn linger(tcp: &mut TcpStream) {
    let _ = tcp.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + Duration::from_secs(2);
    let _ = tcp.set_read_timeout(Some(Duration::from_millis(100)));
    let mut sink = [0u8; 4096];
    while Instant::now() < until {
        match tcp.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {}
            Err(_) => return,
        }
    }
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
    let (tx, rx) = mpsc::channel::<Done>();
    let mut run: Option<Run> = None;
    let mut last_progress = Instant::now();
    let mut result = Ok(());
    let seen = |id: &str| shared.seen_runs.lock().map(|s| s.iter().any(|r| r == id)).unwrap_or(true);
    'outer: loop {
        let mut actions = read_actions(tls, &mut buf, &mut dec, &mut sm, &seen);
        actions.extend(sm.on_tick(real_ns()));
        if stop.load(Ordering::Relaxed) {
            actions.push(Action::StopRun("the agent is shutting down".into()));
            actions.extend(sm.on_closed("the agent is shutting down"));
        }
        while let Ok(ev) = rx.try_recv() {
            actions.push(on_finished(ev, run.as_ref(), &mut sm, shared, log));
        }
        if let Some(r) = &run {
            if sm.phase() == Phase::Running && last_progress.elapsed() >= Duration::from_secs(1) {
                last_progress = Instant::now();
                actions.extend(progress(r));
            }
        }
        for a in actions {
            match a {
                Action::Send(m) => {
                    if let Err(e) = write(tls, &msg::encode(&m)) {
                        if let Some(r) = &run {
                            r.part.stop.store(true, Ordering::Relaxed);
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
                    let prepared = on_prepare(*a, opts, shared, &tx, log);
                    let addr = prepared.as_ref().map(|r| r.part.listening()).map_err(String::clone);
                    run = prepared.ok();
                    for a2 in sm.prepared(addr) {
                        if let Action::Send(m) = a2 {
                            let _ = write(tls, &msg::encode(&m));
                        }
                    }
                }
                Action::Start { at_ns } => {
                    if let Some(r) = run.as_mut() {
                        start(r, at_ns, &shared.metrics);
                        log(&format!("run {}: starting in {:.3} s", r.part.part.run_id, at_ns.saturating_sub(real_ns()) as f64 / 1e9));
                    }
                }
                Action::StopRun(why) => {
                    if let Some(r) = &run {
                        if !r.part.stop.swap(true, Ordering::Relaxed) {
                            log(&format!("run {}: stopping: {why}", r.part.part.run_id));
                        }
                    }
                }
                Action::Players { online, at_ns, start, owners } => {
                    if let Some(r) = &run {
                        let more = start.as_ref().map(|s| format!(", starting players {}..{}", s.start, s.end)).unwrap_or_default();
                        match r.steer(online, at_ns, start, &owners) {
                            Ok(()) => log(&format!("run {}: players online → {online} from {:.2} s{more}", r.part.part.run_id, at_ns as f64 / 1e9)),
                            Err(e) => {
                                let _ = write(tls, &msg::encode(&ToController::Error { message: format!("players online → {online}: {e}") }));
                            }
                        }
                    }
                }
                Action::Emu(req) => {
                    let before = shared.doing_now(&req);
                    let reply = emu::handle(*req, opts, tls.sock.local_addr().ok().map(|a| a.ip()), log);
                    *shared.doing.lock().unwrap_or_else(|p| p.into_inner()) = before;
                    if let Err(e) = write(tls, &msg::encode(&ToController::Emu(Box::new(reply)))) {
                        result = Err(anyhow::anyhow!("writing to the controller: {}", crate::tls::describe(&e)));
                        break 'outer;
                    }
                }
                Action::Live(req) => {
                    if let Some(l) = run.as_ref().and_then(|r| r.live.as_ref()) {
                        let crate::msg::SummaryRequest { epoch_ns, own_offset_ns, server_offset_ns, owners, .. } = *req;
                        l.begin(horde_scenario::live_digest::Clocks { epoch_ns, own_offset_ns, server_offset_ns, owners });
                    }
                }
                Action::Collect(req) => {
                    if let Some(r) = &run {
                        // the live summary's last piece goes first (the logs or summary follow)
                        // (a failed write fails the sending below)
                        if let Some(d) = r.live.as_ref().and_then(horde_scenario::live_digest::Live::take) {
                            let _ = write(tls, &msg::encode(&ToController::Summary(Box::new(d))));
                        }
                        let (sent, what) = match req {
                            None => (send_logs(tls, r), "logs"),
                            Some(q) => {
                                let t = Instant::now();
                                let made = summary::write(r, &q);
                                match &made {
                                    Err(e) => {
                                        let _ = write(tls, &msg::encode(&ToController::Error { message: format!("summarising the run: {e:#}") }));
                                    }
                                    Ok((how, _)) => log(&format!("run {}: summarised ({how}) in {:.2} s", r.part.part.run_id, t.elapsed().as_secs_f64())),
                                }
                                (made.and_then(|(_, file)| run::send_files(tls, r, &summary::files(r, file, q.with_logs))), "summary")
                            }
                        };
                        if let Err(e) = sent {
                            result = Err(e.context(format!("sending the {what}")));
                        } else {
                            log(&format!("run {}: {what} collected", r.part.part.run_id));
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

/// What the controller sent since the last turn (the read waits 100 ms at most), as the
/// session's actions; a broken frame or connection closes the session.
fn read_actions(
    tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    buf: &mut [u8],
    dec: &mut msg::Decoder,
    sm: &mut Session,
    seen: &dyn Fn(&str) -> bool,
) -> Vec<Action> {
    let mut actions = Vec::new();
    match tls.read(buf) {
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
    actions
}

/// A role of the run ended: the message that tells the controller, with its report or error.
fn on_finished(ev: Done, run: Option<&Run>, sm: &mut Session, shared: &Shared, log: &(dyn Fn(&str) + Sync)) -> Action {
    let Done { role, report } = ev;
    let (report, error) = match report {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    let cpu = run.map_or(0.0, |r| cpu_s() - r.cpu0);
    log(&format!(
        "run {}: {role} side finished{}",
        run.map_or("?", |r| r.part.part.run_id.as_str()),
        error.as_ref().map(|e| format!(" with an error: {e}")).unwrap_or_default()
    ));
    sm.role_ended();
    if sm.phase() == Phase::Finished {
        shared.metrics.running.store(false, Ordering::Relaxed);
    }
    Action::Send(ToController::Finished { role: role.into(), report, error, cpu_s: cpu, max_rss_kb: max_rss_kb() })
}

/// Prepares an assignment by its kind (its run id remembered first, so a replay does nothing);
/// the error is what the controller is told.
fn on_prepare(a: Part, opts: &AgentOptions, shared: &Shared, tx: &mpsc::Sender<Done>, log: &(dyn Fn(&str) + Sync)) -> Result<Run, String> {
    {
        let mut s = shared.seen_runs.lock().unwrap_or_else(|p| p.into_inner());
        s.push_back(a.run_id.clone());
        if s.len() > SEEN_RUNS {
            s.pop_front();
        }
    }
    let id = a.run_id.clone();
    match prepare(a, opts, &shared.metrics, tx.clone()) {
        Ok(r) => {
            log(&format!("run {id}: prepared{}", r.part.describe()));
            Ok(r)
        }
        Err(e) => {
            shared.metrics.errors.fetch_add(1, Ordering::Relaxed);
            log(&format!("run {id}: {e:#}"));
            Err(format!("{e:#}"))
        }
    }
}

/// A running run's progress once a second, and what its live summary gained.
fn progress(r: &Run) -> Vec<Action> {
    let p = &r.part.progress;
    let mut out = vec![Action::Send(ToController::Progress(msg::Progress {
        t_s: r.t0.elapsed().as_secs_f64(),
        sent_packets: p.sent_packets.load(Ordering::Relaxed),
        sent_bytes: p.sent_bytes.load(Ordering::Relaxed),
        recv_packets: p.recv_packets.load(Ordering::Relaxed),
        recv_bytes: p.recv_bytes.load(Ordering::Relaxed),
        connections: p.connections.load(Ordering::Relaxed),
    }))];
    if let Some(d) = r.live.as_ref().and_then(horde_scenario::live_digest::Live::take) {
        out.push(Action::Send(ToController::Summary(Box::new(d))));
    }
    out
}

fn write(tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>, b: &[u8]) -> std::io::Result<()> {
    tls.write_all(b)?;
    tls.flush()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The peer's bytes we never read (a ping that crossed our last message) must not turn our
    /// close into a reset that loses our last frames: after `linger` the peer reads every byte
    /// we sent, then the end of the stream — not "connection reset".
    #[test]
    fn closing_with_unread_bytes_from_the_peer_still_delivers_everything() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        const LAST: usize = 4 << 20;
        let agent = std::thread::spawn(move || {
            let (mut tcp, _) = l.accept().unwrap();
            // wait until the controller's ping is here, unread
            std::thread::sleep(Duration::from_millis(100));
            tcp.write_all(&vec![7u8; LAST]).unwrap();
            let t = Instant::now();
            linger(&mut tcp);
            t.elapsed()
        });
        let mut ctl = TcpStream::connect(addr).unwrap();
        ctl.write_all(b"a ping the agent never reads").unwrap();
        // the controller is slow to read: the agent closes long before
        std::thread::sleep(Duration::from_millis(300));
        let mut got = Vec::new();
        let r = ctl.read_to_end(&mut got);
        assert!(r.is_ok(), "{r:?} after {} of {LAST} bytes", got.len());
        assert_eq!(got.len(), LAST);
        drop(ctl);
        assert!(agent.join().unwrap() < Duration::from_secs(3));
    }
}
