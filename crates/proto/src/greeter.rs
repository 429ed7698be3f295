//! The sender's side of address validation for one UDP flow: it sends hellos until the
//! receiver answers, answering challenges with the cookie they carry.
//!
//! Two phases. While the run's start time (the hello's base) is unknown, the greeter only gets
//! a cookie: hellos without one, until a challenge comes back ([`GreetState::Validated`]). Once
//! the base is set ([`Greeter::set_base`]), it sends its hello with the cookie and the base,
//! which the receiver admits at once; it repeats it until answered. A greeter made with a base
//! does both phases in a row (a player joining mid-run).
//!
//! A greeter made by [`Greeter::discover`] asks for discovery instead
//! ([`horde_wire::discover`]): the same two hellos, and the signed reply ends it
//! ([`GreetState::Discovered`]). Nothing is admitted at the other end.

use horde_wire::control::{Answer, Challenge, Hello, Status, HELLO_DATAGRAM_LEN};
use horde_wire::datagram::{FLAG_ANSWER, FLAG_CHALLENGE, FLAG_HELLO};
use horde_wire::discover::{Discovered, FLAG_DISCOVER};
use horde_wire::DatagramHeader;

use crate::auth::RunKey;

/// Between two hellos without an answer: 100 ms (above any loopback or LAN round trip, short
/// enough that a lost hello costs a player little).
pub const RETRY_NS: u64 = 100_000_000;
/// Hellos sent without an answer before giving up: 50, i.e. 5 s.
pub const MAX_TRIES: u32 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GreetState {
    /// Asking for a cookie.
    Asking,
    /// Holds a cookie; waiting for the base to be set.
    Validated,
    /// Sent the full hello; waiting for the answer.
    Admitting,
    Accepted,
    Refused(Status),
    /// No answer after [`MAX_TRIES`] hellos.
    GaveUp,
    /// A discovery request was answered (signed with the run key).
    Discovered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GreetEvent {
    Validated,
    Accepted,
    Refused(Status),
    /// The reply to a discovery request, its MAC checked.
    Discovered(Discovered),
}

#[derive(Debug, Clone)]
pub struct Greeter {
    key: RunKey,
    header: DatagramHeader,
    base_known: bool,
    cookie: [u8; 16],
    state: GreetState,
    tries: u32,
    next_ns: u64,
}

impl Greeter {
    /// A greeter for flow `flow` with `tag`; `flags` are the flow's (e.g. echo request);
    /// `base_ns`: the hello's base if known already.
    pub fn new(key: RunKey, flags: u8, flow: u32, tag: u32, base_ns: Option<u64>) -> Greeter {
        Greeter {
            key,
            header: DatagramHeader { flags: flags | FLAG_HELLO, flow, seq: tag, send_ns: base_ns.unwrap_or(0) },
            base_known: base_ns.is_some(),
            cookie: [0; 16],
            state: GreetState::Asking,
            tries: 0,
            next_ns: 0,
        }
    }

    /// A greeter asking the endpoint at the other end what it is (a discovery request) under
    /// the nonce `flow`, `tag`. Before each [`Greeter::poll_transmit`] its owner stamps the
    /// request with its wall clock ([`Greeter::set_base`]); the reply carries it back.
    pub fn discover(key: RunKey, flow: u32, tag: u32, now_real_ns: u64) -> Greeter {
        Greeter::new(key, FLAG_DISCOVER, flow, tag, Some(now_real_ns))
    }

    /// After a discovery reply: ask once more (with the cookie it holds), for another sample of
    /// the round trip and the clocks.
    pub fn ask_again(&mut self) {
        if self.state == GreetState::Discovered {
            self.state = GreetState::Admitting;
            self.tries = 0;
            self.next_ns = 0;
        }
    }

    fn discovering(&self) -> bool {
        horde_wire::discover::is_request(&self.header)
    }

    pub fn state(&self) -> GreetState {
        self.state
    }

    /// When [`Greeter::poll_transmit`] wants to be called next, if at all.
    pub fn next_ns(&self) -> Option<u64> {
        matches!(self.state, GreetState::Asking | GreetState::Admitting).then_some(self.next_ns)
    }

    /// The run's start is known: from now on the hello carries it and asks to be admitted.
    pub fn set_base(&mut self, base_ns: u64) {
        self.header.send_ns = base_ns;
        self.base_known = true;
        if self.state == GreetState::Validated {
            self.state = GreetState::Admitting;
            self.tries = 0;
            self.next_ns = 0;
        }
    }

    /// The hello to send now, if one is due.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<[u8; HELLO_DATAGRAM_LEN]> {
        if !matches!(self.state, GreetState::Asking | GreetState::Admitting) || now_ns < self.next_ns {
            return None;
        }
        if self.tries >= MAX_TRIES {
            self.state = GreetState::GaveUp;
            return None;
        }
        self.tries += 1;
        self.next_ns = now_ns + RETRY_NS;
        let mut h = Hello { header: self.header, cookie: self.cookie, mac: [0; 16] };
        h.mac = self.key.mac_udp_hello(&h.signed());
        Some(h.emit())
    }

    /// Feeds a datagram that arrived on the flow's socket. `Some` if it was this greeter's
    /// challenge or answer (then it is not traffic); a challenge makes the next hello due now.
    pub fn on_datagram(&mut self, bytes: &[u8]) -> Option<GreetEvent> {
        let h = DatagramHeader::parse(bytes).ok()?;
        if h.flow != self.header.flow || h.seq != self.header.seq {
            return None;
        }
        if horde_wire::signal::is_signal(bytes) {
            // Only a discovery reply, signed with the run key, to a request of ours.
            let d = Discovered::parse(bytes).ok()?;
            if !self.discovering() || self.state != GreetState::Admitting || !self.key.verify_signal(&d.signed(), &d.mac) {
                return None;
            }
            self.state = GreetState::Discovered;
            return Some(GreetEvent::Discovered(d));
        }
        if h.flags & FLAG_CHALLENGE != 0 {
            let c = Challenge::parse(bytes).ok()?;
            self.cookie = c.cookie;
            self.tries = 0;
            self.next_ns = 0;
            return match self.state {
                GreetState::Asking if !self.base_known => {
                    self.state = GreetState::Validated;
                    Some(GreetEvent::Validated)
                }
                GreetState::Asking | GreetState::Admitting => {
                    // a fresh cookie (the old one expired, or the base is known): hello again now
                    self.state = GreetState::Admitting;
                    Some(GreetEvent::Validated)
                }
                _ => None,
            };
        }
        if h.flags & FLAG_ANSWER != 0 {
            let a = Answer::parse(bytes).ok()?;
            if self.state != GreetState::Admitting || a.base_ns != self.header.send_ns {
                return None;
            }
            self.state = if a.status == Status::Accepted { GreetState::Accepted } else { GreetState::Refused(a.status) };
            return Some(if a.status == Status::Accepted { GreetEvent::Accepted } else { GreetEvent::Refused(a.status) });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Decision, Gate, GateConfig};

    const FROM: &str = "127.0.0.1:40000";

    fn exchange(g: &mut Greeter, gate: &mut Gate, now: u64) -> Option<GreetEvent> {
        let hello = g.poll_transmit(now)?;
        match gate.on_hello(now, FROM.parse().unwrap(), &hello) {
            Decision::Challenge(c) => g.on_datagram(&c),
            Decision::Validated(h) => {
                let a = gate.admit(now, FROM.parse().unwrap(), &h, false).unwrap();
                g.on_datagram(&a)
            }
            Decision::Again(a) => g.on_datagram(&a),
            Decision::Discover(d) => g.on_datagram(&d),
            Decision::Drop(_) => None,
        }
    }

    #[test]
    fn discovery_takes_two_hellos_admits_nothing_and_checks_the_reply() {
        use horde_wire::discover::{About, Role, CAP_ECHO, CAP_KEYED, DISCOVERED_LEN};
        let key = RunKey::from_bytes([5; 32]);
        let about = About { role: Role::Receiver, caps: CAP_ECHO, udp_ports: 2, tcp_ports: 1, ..About::default() };
        let mut gate = Gate::new(GateConfig::receiver(key.clone()).about(about), [1; 32]);
        gate.set_wall_offset(1_000_000);
        let mut g = Greeter::discover(key.clone(), 0xabcd, 1, 777);
        assert_eq!(exchange(&mut g, &mut gate, 10), Some(GreetEvent::Validated), "first a challenge");
        g.set_base(778);
        let request = g.poll_transmit(20).unwrap();
        let Decision::Discover(reply) = gate.on_hello(20, FROM.parse().unwrap(), &request) else { panic!("a proven request is answered") };
        assert!(reply.len() <= request.len() && reply.len() == DISCOVERED_LEN);
        // Signed with another key: not ours.
        let mut forged = horde_wire::discover::Discovered::parse(&reply).unwrap();
        forged.mac = RunKey::from_bytes([6; 32]).mac_signal(&forged.signed());
        assert_eq!(g.on_datagram(&forged.emit()), None);
        let Some(GreetEvent::Discovered(d)) = g.on_datagram(&reply) else { panic!() };
        assert_eq!((d.about.role, d.about.caps, d.about.udp_ports, d.about.tcp_ports), (Role::Receiver, CAP_ECHO | CAP_KEYED, 2, 1));
        assert_eq!((d.request_ns, d.replier_ns, d.flows_now, d.about.version[1]), (778, 1_000_020, 0, 1), "version 0.1.x");
        assert_eq!(g.state(), GreetState::Discovered);
        assert_eq!(g.next_ns(), None, "done");
        assert_eq!((gate.admitted_count(), gate.stats.admitted, gate.stats.discoveries), (0, 0, 1));
        // A spoofer (another address) replaying the proven request gets a challenge, never a reply.
        assert!(matches!(gate.on_hello(30, "10.9.9.9:1".parse().unwrap(), &request), Decision::Challenge(_)));
        // A flow greeter ignores a discovery reply.
        let mut flow = Greeter::new(key, 0, 0xabcd, 1, Some(5));
        let _ = flow.poll_transmit(0);
        assert_eq!(flow.on_datagram(&reply), None);
    }

    #[test]
    fn two_phases_against_a_gate() {
        let key = RunKey::from_bytes([5; 32]);
        let mut gate = Gate::new(GateConfig::receiver(key.clone()), [1; 32]);
        let mut g = Greeter::new(key, 0, 3, 7 << 8, None);
        assert_eq!(exchange(&mut g, &mut gate, 10), Some(GreetEvent::Validated));
        assert_eq!(g.state(), GreetState::Validated);
        assert_eq!(g.poll_transmit(10 + RETRY_NS), None, "nothing to send until the base is known");
        assert_eq!(gate.admitted_count(), 0);
        g.set_base(123_456);
        assert_eq!(exchange(&mut g, &mut gate, 20), Some(GreetEvent::Accepted));
        assert_eq!(gate.admitted(FROM.parse().unwrap(), 3).unwrap().base_ns, 123_456);
        assert_eq!(g.next_ns(), None);
    }

    #[test]
    fn retries_then_gives_up() {
        let mut g = Greeter::new(RunKey::OPEN, 0, 1, 0, Some(5));
        let mut sent = 0;
        let mut t = 0;
        while g.state() != GreetState::GaveUp {
            if g.poll_transmit(t).is_some() {
                sent += 1;
            }
            t += RETRY_NS / 4;
        }
        assert_eq!(sent, MAX_TRIES);
        assert!(t >= (MAX_TRIES as u64 - 1) * RETRY_NS);
    }

    #[test]
    fn a_lost_challenge_is_asked_again_and_other_flows_answers_are_ignored() {
        let key = RunKey::OPEN;
        let mut gate = Gate::new(GateConfig::receiver(key.clone()), [1; 32]);
        let mut g = Greeter::new(key.clone(), 0, 3, 0, Some(9));
        let _lost = g.poll_transmit(0).unwrap();
        assert_eq!(g.poll_transmit(1), None, "not before the retry time");
        assert_eq!(exchange(&mut g, &mut gate, RETRY_NS), Some(GreetEvent::Validated));
        let mut other = Greeter::new(key, 0, 4, 0, Some(9));
        let hello = other.poll_transmit(0).unwrap();
        let Decision::Challenge(c) = gate.on_hello(0, FROM.parse().unwrap(), &hello) else { panic!() };
        assert_eq!(g.on_datagram(&c), None, "another flow's challenge");
        assert_eq!(exchange(&mut g, &mut gate, RETRY_NS + 1), Some(GreetEvent::Accepted));
    }
}
