//! A connection's counters and the log record of a received datagram.

use horde_wire::log::FLAG_KERNEL_TS;
use horde_wire::{DatagramHeader, Record, RecordKind};

/// What the kernel said about a received datagram.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxMeta {
    pub len: usize,
    /// CLOCK_REALTIME ns from SO_TIMESTAMPNS, 0 if absent.
    pub kernel_ns: u64,
    pub tos: u8,
    pub ttl: u8,
}

/// The log record of a received Horde datagram: its header, what the kernel said, and `now`
/// (used when the kernel gave no receive timestamp).
pub fn datagram_record(h: &DatagramHeader, m: &RxMeta, now: u64, tag: u32, kind: RecordKind) -> Record {
    let (t_b, flags) = if m.kernel_ns != 0 { (m.kernel_ns, FLAG_KERNEL_TS) } else { (now, 0) };
    Record { flow: h.flow, size: m.len as u32, seq: h.seq as u64, t_a: h.send_ns, t_b, tag, tos: m.tos, ttl: m.ttl, kind, flags }
}

/// Counters of one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnStats {
    pub packets: u64,
    pub bytes: u64,
    /// Departures whose drawn size was clamped to the transport's limits.
    pub clamped: u64,
    /// Departures the OS refused or that could not be written (a broken stream).
    pub errors: u64,
    pub echoes: u64,
    /// Round trips of the echoes (echo arrival − departure), ns: sum, min, max.
    pub rtt_sum_ns: u64,
    pub rtt_min_ns: u64,
    pub rtt_max_ns: u64,
    /// APDUs received from the peer (two-way runs, sinks, reverse flows), and their bytes.
    pub received: u64,
    pub received_bytes: u64,
    /// Real times of the first and last of them, ns.
    pub received_first_ns: u64,
    pub received_last_ns: u64,
    /// Departures still due when the flow's duration ended (the sender fell behind): not sent.
    pub unsent: u64,
    /// Real (epoch) times of the first and last departure, ns.
    pub first_ns: u64,
    pub last_ns: u64,
}

impl ConnStats {
    /// Counts an APDU or datagram of `len` bytes from the peer, arrived at `now` (real ns).
    pub(super) fn arrived(&mut self, len: u64, now: u64) {
        if self.received == 0 {
            self.received_first_ns = now;
        }
        self.received += 1;
        self.received_bytes += len;
        self.received_last_ns = now;
    }

    /// Counts an echo that took `rtt_ns` there and back.
    pub(super) fn echo(&mut self, rtt_ns: u64) {
        self.rtt_min_ns = if self.echoes == 0 { rtt_ns } else { self.rtt_min_ns.min(rtt_ns) };
        self.rtt_max_ns = self.rtt_max_ns.max(rtt_ns);
        self.rtt_sum_ns = self.rtt_sum_ns.saturating_add(rtt_ns);
        self.echoes += 1;
    }
}
