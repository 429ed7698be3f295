//! Output formats for an [`Analysis`]: a readable table, JSON (the whole structure) and CSV
//! (one row per flow plus a total row; windows as a second CSV). Column names are stable: they
//! are the contract for pandas / polars / DuckDB users.

use std::fmt::Write as _;

use serde::Serialize;

use crate::{Analysis, FlowStats, Window};

pub fn json(a: &Analysis) -> String {
    serde_json::to_string_pretty(a).expect("analysis serialises")
}

/// One row of `flows.csv`: the CSV header is these field names, in this order, so header and
/// rows cannot disagree. A stable contract (docs/schemas/README.md): columns are only added.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct FlowRow {
    /// Flow id, or `total`.
    pub flow: String,
    pub packets: u64,
    pub bytes: u64,
    pub duration_s: f64,
    pub bitrate_bps: f64,
    pub pkt_rate: f64,
    pub min_size: u64,
    pub max_size: u64,
    /// `owd` (one-way) or `rtt`; empty without delay.
    pub delay_kind: Option<&'static str>,
    pub delay_min_ms: Option<f64>,
    pub delay_mean_ms: Option<f64>,
    pub delay_max_ms: Option<f64>,
    pub delay_stddev_ms: Option<f64>,
    pub delay_p50_ms: Option<f64>,
    pub delay_p90_ms: Option<f64>,
    pub delay_p99_ms: Option<f64>,
    pub delay_p999_ms: Option<f64>,
    pub jitter_ms: Option<f64>,
    pub ipdv_mean_ms: Option<f64>,
    pub sent: Option<u64>,
    pub expected: Option<u64>,
    pub lost: Option<u64>,
    pub loss_pct: Option<f64>,
    pub loss_bursts: Option<u64>,
    pub loss_burst_max: Option<u64>,
    pub duplicates: Option<u64>,
    pub reordered: Option<u64>,
    pub lateness_p50_us: Option<f64>,
    pub lateness_p99_us: Option<f64>,
    pub lateness_max_us: Option<f64>,
    pub tos: Option<u8>,
    pub ttl: Option<u8>,
    /// The flow's name from its flow file (`decode --flows`); empty otherwise.
    pub name: Option<String>,
    /// forward (sender → receiver) or reverse (the receiver's bulk back, `send --reverse`);
    /// empty in the total row.
    pub direction: Option<&'static str>,
    /// The flow's source and destination `address:port` and protocol, from version-2 logs'
    /// endpoint records; empty for older logs and in the total row.
    pub src: Option<String>,
    pub dst: Option<String>,
    pub protocol: Option<String>,
}

impl From<&FlowStats> for FlowRow {
    fn from(f: &FlowStats) -> FlowRow {
        let d = f.delay.as_ref();
        let l = f.loss.as_ref();
        let s = f.send_lateness.as_ref();
        FlowRow {
            flow: f.flow.map(|x| x.to_string()).unwrap_or_else(|| "total".into()),
            direction: f.flow.map(|_| if f.reverse { "reverse" } else { "forward" }),
            packets: f.packets,
            bytes: f.bytes,
            duration_s: f.duration_s,
            bitrate_bps: f.bitrate_bps,
            pkt_rate: f.pkt_rate,
            min_size: f.min_size,
            max_size: f.max_size,
            delay_kind: d.map(|d| d.kind),
            delay_min_ms: d.map(|d| d.min_ms),
            delay_mean_ms: d.map(|d| d.mean_ms),
            delay_max_ms: d.map(|d| d.max_ms),
            delay_stddev_ms: d.map(|d| d.stddev_ms),
            delay_p50_ms: d.map(|d| d.p50_ms),
            delay_p90_ms: d.map(|d| d.p90_ms),
            delay_p99_ms: d.map(|d| d.p99_ms),
            delay_p999_ms: d.map(|d| d.p999_ms),
            jitter_ms: d.map(|d| d.jitter_ms),
            ipdv_mean_ms: d.map(|d| d.ipdv_mean_ms),
            sent: l.and_then(|l| l.sent),
            expected: l.map(|l| l.expected),
            lost: l.map(|l| l.lost),
            loss_pct: l.map(|l| l.loss_pct),
            loss_bursts: l.map(|l| l.bursts),
            loss_burst_max: l.map(|l| l.burst_max),
            duplicates: l.map(|l| l.duplicates),
            reordered: l.map(|l| l.reordered),
            lateness_p50_us: s.map(|s| s.p50_us),
            lateness_p99_us: s.map(|s| s.p99_us),
            lateness_max_us: s.map(|s| s.max_us),
            tos: f.tos,
            ttl: f.ttl,
            name: f.name.clone(),
            src: f.src.clone(),
            dst: f.dst.clone(),
            protocol: f.protocol.clone(),
        }
    }
}

/// Serialises rows with a header made from the row type's field names.
fn to_csv<R: Serialize>(rows: impl IntoIterator<Item = R>) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        // Writing plain rows into memory cannot fail.
        let _ = w.serialize(r);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// `flows.csv`: one row per flow, then the total row.
pub fn flows_csv(a: &Analysis) -> String {
    to_csv(a.flows.iter().chain(std::iter::once(&a.total)).map(FlowRow::from))
}

/// The rows of `flows.csv` (and of `decode --flows-parquet`): every flow, then the total.
pub fn flow_rows(a: &Analysis) -> Vec<FlowRow> {
    a.flows.iter().chain(std::iter::once(&a.total)).map(FlowRow::from).collect()
}

/// `windows.csv`: one row per flow and time window (the row type is [`Window`]).
pub fn windows_csv(w: &[Window]) -> String {
    to_csv(w)
}

/// The per-flow table (every flow, then the total when there are several), for the terminal,
/// the report and files.
pub fn flow_table(a: &Analysis) -> crate::table::Table {
    use crate::table::{Cell, Column, Table};
    let mut t = Table::new(vec![
        Column::new("flow", "flow"),
        Column::new("packets", "packets"),
        Column::new("pkt_rate", "pkt/s"),
        Column::new("kbit_s", "kbit/s"),
        Column::new("delay_kind", "delay"),
        Column::new("delay_mean_ms", "mean ms"),
        Column::new("delay_p50_ms", "p50 ms"),
        Column::new("delay_p99_ms", "p99 ms"),
        Column::new("delay_max_ms", "max ms"),
        Column::new("jitter_ms", "jitter ms"),
        Column::new("loss_pct", "loss %"),
    ]);
    let named = a.flows.iter().any(|f| f.name.is_some());
    if named {
        t.columns.insert(1, Column::new("name", "name"));
    }
    let addressed = a.flows.iter().any(|f| f.src.is_some() || f.dst.is_some());
    if addressed {
        t.columns.push(Column::new("path", "source → destination"));
    }
    let total_row = (a.flows.len() > 1).then_some(&a.total);
    for f in a.flows.iter().chain(total_row) {
        let d = f.delay.as_ref();
        let mut row = vec![
            Cell::text(f.label()),
            Cell::Int(f.packets),
            Cell::Num(f.pkt_rate, 1),
            Cell::Num(f.bitrate_bps / 1e3, 2),
            Cell::text(d.map(|d| d.kind).unwrap_or("-")),
            Cell::opt(d.map(|d| d.mean_ms), 3),
            Cell::opt(d.map(|d| d.p50_ms), 3),
            Cell::opt(d.map(|d| d.p99_ms), 3),
            Cell::opt(d.map(|d| d.max_ms), 3),
            Cell::opt(d.map(|d| d.jitter_ms), 3),
            Cell::opt(f.loss.as_ref().map(|l| l.loss_pct), 3),
        ];
        if named {
            row.insert(1, Cell::text(f.name.clone().unwrap_or_default()));
        }
        if addressed {
            row.push(Cell::text(path(f)));
        }
        t.push(row);
    }
    t
}

/// A flow's "udp 10.0.0.1:4000 → 10.0.0.2:9000" (with "(shared id)" when several sources
/// used its id); empty in the total row.
fn path(f: &FlowStats) -> String {
    if f.flow.is_none() || (f.src.is_none() && f.dst.is_none()) {
        return String::new();
    }
    let mut s = format!("{} {} → {}", f.protocol.as_deref().unwrap_or("?"), f.src.as_deref().unwrap_or("?"), f.dst.as_deref().unwrap_or("?"));
    if f.reverse {
        s = format!("{} ← {}", f.src.as_deref().unwrap_or("?"), f.dst.as_deref().unwrap_or("?"));
    }
    if f.shared_id {
        s.push_str(" (shared id)");
    }
    s
}

/// The readable summary: the per-flow table (at most `max_flows` flows, then a count; 0: all),
/// then the total's loss, delay and lateness in words.
pub fn table(a: &Analysis, max_flows: usize) -> String {
    let mut full = flow_table(a);
    let shown = if max_flows == 0 { a.flows.len() } else { a.flows.len().min(max_flows) };
    if shown < a.flows.len() {
        // Keep the first `shown` flows and the total row.
        let total = full.rows.pop();
        full.rows.truncate(shown);
        full.rows.extend(total);
    }
    let mut s = full.text(true);
    if a.flows.len() > shown {
        let _ = writeln!(s, "  ... {} more flows (use --json or --csv for all)", a.flows.len() - shown);
    }
    s.push_str(&totals_text(a));
    if !a.windows.is_empty() {
        s.push_str(&windows_text(a, MAX_WINDOW_ROWS));
    }
    s
}

/// Windows shown on the terminal (all are in `--windows-csv`).
pub const MAX_WINDOW_ROWS: usize = 40;

/// All flows together per time window: the terminal's view of `--window`.
pub fn window_totals(a: &Analysis) -> crate::table::Table {
    use crate::table::{Cell, Column, Table};
    let mut by: std::collections::BTreeMap<u64, (u64, u64, f64, f64, Option<u64>)> = Default::default();
    for w in &a.windows {
        let e = by.entry((w.start_s * 1e9).round() as u64).or_default();
        e.0 += w.packets;
        e.1 += w.bytes;
        if let Some(d) = w.delay_mean_ms {
            e.2 += d * w.packets as f64;
            e.3 += w.packets as f64;
        }
        if let Some(l) = w.lost {
            *e.4.get_or_insert(0) += l;
        }
    }
    let secs = a.window_s.unwrap_or(1.0);
    let mut t = Table::new(vec![
        Column::new("start_s", "window start s"),
        Column::new("packets", "packets"),
        Column::new("pkt_rate", "pkt/s"),
        Column::new("kbit_s", "kbit/s"),
        Column::new("delay_mean_ms", "mean delay ms"),
        Column::new("lost", "lost"),
    ]);
    for (start, (p, b, dsum, dn, lost)) in by {
        let (pps, bps) = crate::metrics::interval_rates(p, b, secs);
        t.push(vec![
            Cell::Num(start as f64 / 1e9, 3),
            Cell::Int(p),
            Cell::Num(pps, 1),
            Cell::Num(bps / 1e3, 2),
            Cell::opt((dn > 0.0).then(|| dsum / dn), 3),
            lost.map_or(Cell::None, Cell::Int),
        ]);
    }
    t
}

fn windows_text(a: &Analysis, max_rows: usize) -> String {
    let mut t = window_totals(a);
    let n = t.rows.len();
    t.rows.truncate(max_rows);
    let mut s = format!("\nper {} s window, all flows:\n", a.window_s.unwrap_or(0.0));
    s.push_str(&t.text(true));
    if n > max_rows {
        let _ = writeln!(s, "  ... {} more windows (use --windows-csv for all, per flow)", n - max_rows);
    }
    s
}

/// The total's loss, delay and departure lateness in words.
pub fn totals_text(a: &Analysis) -> String {
    let mut s = String::new();
    let t = &a.total;
    for f in &a.flows {
        if let (Some(id), Some(l)) = (f.flow, &f.loss) {
            // Two senders with the same flow id at one receiver interleave two sequence spaces:
            // nearly every packet then looks duplicated or reordered.
            if l.duplicates > 100 && l.duplicates * 4 > f.packets {
                let _ = writeln!(
                    s,
                    "warning: flow {id}: {} of {} packets are duplicates: several senders probably used flow id {id} towards this receiver; give each sender its own --id-base",
                    l.duplicates, f.packets
                );
            }
        }
    }
    if !a.has_receiver_log && t.delay.is_none() {
        let _ = writeln!(s, "sender log only: departures are shown; give the receiver's log too (or measure round trips) for delay and loss");
    }
    // The senders' end messages, where a receiver's log has them (version 3 logs).
    let fwd: Vec<&FlowStats> = a.flows.iter().filter(|f| !f.reverse && f.flow.is_some()).collect();
    let ended = fwd.iter().filter(|f| f.end.is_some()).count();
    if ended > 0 {
        let early = fwd.iter().filter(|f| f.end.as_ref().is_some_and(|e| e.reason != "done")).count();
        let _ = writeln!(
            s,
            "ends: {ended} of {} flow(s) ended with their sender's counts (loss counted up to the last packet they say they sent){}{}",
            fwd.len(),
            if early > 0 { format!("; {early} stopped early (interrupted or consent lapsed)") } else { String::new() },
            if ended < fwd.len() {
                format!("; {} without an end message: their senders died, or are not `horde send`", fwd.len() - ended)
            } else {
                String::new()
            }
        );
    }
    for g in &a.gaps {
        let _ = writeln!(
            s,
            "gap: log {} is missing {} from {}: {} (marked by the log server; figures cover what it received)",
            g.log + 1,
            g.records.map_or("what followed".to_string(), |n| format!("{n} record(s)")),
            fmt_epoch_ns(g.since_ns),
            g.reason
        );
    }
    if let Some(l) = &t.loss {
        let _ = writeln!(
            s,
            "loss: {} of {} expected ({:.3} %), {} burst(s), longest {}; duplicates {}; reordered {}",
            l.lost, l.expected, l.loss_pct, l.bursts, l.burst_max, l.duplicates, l.reordered
        );
    }
    if let Some(d) = &t.delay {
        let _ = writeln!(
            s,
            "{}: min {:.3} / mean {:.3} / p90 {:.3} / p99.9 {:.3} / max {:.3} ms, stddev {:.3} ms, jitter (RFC 3550) {:.3} ms, mean |Δdelay| {:.3} ms",
            d.kind, d.min_ms, d.mean_ms, d.p90_ms, d.p999_ms, d.max_ms, d.stddev_ms, d.jitter_ms, d.ipdv_mean_ms
        );
    }
    if let Some(l) = &t.send_lateness {
        let _ = writeln!(
            s,
            "send lateness (actual − scheduled): mean {:.1} us, p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us; p99 |error| {:.1} us",
            l.mean_us, l.p50_us, l.p99_us, l.p999_us, l.max_us, l.abs_p99_us
        );
    }
    s
}

/// An epoch time as `HH:MM:SS.mmm UTC` (the day is the run's).
fn fmt_epoch_ns(ns: u64) -> String {
    let ms = ns / 1_000_000;
    let (s, ms) = (ms / 1000, ms % 1000);
    format!("{:02}:{:02}:{:02}.{ms:03} UTC", s / 3600 % 24, s / 60 % 60, s % 60)
}
