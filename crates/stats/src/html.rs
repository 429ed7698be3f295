//! Self-contained HTML pages: open offline, no external resources; charts are inline SVG. A
//! short inline script only checks that every chart was drawn (for tests in a real browser).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::Analysis;

/// A self-check run by the browser: every chart must hold a drawn line. The verdict goes to the
/// title (readable with `chromium --dump-dom`) and, on failure, to the console.
const CHART_CHECK: &str = r#"<script>(function(){var svgs=document.querySelectorAll('svg');var drawn=0;svgs.forEach(function(s){var ok=false;s.querySelectorAll('polyline').forEach(function(p){if((p.getAttribute('points')||'').trim().split(/\s+/).length>1&&p.getBBox().width>0){ok=true;}});if(ok){drawn++;}});if(drawn!==svgs.length){console.error('horde report: '+(svgs.length-drawn)+' of '+svgs.length+' charts not drawn');}document.title+=' [charts drawn: '+drawn+'/'+svgs.length+']';})();</script>"#;

use crate::table::esc;

/// An SVG line chart of `(x, y)` points with labelled axes, 720 × 260 px.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    line_chart_sized(title, x_label, y_label, series, 720.0, 260.0)
}

/// Points of an empirical CDF as a staircase (a vertical step at each value).
pub fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2 + 1);
    let mut prev = 0.0;
    for (x, y) in points {
        out.push((*x, prev));
        out.push((*x, *y));
        prev = *y;
    }
    out
}

fn tick(v: f64, span: f64) -> String {
    if span >= 100.0 {
        format!("{v:.0}")
    } else if span >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// [`line_chart`] with a given size in px.
pub fn line_chart_sized(title: &str, x_label: &str, y_label: &str, series: &[(String, Vec<(f64, f64)>)], w: f64, h: f64) -> String {
    let m = 50.0;
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
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="{t}"><title>{t}</title><rect width="100%" height="100%" fill="white"/><text x="{tx}" y="16" font-size="13" font-weight="bold" text-anchor="middle">{t}</text>"#,
        tx = w / 2.0,
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
            r##"<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text><line x1="{m}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/>"##,
            m - 4.0,
            sy(y) + 4.0,
            tick(y, y1),
            w - m / 2.0,
            sy(y),
            sy(y)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text><text x="{}" y="{}" font-size="11">{}</text><text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>"#,
        w / 2.0,
        h - 12.0,
        esc(x_label),
        m,
        h - m + 14.0,
        tick(x0, x1 - x0),
        w - m / 2.0,
        h - m + 14.0,
        tick(x1, x1 - x0)
    );
    let _ = write!(s, r#"<text x="12" y="{}" font-size="12" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#, h / 2.0, h / 2.0, esc(y_label));
    const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
    for (i, (name, points)) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let p: Vec<String> = points.iter().map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y))).collect();
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
    let bps: Vec<(f64, f64)> = totals.iter().map(|(k, v)| (*k as f64 / 1e6, v.1 / 1e3)).collect();
    let delay: Vec<(f64, f64)> = totals.iter().filter(|(_, v)| v.3 > 0.0).map(|(k, v)| (*k as f64 / 1e6, v.2 / v.3)).collect();
    let mut s = format!("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}pre{{background:#f6f6f6;padding:1em}}</style></head><body><h1>{t}</h1>", t = esc(title));
    let _ = write!(s, "<h2>Summary</h2><pre>{}</pre>", esc(&crate::export::totals_text(a)));
    if !pps.is_empty() {
        let _ = write!(s, "<h2>Over time ({} s windows)</h2>", a.window_s.unwrap_or(0.0));
        s.push_str(&line_chart("Packets per second, all flows", "time (s)", "pkt/s", &[("pkt/s".into(), pps)]));
        s.push_str(&line_chart("Throughput, all flows", "time (s)", "kbit/s", &[("kbit/s".into(), bps)]));
        if !delay.is_empty() {
            s.push_str(&line_chart("Mean delay, all flows", "time (s)", "ms", &[("delay".into(), delay)]));
        }
    }
    s.push_str("<h2>Flows</h2>");
    s.push_str(&crate::export::flow_table(a).html());
    s.push_str(CHART_CHECK);
    s.push_str("</body></html>\n");
    s
}

/// Charts of a two-way scenario run, as `(file name, SVG)`: occupancy, throughput, and for each
/// category and direction the measured APDU size and inter-arrival CDFs over the model's CDF.
pub fn game_charts(g: &crate::game::GameAnalysis, ctx: &crate::game::Context) -> Vec<(String, String)> {
    use horde_model::service::Direction;
    let mut out = Vec::new();
    let names: Vec<String> = g.categories.iter().map(|c| c.category.clone()).collect();
    let occ: Vec<(String, Vec<(f64, f64)>)> =
        names.iter().enumerate().map(|(k, n)| (n.clone(), g.occupancy.iter().map(|(t, c)| (*t, c[k] as f64)).collect())).collect();
    out.push(("occupancy.svg".to_string(), line_chart("Players per category", "time (s)", "players", &occ)));
    let up: Vec<(f64, f64)> = g.throughput.iter().map(|(t, u, _)| (*t, u / 1e3)).collect();
    let down: Vec<(f64, f64)> = g.throughput.iter().map(|(t, _, d)| (*t, d / 1e3)).collect();
    out.push((
        "throughput.svg".to_string(),
        line_chart("Received throughput", "time (s)", "kbit/s", &[("client → server".into(), up), ("server → client".into(), down)]),
    ));
    for (k, c) in g.categories.iter().enumerate() {
        for (dir, st) in [(Direction::Up, &c.up), (Direction::Down, &c.down)] {
            for (what, pts, size) in [("size", &st.size_cdf, true), ("iat", &st.iat_cdf, false)] {
                if pts.is_empty() {
                    continue;
                }
                let hi = pts.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1.0);
                let model: Vec<(f64, f64)> = (0..=600)
                    .map(|i| hi * i as f64 / 600.0)
                    .map(|x| (x, crate::game::model_cdf(ctx, &g.sub_weights[k], k, dir, size, x).unwrap_or(0.0)))
                    .collect();
                let (label, unit) = if size { ("APDU size", "bytes") } else { ("inter-arrival time", "ms") };
                let title = format!(
                    "{} {} {} (KS {:.3})",
                    c.category,
                    if dir == Direction::Up { "up" } else { "down" },
                    label,
                    if size { st.ks_size } else { st.ks_iat }.unwrap_or(f64::NAN)
                );
                let svg = line_chart_sized(&title, unit, "CDF", &[("measured".into(), steps(pts)), ("model".into(), model)], 470.0, 240.0);
                out.push((format!("cdf-{}-{}-{}.svg", c.category, dir.name(), what), svg));
            }
        }
    }
    out
}

/// The report page of a two-way scenario run. `charts` from [`game_charts`] are inlined, so the
/// page opens offline with no other file.
/// `network`: the emulated network's link counters as text (runs on an emulated topology).
pub fn game_page(title: &str, scenario: &str, network: Option<&str>, g: &crate::game::GameAnalysis, charts: &[(String, String)]) -> String {
    let mut s = format!("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>body{{font-family:sans-serif;margin:2em;max-width:1500px}}table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}pre{{background:#f6f6f6;padding:1em}}svg{{margin:4px;border:1px solid #eee}}</style></head><body><h1>{t}</h1>", t = esc(title));
    let _ = write!(s, "<h2>Scenario</h2><pre>{}</pre>", esc(scenario));
    if let Some(n) = network {
        let _ = write!(s, "<h2>Emulated network</h2><p>Frames each emulated link carried, lost (random or burst loss), dropped at its queue, and delivered, per direction, at the end of the run.</p><pre>{}</pre>", esc(n));
    }
    s.push_str("<h2>Per category and direction</h2>");
    s.push_str(&crate::game::table(g).html());
    s.push_str("<p>Rates per player are APDUs over the player-seconds spent in the category; the model rate is the long-run rate, 1000 / mean inter-departure time. Every fresh start of a bursty inter-departure process (a player joining, a category change) adds about (CV² − 1)/2 APDUs, so short runs and surges show rates above it (WoW trading up: CV² = 5.3, +2 APDUs per start). KS: Kolmogorov–Smirnov distance between the measured distribution (receiver's log) and the model's, inter-arrival times at 1 ms resolution.</p>");
    s.push_str("<h2>Over time</h2>");
    for (name, svg) in charts.iter().filter(|(n, _)| !n.starts_with("cdf-")) {
        let _ = write!(s, "<figure id=\"{}\">{svg}</figure>", esc(name));
    }
    s.push_str("<h2>Measured distributions over the model's</h2>");
    for (name, svg) in charts.iter().filter(|(n, _)| n.starts_with("cdf-")) {
        let _ = write!(s, "<figure id=\"{}\" style=\"display:inline-block\">{svg}</figure>", esc(name));
    }
    s.push_str(CHART_CHECK);
    s.push_str("</body></html>\n");
    s
}
