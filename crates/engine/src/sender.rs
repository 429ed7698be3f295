//! The sender: drives any number of flows from a fixed set of worker threads.
//!
//! Each worker owns a share of the flows and a min-heap of their next departures. It sleeps
//! until shortly before the earliest departure, spins for the last stretch, then sends every
//! packet that is due: UDP packets of one flow leave in one `sendmmsg`, TCP APDUs are written
//! to the stream. A worker that falls behind sends what is overdue at once (never drops it) and
//! the lateness of every packet is measured. Sockets are non-blocking; a mio poll waits for TCP
//! writability, echoes and incoming traffic.
//!
//! The same workers serve the server side of a two-way scenario ([`serve`]): a worker with a TCP
//! listener accepts connections, and when a client's hello names its player, a [`Responder`]
//! supplies that player's server→client schedule. Flows are data: sources can be added while
//! the worker runs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use horde_model::{Departure, Flow, Meter, Schedule, Transport};
use horde_wire::datagram::{FLAG_ECHO_REPLY, FLAG_ECHO_REQUEST, FLAG_HELLO};
use horde_wire::log::FLAG_CLAMPED;
use horde_wire::stream::HELLO_ECHO;
use horde_wire::{ApduHeader, DatagramHeader, Record, RecordKind, Role, StreamDecoder, StreamEvent, StreamHello, HELLO_LEN};
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use socket2::Socket;

use crate::clock::{self, mono_ns, real_ns};
use crate::logger::{LogSink, LogWriter};
use crate::net::{self, RecvBatch, BATCH};
use crate::EngineError;

/// Time given to workers between the start gate and the first departure, plus a share per TCP
/// flow for writing its hello (measured: 10,000 hellos take ~60 ms on this 2-core VM).
const START_LEAD_NS: u64 = 20_000_000;
const START_LEAD_PER_TCP_NS: u64 = 20_000;
const LISTEN_TOKEN: usize = 1 << 30;
const UDP_LISTEN_TOKEN: usize = 1 << 29;
/// UDP two-way hellos: how many at most, and how far apart.
const HELLO_TRIES: u8 = 20;
const HELLO_RETRY_NS: u64 = 100_000_000;

/// A flow's departures: a plain schedule, or a player's behaviour-driven one.
pub type Source = Box<dyn Iterator<Item = Departure> + Send>;

/// Hooks of a two-way scenario (see `horde run`).
pub trait Responder: Send + Sync {
    /// Server side: what to do with a connection whose client sent `hello`. `None` closes it.
    fn on_hello(&self, hello: &StreamHello) -> Option<Accepted>;
}

/// The server side's answer to a client's hello.
pub struct Accepted {
    /// Departures to send back, times in ns after `hello.base_ns` (the client's start).
    pub source: Source,
    /// The client's own schedule, regenerated: incoming APDU k is its departure k (see
    /// [`Job::mirror`]).
    pub mirror: Option<Source>,
    pub tag: u32,
}

/// Counters shared with a progress display; updated with relaxed atomics.
#[derive(Debug, Default)]
pub struct Progress {
    pub sent_packets: AtomicU64,
    pub sent_bytes: AtomicU64,
    pub recv_packets: AtomicU64,
    pub recv_bytes: AtomicU64,
    pub connections: AtomicU64,
}

impl Progress {
    fn sent(p: &Option<Arc<Progress>>, len: u64) {
        if let Some(p) = p {
            p.sent_packets.fetch_add(1, Ordering::Relaxed);
            p.sent_bytes.fetch_add(len, Ordering::Relaxed);
        }
    }

    fn received(p: &Option<Arc<Progress>>, len: u64) {
        if let Some(p) = p {
            p.recv_packets.fetch_add(1, Ordering::Relaxed);
            p.recv_bytes.fetch_add(len, Ordering::Relaxed);
        }
    }
}

#[derive(Clone)]
pub struct SendOptions {
    /// Data-path worker threads; flows are spread over them.
    pub threads: usize,
    /// Busy-wait before each departure, ns.
    pub spin_ns: u64,
    pub log: Option<PathBuf>,
    /// How long all TCP connects may take.
    pub connect_timeout: Duration,
    /// After the last departure: how long to wait for echoes, incoming traffic and TCP buffers.
    pub linger: Duration,
    pub responder: Option<Arc<dyn Responder>>,
    pub progress: Option<Arc<Progress>>,
    /// Keep connections open until this long after the start, whatever the own departures do
    /// (the peer may still be sending); then linger.
    pub run_for: Option<Duration>,
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions {
            threads: 1,
            spin_ns: clock::DEFAULT_SPIN_NS,
            log: None,
            connect_timeout: Duration::from_secs(10),
            linger: Duration::from_millis(500),
            responder: None,
            progress: None,
            run_for: None,
        }
    }
}

/// Lateness of departures (actual − scheduled), microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Lateness {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Departures more than 1 ms late.
    pub over_1ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowSent {
    pub id: u32,
    pub name: String,
    pub transport: String,
    pub dst: SocketAddr,
    pub packets: u64,
    pub bytes: u64,
    /// Packets whose drawn size was clamped to the transport's limits.
    pub clamped: u64,
    /// Packets the OS refused (e.g. ICMP port unreachable: nobody listening).
    pub errors: u64,
    pub echoes: u64,
    /// APDUs received from the peer on this connection (two-way scenarios).
    pub received: u64,
    /// Received APDUs whose size differed from the peer's regenerated schedule (must be 0).
    pub mismatched: u64,
    /// Real (epoch) times of the first and last departure, ns.
    pub first_ns: u64,
    pub last_ns: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendReport {
    pub flows: Vec<FlowSent>,
    pub packets: u64,
    pub bytes: u64,
    pub errors: u64,
    pub echoes: u64,
    pub received: u64,
    /// Received APDUs that did not match the peer's regenerated schedule (must be 0).
    pub mismatched: u64,
    /// Seconds from the first to the last departure.
    pub duration_s: f64,
    /// Seconds all TCP connections took to establish (0 without TCP flows).
    pub connect_s: f64,
    pub lateness: Lateness,
    pub interrupted: bool,
    pub log: Option<PathBuf>,
    pub log_records: u64,
    pub threads: usize,
    /// Real time (ns since the epoch) of the run's start: departure times count from here.
    pub t0_real_ns: u64,
}

/// What a TCP flow does with bytes the peer sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Incoming {
    /// Echoes of our own APDUs (round-trip mode).
    Echo,
    /// The peer's own APDUs (two-way scenarios); logged as received.
    Traffic,
}

struct TcpOut {
    out: Vec<u8>,
    sent_upto: usize,
    /// Base of the send-time offsets in our APDU headers (our hello's base).
    base_ns: u64,
    decoder: StreamDecoder,
    want_write: bool,
    broken: bool,
    /// Server side: the client's hello has not arrived yet.
    awaiting_hello: bool,
}

struct FlowState {
    flow: Flow,
    sched: Option<Source>,
    /// Added to every departure time: moves a source's time base onto the worker's.
    shift_ns: i64,
    pending: VecDeque<Departure>,
    sock: Socket,
    tcp: Option<TcpOut>,
    incoming: Incoming,
    /// The peer's schedule, regenerated: gives each incoming APDU its class and expected size.
    mirror: Option<Source>,
    /// Not connected yet: connect at this time (ns after the start).
    connect_at: Option<u64>,
    /// Server side over UDP: the player's address (the socket is the shared listening one).
    peer: Option<SocketAddr>,
    /// A mirror departure read ahead (UDP: a later one than the datagram that arrived).
    mirror_ahead: Option<Departure>,
    /// UDP two-way client: hellos sent so far and when the last one left (monotonic ns).
    hellos: u8,
    last_hello_mono: u64,
    stats: FlowSent,
}

impl FlowState {
    /// The record tag of the incoming APDU/datagram `seq` of `len` bytes: the peer's departure
    /// `seq` from the mirror names its class; a size that differs is counted as mismatched.
    /// Lost datagrams are skipped over; one that arrives after a later one keeps the plain tag.
    fn classify(&mut self, seq: u64, len: u32) -> u32 {
        let Some(m) = self.mirror.as_mut() else { return self.flow.tag };
        loop {
            let d = match self.mirror_ahead.take().or_else(|| m.next()) {
                Some(d) => d,
                None => return self.flow.tag,
            };
            if d.seq < seq {
                continue;
            }
            if d.seq > seq {
                self.mirror_ahead = Some(d);
                return self.flow.tag;
            }
            self.stats.mismatched += (d.size != len) as u64;
            return (self.flow.tag & !0xFF) | d.class as u32;
        }
    }

    /// The next departure, drawn from the source if none is pending.
    fn peek(&mut self) -> Option<Departure> {
        if self.pending.is_empty() {
            let mut d = self.sched.as_mut()?.next()?;
            d.at_ns = (d.at_ns as i64 + self.shift_ns).max(0) as u64;
            self.pending.push_back(d);
        }
        self.pending.front().copied()
    }
}

/// A flow to run: its validated spec, and optionally a source replacing its plain schedule.
pub struct Job {
    pub flow: Flow,
    pub source: Option<Source>,
    /// The peer's schedule on this connection, regenerated (two-way scenarios): the k-th APDU
    /// that arrives is the peer's k-th departure, which names its class (category) exactly,
    /// even when it left a few µs after a category change.
    pub mirror: Option<Source>,
    /// Connect only this long after the start (a player joining late), ns. TCP only.
    pub connect_at_ns: Option<u64>,
    /// Open the socket inside this network namespace (a player on an emulated host). The
    /// socket stays there; the thread returns to its own namespace.
    pub netns: Option<Arc<std::fs::File>>,
}

/// Opens the sockets of every flow, connects TCP flows, then runs all flows to their end
/// (or until `stop` is set) and reports.
pub fn run(flows: Vec<Flow>, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, EngineError> {
    run_jobs(flows.into_iter().map(|flow| Job { flow, source: None, mirror: None, connect_at_ns: None, netns: None }).collect(), opts, stop)
}

/// [`run`] with explicit sources (e.g. players' behaviour-driven schedules).
pub fn run_jobs(jobs: Vec<Job>, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, EngineError> {
    if jobs.is_empty() {
        return Err(EngineError::Config("no flows to send".into()));
    }
    clock::raise_fd_limit();
    let mut states = Vec::with_capacity(jobs.len());
    for job in jobs {
        states.push(open_flow(job)?);
    }
    let connect_started = mono_ns();
    connect_all(&mut states, opts.connect_timeout, stop)?;
    let tcp_flows = states.iter().filter(|s| s.tcp.is_some()).count() as u64;
    let connect_s = if tcp_flows > 0 { (mono_ns() - connect_started) as f64 / 1e9 } else { 0.0 };
    let threads = opts.threads.clamp(1, states.len());
    let mut shares: Vec<Vec<FlowState>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, s) in states.into_iter().enumerate() {
        shares[i % threads].push(s);
    }
    let lead = START_LEAD_NS + START_LEAD_PER_TCP_NS * tcp_flows / threads as u64;
    run_workers(shares.into_iter().map(|flows| Share { flows, ..Default::default() }).collect(), opts, stop, lead, connect_s)
}

/// The server side of a two-way scenario: listens on `listen`, and for every connection whose
/// hello the responder accepts, sends that player's departures and logs what arrives. Runs until
/// `stop` is set. `ready` gets the bound addresses before the first accept.
pub fn serve(
    listen: &[SocketAddr],
    transport: Transport,
    opts: &SendOptions,
    stop: &AtomicBool,
    ready: impl FnOnce(&[SocketAddr]),
) -> Result<SendReport, EngineError> {
    if opts.responder.is_none() {
        return Err(EngineError::Config("serving needs a responder".into()));
    }
    clock::raise_fd_limit();
    let threads = opts.threads.max(1);
    let mut shares: Vec<Share> = (0..threads).map(|_| Share::default()).collect();
    let mut bound = Vec::new();
    for a in listen {
        // The first socket picks the port (a may say port 0); the other workers' sockets share
        // it through SO_REUSEPORT.
        let mut addr = *a;
        for (w, share) in shares.iter_mut().enumerate() {
            let bind_err = |e: io::Error| EngineError::Io {
                what: format!(
                    "binding {} {addr}{}",
                    transport.name(),
                    if e.kind() == io::ErrorKind::AddrInUse { " (the port is in use: stop the other program or pick another port)" } else { "" }
                ),
                source: e,
            };
            let local = match transport {
                Transport::Tcp => {
                    let l = TcpListener::from_std(net::tcp_listener_shared(addr, threads > 1).map_err(bind_err)?.into());
                    let a = l.local_addr().ok();
                    share.tcp.push(l);
                    a
                }
                Transport::Udp => {
                    let u = net::udp_listener_shared(addr, threads > 1).map_err(bind_err)?;
                    let a = u.local_addr().ok().and_then(|a| a.as_socket());
                    share.udp.push(u);
                    a
                }
            };
            if w == 0 {
                addr = local.ok_or_else(|| EngineError::Config("cannot read the bound address".into()))?;
                bound.push(addr);
            }
        }
    }
    ready(&bound);
    run_workers(shares, opts, stop, START_LEAD_NS, 0.0)
}

/// What one worker starts with.
#[derive(Default)]
struct Share {
    flows: Vec<FlowState>,
    tcp: Vec<TcpListener>,
    udp: Vec<Socket>,
}

fn run_workers(shares: Vec<Share>, opts: &SendOptions, stop: &AtomicBool, lead_ns: u64, connect_s: f64) -> Result<SendReport, EngineError> {
    let threads = shares.len();
    let (writer, sink) = match &opts.log {
        Some(p) => {
            let (w, s) =
                LogWriter::create(p, Role::Sender, real_ns()).map_err(|e| EngineError::Io { what: format!("creating log {}", p.display()), source: e })?;
            (Some(w), s)
        }
        None => (None, LogSink::disabled()),
    };
    // Workers register their sockets first; the clock starts when all are ready, so set-up
    // time (10,000 sockets take ~100 ms) never shows as lateness.
    let start = StartGate::new(threads, lead_ns);
    let results: Vec<io::Result<WorkerResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .enumerate()
            .map(|(i, share)| {
                let sink = sink.clone();
                let opts = opts.clone();
                let start = &start;
                std::thread::Builder::new()
                    .name(format!("horde-send-{i}"))
                    .spawn_scoped(scope, move || {
                        let w = Worker::new(share, sink, opts);
                        let (t0_mono, t0_real) = start.arrive();
                        w?.run(t0_mono, t0_real, stop)
                    })
                    .expect("spawning a sender worker")
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("sender worker panicked")))).collect()
    });
    drop(sink);
    let log_records = match writer {
        Some(w) => w.finish().map_err(|e| EngineError::Io { what: "writing the send log".into(), source: e })?,
        None => 0,
    };
    let mut flows = Vec::new();
    let mut hist = new_hist();
    let mut interrupted = false;
    for r in results {
        let r = r.map_err(|e| EngineError::Io { what: "sending".into(), source: e })?;
        hist.add(&r.lateness).ok();
        interrupted |= r.interrupted;
        flows.extend(r.flows);
    }
    flows.sort_by_key(|f| f.id);
    let t0 = start.t0.lock().expect("start gate").map_or(0, |t| t.1);
    Ok(summarise(flows, &hist, connect_s, interrupted, opts, log_records, threads, t0))
}

#[allow(clippy::too_many_arguments)]
fn summarise(
    flows: Vec<FlowSent>,
    hist: &Histogram<u64>,
    connect_s: f64,
    interrupted: bool,
    opts: &SendOptions,
    log_records: u64,
    threads: usize,
    t0_real_ns: u64,
) -> SendReport {
    let first = flows.iter().filter(|f| f.packets > 0).map(|f| f.first_ns).min().unwrap_or(0);
    let last = flows.iter().map(|f| f.last_ns).max().unwrap_or(0);
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1e3;
    let lateness = Lateness {
        mean_us: hist.mean() / 1e3,
        p50_us: us(0.5),
        p90_us: us(0.9),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: hist.max() as f64 / 1e3,
        over_1ms: hist.count_between(1_000_000, u64::MAX),
    };
    SendReport {
        packets: flows.iter().map(|f| f.packets).sum(),
        bytes: flows.iter().map(|f| f.bytes).sum(),
        errors: flows.iter().map(|f| f.errors).sum(),
        echoes: flows.iter().map(|f| f.echoes).sum(),
        received: flows.iter().map(|f| f.received).sum(),
        mismatched: flows.iter().map(|f| f.mismatched).sum(),
        duration_s: last.saturating_sub(first) as f64 / 1e9,
        connect_s,
        lateness,
        interrupted,
        log: opts.log.clone(),
        log_records,
        threads,
        t0_real_ns,
        flows,
    }
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

fn new_stats(flow: &Flow) -> FlowSent {
    FlowSent {
        id: flow.id,
        name: flow.name.clone(),
        transport: flow.transport.name().to_string(),
        dst: flow.dst,
        packets: 0,
        bytes: 0,
        clamped: 0,
        errors: 0,
        echoes: 0,
        received: 0,
        mismatched: 0,
        first_ns: 0,
        last_ns: 0,
    }
}

fn new_tcp(awaiting_hello: bool) -> TcpOut {
    TcpOut { out: Vec::new(), sent_upto: 0, base_ns: 0, decoder: StreamDecoder::new(), want_write: false, broken: false, awaiting_hello }
}

fn open_flow(job: Job) -> Result<FlowState, EngineError> {
    let flow = job.flow;
    let who = format!("flow {} (`{}`)", flow.id, flow.name);
    let connect_at = if flow.transport == Transport::Tcp { job.connect_at_ns } else { None };
    let open = || match (flow.transport, connect_at) {
        (Transport::Udp, _) => net::udp_connected(flow.dst, flow.src, flow.tos, flow.ttl),
        (Transport::Tcp, None) => net::tcp_connect(flow.dst, flow.src, flow.tos, flow.ttl, flow.nodelay),
        (Transport::Tcp, Some(_)) => net::tcp_socket(flow.dst, flow.src, flow.tos, flow.ttl, flow.nodelay),
    };
    let sock = match &job.netns {
        None => open(),
        Some(ns) => net::within_netns(ns, open),
    }
    .map_err(|e| EngineError::Flow { flow: who.clone(), what: format!("opening a {} socket to {}", flow.transport.name(), flow.dst), source: e })?;
    if flow.meter == Meter::Rtt && flow.transport == Transport::Udp {
        net::enable_rx_info(&sock, flow.dst.is_ipv6()).map_err(|e| EngineError::Flow { flow: who, what: "enabling receive timestamps".into(), source: e })?;
    }
    let tcp = (flow.transport == Transport::Tcp).then(|| new_tcp(false));
    let sched: Source = job.source.unwrap_or_else(|| Box::new(Schedule::new(&flow)));
    let incoming = if flow.meter == Meter::Rtt { Incoming::Echo } else { Incoming::Traffic };
    Ok(FlowState {
        stats: new_stats(&flow),
        sched: Some(sched),
        shift_ns: 0,
        flow,
        pending: VecDeque::new(),
        sock,
        tcp,
        incoming,
        mirror: job.mirror,
        connect_at,
        peer: None,
        mirror_ahead: None,
        hellos: 0,
        last_hello_mono: 0,
    })
}

/// A flow spec for a connection accepted by the server side.
fn accepted_flow(peer: SocketAddr) -> Flow {
    Flow::connection(0, format!("from {peer}"), peer, 0)
}

/// Waits until every TCP flow's non-blocking connect has completed.
fn connect_all(states: &mut [FlowState], timeout: Duration, stop: &AtomicBool) -> Result<(), EngineError> {
    let io_err = |what: &str| {
        let what = what.to_string();
        move |e| EngineError::Io { what: what.clone(), source: e }
    };
    let mut waiting = 0usize;
    let mut poll = Poll::new().map_err(io_err("creating a poll"))?;
    for (i, s) in states.iter().enumerate() {
        if s.tcp.is_some() && s.connect_at.is_none() {
            poll.registry().register(&mut SourceFd(&s.sock.as_raw_fd()), Token(i), Interest::WRITABLE).map_err(io_err("registering a socket"))?;
            waiting += 1;
        }
    }
    let mut done = vec![false; states.len()];
    let deadline = mono_ns() + timeout.as_nanos() as u64;
    let mut events = Events::with_capacity(1024);
    while waiting > 0 {
        if stop.load(Ordering::Relaxed) {
            return Err(EngineError::Interrupted);
        }
        let now = mono_ns();
        if now >= deadline {
            let first = states.iter().zip(&done).find(|(s, d)| s.tcp.is_some() && s.connect_at.is_none() && !**d).map(|(s, _)| s.flow.dst);
            return Err(EngineError::Config(format!(
                "{waiting} TCP connection(s) not established within {:?} (first: {}); is `horde recv` listening there?",
                timeout,
                first.map(|a| a.to_string()).unwrap_or_default()
            )));
        }
        poll.poll(&mut events, Some(Duration::from_nanos((deadline - now).min(100_000_000)))).map_err(io_err("waiting for connections"))?;
        for ev in events.iter() {
            let i = ev.token().0;
            if done[i] {
                continue;
            }
            let s = &states[i];
            match s.sock.take_error() {
                Ok(None) if s.sock.peer_addr().is_ok() => {
                    done[i] = true;
                    waiting -= 1;
                    poll.registry().deregister(&mut SourceFd(&s.sock.as_raw_fd())).ok();
                }
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => {
                    return Err(EngineError::Flow {
                        flow: format!("flow {} (`{}`)", s.flow.id, s.flow.name),
                        what: format!("connecting to {} (is `horde recv --tcp {}` running?)", s.flow.dst, s.flow.dst.port()),
                        source: e,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Releases all workers at once with a common start time.
struct StartGate {
    barrier: std::sync::Barrier,
    lead_ns: u64,
    t0: std::sync::Mutex<Option<(u64, u64)>>,
}

impl StartGate {
    fn new(n: usize, lead_ns: u64) -> Self {
        StartGate { barrier: std::sync::Barrier::new(n), lead_ns, t0: std::sync::Mutex::new(None) }
    }

    /// Waits for every worker; returns the shared (monotonic, real) start time.
    fn arrive(&self) -> (u64, u64) {
        self.barrier.wait();
        let mut t0 = self.t0.lock().expect("start gate");
        *t0.get_or_insert_with(|| (mono_ns() + self.lead_ns, real_ns() + self.lead_ns))
    }
}

struct WorkerResult {
    flows: Vec<FlowSent>,
    lateness: Histogram<u64>,
    interrupted: bool,
}

struct Worker {
    flows: Vec<FlowState>,
    listeners: Vec<TcpListener>,
    /// Server side over UDP: one shared socket per port, and the players seen on them.
    udp_listeners: Vec<Socket>,
    udp_peers: HashMap<SocketAddr, usize>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    poll: Option<Poll>,
    events: Events,
    sink: LogSink,
    t0_mono: u64,
    t0_real: u64,
    opts: SendOptions,
    hist: Histogram<u64>,
    slots: Vec<Vec<u8>>,
    rx: Option<RecvBatch>,
    read_buf: Vec<u8>,
}

impl Worker {
    fn new(share: Share, sink: LogSink, opts: SendOptions) -> io::Result<Worker> {
        clock::tighten_timer_slack();
        let Share { flows, tcp: listeners, udp: udp_listeners } = share;
        let udp_in = |f: &FlowState| f.tcp.is_none() && (f.flow.meter == Meter::Rtt || f.mirror.is_some());
        let needs_poll = !listeners.is_empty() || !udp_listeners.is_empty() || flows.iter().any(|f| f.tcp.is_some() || udp_in(f));
        let poll = if needs_poll { Some(Poll::new()?) } else { None };
        let mut listeners = listeners;
        if let Some(p) = &poll {
            for (i, f) in flows.iter().enumerate() {
                if f.connect_at.is_some() {
                    // registered when it connects
                } else if f.tcp.is_some() {
                    p.registry().register(&mut SourceFd(&f.sock.as_raw_fd()), Token(i), Interest::READABLE | Interest::WRITABLE)?;
                } else if udp_in(f) {
                    p.registry().register(&mut SourceFd(&f.sock.as_raw_fd()), Token(i), Interest::READABLE)?;
                }
            }
            for (j, l) in listeners.iter_mut().enumerate() {
                p.registry().register(l, Token(LISTEN_TOKEN + j), Interest::READABLE)?;
            }
            for (j, u) in udp_listeners.iter().enumerate() {
                p.registry().register(&mut SourceFd(&u.as_raw_fd()), Token(UDP_LISTEN_TOKEN + j), Interest::READABLE)?;
            }
        }
        let has_udp_rx = !udp_listeners.is_empty() || flows.iter().any(udp_in);
        Ok(Worker {
            heap: BinaryHeap::with_capacity(flows.len()),
            flows,
            listeners,
            udp_listeners,
            udp_peers: HashMap::new(),
            poll,
            events: Events::with_capacity(1024),
            sink,
            t0_mono: 0,
            t0_real: 0,
            opts,
            hist: new_hist(),
            slots: (0..BATCH).map(|_| Vec::new()).collect(),
            rx: has_udp_rx.then(|| RecvBatch::new(horde_model::flow::MAX_UDP_PAYLOAD as usize + 1)),
            read_buf: vec![0u8; 64 * 1024],
        })
    }

    fn run(mut self, t0_mono: u64, t0_real: u64, stop: &AtomicBool) -> io::Result<WorkerResult> {
        self.t0_mono = t0_mono;
        self.t0_real = t0_real;
        for i in 0..self.flows.len() {
            if let Some(at) = self.flows[i].connect_at {
                self.heap.push(Reverse((at, i)));
                continue;
            }
            // The hello's base is the run's start, so the peer can place our departures in time.
            self.send_hello(i, t0_real);
            self.send_udp_hello(i, t0_real);
            if let Some(d) = self.flows[i].peek() {
                self.heap.push(Reverse((d.at_ns, i)));
            }
        }
        let serving = !self.listeners.is_empty() || !self.udp_listeners.is_empty();
        let mut interrupted = false;
        loop {
            if stop.load(Ordering::Relaxed) {
                interrupted = !serving;
                break;
            }
            let Some(&Reverse((at, i))) = self.heap.peek() else {
                if serving {
                    self.poll_io(Duration::from_millis(50));
                    continue;
                }
                break;
            };
            let now = mono_ns();
            if self.t0_mono + at > now {
                self.wait(self.t0_mono + at);
                continue;
            }
            self.heap.pop();
            if self.flows[i].connect_at.is_some() {
                self.join(i);
            } else {
                self.send_due(i, now - self.t0_mono);
            }
            if let Some(d) = self.flows[i].peek() {
                self.heap.push(Reverse((d.at_ns, i)));
            }
        }
        if !serving {
            self.linger(stop);
        }
        self.sink.flush();
        Ok(WorkerResult { flows: self.flows.into_iter().map(|f| f.stats).collect(), lateness: self.hist, interrupted })
    }

    /// A flow whose time has come to connect (a player joining): connect, register, greet.
    fn join(&mut self, i: usize) {
        let f = &mut self.flows[i];
        f.connect_at = None;
        let ok = net::start_connect(&f.sock, f.flow.dst).is_ok()
            && self
                .poll
                .as_ref()
                .is_some_and(|p| p.registry().register(&mut SourceFd(&f.sock.as_raw_fd()), Token(i), Interest::READABLE | Interest::WRITABLE).is_ok());
        if !ok {
            f.stats.errors += 1;
            if let Some(t) = &mut f.tcp {
                t.broken = true;
            }
            return;
        }
        let base = self.t0_real;
        self.send_hello(i, base);
    }

    /// Two-way UDP flows announce themselves (player tag, start time) in a hello datagram.
    fn send_udp_hello(&mut self, i: usize, base_ns: u64) {
        let f = &mut self.flows[i];
        if f.tcp.is_some() || f.mirror.is_none() || f.peer.is_some() {
            return;
        }
        f.hellos = f.hellos.saturating_add(1);
        f.last_hello_mono = mono_ns();
        let mut b = [0u8; horde_wire::DATAGRAM_HEADER_LEN];
        DatagramHeader { flags: FLAG_HELLO, flow: f.flow.id, seq: f.flow.tag, send_ns: base_ns }.emit(&mut b);
        if f.sock.send(&b).is_err() {
            f.stats.errors += 1;
        }
    }

    fn send_hello(&mut self, i: usize, base_ns: u64) {
        let f = &mut self.flows[i];
        let Some(t) = &mut f.tcp else { return };
        t.base_ns = base_ns;
        let mut hello = [0u8; HELLO_LEN];
        StreamHello { flags: if f.flow.meter == Meter::Rtt { HELLO_ECHO } else { 0 }, flow: f.flow.id, base_ns, tag: f.flow.tag }.emit(&mut hello);
        t.out.extend_from_slice(&hello);
        self.flush_tcp(i);
    }

    /// Waits for the monotonic `deadline`, serving socket events meanwhile.
    fn wait(&mut self, deadline: u64) {
        loop {
            let now = mono_ns();
            if now >= deadline {
                return;
            }
            let gap = deadline - now;
            if self.poll.is_some() {
                let ms = if gap > 2_000_000 { (gap - 1_000_000) / 1_000_000 } else { 0 };
                self.poll_io(Duration::from_millis(ms));
                if ms > 0 {
                    continue;
                }
                if gap > self.opts.spin_ns {
                    clock::sleep_until((deadline - self.opts.spin_ns).min(now + 200_000));
                    continue;
                }
            }
            clock::wait_until(deadline, self.opts.spin_ns);
            return;
        }
    }

    /// Sends every departure of flow `i` that is due at `now_rel` (up to one batch).
    fn send_due(&mut self, i: usize, now_rel: u64) {
        let mut due = [Departure { seq: 0, at_ns: 0, size: 0, clamped: false, class: 0 }; BATCH];
        let mut n = 0;
        let f = &mut self.flows[i];
        while n < BATCH {
            match f.peek() {
                Some(d) if d.at_ns <= now_rel => {
                    due[n] = d;
                    f.pending.pop_front();
                    n += 1;
                }
                _ => break,
            }
        }
        if f.tcp.is_some() {
            self.send_tcp(i, &due[..n]);
        } else {
            self.send_udp(i, &due[..n]);
        }
    }

    fn send_udp(&mut self, i: usize, due: &[Departure]) {
        // A hello can be lost on an impaired link: until the server has answered, repeat it with
        // the departures, at most every 100 ms and 20 times (the server ignores repeats).
        let f = &self.flows[i];
        if f.mirror.is_some() && f.peer.is_none() && f.stats.received == 0 && f.hellos < HELLO_TRIES && mono_ns() - f.last_hello_mono >= HELLO_RETRY_NS {
            let base = self.t0_real;
            self.send_udp_hello(i, base);
        }
        let f = &mut self.flows[i];
        let flags = if f.flow.meter == Meter::Rtt { FLAG_ECHO_REQUEST } else { 0 };
        let real = real_ns();
        let mono = mono_ns();
        for (k, d) in due.iter().enumerate() {
            let slot = &mut self.slots[k];
            if slot.len() < d.size as usize {
                slot.resize(d.size as usize, 0);
            }
            DatagramHeader { flags, flow: f.flow.id, seq: d.seq as u32, send_ns: real }.emit(slot);
        }
        let bufs: Vec<&[u8]> = due.iter().enumerate().map(|(k, d)| &self.slots[k][..d.size as usize]).collect();
        let result = match f.peer {
            Some(peer) => net::send_batch_to(f.sock.as_raw_fd(), &bufs, &vec![peer; bufs.len()]),
            None => net::send_batch(f.sock.as_raw_fd(), &bufs),
        };
        let sent = match result {
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(_) => {
                // Refused (nobody listening) or another hard error: this packet is lost.
                f.stats.errors += 1;
                1
            }
        };
        let sent = sent.min(due.len());
        for d in &due[..sent] {
            self.account(i, d, real, mono);
        }
        // Unsent packets stay first in line; they leave on the next pass, late but not dropped.
        let f = &mut self.flows[i];
        for d in due[sent..].iter().rev() {
            f.pending.push_front(*d);
        }
    }

    fn send_tcp(&mut self, i: usize, due: &[Departure]) {
        let real = real_ns();
        let mono = mono_ns();
        let f = &mut self.flows[i];
        let Some(t) = &mut f.tcp else { return };
        if t.broken {
            f.stats.errors += due.len() as u64;
            return;
        }
        for d in due {
            let start = t.out.len();
            t.out.resize(start + d.size as usize, 0);
            ApduHeader::at(d.size as u16, t.base_ns, real).emit(&mut t.out[start..]);
        }
        for d in due {
            self.account(i, d, real, mono);
        }
        self.flush_tcp(i);
    }

    /// Writes what the kernel takes of flow `i`'s TCP backlog; asks for writability otherwise.
    fn flush_tcp(&mut self, i: usize) {
        let f = &mut self.flows[i];
        let Some(t) = &mut f.tcp else { return };
        while t.sent_upto < t.out.len() && !t.broken {
            match (&f.sock).write(&t.out[t.sent_upto..]) {
                Ok(0) => t.broken = true,
                Ok(k) => t.sent_upto += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => t.broken = true,
            }
        }
        if t.sent_upto == t.out.len() {
            t.out.clear();
            t.sent_upto = 0;
        } else if t.sent_upto > 1 << 20 {
            t.out.drain(..t.sent_upto);
            t.sent_upto = 0;
        }
        t.want_write = !t.out.is_empty() && !t.broken;
    }

    fn account(&mut self, i: usize, d: &Departure, real: u64, mono: u64) {
        let f = &mut self.flows[i];
        let sched_mono = self.t0_mono + d.at_ns;
        self.hist.saturating_record(mono.saturating_sub(sched_mono).max(1));
        if f.stats.packets == 0 {
            f.stats.first_ns = real;
        }
        f.stats.last_ns = real;
        f.stats.packets += 1;
        f.stats.bytes += d.size as u64;
        f.stats.clamped += d.clamped as u64;
        Progress::sent(&self.opts.progress, d.size as u64);
        self.sink.push(Record {
            flow: f.flow.id,
            size: d.size,
            seq: d.seq,
            t_a: self.t0_real + d.at_ns,
            t_b: real,
            tag: f.flow.tag | d.class as u32,
            tos: f.flow.tos.unwrap_or(0),
            ttl: f.flow.ttl.unwrap_or(0),
            kind: RecordKind::Sent,
            flags: if d.clamped { FLAG_CLAMPED } else { 0 },
        });
    }

    fn poll_io(&mut self, timeout: Duration) {
        let Some(poll) = &mut self.poll else { return };
        if poll.poll(&mut self.events, Some(timeout)).is_err() {
            return;
        }
        let ready: Vec<(usize, bool, bool)> = self.events.iter().map(|e| (e.token().0, e.is_readable(), e.is_writable())).collect();
        for (i, readable, writable) in ready {
            if i >= LISTEN_TOKEN {
                self.accept(i - LISTEN_TOKEN);
                continue;
            }
            if i >= UDP_LISTEN_TOKEN {
                self.read_udp_listener(i - UDP_LISTEN_TOKEN);
                continue;
            }
            if writable && self.flows[i].tcp.as_ref().is_some_and(|t| t.want_write) {
                self.flush_tcp(i);
            }
            if readable {
                if self.flows[i].tcp.is_some() {
                    self.read_tcp(i);
                } else {
                    self.read_udp(i);
                }
            }
        }
    }

    /// Server side: takes every pending connection and greets it with our hello.
    fn accept(&mut self, j: usize) {
        loop {
            let (stream, peer) = match self.listeners[j].accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock, or out of descriptors: try again on the next readiness.
                Err(_) => return,
            };
            let fd: std::os::fd::OwnedFd = stream.into();
            let sock = Socket::from(fd);
            let _ = sock.set_nodelay(true);
            let i = self.flows.len();
            let flow = accepted_flow(peer);
            let Some(poll) = &self.poll else { return };
            if poll.registry().register(&mut SourceFd(&sock.as_raw_fd()), Token(i), Interest::READABLE | Interest::WRITABLE).is_err() {
                continue;
            }
            if let Some(p) = &self.opts.progress {
                p.connections.fetch_add(1, Ordering::Relaxed);
            }
            self.flows.push(FlowState {
                stats: new_stats(&flow),
                flow,
                sched: None,
                shift_ns: 0,
                pending: VecDeque::new(),
                sock,
                tcp: Some(new_tcp(true)),
                incoming: Incoming::Traffic,
                mirror: None,
                connect_at: None,
                peer: None,
                mirror_ahead: None,
                hellos: 0,
                last_hello_mono: 0,
            });
            let base = self.t0_real;
            self.send_hello(i, base);
        }
    }

    /// Reads flow `i`'s UDP socket: echoes of our datagrams (round trip), or the peer's own
    /// datagrams in a two-way run.
    fn read_udp(&mut self, i: usize) {
        let Some(rx) = &mut self.rx else { return };
        let f = &mut self.flows[i];
        while let Ok(n) = rx.recv(f.sock.as_raw_fd()) {
            if n == 0 {
                break;
            }
            let now = real_ns();
            for k in 0..n {
                let info = rx.info(k);
                let Ok(h) = DatagramHeader::parse(rx.data(k)) else { continue };
                if h.flow != f.flow.id || h.flags & FLAG_HELLO != 0 {
                    continue;
                }
                let mut rec = net::datagram_record(&h, &info, now, f.flow.tag, RecordKind::Echoed);
                if h.flags & FLAG_ECHO_REPLY != 0 {
                    f.stats.echoes += 1;
                } else if f.mirror.is_some() {
                    rec.kind = RecordKind::Received;
                    rec.tag = f.classify(h.seq as u64, info.len as u32);
                    f.stats.received += 1;
                    Progress::received(&self.opts.progress, info.len as u64);
                } else {
                    continue;
                }
                self.sink.push(rec);
            }
        }
    }

    /// Server side over UDP: a hello from a new address makes a player (its schedule from the
    /// responder, sent back to that address); data from a known player is logged as received.
    fn read_udp_listener(&mut self, j: usize) {
        let fd = self.udp_listeners[j].as_raw_fd();
        loop {
            let Some(rx) = &mut self.rx else { return };
            let n = match rx.recv(fd) {
                Ok(n) if n > 0 => n,
                _ => return,
            };
            let now = real_ns();
            let batch: Vec<(Option<DatagramHeader>, crate::net::RxInfo)> = (0..n).map(|k| (DatagramHeader::parse(rx.data(k)).ok(), rx.info(k))).collect();
            for (h, info) in batch {
                let (Some(h), Some(from)) = (h, info.from) else { continue };
                if h.flags & FLAG_HELLO != 0 {
                    self.udp_hello(j, h, from);
                    continue;
                }
                let Some(&i) = self.udp_peers.get(&from) else { continue };
                let f = &mut self.flows[i];
                let tag = f.classify(h.seq as u64, info.len as u32);
                f.stats.received += 1;
                Progress::received(&self.opts.progress, info.len as u64);
                self.sink.push(net::datagram_record(&h, &info, now, tag, RecordKind::Received));
            }
        }
    }

    fn udp_hello(&mut self, j: usize, h: DatagramHeader, from: SocketAddr) {
        if self.udp_peers.contains_key(&from) {
            return;
        }
        let Some(resp) = self.opts.responder.clone() else { return };
        let hello = StreamHello { flags: 0, flow: h.flow, base_ns: h.send_ns, tag: h.seq };
        let Some(Accepted { source, mirror, tag }) = resp.on_hello(&hello) else { return };
        let Ok(sock) = self.udp_listeners[j].try_clone() else { return };
        let mut flow = Flow::connection(h.flow, format!("player {}", tag >> 8), from, tag);
        flow.transport = Transport::Udp;
        let i = self.flows.len();
        let mut f = FlowState {
            stats: new_stats(&flow),
            flow,
            sched: Some(source),
            shift_ns: h.send_ns as i64 - self.t0_real as i64,
            pending: VecDeque::new(),
            sock,
            tcp: None,
            incoming: Incoming::Traffic,
            mirror,
            connect_at: None,
            peer: Some(from),
            mirror_ahead: None,
            hellos: 0,
            last_hello_mono: 0,
        };
        if let Some(p) = &self.opts.progress {
            p.connections.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(d) = f.peek() {
            self.heap.push(Reverse((d.at_ns, i)));
        }
        self.flows.push(f);
        self.udp_peers.insert(from, i);
    }

    /// Reads what the peer sent on TCP flow `i`: echoes, or the peer's own APDUs.
    fn read_tcp(&mut self, i: usize) {
        loop {
            let n = {
                let f = &mut self.flows[i];
                match (&f.sock).read(&mut self.read_buf) {
                    Ok(0) => return self.close(i),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(_) => return self.close(i),
                }
            };
            let now = real_ns();
            let mut events: Vec<StreamEvent> = Vec::new();
            let f = &mut self.flows[i];
            let Some(t) = &mut f.tcp else { return };
            let r = t.decoder.feed(&self.read_buf[..n], |ev| events.push(ev));
            for ev in events {
                match ev {
                    StreamEvent::Hello(h) => self.on_hello(i, h),
                    StreamEvent::Apdu { seq, len, send_ns } => self.on_apdu(i, seq, len, send_ns, now),
                }
            }
            if r.is_err() {
                return self.close(i);
            }
        }
    }

    fn on_hello(&mut self, i: usize, h: StreamHello) {
        let f = &mut self.flows[i];
        let awaiting = f.tcp.as_ref().is_some_and(|t| t.awaiting_hello);
        if !awaiting {
            return;
        }
        if let Some(t) = &mut f.tcp {
            t.awaiting_hello = false;
        }
        let Some(resp) = self.opts.responder.clone() else {
            return;
        };
        match resp.on_hello(&h) {
            Some(Accepted { source, mirror, tag }) => {
                f.mirror = mirror;
                f.flow.id = h.flow;
                f.flow.tag = tag;
                f.flow.name = format!("player {}", tag >> 8);
                f.stats.id = h.flow;
                f.stats.name = f.flow.name.clone();
                f.sched = Some(source);
                // The client's departures count from its start, ours from our own.
                f.shift_ns = h.base_ns as i64 - self.t0_real as i64;

                if let Some(d) = f.peek() {
                    self.heap.push(Reverse((d.at_ns, i)));
                }
            }
            None => self.close(i),
        }
    }

    fn on_apdu(&mut self, i: usize, seq: u64, len: u16, send_ns: u64, now: u64) {
        let f = &mut self.flows[i];
        let (tag, kind) = match f.incoming {
            Incoming::Echo => {
                f.stats.echoes += 1;
                (f.flow.tag, RecordKind::Echoed)
            }
            Incoming::Traffic => {
                f.stats.received += 1;
                Progress::received(&self.opts.progress, len as u64);
                (f.classify(seq, len as u32), RecordKind::Received)
            }
        };
        // TCP gives no per-APDU TOS/TTL: logged as unknown (255 / 0).
        self.sink.push(Record { flow: f.flow.id, size: len as u32, seq, t_a: send_ns, t_b: now, tag, tos: 255, ttl: 0, kind, flags: 0 });
    }

    /// Stops reading and writing flow `i` (peer closed, or not a Horde stream).
    fn close(&mut self, i: usize) {
        let f = &mut self.flows[i];
        if let Some(t) = &mut f.tcp {
            t.broken = true;
            t.want_write = false;
        }
        if let Some(p) = &self.poll {
            let _ = p.registry().deregister(&mut SourceFd(&f.sock.as_raw_fd()));
        }
    }

    /// After the last departure: drain TCP backlogs and collect late echoes and APDUs.
    fn linger(&mut self, stop: &AtomicBool) {
        if self.poll.is_none() {
            return;
        }
        let end_of_run = self.opts.run_for.map_or(0, |d| self.t0_mono + d.as_nanos() as u64);
        let deadline = mono_ns().max(end_of_run) + self.opts.linger.as_nanos() as u64;
        // In a two-way run the peer may send until the end of the run: stay for all of it.
        let two_way = self.opts.run_for.is_some();
        loop {
            let backlog = self.flows.iter().any(|f| f.tcp.as_ref().is_some_and(|t| t.want_write));
            let rtt = self.flows.iter().any(|f| f.flow.meter == Meter::Rtt && f.stats.echoes < f.stats.packets);
            let now = mono_ns();
            if (!backlog && !rtt && !two_way) || now >= deadline || stop.load(Ordering::Relaxed) {
                return;
            }
            self.poll_io(Duration::from_millis(((deadline - now) / 1_000_000).clamp(1, 50)));
        }
    }
}
