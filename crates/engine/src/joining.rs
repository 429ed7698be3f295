//! Flows added to a running worker ([`crate::sender::Joining`]): players a raised online target
//! planned beyond the start's. Each gets its socket when a worker takes it and starts when its
//! time comes up in the departure heap ([`Worker::join`]); a UDP one validates its address
//! before its first departure, as every flow at the start does.

use std::cmp::Reverse;

use horde_proto::GreetState;

use crate::worker::Worker;

impl Worker {
    /// Flows added while the run goes ([`crate::sender::Joining`]): each gets its socket now and
    /// starts when its `connect_at_ns` comes up in the departure heap.
    pub(crate) fn take_joining(&mut self) {
        let Some(joining) = self.opts.joining.clone() else { return };
        for job in joining.take() {
            let at = job.connect_at_ns.unwrap_or(0);
            match crate::setup::open(job, &self.opts) {
                Ok(mut slot) => {
                    slot.conn.connect_at = Some(at);
                    self.slots.push(slot);
                    self.heap.push(Reverse((at, self.slots.len() - 1)));
                }
                Err(e) => {
                    tracing::warn!("a flow added during the run: {e}");
                    self.not_opened += 1;
                }
            }
        }
    }

    /// UDP flows added during the run: hellos until their address is validated, then their
    /// start (the admitting hello, then their departures); one that got no answer is broken.
    pub(crate) fn validate_joined(&mut self, now: u64) {
        let mut k = 0;
        while k < self.validating.len() {
            let i = self.validating[k];
            let state = self.slots[i].conn.greeter().map(|g| g.state());
            if matches!(state, Some(GreetState::Asking)) {
                self.send_hellos(i, now);
                k += 1;
                continue;
            }
            self.validating.swap_remove(k);
            if matches!(state, Some(GreetState::GaveUp)) {
                self.slots[i].conn.stats.errors += 1;
                self.slots[i].conn.broke();
            } else {
                self.start_slot(i);
            }
        }
    }
}
