//! ICMP echo messages carrying Horde's payload (`send -T icmp`), and the IPv4 packets a raw
//! ICMP socket reads them in.
//!
//! ```text
//!  ICMP echo (RFC 792)                       Horde's payload
//!  0      1      2         4      6      8   8                 28             36
//!  +------+------+---------+------+------+   +-----------------+--------------+------------+
//!  | type | code | checksum| id   | seq  |   | datagram header | proof (16 B) | padding... |
//!  +------+------+---------+------+------+   +-----------------+--------------+------------+
//! ```
//! Type 8 is an echo request, 0 its reply; the target's kernel answers a request with the same
//! id, sequence number and payload. The payload starts with Horde's datagram header
//! ([`crate::datagram`]), so a receiver logs requests as it logs UDP datagrams, and a sender
//! reads its replies' send times back for the round trip. The proof after it is the sender's
//! own (a time and a MAC, `horde_proto::echo`): a reply carrying it can only be the target's
//! answer to a request the sender made. A payload's size (the flow's packet size) counts from
//! the datagram header, as a UDP payload's does.

use std::net::Ipv4Addr;

use crate::{need, WireError, DATAGRAM_HEADER_LEN};

/// ICMP's echo header: type, code, checksum, identifier, sequence number.
pub const ECHO_HEADER_LEN: usize = 8;
/// The sender's proof after the datagram header: its monotonic send time and a MAC.
pub const PROOF_LEN: usize = 16;
/// The smallest payload of a Horde echo: its header and proof (36 bytes).
pub const MIN_PAYLOAD: usize = DATAGRAM_HEADER_LEN + PROOF_LEN;
/// The largest ICMP payload in one IPv4 packet: 65,535 − 20 − 8.
pub const MAX_PAYLOAD: usize = 65_507;
pub const ECHO_REQUEST: u8 = 8;
pub const ECHO_REPLY: u8 = 0;

/// The Internet checksum (RFC 1071) of `bytes`: the ones' complement of the ones' complement
/// sum of its 16-bit words (an odd last byte padded with zero).
pub fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        sum += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [last] = words.remainder() {
        sum += (*last as u64) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes an echo header (request or reply) at the start of `msg` and the checksum of the whole
/// message; the payload must already be in `msg[ECHO_HEADER_LEN..]`.
///
/// Panics if `msg` is shorter than [`ECHO_HEADER_LEN`].
pub fn emit_echo(msg: &mut [u8], request: bool, id: u16, seq: u16) {
    msg[0] = if request { ECHO_REQUEST } else { ECHO_REPLY };
    msg[1] = 0;
    msg[2..4].copy_from_slice(&[0, 0]);
    msg[4..6].copy_from_slice(&id.to_be_bytes());
    msg[6..8].copy_from_slice(&seq.to_be_bytes());
    let c = checksum(msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
}

/// An echo request or reply read from an IPv4 packet (what a raw ICMP socket reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo<'a> {
    pub request: bool,
    pub id: u16,
    pub seq: u16,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub tos: u8,
    pub ttl: u8,
    /// What follows the echo header.
    pub payload: &'a [u8],
}

/// Reads an IPv4 packet holding an ICMP echo request or reply with a correct checksum; any
/// other packet (another protocol or ICMP type, a fragment, a bad length or checksum) is an
/// error. Never panics.
pub fn parse_ipv4_echo(packet: &[u8]) -> Result<Echo<'_>, WireError> {
    need(packet, 20)?;
    if packet[0] >> 4 != 4 {
        return Err(WireError::BadMagic);
    }
    let ihl = (packet[0] & 0x0F) as usize * 4;
    if ihl < 20 {
        return Err(WireError::BadLength(ihl));
    }
    need(packet, ihl)?;
    let total = u16::from_be_bytes([packet[2], packet[3]]) as usize;
    if total < ihl + ECHO_HEADER_LEN || total > packet.len() {
        return Err(WireError::BadLength(total));
    }
    let frag = u16::from_be_bytes([packet[6], packet[7]]);
    // More fragments, or an offset: not a whole message.
    if frag & 0x3FFF != 0 || packet[9] != 1 {
        return Err(WireError::BadMagic);
    }
    let msg = &packet[ihl..total];
    if !matches!(msg[0], ECHO_REQUEST | ECHO_REPLY) || msg[1] != 0 {
        return Err(WireError::BadMagic);
    }
    if checksum(msg) != 0 {
        return Err(WireError::BadLength(msg.len()));
    }
    let ip = |at: usize| Ipv4Addr::new(packet[at], packet[at + 1], packet[at + 2], packet[at + 3]);
    Ok(Echo {
        request: msg[0] == ECHO_REQUEST,
        id: u16::from_be_bytes([msg[4], msg[5]]),
        seq: u16::from_be_bytes([msg[6], msg[7]]),
        src: ip(12),
        dst: ip(16),
        tos: packet[1],
        ttl: packet[8],
        payload: &msg[ECHO_HEADER_LEN..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 packet around `msg`, as the kernel hands it to a raw socket.
    fn ipv4(msg: &[u8], src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0x45, 0x10, 0, 0, 0, 1, 0x40, 0, 63, 1, 0, 0];
        p[2..4].copy_from_slice(&((20 + msg.len()) as u16).to_be_bytes());
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        let c = checksum(&p);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p.extend_from_slice(msg);
        p
    }

    #[test]
    fn checksum_is_rfc_1071s() {
        // RFC 1071 §3's example words sum to ddf2: the checksum is its complement.
        assert_eq!(checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
        assert_eq!(checksum(&[]), 0xFFFF);
        assert_eq!(checksum(&[0x01]), !0x0100);
    }

    #[test]
    fn an_emitted_echo_parses_back_and_a_changed_byte_does_not() {
        let mut msg = vec![0u8; ECHO_HEADER_LEN + 41];
        msg[ECHO_HEADER_LEN..].iter_mut().enumerate().for_each(|(i, b)| *b = (i as u8).wrapping_mul(7));
        emit_echo(&mut msg, true, 0xBEEF, 513);
        let p = ipv4(&msg, [10, 0, 0, 1], [10, 0, 0, 2]);
        let e = parse_ipv4_echo(&p).unwrap();
        assert!(e.request);
        assert_eq!((e.id, e.seq, e.tos, e.ttl), (0xBEEF, 513, 0x10, 63));
        assert_eq!((e.src, e.dst), (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(e.payload, &msg[ECHO_HEADER_LEN..]);
        let mut bad = p.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(parse_ipv4_echo(&bad).is_err(), "checksum");
        let mut reply = msg.clone();
        emit_echo(&mut reply, false, 0xBEEF, 513);
        assert!(!parse_ipv4_echo(&ipv4(&reply, [10, 0, 0, 2], [10, 0, 0, 1])).unwrap().request);
    }

    #[test]
    fn other_packets_are_errors_never_panics() {
        let mut msg = vec![0u8; ECHO_HEADER_LEN + 4];
        emit_echo(&mut msg, true, 1, 1);
        let p = ipv4(&msg, [1, 1, 1, 1], [2, 2, 2, 2]);
        for cut in 0..p.len() {
            assert!(parse_ipv4_echo(&p[..cut]).is_err(), "cut at {cut}");
        }
        let mut unreachable = msg.clone();
        unreachable[0] = 3;
        assert!(parse_ipv4_echo(&ipv4(&unreachable, [1, 1, 1, 1], [2, 2, 2, 2])).is_err());
        let mut udp = p.clone();
        udp[9] = 17;
        assert!(parse_ipv4_echo(&udp).is_err());
        let mut frag = p.clone();
        frag[6] = 0x20;
        assert!(parse_ipv4_echo(&frag).is_err());
        let mut v6 = p.clone();
        v6[0] = 0x65;
        assert!(parse_ipv4_echo(&v6).is_err());
        let mut long_ihl = p.clone();
        long_ihl[0] = 0x4F;
        assert!(parse_ipv4_echo(&long_ihl).is_err());
        // Random bytes, and random bytes behind a valid IPv4 header: errors or echoes, never panics.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for n in 0..3_000usize {
            let mut b: Vec<u8> = (0..n % 200)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let _ = parse_ipv4_echo(&b);
            if b.len() >= 20 {
                b[0] = 0x45;
                b[9] = 1;
                b[6] = 0;
                b[7] = 0;
                if let Ok(e) = parse_ipv4_echo(&b) {
                    assert!(e.payload.len() + 28 <= b.len());
                }
            }
        }
        // Bytes after the IP total length (link padding) are not part of the message.
        let mut padded = p.clone();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(parse_ipv4_echo(&padded).unwrap().payload.len(), 4);
    }
}
