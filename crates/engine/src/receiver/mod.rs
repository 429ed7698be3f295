//! The receiver: listens on any set of UDP and TCP addresses, timestamps every arrival
//! (kernel SO_TIMESTAMPNS for UDP), logs it, and echoes it when the sender asked for round-trip
//! measurement. Anything that is not a Horde packet is counted and dropped; it never stops the
//! receiver.
//!
//! It gives nothing to an address that has not proven it wants it: a UDP flow is logged and
//! echoed only once its sender passed address validation ([`horde_proto::Gate`]); before that,
//! a hello gets at most a challenge smaller than itself. Resources are bounded: TCP connections
//! have a cap, a deadline for their hello and optionally an idle timeout; an echo backlog has a
//! cap, past which the receiver stops reading that connection, and closes it if it stays full.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use horde_proto::conn::{Expiry, ECHO_LIMIT, REVERSE_CONSENT_NS};
use horde_proto::gate::{Gate, GateConfig};
use horde_proto::{Accepted, Conn, Ctx};
use horde_wire::control::Status;
use horde_wire::datagram::FLAG_REVERSE_DATA;
use horde_wire::{DatagramHeader, Record, RecordKind, Role};
use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use socket2::Socket;

use crate::accept::{accept_or_shed, Accepted as Incoming};
use crate::clock::{self, mono_ns, real_ns};
use crate::logger::{LogSink, LogWriter};
use crate::net::{self, RecvBatch};
use crate::EngineError;

mod icmp;
mod ids;
mod report;
mod signal;
mod spawn;
mod udp;
pub use report::{FlowReceived, RecvOptions, RecvRefusals, RecvReport};
pub use spawn::{spawn, Running};

/// Largest datagram read whole; longer ones are truncated and counted as garbage.
const MAX_DATAGRAM: usize = 65_536;
const LISTENER_BASE: usize = 1 << 20;
const CONN_BASE: usize = 1 << 21;
/// The `--icmp` socket's token (below the listeners').
const ICMP_TOKEN: usize = LISTENER_BASE - 1;
/// Batches drained from one UDP socket before serving other sockets.
const FAIRNESS_BATCHES: usize = 64;
/// The most bytes all connections' echo backlogs may hold together: 64 MiB. Past it, no
/// connection with a backlog reads more until the peers take some (so 10,000 peers that never
/// read hold at most this, not 10,000 × [`ECHO_LIMIT`]); stalled ones are closed as usual.
const ECHO_BUDGET: usize = 64 << 20;
/// How long a TCP connection may take to send its hello: 5 s (as a server side's).
const HELLO_TIMEOUT_NS: u64 = 5_000_000_000;
/// How often deadlines are looked at.
const SWEEP_NS: u64 = 100_000_000;
/// A reverse TCP flow gets APDUs queued until this many bytes wait (one large write per pump).
const REVERSE_TCP_BACKLOG: usize = 256 * 1024;
/// An admitted UDP flow unheard of for this long may make room for a new one when the gate is
/// full: 60 s.
const UDP_FLOW_IDLE_S: u64 = 60;

/// One TCP connection of the receiver.
struct SinkConn {
    conn: Conn,
    sock: TcpStream,
    /// The connection's source (its flow is keyed by it and its flow id).
    peer: SocketAddr,
}

/// A UDP reverse flow: bulk goes back to its validated address while its keep-alives come.
struct UdpReverse {
    /// The listening socket it arrived on (and leaves from).
    sock: usize,
    size: usize,
    seq: u32,
    /// Monotonic time of the last keep-alive, ns.
    heard: u64,
}

/// An admitted UDP flow.
struct UdpFlow {
    /// Its hello's run tag: a sender's run reusing the address and flow id is another flow.
    tag: u32,
    /// The id it is logged and reported under ([`ids::FlowIds`]).
    id: u32,
    /// Its signed hello asked for echoes / for reverse bulk (and the receiver gives it).
    echo: bool,
    reverse: bool,
    last_s: u64,
    /// What arrived of this flow since its hello (the report's per-id counts add up every
    /// sender that used the id): what its end acknowledgement says.
    packets: u64,
    bytes: u64,
    /// Its sender's end message was logged; the first valid copy, how many copies were taken
    /// (each owed one acknowledgement) and how many were acknowledged.
    ended: bool,
    end: Option<horde_wire::signal::FlowEnd>,
    copies: u8,
    acks: u8,
    /// The acknowledgement waits until everything the end message counts has arrived, or
    /// until this instant (monotonic ns), whichever comes first ([`signal::END_ACK_WAIT_NS`]).
    ack_due: Option<u64>,
    /// The listener (index into `udp`) it came in on.
    sock: usize,
}

impl UdpFlow {
    fn new(tag: u32, id: u32, echo: bool, reverse: bool, last_s: u64, sock: usize) -> UdpFlow {
        UdpFlow { tag, id, echo, reverse, last_s, packets: 0, bytes: 0, ended: false, end: None, copies: 0, acks: 0, ack_due: None, sock }
    }
}

/// Binds every listener, calls `ready` with the bound addresses (port 0 becomes a real port),
/// then receives until a stop condition or `stop` is set.
pub fn run(opts: &RecvOptions, stop: &AtomicBool, ready: impl FnOnce(&[SocketAddr])) -> Result<RecvReport, EngineError> {
    if opts.udp.is_empty() && opts.tcp.is_empty() && opts.icmp.is_none() {
        return Err(EngineError::Config("nothing to listen on; give --udp and/or --tcp ports (or --icmp)".into()));
    }
    clock::raise_fd_limit();
    let bind_err = |proto: &str, a: &SocketAddr, e: io::Error| {
        let hint = if e.kind() == io::ErrorKind::AddrInUse { " (the port is in use: stop the other program or pick another port)" } else { "" };
        EngineError::Io { what: format!("binding {proto} {a}{hint}"), err: e }
    };
    let secret = crate::random_secret().map_err(|e| EngineError::Io { what: "drawing a secret for address-validation cookies".into(), err: e })?;
    let mut udp: Vec<(Socket, Gate)> = Vec::new();
    for a in &opts.udp {
        let s = net::udp_listener(*a).map_err(|e| bind_err("udp", a, e))?;
        if opts.gro {
            // an older kernel without it delivers every datagram on its own, as before
            let _ = net::enable_gro(&s);
        }
        let mut gate = Gate::new(GateConfig::receiver(opts.key.clone()).about(about(opts)), secret);
        gate.set_wall_offset(clock::wall_offset_ns());
        udp.push((s, gate));
    }
    let mut listeners: Vec<TcpListener> = Vec::new();
    for a in &opts.tcp {
        let s = net::tcp_listener(*a).map_err(|e| bind_err("tcp", a, e))?;
        listeners.push(TcpListener::from_std(s.into()));
    }
    let icmp = match opts.icmp {
        Some(bind) => Some(
            crate::icmp::icmp_listener(bind).map_err(|e| EngineError::Io { what: format!("opening a raw ICMP socket{}", crate::icmp::explain(&e)), err: e })?,
        ),
        None => None,
    };
    let mut bound = Vec::new();
    let mut names = Vec::new();
    if let Some(bind) = opts.icmp {
        names.push(format!("icmp {}", bind.map_or("(every address)".to_string(), |a| a.to_string())));
    }
    for (s, _) in &udp {
        let a = s.local_addr().ok().and_then(|a| a.as_socket()).ok_or_else(|| EngineError::Config("cannot read a bound UDP address".into()))?;
        bound.push(a);
        names.push(format!("udp {a}"));
    }
    for l in &listeners {
        let a = l.local_addr().map_err(|e| EngineError::Io { what: "reading a bound TCP address".into(), err: e })?;
        bound.push(a);
        names.push(format!("tcp {a}"));
    }
    let start_real = real_ns();
    let tap = opts.log_tap.take();
    let (writer, sink) = if opts.log.is_some() || tap.is_some() {
        let p = opts.log.as_deref();
        let (w, s) = LogWriter::create(p, Role::Receiver, start_real, tap)
            .map_err(|e| EngineError::Io { what: format!("creating log {}", p.map(|p| p.display().to_string()).unwrap_or_default()), err: e })?;
        (Some(w), s)
    } else {
        (None, LogSink::disabled())
    };
    ready(&bound);
    let mut rx = Receiver {
        udp_more: vec![false; udp.len()],
        udp,
        icmp,
        icmp_sources: HashSet::new(),
        udp_flows: HashMap::new(),
        ids: ids::FlowIds::default(),
        end_waits: Vec::new(),
        early: crate::early::Early::default(),
        last_evict_s: u64::MAX,
        listeners,
        conns: Vec::new(),
        free: Vec::new(),
        open: 0,
        pending: VecDeque::new(),
        sink,
        report: RecvReport { listening: names, log: opts.log.clone(), ..Default::default() },
        batch: RecvBatch::new(MAX_DATAGRAM),
        read_buf: vec![0u8; 256 * 1024],
        last_arrival: mono_ns(),
        reverse_udp: HashMap::new(),
        reverse_tcp: Vec::new(),
        rev_bufs: Vec::new(),
        spare: std::fs::File::open("/dev/null").ok(),
        opts: opts.clone(),
        echo_total: 0,
        deferred: Vec::new(),
    };
    let res = rx.serve(opts, stop);
    rx.sink.flush();
    let mut report = std::mem::take(&mut rx.report);
    drop(rx);
    if let Some(w) = writer {
        let done = w.finish().map_err(|e| EngineError::Io { what: "writing the receive log".into(), err: e })?;
        report.log_records = if opts.log.is_some() { done.records } else { 0 };
        report.log_server = done.tap;
    }
    res.map_err(|e| EngineError::Io { what: "receiving".into(), err: e })?;
    Ok(report)
}

struct Receiver {
    udp: Vec<(Socket, Gate)>,
    /// `--icmp`: the raw socket, and the (source, flow) pairs logged so far.
    icmp: Option<Socket>,
    icmp_sources: HashSet<(std::net::Ipv4Addr, u32)>,
    /// Admitted UDP flows, per (source, flow id).
    udp_flows: HashMap<(SocketAddr, u32), UdpFlow>,
    /// The id each (source, flow id) pair is logged under.
    ids: ids::FlowIds,
    /// Flows whose end acknowledgement waits for datagrams still on their way.
    end_waits: Vec<(SocketAddr, u32)>,
    /// Datagrams that came before their flow's admitting hello.
    early: crate::early::Early,
    /// UDP sockets the fairness cap left with datagrams waiting (see `drain_udp`).
    udp_more: Vec<bool>,
    /// When a full gate last made room among idle flows (seconds).
    last_evict_s: u64,
    listeners: Vec<TcpListener>,
    conns: Vec<Option<SinkConn>>,
    free: Vec<usize>,
    open: usize,
    /// Connections waiting for their hello, oldest first.
    pending: VecDeque<usize>,
    sink: LogSink,
    report: RecvReport,
    batch: RecvBatch,
    read_buf: Vec<u8>,
    last_arrival: u64,
    /// Reverse flows being served, UDP per (source, flow id), TCP by connection.
    reverse_udp: HashMap<(SocketAddr, u32), UdpReverse>,
    reverse_tcp: Vec<usize>,
    rev_bufs: Vec<Vec<u8>>,
    spare: Option<std::fs::File>,
    opts: RecvOptions,
    /// Bytes waiting in every connection's echo (or reverse) backlog together.
    echo_total: usize,
    /// Echoing connections left unread while the budget was spent.
    deferred: Vec<usize>,
}

/// A sink connection's view of the receiver while it reads: records are counted and logged.
struct SinkCtx<'a> {
    sink: &'a mut LogSink,
    report: &'a mut RecvReport,
    ids: &'a mut ids::FlowIds,
    peer: SocketAddr,
}

impl Ctx for SinkCtx<'_> {
    fn t0_real(&self) -> u64 {
        0
    }

    fn record(&mut self, mut r: Record) {
        r.flow = log_id(self.ids, self.sink, self.report, self.peer, r.flow);
        if r.kind == RecordKind::End {
            signal::note_end(self.report, &r);
        } else {
            count(self.report, r.flow, r.size as usize, r.t_b);
        }
        self.sink.push(r);
    }

    fn respond(&mut self, _: u32, _: u32) -> Result<Accepted, Status> {
        Err(Status::UnknownPlayer)
    }
}

/// What this receiver says of itself to a discovery request (`horde discover`).
fn about(opts: &RecvOptions) -> horde_wire::discover::About {
    use horde_wire::discover::{About, Role, CAP_ECHO, CAP_ICMP, CAP_REVERSE};
    let caps = CAP_ECHO | if opts.reverse { CAP_REVERSE } else { 0 } | if opts.icmp.is_some() { CAP_ICMP } else { 0 };
    let ports = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
    About { role: Role::Receiver, caps, udp_ports: ports(opts.udp.len()), tcp_ports: ports(opts.tcp.len()), ..About::default() }
}

/// The id flow `flow` of `from` is logged and reported under: its own, unless another source
/// used it first ([`ids::FlowIds`]); an alias record is logged the first time one is given.
/// The report's entry names its source (and the sender's id where it differs).
fn log_id(ids: &mut ids::FlowIds, sink: &mut LogSink, report: &mut RecvReport, from: SocketAddr, flow: u32) -> u32 {
    let (id, alias) = ids.id(from, flow);
    if let Some(a) = alias {
        sink.push(a.record());
        let f = report.flows.entry(id).or_default();
        f.source = Some(from.to_string());
        f.flow_id = Some(flow);
    } else {
        report.flows.entry(id).or_default().source.get_or_insert_with(|| from.to_string());
    }
    id
}

fn count(report: &mut RecvReport, flow: u32, len: usize, t: u64) {
    add(report, flow, 1, len as u64, t, t);
}

/// Adds `packets` of `flow` (`bytes` in all, the first at `first_ns`, the last at `last_ns`)
/// to the report's totals and to the flow's.
fn add(report: &mut RecvReport, flow: u32, packets: u64, bytes: u64, first_ns: u64, last_ns: u64) {
    report.packets += packets;
    report.bytes += bytes;
    let f = report.flows.entry(flow).or_default();
    if f.packets == 0 {
        f.first_ns = first_ns;
    }
    f.packets += packets;
    f.bytes += bytes;
    f.last_ns = f.last_ns.max(last_ns);
}

impl Receiver {
    /// Before stopping for `--idle`: reads, without waiting, what waits in the sockets, and
    /// says whether there was nothing. A receiver held up longer than its idle time (stopped
    /// and continued, its log writer behind a slow disk, a busy host) has not been idle if
    /// datagrams came meanwhile: they wait in its sockets — a senders' end messages behind
    /// them — and stopping then would discard what the kernel had delivered, uncounted.
    /// Readiness is edge-triggered, so the sockets are read, not polled.
    fn caught_up(&mut self, poll: &Poll) -> bool {
        let before = self.last_arrival;
        for i in 0..self.udp.len() {
            self.drain_udp(i);
        }
        if self.icmp.is_some() {
            self.drain_icmp();
        }
        for idx in 0..self.conns.len() {
            if self.conns[idx].as_ref().is_some_and(|c| net::unread_bytes(c.sock.as_raw_fd()) > 0) {
                self.serve_conn(poll, idx, true, false);
            }
        }
        self.last_arrival == before
    }

    fn serve(&mut self, opts: &RecvOptions, stop: &AtomicBool) -> io::Result<()> {
        let mut poll = Poll::new()?;
        for (i, (s, _)) in self.udp.iter().enumerate() {
            poll.registry().register(&mut SourceFd(&s.as_raw_fd()), Token(i), Interest::READABLE)?;
        }
        for (i, l) in self.listeners.iter_mut().enumerate() {
            poll.registry().register(l, Token(LISTENER_BASE + i), Interest::READABLE)?;
        }
        if let Some(s) = &self.icmp {
            poll.registry().register(&mut SourceFd(&s.as_raw_fd()), Token(ICMP_TOKEN), Interest::READABLE)?;
        }
        let started = mono_ns();
        let mut next_sweep = started + SWEEP_NS;
        let mut events = Events::with_capacity(4096);
        loop {
            let now = mono_ns();
            self.sink.tick(now);
            if stop.load(Ordering::Relaxed) {
                self.report.interrupted = true;
                break;
            }
            if opts.duration.is_some_and(|d| now - started >= d.as_nanos() as u64) || opts.packets.is_some_and(|p| self.report.packets >= p) {
                break;
            }
            if opts.idle.is_some_and(|d| now - self.last_arrival >= d.as_nanos() as u64) && self.caught_up(&poll) {
                break;
            }
            if now >= next_sweep {
                self.sweep(&poll, now);
                next_sweep = now + SWEEP_NS;
            }
            // Reverse flows keep the loop busy while they can send; a full socket waits 1 ms.
            let wait = match self.pump_reverse(&poll) {
                _ if self.reverse_udp.is_empty() && self.reverse_tcp.is_empty() => Duration::from_millis(50),
                true => Duration::ZERO,
                false => Duration::from_millis(1),
            };
            for i in 0..self.udp.len() {
                if self.udp_more[i] {
                    self.drain_udp(i);
                }
            }
            let wait = if self.udp_more.contains(&true) { Duration::ZERO } else { wait };
            let wait = self.next_end_ack().map_or(wait, |due| wait.min(Duration::from_nanos(due.saturating_sub(now))));
            match poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for ev in events.iter() {
                let t = ev.token().0;
                if t == ICMP_TOKEN {
                    self.drain_icmp();
                } else if t < LISTENER_BASE {
                    self.drain_udp(t);
                } else if t < CONN_BASE {
                    self.accept(&poll, t - LISTENER_BASE);
                } else {
                    self.serve_conn(&poll, t - CONN_BASE, ev.is_readable(), ev.is_writable());
                }
            }
            self.answer_waiting_ends(false);
        }
        self.answer_waiting_ends(true);
        self.report.refusals.unadmitted_datagrams += self.early.clear();
        self.tell_stopping();
        self.report.socket_drops = self.udp.iter().map(|(s, _)| net::socket_drops(s.as_raw_fd())).sum();
        self.report.duration_s = (mono_ns() - started) as f64 / 1e9;
        Ok(())
    }

    fn accept(&mut self, poll: &Poll, li: usize) {
        loop {
            let (mut sock, peer) = match accept_or_shed(&self.listeners[li], &mut self.spare) {
                Incoming::Conn(s, p) => (s, p),
                Incoming::Shed => {
                    self.report.refusals.refused_conns += 1;
                    continue;
                }
                Incoming::None => return,
            };
            // At the cap, the oldest connection that has not sent its hello makes room (so idle
            // connects cannot lock real flows out); if every one is a flow, the newcomer goes.
            while self.open >= self.opts.max_conns {
                let Some(old) = self.pending.pop_front() else { break };
                if self.conns[old].as_ref().is_some_and(|c| c.conn.awaiting_hello()) {
                    self.report.refusals.closed_before_hello += 1;
                    self.close(poll, old);
                }
            }
            if self.open >= self.opts.max_conns {
                self.report.refusals.refused_conns += 1;
                continue;
            }
            let _ = sock.set_nodelay(true);
            if self.opts.quickack {
                crate::net::quickack(sock.as_raw_fd());
            }
            let idx = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            if poll.registry().register(&mut sock, Token(CONN_BASE + idx), Interest::READABLE | Interest::WRITABLE).is_err() {
                self.free.push(idx);
                continue;
            }
            self.report.tcp_connections += 1;
            self.open += 1;
            let now = mono_ns();
            self.last_arrival = now;
            let mut conn = Conn::sink_tcp(format!("from {peer}"), self.opts.key.clone());
            conn.timers.arm(now, Some(HELLO_TIMEOUT_NS), self.opts.conn_idle.map(|d| d.as_nanos() as u64));
            self.conns[idx] = Some(SinkConn { conn, sock, peer });
            self.pending.push_back(idx);
        }
    }

    fn serve_conn(&mut self, poll: &Poll, idx: usize, readable: bool, writable: bool) {
        let Some(Some(c)) = self.conns.get_mut(idx) else {
            return;
        };
        let now = mono_ns();
        let mut close = false;
        let backlog_before = c.conn.out().len();
        // What the receiver's whole echo budget has left: an echoing connection reads no more.
        let room = ECHO_BUDGET.saturating_sub(self.echo_total);
        if readable && room == 0 && c.conn.echoing() && c.conn.out().is_empty() {
            // Nothing may be read now, and epoll will not say "readable" again for what waits:
            // read it when the budget has room.
            if self.deferred.len() < self.opts.max_conns {
                self.deferred.push(idx);
            }
        }
        if readable && !c.conn.timers.stalled() {
            let asked = c.conn.reverse_requested();
            close = read_conn(c, &mut self.read_buf, &mut self.sink, &mut self.report, &mut self.ids, now, room, self.opts.quickack);
            self.last_arrival = now;
            if !asked && c.conn.reverse_requested() {
                if self.opts.reverse {
                    self.reverse_tcp.push(idx);
                } else {
                    self.report.refusals.reverse += 1;
                    close = true;
                }
            }
        }
        if (writable || readable) && !close && !c.conn.out().is_empty() {
            close = flush_out(c);
        }
        self.echo_total = (self.echo_total + c.conn.out().len()).saturating_sub(backlog_before);
        if !close {
            // Back-pressure: past the echo limit (its own, or the receiver's budget), stop
            // reading until the peer takes some.
            let full = c.conn.echo_backlog_full() || (self.echo_total >= ECHO_BUDGET && !c.conn.out().is_empty());
            match (full, c.conn.timers.stalled()) {
                (true, false) => {
                    c.conn.timers.set_stalled(now, true);
                    let _ = poll.registry().reregister(&mut c.sock, Token(CONN_BASE + idx), Interest::WRITABLE);
                }
                (false, true) if c.conn.out().len() < ECHO_LIMIT / 2 => {
                    c.conn.timers.set_stalled(now, false);
                    let _ = poll.registry().reregister(&mut c.sock, Token(CONN_BASE + idx), Interest::READABLE | Interest::WRITABLE);
                }
                _ => {}
            }
        }
        if close {
            self.close(poll, idx);
        }
    }

    /// One round of bulk for every reverse flow whose consent is fresh; returns whether any
    /// socket took something (else they are all full or idle).
    fn pump_reverse(&mut self, poll: &Poll) -> bool {
        let mut sent = false;
        let now = mono_ns();
        let udp = &self.udp;
        self.reverse_udp.retain(|k, r| now - r.heard < REVERSE_CONSENT_NS && udp[r.sock].1.may_send(now, k.0, k.1));
        let real = real_ns();
        let keys: Vec<(SocketAddr, u32)> = self.reverse_udp.keys().copied().collect();
        for key in keys {
            sent |= self.pump_udp_reverse(key, real);
        }
        let mut k = 0;
        while k < self.reverse_tcp.len() {
            let idx = self.reverse_tcp[k];
            let Some(Some(c)) = self.conns.get_mut(idx) else {
                self.reverse_tcp.swap_remove(k);
                continue;
            };
            if !c.conn.reverse_requested() {
                // The slot was reused by another connection.
                self.reverse_tcp.swap_remove(k);
                continue;
            }
            k += 1;
            if !c.conn.out().is_empty() && flush_out(c) {
                self.close(poll, idx);
                continue;
            }
            if !c.conn.out().is_empty() {
                continue;
            }
            let (n, bytes) = c.conn.fill_reverse(real, REVERSE_TCP_BACKLOG);
            if n == 0 {
                continue;
            }
            self.report.reverse_packets += n;
            self.report.reverse_bytes += bytes;
            sent = true;
            if flush_out(c) {
                self.close(poll, idx);
            }
        }
        sent
    }

    fn pump_udp_reverse(&mut self, key: (SocketAddr, u32), real: u64) -> bool {
        let Some(r) = self.reverse_udp.get_mut(&key) else { return false };
        if self.rev_bufs.len() < net::BATCH {
            self.rev_bufs.resize(net::BATCH, Vec::new());
        }
        for (k, b) in self.rev_bufs.iter_mut().enumerate() {
            b.resize(r.size, 0);
            DatagramHeader { flags: FLAG_REVERSE_DATA, flow: key.1, seq: r.seq.wrapping_add(k as u32), send_ns: real }.emit(b);
        }
        let slices: Vec<&[u8]> = self.rev_bufs.iter().map(|b| b.as_slice()).collect();
        let to = vec![key.0; slices.len()];
        let fd = self.udp[r.sock].0.as_raw_fd();
        match net::send_batch_to(fd, &slices, &to) {
            Ok(k) if k > 0 => {
                r.seq = r.seq.wrapping_add(k as u32);
                self.report.reverse_packets += k as u64;
                self.report.reverse_bytes += (k * r.size) as u64;
                true
            }
            _ => false,
        }
    }

    fn close(&mut self, poll: &Poll, idx: usize) {
        if let Some(mut c) = self.conns[idx].take() {
            self.echo_total = self.echo_total.saturating_sub(c.conn.out().len());
            let _ = poll.registry().deregister(&mut c.sock);
            self.open -= 1;
            self.free.push(idx);
        }
    }

    /// Consent of the UDP flows that get anything back: probes due, flows whose peer stopped
    /// answering forgotten (their reverse bulk and echoes stopped already).
    fn sweep_consent(&mut self, now: u64) {
        let wall = clock::wall_offset_ns();
        for (sock, gate) in &mut self.udp {
            gate.set_wall_offset(wall);
            let work = gate.poll_consent(now);
            for (to, p) in &work.probes {
                if net::send_batch_to(sock.as_raw_fd(), &[p], &[*to]).is_ok() {
                    self.report.consent_probes += 1;
                    self.report.consent_probe_bytes += p.len() as u64;
                }
            }
            for k in &work.expired {
                self.udp_flows.remove(k);
                self.reverse_udp.remove(k);
            }
            self.report.refusals.consent_expired += work.expired.len() as u64;
        }
    }

    /// Deadlines: hellos that did not come, echoes not read, idle connections.
    fn sweep(&mut self, poll: &Poll, now: u64) {
        self.sweep_consent(now);
        self.report.refusals.unadmitted_datagrams += self.early.expire(now);
        // Recounted now and then: reverse bulk queued and written elsewhere moves it too.
        self.echo_total = self.conns.iter().flatten().map(|c| c.conn.out().len()).sum();
        if self.echo_total < ECHO_BUDGET {
            let mut d = std::mem::take(&mut self.deferred);
            d.sort_unstable();
            d.dedup();
            for idx in d {
                self.serve_conn(poll, idx, true, false);
            }
        }
        // Connections that sent their hello leave the queue of those that may make room.
        while self.pending.front().is_some_and(|&idx| !self.conns[idx].as_ref().is_some_and(|c| c.conn.awaiting_hello())) {
            self.pending.pop_front();
        }
        for idx in 0..self.conns.len() {
            let Some(c) = &mut self.conns[idx] else { continue };
            let counter = match c.conn.handle_timeout(now) {
                None => continue,
                Some(Expiry::NoHello) => &mut self.report.refusals.closed_before_hello,
                Some(Expiry::Stalled) => &mut self.report.refusals.stalled_conns,
                Some(Expiry::Idle) => &mut self.report.refusals.idle_conns,
            };
            *counter += 1;
            self.close(poll, idx);
        }
    }
}

/// Reads what is available; returns true when the connection should be closed.
/// `room`: the bytes the receiver's echo budget has left; an echoing connection reads no more
/// than that (so together they never pass it).
#[allow(clippy::too_many_arguments)]
fn read_conn(
    c: &mut SinkConn,
    buf: &mut [u8],
    sink: &mut LogSink,
    report: &mut RecvReport,
    ids: &mut ids::FlowIds,
    now_mono: u64,
    mut room: usize,
    quickack: bool,
) -> bool {
    loop {
        let max = if c.conn.echoing() { buf.len().min(room).min(ECHO_LIMIT.saturating_sub(c.conn.out().len())) } else { buf.len() };
        if max == 0 {
            return false;
        }
        let before_out = c.conn.out().len();
        let n = match c.sock.read(&mut buf[..max]) {
            Ok(0) => return true,
            Ok(n) => {
                if quickack {
                    crate::net::quickack(c.sock.as_raw_fd());
                }
                n
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        };
        c.conn.timers.touch(now_mono);
        let was_waiting = c.conn.awaiting_hello();
        let before = report.packets;
        let r = c.conn.on_stream(real_ns(), &buf[..n], &mut SinkCtx { sink, report, ids, peer: c.peer });
        if was_waiting && !c.conn.awaiting_hello() {
            let id = log_id(ids, sink, report, c.peer, c.conn.flow);
            sink.endpoints(id, c.conn.tag, Some(c.peer), c.sock.local_addr().ok(), horde_wire::log::PROTO_TCP);
        }
        if c.conn.echoing() {
            report.echoed += report.packets - before;
        }
        match r {
            Err(horde_proto::Close::NotHorde(_)) => {
                report.garbage_streams += 1;
                return true;
            }
            Err(_) => {
                if was_waiting {
                    report.refusals.closed_before_hello += 1;
                }
                return true;
            }
            Ok(_) => {}
        }
        if !c.conn.out().is_empty() {
            if flush_out(c) {
                return true;
            }
            room = room.saturating_sub(c.conn.out().len().saturating_sub(before_out));
            if c.conn.echo_backlog_full() {
                return false;
            }
        }
    }
}

/// Writes the echo backlog; returns true when the connection should be closed.
fn flush_out(c: &mut SinkConn) -> bool {
    while !c.conn.out().is_empty() {
        match c.sock.write(c.conn.out()) {
            Ok(0) => return true,
            Ok(k) => c.conn.wrote(k),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
    false
}
