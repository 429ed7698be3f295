//! End of flow (`horde_wire::signal`): a client says when its flow ends and what it sent; a
//! sink (and a receiver over UDP) logs it once, if it is signed with the run key and names the
//! flow's own id.

use horde_wire::signal::{EndReason, ErrorCode, FlowEnd, FlowError, END_LEN, TYPE_ERROR};
use horde_wire::APDU_HEADER_LEN;

use super::{Conn, Ctx, Event, Role};
use crate::auth::RunKey;

/// A signed end message of `flow`, ended at `at_ns` (real ns) with these counts.
pub fn end_message(key: &RunKey, flow: u32, reason: EndReason, packets: u64, bytes: u64, at_ns: u64) -> [u8; END_LEN] {
    let mut e = FlowEnd { ack: false, flow, reason, packets, bytes, at_ns, mac: [0; 16] };
    e.mac = key.mac_signal(&e.signed());
    e.emit()
}

/// The receiver's signed acknowledgement of `end`, with what arrived of its flow: the same
/// 60 bytes as what it answers.
pub fn end_ack(key: &RunKey, end: &FlowEnd, packets: u64, bytes: u64, at_ns: u64) -> [u8; END_LEN] {
    let mut a = FlowEnd { ack: true, packets, bytes, at_ns, mac: [0; 16], ..*end };
    a.mac = key.mac_signal(&a.signed());
    a.emit()
}

/// The receiver's signed error message about `flow`, with what arrived of it.
pub fn error_message(key: &RunKey, flow: u32, code: ErrorCode, packets: u64, bytes: u64, at_ns: u64) -> [u8; END_LEN] {
    let mut e = FlowError { flow, code, packets, bytes, at_ns, mac: [0; 16] };
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

    /// Client over UDP: `bytes` is the receiver's signed acknowledgement of our end message
    /// (then its counts are kept: [`Conn::acked`]). True if it was a signalling datagram.
    pub(super) fn on_end_ack(&mut self, bytes: &[u8]) -> bool {
        if !horde_wire::signal::is_signal(bytes) {
            return false;
        }
        if horde_wire::signal::signal_type(bytes) == Some(TYPE_ERROR) {
            // The receiver says it stops taking this flow: believed only signed with the run
            // key and naming this flow; then the flow sends nothing more.
            if let Ok(e) = FlowError::parse(bytes) {
                if self.role == Role::Client && e.flow == self.flow && self.key.verify_signal(&e.signed(), &e.mac) && self.receiver_error.is_none() {
                    self.receiver_error = Some(e.code);
                    self.acked.get_or_insert((e.packets, e.bytes));
                    self.ended = true;
                    self.pending.clear();
                }
            }
            return true;
        }
        if let Ok(a) = FlowEnd::parse(bytes) {
            if a.ack && self.ended && end_is_valid(&self.key, self.flow, &a) {
                self.acked.get_or_insert((a.packets, a.bytes));
            }
        }
        true
    }

    /// Client: what the receiver said arrived of this flow (packets, bytes), once it
    /// acknowledged the end message.
    pub fn acked(&self) -> Option<(u64, u64)> {
        self.acked
    }

    /// Client: the receiver's error message about this flow, if one came (the flow then stopped).
    pub fn receiver_error(&self) -> Option<ErrorCode> {
        self.receiver_error
    }

    /// Client over UDP: the end message left and its acknowledgement has not come yet.
    pub fn awaits_end_ack(&self) -> bool {
        self.role == Role::Client && self.ended && self.acked.is_none() && self.transport == horde_model::Transport::Udp
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_receivers_signed_ack_of_our_end_counts() {
        let key = RunKey::from_bytes([9; 32]);
        let mut flow = horde_model::Flow::connection(3, "f".into(), "127.0.0.1:9".parse().unwrap(), 0);
        flow.transport = horde_model::Transport::Udp;
        let mut c = Conn::client(&flow, Box::new(std::iter::empty()), None, key.clone(), true);
        let end = FlowEnd::parse(&c.end_message(EndReason::Done, 1)).unwrap();
        let ack = end_ack(&key, &end, 90, 900, 2);
        assert!(c.on_end_ack(&ack) && c.acked().is_none(), "an ack before our end message is ignored");
        assert!(c.mark_ended() && !c.mark_ended());
        assert!(c.awaits_end_ack());
        // Another key, another flow, an end message instead of an ack: not the receiver's ack.
        let other = RunKey::from_bytes([8; 32]);
        assert!(c.on_end_ack(&end_ack(&other, &end, 1, 1, 2)) && c.acked().is_none());
        assert!(c.on_end_ack(&end_ack(&key, &FlowEnd { flow: 4, ..end }, 1, 1, 2)) && c.acked().is_none());
        assert!(c.on_end_ack(&end.emit()) && c.acked().is_none());
        assert!(c.on_end_ack(&ack));
        assert_eq!(c.acked(), Some((90, 900)));
        assert!(!c.awaits_end_ack());
        assert!(!c.on_end_ack(b"HD\x03\x00 not a signal at all"));
    }

    #[test]
    fn only_the_receivers_signed_error_about_our_flow_stops_it() {
        let key = RunKey::from_bytes([9; 32]);
        let mut flow = horde_model::Flow::connection(3, "f".into(), "127.0.0.1:9".parse().unwrap(), 0);
        flow.transport = horde_model::Transport::Udp;
        let mut c = Conn::client(
            &flow,
            Box::new((0..).map(|i| horde_model::Departure { seq: i, at_ns: i * 1000, size: 64, clamped: false, class: 0 })),
            None,
            key.clone(),
            true,
        );
        assert!(c.next_at().is_some());
        // Another key, another flow: ignored, the flow goes on.
        assert!(c.on_end_ack(&error_message(&RunKey::from_bytes([8; 32]), 3, ErrorCode::Stopping, 1, 1, 2)));
        assert!(c.on_end_ack(&error_message(&key, 4, ErrorCode::Stopping, 1, 1, 2)));
        assert!(c.receiver_error().is_none() && c.next_at().is_some());
        assert!(c.on_end_ack(&error_message(&key, 3, ErrorCode::Stopping, 50, 3200, 2)));
        assert_eq!(c.receiver_error(), Some(ErrorCode::Stopping));
        assert_eq!(c.acked(), Some((50, 3200)), "what arrived, as the receiver said");
        assert_eq!(c.next_at(), None, "nothing more is sent");
        assert!(!c.mark_ended(), "and no end message follows");
    }
}
