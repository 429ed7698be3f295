//! Consent freshness after admission, as ICE does it (RFC 7675): a receiver or server side
//! that sends to an admitted peer keeps asking that peer whether it still wants the traffic,
//! and stops when the answers stop.
//!
//! Address validation ([`crate::gate`]) proves once that a peer can receive at its address.
//! That is not enough for what follows: a peer that went away leaves its address admitted, and
//! an off-path attacker who spoofs that address could otherwise keep echoes, reverse bulk, a
//! player's stream or a circuit going to it — reflection after admission. So every admitted
//! flow that Horde sends to carries a [`Consent`]: every [`PROBE_NS`] it sends the peer a
//! 36-byte probe with a nonce that only the receiver can make ([`CookieJar::consent_nonce`],
//! bound to the address, the flow, the admission and the probe's number) and that only the
//! peer sees; the peer echoes it ([`answer`]). Traffic goes only while the newest probe the
//! peer answered was sent less than [`LAPSE_NS`] ago, so it stops within that time of the
//! peer's last answer, whatever arrives from a spoofer in the meantime; after [`EXPIRE_NS`]
//! without an answer the flow is forgotten and must be validated again.
//!
//! Costs: a probe and its reply are 36 bytes each, four a second (1.2 kbit/s each way); a peer
//! that died gets at most [`EXPIRE_NS`] / [`PROBE_NS`] probes (576 bytes). A reply is never
//! larger than its probe, and probes go only to admitted addresses.

use std::net::SocketAddr;

use horde_wire::control::{ConsentProbe, CONSENT_LEN};

use crate::auth::CookieJar;

/// Between two probes: 250 ms. Six probes fit in [`LAPSE_NS`] less a round trip, so a path
/// that loses 10 % each way pauses a flow (all six lost) about once in 20,000 probe slots.
pub const PROBE_NS: u64 = 250_000_000;
/// Traffic stops this long after the send time of the newest answered probe: 1.6 s, so every
/// stream stops within 2 s of its peer's last proof (the bound), with room for a
/// 500 ms round trip.
pub const LAPSE_NS: u64 = 1_600_000_000;
/// Without an answer for this long the flow is forgotten: 4 s (a paused flow resumes if an
/// answer comes before).
pub const EXPIRE_NS: u64 = 4_000_000_000;
/// Probes that may still be answered: the last eight (2 s of them).
const ANSWERABLE: usize = 8;

/// One admitted flow's consent, kept by the side that sends to it. Time is any steady clock in
/// ns, the same for every call.
#[derive(Debug, Clone)]
pub struct Consent {
    since_ns: u64,
    next_number: u32,
    /// Probe `n`'s number and send time at `n % ANSWERABLE`.
    sent: [(u32, u64); ANSWERABLE],
    /// The newest proof: the admission, or the send time of the newest answered probe.
    fresh_ns: u64,
    next_probe_ns: u64,
}

impl Consent {
    /// Consent given by an admission at `now_ns` (the validated hello is the first proof).
    pub fn new(now_ns: u64) -> Consent {
        // The first probe goes at once: a reverse flow's keep-alives need one to prove.
        Consent { since_ns: now_ns, next_number: 0, sent: [(u32::MAX, u64::MAX); ANSWERABLE], fresh_ns: now_ns, next_probe_ns: now_ns }
    }

    /// Whether traffic may go to the peer at `now_ns`.
    pub fn granted(&self, now_ns: u64) -> bool {
        now_ns < self.fresh_ns.saturating_add(LAPSE_NS)
    }

    /// Whether the peer has not answered for so long that the flow is to be forgotten.
    pub fn expired(&self, now_ns: u64) -> bool {
        now_ns >= self.fresh_ns.saturating_add(EXPIRE_NS)
    }

    /// When the next probe is due.
    pub fn next_probe_ns(&self) -> u64 {
        self.next_probe_ns
    }

    /// The probe to send to `to` now, if one is due (none once expired).
    pub fn poll_probe(&mut self, now_ns: u64, jar: &CookieJar, to: SocketAddr, flow: u32) -> Option<[u8; CONSENT_LEN]> {
        if now_ns < self.next_probe_ns || self.expired(now_ns) {
            return None;
        }
        let number = self.next_number;
        self.next_number = number.wrapping_add(1);
        self.sent[number as usize % ANSWERABLE] = (number, now_ns);
        self.next_probe_ns = now_ns + PROBE_NS;
        Some(ConsentProbe { flow, number, nonce: jar.consent_nonce(to, flow, self.since_ns, number), reply: false }.emit())
    }

    /// A reply from `from`: true if it answers one of our recent probes to that address (then
    /// consent is fresh from that probe's send time).
    pub fn on_reply(&mut self, jar: &CookieJar, from: SocketAddr, flow: u32, r: &ConsentProbe) -> bool {
        let (number, at) = self.sent[r.number as usize % ANSWERABLE];
        if !r.reply || r.flow != flow || number != r.number || at == u64::MAX || !jar.consent_nonce_ok(from, flow, self.since_ns, r.number, &r.nonce) {
            return false;
        }
        self.fresh_ns = self.fresh_ns.max(at);
        true
    }
}

/// The peer's side: the reply to `bytes` if it is a consent probe of `flow`. The reply is the
/// probe with the reply flag: the same 36 bytes.
pub fn answer(bytes: &[u8], flow: u32) -> Option<[u8; CONSENT_LEN]> {
    let p = ConsentProbe::parse(bytes).ok()?;
    (!p.reply && p.flow == flow).then(|| ConsentProbe { reply: true, ..p }.emit())
}

/// Whether `bytes` is a consent message (a probe or a reply) rather than traffic.
pub fn is_consent(bytes: &[u8]) -> bool {
    bytes.get(3).is_some_and(|f| f & horde_wire::datagram::FLAG_CONSENT != 0) && bytes.starts_with(b"HD")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: &str = "10.0.0.1:5000";

    fn peer() -> SocketAddr {
        PEER.parse().unwrap()
    }

    #[test]
    fn answered_probes_keep_consent_and_silence_ends_it_within_the_lapse() {
        let jar = CookieJar::new([4; 32]);
        let mut c = Consent::new(0);
        let mut t = 0;
        // An answering peer, 20 ms away, for 10 s.
        while t < 10_000_000_000 {
            if let Some(p) = c.poll_probe(t, &jar, peer(), 3) {
                let r = ConsentProbe::parse(&answer(&p, 3).expect("a probe of flow 3")).unwrap();
                assert!(c.on_reply(&jar, peer(), 3, &r));
            }
            assert!(c.granted(t + 20_000_000), "at {t}");
            t += 10_000_000;
        }
        // The peer dies at 10 s: probes go on, nobody answers.
        let died = t;
        let mut probes_after = 0;
        while !c.expired(t) {
            probes_after += c.poll_probe(t, &jar, peer(), 3).is_some() as u32;
            if c.granted(t) {
                assert!(t - died < LAPSE_NS, "traffic stops within the lapse of the last answer");
            }
            t += 10_000_000;
        }
        assert!(!c.granted(died + LAPSE_NS));
        assert!(t - died <= EXPIRE_NS);
        assert!(probes_after as u64 <= EXPIRE_NS / PROBE_NS, "{probes_after}");
        assert_eq!(c.poll_probe(t + PROBE_NS, &jar, peer(), 3), None, "no probes once expired");
    }

    #[test]
    fn only_the_peer_can_answer() {
        let jar = CookieJar::new([4; 32]);
        let mut c = Consent::new(0);
        let p = ConsentProbe::parse(&c.poll_probe(PROBE_NS, &jar, peer(), 3).unwrap()).unwrap();
        let forged = |nonce, number, flow| ConsentProbe { flow, number, nonce, reply: true };
        // A spoofer that does not see the probe guesses the nonce.
        assert!(!c.on_reply(&jar, peer(), 3, &forged([0; 16], p.number, 3)));
        // The right nonce, from another address, for another flow, for a probe never sent, or
        // not marked as a reply.
        assert!(!c.on_reply(&jar, "10.0.0.2:5000".parse().unwrap(), 3, &forged(p.nonce, p.number, 3)));
        assert!(!c.on_reply(&jar, peer(), 4, &forged(p.nonce, p.number, 4)));
        assert!(!c.on_reply(&jar, peer(), 3, &forged(p.nonce, p.number + 1, 3)));
        assert!(!c.on_reply(&jar, peer(), 3, &ConsentProbe { reply: false, ..p }));
        // A receiver with another secret, or another admission of the same flow.
        assert!(!c.clone().on_reply(&CookieJar::new([5; 32]), peer(), 3, &ConsentProbe { reply: true, ..p }));
        let mut later = Consent::new(1);
        later.poll_probe(PROBE_NS + 1, &jar, peer(), 3);
        assert!(!later.on_reply(&jar, peer(), 3, &ConsentProbe { reply: true, ..p }), "a reply recorded in an earlier admission");
        assert!(c.on_reply(&jar, peer(), 3, &ConsentProbe { reply: true, ..p }));
    }

    #[test]
    fn old_probes_cannot_be_answered_and_an_old_answer_gives_no_more_than_its_send_time() {
        let jar = CookieJar::new([4; 32]);
        let mut c = Consent::new(0);
        let mut probes = Vec::new();
        for k in 1..=12u64 {
            probes.push(ConsentProbe::parse(&c.poll_probe(k * PROBE_NS, &jar, peer(), 1).unwrap()).unwrap());
        }
        let reply = |p: &ConsentProbe| ConsentProbe { reply: true, ..*p };
        assert!(!c.on_reply(&jar, peer(), 1, &reply(&probes[0])), "probe 0 is out of the window");
        assert!(!c.granted(12 * PROBE_NS), "nothing answered for 3 s");
        assert!(c.on_reply(&jar, peer(), 1, &reply(&probes[9])));
        // Probe 9 left at 10 × 250 ms: consent until 2.5 s + the lapse.
        assert!(c.granted(10 * PROBE_NS + LAPSE_NS - 1) && !c.granted(10 * PROBE_NS + LAPSE_NS));
    }

    #[test]
    fn answers_only_probes_of_its_own_flow() {
        let p = ConsentProbe { flow: 2, number: 1, nonce: [9; 16], reply: false }.emit();
        assert_eq!(answer(&p, 2).map(|r| r.len()), Some(p.len()), "a reply is the probe's size");
        assert!(answer(&p, 3).is_none());
        assert!(answer(&answer(&p, 2).unwrap(), 2).is_none(), "replies are not answered");
        assert!(answer(&p[..30], 2).is_none() && answer(b"garbage", 2).is_none());
        assert!(is_consent(&p) && !is_consent(b"HD\x03\x01") && !is_consent(b""));
    }
}
