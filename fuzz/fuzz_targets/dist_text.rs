#![no_main]
use horde_model::Dist;
use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;

// Distribution text from users: parsing and validation never panic; a valid spec samples.
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if s.contains("file(") {
        return;
    }
    if let Ok(d) = s.parse::<Dist>().map(|d| d.validate()) {
        if let Ok(d) = d {
            let mut smp = d.sampler();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
            for _ in 0..16 {
                let _ = smp.sample(&mut rng);
            }
            let _ = d.cdf(1.0);
        }
    }
});
