//! Players' sessions: when each player slot is online. Pure and seeded like the rest of the
//! behaviour process (the sessions are the first draws of a player's stream).
//!
//! - `fixed`: online for the whole run (from its join time).
//! - `arrivals`: sessions of `length` separated by `gap`, the first after a uniform share of a gap.
//! - `diurnal`: each slot is a subscriber. Offline, it logs in at the rate of the hour of day
//!   (a non-homogeneous Poisson process, piecewise constant by hour); a session then lasts
//!   `length`. The process starts [`WARMUP_S`] before the slot's join time with the slot offline,
//!   so at the run's start the population is what a day of this model leaves online; sessions
//!   begun before the join time are online at it but are not logins of the run.
//!
//! [`expected`] computes the diurnal model's own expectation — logins, logouts and players online
//! per hour of the run — by integrating the same process (a renewal equation on a fine grid), so
//! `horde behave` can test a run's counts against it.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::service::{Service, Session};

/// What a behaviour run covers.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub players: u32,
    pub duration_s: f64,
    pub seed: u64,
    pub start_hour: f64,
}

/// Simulated time before a diurnal slot's join during which its process already runs (48 h).
pub const WARMUP_S: f64 = 48.0 * 3600.0;

/// One session of one player, clipped to the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Span {
    /// Seconds from the run's start (at least the slot's join time).
    pub start_s: f64,
    /// At most the run's duration.
    pub end_s: f64,
    /// The session began within the run (not carried over from before the slot's join).
    pub login: bool,
    /// The session ended within the run (not cut off by its end).
    pub logout: bool,
}

/// A slot's sessions in time order, drawn from `rng` (the player's behaviour stream, before
/// anything else is drawn from it).
pub fn draw(svc: &Service, p: &Params, join_s: f64, rng: &mut ChaCha8Rng) -> Vec<Span> {
    let end = p.duration_s;
    let mut out = Vec::new();
    match &svc.session {
        Session::Fixed if join_s < end => out.push(Span { start_s: join_s, end_s: end, login: join_s > 0.0, logout: false }),
        Session::Fixed => {}
        Session::Arrivals { gap, length } => {
            let (mut g, mut l) = (gap.sampler(), length.sampler());
            let mut t = join_s + g.sample(rng).max(0.0) * rng.random::<f64>();
            while t < end {
                let len = l.sample(rng).max(0.0);
                out.push(Span { start_s: t, end_s: (t + len).min(end), login: true, logout: t + len < end });
                t += len + g.sample(rng).max(0.0);
            }
        }
        Session::Diurnal { length, rate } => {
            let mut l = length.sampler();
            let mut t = join_s - WARMUP_S;
            while let Some(at) = next_login(svc, rate, p.start_hour, t, end, rng) {
                let len = l.sample(rng).max(0.0);
                let stop = at + len;
                if stop > join_s {
                    out.push(Span { start_s: at.max(join_s), end_s: stop.min(end), login: at >= join_s, logout: stop < end });
                }
                t = stop;
                if t >= end {
                    break;
                }
            }
        }
    }
    out
}

/// The first login at or after `t` (before `end`) of an offline slot: walks hour by hour,
/// spending one exponential draw of cumulative rate. `None` when none comes before `end`.
fn next_login(svc: &Service, rate: &[f64; 24], start_hour: f64, mut t: f64, end: f64, rng: &mut ChaCha8Rng) -> Option<f64> {
    let mut need = -(1.0 - rng.random::<f64>()).ln();
    while t < end {
        let r = rate[svc.hour_at(start_hour, t)];
        // To the next whole hour of day (the hour never changes when it does not advance).
        let next = if svc.hour_advances { next_hour(start_hour, t).min(end) } else { end };
        let have = r * (next - t);
        if have >= need && r > 0.0 {
            return Some(t + need / r);
        }
        need -= have;
        t = next;
    }
    None
}

/// The time of the next whole hour of day after `t` (seconds from a start at `start_hour`).
fn next_hour(start_hour: f64, t: f64) -> f64 {
    let h = start_hour + t / 3600.0;
    let next = ((h.floor() + 1.0 - start_hour) * 3600.0).max(t + 1e-6);
    // Floating point may land a hair before the boundary: never step by less than a microsecond.
    if next <= t {
        t + 1e-6
    } else {
        next
    }
}

/// Logins, logouts and players online per hour of a run (hour `i` covers seconds
/// `3600·i .. 3600·(i+1)` of the run, the last one possibly shorter).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Hourly {
    pub logins: Vec<f64>,
    pub logouts: Vec<f64>,
    /// Players online at the start of each hour.
    pub online: Vec<f64>,
}

impl Hourly {
    pub fn new(duration_s: f64) -> Hourly {
        let n = (duration_s / 3600.0).ceil().max(1.0) as usize;
        Hourly { logins: vec![0.0; n], logouts: vec![0.0; n], online: vec![0.0; n] }
    }

    fn bin(&self, t: f64) -> usize {
        ((t / 3600.0).max(0.0) as usize).min(self.logins.len() - 1)
    }

    /// Counts one slot's sessions.
    pub fn add(&mut self, spans: &[Span]) {
        for s in spans {
            if s.login {
                let b = self.bin(s.start_s);
                self.logins[b] += 1.0;
            }
            if s.logout {
                let b = self.bin(s.end_s);
                self.logouts[b] += 1.0;
            }
            // The hours whose start falls in [start, end).
            let first = (s.start_s / 3600.0).ceil().max(0.0) as usize;
            let last = ((s.end_s / 3600.0).ceil().max(0.0) as usize).min(self.online.len());
            for on in self.online.iter_mut().take(last).skip(first) {
                *on += 1.0;
            }
        }
    }
}

/// Most grid steps [`expected`] takes (the renewal integral costs steps² / 2).
const MAX_STEPS: usize = 6000;

/// The diurnal model's expected [`Hourly`] counts for `p.players` slots joining at 0: the
/// renewal equation online(t) = Σ logins(u) · P(length > t − u) over a grid of ≥ 30-s steps from
/// [`WARMUP_S`] before the run, logins(u) = (1 − online(u)) · (1 − e^(−rate(u)·dt)).
/// `None` for other session models.
pub fn expected(svc: &Service, p: &Params) -> Option<Hourly> {
    let Session::Diurnal { length, rate } = &svc.session else { return None };
    let span = WARMUP_S + p.duration_s;
    let steps = ((span / 30.0).ceil() as usize).clamp(1, MAX_STEPS);
    let dt = span / steps as f64;
    // Survival of a session that began mid-step k steps ago.
    let surv: Vec<f64> = (0..=steps).map(|k| 1.0 - length.cdf((k as f64 + 0.5) * dt)).collect();
    let mut logins = vec![0.0f64; steps];
    let mut online = vec![0.0f64; steps + 1];
    for i in 0..steps {
        let t = -WARMUP_S + i as f64 * dt;
        let r = rate[svc.hour_at(p.start_hour, t + dt / 2.0)];
        logins[i] = (1.0 - online[i]).max(0.0) * (1.0 - (-r * dt).exp());
        online[i + 1] = (0..=i).map(|j| logins[j] * surv[i - j]).sum();
    }
    let mut h = Hourly::new(p.duration_s);
    let n = p.players as f64;
    let at = |t: f64| -> f64 {
        // Online at run time t, interpolated between grid points.
        let x = (t + WARMUP_S) / dt;
        let i = (x.floor() as usize).min(steps);
        let j = (i + 1).min(steps);
        online[i] + (online[j] - online[i]) * (x - i as f64)
    };
    for (i, m) in logins.iter().enumerate() {
        let t = -WARMUP_S + (i as f64 + 0.5) * dt;
        if t >= 0.0 {
            let b = h.bin(t);
            h.logins[b] += m * n;
        }
    }
    for b in 0..h.logins.len() {
        let t0 = b as f64 * 3600.0;
        let t1 = ((b + 1) as f64 * 3600.0).min(p.duration_s);
        h.online[b] = at(t0) * n;
        // Balance: whoever logged in and is not online more than before has logged out.
        h.logouts[b] = (h.logins[b] - (at(t1) - at(t0)) * n).max(0.0);
    }
    Some(h)
}

/// Pearson's χ² of observed against expected counts over the bins whose expectation is at
/// least 5 (the usual validity rule): `(statistic, bins used, p-value)`; `None` without such bins.
pub fn chi_square(observed: &[f64], expected: &[f64]) -> Option<(f64, usize, f64)> {
    use statrs::distribution::{ChiSquared, ContinuousCDF};
    let pairs: Vec<(f64, f64)> = observed.iter().zip(expected).filter(|(_, e)| **e >= 5.0).map(|(o, e)| (*o, *e)).collect();
    if pairs.is_empty() {
        return None;
    }
    let x: f64 = pairs.iter().map(|(o, e)| (o - e) * (o - e) / e).sum();
    let k = pairs.len();
    let p = ChiSquared::new(k as f64).ok()?.sf(x);
    Some((x, k, p))
}

/// The p-value below which a run's counts are said to differ from the model.
pub const ALPHA: f64 = 0.001;

/// A χ² goodness-of-fit verdict of hourly counts against the model.
#[derive(Debug, Clone, Serialize)]
pub struct ChiTest {
    pub statistic: f64,
    /// Hours whose expected count is at least 5.
    pub bins: usize,
    pub p_value: f64,
    /// The run fits the model unless p < this.
    pub alpha: f64,
    pub fits: bool,
}

/// Sessions of a behaviour run beside the model's expectation.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// "fixed", "arrivals" or "diurnal".
    pub model: &'static str,
    pub observed: Hourly,
    /// The diurnal model's expectation (other models have none).
    pub expected: Option<Hourly>,
    pub logins_test: Option<ChiTest>,
    pub logouts_test: Option<ChiTest>,
}

impl Summary {
    /// `observed` counted over `p.players` slots, all joining at 0.
    pub fn new(svc: &Service, p: &Params, observed: Hourly) -> Summary {
        let expected = expected(svc, p);
        let test = |o: &[f64], e: &[f64]| {
            chi_square(o, e).map(|(statistic, bins, p_value)| ChiTest { statistic, bins, p_value, alpha: ALPHA, fits: p_value >= ALPHA })
        };
        let logins_test = expected.as_ref().and_then(|e| test(&observed.logins, &e.logins));
        let logouts_test = expected.as_ref().and_then(|e| test(&observed.logouts, &e.logouts));
        let model = match svc.session {
            Session::Fixed => "fixed",
            Session::Arrivals { .. } => "arrivals",
            Session::Diurnal { .. } => "diurnal",
        };
        Summary { model, observed, expected, logins_test, logouts_test }
    }
}
