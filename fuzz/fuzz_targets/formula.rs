#![no_main]
use horde_model::dist::Vars;
use horde_model::Dist;
use libfuzzer_sys::fuzz_target;

// Distribution text with formulas over variables (service files): never panics; what validates
// samples, has a CDF, and a mean estimate that terminates.
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if s.contains("file(") {
        return;
    }
    let vars = Vars::from([("N".to_string(), 100.0), ("n".to_string(), 10.0)]);
    if let Ok(Ok(d)) = Dist::parse_with(s, &vars).map(|d| d.validate()) {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut smp = d.sampler();
        for _ in 0..8 {
            let _ = smp.sample(&mut rng);
        }
        let _ = d.cdf(0.5);
        let _ = d.check_advances();
    }
});
