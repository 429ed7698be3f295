//! The TCP-fair rate: what a TCP flow gets on a path with round-trip time R and loss event
//! rate p, the yardstick of every controller here.

/// Padhye's TCP throughput equation in the form RFC 5348 §3.1 uses (TFRC's own), bytes/s:
///
/// ```text
/// X = s / (R·√(2bp/3) + t_RTO·(3·√(3bp/8))·p·(1 + 32p²))
/// ```
/// `s` packet size (bytes), `rtt_s` R (seconds), `p` loss event rate, with b = 1 (RFC 5348
/// recommends 1: no delayed ACKs counted) and t_RTO = 4R (RFC 5348 §4.3's simplification).
/// `p` = 0 gives infinity.
pub fn padhye_bytes_per_s(s: f64, rtt_s: f64, p: f64) -> f64 {
    if p <= 0.0 {
        return f64::INFINITY;
    }
    let b = 1.0;
    let t_rto = 4.0 * rtt_s;
    s / (rtt_s * (2.0 * b * p / 3.0).sqrt() + t_rto * (3.0 * (3.0 * b * p / 8.0).sqrt()) * p * (1.0 + 32.0 * p * p))
}

/// Mathis et al.'s simpler law, bytes/s: X = s·√(3/2) / (R·√p).
pub fn mathis_bytes_per_s(s: f64, rtt_s: f64, p: f64) -> f64 {
    if p <= 0.0 {
        return f64::INFINITY;
    }
    s * 1.5f64.sqrt() / (rtt_s * p.sqrt())
}

/// The loss event rate at which [`padhye_bytes_per_s`] gives `x` (bytes/s), by bisection (the
/// equation falls monotonically in p). RFC 5348 §6.3.1 uses it to seed the first loss interval.
pub fn padhye_inverse_p(s: f64, rtt_s: f64, x: f64) -> f64 {
    let (mut lo, mut hi) = (1e-9f64, 1.0f64);
    if padhye_bytes_per_s(s, rtt_s, lo) <= x {
        return lo;
    }
    if padhye_bytes_per_s(s, rtt_s, hi) >= x {
        return hi;
    }
    for _ in 0..100 {
        let mid = (lo * hi).sqrt();
        if padhye_bytes_per_s(s, rtt_s, mid) > x {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo * hi).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padhye_matches_hand_computed_values_and_mathis_at_low_loss() {
        // s = 1000 B, R = 100 ms, p = 1 %: 0.1·√(0.02/3) = 0.0081650; 0.4·3·√(0.00375)·0.01·1.0032
        // = 0.00073719; X = 1000 / 0.0089022 = 112,332 B/s.
        let x = padhye_bytes_per_s(1000.0, 0.1, 0.01);
        assert!((x - 112_332.0).abs() < 5.0, "{x}");
        // At low loss the timeout term vanishes and Padhye approaches Mathis (within 2 % at 0.01 %).
        let (a, b) = (padhye_bytes_per_s(375.0, 0.1, 1e-4), mathis_bytes_per_s(375.0, 0.1, 1e-4));
        assert!((a / b - 1.0).abs() < 0.02, "{a} {b}");
        assert!(padhye_bytes_per_s(375.0, 0.1, 0.0).is_infinite());
        // Falls with loss and with RTT.
        assert!(padhye_bytes_per_s(375.0, 0.1, 0.05) < padhye_bytes_per_s(375.0, 0.1, 0.01));
        assert!(padhye_bytes_per_s(375.0, 0.2, 0.01) < padhye_bytes_per_s(375.0, 0.1, 0.01));
    }

    #[test]
    fn the_inverse_finds_the_loss_rate_back() {
        for p in [0.001, 0.01, 0.05, 0.2] {
            let x = padhye_bytes_per_s(375.0, 0.1, p);
            let q = padhye_inverse_p(375.0, 0.1, x);
            assert!((q / p - 1.0).abs() < 1e-6, "{p} {q}");
        }
    }
}
