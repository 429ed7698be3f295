//! The sender: drives any number of flows from a fixed set of worker threads, and serves the
//! server side of two-way scenarios with the same workers.
//!
//! Each worker owns a share of the flows and a min-heap of their next departures. It sleeps
//! until shortly before the earliest departure, spins for the last stretch, then sends every
//! packet that is due: UDP packets of one flow leave in one `sendmmsg`, TCP APDUs are written
//! to the stream. A worker that falls behind sends what is overdue at once (never drops it)
//! until the flow's duration ends; the lateness of every packet is measured.
//!
//! What a flow sends, how its bytes are framed and what arriving bytes mean is decided by its
//! [`horde_proto::Conn`] (I/O-free); the worker ([`crate::worker`]) is the I/O shell around it.
//! Set-up (sockets, connects, address validation of UDP flows, the common start) is in
//! [`crate::setup`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use horde_model::{Departure, Flow, Transport};
use horde_proto::RunKey;
use serde::{Deserialize, Serialize};

pub use horde_proto::conn::{Accepted, Responder};
pub use horde_proto::Source;

use crate::clock::{self, real_ns};
use crate::logger::{LogSink, LogWriter};
use crate::setup::{self, StartGate};
use crate::worker::{Share, Worker, WorkerResult};
use crate::EngineError;

/// Time given to workers between the start gate and the first departure, plus a share per TCP
/// flow for writing its hello (measured: 10,000 hellos take ~60 ms on this 2-core VM).
const START_LEAD_NS: u64 = 20_000_000;
const START_LEAD_PER_TCP_NS: u64 = 20_000;

/// Counters shared with a progress display; updated with relaxed atomics.
#[derive(Debug, Default)]
pub struct Progress {
    pub sent_packets: AtomicU64,
    pub sent_bytes: AtomicU64,
    pub recv_packets: AtomicU64,
    pub recv_bytes: AtomicU64,
    pub connections: AtomicU64,
    /// Departures more than 1 ms after their scheduled time.
    pub late_1ms: AtomicU64,
}

impl Progress {
    pub(crate) fn sent(p: &Option<Arc<Progress>>, len: u64) {
        if let Some(p) = p {
            p.sent_packets.fetch_add(1, Ordering::Relaxed);
            p.sent_bytes.fetch_add(len, Ordering::Relaxed);
        }
    }

    pub(crate) fn late(p: &Option<Arc<Progress>>) {
        if let Some(p) = p {
            p.late_1ms.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn received(p: &Option<Arc<Progress>>, len: u64) {
        if let Some(p) = p {
            p.recv_packets.fetch_add(1, Ordering::Relaxed);
            p.recv_bytes.fetch_add(len, Ordering::Relaxed);
        }
    }
}

/// Limits of a server side (resources an unauthenticated peer can hold).
#[derive(Debug, Clone)]
pub struct ServeLimits {
    /// Players (connections or UDP peers) granted at most: the scenario's players.
    pub max_players: usize,
    /// TCP connections waiting for their hello at most; past it the oldest is closed.
    pub max_pending: usize,
    /// How long a TCP connection may take to send its hello.
    pub hello_timeout: Duration,
}

impl Default for ServeLimits {
    /// 65,536 players; 1,024 pending connections (a burst of that many connects completes its
    /// hellos within milliseconds on loopback); 5 s for a hello (a connect across a 1 s delay
    /// link with a retransmitted SYN still makes it).
    fn default() -> Self {
        ServeLimits { max_players: 1 << 16, max_pending: 1024, hello_timeout: Duration::from_secs(5) }
    }
}

#[derive(Clone)]
pub struct SendOptions {
    /// Data-path worker threads; flows are spread over them.
    pub threads: usize,
    /// Busy-wait before each departure, ns.
    pub spin_ns: u64,
    pub log: Option<PathBuf>,
    /// How long all TCP connects and UDP address validations may take.
    pub connect_timeout: Duration,
    /// After the last departure: how long to wait for echoes, incoming traffic and TCP buffers.
    pub linger: Duration,
    pub responder: Option<Arc<dyn Responder>>,
    pub progress: Option<Arc<Progress>>,
    /// Keep connections open until this long after the start, whatever the own departures do
    /// (the peer may still be sending); then linger. No departure leaves after it.
    pub run_for: Option<Duration>,
    /// The run key: hellos carry a MAC under it; a receiver or server side with a key drops
    /// hellos without it.
    pub key: RunKey,
    /// Validate each UDP flow's address with the receiver before sending (a Horde receiver
    /// drops traffic of flows that did not). Off only to send to something that is not Horde.
    pub greet: bool,
    pub serve_limits: ServeLimits,
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
            key: RunKey::OPEN,
            greet: true,
            serve_limits: ServeLimits::default(),
        }
    }
}

/// Lateness of departures (actual − scheduled), microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
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

/// Round-trip times of a flow's echoes (`--meter rtt`), µs. Percentiles and jitter: `horde
/// decode` on the sender's log.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct Rtt {
    pub min_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowSent {
    pub id: u32,
    pub name: String,
    pub transport: String,
    pub dst: SocketAddr,
    /// Sent as fast as the path allowed (no schedule: no lateness).
    #[serde(default)]
    pub bulk: bool,
    /// The receiver sent bulk back (`received` counts it); `packets` are keep-alives.
    #[serde(default)]
    pub reverse: bool,
    pub packets: u64,
    pub bytes: u64,
    /// Packets whose drawn size was clamped to the transport's limits.
    pub clamped: u64,
    /// Packets the OS refused (e.g. ICMP port unreachable: nobody listening).
    pub errors: u64,
    pub echoes: u64,
    /// Round trips of the echoes, when any came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<Rtt>,
    /// APDUs received from the peer on this connection (two-way scenarios, reverse flows).
    pub received: u64,
    /// Their bytes, and real times (ns) of the first and last.
    #[serde(default)]
    pub received_bytes: u64,
    #[serde(default)]
    pub received_first_ns: u64,
    #[serde(default)]
    pub received_last_ns: u64,
    /// Received APDUs whose size differed from the peer's regenerated schedule (must be 0).
    pub mismatched: u64,
    /// Departures still due when the flow's duration ended: the sender fell behind and did
    /// not send them.
    #[serde(default)]
    pub unsent: u64,
    /// Real (epoch) times of the first and last departure, ns.
    pub first_ns: u64,
    pub last_ns: u64,
}

/// What the server side's gates and listeners turned away (all zero for a client).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Refusals {
    /// UDP hellos answered with a challenge (the source was not validated yet).
    pub challenges: u64,
    /// Bytes of those challenges (each smaller than the hello that caused it).
    pub challenge_bytes: u64,
    /// Hellos whose MAC was not made with the run key (no answer).
    pub bad_mac: u64,
    /// Hellos dropped for being malformed, or over the challenge budget.
    pub dropped_hellos: u64,
    /// Players refused: unknown, already playing, or over the limit.
    pub refused: u64,
    /// TCP connections closed before a valid hello (timeout, garbage, pending limit).
    pub closed_before_hello: u64,
    /// Data datagrams from addresses or flows not admitted (not logged).
    pub unadmitted: u64,
    /// Connections accepted and closed at once because descriptors ran out.
    pub shed: u64,
    /// UDP players whose stream stopped because they stopped answering consent probes.
    #[serde(default)]
    pub consent_expired: u64,
}

impl Refusals {
    pub fn add(&mut self, o: &Refusals) {
        self.challenges += o.challenges;
        self.challenge_bytes += o.challenge_bytes;
        self.bad_mac += o.bad_mac;
        self.dropped_hellos += o.dropped_hellos;
        self.refused += o.refused;
        self.closed_before_hello += o.closed_before_hello;
        self.unadmitted += o.unadmitted;
        self.shed += o.shed;
        self.consent_expired += o.consent_expired;
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SendReport {
    pub flows: Vec<FlowSent>,
    pub packets: u64,
    pub bytes: u64,
    pub errors: u64,
    pub echoes: u64,
    pub received: u64,
    /// Received APDUs that did not match the peer's regenerated schedule (must be 0).
    pub mismatched: u64,
    /// Departures not sent because their flow's duration ended first (the sender fell behind).
    #[serde(default)]
    pub unsent: u64,
    /// Seconds from the first to the last departure.
    pub duration_s: f64,
    /// Seconds all TCP connections and UDP validations took (0 without them).
    pub connect_s: f64,
    pub lateness: Lateness,
    pub interrupted: bool,
    pub log: Option<PathBuf>,
    pub log_records: u64,
    pub threads: usize,
    /// Real time (ns since the epoch) of the run's start: departure times count from here.
    pub t0_real_ns: u64,
    /// Real time at which the workers stopped (end of the run, or the interruption).
    #[serde(default)]
    pub end_real_ns: u64,
    #[serde(default)]
    pub refusals: Refusals,
}

/// A flow to run: its validated spec, and optionally a source replacing its plain schedule.
pub struct Job {
    pub flow: Flow,
    pub source: Option<Source>,
    /// The peer's schedule on this connection, regenerated (two-way scenarios): the k-th APDU
    /// that arrives is the peer's k-th departure, which names its class (category) exactly.
    pub mirror: Option<Source>,
    /// Connect only this long after the start (a player joining late), ns. TCP only.
    pub connect_at_ns: Option<u64>,
    /// Open the socket inside this network namespace (a player on an emulated host). The
    /// socket stays there; the thread returns to its own namespace.
    pub netns: Option<Arc<std::fs::File>>,
}

/// Opens the sockets of every flow, connects TCP flows and validates UDP ones, then runs all
/// flows to their end (or until `stop` is set) and reports.
pub fn run(flows: Vec<Flow>, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, EngineError> {
    run_jobs(flows.into_iter().map(|flow| Job { flow, source: None, mirror: None, connect_at_ns: None, netns: None }).collect(), opts, stop)
}

/// [`run`] with explicit sources (e.g. players' behaviour-driven schedules).
pub fn run_jobs(jobs: Vec<Job>, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, EngineError> {
    if jobs.is_empty() {
        return Err(EngineError::Config("no flows to send".into()));
    }
    setup::check_fd_limit(jobs.len())?;
    let mut slots = setup::open_all(jobs, opts)?;
    let connect_started = clock::mono_ns();
    setup::connect_all(&mut slots, opts.connect_timeout, stop)?;
    setup::validate_all(&mut slots, opts.connect_timeout, stop)?;
    let tcp_flows = slots.iter().filter(|s| s.conn.transport() == Transport::Tcp).count() as u64;
    let greeted = slots.iter().any(|s| s.conn.greeter().is_some());
    let connect_s = if tcp_flows > 0 || greeted { (clock::mono_ns() - connect_started) as f64 / 1e9 } else { 0.0 };
    let threads = opts.threads.clamp(1, slots.len());
    let mut shares: Vec<Share> = (0..threads).map(|_| Share::default()).collect();
    for (i, s) in slots.into_iter().enumerate() {
        shares[i % threads].slots.push(s);
    }
    let lead = START_LEAD_NS + START_LEAD_PER_TCP_NS * tcp_flows / threads as u64;
    run_workers(shares, opts, stop, lead, connect_s)
}

/// The server side of a two-way scenario: listens on `listen`, and for every connection (or UDP
/// peer) whose hello passes validation and the responder, sends that player's departures and
/// logs what arrives. Runs until `stop` is set. `ready` gets the bound addresses first.
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
    let (shares, bound) = setup::listen_all(listen, transport, threads, opts)?;
    ready(&bound);
    run_workers(shares, opts, stop, START_LEAD_NS, 0.0)
}

fn run_workers(shares: Vec<Share>, opts: &SendOptions, stop: &AtomicBool, lead_ns: u64, connect_s: f64) -> Result<SendReport, EngineError> {
    let threads = shares.len();
    let (writer, sink) = match &opts.log {
        Some(p) => {
            let (w, s) = LogWriter::create(p, horde_wire::Role::Sender, real_ns())
                .map_err(|e| EngineError::Io { what: format!("creating log {}", p.display()), err: e })?;
            (Some(w), s)
        }
        None => (None, LogSink::disabled()),
    };
    // Workers register their sockets first; the clock starts when all are ready, so set-up
    // time (10,000 sockets take ~100 ms) never shows as lateness.
    let start = StartGate::new(threads, lead_ns);
    let results = std::thread::scope(|scope| -> Result<Vec<io_result::WorkerOutcome>, EngineError> {
        let mut handles = Vec::with_capacity(threads);
        for (i, share) in shares.into_iter().enumerate() {
            let sink = sink.clone();
            let opts = opts.clone();
            let start = &start;
            let spawned = std::thread::Builder::new().name(format!("horde-send-{i}")).spawn_scoped(scope, move || {
                let w = Worker::new(share, sink, opts);
                // Arrive even when set-up failed, so the others are not left waiting.
                let Some((t0_mono, t0_real)) = start.arrive(w.is_ok()) else {
                    return w.map(|_| None);
                };
                w?.run(t0_mono, t0_real, stop).map(Some)
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The workers already started must not wait at the gate for this one.
                    start.abort();
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(EngineError::Io { what: format!("starting sender thread {i}"), err: e });
                }
            }
        }
        Ok(handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(std::io::Error::other("sender worker panicked")))).collect())
    });
    drop(sink);
    let log_records = match writer {
        Some(w) => w.finish().map_err(|e| EngineError::Io { what: "writing the send log".into(), err: e })?,
        None => 0,
    };
    let results = results?;
    let mut flows = Vec::new();
    let mut hist = new_hist();
    let mut interrupted = false;
    let mut refusals = Refusals::default();
    let mut end_real_ns = 0;
    for r in results {
        let r = r.map_err(|e| EngineError::Io { what: "sending".into(), err: e })?;
        let Some(r) = r else {
            return Err(EngineError::Config("a sender worker could not start (see the error above)".into()));
        };
        hist.add(&r.lateness).ok();
        interrupted |= r.interrupted;
        refusals.add(&r.refusals);
        end_real_ns = end_real_ns.max(r.end_real_ns);
        flows.extend(r.flows);
    }
    flows.sort_by_key(|f| f.id);
    let t0 = start.t0().map_or(0, |t| t.1);
    let mut report = summarise(flows, &hist, connect_s, interrupted, opts, log_records, threads, t0);
    report.end_real_ns = end_real_ns;
    report.refusals = refusals;
    Ok(report)
}

/// Results of the worker threads.
mod io_result {
    pub type WorkerOutcome = std::io::Result<Option<super::WorkerResult>>;
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
    let us = |q: f64| hist.value_at_quantile(q).min(hist.max()) as f64 / 1e3;
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
        unsent: flows.iter().map(|f| f.unsent).sum(),
        duration_s: last.saturating_sub(first) as f64 / 1e9,
        connect_s,
        lateness,
        interrupted,
        log: opts.log.clone(),
        log_records,
        threads,
        t0_real_ns,
        end_real_ns: 0,
        refusals: Refusals::default(),
        flows,
    }
}

pub(crate) fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// The empty departure, to fill batch arrays.
pub(crate) const NO_DEPARTURE: Departure = Departure { seq: 0, at_ns: 0, size: 0, clamped: false, class: 0 };
