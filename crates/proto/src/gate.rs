//! The receiver's side of address validation (a `horde recv` UDP port, or the server side of a
//! UDP scenario). For every hello it decides what, if anything, goes back:
//!
//! 1. not a well-formed hello of this protocol version → nothing;
//! 2. MAC not made with the run key → nothing (a wrong key looks like an attack from here);
//! 3. no valid cookie for this source address → a [`Challenge`] (36 bytes for a hello of at
//!    least 64), within a budget of challenges per second, in total and per source address;
//! 4. a valid cookie: the address is proven. A flow admitted before gets its answer again;
//!    otherwise the caller decides (a server side checks the player) and [`Gate::admit`]s it
//!    within the caps on flows, in total and per source IP, or refuses it.
//!
//! Data datagrams count only from admitted (address, flow) pairs ([`Gate::admitted`]); the rest
//! is counted and dropped by the caller. Nothing is stored for an address before step 4.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use horde_wire::control::{Answer, Challenge, Hello, Status, ANSWER_LEN, CHALLENGE_LEN};
use horde_wire::StreamHello;

use crate::auth::{CookieJar, RunKey};

/// Limits of a gate.
#[derive(Debug, Clone)]
pub struct GateConfig {
    pub key: RunKey,
    /// Admitted flows at most (a server side: its players).
    pub max_flows: usize,
    /// Admitted flows from one IP address at most.
    pub max_flows_per_ip: usize,
    /// Challenges sent per second at most, in total and to one IP address: bounds what spoofed
    /// hellos can make the gate send to a victim.
    pub challenges_per_s: u32,
    pub challenges_per_ip_per_s: u32,
}

impl GateConfig {
    /// Defaults for a receiver: 65,536 flows (the engine's largest runs use 20,000 sockets),
    /// every one of which may come from one host; 20,000 challenges/s in total (a set-up burst
    /// of 10,000 flows passes in half a second) and 2,000/s to one address.
    pub fn receiver(key: RunKey) -> GateConfig {
        GateConfig { key, max_flows: 1 << 16, max_flows_per_ip: 1 << 16, challenges_per_s: 20_000, challenges_per_ip_per_s: 2_000 }
    }
}

/// Why a datagram got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Not a hello of this protocol version.
    Malformed,
    /// The MAC was not made with this run's key.
    BadMac,
    /// Over the challenge budget.
    ChallengeBudget,
}

/// What to do with a hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Send nothing.
    Drop(DropReason),
    /// Send this challenge to the source address (which is not validated).
    Challenge([u8; CHALLENGE_LEN]),
    /// The address is validated and the flow new: decide, then [`Gate::admit`] or
    /// [`Gate::refuse`].
    Validated(Hello),
    /// The flow is admitted already (the sender repeated its hello): send this answer again.
    Again([u8; ANSWER_LEN]),
}

/// What an admitted flow said about itself in its hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    pub tag: u32,
    pub base_ns: u64,
    /// The hello's flags beyond HELLO (e.g. echo request).
    pub flags: u8,
}

/// Counters, for reports: what the gate saw and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateStats {
    pub hellos: u64,
    pub malformed: u64,
    pub bad_mac: u64,
    pub challenges: u64,
    pub challenge_bytes: u64,
    pub over_budget: u64,
    pub admitted: u64,
    pub refused: u64,
    pub repeated: u64,
}

/// Challenges sent in the current one-second window.
#[derive(Debug, Default)]
struct Budget {
    window: u64,
    total: u32,
    per_ip: HashMap<IpAddr, u32>,
}

/// The most addresses the per-address challenge budget tracks in one second; past that, only
/// the total budget applies (so the map stays bounded under a flood of spoofed sources).
const BUDGET_TRACKED_IPS: usize = 16_384;

#[derive(Debug)]
pub struct Gate {
    cfg: GateConfig,
    jar: CookieJar,
    admitted: HashMap<(SocketAddr, u32), Admitted>,
    per_ip: HashMap<IpAddr, usize>,
    budget: Budget,
    pub stats: GateStats,
}

impl std::fmt::Debug for CookieJar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CookieJar(<secret>)")
    }
}

impl Gate {
    /// `secret`: 32 random bytes private to this receiver, for its cookies. Gates that share a
    /// port (one per worker thread) share the secret, so any of them takes the others' cookies.
    pub fn new(cfg: GateConfig, secret: [u8; 32]) -> Gate {
        Gate { cfg, jar: CookieJar::new(secret), admitted: HashMap::new(), per_ip: HashMap::new(), budget: Budget::default(), stats: GateStats::default() }
    }

    pub fn key(&self) -> &RunKey {
        &self.cfg.key
    }

    /// Decides about a datagram that carries the HELLO flag, from `from`, at `now_ns`.
    pub fn on_hello(&mut self, now_ns: u64, from: SocketAddr, bytes: &[u8]) -> Decision {
        self.stats.hellos += 1;
        let Ok(h) = Hello::parse(bytes) else {
            self.stats.malformed += 1;
            return Decision::Drop(DropReason::Malformed);
        };
        if !self.cfg.key.verify_udp_hello(&h.signed(), &h.mac) {
            self.stats.bad_mac += 1;
            return Decision::Drop(DropReason::BadMac);
        }
        let (flow, tag) = (h.header.flow, h.header.seq);
        if !self.jar.check(now_ns, from, flow, tag, &h.cookie) {
            if !self.spend_challenge(now_ns, from.ip()) {
                self.stats.over_budget += 1;
                return Decision::Drop(DropReason::ChallengeBudget);
            }
            self.stats.challenges += 1;
            self.stats.challenge_bytes += CHALLENGE_LEN as u64;
            let c = Challenge { flow, tag, base_ns: h.header.send_ns, cookie: self.jar.issue(now_ns, from, flow, tag) };
            return Decision::Challenge(c.emit());
        }
        if let Some(a) = self.admitted.get(&(from, flow)) {
            self.stats.repeated += 1;
            return Decision::Again(Answer { flow, tag: a.tag, base_ns: a.base_ns, status: Status::Accepted }.emit());
        }
        Decision::Validated(h)
    }

    fn spend_challenge(&mut self, now_ns: u64, ip: IpAddr) -> bool {
        let window = now_ns / 1_000_000_000;
        let b = &mut self.budget;
        if b.window != window {
            *b = Budget { window, ..Budget::default() };
        }
        if b.total >= self.cfg.challenges_per_s {
            return false;
        }
        let tracked = b.per_ip.len() < BUDGET_TRACKED_IPS || b.per_ip.contains_key(&ip);
        if tracked {
            let n = b.per_ip.entry(ip).or_insert(0);
            if *n >= self.cfg.challenges_per_ip_per_s {
                return false;
            }
            *n += 1;
        }
        b.total += 1;
        true
    }

    /// Admits a flow whose hello was [`Decision::Validated`], within the caps. Returns the
    /// answer to send: accepted, or refused because the gate is full.
    pub fn admit(&mut self, from: SocketAddr, h: &Hello) -> Result<[u8; ANSWER_LEN], [u8; ANSWER_LEN]> {
        let per_ip = self.per_ip.get(&from.ip()).copied().unwrap_or(0);
        if self.admitted.len() >= self.cfg.max_flows || per_ip >= self.cfg.max_flows_per_ip {
            return Err(self.refuse(h, Status::Full));
        }
        let (flow, tag, base_ns) = (h.header.flow, h.header.seq, h.header.send_ns);
        self.admitted.insert((from, flow), Admitted { tag, base_ns, flags: h.header.flags & !horde_wire::datagram::CONTROL_FLAGS });
        *self.per_ip.entry(from.ip()).or_insert(0) += 1;
        self.stats.admitted += 1;
        Ok(Answer { flow, tag, base_ns, status: Status::Accepted }.emit())
    }

    /// The answer refusing a validated hello (only ever sent to a validated address).
    pub fn refuse(&mut self, h: &Hello, status: Status) -> [u8; ANSWER_LEN] {
        self.stats.refused += 1;
        Answer { flow: h.header.flow, tag: h.header.seq, base_ns: h.header.send_ns, status }.emit()
    }

    /// The flow `flow` from `from`, if admitted: data from anywhere else is not this run's.
    pub fn admitted(&self, from: SocketAddr, flow: u32) -> Option<&Admitted> {
        self.admitted.get(&(from, flow))
    }

    pub fn admitted_count(&self) -> usize {
        self.admitted.len()
    }

    /// Forgets an admitted flow (it ended), freeing its place under the caps.
    pub fn forget(&mut self, from: SocketAddr, flow: u32) {
        if self.admitted.remove(&(from, flow)).is_some() {
            if let Some(n) = self.per_ip.get_mut(&from.ip()) {
                *n -= 1;
                if *n == 0 {
                    self.per_ip.remove(&from.ip());
                }
            }
        }
    }

    /// Whether a TCP stream's hello carries a MAC made with the run key. (TCP's own handshake
    /// has validated the address already.)
    pub fn check_stream_hello(&self, h: &StreamHello) -> bool {
        self.cfg.key.verify_tcp_hello(&h.signed(), &h.mac)
    }
}

/// Signs a TCP stream hello with `key` (fills in its MAC).
pub fn sign_stream_hello(key: &RunKey, mut h: StreamHello) -> StreamHello {
    h.mac = key.mac_tcp_hello(&h.signed());
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_wire::datagram::FLAG_HELLO;
    use horde_wire::DatagramHeader;

    fn hello(key: &RunKey, flow: u32, cookie: [u8; 16]) -> [u8; 64] {
        let mut h = Hello { header: DatagramHeader { flags: FLAG_HELLO, flow, seq: 5 << 8, send_ns: 1_000 }, cookie, mac: [0; 16] };
        h.mac = key.mac_udp_hello(&h.signed());
        h.emit()
    }

    fn gate(key: RunKey) -> Gate {
        Gate::new(GateConfig { max_flows: 2, max_flows_per_ip: 2, ..GateConfig::receiver(key) }, [9; 32])
    }

    #[test]
    fn hello_challenge_hello_admit() {
        let key = RunKey::from_bytes([3; 32]);
        let mut g = gate(key.clone());
        let from: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let Decision::Challenge(c) = g.on_hello(1, from, &hello(&key, 7, [0; 16])) else { panic!() };
        let c = Challenge::parse(&c).unwrap();
        assert_eq!((c.flow, c.tag), (7, 5 << 8));
        let Decision::Validated(h) = g.on_hello(2, from, &hello(&key, 7, c.cookie)) else { panic!() };
        let a = Answer::parse(&g.admit(from, &h).unwrap()).unwrap();
        assert_eq!(a.status, Status::Accepted);
        assert_eq!(g.admitted(from, 7).unwrap().tag, 5 << 8);
        assert!(g.admitted(from, 8).is_none() && g.admitted("10.0.0.1:5001".parse().unwrap(), 7).is_none());
        assert!(matches!(g.on_hello(3, from, &hello(&key, 7, c.cookie)), Decision::Again(_)));
        assert_eq!((g.stats.challenges, g.stats.admitted, g.stats.repeated), (1, 1, 1));
    }

    #[test]
    fn a_cookie_from_another_address_is_challenged_again() {
        let key = RunKey::OPEN;
        let mut g = gate(key.clone());
        let a: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let Decision::Challenge(c) = g.on_hello(1, a, &hello(&key, 7, [0; 16])) else { panic!() };
        let cookie = Challenge::parse(&c).unwrap().cookie;
        // replayed from a spoofed address: only a (smaller) challenge goes there
        assert!(matches!(g.on_hello(2, "10.0.0.2:5000".parse().unwrap(), &hello(&key, 7, cookie)), Decision::Challenge(_)));
        assert_eq!(g.admitted_count(), 0);
    }

    #[test]
    fn wrong_key_gets_nothing_and_caps_hold() {
        let mut g = gate(RunKey::from_bytes([3; 32]));
        let from: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        assert_eq!(g.on_hello(1, from, &hello(&RunKey::from_bytes([4; 32]), 7, [0; 16])), Decision::Drop(DropReason::BadMac));
        assert_eq!(g.on_hello(1, from, &[1, 2, 3]), Decision::Drop(DropReason::Malformed));
        let key = RunKey::from_bytes([3; 32]);
        for flow in 0..3 {
            let Decision::Challenge(c) = g.on_hello(1, from, &hello(&key, flow, [0; 16])) else { panic!() };
            let Decision::Validated(h) = g.on_hello(1, from, &hello(&key, flow, Challenge::parse(&c).unwrap().cookie)) else { panic!() };
            let r = g.admit(from, &h);
            if flow < 2 {
                assert!(r.is_ok());
            } else {
                assert_eq!(Answer::parse(&r.unwrap_err()).unwrap().status, Status::Full);
            }
        }
        g.forget(from, 0);
        assert_eq!(g.admitted_count(), 1);
    }

    #[test]
    fn challenges_have_a_budget_per_second() {
        let key = RunKey::OPEN;
        let mut g = Gate::new(GateConfig { challenges_per_s: 10, challenges_per_ip_per_s: 4, ..GateConfig::receiver(key.clone()) }, [1; 32]);
        let victim: SocketAddr = "10.0.0.9:53".parse().unwrap();
        let sent = (0..100).filter(|_| matches!(g.on_hello(5, victim, &hello(&key, 1, [0; 16])), Decision::Challenge(_))).count();
        assert_eq!(sent, 4, "per address");
        let others = (0..100u16)
            .filter(|i| matches!(g.on_hello(5, SocketAddr::new([10, 0, 1, *i as u8].into(), 1), &hello(&key, 1, [0; 16])), Decision::Challenge(_)))
            .count();
        assert_eq!(others, 6, "in total");
        assert!(matches!(g.on_hello(1_000_000_005, victim, &hello(&key, 1, [0; 16])), Decision::Challenge(_)), "a new second, a new budget");
    }

    #[test]
    fn stream_hellos_need_the_key() {
        let key = RunKey::from_bytes([3; 32]);
        let g = gate(key.clone());
        let h = sign_stream_hello(&key, StreamHello { flags: 0, flow: 1, base_ns: 2, tag: 3, mac: [0; 16] });
        assert!(g.check_stream_hello(&h));
        assert!(!g.check_stream_hello(&StreamHello { tag: 4, ..h }));
        assert!(!g.check_stream_hello(&sign_stream_hello(&RunKey::OPEN, h)));
    }
}
