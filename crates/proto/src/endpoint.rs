//! The endpoint contract, in `quinn-proto`'s shape, and the two endpoints built on it.
//!
//! A [`Peer`] is one side of one conversation with bytes and time in, bytes and events out:
//! `handle` a datagram, `handle_timeout` once `poll_timeout` has passed, `poll_transmit` what is
//! due, `poll_event` what it has to report, `second` to close a second of its figures. A
//! regulated circuit's two ends implement it, the Quake 3 bot ([`horde_q3::Bot`], below), and
//! the [`Joiner`] around any of them; so can anything that talks datagrams.
//!
//! - [`Endpoint`] is a listener's side: one address, many peers. It owns the [`Gate`] (address
//!   validation, admission, consent) and the peers by address: a consent reply goes to the gate,
//!   a datagram from an admitted address to its peer, anything else is a hello for the gate. It
//!   sends a peer's traffic only while the gate says its address still consents, and ends the
//!   peers that stop answering or close. Every listener with peers goes through it: no owner
//!   matches the gate's decisions itself.
//! - [`Joiner`] is a client's side: greets the listener at its start time (address validation,
//!   then admission), then runs its peer and answers the listener's consent probes.
//!
//! Neither touches a socket or a clock: the engine's shells (`horde_engine::shell`) do.

use std::collections::HashMap;
use std::net::SocketAddr;

use horde_wire::control::{Hello, Status};

use crate::gate::Gate;
use crate::greeter::{GreetState, Greeter};
use crate::RunKey;

/// One side of one conversation, I/O-free.
pub trait Peer {
    /// What it reports as it goes (a log record's worth, a change of state); `()` for nothing.
    type Event;
    /// A datagram from the other side.
    fn handle(&mut self, now_ns: u64, bytes: &[u8]);
    /// Its timers at `now_ns`, once [`Peer::poll_timeout`] has passed (a retry, a frame, a
    /// silent other side).
    fn handle_timeout(&mut self, _now_ns: u64) {}
    /// Fills `buf` with the next datagram due at `now_ns`; false when nothing is.
    fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool;
    /// When it needs [`Peer::handle_timeout`] and [`Peer::poll_transmit`] next (`u64::MAX`:
    /// not until a datagram comes).
    fn poll_timeout(&self, now_ns: u64) -> u64;
    /// The next event to report.
    fn poll_event(&mut self) -> Option<Self::Event> {
        None
    }
    /// The peer is done (the other side said goodbye): it sends nothing more.
    fn is_closed(&self) -> bool {
        false
    }
    /// Closes second `t_s` of the run (per-second figures).
    fn second(&mut self, _t_s: u64) {}
    /// The goodbye to send when the run ends, if this side says one.
    fn farewell(&mut self, _buf: &mut Vec<u8>) -> bool {
        false
    }
}

/// A peer an [`Endpoint`] no longer holds.
pub struct Ended<P> {
    pub addr: SocketAddr,
    pub flow: u32,
    pub peer: P,
    pub why: EndReason,
}

/// Why an [`Endpoint`] let a peer go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// It closed (the other side said goodbye).
    Left,
    /// Its address stopped answering consent probes: nothing more goes there.
    Silent,
    /// It was still held when the run ended.
    RunEnded,
}

/// A listener's side: the gate and the peers it admitted, by address (one peer per address).
pub struct Endpoint<P> {
    gate: Gate,
    peers: HashMap<SocketAddr, (u32, P)>,
    replies: Vec<(SocketAddr, Vec<u8>)>,
    ended: Vec<Ended<P>>,
}

impl<P: Peer> Endpoint<P> {
    pub fn new(gate: Gate) -> Endpoint<P> {
        Endpoint { gate, peers: HashMap::new(), replies: Vec::new(), ended: Vec::new() }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// A datagram from `from` at `now_ns`. A validated hello from an address without a peer goes
    /// to `admit`, which makes its peer or says why not.
    pub fn handle(&mut self, now_ns: u64, from: SocketAddr, bytes: &[u8], admit: impl FnOnce(&Hello) -> Result<P, Status>) {
        if crate::consent::is_consent(bytes) {
            self.gate.on_consent(from, bytes);
            return;
        }
        let taken = match self.peers.get_mut(&from) {
            // A peer's traffic is not a datagram of Horde's own header (hellos are).
            Some((_, p)) if horde_wire::DatagramHeader::parse(bytes).is_err() => return p.handle(now_ns, bytes),
            Some(_) => true,
            None => false,
        };
        let g = self.gate.greet(now_ns, from, bytes, |h| if taken { Err(Status::Taken) } else { admit(h).map(|p| (p, true)) });
        if let Some(r) = g.reply {
            self.replies.push((from, r));
        }
        if let Some((h, p)) = g.admitted {
            self.peers.insert(from, (h.header.flow, p));
        }
    }

    /// Hands `send` everything due at `now_ns`: replies to hellos, the traffic of every peer whose
    /// address still consents, consent probes. Peers that stopped answering or closed end here
    /// (see [`Endpoint::poll_ended`]).
    pub fn transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>, mut send: impl FnMut(&[u8], SocketAddr)) {
        for (to, r) in self.replies.drain(..) {
            send(&r, to);
        }
        for (addr, (flow, p)) in self.peers.iter_mut() {
            if p.poll_timeout(now_ns) <= now_ns {
                p.handle_timeout(now_ns);
            }
            if self.gate.may_send(now_ns, *addr, *flow) {
                while p.poll_transmit(now_ns, buf) {
                    send(buf, *addr);
                }
            }
        }
        let work = self.gate.poll_consent(now_ns);
        for (to, probe) in &work.probes {
            send(probe, *to);
        }
        for (addr, _) in work.expired {
            if let Some((flow, peer)) = self.peers.remove(&addr) {
                self.ended.push(Ended { addr, flow, peer, why: EndReason::Silent });
            }
        }
        let closed: Vec<SocketAddr> = self.peers.iter().filter(|(_, (_, p))| p.is_closed()).map(|(a, _)| *a).collect();
        for addr in closed {
            let (flow, peer) = self.peers.remove(&addr).expect("present");
            self.gate.forget(addr, flow);
            self.ended.push(Ended { addr, flow, peer, why: EndReason::Left });
        }
    }

    /// When [`Endpoint::transmit`] has work next: a reply, a consenting peer's traffic, a probe.
    pub fn poll_timeout(&self, now_ns: u64) -> Option<u64> {
        if !self.replies.is_empty() {
            return Some(now_ns);
        }
        let due = self.peers.iter().filter(|(a, (f, _))| self.gate.may_send(now_ns, **a, *f)).map(|(_, (_, p))| p.poll_timeout(now_ns)).min();
        match (due, self.gate.next_consent_ns()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A peer that ended since the last call.
    pub fn poll_ended(&mut self) -> Option<Ended<P>> {
        self.ended.pop()
    }

    /// The peers held now.
    pub fn peers_mut(&mut self) -> impl Iterator<Item = (SocketAddr, u32, &mut P)> {
        self.peers.iter_mut().map(|(a, (f, p))| (*a, *f, p))
    }

    /// The peers held at the end.
    pub fn into_peers(self) -> impl Iterator<Item = Ended<P>> {
        self.peers.into_iter().map(|(addr, (flow, peer))| Ended { addr, flow, peer, why: EndReason::RunEnded })
    }
}

/// Why a [`Joiner`] is not (or no longer) up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinError {
    Refused(Status),
    /// No answer within the greeter's tries (5 s).
    NoAnswer,
    /// The run ended before its start time or its admission.
    NotJoined,
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Refused(s) => write!(f, "the server side refused it ({s:?})"),
            JoinError::NoAnswer => write!(f, "no answer from the server side within 5 s"),
            JoinError::NotJoined => write!(f, "the run ended before it joined"),
        }
    }
}

/// Where a [`Joiner`] is.
pub enum Joining<P> {
    /// Before its start time.
    Waiting,
    Greeting(Greeter),
    /// Admitted: its peer is to be made ([`Joiner::up`]).
    Admitted,
    Up(P),
    Failed(JoinError),
}

/// A client's side of one conversation with a listener: flow `flow`, greeting at `start_ns`
/// with `tag` in its hello, then its peer; answers consent probes for its flow.
pub struct Joiner<P> {
    pub flow: u32,
    tag: u32,
    key: RunKey,
    pub start_ns: u64,
    pub joined_ns: Option<u64>,
    phase: Joining<P>,
    consent: Vec<[u8; horde_wire::control::CONSENT_LEN]>,
}

impl<P: Peer> Joiner<P> {
    pub fn new(key: RunKey, flow: u32, tag: u32, start_ns: u64) -> Joiner<P> {
        Joiner { flow, tag, key, start_ns, joined_ns: None, phase: Joining::Waiting, consent: Vec::new() }
    }

    pub fn phase(&self) -> &Joining<P> {
        &self.phase
    }

    pub fn phase_mut(&mut self) -> &mut Joining<P> {
        &mut self.phase
    }

    pub fn into_phase(self) -> Joining<P> {
        match self.phase {
            Joining::Waiting | Joining::Greeting(_) | Joining::Admitted => Joining::Failed(JoinError::NotJoined),
            p => p,
        }
    }

    /// Whether it is done for good (failed or closed).
    pub fn finished(&self) -> bool {
        match &self.phase {
            Joining::Failed(_) => true,
            Joining::Up(p) => p.is_closed(),
            _ => false,
        }
    }

    /// The peer, now that it is [`Joining::Admitted`].
    pub fn up(&mut self, now_ns: u64, peer: P) {
        self.joined_ns = Some(now_ns);
        self.phase = Joining::Up(peer);
    }

    pub fn handle(&mut self, now_ns: u64, bytes: &[u8]) {
        match &mut self.phase {
            Joining::Greeting(g) => {
                g.on_datagram(bytes);
                match g.state() {
                    GreetState::Accepted => self.phase = Joining::Admitted,
                    GreetState::Refused(s) => self.phase = Joining::Failed(JoinError::Refused(s)),
                    _ => {}
                }
            }
            Joining::Up(_) if crate::consent::is_consent(bytes) => {
                // bounded: answers go out at the next transmit
                if let (Some(r), true) = (crate::consent::answer(bytes, self.flow), self.consent.len() < 16) {
                    self.consent.push(r);
                }
            }
            Joining::Up(p) => p.handle(now_ns, bytes),
            _ => {}
        }
    }

    /// The next datagram due at `now_ns`: a hello, a consent answer or the peer's traffic.
    pub fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool {
        if matches!(self.phase, Joining::Waiting) && now_ns >= self.start_ns {
            self.phase = Joining::Greeting(Greeter::new(self.key.clone(), 0, self.flow, self.tag, Some(now_ns)));
        }
        match &mut self.phase {
            Joining::Greeting(g) => {
                let hello = g.poll_transmit(now_ns);
                if g.state() == GreetState::GaveUp {
                    self.phase = Joining::Failed(JoinError::NoAnswer);
                }
                hello.is_some_and(|h| {
                    buf.clear();
                    buf.extend_from_slice(&h);
                    true
                })
            }
            Joining::Up(_) if !self.consent.is_empty() => {
                buf.clear();
                buf.extend_from_slice(&self.consent.pop().expect("not empty"));
                true
            }
            Joining::Up(p) => p.poll_transmit(now_ns, buf),
            _ => false,
        }
    }

    /// When [`Joiner::poll_transmit`] may have something next (None: never again, or it waits
    /// for its peer).
    pub fn poll_timeout(&self, now_ns: u64) -> Option<u64> {
        match &self.phase {
            Joining::Waiting => Some(self.start_ns),
            Joining::Greeting(g) => Some(g.next_ns().unwrap_or(now_ns + 10_000_000)),
            Joining::Up(_) if !self.consent.is_empty() => Some(now_ns),
            Joining::Up(p) => Some(p.poll_timeout(now_ns)),
            Joining::Admitted => Some(now_ns),
            Joining::Failed(_) => None,
        }
    }
}

/// A joiner is a peer too: its own greeting and consent answers, then its peer's conversation;
/// so the population shell runs joiners and bare peers alike.
impl<P: Peer> Peer for Joiner<P> {
    type Event = P::Event;
    fn handle(&mut self, now_ns: u64, bytes: &[u8]) {
        Joiner::handle(self, now_ns, bytes)
    }
    fn handle_timeout(&mut self, now_ns: u64) {
        if let Joining::Up(p) = &mut self.phase {
            p.handle_timeout(now_ns)
        }
    }
    fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool {
        Joiner::poll_transmit(self, now_ns, buf)
    }
    fn poll_timeout(&self, now_ns: u64) -> u64 {
        Joiner::poll_timeout(self, now_ns).unwrap_or(u64::MAX)
    }
    fn poll_event(&mut self) -> Option<P::Event> {
        match &mut self.phase {
            Joining::Up(p) => p.poll_event(),
            _ => None,
        }
    }
    fn is_closed(&self) -> bool {
        self.finished()
    }
    fn second(&mut self, t_s: u64) {
        if let Joining::Up(p) = &mut self.phase {
            p.second(t_s)
        }
    }
    fn farewell(&mut self, buf: &mut Vec<u8>) -> bool {
        match &mut self.phase {
            Joining::Up(p) => p.farewell(buf),
            _ => false,
        }
    }
}

/// A Quake 3 bot against a real game server: no Horde greeting (the game has its own
/// handshake), so it runs as a bare peer; its events are its per-packet log.
impl Peer for horde_q3::Bot {
    type Event = horde_q3::LogEvent;
    fn handle(&mut self, now_ns: u64, bytes: &[u8]) {
        horde_q3::Bot::handle(self, now_ns, bytes)
    }
    fn handle_timeout(&mut self, now_ns: u64) {
        horde_q3::Bot::handle_timeout(self, now_ns)
    }
    fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool {
        horde_q3::Bot::poll_transmit(self, now_ns, buf)
    }
    fn poll_timeout(&self, _now_ns: u64) -> u64 {
        horde_q3::Bot::poll_timeout(self).unwrap_or(u64::MAX)
    }
    fn poll_event(&mut self) -> Option<horde_q3::LogEvent> {
        horde_q3::Bot::poll_event(self)
    }
    fn is_closed(&self) -> bool {
        matches!(self.phase(), horde_q3::Phase::Gone(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::GateConfig;

    /// Echoes every datagram it gets; closes on "bye".
    struct Echo {
        pending: Vec<Vec<u8>>,
        closed: bool,
    }

    impl Peer for Echo {
        type Event = ();
        fn handle(&mut self, _now: u64, bytes: &[u8]) {
            self.closed |= bytes == b"bye";
            self.pending.push(bytes.to_vec());
        }
        fn poll_transmit(&mut self, _now: u64, buf: &mut Vec<u8>) -> bool {
            self.pending.pop().is_some_and(|b| {
                *buf = b;
                true
            })
        }
        fn poll_timeout(&self, now: u64) -> u64 {
            if self.pending.is_empty() {
                u64::MAX
            } else {
                now
            }
        }
        fn is_closed(&self) -> bool {
            self.closed && self.pending.is_empty()
        }
    }

    const CLIENT: &str = "10.0.0.2:5000";

    /// A joiner and an endpoint wired back to back in virtual time (no socket): the joiner is
    /// admitted, its traffic echoed, consent kept; a second hello from the same address is
    /// refused; silence ends the peer; a goodbye closes it.
    #[test]
    fn a_joiner_and_an_endpoint_talk_in_virtual_time() {
        let key = RunKey::OPEN;
        let mut ep: Endpoint<Echo> = Endpoint::new(Gate::new(GateConfig::receiver(key.clone()), [7; 32]));
        let mut j: Joiner<Echo> = Joiner::new(key, 3, 0, 1_000);
        let client: SocketAddr = CLIENT.parse().unwrap();
        let mut buf = Vec::new();
        let mut now = 0;
        let mut to_client: Vec<Vec<u8>> = Vec::new();
        let mut echoed = 0;
        for _ in 0..100 {
            while j.poll_transmit(now, &mut buf) {
                ep.handle(now, client, &buf, |h| if h.header.flow == 3 { Ok(Echo { pending: Vec::new(), closed: false }) } else { Err(Status::UnknownPlayer) });
            }
            if matches!(j.phase(), Joining::Admitted) {
                j.up(now, Echo { pending: vec![b"hi".to_vec()], closed: false });
            }
            ep.transmit(now, &mut buf, |b, to| {
                assert_eq!(to, client);
                to_client.push(b.to_vec());
            });
            for b in to_client.drain(..) {
                echoed += (b == b"hi") as u32;
                j.handle(now, &b);
            }
            now += 50_000_000;
        }
        assert!(matches!(j.phase(), Joining::Up(_)), "joined");
        assert!(echoed >= 1, "the server side echoed the client's traffic");
        assert!(ep.poll_ended().is_none(), "consent kept while the client answers");
        // A second hello from the same address (another flow) is refused: one peer per address.
        let mut other: Joiner<Echo> = Joiner::new(RunKey::OPEN, 4, 0, now);
        let mut refused = false;
        for _ in 0..10 {
            while other.poll_transmit(now, &mut buf) {
                ep.handle(now, client, &buf, |_| Ok(Echo { pending: Vec::new(), closed: false }));
            }
            ep.transmit(now, &mut buf, |b, _| to_client.push(b.to_vec()));
            for b in to_client.drain(..) {
                other.handle(now, &b);
            }
            refused |= matches!(other.phase(), Joining::Failed(JoinError::Refused(Status::Taken)));
            now += 50_000_000;
        }
        assert!(refused, "a second flow from an address with a peer is refused");
        // The client goes silent: the peer ends for want of consent, and nothing more is sent.
        let mut ended = None;
        for _ in 0..200 {
            ep.transmit(now, &mut buf, |_, _| {});
            if let Some(e) = ep.poll_ended() {
                ended = Some(e);
                break;
            }
            now += 50_000_000;
        }
        let e = ended.expect("the silent peer ended");
        assert!(e.why == EndReason::Silent && e.addr == client && e.flow == 3);
        let mut sent = 0;
        ep.handle(now, client, b"more", |_| unreachable!("not a hello"));
        ep.transmit(now + 1, &mut buf, |_, _| sent += 1);
        assert_eq!(sent, 0, "nothing goes to an address that stopped consenting");
    }
}
