//! The senders' end-of-flow messages (`horde_wire::signal`): logged once per flow as an end
//! record, and kept in the report beside what arrived, so a flow that ended is told from one
//! whose sender vanished, and packets lost at the end of a flow are counted.

use std::net::SocketAddr;

use std::os::fd::AsRawFd;

use horde_proto::conn::signal::{end_ack, end_is_valid, error_message};
use horde_wire::signal::END_COPIES;
use horde_wire::signal::{ErrorCode, FlowEnd, SignalError};
use horde_wire::{Record, RecordKind};

use super::report::FlowEndSaid;
use super::{Receiver, RecvReport};

/// Notes an end record in the report (the packet counts are not touched).
pub(super) fn note_end(report: &mut RecvReport, r: &Record) {
    if let Some(e) = FlowEnd::of(r) {
        report.ended += 1;
        report.flows.entry(r.flow).or_default().end = Some(FlowEndSaid { reason: e.reason.name().to_string(), packets: e.packets, bytes: e.bytes });
    }
}

/// An end message is acknowledged only if the flow's last datagram arrived at most this many
/// (whole) seconds before it.
const ACK_FRESH_S: u64 = 2;

/// An end message that counts more than has arrived is answered when the rest has arrived, or
/// this long after it came (200 ms), whichever is first: datagrams it overtook still count, and
/// the answer reaches a sender lingering its default 500 ms.
pub(super) const END_ACK_WAIT_NS: u64 = 200_000_000;

impl Receiver {
    /// A signalling datagram from `from`, arrived at `now` (real ns): an end
    /// message of an admitted flow, signed with the run key, is logged once and acknowledged
    /// with what arrived of that flow (each copy, at most three: never more bytes than came;
    /// only while the flow's traffic is fresh; once what it counts arrived, or
    /// [`END_ACK_WAIT_NS`] after it came); others are counted.
    pub(super) fn on_signal(&mut self, from: SocketAddr, data: &[u8], now: u64) {
        let e = match FlowEnd::parse(data) {
            Ok(e) => e,
            Err(SignalError::Unknown { .. }) => {
                self.report.refusals.unknown_signals += 1;
                return;
            }
            Err(SignalError::Wire(_)) => {
                self.report.garbage_datagrams += 1;
                return;
            }
        };
        let Some(f) = self.udp_flows.get_mut(&(from, e.flow)) else {
            self.report.refusals.unadmitted_datagrams += 1;
            return;
        };
        if e.ack || !end_is_valid(&self.opts.key, e.flow, &e) {
            self.report.refusals.bad_mac += 1;
            return;
        }
        // Answered only while the flow's own traffic is fresh: a spoofed end message from the
        // address of a sender that left long ago draws nothing.
        let fresh = (self.last_arrival / 1_000_000_000).saturating_sub(f.last_s) <= ACK_FRESH_S;
        if fresh && (f.copies as usize) < END_COPIES {
            f.copies += 1;
            let said = *f.end.get_or_insert(e);
            // The end message may have overtaken the flow's last datagrams (a reordering or
            // jittery path): what it counts gets a moment to arrive before the answer.
            if f.acks == 0 && f.ack_due.is_none() && f.packets < said.packets {
                f.ack_due = Some(self.last_arrival + END_ACK_WAIT_NS);
                self.end_waits.push((from, e.flow));
            }
            if f.ack_due.is_none() {
                self.acknowledge((from, e.flow), now);
            }
        }
        let Some(f) = self.udp_flows.get_mut(&(from, e.flow)) else { return };
        if std::mem::replace(&mut f.ended, true) {
            return;
        }
        let mut r = e.record(now, f.tag);
        r.flow = f.id;
        debug_assert_eq!(r.kind, RecordKind::End);
        note_end(&mut self.report, &r);
        self.sink.push(r);
    }

    /// Sends flow `key` the acknowledgements its end message's copies are owed, with what has
    /// arrived of it (at `now`, real ns).
    fn acknowledge(&mut self, key: (SocketAddr, u32), now: u64) {
        let Some(f) = self.udp_flows.get_mut(&key) else { return };
        let Some(e) = f.end else { return };
        f.ack_due = None;
        while f.acks < f.copies {
            f.acks += 1;
            let ack = end_ack(&self.opts.key, &e, f.packets, f.bytes, now);
            let _ = crate::net::send_batch_to(self.udp[f.sock].0.as_raw_fd(), &[&ack], &[key.0]);
        }
    }

    /// Answers the end messages that waited ([`END_ACK_WAIT_NS`]) and whose flow has now all
    /// arrived or whose wait is over; `all`: every one (the receiver stops).
    pub(super) fn answer_waiting_ends(&mut self, all: bool) {
        if self.end_waits.is_empty() {
            return;
        }
        let (now, real) = (crate::clock::mono_ns(), crate::clock::real_ns());
        for key in std::mem::take(&mut self.end_waits) {
            let Some(f) = self.udp_flows.get(&key) else { continue };
            let (Some(e), Some(due)) = (f.end, f.ack_due) else { continue };
            if all || now >= due || f.packets >= e.packets {
                self.acknowledge(key, real);
            } else {
                self.end_waits.push(key);
            }
        }
    }

    /// When the earliest waiting end message is due to be answered (monotonic ns).
    pub(super) fn next_end_ack(&self) -> Option<u64> {
        self.end_waits.iter().filter_map(|k| self.udp_flows.get(k).and_then(|f| f.ack_due)).min()
    }

    /// The receiver stops: every UDP flow whose traffic is still arriving (fresh, its end not
    /// logged) is told once, with a signed error message to its admitted address carrying what
    /// arrived, so its sender stops at once instead of sending into a closed port. At most one
    /// 60-byte message per admitted flow; nothing to a flow that went quiet or ended.
    pub(super) fn tell_stopping(&mut self) {
        let now_s = crate::clock::mono_ns() / 1_000_000_000;
        let now = crate::clock::real_ns();
        for (&(from, flow), f) in &self.udp_flows {
            if f.ended || now_s.saturating_sub(f.last_s) > ACK_FRESH_S {
                continue;
            }
            let m = error_message(&self.opts.key, flow, ErrorCode::Stopping, f.packets, f.bytes, now);
            if crate::net::send_batch_to(self.udp[f.sock].0.as_raw_fd(), &[&m], &[from]).is_ok() {
                self.report.told_stopping += 1;
            }
        }
    }
}
