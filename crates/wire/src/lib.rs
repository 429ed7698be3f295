//! Horde's byte layouts: the payload header carried by every UDP datagram, the framing of
//! APDUs on a TCP stream, and the binary per-packet log. Parse/emit pairs in the style of
//! smoltcp's `wire` module; nothing here does I/O.
//!
//! Network byte order (big-endian) on the wire; little-endian in log files so that
//! `numpy.fromfile` / polars / DuckDB read them on every common machine without swapping.
//!
//! Panics: `emit` functions panic if the destination buffer is shorter than the layout; `parse`
//! functions never panic, whatever the input.

pub mod control;
pub mod datagram;
pub mod discover;
pub mod icmp;
pub mod log;
pub mod logstream;
pub mod signal;
pub mod stream;

pub use datagram::{DatagramHeader, DATAGRAM_HEADER_LEN};
pub use log::{Endpoint, LogHeader, Record, RecordKind, Role, LOG_HEADER_LEN, RECORD_LEN};
pub use stream::{ApduHeader, StreamDecoder, StreamEvent, StreamHello, APDU_HEADER_LEN, HELLO_LEN, MAX_APDU};

/// Wire protocol version carried in datagram headers and stream hellos. Version 2 added address
/// validation (UDP hello, challenge, answer) and the hello's MAC; version 3 consent freshness
/// after admission (probes the peer must answer, [`control::ConsentProbe`]) and reverse bulk
/// only for flows whose signed hello asked for it. A peer of another version is refused as
/// "unsupported version".
pub const VERSION: u8 = 3;

/// Why bytes could not be read as one of Horde's layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated: {need} bytes needed, {got} present")]
    Truncated { need: usize, got: usize },
    #[error("bad magic: not a Horde packet")]
    BadMagic,
    #[error("unsupported version {0} (this build speaks version {VERSION})")]
    Version(u8),
    #[error("bad length field {0}")]
    BadLength(usize),
}

pub(crate) fn need(buf: &[u8], n: usize) -> Result<(), WireError> {
    if buf.len() < n {
        Err(WireError::Truncated { need: n, got: buf.len() })
    } else {
        Ok(())
    }
}
