//! Flow runs summarised where their records are (`horde send --agents … --collect summaries`):
//! each agent reduces its own log — the flows it sent, or the flows it received — to one
//! [`FlowSummaries`], and the controller turns every agent's into the decode's [`Analysis`]
//! ([`analyse`]) without a raw record.
//!
//! Each figure is either carried exactly or derived with a stated bound:
//! - exact: packets, bytes, sizes, rates and durations, loss (expected, lost, every burst),
//!   duplicates, reordering, TOS/TTL, mean/min/max/stddev of the delay, RFC 3550 jitter, IPDV,
//!   every window's packets, bytes, delay mean and max, jitter and loss, the endpoints and the
//!   sender's end message. Loss stays exact because a receiver's summary keeps the sequence
//!   numbers that arrived as ranges (one per loss burst), and a sender's keeps what it sent in
//!   each window as runs of consecutive numbers;
//! - within a bound: delay and send-lateness percentiles come from HDR histograms of 3
//!   significant digits in ns, so each is within one bucket of the raw nearest rank: 1 ns plus
//!   1/1,024 of its value ([`BOUND_TEXT`]); the lateness mean is summed in another order than
//!   the decode's (a relative error below 1e-12).
//!
//! The one thing a summary needs to know in advance is where the windows start: runs through
//! agents count them from the run's start ([`crate::Options::anchor_ns`]) in both paths.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use horde_wire::{Endpoint, RecordKind, Role};
use serde::{Deserialize, Serialize};

use crate::collect::{Arrival, FlowAcc};
use crate::digest::DigestError;
use crate::digest::Signed;
use crate::{DelayAcc, EndStats, GapStats, LoadedLog};

mod analysis;
#[cfg(test)]
mod tests;

pub use analysis::analyse;
pub use compare::{compare, Comparison};

mod compare;

/// The percentiles' bound, as reports state it.
pub const BOUND_TEXT: &str = "delay and lateness percentiles within 1 ns + 1/1,024 of the value (HDR, 3 significant digits); everything else exact";

/// Significant digits of the summaries' histograms.
const SIG: u8 = 3;

/// One log's flows, summarised.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowSummaries {
    /// "sender" or "receiver": the log's role (the decode pairs a sender's departures with a
    /// receiver's arrivals).
    pub role: String,
    /// The windows' length and start (ns; 0: no windows).
    pub window_ns: u64,
    pub anchor_ns: u64,
    pub flows: Vec<FlowSummary>,
    /// Every flow's endpoint records, in the order the log had them, repeats left out.
    pub ends: Vec<(u32, Vec<EndNote>)>,
    /// Records whose kind did not fit the log's role.
    pub ignored: u64,
    pub gaps: Vec<GapStats>,
}

/// A flow's (or its reverse direction's) part of one log.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowSummary {
    pub flow: u32,
    /// Arrivals in a sender's log: the receiver's bulk back to a reverse flow.
    pub reverse: bool,
    pub rx: Option<Arrivals>,
    /// Echoes a sender's log holds (round trips).
    pub echo: Option<Arrivals>,
    pub tx: Option<Departures>,
    /// The sender's end message as the receiver logged it.
    pub said: Option<EndStats>,
}

/// An endpoint record: which end, its address, its protocol number.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndNote {
    pub source: bool,
    pub addr: SocketAddr,
    pub protocol: u8,
}

/// Arrivals of one flow, in arrival order.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Arrivals {
    pub packets: u64,
    pub bytes: u64,
    pub min_size: u64,
    pub max_size: u64,
    /// First and last arrival, ns.
    pub first_ns: u64,
    pub last_ns: u64,
    pub delay: DelaySum,
    /// How many packets carried each TOS and TTL value.
    pub tos: Vec<(u8, u64)>,
    pub ttl: Vec<(u8, u64)>,
    pub reordered: u64,
    pub duplicates: u64,
    /// The distinct sequence numbers that arrived: sorted, disjoint, inclusive ranges.
    pub seqs: Vec<(u64, u64)>,
    pub windows: Vec<ArrivalWindow>,
}

/// A delay accumulator without its samples: the exact moments and a histogram.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DelaySum {
    pub n: u64,
    pub sum: f64,
    pub sumsq: f64,
    pub min: i64,
    pub max: i64,
    pub jitter_ns: f64,
    pub ipdv_sum: f64,
    /// Delays, ns (unit 1).
    pub hist: Signed,
}

/// One window's arrivals.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ArrivalWindow {
    /// Window index from the anchor.
    pub k: u64,
    pub packets: u64,
    pub bytes: u64,
    pub delay_sum: f64,
    pub delay_max: i64,
    pub jitter_ns: f64,
}

/// Departures of one flow from a sender's log.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Departures {
    pub packets: u64,
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub seq_min: u64,
    pub seq_max: u64,
    /// Actual − scheduled departure, ns: the exact sum, and a histogram (unit 1).
    pub late_sum: f64,
    pub late: Signed,
    /// Per window (index from the anchor), the sequence numbers sent in it in the order they
    /// were sent, as runs of consecutive numbers.
    pub windows: Vec<(u64, Vec<(u64, u64)>)>,
}

/// Summarises one log: its records already on the controller's clock and in the order the
/// controller would merge them (sorted by flow, then by send time for a sender's log and by
/// arrival time for a receiver's).
pub fn summarise(log: &LoadedLog, anchor_ns: u64, window_ns: u64) -> FlowSummaries {
    let c = crate::collect(std::slice::from_ref(log));
    let mut flows = Vec::new();
    let parts = c.flows.iter().map(|(id, a)| (*id, a, false)).chain(c.back.iter().map(|(id, a)| (*id, a, true)));
    for (flow, acc, reverse) in parts {
        flows.push(FlowSummary {
            flow,
            reverse,
            rx: (!acc.rx.is_empty()).then(|| Arrivals::of(&acc.rx, anchor_ns, window_ns)),
            echo: (!acc.echo.is_empty()).then(|| Arrivals::of(&acc.echo, anchor_ns, window_ns)),
            tx: (!acc.tx.is_empty()).then(|| Departures::of(acc, anchor_ns, window_ns)),
            said: acc.said.map(|e| EndStats { reason: e.reason.name().to_string(), packets: e.packets, bytes: e.bytes }),
        });
    }
    FlowSummaries {
        role: if log.role == Role::Receiver { "receiver" } else { "sender" }.into(),
        window_ns,
        anchor_ns,
        flows,
        ends: endpoints(log),
        ignored: c.ignored,
        gaps: c.gaps,
    }
}

/// Each flow's endpoint records in log order, repeats left out (learning one again changes
/// nothing: [`crate::FlowEnds`]).
fn endpoints(log: &LoadedLog) -> Vec<(u32, Vec<EndNote>)> {
    let mut m: BTreeMap<u32, Vec<EndNote>> = BTreeMap::new();
    for r in &log.records {
        if let Some(e) = Endpoint::of(r) {
            let note = EndNote { source: e.end == RecordKind::Source, addr: e.addr, protocol: e.protocol };
            let v = m.entry(r.flow).or_default();
            if !v.contains(&note) && v.len() < MAX_END_NOTES {
                v.push(note);
            }
        }
    }
    m.into_iter().collect()
}

/// Distinct endpoint records kept per flow and log.
pub const MAX_END_NOTES: usize = 16;

fn window_of(t: u64, anchor: u64, w: u64) -> u64 {
    t.saturating_sub(anchor) / w.max(1)
}

impl Arrivals {
    fn of(arr: &[Arrival], anchor: u64, w: u64) -> Arrivals {
        let mut d = DelayAcc::default();
        let mut tos = [0u64; 256];
        let mut ttl = [0u64; 256];
        let mut wins: BTreeMap<u64, (u64, u64, DelayAcc)> = BTreeMap::new();
        let (mut reordered, mut max_seen) = (0u64, None::<u64>);
        for a in arr {
            d.push(a.send, a.recv);
            tos[a.tos as usize] += 1;
            ttl[a.ttl as usize] += 1;
            if max_seen.is_some_and(|m| a.seq < m) {
                reordered += 1;
            }
            max_seen = Some(max_seen.map_or(a.seq, |m| m.max(a.seq)));
            if w > 0 {
                let e = wins.entry(window_of(a.recv, anchor, w)).or_insert_with(|| (0, 0, DelayAcc::default()));
                e.0 += 1;
                e.1 += a.size as u64;
                e.2.push(a.send, a.recv);
            }
        }
        let mut seqs: Vec<u64> = arr.iter().map(|a| a.seq).collect();
        seqs.sort_unstable();
        let n = seqs.len();
        seqs.dedup();
        let counts = |c: &[u64; 256]| (0..=255u8).filter(|&v| c[v as usize] > 0).map(|v| (v, c[v as usize])).collect();
        Arrivals {
            packets: arr.len() as u64,
            bytes: arr.iter().map(|a| a.size as u64).sum(),
            min_size: arr.iter().map(|a| a.size as u64).min().unwrap_or(0),
            max_size: arr.iter().map(|a| a.size as u64).max().unwrap_or(0),
            first_ns: arr.iter().map(|a| a.recv).min().unwrap_or(0),
            last_ns: arr.iter().map(|a| a.recv).max().unwrap_or(0),
            delay: DelaySum::of(&d),
            tos: counts(&tos),
            ttl: counts(&ttl),
            reordered,
            duplicates: (n - seqs.len()) as u64,
            seqs: ranges(&seqs),
            windows: wins
                .into_iter()
                .map(|(k, (packets, bytes, d))| ArrivalWindow { k, packets, bytes, delay_sum: d.sum, delay_max: d.max, jitter_ns: d.jitter.ns() })
                .collect(),
        }
    }
}

/// Sorted distinct numbers as inclusive ranges.
fn ranges(sorted: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &s in sorted {
        match out.last_mut() {
            Some(r) if r.1.checked_add(1) == Some(s) => r.1 = s,
            _ => out.push((s, s)),
        }
    }
    out
}

impl DelaySum {
    fn of(d: &DelayAcc) -> DelaySum {
        let mut hist = Signed::new(SIG, 1);
        for &v in &d.values {
            hist.record(v);
        }
        DelaySum { n: d.n, sum: d.sum, sumsq: d.sumsq, min: d.min, max: d.max, jitter_ns: d.jitter.ns(), ipdv_sum: d.ipdv_sum, hist }
    }
}

impl Departures {
    fn of(acc: &FlowAcc, anchor: u64, w: u64) -> Departures {
        let tx = &acc.tx;
        let mut late = Signed::new(SIG, 1);
        let mut late_sum = 0i128;
        let mut wins: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for &(seq, sched, actual, _) in tx {
            let v = (actual as i64).saturating_sub(sched as i64);
            late.record(v);
            late_sum += v as i128;
            if w > 0 {
                let runs = wins.entry(window_of(actual, anchor, w)).or_default();
                match runs.last_mut() {
                    Some(r) if r.1.checked_add(1) == Some(seq) => r.1 = seq,
                    _ => runs.push((seq, seq)),
                }
            }
        }
        Departures {
            packets: tx.len() as u64,
            bytes: tx.iter().map(|t| t.3 as u64).sum(),
            first_ns: tx.iter().map(|t| t.2).min().unwrap_or(0),
            last_ns: tx.iter().map(|t| t.2).max().unwrap_or(0),
            seq_min: tx.iter().map(|t| t.0).min().unwrap_or(0),
            seq_max: tx.iter().map(|t| t.0).max().unwrap_or(0),
            late_sum: late_sum as f64,
            late,
            windows: wins.into_iter().collect(),
        }
    }
}

/// What a controller's plan allows one agent's summary to hold: which flows (and whether the
/// agent is their sender or receiver), how many packets each may have, how many windows.
pub struct Allowed<'a> {
    /// The most packets a flow may have logged by this agent; `None`: not this agent's flow.
    pub packets: &'a dyn Fn(u32) -> Option<u64>,
    pub window_ns: u64,
    pub anchor_ns: u64,
    /// The most windows a run may have.
    pub windows: u64,
}

impl FlowSummaries {
    /// Checks a peer's summary against the plan and against itself: only allowed flows, counts
    /// within the plan, every histogram and list consistent with its counts (so a summary
    /// cannot claim more than it carries, and nothing it carries is unbounded).
    pub fn check(&self, a: &Allowed) -> Result<(), DigestError> {
        let bad = |m: String| Err(DigestError::Invalid(m));
        if self.role != "sender" && self.role != "receiver" {
            return bad(format!("a summary of a {:?} log", self.role));
        }
        if (self.window_ns, self.anchor_ns) != (a.window_ns, a.anchor_ns) {
            return bad("a summary with other windows than the run's".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &self.flows {
            let Some(most) = (a.packets)(f.flow) else {
                return bad(format!("flow {}, which this agent did not {}", f.flow, if self.role == "sender" { "send" } else { "receive" }));
            };
            if !seen.insert((f.flow, f.reverse)) {
                return bad(format!("flow {} twice", f.flow));
            }
            let receiver = self.role == "receiver";
            if receiver && (f.reverse || f.tx.is_some() || f.echo.is_some()) || !receiver && f.said.is_some() {
                return bad(format!("flow {}: records a {} log does not have", f.flow, self.role));
            }
            for x in f.rx.iter().chain(&f.echo) {
                x.check(most, a.windows).map_err(|e| DigestError::Invalid(format!("flow {}: {e}", f.flow)))?;
            }
            if let Some(t) = &f.tx {
                t.check(most, a.windows).map_err(|e| DigestError::Invalid(format!("flow {}: {e}", f.flow)))?;
            }
        }
        if !self.ends.windows(2).all(|p| p[0].0 < p[1].0) || self.ends.iter().any(|(flow, v)| v.len() > MAX_END_NOTES || (a.packets)(*flow).is_none()) {
            return bad("endpoint records of flows this agent did not have".into());
        }
        if self.gaps.len() > 1_000 {
            return bad(format!("{} log gaps", self.gaps.len()));
        }
        Ok(())
    }
}

impl Arrivals {
    fn check(&self, most: u64, windows: u64) -> Result<(), String> {
        if self.packets == 0 || self.packets > most {
            return Err(format!("{} arrivals (the plan allows at most {most})", self.packets));
        }
        let d = &self.delay;
        d.hist.check().map_err(|e| e.to_string())?;
        if d.n != self.packets || d.hist.count() != d.n || !d.sumsq.is_finite() || !d.jitter_ns.is_finite() || !d.ipdv_sum.is_finite() {
            return Err("a delay summary that does not match its arrivals".into());
        }
        if self.min_size > self.max_size || self.first_ns > self.last_ns || self.duplicates >= self.packets || self.reordered >= self.packets {
            return Err("arrivals' sizes, times or counts out of order".into());
        }
        let count = |v: &[(u8, u64)]| v.windows(2).all(|p| p[0].0 < p[1].0) && v.iter().try_fold(0u64, |s, x| s.checked_add(x.1)) == Some(self.packets);
        if !count(&self.tos) || !count(&self.ttl) {
            return Err("TOS or TTL counts that are not the arrivals'".into());
        }
        // distinct numbers: one per arrival that is not a duplicate
        let distinct = self.seqs.iter().try_fold(0u64, |s, r| if r.0 <= r.1 { s.checked_add((r.1 - r.0).checked_add(1)?) } else { None });
        let sorted = self.seqs.windows(2).all(|p| p[0].1 < p[1].0 && p[0].1.checked_add(1) != Some(p[1].0));
        if distinct != Some(self.packets - self.duplicates) || !sorted {
            return Err("sequence ranges that are not the arrivals' distinct numbers".into());
        }
        let in_windows = self.windows.iter().try_fold(0u64, |s, w| s.checked_add(w.packets));
        let ordered = self.windows.windows(2).all(|p| p[0].k < p[1].k);
        if !self.windows.is_empty() && in_windows != Some(self.packets) || !ordered || self.windows.last().is_some_and(|w| w.k >= windows) {
            return Err("windows that are not the arrivals'".into());
        }
        if self.windows.iter().any(|w| w.packets == 0 || !w.delay_sum.is_finite() || !w.jitter_ns.is_finite()) {
            return Err("an empty or invalid window".into());
        }
        Ok(())
    }
}

impl Departures {
    fn check(&self, most: u64, windows: u64) -> Result<(), String> {
        if self.packets == 0 || self.packets > most {
            return Err(format!("{} departures (the plan allows at most {most})", self.packets));
        }
        self.late.check().map_err(|e| e.to_string())?;
        if self.late.count() != self.packets || !self.late_sum.is_finite() || self.first_ns > self.last_ns || self.seq_min > self.seq_max {
            return Err("departures' lateness, times or numbers out of order".into());
        }
        let ordered = self.windows.windows(2).all(|p| p[0].0 < p[1].0) && self.windows.last().is_none_or(|w| w.0 < windows);
        let mut total = Some(0u64);
        for (_, runs) in &self.windows {
            for r in runs {
                if r.0 > r.1 || r.0 < self.seq_min || r.1 > self.seq_max {
                    return Err("a window's numbers outside the flow's".into());
                }
                total = total.and_then(|t| t.checked_add((r.1 - r.0).checked_add(1)?));
            }
        }
        if !ordered || !self.windows.is_empty() && total != Some(self.packets) {
            return Err("windows that are not the departures'".into());
        }
        Ok(())
    }
}
