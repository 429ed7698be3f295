//! The regulated circuit's packets: a small LLUDP-like layout, separable from the rest so that
//! a real OpenSim message layer can replace it.
//!
//! ```text
//! header (12 bytes): magic "HV" | version u8 (1) | kind u8 | flags u8 | channel u8 | 0 u16 | seq u32
//! kind 0 data:     header | send_ns u64 | zero padding up to the packet's size (28..=1500 bytes)
//! kind 1 ack:      header | n u8 (1..=64) | n × seq u32
//! kind 2 throttle: header | 7 × f32 bit/s (resend, land, wind, cloud, task, texture, asset)
//! kind 3 ping:     header | id u32 | t_ns u64       kind 4 pong: the same, echoed
//! kind 5 bye:      header
//! ```
//! Every integer is big-endian. `seq` is the circuit's sequence number (data: per packet, a
//! resent packet keeps its own; others: 0). Flags: 0x01 reliable (the client acknowledges it),
//! 0x02 resent.
//! Parsing never panics: anything short, unknown or inconsistent is an error.

use crate::channels::Channel;

pub const MAGIC: [u8; 2] = *b"HV";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 12;
pub const DATA_MIN: usize = HEADER_LEN + 8;
/// The largest packet (an LLUDP packet fits a 1500-byte MTU with IP and UDP headers to spare).
pub const DATA_MAX: usize = 1472;
pub const MAX_ACKS: usize = 64;
pub const FLAG_RELIABLE: u8 = 0x01;
pub const FLAG_RESENT: u8 = 0x02;

#[derive(Debug, Clone, PartialEq)]
pub enum Packet {
    Data { seq: u32, channel: Channel, flags: u8, send_ns: u64, size: u16 },
    Ack { seqs: Vec<u32> },
    Throttle { bps: [f32; 7] },
    Ping { id: u32, t_ns: u64 },
    Pong { id: u32, t_ns: u64 },
    Bye,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    #[error("too short: {0} bytes")]
    Short(usize),
    #[error("not a circuit packet (magic)")]
    Magic,
    #[error("circuit version {0}, expected {VERSION}")]
    Version(u8),
    #[error("unknown kind {0}")]
    Kind(u8),
    #[error("unknown channel {0}")]
    Channel(u8),
    #[error("bad length {0} for its kind")]
    Length(usize),
    #[error("throttle rate not a finite non-negative number")]
    Rate,
}

fn header(buf: &mut Vec<u8>, kind: u8, flags: u8, channel: u8, seq: u32) {
    buf.clear();
    buf.extend_from_slice(&MAGIC);
    buf.push(VERSION);
    buf.push(kind);
    buf.push(flags);
    buf.push(channel);
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&seq.to_be_bytes());
}

impl Packet {
    /// Writes the packet into `buf` (cleared first).
    pub fn emit(&self, buf: &mut Vec<u8>) {
        match self {
            Packet::Data { seq, channel, flags, send_ns, size } => {
                header(buf, 0, *flags, *channel as u8, *seq);
                buf.extend_from_slice(&send_ns.to_be_bytes());
                let size = (*size as usize).clamp(DATA_MIN, DATA_MAX);
                buf.resize(size, 0);
            }
            Packet::Ack { seqs } => {
                header(buf, 1, 0, 0, 0);
                let n = seqs.len().min(MAX_ACKS);
                buf.push(n as u8);
                for s in &seqs[..n] {
                    buf.extend_from_slice(&s.to_be_bytes());
                }
            }
            Packet::Throttle { bps } => {
                header(buf, 2, 0, 0, 0);
                for b in bps {
                    buf.extend_from_slice(&b.to_be_bytes());
                }
            }
            Packet::Ping { id, t_ns } | Packet::Pong { id, t_ns } => {
                header(buf, if matches!(self, Packet::Ping { .. }) { 3 } else { 4 }, 0, 0, 0);
                buf.extend_from_slice(&id.to_be_bytes());
                buf.extend_from_slice(&t_ns.to_be_bytes());
            }
            Packet::Bye => header(buf, 5, 0, 0, 0),
        }
    }

    pub fn parse(b: &[u8]) -> Result<Packet, WireError> {
        if b.len() < HEADER_LEN {
            return Err(WireError::Short(b.len()));
        }
        if b[0..2] != MAGIC {
            return Err(WireError::Magic);
        }
        if b[2] != VERSION {
            return Err(WireError::Version(b[2]));
        }
        let (kind, flags, ch) = (b[3], b[4], b[5]);
        let seq = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        let body = &b[HEADER_LEN..];
        let u32_at = |i: usize| u32::from_be_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
        let u64_at = |i: usize| u64::from_be_bytes(body[i..i + 8].try_into().expect("8 bytes"));
        match kind {
            0 => {
                if !(DATA_MIN..=DATA_MAX).contains(&b.len()) {
                    return Err(WireError::Length(b.len()));
                }
                let channel = *Channel::ALL.get(ch as usize).ok_or(WireError::Channel(ch))?;
                Ok(Packet::Data { seq, channel, flags: flags & (FLAG_RELIABLE | FLAG_RESENT), send_ns: u64_at(0), size: b.len() as u16 })
            }
            1 => {
                let n = *body.first().ok_or(WireError::Length(b.len()))? as usize;
                if n == 0 || n > MAX_ACKS || body.len() != 1 + 4 * n {
                    return Err(WireError::Length(b.len()));
                }
                Ok(Packet::Ack { seqs: (0..n).map(|i| u32_at(1 + 4 * i)).collect() })
            }
            2 => {
                if body.len() != 28 {
                    return Err(WireError::Length(b.len()));
                }
                let mut bps = [0f32; 7];
                for (i, x) in bps.iter_mut().enumerate() {
                    *x = f32::from_bits(u32_at(4 * i));
                    if !x.is_finite() || *x < 0.0 {
                        return Err(WireError::Rate);
                    }
                }
                Ok(Packet::Throttle { bps })
            }
            3 | 4 => {
                if body.len() != 12 {
                    return Err(WireError::Length(b.len()));
                }
                let (id, t_ns) = (u32_at(0), u64_at(4));
                Ok(if kind == 3 { Packet::Ping { id, t_ns } } else { Packet::Pong { id, t_ns } })
            }
            5 if body.is_empty() => Ok(Packet::Bye),
            5 => Err(WireError::Length(b.len())),
            k => Err(WireError::Kind(k)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_packet_round_trips_and_garbage_is_refused() {
        let all = [
            Packet::Data { seq: 7, channel: Channel::Texture, flags: FLAG_RELIABLE | FLAG_RESENT, send_ns: 123456789, size: 1000 },
            Packet::Data { seq: u32::MAX, channel: Channel::Resend, flags: 0, send_ns: 0, size: DATA_MIN as u16 },
            Packet::Ack { seqs: vec![1, 2, 3, u32::MAX] },
            Packet::Throttle { bps: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.5] },
            Packet::Ping { id: 9, t_ns: 42 },
            Packet::Pong { id: 9, t_ns: 42 },
            Packet::Bye,
        ];
        let mut buf = Vec::new();
        for p in &all {
            p.emit(&mut buf);
            assert_eq!(&Packet::parse(&buf).unwrap(), p);
            // Every truncation is an error, never a panic.
            for n in 0..buf.len() {
                let _ = Packet::parse(&buf[..n]);
            }
        }
        assert_eq!(Packet::parse(b"HD\x02"), Err(WireError::Short(3)));
        assert_eq!(Packet::parse(&[0u8; 40]), Err(WireError::Magic));
        let mut t = Vec::new();
        Packet::Throttle { bps: [0.0; 7] }.emit(&mut t);
        t[12..16].copy_from_slice(&f32::NAN.to_be_bytes());
        assert_eq!(Packet::parse(&t), Err(WireError::Rate));
        let mut d = Vec::new();
        Packet::Data { seq: 1, channel: Channel::Task, flags: 0, send_ns: 0, size: 100 }.emit(&mut d);
        d[5] = 7;
        assert_eq!(Packet::parse(&d), Err(WireError::Channel(7)));
        d[3] = 9;
        assert_eq!(Packet::parse(&d), Err(WireError::Kind(9)));
    }
}
