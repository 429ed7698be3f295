//! End of flow (`horde_wire::signal`): a client says when its flow ends and what it sent; a
//! sink (and a receiver over UDP) logs it once, if it is signed with the run key and names the
//! flow's own id.

use horde_wire::signal::{EndReason, ErrorCode, FlowEnd, FlowError, END_LEN, TYPE_ERROR};

#[cfg(doc)]
use super::Conn;
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

/// How a flow's end went ([`Conn::end`]): our end message left (a sink: the sender's was
/// logged), and what the receiver said of it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ending {
    ended: bool,
    /// Client: the receiver's acknowledgement of our end message: (packets, bytes) arrived.
    acked: Option<(u64, u64)>,
    /// Client: the receiver's error message about this flow (it stops the flow).
    receiver_error: Option<ErrorCode>,
}

impl Ending {
    /// Client: what the receiver said arrived of this flow (packets, bytes), once it
    /// acknowledged the end message.
    pub fn acked(&self) -> Option<(u64, u64)> {
        self.acked
    }

    /// Client: the receiver's error message about this flow, if one came (the flow then stopped).
    pub fn receiver_error(&self) -> Option<ErrorCode> {
        self.receiver_error
    }

    /// Whether the end message left (client) or was logged (sink).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Marks the flow ended; true the first time only (one end message per flow).
    pub fn mark_ended(&mut self) -> bool {
        !std::mem::replace(&mut self.ended, true)
    }

    /// Client over UDP: `bytes` may be the receiver's signed acknowledgement of our end message
    /// (its counts are then kept) or its error message about `flow` (believed only signed with
    /// `key` and naming the flow; the flow then sends nothing more). None if it is no
    /// signalling datagram; else whether the flow must stop now.
    pub(super) fn on_signal(&mut self, bytes: &[u8], key: &RunKey, flow: u32, client: bool) -> Option<bool> {
        if !horde_wire::signal::is_signal(bytes) {
            return None;
        }
        if horde_wire::signal::signal_type(bytes) == Some(TYPE_ERROR) {
            let Ok(e) = FlowError::parse(bytes) else { return Some(false) };
            if !client || e.flow != flow || !key.verify_signal(&e.signed(), &e.mac) || self.receiver_error.is_some() {
                return Some(false);
            }
            self.receiver_error = Some(e.code);
            self.acked.get_or_insert((e.packets, e.bytes));
            self.ended = true;
            return Some(true);
        }
        if let Ok(a) = FlowEnd::parse(bytes) {
            if a.ack && self.ended && end_is_valid(key, flow, &a) {
                self.acked.get_or_insert((a.packets, a.bytes));
            }
        }
        Some(false)
    }

    /// Sink: the sender's end message `e` of `flow`: true if it is to be logged (the first
    /// valid one).
    pub(super) fn on_end(&mut self, e: &FlowEnd, key: &RunKey, flow: u32) -> bool {
        !self.ended && end_is_valid(key, flow, e) && self.mark_ended()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Conn;

    /// Feeds `bytes` to the client `c` as a datagram: whether it was a signalling one (taken).
    fn on_end_ack(c: &mut Conn, bytes: &[u8]) -> bool {
        c.on_datagram(1, bytes, &crate::RxMeta::default()).is_ok_and(|r| r.is_none()) && horde_wire::signal::is_signal(bytes)
    }

    #[test]
    fn only_the_receivers_signed_ack_of_our_end_counts() {
        let key = RunKey::from_bytes([9; 32]);
        let mut flow = horde_model::Flow::connection(3, "f".into(), "127.0.0.1:9".parse().unwrap(), 0);
        flow.transport = horde_model::Transport::Udp;
        let mut c = Conn::client(&flow, Box::new(std::iter::empty()), None, key.clone(), true);
        let end = FlowEnd::parse(&c.end_message(EndReason::Done, 1)).unwrap();
        let ack = end_ack(&key, &end, 90, 900, 2);
        assert!(on_end_ack(&mut c, &ack) && c.end.acked().is_none(), "an ack before our end message is ignored");
        assert!(c.end.mark_ended() && !c.end.mark_ended());
        assert!(c.awaits_end_ack());
        // Another key, another flow, an end message instead of an ack: not the receiver's ack.
        let other = RunKey::from_bytes([8; 32]);
        assert!(on_end_ack(&mut c, &end_ack(&other, &end, 1, 1, 2)) && c.end.acked().is_none());
        assert!(on_end_ack(&mut c, &end_ack(&key, &FlowEnd { flow: 4, ..end }, 1, 1, 2)) && c.end.acked().is_none());
        assert!(on_end_ack(&mut c, &end.emit()) && c.end.acked().is_none());
        assert!(on_end_ack(&mut c, &ack));
        assert_eq!(c.end.acked(), Some((90, 900)));
        assert!(!c.awaits_end_ack());
        assert!(!on_end_ack(&mut c, b"HD\x03\x00 not a signal at all"));
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
        assert!(on_end_ack(&mut c, &error_message(&RunKey::from_bytes([8; 32]), 3, ErrorCode::Stopping, 1, 1, 2)));
        assert!(on_end_ack(&mut c, &error_message(&key, 4, ErrorCode::Stopping, 1, 1, 2)));
        assert!(c.end.receiver_error().is_none() && c.next_at().is_some());
        assert!(on_end_ack(&mut c, &error_message(&key, 3, ErrorCode::Stopping, 50, 3200, 2)));
        assert_eq!(c.end.receiver_error(), Some(ErrorCode::Stopping));
        assert_eq!(c.end.acked(), Some((50, 3200)), "what arrived, as the receiver said");
        assert_eq!(c.next_at(), None, "nothing more is sent");
        assert!(!c.end.mark_ended(), "and no end message follows");
    }
}
