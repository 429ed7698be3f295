//! An agent's clock offset from the controller's, NTP-style (RFC 5905 §8 on-wire arithmetic):
//! the controller sends its time t1, the agent stamps arrival t2 and answer t3, the controller
//! stamps arrival t4. Offset θ = ((t2 − t1) + (t3 − t4)) / 2 and round trip δ = (t4 − t1) −
//! (t3 − t2); the true offset lies within θ ± δ/2 whatever the path's asymmetry. Repeated
//! samples are taken and the one with the smallest δ kept (NTP's clock filter): queueing only
//! ever adds delay, so the shortest round trip is the least disturbed.

use serde::{Deserialize, Serialize};

/// One exchange's four timestamps (ns since the epoch; t1, t4 controller's, t2, t3 agent's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    pub t4: u64,
}

impl Sample {
    /// The agent's clock minus the controller's, ns.
    pub fn offset_ns(&self) -> i64 {
        let a = self.t2 as i128 - self.t1 as i128;
        let b = self.t3 as i128 - self.t4 as i128;
        ((a + b) / 2) as i64
    }

    /// The round trip, less the agent's time answering, ns (never negative).
    pub fn delay_ns(&self) -> u64 {
        let total = self.t4 as i128 - self.t1 as i128;
        let held = self.t3 as i128 - self.t2 as i128;
        (total - held).max(0) as u64
    }
}

/// The estimate a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Estimate {
    /// Agent clock − controller clock, ns.
    pub offset_ns: i64,
    /// The offset is within ± this (half the best round trip), ns.
    pub uncertainty_ns: u64,
    /// The best round trip, ns.
    pub rtt_ns: u64,
    pub samples: usize,
}

/// Keeps the best of the samples offered.
#[derive(Debug, Default)]
pub struct Filter {
    best: Option<Sample>,
    n: usize,
}

impl Filter {
    /// Adds a sample; one whose timestamps are inconsistent (t4 before t1, or t3 before t2) is
    /// ignored.
    pub fn add(&mut self, s: Sample) {
        if s.t4 < s.t1 || s.t3 < s.t2 {
            return;
        }
        self.n += 1;
        if self.best.is_none_or(|b| s.delay_ns() < b.delay_ns()) {
            self.best = Some(s);
        }
    }

    pub fn estimate(&self) -> Option<Estimate> {
        self.best.map(|b| Estimate { offset_ns: b.offset_ns(), uncertainty_ns: b.delay_ns().div_ceil(2), rtt_ns: b.delay_ns(), samples: self.n })
    }
}

pub use horde_stats::offsets::to_reference;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_path_gives_the_exact_offset() {
        // Agent 5 ms ahead; 2 ms each way; 1 ms to answer.
        let off = 5_000_000i64;
        let t1 = 1_000_000_000u64;
        let t2 = (t1 as i64 + 2_000_000 + off) as u64;
        let t3 = t2 + 1_000_000;
        let t4 = (t3 as i64 - off + 2_000_000) as u64;
        let s = Sample { t1, t2, t3, t4 };
        assert_eq!(s.offset_ns(), off);
        assert_eq!(s.delay_ns(), 4_000_000);
    }

    #[test]
    fn the_shortest_round_trip_wins_and_bounds_the_error() {
        let off = -3_000_000i64;
        let mut f = Filter::default();
        // Queueing of 0..9 ms on the way out only: the offset estimate is biased by half of
        // it, and the best sample (no queueing) is exact.
        for q in (0..10u64).rev() {
            let t1 = 10_000_000_000 + q * 100_000_000;
            let t2 = (t1 as i64 + 1_000_000 + q as i64 * 1_000_000 + off) as u64;
            let t3 = t2 + 50_000;
            let t4 = (t3 as i64 - off + 1_000_000) as u64;
            f.add(Sample { t1, t2, t3, t4 });
        }
        let e = f.estimate().unwrap();
        assert_eq!(e.samples, 10);
        assert_eq!(e.offset_ns, off);
        assert_eq!(e.rtt_ns, 2_000_000);
        assert_eq!(e.uncertainty_ns, 1_000_000);
    }

    #[test]
    fn inconsistent_samples_are_ignored() {
        let mut f = Filter::default();
        f.add(Sample { t1: 10, t2: 5, t3: 4, t4: 20 });
        f.add(Sample { t1: 10, t2: 5, t3: 6, t4: 9 });
        assert!(f.estimate().is_none());
    }

    #[test]
    fn reference_conversion() {
        assert_eq!(to_reference(1_000, 300), 700);
        assert_eq!(to_reference(1_000, -300), 1_300);
        assert_eq!(to_reference(0, 300), 0, "0 means no time");
    }
}
