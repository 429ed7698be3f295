//! A connection of a worker with its socket ([`Slot`]), and what one worker starts with
//! ([`Share`]): what a slot does on its own socket (flush its stream, send its hello, send its
//! end message) is here; the worker's loop decides when.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use horde_model::Transport;
use horde_proto::{Conn, GreetState, Role};
use horde_wire::signal::{EndReason, END_COPIES};
use mio::net::TcpListener;
use socket2::Socket;

use crate::clock::real_ns;
use crate::sender::types::{FlowSent, Rtt};

/// Where a connection's bytes go.
pub enum Sock {
    Own(Socket),
    /// A UDP player of a server side: sent through the shared listening socket `usize`.
    Listener(usize),
    Closed,
}

/// One connection and its socket.
pub struct Slot {
    pub conn: Conn,
    pub sock: Sock,
    /// Where it sends (a client) or who it serves (a server side).
    pub dst: SocketAddr,
    /// A server side's UDP player: its address.
    pub peer: Option<SocketAddr>,
    /// TCP_QUICKACK again after every read (`send --quickack`).
    pub quickack: bool,
}

impl Slot {
    pub fn fd(&self) -> RawFd {
        match &self.sock {
            Sock::Own(s) => s.as_raw_fd(),
            _ => -1,
        }
    }

    /// Sends one datagram on the slot's own (connected) socket.
    pub fn send(&self, b: &[u8]) -> io::Result<usize> {
        match &self.sock {
            Sock::Own(s) => s.send(b),
            _ => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Receives one datagram from the slot's own socket, without blocking.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.sock {
            Sock::Own(s) => (&*s).read(buf),
            _ => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Whether a greeting UDP flow has its cookie (or more).
    pub fn validated(&self) -> bool {
        self.conn.greeter().is_none_or(|g| !matches!(g.state(), GreetState::Asking | GreetState::GaveUp))
    }

    /// Writes what the kernel takes of its TCP backlog.
    pub(crate) fn flush(&mut self) {
        let Sock::Own(sock) = &self.sock else { return };
        while self.conn.wants_write() {
            match (&*sock).write(self.conn.out()) {
                Ok(0) => self.conn.broke(),
                Ok(k) => self.conn.wrote(k),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.conn.broke(),
            }
        }
    }

    /// Sends its greeter's hello if one is due at `now` (monotonic ns).
    pub(crate) fn send_hello(&mut self, now: u64) {
        if let Some(h) = self.conn.poll_hello(now) {
            if self.send(&h).is_err() {
                self.conn.stats.errors += 1;
            }
        }
    }

    /// Its flow has ended (its schedule ran out, or the sender was stopped): with
    /// `end_messages` (`SendOptions::end_messages`), its end message with what it sent goes to
    /// the Horde receiver it went to — three datagram copies over UDP, a signal frame after its
    /// last APDU over TCP. ICMP flows (the target's kernel answers) and reverse flows send none.
    pub(crate) fn end(&mut self, reason: EndReason, end_messages: bool) {
        let c = &self.conn;
        let pending_bulk = c.bulk() && !c.bulk_done();
        if !end_messages || c.role() != Role::Client || c.reverse() || pending_bulk || c.connect_at.is_some() {
            return;
        }
        let speaks = match c.transport() {
            Transport::Udp => c.greeter().is_some(),
            Transport::Tcp => !c.broken(),
            Transport::Icmp => false,
        };
        if !speaks || !self.conn.end.mark_ended() {
            return;
        }
        let at = real_ns();
        if self.conn.transport() == Transport::Udp {
            let m = self.conn.end_message(reason, at);
            for _ in 0..END_COPIES {
                let _ = self.send(&m);
            }
        } else if self.conn.queue_end(reason, at) {
            self.flush();
        }
    }

    pub(crate) fn report(&self) -> FlowSent {
        let s = &self.conn.stats;
        FlowSent {
            id: self.conn.flow,
            name: self.conn.name.clone(),
            transport: self.conn.transport().name().to_string(),
            dst: self.peer.unwrap_or(self.dst),
            bulk: self.conn.bulk(),
            reverse: self.conn.reverse(),
            packets: s.packets,
            bytes: s.bytes,
            clamped: s.clamped,
            errors: s.errors,
            echoes: s.echoes,
            rtt: (s.echoes > 0).then(|| Rtt {
                min_us: s.rtt_min_ns as f64 / 1e3,
                mean_us: s.rtt_sum_ns as f64 / s.echoes as f64 / 1e3,
                max_us: s.rtt_max_ns as f64 / 1e3,
            }),
            received: s.received,
            received_bytes: s.received_bytes,
            received_first_ns: s.received_first_ns,
            received_last_ns: s.received_last_ns,
            mismatched: self.conn.mismatched(),
            unsent: s.unsent,
            first_ns: s.first_ns,
            last_ns: s.last_ns,
            receiver: self.conn.end.acked().map(|(packets, bytes)| crate::sender::types::ReceiverSaid {
                packets,
                bytes,
                stopped: self.conn.end.receiver_error().is_some(),
            }),
        }
    }
}

/// What one worker starts with.
#[derive(Default)]
pub struct Share {
    pub slots: Vec<Slot>,
    pub tcp: Vec<TcpListener>,
    pub udp: Vec<Socket>,
    /// Server side: the cookie secret all workers' gates share.
    pub secret: [u8; 32],
}
