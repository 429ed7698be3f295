//! Live one-way delay: every arrival's delay goes into a lock-free log-linear histogram shared
//! by the workers ([`DelayHist`]); a progress loop takes the last window's percentiles from it
//! once a second ([`DelayWindow`]). Buckets are 1 µs wide below 16 µs and 1/16 of a power of two
//! above, so a percentile read from a bucket's middle is within 1/32 (3.1 %) of the true value
//! (and ±0.5 µs). The report's exact figures still come from the logs. Also departures and
//! arrivals per class ([`ClassCounts`]: a scenario's categories, live), and per second of
//! departure ([`SecondCounts`]: live loss, which needs no sequence numbers).

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

/// Seconds the ring of [`SecondCounts`] holds.
const RING: u64 = 64;
/// Arrivals are counted against their second of departure for this long; later ones (and
/// departures stamped in the future by more than [`AHEAD`]) are not counted, so live loss
/// counts them lost. Readers read a second at most this late.
pub const HORIZON_S: u64 = 16;
/// How far in the future a departure stamp may lie (another machine's clock).
const AHEAD: u64 = 2;
/// How far ahead of now the reader clears the ring, and up to where.
const CLEAR_FROM: u64 = 8;
const CLEAR_TO: u64 = RING - HORIZON_S - AHEAD - 1;

/// Departures per second of real time, and arrivals per second of *departure* (the stamp the
/// packet carries), in a ring of [`RING`] seconds (relaxed atomics). Once late arrivals had time
/// to come, `sent − arrived` of a second is what it lost: no sequence numbers are needed, so a
/// player the roster took offline (a gap in its sequence) is not read as loss.
///
/// The ring is kept by its reader ([`SecondCounts::read`]), which clears seconds 8 to 45 ahead
/// of now; writers touch seconds from 16 behind now to 2 ahead, so the two never meet as long
/// as the reader reads at least every 37 seconds.
#[derive(Debug)]
pub struct SecondCounts {
    sent: Box<[AtomicU64]>,
    arrived: Box<[AtomicU64]>,
    cleared: AtomicU64,
}

impl Default for SecondCounts {
    fn default() -> SecondCounts {
        let v = || (0..RING).map(|_| AtomicU64::new(0)).collect();
        SecondCounts { sent: v(), arrived: v(), cleared: AtomicU64::new(0) }
    }
}

impl SecondCounts {
    fn slot(sec: u64) -> usize {
        (sec % RING) as usize
    }

    /// A departure at `real_ns`.
    pub fn sent(&self, real_ns: u64) {
        self.sent[Self::slot(real_ns / 1_000_000_000)].fetch_add(1, Ordering::Relaxed);
    }

    /// An arrival at `arrived_ns` of a packet stamped `sent_ns` (0: unstamped, not counted).
    pub fn arrived(&self, sent_ns: u64, arrived_ns: u64) {
        let (s, now) = (sent_ns / 1_000_000_000, arrived_ns / 1_000_000_000);
        if sent_ns == 0 || s + HORIZON_S < now || s > now + AHEAD {
            return;
        }
        self.arrived[Self::slot(s)].fetch_add(1, Ordering::Relaxed);
    }

    /// Second `sec` (Unix seconds): (departures, arrivals of those departures). `now_sec` is
    /// the reader's now: seconds more than [`HORIZON_S`] old are gone (`None`), and the ring
    /// ahead of now is cleared for reuse.
    pub fn read(&self, sec: u64, now_sec: u64) -> Option<(u64, u64)> {
        let upto = now_sec + CLEAR_TO;
        let from = self.cleared.load(Ordering::Relaxed).max(now_sec + CLEAR_FROM - 1) + 1;
        for x in from.max(upto.saturating_sub(RING - 1))..=upto {
            self.sent[Self::slot(x)].store(0, Ordering::Relaxed);
            self.arrived[Self::slot(x)].store(0, Ordering::Relaxed);
        }
        self.cleared.fetch_max(upto, Ordering::Relaxed);
        if sec + HORIZON_S < now_sec || sec > now_sec {
            return None;
        }
        Some((self.sent[Self::slot(sec)].load(Ordering::Relaxed), self.arrived[Self::slot(sec)].load(Ordering::Relaxed)))
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

    #[test]
    fn seconds_count_loss_by_departure_and_reuse_the_ring() {
        const S: u64 = 1_000_000_000;
        let c = SecondCounts::default();
        let t0 = 1_700_000_000u64;
        let _ = c.read(t0 - 1, t0); // the reader starts
                                    // second t0: 10 sent, 8 arrive (one of them 2.5 s later), 2 lost
        for i in 0..10 {
            c.sent(t0 * S + i * 50_000_000);
        }
        for i in 0..7 {
            c.arrived(t0 * S + i * 50_000_000, t0 * S + i * 50_000_000 + 1_000_000);
        }
        c.arrived(t0 * S + 7 * 50_000_000, (t0 + 2) * S + S / 2);
        // an arrival older than the horizon, one from the future, one unstamped: not counted
        c.arrived(t0 * S, (t0 + HORIZON_S + 1) * S);
        c.arrived((t0 + 5) * S, t0 * S);
        c.arrived(0, t0 * S);
        assert_eq!(c.read(t0, t0 + 3), Some((10, 8)));
        assert_eq!(c.read(t0 + 1, t0 + 3), Some((0, 0)));
        assert_eq!(c.read(t0, t0 + HORIZON_S + 1), None, "gone past the horizon");
        assert_eq!(c.read(t0 + 5, t0 + 3), None, "not yet");
        // a minute later the same slots hold the new seconds only
        for k in 1..=3 {
            let now = t0 + k * 30;
            let _ = c.read(now - 3, now);
        }
        let later = t0 + RING;
        c.sent(later * S);
        assert_eq!(c.read(later, later + 3), Some((1, 0)));
    }
}
