//! What a worker does when its sockets are readable or writable: accept connections (server
//! side), feed arriving bytes and datagrams to their connections, and let the gates decide
//! about UDP hellos. Every byte's meaning is the connection's ([`horde_proto::Conn`]) or the
//! gate's ([`horde_proto::Gate`]) business; this file only moves bytes.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use horde_proto::{Accepted, Close, Conn, Ctx, Event, Responder, RxMeta};
use horde_wire::control::Status;
use horde_wire::datagram::{CONTROL_FLAGS, FLAG_CONSENT, FLAG_HELLO};
use horde_wire::{DatagramHeader, Record, RecordKind};
use mio::unix::SourceFd;
use mio::{Interest, Token};
use socket2::Socket;

use crate::accept::{accept_or_shed, Accepted as Incoming};
use crate::clock::{mono_ns, real_ns};
use crate::early::Held;
use crate::logger::LogSink;
use crate::net;
use crate::sender::types::Progress;
use crate::slot::{Slot, Sock};
use crate::worker::{Ready, Worker, LISTEN_TOKEN, UDP_LISTEN_TOKEN};

/// A connection's view of its worker while it reads.
struct IoCtx<'a> {
    t0_real: u64,
    sink: &'a mut LogSink,
    responder: Option<&'a Arc<dyn Responder>>,
    progress: &'a Option<Arc<Progress>>,
}

impl Ctx for IoCtx<'_> {
    fn t0_real(&self) -> u64 {
        self.t0_real
    }

    fn record(&mut self, r: Record) {
        if r.kind == RecordKind::Received {
            Progress::received(self.progress, r.size as u64, r.t_a, r.t_b, r.tag);
        }
        self.sink.push(r);
    }

    fn respond(&mut self, flow: u32, tag: u32) -> Result<Accepted, Status> {
        self.responder.ok_or(Status::UnknownPlayer)?.on_hello(flow, tag)
    }
}

impl Worker {
    /// Handles what the sockets have ready within `timeout`, every event of the round. (Stopping
    /// a round when the next departure fell due was tried: when the worker is saturated it then
    /// reads only when it catches up, and arrivals wait in the socket for hundreds of ms, which
    /// the receiver's timestamps count as delay — bench/RESULTS-engine.md, section 6.)
    pub(crate) fn poll_io(&mut self, timeout: Duration) {
        self.free.append(&mut self.free_next);
        let Some(poll) = &mut self.poll else { return };
        if poll.poll(&mut self.events, Some(timeout)).is_err() {
            return;
        }
        self.ready.extend(self.events.iter().map(|e| Ready {
            token: e.token().0,
            readable: e.is_readable(),
            writable: e.is_writable(),
            closed: e.is_read_closed(),
        }));
        while let Some(r) = self.ready.pop_front() {
            self.on_ready(r);
        }
    }

    /// One socket's readiness. A token may name a slot closed (or reused) since it was polled:
    /// every handler then finds nothing to read or write.
    fn on_ready(&mut self, Ready { token: t, readable, writable, closed }: Ready) {
        if t >= LISTEN_TOKEN {
            self.accept(t - LISTEN_TOKEN);
        } else if t >= UDP_LISTEN_TOKEN {
            self.read_udp_listener(t - UDP_LISTEN_TOKEN);
        } else if t < self.slots.len() {
            if writable {
                self.slots[t].flush();
            }
            if readable {
                match self.slots[t].conn.transport() {
                    horde_model::Transport::Tcp => self.read_tcp(t, closed),
                    horde_model::Transport::Udp => self.read_udp(t),
                    horde_model::Transport::Icmp => crate::icmp::read(&mut self.slots[t], &mut self.read_buf, &mut self.sink),
                }
            }
        }
    }

    /// Server side: takes every pending connection. Nothing is sent until its hello arrives.
    fn accept(&mut self, j: usize) {
        loop {
            let (stream, peer) = match accept_or_shed(&self.listeners[j], &mut self.spare) {
                Incoming::Conn(s, p) => (s, p),
                Incoming::Shed => {
                    self.refusals.shed += 1;
                    continue;
                }
                Incoming::None => return,
            };
            let (max_pending, hello_timeout) = (self.opts.serve_limits.max_pending, self.opts.serve_limits.hello_timeout);
            // At the limit of connections without a hello, the oldest one makes room.
            while self.pending.len() >= max_pending {
                let Some(old) = self.pending.pop_front() else { break };
                let waiting = |s: &Self| s.slots[old].conn.awaiting_hello() && !matches!(s.slots[old].sock, Sock::Closed);
                if waiting(self) {
                    // A burst of connects is accepted before any hello is read: the oldest's
                    // hello may be in its socket already. Read it before judging the connection.
                    self.read_tcp(old, false);
                }
                if waiting(self) {
                    self.refusals.closed_before_hello += 1;
                    self.close(old);
                }
            }
            let sock = Socket::from(std::os::fd::OwnedFd::from(stream));
            let _ = sock.set_nodelay(true);
            let mut conn = Conn::server_tcp(format!("from {peer}"), self.opts.key.clone());
            conn.timers.arm(mono_ns(), Some(hello_timeout.as_nanos() as u64), None);
            let slot = Slot { conn, sock: Sock::Own(sock), dst: peer, peer: None, quickack: false };
            let i = match self.free.pop() {
                Some(i) => {
                    self.slots[i] = slot;
                    i
                }
                None => {
                    self.slots.push(slot);
                    self.slots.len() - 1
                }
            };
            let Some(poll) = &self.poll else { return };
            if poll.registry().register(&mut SourceFd(&self.slots[i].fd()), Token(i), Interest::READABLE | Interest::WRITABLE).is_err() {
                self.slots[i].sock = Sock::Closed;
                self.free_next.push(i);
                continue;
            }
            self.pending.push_back(i);
        }
    }

    /// Reads a TCP connection: echoes, the peer's APDUs, or (server side) the client's hello.
    /// A read shorter than the buffer emptied the socket: every segment that arrives later
    /// raises readiness again (Linux wakes the poll on each), so the read that would only say
    /// "would block" is skipped — unless the peer closed (`closed`), which raises nothing more
    /// and is read to its end.
    fn read_tcp(&mut self, i: usize, closed: bool) {
        loop {
            let n = {
                let Sock::Own(sock) = &self.slots[i].sock else { return };
                match (&*sock).read(&mut self.read_buf) {
                    Ok(0) => return self.close(i),
                    Ok(n) => {
                        if self.slots[i].quickack {
                            net::quickack(sock.as_raw_fd());
                        }
                        n
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(_) => return self.close(i),
                }
            };
            let now = real_ns();
            let Worker { slots, sink, opts, t0_real, read_buf, .. } = self;
            let mut ctx = IoCtx { t0_real: *t0_real, sink, responder: opts.responder.as_ref(), progress: &opts.progress };
            match slots[i].conn.on_stream(now, &read_buf[..n], &mut ctx) {
                Ok(Some(Event::Granted)) => {
                    self.log_ends(i);
                    if let Some(p) = &self.opts.progress {
                        p.connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    self.schedule(i);
                    self.slots[i].flush();
                }
                Ok(_) => {}
                Err(c) => {
                    match c {
                        Close::BadMac => self.refusals.bad_mac += 1,
                        Close::Refused(_) => self.refusals.refused += 1,
                        Close::NotHorde(_) => {}
                    }
                    if self.slots[i].conn.role() == horde_proto::Role::Server && self.slots[i].conn.awaiting_hello() {
                        self.refusals.closed_before_hello += 1;
                    }
                    return self.close(i);
                }
            }
            if n < self.read_buf.len() && !closed {
                return;
            }
        }
    }

    /// Reads a UDP client's socket: echoes of our datagrams, the peer's datagrams in a two-way
    /// run, and the answers to our hellos.
    fn read_udp(&mut self, i: usize) {
        let Some(rx) = &mut self.rx else { return };
        let fd = self.slots[i].fd();
        // past a pending error: a refused datagram's ICMP error is reported before what waits
        while let Ok(n) = rx.recv_queued(fd) {
            if n == 0 {
                break;
            }
            let now = real_ns();
            for k in 0..n {
                let info = rx.info(k);
                let meta = RxMeta { len: info.len, kernel_ns: info.kernel_ns, tos: info.tos, ttl: info.ttl };
                match self.slots[i].conn.on_datagram(now, rx.data(k), &meta) {
                    Ok(Some(rec)) => {
                        if rec.kind == RecordKind::Received {
                            Progress::received(&self.opts.progress, rec.size as u64, rec.t_a, rec.t_b, rec.tag);
                        }
                        self.sink.push(rec);
                    }
                    Ok(None) => {}
                    // The receiver refused this flow after validating it: nothing more to do.
                    Err(_) => self.slots[i].conn.stats.errors += 1,
                }
                // The peer asks whether we still want its traffic: yes, while we do.
                if let Some(reply) = self.slots[i].conn.take_consent_reply() {
                    let _ = self.slots[i].send(&reply);
                }
            }
        }
    }

    /// Server side over UDP: hellos go to the gate; data counts only from admitted players.
    fn read_udp_listener(&mut self, j: usize) {
        let fd = self.udp_listeners[j].0.as_raw_fd();
        loop {
            let Some(rx) = &mut self.rx else { return };
            let n = match rx.recv_queued(fd) {
                Ok(n) if n > 0 => n,
                _ => return,
            };
            let now = real_ns();
            let batch: Vec<(Vec<u8>, net::RxInfo)> = (0..n)
                .map(|k| {
                    (
                        if rx.data(k).get(3).is_some_and(|f| f & (FLAG_HELLO | FLAG_CONSENT) != 0) {
                            rx.data(k).to_vec()
                        } else {
                            rx.data(k)[..20.min(rx.data(k).len())].to_vec()
                        },
                        rx.info(k),
                    )
                })
                .collect();
            for (bytes, info) in batch {
                let Some(from) = info.from else { continue };
                let Ok(h) = DatagramHeader::parse(&bytes) else {
                    self.refusals.unadmitted += 1;
                    continue;
                };
                if h.flags & FLAG_HELLO != 0 {
                    self.udp_hello(j, from, &bytes);
                    continue;
                }
                if h.flags & FLAG_CONSENT != 0 {
                    if !self.udp_listeners[j].1.on_consent(from, &bytes) {
                        self.refusals.unadmitted += 1;
                    }
                    continue;
                }
                match self.udp_peers.get(&from) {
                    Some(&i) if self.slots[i].conn.flow == h.flow && h.flags & CONTROL_FLAGS == 0 => {
                        let meta = RxMeta { len: info.len, kernel_ns: info.kernel_ns, tos: info.tos, ttl: info.ttl };
                        let rec = self.slots[i].conn.on_peer_datagram(now, &h, &meta);
                        Progress::received(&self.opts.progress, info.len as u64, rec.t_a, rec.t_b, rec.tag);
                        self.sink.push(rec);
                    }
                    // Perhaps it overtook its player's admitting hello: held a moment.
                    None if h.flags & CONTROL_FLAGS == 0 => {
                        let meta = RxMeta { len: info.len, kernel_ns: info.kernel_ns, tos: info.tos, ttl: info.ttl };
                        let held = Held { from, header: h, meta, now_real: now, mono: mono_ns(), sock: j, bytes: None };
                        if !self.early.hold(held) {
                            self.refusals.unadmitted += 1;
                        }
                    }
                    _ => self.refusals.unadmitted += 1,
                }
            }
        }
    }

    fn udp_hello(&mut self, j: usize, from: SocketAddr, bytes: &[u8]) {
        let (listener, gate) = &mut self.udp_listeners[j];
        let fd = listener.as_raw_fd();
        let before = gate.stats;
        let responder = self.opts.responder.as_ref();
        let g = gate.greet(mono_ns(), from, bytes, |h| Ok((responder.ok_or(Status::UnknownPlayer)?.on_hello(h.header.flow, h.header.seq)?, true)));
        if let Some((h, acc)) = g.admitted {
            let conn = Conn::server_udp(format!("player {}", h.header.seq >> 8), h.header.flow, acc, h.header.send_ns, self.t0_real);
            let i = self.slots.len();
            self.slots.push(Slot { conn, sock: Sock::Listener(j), dst: from, peer: Some(from), quickack: false });
            self.udp_peers.insert(from, i);
            self.log_ends(i);
            if let Some(p) = &self.opts.progress {
                p.connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            self.schedule(i);
            for x in self.early.take(from, h.header.flow) {
                let rec = self.slots[i].conn.on_peer_datagram(x.now_real, &x.header, &x.meta);
                Progress::received(&self.opts.progress, x.meta.len as u64, rec.t_a, rec.t_b, rec.tag);
                self.sink.push(rec);
                self.refusals.admitted_late += 1;
            }
        }
        let reply = g.reply;
        let gate = &self.udp_listeners[j].1;
        let after = gate.stats;
        self.refusals.challenges += after.challenges - before.challenges;
        self.refusals.challenge_bytes += after.challenge_bytes - before.challenge_bytes;
        self.refusals.bad_mac += after.bad_mac - before.bad_mac;
        self.refusals.dropped_hellos += (after.malformed - before.malformed) + (after.over_budget - before.over_budget);
        self.refusals.refused += after.refused - before.refused;
        if let Some(r) = reply {
            // Never more bytes than the hello that asked (the gate's replies are 21 or 36 bytes;
            // a hello is at least 64).
            debug_assert!(r.len() <= bytes.len());
            let _ = net::send_batch_to(fd, &[&r], &[from]);
        }
    }
}
