//! A self-contained HTML page for an [`Analysis`]: opens offline, no scripts, no external
//! resources. Time series are inline SVG.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::Analysis;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG line chart of `(x, y)` points with labelled axes.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let (w, h, m) = (720.0, 260.0, 50.0);
    let pts = series.iter().flat_map(|s| s.1.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for (x, y) in pts {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y1 = y1.max(*y);
    }
    if x0 >= x1 {
        x1 = x0 + 1.0;
    }
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    let sx = |x: f64| m + (x - x0) / (x1 - x0) * (w - 1.5 * m);
    let sy = |y: f64| h - m + -(y / y1) * (h - 1.5 * m);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="{t}"><title>{t}</title><rect width="100%" height="100%" fill="white"/>"#,
        t = esc(title)
    );
    let _ = write!(
        s,
        r#"<line x1="{m}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{m}" y1="{}" x2="{m}" y2="{}" stroke="black"/>"#,
        h - m,
        w - m / 2.0,
        h - m,
        h - m,
        m / 2.0
    );
    for i in 0..=4 {
        let y = y1 * i as f64 / 4.0;
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" font-size="11" text-anchor="end">{:.3}</text><line x1="{m}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/>"##,
            m - 4.0,
            sy(y) + 4.0,
            y,
            w - m / 2.0,
            sy(y),
            sy(y)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text><text x="{}" y="{}" font-size="11">{:.1}</text><text x="{}" y="{}" font-size="11" text-anchor="end">{:.1}</text>"#,
        w / 2.0,
        h - 12.0,
        esc(x_label),
        m,
        h - m + 14.0,
        x0,
        w - m / 2.0,
        h - m + 14.0,
        x1
    );
    let _ = write!(
        s,
        r#"<text x="12" y="{}" font-size="12" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        h / 2.0,
        h / 2.0,
        esc(y_label)
    );
    const COLOURS: [&str; 6] = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
    ];
    for (i, (name, points)) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let p: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/><text x="{}" y="{}" font-size="11" fill="{c}">{}</text>"#,
            p.join(" "),
            w - 1.6 * m - 90.0,
            m / 2.0 + 14.0 * (i as f64 + 1.0),
            esc(name)
        );
    }
    s.push_str("</svg>");
    s
}

/// The whole page: totals, a per-flow table and time-series charts.
pub fn page(title: &str, a: &Analysis) -> String {
    let mut totals: BTreeMap<u64, (f64, f64, f64, f64)> = BTreeMap::new();
    for w in &a.windows {
        let k = (w.start_s * 1e6) as u64;
        let e = totals.entry(k).or_default();
        e.0 += w.pkt_rate;
        e.1 += w.bitrate_bps;
        if let Some(d) = w.delay_mean_ms {
            e.2 += d * w.packets as f64;
            e.3 += w.packets as f64;
        }
    }
    let pps: Vec<(f64, f64)> = totals.iter().map(|(k, v)| (*k as f64 / 1e6, v.0)).collect();
    let bps: Vec<(f64, f64)> = totals
        .iter()
        .map(|(k, v)| (*k as f64 / 1e6, v.1 / 1e3))
        .collect();
    let delay: Vec<(f64, f64)> = totals
        .iter()
        .filter(|(_, v)| v.3 > 0.0)
        .map(|(k, v)| (*k as f64 / 1e6, v.2 / v.3))
        .collect();
    let mut s = format!("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}pre{{background:#f6f6f6;padding:1em}}</style></head><body><h1>{t}</h1>", t = esc(title));
    let _ = write!(
        s,
        "<h2>Summary</h2><pre>{}</pre>",
        esc(&crate::export::table(a, 0))
    );
    if !pps.is_empty() {
        let _ = write!(
            s,
            "<h2>Over time ({} s windows)</h2>",
            a.window_s.unwrap_or(0.0)
        );
        s.push_str(&line_chart(
            "Packets per second, all flows",
            "time (s)",
            "pkt/s",
            &[("pkt/s".into(), pps)],
        ));
        s.push_str(&line_chart(
            "Throughput, all flows",
            "time (s)",
            "kbit/s",
            &[("kbit/s".into(), bps)],
        ));
        if !delay.is_empty() {
            s.push_str(&line_chart(
                "Mean delay, all flows",
                "time (s)",
                "ms",
                &[("delay".into(), delay)],
            ));
        }
    }
    s.push_str("<h2>Flows</h2><table><tr><th>flow</th><th>packets</th><th>pkt/s</th><th>kbit/s</th><th>delay</th><th>mean ms</th><th>p99 ms</th><th>jitter ms</th><th>loss %</th></tr>");
    for f in &a.flows {
        let d = f.delay.as_ref();
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            f.flow.unwrap_or(0),
            f.packets,
            f.pkt_rate,
            f.bitrate_bps / 1e3,
            d.map(|d| d.kind).unwrap_or("-"),
            d.map(|d| format!("{:.3}", d.mean_ms)).unwrap_or_default(),
            d.map(|d| format!("{:.3}", d.p99_ms)).unwrap_or_default(),
            d.map(|d| format!("{:.3}", d.jitter_ms)).unwrap_or_default(),
            f.loss.as_ref().map(|l| format!("{:.3}", l.loss_pct)).unwrap_or_default()
        );
    }
    s.push_str("</table></body></html>\n");
    s
}
