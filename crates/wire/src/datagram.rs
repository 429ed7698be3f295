//! The header at the start of every Horde UDP datagram.
//!
//! ```text
//!  0      2      3      4             8             12                          20
//!  +------+------+------+-------------+-------------+---------------------------+
//!  | 'HD' | ver  | flags| flow id u32 | seq u32     | send time, ns since epoch |
//!  +------+------+------+-------------+-------------+---------------------------+
//! ```
//! All fields big-endian. The rest of the datagram is padding up to the flow's size.
//! `seq` wraps after 2^32 packets of one flow; the decoder unwraps it.

use crate::{need, WireError, VERSION};

pub const DATAGRAM_HEADER_LEN: usize = 20;
const MAGIC: [u8; 2] = *b"HD";

/// The receiver should send this datagram back (round-trip-time mode).
pub const FLAG_ECHO_REQUEST: u8 = 0x01;
/// This datagram is an echo of one the peer sent.
pub const FLAG_ECHO_REPLY: u8 = 0x02;
/// A flow's hello (see [`crate::control`]): `seq` carries the flow's tag and `send_ns` the
/// sender's start time, as a TCP stream's hello does. It is not traffic.
pub const FLAG_HELLO: u8 = 0x04;
/// The receiver's challenge to a hello from an address it has not validated yet.
pub const FLAG_CHALLENGE: u8 = 0x08;
/// The receiver's answer to a validated hello: accepted, or refused with a reason.
pub const FLAG_ANSWER: u8 = 0x10;
/// A reverse flow's keep-alive: the sender asks the receiver to send bulk back to its
/// (validated) address; each renews that consent for a second. The datagram's length is the
/// size the receiver sends.
pub const FLAG_REVERSE: u8 = 0x20;
/// Bulk that a receiver sends back to a reverse flow.
pub const FLAG_REVERSE_DATA: u8 = 0x40;
/// A consent probe after admission (see [`crate::control::ConsentProbe`]); with
/// [`FLAG_ECHO_REPLY`], the peer's answer to one.
pub const FLAG_CONSENT: u8 = 0x80;
/// Flags that mark a control datagram rather than traffic.
pub const CONTROL_FLAGS: u8 = FLAG_HELLO | FLAG_CHALLENGE | FLAG_ANSWER | FLAG_CONSENT;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DatagramHeader {
    pub flags: u8,
    pub flow: u32,
    pub seq: u32,
    pub send_ns: u64,
}

impl DatagramHeader {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, DATAGRAM_HEADER_LEN)?;
        if buf[0..2] != MAGIC {
            return Err(WireError::BadMagic);
        }
        if buf[2] != VERSION {
            return Err(WireError::Version(buf[2]));
        }
        Ok(DatagramHeader {
            flags: buf[3],
            flow: u32::from_be_bytes(buf[4..8].try_into().unwrap()),
            seq: u32::from_be_bytes(buf[8..12].try_into().unwrap()),
            send_ns: u64::from_be_bytes(buf[12..20].try_into().unwrap()),
        })
    }

    pub fn emit(&self, buf: &mut [u8]) {
        buf[0..2].copy_from_slice(&MAGIC);
        buf[2] = VERSION;
        buf[3] = self.flags;
        buf[4..8].copy_from_slice(&self.flow.to_be_bytes());
        buf[8..12].copy_from_slice(&self.seq.to_be_bytes());
        self.emit_time(buf, self.send_ns);
    }

    /// Rewrites only the send time: the sender stamps a prepared datagram just before it leaves.
    pub fn emit_time(&self, buf: &mut [u8], send_ns: u64) {
        buf[12..20].copy_from_slice(&send_ns.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = DatagramHeader { flags: FLAG_ECHO_REQUEST, flow: 0xdead_beef, seq: 42, send_ns: 1_700_000_000_123_456_789 };
        let mut buf = [0u8; 64];
        h.emit(&mut buf);
        assert_eq!(DatagramHeader::parse(&buf).unwrap(), h);
        assert_eq!(&buf[0..2], b"HD");
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(DatagramHeader::parse(&[0; 5]), Err(WireError::Truncated { need: 20, got: 5 }));
        assert_eq!(DatagramHeader::parse(&[0; 20]), Err(WireError::BadMagic));
        let mut buf = [0u8; 20];
        DatagramHeader::default().emit(&mut buf);
        buf[2] = 9;
        assert_eq!(DatagramHeader::parse(&buf), Err(WireError::Version(9)));
    }
}
