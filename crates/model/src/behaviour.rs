//! The behaviour process: each player's sequence of states (categories) over a run, as
//! segments. Pure and seeded per player: player `p` of a run with seed `s` always gets the same
//! segments, whoever asks (the client side and the server side of `horde run` both compute them).
//!
//! A player starts a session (at 0, or per the service's arrivals model), draws a first state
//! from the hour's first-state probabilities, stays for a dwell time drawn from that state's
//! (hourly) dwell distribution, then draws the next state from the hour's transition row, and
//! so on until the session or the run ends. A state with sub-activities draws one on entry.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::service::{Service, HOURS};

const STREAM_BEHAVIOUR: u64 = 0xBE4A_0001;

/// One stay of one player in one state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Segment {
    pub player: u32,
    pub state: u16,
    pub sub: u16,
    /// Seconds from the start of the run.
    pub start_s: f64,
    pub end_s: f64,
    /// The drawn dwell ended before the run (or session) did; false for a cut-off last segment.
    pub complete: bool,
    /// Hour of day at the segment's start.
    pub hour: u8,
}

pub use crate::sessions::Params;

fn pick(rng: &mut ChaCha8Rng, probs: &[f64]) -> usize {
    let u: f64 = rng.random();
    let mut acc = 0.0;
    for (i, p) in probs.iter().enumerate() {
        acc += p;
        if u < acc {
            return i;
        }
    }
    probs.iter().rposition(|p| *p > 0.0).unwrap_or(0)
}

/// The segments of one player, in time order.
pub fn player(svc: &Service, p: &Params, player: u32) -> Vec<Segment> {
    player_joining(svc, p, player, 0.0)
}

/// [`player`] for a player who joins `join_s` seconds into the run: its session starts then,
/// with a first state drawn for that hour (and nothing before).
pub fn player_joining(svc: &Service, p: &Params, player: u32, join_s: f64) -> Vec<Segment> {
    let mut rng = ChaCha8Rng::seed_from_u64(crate::derive_seed(p.seed ^ STREAM_BEHAVIOUR, player as u64));
    let mut dwell_samplers: Vec<Option<Vec<crate::Sampler>>> =
        svc.states.iter().map(|s| s.dwell.as_ref().map(|v| v.iter().map(|d| d.sampler()).collect())).collect();
    let mut out = Vec::new();
    let sessions = crate::sessions::draw(svc, p, join_s, &mut rng);
    for crate::sessions::Span { start_s: s0, end_s: s1, .. } in sessions {
        let mut t = s0;
        let mut state = pick(&mut rng, &svc.first[svc.hour_at(p.start_hour, t)]);
        while t < s1 {
            let hour = svc.hour_at(p.start_hour, t);
            let st = &svc.states[state];
            let sub = if st.subs.len() > 1 { pick(&mut rng, &st.subs.iter().map(|s| s.p).collect::<Vec<_>>()) } else { 0 };
            let dwell = match &mut dwell_samplers[state] {
                Some(v) => v[hour].sample(&mut rng).max(0.0),
                None => f64::INFINITY,
            };
            let end = t + dwell;
            out.push(Segment { player, state: state as u16, sub: sub as u16, start_s: t, end_s: end.min(s1), complete: end <= s1, hour: hour as u8 });
            t = end;
            if t >= s1 {
                break;
            }
            state = pick(&mut rng, &svc.transitions[svc.hour_at(p.start_hour, t)][state]);
        }
    }
    out
}

/// The sessions of one player joining at `join_s` (the same draws [`player_joining`] makes).
pub fn sessions(svc: &Service, p: &Params, player: u32, join_s: f64) -> Vec<crate::sessions::Span> {
    let mut rng = ChaCha8Rng::seed_from_u64(crate::derive_seed(p.seed ^ STREAM_BEHAVIOUR, player as u64));
    crate::sessions::draw(svc, p, join_s, &mut rng)
}

/// Segments of every player.
pub fn run(svc: &Service, p: &Params) -> Vec<Segment> {
    (0..p.players).flat_map(|i| player(svc, p, i)).collect()
}

/// The state a player's segments put it in at `t_s` (the last segment starting at or before).
pub fn state_at(segments: &[Segment], t_s: f64) -> Option<&Segment> {
    let i = segments.partition_point(|s| s.start_s <= t_s);
    segments[..i].iter().rev().find(|s| s.end_s > t_s || s.start_s == s.end_s && s.start_s == t_s)
}

#[derive(Debug, Clone, Serialize)]
pub struct StateSummary {
    pub state: String,
    /// Share of all player-seconds spent in this state.
    pub time_share: f64,
    /// Expected share (semi-Markov: π_i·m_i / Σ π_j·m_j at each hour of day), averaged over the
    /// hours the run covered, weighted by the time in each; if computable.
    pub model_share: Option<f64>,
    pub segments: u64,
    /// Mean dwell over complete segments, seconds (none when no stay in it ended within the run).
    pub mean_dwell_s: Option<f64>,
    /// The model's mean dwell, seconds, over the hours covered as `model_share`.
    pub model_dwell_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub service: String,
    pub players: u32,
    pub duration_s: f64,
    pub seed: u64,
    pub start_hour: f64,
    pub states: Vec<StateSummary>,
    /// `transitions[from][to]` counts (including self-transitions).
    pub transitions: Vec<Vec<u64>>,
    /// Logins, logouts and players online per hour, beside the session model (none when every
    /// player plays the whole run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<crate::sessions::Summary>,
}

/// Accumulates a behaviour run's summary player by player, so a long run never holds every
/// stay in memory (`horde behave` writes them out as it goes).
pub struct SummaryAcc {
    time: Vec<f64>,
    count: Vec<u64>,
    dwell_sum: Vec<f64>,
    dwell_n: Vec<u64>,
    trans: Vec<Vec<u64>>,
}

impl SummaryAcc {
    pub fn new(svc: &Service) -> Self {
        let n = svc.states.len();
        SummaryAcc { time: vec![0.0; n], count: vec![0; n], dwell_sum: vec![0.0; n], dwell_n: vec![0; n], trans: vec![vec![0; n]; n] }
    }

    /// Adds one player's stays (in time order), or any run of stays in player-then-time order.
    pub fn add(&mut self, segs: &[Segment]) {
        for (i, s) in segs.iter().enumerate() {
            let k = s.state as usize;
            self.time[k] += s.end_s - s.start_s;
            self.count[k] += 1;
            if s.complete {
                self.dwell_sum[k] += s.end_s - s.start_s;
                self.dwell_n[k] += 1;
            }
            if let Some(next) = segs.get(i + 1) {
                if next.player == s.player && next.start_s == s.end_s {
                    self.trans[k][next.state as usize] += 1;
                }
            }
        }
    }

    /// Time shares, dwell means and transition counts, beside the model's own.
    pub fn finish(self, svc: &Service, p: &Params) -> Summary {
        let n = svc.states.len();
        let total: f64 = self.time.iter().sum();
        // The model over the hours the run covered, each weighted by the time spent in it
        // (one hour when the hour does not advance).
        let weights = hour_weights(svc, p);
        let model: Option<Vec<f64>> = weights.iter().try_fold(vec![0.0; n], |mut acc, &(h, w)| {
            let s = stationary_shares(svc, h)?;
            acc.iter_mut().zip(&s).for_each(|(a, x)| *a += w * x);
            Some(acc)
        });
        let model_dwell = |k: usize| -> Option<f64> {
            let d = svc.states[k].dwell.as_ref()?;
            weights.iter().try_fold(0.0, |acc, &(h, w)| Some(acc + w * d[h].mean_estimate()?))
        };
        let states = (0..n)
            .map(|k| StateSummary {
                state: svc.states[k].name.clone(),
                time_share: if total > 0.0 { self.time[k] / total } else { 0.0 },
                model_share: model.as_ref().map(|m| m[k]),
                segments: self.count[k],
                mean_dwell_s: (self.dwell_n[k] > 0).then(|| self.dwell_sum[k] / self.dwell_n[k] as f64),
                model_dwell_s: model_dwell(k),
            })
            .collect();
        Summary {
            service: svc.name.clone(),
            players: p.players,
            duration_s: p.duration_s,
            seed: p.seed,
            start_hour: p.start_hour,
            states,
            transitions: self.trans,
            sessions: None,
        }
    }
}

/// The hours of day a run covers and the share of its time in each: `(hour, weight)`, weights
/// summing to 1. A service whose hour does not advance, or a run inside one hour, has one.
pub fn hour_weights(svc: &Service, p: &Params) -> Vec<(usize, f64)> {
    let mut w = [0.0f64; HOURS];
    if !svc.hour_advances || p.duration_s <= 0.0 {
        return vec![(svc.hour_at(p.start_hour, 0.0), 1.0)];
    }
    let mut t = 0.0;
    while t < p.duration_s {
        // Up to the next whole hour of day (or the end of the run).
        let h_now = p.start_hour + t / 3600.0;
        let next = ((h_now.floor() + 1.0 - p.start_hour) * 3600.0).min(p.duration_s);
        let step = (next - t).max(1e-9);
        w[svc.hour_at(p.start_hour, t)] += step;
        t += step;
    }
    w.iter().enumerate().filter(|(_, x)| **x > 0.0).map(|(h, x)| (h, x / p.duration_s)).collect()
}

/// Time shares, dwell means and transition counts of a behaviour run, beside the model's own.
pub fn summarise(svc: &Service, p: &Params, segs: &[Segment]) -> Summary {
    let mut acc = SummaryAcc::new(svc);
    acc.add(segs);
    acc.finish(svc, p)
}

/// Long-run time shares at a fixed hour: the embedded chain's stationary distribution π
/// (power iteration) weighted by mean dwell times. `None` if a state never ends or has no
/// finite mean dwell.
pub fn stationary_shares(svc: &Service, hour: usize) -> Option<Vec<f64>> {
    let n = svc.states.len();
    let means: Option<Vec<f64>> = svc.states.iter().map(|s| s.dwell.as_ref().and_then(|d| d[hour].mean_estimate())).collect();
    let means = means?;
    let p = &svc.transitions[hour];
    let mut pi = vec![1.0 / n as f64; n];
    for _ in 0..10_000 {
        let mut next = vec![0.0; n];
        for i in 0..n {
            for j in 0..n {
                next[j] += pi[i] * p[i][j];
            }
        }
        // Damping makes periodic chains (active ↔ idle) converge to their stationary vector.
        for j in 0..n {
            next[j] = 0.5 * next[j] + 0.5 * pi[j];
        }
        pi = next;
    }
    let w: Vec<f64> = pi.iter().zip(&means).map(|(a, m)| a * m).collect();
    let total: f64 = w.iter().sum();
    (total > 0.0).then(|| w.iter().map(|x| x / total).collect())
}
