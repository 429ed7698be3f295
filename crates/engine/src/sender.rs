//! The sender: drives any number of flows from a fixed set of worker threads.
//!
//! Each worker owns a share of the flows and a min-heap of their next departures. It sleeps
//! until shortly before the earliest departure, spins for the last stretch, then sends every
//! packet that is due: UDP packets of one flow leave in one `sendmmsg`, TCP APDUs are written
//! to the stream. A worker that falls behind sends what is overdue at once (never drops it) and
//! the lateness of every packet is measured. Sockets are non-blocking; a mio poll waits for TCP
//! writability and for echoes in round-trip mode.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use horde_model::{Departure, Flow, Meter, Schedule, Transport};
use horde_wire::datagram::{FLAG_ECHO_REPLY, FLAG_ECHO_REQUEST};
use horde_wire::log::{FLAG_CLAMPED, FLAG_KERNEL_TS};
use horde_wire::stream::HELLO_ECHO;
use horde_wire::{
    ApduHeader, DatagramHeader, Record, RecordKind, Role, StreamDecoder, StreamEvent, StreamHello,
    HELLO_LEN,
};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde::Serialize;
use socket2::Socket;

use crate::clock::{self, mono_ns, real_ns};
use crate::logger::{LogSink, LogWriter};
use crate::net::{self, RecvBatch, BATCH};
use crate::EngineError;

/// Time given to workers to start before the first departure.
const START_LEAD_NS: u64 = 20_000_000;

#[derive(Debug, Clone)]
pub struct SendOptions {
    /// Data-path worker threads; flows are spread over them.
    pub threads: usize,
    /// Busy-wait before each departure, ns.
    pub spin_ns: u64,
    pub log: Option<PathBuf>,
    /// How long all TCP connects may take.
    pub connect_timeout: Duration,
    /// After the last departure: how long to wait for echoes and for TCP buffers to drain.
    pub linger: Duration,
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions {
            threads: 1,
            spin_ns: clock::DEFAULT_SPIN_NS,
            log: None,
            connect_timeout: Duration::from_secs(10),
            linger: Duration::from_millis(500),
        }
    }
}

/// Lateness of departures (actual − scheduled), microseconds.
#[derive(Debug, Clone, Default, Serialize)]
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

#[derive(Debug, Clone, Serialize)]
pub struct FlowSent {
    pub id: u32,
    pub name: String,
    pub transport: &'static str,
    pub dst: SocketAddr,
    pub packets: u64,
    pub bytes: u64,
    /// Packets whose drawn size was clamped to the transport's limits.
    pub clamped: u64,
    /// Packets the OS refused (e.g. ICMP port unreachable: nobody listening).
    pub errors: u64,
    pub echoes: u64,
    /// Real (epoch) times of the first and last departure, ns.
    pub first_ns: u64,
    pub last_ns: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SendReport {
    pub flows: Vec<FlowSent>,
    pub packets: u64,
    pub bytes: u64,
    pub errors: u64,
    pub echoes: u64,
    /// Seconds from the first to the last departure.
    pub duration_s: f64,
    /// Seconds all TCP connections took to establish (0 without TCP flows).
    pub connect_s: f64,
    pub lateness: Lateness,
    pub interrupted: bool,
    pub log: Option<PathBuf>,
    pub log_records: u64,
    pub threads: usize,
}

struct TcpOut {
    out: Vec<u8>,
    sent_upto: usize,
    base_ns: u64,
    decoder: StreamDecoder,
    want_write: bool,
    broken: bool,
}

struct FlowState {
    flow: Flow,
    sched: Schedule,
    pending: VecDeque<Departure>,
    sock: Socket,
    tcp: Option<TcpOut>,
    stats: FlowSent,
}

impl FlowState {
    /// The next departure, drawn from the schedule if none is pending.
    fn peek(&mut self) -> Option<Departure> {
        if self.pending.is_empty() {
            let d = self.sched.next()?;
            self.pending.push_back(d);
        }
        self.pending.front().copied()
    }
}

/// Opens the sockets of every flow, connects TCP flows, then runs all flows to their end
/// (or until `stop` is set) and reports.
pub fn run(
    flows: Vec<Flow>,
    opts: &SendOptions,
    stop: &AtomicBool,
) -> Result<SendReport, EngineError> {
    if flows.is_empty() {
        return Err(EngineError::Config("no flows to send".into()));
    }
    clock::raise_fd_limit();
    let mut states = Vec::with_capacity(flows.len());
    for flow in flows {
        states.push(open_flow(flow)?);
    }
    let connect_started = mono_ns();
    connect_all(&mut states, opts.connect_timeout, stop)?;
    let connect_s = if states.iter().any(|s| s.tcp.is_some()) {
        (mono_ns() - connect_started) as f64 / 1e9
    } else {
        0.0
    };

    let start_real = real_ns();
    for s in &mut states {
        if let Some(t) = &mut s.tcp {
            // Offsets on the stream count from here; any time before the first APDU works.
            t.base_ns = start_real;
            let mut hello = [0u8; HELLO_LEN];
            StreamHello {
                flags: if s.flow.meter == Meter::Rtt {
                    HELLO_ECHO
                } else {
                    0
                },
                flow: s.flow.id,
                base_ns: start_real,
                tag: s.flow.tag,
            }
            .emit(&mut hello);
            t.out.extend_from_slice(&hello);
        }
    }
    let (writer, sink) = match &opts.log {
        Some(p) => {
            let (w, s) =
                LogWriter::create(p, Role::Sender, start_real).map_err(|e| EngineError::Io {
                    what: format!("creating log {}", p.display()),
                    source: e,
                })?;
            (Some(w), s)
        }
        None => (None, LogSink::disabled()),
    };

    let threads = opts.threads.clamp(1, states.len());
    let mut shares: Vec<Vec<FlowState>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, s) in states.into_iter().enumerate() {
        shares[i % threads].push(s);
    }
    // Workers register their sockets and send their hellos first; the clock starts when all are
    // ready, so set-up time (10,000 sockets take ~100 ms) never shows as lateness.
    let start = StartGate::new(threads);
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
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("sender worker panicked")))
            })
            .collect()
    });
    drop(sink);
    let log_records = match writer {
        Some(w) => w.finish().map_err(|e| EngineError::Io {
            what: "writing the send log".into(),
            source: e,
        })?,
        None => 0,
    };
    let mut flows = Vec::new();
    let mut hist = new_hist();
    let mut interrupted = false;
    for r in results {
        let r = r.map_err(|e| EngineError::Io {
            what: "sending".into(),
            source: e,
        })?;
        hist.add(&r.lateness).ok();
        interrupted |= r.interrupted;
        flows.extend(r.flows);
    }
    flows.sort_by_key(|f| f.id);
    Ok(summarise(
        flows,
        &hist,
        connect_s,
        interrupted,
        opts,
        log_records,
        threads,
    ))
}

fn summarise(
    flows: Vec<FlowSent>,
    hist: &Histogram<u64>,
    connect_s: f64,
    interrupted: bool,
    opts: &SendOptions,
    log_records: u64,
    threads: usize,
) -> SendReport {
    let first = flows
        .iter()
        .filter(|f| f.packets > 0)
        .map(|f| f.first_ns)
        .min()
        .unwrap_or(0);
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
        duration_s: last.saturating_sub(first) as f64 / 1e9,
        connect_s,
        lateness,
        interrupted,
        log: opts.log.clone(),
        log_records,
        threads,
        flows,
    }
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

fn open_flow(flow: Flow) -> Result<FlowState, EngineError> {
    let who = format!("flow {} (`{}`)", flow.id, flow.name);
    let sock = match flow.transport {
        Transport::Udp => net::udp_connected(flow.dst, flow.src, flow.tos, flow.ttl),
        Transport::Tcp => net::tcp_connect(flow.dst, flow.src, flow.tos, flow.ttl, flow.nodelay),
    }
    .map_err(|e| EngineError::Flow {
        flow: who.clone(),
        what: format!("opening a {} socket to {}", flow.transport.name(), flow.dst),
        source: e,
    })?;
    if flow.meter == Meter::Rtt && flow.transport == Transport::Udp {
        net::enable_rx_info(&sock, flow.dst.is_ipv6()).map_err(|e| EngineError::Flow {
            flow: who,
            what: "enabling receive timestamps".into(),
            source: e,
        })?;
    }
    let tcp = (flow.transport == Transport::Tcp).then(|| TcpOut {
        out: Vec::new(),
        sent_upto: 0,
        base_ns: 0,
        decoder: StreamDecoder::new(),
        want_write: false,
        broken: false,
    });
    let stats = FlowSent {
        id: flow.id,
        name: flow.name.clone(),
        transport: flow.transport.name(),
        dst: flow.dst,
        packets: 0,
        bytes: 0,
        clamped: 0,
        errors: 0,
        echoes: 0,
        first_ns: 0,
        last_ns: 0,
    };
    Ok(FlowState {
        sched: Schedule::new(&flow),
        flow,
        pending: VecDeque::new(),
        sock,
        tcp,
        stats,
    })
}

/// Waits until every TCP flow's non-blocking connect has completed.
fn connect_all(
    states: &mut [FlowState],
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<(), EngineError> {
    let mut waiting = 0usize;
    let mut poll = Poll::new().map_err(|e| EngineError::Io {
        what: "creating a poll".into(),
        source: e,
    })?;
    for (i, s) in states.iter().enumerate() {
        if s.tcp.is_some() {
            poll.registry()
                .register(
                    &mut SourceFd(&s.sock.as_raw_fd()),
                    Token(i),
                    Interest::WRITABLE,
                )
                .map_err(|e| EngineError::Io {
                    what: "registering a socket".into(),
                    source: e,
                })?;
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
            let first = states
                .iter()
                .zip(&done)
                .find(|(s, d)| s.tcp.is_some() && !**d)
                .map(|(s, _)| s.flow.dst);
            return Err(EngineError::Config(format!("{waiting} TCP connection(s) not established within {:?} (first: {}); is `horde recv` listening there?", timeout, first.map(|a| a.to_string()).unwrap_or_default())));
        }
        poll.poll(
            &mut events,
            Some(Duration::from_nanos((deadline - now).min(100_000_000))),
        )
        .map_err(|e| EngineError::Io {
            what: "waiting for connections".into(),
            source: e,
        })?;
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
                    poll.registry()
                        .deregister(&mut SourceFd(&s.sock.as_raw_fd()))
                        .ok();
                }
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => {
                    return Err(EngineError::Flow {
                        flow: format!("flow {} (`{}`)", s.flow.id, s.flow.name),
                        what: format!(
                            "connecting to {} (is `horde recv --tcp {}` running?)",
                            s.flow.dst,
                            s.flow.dst.port()
                        ),
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
    t0: std::sync::Mutex<Option<(u64, u64)>>,
}

impl StartGate {
    fn new(n: usize) -> Self {
        StartGate {
            barrier: std::sync::Barrier::new(n),
            t0: std::sync::Mutex::new(None),
        }
    }

    /// Waits for every worker; returns the shared (monotonic, real) start time.
    fn arrive(&self) -> (u64, u64) {
        self.barrier.wait();
        let mut t0 = self.t0.lock().expect("start gate");
        *t0.get_or_insert_with(|| (mono_ns() + START_LEAD_NS, real_ns() + START_LEAD_NS))
    }
}

struct WorkerResult {
    flows: Vec<FlowSent>,
    lateness: Histogram<u64>,
    interrupted: bool,
}

struct Worker {
    flows: Vec<FlowState>,
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
    fn new(flows: Vec<FlowState>, sink: LogSink, opts: SendOptions) -> io::Result<Worker> {
        clock::tighten_timer_slack();
        let needs_poll = flows
            .iter()
            .any(|f| f.tcp.is_some() || f.flow.meter == Meter::Rtt);
        let poll = if needs_poll { Some(Poll::new()?) } else { None };
        if let Some(p) = &poll {
            for (i, f) in flows.iter().enumerate() {
                let mut interest = Interest::WRITABLE;
                if f.flow.meter == Meter::Rtt {
                    interest = Interest::READABLE | Interest::WRITABLE;
                }
                if f.tcp.is_some() || f.flow.meter == Meter::Rtt {
                    p.registry().register(
                        &mut SourceFd(&f.sock.as_raw_fd()),
                        Token(i),
                        interest,
                    )?;
                }
            }
        }
        let has_udp_rtt = flows
            .iter()
            .any(|f| f.tcp.is_none() && f.flow.meter == Meter::Rtt);
        let mut w = Worker {
            heap: BinaryHeap::with_capacity(flows.len()),
            flows,
            poll,
            events: Events::with_capacity(1024),
            sink,
            t0_mono: 0,
            t0_real: 0,
            opts,
            hist: new_hist(),
            slots: (0..BATCH).map(|_| Vec::new()).collect(),
            rx: has_udp_rtt
                .then(|| RecvBatch::new(horde_model::flow::MAX_UDP_PAYLOAD as usize + 1)),
            read_buf: vec![0u8; 64 * 1024],
        };
        for i in 0..w.flows.len() {
            if let Some(d) = w.flows[i].peek() {
                w.heap.push(Reverse((d.at_ns, i)));
            }
            // Opening hello of a TCP stream.
            w.flush_tcp(i);
        }
        Ok(w)
    }

    fn run(mut self, t0_mono: u64, t0_real: u64, stop: &AtomicBool) -> io::Result<WorkerResult> {
        self.t0_mono = t0_mono;
        self.t0_real = t0_real;
        let mut interrupted = false;
        while let Some(&Reverse((at, i))) = self.heap.peek() {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            let now = mono_ns();
            if self.t0_mono + at > now {
                self.wait(self.t0_mono + at);
                continue;
            }
            self.heap.pop();
            self.send_due(i, now - self.t0_mono);
            if let Some(d) = self.flows[i].peek() {
                self.heap.push(Reverse((d.at_ns, i)));
            }
        }
        self.linger(stop);
        self.sink.flush();
        Ok(WorkerResult {
            flows: self.flows.into_iter().map(|f| f.stats).collect(),
            lateness: self.hist,
            interrupted,
        })
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
                let ms = if gap > 2_000_000 {
                    (gap - 1_000_000) / 1_000_000
                } else {
                    0
                };
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
        let mut due = [Departure {
            seq: 0,
            at_ns: 0,
            size: 0,
            clamped: false,
        }; BATCH];
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
        let f = &mut self.flows[i];
        let flags = if f.flow.meter == Meter::Rtt {
            FLAG_ECHO_REQUEST
        } else {
            0
        };
        let real = real_ns();
        let mono = mono_ns();
        for (k, d) in due.iter().enumerate() {
            let slot = &mut self.slots[k];
            if slot.len() < d.size as usize {
                slot.resize(d.size as usize, 0);
            }
            DatagramHeader {
                flags,
                flow: f.flow.id,
                seq: d.seq as u32,
                send_ns: real,
            }
            .emit(slot);
        }
        let bufs: Vec<&[u8]> = due
            .iter()
            .enumerate()
            .map(|(k, d)| &self.slots[k][..d.size as usize])
            .collect();
        let sent = match net::send_batch(f.sock.as_raw_fd(), &bufs) {
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(_) => {
                // Refused (nobody listening) or another hard error: these packets are lost.
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
        self.hist
            .saturating_record(mono.saturating_sub(sched_mono).max(1));
        if f.stats.packets == 0 {
            f.stats.first_ns = real;
        }
        f.stats.last_ns = real;
        f.stats.packets += 1;
        f.stats.bytes += d.size as u64;
        f.stats.clamped += d.clamped as u64;
        self.sink.push(Record {
            flow: f.flow.id,
            size: d.size,
            seq: d.seq,
            t_a: self.t0_real + d.at_ns,
            t_b: real,
            tag: f.flow.tag,
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
        let ready: Vec<(usize, bool, bool)> = self
            .events
            .iter()
            .map(|e| (e.token().0, e.is_readable(), e.is_writable()))
            .collect();
        for (i, readable, writable) in ready {
            if writable && self.flows[i].tcp.as_ref().is_some_and(|t| t.want_write) {
                self.flush_tcp(i);
            }
            if readable {
                self.read_echoes(i);
            }
        }
    }

    fn read_echoes(&mut self, i: usize) {
        if self.flows[i].tcp.is_some() {
            self.read_tcp_echoes(i);
        } else {
            self.read_udp_echoes(i);
        }
    }

    fn read_udp_echoes(&mut self, i: usize) {
        let Some(rx) = &mut self.rx else { return };
        let f = &mut self.flows[i];
        while let Ok(n) = rx.recv(f.sock.as_raw_fd()) {
            if n == 0 {
                break;
            }
            let now = real_ns();
            for k in 0..n {
                let info = rx.info(k);
                let Ok(h) = DatagramHeader::parse(rx.data(k)) else {
                    continue;
                };
                if h.flags & FLAG_ECHO_REPLY == 0 || h.flow != f.flow.id {
                    continue;
                }
                f.stats.echoes += 1;
                let (t_b, flags) = if info.kernel_ns != 0 {
                    (info.kernel_ns, FLAG_KERNEL_TS)
                } else {
                    (now, 0)
                };
                self.sink.push(Record {
                    flow: h.flow,
                    size: info.len as u32,
                    seq: h.seq as u64,
                    t_a: h.send_ns,
                    t_b,
                    tag: f.flow.tag,
                    tos: info.tos,
                    ttl: info.ttl,
                    kind: RecordKind::Echoed,
                    flags,
                });
            }
        }
    }

    fn read_tcp_echoes(&mut self, i: usize) {
        let f = &mut self.flows[i];
        let Some(t) = &mut f.tcp else { return };
        loop {
            match (&f.sock).read(&mut self.read_buf) {
                Ok(0) => return,
                Ok(n) => {
                    let now = real_ns();
                    let (sink, stats, tag) = (&mut self.sink, &mut f.stats, f.flow.tag);
                    let r = t.decoder.feed(&self.read_buf[..n], |ev| {
                        if let StreamEvent::Apdu { seq, len, send_ns } = ev {
                            stats.echoes += 1;
                            sink.push(Record {
                                flow: stats.id,
                                size: len as u32,
                                seq,
                                t_a: send_ns,
                                t_b: now,
                                tag,
                                tos: 255,
                                ttl: 0,
                                kind: RecordKind::Echoed,
                                flags: 0,
                            });
                        }
                    });
                    if r.is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// After the last departure: drain TCP backlogs and collect late echoes.
    fn linger(&mut self, stop: &AtomicBool) {
        if self.poll.is_none() {
            return;
        }
        let deadline = mono_ns() + self.opts.linger.as_nanos() as u64;
        loop {
            let backlog = self
                .flows
                .iter()
                .any(|f| f.tcp.as_ref().is_some_and(|t| t.want_write));
            let rtt = self
                .flows
                .iter()
                .any(|f| f.flow.meter == Meter::Rtt && f.stats.echoes < f.stats.packets);
            let now = mono_ns();
            if (!backlog && !rtt) || now >= deadline || stop.load(Ordering::Relaxed) {
                return;
            }
            self.poll_io(Duration::from_millis(
                ((deadline - now) / 1_000_000).clamp(1, 50),
            ));
        }
    }
}
