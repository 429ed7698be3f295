//! Analysis where the data is: a two-way run's records reduced, as they are written, into a
//! mergeable summary ([`GameDigest`]) that an agent sends instead of its raw log. Summaries of
//! any number of agents add up ([`GameDigest::merge`], O(agents × bins)) and the report is
//! computed from the sum ([`analyse`]) with the same definitions as from raw records
//! ([`crate::game::analyse`]):
//!
//! - exact: sent, received, lost, bytes, rates, mean sizes, per-second departures and losses,
//!   throughput per second;
//! - within a stated bound ([`crate::game::Bounds`], in the report): delay percentiles (a µs
//!   bucket plus 1/1,024 of the value; per second 1/128), KS distances (the empirical CDF is
//!   known at every bucket's edges; sizes below 2,048 B and rounded inter-arrival times below
//!   2,048 ms have a bucket each, so their KS distances are exact);
//! - pooled: RFC 3550 jitter, a running estimate over each agent's arrivals in order, is the
//!   packet-weighted mean of the agents' estimates ([`crate::metrics::Jitter::pooled`]).
//!
//! The builder is I/O-free: records in (sender's and receiver's timestamps already on one
//! clock), summary out. Its memory is bounded by players, categories and seconds, not packets.

mod builder;

use horde_model::behaviour::Segment;
use horde_model::service::Direction;
use serde::{Deserialize, Serialize};

pub use crate::bins::{Bins, BinsWire, DigestError, Signed};
pub use builder::{Builder, Delta};

use crate::game::{self, Bounds, Context, DirectionStats, GameAnalysis, Second};
use crate::metrics::Jitter;

/// Bucket precision of the run-wide histograms (3 digits) and the per-second ones (2 digits).
const SIG: u8 = 3;
const SIG_SECOND: u8 = 2;
/// Delays and inter-arrival times are bucketed in µs (records carry ns).
const NS_PER_US: i64 = 1_000;
/// A player's arrivals are matched to departures once each within a window of this many
/// sequence numbers (duplicates further back than that are counted again).
const WINDOW: u64 = 256;
/// Most categories and seconds a summary may carry (a service has at most 256 categories;
/// runs are at most 31 days).
const MAX_CATEGORIES: usize = 256;
const MAX_SECONDS: usize = 31 * 86_400 + 2;

/// One category's one direction.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DirDigest {
    pub sent: u64,
    pub received: u64,
    pub bytes: u64,
    /// APDU sizes, bytes.
    pub size: Bins,
    /// Inter-arrival times within a stay, µs, and rounded to whole ms (the model's resolution).
    pub iat_us: Bins,
    pub iat_ms: Bins,
    /// One-way delays, ns, bucketed in µs.
    pub delay: Signed,
    /// RFC 3550 jitter over this summary's arrivals in order, ns, and its number of updates.
    pub jitter_ns: f64,
    pub jitter_n: u64,
    /// The sender's side: departed APDU sizes (bytes), and inter-departure times within a stay
    /// rounded to whole ms.
    pub sent_size: Bins,
    pub sent_iat_ms: Bins,
    /// Per sub-activity, the time left in its stay when each departure left, in 10-ms units
    /// (the truncation of inter-departure times measured within stays:
    /// [`crate::game::Truncated`]).
    pub sent_room_ms: Vec<Bins>,
}

impl DirDigest {
    fn new() -> Self {
        DirDigest {
            sent: 0,
            received: 0,
            bytes: 0,
            size: Bins::new(SIG),
            iat_us: Bins::new(SIG),
            iat_ms: Bins::new(SIG),
            delay: Signed::new(SIG, NS_PER_US),
            jitter_ns: 0.0,
            jitter_n: 0,
            sent_size: Bins::new(SIG),
            sent_iat_ms: Bins::new(SIG),
            sent_room_ms: Vec::new(),
        }
    }

    /// Its histograms hold what its counts say: one size and delay per arrival, one size per
    /// departure, and at most one inter-arrival (inter-departure) time per arrival (departure).
    pub(crate) fn counts_agree(&self) -> bool {
        let c = self;
        c.size.count() == c.received
            && c.delay.count() == c.received
            && c.iat_us.count() == c.iat_ms.count()
            && c.iat_us.count() <= c.received
            && c.sent_size.count() == c.sent
            && c.sent_iat_ms.count() <= c.sent
            && c.sent_room_ms.len() <= game::MAX_SUBS
            && c.sent_room_ms.iter().try_fold(0u64, |a, b| a.checked_add(b.count())).is_some_and(|n| n <= c.sent)
            && c.sent_room_ms.iter().all(|b| b.sig() == game::ROOM_SIG)
    }

    /// Adds another summary's rooms, sub-activity by sub-activity.
    pub(crate) fn merge_room(&mut self, o: &[Bins]) -> Result<(), DigestError> {
        if o.len() > game::MAX_SUBS {
            return Err(DigestError::Invalid(format!("rooms of {} sub-activities (at most {})", o.len(), game::MAX_SUBS)));
        }
        if self.sent_room_ms.len() < o.len() {
            self.sent_room_ms.resize_with(o.len(), game::room_bins);
        }
        for (a, b) in self.sent_room_ms.iter_mut().zip(o) {
            a.merge(b)?;
        }
        Ok(())
    }

    pub fn merge(&mut self, o: &DirDigest) -> Result<(), DigestError> {
        let add = |a: u64, b: u64| a.checked_add(b).ok_or(DigestError::Overflow);
        self.sent = add(self.sent, o.sent)?;
        self.received = add(self.received, o.received)?;
        self.bytes = add(self.bytes, o.bytes)?;
        self.size.merge(&o.size)?;
        self.iat_us.merge(&o.iat_us)?;
        self.iat_ms.merge(&o.iat_ms)?;
        self.delay.merge(&o.delay)?;
        self.sent_size.merge(&o.sent_size)?;
        self.sent_iat_ms.merge(&o.sent_iat_ms)?;
        self.merge_room(&o.sent_room_ms)?;
        let j = Jitter::pooled(Jitter::from_ns(self.jitter_ns), self.jitter_n, Jitter::from_ns(o.jitter_ns), o.jitter_n);
        self.jitter_ns = j.ns();
        self.jitter_n = add(self.jitter_n, o.jitter_n)?;
        Ok(())
    }
}

/// One second of a run, per direction (0 up, 1 down).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SecDigest {
    /// APDUs sent in this second (by their departure time).
    pub sent: [u64; 2],
    /// Of those, how many arrived (each once).
    pub got: [u64; 2],
    /// Bits received in this second (by arrival time).
    pub bits: [u64; 2],
    /// Delays of the arrivals in this second.
    pub delay: [Signed; 2],
    /// Per category: departures up and down in this second, and arrivals up and down (by
    /// arrival time); empty in a second without any (the live per-category rates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_category: Vec<[u64; 4]>,
}

impl SecDigest {
    fn new() -> Self {
        let delay = [Signed::new(SIG_SECOND, NS_PER_US), Signed::new(SIG_SECOND, NS_PER_US)];
        SecDigest { sent: [0; 2], got: [0; 2], bits: [0; 2], delay, by_category: Vec::new() }
    }

    /// Counts one APDU of category `c` (of `n`) in column `col` (0, 1: departures up, down;
    /// 2, 3: arrivals up, down).
    fn count(&mut self, n: usize, c: usize, col: usize) {
        if c < n {
            if self.by_category.is_empty() {
                self.by_category = vec![[0; 4]; n];
            }
            self.by_category[c][col] += 1;
        }
    }

    /// Adds another summary's same second.
    pub fn add_from(&mut self, b: &SecDigest) -> Result<(), DigestError> {
        for d in 0..2 {
            self.sent[d] = self.sent[d].checked_add(b.sent[d]).ok_or(DigestError::Overflow)?;
            self.got[d] = self.got[d].checked_add(b.got[d]).ok_or(DigestError::Overflow)?;
            self.bits[d] = self.bits[d].checked_add(b.bits[d]).ok_or(DigestError::Overflow)?;
            self.delay[d].merge(&b.delay[d])?;
        }
        if !b.by_category.is_empty() {
            if self.by_category.is_empty() {
                self.by_category = vec![[0; 4]; b.by_category.len()];
            }
            if self.by_category.len() != b.by_category.len() {
                return Err(DigestError::Mismatch("seconds of different categories".into()));
            }
            for (x, y) in self.by_category.iter_mut().zip(&b.by_category) {
                for k in 0..4 {
                    x[k] = x[k].checked_add(y[k]).ok_or(DigestError::Overflow)?;
                }
            }
        }
        Ok(())
    }
}

/// A mergeable summary of a two-way run (or of an agent's part of one).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GameDigest {
    /// The run's start (real ns on the reference clock): seconds count from it.
    pub epoch_ns: u64,
    /// Per category, up and down.
    pub categories: Vec<[DirDigest; 2]>,
    pub seconds: Vec<SecDigest>,
    /// The clients' send lateness (actual − scheduled departure, µs), its sum and how many
    /// departures were more than 1 ms late.
    pub lateness_us: Bins,
    pub lateness_sum_us: f64,
    pub late_over_1ms: u64,
    /// Per player, its departures up and down (ascending by player, each once): what a
    /// controller holds against each player's regenerated schedule, so that a departure removed
    /// is seen as well as one added (issue 66). Only a final summary has them (its live pieces
    /// do not); they add up to the categories' departures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub departures: Vec<(u32, [u64; 2])>,
}

impl GameDigest {
    /// An empty summary of a run of `categories` categories and `duration_s` seconds.
    pub fn new(categories: usize, epoch_ns: u64, duration_s: f64) -> Self {
        let secs = (duration_s.max(0.0).ceil() as usize + 2).min(MAX_SECONDS);
        GameDigest {
            epoch_ns,
            categories: (0..categories.min(MAX_CATEGORIES)).map(|_| [DirDigest::new(), DirDigest::new()]).collect(),
            seconds: (0..secs).map(|_| SecDigest::new()).collect(),
            lateness_us: Bins::new(SIG),
            lateness_sum_us: 0.0,
            late_over_1ms: 0,
            departures: Vec::new(),
        }
    }

    /// This summary without its per-player departures (what its live pieces add up to).
    pub fn without_departures(&self) -> GameDigest {
        GameDigest { departures: Vec::new(), ..self.clone() }
    }

    /// Adds another agent's summary of the same run: exact for counts and histograms.
    pub fn merge(&mut self, o: &GameDigest) -> Result<(), DigestError> {
        if o.epoch_ns != self.epoch_ns || o.categories.len() != self.categories.len() || o.seconds.len() != self.seconds.len() {
            return Err(DigestError::Mismatch(format!(
                "start {} / {}, {} / {} categories, {} / {} seconds",
                self.epoch_ns,
                o.epoch_ns,
                self.categories.len(),
                o.categories.len(),
                self.seconds.len(),
                o.seconds.len()
            )));
        }
        for (a, b) in self.categories.iter_mut().zip(&o.categories) {
            a[0].merge(&b[0])?;
            a[1].merge(&b[1])?;
        }
        self.lateness_us.merge(&o.lateness_us)?;
        self.lateness_sum_us += o.lateness_sum_us;
        self.late_over_1ms = self.late_over_1ms.checked_add(o.late_over_1ms).ok_or(DigestError::Overflow)?;
        for (a, b) in self.seconds.iter_mut().zip(&o.seconds) {
            a.add_from(b)?;
        }
        self.departures = merge_departures(&self.departures, &o.departures)?;
        Ok(())
    }

    /// A summary from a peer, checked against what our own plan says the run is: its start,
    /// categories and seconds, and no more departures than `max_sent` (the plan's bound on what
    /// the peer can have sent).
    pub fn accept(bytes: &[u8], expect: &GameDigest, max_sent: u64) -> Result<GameDigest, DigestError> {
        let d: GameDigest = serde_json::from_slice(bytes).map_err(|e| DigestError::Invalid(e.to_string()))?;
        if d.epoch_ns != expect.epoch_ns || d.categories.len() != expect.categories.len() || d.seconds.len() != expect.seconds.len() {
            return Err(DigestError::Mismatch("a summary of another run (start, categories or seconds differ from the plan)".into()));
        }
        let sent: u64 = d.categories.iter().flat_map(|c| c.iter()).try_fold(0u64, |a, x| a.checked_add(x.sent)).ok_or(DigestError::Overflow)?;
        let got: u64 = d.categories.iter().flat_map(|c| c.iter()).try_fold(0u64, |a, x| a.checked_add(x.received)).ok_or(DigestError::Overflow)?;
        if sent > max_sent || got > max_sent.saturating_mul(2) {
            return Err(DigestError::Invalid(format!("{sent} departures and {got} arrivals where the plan allows at most {max_sent}")));
        }
        for s in d.categories.iter().flat_map(|c| c.iter().map(|x| &x.delay)).chain(d.seconds.iter().flat_map(|s| s.delay.iter())) {
            s.check()?;
            if s.unit != NS_PER_US {
                return Err(DigestError::Mismatch(format!("delays in units of {} ns (the plan's are {NS_PER_US})", s.unit)));
            }
        }
        if !d.lateness_sum_us.is_finite() || d.categories.iter().flat_map(|c| c.iter()).any(|c| !c.jitter_ns.is_finite()) {
            return Err(DigestError::Invalid("a sum that is not a number".into()));
        }
        if d.seconds.iter().any(|s| !s.by_category.is_empty() && s.by_category.len() != d.categories.len()) {
            return Err(DigestError::Invalid("a second whose categories are not the run's".into()));
        }
        for c in d.categories.iter().flat_map(|c| c.iter()) {
            if !c.counts_agree() {
                return Err(DigestError::Invalid("histogram counts that disagree with the summary's own departures and arrivals".into()));
            }
        }
        if !d.departures.is_empty() {
            if d.departures.windows(2).any(|w| w[0].0 >= w[1].0) {
                return Err(DigestError::Invalid("per-player departures out of order or twice".into()));
            }
            for dir in 0..2 {
                let players = d.departures.iter().try_fold(0u64, |a, x| a.checked_add(x.1[dir])).ok_or(DigestError::Overflow)?;
                let cats: u64 = d.categories.iter().map(|c| c[dir].sent).sum();
                if players != cats {
                    return Err(DigestError::Invalid(format!("{players} departures {} by player, {cats} by category", ["up", "down"][dir])));
                }
            }
        }
        // the bucket schemes and counts must add to ours (what the controller does next)
        expect.clone().merge(&d)?;
        Ok(d)
    }
}

/// Two per-player departure lists (each ascending by player) as one: a player in both adds.
fn merge_departures(a: &[(u32, [u64; 2])], b: &[(u32, [u64; 2])]) -> Result<Vec<(u32, [u64; 2])>, DigestError> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                (i, j) = (i + 1, j + 1);
                let add = |k: usize| x.1[k].checked_add(y.1[k]).ok_or(DigestError::Overflow);
                (x.0, [add(0)?, add(1)?])
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                i += 1;
                *x
            }
            (Some(x), None) => {
                i += 1;
                *x
            }
            (_, Some(y)) => {
                j += 1;
                *y
            }
            (None, None) => break,
        };
        out.push(next);
    }
    Ok(out)
}

/// The stay of `segs` (a player's, in time order) an APDU sent at `t_a` (reference ns) belongs
/// to, for a run that started at `epoch_ns`.
pub fn stay_of(segs: &[Segment], epoch_ns: u64, t_a: u64) -> Option<usize> {
    game::segment_index(segs, (t_a as i64).saturating_sub(epoch_ns as i64) as f64 / 1e9)
}

/// The report's analysis from a (merged) summary: [`crate::game::analyse`]'s figures, with the
/// distribution figures' bounds in each row.
pub fn analyse(ctx: &Context, d: &GameDigest) -> GameAnalysis {
    let n = ctx.service.states.len().min(d.categories.len());
    let mut ps = vec![0.0; n];
    for segs in ctx.segments {
        for s in segs.iter().filter(|s| (s.state as usize) < n) {
            ps[s.state as usize] += (s.end_s.min(ctx.duration_s) - s.start_s).max(0.0);
        }
    }
    let total_ps: f64 = ps.iter().sum();
    let mut out = GameAnalysis { sub_weights: game::sub_weights(ctx), tcp: ctx.service.transport == horde_model::Transport::Tcp, ..Default::default() };
    let mut tot = [DirDigest::new(), DirDigest::new()];
    for (state, dirs) in d.categories.iter().enumerate().take(n) {
        let mut cat = game::category_row(ctx, state, &ps);
        for dir in [Direction::Up, Direction::Down] {
            let a = &dirs[dir as usize];
            let st = stats(ctx, Some((state, &out.sub_weights[state])), dir, a, ps[state]);
            let t = &mut tot[dir as usize];
            // summaries of one run share their bucket schemes: these cannot fail
            let _ = t.size.merge(&a.size).and(t.delay.merge(&a.delay));
            t.sent += a.sent;
            t.received += a.received;
            t.bytes += a.bytes;
            match dir {
                Direction::Up => cat.up = st,
                Direction::Down => cat.down = st,
            }
        }
        out.categories.push(cat);
    }
    out.up = stats(ctx, None, Direction::Up, &tot[0], total_ps);
    out.down = stats(ctx, None, Direction::Down, &tot[1], total_ps);
    out.throughput = d.seconds.iter().enumerate().take(ctx.duration_s.ceil() as usize).map(|(i, s)| (i as f64, s.bits[0] as f64, s.bits[1] as f64)).collect();
    let keep = d.seconds.iter().rposition(|s| s.sent[0] + s.sent[1] > 0).map_or(0, |i| i + 1).max(ctx.duration_s.ceil() as usize).min(d.seconds.len());
    out.seconds = d.seconds[..keep]
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let ms = |v: Option<i64>| v.map(|v| v as f64 / 1e6);
            Second {
                t_s: i as f64,
                sent: s.sent,
                lost: [s.sent[0].saturating_sub(s.got[0]), s.sent[1].saturating_sub(s.got[1])],
                delay_p50_ms: [ms(s.delay[0].quantile(0.5)), ms(s.delay[1].quantile(0.5))],
                delay_p99_ms: [ms(s.delay[0].quantile(0.99)), ms(s.delay[1].quantile(0.99))],
            }
        })
        .collect();
    out.up.lost = out.seconds.iter().map(|s| s.lost[0]).sum();
    out.down.lost = out.seconds.iter().map(|s| s.lost[1]).sum();
    out.occupancy = game::occupancy(ctx, ctx.service.states.len());
    out
}

/// One row from a summary: [`crate::game`]'s definitions on histograms.
fn stats(ctx: &Context, state: Option<(usize, &[Vec<f64>; 2])>, dir: Direction, a: &DirDigest, player_seconds: f64) -> DirectionStats {
    let mut s = game::counted(ctx, a.sent, a.received, a.bytes, player_seconds);
    s.iat_samples = a.iat_us.count();
    s.departure_iat_samples = a.sent_iat_ms.count();
    let mut bounds = Bounds::default();
    if let Some((k, w)) = state {
        game::fill_model(ctx, k, w, dir, &mut s);
        // inter-departure and inter-arrival times within stays: the truncated model
        let idt = game::Truncated::new(ctx, k, dir, &a.sent_room_ms);
        let idt = |x: f64| idt.as_ref().map_or_else(|| game::model_cdf(ctx, w, k, dir, false, x).unwrap_or(0.0), |t| t.cdf(x));
        let pairs = [
            (a.sent_size.ks(1.0, |x| game::model_cdf(ctx, w, k, dir, true, x).unwrap_or(0.0)), &mut s.ks_departure_size, &mut bounds.ks_departure_size),
            (a.sent_iat_ms.ks(1.0, |x| idt(x.floor() + 0.5)), &mut s.ks_departure_iat, &mut bounds.ks_departure_iat),
            (a.size.ks_two_sample(&a.sent_size), &mut s.path_ks_size, &mut bounds.path_ks_size),
            (a.iat_ms.ks_two_sample(&a.sent_iat_ms), &mut s.path_ks_iat, &mut bounds.path_ks_iat),
        ];
        for (lo_hi, value, bound) in pairs {
            if let Some((lo, hi)) = lo_hi {
                *value = Some(lo);
                *bound = Some(hi - lo);
            }
        }
        if let Some((lo, hi)) = a.size.ks(1.0, |x| game::model_cdf(ctx, w, k, dir, true, x).unwrap_or(0.0)) {
            s.ks_size = Some(lo);
            bounds.ks_size = Some(hi - lo);
        }
        if let Some((lo, hi)) = a.iat_ms.ks(1.0, |x| idt(x.floor() + 0.5)) {
            s.ks_iat = Some(lo);
            bounds.ks_iat = Some(hi - lo);
        }
        if let Some((lo, hi)) = a.iat_us.ks_floored(1e-3, idt) {
            s.ks_iat_exact = Some(lo);
            bounds.ks_iat_exact = Some(hi - lo);
        }
    }
    s.size_cdf = a.size.cdf_points(1.0, game::CDF_POINTS);
    s.iat_cdf = a.iat_us.cdf_points(1e-3, game::CDF_POINTS);
    let dl = &a.delay;
    if dl.count() > 0 {
        let q = |p: f64| dl.quantile(p).unwrap_or(0) as f64 / 1e6;
        s.delay_mean_ms = Some(dl.sum / dl.count() as f64 / 1e6);
        s.delay_p50_ms = Some(q(0.5));
        s.delay_p99_ms = Some(q(0.99));
        s.delay_max_ms = Some(dl.max as f64 / 1e6);
        s.delay_cdf = signed_cdf(dl);
        s.jitter_ms = state.is_some().then(|| a.jitter_ns / 1e6);
        // at the largest percentile reported (the maximum is exact)
        let (p50, p99) = (dl.quantile(0.5).unwrap_or(0), dl.quantile(0.99).unwrap_or(0));
        bounds.delay_ms = Some(dl.bound_at(p50.abs().max(p99.abs())) as f64 / 1e6);
    }
    s.bounds = Some(bounds);
    s
}

/// The delay CDF's points (ms, F) at the same ranks the raw path uses.
fn signed_cdf(dl: &Signed) -> Vec<(f64, f64)> {
    let n = dl.count();
    (1..=game::CDF_POINTS)
        .filter_map(|k| {
            let p = k as f64 / game::CDF_POINTS as f64;
            let v = dl.quantile(p)?;
            Some((v as f64 / 1e6, ((p * n as f64).ceil() / n as f64).min(1.0)))
        })
        .collect()
}

#[cfg(test)]
mod tests;
