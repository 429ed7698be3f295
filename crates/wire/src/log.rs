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
//! endpoint record (40 bytes, kind 3 = source, 4 = destination; version 2):
//!  0 flow u32 | 4 port u16 | 6 protocol u8 (IANA: 1 ICMP, 6 TCP, 17 UDP) | 7 family u8 (4, 6)
//!  8..24 address, network byte order (IPv4 in 8..12, the rest 0) | 24 learnt at u64 | 32 tag u32
//!  36 0 | 37 0 | 38 kind u8 | 39 0
//! end record (40 bytes, kind 5; version 3): a receiver's record of the sender's end-of-flow
//! message (`crate::signal`), once per flow:
//!  0 flow u32 | 4 reason u32 (0 done, 1 interrupted, 2 consent lapsed) | 8 packets sent u64
//!  16 bytes sent u64 | 24 arrived at u64 | 32 tag u32 | 36 0 | 37 0 | 38 kind u8 | 39 0
//! gap record (40 bytes, kind 6; version 4): written by a log server (`horde logd`) where
//! records are missing from a streamed log:
//!  0 flow u32 = 0 | 4 reason u32 (0 the source's stream fell behind, 1 the source was lost,
//!  2 the source fell silent, 3 the server's size limit) | 8 records missing u64 (u64::MAX: not
//!  known) | 16 since u64 (ns, the source's clock where it said so, else the server's)
//!  24 noted at u64 (the server's clock) | 32 0 | 36 0 | 37 0 | 38 kind u8 | 39 0
//! alias record (40 bytes, kind 7; version 5): a receiver's note that it logs the flow its
//! senders call `flow id` from one source under another id, because another source used that
//! id first (the source is the id's own source endpoint record):
//!  0 id u32 (the id in this log) | 4 flow id u32 (the sender's) | 8..38 0 | 38 kind u8 | 39 0
//! ```
//! Times are ns since the Unix epoch (CLOCK_REALTIME). Meaning of `t_a` / `t_b` by kind:
//! - `Sent`: scheduled departure / actual departure (the difference is the send lateness);
//! - `Received`: send time carried in the packet / arrival time;
//! - `Echoed`: send time of the original packet / arrival of its echo back at the sender (RTT).
//!
//! `tos`/`ttl` are as read from the received packet (255/0 when the OS did not report them).
//!
//! Version 2 added the endpoint records: every log names, once per flow and as soon as its
//! writer knows them (when the flow starts or is admitted), the flow's **source** (the end that opened it: `send`'s socket, a
//! player) and **destination** (the end it went to: `recv`'s socket, a server side), with the
//! protocol. In numpy, `rec[rec['kind'] < 3]` are the packets; for an endpoint,
//! `size & 0xffff` is the port and `rec.view('u1').reshape(-1, 40)[:, 8:24]` the address bytes.
//! Version 3 added the end records: a receiver logs the sender's end-of-flow message, so the
//! receiver's log alone counts the packets lost at the end of a flow and tells a flow that
//! ended from one whose sender vanished. Version 4 added the gap records of streamed logs.
//! Version 5 added the alias records: a receiver keys flows by (source address and port, flow
//! id), so two senders that both call their flow 0 are two flows in its log and its report.
//! Logs of versions 1 to 3 still decode.

use crate::{need, WireError};

pub const LOG_HEADER_LEN: usize = 32;
pub const RECORD_LEN: usize = 40;
pub const LOG_VERSION: u16 = 5;
/// The oldest log version this build reads.
pub const LOG_VERSION_MIN: u16 = 1;
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
        if !(LOG_VERSION_MIN..=LOG_VERSION).contains(&version) {
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
    /// An endpoint record: the flow's source (see [`Endpoint`]).
    Source = 3,
    /// An endpoint record: the flow's destination.
    Destination = 4,
    /// A receiver's record of the sender's end-of-flow message (version 3; see
    /// [`crate::signal::FlowEnd::record`]).
    End = 5,
    /// Records missing from a streamed log, as its log server noted (version 4; see [`Gap`]).
    Gap = 6,
    /// A receiver logs a (source, flow id) pair under another id (version 5; see [`Alias`]).
    Alias = 7,
}

impl RecordKind {
    /// A packet's record (not an endpoint record).
    pub fn is_packet(self) -> bool {
        matches!(self, RecordKind::Sent | RecordKind::Received | RecordKind::Echoed)
    }
}

/// IANA protocol numbers of the flows Horde logs.
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// One end of a flow, as an endpoint record carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub flow: u32,
    /// [`RecordKind::Source`] or [`RecordKind::Destination`].
    pub end: RecordKind,
    pub addr: std::net::SocketAddr,
    /// IANA protocol number ([`PROTO_UDP`], [`PROTO_TCP`], [`PROTO_ICMP`]).
    pub protocol: u8,
    pub tag: u32,
    /// When the logger learnt it, ns since the epoch.
    pub at_ns: u64,
}

impl Endpoint {
    /// The endpoint record. Panics if `end` is not `Source` or `Destination`.
    pub fn record(&self) -> Record {
        assert!(!self.end.is_packet(), "an endpoint is a source or a destination");
        let mut a = [0u8; 16];
        let family = match self.addr.ip() {
            std::net::IpAddr::V4(v4) => {
                a[..4].copy_from_slice(&v4.octets());
                4u32
            }
            std::net::IpAddr::V6(v6) => {
                a.copy_from_slice(&v6.octets());
                6
            }
        };
        Record {
            flow: self.flow,
            size: self.addr.port() as u32 | (self.protocol as u32) << 16 | family << 24,
            // Emitted little-endian, so the address's bytes land in file order.
            seq: u64::from_le_bytes(a[..8].try_into().unwrap()),
            t_a: u64::from_le_bytes(a[8..].try_into().unwrap()),
            t_b: self.at_ns,
            tag: self.tag,
            tos: 0,
            ttl: 0,
            kind: self.end,
            flags: 0,
        }
    }

    /// Reads an endpoint record; `None` for a packet record or an unknown address family.
    pub fn of(r: &Record) -> Option<Endpoint> {
        if !matches!(r.kind, RecordKind::Source | RecordKind::Destination) {
            return None;
        }
        let mut a = [0u8; 16];
        a[..8].copy_from_slice(&r.seq.to_le_bytes());
        a[8..].copy_from_slice(&r.t_a.to_le_bytes());
        let ip: std::net::IpAddr = match r.size >> 24 {
            4 => std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).into(),
            6 => std::net::Ipv6Addr::from(a).into(),
            _ => return None,
        };
        Some(Endpoint {
            flow: r.flow,
            end: r.kind,
            addr: std::net::SocketAddr::new(ip, r.size as u16),
            protocol: (r.size >> 16) as u8,
            tag: r.tag,
            at_ns: r.t_b,
        })
    }
}

/// A protocol number's name ("udp", "tcp", "icmp", or the number).
pub fn protocol_name(p: u8) -> String {
    match p {
        PROTO_UDP => "udp".into(),
        PROTO_TCP => "tcp".into(),
        PROTO_ICMP => "icmp".into(),
        n => n.to_string(),
    }
}

/// Why a streamed log has a gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapReason {
    /// The source's stream fell behind and it dropped records (its own log has them).
    Behind = 0,
    /// The connection ended without the source's end frame (killed, crashed, network).
    Lost = 1,
    /// The source sent nothing for longer than its keep-alive allows.
    Silent = 2,
    /// The log reached the server's size limit; what followed was not written.
    Limit = 3,
}

impl GapReason {
    pub fn name(self) -> &'static str {
        match self {
            GapReason::Behind => "the source's stream fell behind",
            GapReason::Lost => "the source was lost",
            GapReason::Silent => "the source fell silent",
            GapReason::Limit => "the log reached the server's size limit",
        }
    }
}

/// A gap in a streamed log (a record of kind [`RecordKind::Gap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub reason: GapReason,
    /// Records missing, if known.
    pub records: Option<u64>,
    pub since_ns: u64,
    pub noted_ns: u64,
}

impl Gap {
    pub fn record(&self) -> Record {
        Record {
            size: self.reason as u32,
            seq: self.records.unwrap_or(u64::MAX),
            t_a: self.since_ns,
            t_b: self.noted_ns,
            kind: RecordKind::Gap,
            ..Default::default()
        }
    }

    pub fn of(r: &Record) -> Option<Gap> {
        if r.kind != RecordKind::Gap {
            return None;
        }
        let reason = match r.size {
            0 => GapReason::Behind,
            1 => GapReason::Lost,
            2 => GapReason::Silent,
            3 => GapReason::Limit,
            _ => return None,
        };
        Some(Gap { reason, records: (r.seq != u64::MAX).then_some(r.seq), since_ns: r.t_a, noted_ns: r.t_b })
    }
}

/// A receiver's alias (a record of kind [`RecordKind::Alias`]): the flow one source calls
/// `flow` is logged under `id`, since another source used `flow` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alias {
    pub id: u32,
    pub flow: u32,
}

impl Alias {
    pub fn record(&self) -> Record {
        Record { flow: self.id, size: self.flow, kind: RecordKind::Alias, ..Default::default() }
    }

    pub fn of(r: &Record) -> Option<Alias> {
        (r.kind == RecordKind::Alias).then_some(Alias { id: r.flow, flow: r.size })
    }
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
            3 => RecordKind::Source,
            4 => RecordKind::Destination,
            5 => RecordKind::End,
            6 => RecordKind::Gap,
            7 => RecordKind::Alias,
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
    fn endpoints_round_trip_and_lie_in_file_order() {
        for addr in ["192.0.2.7:4000", "[2001:db8::1]:65535", "0.0.0.0:0"] {
            let e = Endpoint { flow: 9, end: RecordKind::Destination, addr: addr.parse().unwrap(), protocol: PROTO_TCP, tag: 3, at_ns: 55 };
            let mut b = [0u8; RECORD_LEN];
            e.record().emit(&mut b);
            let back = Record::parse(&b).unwrap();
            assert_eq!(Endpoint::of(&back), Some(e));
            assert_eq!(u16::from_le_bytes([b[4], b[5]]), e.addr.port());
            assert_eq!((b[6], b[38]), (PROTO_TCP, 4));
            match e.addr.ip() {
                std::net::IpAddr::V4(v4) => assert_eq!((&b[8..12], b[7]), (&v4.octets()[..], 4)),
                std::net::IpAddr::V6(v6) => assert_eq!((&b[8..24], b[7]), (&v6.octets()[..], 6)),
            }
        }
        assert_eq!(Endpoint::of(&Record::default()), None);
        // An endpoint record with an unknown family reads as no endpoint, without a panic.
        let r = Record { kind: RecordKind::Source, size: 9 << 24, ..Default::default() };
        assert_eq!(Endpoint::of(&r), None);
    }

    #[test]
    fn older_logs_still_read() {
        let mut hb = [0u8; LOG_HEADER_LEN];
        LogHeader { role: Role::Sender, start_ns: 1 }.emit(&mut hb);
        for v in [1u16, 2, 3, 4] {
            hb[8..10].copy_from_slice(&v.to_le_bytes());
            assert_eq!(LogHeader::parse(&hb).unwrap().role, Role::Sender, "version {v}");
        }
        hb[8..10].copy_from_slice(&6u16.to_le_bytes());
        assert_eq!(LogHeader::parse(&hb), Err(WireError::Version(6)));
    }

    #[test]
    fn aliases_round_trip() {
        let a = Alias { id: u32::MAX, flow: 7 };
        let mut b = [0u8; RECORD_LEN];
        a.record().emit(&mut b);
        let r = Record::parse(&b).unwrap();
        assert_eq!((r.kind, Alias::of(&r)), (RecordKind::Alias, Some(a)));
        assert!(!r.kind.is_packet() && Endpoint::of(&r).is_none());
    }

    #[test]
    fn gaps_round_trip() {
        for g in [
            Gap { reason: GapReason::Lost, records: None, since_ns: 5, noted_ns: 9 },
            Gap { reason: GapReason::Behind, records: Some(4096), since_ns: 1, noted_ns: 2 },
        ] {
            let mut b = [0u8; RECORD_LEN];
            g.record().emit(&mut b);
            assert_eq!(Gap::of(&Record::parse(&b).unwrap()), Some(g));
        }
        assert_eq!(Gap::of(&Record { kind: RecordKind::Gap, size: 77, ..Default::default() }), None);
    }

    #[test]
    fn rejects_foreign_files() {
        assert_eq!(LogHeader::parse(b"not a log file at all, no no no!"), Err(WireError::BadMagic));
        assert!(LogHeader::parse(b"short").is_err());
    }
}
