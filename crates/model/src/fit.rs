//! Goodness of fit between samples and a model, used by tests and fidelity reports.

/// Kolmogorov–Smirnov distance `sup |Fn(x) − F(x)|` between the empirical CDF of `samples` and
/// `cdf`. Correct for distributions with atoms: at every distinct value it compares both the
/// left limit and the value itself. `samples` is sorted in place.
pub fn ks_distance(samples: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len() as f64;
    let mut d: f64 = 0.0;
    let mut i = 0;
    while i < samples.len() {
        let x = samples[i];
        let mut j = i;
        while j < samples.len() && samples[j] == x {
            j += 1;
        }
        let left = cdf(x - 1e-9 * x.abs().max(1.0));
        d = d.max((i as f64 / n - left).abs());
        d = d.max((j as f64 / n - cdf(x)).abs());
        i = j;
    }
    d
}

/// Critical KS distance for `n` samples at significance `alpha` (asymptotic Smirnov formula
/// `sqrt(-ln(alpha/2)/2)/sqrt(n)`); conservative for discrete models.
pub fn ks_critical(n: usize, alpha: f64) -> f64 {
    (-(alpha / 2.0).ln() / 2.0).sqrt() / (n as f64).sqrt()
}

/// The two-sample Kolmogorov–Smirnov distance: the largest gap between the empirical CDFs of
/// `a` and `b` (sorted in place), over every value either holds (ties counted together).
/// None when either is empty.
pub fn ks_two_sample(a: &mut [f64], b: &mut [f64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    a.sort_by(|x, y| x.total_cmp(y));
    b.sort_by(|x, y| x.total_cmp(y));
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0.0f64);
    while i < a.len() || j < b.len() {
        // the next value either holds, and every copy of it on both sides
        let x = match (a.get(i), b.get(j)) {
            (Some(p), Some(q)) => p.min(*q),
            (Some(p), None) => *p,
            (None, Some(q)) => *q,
            (None, None) => break,
        };
        while a.get(i).is_some_and(|v| *v <= x) {
            i += 1;
        }
        while b.get(j).is_some_and(|v| *v <= x) {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    Some(d)
}

/// Critical two-sample KS distance for samples of `n` and `m` at significance `alpha`
/// (asymptotic: `sqrt(-ln(alpha/2)/2 · (n + m)/(n·m))`).
pub fn ks_two_sample_critical(n: u64, m: u64, alpha: f64) -> f64 {
    let (n, m) = (n.max(1) as f64, m.max(1) as f64);
    (-(alpha / 2.0).ln() / 2.0 * (n + m) / (n * m)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ks_of_perfect_and_bad_fits() {
        let mut u: Vec<f64> = (0..1000).map(|i| (i as f64 + 0.5) / 1000.0).collect();
        assert!(ks_distance(&mut u, |x| x.clamp(0.0, 1.0)) <= 0.0005 + 1e-12);
        let mut u: Vec<f64> = (0..1000).map(|i| (i as f64 + 0.5) / 2000.0).collect();
        assert!((ks_distance(&mut u, |x| x.clamp(0.0, 1.0)) - 0.5).abs() < 0.01);
        // atoms: all mass at 3 against a point mass at 3 is a perfect fit
        let mut a = vec![3.0; 100];
        assert_eq!(ks_distance(&mut a, |x| if x >= 3.0 { 1.0 } else { 0.0 }), 0.0);
    }

    #[test]
    fn two_sample_distance_is_the_widest_gap_between_the_empirical_cdfs() {
        let mut a: Vec<f64> = (0..100).map(f64::from).collect();
        let mut b = a.clone();
        assert_eq!(ks_two_sample(&mut a, &mut b), Some(0.0));
        // b shifted by half the range: the gap is one half
        let mut b: Vec<f64> = (50..150).map(f64::from).collect();
        assert!((ks_two_sample(&mut a, &mut b).unwrap() - 0.5).abs() < 1e-12);
        // ties: {1, 1, 2} vs {1, 2, 2} differ by 1/3 at 1
        assert!((ks_two_sample(&mut [1.0, 1.0, 2.0], &mut [2.0, 1.0, 2.0]).unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(ks_two_sample(&mut [], &mut [1.0]), None);
        // the critical value: 1.36 · sqrt(2/n) at 5 % for two samples of n
        assert!((ks_two_sample_critical(10_000, 10_000, 0.05) - 1.358 * (2.0f64 / 10_000.0).sqrt()).abs() < 1e-4);
    }
}
