//! End of flow (`horde_wire::signal`): a client says when its flow ends and what it sent; a
//! sink (and a receiver over UDP) logs it once, if it is signed with the run key and names the
//! flow's own id.

use horde_wire::signal::{EndReason, FlowEnd, END_LEN};
use horde_wire::APDU_HEADER_LEN;

use super::{Conn, Ctx, Event, Role};
use crate::auth::RunKey;

/// A signed end message of `flow`, ended at `at_ns` (real ns) with these counts.
pub fn end_message(key: &RunKey, flow: u32, reason: EndReason, packets: u64, bytes: u64, at_ns: u64) -> [u8; END_LEN] {
    let mut e = FlowEnd { flow, reason, packets, bytes, at_ns, mac: [0; 16] };
    e.mac = key.mac_signal(&e.signed());
    e.emit()
}

/// Whether `e` is signed with `key` and names `flow`.
pub fn end_is_valid(key: &RunKey, flow: u32, e: &FlowEnd) -> bool {
    e.flow == flow && key.verify_signal(&e.signed(), &e.mac)
}

impl Conn {
    /// Client: the end message of this flow with its counts so far (UDP: send it as a datagram;
    /// see [`Conn::queue_end`] for TCP).
    pub fn end_message(&self, reason: EndReason, at_ns: u64) -> [u8; END_LEN] {
        end_message(&self.key, self.flow, reason, self.stats.packets, self.stats.bytes, at_ns)
    }

    /// Marks the flow ended; true the first time only (one end message per flow).
    pub fn mark_ended(&mut self) -> bool {
        !std::mem::replace(&mut self.ended, true)
    }

    /// Client over TCP: queues the end message after everything sent (an APDU header of length
    /// 0 and the message). Returns false if the stream is broken.
    pub fn queue_end(&mut self, reason: EndReason, at_ns: u64) -> bool {
        let m = self.end_message(reason, at_ns);
        let Some(s) = self.stream.as_mut().filter(|s| !s.broken) else { return false };
        s.out.extend_from_slice(&[0; APDU_HEADER_LEN]);
        s.out.extend_from_slice(&m);
        true
    }

    /// Sink: the sender's end message arrived on the stream at `now`: logged once if valid.
    pub(super) fn on_end(&mut self, e: &FlowEnd, now: u64, ctx: &mut dyn Ctx) -> Option<Event> {
        if self.role != Role::Sink || self.ended || !end_is_valid(&self.key, self.flow, e) {
            return None;
        }
        self.ended = true;
        ctx.record(e.record(now, self.tag));
        Some(Event::Ended)
    }
}
