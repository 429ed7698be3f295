//! One flow or connection of the engine without its socket: what it sends and when, how its
//! bytes are framed, and what the bytes that arrive on it mean. Bytes and times in; departures,
//! bytes to write and log records out. The engine's workers are its I/O shell (sockets, pacing,
//! batching); tests drive it with no socket at all (`tests/it/conn.rs`).
//!
//! Three roles:
//! - **client**: a flow of `horde send` or a player of `horde run`. It sends its own departures;
//!   over TCP its stream starts with a signed hello; over UDP a [`Greeter`] validates its address
//!   with the receiver first. What comes back is echoes (round-trip mode) or the peer's own
//!   traffic (two-way runs), classified by the peer's regenerated schedule ([`Mirror`]).
//! - **server**: a connection accepted by a scenario's server side. It sends nothing until the
//!   client's hello arrives, is signed with the run key and names a player the [`Responder`]
//!   grants; then it sends that player's server→client schedule, shifted onto its own clock.
//! - **sink**: a TCP connection of `horde recv`: it logs the APDUs of a signed hello's flow and,
//!   when the hello asks for it, mirrors every byte back within a bounded buffer.

use std::collections::VecDeque;

use horde_model::{Departure, Flow, Meter, Transport};
use horde_wire::control::Status;
use horde_wire::datagram::{CONTROL_FLAGS, FLAG_ECHO_REPLY, FLAG_REVERSE, FLAG_REVERSE_DATA};
use horde_wire::log::FLAG_CLAMPED;
use horde_wire::signal::{EndReason, END_LEN};
use horde_wire::stream::{HELLO_ECHO, HELLO_REVERSE};
use horde_wire::{DatagramHeader, Record, RecordKind, StreamEvent, StreamHello};

use crate::auth::RunKey;
use crate::greeter::{GreetEvent, GreetState, Greeter};
use crate::mirror::{Mirror, Source};

mod contract;
pub mod signal;
mod stats;
mod stream;
mod timers;
pub use contract::{Accepted, Close, Ctx, Event, Responder};
pub use signal::Ending;
pub use stats::{datagram_record, ConnStats, RxMeta};
use stream::{ReverseState, Stream};
pub use timers::{Expiry, Timers};

/// The most bytes a sink holds for echoing while its peer does not read them: 1 MiB (a second
/// of a 8 Mbit/s round-trip flow). Past it the sink stops reading (TCP pushes back on the sender);
/// a peer that never reads is closed after [`ECHO_STALL_NS`].
pub const ECHO_LIMIT: usize = 1 << 20;
/// How long an echo backlog may stay full before the sink closes the connection: 10 s.
pub const ECHO_STALL_NS: u64 = 10_000_000_000;
/// How long a receiver keeps sending a reverse flow after its last keep-alive, ns.
pub const REVERSE_CONSENT_NS: u64 = horde_model::flow::REVERSE_CONSENT_MS * 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
    Sink,
}

pub struct Conn {
    pub flow: u32,
    pub tag: u32,
    pub name: String,
    role: Role,
    transport: Transport,
    meter: Meter,
    tos: Option<u8>,
    ttl: Option<u8>,
    key: RunKey,
    sched: Option<Source>,
    /// Added to every departure time: moves a source's time base onto the worker's.
    shift_ns: i64,
    pending: VecDeque<Departure>,
    /// A player's connection: its departures leave only while the roster has it online.
    presence: Option<horde_model::roster::Presence>,
    mirror: Option<Mirror>,
    stream: Option<Stream>,
    greeter: Option<Greeter>,
    /// Not connected yet: connect at this time (ns after the start).
    pub connect_at: Option<u64>,
    /// No departure is sent at or after this time (ns after the start).
    deadline_ns: Option<u64>,
    /// Bulk: departures leave when the socket takes them, stamped with that time.
    bulk: bool,
    /// Bulk, and its start has come: the worker pumps it instead of scheduling it.
    bulk_started: bool,
    /// Client: the receiver sends bulk back; our own departures are keep-alives.
    reverse: bool,
    /// Client over UDP: the answer to the peer's latest consent probe, to send.
    consent_reply: Option<[u8; horde_wire::control::CONSENT_LEN]>,
    /// Client over UDP: the latest probe received (a reverse flow's keep-alives carry it).
    proof: Option<horde_wire::control::KeepAliveProof>,
    /// Client over ICMP: the target's consent, kept by its echo replies ([`crate::echo`]).
    pub echo: Option<crate::echo::EchoConsent>,
    /// Its end: our end message (client) or the sender's (sink), and what the receiver said.
    pub end: Ending,
    pub stats: ConnStats,
    /// Its deadlines (hello, stalled echo backlog, idleness); the shells arm and touch them.
    pub timers: Timers,
}

impl Conn {
    /// A client flow. `source`: its departures (a player's schedule, or the flow's own);
    /// `mirror`: the peer's schedule in a two-way run; `greet`: validate the address of a UDP
    /// flow with the receiver before sending (every flow to a Horde receiver does).
    pub fn client(flow: &Flow, source: Source, mirror: Option<Source>, key: RunKey, greet: bool) -> Conn {
        let tcp = flow.transport == Transport::Tcp;
        let greeter = (flow.transport == Transport::Udp && greet).then(|| {
            // The signed hello says what the flow wants back: a receiver sends reverse bulk
            // only to a flow whose hello asked for it.
            let flags = if flow.reverse {
                FLAG_REVERSE
            } else if flow.meter == Meter::Rtt {
                horde_wire::datagram::FLAG_ECHO_REQUEST
            } else {
                0
            };
            Greeter::new(key.clone(), flags, flow.id, flow.tag, None)
        });
        Conn {
            flow: flow.id,
            tag: flow.tag,
            name: flow.name.clone(),
            role: Role::Client,
            transport: flow.transport,
            meter: flow.meter,
            tos: flow.tos,
            ttl: flow.ttl,
            key,
            sched: Some(source),
            shift_ns: 0,
            pending: VecDeque::new(),
            presence: None,
            mirror: mirror.map(Mirror::new),
            stream: tcp.then(|| Stream::new(false)),
            greeter,
            connect_at: None,
            deadline_ns: None,
            bulk: flow.bulk && !flow.reverse,
            bulk_started: false,
            reverse: flow.reverse,
            consent_reply: None,
            proof: None,
            echo: None,
            end: Ending::default(),
            stats: ConnStats::default(),
            timers: Timers::default(),
        }
    }

    /// A TCP connection accepted by a scenario's server side, waiting for its client's hello.
    pub fn server_tcp(name: String, key: RunKey) -> Conn {
        Conn { stream: Some(Stream::new(true)), ..Conn::bare(Role::Server, Transport::Tcp, name, key) }
    }

    /// A UDP player admitted by a scenario's server side (its hello passed the gate and the
    /// responder): `base_ns` is the client's start, `t0_real` ours.
    pub fn server_udp(name: String, flow: u32, accepted: Accepted, base_ns: u64, t0_real: u64) -> Conn {
        let mut c = Conn::bare(Role::Server, Transport::Udp, name, RunKey::OPEN);
        c.grant(flow, accepted, base_ns, t0_real);
        c
    }

    /// A TCP connection accepted by `horde recv`.
    pub fn sink_tcp(name: String, key: RunKey) -> Conn {
        Conn { stream: Some(Stream::new(true)), ..Conn::bare(Role::Sink, Transport::Tcp, name, key) }
    }

    fn bare(role: Role, transport: Transport, name: String, key: RunKey) -> Conn {
        Conn {
            flow: 0,
            tag: 0,
            name,
            role,
            transport,
            meter: Meter::Owd,
            tos: None,
            ttl: None,
            key,
            sched: None,
            shift_ns: 0,
            pending: VecDeque::new(),
            presence: None,
            mirror: None,
            stream: None,
            greeter: None,
            connect_at: None,
            deadline_ns: None,
            bulk: false,
            bulk_started: false,
            reverse: false,
            consent_reply: None,
            proof: None,
            echo: None,
            end: Ending::default(),
            stats: ConnStats::default(),
            timers: Timers::default(),
        }
    }

    /// A player's connection under a roster: `p` decides which of its own departures leave,
    /// and a copy which of the peer's (the mirror) did.
    pub fn steer_by(&mut self, p: Option<horde_model::roster::Presence>) {
        if let Some(p) = &p {
            self.mirror = self.mirror.take().map(|m| m.with_presence(Some(horde_model::roster::Presence::new(p.roster().clone(), p.player()))));
        }
        self.presence = p;
    }

    /// Whether departure `d` (due now) leaves, renumbered; always without a roster.
    fn admit(&mut self, d: Departure) -> Option<Departure> {
        let sched = (d.at_ns as i64 - self.shift_ns).max(0) as u64;
        match self.presence.as_mut() {
            Some(p) => p.admit(d, sched),
            None => Some(d),
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Whether anything arrives on this connection that must be read (TCP always; UDP clients
    /// that expect echoes, the peer's traffic or handshake answers).
    pub fn reads(&self) -> bool {
        self.stream.is_some() || self.meter == Meter::Rtt || self.mirror.is_some() || self.greeter.is_some() || self.reverse || self.echo.is_some()
    }

    /// A round-trip client still missing echoes of what it sent.
    pub fn expects_echoes(&self) -> bool {
        self.role == Role::Client && self.meter == Meter::Rtt && self.stats.echoes < self.stats.packets
    }

    /// Received APDUs that did not match the peer's regenerated schedule (must be 0).
    pub fn mismatched(&self) -> u64 {
        self.mirror.as_ref().map_or(0, |m| m.mismatched)
    }

    /// No departure at or after `deadline_ns` (ns after the start): a flow's duration, or the
    /// end of a run, holds whatever happens.
    pub fn set_deadline(&mut self, deadline_ns: Option<u64>) {
        self.deadline_ns = deadline_ns;
    }

    // ---- start and handshake ----------------------------------------------------------------

    /// The worker's clock starts at `t0_real`: a TCP client queues its signed hello; a UDP
    /// client's greeter may now ask to be admitted with that base.
    pub fn start(&mut self, t0_real: u64) {
        if let Some(g) = &mut self.greeter {
            g.set_base(t0_real);
        }
        if self.role == Role::Client && self.stream.is_some() {
            let flags = if self.reverse {
                HELLO_REVERSE
            } else if self.meter == Meter::Rtt {
                HELLO_ECHO
            } else {
                0
            };
            if let Some(s) = &mut self.stream {
                s.queue_hello(&self.key, flags, self.flow, self.tag, t0_real);
            }
        }
    }

    /// The greeter of a UDP client, if it validates its address.
    pub fn greeter(&self) -> Option<&Greeter> {
        self.greeter.as_ref()
    }

    /// A hello datagram due at `now_mono` (the greeter's retries).
    pub fn poll_hello(&mut self, now_mono: u64) -> Option<[u8; horde_wire::control::HELLO_DATAGRAM_LEN]> {
        self.greeter.as_mut()?.poll_transmit(now_mono)
    }

    /// Whether the flow may send its departures: a UDP client that greets must have been
    /// accepted (data before that would be dropped as not the run's).
    pub fn admitted(&self) -> bool {
        self.greeter.as_ref().is_none_or(|g| g.state() == GreetState::Accepted) && self.echo.as_ref().is_none_or(|e| e.admitted())
    }

    // ---- departures --------------------------------------------------------------------------

    /// When the next departure is due (ns after the start), drawing it from the source.
    pub fn next_at(&mut self) -> Option<u64> {
        if self.bulk_started || self.end.receiver_error().is_some() {
            return None;
        }
        if self.pending.is_empty() {
            let mut d = self.sched.as_mut()?.next()?;
            d.at_ns = (d.at_ns as i64 + self.shift_ns).max(0) as u64;
            self.pending.push_back(d);
        }
        self.pending.front().map(|d| d.at_ns)
    }

    /// Moves the departures due at `now_rel` (ns after the start) into `out`, at most its
    /// length. Past the deadline the flow ends: what was still due is counted as unsent.
    pub fn take_due(&mut self, now_rel: u64, out: &mut [Departure]) -> usize {
        if self.deadline_ns.is_some_and(|d| now_rel >= d) {
            self.end_at_deadline();
            return 0;
        }
        let mut n = 0;
        while n < out.len() {
            match self.next_at() {
                Some(at) if at <= now_rel => {
                    let d = self.pending.pop_front().expect("peeked");
                    let Some(mut d) = self.admit(d) else { continue };
                    if self.reverse && self.transport == Transport::Tcp && d.seq > 0 {
                        // The first APDU told the receiver the size; the rest only keep consent.
                        d.size = Transport::Tcp.min_size();
                    }
                    out[n] = d;
                    n += 1;
                }
                _ => break,
            }
        }
        n
    }

    /// Counts the departures scheduled before the deadline but not sent, and stops the flow.
    fn end_at_deadline(&mut self) {
        if self.bulk {
            // Nothing is ever late in bulk: what the socket did not take was never due.
            self.pending.clear();
            self.sched = None;
            return;
        }
        let deadline = self.deadline_ns.unwrap_or(u64::MAX);
        while let Some(at) = self.next_at() {
            if at >= deadline {
                break;
            }
            let d = self.pending.pop_front().expect("peeked");
            self.stats.unsent += self.admit(d).is_some() as u64;
        }
        self.pending.clear();
        self.sched = None;
    }

    /// A bulk flow: sends as fast as its socket takes departures (see [`Conn::take_bulk`]).
    pub fn bulk(&self) -> bool {
        self.bulk
    }

    /// A reverse flow: the receiver sends bulk back; its own departures are keep-alives.
    pub fn reverse(&self) -> bool {
        self.reverse
    }

    /// The bulk flow's start has come (its first departure was due): from now on the worker
    /// pumps it with [`Conn::take_bulk`] whenever its socket can take more.
    pub fn begin_bulk(&mut self) {
        self.bulk_started = self.bulk;
    }

    /// Whether a started bulk flow has nothing left to send (budget spent, deadline passed).
    pub fn bulk_done(&self) -> bool {
        self.bulk_started && self.sched.is_none() && self.pending.is_empty()
    }

    /// Up to `out.len()` departures of a started bulk flow, each stamped `now_rel` (ns after the
    /// start): they leave now, so they are never late. Past the deadline the flow ends.
    pub fn take_bulk(&mut self, now_rel: u64, out: &mut [Departure]) -> usize {
        if self.deadline_ns.is_some_and(|d| now_rel >= d) {
            self.end_at_deadline();
            return 0;
        }
        let mut n = 0;
        while n < out.len() {
            let d = match self.pending.pop_front() {
                Some(d) => d,
                None => match self.sched.as_mut().and_then(|s| s.next()) {
                    Some(d) => d,
                    None => {
                        self.sched = None;
                        break;
                    }
                },
            };
            out[n] = Departure { at_ns: now_rel, ..d };
            n += 1;
        }
        n
    }

    /// Puts departures the kernel did not take back first in line.
    pub fn requeue(&mut self, unsent: &[Departure]) {
        for d in unsent.iter().rev() {
            self.pending.push_front(*d);
        }
    }

    /// Accounts a departure that left at `real` (scheduled at `sched_real`): its log record.
    pub fn sent(&mut self, d: &Departure, sched_real: u64, real: u64) -> Record {
        if self.stats.packets == 0 {
            self.stats.first_ns = real;
        }
        self.stats.last_ns = real;
        self.stats.packets += 1;
        self.stats.bytes += d.size as u64;
        self.stats.clamped += d.clamped as u64;
        Record {
            flow: self.flow,
            size: d.size,
            seq: d.seq,
            t_a: sched_real,
            t_b: real,
            tag: self.tag | d.class as u32,
            tos: self.tos.unwrap_or(0),
            ttl: self.ttl.unwrap_or(0),
            kind: RecordKind::Sent,
            flags: if d.clamped { FLAG_CLAMPED } else { 0 },
        }
    }

    /// The flags of this flow's data datagrams.
    pub fn datagram_flags(&self) -> u8 {
        if self.reverse {
            FLAG_REVERSE
        } else if self.meter == Meter::Rtt {
            horde_wire::datagram::FLAG_ECHO_REQUEST
        } else {
            0
        }
    }

    // ---- TCP output --------------------------------------------------------------------------

    /// Appends due APDUs to the stream (an APDU of N bytes is N bytes on the stream). Returns
    /// false if the stream is broken (the departures count as errors, not sent).
    /// The send time an APDU leaving at `real` carries (stream: µs from its base; datagram: `real`), which the sender logs too.
    pub fn carried_ns(&self, real: u64) -> u64 {
        self.stream.as_ref().filter(|s| real >= s.base_ns).map_or(real, |s| s.base_ns + (real - s.base_ns) / 1000 * 1000)
    }

    pub fn queue_apdus(&mut self, due: &[Departure], real: u64) -> bool {
        let Some(s) = &mut self.stream else { return false };
        if s.broken {
            self.stats.errors += due.len() as u64;
            return false;
        }
        for d in due {
            s.queue_apdu(d.size as u16, real);
        }
        true
    }

    /// Bytes waiting to be written to the stream.
    pub fn out(&self) -> &[u8] {
        self.stream.as_ref().map_or(&[], |s| &s.out[s.sent_upto..])
    }

    /// `k` bytes of [`Conn::out`] were written.
    pub fn wrote(&mut self, k: usize) {
        if let Some(s) = &mut self.stream {
            s.wrote(k);
        }
    }

    /// The stream cannot be written any more (the peer went away).
    pub fn broke(&mut self) {
        if let Some(s) = &mut self.stream {
            s.broke();
        }
    }

    pub fn broken(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.broken)
    }

    /// Whether the stream has bytes waiting for writability.
    pub fn wants_write(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| !s.broken && s.sent_upto < s.out.len())
    }

    /// Sink: the echo backlog is full; stop reading until the peer takes some.
    pub fn echo_backlog_full(&self) -> bool {
        self.out().len() >= ECHO_LIMIT
    }

    /// Sink: the peer's hello asked for bulk back.
    pub fn reverse_requested(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.reverse.is_some())
    }

    /// Sink: whether a reverse flow should get more bulk at `now` (real ns): its size is known
    /// and its last keep-alive is less than [`REVERSE_CONSENT_NS`] old.
    pub fn reverse_wanted(&self, now: u64) -> bool {
        self.stream.as_ref().is_some_and(|s| s.reverse_wanted(now))
    }

    /// Sink: queues reverse APDUs stamped `now` until `limit` bytes wait to be written; returns
    /// the APDUs and bytes queued.
    pub fn fill_reverse(&mut self, now: u64, limit: usize) -> (u64, u64) {
        self.stream.as_mut().map_or((0, 0), |s| s.fill_reverse(now, limit))
    }

    /// Sink: the peer's hello asked for its bytes to be mirrored back.
    pub fn echoing(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.echo)
    }

    /// Server or sink: still waiting for the peer's hello.
    pub fn awaiting_hello(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.awaiting_hello)
    }

    // ---- input -------------------------------------------------------------------------------

    /// Feeds bytes read from the stream at `now` (real ns). Records go to `ctx`.
    pub fn on_stream(&mut self, now: u64, bytes: &[u8], ctx: &mut dyn Ctx) -> Result<Option<Event>, Close> {
        let Some(mut s) = self.stream.take() else { return Ok(None) };
        let echoing = s.echo;
        s.fed += bytes.len() as u64;
        let mut events: Vec<StreamEvent> = Vec::new();
        let r = s.decoder.feed(bytes, |ev| events.push(ev));
        let mut out = Ok(None);
        for ev in events {
            let step = match ev {
                StreamEvent::Hello(h) => self.on_stream_hello(&mut s, h, now, ctx),
                StreamEvent::End(e) => Ok((self.role == Role::Sink && self.end.on_end(&e, &self.key, self.flow)).then(|| {
                    ctx.record(e.record(now, self.tag));
                    Event::Ended
                })),
                StreamEvent::UnknownSignal { .. } => Ok(None),
                StreamEvent::Apdu { seq, len, send_ns } => {
                    if let Some(r) = &mut s.reverse {
                        r.size = if r.size == 0 { len } else { r.size };
                        r.heard_ns = now;
                    }
                    self.on_apdu(seq, len, send_ns, now, ctx);
                    Ok(None)
                }
            };
            match step {
                Ok(Some(e)) => out = Ok(Some(e)),
                Ok(None) => {}
                Err(c) => {
                    out = Err(c);
                    break;
                }
            }
        }
        if out.is_ok() {
            if let Err(e) = r {
                out = Err(Close::NotHorde(e));
            }
        }
        if out.is_ok() {
            s.mirror(bytes, echoing);
        }
        self.stream = Some(s);
        out
    }

    fn on_stream_hello(&mut self, s: &mut Stream, h: StreamHello, now: u64, ctx: &mut dyn Ctx) -> Result<Option<Event>, Close> {
        match self.role {
            // The server's hello (two-way), or our own echoed back (round trip).
            Role::Client => {
                if (self.mirror.is_some() || self.reverse) && !self.key.verify_tcp_hello(&h.signed(), &h.mac) {
                    return Err(Close::BadMac);
                }
                Ok(None)
            }
            Role::Server if s.awaiting_hello => {
                s.awaiting_hello = false;
                if !self.key.verify_tcp_hello(&h.signed(), &h.mac) {
                    return Err(Close::BadMac);
                }
                let accepted = ctx.respond(h.flow, h.tag).map_err(Close::Refused)?;
                self.grant(h.flow, accepted, h.base_ns, ctx.t0_real());
                // Answer with our own hello only now: nothing goes to a peer before its hello
                // proved it belongs to the run.
                s.queue_hello(&self.key, 0, self.flow, self.tag, ctx.t0_real());
                Ok(Some(Event::Granted))
            }
            Role::Server => Ok(None),
            Role::Sink => {
                s.awaiting_hello = false;
                if !self.key.verify_tcp_hello(&h.signed(), &h.mac) {
                    return Err(Close::BadMac);
                }
                self.flow = h.flow;
                self.tag = h.tag;
                s.hello = Some(h);
                if h.flags & HELLO_REVERSE != 0 {
                    // Answer with our own signed hello: the client's decoder takes its base.
                    s.queue_hello(&self.key, 0, h.flow, h.tag, now);
                    s.reverse = Some(ReverseState { size: 0, heard_ns: now });
                    return Ok(Some(Event::ReverseRequested));
                }
                s.echo = h.flags & HELLO_ECHO != 0;
                Ok(s.echo.then_some(Event::EchoRequested))
            }
        }
    }

    /// Server role: the responder granted the hello; `base_ns` is the client's start.
    fn grant(&mut self, flow: u32, a: Accepted, base_ns: u64, t0_real: u64) {
        self.flow = flow;
        self.tag = a.tag;
        self.name = format!("player {}", a.tag >> 8);
        self.sched = Some(a.source);
        self.mirror = a.mirror.map(Mirror::new);
        self.steer_by(a.presence);
        // The client's departures count from its start, ours from our own.
        self.shift_ns = base_ns as i64 - t0_real as i64;
    }

    fn on_apdu(&mut self, seq: u64, len: u16, send_ns: u64, now: u64, ctx: &mut dyn Ctx) {
        let (tag, kind) = if self.role == Role::Client && self.meter == Meter::Rtt {
            self.stats.echo(now.saturating_sub(send_ns));
            (self.tag, RecordKind::Echoed)
        } else {
            self.stats.arrived(len as u64, now);
            (self.classify(seq, len as u32), RecordKind::Received)
        };
        // TCP gives no per-APDU TOS/TTL: logged as unknown (255 / 0).
        ctx.record(Record { flow: self.flow, size: len as u32, seq, t_a: send_ns, t_b: now, tag, tos: 255, ttl: 0, kind, flags: 0 });
    }

    /// The record tag of arrival `seq` of `len` bytes: the peer's departure names its class.
    fn classify(&mut self, seq: u64, len: u32) -> u32 {
        match self.mirror.as_mut().and_then(|m| m.classify(seq, len)) {
            Some(class) => (self.tag & !0xFF) | class as u32,
            None => self.tag,
        }
    }

    /// Feeds a datagram that arrived on a UDP client's socket (`now`: real ns). Returns its log
    /// record if it is traffic of this flow; handshake answers are consumed.
    pub fn on_datagram(&mut self, now: u64, bytes: &[u8], meta: &RxMeta) -> Result<Option<Record>, Status> {
        if let Some(stop) = self.end.on_signal(bytes, &self.key, self.flow, self.role == Role::Client) {
            if stop {
                self.pending.clear();
            }
            return Ok(None);
        }
        if crate::consent::is_consent(bytes) {
            if self.wants_traffic() {
                if let Some(reply) = crate::consent::answer(bytes, self.flow) {
                    let p = horde_wire::control::ConsentProbe::parse(&reply).expect("an answer parses");
                    self.proof = Some(horde_wire::control::KeepAliveProof { number: p.number, nonce: p.nonce });
                    self.consent_reply = Some(reply);
                }
            }
            return Ok(None);
        }
        if let Some(g) = &mut self.greeter {
            match g.on_datagram(bytes) {
                Some(GreetEvent::Refused(s)) => return Err(s),
                Some(_) => return Ok(None),
                None => {}
            }
        }
        let Ok(h) = DatagramHeader::parse(bytes) else { return Ok(None) };
        if h.flow != self.flow || h.flags & CONTROL_FLAGS != 0 {
            return Ok(None);
        }
        if h.flags & FLAG_REVERSE_DATA != 0 {
            return Ok(self.reverse.then(|| self.on_peer_datagram(now, &h, meta)));
        }
        if h.flags & FLAG_ECHO_REPLY != 0 {
            self.stats.echo(now.saturating_sub(h.send_ns));
            return Ok(Some(datagram_record(&h, meta, now, self.tag, RecordKind::Echoed)));
        }
        if self.mirror.is_none() {
            return Ok(None);
        }
        Ok(Some(self.on_peer_datagram(now, &h, meta)))
    }

    /// Client: whether it still wants what the peer sends (so it answers consent probes): a
    /// reverse flow until its own departures end; echoes and a peer's stream while it runs.
    fn wants_traffic(&self) -> bool {
        self.role == Role::Client && (!self.reverse || self.sched.is_some() || !self.pending.is_empty())
    }

    /// A reverse flow's proof of consent for its next keep-alive (the latest probe received).
    pub fn keepalive_proof(&self) -> Option<horde_wire::control::KeepAliveProof> {
        self.proof.filter(|_| self.reverse)
    }

    /// The answer to the peer's latest consent probe, to send on the flow's socket now.
    pub fn take_consent_reply(&mut self) -> Option<[u8; horde_wire::control::CONSENT_LEN]> {
        self.consent_reply.take()
    }

    /// Server role over UDP: the peer withdrew its consent (it stopped answering probes):
    /// nothing more is sent to it.
    pub fn withdraw(&mut self) {
        self.sched = None;
        self.pending.clear();
    }

    /// Server role over UDP (and two-way clients): a data datagram of the peer, already known
    /// to come from its admitted address.
    pub fn on_peer_datagram(&mut self, now: u64, h: &DatagramHeader, meta: &RxMeta) -> Record {
        self.stats.arrived(meta.len as u64, now);
        let tag = self.classify(h.seq as u64, meta.len as u32);
        datagram_record(h, meta, now, tag, RecordKind::Received)
    }

    // ---- end and ICMP ------------------------------------------------------------------------

    /// Client: the end message of this flow with its counts so far (UDP: send it as a datagram;
    /// see [`Conn::queue_end`] for TCP).
    pub fn end_message(&self, reason: EndReason, at_ns: u64) -> [u8; END_LEN] {
        signal::end_message(&self.key, self.flow, reason, self.stats.packets, self.stats.bytes, at_ns)
    }

    /// Client over TCP: queues the end message after everything sent (an APDU header of length
    /// 0 and the message). Returns false if the stream is broken.
    pub fn queue_end(&mut self, reason: EndReason, at_ns: u64) -> bool {
        let m = self.end_message(reason, at_ns);
        let Some(s) = self.stream.as_mut().filter(|s| !s.broken) else { return false };
        s.out.extend_from_slice(&[0; horde_wire::APDU_HEADER_LEN]);
        s.out.extend_from_slice(&m);
        true
    }

    /// Client over UDP: the end message left and its acknowledgement has not come yet.
    pub fn awaits_end_ack(&self) -> bool {
        self.role == Role::Client && self.end.ended() && self.end.acked().is_none() && self.transport == Transport::Udp
    }

    /// Client over ICMP: an echo reply's payload from `from`, read at `now` (real ns): its log
    /// record if it answers one of this flow's requests and the flow measures round trips. Any
    /// verified reply refreshes consent; anything else is ignored.
    pub fn on_echo_reply(&mut self, now: u64, from: std::net::IpAddr, payload: &[u8], meta: &RxMeta) -> Option<Record> {
        match self.echo.as_mut()?.on_reply(from, payload)? {
            crate::echo::Reply::Data(h) if self.meter == Meter::Rtt => {
                self.stats.echo(now.saturating_sub(h.send_ns));
                Some(datagram_record(&h, &RxMeta { len: payload.len(), ..*meta }, now, self.tag, RecordKind::Echoed))
            }
            _ => None,
        }
    }

    /// Server or sink: when [`Conn::handle_timeout`] may next find something expired.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.next(self.awaiting_hello())
    }

    /// What expired by `now`, if anything: the shell closes the connection and counts why.
    pub fn handle_timeout(&mut self, now: u64) -> Option<Expiry> {
        self.timers.expired(now, self.awaiting_hello())
    }
}
