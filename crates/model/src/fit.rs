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
}
