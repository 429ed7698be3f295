//! Control datagrams of address validation: a UDP flow's sender proves it can receive at its
//! source address before anything beyond a small challenge is sent there (the idea of QUIC's
//! Retry and TCP's handshake). Every one starts with the datagram header of
//! [`crate::datagram`]; `flow`, `seq` (the tag) and `send_ns` (the base) are the hello's.
//!
//! ```text
//! hello (sender → receiver), at least 64 bytes:
//!  0                   20           36           52           64
//!  +-------------------+------------+------------+------------+
//!  | header, HELLO     | cookie 16 B| MAC 16 B   | zeros      |
//!  +-------------------+------------+------------+------------+
//! challenge (receiver → an address it has not validated), 36 bytes:
//!  | header, CHALLENGE | cookie 16 B|
//! answer (receiver → a validated address), 21 bytes:
//!  | header, ANSWER    | status u8  |
//! consent probe (a receiver or server side → an admitted peer it sends to), 36 bytes, and the
//! peer's reply (the probe with ECHO_REPLY added), 36 bytes:
//!  | header, CONSENT [| ECHO_REPLY]; seq = probe number, send_ns = 0 | nonce 16 B |
//! ```
//! A challenge is smaller than the hello that caused it, so a spoofed hello makes Horde send at
//! most 36/64 of its bytes to the victim. The cookie is all zeros until the receiver gave one;
//! the MAC covers bytes 0..36 (computed by `horde-proto`). Big-endian like every header.
//!
//! After admission a peer keeps proving that it wants what it gets (RFC 7675's consent
//! freshness): the side that sends to it probes every 250 ms with a nonce only the peer sees
//! (an off-path spoofer cannot), and the peer echoes the probe. A reply is no larger than its
//! probe, and probes go only to admitted addresses.

use crate::datagram::{FLAG_ANSWER, FLAG_CHALLENGE, FLAG_CONSENT, FLAG_ECHO_REPLY, FLAG_HELLO};
use crate::{need, DatagramHeader, WireError, DATAGRAM_HEADER_LEN};

/// The smallest hello: its padding pays for the challenge (see the module docs).
pub const HELLO_DATAGRAM_LEN: usize = 64;
/// The part of a hello its MAC covers.
pub const HELLO_SIGNED_LEN: usize = 36;
pub const CHALLENGE_LEN: usize = 36;
pub const ANSWER_LEN: usize = 21;

/// A UDP flow's hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hello {
    /// `flags` must include [`FLAG_HELLO`]; other bits (e.g. echo request) describe the flow.
    pub header: DatagramHeader,
    pub cookie: [u8; 16],
    pub mac: [u8; 16],
}

impl Hello {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, HELLO_DATAGRAM_LEN)?;
        let header = DatagramHeader::parse(buf)?;
        if header.flags & FLAG_HELLO == 0 {
            return Err(WireError::BadMagic);
        }
        Ok(Hello { header, cookie: buf[20..36].try_into().unwrap(), mac: buf[36..52].try_into().unwrap() })
    }

    /// Writes the hello, zero-padded to [`HELLO_DATAGRAM_LEN`].
    pub fn emit(&self) -> [u8; HELLO_DATAGRAM_LEN] {
        let mut b = [0u8; HELLO_DATAGRAM_LEN];
        b[..HELLO_SIGNED_LEN].copy_from_slice(&self.signed());
        b[36..52].copy_from_slice(&self.mac);
        b
    }

    /// The bytes the MAC covers: header and cookie.
    pub fn signed(&self) -> [u8; HELLO_SIGNED_LEN] {
        let mut b = [0u8; HELLO_SIGNED_LEN];
        DatagramHeader { flags: self.header.flags | FLAG_HELLO, ..self.header }.emit(&mut b);
        b[20..36].copy_from_slice(&self.cookie);
        b
    }
}

/// The receiver's challenge: "send your hello again with this cookie".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Challenge {
    pub flow: u32,
    pub tag: u32,
    pub base_ns: u64,
    pub cookie: [u8; 16],
}

impl Challenge {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, CHALLENGE_LEN)?;
        let h = DatagramHeader::parse(buf)?;
        if h.flags & FLAG_CHALLENGE == 0 {
            return Err(WireError::BadMagic);
        }
        Ok(Challenge { flow: h.flow, tag: h.seq, base_ns: h.send_ns, cookie: buf[20..36].try_into().unwrap() })
    }

    pub fn emit(&self) -> [u8; CHALLENGE_LEN] {
        let mut b = [0u8; CHALLENGE_LEN];
        DatagramHeader { flags: FLAG_CHALLENGE, flow: self.flow, seq: self.tag, send_ns: self.base_ns }.emit(&mut b);
        b[20..36].copy_from_slice(&self.cookie);
        b
    }
}

/// What the receiver decided about a validated hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Accepted = 0,
    /// The receiver holds as many flows (players) as it may.
    Full = 1,
    /// The server side knows no such player (tag) in this run.
    UnknownPlayer = 2,
    /// Another connection already plays this player.
    Taken = 3,
}

impl Status {
    fn from_u8(v: u8) -> Option<Status> {
        Some(match v {
            0 => Status::Accepted,
            1 => Status::Full,
            2 => Status::UnknownPlayer,
            3 => Status::Taken,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Status::Accepted => "accepted",
            Status::Full => "the receiver holds as many flows as it may",
            Status::UnknownPlayer => "the server side has no such player in this run",
            Status::Taken => "another connection already plays this player",
        }
    }
}

/// The receiver's answer to a validated hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub flow: u32,
    pub tag: u32,
    pub base_ns: u64,
    pub status: Status,
}

impl Answer {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, ANSWER_LEN)?;
        let h = DatagramHeader::parse(buf)?;
        if h.flags & FLAG_ANSWER == 0 {
            return Err(WireError::BadMagic);
        }
        let status = Status::from_u8(buf[DATAGRAM_HEADER_LEN]).ok_or(WireError::BadLength(buf[DATAGRAM_HEADER_LEN] as usize))?;
        Ok(Answer { flow: h.flow, tag: h.seq, base_ns: h.send_ns, status })
    }

    pub fn emit(&self) -> [u8; ANSWER_LEN] {
        let mut b = [0u8; ANSWER_LEN];
        DatagramHeader { flags: FLAG_ANSWER, flow: self.flow, seq: self.tag, send_ns: self.base_ns }.emit(&mut b);
        b[DATAGRAM_HEADER_LEN] = self.status as u8;
        b
    }
}

pub const CONSENT_LEN: usize = 36;

/// A consent probe, or (`reply`) the peer's answer to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsentProbe {
    pub flow: u32,
    /// The probe's number since the flow's admission (wraps).
    pub number: u32,
    pub nonce: [u8; 16],
    pub reply: bool,
}

impl ConsentProbe {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, CONSENT_LEN)?;
        let h = DatagramHeader::parse(buf)?;
        if h.flags & FLAG_CONSENT == 0 || h.flags & !(FLAG_CONSENT | FLAG_ECHO_REPLY) != 0 {
            return Err(WireError::BadMagic);
        }
        Ok(ConsentProbe { flow: h.flow, number: h.seq, nonce: buf[20..36].try_into().unwrap(), reply: h.flags & FLAG_ECHO_REPLY != 0 })
    }

    pub fn emit(&self) -> [u8; CONSENT_LEN] {
        let mut b = [0u8; CONSENT_LEN];
        let flags = if self.reply { FLAG_CONSENT | FLAG_ECHO_REPLY } else { FLAG_CONSENT };
        DatagramHeader { flags, flow: self.flow, seq: self.number, send_ns: 0 }.emit(&mut b);
        b[20..36].copy_from_slice(&self.nonce);
        b
    }
}

/// What a UDP reverse flow's keep-alive carries after its header (bytes 20..40): the number and
/// nonce of the latest consent probe its sender received. Only the sender at the admitted
/// address sees those probes, so a keep-alive with a valid proof comes from it; a spoofed one
/// (an off-path attacker's) cannot have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeepAliveProof {
    pub number: u32,
    pub nonce: [u8; 16],
}

/// Where the proof sits in a keep-alive, and the smallest keep-alive that holds it.
pub const PROOF_AT: usize = DATAGRAM_HEADER_LEN;
pub const KEEPALIVE_MIN_LEN: usize = PROOF_AT + 20;

impl KeepAliveProof {
    /// The proof in a keep-alive, if it is long enough to hold one.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, KEEPALIVE_MIN_LEN)?;
        Ok(KeepAliveProof {
            number: u32::from_be_bytes(buf[PROOF_AT..PROOF_AT + 4].try_into().unwrap()),
            nonce: buf[PROOF_AT + 4..PROOF_AT + 20].try_into().unwrap(),
        })
    }

    /// Writes the proof into a keep-alive of at least [`KEEPALIVE_MIN_LEN`] bytes (a shorter one
    /// is left as it is: it proves nothing).
    pub fn emit(&self, buf: &mut [u8]) {
        if buf.len() >= KEEPALIVE_MIN_LEN {
            buf[PROOF_AT..PROOF_AT + 4].copy_from_slice(&self.number.to_be_bytes());
            buf[PROOF_AT + 4..PROOF_AT + 20].copy_from_slice(&self.nonce);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_sizes() {
        let h = Hello { header: DatagramHeader { flags: FLAG_HELLO | 1, flow: 7, seq: 0x0300, send_ns: 99 }, cookie: [3; 16], mac: [4; 16] };
        let b = h.emit();
        assert_eq!(Hello::parse(&b).unwrap(), h);
        assert_eq!(&b[52..], &[0u8; 12], "padding is zero");
        let c = Challenge { flow: 7, tag: 0x0300, base_ns: 99, cookie: [5; 16] };
        assert_eq!(Challenge::parse(&c.emit()).unwrap(), c);
        let a = Answer { flow: 7, tag: 0x0300, base_ns: 99, status: Status::Taken };
        assert_eq!(Answer::parse(&a.emit()).unwrap(), a);
        // The amplification bound: nothing Horde sends to an unvalidated address is larger.
        const { assert!(CHALLENGE_LEN < HELLO_DATAGRAM_LEN && ANSWER_LEN < HELLO_DATAGRAM_LEN) };
        let p = ConsentProbe { flow: 7, number: 9, nonce: [6; 16], reply: false };
        assert_eq!(ConsentProbe::parse(&p.emit()).unwrap(), p);
        let r = ConsentProbe { reply: true, ..p };
        assert_eq!(ConsentProbe::parse(&r.emit()).unwrap(), r);
        assert!(ConsentProbe::parse(&c.emit()).is_err(), "a challenge is not a probe");
        assert!(ConsentProbe::parse(&p.emit()[..35]).is_err());
    }

    #[test]
    fn refuses_short_and_mislabelled() {
        let h = Hello { header: DatagramHeader { flags: FLAG_HELLO, ..Default::default() }, ..Default::default() };
        assert!(Hello::parse(&h.emit()[..63]).is_err(), "an unpadded hello is refused");
        assert!(Challenge::parse(&h.emit()).is_err(), "a hello is not a challenge");
        let mut a = Answer { flow: 1, tag: 2, base_ns: 3, status: Status::Accepted }.emit();
        a[20] = 200;
        assert!(Answer::parse(&a).is_err());
    }
}
