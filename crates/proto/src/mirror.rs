//! The peer's schedule, regenerated on this side of a two-way connection: both sides compute
//! every player's schedules from the scenario alone, so the k-th APDU that arrives is the peer's
//! k-th departure. That names each arrival's class (the player's category) exactly, even when it
//! left microseconds after a category change, and its expected size: any difference is counted
//! as a mismatch, which must stay 0 (it would mean a framing or pacing bug).

use horde_model::roster::Presence;
use horde_model::Departure;

/// A source of departures (a flow's schedule or a player's), boxed so sources of any kind mix.
pub type Source = Box<dyn Iterator<Item = Departure> + Send>;

pub struct Mirror {
    source: Source,
    /// A departure read ahead (UDP: a later one than the datagram that arrived).
    ahead: Option<Departure>,
    /// The peer's player is online only when the roster says so: its other departures never
    /// left, and those that did are numbered consecutively (as the peer numbered them).
    presence: Option<Presence>,
    pub mismatched: u64,
}

impl Mirror {
    pub fn new(source: Source) -> Mirror {
        Mirror { source, ahead: None, presence: None, mismatched: 0 }
    }

    pub fn with_presence(mut self, p: Option<Presence>) -> Mirror {
        self.presence = p;
        self
    }

    /// The class of arrival `seq` of `len` bytes, if the peer's schedule has it. Lost datagrams
    /// are skipped over; one that arrives after a later one gets `None` (the caller keeps the
    /// plain tag).
    pub fn classify(&mut self, seq: u64, len: u32) -> Option<u8> {
        loop {
            let raw = self.ahead.take().or_else(|| self.source.next())?;
            // The number it gets if it left: decided only once an arrival as late exists (so
            // it was due, and the roster knows every change up to its time).
            let n = self.presence.as_ref().map_or(raw.seq, |p| p.next_seq());
            if n > seq {
                self.ahead = Some(raw);
                return None;
            }
            let at = raw.at_ns;
            let d = match self.presence.as_mut() {
                Some(p) => match p.admit(raw, at) {
                    Some(d) => d,
                    None => continue,
                },
                None => raw,
            };
            if d.seq < seq {
                continue;
            }
            self.mismatched += (d.size != len) as u64;
            return Some(d.class);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(seq: u64, size: u32, class: u8) -> Departure {
        Departure { seq, at_ns: seq * 1000, size, clamped: false, class }
    }

    #[test]
    fn classifies_skips_lost_and_counts_mismatches() {
        let deps = vec![dep(0, 10, 1), dep(1, 20, 1), dep(2, 30, 2), dep(3, 40, 2), dep(4, 50, 3)];
        let mut m = Mirror::new(Box::new(deps.into_iter()));
        assert_eq!(m.classify(0, 10), Some(1));
        assert_eq!(m.classify(2, 30), Some(2), "1 was lost");
        assert_eq!(m.classify(1, 20), None, "late arrival after a later one");
        assert_eq!(m.classify(4, 51), Some(3));
        assert_eq!(m.mismatched, 1, "51 bytes where the schedule says 50");
        assert_eq!(m.classify(5, 60), None, "past the schedule");
    }
}
