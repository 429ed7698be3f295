//! Signalling at the end of a flow: the sender's end-of-flow message with its own counts, so a
//! receiver tells a flow that ended from one whose sender died, and counts the packets lost at
//! the end of a flow (which no later sequence number reveals).
//!
//! ```text
//! end of flow (sender → receiver), 60 bytes; over UDP a datagram, over TCP after a 6-byte
//! APDU header of length 0 (no APDU is shorter than 6 bytes, so length 0 marks a signal):
//!  0                    20    21    22      23   24            32          40     44      60
//!  +--------------------+-----+-----+-------+----+-------------+-----------+------+-------+
//!  | header, SIGNAL;    | ver | type| reason| 0  | packets u64 | bytes u64 | 0    | MAC   |
//!  | send_ns = end time |  1  |  1  |       |    |             |           |      | 16 B  |
//!  +--------------------+-----+-----+-------+----+-------------+-----------+------+-------+
//! ```
//! `SIGNAL` is the datagram flags [`FLAG_SIGNAL`] (challenge and answer together: a receiver
//! never gets either, so a receiver of an older version drops the message as not traffic).
//! `ver` is the signalling version (a receiver counts and ignores versions it does not know);
//! the MAC covers bytes 0..44 under the run key (made and checked by `horde-proto`). The
//! message is sent three times, once it is known; the receiver keeps the first.
//!
//! The receiver acknowledges each copy it takes with an end acknowledgement (type 2, D-ITG's
//! "flow close acknowledgement") in the same 60-byte layout — never larger than what it answers,
//! and only to the flow's admitted address: `packets` and `bytes` are then what *arrived*, so
//! the sender reports its flow's loss without anyone decoding a log.
//!
//! A receiver that stops while a flow's traffic is still arriving says so once with an error
//! message (type 3, [`FlowError`], same layout, [`ErrorCode::Stopping`], with what arrived): the
//! sender ends that flow at once and reports why, instead of sending into a closed port.

use crate::datagram::{FLAG_ANSWER, FLAG_CHALLENGE};
use crate::{need, DatagramHeader, WireError, DATAGRAM_HEADER_LEN};

/// Datagram flags of a signalling message.
pub const FLAG_SIGNAL: u8 = FLAG_CHALLENGE | FLAG_ANSWER;
/// The signalling version this build speaks.
pub const SIGNAL_VERSION: u8 = 1;
/// Message type: end of flow.
pub const TYPE_END: u8 = 1;
/// Message type: the receiver's acknowledgement of an end of flow, with what arrived.
pub const TYPE_END_ACK: u8 = 2;
/// Message type: the receiver's error about a flow it took (same 60-byte layout; `reason` holds
/// an [`ErrorCode`], `packets`/`bytes` what arrived of the flow until then).
pub const TYPE_ERROR: u8 = 3;
pub const END_LEN: usize = 60;
/// The part of an end message its MAC covers.
pub const END_SIGNED_LEN: usize = 44;
/// How many copies of an end message a sender sends.
pub const END_COPIES: usize = 3;

/// Why a flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum EndReason {
    /// Its schedule ended (duration, packet or byte budget).
    #[default]
    Done = 0,
    /// The sender was stopped (Ctrl-C, SIGTERM, a stop command).
    Interrupted = 1,
    /// The target withdrew its consent (it stopped answering).
    ConsentLapsed = 2,
}

impl EndReason {
    pub fn from_u8(v: u8) -> Option<EndReason> {
        Some(match v {
            0 => EndReason::Done,
            1 => EndReason::Interrupted,
            2 => EndReason::ConsentLapsed,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            EndReason::Done => "done",
            EndReason::Interrupted => "interrupted",
            EndReason::ConsentLapsed => "consent lapsed",
        }
    }
}

/// A sender's end-of-flow message, or (with `ack`) the receiver's acknowledgement of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowEnd {
    /// An acknowledgement: `packets`/`bytes` are what arrived, `reason` the end's it answers.
    pub ack: bool,
    pub flow: u32,
    pub reason: EndReason,
    /// Packets (APDUs) the sender sent on the flow, and their bytes.
    pub packets: u64,
    pub bytes: u64,
    /// When the sender ended the flow, ns since the epoch.
    pub at_ns: u64,
    pub mac: [u8; 16],
}

/// Why bytes are not an end message this build takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalError {
    /// Not a signalling message at all (or truncated).
    Wire(WireError),
    /// A signalling version or message type this build does not know.
    Unknown { version: u8, kind: u8 },
}

impl FlowEnd {
    pub fn parse(buf: &[u8]) -> Result<FlowEnd, SignalError> {
        let m = Fields::parse(buf)?;
        match (m.version, m.kind, EndReason::from_u8(m.reason)) {
            (SIGNAL_VERSION, TYPE_END | TYPE_END_ACK, Some(reason)) => {
                Ok(FlowEnd { ack: m.kind == TYPE_END_ACK, flow: m.flow, reason, packets: m.packets, bytes: m.bytes, at_ns: m.at_ns, mac: m.mac })
            }
            _ => Err(SignalError::Unknown { version: m.version, kind: m.kind }),
        }
    }

    /// The bytes the MAC covers.
    pub fn signed(&self) -> [u8; END_SIGNED_LEN] {
        signed(self.flow, self.at_ns, if self.ack { TYPE_END_ACK } else { TYPE_END }, self.reason as u8, self.packets, self.bytes)
    }

    pub fn emit(&self) -> [u8; END_LEN] {
        let mut b = [0u8; END_LEN];
        b[..END_SIGNED_LEN].copy_from_slice(&self.signed());
        b[44..].copy_from_slice(&self.mac);
        b
    }
}

impl FlowEnd {
    /// The receiver's log record of this message, arrived at `arrived_ns` (the MAC is not kept).
    pub fn record(&self, arrived_ns: u64, tag: u32) -> crate::Record {
        crate::Record {
            flow: self.flow,
            size: self.reason as u32,
            seq: self.packets,
            t_a: self.bytes,
            t_b: arrived_ns,
            tag,
            kind: crate::RecordKind::End,
            ..Default::default()
        }
    }

    /// Reads an end record (`at_ns` is its arrival; the MAC is zero); None for another kind or
    /// an unknown reason.
    pub fn of(r: &crate::Record) -> Option<FlowEnd> {
        (r.kind == crate::RecordKind::End).then_some(())?;
        let reason = EndReason::from_u8(u8::try_from(r.size).ok()?)?;
        Some(FlowEnd { ack: false, flow: r.flow, reason, packets: r.seq, bytes: r.t_a, at_ns: r.t_b, mac: [0; 16] })
    }
}

/// What a receiver's error message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ErrorCode {
    /// The receiver is stopping (its duration ran out, it was interrupted): nothing sent to it
    /// from now on is received.
    Stopping = 1,
}

impl ErrorCode {
    pub fn from_u8(v: u8) -> Option<ErrorCode> {
        (v == 1).then_some(ErrorCode::Stopping)
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Stopping => "receiver stopping",
        }
    }
}

/// A receiver's error message about one flow (type 3), sent only to the flow's admitted address
/// while its traffic is fresh, once. Same layout as an end message:
/// `reason` is the [`ErrorCode`], `packets`/`bytes` what arrived, `send_ns` when it was said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowError {
    pub flow: u32,
    pub code: ErrorCode,
    pub packets: u64,
    pub bytes: u64,
    pub at_ns: u64,
    pub mac: [u8; 16],
}

impl FlowError {
    pub fn parse(buf: &[u8]) -> Result<FlowError, SignalError> {
        let m = Fields::parse(buf)?;
        match (m.version, m.kind, ErrorCode::from_u8(m.reason)) {
            (SIGNAL_VERSION, TYPE_ERROR, Some(code)) => Ok(FlowError { flow: m.flow, code, packets: m.packets, bytes: m.bytes, at_ns: m.at_ns, mac: m.mac }),
            _ => Err(SignalError::Unknown { version: m.version, kind: m.kind }),
        }
    }

    /// The bytes the MAC covers.
    pub fn signed(&self) -> [u8; END_SIGNED_LEN] {
        signed(self.flow, self.at_ns, TYPE_ERROR, self.code as u8, self.packets, self.bytes)
    }

    pub fn emit(&self) -> [u8; END_LEN] {
        let mut b = [0u8; END_LEN];
        b[..END_SIGNED_LEN].copy_from_slice(&self.signed());
        b[44..].copy_from_slice(&self.mac);
        b
    }
}

/// The fields every 60-byte signalling message has.
struct Fields {
    flow: u32,
    at_ns: u64,
    version: u8,
    kind: u8,
    reason: u8,
    packets: u64,
    bytes: u64,
    mac: [u8; 16],
}

impl Fields {
    fn parse(buf: &[u8]) -> Result<Fields, SignalError> {
        need(buf, END_LEN).map_err(SignalError::Wire)?;
        let h = DatagramHeader::parse(buf).map_err(SignalError::Wire)?;
        if h.flags != FLAG_SIGNAL {
            return Err(SignalError::Wire(WireError::BadMagic));
        }
        Ok(Fields {
            flow: h.flow,
            at_ns: h.send_ns,
            version: buf[20],
            kind: buf[21],
            reason: buf[22],
            packets: u64::from_be_bytes(buf[24..32].try_into().expect("8 bytes")),
            bytes: u64::from_be_bytes(buf[32..40].try_into().expect("8 bytes")),
            mac: buf[44..60].try_into().expect("16 bytes"),
        })
    }
}

/// The signed part of a signalling message.
fn signed(flow: u32, at_ns: u64, kind: u8, reason: u8, packets: u64, bytes: u64) -> [u8; END_SIGNED_LEN] {
    let mut b = [0u8; END_SIGNED_LEN];
    DatagramHeader { flags: FLAG_SIGNAL, flow, seq: 0, send_ns: at_ns }.emit(&mut b);
    b[DATAGRAM_HEADER_LEN] = SIGNAL_VERSION;
    b[21] = kind;
    b[22] = reason;
    b[24..32].copy_from_slice(&packets.to_be_bytes());
    b[32..40].copy_from_slice(&bytes.to_be_bytes());
    b
}

/// The type byte of a signalling message (`None` if too short to have one).
pub fn signal_type(bytes: &[u8]) -> Option<u8> {
    bytes.get(21).copied()
}

/// Whether `bytes` is a signalling datagram (of any version).
pub fn is_signal(bytes: &[u8]) -> bool {
    bytes.len() >= DATAGRAM_HEADER_LEN && bytes.starts_with(b"HD") && bytes[3] == FLAG_SIGNAL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_message_round_trips_and_others_are_refused() {
        let e = FlowEnd { ack: false, flow: 7, reason: EndReason::Interrupted, packets: 1_000, bytes: 64_000, at_ns: 5, mac: [3; 16] };
        let a = FlowEnd { ack: true, ..e };
        assert_eq!(FlowEnd::parse(&a.emit()), Ok(a));
        assert_ne!(a.signed(), e.signed(), "an acknowledgement is not an end message");
        let b = e.emit();
        assert!(is_signal(&b));
        assert_eq!(FlowEnd::parse(&b), Ok(e));
        assert_eq!(&b[..END_SIGNED_LEN], &e.signed());
        for cut in 0..END_LEN {
            assert!(FlowEnd::parse(&b[..cut]).is_err());
        }
        let mut v2 = b;
        v2[20] = 2;
        assert_eq!(FlowEnd::parse(&v2), Err(SignalError::Unknown { version: 2, kind: 1 }));
        let mut reason = b;
        reason[22] = 9;
        assert!(matches!(FlowEnd::parse(&reason), Err(SignalError::Unknown { .. })));
        let mut data = b;
        data[3] = 0;
        assert!(!is_signal(&data) && matches!(FlowEnd::parse(&data), Err(SignalError::Wire(_))));
    }

    #[test]
    fn an_error_message_round_trips_and_is_neither_an_end_nor_an_ack() {
        let e = FlowError { flow: 7, code: ErrorCode::Stopping, packets: 10, bytes: 640, at_ns: 5, mac: [3; 16] };
        let b = e.emit();
        assert!(is_signal(&b) && signal_type(&b) == Some(TYPE_ERROR));
        assert_eq!(FlowError::parse(&b), Ok(e));
        assert!(matches!(FlowEnd::parse(&b), Err(SignalError::Unknown { kind: TYPE_ERROR, .. })), "an older end parser ignores it");
        let end = FlowEnd { ack: true, flow: 7, reason: EndReason::Done, packets: 10, bytes: 640, at_ns: 5, mac: [3; 16] };
        assert_ne!(end.signed(), e.signed());
        assert!(matches!(FlowError::parse(&end.emit()), Err(SignalError::Unknown { .. })));
        for cut in 0..END_LEN {
            assert!(FlowError::parse(&b[..cut]).is_err());
        }
        let mut code = b;
        code[22] = 0;
        assert!(matches!(FlowError::parse(&code), Err(SignalError::Unknown { .. })));
    }
}
