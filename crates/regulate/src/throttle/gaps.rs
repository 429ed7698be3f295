//! Sequence gaps, shared by the loss-driven controllers, and the RTT estimate.

use super::*;

// Sequence gaps, shared by the loss-driven controllers.

/// What one packet told the gap tracker.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SeqEvent {
    /// It is the successor of the highest sequence number so far.
    pub in_sequence: bool,
    /// Packets now known lost: a gap before which three later packets have arrived (as TCP's
    /// three duplicate ACKs, RFC 5681; RFC 5348 §5.1 NDUPACK = 3).
    pub lost: u64,
    /// The first lost sequence number, and the interpolated time it would have arrived at.
    pub first_lost: u64,
    pub lost_at_ns: u64,
}

/// A gap not yet confirmed: sequence numbers `from..to` missing, the arrival times of the
/// packets either side, and how many packets arrived after it.
#[derive(Debug, Clone)]
pub(super) struct Gap {
    from: u64,
    to: u64,
    before_ns: u64,
    after_ns: u64,
    later: u32,
}

/// Tracks the highest sequence number and the gaps behind it.
#[derive(Debug, Clone, Default)]
pub struct Gaps {
    highest: Option<u64>,
    last_ns: u64,
    pub(super) pending: VecDeque<Gap>,
}

/// Packets after a gap that confirm it as loss.
pub const NDUPACK: u32 = 3;
/// Most unconfirmed gaps kept (a hostile or broken sender cannot grow it).
pub(super) const MAX_GAPS: usize = 1024;

impl Gaps {
    pub fn on_packet(&mut self, now_ns: u64, seq: u64) -> SeqEvent {
        let mut ev = SeqEvent::default();
        match self.highest {
            None => ev.in_sequence = true,
            Some(h) if seq == h + 1 => ev.in_sequence = true,
            Some(h) if seq > h + 1 => {
                if self.pending.len() >= MAX_GAPS {
                    self.pending.pop_front();
                }
                self.pending.push_back(Gap { from: h + 1, to: seq, before_ns: self.last_ns, after_ns: now_ns, later: 0 });
            }
            Some(_) => {
                // Late (reordered) or duplicate: it fills a pending gap if it is in one.
                self.fill(seq);
                return ev;
            }
        }
        // Every packet above a gap counts toward confirming it, the one that revealed it too
        // (RFC 5348 §5.1: lost once NDUPACK packets with a higher sequence number arrived).
        for g in self.pending.iter_mut() {
            g.later += 1;
        }
        while let Some(g) = self.pending.front() {
            if g.later < NDUPACK {
                break;
            }
            let g = self.pending.pop_front().expect("front exists");
            if ev.lost == 0 {
                ev.first_lost = g.from;
                // Interpolated: the missing packets were due between their neighbours.
                ev.lost_at_ns = g.before_ns + (g.after_ns.saturating_sub(g.before_ns)) / (g.to - g.from + 1);
            }
            ev.lost += g.to - g.from;
        }
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        self.last_ns = now_ns;
        ev
    }

    fn fill(&mut self, seq: u64) {
        let Some(i) = self.pending.iter().position(|g| (g.from..g.to).contains(&seq)) else { return };
        let g = self.pending[i].clone();
        if g.to - g.from == 1 {
            self.pending.remove(i);
        } else if seq == g.from {
            self.pending[i].from += 1;
        } else if seq == g.to - 1 {
            self.pending[i].to -= 1;
        } else {
            self.pending[i].to = seq;
            self.pending.insert(i + 1, Gap { from: seq + 1, ..g });
        }
    }
}

/// A smoothed round-trip time (RFC 6298's gain 1/8).
#[derive(Debug, Clone, Copy, Default)]
pub struct Srtt(Option<f64>);

impl Srtt {
    pub fn add(&mut self, rtt_ns: u64) {
        let r = rtt_ns as f64;
        self.0 = Some(match self.0 {
            None => r,
            Some(s) => s + (r - s) / 8.0,
        });
    }

    pub fn ns(&self) -> Option<f64> {
        self.0
    }
}
