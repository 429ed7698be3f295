//! Drawing values: a [`Sampler`] built once from a validated [`Dist`] owns the `rand_distr`
//! objects, so a draw allocates nothing.

use super::*;

/// Pre-built sampler for a validated [`Dist`].
#[derive(Clone, Debug)]
pub struct Sampler {
    pub(super) base: BaseSampler,
    pub(super) dist: Dist,
    /// Position in a trace (values are replayed in order).
    pub(super) cursor: usize,
}

#[derive(Clone, Debug)]
pub(super) enum BaseSampler {
    Constant(f64),
    Uniform(rand_distr::Uniform<f64>),
    Exp(rand_distr::Exp<f64>),
    Normal(rand_distr::Normal<f64>),
    LogNormal(rand_distr::LogNormal<f64>),
    Pareto(rand_distr::Pareto<f64>),
    Cauchy(rand_distr::Cauchy<f64>),
    Gamma(rand_distr::Gamma<f64>),
    Weibull(rand_distr::Weibull<f64>),
    Poisson(rand_distr::Poisson<f64>),
    StudentT(rand_distr::StudentT<f64>, f64, f64),
    Gumbel(rand_distr::Gumbel<f64>),
    /// Smallest extreme value: negated Gumbel with negated location.
    NegGumbel(rand_distr::Gumbel<f64>),
    /// Cumulative probabilities and values.
    Discrete(Vec<f64>, Vec<f64>),
    Mixture(Vec<f64>, Vec<Sampler>),
    Trace(Arc<Vec<f64>>),
}

impl BaseSampler {
    /// Builds the sampler; fails where `rand_distr` refuses the parameters (a range too wide to
    /// draw from, a Poisson mean past what it can sample), which validation reports as bad input.
    pub(super) fn try_new(kind: &Kind) -> Result<Self, DistError> {
        use rand_distr as rd;
        let fam = kind.family();
        let refuse = |e: &dyn fmt::Display| DistError {
            family: fam,
            param: "parameters",
            requirement: "must be in a range the sampler can draw from",
            got: e.to_string(),
        };
        Ok(match kind {
            Kind::Constant(v) => BaseSampler::Constant(*v),
            Kind::Uniform { min, max } => BaseSampler::Uniform(rd::Uniform::new(*min, *max).map_err(|e| refuse(&e))?),
            Kind::Exponential { mean } => BaseSampler::Exp(rd::Exp::new(1.0 / mean).map_err(|e| refuse(&e))?),
            Kind::Normal { mean, std_dev } => BaseSampler::Normal(rd::Normal::new(*mean, *std_dev).map_err(|e| refuse(&e))?),
            Kind::LogNormal { mu, sigma } => BaseSampler::LogNormal(rd::LogNormal::new(*mu, *sigma).map_err(|e| refuse(&e))?),
            Kind::Pareto { shape, scale } => BaseSampler::Pareto(rd::Pareto::new(*scale, *shape).map_err(|e| refuse(&e))?),
            Kind::Cauchy { location, scale } => BaseSampler::Cauchy(rd::Cauchy::new(*location, *scale).map_err(|e| refuse(&e))?),
            Kind::Gamma { shape, scale } => BaseSampler::Gamma(rd::Gamma::new(*shape, *scale).map_err(|e| refuse(&e))?),
            Kind::Weibull { scale, shape } => BaseSampler::Weibull(rd::Weibull::new(*scale, *shape).map_err(|e| refuse(&e))?),
            Kind::Poisson { mean } => BaseSampler::Poisson(rd::Poisson::new(*mean).map_err(|e| refuse(&e))?),
            Kind::StudentT { location, scale, dof } => BaseSampler::StudentT(rd::StudentT::new(*dof).map_err(|e| refuse(&e))?, *location, *scale),
            Kind::ExtremeLargest { location, scale } => BaseSampler::Gumbel(rd::Gumbel::new(*location, *scale).map_err(|e| refuse(&e))?),
            Kind::ExtremeSmallest { location, scale } => BaseSampler::NegGumbel(rd::Gumbel::new(-location, *scale).map_err(|e| refuse(&e))?),
            Kind::Discrete(pairs) => {
                let mut acc = 0.0;
                let cum = pairs.iter().map(|(_, p)| {
                    acc += p;
                    acc
                });
                BaseSampler::Discrete(cum.collect(), pairs.iter().map(|(v, _)| *v).collect())
            }
            Kind::Mixture(parts) => {
                let mut acc = 0.0;
                let cum = parts
                    .iter()
                    .map(|(w, _)| {
                        acc += w;
                        acc
                    })
                    .collect();
                let samplers = parts.iter().map(|(_, d)| {
                    d.kind.check_constructs().and_then(|_| BaseSampler::try_new(&d.kind)).map(|base| Sampler { base, dist: d.clone(), cursor: 0 })
                });
                BaseSampler::Mixture(cum, samplers.collect::<Result<_, _>>()?)
            }
            Kind::Trace { values, .. } => BaseSampler::Trace(values.clone()),
        })
    }
}

/// Index of the first cumulative probability above `u` (last index on rounding slack).
fn pick(cum: &[f64], u: f64) -> usize {
    cum.partition_point(|c| *c <= u).min(cum.len() - 1)
}

impl Sampler {
    pub fn dist(&self) -> &Dist {
        &self.dist
    }

    /// Draws one value.
    pub fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R) -> f64 {
        let x = match &mut self.base {
            BaseSampler::Constant(v) => *v,
            BaseSampler::Uniform(d) => d.sample(rng),
            BaseSampler::Exp(d) => d.sample(rng),
            BaseSampler::Normal(d) => d.sample(rng),
            BaseSampler::LogNormal(d) => d.sample(rng),
            BaseSampler::Pareto(d) => d.sample(rng),
            BaseSampler::Cauchy(d) => d.sample(rng),
            BaseSampler::Gamma(d) => d.sample(rng),
            BaseSampler::Weibull(d) => d.sample(rng),
            BaseSampler::Poisson(d) => d.sample(rng),
            BaseSampler::StudentT(d, loc, scale) => *loc + *scale * d.sample(rng),
            BaseSampler::Gumbel(d) => d.sample(rng),
            BaseSampler::NegGumbel(d) => -d.sample(rng),
            BaseSampler::Discrete(cum, vals) => vals[pick(cum, rng.random::<f64>())],
            BaseSampler::Mixture(cum, parts) => {
                let i = pick(cum, rng.random::<f64>());
                parts[i].sample(rng)
            }
            BaseSampler::Trace(values) => {
                let v = values[self.cursor % values.len()];
                self.cursor += 1;
                v
            }
        };
        let mut y = self.dist.post(x);
        if let Some((above, from)) = self.dist.redraw {
            if y > above {
                y = from + (above - from) * rng.random::<f64>();
                if let Some(hi) = self.dist.max {
                    y = y.min(hi);
                }
                if let Some(lo) = self.dist.min {
                    y = y.max(lo);
                }
            }
        }
        y
    }
}
