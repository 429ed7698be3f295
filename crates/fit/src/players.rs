//! The server's side as a function of players: where a capture shows the server with several
//! player counts, its server → client samples are split by how many clients were online when
//! each APDU left, each count is fitted with the family chosen for the whole, and each
//! parameter becomes a power law `a*N^b` (least squares on logarithms, as the WoW models'
//! formulas over `N` are written). Online = a client with an APDU either way in the last
//! [`WINDOW_S`] seconds.

use std::collections::{BTreeMap, HashMap, VecDeque};

use horde_model::dist::{Dist, Vars};
use horde_model::fit::{ks_critical, ks_distance};
use serde::Serialize;

use crate::families::{fit, sig, standard_errors, Fit, Sample, ALPHA};
use crate::reservoir::Reservoir;

/// A client is online while it had an APDU within this many seconds.
pub const WINDOW_S: f64 = 2.0;
/// Values kept per player count.
pub const PER_COUNT: usize = 20_000;
/// A player count is fitted when it has this many APDUs and this share of the server's (the
/// counts a server passes through while players join or leave are left out); a formula needs
/// three such counts.
pub const MIN_PER_COUNT: u64 = 200;
pub const MIN_SHARE: f64 = 0.05;

/// Clients online in a sliding window (APDUs in time order, or nearly).
#[derive(Default)]
pub struct Online {
    last: HashMap<u32, u64>,
    queue: VecDeque<(u64, u32)>,
    online: u32,
}

impl Online {
    /// Notes client `c` at `t_ns`; returns how many are online then.
    pub fn see(&mut self, c: u32, t_ns: u64) -> u32 {
        let w = (WINDOW_S * 1e9) as u64;
        while let Some(&(t, k)) = self.queue.front() {
            if t.saturating_add(w) >= t_ns {
                break;
            }
            self.queue.pop_front();
            if self.last.get(&k) == Some(&t) {
                self.last.remove(&k);
                self.online -= 1;
            }
        }
        match self.last.insert(c, t_ns) {
            None => self.online += 1,
            Some(prev) if prev > t_ns => {
                self.last.insert(c, prev);
                return self.online;
            }
            Some(_) => {}
        }
        if self.queue.len() < 4_000_000 {
            self.queue.push_back((t_ns, c));
        }
        self.online
    }
}

/// Per player count: (sizes, inter-departure times) of the server's APDUs.
pub type ByPlayers = BTreeMap<u32, (Reservoir, Reservoir)>;

pub fn reservoirs(seed: u64) -> (Reservoir, Reservoir) {
    (Reservoir::with_capacity(PER_COUNT, seed), Reservoir::with_capacity(PER_COUNT, seed + 1))
}

/// One player count's fit with the formula's family.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct AtCount {
    pub players: u32,
    pub n: u64,
    pub params: BTreeMap<String, f64>,
    /// This count's own fit of the family against its sample.
    pub own_ks: f64,
    /// The formula's distribution at this count against this count's sample.
    pub ks: f64,
    pub ks_critical: f64,
}

/// A family whose parameters are power laws of the player count `N`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Formula {
    pub family: String,
    /// The distribution with formulas over `N`, in Horde's text form.
    pub dist: String,
    /// Per parameter, `[a, b]` of `a*N^b` (a lognormal's `mu`: `[c, b]` of `c + b*ln(N)`; a
    /// parameter in `linear`: `[a, b]` of `a + b*N`).
    pub power_laws: BTreeMap<String, [f64; 2]>,
    /// The parameters whose law is the straight line `a + b*N` (it fitted the counts better
    /// than a power law and stays positive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linear: Vec<String>,
    /// The law fits every count: nowhere does its KS distance pass that count's own fit's by
    /// more than the critical value. Only a law that holds goes into the service file.
    pub holds: bool,
    /// Where it does not, the first count it misses.
    pub missed: Option<String>,
    pub counts: Vec<AtCount>,
}

/// The server's side over player counts.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct OverPlayers {
    pub window_s: f64,
    /// A count is a point of the law only if it held this long (s) without a change.
    pub min_hold_s: f64,
    /// Counts seen but not points of the law, and why (too few APDUs, a transient).
    pub left_out: Vec<String>,
    /// Player counts seen and the server's APDUs at each.
    pub seen: Vec<[u64; 2]>,
    /// The median player count over the server's APDUs (the service's default `N`).
    pub typical: u32,
    pub idt: Option<Formula>,
    pub size: Option<Formula>,
}

/// The formulas, when at least three player counts have [`MIN_PER_COUNT`] APDUs and
/// `min_share` of the server's each ([`MIN_SHARE`] within one capture; 0 across captures), each held `min_hold_s` without a change (`held_s`: the
/// longest stretch per count), and the largest is at least twice the smallest (a law needs a
/// range to stand on). Else why no law was tried.
pub fn over_players(by: &ByPlayers, held_s: &BTreeMap<u32, f64>, min_hold_s: f64, min_share: f64) -> Result<OverPlayers, String> {
    let total: u64 = by.values().map(|(s, _)| s.seen).sum();
    let mut left_out = Vec::new();
    let mut enough: Vec<u32> = Vec::new();
    for (n, (s, _)) in by {
        let held = held_s.get(n).copied().unwrap_or(0.0);
        if s.seen < MIN_PER_COUNT || (s.seen as f64) < min_share * total as f64 {
            left_out.push(format!("{n} players: {} APDUs (a point needs {MIN_PER_COUNT} and {:.0} % of the server's)", s.seen, min_share * 100.0));
        } else if held < min_hold_s {
            left_out.push(format!("{n} players: a transient, held {held:.1} s at most (a point needs {min_hold_s} s without a change)"));
        } else {
            enough.push(*n);
        }
    }
    if enough.len() < 3 || enough[enough.len() - 1] < 2 * enough[0].max(1) {
        let points = enough.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let why = if enough.len() < 3 {
            format!("{} player count(s) qualify ({points}), a law needs 3", enough.len())
        } else {
            format!("the counts ({points}) span less than a factor of 2")
        };
        let out = if left_out.is_empty() { String::new() } else { format!("; left out: {}", left_out.join("; ")) };
        return Err(format!("no law over players tried: {why}{out}"));
    }
    let mut acc = 0;
    let typical = by.iter().find(|(_, (s, _))| {
        acc += s.seen;
        acc * 2 >= total
    });
    Ok(OverPlayers {
        window_s: WINDOW_S,
        min_hold_s,
        left_out,
        seen: by.iter().map(|(n, (s, _))| [u64::from(*n), s.seen]).collect(),
        typical: typical.map_or(1, |(n, _)| *n),
        idt: formula(&enough, |n| &by[&n].1, Sample::Millis),
        size: formula(&enough, |n| &by[&n].0, Sample::Counts),
    })
}

/// The family with the lowest AIC summed over the counts (of those with parameters to carry a
/// law: not mixtures, empirical or constant), its parameters per count, and their power laws,
/// with whether the law holds at every count.
fn formula<'a>(counts: &[u32], sample: impl Fn(u32) -> &'a Reservoir, kind: Sample) -> Option<Formula> {
    formula_of(counts, sample, kind, None)
}

/// [`formula`] with the family given (`only`: a law checked at a count left out keeps the
/// family of the law it checks).
pub(crate) fn formula_of<'a>(counts: &[u32], sample: impl Fn(u32) -> &'a Reservoir, kind: Sample, only: Option<&str>) -> Option<Formula> {
    let fits: Vec<(u32, Fit)> = counts.iter().map(|&n| fit(&sample(n).values, kind).map(|f| (n, f))).collect::<Option<_>>()?;
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for (_, f) in &fits {
        for c in &f.candidates {
            let e = sums.entry(c.family.clone()).or_insert((0.0, 0));
            e.0 += c.aic.unwrap_or(f64::INFINITY);
            e.1 += 1;
        }
    }
    let lawful = |family: &str| -> Option<Dist> {
        let c = fits[0].1.candidates.iter().find(|c| c.family == family)?;
        let d: Dist = c.dist.parse().ok()?;
        (!standard_errors(&d.kind, 1.0).is_empty()).then_some(d)
    };
    let family = sums
        .iter()
        .filter(|(fam, (aic, k))| *k == fits.len() && aic.is_finite() && lawful(fam).is_some() && only.is_none_or(|o| o == fam.as_str()))
        .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        .map(|(fam, _)| fam.clone())?;
    let model = lawful(&family)?;
    let names: Vec<&str> = standard_errors(&model.kind, 1.0).iter().map(|(k, _, _)| *k).collect();
    let per: Vec<(u32, BTreeMap<String, f64>)> =
        fits.iter().map(|(n, f)| (*n, f.candidates.iter().find(|c| c.family == family).map(|c| c.params.clone()).unwrap_or_default())).collect();
    let mut laws = BTreeMap::new();
    let mut linear_in_n = Vec::new();
    let mut args = Vec::new();
    for name in &names {
        let pts: Vec<(f64, f64)> = per.iter().map(|(n, p)| (f64::from(*n).ln(), p.get(*name).copied().unwrap_or(f64::NAN))).collect();
        if *name == "mu" {
            // a lognormal's mu is a logarithm: the median grows as a power law when mu grows
            // linearly in ln N
            if pts.iter().any(|(_, v)| !v.is_finite()) {
                return None;
            }
            let (c, b) = linear(&pts);
            laws.insert("mu".to_string(), [sig(c), sig(b)]);
            args.push(format!("{} + {}*ln(N)", sig(c), sig(b)));
            continue;
        }
        if pts.iter().any(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            return None;
        }
        let (a, b) = power_law(&pts);
        // a straight line a + b·N where it fits the points better (on logarithms) and stays
        // positive for every N ≥ 1: a game server's snapshot grows by a few bytes per player
        // from a fixed part, which no power law follows at both ends (OpenArena, issue 68)
        let on_n: Vec<(f64, f64)> = pts.iter().map(|(x, v)| (x.exp(), *v)).collect();
        let (c, d) = linear(&on_n);
        let miss = |f: &dyn Fn(f64) -> f64| on_n.iter().map(|(n, v)| (v.ln() - f(*n).max(1e-300).ln()).powi(2)).sum::<f64>();
        if c > 0.0 && d >= 0.0 && miss(&|n| c + d * n) < miss(&|n| a * n.powf(b)) {
            laws.insert(name.to_string(), [sig(c), sig(d)]);
            linear_in_n.push(name.to_string());
            args.push(format!("({} + {}*N)", sig(c), sig(d)));
            continue;
        }
        laws.insert(name.to_string(), [sig(a), sig(b)]);
        args.push(format!("{}*N^{}", sig(a), sig(b)));
    }
    // the family's text with its parameters replaced by the formulas (modifiers kept)
    let text = model.to_string();
    let open = text.find('(')?;
    let inner = &text[open + 1..text.len() - 1];
    args.extend(inner.split(", ").skip(names.len()).map(str::to_string));
    let dist = format!("{}({})", &text[..open], args.join(", "));
    let mut out = Vec::new();
    let mut holds: Option<String> = None;
    for (n, params) in per {
        let vars: Vars = [("N".to_string(), f64::from(n))].into();
        let d = Dist::parse_with(&dist, &vars).ok()?.validate().ok()?;
        let whole = d.round != horde_model::dist::Round::None;
        let mut xs: Vec<f64> = sample(n).values.iter().map(|x| if whole { x.round() } else { *x }).collect();
        let ks = ks_distance(&mut xs, |x| d.cdf(x));
        let own = fits.iter().find(|(m, _)| *m == n).and_then(|(_, f)| f.candidates.iter().find(|c| c.family == family)).map_or(0.0, |c| c.ks);
        let crit = ks_critical(xs.len(), ALPHA);
        if ks > own + crit && holds.is_none() {
            holds = Some(format!("the law misses {n} players: KS {ks:.4} against that count's own {family} fit's {own:.4} + {crit:.4}"));
        }
        out.push(AtCount { players: n, n: xs.len() as u64, params, own_ks: own, ks, ks_critical: crit });
    }
    Some(Formula { family, dist, power_laws: laws, linear: linear_in_n, holds: holds.is_none(), missed: holds, counts: out })
}

/// Least squares of v = c + b·x over (x, v).
fn linear(pts: &[(f64, f64)]) -> (f64, f64) {
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = pts.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|(x, v)| (x - mx) * (v - my)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - b * mx, b)
}

/// Least squares of ln v = ln a + b ln N over (ln N, v).
fn power_law(pts: &[(f64, f64)]) -> (f64, f64) {
    let n = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(sx, sy), (x, v)| (sx + x, sy + v.ln()));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = pts.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|(x, v)| (x - mx) * (v.ln() - my)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    ((my - b * mx).exp(), b)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    #[test]
    fn clients_are_online_while_they_are_heard() {
        let mut o = Online::default();
        let s = |x: f64| (x * 1e9) as u64;
        assert_eq!(o.see(1, s(0.0)), 1);
        assert_eq!(o.see(2, s(0.5)), 2);
        assert_eq!(o.see(1, s(1.9)), 2);
        // client 2 last heard at 0.5 s: gone after 2.5 s; client 1 stays
        assert_eq!(o.see(1, s(2.6)), 1);
        assert_eq!(o.see(3, s(3.0)), 2);
    }

    #[test]
    fn a_server_whose_sizes_grow_with_players_gets_a_formula_over_n() {
        // Weibull sizes with scale 55·N^0.36 and shape 1.0 (WoW's trading formula), at 4 counts
        let mut by = ByPlayers::new();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for (i, n) in [10u32, 25, 50, 100].into_iter().enumerate() {
            let d: Dist = format!("weibull({}, 1.0, round=nearest)", 55.0 * f64::from(n).powf(0.36)).parse().unwrap();
            let mut s = d.sampler();
            let r = by.entry(n).or_insert_with(|| reservoirs(i as u64 * 2));
            for _ in 0..5000 {
                let x = s.sample(&mut rng);
                r.0.push(x);
            }
        }
        // the pooled sample is a mixture of scales; the family comes from the counts' own fits
        let held: BTreeMap<u32, f64> = by.keys().map(|n| (*n, 60.0)).collect();
        let over = over_players(&by, &held, 10.0, MIN_SHARE).unwrap();
        let f = over.size.unwrap();
        // a Weibull of shape 1 is an exponential: the summed AIC takes the one parameter
        let law = match f.family.as_str() {
            "exponential" => f.power_laws["mean"],
            "weibull" => f.power_laws["scale"],
            other => panic!("{other}: {}", f.dist),
        };
        let [a, b] = law;
        assert!((a / 55.0 - 1.0).abs() < 0.05 && (b - 0.36).abs() < 0.02, "{a} {b} {}", f.dist);
        assert!(f.dist.contains("*N^") && f.dist.contains("round=nearest"), "{}", f.dist);
        for at in &f.counts {
            assert!(at.ks < at.ks_critical, "{at:?}");
        }
        assert!(f.holds && f.missed.is_none());
        assert_eq!(over.typical, 25);
        // two counts are not enough for a law
        let mut two = ByPlayers::new();
        for n in [10u32, 25] {
            let r = two.entry(n).or_insert_with(|| reservoirs(0));
            for x in &by[&n].0.values {
                r.0.push(*x);
            }
        }
        assert!(over_players(&two, &held, 10.0, MIN_SHARE).unwrap_err().contains("2 player count(s) qualify (10, 25), a law needs 3"));
        // a count that held only 3 s (players joining) is not a point: three points are left
        let mut brief = held.clone();
        brief.insert(50, 3.0);
        let over = over_players(&by, &brief, 10.0, MIN_SHARE).unwrap();
        assert_eq!(over.size.unwrap().counts.iter().map(|c| c.players).collect::<Vec<_>>(), vec![10, 25, 100]);
        assert!(over.left_out[0].contains("50 players: a transient, held 3.0 s"), "{:?}", over.left_out);
        brief.insert(25, 1.0);
        assert!(over_players(&by, &brief, 10.0, MIN_SHARE).unwrap_err().contains("a transient"));
    }
}
