use horde_model::preset::{Preset, CODECS, NAMES};

pub fn run() -> crate::Outcome {
    println!("Presets (use with --preset NAME; parameters from D-ITG 2.8.1, see shared/reference/models.md §2):");
    for n in NAMES {
        let p: Preset = n.parse().expect("built-in preset");
        println!("  {:<8} {}  idt (ms) = {}\n  {:<8}      size (B) = {}", n, p.transport.name(), p.idt, "", p.size);
    }
    println!(
        "  voip options: codec={} rtp=rtp|crtp vad=on|off, e.g. --preset 'voip(codec=g729.2, rtp=crtp, vad=on)'",
        CODECS.iter().map(|c| c.0).collect::<Vec<_>>().join("|")
    );
    println!();
    println!("Distributions (--idt in milliseconds, --size in bytes, --on/--off/--start-delay in ms):");
    println!("  NUMBER | constant(v) | uniform(low, high) | exponential(mean) | normal(mean, sd) | lognormal(mu, sigma)");
    println!("  pareto(shape, scale) | cauchy(location, scale) | gamma(shape, scale) | weibull(scale, shape) | poisson(mean)");
    println!("  student_t(location, scale, dof) | extreme_largest(location, scale) | extreme_smallest(location, scale)");
    println!("  discrete(v:p, v:p, ...) | mix(w*DIST, w*DIST, ...) | values(v, v, ...) | file(PATH)  (replayed in order)");
    println!("  modifiers, applied in this order: mul=X, shift=X, round=floor|ceil|nearest, min=X, max=X");
    println!("  example: --idt 'mix(0.6*exponential(4.29), 0.4*constant(10.75))' --size 'normal(64, 3, round=nearest)'");
    Ok(0)
}
