//! The per-packet log: a 32-byte file header followed by fixed 40-byte records, little-endian,
//! so that `numpy.fromfile(path, dtype=RECORD_DTYPE, offset=32)` reads it without Horde.
//!
//! ```text
//! file header (32 bytes):
//!  0 magic "HORDELOG" | 8 version u16 | 10 record length u16 | 12 role u8 | 13..16 reserved
//!  16 start time, ns since the Unix epoch, u64 | 24 reserved u64
//! record (40 bytes):
//!  0 flow u32 | 4 size u32 | 8 seq u64 | 16 t_a u64 | 24 t_b u64 | 32 tag u32
//!  36 tos u8 | 37 ttl u8 | 38 kind u8 | 39 flags u8
//! ```
//! Times are ns since the Unix epoch (CLOCK_REALTIME). Meaning of `t_a` / `t_b` by kind:
//! - `Sent`: scheduled departure / actual departure (the difference is the send lateness);
//! - `Received`: send time carried in the packet / arrival time;
//! - `Echoed`: send time of the original packet / arrival of its echo back at the sender (RTT).
//!
//! `tos`/`ttl` are as read from the received packet (255/0 when the OS did not report them).

use crate::{need, WireError};

pub const LOG_HEADER_LEN: usize = 32;
pub const RECORD_LEN: usize = 40;
pub const LOG_VERSION: u16 = 1;
const MAGIC: [u8; 8] = *b"HORDELOG";

/// Record flag: `t_b` is a kernel receive timestamp (SO_TIMESTAMPNS), not a user-space read.
pub const FLAG_KERNEL_TS: u8 = 0x01;
/// Record flag: the size was clamped to the transport's limits when sent.
pub const FLAG_CLAMPED: u8 = 0x02;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Sender = 1,
    Receiver = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogHeader {
    pub role: Role,
    pub start_ns: u64,
}

impl LogHeader {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, LOG_HEADER_LEN)?;
        if buf[0..8] != MAGIC {
            return Err(WireError::BadMagic);
        }
        let version = u16::from_le_bytes([buf[8], buf[9]]);
        if version != LOG_VERSION {
            return Err(WireError::Version(version.min(255) as u8));
        }
        let rec = u16::from_le_bytes([buf[10], buf[11]]) as usize;
        if rec != RECORD_LEN {
            return Err(WireError::BadLength(rec));
        }
        let role = match buf[12] {
            1 => Role::Sender,
            2 => Role::Receiver,
            _ => return Err(WireError::BadMagic),
        };
        Ok(LogHeader { role, start_ns: u64::from_le_bytes(buf[16..24].try_into().unwrap()) })
    }

    pub fn emit(&self, buf: &mut [u8]) {
        buf[..LOG_HEADER_LEN].fill(0);
        buf[0..8].copy_from_slice(&MAGIC);
        buf[8..10].copy_from_slice(&LOG_VERSION.to_le_bytes());
        buf[10..12].copy_from_slice(&(RECORD_LEN as u16).to_le_bytes());
        buf[12] = self.role as u8;
        buf[16..24].copy_from_slice(&self.start_ns.to_le_bytes());
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum RecordKind {
    #[default]
    Sent = 0,
    Received = 1,
    Echoed = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    pub flow: u32,
    pub size: u32,
    pub seq: u64,
    pub t_a: u64,
    pub t_b: u64,
    pub tag: u32,
    pub tos: u8,
    pub ttl: u8,
    pub kind: RecordKind,
    pub flags: u8,
}

impl Record {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, RECORD_LEN)?;
        let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().unwrap());
        let kind = match buf[38] {
            0 => RecordKind::Sent,
            1 => RecordKind::Received,
            2 => RecordKind::Echoed,
            k => return Err(WireError::Version(k)),
        };
        Ok(Record {
            flow: u32_at(0),
            size: u32_at(4),
            seq: u64_at(8),
            t_a: u64_at(16),
            t_b: u64_at(24),
            tag: u32_at(32),
            tos: buf[36],
            ttl: buf[37],
            kind,
            flags: buf[39],
        })
    }

    pub fn emit(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&self.flow.to_le_bytes());
        buf[4..8].copy_from_slice(&self.size.to_le_bytes());
        buf[8..16].copy_from_slice(&self.seq.to_le_bytes());
        buf[16..24].copy_from_slice(&self.t_a.to_le_bytes());
        buf[24..32].copy_from_slice(&self.t_b.to_le_bytes());
        buf[32..36].copy_from_slice(&self.tag.to_le_bytes());
        buf[36] = self.tos;
        buf[37] = self.ttl;
        buf[38] = self.kind as u8;
        buf[39] = self.flags;
    }
}

/// Reads a whole log held in memory: its header and an iterator over records. A trailing
/// partial record (a log cut off mid-write) is ignored and reported by `trailing_bytes`.
pub fn read_all(buf: &[u8]) -> Result<(LogHeader, impl Iterator<Item = Result<Record, WireError>> + '_), WireError> {
    let header = LogHeader::parse(buf)?;
    let body = &buf[LOG_HEADER_LEN..];
    let whole = body.len() / RECORD_LEN * RECORD_LEN;
    Ok((header, body[..whole].chunks_exact(RECORD_LEN).map(Record::parse)))
}

/// Bytes after the last whole record (non-zero for a log cut off mid-write).
pub fn trailing_bytes(buf: &[u8]) -> usize {
    buf.len().saturating_sub(LOG_HEADER_LEN) % RECORD_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record_round_trip() {
        let h = LogHeader { role: Role::Receiver, start_ns: 123 };
        let mut hb = [0u8; LOG_HEADER_LEN];
        h.emit(&mut hb);
        assert_eq!(LogHeader::parse(&hb).unwrap(), h);
        let r = Record { flow: 1, size: 64, seq: u64::MAX, t_a: 5, t_b: 9, tag: 77, tos: 0xb8, ttl: 63, kind: RecordKind::Echoed, flags: FLAG_KERNEL_TS };
        let mut rb = [0u8; RECORD_LEN];
        r.emit(&mut rb);
        assert_eq!(Record::parse(&rb).unwrap(), r);
        let mut file = hb.to_vec();
        file.extend_from_slice(&rb);
        file.extend_from_slice(&rb[..7]);
        let (hh, recs) = read_all(&file).unwrap();
        assert_eq!(hh, h);
        assert_eq!(recs.map(|r| r.unwrap()).collect::<Vec<_>>(), vec![r]);
        assert_eq!(trailing_bytes(&file), 7);
    }

    #[test]
    fn rejects_foreign_files() {
        assert_eq!(LogHeader::parse(b"not a log file at all, no no no!"), Err(WireError::BadMagic));
        assert!(LogHeader::parse(b"short").is_err());
    }
}
