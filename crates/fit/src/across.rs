//! Laws over players from several captures, each of one player count (issue 68: a user
//! captures their server at a few counts; one capture rarely holds three counts long enough).
//! Each capture's server → client samples are a point of the law at its count (captures of
//! the same count, sessions, pooled), the law is fitted as [`crate::players`] fits one
//! capture's counts, and then checked the way a law is used — at a count it was not fitted
//! on: each count left out in turn, the law fitted on the others, and its KS distance there
//! held against that count's own fit plus the larger of the critical value and the count's
//! own spread between sessions (the most two captures of one count differ by).

use std::collections::BTreeMap;

use horde_model::dist::{Dist, Vars};
use horde_model::fit::{ks_critical, ks_distance, ks_two_sample};
use serde::Serialize;

use crate::families::{Sample, ALPHA};
use crate::players::{formula_of, over_players, reservoirs, ByPlayers, OverPlayers};
use crate::reservoir::Reservoir;

/// One capture as a point of the law: its player count, its server → client sizes and
/// inter-departure times (ms), and how long it held that count (s).
pub struct Point<'a> {
    pub players: u32,
    pub sizes: &'a Reservoir,
    pub idts: &'a Reservoir,
    pub held_s: f64,
}

/// One count left out: the law fitted on the other counts, read at this one.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct HeldOut {
    pub players: u32,
    /// Captures (sessions) of this count.
    pub captures: usize,
    /// The law fitted without this count, at this count, against its sample.
    pub ks: f64,
    /// This count's own fit of the law's family.
    pub own_ks: f64,
    /// The server's own spread between sessions: the most two captures of this count differ
    /// by (two-sample KS), or with one capture the largest such spread at another count; none
    /// when no count has two captures.
    pub spread_ks: Option<f64>,
    /// own_ks + max(critical value, spread): the held-out law must stay within it.
    pub limit: f64,
    pub holds: bool,
}

/// The law over players from several captures, and each count held out.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Across {
    pub law: OverPlayers,
    /// Sizes' law, each count left out in turn (empty when no size law was found).
    pub held_out: Vec<HeldOut>,
    /// Every count held out holds: the law predicts counts it did not see.
    pub predicts: bool,
}

/// The law over players of `points` (one per capture) and its leave-one-count-out check.
pub fn across(points: &[Point<'_>], min_hold_s: f64) -> Result<Across, String> {
    let mut by = ByPlayers::new();
    let mut held: BTreeMap<u32, f64> = BTreeMap::new();
    let mut sessions: BTreeMap<u32, Vec<&Reservoir>> = BTreeMap::new();
    for (i, p) in points.iter().enumerate() {
        let r = by.entry(p.players).or_insert_with(|| reservoirs(2 * i as u64 + 1));
        p.sizes.values.iter().for_each(|v| r.0.push(*v));
        p.idts.values.iter().for_each(|v| r.1.push(*v));
        let h = held.entry(p.players).or_insert(0.0);
        *h = h.max(p.held_s);
        sessions.entry(p.players).or_default().push(p.sizes);
    }
    // every capture is a point, however few APDUs it has beside the others
    let law = over_players(&by, &held, min_hold_s, 0.0)?;
    // the server's own spread between sessions: at each count with several captures, the most
    // two of them differ by; a count with one capture takes the largest seen elsewhere
    let spread_at = |k: u32| -> Option<f64> {
        let caps = &sessions[&k];
        let mut spread: Option<f64> = None;
        for (i, a) in caps.iter().enumerate() {
            for b in &caps[i + 1..] {
                let (mut x, mut y) = (a.values.clone(), b.values.clone());
                if let Some(s) = ks_two_sample(&mut x, &mut y) {
                    spread = Some(spread.map_or(s, |m: f64| m.max(s)));
                }
            }
        }
        spread
    };
    let spreads: BTreeMap<u32, Option<f64>> = sessions.keys().map(|&k| (k, spread_at(k))).collect();
    let widest = spreads.values().flatten().copied().fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))));
    let mut held_out = Vec::new();
    if let Some(size) = &law.size {
        let counts: Vec<u32> = size.counts.iter().map(|c| c.players).collect();
        for at in &size.counts {
            let k = at.players;
            let others: Vec<u32> = counts.iter().copied().filter(|&n| n != k).collect();
            let Some(f) = formula_of(&others, |n| &by[&n].0, Sample::Counts, Some(&size.family)) else { continue };
            let vars: Vars = [("N".to_string(), f64::from(k))].into();
            let Some(d) = Dist::parse_with(&f.dist, &vars).ok().and_then(|d| d.validate().ok()) else { continue };
            let whole = d.round != horde_model::dist::Round::None;
            let mut xs: Vec<f64> = by[&k].0.values.iter().map(|x| if whole { x.round() } else { *x }).collect();
            let ks = ks_distance(&mut xs, |x| d.cdf(x));
            let spread = spreads[&k].or(widest);
            let limit = at.own_ks + ks_critical(xs.len(), ALPHA).max(spread.unwrap_or(0.0));
            held_out.push(HeldOut { players: k, captures: sessions[&k].len(), ks, own_ks: at.own_ks, spread_ks: spread, limit, holds: ks <= limit });
        }
    }
    let predicts = !held_out.is_empty() && held_out.iter().all(|h| h.holds);
    Ok(Across { law, held_out, predicts })
}

/// A capture's player count from its file name: the last run of digits in its stem
/// (`openarena-16.pcapng` → 16; name sessions so the count comes last, `s2-oa-16`, or use
/// `--players-from online`).
pub fn count_in_name(stem: &str) -> Option<u32> {
    let digits: Vec<&str> = stem.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).collect();
    digits.last()?.parse().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// Four captures of a server whose snapshot sizes grow with players (gamma, mean 40 + 8·N,
    /// as a real OpenArena server's do), two sessions at 24: the law comes from the captures
    /// together, and each count left out is predicted by the others.
    #[test]
    fn captures_at_several_counts_give_a_law_that_predicts_a_count_left_out() {
        let mut rng = ChaCha8Rng::seed_from_u64(68);
        let mut caps: Vec<(u32, Reservoir, Reservoir)> = Vec::new();
        for (i, n) in [8u32, 16, 24, 24, 48].into_iter().enumerate() {
            let m = 40.0 + 8.0 * f64::from(n);
            let sd = 0.45 * m;
            let size: Dist = format!("gamma({}, {}, round=nearest)", (m / sd).powi(2), sd * sd / m).parse().unwrap();
            let (mut s, mut t) = (size.sampler(), "normal(50, 1)".parse::<Dist>().unwrap().sampler());
            let (mut sizes, mut idts) = (Reservoir::new(i as u64), Reservoir::new(100 + i as u64));
            for _ in 0..20_000 {
                sizes.push(s.sample(&mut rng));
                idts.push(t.sample(&mut rng));
            }
            caps.push((n, sizes, idts));
        }
        let points: Vec<Point> = caps.iter().map(|(n, s, t)| Point { players: *n, sizes: s, idts: t, held_s: 60.0 }).collect();
        let a = across(&points, 5.0).unwrap();
        let size = a.law.size.as_ref().expect("a size law");
        assert!(size.holds, "{:?}", size.missed);
        assert_eq!(a.held_out.iter().map(|h| h.players).collect::<Vec<_>>(), vec![8, 16, 24, 48]);
        assert_eq!(a.held_out[2].captures, 2);
        assert!(a.held_out[2].spread_ks.is_some_and(|s| s < 0.1));
        assert!(a.predicts, "{:#?} {}", a.held_out, size.dist);
        // a count whose server behaves otherwise is not predicted by the others
        let mut odd = Reservoir::new(9);
        let mut s = "constant(900)".parse::<Dist>().unwrap().sampler();
        for _ in 0..3000 {
            odd.push(s.sample(&mut rng));
        }
        let mut points = points;
        points[4] = Point { players: 48, sizes: &odd, idts: &caps[4].2, held_s: 60.0 };
        let bad = across(&points, 5.0).unwrap();
        assert!(!bad.predicts, "{:#?}", bad.held_out);
        // two captures are not a law
        assert!(across(&[Point { players: 8, sizes: &caps[0].1, idts: &caps[0].2, held_s: 60.0 }], 5.0).is_err());
        assert_eq!(count_in_name("openarena-16"), Some(16));
        assert_eq!(count_in_name("cap"), None);
    }
}
