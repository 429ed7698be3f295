//! Random-variable specifications: what a flow's inter-departure time, size, on/off period or
//! start delay is drawn from.
//!
//! A [`Dist`] is a base [`Kind`] plus modifiers applied in this order: multiply by `mul`, add
//! `shift`, round, clamp to `[min, max]`. The textual form (see [`crate::dist::parse`]) is the
//! one serialised form, used by CLI flags and flow files alike, e.g.
//! `mix(0.6*exponential(4.29), 0.4*constant(10.75))` or `weibull(268.37, 0.58, min=0)`.
//!
//! Sampling is done through a [`Sampler`], built once from a validated `Dist`; it owns the
//! `rand_distr` objects so drawing a value allocates nothing.

use std::fmt;
use std::sync::Arc;

use rand::Rng;
use rand_distr::Distribution as _;
use statrs::distribution::{ContinuousCDF, DiscreteCDF};

mod display;
mod parse;
mod sample;
pub use parse::{ParseError, Vars};
use sample::BaseSampler;
pub use sample::Sampler;

/// Rounding applied after `mul`/`shift` and before clamping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Round {
    #[default]
    None,
    Floor,
    Ceil,
    Nearest,
}

/// The base distribution family and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Constant(f64),
    Uniform {
        min: f64,
        max: f64,
    },
    Exponential {
        mean: f64,
    },
    Normal {
        mean: f64,
        std_dev: f64,
    },
    LogNormal {
        mu: f64,
        sigma: f64,
    },
    /// Pareto type I: `P(X > x) = (scale/x)^shape` for `x >= scale`.
    Pareto {
        shape: f64,
        scale: f64,
    },
    Cauchy {
        location: f64,
        scale: f64,
    },
    Gamma {
        shape: f64,
        scale: f64,
    },
    Weibull {
        scale: f64,
        shape: f64,
    },
    Poisson {
        mean: f64,
    },
    /// Location-scale Student's t with `dof` degrees of freedom.
    StudentT {
        location: f64,
        scale: f64,
        dof: f64,
    },
    /// Largest extreme value (Gumbel max): `a - b ln(-ln U)`.
    ExtremeLargest {
        location: f64,
        scale: f64,
    },
    /// Smallest extreme value (Gumbel min): `a + b ln(-ln U)`.
    ExtremeSmallest {
        location: f64,
        scale: f64,
    },
    /// `(value, probability)` pairs; probabilities are normalised when validated.
    Discrete(Vec<(f64, f64)>),
    /// `(weight, component)` pairs; weights are normalised when validated.
    Mixture(Vec<(f64, Dist)>),
    /// Values replayed in order, cycling at the end (D-ITG's "values from a file").
    Trace {
        source: String,
        values: Arc<Vec<f64>>,
    },
}

/// A base distribution with modifiers. See the module docs for the order of application.
#[derive(Clone, Debug, PartialEq)]
pub struct Dist {
    pub kind: Kind,
    pub mul: f64,
    pub shift: f64,
    pub round: Round,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// `(above, from)`: a value above `above` is replaced by a uniform draw in `[from, above]`
    /// (the WoW model's treatment of APDUs larger than any seen in traces). Applied after
    /// rounding, before clamping.
    pub redraw: Option<(f64, f64)>,
}

/// A parameter that is out of its allowed range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{family}: {param} {requirement} (got {got})")]
pub struct DistError {
    pub family: &'static str,
    pub param: &'static str,
    pub requirement: &'static str,
    pub got: String,
}

impl Dist {
    pub fn new(kind: Kind) -> Self {
        Dist { kind, mul: 1.0, shift: 0.0, round: Round::None, min: None, max: None, redraw: None }
    }

    pub fn constant(v: f64) -> Self {
        Dist::new(Kind::Constant(v))
    }

    pub fn with_min(mut self, min: f64) -> Self {
        self.min = Some(min);
        self
    }

    pub fn with_max(mut self, max: f64) -> Self {
        self.max = Some(max);
        self
    }

    pub fn with_shift(mut self, shift: f64) -> Self {
        self.shift = shift;
        self
    }

    pub fn with_mul(mut self, mul: f64) -> Self {
        self.mul = mul;
        self
    }

    pub fn with_round(mut self, round: Round) -> Self {
        self.round = round;
        self
    }

    /// The family name as written in the text form.
    pub fn family(&self) -> &'static str {
        self.kind.family()
    }

    /// Checks every parameter (recursively for mixtures) and normalises probabilities.
    pub fn validate(mut self) -> Result<Dist, DistError> {
        let fam = self.family();
        finite(fam, "mul", self.mul)?;
        finite(fam, "shift", self.shift)?;
        if self.mul == 0.0 {
            return Err(err(fam, "mul", "must not be 0", self.mul));
        }
        if let (Some(lo), Some(hi)) = (self.min, self.max) {
            if lo > hi {
                return Err(err(fam, "min", "must be <= max", format!("min {lo}, max {hi}")));
            }
        }
        for (p, v) in [("min", self.min), ("max", self.max)] {
            if let Some(v) = v {
                finite(fam, p, v)?;
            }
        }
        if let Some((above, from)) = self.redraw {
            finite(fam, "redraw_above", above)?;
            finite(fam, "redraw_from", from)?;
            if from >= above {
                return Err(err(fam, "redraw_from", "must be < redraw_above", format!("from {from}, above {above}")));
            }
        }
        self.kind = self.kind.validate()?;
        self.kind.check_constructs()?;
        BaseSampler::try_new(&self.kind)?;
        Ok(self)
    }

    /// Builds the sampler.
    ///
    /// # Panics
    /// If `self` was not validated ([`Dist::validate`] builds every sampler once, so a validated
    /// specification cannot fail here).
    pub fn sampler(&self) -> Sampler {
        let base = BaseSampler::try_new(&self.kind).unwrap_or_else(|e| panic!("sampler of an unvalidated distribution: {e}"));
        Sampler { base, dist: self.clone(), cursor: 0 }
    }

    /// Applies mul, shift, rounding and clamping to a base draw.
    fn post(&self, x: f64) -> f64 {
        let mut y = x * self.mul + self.shift;
        y = match self.round {
            Round::None => y,
            Round::Floor => y.floor(),
            Round::Ceil => y.ceil(),
            Round::Nearest => y.round(),
        };
        if let Some(lo) = self.min {
            y = y.max(lo);
        }
        if let Some(hi) = self.max {
            y = y.min(hi);
        }
        y
    }

    /// Cumulative distribution function `P(X <= x)` of the whole specification, modifiers
    /// included. Used by tests (KS distances) and by reports (model CDF drawn under data).
    pub fn cdf(&self, x: f64) -> f64 {
        let Some((above, from)) = self.redraw else {
            return self.cdf_plain(x);
        };
        if x < from {
            return self.cdf_plain(x);
        }
        let tail = 1.0 - self.cdf_plain(above);
        if x >= above {
            return self.cdf_plain(above) + tail;
        }
        self.cdf_plain(x) + tail * (x - from) / (above - from)
    }

    fn cdf_plain(&self, x: f64) -> f64 {
        if let Some(lo) = self.min {
            if x < lo {
                return 0.0;
            }
        }
        if let Some(hi) = self.max {
            if x >= hi {
                return 1.0;
            }
        }
        // P(round(Y) <= x) in terms of the continuous/discrete Y = mul*B + shift.
        let (y, strict) = match self.round {
            Round::None => (x, false),
            Round::Floor => (x.floor() + 1.0, true),
            Round::Ceil => (x.floor(), false),
            Round::Nearest => (x.floor() + 0.5, true),
        };
        let b = (y - self.shift) / self.mul;
        if self.mul > 0.0 {
            if strict {
                self.kind.cdf_below(b)
            } else {
                self.kind.cdf(b)
            }
        } else {
            // Y <= y  <=>  B >= b
            if strict {
                1.0 - self.kind.cdf(b)
            } else {
                1.0 - self.kind.cdf_below(b)
            }
        }
    }

    /// Analytic mean where it exists and no rounding/clamping applies; `None` otherwise.
    pub fn mean(&self) -> Option<f64> {
        if self.round != Round::None || self.min.is_some() || self.max.is_some() || self.redraw.is_some() {
            return None;
        }
        Some(self.kind.mean()? * self.mul + self.shift)
    }

    /// Analytic variance where it exists and no rounding/clamping applies.
    pub fn variance(&self) -> Option<f64> {
        if self.round != Round::None || self.min.is_some() || self.max.is_some() || self.redraw.is_some() {
            return None;
        }
        Some(self.kind.variance()? * self.mul * self.mul)
    }

    /// E[X²] of a non-negative quantity (inter-departure times, sizes), from the CDF by
    /// numeric integration: lo² + ∫ 2x (1 − F(x)) dx over the same range as
    /// [`Dist::mean_estimate`] (a tail beyond the 1 − 10⁻⁹ quantile is cut). `None` where that
    /// has no finite mean.
    pub fn second_moment_estimate(&self) -> Option<f64> {
        self.mean_estimate()?;
        let lo = self.min.unwrap_or_else(|| self.quantile_search(1e-9)).max(0.0);
        let hi = self.max.or(self.redraw.map(|r| r.0)).unwrap_or_else(|| self.quantile_search(1.0 - 1e-9));
        if !lo.is_finite() || !hi.is_finite() || hi < lo {
            return None;
        }
        let n = 20_000;
        let h = (hi - lo) / n as f64;
        if h == 0.0 {
            return Some(lo * lo);
        }
        let mut acc = 0.0;
        for i in 0..n {
            let (x0, x1) = (lo + i as f64 * h, lo + (i + 1) as f64 * h);
            acc += (2.0 * x0 * (1.0 - self.cdf(x0)) + 2.0 * x1 * (1.0 - self.cdf(x1))) * 0.5 * h;
        }
        Some(lo * lo + acc)
    }

    /// Mean estimated from the CDF by numeric integration when no closed form applies
    /// (clamped or rounded specifications). Returns `None` for unbounded heavy tails.
    pub fn mean_estimate(&self) -> Option<f64> {
        if let Some(m) = self.mean() {
            return Some(m);
        }
        if let Some(m) = self.mean_if_clamps_negligible() {
            return Some(m);
        }
        let bounded = (self.min.is_some() || self.redraw.is_some()) && (self.max.is_some() || self.redraw.is_some());
        if self.kind.mean().is_none() && !bounded {
            // Heavy tail (Cauchy, Pareto shape <= 1, t with dof <= 1): no finite mean.
            return None;
        }
        let lo = self.min.unwrap_or_else(|| self.quantile_search(1e-9));
        let hi = self.max.or(self.redraw.map(|r| r.0)).unwrap_or_else(|| self.quantile_search(1.0 - 1e-9));
        if !lo.is_finite() || !hi.is_finite() {
            return None;
        }
        // E[X] = lo + ∫_lo^hi (1 - F(x)) dx, trapezoid on 20k steps.
        let n = 20_000;
        let h = (hi - lo) / n as f64;
        if h == 0.0 {
            return Some(lo);
        }
        let mut acc = 0.0;
        for i in 0..n {
            let a = 1.0 - self.cdf(lo + i as f64 * h);
            let b = 1.0 - self.cdf(lo + (i + 1) as f64 * h);
            acc += (a + b) * 0.5 * h;
        }
        Some(lo + acc)
    }

    /// The analytic mean when the clamps and redraw cut less than 1e-4 of the mass (rounding
    /// adds its average offset): numeric integration over a heavy tail (Student-t with 1 < ν < 2)
    /// is far less accurate than this.
    fn mean_if_clamps_negligible(&self) -> Option<f64> {
        const NEGLIGIBLE: f64 = 1e-4;
        let free = Dist { min: None, max: None, redraw: None, round: Round::None, ..self.clone() };
        let mut m = free.mean()?;
        // A lower clamp on a Student-t (D-ITG's Counter-Strike IDTs, ν ≈ 1.08) cuts a tail too
        // heavy to integrate numerically: use E[max(X, lo)] = E[X] + s·(z F(z) + (ν + z²)/(ν − 1) f(z)).
        if let (Kind::StudentT { location, scale, dof }, Some(lo), None, None) = (&self.kind, self.min, self.max, self.redraw) {
            if *dof > 1.0 && self.mul > 0.0 {
                use statrs::distribution::{Continuous, ContinuousCDF};
                let t = statrs::distribution::StudentsT::new(0.0, 1.0, *dof).ok()?;
                let z = ((lo - self.shift) / self.mul - location) / scale;
                let gain = scale * (z * t.cdf(z) + (dof + z * z) / (dof - 1.0) * t.pdf(z));
                m = (location + gain) * self.mul + self.shift;
                return Some(match self.round {
                    Round::None | Round::Nearest => m,
                    Round::Ceil => m + 0.5,
                    Round::Floor => m - 0.5,
                });
            }
        }
        let below = self.min.map_or(0.0, |lo| free.cdf(lo - 1e-9 * lo.abs().max(1.0)));
        let above = self.max.or(self.redraw.map(|r| r.0)).map_or(0.0, |hi| 1.0 - free.cdf(hi));
        if below > NEGLIGIBLE || above > NEGLIGIBLE {
            return None;
        }
        Some(match self.round {
            Round::None | Round::Nearest => m,
            Round::Ceil => m + 0.5,
            Round::Floor => m - 0.5,
        })
    }

    /// Smallest x (by bisection on the CDF) with F(x) >= p.
    pub fn quantile_search(&self, p: f64) -> f64 {
        let (mut lo, mut hi) = (-1.0f64, 1.0f64);
        let mut guard = 0;
        while self.cdf(lo) > p && guard < 200 {
            lo *= 2.0;
            guard += 1;
        }
        while self.cdf(hi) < p && guard < 400 {
            hi *= 2.0;
            guard += 1;
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if self.cdf(mid) >= p {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
}

/// The smallest mean inter-departure time (or on-period) a flow may ask for, ms: 100 ns, i.e.
/// 10 M packets/s from one flow. No socket or clock paces beyond that (this machine's loopback
/// saturates near 0.3 M packets/s), so a faster request is a mistake such as `--rate 1e12`.
pub const MIN_MEAN_IDT_MS: f64 = 1e-4;

impl Dist {
    /// Checks that time moves forward when this specification is drawn as an inter-departure
    /// time or an on-period (negative draws count as 0): some draws must be positive, and their
    /// mean must be at least [`MIN_MEAN_IDT_MS`]. `self` must have been validated.
    pub fn check_advances(&self) -> Result<(), String> {
        let positive = 1.0 - self.cdf(0.0);
        if positive.is_nan() || positive <= 1e-12 {
            return Err(format!("every draw of {self} is <= 0 ms, so time would never advance; give a positive time"));
        }
        let at_least_zero = Dist { min: Some(self.min.map_or(0.0, |m| m.max(0.0))), ..self.clone() };
        match at_least_zero.mean_estimate() {
            Some(m) if m < MIN_MEAN_IDT_MS => Err(format!(
                "{self} has a mean of {m:.3e} ms: more than 10 M packets/s from one flow, beyond what a socket can pace; use a longer time or several flows"
            )),
            _ => Ok(()),
        }
    }
}

fn err(family: &'static str, param: &'static str, requirement: &'static str, got: impl ToString) -> DistError {
    DistError { family, param, requirement, got: got.to_string() }
}

fn finite(family: &'static str, param: &'static str, v: f64) -> Result<(), DistError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(err(family, param, "must be a finite number", v))
    }
}

fn positive(family: &'static str, param: &'static str, v: f64) -> Result<(), DistError> {
    finite(family, param, v)?;
    if v > 0.0 {
        Ok(())
    } else {
        Err(err(family, param, "must be > 0", v))
    }
}

impl Kind {
    pub fn family(&self) -> &'static str {
        match self {
            Kind::Constant(_) => "constant",
            Kind::Uniform { .. } => "uniform",
            Kind::Exponential { .. } => "exponential",
            Kind::Normal { .. } => "normal",
            Kind::LogNormal { .. } => "lognormal",
            Kind::Pareto { .. } => "pareto",
            Kind::Cauchy { .. } => "cauchy",
            Kind::Gamma { .. } => "gamma",
            Kind::Weibull { .. } => "weibull",
            Kind::Poisson { .. } => "poisson",
            Kind::StudentT { .. } => "student_t",
            Kind::ExtremeLargest { .. } => "extreme_largest",
            Kind::ExtremeSmallest { .. } => "extreme_smallest",
            Kind::Discrete(_) => "discrete",
            Kind::Mixture(_) => "mix",
            Kind::Trace { .. } => "file",
        }
    }

    fn validate(self) -> Result<Kind, DistError> {
        let fam = self.family();
        match &self {
            Kind::Constant(v) => finite(fam, "value", *v)?,
            Kind::Uniform { min, max } => {
                finite(fam, "min", *min)?;
                finite(fam, "max", *max)?;
                if min >= max {
                    return Err(err(fam, "max", "must be > min", format!("min {min}, max {max}")));
                }
            }
            Kind::Exponential { mean } => positive(fam, "mean", *mean)?,
            Kind::Normal { mean, std_dev } => {
                finite(fam, "mean", *mean)?;
                positive(fam, "std_dev", *std_dev)?;
            }
            Kind::LogNormal { mu, sigma } => {
                finite(fam, "mu", *mu)?;
                positive(fam, "sigma", *sigma)?;
            }
            Kind::Pareto { shape, scale } => {
                positive(fam, "shape", *shape)?;
                positive(fam, "scale", *scale)?;
            }
            Kind::Cauchy { location, scale } | Kind::ExtremeLargest { location, scale } | Kind::ExtremeSmallest { location, scale } => {
                finite(fam, "location", *location)?;
                positive(fam, "scale", *scale)?;
            }
            Kind::Gamma { shape, scale } => {
                positive(fam, "shape", *shape)?;
                positive(fam, "scale", *scale)?;
            }
            Kind::Weibull { scale, shape } => {
                positive(fam, "scale", *scale)?;
                positive(fam, "shape", *shape)?;
            }
            Kind::Poisson { mean } => positive(fam, "mean", *mean)?,
            Kind::StudentT { location, scale, dof } => {
                finite(fam, "location", *location)?;
                positive(fam, "scale", *scale)?;
                positive(fam, "dof", *dof)?;
            }
            Kind::Discrete(pairs) => return normalise_discrete(pairs).map(Kind::Discrete),
            Kind::Mixture(parts) => return normalise_mixture(parts.clone()).map(Kind::Mixture),
            Kind::Trace { values, .. } => {
                if values.is_empty() {
                    return Err(err(fam, "values", "must hold at least one number", "an empty list"));
                }
                if let Some(v) = values.iter().find(|v| !v.is_finite()) {
                    return Err(err(fam, "values", "must all be finite numbers", v));
                }
            }
        }
        Ok(self)
    }

    /// Builds the `statrs` distribution behind [`Kind::cdf`] once, so that the CDF's own
    /// constructors cannot fail later on parameters that passed the range checks.
    fn check_constructs(&self) -> Result<(), DistError> {
        use statrs::distribution as sd;
        let fam = self.family();
        let refuse = |e: &dyn fmt::Display| DistError {
            family: fam,
            param: "parameters",
            requirement: "must be in a range the CDF can be computed for",
            got: e.to_string(),
        };
        match self {
            Kind::Exponential { mean } => sd::Exp::new(1.0 / mean).map(drop).map_err(|e| refuse(&e)),
            Kind::Normal { mean, std_dev } => sd::Normal::new(*mean, *std_dev).map(drop).map_err(|e| refuse(&e)),
            Kind::LogNormal { mu, sigma } => sd::LogNormal::new(*mu, *sigma).map(drop).map_err(|e| refuse(&e)),
            Kind::Pareto { shape, scale } => sd::Pareto::new(*scale, *shape).map(drop).map_err(|e| refuse(&e)),
            Kind::Cauchy { location, scale } => sd::Cauchy::new(*location, *scale).map(drop).map_err(|e| refuse(&e)),
            Kind::Gamma { shape, scale } => sd::Gamma::new(*shape, 1.0 / scale).map(drop).map_err(|e| refuse(&e)),
            Kind::Weibull { scale, shape } => sd::Weibull::new(*shape, *scale).map(drop).map_err(|e| refuse(&e)),
            Kind::Poisson { mean } => sd::Poisson::new(*mean).map(drop).map_err(|e| refuse(&e)),
            Kind::StudentT { location, scale, dof } => sd::StudentsT::new(*location, *scale, *dof).map(drop).map_err(|e| refuse(&e)),
            Kind::Uniform { min, max } if !(max - min).is_finite() => Err(err(fam, "max", "minus min must be a finite width", format!("min {min}, max {max}"))),
            _ => Ok(()),
        }
    }

    /// `P(B <= x)`.
    fn cdf(&self, x: f64) -> f64 {
        self.cdf_impl(x, false)
    }

    /// `P(B < x)`; differs from `cdf` only at atoms.
    fn cdf_below(&self, x: f64) -> f64 {
        self.cdf_impl(x, true)
    }

    fn cdf_impl(&self, x: f64, strict: bool) -> f64 {
        use statrs::distribution as sd;
        let atom = |v: f64| {
            if (strict && v < x) || (!strict && v <= x) {
                1.0
            } else {
                0.0
            }
        };
        match self {
            Kind::Constant(v) => atom(*v),
            Kind::Uniform { min, max } => ((x - min) / (max - min)).clamp(0.0, 1.0),
            Kind::Exponential { mean } => sd::Exp::new(1.0 / mean).unwrap().cdf(x),
            Kind::Normal { mean, std_dev } => sd::Normal::new(*mean, *std_dev).unwrap().cdf(x),
            Kind::LogNormal { mu, sigma } => sd::LogNormal::new(*mu, *sigma).unwrap().cdf(x),
            Kind::Pareto { shape, scale } => sd::Pareto::new(*scale, *shape).unwrap().cdf(x),
            Kind::Cauchy { location, scale } => sd::Cauchy::new(*location, *scale).unwrap().cdf(x),
            Kind::Gamma { shape, scale } => sd::Gamma::new(*shape, 1.0 / scale).unwrap().cdf(x),
            Kind::Weibull { scale, shape } => sd::Weibull::new(*shape, *scale).unwrap().cdf(x),
            Kind::Poisson { mean } => {
                if x < 0.0 {
                    return 0.0;
                }
                let k = if strict && x.fract() == 0.0 { x - 1.0 } else { x.floor() };
                if k < 0.0 {
                    0.0
                } else {
                    sd::Poisson::new(*mean).unwrap().cdf(k as u64)
                }
            }
            Kind::StudentT { location, scale, dof } => sd::StudentsT::new(*location, *scale, *dof).unwrap().cdf(x),
            Kind::ExtremeLargest { location, scale } => (-(-(x - location) / scale).exp()).exp(),
            Kind::ExtremeSmallest { location, scale } => 1.0 - (-((x - location) / scale).exp()).exp(),
            Kind::Discrete(pairs) => pairs.iter().map(|(v, p)| p * atom(*v)).sum(),
            Kind::Mixture(parts) => parts.iter().map(|(w, d)| w * if strict { cdf_strict(d, x) } else { d.cdf(x) }).sum(),
            Kind::Trace { values, .. } => values.iter().map(|v| atom(*v)).sum::<f64>() / values.len() as f64,
        }
    }

    fn mean(&self) -> Option<f64> {
        const EULER: f64 = 0.577_215_664_901_532_9;
        Some(match self {
            Kind::Constant(v) => *v,
            Kind::Uniform { min, max } => 0.5 * (min + max),
            Kind::Exponential { mean } | Kind::Poisson { mean } => *mean,
            Kind::Normal { mean, .. } => *mean,
            Kind::LogNormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            Kind::Pareto { shape, scale } if *shape > 1.0 => shape * scale / (shape - 1.0),
            Kind::Gamma { shape, scale } => shape * scale,
            Kind::Weibull { scale, shape } => scale * gamma_fn(1.0 + 1.0 / shape),
            Kind::StudentT { location, dof, .. } if *dof > 1.0 => *location,
            Kind::ExtremeLargest { location, scale } => location + EULER * scale,
            Kind::ExtremeSmallest { location, scale } => location - EULER * scale,
            Kind::Discrete(pairs) => pairs.iter().map(|(v, p)| v * p).sum(),
            Kind::Mixture(parts) => parts.iter().map(|(w, d)| d.mean().map(|m| w * m)).sum::<Option<f64>>()?,
            Kind::Trace { values, .. } => values.iter().sum::<f64>() / values.len() as f64,
            _ => return None,
        })
    }

    fn variance(&self) -> Option<f64> {
        use std::f64::consts::PI;
        Some(match self {
            Kind::Constant(_) => 0.0,
            Kind::Uniform { min, max } => (max - min).powi(2) / 12.0,
            Kind::Exponential { mean } => mean * mean,
            Kind::Poisson { mean } => *mean,
            Kind::Normal { std_dev, .. } => std_dev * std_dev,
            Kind::LogNormal { mu, sigma } => ((sigma * sigma).exp() - 1.0) * (2.0 * mu + sigma * sigma).exp(),
            Kind::Pareto { shape, scale } if *shape > 2.0 => scale * scale * shape / ((shape - 1.0).powi(2) * (shape - 2.0)),
            Kind::Gamma { shape, scale } => shape * scale * scale,
            Kind::Weibull { scale, shape } => {
                let g1 = gamma_fn(1.0 + 1.0 / shape);
                scale * scale * (gamma_fn(1.0 + 2.0 / shape) - g1 * g1)
            }
            Kind::StudentT { scale, dof, .. } if *dof > 2.0 => scale * scale * dof / (dof - 2.0),
            Kind::ExtremeLargest { scale, .. } | Kind::ExtremeSmallest { scale, .. } => PI * PI / 6.0 * scale * scale,
            Kind::Discrete(pairs) => {
                let m: f64 = pairs.iter().map(|(v, p)| v * p).sum();
                pairs.iter().map(|(v, p)| p * (v - m).powi(2)).sum()
            }
            Kind::Mixture(parts) => {
                let m = self.mean()?;
                let mut acc = 0.0;
                for (w, d) in parts {
                    let (mi, vi) = (d.mean()?, d.variance()?);
                    acc += w * (vi + (mi - m).powi(2));
                }
                acc
            }
            Kind::Trace { values, .. } => {
                let n = values.len() as f64;
                let m = values.iter().sum::<f64>() / n;
                values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n
            }
            _ => return None,
        })
    }
}

fn cdf_strict(d: &Dist, x: f64) -> f64 {
    // P(X < x) = lim P(X <= x - ε); adequate for reports and tests on atoms.
    d.cdf(x - 1e-9 * x.abs().max(1.0))
}

fn gamma_fn(x: f64) -> f64 {
    statrs::function::gamma::gamma(x)
}

fn normalise_discrete(pairs: &[(f64, f64)]) -> Result<Vec<(f64, f64)>, DistError> {
    if pairs.is_empty() {
        return Err(err("discrete", "values", "must list at least one value:probability pair", "none"));
    }
    for (v, p) in pairs {
        finite("discrete", "value", *v)?;
        if !(p.is_finite() && *p >= 0.0) {
            return Err(err("discrete", "probability", "must be >= 0", p));
        }
    }
    let total: f64 = pairs.iter().map(|(_, p)| p).sum();
    if total <= 0.0 {
        return Err(err("discrete", "probability", "must sum to more than 0", total));
    }
    Ok(pairs.iter().map(|(v, p)| (*v, p / total)).collect())
}

fn normalise_mixture(parts: Vec<(f64, Dist)>) -> Result<Vec<(f64, Dist)>, DistError> {
    if parts.is_empty() {
        return Err(err("mix", "components", "must list at least one weight*distribution", "none"));
    }
    let mut out = Vec::with_capacity(parts.len());
    for (w, d) in &parts {
        if !(w.is_finite() && *w >= 0.0) {
            return Err(err("mix", "weight", "must be >= 0", w));
        }
        out.push((*w, d.clone().validate()?));
    }
    let total: f64 = out.iter().map(|(w, _)| w).sum();
    if total <= 0.0 {
        return Err(err("mix", "weight", "must sum to more than 0", total));
    }
    for (w, _) in &mut out {
        *w /= total;
    }
    Ok(out)
}

/// Replaces every `file(PATH)` in `text` (a scenario, service or flow file) with
/// `values(v, ...)` of that file's numbers, read here: what a controller sends to its agents,
/// so that they never open a file a scenario names. A file that cannot be read is an error
/// naming it, as parsing it would be.
pub fn inline_value_files(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("file(") {
        // Only the distribution: a word ending in "file(" (e.g. "profile(") is left as it is.
        let word_start = rest[..i].chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(&rest[..i]);
        let after = &rest[i + 5..];
        let Some(end) = after.find(')').filter(|_| !word_start) else {
            out.push_str("file(");
            rest = after;
            continue;
        };
        let d: Dist = format!("file({})", &after[..end]).parse().map_err(|e: ParseError| e.to_string())?;
        let Kind::Trace { values, .. } = &d.kind else { return Err(format!("`file({})` is not a value file", &after[..end])) };
        let list: Vec<String> = values.iter().map(|v| format!("{v}")).collect();
        out.push_str(&format!("values({})", list.join(", ")));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
