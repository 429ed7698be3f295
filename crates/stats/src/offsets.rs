//! Times stamped by another clock, brought to a reference's: agents' records to the
//! controller's clock (an agent's offset is its clock minus the controller's), and on one
//! machine, where every offset is 0, unchanged.

use horde_wire::{Record, RecordKind};

/// Converts a time stamped by a clock that is `offset_ns` ahead of the reference to the
/// reference's time.
pub fn to_reference(t: u64, offset_ns: i64) -> u64 {
    if t == 0 {
        return 0;
    }
    (t as i128 - offset_ns as i128).clamp(0, u64::MAX as i128) as u64
}

/// Corrects one record's times: `own` is the offset of the agent that wrote it, `peer` that of
/// the agent at the other end of its flow (a received APDU carries the sender's send time).
pub fn correct(r: &mut Record, own: i64, peer: i64) {
    match r.kind {
        RecordKind::Received => {
            r.t_a = to_reference(r.t_a, peer);
            r.t_b = to_reference(r.t_b, own);
        }
        RecordKind::Sent | RecordKind::Echoed => {
            r.t_a = to_reference(r.t_a, own);
            r.t_b = to_reference(r.t_b, own);
        }
        // t_a holds address bytes: only the time it was learnt moves.
        RecordKind::Source | RecordKind::Destination | RecordKind::End => r.t_b = to_reference(r.t_b, own),
        // A log server's note: its times are the server's, not an agent's; an alias has none.
        RecordKind::Gap | RecordKind::Alias => {}
    }
}
