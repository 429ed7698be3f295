//! Mergeable histograms: HDR buckets (the `hdrhistogram` crate's log-linear scheme) that travel
//! as sparse `(value, count)` pairs, add exactly, and answer percentiles and KS distances with
//! a stated error bound instead of a silent one.
//!
//! With `sig` significant digits, values below 2 × 10^sig rounded up to a power of two (2,048
//! for 3 digits, 256 for 2) have a bucket each, so they are exact; above, a bucket is at most
//! 1/1,024 (3 digits) or 1/128 (2 digits) of its value wide.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Summaries (and their histograms) that cannot be added or are not what they claim.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    #[error("summaries that do not add up: {0}")]
    Mismatch(String),
    #[error("a summary whose counts overflow")]
    Overflow,
    #[error("an invalid summary: {0}")]
    Invalid(String),
}

/// Most bins a histogram may arrive with (a 3-digit histogram over the whole u64 range has
/// ~55,000 buckets).
const MAX_BINS: usize = 65_536;

/// A histogram of non-negative integers (in the caller's unit) that merges exactly.
#[derive(Clone, Debug)]
pub struct Bins {
    h: Histogram<u64>,
    sig: u8,
}

/// What travels: the histogram's non-empty buckets, each as its lowest value and its count.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
pub struct BinsWire {
    /// Significant decimal digits of the bucket scheme (1 to 3).
    pub sig: u8,
    /// `(lowest value of the bucket, count)`, values strictly increasing.
    pub bins: Vec<(u64, u64)>,
}

impl Bins {
    pub fn new(sig: u8) -> Self {
        let sig = sig.clamp(1, 3);
        let mut h = Histogram::new(sig).expect("1 to 3 significant digits is a valid HDR precision");
        h.auto(true);
        Bins { h, sig }
    }

    /// Counts `v` once (values beyond the histogram's reach are counted at its top: they cannot
    /// occur for the quantities recorded here, µs and bytes).
    pub fn record(&mut self, v: u64) {
        // `record` grows the auto-resizing histogram; `saturating_record` would clamp to its
        // current top instead
        if self.h.record(v.min(i64::MAX as u64 / 2)).is_err() {
            self.h.saturating_record(v);
        }
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn sig(&self) -> u8 {
        self.sig
    }

    /// Adds `other`'s counts: exact (the same bucket scheme on both sides).
    pub fn merge(&mut self, other: &Bins) -> Result<(), DigestError> {
        if other.sig != self.sig {
            return Err(DigestError::Mismatch(format!("histograms of {} and {} significant digits", self.sig, other.sig)));
        }
        if self.count().checked_add(other.count()).is_none() {
            return Err(DigestError::Overflow);
        }
        self.h.add(&other.h).map_err(|e| DigestError::Mismatch(format!("{e:?}")))
    }

    /// The non-empty buckets in order: `(lowest value, highest value, count)`.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.h.iter_recorded().map(|v| {
            let hi = v.value_iterated_to();
            (self.h.lowest_equivalent(hi), hi, v.count_at_value())
        })
    }

    /// The nearest-rank p-quantile as the top of the bucket that holds it (the `hdrhistogram`
    /// convention).
    pub fn quantile(&self, p: f64) -> Option<u64> {
        let n = self.count();
        let rank = ((p.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n.max(1));
        self.at_rank(rank).map(|b| b.1)
    }

    /// The `rank`-th smallest value (1-based), as the bucket that holds it: `(lowest, highest)`.
    pub fn at_rank(&self, rank: u64) -> Option<(u64, u64)> {
        let mut seen = 0u64;
        for (lo, hi, c) in self.buckets() {
            seen += c;
            if seen >= rank {
                return Some((lo, hi));
            }
        }
        None
    }

    /// The Kolmogorov–Smirnov distance between these values (each times `scale`) and `cdf`, as
    /// `(lower, upper)` bounds: the empirical CDF is known exactly at every bucket's edges, and
    /// within a bucket it lies between them. Equal (and equal to the distance over the raw
    /// samples, [`horde_model::fit::ks_distance`]'s definition) when every bucket holds one value.
    pub fn ks(&self, scale: f64, cdf: impl Fn(f64) -> f64) -> Option<(f64, f64)> {
        self.ks_with(scale, false, cdf)
    }

    /// [`Bins::ks`] for values recorded floored to whole units (a raw value `v` was counted as
    /// `⌊v⌋`, e.g. µs from ns): a bucket `[lo, hi]` then holds raw values in `[lo, hi + 1)`, so
    /// even a bucket of one value leaves an interval.
    pub fn ks_floored(&self, scale: f64, cdf: impl Fn(f64) -> f64) -> Option<(f64, f64)> {
        self.ks_with(scale, true, cdf)
    }

    fn ks_with(&self, scale: f64, floored: bool, cdf: impl Fn(f64) -> f64) -> Option<(f64, f64)> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let (mut lower, mut upper) = (0.0f64, 0.0f64);
        let mut below = 0u64;
        let left = |x: f64| cdf(x - 1e-9 * x.abs().max(1.0));
        for (lo, hi, c) in self.buckets() {
            let x_lo = lo as f64 * scale;
            let before = below as f64 / n as f64;
            below += c;
            let after = below as f64 / n as f64;
            let below_lo = left(x_lo);
            // the empirical CDF is `after` at the bucket's top (floored: just below hi + 1)
            let (x_hi, at_hi) = if floored {
                let x = (hi + 1) as f64 * scale;
                (x, left(x))
            } else {
                let x = hi as f64 * scale;
                (x, cdf(x))
            };
            // exact: just below the bucket (empirical `before`) and at its top (`after`)
            lower = lower.max((before - below_lo).abs()).max((after - at_hi).abs());
            upper = upper.max(lower);
            if hi > lo || floored {
                // inside [lo, top): the empirical CDF is in [before, after], the model's in
                // [F(lo), F(top−)]
                upper = upper.max(after - cdf(x_lo)).max(left(x_hi) - before);
            }
        }
        Some((lower, upper))
    }

    /// The two-sample Kolmogorov–Smirnov distance between these values and `other`'s (the
    /// same bucket scheme), as `(lower, upper)` bounds: both empirical CDFs are known exactly at
    /// every bucket's edges, and inside a bucket each lies between its edges' values. Equal (and
    /// equal to [`horde_model::fit::ks_two_sample`] over the raw values) when every non-empty
    /// bucket holds one value. None when either is empty or the schemes differ.
    pub fn ks_two_sample(&self, other: &Bins) -> Option<(f64, f64)> {
        let (n, m) = (self.count() as f64, other.count() as f64);
        if n == 0.0 || m == 0.0 || self.sig != other.sig {
            return None;
        }
        let (mut a, mut b) = (self.buckets().peekable(), other.buckets().peekable());
        let (mut ca, mut cb) = (0u64, 0u64);
        let (mut lower, mut upper) = (0.0f64, 0.0f64);
        loop {
            let lo = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => x.0.min(y.0),
                (Some(x), None) => x.0,
                (None, Some(y)) => y.0,
                (None, None) => break,
            };
            let (before_a, before_b) = (ca as f64 / n, cb as f64 / m);
            let mut wide = false;
            // one scheme: a bucket that starts at `lo` is the same bucket on both sides
            for (it, c) in [(&mut a, &mut ca), (&mut b, &mut cb)] {
                if let Some((_, hi, k)) = it.next_if(|x| x.0 == lo) {
                    *c += k;
                    wide |= hi > lo;
                }
            }
            let (after_a, after_b) = (ca as f64 / n, cb as f64 / m);
            lower = lower.max((after_a - after_b).abs());
            upper = upper.max(lower);
            if wide {
                upper = upper.max(after_a - before_b).max(after_b - before_a);
            }
        }
        Some((lower, upper))
    }

    /// At most `points` points `(value × scale, F)` of the empirical CDF at bucket tops, for
    /// charts (the same ranks the raw path picks, [`crate::game`]'s quantile points).
    pub fn cdf_points(&self, scale: f64, points: usize) -> Vec<(f64, f64)> {
        let n = self.count();
        if n == 0 {
            return Vec::new();
        }
        let mut out: Vec<(f64, f64)> = Vec::with_capacity(points);
        let buckets: Vec<(u64, u64, u64)> = self.buckets().collect();
        let mut i = 0;
        let mut cum = 0u64;
        for k in 1..=points {
            let rank = ((k as f64 / points as f64) * n as f64).ceil().max(1.0) as u64;
            while i < buckets.len() && cum + buckets[i].2 < rank {
                cum += buckets[i].2;
                i += 1;
            }
            let Some(&(_, hi, c)) = buckets.get(i) else { break };
            out.push((hi as f64 * scale, (cum + c) as f64 / n as f64));
        }
        out
    }

    pub fn to_wire(&self) -> BinsWire {
        BinsWire { sig: self.sig, bins: self.buckets().map(|(lo, _, c)| (lo, c)).collect() }
    }

    /// A histogram from what a peer sent, checked: a known precision, values increasing, no
    /// more bins than any real histogram has, and counts that do not overflow.
    pub fn from_wire(w: &BinsWire) -> Result<Bins, DigestError> {
        if !(1..=3).contains(&w.sig) {
            return Err(DigestError::Invalid(format!("a histogram of {} significant digits (1 to 3 are known)", w.sig)));
        }
        if w.bins.len() > MAX_BINS {
            return Err(DigestError::Invalid(format!("a histogram of {} bins (at most {MAX_BINS})", w.bins.len())));
        }
        let mut b = Bins::new(w.sig);
        let mut total = 0u64;
        let mut prev: Option<u64> = None;
        for &(v, c) in &w.bins {
            if prev.is_some_and(|p| v <= p) || v > i64::MAX as u64 / 2 {
                return Err(DigestError::Invalid("histogram bins out of order or beyond range".into()));
            }
            prev = Some(v);
            total = total.checked_add(c).ok_or(DigestError::Overflow)?;
            b.h.record_n(v, c).map_err(|e| DigestError::Invalid(format!("{e:?}")))?;
        }
        Ok(b)
    }
}

/// How a histogram travels in a summary: its buckets' lowest values as gaps from the one before
/// (the first from 0), each with its count. Consecutive small values — sizes, whole ms — then
/// take a digit or two each instead of four (a summary a third smaller).
#[derive(Serialize, Deserialize)]
struct Gaps {
    sig: u8,
    gaps: Vec<(u64, u64)>,
}

impl Serialize for Bins {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut prev = 0;
        let gaps = self
            .buckets()
            .map(|(lo, _, c)| {
                let g = lo - prev;
                prev = lo;
                (g, c)
            })
            .collect();
        Gaps { sig: self.sig, gaps }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Bins {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let g = Gaps::deserialize(d)?;
        if g.gaps.len() > MAX_BINS {
            return Err(serde::de::Error::custom(format!("a histogram of {} bins (at most {MAX_BINS})", g.gaps.len())));
        }
        let mut at = 0u64;
        let mut bins = Vec::with_capacity(g.gaps.len());
        for (k, &(gap, c)) in g.gaps.iter().enumerate() {
            // after the first, each value above the one before
            if k > 0 && gap == 0 {
                return Err(serde::de::Error::custom("histogram bins out of order"));
            }
            at = at.checked_add(gap).ok_or_else(|| serde::de::Error::custom("histogram bins beyond range"))?;
            bins.push((at, c));
        }
        Bins::from_wire(&BinsWire { sig: g.sig, bins }).map_err(serde::de::Error::custom)
    }
}

impl PartialEq for Bins {
    fn eq(&self, other: &Self) -> bool {
        self.to_wire() == other.to_wire()
    }
}

/// Signed values (one-way delays can be negative by the clocks' error): a histogram of the
/// non-negative values and one of the negatives' magnitudes, with the exact sum, minimum and
/// maximum in the caller's fine unit (ns) beside them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Signed {
    pub pos: Bins,
    pub neg: Bins,
    /// Sum of the values, fine unit.
    pub sum: f64,
    pub min: i64,
    pub max: i64,
    /// Fine units per bucket unit (1,000: ns values in µs buckets).
    pub unit: i64,
}

impl Signed {
    pub fn new(sig: u8, unit: i64) -> Self {
        Signed { pos: Bins::new(sig), neg: Bins::new(sig), sum: 0.0, min: i64::MAX, max: i64::MIN, unit: unit.max(1) }
    }

    pub fn count(&self) -> u64 {
        self.pos.count() + self.neg.count()
    }

    pub fn record(&mut self, v: i64) {
        if v >= 0 {
            self.pos.record((v / self.unit) as u64);
        } else {
            self.neg.record((v.unsigned_abs() / self.unit as u64).max(1));
        }
        self.sum += v as f64;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// A peer's histogram pair is consistent: a positive unit, and a minimum and maximum that
    /// bound its values when it has any.
    pub fn check(&self) -> Result<(), DigestError> {
        if self.unit < 1 || !self.sum.is_finite() || (self.count() > 0 && self.min > self.max) {
            return Err(DigestError::Invalid("a delay histogram with an invalid unit, sum, minimum or maximum".into()));
        }
        Ok(())
    }

    pub fn merge(&mut self, o: &Signed) -> Result<(), DigestError> {
        if o.unit != self.unit {
            return Err(DigestError::Mismatch(format!("delay units {} and {}", self.unit, o.unit)));
        }
        self.pos.merge(&o.pos)?;
        self.neg.merge(&o.neg)?;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        Ok(())
    }

    /// The nearest-rank p-quantile (fine unit), as the top of the bucket that holds it, kept
    /// within the exact minimum and maximum. It lies within one bucket of the raw samples'
    /// nearest rank: a unit plus 1/1,024 (3 digits) or 1/128 (2 digits) of the value.
    pub fn quantile(&self, p: f64) -> Option<i64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((p.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let negs = self.neg.count();
        let v = if rank <= negs {
            // the rank-th smallest signed value is the (negs − rank + 1)-th smallest magnitude
            let (lo, _) = self.neg.at_rank(negs - rank + 1)?;
            (lo as i64).saturating_mul(self.unit).saturating_neg()
        } else {
            let (_, hi) = self.pos.at_rank(rank - negs)?;
            (hi as i64).saturating_mul(self.unit).saturating_add(self.unit - 1)
        };
        // (a peer's summary may carry an inconsistent minimum and maximum: no clamp then)
        Some(if self.min <= self.max { v.clamp(self.min, self.max) } else { v })
    }

    /// A bucket's width at `v` (fine unit): how far [`Signed::quantile`] may be from the raw
    /// samples' nearest rank.
    pub fn bound_at(&self, v: i64) -> i64 {
        let rel = if self.pos.sig() >= 3 {
            1024
        } else if self.pos.sig() == 2 {
            128
        } else {
            16
        };
        self.unit + v.unsigned_abs() as i64 / rel
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact_and_ks_bounds_close_on_them() {
        let mut b = Bins::new(3);
        let mut raw = Vec::new();
        for k in 0..5_000u64 {
            let v = (k * 7919) % 1_500 + 40;
            b.record(v);
            raw.push(v as f64);
        }
        let cdf = |x: f64| ((x - 40.0) / 1_500.0).clamp(0.0, 1.0);
        let (lo, hi) = b.ks(1.0, cdf).unwrap();
        let exact = horde_model::fit::ks_distance(&mut raw, cdf);
        assert!((lo - exact).abs() < 1e-12, "one value per bucket: the lower bound is the raw distance ({lo} vs {exact})");
        assert!(hi >= lo && hi - lo < 1.0 / 1_500.0 + 1e-9, "and the upper one within a value's share: {lo} {hi}");
    }

    #[test]
    fn ks_bounds_hold_the_raw_distance_on_wide_buckets() {
        let mut b = Bins::new(2);
        let mut raw = Vec::new();
        for k in 1..20_000u64 {
            let v = (k * 104_729) % 1_000_000 + 10_000;
            b.record(v);
            raw.push(v as f64);
        }
        let cdf = |x: f64| (1.0 - (-x / 300_000.0).exp()).clamp(0.0, 1.0);
        let (lo, hi) = b.ks(1.0, cdf).unwrap();
        let exact = horde_model::fit::ks_distance(&mut raw, cdf);
        assert!(lo <= exact + 1e-12 && exact <= hi + 1e-12, "{lo} <= {exact} <= {hi}");
    }

    #[test]
    fn floored_values_keep_the_raw_distance_inside_their_interval() {
        let mut b = Bins::new(3);
        let mut raw = Vec::new();
        for k in 1..30_000u64 {
            let v = (k * 7_919 % 50_000) as f64 * 0.37 + 0.61; // µs with fractions
            b.record(v as u64);
            raw.push(v * 1e-3);
        }
        let cdf = |x: f64| (x / 18.5).clamp(0.0, 1.0);
        let (lo, hi) = b.ks_floored(1e-3, cdf).unwrap();
        let exact = horde_model::fit::ks_distance(&mut raw, cdf);
        assert!(lo <= exact + 1e-12 && exact <= hi + 1e-12, "{lo} <= {exact} <= {hi}");
    }

    #[test]
    fn merging_is_exact_and_order_free() {
        let (mut a, mut b, mut all) = (Bins::new(3), Bins::new(3), Bins::new(3));
        for v in 0..10_000u64 {
            let x = v * v % 77_777;
            if v % 3 == 0 {
                a.record(x)
            } else {
                b.record(x)
            }
            all.record(x);
        }
        let mut ab = a.clone();
        ab.merge(&b).unwrap();
        let mut ba = b.clone();
        ba.merge(&a).unwrap();
        assert_eq!(ab, all);
        assert_eq!(ba, all);
        assert_eq!(Bins::from_wire(&all.to_wire()).unwrap(), all);
        assert!(a.merge(&Bins::new(2)).is_err(), "different schemes do not add");
    }

    #[test]
    fn signed_quantiles_stay_within_a_bucket_of_the_raw_nearest_rank() {
        let mut s = Signed::new(3, 1_000);
        let mut raw: Vec<i64> = Vec::new();
        for k in 0..50_000i64 {
            let v = (k * 7_654_321) % 90_000_000 - 2_000_000;
            s.record(v);
            raw.push(v);
        }
        raw.sort_unstable();
        for p in [0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let want = crate::quantile::nearest_rank(&raw, p).unwrap();
            let got = s.quantile(p).unwrap();
            assert!((got - want).abs() <= s.bound_at(want), "p{p}: {got} vs {want} (bound {})", s.bound_at(want));
        }
        assert_eq!(s.quantile(1.0), Some(*raw.last().unwrap()));
        assert_eq!(s.quantile(0.0), Some(raw[0]));
    }

    #[test]
    fn hostile_wire_histograms_are_refused() {
        // what travels: gaps between the values; a round trip is exact, a bad one refused
        let mut b = Bins::new(3);
        for v in [40u64, 41, 41, 1500, 1_000_000] {
            b.record(v);
        }
        let text = serde_json::to_string(&b).unwrap();
        assert!(text.contains("[40,1],[1,2],[1459,1]"), "{text}");
        assert_eq!(serde_json::from_str::<Bins>(&text).unwrap(), b);
        assert!(serde_json::from_str::<Bins>(r#"{"sig":3,"gaps":[[5,1],[0,1]]}"#).is_err());
        assert!(serde_json::from_str::<Bins>(r#"{"sig":3,"gaps":[[18446744073709551615,1],[1,1]]}"#).is_err());
        assert!(Bins::from_wire(&BinsWire { sig: 9, bins: vec![] }).is_err());
        assert!(Bins::from_wire(&BinsWire { sig: 3, bins: vec![(5, 1), (5, 1)] }).is_err());
        assert!(Bins::from_wire(&BinsWire { sig: 3, bins: vec![(1, u64::MAX), (2, 1)] }).is_err());
        assert!(Bins::from_wire(&BinsWire { sig: 3, bins: vec![(u64::MAX, 1)] }).is_err());
        assert!(Bins::from_wire(&BinsWire { sig: 3, bins: (0..100_000).map(|v| (v, 1)).collect() }).is_err());
    }
}
