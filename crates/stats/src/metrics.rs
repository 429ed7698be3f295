//! Each statistic Horde reports, defined once: RFC 3550 interarrival jitter, rates over a span
//! of arrivals, rates over a fixed interval. `decode`, `run`'s analysis and the report all call
//! these (percentiles: [`crate::quantile::nearest_rank`]).

/// RFC 3550 §6.4.1 interarrival jitter: J += (|D| − J) / 16, where D is the difference of two
/// consecutive packets' transit times (arrival − send), in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Jitter(f64);

impl Jitter {
    /// Adds one difference of transit times, ns.
    pub fn update(&mut self, d_ns: i64) {
        self.0 += (d_ns.unsigned_abs() as f64 - self.0) / 16.0;
    }

    pub fn ns(&self) -> f64 {
        self.0
    }

    /// An estimate of `ns` (a summary's, to pool it with others).
    pub fn from_ns(ns: f64) -> Jitter {
        Jitter(if ns.is_finite() { ns.max(0.0) } else { 0.0 })
    }

    pub fn ms(&self) -> f64 {
        self.0 / 1e6
    }

    /// The packet-weighted mean of two estimates (a total over flows), `n` packets each.
    pub fn pooled(a: Jitter, na: u64, b: Jitter, nb: u64) -> Jitter {
        if na + nb == 0 {
            return Jitter::default();
        }
        Jitter((a.0 * na as f64 + b.0 * nb as f64) / (na + nb) as f64)
    }
}

/// Packet and bit rates of `packets` packets of `bytes` in total whose arrivals span
/// `span_s` seconds from the first to the last: n packets span n − 1 gaps, so both rates count
/// n − 1 packets' worth (the last packet's bytes arrive at the end of the span). `(0, 0)` when
/// the span is empty.
pub fn span_rates(packets: u64, bytes: u64, span_s: f64) -> (f64, f64) {
    if packets < 2 || span_s <= 0.0 {
        return (0.0, 0.0);
    }
    let n = packets as f64;
    ((n - 1.0) / span_s, bytes as f64 * 8.0 * (n - 1.0) / n / span_s)
}

/// Packet and bit rates over a fixed interval of `seconds` (a time window, a whole run).
pub fn interval_rates(packets: u64, bytes: u64, seconds: f64) -> (f64, f64) {
    if seconds <= 0.0 {
        return (0.0, 0.0);
    }
    (packets as f64 / seconds, bytes as f64 * 8.0 / seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_follows_rfc_3550() {
        let mut j = Jitter::default();
        for _ in 0..1000 {
            j.update(2_000_000);
            j.update(-2_000_000);
        }
        assert!((j.ms() - 2.0).abs() < 1e-6);
        let mut one = Jitter::default();
        one.update(16);
        assert_eq!(one.ns(), 1.0);
        assert_eq!(Jitter::pooled(Jitter(2.0), 1, Jitter(4.0), 3).ns(), 3.5);
    }

    #[test]
    fn rates_over_a_span_count_the_gaps() {
        // 11 packets of 100 B, one every 0.1 s: 10 pkt/s, 8 kbit/s.
        let (p, b) = span_rates(11, 1100, 1.0);
        assert!((p - 10.0).abs() < 1e-9 && (b - 8000.0).abs() < 1e-9);
        assert_eq!(span_rates(1, 100, 1.0), (0.0, 0.0));
        assert_eq!(interval_rates(10, 1000, 2.0), (5.0, 4000.0));
    }
}
