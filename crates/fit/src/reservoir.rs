//! A uniform sample of bounded size (Vitter's algorithm R), seeded so a fit repeats exactly.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Values kept per sample; beyond it a uniform reservoir (seeded, so a fit repeats exactly).
pub const RESERVOIR: usize = 200_000;

/// A uniform sample of at most [`RESERVOIR`] values, and how many were seen.
pub struct Reservoir {
    pub values: Vec<f64>,
    pub seen: u64,
    cap: usize,
    rng: ChaCha8Rng,
}

impl Reservoir {
    pub fn new(seed: u64) -> Reservoir {
        Reservoir::with_capacity(RESERVOIR, seed)
    }

    pub fn with_capacity(cap: usize, seed: u64) -> Reservoir {
        Reservoir { values: Vec::new(), seen: 0, cap, rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    pub fn push(&mut self, v: f64) {
        self.seen += 1;
        if self.values.len() < self.cap {
            self.values.push(v);
        } else {
            let j = self.rng.random_range(0..self.seen);
            if (j as usize) < self.cap {
                self.values[j as usize] = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reservoir_stays_bounded_and_uniform() {
        let mut r = Reservoir::new(1);
        for i in 0..(RESERVOIR as u64 * 3) {
            r.push(i as f64);
        }
        assert_eq!((r.values.len(), r.seen), (RESERVOIR, RESERVOIR as u64 * 3));
        let mean = r.values.iter().sum::<f64>() / r.values.len() as f64;
        assert!((mean / (RESERVOIR as f64 * 1.5) - 1.0).abs() < 0.01, "{mean}");
    }
}
