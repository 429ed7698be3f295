//! The controller's link to one agent: a thread that owns its TLS connection (connect,
//! authenticate, hello with the version check, clock samples), carries the run's commands to the
//! agent, reports what the agent says, and receives its logs (bounded, checked).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use horde_engine::clock::real_ns;

use crate::clock::{Estimate, Filter, Sample};
use crate::msg::{self, Frame, Part, ToAgent, ToController, PROTOCOL};

/// Commands to a link thread.
pub(crate) enum Cmd {
    Assign(Box<Part>),
    Start {
        at_controller_ns: u64,
        /// Summarise live (with this request): the agent's pieces add up in this accumulator.
        live: Option<(Box<msg::SummaryRequest>, crate::live::Shared)>,
    },
    Stop,
    /// Set the online target (see [`ToAgent::Players`]).
    Players {
        online: u32,
        at_ns: u64,
        start: Option<std::ops::Range<u32>>,
        owners: Vec<(std::ops::Range<u32>, i64)>,
    },
    /// Collect the logs into this directory: the logs expected, each with the most bytes it
    /// may have (from the controller's own plan, never from what the agent reported).
    Collect {
        dir: PathBuf,
        limits: Vec<(&'static str, u64)>,
        /// Ask for the run's summary instead of its logs (`--collect summaries`).
        summarise: Option<Box<msg::SummaryRequest>>,
    },
    /// Ask the agent's emulator (outside runs).
    Emu(Box<msg::EmuRequest>),
    Close,
}

/// What a link thread reports.
#[derive(Debug)]
pub(crate) enum Ev {
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
        /// A [`horde_engine::SendReport`] ("clients", "server", "send") or a
        /// [`horde_engine::RecvReport`] ("recv") as the agent sent it.
        report: Option<serde_json::Value>,
        error: Option<String>,
        cpu_s: f64,
        max_rss_kb: u64,
    },
    Collected {
        bytes: u64,
        transferred: u64,
    },
    /// The agent's emulator answered.
    Emu(Box<msg::EmuReply>),
    /// The agent refused, failed, or was lost; the link is over.
    Lost(String),
}

/// The links' events: which agent, what happened.
pub(crate) type Events = mpsc::Receiver<(usize, Ev)>;

/// An agent connected, authenticated, of the same version, its clock measured.
pub(crate) struct Conn {
    pub addr: SocketAddr,
    pub name: String,
    pub cmd: mpsc::Sender<Cmd>,
    pub handle: Option<std::thread::JoinHandle<()>>,
    pub clock: Estimate,
}

/// Closes every link and waits for their threads.
pub(crate) fn close(conns: &mut [Conn]) {
    for c in conns.iter() {
        let _ = c.cmd.send(Cmd::Close);
    }
    for c in conns.iter_mut() {
        if let Some(h) = c.handle.take() {
            let _ = h.join();
        }
    }
}

/// Connects to every agent at once (a link thread each): authentication, hello with the version
/// check, clock samples. `note` gets a line per agent. Any agent that fails, does not answer in
/// time, or shares another's name is an error naming it (every link is closed then), as is
/// `stop` (Ctrl-C) meanwhile. The events of the links follow on the returned receiver.
pub(crate) fn connect_all(
    addrs: &[SocketAddr],
    cfg: Arc<rustls::ClientConfig>,
    deadman: Duration,
    stop: &AtomicBool,
    note: &dyn Fn(String),
) -> anyhow::Result<(Vec<Conn>, Events)> {
    let (etx, erx) = mpsc::channel::<(usize, Ev)>();
    let mut conns: Vec<Conn> = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let (ctx, crx) = mpsc::channel();
        let (cfg, etx) = (cfg.clone(), etx.clone());
        let addr = *addr;
        let handle = std::thread::Builder::new().name(format!("horde-link-{i}")).spawn(move || link(i, addr, cfg, crx, &etx, deadman));
        let handle = match handle {
            Ok(h) => h,
            Err(e) => {
                close(&mut conns);
                bail!("starting a link thread: {e}");
            }
        };
        conns.push(Conn { addr, name: addr.to_string(), cmd: ctx, handle: Some(handle), clock: Estimate::default() });
    }
    drop(etx);
    let mut connected = vec![false; conns.len()];
    let mut pending = conns.len();
    let deadline = Instant::now() + CONNECT_WITHIN + CLOCK_GAP * CLOCK_SAMPLES as u32 + Duration::from_secs(2);
    let mut failures = Vec::new();
    while pending > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        // Woken at least every 200 ms to notice Ctrl-C.
        match erx.recv_timeout(left.clamp(Duration::from_millis(1), Duration::from_millis(200))) {
            Ok((i, Ev::Connected { name, cores, clock })) => {
                let c = &mut conns[i];
                c.name = name;
                c.clock = clock;
                connected[i] = true;
                note(format!(
                    "agent {} at {}: {cores} cores, clock offset {:+.3} ms ± {:.3} ms (best RTT {:.3} ms of {} samples)",
                    c.name,
                    c.addr,
                    clock.offset_ns as f64 / 1e6,
                    clock.uncertainty_ns as f64 / 1e6,
                    clock.rtt_ns as f64 / 1e6,
                    clock.samples
                ));
                if clock.offset_ns.unsigned_abs() > CLOCK_WARN_NS {
                    note(format!(
                        "warning: agent {}'s clock is {:.3} s {} the controller's: its records are corrected by the measured offset, but synchronise its clock (NTP) for one-way delays beyond this run",
                        c.name,
                        clock.offset_ns.unsigned_abs() as f64 / 1e9,
                        if clock.offset_ns > 0 { "ahead of" } else { "behind" }
                    ));
                }
                pending -= 1;
            }
            Ok((i, Ev::Lost(why))) => {
                failures.push(format!("agent {}: {why}", conns[i].addr));
                connected[i] = true;
                pending -= 1;
            }
            Ok(_) => {}
            Err(_) if !left.is_zero() => {}
            Err(_) => {
                for (c, _) in conns.iter().zip(&connected).filter(|x| !*x.1) {
                    failures.push(format!("agent {}: no answer within {} s", c.addr, CONNECT_WITHIN.as_secs()));
                }
                break;
            }
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            failures.push("interrupted while connecting".into());
            break;
        }
    }
    if failures.is_empty() {
        if let Some((i, c)) = conns.iter().enumerate().find(|(i, c)| conns[..*i].iter().any(|o| o.name == c.name)) {
            failures.push(format!(
                "two agents call themselves {} ({} and {}): give each agent its own --name",
                c.name,
                conns[..i].iter().find(|o| o.name == c.name).map_or(String::new(), |o| o.addr.to_string()),
                c.addr
            ));
        }
    }
    if !failures.is_empty() {
        close(&mut conns);
        bail!("not starting: {}", failures.join("; "));
    }
    Ok((conns, erx))
}

/// How one agent's log collection ended.
pub(crate) enum Collected {
    Logs { bytes: u64, transferred: u64 },
    Lost(String),
}

/// How long a collection may take in all: 300 s (8,000 players' logs of a minute are ~130 MB;
/// a slow link of 10 Mbit/s moves them in under two minutes); after Ctrl-C, 2.5 s.
pub(crate) const COLLECT_WITHIN: Duration = Duration::from_secs(300);
pub(crate) const COLLECT_AFTER_SIGNAL: Duration = Duration::from_millis(2500);

/// Waits for `n` agents' log collections until a fixed deadline ([`COLLECT_WITHIN`] from now,
/// cut to [`COLLECT_AFTER_SIGNAL`] once `stop` is set): nothing an agent sends extends it.
/// `each` gets the agent and how its collection ended, and says whether it was one still
/// waited for. Returns false if the deadline passed with collections outstanding.
pub(crate) fn await_collections(erx: &Events, mut n: usize, stop: &AtomicBool, mut each: impl FnMut(usize, Collected) -> bool) -> bool {
    let mut deadline = Instant::now() + COLLECT_WITHIN;
    let mut signalled = false;
    while n > 0 {
        if !signalled && stop.load(std::sync::atomic::Ordering::Relaxed) {
            signalled = true;
            deadline = deadline.min(Instant::now() + COLLECT_AFTER_SIGNAL);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let counted = match erx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok((i, Ev::Collected { bytes, transferred })) => each(i, Collected::Logs { bytes, transferred }),
            Ok((i, Ev::Lost(why))) => each(i, Collected::Lost(why)),
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => false,
            Err(mpsc::RecvTimeoutError::Disconnected) => return false,
        };
        n -= counted as usize;
    }
    true
}

/// How long agents may take to prepare their part: 120 s in all (planning 10,000 players takes
/// seconds; a server side binding takes milliseconds).
pub(crate) const READY_WITHIN: Duration = Duration::from_secs(120);

/// Waits until every agent in `waiting` said Ready, until a fixed deadline ([`READY_WITHIN`]):
/// nothing an agent sends extends it, and `stop` (Ctrl-C) ends the wait at once. Returns each
/// agent's server address; an agent lost meanwhile, the deadline or `stop` is an error naming
/// what happened.
pub(crate) fn await_ready(erx: &Events, names: &[String], mut waiting: Vec<usize>, stop: &AtomicBool) -> Result<Vec<(usize, Option<SocketAddr>)>, String> {
    let deadline = Instant::now() + READY_WITHIN;
    let mut got = Vec::new();
    while !waiting.is_empty() {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("interrupted while the agents prepared".into());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let who: Vec<&str> = waiting.iter().map(|&i| names[i].as_str()).collect();
            return Err(format!("agent(s) {} did not get ready within {} s", who.join(", "), READY_WITHIN.as_secs()));
        }
        match erx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok((i, Ev::Ready { server_addr })) if waiting.contains(&i) => {
                waiting.retain(|&w| w != i);
                got.push((i, server_addr));
            }
            Ok((i, Ev::Lost(why))) => return Err(format!("agent {}: {why}", names[i])),
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err("every link ended".into()),
        }
    }
    Ok(got)
}

/// An agent clock this far from the controller's is warned about: 100 ms (NTP keeps machines
/// within milliseconds of each other; more means no synchronisation at all).
pub(crate) const CLOCK_WARN_NS: u64 = 100_000_000;

/// Clock samples per agent, and their spacing.
pub(crate) const CLOCK_SAMPLES: usize = 16;
pub(crate) const CLOCK_GAP: Duration = Duration::from_millis(20);
pub(crate) const CONNECT_WITHIN: Duration = Duration::from_secs(10);
/// How long a link reads before it looks at the run's commands again.
const COMMAND_WAIT: Duration = Duration::from_millis(10);

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// One agent's link: connect, authenticate, hello, clock samples; then commands until Close.
pub(crate) fn link(i: usize, addr: SocketAddr, cfg: Arc<rustls::ClientConfig>, cmds: mpsc::Receiver<Cmd>, ev: &mpsc::Sender<(usize, Ev)>, deadman: Duration) {
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
    let hello = greet(&mut tls, &mut dec, &mut buf, deadline);
    let clock = match hello {
        Ok((name, cores, clock)) => {
            send(Ev::Connected { name, cores, clock });
            clock
        }
        Err(e) => return send(Ev::Lost(format!("{e:#}"))),
    };
    // a command waits for the read to time out before it is written: 10 ms at most
    let _ = tls.sock.set_read_timeout(Some(COMMAND_WAIT));
    let mut last_ping = Instant::now();
    let mut last_heard = Instant::now();
    let mut running = false;
    let mut collecting: Option<Collect> = None;
    let mut live: Option<crate::live::Shared> = None;
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
                Cmd::Start { at_controller_ns, live: summarise } => {
                    running = true;
                    last_heard = Instant::now();
                    if let Err(e) = live_first(&mut tls, summarise, &mut live) {
                        return send(Ev::Lost(format!("writing to it: {}", crate::tls::describe(&e))));
                    }
                    ToAgent::Start { at_ns: (at_controller_ns as i128 + clock.offset_ns as i128).max(0) as u64 }
                }
                Cmd::Stop => ToAgent::Stop,
                Cmd::Players { online, at_ns, start, owners } => ToAgent::Players { online, at_ns, start, owners },
                Cmd::Collect { dir, limits, summarise } => {
                    running = false;
                    collecting = Some(Collect { dir, limits, file: None, bytes: 0, transferred: 0, total: 0, total_transferred: 0, files: 0 });
                    match summarise {
                        Some(req) => ToAgent::Summarise(req),
                        None => ToAgent::Collect,
                    }
                }
                Cmd::Emu(r) => ToAgent::Emu(r),
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
                (Frame::Msg(ToController::Pong), _) => {}
                (Frame::Msg(ToController::Ready { server_addr }), _) => send(Ev::Ready { server_addr }),
                (Frame::Msg(ToController::Progress(p)), _) => send(Ev::Progress(p)),
                (Frame::Msg(ToController::Emu(r)), None) => send(Ev::Emu(r)),
                // (one it was not asked for is unexpected, below)
                (Frame::Msg(ToController::Summary(d)), _) if live.is_some() => live.iter().for_each(|a| crate::live::lock(a).apply(&d)),
                (Frame::Msg(ToController::Finished { role, report, error, cpu_s, max_rss_kb }), _) => {
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

/// Asks the agent to summarise live (before its start), and keeps where its pieces add up.
fn live_first(
    tls: &mut Tls,
    summarise: Option<(Box<msg::SummaryRequest>, crate::live::Shared)>,
    live: &mut Option<crate::live::Shared>,
) -> std::io::Result<()> {
    if let Some((req, acc)) = summarise {
        write(tls, &msg::encode(&ToAgent::Live(req)))?;
        *live = Some(acc);
    }
    Ok(())
}

/// A log being received: deflate pieces into a file, bounded by the size the agent declared.
struct Collect {
    dir: PathBuf,
    limits: Vec<(&'static str, u64)>,
    file: Option<(String, flate2::write::DeflateDecoder<std::fs::File>)>,
    bytes: u64,
    transferred: u64,
    total: u64,
    total_transferred: u64,
    files: u32,
}

impl Collect {
    fn begin(&mut self, file: &str, bytes: u64) -> anyhow::Result<()> {
        let Some(&(file, max)) = self.limits.iter().find(|l| l.0 == file).filter(|_| self.file.is_none()) else {
            bail!("it offered an unexpected log `{}`", file.escape_debug());
        };
        if bytes > max {
            bail!("it offered {file} of {bytes} bytes, more than the {max} bytes the run's plan allows");
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

/// Hello with the version check, then the clock samples, before `deadline`.
fn greet(tls: &mut Tls, dec: &mut msg::Decoder, buf: &mut [u8], deadline: Instant) -> anyhow::Result<(String, u32, Estimate)> {
    write(tls, &msg::encode(&ToAgent::Hello { protocol: PROTOCOL, version: env!("CARGO_PKG_VERSION").into() }))?;
    let (name, cores) = match read_msg(tls, dec, buf, deadline)? {
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
        write(tls, &msg::encode(&ToAgent::Time { t1 }))?;
        match read_msg(tls, dec, buf, deadline)? {
            ToController::Time { t1: e1, t2, t3 } if e1 == t1 => f.add(Sample { t1, t2, t3, t4: real_ns() }),
            other => bail!("it answered a clock sample with {other:?}"),
        }
        std::thread::sleep(CLOCK_GAP);
    }
    Ok((name, cores, f.estimate().context("no usable clock sample")?))
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
