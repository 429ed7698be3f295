//! Consent of an ICMP echo flow (`send -T icmp`): the target's kernel proves, and keeps
//! proving, that it wants the requests by answering them.
//!
//! An echo reply is the target's own 1:1 answer (same size, same payload, no amplification),
//! and a host that does not want pings stops answering them (`icmp_echo_ignore_all`, a
//! firewall). So the rules of [`crate::consent`] apply with the replies as the answers:
//! - **before the first request of the run**, probes (36-byte requests marked as consent, not
//!   traffic) go every [`PROBE_NS`] until one is answered; none in the validation time and the
//!   flow is refused without sending any traffic;
//! - **after that**, every request carries a proof (its monotonic send time and a MAC over the
//!   target, flow, sequence number and that time, [`crate::CookieJar::echo_proof`]); a reply
//!   that carries a valid proof refreshes consent from *that request's send time*. Traffic goes
//!   only while the newest answered request left less than [`LAPSE_NS`] ago, so it stops within
//!   1.6 s of the target's last answer whatever a spoofer sends; a flow quieter than
//!   [`PROBE_NS`] is probed in between; after [`EXPIRE_NS`] without an answer the flow ends.
//!
//! An off-path spoofer cannot forge a reply (it never sees the MAC); the MAC is bound to the
//! target, so another host's replies prove nothing for this one.

use std::net::IpAddr;

use horde_wire::datagram::FLAG_CONSENT;
use horde_wire::icmp::{MIN_PAYLOAD, PROOF_LEN};
use horde_wire::{DatagramHeader, DATAGRAM_HEADER_LEN};

use crate::auth::CookieJar;
pub use crate::consent::{EXPIRE_NS, LAPSE_NS, PROBE_NS};

/// What a verified reply was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// The answer to a consent probe (not traffic).
    Probe,
    /// The echo of a request of the flow's traffic: its header (send time, sequence number).
    Data(DatagramHeader),
}

/// One ICMP flow's consent, kept by its sender. Times are any steady clock in ns.
#[derive(Clone)]
pub struct EchoConsent {
    jar: CookieJar,
    to: IpAddr,
    flow: u32,
    /// The echo identifier of the flow's requests (replies carry it back).
    id: u16,
    /// Send time of the newest answered request; None until the first answer.
    fresh_ns: Option<u64>,
    /// When the last request (traffic or probe) left.
    last_sent_ns: Option<u64>,
    probe_seq: u32,
}

impl EchoConsent {
    /// `secret`: 32 random bytes of this sender, never sent; `id`: the requests' echo
    /// identifier.
    pub fn new(secret: [u8; 32], to: IpAddr, flow: u32, id: u16) -> EchoConsent {
        EchoConsent { jar: CookieJar::new(secret), to, flow, id, fresh_ns: None, last_sent_ns: None, probe_seq: 0 }
    }

    /// The requests' echo identifier.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The target.
    pub fn target(&self) -> IpAddr {
        self.to
    }

    /// Whether the target has answered at least once (the flow was admitted).
    pub fn admitted(&self) -> bool {
        self.fresh_ns.is_some()
    }

    /// Whether requests may go to the target at `now_ns`.
    pub fn granted(&self, now_ns: u64) -> bool {
        self.fresh_ns.is_some_and(|f| now_ns < f.saturating_add(LAPSE_NS))
    }

    /// Whether the target stopped answering for so long that the flow ends.
    pub fn expired(&self, now_ns: u64) -> bool {
        self.fresh_ns.is_some_and(|f| now_ns >= f.saturating_add(EXPIRE_NS))
    }

    /// Writes the proof of request `seq` sent at `now_ns` into `payload` (an echo's payload
    /// whose datagram header is written), and notes the send. `payload` must be at least
    /// [`MIN_PAYLOAD`] bytes.
    pub fn prove(&mut self, payload: &mut [u8], seq: u32, now_ns: u64) {
        let p = &mut payload[DATAGRAM_HEADER_LEN..MIN_PAYLOAD];
        p[..8].copy_from_slice(&now_ns.to_be_bytes());
        p[8..].copy_from_slice(&self.jar.echo_proof(self.to, self.flow, seq, now_ns));
        self.last_sent_ns = Some(now_ns);
    }

    /// A consent probe's payload if one is due at `now_ns` (`real_ns`: its header's send
    /// time): before the first answer and whenever nothing was sent for [`PROBE_NS`]; none once
    /// expired.
    pub fn poll_probe(&mut self, now_ns: u64, real_ns: u64) -> Option<[u8; MIN_PAYLOAD]> {
        if self.expired(now_ns) || self.last_sent_ns.is_some_and(|t| now_ns < t.saturating_add(PROBE_NS)) {
            return None;
        }
        let mut b = [0u8; MIN_PAYLOAD];
        let seq = self.probe_seq;
        self.probe_seq = self.probe_seq.wrapping_add(1);
        DatagramHeader { flags: FLAG_CONSENT, flow: self.flow, seq, send_ns: real_ns }.emit(&mut b);
        self.prove(&mut b, seq, now_ns);
        Some(b)
    }

    /// When the next probe may be due (for the caller's timers).
    pub fn next_probe_ns(&self) -> u64 {
        self.last_sent_ns.map_or(0, |t| t.saturating_add(PROBE_NS))
    }

    /// An echo reply's payload from `from`: what it answers if it carries a valid proof of
    /// ours for this flow (then consent is fresh from that request's send time), else None.
    pub fn on_reply(&mut self, from: IpAddr, payload: &[u8]) -> Option<Reply> {
        if from != self.to || payload.len() < MIN_PAYLOAD {
            return None;
        }
        let h = DatagramHeader::parse(payload).ok()?;
        if h.flow != self.flow {
            return None;
        }
        let p = &payload[DATAGRAM_HEADER_LEN..DATAGRAM_HEADER_LEN + PROOF_LEN];
        let sent = u64::from_be_bytes(p[..8].try_into().expect("8 bytes"));
        let mac: [u8; 8] = p[8..].try_into().expect("8 bytes");
        // A proof from the future (a clock we never reached) cannot be ours.
        if self.last_sent_ns.is_none_or(|last| sent > last) || !self.jar.echo_proof_ok(self.to, self.flow, h.seq, sent, &mac) {
            return None;
        }
        self.fresh_ns = Some(self.fresh_ns.map_or(sent, |f| f.max(sent)));
        Some(if h.flags & FLAG_CONSENT != 0 { Reply::Probe } else { Reply::Data(h) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> IpAddr {
        "10.0.0.2".parse().unwrap()
    }

    fn request(c: &mut EchoConsent, seq: u32, now: u64) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        DatagramHeader { flags: 0, flow: 7, seq, send_ns: now }.emit(&mut b);
        c.prove(&mut b, seq, now);
        b
    }

    #[test]
    fn probes_until_answered_then_answers_keep_it_and_silence_ends_it() {
        let mut c = EchoConsent::new([1; 32], target(), 7, 9);
        assert!(!c.granted(0) && !c.admitted());
        let p1 = c.poll_probe(0, 5).expect("the first probe at once");
        assert!(c.poll_probe(PROBE_NS - 1, 5).is_none(), "one per probe period");
        let p2 = c.poll_probe(PROBE_NS, 5).expect("the retry");
        // The second is answered (the first was lost): admitted from its send time.
        assert_eq!(c.on_reply(target(), &p2), Some(Reply::Probe));
        assert!(c.admitted() && c.granted(PROBE_NS + LAPSE_NS - 1) && !c.granted(PROBE_NS + LAPSE_NS));
        assert_eq!(c.on_reply(target(), &p1), Some(Reply::Probe), "a late answer still proves its own time");
        // Traffic every 10 ms, answered, for 10 s: granted throughout, no probes needed.
        let mut t = PROBE_NS;
        while t < 10_000_000_000 {
            let r = request(&mut c, (t / 10_000_000) as u32, t);
            assert!(matches!(c.on_reply(target(), &r), Some(Reply::Data(h)) if h.flow == 7));
            assert!(c.granted(t) && c.poll_probe(t + 1, t).is_none(), "at {t}");
            t += 10_000_000;
        }
        // The target stops answering: traffic stops within the lapse, the flow ends by expiry.
        let last = t - 10_000_000;
        while c.granted(t) {
            request(&mut c, 0, t);
            t += 10_000_000;
        }
        assert!(t - last <= LAPSE_NS + 10_000_000);
        assert!(!c.expired(last + EXPIRE_NS - 1) && c.expired(last + EXPIRE_NS));
        assert!(c.poll_probe(last + EXPIRE_NS, 0).is_none(), "no probes once expired");
    }

    #[test]
    fn only_the_targets_answer_to_our_request_counts() {
        let mut c = EchoConsent::new([1; 32], target(), 7, 9);
        let r = request(&mut c, 3, 1_000);
        // From another address, of another flow, with a changed sequence number, time or MAC,
        // truncated, or from another sender's secret.
        assert_eq!(c.on_reply("10.0.0.3".parse().unwrap(), &r), None);
        let mut other = r.clone();
        other[7] ^= 1;
        assert_eq!(c.on_reply(target(), &other), None, "flow");
        for at in [11, DATAGRAM_HEADER_LEN + 3, DATAGRAM_HEADER_LEN + 12] {
            let mut x = r.clone();
            x[at] ^= 0x40;
            assert_eq!(c.on_reply(target(), &x), None, "byte {at}");
        }
        assert_eq!(c.on_reply(target(), &r[..MIN_PAYLOAD - 1]), None);
        let mut theirs = EchoConsent::new([2; 32], target(), 7, 9);
        let forged = request(&mut theirs, 3, 1_000);
        assert_eq!(c.on_reply(target(), &forged), None);
        assert!(!c.admitted());
        // A forged proof dated later than anything we sent, even with our MAC key unknown.
        assert!(c.on_reply(target(), &r).is_some());
        let mut future = EchoConsent::new([1; 32], target(), 7, 9);
        let far = request(&mut future, 3, 1_000_000_000_000);
        assert_eq!(c.on_reply(target(), &far), None, "sent after our last request: not ours");
        assert!(!c.granted(1_000 + LAPSE_NS));
    }

    #[test]
    fn garbage_never_panics_nor_admits() {
        let mut c = EchoConsent::new([1; 32], target(), 7, 9);
        request(&mut c, 1, 10);
        for n in 0..200usize {
            let b: Vec<u8> = (0..n).map(|i| (i * 31 + n) as u8).collect();
            assert_eq!(c.on_reply(target(), &b), None);
        }
        assert!(!c.admitted());
    }
}
