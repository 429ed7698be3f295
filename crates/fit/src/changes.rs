//! States guessed from the traffic when there are no labels: the per-player APDU rate, second
//! by second (its square root, which steadies the noise of counts), split where its mean changes
//! (binary segmentation with a BIC-style penalty), and segments whose rates are within 20 % of
//! each other grouped into one state. A guess, and the report says so: activities
//! that send at the same rate cannot be told apart this way.

use crate::samples::{Labels, Segment};

/// No segment is shorter than this many seconds.
pub const MIN_SEGMENT_S: usize = 10;
/// Segments whose per-player rates differ by at most this share of the larger are one state.
pub const SAME_RATE: f64 = 0.2;

/// Labels from `per_second`: APDUs (both directions) and clients online in each second after
/// the capture's first packet. None when the rate never changes.
pub fn guess(per_second: &[(u64, u32)]) -> Option<Labels> {
    // the square root steadies the noise of counts (Poisson: variance = mean)
    let rate: Vec<f64> = per_second.iter().map(|&(a, n)| if n > 0 { a as f64 / f64::from(n) } else { 0.0 }).collect();
    let y: Vec<f64> = rate.iter().map(|r| r.sqrt()).collect();
    if y.len() < 2 * MIN_SEGMENT_S {
        return None;
    }
    // the noise, robustly: the median absolute difference of neighbours (÷ 0.6745·√2)
    let mut d: Vec<f64> = y.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    d.sort_by(|a, b| a.total_cmp(b));
    let sigma = (d[d.len() / 2] / (0.6745 * std::f64::consts::SQRT_2)).max(1e-9);
    let penalty = 2.0 * sigma * sigma * (y.len() as f64).ln() * 2.0;
    let mut cuts = vec![0, y.len()];
    split(&y, 0, y.len(), penalty, &mut cuts);
    cuts.sort_unstable();
    if cuts.len() <= 2 {
        return None;
    }
    // group segments whose rates differ by less than [`SAME_RATE`]
    let mut states: Vec<(f64, usize)> = Vec::new(); // (mean rate, seconds)
    let mut of_segment = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let m = rate[a..b].iter().sum::<f64>() / (b - a) as f64;
        let found = states.iter().position(|&(sm, _)| (m - sm).abs() <= SAME_RATE * m.max(sm));
        let s = match found {
            Some(s) => {
                let (sm, sl) = states[s];
                states[s] = ((sm * sl as f64 + m * (b - a) as f64) / (sl + b - a) as f64, sl + b - a);
                s
            }
            None => {
                states.push((m, b - a));
                states.len() - 1
            }
        };
        match of_segment.last_mut() {
            // a cut between two segments of one state is no change of activity
            Some((_, end, last)) if *last == s => *end = b,
            _ => of_segment.push((a, b, s)),
        }
    }
    if states.len() < 2 {
        return None;
    }
    // names by rate, lowest first
    let mut order: Vec<usize> = (0..states.len()).collect();
    order.sort_by(|&i, &j| states[i].0.total_cmp(&states[j].0));
    let rank = |s: usize| order.iter().position(|&o| o == s).unwrap_or(0);
    let names = order.iter().enumerate().map(|(r, &s)| format!("rate{}-{:.0}ps", r + 1, states[s].0)).collect();
    let segments = of_segment.into_iter().map(|(a, b, s)| Segment { start_s: a as f64, end_s: b as f64, state: rank(s) }).collect();
    Some(Labels { names, segments })
}

/// Binary segmentation: the best single cut of `y[a..b]` if it lowers the squared error by more
/// than `penalty`, then both halves.
fn split(y: &[f64], a: usize, b: usize, penalty: f64, cuts: &mut Vec<usize>) {
    if b - a < 2 * MIN_SEGMENT_S || cuts.len() > 64 {
        return;
    }
    let total: f64 = y[a..b].iter().sum();
    let n = (b - a) as f64;
    let base = y[a..b].iter().map(|v| v * v).sum::<f64>() - total * total / n;
    let mut best = (f64::INFINITY, 0);
    let mut left = 0.0;
    for (k, v) in y[a..b - MIN_SEGMENT_S].iter().enumerate() {
        left += v;
        let i = k + 1;
        if i < MIN_SEGMENT_S {
            continue;
        }
        let (nl, nr) = (i as f64, n - i as f64);
        let right = total - left;
        // the squared error after the cut, less what both halves share with the whole
        let cost = base - (left * left / nl + right * right / nr - total * total / n);
        if cost < best.0 {
            best = (cost, a + i);
        }
    }
    if best.1 > 0 && base - best.0 > penalty {
        cuts.push(best.1);
        split(y, a, best.1, penalty, cuts);
        split(y, best.1, b, penalty, cuts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lobby_and_a_match_are_found_and_the_lobby_seen_twice_is_one_state() {
        // 30 s at 2 APDUs/s per player, 40 s at 20, 30 s at 2 again (10 players, ±10 % noise)
        let mut per = Vec::new();
        for t in 0..100u64 {
            let rate = if (30..70).contains(&t) { 20.0 } else { 2.0 };
            let noise = 1.0 + 0.1 * (((t * 7919) % 21) as f64 / 10.0 - 1.0);
            per.push(((rate * 10.0 * noise) as u64, 10));
        }
        let l = guess(&per).unwrap();
        assert_eq!(l.names.len(), 2, "{:?}", l.names);
        assert!(l.names[0].starts_with("rate1-2ps") && l.names[1].starts_with("rate2-20ps"), "{:?}", l.names);
        let spans: Vec<(f64, f64, usize)> = l.segments.iter().map(|s| (s.start_s, s.end_s, s.state)).collect();
        assert_eq!(spans, vec![(0.0, 30.0, 0), (30.0, 70.0, 1), (70.0, 100.0, 0)]);
        // a steady rate is one state: no labels
        let steady: Vec<(u64, u32)> = (0..100u64).map(|t| (100 + (t * 7919) % 7, 10)).collect();
        assert!(guess(&steady).is_none());
        assert!(guess(&per[..15]).is_none());
    }
}
