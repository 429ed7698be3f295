//! The decode's analysis ([`crate::analyse_collected`]) from summaries: the same definitions,
//! step for step, over what each agent's summary carries instead of its records.

use std::collections::BTreeMap;

use horde_wire::{Endpoint, RecordKind};

use super::{Arrivals, Departures, FlowSummaries};
use crate::digest::DigestError;
use crate::digest::{Bins, Signed};
use crate::metrics::{self, Jitter};
use crate::{add_loss, add_row, close_loss, pct, set_span, Analysis, DelayAcc, DelayStats, EndStats, FlowEnds, FlowStats, Lateness, LossStats, Window};

/// One flow direction's parts, each from the one agent that logged it.
#[derive(Default)]
struct Parts<'a> {
    rx: Option<&'a Arrivals>,
    echo: Option<&'a Arrivals>,
    tx: Option<&'a Departures>,
    said: Option<&'a EndStats>,
}

impl Parts<'_> {
    /// The arrivals the flow's figures come from: the receiver's, else the echoes.
    fn arrivals(&self) -> Option<&Arrivals> {
        self.rx.or(self.echo)
    }
}

/// The analysis of a flow run from its agents' summaries (each checked first with
/// [`FlowSummaries::check`]); `receiver_log`: the run had receivers (the decode's
/// [`Analysis::has_receiver_log`], which decides whether departures alone count as lost).
/// Refuses summaries that contradict each other: two agents with the same part of a flow, or
/// other windows.
pub fn analyse(parts: &[FlowSummaries], receiver_log: bool) -> Result<Analysis, DigestError> {
    let clash = |what: &str, flow: u32| DigestError::Mismatch(format!("two summaries hold flow {flow}'s {what}"));
    let (window_ns, anchor_ns) = parts.first().map_or((0, 0), |p| (p.window_ns, p.anchor_ns));
    if parts.iter().any(|p| (p.window_ns, p.anchor_ns) != (window_ns, anchor_ns)) {
        return Err(DigestError::Mismatch("summaries of other windows".into()));
    }
    let mut flows: BTreeMap<u32, Parts> = BTreeMap::new();
    let mut back: BTreeMap<u32, Parts> = BTreeMap::new();
    for p in parts {
        for f in &p.flows {
            let e = if f.reverse { back.entry(f.flow) } else { flows.entry(f.flow) }.or_default();
            for (mine, theirs, what) in [(&mut e.rx, &f.rx, "arrivals"), (&mut e.echo, &f.echo, "echoes")] {
                if let Some(x) = theirs {
                    if mine.replace(x).is_some() {
                        return Err(clash(what, f.flow));
                    }
                }
            }
            if let Some(t) = &f.tx {
                if e.tx.replace(t).is_some() {
                    return Err(clash("departures", f.flow));
                }
            }
            if let Some(s) = &f.said {
                e.said.get_or_insert(s);
            }
        }
    }
    // endpoints as the decode learns them: the sender's log, then the receiver's
    let mut ends: BTreeMap<u32, FlowEnds> = BTreeMap::new();
    for role in ["sender", "receiver"] {
        for p in parts.iter().filter(|p| p.role == role) {
            for (flow, notes) in &p.ends {
                for n in notes {
                    let end = if n.source { RecordKind::Source } else { RecordKind::Destination };
                    ends.entry(*flow).or_default().learn(&Endpoint { flow: *flow, end, addr: n.addr, protocol: n.protocol, tag: 0, at_ns: 0 });
                }
            }
        }
    }
    let has_receiver = receiver_log || parts.iter().any(|p| p.role == "receiver");
    let mut out = Analysis {
        ignored_records: parts.iter().map(|p| p.ignored).sum(),
        gaps: parts.iter().flat_map(|p| p.gaps.iter().map(|g| crate::GapStats { log: usize::from(p.role == "receiver"), ..g.clone() })).collect(),
        window_s: (window_ns > 0).then(|| window_ns as f64 / 1e9),
        has_receiver_log: has_receiver,
        ..Default::default()
    };
    let mut total_delay = Summed::default();
    let mut total_late: Option<(u64, f64, Signed)> = None;
    let mut total_loss: Option<LossStats> = None;
    let (mut first, mut last) = (u64::MAX, 0u64);
    let any_owd = flows.values().chain(back.values()).any(|a| a.rx.is_some());
    let all = flows.iter().map(|(id, p)| (id, p, false)).chain(back.iter().map(|(id, p)| (id, p, true)));
    for (id, p, reverse) in all {
        let (mut stats, d) = flow_stats(*id, p, has_receiver || reverse);
        stats.reverse = reverse;
        stats.end = p.said.cloned();
        if let Some(e) = ends.get(id) {
            stats.src = e.src.map(|a| a.to_string());
            stats.dst = e.dst.map(|a| a.to_string());
            stats.protocol = e.protocol.map(horde_wire::log::protocol_name);
            stats.shared_id = e.shared;
            if let Some(w) = e.sender_id {
                (stats.flow, stats.id_in_log) = (Some(w), Some(*id));
            }
        }
        if (d.acc.kind == "owd") == any_owd {
            total_delay.merge(&d)?;
        }
        if let Some(t) = p.tx {
            let e = total_late.get_or_insert_with(|| (0, 0.0, Signed::new(super::SIG, 1)));
            e.0 = e.0.saturating_add(t.packets);
            e.1 += t.late_sum;
            e.2.merge(&t.late)?;
        }
        if let Some(l) = &stats.loss {
            add_loss(total_loss.get_or_insert_with(LossStats::default), l);
        }
        if let Some(a) = p.arrivals() {
            first = first.min(a.first_ns);
            last = last.max(a.last_ns);
        }
        add_row(&mut out.total, &stats);
        out.flows.push(stats);
    }
    out.total.loss = total_loss.map(close_loss);
    out.total.delay = total_delay.stats();
    out.total.send_lateness = total_late.and_then(|(n, sum, h)| lateness(n, sum, &h));
    set_span(&mut out.total, first, last);
    if window_ns > 0 {
        out.windows = windows(&flows, window_ns, has_receiver);
        let mut rev = windows(&back, window_ns, true);
        rev.iter_mut().for_each(|x| x.reverse = true);
        out.windows.append(&mut rev);
    }
    Ok(out)
}

/// A delay accumulator rebuilt from a summary: its moments in a [`DelayAcc`] (so the figures
/// come from the decode's own formula), its samples as a histogram.
#[derive(Clone)]
struct Summed {
    acc: DelayAcc,
    hist: Signed,
}

impl Default for Summed {
    fn default() -> Self {
        Summed { acc: DelayAcc::default(), hist: Signed::new(super::SIG, 1) }
    }
}

impl Summed {
    fn of(a: Option<&Arrivals>, kind: &'static str) -> Summed {
        let mut s = Summed { acc: DelayAcc { kind, ..Default::default() }, ..Default::default() };
        if let Some(a) = a {
            let d = &a.delay;
            s.acc = DelayAcc {
                kind,
                n: d.n,
                sum: d.sum,
                sumsq: d.sumsq,
                min: d.min,
                max: d.max,
                jitter: Jitter::from_ns(d.jitter_ns),
                ipdv_sum: d.ipdv_sum,
                ..s.acc
            };
            s.hist = d.hist.clone();
        }
        s
    }

    fn merge(&mut self, o: &Summed) -> Result<(), DigestError> {
        self.hist.merge(&o.hist)?;
        self.acc.merge(&o.acc);
        Ok(())
    }

    fn stats(&self) -> Option<DelayStats> {
        self.acc.stats(|p| self.hist.quantile(p).unwrap_or(0))
    }
}

fn flow_stats(id: u32, p: &Parts, has_receiver: bool) -> (FlowStats, Summed) {
    let rtt = p.rx.is_none() && p.echo.is_some();
    let arr = p.arrivals();
    let mut s = FlowStats { flow: Some(id), ..Default::default() };
    if let Some(a) = arr {
        s.packets = a.packets;
        s.bytes = a.bytes;
        s.min_size = a.min_size;
        s.max_size = a.max_size;
        if a.packets > 1 && a.last_ns > a.first_ns {
            s.duration_s = (a.last_ns - a.first_ns) as f64 / 1e9;
            (s.pkt_rate, s.bitrate_bps) = metrics::span_rates(s.packets, s.bytes, s.duration_s);
        }
    }
    let d = Summed::of(arr, if rtt { "rtt" } else { "owd" });
    s.delay = d.stats();
    if !rtt {
        s.tos = arr.and_then(|a| mode(&a.tos));
        s.ttl = arr.and_then(|a| mode(&a.ttl));
    }
    if arr.is_some() || p.said.is_some() || (p.tx.is_some() && has_receiver) {
        s.loss = Some(loss(arr, p));
    }
    if let Some(t) = p.tx {
        s.send_lateness = lateness(t.packets, t.late_sum, &t.late);
        if arr.is_none() {
            // sender's log only: describe what was sent
            s.packets = t.packets;
            s.bytes = t.bytes;
            if t.last_ns > t.first_ns {
                s.duration_s = (t.last_ns - t.first_ns) as f64 / 1e9;
                (s.pkt_rate, s.bitrate_bps) = metrics::span_rates(s.packets, s.bytes, s.duration_s);
            }
        }
    }
    (s, d)
}

/// The most frequent value (the highest of equals, as the decode picks it).
fn mode(counts: &[(u8, u64)]) -> Option<u8> {
    let mut c = [0u64; 256];
    for &(v, n) in counts {
        c[v as usize] = n;
    }
    (!counts.is_empty()).then(|| (0..256).max_by_key(|&i| c[i]).unwrap_or(0) as u8)
}

fn lateness(n: u64, sum: f64, h: &Signed) -> Option<Lateness> {
    if n == 0 {
        return None;
    }
    let q = |p: f64| h.quantile(p).unwrap_or(0) as f64 / 1e3;
    let mut abs: Bins = h.pos.clone();
    let _ = abs.merge(&h.neg);
    Some(Lateness {
        packets: n,
        mean_us: sum / n as f64 / 1e3,
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: h.max as f64 / 1e3,
        abs_p99_us: abs.quantile(0.99).unwrap_or(0).min(h.max.unsigned_abs().max(h.min.unsigned_abs())) as f64 / 1e3,
    })
}

/// Loss as the decode counts it, from the ranges of numbers that arrived.
fn loss(arr: Option<&Arrivals>, p: &Parts) -> LossStats {
    let mut l = LossStats::default();
    let none: &[(u64, u64)] = &[];
    let seqs = arr.map_or(none, |a| &a.seqs);
    if let Some(a) = arr {
        l.reordered = a.reordered;
        l.duplicates = a.duplicates;
    }
    l.sent = match p.tx {
        Some(t) => Some(t.packets),
        None => p.said.map(|e| e.packets),
    };
    let arrived = seqs.first().zip(seqs.last()).map(|(a, b)| (a.0, b.1));
    let range = match (p.tx, p.said, arrived) {
        (Some(t), _, _) => Some((t.seq_min, t.seq_max)),
        (None, Some(e), _) if e.packets > 0 => Some((0, e.packets - 1)),
        (_, _, a) => a,
    };
    let Some((lo, hi)) = range else {
        return l;
    };
    l.expected = ((hi as u128 - lo as u128 + 1).min(u64::MAX as u128)) as u64;
    let gap = |next: u128, upto: u128, l: &mut LossStats| {
        let g = (upto.saturating_sub(next)).min(u64::MAX as u128) as u64;
        if g > 0 {
            l.lost = l.lost.saturating_add(g);
            l.bursts = l.bursts.saturating_add(1);
            l.burst_max = l.burst_max.max(g);
            let e = l.burst_hist.entry(g).or_default();
            *e = e.saturating_add(1);
        }
    };
    let mut next = lo as u128;
    for &(a, b) in seqs {
        if b < lo || a > hi {
            continue;
        }
        let (a, b) = (a.max(lo) as u128, b.min(hi) as u128);
        gap(next, a, &mut l);
        next = b + 1;
    }
    gap(next, hi as u128 + 1, &mut l);
    l.loss_pct = pct(l.lost, l.expected);
    l.burst_mean = if l.bursts > 0 { l.lost as f64 / l.bursts as f64 } else { 0.0 };
    l
}

/// How many numbers of `lo..=hi` are in the sorted disjoint `ranges`.
fn present(ranges: &[(u64, u64)], lo: u64, hi: u64) -> u64 {
    let start = ranges.partition_point(|r| r.1 < lo);
    ranges[start..].iter().take_while(|r| r.0 <= hi).fold(0u64, |n, r| n.saturating_add((r.1.min(hi) - r.0.max(lo)).saturating_add(1)))
}

/// Per flow and window, as the decode's windows.
fn windows(flows: &BTreeMap<u32, Parts>, w: u64, has_receiver: bool) -> Vec<Window> {
    struct Acc {
        win: Window,
        n: u64,
        sum: f64,
        max: i64,
        jitter: f64,
    }
    let mut out: BTreeMap<(u64, u32), Acc> = BTreeMap::new();
    fn slot(out: &mut BTreeMap<(u64, u32), Acc>, w: u64, k: u64, id: u32) -> &mut Acc {
        out.entry((k, id)).or_insert_with(|| Acc {
            win: Window { start_s: (k.saturating_mul(w)) as f64 / 1e9, flow: Some(id), ..Default::default() },
            n: 0,
            sum: 0.0,
            max: i64::MIN,
            jitter: 0.0,
        })
    }
    for (id, p) in flows {
        // (the decode's windows take the echoes only when no receiver's arrivals came)
        let arr = if p.rx.is_none() { p.echo } else { p.rx };
        for x in arr.iter().flat_map(|a| &a.windows) {
            let e = slot(&mut out, w, x.k, *id);
            e.win.packets = e.win.packets.saturating_add(x.packets);
            e.win.bytes = e.win.bytes.saturating_add(x.bytes);
            (e.n, e.sum, e.max, e.jitter) = (x.packets, x.delay_sum, x.delay_max, x.jitter_ns);
        }
        if let Some(t) = p.tx.filter(|_| has_receiver || p.echo.is_some()) {
            let none: &[(u64, u64)] = &[];
            let got = arr.map_or(none, |a| &a.seqs);
            for (k, runs) in &t.windows {
                let lost = runs.iter().fold(0u64, |n, &(lo, hi)| n.saturating_add((hi - lo).saturating_add(1).saturating_sub(present(got, lo, hi))));
                let e = slot(&mut out, w, *k, *id).win.lost.get_or_insert(0);
                *e = e.saturating_add(lost);
            }
        }
    }
    let secs = w as f64 / 1e9;
    out.into_values()
        .map(|mut a| {
            (a.win.pkt_rate, a.win.bitrate_bps) = metrics::interval_rates(a.win.packets, a.win.bytes, secs);
            if a.n > 0 {
                a.win.delay_mean_ms = Some(a.sum / a.n as f64 / 1e6);
                a.win.delay_max_ms = Some(a.max as f64 / 1e6);
                a.win.jitter_ms = Some(a.jitter / 1e6);
            }
            a.win
        })
        .collect()
}
