//! The text form of a distribution: what `parse` reads back (a flag pasted into a file and back).

use std::fmt;

use super::{Dist, Kind, Round};

/// A probability or weight as people write it: rounded to 12 significant digits, so the
/// binary leftovers of normalising (0.6499999999999999) read as what was meant (0.65).
fn short(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return x.to_string();
    }
    let digits = 12 - (x.abs().log10().floor() as i32 + 1);
    let scale = 10f64.powi(digits.clamp(0, 300));
    let r = (x * scale).round() / scale;
    r.to_string()
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.family())?;
        let mut args: Vec<String> = match &self.kind {
            Kind::Constant(v) => vec![v.to_string()],
            Kind::Uniform { min, max } => vec![min.to_string(), max.to_string()],
            Kind::Exponential { mean } | Kind::Poisson { mean } => vec![mean.to_string()],
            Kind::Normal { mean, std_dev } => vec![mean.to_string(), std_dev.to_string()],
            Kind::LogNormal { mu, sigma } => vec![mu.to_string(), sigma.to_string()],
            Kind::Pareto { shape, scale } | Kind::Gamma { shape, scale } => {
                vec![shape.to_string(), scale.to_string()]
            }
            Kind::Weibull { scale, shape } => vec![scale.to_string(), shape.to_string()],
            Kind::Cauchy { location, scale } | Kind::ExtremeLargest { location, scale } | Kind::ExtremeSmallest { location, scale } => {
                vec![location.to_string(), scale.to_string()]
            }
            Kind::StudentT { location, scale, dof } => vec![location.to_string(), scale.to_string(), dof.to_string()],
            Kind::Discrete(pairs) => pairs.iter().map(|(v, p)| format!("{v}:{}", short(*p))).collect(),
            Kind::Mixture(parts) => parts.iter().map(|(w, d)| format!("{}*{d}", short(*w))).collect(),
            Kind::Trace { source, .. } => vec![source.clone()],
        };
        if self.mul != 1.0 {
            args.push(format!("mul={}", self.mul));
        }
        if self.shift != 0.0 {
            args.push(format!("shift={}", self.shift));
        }
        match self.round {
            Round::None => {}
            Round::Floor => args.push("round=floor".into()),
            Round::Ceil => args.push("round=ceil".into()),
            Round::Nearest => args.push("round=nearest".into()),
        }
        if let Some(v) = self.min {
            args.push(format!("min={v}"));
        }
        if let Some(v) = self.max {
            args.push(format!("max={v}"));
        }
        if let Some((a, f)) = self.redraw {
            args.push(format!("redraw_above={a}"));
            args.push(format!("redraw_from={f}"));
        }
        write!(f, "{})", args.join(", "))
    }
}
