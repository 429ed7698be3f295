//! A sender worker: the I/O shell around its connections ([`horde_proto::Conn`]). It owns their
//! sockets, a min-heap of their next departures, a poll for what arrives, and (on a server
//! side) listeners with their address-validation gates. This file holds the loop, pacing and
//! sending; reading and accepting are in [`crate::reading`], what a connection does on its own
//! socket in [`crate::slot`], ICMP echoes in [`crate::icmp`].

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use horde_model::{Departure, Transport};
use horde_proto::gate::{Gate, GateConfig};
use horde_proto::{GreetState, Role};
use horde_wire::DatagramHeader;
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use socket2::Socket;

use crate::clock::{self, mono_ns, real_ns};
use crate::logger::LogSink;
use crate::net::{self, RecvBatch, BATCH};
use crate::sender::types::{new_hist, FlowSent, Progress, Refusals, SendOptions, NO_DEPARTURE};
use crate::slot::{Share, Slot, Sock};

pub(crate) const LISTEN_TOKEN: usize = 1 << 30;
pub(crate) const UDP_LISTEN_TOKEN: usize = 1 << 29;
/// How often timers other than departures are looked at (hello retries, hello deadlines).
const HOUSEKEEPING_NS: u64 = 20_000_000;
/// A bulk TCP flow queues APDUs until this many bytes wait in user space: enough for one
/// large write per pump (iperf3 writes 128 KiB), little enough to keep memory bounded.
const BULK_TCP_BACKLOG: usize = 256 * 1024;

/// A socket's readiness from the poll, kept until handled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ready {
    pub token: usize,
    pub readable: bool,
    pub writable: bool,
    /// The peer closed its side (read to the end).
    pub closed: bool,
}

/// What one pump of a bulk flow did.
enum Pumped {
    Sent,
    /// Its socket takes no more now; writability will wake the worker.
    Full,
    Done,
}

pub struct WorkerResult {
    pub flows: Vec<FlowSent>,
    pub lateness: Histogram<u64>,
    /// Departures more than 1 ms late, and all paced departures, per second of the run.
    pub late_by_second: Vec<u64>,
    pub sent_by_second: Vec<u64>,
    /// Per second of the run: the TCP send queues of this worker's sockets together, bytes
    /// [not yet acknowledged, of them not yet sent] (`net::tcp_send_queue`).
    pub tcp_queue_by_second: Vec<[u64; 2]>,
    /// Departures more than 1 ms late, exactly.
    pub late_over_1ms: u64,
    pub interrupted: bool,
    pub refusals: Refusals,
    pub end_real_ns: u64,
    /// Flows added while the run went whose socket could not be opened.
    pub not_opened: u64,
}

pub struct Worker {
    pub(crate) slots: Vec<Slot>,
    pub(crate) listeners: Vec<TcpListener>,
    /// Server side over UDP: one shared socket per port with its gate, and the players on it.
    pub(crate) udp_listeners: Vec<(Socket, Gate)>,
    pub(crate) udp_peers: HashMap<SocketAddr, usize>,
    pub(crate) heap: BinaryHeap<Reverse<(u64, usize)>>,
    /// Clients whose greeter still has hellos to send.
    pub(crate) greeting: Vec<usize>,
    /// Server side: TCP connections waiting for their hello, oldest first.
    pub(crate) pending: VecDeque<usize>,
    /// Slots of connections closed before their hello, free for reuse (after this poll round).
    pub(crate) free: Vec<usize>,
    pub(crate) free_next: Vec<usize>,
    pub(crate) poll: Option<Poll>,
    pub(crate) events: Events,
    /// The round's readiness, as polled (kept to reuse its memory).
    pub(crate) ready: VecDeque<Ready>,
    /// The departures of one [`Worker::send_due`].
    due: Vec<Departure>,
    pub(crate) sink: LogSink,
    pub(crate) t0_mono: u64,
    pub(crate) t0_real: u64,
    pub(crate) opts: SendOptions,
    hist: Histogram<u64>,
    pub(crate) bufs: Vec<Vec<u8>>,
    pub(crate) rx: Option<RecvBatch>,
    pub(crate) read_buf: Vec<u8>,
    /// A descriptor held in reserve, given up to shed a connection when descriptors run out.
    pub(crate) spare: Option<std::fs::File>,
    pub(crate) refusals: Refusals,
    /// Players' datagrams that came before their admitting hello (server side over UDP).
    pub(crate) early: crate::early::Early,
    next_housekeeping: u64,
    /// Started bulk flows, pumped whenever their sockets take more.
    bulk: Vec<usize>,
    /// Departures more than 1 ms late, and all paced departures, per second of the run (by
    /// scheduled time).
    late_by_second: Vec<u64>,
    sent_by_second: Vec<u64>,
    tcp_queue_by_second: Vec<[u64; 2]>,
    /// Departures more than 1 ms late, exactly (the histogram's count is bucketed).
    late_over_1ms: u64,
    /// Flows added while the run went whose socket could not be opened.
    pub(crate) not_opened: u64,
    /// UDP flows added while the run goes, validating their address before they start (as
    /// every flow at the start does before the first departure).
    pub(crate) validating: Vec<usize>,
}

/// Seconds of a run whose late departures are counted one by one (a day; later ones only in
/// the totals).
const MAX_LATE_SECONDS: usize = 86_400;

impl Worker {
    pub fn new(share: Share, sink: LogSink, opts: SendOptions) -> io::Result<Worker> {
        clock::tighten_timer_slack();
        let Share { slots, tcp: mut listeners, udp, secret } = share;
        let serving = !listeners.is_empty() || !udp.is_empty();
        let needs_poll = serving || slots.iter().any(|s| s.conn.reads() || s.conn.bulk());
        let poll = if needs_poll { Some(Poll::new()?) } else { None };
        let lim = &opts.serve_limits;
        let about = horde_wire::discover::About { role: horde_wire::discover::Role::ServerSide, udp_ports: 1, ..Default::default() };
        let gate_cfg = GateConfig { max_flows: lim.max_players, max_flows_per_ip: lim.max_players, ..GateConfig::receiver(opts.key.clone()).about(about) };
        let udp_listeners: Vec<(Socket, Gate)> = udp.into_iter().map(|s| (s, Gate::new(gate_cfg.clone(), secret))).collect();
        if let Some(p) = &poll {
            for (i, s) in slots.iter().enumerate() {
                if s.conn.connect_at.is_some() {
                    // registered when it connects
                } else if s.conn.transport() == Transport::Tcp {
                    p.registry().register(&mut SourceFd(&s.fd()), Token(i), Interest::READABLE | Interest::WRITABLE)?;
                } else if s.conn.bulk() {
                    // Writability wakes a bulk flow whose socket buffer was full.
                    let interest = if s.conn.reads() { Interest::READABLE | Interest::WRITABLE } else { Interest::WRITABLE };
                    p.registry().register(&mut SourceFd(&s.fd()), Token(i), interest)?;
                } else if s.conn.reads() {
                    p.registry().register(&mut SourceFd(&s.fd()), Token(i), Interest::READABLE)?;
                }
            }
            for (j, l) in listeners.iter_mut().enumerate() {
                p.registry().register(l, Token(LISTEN_TOKEN + j), Interest::READABLE)?;
            }
            for (j, (u, _)) in udp_listeners.iter().enumerate() {
                p.registry().register(&mut SourceFd(&u.as_raw_fd()), Token(UDP_LISTEN_TOKEN + j), Interest::READABLE)?;
            }
        }
        let has_udp_rx = !udp_listeners.is_empty() || slots.iter().any(|s| s.conn.transport() == Transport::Udp && s.conn.reads());
        let has_icmp = slots.iter().any(|s| s.conn.transport() == Transport::Icmp);
        Ok(Worker {
            heap: BinaryHeap::with_capacity(slots.len()),
            slots,
            listeners,
            udp_listeners,
            udp_peers: HashMap::new(),
            greeting: Vec::new(),
            pending: VecDeque::new(),
            free: Vec::new(),
            free_next: Vec::new(),
            poll,
            events: Events::with_capacity(1024),
            ready: VecDeque::new(),
            due: vec![NO_DEPARTURE; BATCH],
            sink,
            t0_mono: 0,
            t0_real: 0,
            opts,
            hist: new_hist(),
            bufs: (0..BATCH).map(|_| Vec::new()).collect(),
            rx: has_udp_rx.then(|| RecvBatch::new(horde_model::flow::MAX_UDP_PAYLOAD as usize + 1)),
            // An ICMP flow reads whole IPv4 packets into it.
            read_buf: vec![0u8; if has_icmp { crate::icmp::MAX_PACKET } else { 64 * 1024 }],
            spare: serving.then(|| std::fs::File::open("/dev/null").ok()).flatten(),
            refusals: Refusals::default(),
            early: Default::default(),
            next_housekeeping: 0,
            bulk: Vec::new(),
            late_by_second: Vec::new(),
            sent_by_second: Vec::new(),
            tcp_queue_by_second: Vec::new(),
            late_over_1ms: 0,
            not_opened: 0,
            validating: Vec::new(),
        })
    }

    pub(crate) fn serving(&self) -> bool {
        !self.listeners.is_empty() || !self.udp_listeners.is_empty()
    }

    pub fn run(mut self, t0_mono: u64, t0_real: u64, stop: &AtomicBool) -> io::Result<WorkerResult> {
        self.t0_mono = t0_mono;
        self.t0_real = t0_real;
        for i in 0..self.slots.len() {
            if let Some(at) = self.slots[i].conn.connect_at {
                self.heap.push(Reverse((at, i)));
                continue;
            }
            self.start_slot(i);
        }
        let serving = self.serving();
        let mut interrupted = false;
        loop {
            let now = mono_ns();
            self.sink.tick(now);
            if stop.load(Ordering::Relaxed) {
                interrupted = !serving;
                break;
            }
            if now >= self.next_housekeeping {
                self.housekeeping(now);
                self.next_housekeeping = now + HOUSEKEEPING_NS;
            }
            let Some(&Reverse((at, i))) = self.heap.peek() else {
                if !self.bulk.is_empty() {
                    self.pump_bulk(now);
                    continue;
                }
                if serving || !self.greeting.is_empty() {
                    self.poll_io(Duration::from_millis(20));
                    continue;
                }
                break;
            };
            if self.t0_mono + at > now {
                if !self.bulk.is_empty() {
                    self.pump_bulk(now);
                    continue;
                }
                self.wait((self.t0_mono + at).min(self.next_housekeeping));
                continue;
            }
            self.heap.pop();
            if self.slots[i].conn.connect_at.is_some() {
                if self.join(i) {
                    self.schedule(i);
                }
            } else {
                self.send_due(i, now - self.t0_mono);
                self.schedule(i);
            }
        }
        if interrupted {
            for i in 0..self.slots.len() {
                self.slots[i].end(horde_wire::signal::EndReason::Interrupted, self.opts.end_messages);
            }
        }
        if !serving {
            self.linger(stop);
        }
        self.sink.flush();
        self.refusals.unadmitted += self.early.clear();
        Ok(WorkerResult {
            flows: self.slots.iter().filter(|s| !(s.conn.role() == Role::Server && s.conn.awaiting_hello())).map(Slot::report).collect(),
            lateness: self.hist,
            late_by_second: std::mem::take(&mut self.late_by_second),
            sent_by_second: std::mem::take(&mut self.sent_by_second),
            tcp_queue_by_second: std::mem::take(&mut self.tcp_queue_by_second),
            late_over_1ms: self.late_over_1ms,
            interrupted,
            refusals: self.refusals.clone(),
            end_real_ns: real_ns(),
            not_opened: self.not_opened,
        })
    }

    /// Puts slot `i`'s next departure on the heap.
    pub(crate) fn schedule(&mut self, i: usize) {
        if let Some(at) = self.slots[i].conn.next_at() {
            self.heap.push(Reverse((at, i)));
        } else {
            self.slots[i].end(horde_wire::signal::EndReason::Done, self.opts.end_messages);
        }
    }

    /// A client's start: the TCP hello is queued (signed, based at the common start), a UDP
    /// greeter may ask to be admitted; then its departures.
    pub(crate) fn start_slot(&mut self, i: usize) {
        self.log_ends(i);
        self.slots[i].conn.start(self.t0_real);
        if self.slots[i].conn.greeter().is_some() {
            self.greeting.push(i);
            self.slots[i].send_hello(mono_ns());
        }
        self.slots[i].flush();
        self.schedule(i);
    }

    /// A flow whose time has come to connect (a player joining): connect, register, greet. A
    /// UDP flow added during the run (`Worker::take_joining`) registers its reads and
    /// validates its address first (`Worker::validate_joined`). True when its departures are
    /// to be scheduled now (a UDP flow's are when it starts).
    pub(crate) fn join(&mut self, i: usize) -> bool {
        if self.slots[i].conn.transport() == Transport::Udp {
            self.slots[i].conn.connect_at = None;
            let fd = self.slots[i].fd();
            let registered = self.poll.as_ref().is_some_and(|p| p.registry().register(&mut SourceFd(&fd), Token(i), Interest::READABLE).is_ok());
            if !registered {
                self.slots[i].conn.stats.errors += 1;
                self.slots[i].conn.broke();
                return false;
            }
            if self.slots[i].conn.greeter().is_some() {
                self.slots[i].send_hello(mono_ns());
                self.validating.push(i);
            } else {
                self.start_slot(i);
            }
            return false;
        }
        let s = &mut self.slots[i];
        s.conn.connect_at = None;
        let Sock::Own(sock) = &s.sock else { return true };
        let ok = net::start_connect(sock, s.dst).is_ok()
            && self
                .poll
                .as_ref()
                .is_some_and(|p| p.registry().register(&mut SourceFd(&sock.as_raw_fd()), Token(i), Interest::READABLE | Interest::WRITABLE).is_ok());
        if !ok {
            s.conn.stats.errors += 1;
            s.conn.broke();
            return true;
        }
        s.conn.start(self.t0_real);
        self.log_ends(i);
        self.slots[i].flush();
        true
    }

    /// The log's endpoint records of slot `i`: a client's own socket → where it sends; a
    /// server side's player → the listening socket.
    pub(crate) fn log_ends(&mut self, i: usize) {
        if !self.sink.enabled() {
            return;
        }
        let s = &self.slots[i];
        let protocol = match s.conn.transport() {
            Transport::Tcp => horde_wire::log::PROTO_TCP,
            Transport::Udp => horde_wire::log::PROTO_UDP,
            Transport::Icmp => horde_wire::log::PROTO_ICMP,
        };
        let own = |sock: &Socket| sock.local_addr().ok().and_then(|a| a.as_socket());
        let (src, dst) = match (&s.sock, s.conn.role()) {
            (Sock::Own(sock), Role::Client) => (own(sock), Some(s.dst)),
            (Sock::Own(sock), _) => (Some(s.dst), own(sock)),
            (Sock::Listener(j), _) => (s.peer, self.udp_listeners.get(*j).and_then(|(l, _)| own(l))),
            (Sock::Closed, _) => return,
        };
        // ICMP has no ports (a raw socket names its protocol there).
        let portless = |a: Option<SocketAddr>| a.map(|a| if protocol == horde_wire::log::PROTO_ICMP { SocketAddr::new(a.ip(), 0) } else { a });
        let (flow, tag) = (s.conn.flow, s.conn.tag);
        self.sink.endpoints(flow, tag, portless(src), portless(dst), protocol);
    }

    /// Flows added while the run goes ([`crate::sender::Joining`]): each gets its socket now and
    /// starts when its `connect_at_ns` comes up in the departure heap.
    pub(crate) fn take_joining(&mut self) {
        let Some(joining) = self.opts.joining.clone() else { return };
        for job in joining.take() {
            let at = job.connect_at_ns.unwrap_or(0);
            match crate::setup::open(job, &self.opts) {
                Ok(mut slot) => {
                    slot.conn.connect_at = Some(at);
                    self.slots.push(slot);
                    self.heap.push(Reverse((at, self.slots.len() - 1)));
                }
                Err(e) => {
                    tracing::warn!("a flow added during the run: {e}");
                    self.not_opened += 1;
                }
            }
        }
    }

    /// UDP flows added during the run: hellos until their address is validated, then their
    /// start (the admitting hello, then their departures); one that got no answer is broken.
    pub(crate) fn validate_joined(&mut self, now: u64) {
        let mut k = 0;
        while k < self.validating.len() {
            let i = self.validating[k];
            let state = self.slots[i].conn.greeter().map(|g| g.state());
            if matches!(state, Some(GreetState::Asking)) {
                self.slots[i].send_hello(now);
                k += 1;
                continue;
            }
            self.validating.swap_remove(k);
            if matches!(state, Some(GreetState::GaveUp)) {
                self.slots[i].conn.stats.errors += 1;
                self.slots[i].conn.broke();
            } else {
                self.start_slot(i);
            }
        }
    }

    /// Server side over UDP: consent probes to the admitted players; a player that stopped
    /// answering gets nothing more (its slot is closed, its address forgotten by the gate).
    fn consent(&mut self, now: u64) {
        let wall = clock::wall_offset_ns();
        for j in 0..self.udp_listeners.len() {
            self.udp_listeners[j].1.set_wall_offset(wall);
            let work = self.udp_listeners[j].1.poll_consent(now);
            let fd = self.udp_listeners[j].0.as_raw_fd();
            for (to, p) in &work.probes {
                let _ = net::send_batch_to(fd, &[p], &[*to]);
            }
            for (addr, _) in work.expired {
                if let Some(i) = self.udp_peers.remove(&addr) {
                    self.slots[i].conn.withdraw();
                    self.slots[i].sock = Sock::Closed;
                    self.refusals.consent_expired += 1;
                }
            }
        }
    }

    /// Timers other than departures: greeters' retries, hello deadlines of pending connections,
    /// consent of UDP players.
    /// Once a second of the run (its first housekeeping in that second): the send queues of
    /// its TCP sockets together, where a backlog the network does not take waits before the
    /// link (the report sets it beside the link's queue).
    fn sample_tcp_queues(&mut self, now: u64) {
        let sec = (now.saturating_sub(self.t0_mono) / 1_000_000_000) as usize;
        if now < self.t0_mono || sec >= MAX_LATE_SECONDS || sec < self.tcp_queue_by_second.len() {
            return;
        }
        let mut q = [0u64; 2];
        let mut tcp = false;
        for s in &self.slots {
            if s.conn.transport() != Transport::Tcp || matches!(s.sock, Sock::Closed) {
                continue;
            }
            tcp = true;
            if let Some((outq, unsent)) = crate::net::tcp_send_queue(s.fd()) {
                q = [q[0] + outq, q[1] + unsent];
            }
        }
        // a worker without TCP sockets says nothing (a UDP run has no such queue)
        if !tcp && self.tcp_queue_by_second.is_empty() {
            return;
        }
        if self.tcp_queue_by_second.is_empty() {
            // no TCP socket before this second: nothing queued then
            self.tcp_queue_by_second.resize(sec, [0, 0]);
        }
        // the seconds a busy worker skipped hold what the next sample found
        self.tcp_queue_by_second.resize(sec + 1, q);
    }

    fn housekeeping(&mut self, now: u64) {
        self.sample_tcp_queues(now);
        self.refusals.unadmitted += self.early.expire(now);
        self.take_joining();
        self.validate_joined(now);
        self.consent(now);
        for i in 0..self.slots.len() {
            // an ICMP flow whose target stopped answering ends; the others get their probes
            if crate::icmp::housekeeping(&mut self.slots[i], now) {
                self.refusals.consent_expired += 1;
                self.close(i);
            }
        }
        let mut k = 0;
        while k < self.greeting.len() {
            let i = self.greeting[k];
            self.slots[i].send_hello(now);
            if self.slots[i].conn.greeter().is_some_and(|g| g.next_ns().is_none()) {
                self.greeting.swap_remove(k);
            } else {
                k += 1;
            }
        }
        while let Some(&i) = self.pending.front() {
            let s = &mut self.slots[i];
            let waiting = s.conn.awaiting_hello() && !matches!(s.sock, Sock::Closed);
            // The connection keeps its own hello deadline.
            if waiting && s.conn.handle_timeout(now).is_none() {
                break;
            }
            self.pending.pop_front();
            if waiting {
                self.refusals.closed_before_hello += 1;
                self.close(i);
            }
        }
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

    /// Sends every departure of slot `i` that is due at `now_rel` (up to one batch).
    fn send_due(&mut self, i: usize, now_rel: u64) {
        if self.slots[i].conn.bulk() {
            // Its start has come: from now on it is pumped, not scheduled.
            self.slots[i].conn.begin_bulk();
            self.bulk.push(i);
            return;
        }
        // The batch is the worker's, not filled anew per departure (one per APDU at 10,000 players).
        let mut due = std::mem::take(&mut self.due);
        let n = self.slots[i].conn.take_due(now_rel, &mut due);
        match self.slots[i].conn.transport() {
            _ if n == 0 => {}
            Transport::Tcp => self.send_tcp(i, &due[..n]),
            Transport::Udp => {
                self.send_udp(i, &due[..n]);
            }
            Transport::Icmp => {
                self.send_icmp(i, &due[..n]);
            }
        }
        self.due = due;
    }

    /// One round over the started bulk flows: each whose socket takes more gets a batch. When
    /// every socket is full the worker waits (at most 1 ms) for writability; in between it
    /// looks at what arrived without waiting.
    fn pump_bulk(&mut self, now: u64) {
        let now_rel = now - self.t0_mono;
        let mut sent = false;
        let mut k = 0;
        while k < self.bulk.len() {
            let i = self.bulk[k];
            match self.pump(i, now_rel) {
                Pumped::Sent => sent = true,
                Pumped::Full => {}
                Pumped::Done => {
                    self.slots[i].end(horde_wire::signal::EndReason::Done, self.opts.end_messages);
                    self.bulk.swap_remove(k);
                    continue;
                }
            }
            k += 1;
        }
        let wait = if sent { Duration::ZERO } else { Duration::from_millis(1) };
        if self.poll.is_some() {
            self.poll_io(wait);
        } else if !sent {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn pump(&mut self, i: usize, now_rel: u64) -> Pumped {
        let mut due = [NO_DEPARTURE; BATCH];
        match self.slots[i].conn.transport() {
            t @ (Transport::Udp | Transport::Icmp) => {
                let n = self.slots[i].conn.take_bulk(now_rel, &mut due);
                if n == 0 {
                    return if self.slots[i].conn.bulk_done() { Pumped::Done } else { Pumped::Full };
                }
                let sent = if t == Transport::Udp { self.send_udp(i, &due[..n]) } else { self.send_icmp(i, &due[..n]) };
                if sent < n {
                    Pumped::Full
                } else {
                    Pumped::Sent
                }
            }
            Transport::Tcp => {
                if self.slots[i].conn.broken() {
                    return Pumped::Done;
                }
                self.slots[i].flush();
                if self.slots[i].conn.wants_write() {
                    return Pumped::Full;
                }
                // Queue up to the backlog, then one write: the clock (and the deadline) is
                // looked at again on the next pump.
                let mut queued = false;
                while self.slots[i].conn.out().len() < BULK_TCP_BACKLOG {
                    let n = self.slots[i].conn.take_bulk(now_rel, &mut due[..4]);
                    if n == 0 {
                        break;
                    }
                    let real = self.slots[i].conn.carried_ns(real_ns());
                    if !self.slots[i].conn.queue_apdus(&due[..n], real) {
                        return Pumped::Done;
                    }
                    for d in &due[..n] {
                        self.account(i, d, real, 0);
                    }
                    queued = true;
                }
                self.slots[i].flush();
                if queued {
                    Pumped::Sent
                } else if self.slots[i].conn.bulk_done() {
                    Pumped::Done
                } else {
                    Pumped::Full
                }
            }
        }
    }

    /// Sends `due` on UDP slot `i`; returns how many the kernel took (the rest are requeued).
    fn send_udp(&mut self, i: usize, due: &[Departure]) -> usize {
        let real = real_ns();
        let mono = mono_ns();
        let s = &self.slots[i];
        let flags = s.conn.datagram_flags();
        let proof = s.conn.keepalive_proof();
        for (k, d) in due.iter().enumerate() {
            let b = &mut self.bufs[k];
            if b.len() < d.size as usize {
                b.resize(d.size as usize, 0);
            }
            DatagramHeader { flags, flow: s.conn.flow, seq: d.seq as u32, send_ns: real }.emit(b);
            // A reverse flow's keep-alive proves it is ours (the latest consent probe).
            if let Some(p) = &proof {
                p.emit(&mut b[..d.size as usize]);
            }
        }
        let bufs: Vec<&[u8]> = due.iter().enumerate().map(|(k, d)| &self.bufs[k][..d.size as usize]).collect();
        let result = match (&s.sock, s.peer) {
            (Sock::Own(sock), _) if self.opts.gso.for_flow(s.conn.bulk()) && net::gso_fits(&bufs) => match net::send_gso(sock.as_raw_fd(), &bufs) {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                    // the interface refuses GSO (EIO: no checksum offload): plainly, from now on
                    self.opts.gso = horde_model::gso::Gso::Off;
                    net::send_batch(sock.as_raw_fd(), &bufs)
                }
                r => r,
            },
            (Sock::Own(sock), _) => net::send_batch(sock.as_raw_fd(), &bufs),
            // A player's stream goes only while the player keeps answering consent probes.
            (Sock::Listener(j), Some(peer)) if !self.udp_listeners[*j].1.may_send(mono, peer, s.conn.flow) => {
                self.slots[i].conn.stats.unsent += due.len() as u64;
                return due.len();
            }
            (Sock::Listener(j), Some(peer)) => net::send_batch_to(self.udp_listeners[*j].0.as_raw_fd(), &bufs, &vec![peer; bufs.len()]),
            _ => Err(io::ErrorKind::NotConnected.into()),
        };
        let sent = match result {
            Ok(k) => k.min(due.len()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(_) => {
                // Refused (nobody listening) or another hard error: this packet is lost.
                self.slots[i].conn.stats.errors += 1;
                1
            }
        };
        self.sent(i, due, sent, (real, mono))
    }

    /// Sends `due` on ICMP slot `i` as echo requests while the target's consent holds; returns
    /// how many the kernel took (the rest are requeued). Without consent they do not leave:
    /// counted as unsent.
    fn send_icmp(&mut self, i: usize, due: &[Departure]) -> usize {
        let (real, mono) = (real_ns(), mono_ns());
        match crate::icmp::send(&mut self.slots[i], due, &mut self.bufs, real, mono) {
            Some(sent) => self.sent(i, due, sent, (real, mono)),
            None => due.len(),
        }
    }

    /// The kernel took `sent` of `due` (sent at `real`, `mono`): they are accounted; the others
    /// stay first in line and leave on the next pass, late but not dropped.
    fn sent(&mut self, i: usize, due: &[Departure], sent: usize, (real, mono): (u64, u64)) -> usize {
        for d in &due[..sent] {
            self.account(i, d, real, mono);
        }
        self.slots[i].conn.requeue(&due[sent..]);
        sent
    }

    fn send_tcp(&mut self, i: usize, due: &[Departure]) {
        let real = self.slots[i].conn.carried_ns(real_ns());
        let mono = mono_ns();
        if !self.slots[i].conn.queue_apdus(due, real) {
            return;
        }
        for d in due {
            self.account(i, d, real, mono);
        }
        self.slots[i].flush();
    }

    pub(crate) fn account(&mut self, i: usize, d: &Departure, real: u64, mono: u64) {
        // A bulk departure leaves when the socket takes it: it has no lateness.
        if !self.slots[i].conn.bulk() {
            let late = mono.saturating_sub(self.t0_mono + d.at_ns);
            self.hist.saturating_record(late.max(1));
            let sec = (d.at_ns / 1_000_000_000) as usize;
            if sec < MAX_LATE_SECONDS {
                if self.sent_by_second.len() <= sec {
                    self.sent_by_second.resize(sec + 1, 0);
                }
                self.sent_by_second[sec] += 1;
            }
            if late > 1_000_000 {
                Progress::late(&self.opts.progress);
                self.late_over_1ms += 1;
                // Per second of the run, to set beside the host's steal in that second.
                let sec = (d.at_ns / 1_000_000_000) as usize;
                if sec < MAX_LATE_SECONDS {
                    if self.late_by_second.len() <= sec {
                        self.late_by_second.resize(sec + 1, 0);
                    }
                    self.late_by_second[sec] += 1;
                }
            }
        }
        let rec = self.slots[i].conn.sent(d, self.t0_real + d.at_ns, real);
        Progress::sent(&self.opts.progress, d.size as u64, d.class, real);
        self.sink.push(rec);
    }

    /// Stops reading and writing slot `i` and closes its socket (the peer closed, or it is not
    /// this run's). A server's connection that never got past its hello frees its slot.
    pub(crate) fn close(&mut self, i: usize) {
        let s = &mut self.slots[i];
        if let (Sock::Own(sock), Some(p)) = (&s.sock, &self.poll) {
            let _ = p.registry().deregister(&mut SourceFd(&sock.as_raw_fd()));
        }
        let never_granted = s.conn.role() == Role::Server && s.conn.awaiting_hello();
        s.conn.broke();
        s.sock = Sock::Closed;
        if never_granted {
            self.free_next.push(i);
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
            let backlog = self.slots.iter().any(|s| s.conn.wants_write());
            let rtt = self.slots.iter().any(|s| s.conn.expects_echoes() || s.conn.awaits_end_ack());
            let now = mono_ns();
            self.sink.tick(now);
            if (!backlog && !rtt && !two_way) || now >= deadline || stop.load(Ordering::Relaxed) {
                return;
            }
            self.poll_io(Duration::from_millis(((deadline - now) / 1_000_000).clamp(1, 50)));
        }
    }
}
