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
//! A hello asking for discovery ([`horde_wire::discover`]) goes through steps 1–3 as any other;
//! with a valid cookie it gets the gate's [`Discovered`] reply (its owner's [`About`], the flow
//! counts, its clock) and admits nothing: one reply per proven request, never larger than it.
//!
//! Data datagrams count only from admitted (address, flow) pairs ([`Gate::admitted`]); the rest
//! is counted and dropped by the caller. Nothing is stored for an address before step 4.
//!
//! After admission, the gate also keeps the [`Consent`] of every flow its owner sends to
//! (echoes, reverse bulk, a player's stream, a circuit): the owner sends the probes
//! [`Gate::poll_consent`] gives, feeds replies to [`Gate::on_consent`], sends to a flow only
//! while [`Gate::may_send`] says so, and drops the flows [`Gate::poll_consent`] reports
//! expired (they are forgotten here). This is the one place in Horde that decides whether an
//! admitted peer still wants traffic.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

use horde_wire::control::{Answer, Challenge, ConsentProbe, Hello, Status, ANSWER_LEN, CHALLENGE_LEN, CONSENT_LEN};
use horde_wire::discover::{About, Discovered, CAP_KEYED, DISCOVERED_LEN};
use horde_wire::StreamHello;

use crate::auth::{CookieJar, RunKey};
use crate::consent::Consent;

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
    /// What the owner says of itself to a proven discovery request.
    pub about: About,
}

impl GateConfig {
    /// Defaults for a receiver: 65,536 flows (the engine's largest runs use 20,000 sockets),
    /// every one of which may come from one host; 20,000 challenges/s in total (a set-up burst
    /// of 10,000 flows passes in half a second) and 2,000/s to one address.
    pub fn receiver(key: RunKey) -> GateConfig {
        GateConfig { key, max_flows: 1 << 16, max_flows_per_ip: 1 << 16, challenges_per_s: 20_000, challenges_per_ip_per_s: 2_000, about: About::default() }
    }

    /// The same, saying `about` to a discovery request.
    pub fn about(self, about: About) -> GateConfig {
        GateConfig { about, ..self }
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
    /// A discovery request from a validated address: send this reply (nothing is admitted).
    Discover([u8; DISCOVERED_LEN]),
}

/// What [`Gate::greet`] decided.
#[derive(Debug)]
pub struct Greeting<T> {
    /// What goes back to the hello's source, if anything.
    pub reply: Option<Vec<u8>>,
    /// The hello admitted now, with what its owner keeps for it.
    pub admitted: Option<(Hello, T)>,
    /// The owner wanted it, but the gate was full.
    pub full: bool,
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
    /// Consent probes sent to admitted peers, and their bytes.
    pub probes: u64,
    pub probe_bytes: u64,
    /// Replies that proved consent, and consent messages that did not (forged, stale, from an
    /// address or flow without consent).
    pub consent_replies: u64,
    pub consent_refused: u64,
    /// Flows forgotten because their peer stopped answering.
    pub consent_expired: u64,
    /// Discovery requests answered (from validated addresses).
    pub discoveries: u64,
}

/// What the gate's owner must do for consent now.
#[derive(Debug, Default)]
pub struct ConsentWork {
    /// Probes to send, each to its admitted peer.
    pub probes: Vec<(SocketAddr, [u8; CONSENT_LEN])>,
    /// Flows whose peer stopped answering: forgotten; drop their state and send them nothing.
    pub expired: Vec<(SocketAddr, u32)>,
}

#[derive(Debug)]
struct Entry {
    admitted: Admitted,
    consent: Option<Consent>,
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
    admitted: HashMap<(SocketAddr, u32), Entry>,
    per_ip: HashMap<IpAddr, usize>,
    budget: Budget,
    /// Flows with consent by their next probe's time: all intervals are equal, so appending
    /// keeps it sorted. An entry whose flow was forgotten (or re-admitted) is skipped.
    probe_queue: VecDeque<(u64, SocketAddr, u32)>,
    /// CLOCK_REALTIME − the gate's time (`now_ns`), for the clock in a discovery reply.
    wall_offset_ns: i64,
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
        Gate {
            cfg,
            jar: CookieJar::new(secret),
            admitted: HashMap::new(),
            per_ip: HashMap::new(),
            budget: Budget::default(),
            probe_queue: VecDeque::new(),
            wall_offset_ns: 0,
            stats: GateStats::default(),
        }
    }

    pub fn key(&self) -> &RunKey {
        &self.cfg.key
    }

    /// The owner's wall clock against the times it passes in (CLOCK_REALTIME − `now_ns`), so a
    /// discovery reply carries the wall clock. Owners set it at start and now and then (the
    /// wall clock may be slewed or stepped).
    pub fn set_wall_offset(&mut self, real_minus_now_ns: i64) {
        self.wall_offset_ns = real_minus_now_ns;
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
        if horde_wire::discover::is_request(&h.header) {
            return Decision::Discover(self.discovered(now_ns, &h));
        }
        if let Some(e) = self.admitted.get(&(from, flow)) {
            self.stats.repeated += 1;
            return Decision::Again(Answer { flow, tag: e.admitted.tag, base_ns: e.admitted.base_ns, status: Status::Accepted }.emit());
        }
        Decision::Validated(h)
    }

    /// A hello decided in one step — the match every owner of a gate would otherwise write:
    /// a validated hello goes to `decide`, which returns what the owner keeps for the flow and
    /// whether it will send to it (consent), or the status refusing it; then the gate admits it
    /// within its caps. The reply (if any) goes back to `from` and is never more bytes than the
    /// hello.
    pub fn greet<T>(&mut self, now_ns: u64, from: SocketAddr, bytes: &[u8], decide: impl FnOnce(&Hello) -> Result<(T, bool), Status>) -> Greeting<T> {
        let (reply, admitted, full) = match self.on_hello(now_ns, from, bytes) {
            Decision::Drop(_) => (None, None, false),
            Decision::Challenge(c) => (Some(c.to_vec()), None, false),
            Decision::Again(a) => (Some(a.to_vec()), None, false),
            Decision::Discover(d) => (Some(d.to_vec()), None, false),
            Decision::Validated(h) => match decide(&h) {
                Err(status) => (Some(self.refuse(&h, status).to_vec()), None, false),
                Ok((kept, consent)) => match self.admit(now_ns, from, &h, consent) {
                    Ok(answer) => (Some(answer.to_vec()), Some((h, kept)), false),
                    Err(refusal) => (Some(refusal.to_vec()), None, true),
                },
            },
        };
        Greeting { reply, admitted, full }
    }

    /// The reply to a proven discovery request.
    fn discovered(&mut self, now_ns: u64, h: &Hello) -> [u8; DISCOVERED_LEN] {
        self.stats.discoveries += 1;
        let mut about = self.cfg.about;
        about.version = version();
        if self.cfg.key != RunKey::OPEN {
            about.caps |= CAP_KEYED;
        }
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let mut d = Discovered {
            flow: h.header.flow,
            tag: h.header.seq,
            replier_ns: now_ns.saturating_add_signed(self.wall_offset_ns),
            request_ns: h.header.send_ns,
            about,
            wire_version: horde_wire::VERSION,
            flows_now: clamp(self.admitted.len()),
            flows_max: clamp(self.cfg.max_flows),
            mac: [0; 16],
        };
        d.mac = self.cfg.key.mac_signal(&d.signed());
        d.emit()
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

    /// Admits a flow whose hello was [`Decision::Validated`], within the caps, at `now_ns`.
    /// `consent`: the owner will send to this flow (beyond the answer), so the gate keeps its
    /// consent fresh; a flow admitted without it must never be sent anything. Returns the answer
    /// to send: accepted, or refused because the gate is full.
    pub fn admit(&mut self, now_ns: u64, from: SocketAddr, h: &Hello, consent: bool) -> Result<[u8; ANSWER_LEN], [u8; ANSWER_LEN]> {
        let per_ip = self.per_ip.get(&from.ip()).copied().unwrap_or(0);
        if self.admitted.len() >= self.cfg.max_flows || per_ip >= self.cfg.max_flows_per_ip {
            return Err(self.refuse(h, Status::Full));
        }
        let (flow, tag, base_ns) = (h.header.flow, h.header.seq, h.header.send_ns);
        let admitted = Admitted { tag, base_ns, flags: h.header.flags & !horde_wire::datagram::CONTROL_FLAGS };
        let consent = consent.then(|| Consent::new(now_ns));
        if let Some(c) = &consent {
            self.probe_queue.push_back((c.next_probe_ns(), from, flow));
        }
        self.admitted.insert((from, flow), Entry { admitted, consent });
        *self.per_ip.entry(from.ip()).or_insert(0) += 1;
        self.stats.admitted += 1;
        Ok(Answer { flow, tag, base_ns, status: Status::Accepted }.emit())
    }

    /// Whether the owner may send traffic to flow `flow` at `from` at `now_ns`: admitted with
    /// consent, and that consent fresh.
    pub fn may_send(&self, now_ns: u64, from: SocketAddr, flow: u32) -> bool {
        self.admitted.get(&(from, flow)).and_then(|e| e.consent.as_ref()).is_some_and(|c| c.granted(now_ns))
    }

    /// A consent message (the caller saw the CONSENT flag) from `from`: true if it proved an
    /// admitted flow's consent. Anything else is counted and ignored; nothing is ever answered.
    pub fn on_consent(&mut self, from: SocketAddr, bytes: &[u8]) -> bool {
        let ok = match ConsentProbe::parse(bytes) {
            Ok(r) => match self.admitted.get_mut(&(from, r.flow)).and_then(|e| e.consent.as_mut()) {
                Some(c) => c.on_reply(&self.jar, from, r.flow, &r),
                None => false,
            },
            Err(_) => false,
        };
        if ok {
            self.stats.consent_replies += 1;
        } else {
            self.stats.consent_refused += 1;
        }
        ok
    }

    /// A UDP reverse flow's keep-alive from `from`: true if it carries the number and nonce of
    /// one of our recent probes to that address and flow (then, like a reply, it also refreshes
    /// the flow's consent). A keep-alive without such a proof is a spoofer's, or stale.
    pub fn proves(&mut self, from: SocketAddr, flow: u32, keepalive: &[u8]) -> bool {
        let Ok(p) = horde_wire::control::KeepAliveProof::parse(keepalive) else { return false };
        let r = ConsentProbe { flow, number: p.number, nonce: p.nonce, reply: true };
        let ok = self.admitted.get_mut(&(from, flow)).and_then(|e| e.consent.as_mut()).is_some_and(|c| c.on_reply(&self.jar, from, flow, &r));
        if !ok {
            self.stats.consent_refused += 1;
        }
        ok
    }

    /// The probes due at `now_ns`, and the flows whose consent expired (forgotten now).
    pub fn poll_consent(&mut self, now_ns: u64) -> ConsentWork {
        let mut work = ConsentWork::default();
        while let Some(&(due, from, flow)) = self.probe_queue.front() {
            if due > now_ns {
                break;
            }
            self.probe_queue.pop_front();
            let Some(c) = self.admitted.get_mut(&(from, flow)).and_then(|e| e.consent.as_mut()) else { continue };
            if c.next_probe_ns() != due {
                continue; // a stale entry: the flow was admitted again since
            }
            if c.expired(now_ns) {
                self.stats.consent_expired += 1;
                self.forget(from, flow);
                work.expired.push((from, flow));
                continue;
            }
            if let Some(p) = c.poll_probe(now_ns, &self.jar, from, flow) {
                self.stats.probes += 1;
                self.stats.probe_bytes += p.len() as u64;
                work.probes.push((from, p));
            }
            self.probe_queue.push_back((c.next_probe_ns(), from, flow));
        }
        work
    }

    /// When [`Gate::poll_consent`] has work next, if any flow has consent.
    pub fn next_consent_ns(&self) -> Option<u64> {
        self.probe_queue.front().map(|q| q.0)
    }

    /// The answer refusing a validated hello (only ever sent to a validated address).
    pub fn refuse(&mut self, h: &Hello, status: Status) -> [u8; ANSWER_LEN] {
        self.stats.refused += 1;
        Answer { flow: h.header.flow, tag: h.header.seq, base_ns: h.header.send_ns, status }.emit()
    }

    /// The flow `flow` from `from`, if admitted: data from anywhere else is not this run's.
    pub fn admitted(&self, from: SocketAddr, flow: u32) -> Option<&Admitted> {
        self.admitted.get(&(from, flow)).map(|e| &e.admitted)
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

/// This build's version as major, minor, patch (the workspace's: every crate has the binary's).
fn version() -> [u8; 3] {
    let mut v = [0u8; 3];
    for (slot, part) in v.iter_mut().zip(env!("CARGO_PKG_VERSION").split('.')) {
        *slot = part.parse().unwrap_or(0);
    }
    v
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
        let a = Answer::parse(&g.admit(2, from, &h, false).unwrap()).unwrap();
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
            let r = g.admit(1, from, &h, false);
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

    fn admitted_with_consent(g: &mut Gate, key: &RunKey, from: SocketAddr, flow: u32, now: u64) {
        let Decision::Challenge(c) = g.on_hello(now, from, &hello(key, flow, [0; 16])) else { panic!() };
        let Decision::Validated(h) = g.on_hello(now, from, &hello(key, flow, Challenge::parse(&c).unwrap().cookie)) else { panic!() };
        g.admit(now, from, &h, true).unwrap();
    }

    /// The reflection after admission of issue 21, in miniature: a peer leaves, a spoofer keeps
    /// sending from its address; the gate stops granting within the lapse and forgets the flow.
    #[test]
    fn a_departed_peer_loses_consent_whatever_a_spoofer_sends() {
        let key = RunKey::OPEN;
        let mut g = gate(key.clone());
        let from: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        admitted_with_consent(&mut g, &key, from, 7, 0);
        let mut now = 0;
        // The peer answers for 3 s.
        while now < 3_000_000_000 {
            for (to, p) in g.poll_consent(now).probes {
                assert!(g.on_consent(to, &crate::consent::answer(&p, 7).unwrap()));
            }
            assert!(g.may_send(now, from, 7));
            now += 10_000_000;
        }
        let left = now;
        // It leaves; the spoofer replays old-looking replies and guesses nonces.
        let forged = ConsentProbe { flow: 7, number: 0, nonce: [1; 16], reply: true }.emit();
        let mut expired = Vec::new();
        while expired.is_empty() {
            let work = g.poll_consent(now);
            assert!(work.probes.iter().all(|(to, _)| *to == from), "probes only to the admitted address");
            expired = work.expired;
            assert!(!g.on_consent(from, &forged));
            if g.may_send(now, from, 7) {
                assert!(now - left < crate::consent::LAPSE_NS);
            }
            now += 10_000_000;
        }
        assert_eq!(expired, vec![(from, 7)]);
        assert!(now - left <= crate::consent::EXPIRE_NS + crate::consent::PROBE_NS);
        assert!(g.admitted(from, 7).is_none() && g.admitted_count() == 0, "forgotten: it must be validated again");
        assert!(g.poll_consent(now + 10_000_000_000).probes.is_empty());
        assert!(g.stats.consent_refused > 0 && g.stats.consent_expired == 1);
    }

    #[test]
    fn flows_admitted_without_consent_may_never_be_sent_to() {
        let key = RunKey::OPEN;
        let mut g = gate(key.clone());
        let from: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let Decision::Challenge(c) = g.on_hello(0, from, &hello(&key, 1, [0; 16])) else { panic!() };
        let Decision::Validated(h) = g.on_hello(0, from, &hello(&key, 1, Challenge::parse(&c).unwrap().cookie)) else { panic!() };
        g.admit(0, from, &h, false).unwrap();
        assert!(!g.may_send(0, from, 1));
        assert!(g.poll_consent(10_000_000_000).probes.is_empty() && g.next_consent_ns().is_none());
        assert!(g.admitted(from, 1).is_some(), "a one-way flow stays admitted: it costs nobody anything");
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
