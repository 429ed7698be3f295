//! Analysis of a two-way scenario run (`horde run`): per category (behaviour state) and
//! direction, what was sent and received, rates per player against the model, delay, and the
//! fit of measured APDU sizes and inter-arrival times to the model's own distributions.
//!
//! Inputs: the client's and the server's logs, the players' behaviour segments and the bound
//! traffic model. Record tags carry `player << 8 | category`. Inter-arrival times are taken
//! between consecutive arrivals of one player within one stay (a stay restarts the model's
//! inter-departure process), from the receiver's timestamps.

use std::collections::BTreeMap;

use horde_model::behaviour::Segment;
use horde_model::fit::{ks_distance, ks_two_sample};
use horde_model::service::{BoundTraffic, Direction, Service};
use horde_wire::{Record, RecordKind};
use serde::Serialize;

/// Points kept per empirical CDF in the report (quantiles), so a report stays small.
pub(crate) const CDF_POINTS: usize = 200;

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct DirectionStats {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub bytes: u64,
    /// Received bit/s over the whole run, all players in this category together.
    pub bitrate_bps: f64,
    /// Received APDUs per second per player in this category (over player-seconds spent in it).
    pub apdu_rate_per_player: f64,
    /// The model's APDU rate per player: 1000 / mean inter-departure time (ms).
    pub model_apdu_rate_per_player: Option<f64>,
    /// The coefficient of variation of the model's inter-departure times (the mixture over
    /// sub-activities): a renewal process's count over N departures strays by about CV/√N.
    #[serde(default)]
    pub model_idt_cv: Option<f64>,
    pub rate_error_pct: Option<f64>,
    pub mean_size: f64,
    pub model_mean_size: Option<f64>,
    pub size_samples: u64,
    pub ks_size: Option<f64>,
    pub iat_samples: u64,
    /// KS distance of inter-arrival times at the model's 1 ms resolution: measured values rounded
    /// to whole ms against P(round(X) <= k) = F(k + 0.5). Arrival stamps carry tens of µs of
    /// scheduling jitter, which would otherwise count every atom of the model (0, 44, 500 ms …)
    /// as missed.
    pub ks_iat: Option<f64>,
    /// KS distance of the unrounded inter-arrival times.
    pub ks_iat_exact: Option<f64>,
    pub delay_mean_ms: Option<f64>,
    pub delay_p50_ms: Option<f64>,
    pub delay_p99_ms: Option<f64>,
    pub delay_max_ms: Option<f64>,
    pub jitter_ms: Option<f64>,
    /// The sender's side, from its own records before the network touched anything: what the
    /// generator did. APDUs sent per second per player in this category.
    pub departure_rate_per_player: f64,
    /// The departure rate's error against the model's, %.
    pub departure_rate_error_pct: Option<f64>,
    /// KS distance of the departed APDUs' sizes to the model's.
    pub ks_departure_size: Option<f64>,
    /// Inter-departure times (between consecutive departures of one player within one stay,
    /// from the sender's timestamps): how many, and their KS distance to the model's at its
    /// 1 ms resolution (as [`DirectionStats::ks_iat`]).
    pub departure_iat_samples: u64,
    pub ks_departure_iat: Option<f64>,
    /// What the path did to the distributions: the two-sample KS distance between what arrived
    /// and what departed — sizes, and inter-arrival against inter-departure times at 1 ms.
    /// About 0 on a path that delays every APDU alike and loses none, whatever the generator did.
    pub path_ks_size: Option<f64>,
    pub path_ks_iat: Option<f64>,
    /// Empirical CDF points `(value, F)` of sizes and inter-arrival times (ms), for charts.
    pub size_cdf: Vec<(f64, f64)>,
    pub iat_cdf: Vec<(f64, f64)>,
    /// Empirical CDF points `(delay ms, F)` of one-way delays.
    pub delay_cdf: Vec<(f64, f64)>,
    /// Present when the row was computed from merged summaries (`--collect summaries`): how far
    /// its distribution figures may be from the same figures over the raw records. Counts,
    /// bytes, loss and rates are exact either way. Absent: computed from the raw records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Bounds>,
}

/// Error bounds of figures computed from summaries (histograms) instead of raw records.
#[derive(Debug, Clone, Serialize, serde::Deserialize, Default, PartialEq, schemars::JsonSchema)]
pub struct Bounds {
    /// The raw-record KS distances lie in `[ks, ks + bound]` (0 where every bucket holds one
    /// value: sizes below 2,048 B, rounded inter-arrival times below 2,048 ms).
    pub ks_size: Option<f64>,
    pub ks_iat: Option<f64>,
    pub ks_iat_exact: Option<f64>,
    /// The delay percentiles (p50, p99) are within this many ms of the raw records' nearest
    /// rank: one µs bucket plus 1/1,024 of the larger of them. The mean and maximum are exact.
    pub delay_ms: Option<f64>,
    /// The same for the departure side's KS distances and the path's two-sample ones.
    #[serde(default)]
    pub ks_departure_size: Option<f64>,
    #[serde(default)]
    pub ks_departure_iat: Option<f64>,
    #[serde(default)]
    pub path_ks_size: Option<f64>,
    #[serde(default)]
    pub path_ks_iat: Option<f64>,
}

/// One second of a run, per direction (index 0 up, 1 down): APDUs sent in it (by send time),
/// of those how many never arrived, and the delays of what arrived in it (by arrival time).
#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct Second {
    /// Seconds since the run's start.
    pub t_s: f64,
    pub sent: [u64; 2],
    pub lost: [u64; 2],
    /// Nearest-rank median and 99th percentile of the one-way delays of arrivals, ms.
    pub delay_p50_ms: [Option<f64>; 2],
    pub delay_p99_ms: [Option<f64>; 2],
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct CategoryStats {
    pub category: String,
    /// Stays in the category (each a fresh start of its inter-departure process).
    #[serde(default)]
    pub stays: u64,
    pub player_seconds: f64,
    pub occupancy_share: f64,
    pub up: DirectionStats,
    pub down: DirectionStats,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct GameAnalysis {
    pub categories: Vec<CategoryStats>,
    pub up: DirectionStats,
    pub down: DirectionStats,
    /// Players per category over time: `(second, counts per category)`.
    pub occupancy: Vec<(f64, Vec<u32>)>,
    /// Realised sub-activity weights per category and direction (see [`sub_weights`]).
    pub sub_weights: Vec<[Vec<f64>; 2]>,
    /// Received bit/s per direction per second: `(second, up, down)`.
    pub throughput: Vec<(f64, f64, f64)>,
    /// Loss and delay per second.
    pub seconds: Vec<Second>,
    /// The APDUs went over TCP: `lost` counts those undelivered when the run ended (TCP itself
    /// loses nothing); over UDP, those sent and never received.
    #[serde(default)]
    pub tcp: bool,
}

/// Everything the analysis needs besides the logs.
pub struct Context<'a> {
    pub service: &'a Service,
    pub traffic: &'a BoundTraffic,
    /// Per player, in time order.
    pub segments: &'a [Vec<Segment>],
    pub duration_s: f64,
    /// Real time of the run's start (the client's), ns.
    pub epoch_ns: u64,
    /// An interrupted run: only APDUs sent before this real time (ns) count, on both sides, so
    /// what was in flight at the interruption is neither sent nor lost. `duration_s` is then
    /// the time up to it.
    pub cutoff_ns: Option<u64>,
}

/// Per (player, direction): how many of its first APDUs were sent before the cutoff. APDUs of a
/// connection leave in sequence order, so these are exactly the ones with a smaller sequence
/// number, on the sender's and the receiver's side alike.
fn in_scope(ctx: &Context, client: &[Record], server: &[Record]) -> Option<Vec<[u64; 2]>> {
    let cutoff = ctx.cutoff_ns?;
    let mut limit = vec![[0u64; 2]; ctx.segments.len()];
    for (recs, dir) in [(client, Direction::Up), (server, Direction::Down)] {
        for r in recs.iter().filter(|r| r.kind == RecordKind::Sent && r.t_b < cutoff) {
            if let Some(l) = limit.get_mut((r.tag >> 8) as usize) {
                l[dir as usize] = l[dir as usize].max(r.seq + 1);
            }
        }
    }
    Some(limit)
}

struct Acc {
    sent: u64,
    /// Departed sizes and inter-departure times (ms), from the sender's records.
    sent_sizes: Vec<f64>,
    sent_iats: Vec<f64>,
    /// Per sub-activity, the time left in its stay when each departure left (ms).
    room: Vec<crate::bins::Bins>,
    sizes: Vec<f64>,
    iats: Vec<f64>,
    delays: Vec<f64>,
    bytes: u64,
    jitter: crate::metrics::Jitter,
}

impl Acc {
    fn new() -> Self {
        Acc {
            sent: 0,
            sent_sizes: Vec::new(),
            sent_iats: Vec::new(),
            room: Vec::new(),
            sizes: Vec::new(),
            iats: Vec::new(),
            delays: Vec::new(),
            bytes: 0,
            jitter: Default::default(),
        }
    }
}

/// Index of the stay of `segs` that holds `t_s`.
pub(crate) fn segment_index(segs: &[Segment], t_s: f64) -> Option<usize> {
    let i = segs.partition_point(|s| s.start_s <= t_s);
    i.checked_sub(1)
}

/// Weights of a category's sub-activities in this run, per direction: the share of the
/// category's APDUs each sub-activity is expected to carry given the stays the behaviour process
/// produced (player-seconds × APDU rate). The traffic model is judged given the behaviour that
/// ran; the sub-activity draw itself is the behaviour process's, tested on its own. Falls back to
/// the sub-activities' probabilities when the category was never visited.
pub fn sub_weights(ctx: &Context) -> Vec<[Vec<f64>; 2]> {
    let mut ps: Vec<Vec<f64>> = ctx.service.states.iter().map(|s| vec![0.0; s.subs.len()]).collect();
    for segs in ctx.segments {
        for s in segs {
            ps[s.state as usize][s.sub as usize] += (s.end_s.min(ctx.duration_s) - s.start_s).max(0.0);
        }
    }
    ctx.service
        .states
        .iter()
        .enumerate()
        .map(|(k, st)| {
            [Direction::Up, Direction::Down].map(|dir| {
                let w: Vec<f64> = st
                    .subs
                    .iter()
                    .enumerate()
                    .map(|(j, _)| {
                        let rate =
                            ctx.traffic.by_state[k][j][dir as usize].as_ref().and_then(|t| t.idt.mean_estimate()).filter(|m| *m > 0.0).map_or(0.0, |m| 1.0 / m);
                        ps[k][j] * rate
                    })
                    .collect();
                let total: f64 = w.iter().sum();
                if total > 0.0 {
                    w.iter().map(|x| x / total).collect()
                } else {
                    st.subs.iter().map(|s| s.p).collect()
                }
            })
        })
        .collect()
}

/// The model's CDF of one direction of one category: a mixture over sub-activities with
/// `weights` (from [`sub_weights`]; for IDTs the mixture is weighted by stays, not APDUs).
pub fn model_cdf(ctx: &Context, weights: &[Vec<f64>; 2], state: usize, dir: Direction, size: bool, x: f64) -> Option<f64> {
    let mut acc = 0.0;
    for (k, w) in weights[dir as usize].iter().enumerate() {
        let t = ctx.traffic.by_state[state][k][dir as usize].as_ref()?;
        acc += w * if size { t.size.cdf(x) } else { t.idt.cdf(x) };
    }
    Some(acc)
}

/// The coefficient of variation of a category's inter-departure times: the mixture over
/// sub-activities with their APDU weights.
fn model_cv(ctx: &Context, weights: &[Vec<f64>; 2], state: usize, dir: Direction) -> Option<f64> {
    let (mut m1, mut m2) = (0.0, 0.0);
    for (k, w) in weights[dir as usize].iter().enumerate() {
        let t = ctx.traffic.by_state[state][k][dir as usize].as_ref()?;
        if *w > 0.0 {
            m1 += w * t.idt.mean_estimate()?;
            m2 += w * t.idt.second_moment_estimate()?;
        }
    }
    (m1 > 0.0).then(|| (m2 / (m1 * m1) - 1.0).max(0.0).sqrt())
}

fn model_mean(ctx: &Context, weights: &[Vec<f64>; 2], state: usize, dir: Direction, size: bool) -> Option<f64> {
    let mut acc = 0.0;
    for (k, w) in weights[dir as usize].iter().enumerate() {
        let t = ctx.traffic.by_state[state][k][dir as usize].as_ref()?;
        acc += w * if size { t.size.mean_estimate()? } else { t.idt.mean_estimate()? };
    }
    Some(acc)
}

fn quantile_points(sorted: &[f64]) -> Vec<(f64, f64)> {
    if sorted.is_empty() {
        return Vec::new();
    }
    let n = sorted.len();
    (1..=CDF_POINTS)
        .map(|k| {
            let i = ((k as f64 / CDF_POINTS as f64) * n as f64).ceil() as usize - 1;
            let i = i.min(n - 1);
            // F at this value: share of samples <= it
            let v = sorted[i];
            let f = sorted.partition_point(|x| *x <= v) as f64 / n as f64;
            (v, f)
        })
        .collect()
}

/// The second each departure was sent in, by player, direction and sequence number (dense
/// from 0 per player and direction), with a mark once an arrival has been matched to it.
#[derive(Default)]
struct SentSeconds(Vec<[Vec<u32>; 2]>);

impl SentSeconds {
    const NONE: u32 = u32::MAX;
    const MATCHED: u32 = 1 << 31;
    /// Sequence numbers beyond this are not tracked (a record that claims one is not a
    /// departure of this run's schedules): bounds memory against a lying log.
    const MAX_SEQ: u64 = 1 << 28;

    fn put(&mut self, player: u32, dir: Direction, seq: u64, sec: usize) {
        if seq >= Self::MAX_SEQ || player as usize >= 1 << 24 {
            return;
        }
        if self.0.len() <= player as usize {
            self.0.resize_with(player as usize + 1, Default::default);
        }
        let v = &mut self.0[player as usize][dir as usize];
        if v.len() <= seq as usize {
            v.resize(seq as usize + 1, Self::NONE);
        }
        v[seq as usize] = sec as u32;
    }

    /// The second departure `seq` left in, the first time its arrival is matched.
    fn take(&mut self, player: u32, dir: Direction, seq: u64) -> Option<usize> {
        let slot = self.0.get_mut(player as usize)?[dir as usize].get_mut(usize::try_from(seq).ok()?)?;
        if *slot == Self::NONE || *slot & Self::MATCHED != 0 {
            return None;
        }
        let sec = *slot as usize;
        *slot |= Self::MATCHED;
        Some(sec)
    }
}

/// Analyses a run from the client's and the server's records.
pub fn analyse(ctx: &Context, client: &[Record], server: &[Record]) -> GameAnalysis {
    let n = ctx.service.states.len();
    let limit = in_scope(ctx, client, server);
    let counts = |r: &Record, dir: Direction| limit.as_ref().is_none_or(|l| l.get((r.tag >> 8) as usize).is_some_and(|l| r.seq < l[dir as usize]));
    // [state][dir]
    let mut acc: Vec<[Acc; 2]> = (0..n).map(|_| [Acc::new(), Acc::new()]).collect();
    for (recs, dir_sent) in [(client, Direction::Up), (server, Direction::Down)] {
        // (player, stay) -> last departure, for inter-departure times within a stay (the stay
        // of the send time, as an arrival's is: a departure and its arrival share it)
        let mut last: BTreeMap<(u32, usize), u64> = BTreeMap::new();
        for r in recs.iter().filter(|r| r.kind == RecordKind::Sent && counts(r, dir_sent)) {
            let c = (r.tag & 0xFF) as usize;
            if c >= n {
                continue;
            }
            let a = &mut acc[c][dir_sent as usize];
            a.sent += 1;
            a.sent_sizes.push(r.size as f64);
            let player = r.tag >> 8;
            let rel_s = (r.t_b as i64 - ctx.epoch_ns as i64) as f64 / 1e9;
            let Some(segs) = ctx.segments.get(player as usize) else {
                continue;
            };
            let Some(stay) = segment_index(segs, rel_s) else {
                continue;
            };
            record_room(&mut a.room, &segs[stay], ctx.duration_s, rel_s);
            if let Some(prev) = last.insert((player, stay), r.t_b) {
                a.sent_iats.push((r.t_b as f64 - prev as f64) / 1e6);
            }
        }
    }
    let secs = ctx.duration_s.ceil() as usize + 2;
    let mut thr = vec![(0.0f64, 0.0f64); secs];
    let second_of = |ns: u64| ((ns as i64 - ctx.epoch_ns as i64).max(0) as f64 / 1e9) as usize;
    // Per second and direction: sent (by the second it left in: the Sent record's `t_b`, which
    // is also the send time the packet carried, so a receiver's summary can place it in the
    // same second without the sender's log), received of those (the arrival matched to its
    // departure by player, direction and sequence number, each once), delays by arrival. So the
    // seconds' losses add up to the run's exactly.
    let mut per_sec: Vec<[(u64, u64, Vec<f64>); 2]> = (0..secs).map(|_| Default::default()).collect();
    let mut sent_in = SentSeconds::default();
    for (recs, dir) in [(client, Direction::Up), (server, Direction::Down)] {
        for r in recs.iter().filter(|r| r.kind == RecordKind::Sent && counts(r, dir)) {
            let sec = second_of(r.t_b).min(secs - 1);
            per_sec[sec][dir as usize].0 += 1;
            sent_in.put(r.tag >> 8, dir, r.seq, sec);
        }
    }
    // Arrivals: up at the server, down at the client.
    for (recs, dir) in [(server, Direction::Up), (client, Direction::Down)] {
        // (player, stay) -> last arrival time, for inter-arrival times within a stay
        let mut last: BTreeMap<(u32, usize), u64> = BTreeMap::new();
        let mut prev_transit: BTreeMap<(u32, usize), i64> = BTreeMap::new();
        for r in recs.iter().filter(|r| r.kind == RecordKind::Received && counts(r, dir)) {
            let player = r.tag >> 8;
            let c = (r.tag & 0xFF) as usize;
            if c >= n {
                continue;
            }
            let a = &mut acc[c][dir as usize];
            a.sizes.push(r.size as f64);
            a.bytes += r.size as u64;
            let transit = r.t_b as i64 - r.t_a as i64;
            if let Some(sec) = sent_in.take(player, dir, r.seq) {
                per_sec[sec][dir as usize].1 += 1;
            }
            if let Some(s) = per_sec.get_mut(second_of(r.t_b)) {
                s[dir as usize].2.push(transit as f64 / 1e6);
            }
            a.delays.push(transit as f64 / 1e6);
            let rel_s = (r.t_a as i64 - ctx.epoch_ns as i64) as f64 / 1e9;
            let sec = ((r.t_b as i64 - ctx.epoch_ns as i64).max(0) as f64 / 1e9) as usize;
            if sec < secs {
                match dir {
                    Direction::Up => thr[sec].0 += r.size as f64 * 8.0,
                    Direction::Down => thr[sec].1 += r.size as f64 * 8.0,
                }
            }
            let Some(segs) = ctx.segments.get(player as usize) else {
                continue;
            };
            let Some(stay) = segment_index(segs, rel_s) else {
                continue;
            };
            if let Some(prev) = last.insert((player, stay), r.t_b) {
                a.iats.push((r.t_b as f64 - prev as f64) / 1e6);
            }
            if let Some(pt) = prev_transit.insert((player, stay), transit) {
                a.jitter.update(transit - pt);
            }
        }
    }
    // Player-seconds per category.
    let mut ps = vec![0.0; n];
    for segs in ctx.segments {
        for s in segs {
            ps[s.state as usize] += (s.end_s.min(ctx.duration_s) - s.start_s).max(0.0);
        }
    }
    let total_ps: f64 = ps.iter().sum();
    let mut out = GameAnalysis { sub_weights: sub_weights(ctx), tcp: ctx.service.transport == horde_model::Transport::Tcp, ..Default::default() };
    let mut tot = [Acc::new(), Acc::new()];
    for (state, dirs) in acc.iter_mut().enumerate() {
        let mut cat = category_row(ctx, state, &ps);
        for dir in [Direction::Up, Direction::Down] {
            let a = &mut dirs[dir as usize];
            let st = direction_stats(ctx, Some((state, &out.sub_weights[state])), dir, a, ps[state]);
            let t = &mut tot[dir as usize];
            t.sent += a.sent;
            t.bytes += a.bytes;
            t.sizes.extend_from_slice(&a.sizes);
            t.delays.extend_from_slice(&a.delays);
            match dir {
                Direction::Up => cat.up = st,
                Direction::Down => cat.down = st,
            }
        }
        out.categories.push(cat);
    }
    out.up = direction_stats(ctx, None, Direction::Up, &mut tot[0], total_ps);
    out.down = direction_stats(ctx, None, Direction::Down, &mut tot[1], total_ps);
    out.throughput = thr.iter().enumerate().take(ctx.duration_s.ceil() as usize).map(|(i, (u, d))| (i as f64, *u, *d)).collect();
    // Every second that has a departure is kept (a server side's last departures may fall in
    // the second after the client's last), so the seconds add up to the totals.
    let keep = per_sec.iter().rposition(|s| s[0].0 + s[1].0 > 0).map_or(0, |i| i + 1).max(ctx.duration_s.ceil() as usize).min(secs);
    out.seconds = seconds(&mut per_sec[..keep]);
    // The run's losses are the seconds' (departures never matched by an arrival), one pass over
    // the same records: the page cannot show a loss chart that disagrees with its table.
    for d in 0..2 {
        let lost: u64 = out.seconds.iter().map(|s| s.lost[d]).sum();
        if d == 0 {
            out.up.lost = lost;
        } else {
            out.down.lost = lost;
        }
    }
    out.occupancy = occupancy(ctx, n);
    out
}

/// Each second's row from its (sent, received of those, arrival delays in ms) per direction.
fn seconds(per_sec: &mut [[(u64, u64, Vec<f64>); 2]]) -> Vec<Second> {
    per_sec
        .iter_mut()
        .enumerate()
        .map(|(i, s)| {
            let mut sec = Second { t_s: i as f64, ..Default::default() };
            for (d, (sent, got, delays)) in s.iter_mut().enumerate() {
                sec.sent[d] = *sent;
                sec.lost[d] = sent.saturating_sub(*got);
                delays.sort_by(|x, y| x.total_cmp(y));
                sec.delay_p50_ms[d] = crate::quantile::nearest_rank(delays, 0.5);
                sec.delay_p99_ms[d] = crate::quantile::nearest_rank(delays, 0.99);
            }
            sec
        })
        .collect()
}

/// Players per category at (at most) 200 instants over the run.
pub(crate) fn occupancy(ctx: &Context, n: usize) -> Vec<(f64, Vec<u32>)> {
    let step = (ctx.duration_s / 200.0).max(1.0);
    let mut out = Vec::new();
    let mut t = 0.0;
    while t < ctx.duration_s {
        let mut counts = vec![0u32; n];
        for segs in ctx.segments {
            if let Some(i) = segment_index(segs, t) {
                if segs[i].end_s > t {
                    counts[segs[i].state as usize] += 1;
                }
            }
        }
        out.push((t, counts));
        t += step;
    }
    out
}

fn direction_stats(ctx: &Context, state: Option<(usize, &[Vec<f64>; 2])>, dir: Direction, a: &mut Acc, player_seconds: f64) -> DirectionStats {
    let received = a.sizes.len() as u64;
    let mut s = counted(ctx, a.sent, received, a.bytes, player_seconds);
    s.iat_samples = a.iats.len() as u64;
    s.departure_iat_samples = a.sent_iats.len() as u64;
    if let Some((k, w)) = state {
        fill_model(ctx, k, w, dir, &mut s);
        let rounded = |v: &[f64]| v.iter().map(|x| x.round()).collect::<Vec<f64>>();
        let (mut sent_iat, mut got_iat) = (rounded(&a.sent_iats), rounded(&a.iats));
        // inter-departure and inter-arrival times are seen only within a stay: the model's,
        // truncated at the room each departure had left (see [`Truncated`])
        let idt = Truncated::new(ctx, k, dir, &a.room);
        let idt = |x: f64| idt.as_ref().map_or_else(|| model_cdf(ctx, w, k, dir, false, x).unwrap_or(0.0), |t| t.cdf(x));
        if !a.sent_sizes.is_empty() {
            s.ks_departure_size = Some(ks_distance(&mut a.sent_sizes, |x| model_cdf(ctx, w, k, dir, true, x).unwrap_or(0.0)));
        }
        if !sent_iat.is_empty() {
            s.ks_departure_iat = Some(ks_distance(&mut sent_iat, |x| idt(x.floor() + 0.5)));
        }
        s.path_ks_size = ks_two_sample(&mut a.sizes, &mut a.sent_sizes);
        s.path_ks_iat = ks_two_sample(&mut got_iat, &mut sent_iat);
        if !a.sizes.is_empty() {
            s.ks_size = Some(ks_distance(&mut a.sizes, |x| model_cdf(ctx, w, k, dir, true, x).unwrap_or(0.0)));
        }
        if !a.iats.is_empty() {
            s.ks_iat = Some(ks_distance(&mut got_iat, |x| idt(x.floor() + 0.5)));
            s.ks_iat_exact = Some(ks_distance(&mut a.iats, idt));
        }
    } else {
        a.sizes.sort_by(|x, y| x.total_cmp(y));
    }
    s.size_cdf = quantile_points(&a.sizes);
    s.iat_cdf = quantile_points(&a.iats);
    if !a.delays.is_empty() {
        a.delays.sort_by(|x, y| x.total_cmp(y));
        let q = |p: f64| crate::quantile::nearest_rank(&a.delays, p).unwrap_or(0.0);
        s.delay_mean_ms = Some(a.delays.iter().sum::<f64>() / a.delays.len() as f64);
        s.delay_p50_ms = Some(q(0.5));
        s.delay_p99_ms = Some(q(0.99));
        s.delay_max_ms = a.delays.last().copied();
        s.delay_cdf = quantile_points(&a.delays);
        // Jitter is estimated per category (consecutive packets of one player and stay); a
        // direction's total has no single sequence to estimate it over.
        s.jitter_ms = state.is_some().then(|| a.jitter.ms());
    }
    s
}

/// Most sub-activities per category whose departures' room is kept (a departure of a later
/// one is left out of the truncation, never out of the counts).
pub(crate) const MAX_SUBS: usize = 64;

/// Rooms are kept in units of 10 ms, one significant digit: exact below 320 ms, above in
/// buckets at most 1/16 of their value wide. Where the truncation matters (rooms short against
/// the gaps) it is exact; a 3,000-player test of 2-s stays moved its KS distance by 0.0003, and
/// a summary stays small (8 kB of rooms where 2 digits took 21 kB).
pub(crate) const ROOM_SIG: u8 = 1;
const ROOM_UNIT_MS: f64 = 10.0;

/// An empty histogram of rooms.
pub(crate) fn room_bins() -> crate::bins::Bins {
    crate::bins::Bins::new(ROOM_SIG)
}

/// Counts a departure's room: the time left in its stay `seg` (cut at the run's end `end_s`)
/// when it left at `t_s` (seconds since the start), under its sub-activity.
pub(crate) fn record_room(room: &mut Vec<crate::bins::Bins>, seg: &Segment, end_s: f64, t_s: f64) {
    let sub = seg.sub as usize;
    if sub >= MAX_SUBS {
        return;
    }
    if room.len() <= sub {
        room.resize_with(sub + 1, room_bins);
    }
    room[sub].record(((seg.end_s.min(end_s) - t_s) * 1e3 / ROOM_UNIT_MS).max(0.0) as u64);
}

/// The model's inter-departure distribution as it can be seen within stays. A departure's
/// successor is only seen if it comes before the stay ends: departure i (of sub-activity j,
/// with room R_i left) yields an inter-departure time X ~ F_j only when X < R_i. Measured
/// within stays, the times follow G(x) / G(∞) with G(x) = Σ_i F_j(min(x, R_i)) — not F, which a
/// short stay or run cuts off at its long times (an 8-s run of WoW traders would fail a fit
/// to F that it passes against this). With no stays to truncate it is F itself.
/// One sub-activity's departures by room: the rooms (ms, sorted), the running sum of
/// count × F(room), the running count, and the total count.
struct Rooms {
    sub: usize,
    at: Vec<f64>,
    cum_f: Vec<f64>,
    cum_n: Vec<f64>,
    n: f64,
}

pub(crate) struct Truncated<'a> {
    ctx: &'a Context<'a>,
    state: usize,
    dir: Direction,
    subs: Vec<Rooms>,
    norm: f64,
}

impl<'a> Truncated<'a> {
    pub(crate) fn new(ctx: &'a Context<'a>, state: usize, dir: Direction, room: &[crate::bins::Bins]) -> Option<Self> {
        let mut subs = Vec::new();
        let mut norm = 0.0;
        for (j, bins) in room.iter().enumerate() {
            let Some(t) = ctx.traffic.by_state.get(state)?.get(j).and_then(|x| x[dir as usize].as_ref()) else {
                continue;
            };
            let (mut at, mut cum_f, mut cum_n) = (Vec::new(), Vec::new(), Vec::new());
            let (mut f_sum, mut n_sum) = (0.0, 0.0);
            for (lo, hi, c) in bins.buckets() {
                let r = (lo + hi) as f64 / 2.0 * ROOM_UNIT_MS;
                f_sum += c as f64 * t.idt.cdf(r);
                n_sum += c as f64;
                at.push(r);
                cum_f.push(f_sum);
                cum_n.push(n_sum);
            }
            norm += f_sum;
            subs.push(Rooms { sub: j, at, cum_f, cum_n, n: n_sum });
        }
        (norm > 0.0).then_some(Truncated { ctx, state, dir, subs, norm })
    }

    /// G(x) / G(∞): departures whose room is at most x add F(room), the others F(x).
    pub(crate) fn cdf(&self, x: f64) -> f64 {
        let mut g = 0.0;
        for r in &self.subs {
            let i = r.at.partition_point(|v| *v <= x);
            let (below_f, below_n) = if i == 0 { (0.0, 0.0) } else { (r.cum_f[i - 1], r.cum_n[i - 1]) };
            let f = self.ctx.traffic.by_state[self.state][r.sub][self.dir as usize].as_ref().map_or(0.0, |t| t.idt.cdf(x));
            g += below_f + f * (r.n - below_n);
        }
        (g / self.norm).clamp(0.0, 1.0)
    }
}

/// A category's row before its directions: its stays, player-seconds and share of them.
pub(crate) fn category_row(ctx: &Context, state: usize, ps: &[f64]) -> CategoryStats {
    let total_ps: f64 = ps.iter().sum();
    CategoryStats {
        category: ctx.service.states[state].name.clone(),
        stays: ctx.segments.iter().flatten().filter(|s| s.state as usize == state && s.start_s < ctx.duration_s).count() as u64,
        player_seconds: ps[state],
        occupancy_share: if total_ps > 0.0 { ps[state] / total_ps } else { 0.0 },
        ..Default::default()
    }
}

/// A direction's counts, rates and mean size: the part of its row that is exact from raw
/// records and from merged summaries alike.
pub(crate) fn counted(ctx: &Context, sent: u64, received: u64, bytes: u64, player_seconds: f64) -> DirectionStats {
    let mut s = DirectionStats { sent, received, lost: sent.saturating_sub(received), bytes, ..Default::default() };
    s.bitrate_bps = crate::metrics::interval_rates(received, bytes, ctx.duration_s).1;
    // APDUs per player-second: the interval is the time players spent in the category.
    s.apdu_rate_per_player = crate::metrics::interval_rates(received, bytes, player_seconds).0;
    s.departure_rate_per_player = crate::metrics::interval_rates(sent, 0, player_seconds).0;
    s.mean_size = if received > 0 { bytes as f64 / received as f64 } else { 0.0 };
    s.size_samples = received;
    s
}

/// The model's side of a category's row: mean size, APDU rate, IDT variability, and the
/// measured rate's error against it.
pub(crate) fn fill_model(ctx: &Context, k: usize, w: &[Vec<f64>; 2], dir: Direction, s: &mut DirectionStats) {
    // The rate is a mixture over stays (weights by player-seconds), not over APDUs.
    let by_time = stay_weights(ctx, k, dir, w);
    s.model_mean_size = model_mean(ctx, w, k, dir, true);
    s.model_apdu_rate_per_player = model_rate(ctx, &by_time, k, dir);
    s.model_idt_cv = model_cv(ctx, w, k, dir);
    if let Some(m) = s.model_apdu_rate_per_player {
        if s.received > 0 {
            s.rate_error_pct = Some((s.apdu_rate_per_player - m) / m * 100.0);
        }
        if s.sent > 0 {
            s.departure_rate_error_pct = Some((s.departure_rate_per_player - m) / m * 100.0);
        }
    }
}

/// Per-sub-activity weights by time spent, recovered from APDU weights (divide out the rate).
fn stay_weights(ctx: &Context, state: usize, dir: Direction, w: &[Vec<f64>; 2]) -> Vec<f64> {
    let v: Vec<f64> = w[dir as usize]
        .iter()
        .enumerate()
        .map(|(j, x)| ctx.traffic.by_state[state][j][dir as usize].as_ref().and_then(|t| t.idt.mean_estimate()).map_or(0.0, |m| x * m))
        .collect();
    let total: f64 = v.iter().sum();
    if total > 0.0 {
        v.iter().map(|x| x / total).collect()
    } else {
        v
    }
}

/// APDUs per second per player: Σ_sub (time share × 1000 / mean IDT).
fn model_rate(ctx: &Context, by_time: &[f64], state: usize, dir: Direction) -> Option<f64> {
    let mut acc = 0.0;
    for (j, w) in by_time.iter().enumerate() {
        let m = ctx.traffic.by_state[state][j][dir as usize].as_ref()?.idt.mean_estimate()?;
        if m > 0.0 {
            acc += w * 1000.0 / m;
        }
    }
    (acc > 0.0).then_some(acc)
}

/// The per-category table of a run, for the terminal (brief columns), the report and files.
pub fn table(g: &GameAnalysis) -> crate::table::Table {
    use crate::table::{Cell, Column, Table};
    let mut t = Table::new(vec![
        Column::new("category", "category"),
        Column::new("occupancy_pct", "occ %"),
        Column::new("dir", "dir"),
        Column::full("sent", "sent"),
        Column::new("received", "APDUs"),
        // one definition per transport, named as the report's path figure names it
        Column::new("lost", if g.tcp { "undelivered" } else { "lost" }),
        Column::new("kbit_s", "kbit/s"),
        Column::new("apdu_rate_per_player", "APDU/s/p"),
        Column::new("model_apdu_rate_per_player", "model"),
        Column::full("rate_error_pct", "error %"),
        Column::full("mean_size", "size B"),
        Column::full("model_mean_size", "model B"),
        Column::new("ks_size", "KS size"),
        Column::new("ks_iat", "KS IAT"),
        Column::full("departure_rate_error_pct", "sent err %"),
        Column::full("ks_departure_size", "KS sent size"),
        Column::full("ks_departure_iat", "KS sent IDT"),
        Column::full("path_ks_size", "path KS size"),
        Column::full("path_ks_iat", "path KS IAT"),
        // the median leads: one stalled connection moves a mean by seconds (issue 65)
        Column::new("delay_p50_ms", "delay p50 ms"),
        Column::full("delay_p99_ms", "delay p99 ms"),
        Column::full("delay_mean_ms", "delay mean ms"),
        Column::full("jitter_ms", "jitter ms"),
    ]);
    let row = |cat: &str, occ: Option<f64>, dir: &str, st: &DirectionStats| {
        vec![
            Cell::text(cat),
            Cell::opt(occ.map(|o| o * 100.0), 1),
            Cell::text(dir),
            Cell::Int(st.sent),
            Cell::Int(st.received),
            Cell::Int(st.lost),
            Cell::Num(st.bitrate_bps / 1e3, 1),
            Cell::Num(st.apdu_rate_per_player, 3),
            Cell::opt(st.model_apdu_rate_per_player, 3),
            Cell::opt(st.rate_error_pct, 2),
            Cell::Num(st.mean_size, 1),
            Cell::opt(st.model_mean_size, 1),
            Cell::opt(st.ks_size, 3),
            Cell::opt(st.ks_iat, 3),
            Cell::opt(st.departure_rate_error_pct, 2),
            Cell::opt(st.ks_departure_size, 3),
            Cell::opt(st.ks_departure_iat, 3),
            Cell::opt(st.path_ks_size, 3),
            Cell::opt(st.path_ks_iat, 3),
            Cell::opt(st.delay_p50_ms, 3),
            Cell::opt(st.delay_p99_ms, 3),
            Cell::opt(st.delay_mean_ms, 3),
            Cell::opt(st.jitter_ms, 3),
        ]
    };
    for c in &g.categories {
        t.push(row(&c.category, Some(c.occupancy_share), "up", &c.up));
        t.push(row(&c.category, Some(c.occupancy_share), "down", &c.down));
    }
    t.push(row("total", None, "up", &g.up));
    t.push(row("total", None, "down", &g.down));
    t
}
