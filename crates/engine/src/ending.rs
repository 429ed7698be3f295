//! The end of a client flow (`SendOptions::end_messages`): its end message, with what it sent,
//! to the Horde receiver it went to — three datagram copies over UDP, a signal frame after its
//! last APDU over TCP. ICMP flows (the target's kernel answers) and reverse flows send none.

use horde_model::Transport;
use horde_proto::Role;
use horde_wire::signal::{EndReason, END_COPIES};

use crate::clock::real_ns;
use crate::worker::Worker;

impl Worker {
    /// Slot `i`'s flow has ended (its schedule ran out, or the sender was stopped).
    pub(crate) fn end_flow(&mut self, i: usize, reason: EndReason) {
        let s = &mut self.slots[i];
        let c = &s.conn;
        let pending_bulk = c.bulk() && !c.bulk_done();
        if !self.opts.end_messages || c.role() != Role::Client || c.reverse() || pending_bulk || c.connect_at.is_some() {
            return;
        }
        let speaks = match c.transport() {
            Transport::Udp => c.greeter().is_some(),
            Transport::Tcp => !c.broken(),
            Transport::Icmp => false,
        };
        if !speaks || !s.conn.mark_ended() {
            return;
        }
        let at = real_ns();
        if s.conn.transport() == Transport::Udp {
            let m = s.conn.end_message(reason, at);
            for _ in 0..END_COPIES {
                let _ = s.send(&m);
            }
        } else if s.conn.queue_end(reason, at) {
            self.flush_tcp(i);
        }
    }
}
