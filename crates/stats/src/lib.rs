//! Turns per-packet log records into the statistics people report: rates, one-way delay or
//! round-trip time with percentiles, RFC 3550 jitter, loss and loss bursts, duplicates,
//! reordering, send lateness; per flow, in total and per time window. Pure: bytes in, numbers
//! out; the CLI does the file I/O and the formatting lives in [`export`].
//!
//! Definitions (stated once, used everywhere):
//! - rates use intervals: (n − 1) packets over the span from the first to the last arrival;
//! - delay = arrival − send time carried in the packet (one-way), or echo arrival − original send
//!   time (round trip) when the sender's log holds echoes;
//! - jitter = RFC 3550 §6.4.1 estimator J += (|D| − J)/16 over arrival order, in ms; `ipdv` is
//!   the mean |Δdelay| between consecutive arrivals;
//! - loss: with the sender's log, sent sequence numbers never received; otherwise the gaps in the
//!   received sequence range. A loss burst is a run of consecutive lost sequence numbers. A
//!   sender's log alone (no receiver log, no echoes) says nothing about loss: it is not computed;
//! - duplicates: arrivals of a sequence number already seen; reordered: arrivals whose sequence
//!   number is below the highest seen before it (RFC 4737's reordered packets).

use std::collections::BTreeMap;

pub use collect::{collect, Collected, FlowEnds};
use collect::{Arrival, FlowAcc};

use horde_wire::{log, Record, WireError};
use serde::Serialize;

pub mod bins;
pub mod charts;
mod collect;
pub mod columnar;
pub mod digest;
pub mod export;
pub mod flowsum;
pub mod game;
pub mod html;
pub mod metrics;
pub mod offsets;
pub mod packets;
pub mod quantile;
pub mod table;

/// Records of one log, with what its header said.
pub struct LoadedLog {
    pub role: horde_wire::Role,
    pub records: Vec<Record>,
    /// Bytes after the last whole record (a log cut off mid-write).
    pub trailing_bytes: usize,
}

/// Parses a whole log file's bytes.
pub fn load(bytes: &[u8]) -> Result<LoadedLog, WireError> {
    let (h, it) = log::read_all(bytes)?;
    let records = it.collect::<Result<Vec<_>, _>>()?;
    Ok(LoadedLog { role: h.role, records, trailing_bytes: log::trailing_bytes(bytes) })
}

/// A log file's records, or what is wrong with it (naming the file).
pub fn records_of(p: &std::path::Path) -> Result<Vec<Record>, String> {
    let bytes = std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()))?;
    Ok(load(&bytes).map_err(|e| format!("{}: {e}", p.display()))?.records)
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Window length for the time series, ns (None: no series).
    pub window_ns: Option<u64>,
    /// Where the windows count from, ns since the epoch (None: the first departure, else the
    /// first arrival). Runs through agents count them from the run's start, the instant every
    /// agent was given, so that their summaries ([`flowsum`]) bin exactly as their logs do.
    pub anchor_ns: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct DelayStats {
    /// "owd" (one-way delay) or "rtt" (round-trip time).
    pub kind: &'static str,
    pub samples: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    pub stddev_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    /// RFC 3550 interarrival jitter at the end of the flow.
    pub jitter_ms: f64,
    /// Mean |delay(i) − delay(i−1)| over consecutive arrivals.
    pub ipdv_mean_ms: f64,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct LossStats {
    /// Packets the sender sent (from its log), if given.
    pub sent: Option<u64>,
    pub expected: u64,
    pub lost: u64,
    pub loss_pct: f64,
    pub bursts: u64,
    pub burst_mean: f64,
    pub burst_max: u64,
    /// Burst length → number of bursts of that length.
    pub burst_hist: BTreeMap<u64, u64>,
    pub duplicates: u64,
    pub reordered: u64,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct Lateness {
    pub packets: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// p99 of |actual − scheduled|.
    pub abs_p99_us: f64,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct FlowStats {
    /// Flow id; `None` in the total row.
    pub flow: Option<u32>,
    /// The flow's name from its flow file (`decode --flows`), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub packets: u64,
    pub bytes: u64,
    pub duration_s: f64,
    pub bitrate_bps: f64,
    pub pkt_rate: f64,
    pub min_size: u64,
    pub max_size: u64,
    pub delay: Option<DelayStats>,
    pub loss: Option<LossStats>,
    /// Departure lateness, when the sender's log was given.
    pub send_lateness: Option<Lateness>,
    /// Most frequent TOS / TTL seen at the receiver (255 / 0 when not reported).
    pub tos: Option<u8>,
    pub ttl: Option<u8>,
    /// The receiver's bulk back to a reverse flow (`send --reverse`), from the sender's log.
    #[serde(default)]
    pub reverse: bool,
    /// The flow's source (the end that opened it) and destination, `address:port`, from the
    /// logs' endpoint records (logs of version 2 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// "udp", "tcp" or "icmp", from the endpoint records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Several sources used this flow id (their packets are mixed in this row).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_id: bool,
    /// The id a receiver's log keys this flow by, where it differs from `flow` (the sender's):
    /// another source used the same flow id first, and a flow is one (source, flow id) pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_in_log: Option<u32>,
    /// The sender's end-of-flow message, as the receiver logged it: absent where the receiver
    /// got none (the sender died, is still running, or is not `horde send`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<EndStats>,
}

/// What a sender said of its flow when it ended.
#[derive(Debug, Clone, Serialize, serde::Deserialize, Default, PartialEq, schemars::JsonSchema)]
pub struct EndStats {
    /// "done", "interrupted" or "consent lapsed".
    pub reason: String,
    /// Packets (APDUs) and bytes the sender counted.
    pub packets: u64,
    pub bytes: u64,
}

impl FlowStats {
    /// The flow column's text: its id, "ID rev" for a reverse flow's arrivals, "total".
    pub fn label(&self) -> String {
        match self.flow {
            Some(x) if self.reverse => format!("{x} rev"),
            Some(x) => x.to_string(),
            None => "total".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct Window {
    /// Seconds since the first departure (the first arrival when no sender log was given; the
    /// run's start for flows run through agents).
    pub start_s: f64,
    pub flow: Option<u32>,
    pub packets: u64,
    pub bytes: u64,
    pub bitrate_bps: f64,
    pub pkt_rate: f64,
    pub delay_mean_ms: Option<f64>,
    pub delay_max_ms: Option<f64>,
    pub jitter_ms: Option<f64>,
    /// Sent in this window (by send time) and never received, when the sender's log was given.
    pub lost: Option<u64>,
    /// A reverse flow's arrivals (see [`FlowStats::reverse`]).
    #[serde(default)]
    pub reverse: bool,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct Analysis {
    pub flows: Vec<FlowStats>,
    pub total: FlowStats,
    pub windows: Vec<Window>,
    pub window_s: Option<f64>,
    /// Records whose kind did not fit the log's role, ignored.
    pub ignored_records: u64,
    /// Where a live log server (`horde logd`) marked records missing from a streamed log.
    #[serde(default)]
    pub gaps: Vec<GapStats>,
    /// Whether a receiver's log was among the inputs (without one, and without echoes, there
    /// is no loss or delay to compute: only departures).
    pub has_receiver_log: bool,
}

/// A gap a live log server marked in a streamed log.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct GapStats {
    /// Which of the logs given (0 = the first).
    pub log: usize,
    pub reason: String,
    /// Records missing, where known (a source that was lost cannot say).
    pub records: Option<u64>,
    /// From when, ns since the epoch.
    pub since_ns: u64,
}

/// Analyses any mix of sender and receiver logs, matching records by flow and sequence.
pub fn analyse(logs: &[LoadedLog], opts: Options) -> Analysis {
    analyse_collected(&collect(logs), opts)
}

/// The analysis of records already sorted into flows ([`collect`]): what `decode` uses when it
/// also writes the per-packet table from the same pass.
pub fn analyse_collected(c: &Collected, opts: Options) -> Analysis {
    let Collected { flows, back, ends, ignored, gaps, has_receiver } = c;
    let (ignored, has_receiver) = (*ignored, *has_receiver);
    let mut out = Analysis {
        ignored_records: ignored,
        gaps: gaps.clone(),
        window_s: opts.window_ns.map(|w| w as f64 / 1e9),
        has_receiver_log: has_receiver,
        ..Default::default()
    };
    let mut total_delay = DelayAcc::default();
    let mut total_late = LateAcc::default();
    let mut total_loss: Option<LossStats> = None;
    let (mut first, mut last) = (u64::MAX, 0u64);
    // The total's delay pools one-way delays; round trips only when no flow measured one-way.
    let any_owd = flows.values().chain(back.values()).any(|a| !a.rx.is_empty());
    let all = flows.iter().map(|(id, acc)| (id, acc, false)).chain(back.iter().map(|(id, acc)| (id, acc, true)));
    for (id, acc, reverse) in all {
        let (mut stats, d, late) = flow_stats(*id, acc, has_receiver || reverse);
        stats.reverse = reverse;
        stats.end = acc.said.map(|e| EndStats { reason: e.reason.name().to_string(), packets: e.packets, bytes: e.bytes });
        if let Some(e) = ends.get(id) {
            stats.src = e.src.map(|a| a.to_string());
            stats.dst = e.dst.map(|a| a.to_string());
            stats.protocol = e.protocol.map(horde_wire::log::protocol_name);
            stats.shared_id = e.shared;
            if let Some(w) = e.sender_id {
                (stats.flow, stats.id_in_log) = (Some(w), Some(*id));
            }
        }
        if (d.kind == "owd") == any_owd {
            total_delay.merge(&d);
        }
        total_late.merge(&late);
        if let Some(l) = &stats.loss {
            add_loss(total_loss.get_or_insert_with(LossStats::default), l);
        }
        let arrivals = if acc.rx.is_empty() { &acc.echo } else { &acc.rx };
        for a in arrivals {
            first = first.min(a.recv);
            last = last.max(a.recv);
        }
        add_row(&mut out.total, &stats);
        out.flows.push(stats);
    }
    out.total.loss = total_loss.map(close_loss);
    out.total.delay = total_delay.finish();
    out.total.send_lateness = total_late.finish();
    set_span(&mut out.total, first, last);
    if let Some(w) = opts.window_ns {
        let first_send = opts.anchor_ns.unwrap_or_else(|| flows.values().flat_map(|a| a.tx.iter().map(|t| t.2)).min().unwrap_or(first).min(first));
        out.windows = windows(flows, w, first_send, has_receiver);
        let mut rev = windows(back, w, first_send, true);
        rev.iter_mut().for_each(|x| x.reverse = true);
        out.windows.append(&mut rev);
    }
    out
}

/// Adds a flow's loss to the total row's (the decode's and the summaries' analyses alike).
fn add_loss(t: &mut LossStats, l: &LossStats) {
    t.sent = match (t.sent, l.sent) {
        (None, s) if t.expected == 0 => s,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    };
    t.expected = t.expected.saturating_add(l.expected);
    t.lost = t.lost.saturating_add(l.lost);
    t.bursts = t.bursts.saturating_add(l.bursts);
    t.burst_max = t.burst_max.max(l.burst_max);
    t.duplicates = t.duplicates.saturating_add(l.duplicates);
    t.reordered = t.reordered.saturating_add(l.reordered);
    for (k, v) in &l.burst_hist {
        let e = t.burst_hist.entry(*k).or_default();
        *e = e.saturating_add(*v);
    }
}

/// The total row's percentage and mean burst, once every flow's loss was added.
fn close_loss(mut t: LossStats) -> LossStats {
    t.loss_pct = pct(t.lost, t.expected);
    t.burst_mean = if t.bursts > 0 { t.lost as f64 / t.bursts as f64 } else { 0.0 };
    t
}

/// The total row's duration and rates, from its first and last arrival (ns).
fn set_span(total: &mut FlowStats, first: u64, last: u64) {
    if last > first && total.packets > 1 {
        total.duration_s = (last - first) as f64 / 1e9;
        (total.pkt_rate, total.bitrate_bps) = metrics::span_rates(total.packets, total.bytes, total.duration_s);
    }
}

/// Adds a flow row's packets, bytes and sizes to the total row's.
fn add_row(total: &mut FlowStats, stats: &FlowStats) {
    total.packets = total.packets.saturating_add(stats.packets);
    total.bytes = total.bytes.saturating_add(stats.bytes);
    total.min_size = if total.packets == stats.packets { stats.min_size } else { total.min_size.min(stats.min_size) };
    total.max_size = total.max_size.max(stats.max_size);
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn flow_stats(id: u32, acc: &FlowAcc, has_receiver: bool) -> (FlowStats, DelayAcc, LateAcc) {
    let rtt = acc.rx.is_empty() && !acc.echo.is_empty();
    let arr = if rtt { &acc.echo } else { &acc.rx };
    let mut s = FlowStats { flow: Some(id), ..Default::default() };
    s.packets = arr.len() as u64;
    s.bytes = arr.iter().map(|a| a.size as u64).sum();
    s.min_size = arr.iter().map(|a| a.size as u64).min().unwrap_or(0);
    s.max_size = arr.iter().map(|a| a.size as u64).max().unwrap_or(0);
    if arr.len() > 1 {
        let first = arr.iter().map(|a| a.recv).min().unwrap();
        let last = arr.iter().map(|a| a.recv).max().unwrap();
        if last > first {
            s.duration_s = (last - first) as f64 / 1e9;
            (s.pkt_rate, s.bitrate_bps) = metrics::span_rates(s.packets, s.bytes, s.duration_s);
        }
    }
    let mut d = DelayAcc { kind: if rtt { "rtt" } else { "owd" }, ..Default::default() };
    for a in arr {
        d.push(a.send, a.recv);
    }
    s.delay = d.clone().finish();
    if !rtt {
        s.tos = mode(arr.iter().map(|a| a.tos));
        s.ttl = mode(arr.iter().map(|a| a.ttl));
    }
    if !arr.is_empty() || acc.said.is_some() || (!acc.tx.is_empty() && has_receiver) {
        s.loss = Some(loss(arr, acc));
    }
    let mut late = LateAcc::default();
    for (_, sched, actual, _) in &acc.tx {
        late.push(*sched, *actual);
    }
    s.send_lateness = late.clone().finish();
    if arr.is_empty() && !acc.tx.is_empty() {
        // Sender log only: describe what was sent.
        s.packets = acc.tx.len() as u64;
        s.bytes = acc.tx.iter().map(|t| t.3 as u64).sum();
        let first = acc.tx.iter().map(|t| t.2).min().unwrap();
        let last = acc.tx.iter().map(|t| t.2).max().unwrap();
        if last > first {
            s.duration_s = (last - first) as f64 / 1e9;
            (s.pkt_rate, s.bitrate_bps) = metrics::span_rates(s.packets, s.bytes, s.duration_s);
        }
    }
    (s, d, late)
}

fn mode(it: impl Iterator<Item = u8>) -> Option<u8> {
    let mut c = [0u64; 256];
    let mut any = false;
    for v in it {
        c[v as usize] += 1;
        any = true;
    }
    any.then(|| (0..256).max_by_key(|&i| c[i]).unwrap() as u8)
}

fn loss(arr: &[Arrival], acc: &FlowAcc) -> LossStats {
    let mut l = LossStats::default();
    let mut max_seen: Option<u64> = None;
    for a in arr {
        if max_seen.is_some_and(|m| a.seq < m) {
            l.reordered += 1;
        }
        max_seen = Some(max_seen.map_or(a.seq, |m| m.max(a.seq)));
    }
    let mut seqs: Vec<u64> = arr.iter().map(|a| a.seq).collect();
    seqs.sort_unstable();
    let n = seqs.len();
    seqs.dedup();
    l.duplicates = (n - seqs.len()) as u64;
    l.sent = if acc.tx.is_empty() { acc.said.map(|e| e.packets) } else { Some(acc.tx.len() as u64) };
    let Some((lo, hi)) = acc.loss_range(seqs.first().copied().zip(seqs.last().copied())) else {
        return l;
    };
    // In u128: a log's sequence numbers may span all of u64 (a damaged or hostile one).
    l.expected = ((hi as u128 - lo as u128 + 1).min(u64::MAX as u128)) as u64;
    let mut next = lo as u128;
    let in_range = seqs.iter().map(|&s| s as u128).filter(|s| (lo as u128..=hi as u128).contains(s));
    for s in in_range.chain(std::iter::once(hi as u128 + 1)) {
        let gap = (s - next).min(u64::MAX as u128) as u64;
        if gap > 0 {
            l.lost = l.lost.saturating_add(gap);
            l.bursts += 1;
            l.burst_max = l.burst_max.max(gap);
            *l.burst_hist.entry(gap).or_default() += 1;
        }
        next = s + 1;
    }
    l.loss_pct = pct(l.lost, l.expected);
    l.burst_mean = if l.bursts > 0 { l.lost as f64 / l.bursts as f64 } else { 0.0 };
    l
}

/// Delay accumulator: exact min/max/mean/stddev, HDR histogram for percentiles, jitter.
#[derive(Clone)]
struct DelayAcc {
    kind: &'static str,
    n: u64,
    sum: f64,
    sumsq: f64,
    min: i64,
    max: i64,
    /// Delays shifted by `offset` so negative one-way delays (unsynchronised clocks) fit.
    values: Vec<i64>,
    jitter: metrics::Jitter,
    ipdv_sum: f64,
    prev: Option<(u64, u64)>,
}

impl Default for DelayAcc {
    fn default() -> Self {
        DelayAcc {
            kind: "owd",
            n: 0,
            sum: 0.0,
            sumsq: 0.0,
            min: i64::MAX,
            max: i64::MIN,
            values: Vec::new(),
            jitter: metrics::Jitter::default(),
            ipdv_sum: 0.0,
            prev: None,
        }
    }
}

impl DelayAcc {
    fn push(&mut self, send: u64, recv: u64) {
        // Saturating: times come from files, which may claim anything.
        let d = (recv as i64).saturating_sub(send as i64);
        self.n += 1;
        self.sum += d as f64;
        self.sumsq += (d as f64) * (d as f64);
        self.min = self.min.min(d);
        self.max = self.max.max(d);
        self.values.push(d);
        if let Some((ps, pr)) = self.prev {
            let dd = (recv as i64).saturating_sub(pr as i64).saturating_sub((send as i64).saturating_sub(ps as i64));
            self.jitter.update(dd);
            self.ipdv_sum += dd.unsigned_abs() as f64;
        }
        self.prev = Some((send, recv));
    }

    fn merge(&mut self, o: &DelayAcc) {
        if o.n == 0 {
            return;
        }
        self.kind = o.kind;
        self.sum += o.sum;
        self.sumsq += o.sumsq;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.values.extend_from_slice(&o.values);
        // Total jitter: packet-weighted mean of the flows' jitter.
        self.jitter = metrics::Jitter::pooled(self.jitter, self.n, o.jitter, o.n);
        self.ipdv_sum += o.ipdv_sum;
        self.n += o.n;
    }

    fn finish(mut self) -> Option<DelayStats> {
        self.values.sort_unstable();
        let values = std::mem::take(&mut self.values);
        self.stats(|p| quantile::nearest_rank(&values, p).unwrap_or(0))
    }

    /// The figures, percentiles from `q` (ns): one formula for the raw samples and for
    /// summaries ([`flowsum`]).
    fn stats(&self, q: impl Fn(f64) -> i64) -> Option<DelayStats> {
        if self.n == 0 {
            return None;
        }
        let q = |p: f64| q(p) as f64 / 1e6;
        let n = self.n as f64;
        let mean = self.sum / n;
        Some(DelayStats {
            kind: self.kind,
            samples: self.n,
            min_ms: self.min as f64 / 1e6,
            mean_ms: mean / 1e6,
            max_ms: self.max as f64 / 1e6,
            stddev_ms: ((self.sumsq / n - mean * mean).max(0.0)).sqrt() / 1e6,
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            jitter_ms: self.jitter.ms(),
            ipdv_mean_ms: if self.n > 1 { self.ipdv_sum / (n - 1.0) / 1e6 } else { 0.0 },
        })
    }
}

#[derive(Clone, Default)]
struct LateAcc {
    values: Vec<i64>,
}

impl LateAcc {
    fn push(&mut self, sched: u64, actual: u64) {
        self.values.push((actual as i64).saturating_sub(sched as i64));
    }

    fn merge(&mut self, o: &LateAcc) {
        self.values.extend_from_slice(&o.values);
    }

    fn finish(mut self) -> Option<Lateness> {
        if self.values.is_empty() {
            return None;
        }
        self.values.sort_unstable();
        let n = self.values.len();
        let q = |v: &[i64], p: f64| quantile::nearest_rank(v, p).unwrap_or(0) as f64 / 1e3;
        let mut abs: Vec<i64> = self.values.iter().map(|v| v.saturating_abs()).collect();
        abs.sort_unstable();
        Some(Lateness {
            packets: n as u64,
            mean_us: self.values.iter().map(|&v| v as f64).sum::<f64>() / n as f64 / 1e3,
            p50_us: q(&self.values, 0.5),
            p99_us: q(&self.values, 0.99),
            p999_us: q(&self.values, 0.999),
            max_us: *self.values.last().unwrap() as f64 / 1e3,
            abs_p99_us: q(&abs, 0.99),
        })
    }
}

/// Per flow and window of `w` ns. Departures count as lost only where arrivals were logged
/// (a receiver's log, or echoes): a sender's log alone knows nothing of losses.
fn windows(flows: &BTreeMap<u32, FlowAcc>, w: u64, first_send: u64, has_receiver: bool) -> Vec<Window> {
    let mut out: BTreeMap<(u64, u32), (Window, DelayAcc)> = BTreeMap::new();
    for (id, acc) in flows {
        let rtt = acc.rx.is_empty();
        let arr = if rtt { &acc.echo } else { &acc.rx };
        for a in arr {
            let k = (a.recv.saturating_sub(first_send)) / w;
            let e =
                out.entry((k, *id)).or_insert_with(|| (Window { start_s: (k * w) as f64 / 1e9, flow: Some(*id), ..Default::default() }, DelayAcc::default()));
            e.0.packets += 1;
            e.0.bytes += a.size as u64;
            e.1.push(a.send, a.recv);
        }
        if !acc.tx.is_empty() && (has_receiver || !acc.echo.is_empty()) {
            let got: std::collections::HashSet<u64> = arr.iter().map(|a| a.seq).collect();
            for (seq, _, actual, _) in &acc.tx {
                let k = actual.saturating_sub(first_send) / w;
                let e = out
                    .entry((k, *id))
                    .or_insert_with(|| (Window { start_s: (k * w) as f64 / 1e9, flow: Some(*id), ..Default::default() }, DelayAcc::default()));
                *e.0.lost.get_or_insert(0) += (!got.contains(seq)) as u64;
            }
        }
    }
    let secs = w as f64 / 1e9;
    out.into_values()
        .map(|(mut win, d)| {
            (win.pkt_rate, win.bitrate_bps) = metrics::interval_rates(win.packets, win.bytes, secs);
            if let Some(ds) = d.finish() {
                win.delay_mean_ms = Some(ds.mean_ms);
                win.delay_max_ms = Some(ds.max_ms);
                win.jitter_ms = Some(ds.jitter_ms);
            }
            win
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_wire::{RecordKind, Role};

    fn rec(kind: RecordKind, seq: u64, send: u64, recv: u64) -> Record {
        Record { flow: 1, size: 100, seq, t_a: send, t_b: recv, tag: 0, tos: 0xb8, ttl: 64, kind, flags: 0 }
    }

    #[test]
    fn loss_bursts_duplicates_and_reordering() {
        // sent 0..10; received 0,1,2,5,4,4,9 (3 lost in burst 6-8? no: 3 and 6,7,8)
        let tx: Vec<Record> = (0..10).map(|s| rec(RecordKind::Sent, s, s * 1000, s * 1000)).collect();
        let rx: Vec<Record> = [0, 1, 2, 5, 4, 4, 9].iter().map(|&s| rec(RecordKind::Received, s, s * 1000, s * 1000 + 500)).collect();
        let a = analyse(
            &[LoadedLog { role: Role::Sender, records: tx, trailing_bytes: 0 }, LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 }],
            Options::default(),
        );
        let l = a.flows[0].loss.as_ref().unwrap();
        assert_eq!((l.sent, l.expected, l.lost, l.bursts, l.burst_max, l.duplicates, l.reordered), (Some(10), 10, 4, 2, 3, 1, 2));
        assert_eq!(l.burst_hist, BTreeMap::from([(1, 1), (3, 1)]));
        assert!((l.loss_pct - 40.0).abs() < 1e-9);
        let d = a.flows[0].delay.as_ref().unwrap();
        assert!((d.mean_ms - 0.0005).abs() < 1e-12 && d.jitter_ms == 0.0);
    }

    #[test]
    fn rates_jitter_and_percentiles() {
        // 1001 packets 1 ms apart; delay alternates 1 ms / 3 ms.
        let rx: Vec<Record> =
            (0..1001).map(|s| rec(RecordKind::Received, s, s * 1_000_000, s * 1_000_000 + if s % 2 == 0 { 1_000_000 } else { 3_000_000 })).collect();
        let a = analyse(&[LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 }], Options { window_ns: Some(100_000_000), anchor_ns: None });
        let f = &a.flows[0];
        assert!((f.pkt_rate - 1000.0).abs() < 3.0, "{}", f.pkt_rate);
        let d = f.delay.as_ref().unwrap();
        assert!((d.mean_ms - 2.0).abs() < 0.01 && (d.min_ms - 1.0).abs() < 1e-9 && (d.max_ms - 3.0).abs() < 1e-9);
        assert!((d.p99_ms - 3.0).abs() < 0.01 && (d.p50_ms - 1.0).abs() < 0.01, "{d:?}");
        // |D| = 2 ms every packet: J converges to 2 ms, ipdv mean is 2 ms.
        assert!((d.jitter_ms - 2.0).abs() < 0.01 && (d.ipdv_mean_ms - 2.0).abs() < 1e-9);
        assert_eq!(f.tos, Some(0xb8));
        assert!(a.windows.len() >= 10);
        assert_eq!(a.flows[0].loss.as_ref().unwrap().lost, 0);
    }

    /// Issue 21: `horde decode client.hlog server.hlog` of a two-way run reported thousands of
    /// duplicates and no up-direction delay (both sides' departures of a player were one flow).
    #[test]
    fn a_two_way_runs_pair_of_logs_is_two_directions() {
        let (mut client, mut server) = (Vec::new(), Vec::new());
        for s in 0..10u64 {
            let t = s * 1_000_000;
            client.push(rec(RecordKind::Sent, s, t, t));
            server.push(rec(RecordKind::Received, s, t, t + 2_000_000));
            if s < 8 {
                server.push(rec(RecordKind::Sent, s, t, t));
                client.push(rec(RecordKind::Received, s, t, t + 1_000_000));
            }
        }
        client.push(rec(RecordKind::Sent, 10, 10_000_000, 10_000_000)); // lost on its way up
        let a = analyse(
            &[LoadedLog { role: Role::Sender, records: client, trailing_bytes: 0 }, LoadedLog { role: Role::Sender, records: server, trailing_bytes: 0 }],
            Options::default(),
        );
        let up = a.flows.iter().find(|f| !f.reverse).unwrap();
        let down = a.flows.iter().find(|f| f.reverse).unwrap();
        let (lu, ld) = (up.loss.as_ref().unwrap(), down.loss.as_ref().unwrap());
        assert_eq!((lu.sent, lu.lost, lu.duplicates), (Some(11), 1, 0));
        assert_eq!((ld.sent, ld.lost, ld.duplicates), (Some(8), 0, 0));
        assert!((up.delay.as_ref().unwrap().mean_ms - 2.0).abs() < 1e-9 && (down.delay.as_ref().unwrap().mean_ms - 1.0).abs() < 1e-9);
    }

    #[test]
    fn udp_sequence_numbers_unwrap() {
        let seqs = [u32::MAX as u64 - 1, u32::MAX as u64, 0, 1];
        let rx: Vec<Record> = seqs.iter().enumerate().map(|(i, &s)| rec(RecordKind::Received, s, i as u64, i as u64 + 5)).collect();
        let a = analyse(&[LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 }], Options::default());
        let l = a.flows[0].loss.as_ref().unwrap();
        assert_eq!((l.expected, l.lost, l.reordered), (4, 0, 0));
    }
}
