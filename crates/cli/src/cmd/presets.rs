use horde_model::preset::{Preset, CODECS, NAMES};

pub fn run() -> crate::Outcome {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "Presets (use with --preset NAME; parameters from D-ITG 2.8.1, see docs/models.md §2):");
    for n in NAMES {
        let p: Preset = n.parse().expect("built-in preset");
        let _ = writeln!(o, "  {:<8} {}  idt (ms) = {}\n  {:<8}      size (B) = {}", n, p.transport.name(), p.idt, "", p.size);
    }
    let _ = writeln!(
        o,
        "  voip options: codec={} rtp=rtp|crtp vad=on|off, e.g. --preset 'voip(codec=g729.2, rtp=crtp, vad=on)'",
        CODECS.iter().map(|c| c.0).collect::<Vec<_>>().join("|")
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "Distributions (--idt in milliseconds, --size in bytes, --on/--off/--start-delay in ms):");
    let _ = writeln!(o, "  NUMBER | constant(v) | uniform(low, high) | exponential(mean) | normal(mean, sd) | lognormal(mu, sigma)");
    let _ = writeln!(o, "  pareto(shape, scale) | cauchy(location, scale) | gamma(shape, scale) | weibull(scale, shape) | poisson(mean)");
    let _ = writeln!(o, "  student_t(location, scale, dof) | extreme_largest(location, scale) | extreme_smallest(location, scale)");
    let _ = writeln!(o, "  discrete(v:p, v:p, ...) | mix(w*DIST, w*DIST, ...) | values(v, v, ...) | file(PATH)  (replayed in order)");
    let _ = writeln!(o, "  modifiers, applied in this order: mul=X, shift=X, round=floor|ceil|nearest, min=X, max=X");
    let _ = writeln!(o, "  example: --idt 'mix(0.6*exponential(4.29), 0.4*constant(10.75))' --size 'normal(64, 3, round=nearest)'");
    crate::output::out(&o)?;
    Ok(0)
}
