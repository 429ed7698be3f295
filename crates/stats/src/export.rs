//! Output formats for an [`Analysis`]: a readable table, JSON (the whole structure) and CSV
//! (one row per flow plus a total row; windows as a second CSV). Column names are stable: they
//! are the contract for pandas / polars / DuckDB users.

use std::fmt::Write as _;

use crate::{Analysis, FlowStats, Window};

pub fn json(a: &Analysis) -> String {
    serde_json::to_string_pretty(a).expect("analysis serialises")
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.6}")).unwrap_or_default()
}

pub const FLOW_CSV_HEADER: &str = "flow,packets,bytes,duration_s,bitrate_bps,pkt_rate,min_size,max_size,delay_kind,delay_min_ms,delay_mean_ms,delay_max_ms,delay_stddev_ms,delay_p50_ms,delay_p90_ms,delay_p99_ms,delay_p999_ms,jitter_ms,ipdv_mean_ms,sent,expected,lost,loss_pct,loss_bursts,loss_burst_max,duplicates,reordered,lateness_p50_us,lateness_p99_us,lateness_max_us,tos,ttl";

fn flow_row(f: &FlowStats) -> String {
    let d = f.delay.as_ref();
    let l = f.loss.as_ref();
    let s = f.send_lateness.as_ref();
    [
        f.flow.map(|x| x.to_string()).unwrap_or_else(|| "total".into()),
        f.packets.to_string(),
        f.bytes.to_string(),
        format!("{:.6}", f.duration_s),
        format!("{:.1}", f.bitrate_bps),
        format!("{:.3}", f.pkt_rate),
        f.min_size.to_string(),
        f.max_size.to_string(),
        d.map(|d| d.kind.to_string()).unwrap_or_default(),
        opt(d.map(|d| d.min_ms)),
        opt(d.map(|d| d.mean_ms)),
        opt(d.map(|d| d.max_ms)),
        opt(d.map(|d| d.stddev_ms)),
        opt(d.map(|d| d.p50_ms)),
        opt(d.map(|d| d.p90_ms)),
        opt(d.map(|d| d.p99_ms)),
        opt(d.map(|d| d.p999_ms)),
        opt(d.map(|d| d.jitter_ms)),
        opt(d.map(|d| d.ipdv_mean_ms)),
        l.and_then(|l| l.sent).map(|x| x.to_string()).unwrap_or_default(),
        l.map(|l| l.expected.to_string()).unwrap_or_default(),
        l.map(|l| l.lost.to_string()).unwrap_or_default(),
        opt(l.map(|l| l.loss_pct)),
        l.map(|l| l.bursts.to_string()).unwrap_or_default(),
        l.map(|l| l.burst_max.to_string()).unwrap_or_default(),
        l.map(|l| l.duplicates.to_string()).unwrap_or_default(),
        l.map(|l| l.reordered.to_string()).unwrap_or_default(),
        opt(s.map(|s| s.p50_us)),
        opt(s.map(|s| s.p99_us)),
        opt(s.map(|s| s.max_us)),
        f.tos.map(|x| x.to_string()).unwrap_or_default(),
        f.ttl.map(|x| x.to_string()).unwrap_or_default(),
    ]
    .join(",")
}

pub fn flows_csv(a: &Analysis) -> String {
    let mut s = String::from(FLOW_CSV_HEADER);
    s.push('\n');
    for f in a.flows.iter().chain(std::iter::once(&a.total)) {
        s.push_str(&flow_row(f));
        s.push('\n');
    }
    s
}

pub const WINDOW_CSV_HEADER: &str = "start_s,flow,packets,bytes,bitrate_bps,pkt_rate,delay_mean_ms,delay_max_ms,jitter_ms,lost";

pub fn windows_csv(w: &[Window]) -> String {
    let mut s = String::from(WINDOW_CSV_HEADER);
    s.push('\n');
    for x in w {
        let _ = writeln!(
            s,
            "{:.6},{},{},{},{:.1},{:.3},{},{},{},{}",
            x.start_s,
            x.flow.map(|f| f.to_string()).unwrap_or_default(),
            x.packets,
            x.bytes,
            x.bitrate_bps,
            x.pkt_rate,
            opt(x.delay_mean_ms),
            opt(x.delay_max_ms),
            opt(x.jitter_ms),
            x.lost.map(|l| l.to_string()).unwrap_or_default()
        );
    }
    s
}

fn rate(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.2} Gbit/s", b / 1e9),
        b if b >= 1e6 => format!("{:.2} Mbit/s", b / 1e6),
        b if b >= 1e3 => format!("{:.2} kbit/s", b / 1e3),
        b => format!("{b:.0} bit/s"),
    }
}

/// The readable table: one block per flow (at most `max_flows`, then a count), then the total.
pub fn table(a: &Analysis, max_flows: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>8} {:>10} {:>12} {:>14} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "flow", "packets", "pkt/s", "throughput", "delay", "mean ms", "p50 ms", "p99 ms", "max ms", "jitter", "loss %"
    );
    let shown = a.flows.len().min(max_flows);
    let total_row = (a.flows.len() > 1).then_some(&a.total);
    for f in a.flows[..shown].iter().chain(total_row) {
        let d = f.delay.as_ref();
        let m = |g: fn(&crate::DelayStats) -> f64| d.map(|d| format!("{:.3}", g(d))).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "{:>8} {:>10} {:>12.1} {:>14} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
            f.flow.map(|x| x.to_string()).unwrap_or_else(|| "total".into()),
            f.packets,
            f.pkt_rate,
            rate(f.bitrate_bps),
            d.map(|d| d.kind).unwrap_or("-"),
            m(|d| d.mean_ms),
            m(|d| d.p50_ms),
            m(|d| d.p99_ms),
            m(|d| d.max_ms),
            m(|d| d.jitter_ms),
            f.loss.as_ref().map(|l| format!("{:.3}", l.loss_pct)).unwrap_or_else(|| "-".into()),
        );
    }
    if a.flows.len() > shown {
        let _ = writeln!(s, "  ... {} more flows (use --json or --csv for all)", a.flows.len() - shown);
    }
    let t = &a.total;
    if !a.has_receiver_log && t.delay.is_none() {
        let _ = writeln!(s, "sender log only: departures are shown; give the receiver's log too (or measure round trips) for delay and loss");
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
