//! Percentiles, one definition for every report: the nearest rank (Hyndman & Fan type 1, the
//! definition of RFC 2330 §11.3): the p-quantile of n sorted samples is the smallest sample
//! with at least ⌈p·n⌉ samples at or below it. It is always one of the samples, so no percentile
//! can exceed the maximum or fall below the minimum.

/// The p-quantile (0 ≤ p ≤ 1) of `sorted` (ascending); `None` when empty.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = (p.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_a_sample_and_never_beyond_the_extremes() {
        let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(nearest_rank(&v, 0.5), Some(5));
        assert_eq!(nearest_rank(&v, 0.9), Some(9));
        assert_eq!(nearest_rank(&v, 0.99), Some(10));
        assert_eq!(nearest_rank(&v, 0.999), Some(10));
        assert_eq!(nearest_rank(&v, 0.0), Some(1));
        assert_eq!(nearest_rank::<i32>(&[], 0.5), None);
        // p99.9 of 58,881 µs-scale values never exceeds the max (the defect HDR buckets had)
        let w: Vec<i64> = (0..100_000).map(|k| 58_000_000 + k * 8).collect();
        assert!(nearest_rank(&w, 0.999).unwrap() <= *w.last().unwrap());
    }
}
