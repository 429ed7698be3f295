//! The sender's contract: its options, the flows it is given, the counters it shares while
//! running and the report it returns (used by the set-up and the workers too).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use horde_model::{Departure, Flow};
use horde_proto::RunKey;
use serde::{Deserialize, Serialize};

use horde_proto::conn::Responder;
use horde_proto::Source;

use crate::clock;

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
    /// Real time (ns since the epoch) departure times count from, once the clock started (0
    /// before): schedule time now is real time minus this.
    pub t0_real_ns: AtomicU64,
    /// One-way delays of what arrived (live percentiles; the report's come from the logs).
    pub delay: crate::live::DelayHist,
    /// Departures and arrivals per class (a scenario's behaviour state; 0 for plain flows).
    pub by_class: crate::live::ClassCounts,
    /// Departures and arrivals per second of departure (live loss).
    pub seconds: crate::live::SecondCounts,
}

impl Progress {
    pub(crate) fn sent(p: &Option<Arc<Progress>>, len: u64, class: u8, real_ns: u64) {
        if let Some(p) = p {
            p.seconds.sent(real_ns);
            p.sent_packets.fetch_add(1, Ordering::Relaxed);
            p.sent_bytes.fetch_add(len, Ordering::Relaxed);
            p.by_class.sent(class);
        }
    }

    pub(crate) fn late(p: &Option<Arc<Progress>>) {
        if let Some(p) = p {
            p.late_1ms.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An arrival of `len` bytes sent at `sent_ns` and received at `arrived_ns` (real time),
    /// tagged `tag` (its class in the low byte).
    pub(crate) fn received(p: &Option<Arc<Progress>>, len: u64, sent_ns: u64, arrived_ns: u64, tag: u32) {
        if let Some(p) = p {
            p.recv_packets.fetch_add(1, Ordering::Relaxed);
            p.recv_bytes.fetch_add(len, Ordering::Relaxed);
            p.delay.record(sent_ns, arrived_ns);
            p.seconds.arrived(sent_ns, arrived_ns);
            p.by_class.received((tag & 0xFF) as u8);
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
    /// How long the busy-wait floor is measured before the run (0: not measured).
    pub floor: Duration,
    /// Each client flow to a Horde receiver ends with an end message carrying its counts
    /// (`horde_wire::signal`; UDP flows that greet, TCP flows): `horde send` does; a scenario's
    /// players do not (their server side keeps its own counts).
    pub end_messages: bool,
    /// A live log server's stream (`--log-server`): the run's log goes there as it is written.
    pub log_tap: crate::logger::TapSlot,
    /// Flows added while the run goes (players a raised target plans beyond the start's).
    pub joining: Option<Arc<Joining>>,
    /// The run's common start on this machine's real clock (ns): the schedule's zero is this
    /// instant when set-up finishes before it (sockets are opened ahead), so that every part of
    /// a run counts from one instant; set-up that overruns it starts the schedule when ready.
    pub start_at_real_ns: Option<u64>,
    /// Which flows' UDP departures that are due together (bulk, or a paced burst within the
    /// pacing tolerance) and of one size leave as GSO super-datagrams (`UDP_SEGMENT`): one
    /// system call, cut into the same datagrams by the kernel or the interface. Each is still
    /// its own record, with the one departure instant they share. Otherwise one `sendmmsg`
    /// entry per datagram. A socket whose interface refuses GSO falls back by itself.
    /// Default `auto`: bulk flows only ([`horde_model::gso`] says why).
    pub gso: horde_model::gso::Gso,
    /// Flows whose laws a command changes while they run (`send --commands`: `flow`): each
    /// plain flow's schedule registers its [`horde_model::schedule::Tuner`] here by flow id.
    pub steer: Option<Arc<FlowSteer>>,
}

/// The running flows' tuners, by flow id (see [`SendOptions::steer`]).
#[derive(Debug, Default)]
pub struct FlowSteer {
    tuners: std::sync::Mutex<std::collections::HashMap<u32, horde_model::schedule::Tuner>>,
}

impl FlowSteer {
    /// A tuner for flow `id`'s schedule (registered; a second flow of that id shares it).
    pub fn register(&self, id: u32) -> horde_model::schedule::Tuner {
        self.tuners.lock().unwrap_or_else(|e| e.into_inner()).entry(id).or_default().clone()
    }

    /// Hands `change` to flow `id`'s schedule; false when no running flow has that id.
    pub fn retune(&self, id: u32, change: horde_model::schedule::Retune) -> bool {
        let map = self.tuners.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = map.get(&id) else { return false };
        *t.lock().unwrap_or_else(|e| e.into_inner()) = Some(change);
        true
    }

    /// The ids of the flows that take changes.
    pub fn ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.tuners.lock().unwrap_or_else(|e| e.into_inner()).keys().copied().collect();
        v.sort_unstable();
        v
    }
}

/// Flows handed to a running sender: each worker takes a few at each look (every 20 ms), opens
/// their sockets and starts them when their `connect_at_ns` comes (UDP greets then, TCP
/// connects then). A flow whose socket cannot be opened counts as an error of the run.
#[derive(Default)]
pub struct Joining {
    jobs: std::sync::Mutex<std::collections::VecDeque<Job>>,
    waiting: std::sync::atomic::AtomicBool,
}

impl Joining {
    /// Flows taken per worker per look: a large raise spreads over the workers.
    const PER_LOOK: usize = 256;

    pub fn add(&self, jobs: impl IntoIterator<Item = Job>) {
        let mut q = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        q.extend(jobs);
        self.waiting.store(!q.is_empty(), Ordering::Release);
    }

    pub(crate) fn take(&self) -> Vec<Job> {
        if !self.waiting.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut q = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let n = q.len().min(Self::PER_LOOK);
        let out = q.drain(..n).collect();
        self.waiting.store(!q.is_empty(), Ordering::Release);
        out
    }
}

/// The busy-wait floor measured before every run unless told otherwise: 200 ms.
pub const DEFAULT_FLOOR: Duration = Duration::from_millis(200);

/// Steal above this share marks a second as one where the host took the time: 1 %.
pub const STEAL_SECOND: f64 = 0.01;

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
            floor: DEFAULT_FLOOR,
            end_messages: false,
            log_tap: Default::default(),
            joining: None,
            start_at_real_ns: None,
            gso: horde_model::gso::Gso::Auto,
            steer: None,
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
    /// What the receiver said arrived of this flow when it acknowledged the flow's end message
    /// (UDP flows of `horde send`); absent if no acknowledgement came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<ReceiverSaid>,
}

/// A receiver's count of one flow's arrivals, from its end acknowledgement (or its error
/// message, when it stopped first).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReceiverSaid {
    pub packets: u64,
    pub bytes: u64,
    /// The receiver stopped while the flow was running and said so (a signed error message):
    /// the flow ended then, and `packets`/`bytes` are what had arrived by that time.
    #[serde(default)]
    pub stopped: bool,
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
    /// Data datagrams from addresses or flows not admitted (not logged), including those held
    /// 250 ms for a hello that did not come.
    pub unadmitted: u64,
    /// Data datagrams that came before their player's admitting hello (they overtook it on the
    /// path) and were counted and logged once it came.
    #[serde(default)]
    pub admitted_late: u64,
    /// Connections accepted and closed at once because descriptors ran out.
    pub shed: u64,
    /// UDP players whose stream stopped because they stopped answering consent probes, and
    /// ICMP flows whose target stopped answering echo requests.
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
        self.admitted_late += o.admitted_late;
        self.shed += o.shed;
        self.consent_expired += o.consent_expired;
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The log's live stream to a log server (`--log-server`), if there was one.
    #[serde(default)]
    pub log_server: Option<crate::logger::TapReport>,
    pub threads: usize,
    /// Real time (ns since the epoch) of the run's start: departure times count from here.
    pub t0_real_ns: u64,
    /// Real time at which the workers stopped (end of the run, or the interruption).
    #[serde(default)]
    pub end_real_ns: u64,
    #[serde(default)]
    pub refusals: Refusals,
    /// What the host took from the run: steal, the busy-wait floor, and whether the lateness
    /// above is Horde's or the host's.
    #[serde(default)]
    pub host: HostReport,
    /// TCP runs: per second of the run, the send queues of every socket together, bytes [not
    /// yet acknowledged, of them not yet sent] — where a backlog the path does not take waits
    /// in this sender before the network (beside an emulated link's own queue, it says where
    /// one-way delay comes from). Empty for UDP and ICMP runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tcp_send_queue: Vec<[u64; 2]>,
}

/// The host's share in a run's lateness (horde-sys `host`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostReport {
    /// Steal share (0..=1) of every whole second of the run, from `/proc/stat`; empty where it
    /// cannot be read.
    pub steal_seconds: Vec<f64>,
    pub steal_mean: Option<f64>,
    pub steal_max: Option<f64>,
    /// A busy-waiting pacer at the run's rate, just before the run (`send --floor`); None
    /// when not measured.
    pub floor: Option<horde_sys::host::Floor>,
    /// The p99 lateness the host allows: max(20 µs, 1.5 × the floor's p99).
    pub allowed_p99_us: Option<f64>,
    /// Whether the run's p99 lateness is within what the host allows (None without a floor).
    pub within_floor: Option<bool>,
    /// Departures more than 1 ms late in seconds with steal ≥ 1 %, and in all seconds.
    pub late_in_steal: u64,
    pub late_total: u64,
    /// Per second of the run (by scheduled time): departures more than 1 ms late, and all
    /// paced departures.
    #[serde(default)]
    pub late_seconds: Vec<u64>,
    #[serde(default)]
    pub sent_seconds: Vec<u64>,
}

/// A flow to run: its validated spec, and optionally a source replacing its plain schedule.
pub struct Job {
    pub flow: Flow,
    pub source: Option<Source>,
    /// The peer's schedule on this connection, regenerated (two-way scenarios): the k-th APDU
    /// that arrives is the peer's k-th departure, which names its class (category) exactly.
    pub mirror: Option<Source>,
    /// Connect only this long after the start (a player joining late), ns. TCP only, except for
    /// a flow added while the run goes ([`Joining`]): UDP then greets at that time.
    pub connect_at_ns: Option<u64>,
    /// Open the socket inside this network namespace (a player on an emulated host). The
    /// socket stays there; the thread returns to its own namespace.
    pub netns: Option<Arc<std::fs::File>>,
    /// A player under a roster: its departures (and its peer's) leave only while it is online.
    pub presence: Option<horde_model::roster::Presence>,
}

pub(crate) fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// The empty departure, to fill batch arrays.
pub(crate) const NO_DEPARTURE: Departure = Departure { seq: 0, at_ns: 0, size: 0, clamped: false, class: 0 };
