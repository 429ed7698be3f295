//! Live one-way delay: every arrival's delay goes into a lock-free log-linear histogram shared
//! by the workers ([`DelayHist`]); a progress loop takes the last window's percentiles from it
//! once a second ([`DelayWindow`]). Buckets are 1 µs wide below 16 µs and 1/16 of a power of two
//! above, so a percentile read from a bucket's middle is within 1/32 (3.1 %) of the true value
//! (and ±0.5 µs). The report's exact figures still come from the logs. Also departures and
//! arrivals per class ([`ClassCounts`]: a scenario's categories, live).

use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two.
const SUB: u64 = 16;
/// Buckets: 0..16 µs one each, then 16 per power of two up to 2^40 µs (12.7 days).
const BUCKETS: usize = (SUB as usize) + 37 * (SUB as usize);

/// The bucket of a delay of `us` microseconds.
fn index(us: u64) -> usize {
    if us < SUB {
        return us as usize;
    }
    let e = 63 - us.leading_zeros() as u64; // ≥ 4
    let m = (us >> (e - 4)) & (SUB - 1);
    ((SUB + (e - 4) * SUB + m) as usize).min(BUCKETS - 1)
}

/// The smallest delay (µs) in bucket `i`.
fn lower(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let e = (i - SUB) / SUB + 4;
    let m = (i - SUB) % SUB;
    (1 << e) + (m << (e - 4))
}

/// Delays of arrivals, counted per bucket (relaxed atomics: any thread records, one reads).
#[derive(Debug)]
pub struct DelayHist {
    counts: Box<[AtomicU64]>,
}

impl Default for DelayHist {
    fn default() -> DelayHist {
        DelayHist { counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect() }
    }
}

impl DelayHist {
    /// Counts one arrival sent at `sent_ns` and received at `arrived_ns` (both real time); an
    /// arrival before its departure (clocks of two machines) counts as 0.
    pub fn record(&self, sent_ns: u64, arrived_ns: u64) {
        if sent_ns == 0 {
            return;
        }
        let us = arrived_ns.saturating_sub(sent_ns) / 1_000;
        self.counts[index(us)].fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> Vec<u64> {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }
}

/// The percentiles of one window of a [`DelayHist`] (what arrived since the last take).
#[derive(Debug, Default)]
pub struct DelayWindow {
    last: Vec<u64>,
}

/// Median and 99th percentile (ms) of a window, with its sample count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub samples: u64,
}

impl DelayWindow {
    /// The window since the last call; `None` when nothing arrived in it.
    pub fn take(&mut self, h: &DelayHist) -> Option<Percentiles> {
        let now = h.snapshot();
        if self.last.len() != now.len() {
            self.last = vec![0; now.len()];
        }
        let diff: Vec<u64> = now.iter().zip(&self.last).map(|(a, b)| a.saturating_sub(*b)).collect();
        self.last = now;
        percentiles(&diff)
    }
}

fn percentiles(counts: &[u64]) -> Option<Percentiles> {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return None;
    }
    let at = |q: f64| {
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = (lower(i), lower(i + 1));
                return (lo + hi) as f64 / 2.0 / 1_000.0;
            }
        }
        0.0
    };
    Some(Percentiles { p50_ms: at(0.5), p99_ms: at(0.99), samples: n })
}

/// Classes counted apart; higher ones share the last counter.
pub const CLASSES: usize = 32;

/// Departures and arrivals per class (relaxed atomics).
#[derive(Debug)]
pub struct ClassCounts {
    sent: Box<[AtomicU64]>,
    received: Box<[AtomicU64]>,
}

impl Default for ClassCounts {
    fn default() -> ClassCounts {
        let v = || (0..CLASSES).map(|_| AtomicU64::new(0)).collect();
        ClassCounts { sent: v(), received: v() }
    }
}

impl ClassCounts {
    pub fn sent(&self, class: u8) {
        self.sent[(class as usize).min(CLASSES - 1)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn received(&self, class: u8) {
        self.received[(class as usize).min(CLASSES - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// Totals so far: (sent, received) per class.
    pub fn totals(&self) -> Vec<(u64, u64)> {
        self.sent.iter().zip(self.received.iter()).map(|(s, r)| (s.load(Ordering::Relaxed), r.load(Ordering::Relaxed))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_delay_in_order() {
        let mut prev = 0;
        for i in 1..BUCKETS {
            assert!(lower(i) > lower(i - 1), "{i}");
            assert_eq!(index(lower(i)), i);
            assert_eq!(index(lower(i + 1) - 1), i);
            prev = i;
        }
        assert_eq!(prev, BUCKETS - 1);
        assert_eq!(index(u64::MAX / 2_000), BUCKETS - 1);
    }

    #[test]
    fn percentiles_are_within_the_stated_bound() {
        let h = DelayHist::default();
        let mut w = DelayWindow::default();
        assert_eq!(w.take(&h), None);
        // 1..=1000 ms, uniformly: p50 = 500 ms, p99 = 990 ms
        for ms in 1..=1000u64 {
            h.record(1_000, 1_000 + ms * 1_000_000);
        }
        let p = w.take(&h).unwrap();
        assert_eq!(p.samples, 1000);
        assert!((p.p50_ms - 500.0).abs() <= 500.0 / 32.0 + 0.001, "{p:?}");
        assert!((p.p99_ms - 990.0).abs() <= 990.0 / 32.0 + 0.001, "{p:?}");
        // the next window holds only what came after
        h.record(1_000, 1_000 + 20_000_000);
        let p = w.take(&h).unwrap();
        assert_eq!(p.samples, 1);
        assert!((p.p50_ms - 20.0).abs() <= 20.0 / 32.0, "{p:?}");
        // an arrival "before" its departure counts as 0; an unstamped one not at all
        h.record(5_000_000, 1_000);
        h.record(0, 1_000);
        assert_eq!(w.take(&h).unwrap().samples, 1);
    }
}
