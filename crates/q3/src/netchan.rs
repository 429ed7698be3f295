//! The netchan: sequenced datagrams carrying one message each, large messages in fragments.
//!
//! ```text
//! client → server:  seq i32 LE (bit 31: fragment) | qport u16 LE | [checksum i32 LE] | [frag start u16, frag len u16] | message
//! server → client:  seq i32 LE (bit 31: fragment) |               [checksum i32 LE] | [frag start u16, frag len u16] | message
//! ```
//! The checksum (`challenge ^ (seq * challenge)`) exists only in protocol 71 proper; the legacy
//! protocol (68, and OpenArena's "71", which is 68 renumbered) has none and scrambles messages
//! instead: [`scramble_client`] and [`unscramble_server`]. A fragment shorter than
//! [`FRAGMENT_SIZE`] ends its message. Sequence numbers only grow: an older or repeated one is
//! dropped, a gap counts as dropped packets.

use crate::msg::Reader;

/// Largest fragment (the engine's MAX_PACKETLEN − 100).
pub const FRAGMENT_SIZE: usize = 1300;
const FRAGMENT_BIT: u32 = 1 << 31;
/// Largest reassembled message (MAX_MSGLEN).
pub const MAX_MSGLEN: usize = 16384;
/// Reliable commands kept per side (MAX_RELIABLE_COMMANDS).
pub const MAX_RELIABLE: usize = 64;

/// Why an arriving datagram was not a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// Shorter than its header.
    Short,
    /// A sequence number already seen (duplicate or out of order).
    Old,
    /// Protocol 71: the checksum does not match the challenge (spoofed or stale).
    Checksum,
    /// A fragment that is not the next one expected, or of an impossible length.
    Fragment,
    /// Part of a message still missing its other fragments (not an error).
    Partial,
}

/// A client's end of a netchan.
#[derive(Debug, Clone)]
pub struct Channel {
    pub challenge: i32,
    pub qport: u16,
    /// Legacy protocol: no checksum field, scrambled messages.
    pub legacy: bool,
    /// Sequence of the next datagram sent.
    pub outgoing: i32,
    /// Highest sequence received.
    pub incoming: i32,
    frag_seq: i32,
    frag_buf: Vec<u8>,
    /// Server datagrams missing from the sequence (gaps), duplicated or out of order.
    pub dropped: u64,
    pub old: u64,
}

impl Channel {
    pub fn new(challenge: i32, qport: u16, legacy: bool) -> Channel {
        Channel { challenge, qport, legacy, outgoing: 1, incoming: 0, frag_seq: 0, frag_buf: Vec::new(), dropped: 0, old: 0 }
    }

    fn checksum(&self, seq: i32) -> i32 {
        self.challenge ^ seq.wrapping_mul(self.challenge)
    }

    /// Frames `message` as the next datagram(s). Clients never send messages of a fragment's
    /// size or more (their messages are small), but the framing handles them.
    pub fn transmit(&mut self, message: &[u8]) -> Vec<Vec<u8>> {
        let seq = self.outgoing;
        self.outgoing = self.outgoing.wrapping_add(1);
        let header = |frag: bool| {
            let mut h = Vec::with_capacity(16);
            h.extend_from_slice(&((seq as u32) | if frag { FRAGMENT_BIT } else { 0 }).to_le_bytes());
            h.extend_from_slice(&self.qport.to_le_bytes());
            if !self.legacy {
                h.extend_from_slice(&self.checksum(seq).to_le_bytes());
            }
            h
        };
        if message.len() < FRAGMENT_SIZE {
            let mut p = header(false);
            p.extend_from_slice(message);
            return vec![p];
        }
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            let len = FRAGMENT_SIZE.min(message.len() - start);
            let mut p = header(true);
            p.extend_from_slice(&(start as u16).to_le_bytes());
            p.extend_from_slice(&(len as u16).to_le_bytes());
            p.extend_from_slice(&message[start..start + len]);
            out.push(p);
            start += len;
            if len < FRAGMENT_SIZE {
                return out;
            }
        }
    }

    /// A server datagram: the whole message it completes (sequence, message bytes), if any.
    pub fn process(&mut self, packet: &[u8]) -> Result<(i32, Vec<u8>), Drop> {
        let mut at = 4;
        let raw = u32::from_le_bytes(packet.get(..4).ok_or(Drop::Short)?.try_into().unwrap());
        let fragmented = raw & FRAGMENT_BIT != 0;
        let seq = (raw & !FRAGMENT_BIT) as i32;
        if !self.legacy {
            let c = i32::from_le_bytes(packet.get(4..8).ok_or(Drop::Short)?.try_into().unwrap());
            if c != self.checksum(seq) {
                return Err(Drop::Checksum);
            }
            at = 8;
        }
        let (frag_start, frag_len) = if fragmented {
            let f = packet.get(at..at + 4).ok_or(Drop::Short)?;
            at += 4;
            (u16::from_le_bytes([f[0], f[1]]) as usize, u16::from_le_bytes([f[2], f[3]]) as usize)
        } else {
            (0, 0)
        };
        if seq <= self.incoming {
            self.old += 1;
            return Err(Drop::Old);
        }
        let gap = seq - (self.incoming + 1);
        if !fragmented {
            self.dropped += gap.max(0) as u64;
            self.incoming = seq;
            return Ok((seq, packet[at..].to_vec()));
        }
        if seq != self.frag_seq {
            self.frag_seq = seq;
            self.frag_buf.clear();
        }
        if frag_start != self.frag_buf.len() {
            return Err(Drop::Fragment);
        }
        if at + frag_len > packet.len() || self.frag_buf.len() + frag_len > MAX_MSGLEN {
            return Err(Drop::Fragment);
        }
        self.frag_buf.extend_from_slice(&packet[at..at + frag_len]);
        if frag_len == FRAGMENT_SIZE {
            return Err(Drop::Partial);
        }
        self.dropped += gap.max(0) as u64;
        self.incoming = seq;
        Ok((seq, std::mem::take(&mut self.frag_buf)))
    }
}

/// The engine's scrambling key walk: from `start`, each byte is XORed with a key that first
/// takes in the next character of `text` (cycled; `%` and bytes over 127 count as `.`),
/// shifted left by one at odd offsets (`parity_base` + index gives the offset's parity).
fn scramble(data: &mut [u8], start: usize, mut key: u8, text: &[u8], parity_base: usize) {
    let mut index = 0;
    for (i, b) in data.iter_mut().enumerate().skip(start) {
        if index >= text.len() {
            index = 0;
        }
        let c = text.get(index).copied().unwrap_or(0);
        let c = if c > 127 || c == b'%' { b'.' } else { c };
        key ^= c.wrapping_shl(((parity_base + i) & 1) as u32);
        index += 1;
        *b ^= key;
    }
}

/// Legacy protocol, client → server: scrambles a message after its first 12 bytes with the
/// challenge, the server id and message acknowledge it starts with, and the server command
/// its reliable acknowledge names (`last_server_command`).
pub fn scramble_client(message: &mut [u8], challenge: i32, server_id: i32, message_ack: i32, last_server_command: &str) {
    if message.len() <= 12 {
        return;
    }
    let key = (challenge ^ server_id ^ message_ack) as u8;
    scramble(message, 12, key, last_server_command.as_bytes(), 0);
}

/// Legacy protocol, server → client: unscrambles a message (the bytes after the netchan
/// header) of sequence `seq`. `reliable_command(n)` gives this client's reliable command `n`
/// (the one the message's first field acknowledges).
pub fn unscramble_server(message: &mut [u8], challenge: i32, seq: i32, reliable_command: impl Fn(i32) -> String) {
    let ack = Reader::new(message, 0).long().unwrap_or(0);
    let text = reliable_command(ack);
    let key = (challenge ^ seq) as u8;
    // The header (4 bytes) is even, so offsets in the message have the packet's parity.
    scramble(message, 4, key, text.as_bytes(), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrambling_is_its_own_inverse_and_keeps_the_head() {
        let mut m: Vec<u8> = (0..64).collect();
        let orig = m.clone();
        scramble_client(&mut m, 1234567, 99, 7, "say hi%");
        assert_eq!(&m[..12], &orig[..12]);
        assert_ne!(m, orig);
        scramble_client(&mut m, 1234567, 99, 7, "say hi%");
        assert_eq!(m, orig);
    }

    #[test]
    fn fragments_reassemble_and_sequences_only_grow() {
        let mut tx = Channel::new(5, 7, true);
        let big: Vec<u8> = (0..3000u32).map(|x| x as u8).collect();
        let packets = tx.transmit(&big);
        assert_eq!(packets.len(), 3);
        // A client's packets carry a qport; strip it to play the server's side here.
        let as_server = |p: &Vec<u8>| [&p[..4], &p[6..]].concat();
        let mut rx = Channel::new(5, 0, true);
        assert_eq!(rx.process(&as_server(&packets[0])), Err(Drop::Partial));
        assert_eq!(rx.process(&as_server(&packets[2])), Err(Drop::Fragment), "out of order");
        assert_eq!(rx.process(&as_server(&packets[1])), Err(Drop::Partial));
        assert_eq!(rx.process(&as_server(&packets[2])), Ok((1, big)));
        assert_eq!(rx.process(&as_server(&packets[2])), Err(Drop::Old));
        let small = tx.transmit(b"abc");
        let small2 = tx.transmit(b"de");
        assert_eq!(rx.process(&as_server(&small2[0])), Ok((3, b"de".to_vec())));
        assert_eq!(rx.dropped, 1, "sequence 2 never came");
        assert_eq!(rx.process(&as_server(&small[0])), Err(Drop::Old));
    }

    #[test]
    fn protocol_71_checks_the_checksum() {
        let mut tx = Channel::new(1000, 3, false);
        let p = tx.transmit(b"x").remove(0);
        let p = [&p[..4], &p[6..]].concat();
        let mut rx = Channel::new(1000, 0, false);
        let mut bad = p.clone();
        bad[5] ^= 1;
        assert_eq!(rx.process(&bad), Err(Drop::Checksum));
        assert_eq!(rx.process(&p), Ok((1, b"x".to_vec())));
    }
}
