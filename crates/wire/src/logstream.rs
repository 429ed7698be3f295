//! The live log stream (`horde logd`): what a sender, receiver or agent sends a log server over
//! TLS while it runs, and what the server answers. The records are the log file's own 40-byte
//! records ([`crate::log`]), so the server writes what it receives as it comes, and a log
//! streamed is byte for byte the log written locally, plus the gap records the server adds.
//!
//! ```text
//! hello, source → server (after the TLS handshake; 60 + name bytes):
//!  0 magic "HORDELGS" | 8 version u8 | 9 role u8 (1 sender, 2 receiver) | 10 name length u8
//!  11 0 | 12 proof [16] | 28 0 [32] | 60 name (1..=64 bytes: A-Z a-z 0-9 . _ -)
//! answer, server → source (60 bytes):
//!  0 magic "HORDELGS" | 8 version u8 | 9 status u8 | 10 0 [2] | 12 proof [16] | 28 0 [32]
//! frame, source → server: 0 type u8 | 1 0 [3] | 4 payload length u32 (big-endian) | payload
//!  HEADER (1):  the log's 32-byte file header, first and once
//!  RECORDS (2): 1..=4096 whole records
//!  GAP (3):     16 bytes: records the source could not stream u64 | since ns u64
//!  KEEPALIVE (4): empty, at least every [`KEEPALIVE_NS`] while nothing else goes
//!  END (5):     8 bytes: records the source's log holds u64; the server answers with
//! END_ACK, server → source: a frame of type 6 with 8 bytes: records written u64
//! ```
//! The proofs are MACs under the run key over the TLS session's exported keying material
//! (RFC 5705/8446 §7.5), one label per direction: each side proves it holds the key *on this
//! connection*, so neither a replay nor a relay between two TLS sessions passes
//! (`horde_proto::RunKey::logstream_proof`). Nothing here does I/O.

use crate::{need, WireError, LOG_HEADER_LEN, RECORD_LEN};

pub const MAGIC: [u8; 8] = *b"HORDELGS";
pub const LOGSTREAM_VERSION: u8 = 1;
pub const HELLO_FIXED: usize = 60;
pub const ANSWER_LEN: usize = 60;
pub const NAME_MAX: usize = 64;
pub const FRAME_HEADER_LEN: usize = 8;
/// Records in one RECORDS frame, at most (a log writer's batch).
pub const MAX_FRAME_RECORDS: usize = 4096;
pub const MAX_PAYLOAD: usize = MAX_FRAME_RECORDS * RECORD_LEN;
/// A source sends something at least this often; a server waits 4 × this for a silent source.
pub const KEEPALIVE_NS: u64 = 2_000_000_000;

/// A source's hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHello {
    pub role: crate::Role,
    pub proof: [u8; 16],
    pub name: String,
}

/// Whether `name` can name a log: 1..=64 of `A-Z a-z 0-9 . _ -`, not starting with `.`.
pub fn name_ok(name: &str) -> bool {
    (1..=NAME_MAX).contains(&name.len()) && !name.starts_with('.') && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl LogHello {
    /// The hello's length, once its first [`HELLO_FIXED`] bytes are in.
    pub fn len_from_prefix(buf: &[u8]) -> Result<usize, WireError> {
        need(buf, HELLO_FIXED)?;
        if buf[0..8] != MAGIC {
            return Err(WireError::BadMagic);
        }
        if buf[8] != LOGSTREAM_VERSION {
            return Err(WireError::Version(buf[8]));
        }
        let n = buf[10] as usize;
        if !(1..=NAME_MAX).contains(&n) {
            return Err(WireError::BadLength(n));
        }
        Ok(HELLO_FIXED + n)
    }

    pub fn parse(buf: &[u8]) -> Result<LogHello, WireError> {
        let len = LogHello::len_from_prefix(buf)?;
        need(buf, len)?;
        let role = match buf[9] {
            1 => crate::Role::Sender,
            2 => crate::Role::Receiver,
            _ => return Err(WireError::BadMagic),
        };
        let name = std::str::from_utf8(&buf[HELLO_FIXED..len]).map_err(|_| WireError::BadMagic)?;
        if !name_ok(name) {
            return Err(WireError::BadMagic);
        }
        Ok(LogHello { role, proof: buf[12..28].try_into().expect("16 bytes"), name: name.to_string() })
    }

    /// The hello's bytes. Panics if the name is not [`name_ok`].
    pub fn emit(&self) -> Vec<u8> {
        assert!(name_ok(&self.name), "a log stream's name is 1..=64 of A-Z a-z 0-9 . _ -");
        let mut b = vec![0u8; HELLO_FIXED + self.name.len()];
        b[0..8].copy_from_slice(&MAGIC);
        b[8] = LOGSTREAM_VERSION;
        b[9] = self.role as u8;
        b[10] = self.name.len() as u8;
        b[12..28].copy_from_slice(&self.proof);
        b[HELLO_FIXED..].copy_from_slice(self.name.as_bytes());
        b
    }
}

/// What the server says to a hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerStatus {
    /// Admitted: the proof is the server's.
    Ok = 0,
    /// The server has as many sources as it takes.
    Busy = 1,
    /// The server could not open a log for it (disk, permissions).
    Unavailable = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogAnswer {
    pub status: AnswerStatus,
    pub proof: [u8; 16],
}

impl LogAnswer {
    pub fn parse(buf: &[u8]) -> Result<LogAnswer, WireError> {
        need(buf, ANSWER_LEN)?;
        if buf[0..8] != MAGIC {
            return Err(WireError::BadMagic);
        }
        if buf[8] != LOGSTREAM_VERSION {
            return Err(WireError::Version(buf[8]));
        }
        let status = match buf[9] {
            0 => AnswerStatus::Ok,
            1 => AnswerStatus::Busy,
            2 => AnswerStatus::Unavailable,
            _ => return Err(WireError::BadMagic),
        };
        Ok(LogAnswer { status, proof: buf[12..28].try_into().expect("16 bytes") })
    }

    pub fn emit(&self) -> [u8; ANSWER_LEN] {
        let mut b = [0u8; ANSWER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8] = LOGSTREAM_VERSION;
        b[9] = self.status as u8;
        b[12..28].copy_from_slice(&self.proof);
        b
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    Header = 1,
    Records = 2,
    Gap = 3,
    Keepalive = 4,
    End = 5,
    EndAck = 6,
}

/// One frame, borrowed from the decoder's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// The log's file header (32 bytes, not yet parsed).
    Header(&'a [u8]),
    /// Whole records (a multiple of 40 bytes, not yet parsed).
    Records(&'a [u8]),
    Gap {
        records: u64,
        since_ns: u64,
    },
    Keepalive,
    End {
        records: u64,
    },
    EndAck {
        records: u64,
    },
}

/// The frame header and payload of `f`, ready to write.
pub fn emit_frame(f: &Frame<'_>, out: &mut Vec<u8>) {
    let (ty, payload): (FrameType, Vec<u8>) = match *f {
        Frame::Header(h) => (FrameType::Header, h.to_vec()),
        Frame::Records(r) => (FrameType::Records, r.to_vec()),
        Frame::Gap { records, since_ns } => (FrameType::Gap, [records.to_be_bytes(), since_ns.to_be_bytes()].concat()),
        Frame::Keepalive => (FrameType::Keepalive, Vec::new()),
        Frame::End { records } => (FrameType::End, records.to_be_bytes().to_vec()),
        Frame::EndAck { records } => (FrameType::EndAck, records.to_be_bytes().to_vec()),
    };
    out.push(ty as u8);
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
}

/// A RECORDS frame's header for `n_bytes` of records that follow it (so a writer need not copy
/// the records into a frame).
pub fn records_frame_header(n_bytes: usize) -> [u8; FRAME_HEADER_LEN] {
    let mut h = [0u8; FRAME_HEADER_LEN];
    h[0] = FrameType::Records as u8;
    h[4..8].copy_from_slice(&(n_bytes as u32).to_be_bytes());
    h
}

/// Why a stream of frames is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("unknown frame type {0}")]
    Type(u8),
    #[error("frame type {ty} with a payload of {len} bytes (wrong for its type)")]
    Length { ty: u8, len: usize },
}

/// Splits a byte stream into frames; bounded: it holds at most one frame
/// ([`FRAME_HEADER_LEN`] + [`MAX_PAYLOAD`] bytes) plus what one `feed` gave it.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
}

impl FrameDecoder {
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > MAX_PAYLOAD {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held and not yet returned as frames.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next whole frame, `Ok(None)` if more bytes are needed, or an error (the stream is
    /// not a log stream: close it).
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, FrameError> {
        let b = &self.buf[self.start..];
        if b.len() < FRAME_HEADER_LEN {
            return Ok(None);
        }
        let ty = b[0];
        let len = u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")) as usize;
        let ok = match ty {
            1 => len == LOG_HEADER_LEN,
            2 => len > 0 && len <= MAX_PAYLOAD && len.is_multiple_of(RECORD_LEN),
            3 => len == 16,
            4 => len == 0,
            5 | 6 => len == 8,
            t => return Err(FrameError::Type(t)),
        };
        if !ok || b[1..4] != [0, 0, 0] {
            return Err(FrameError::Length { ty, len });
        }
        if b.len() < FRAME_HEADER_LEN + len {
            return Ok(None);
        }
        let at = self.start + FRAME_HEADER_LEN;
        self.start = at + len;
        let p = &self.buf[at..at + len];
        let u64_at = |i: usize| u64::from_be_bytes(p[i..i + 8].try_into().expect("8 bytes"));
        Ok(Some(match ty {
            1 => Frame::Header(p),
            2 => Frame::Records(p),
            3 => Frame::Gap { records: u64_at(0), since_ns: u64_at(8) },
            4 => Frame::Keepalive,
            5 => Frame::End { records: u64_at(0) },
            _ => Frame::EndAck { records: u64_at(0) },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_and_answer_round_trip() {
        let h = LogHello { role: crate::Role::Receiver, proof: [7; 16], name: "recv-h2.log_1".into() };
        let b = h.emit();
        assert_eq!(LogHello::len_from_prefix(&b).unwrap(), b.len());
        assert_eq!(LogHello::parse(&b).unwrap(), h);
        let a = LogAnswer { status: AnswerStatus::Busy, proof: [1; 16] };
        assert_eq!(LogAnswer::parse(&a.emit()).unwrap(), a);
        for bad in ["", ".hidden", "a/b", "../x", "é", &"x".repeat(65)] {
            assert!(!name_ok(bad), "{bad}");
        }
        let mut b2 = b.clone();
        b2[HELLO_FIXED] = b'/';
        assert!(LogHello::parse(&b2).is_err());
        b2[8] = 9;
        assert_eq!(LogHello::parse(&b2), Err(WireError::Version(9)));
    }

    #[test]
    fn frames_come_out_whatever_the_split() {
        let mut s = Vec::new();
        emit_frame(&Frame::Header(&[3; LOG_HEADER_LEN]), &mut s);
        emit_frame(&Frame::Records(&[1; RECORD_LEN * 3]), &mut s);
        emit_frame(&Frame::Gap { records: 5, since_ns: 9 }, &mut s);
        emit_frame(&Frame::Keepalive, &mut s);
        s.extend_from_slice(&records_frame_header(RECORD_LEN));
        s.extend_from_slice(&[2; RECORD_LEN]);
        emit_frame(&Frame::End { records: 4 }, &mut s);
        for split in 0..s.len() {
            let mut d = FrameDecoder::new();
            let mut got = Vec::new();
            for part in [&s[..split], &s[split..]] {
                d.feed(part);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(format!("{f:?}").len());
                }
            }
            assert_eq!(got.len(), 6, "split at {split}");
            assert_eq!(d.pending(), 0);
        }
    }

    #[test]
    fn bad_frames_are_errors_not_waits() {
        for (ty, len) in [(9u8, 0u32), (2, 41), (2, 0), (2, (MAX_PAYLOAD + RECORD_LEN) as u32), (1, 31), (4, 1), (5, u32::MAX)] {
            let mut d = FrameDecoder::new();
            let mut b = vec![ty, 0, 0, 0];
            b.extend_from_slice(&len.to_be_bytes());
            d.feed(&b);
            assert!(d.next_frame().is_err(), "type {ty} length {len}");
        }
    }
}
