//! Who may hold a place on a TCP listener before proving who they are: one admission policy for
//! every listener Horde runs (agent control port, console, logd, metrics). I/O-free: sources and
//! time in (ns on any monotonic clock), decisions out; the listener closes what it is told to.
//!
//! The shape is OpenSSH's `MaxStartups` with `PerSourcePenalties`, and nginx's `limit_conn`:
//! - a connection is **pending** from its accept until it authenticates (TLS handshake with a
//!   certificate, a token, a run-key proof); only pending connections count against the budget,
//!   an authenticated one never does;
//! - one **source** (an IPv4 address, an IPv6 /64) may hold at most `per_source` pending places;
//! - the budget is `pending` places in all; when it is full, a newcomer takes the place of the
//!   **oldest pending connection past its grace** (a legitimate handshake takes milliseconds:
//!   one still pending after `grace_ns` is silent or slow) — so silent connections cannot hold
//!   every place, however many addresses they come from;
//! - a source whose connection was evicted, or held its place until its deadline, is
//!   **penalised**: refused for `penalty_ns`, so an attacker who churns connections to keep them
//!   young loses its addresses one after the other instead of the listener losing its users.
//!
//! Memory is bounded: at most `pending` connections and [`MAX_PENALTIES`] penalised sources are
//! kept (beyond that the penalty that ends first is forgotten).

use std::collections::HashMap;
use std::net::IpAddr;

/// Penalised sources kept at most.
pub const MAX_PENALTIES: usize = 4_096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Pending (unauthenticated) connections at most, from all sources.
    pub pending: usize,
    /// Pending connections one source may hold.
    pub per_source: usize,
    /// A pending connection older than this may be evicted for a newcomer.
    pub grace_ns: u64,
    /// A source whose connection was evicted or timed out unauthenticated is refused this long.
    pub penalty_ns: u64,
}

impl AdmissionConfig {
    /// `pending` places, `per_source` of them per source, a grace of 500 ms (a handshake takes
    /// milliseconds on any network a run uses) and a penalty of 10 s.
    pub fn new(pending: usize, per_source: usize) -> Self {
        AdmissionConfig { pending: pending.max(1), per_source: per_source.max(1), grace_ns: 500_000_000, penalty_ns: 10_000_000_000 }
    }

    /// The same with a grace of `grace_ms`.
    pub fn grace_ms(self, grace_ms: u64) -> Self {
        AdmissionConfig { grace_ns: grace_ms * 1_000_000, ..self }
    }
}

/// A pending connection's handle.
pub type Id = u64;

/// What to do with a new connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer {
    /// Serve it as `id`; first close `evict` (the oldest pending connection past its grace),
    /// whose source is now penalised.
    Admit { id: Id, evict: Option<Id> },
    /// Close it: why, in words for a log line (without the peer's address).
    Refuse(String),
}

/// How a pending connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It proved who it is: it no longer counts against the budget.
    Authenticated,
    /// It held its place until its deadline without proving anything (silent or slow): its
    /// source is penalised.
    TimedOut,
    /// It went away, or was refused (a wrong key or certificate: a mistake refused at once,
    /// which held its place for a moment only, is not penalised — a user behind the same
    /// address would pay for it).
    Closed,
}

/// The source key of an address: IPv4 whole, IPv6 by its /64 (one host's share of a network).
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[derive(Debug)]
pub struct Admission {
    cfg: AdmissionConfig,
    next: Id,
    /// Pending connections: id → (source, admitted at).
    pending: HashMap<Id, (IpAddr, u64)>,
    per_source: HashMap<IpAddr, usize>,
    /// Penalised sources → until when.
    penalties: HashMap<IpAddr, u64>,
}

impl Admission {
    pub fn new(cfg: AdmissionConfig) -> Self {
        Admission { cfg, next: 0, pending: HashMap::new(), per_source: HashMap::new(), penalties: HashMap::new() }
    }

    /// A new connection from `ip` at `now_ns`.
    pub fn offer(&mut self, ip: IpAddr, now_ns: u64) -> Offer {
        let src = source_of(ip);
        if let Some(&until) = self.penalties.get(&src) {
            if until > now_ns {
                return Offer::Refuse(format!(
                    "penalised for {:.0} s more: a connection from this address held its place without authenticating",
                    (until - now_ns) as f64 / 1e9
                ));
            }
            self.penalties.remove(&src);
        }
        let mut evict = None;
        if self.per_source.get(&src).copied().unwrap_or(0) >= self.cfg.per_source {
            // the source's own oldest past its grace makes room (not penalised: its newest is as
            // likely its user's, a probe behind a slow client of the same address)
            let Some(old) = self.oldest(now_ns, Some(src)) else {
                return Offer::Refuse(format!("{} unauthenticated connections from this address already", self.cfg.per_source));
            };
            self.end(old, false, now_ns);
            evict = Some(old);
        }
        if self.pending.len() >= self.cfg.pending {
            let Some(old) = self.oldest(now_ns, None) else {
                return Offer::Refuse(format!(
                    "{} unauthenticated connections already, all younger than {} ms",
                    self.cfg.pending,
                    self.cfg.grace_ns / 1_000_000
                ));
            };
            self.end(old, true, now_ns);
            evict = Some(old);
        }
        let id = self.next;
        self.next += 1;
        self.pending.insert(id, (src, now_ns));
        *self.per_source.entry(src).or_insert(0) += 1;
        Offer::Admit { id, evict }
    }

    /// The oldest pending connection past its grace (of `src` only, if given; ties: the lowest
    /// id, so the choice is deterministic).
    fn oldest(&self, now_ns: u64, src: Option<IpAddr>) -> Option<Id> {
        let past = |at: u64| now_ns.saturating_sub(at) >= self.cfg.grace_ns;
        self.pending.iter().filter(|(_, (s, at))| past(*at) && src.is_none_or(|x| x == *s)).min_by_key(|(id, (_, at))| (*at, **id)).map(|(id, _)| *id)
    }

    /// Pending connection `id` ended as `outcome` at `now_ns` (unknown ids — evicted already —
    /// are ignored).
    pub fn finished(&mut self, id: Id, outcome: Outcome, now_ns: u64) {
        self.end(id, outcome == Outcome::TimedOut, now_ns);
    }

    /// Pending connections now, and penalised sources kept.
    pub fn counts(&self) -> (usize, usize) {
        (self.pending.len(), self.penalties.len())
    }

    fn end(&mut self, id: Id, penalise: bool, now_ns: u64) {
        let Some((src, _)) = self.pending.remove(&id) else { return };
        if let Some(n) = self.per_source.get_mut(&src) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&src);
            }
        }
        if penalise {
            if self.penalties.len() >= MAX_PENALTIES && !self.penalties.contains_key(&src) {
                // forget the penalty that ends first (expired ones first of all)
                if let Some((&k, _)) = self.penalties.iter().min_by_key(|(_, until)| **until) {
                    self.penalties.remove(&k);
                }
            }
            self.penalties.insert(src, now_ns.saturating_add(self.cfg.penalty_ns));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn cfg() -> AdmissionConfig {
        AdmissionConfig { pending: 16, per_source: 4, grace_ns: 500 * MS, penalty_ns: 10_000 * MS }
    }

    /// The acceptance's attack: 64 silent connections from 16 addresses against 16 places.
    /// A legitimate peer from elsewhere gets in every time, and the silent ones' addresses are
    /// penalised as their places are taken.
    #[test]
    fn silent_connections_from_many_addresses_cannot_hold_every_place() {
        let mut a = Admission::new(cfg());
        let mut held = Vec::new();
        for k in 0..64u8 {
            match a.offer(ip(10 + k % 16), u64::from(k)) {
                Offer::Admit { id, evict: None } => held.push(id),
                Offer::Refuse(_) => {}
                o => panic!("{o:?}"),
            }
        }
        assert_eq!(a.counts().0, 16, "the budget is full");
        // young: a newcomer is refused (nothing is past its grace yet)
        assert!(matches!(a.offer(ip(2), 100 * MS), Offer::Refuse(m) if m.contains("younger than 500 ms")));
        // a second later, 20 legitimate connections in a row, each authenticating at once
        let mut now = 1_000 * MS;
        for _ in 0..20 {
            let Offer::Admit { id, .. } = a.offer(ip(2), now) else { panic!("a legitimate peer refused") };
            a.finished(id, Outcome::Authenticated, now + MS);
            // the attackers come back at once: their addresses are penalised
            for k in 0..16u8 {
                if let Offer::Admit { id, .. } = a.offer(ip(10 + k), now + 2 * MS) {
                    held.push(id);
                }
            }
            now += 100 * MS;
        }
        assert_eq!(a.counts().1, 16, "every silent address penalised");
        // an authenticated connection never counts: 16 of them leave the budget free
        for _ in 0..16 {
            let Offer::Admit { id, .. } = a.offer(ip(3), now) else { panic!() };
            a.finished(id, Outcome::Authenticated, now);
        }
    }

    #[test]
    fn one_source_holds_at_most_its_share_and_a_timeout_is_penalised() {
        let mut a = Admission::new(cfg());
        let ids: Vec<Id> = (0..4).map(|_| if let Offer::Admit { id, .. } = a.offer(ip(9), 0) { id } else { panic!() }).collect();
        assert!(matches!(a.offer(ip(9), 0), Offer::Refuse(m) if m.contains("4 unauthenticated connections from this address")));
        a.finished(ids[0], Outcome::Closed, 1);
        assert!(matches!(a.offer(ip(9), 2), Offer::Admit { .. }), "a closed one frees its place, unpenalised");
        a.finished(ids[2], Outcome::Closed, 3);
        assert!(matches!(a.offer(ip(9), 3), Offer::Admit { .. }), "a refused mistake is not penalised");
        // past the grace, the source's own oldest makes room, and the source is not penalised
        assert!(matches!(a.offer(ip(9), 600 * MS), Offer::Admit { evict: Some(1), .. }));
        assert!(matches!(a.offer(ip(9), 601 * MS), Offer::Admit { evict: Some(3), .. }));
        a.finished(4, Outcome::TimedOut, 602 * MS);
        assert!(matches!(a.offer(ip(9), 603 * MS), Offer::Refuse(m) if m.contains("penalised for 10 s")));
        assert!(matches!(a.offer(ip(9), 602 * MS + 10_000 * MS), Offer::Admit { .. }), "the penalty ends");
        // an evicted id's later end is ignored
        a.finished(999, Outcome::TimedOut, 5);
    }

    #[test]
    fn ipv6_sources_are_their_64_and_mapped_v4_is_v4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        assert_eq!(source_of(a), source_of(b));
        assert_ne!(source_of(a), source_of("2001:db8:1:3::1".parse().unwrap()));
        assert_eq!(source_of("::ffff:127.0.0.9".parse().unwrap()), ip(9));
    }

    /// Any sequence of connections, ends and times (a seeded stream of them): the budget, each
    /// source's share and the penalties kept are never exceeded, an evicted connection was
    /// pending and past its grace, and a penalised source is refused.
    #[test]
    fn no_sequence_of_events_exceeds_the_bounds() {
        let cfg = AdmissionConfig { pending: 8, per_source: 3, grace_ns: 50 * MS, penalty_ns: 200 * MS };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut a = Admission::new(cfg);
        let mut live: Vec<(Id, IpAddr, u64)> = Vec::new();
        let mut now = 0u64;
        for _ in 0..200_000 {
            now += next() % (20 * MS);
            let r = next();
            if r % 3 != 0 || live.is_empty() {
                let src = ip((r >> 8) as u8 % 12);
                match a.offer(src, now) {
                    Offer::Admit { id, evict } => {
                        if let Some(e) = evict {
                            let k = live.iter().position(|l| l.0 == e).expect("an evicted connection was pending");
                            assert!(now - live[k].2 >= cfg.grace_ns, "evicted before its grace");
                            live.swap_remove(k);
                        }
                        live.push((id, src, now));
                    }
                    Offer::Refuse(_) => {}
                }
            } else {
                let k = (r >> 16) as usize % live.len();
                let outcome = [Outcome::Authenticated, Outcome::TimedOut, Outcome::Closed][(r >> 32) as usize % 3];
                let (id, src, _) = live.swap_remove(k);
                a.finished(id, outcome, now);
                if outcome == Outcome::TimedOut {
                    assert!(matches!(a.offer(src, now), Offer::Refuse(m) if m.contains("penalised")), "a penalised source is refused");
                }
            }
            assert_eq!(a.counts().0, live.len(), "pending as the listener sees them");
            assert!(live.len() <= cfg.pending);
            for (_, src, _) in &live {
                assert!(live.iter().filter(|l| l.1 == *src).count() <= cfg.per_source);
            }
            assert!(a.counts().1 <= MAX_PENALTIES);
        }
    }

    #[test]
    fn penalties_kept_are_bounded() {
        let mut a = Admission::new(AdmissionConfig { pending: 1, per_source: 1, grace_ns: 0, penalty_ns: 1_000 * MS });
        for k in 0..(MAX_PENALTIES as u32 + 100) {
            let src = IpAddr::from((0x0a00_0000 + k).to_be_bytes());
            if let Offer::Admit { id, .. } = a.offer(src, u64::from(k)) {
                a.finished(id, Outcome::TimedOut, u64::from(k));
            }
        }
        assert!(a.counts().1 <= MAX_PENALTIES);
    }
}
