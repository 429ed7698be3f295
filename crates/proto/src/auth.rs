//! Secrets: the run key that authenticates hellos, and the cookies that validate addresses.
//!
//! MACs are HMAC-SHA256 (RFC 2104, FIPS 180-4) truncated to 128 bits, with a domain string per
//! use so a MAC made for one message can never pass for another. Comparisons are constant-time
//! (`hmac`'s `verify_truncated_left`).

use std::net::{IpAddr, SocketAddr};

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How long a cookie is good for: it is accepted in the 30 s period it was issued in and the
/// next, so between 30 and 60 s. Enough for a set-up phase of 10,000 flows (under a second
/// here) and for late joiners, who get a fresh one.
pub const COOKIE_PERIOD_NS: u64 = 30_000_000_000;

/// A run's shared secret, 32 bytes. Both sides of a run hold it (and, later, every agent of
/// it); hellos carry a MAC under it. [`RunKey::OPEN`] is "no key": hellos still carry a MAC,
/// but anyone can compute it, so only address validation protects the receiver.
#[derive(Clone, PartialEq, Eq)]
pub struct RunKey([u8; 32]);

impl std::fmt::Debug for RunKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_open() { "RunKey(open)" } else { "RunKey(<secret>)" })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("a run key is 64 hexadecimal digits (32 bytes), got {0} characters")]
    Length(usize),
    #[error("a run key is 64 hexadecimal digits; character {0} is not one")]
    NotHex(usize),
    #[error("the all-zero run key is reserved for \"no key\"; generate one with `horde key`")]
    Zero,
}

impl RunKey {
    pub const OPEN: RunKey = RunKey([0; 32]);

    /// A key from 32 bytes of the caller's randomness. All zeros is [`RunKey::OPEN`].
    pub fn from_bytes(b: [u8; 32]) -> RunKey {
        RunKey(b)
    }

    /// Parses 64 hexadecimal digits (surrounding white space ignored).
    pub fn parse_hex(s: &str) -> Result<RunKey, KeyError> {
        let t = s.trim();
        if t.len() != 64 {
            return Err(KeyError::Length(t.chars().count()));
        }
        let mut b = [0u8; 32];
        for (i, c) in t.bytes().enumerate() {
            let v = (c as char).to_digit(16).ok_or(KeyError::NotHex(i + 1))? as u8;
            b[i / 2] = b[i / 2] << 4 | v;
        }
        if b == [0; 32] {
            return Err(KeyError::Zero);
        }
        Ok(RunKey(b))
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn is_open(&self) -> bool {
        self.0 == [0; 32]
    }

    /// The MAC of a UDP hello's signed bytes.
    pub fn mac_udp_hello(&self, signed: &[u8]) -> [u8; 16] {
        mac16(&self.0, b"horde-udp-hello-v2", signed)
    }

    /// The MAC of a TCP stream hello's signed bytes.
    pub fn mac_tcp_hello(&self, signed: &[u8]) -> [u8; 16] {
        mac16(&self.0, b"horde-tcp-hello-v2", signed)
    }

    /// Whether `mac` is the UDP hello MAC of `signed`, in constant time.
    pub fn verify_udp_hello(&self, signed: &[u8], mac: &[u8; 16]) -> bool {
        verify16(&self.0, b"horde-udp-hello-v2", signed, mac)
    }

    /// Whether `mac` is the TCP hello MAC of `signed`, in constant time.
    pub fn verify_tcp_hello(&self, signed: &[u8], mac: &[u8; 16]) -> bool {
        verify16(&self.0, b"horde-tcp-hello-v2", signed, mac)
    }

    /// The MAC of a signalling message's signed bytes (`horde_wire::signal`).
    pub fn mac_signal(&self, signed: &[u8]) -> [u8; 16] {
        mac16(&self.0, b"horde-signal-v1", signed)
    }

    /// Whether `mac` is the signalling MAC of `signed`, in constant time.
    pub fn verify_signal(&self, signed: &[u8], mac: &[u8; 16]) -> bool {
        verify16(&self.0, b"horde-signal-v1", signed, mac)
    }

    /// A live log stream's proof (`horde_wire::logstream`): the MAC of one TLS session's
    /// exported keying material (`binding`), with one label per direction, so a proof is good on
    /// the connection it was made for and from the side it was made by, and nowhere else.
    pub fn logstream_proof(&self, side: LogSide, binding: &[u8]) -> [u8; 16] {
        mac16(&self.0, side.domain(), binding)
    }

    /// Whether `proof` is [`RunKey::logstream_proof`] of `binding` for `side`, in constant time.
    pub fn logstream_proof_ok(&self, side: LogSide, binding: &[u8], proof: &[u8; 16]) -> bool {
        verify16(&self.0, side.domain(), binding, proof)
    }
}

/// Which end of a live log stream makes a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogSide {
    /// The sender, receiver or agent streaming its log.
    Source,
    /// The log server.
    Server,
}

impl LogSide {
    fn domain(self) -> &'static [u8] {
        match self {
            LogSide::Source => b"horde-logstream-source-v1",
            LogSide::Server => b"horde-logstream-server-v1",
        }
    }

    /// The label under which both ends export the TLS session's keying material.
    pub const EXPORTER_LABEL: &'static [u8] = b"EXPORTER-horde-logstream-v1";
}

fn hmac(key: &[u8], domain: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(domain);
    for p in parts {
        m.update(p);
    }
    m
}

fn mac16(key: &[u8], domain: &[u8], data: &[u8]) -> [u8; 16] {
    hmac(key, domain, &[data]).finalize().into_bytes()[..16].try_into().expect("SHA-256 is 32 bytes")
}

fn verify16(key: &[u8], domain: &[u8], data: &[u8], mac: &[u8; 16]) -> bool {
    hmac(key, domain, &[data]).verify_truncated_left(mac).is_ok()
}

fn ip16(a: SocketAddr) -> [u8; 16] {
    match a.ip() {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// Stateless address-validation cookies: the receiver keeps nothing for an address until it
/// has returned a cookie issued to it, so a flood of spoofed hellos costs no memory.
#[derive(Clone)]
pub struct CookieJar {
    secret: [u8; 32],
}

impl CookieJar {
    /// `secret`: 32 random bytes, private to this receiver (never sent).
    pub fn new(secret: [u8; 32]) -> CookieJar {
        CookieJar { secret }
    }

    fn cookie(&self, period: u64, from: SocketAddr, flow: u32, tag: u32) -> HmacSha256 {
        hmac(&self.secret, b"horde-cookie-v2", &[&period.to_be_bytes(), &ip16(from), &from.port().to_be_bytes(), &flow.to_be_bytes(), &tag.to_be_bytes()])
    }

    /// The nonce of consent probe `number` to the peer `to` of `flow`, admitted at `since_ns`:
    /// only this receiver can make it, and only the peer sees it (so an off-path spoofer cannot
    /// answer for the peer); another admission of the same flow gets other nonces.
    pub fn consent_nonce(&self, to: SocketAddr, flow: u32, since_ns: u64, number: u32) -> [u8; 16] {
        self.nonce(to, flow, since_ns, number).finalize().into_bytes()[..16].try_into().expect("SHA-256 is 32 bytes")
    }

    /// Whether `nonce` is [`CookieJar::consent_nonce`]'s, in constant time.
    pub fn consent_nonce_ok(&self, to: SocketAddr, flow: u32, since_ns: u64, number: u32, nonce: &[u8; 16]) -> bool {
        self.nonce(to, flow, since_ns, number).verify_truncated_left(nonce).is_ok()
    }

    fn nonce(&self, to: SocketAddr, flow: u32, since_ns: u64, number: u32) -> HmacSha256 {
        hmac(&self.secret, b"horde-consent-v3", &[&ip16(to), &to.port().to_be_bytes(), &flow.to_be_bytes(), &since_ns.to_be_bytes(), &number.to_be_bytes()])
    }

    /// The MAC of an ICMP echo request of `flow` to `to` (sequence number `seq`, sent at
    /// `mono_ns`): only this sender can make it, and only the target sees it, so an echo reply
    /// that carries it is the target's answer to a request we sent (see [`crate::echo`]).
    pub fn echo_proof(&self, to: IpAddr, flow: u32, seq: u32, mono_ns: u64) -> [u8; 8] {
        self.echo_mac(to, flow, seq, mono_ns).finalize().into_bytes()[..8].try_into().expect("SHA-256 is 32 bytes")
    }

    /// Whether `mac` is [`CookieJar::echo_proof`]'s, in constant time.
    pub fn echo_proof_ok(&self, to: IpAddr, flow: u32, seq: u32, mono_ns: u64, mac: &[u8; 8]) -> bool {
        self.echo_mac(to, flow, seq, mono_ns).verify_truncated_left(mac).is_ok()
    }

    fn echo_mac(&self, to: IpAddr, flow: u32, seq: u32, mono_ns: u64) -> HmacSha256 {
        hmac(&self.secret, b"horde-echo-v1", &[&ip16(SocketAddr::new(to, 0)), &flow.to_be_bytes(), &seq.to_be_bytes(), &mono_ns.to_be_bytes()])
    }

    /// The cookie for a hello of `flow` (with `tag`) from `from`, at time `now_ns` (any clock
    /// the caller keeps steady).
    pub fn issue(&self, now_ns: u64, from: SocketAddr, flow: u32, tag: u32) -> [u8; 16] {
        self.cookie(now_ns / COOKIE_PERIOD_NS, from, flow, tag).finalize().into_bytes()[..16].try_into().expect("SHA-256 is 32 bytes")
    }

    /// Whether `cookie` was issued to this address and flow in this period or the one before.
    pub fn check(&self, now_ns: u64, from: SocketAddr, flow: u32, tag: u32, cookie: &[u8; 16]) -> bool {
        let p = now_ns / COOKIE_PERIOD_NS;
        [p, p.saturating_sub(1)].into_iter().any(|q| self.cookie(q, from, flow, tag).verify_truncated_left(cookie).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logstream_proofs_hold_only_for_their_side_key_and_session() {
        let k = RunKey::from_bytes([4; 32]);
        let p = k.logstream_proof(LogSide::Source, b"session one");
        assert!(k.logstream_proof_ok(LogSide::Source, b"session one", &p));
        assert!(!k.logstream_proof_ok(LogSide::Server, b"session one", &p), "a source's proof is not the server's");
        assert!(!k.logstream_proof_ok(LogSide::Source, b"session two", &p), "a proof is bound to its session");
        assert!(!RunKey::from_bytes([5; 32]).logstream_proof_ok(LogSide::Source, b"session one", &p));
    }

    #[test]
    fn keys_parse_and_print() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let k = RunKey::parse_hex(hex).unwrap();
        assert_eq!(k.to_hex(), hex);
        assert!(!k.is_open());
        assert_eq!(format!("{k:?}"), "RunKey(<secret>)");
        assert_eq!(RunKey::parse_hex("abc"), Err(KeyError::Length(3)));
        assert_eq!(RunKey::parse_hex(&"g".repeat(64)), Err(KeyError::NotHex(1)));
        assert_eq!(RunKey::parse_hex(&"0".repeat(64)), Err(KeyError::Zero));
    }

    #[test]
    fn macs_bind_key_domain_and_bytes() {
        let k = RunKey::from_bytes([7; 32]);
        let m = k.mac_udp_hello(b"hello");
        assert!(k.verify_udp_hello(b"hello", &m));
        assert!(!k.verify_udp_hello(b"hellp", &m), "other bytes");
        assert!(!k.verify_tcp_hello(b"hello", &m), "other domain");
        assert!(!RunKey::from_bytes([8; 32]).verify_udp_hello(b"hello", &m), "other key");
    }

    #[test]
    fn cookies_bind_address_flow_and_time() {
        let jar = CookieJar::new([1; 32]);
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let c = jar.issue(5 * COOKIE_PERIOD_NS + 1, a, 3, 0x100);
        assert!(jar.check(5 * COOKIE_PERIOD_NS + 2, a, 3, 0x100, &c));
        assert!(jar.check(6 * COOKIE_PERIOD_NS + 2, a, 3, 0x100, &c), "the next period still takes it");
        assert!(!jar.check(7 * COOKIE_PERIOD_NS, a, 3, 0x100, &c), "two periods later it has expired");
        assert!(!jar.check(5 * COOKIE_PERIOD_NS, "127.0.0.1:4001".parse().unwrap(), 3, 0x100, &c), "another port");
        assert!(!jar.check(5 * COOKIE_PERIOD_NS, "127.0.0.2:4000".parse().unwrap(), 3, 0x100, &c), "another address");
        assert!(!jar.check(5 * COOKIE_PERIOD_NS, a, 4, 0x100, &c), "another flow");
        assert!(!CookieJar::new([2; 32]).check(5 * COOKIE_PERIOD_NS, a, 3, 0x100, &c), "another receiver");
    }
}
