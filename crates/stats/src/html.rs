//! Self-contained HTML pages: open offline, no external resources; charts are inline SVG. A
//! short inline script only checks that every chart was drawn (for tests in a real browser).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::Analysis;

/// A self-check run by the browser: every chart must hold a drawn line. The verdict goes to the
/// title (readable with `chromium --dump-dom`) and, on failure, to the console.
const CHART_CHECK: &str = r#"<script>(function(){var svgs=document.querySelectorAll('svg');var drawn=0;svgs.forEach(function(s){var ok=false;s.querySelectorAll('polyline.series').forEach(function(p){if((p.getAttribute('points')||'').trim().split(/\s+/).length>1&&p.getBBox().width>0){ok=true;}});if(ok){drawn++;}});if(drawn!==svgs.length){console.error('horde report: '+(svgs.length-drawn)+' of '+svgs.length+' charts not drawn');}document.title+=' [charts drawn: '+drawn+'/'+svgs.length+']';})();</script>"#;

use crate::table::esc;

use crate::charts::{spans_decades, steps, Chart, Series};

/// Styles shared by every page: charts take the page's width (their SVG has a viewBox).
const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td.t{text-align:left}th{background:#f3f3f3}pre{background:#f6f6f6;padding:1em;overflow-x:auto}figure{margin:1em 0}figure svg{width:100%;height:auto;border:1px solid #eee}.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:0 1em}.verdict{display:flex;flex-wrap:wrap;gap:.6em;margin:1em 0}.verdict div{border-radius:6px;padding:.6em 1em;background:#eef6ee;border:1px solid #9c9}.verdict div.bad{background:#fbeeee;border-color:#d99}.verdict div.path{background:#f1f3f8;border-color:#aab}.verdict div.path.changed{background:#fdf6e6;border-color:#dc9}.vk{margin:.8em 0 0;color:#555}.verdict b{display:block;font-size:1.4em}.verdict small{display:block;color:#555;font-size:.8em}";

/// A chart inside a figure with an anchor.
fn figure(name: &str, svg: &str) -> String {
    format!("<figure id=\"{}\">{svg}</figure>", esc(name))
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
    let mut s = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>",
        t = esc(title)
    );
    let _ = write!(s, "<h2>Summary</h2><pre>{}</pre>", esc(&crate::export::totals_text(a)));
    if !pps.is_empty() {
        let _ = write!(s, "<h2>Over time ({} s windows)</h2>", a.window_s.unwrap_or(0.0));
        let one = |name: &str, pts: Vec<(f64, f64)>| -> Vec<Series> { vec![(name.to_string(), pts)] };
        s.push_str(&figure("pps", &Chart::new("Packets per second, all flows", "time (s)", "pkt/s", &one("", pps)).svg()));
        s.push_str(&figure("throughput", &Chart::new("Throughput, all flows", "time (s)", "kbit/s", &one("", bps)).svg()));
        if !delay.is_empty() {
            s.push_str(&figure("delay", &Chart::new("Mean delay, all flows", "time (s)", "delay (ms)", &one("", delay)).svg()));
        }
    }
    s.push_str("<h2>Flows</h2>");
    s.push_str(&crate::export::flow_table(a).html());
    s.push_str(CHART_CHECK);
    s.push_str("</body></html>\n");
    s
}

/// A page of a summary text and titled sections of HTML (tables, SVG charts), with the chart
/// self-check.
pub fn simple_page(title: &str, intro: &str, sections: &[(String, String)]) -> String {
    let mut s = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1><pre>{}</pre>",
        esc(intro),
        t = esc(title)
    );
    for (i, (h, body)) in sections.iter().enumerate() {
        let _ = write!(s, "<h2>{}</h2>", esc(h));
        if body.starts_with("<svg") {
            s.push_str(&figure(&format!("chart{i}"), body));
        } else {
            s.push_str(body);
        }
    }
    s.push_str(CHART_CHECK);
    s.push_str("</body></html>\n");
    s
}

/// Charts of a two-way scenario run, as `(file name, SVG)`: players per category, throughput,
/// delay percentiles and loss over time, delay CDFs per direction, and for each category and
/// direction the measured APDU size and inter-arrival CDFs over the model's CDF.
/// `marks` are the run's events on its clock (a players command, a link change): drawn on every
/// chart over time.
pub fn game_charts(g: &crate::game::GameAnalysis, ctx: &crate::game::Context, marks: &[(f64, String)]) -> Vec<(String, String)> {
    use horde_model::service::Direction;
    let mut out = Vec::new();
    let names: Vec<String> = g.categories.iter().map(|c| c.category.clone()).collect();
    let occ: Vec<Series> = names.iter().enumerate().map(|(k, n)| (n.clone(), g.occupancy.iter().map(|(t, c)| (*t, c[k] as f64)).collect())).collect();
    out.push(("occupancy.svg".to_string(), Chart::new("Players per category", "time (s)", "players", &occ).marks(marks).svg()));
    let thr: Vec<Series> = vec![
        ("client → server".into(), g.throughput.iter().map(|(t, u, _)| (*t, u / 1e3)).collect()),
        ("server → client".into(), g.throughput.iter().map(|(t, _, d)| (*t, d / 1e3)).collect()),
    ];
    out.push(("throughput.svg".to_string(), Chart::new("Received throughput", "time (s)", "kbit/s", &thr).marks(marks).svg()));
    let dirs = [("client → server", 0usize), ("server → client", 1usize)];
    let mut delay: Vec<Series> = Vec::new();
    for (label, d) in dirs {
        for (q, pick) in [("p50", 0), ("p99", 1)] {
            let pts = g.seconds.iter().filter_map(|s| if pick == 0 { s.delay_p50_ms[d] } else { s.delay_p99_ms[d] }.map(|v| (s.t_s, v))).collect();
            delay.push((format!("{label} {q}"), pts));
        }
    }
    out.push((
        "delay-over-time.svg".to_string(),
        Chart::new("One-way delay per second (median and 99th percentile)", "time (s)", "delay (ms)", &delay).marks(marks).svg(),
    ));
    let loss: Vec<Series> = dirs
        .iter()
        .map(|(label, d)| {
            (
                (*label).to_string(),
                g.seconds.iter().map(|s| (s.t_s, if s.sent[*d] > 0 { s.lost[*d] as f64 * 100.0 / s.sent[*d] as f64 } else { 0.0 })).collect(),
            )
        })
        .collect();
    out.push((
        "loss-over-time.svg".to_string(),
        Chart::new("Loss per second (APDUs sent in that second that never arrived)", "time (s)", "loss (%)", &loss).marks(marks).svg(),
    ));
    for (label, dir) in [("client → server", Direction::Up), ("server → client", Direction::Down)] {
        let series: Vec<Series> = g
            .categories
            .iter()
            .map(|c| (c.category.clone(), steps(&if dir == Direction::Up { &c.up } else { &c.down }.delay_cdf)))
            .filter(|s| !s.1.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        let lo = series.iter().flat_map(|s| s.1.iter().map(|p| p.0)).filter(|x| *x > 0.0).fold(f64::INFINITY, f64::min);
        let hi = series.iter().flat_map(|s| s.1.iter().map(|p| p.0)).fold(0.0f64, f64::max);
        let chart = Chart::new(&format!("One-way delay CDF, {label}"), "delay (ms)", "CDF", &series).cdf().log_x(spans_decades(lo, hi)).svg();
        out.push((format!("delay-cdf-{}.svg", dir.name()), chart));
    }
    for (k, c) in g.categories.iter().enumerate() {
        for (dir, st) in [(Direction::Up, &c.up), (Direction::Down, &c.down)] {
            for (what, pts, size) in [("size", &st.size_cdf, true), ("iat", &st.iat_cdf, false)] {
                if pts.is_empty() {
                    continue;
                }
                let hi = pts.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1.0);
                let lo = pts.iter().map(|p| p.0).filter(|x| *x > 0.0).fold(f64::INFINITY, f64::min);
                // Inter-arrival times span decades (ms bursts, multi-second pauses): log axis.
                let log = !size && spans_decades(lo, hi);
                let grid: Vec<f64> = if log {
                    let (a, b) = (lo.max(1e-3).ln(), hi.ln());
                    (0..=600).map(|i| (a + (b - a) * i as f64 / 600.0).exp()).collect()
                } else {
                    (0..=600).map(|i| hi * i as f64 / 600.0).collect()
                };
                let model: Vec<(f64, f64)> =
                    grid.into_iter().map(|x| (x, crate::game::model_cdf(ctx, &g.sub_weights[k], k, dir, size, x).unwrap_or(0.0))).collect();
                let (label, unit) = if size { ("APDU size", "size (bytes)") } else { ("inter-arrival time", "inter-arrival time (ms)") };
                let ks = if size { st.ks_size } else { st.ks_iat };
                let title = format!(
                    "{} {} {} (KS {})",
                    c.category,
                    if dir == Direction::Up { "up" } else { "down" },
                    label,
                    ks.map_or("-".into(), |v| format!("{v:.3}"))
                );
                let series: Vec<Series> = vec![("measured".into(), steps(pts)), ("model".into(), model)];
                let svg = Chart::new(&title, unit, "CDF", &series).cdf().log_x(log).size(620, 300).svg();
                out.push((format!("cdf-{}-{}-{}.svg", c.category, dir.name(), what), svg));
            }
        }
    }
    out
}

/// One box of a report's verdict: a label, its value, the limit it was judged against (with the
/// sample size where a test's limit depends on it), and whether it is what a good run shows.
pub struct Verdict {
    pub label: String,
    pub value: String,
    pub limit: String,
    pub ok: bool,
    /// A path figure (what the network did), drawn apart from the generator's verdicts and
    /// never red: `ok` false marks a path that changed the traffic.
    pub path: bool,
    /// How close the model is to real traffic (the service's capture bench, not this run):
    /// drawn apart from both, never red.
    #[doc(hidden)]
    pub model: bool,
}

impl Verdict {
    /// A verdict on what the generator controls.
    pub fn generator(label: &str, value: String, limit: String, ok: bool) -> Self {
        Verdict { label: label.into(), value, limit, ok, path: false, model: false }
    }

    /// A figure of what the network did.
    pub fn path(label: &str, value: String, limit: String, ok: bool) -> Self {
        Verdict { label: label.into(), value, limit, ok, path: true, model: false }
    }
}

/// The report page of a two-way scenario run. `charts` from [`game_charts`] are inlined, so the
/// page opens offline with no other file.
/// `network`: the emulated network's link counters as text (runs on an emulated topology).
/// `verdict`: the boxes shown first, the generator's verdicts and then the path's figures.
pub fn game_page(
    title: &str,
    scenario: &str,
    network: Option<&str>,
    agents: Option<&str>,
    g: &crate::game::GameAnalysis,
    charts: &[(String, String)],
    verdict: &[Verdict],
) -> String {
    let mut s = format!("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>", t = esc(title));
    for (group, head) in [
        (0, "The generator: what Horde controls, from the senders' own records"),
        (1, "The model: how close the service is to real traffic (its capture bench, not this run)"),
        (2, "The path: what the network did to the traffic"),
    ] {
        let of = |v: &&Verdict| match (v.model, v.path) {
            (true, _) => 1,
            (false, true) => 2,
            (false, false) => 0,
        };
        if group == 1 && !verdict.iter().any(|v| v.model) {
            continue;
        }
        let _ = write!(s, "<p class=\"vk\">{head}</p><div class=\"verdict\">");
        for v in verdict.iter().filter(|v| of(v) == group) {
            let class = match (group, v.ok) {
                (0, true) => "",
                (0, false) => " class=\"bad\"",
                (_, true) => " class=\"path\"",
                (_, false) => " class=\"path changed\"",
            };
            let _ = write!(s, "<div{class}>{}<b>{}</b><small>{}</small></div>", esc(&v.label), esc(&v.value), esc(&v.limit));
        }
        s.push_str("</div>");
    }
    if let Some(a) = agents {
        let _ = write!(s, "<h2>Agents</h2><p>The machines that ran the players and the server side. Clock offsets were measured over the control channel (best of repeated NTP-style exchanges); every timestamp an agent logged was corrected by its offset before the statistics below, which are computed over all agents' records together.</p><pre>{}</pre>", esc(a));
    }
    if let Some(n) = network {
        let _ = write!(s, "<h2>Emulated network</h2><p>Frames each emulated link carried, lost (random or burst loss), dropped at its queue, and delivered, per direction, at the end of the run.</p><pre>{}</pre>", esc(n));
    }
    s.push_str("<h2>Per category and direction</h2>");
    s.push_str(&crate::game::table(g).html());
    s.push_str("<p>Rates per player are APDUs over the player-seconds spent in the category; the model rate is the long-run rate, 1000 / mean inter-departure time. Every fresh start of a bursty inter-departure process (a player joining, a category change) adds about (CV² − 1)/2 APDUs, so short runs and surges show rates above it (WoW trading up: CV² = 5.3, +2 APDUs per start). Lost: over UDP, APDUs sent and never received; over TCP (which itself loses nothing), APDUs undelivered when the run ended (still queued in a socket or on a link). KS: Kolmogorov–Smirnov distance between the measured distribution (receiver's log) and the model's, inter-arrival times at 1 ms resolution. Sent err %, KS sent size and KS sent IDT judge the generator: the same figures from the senders' own records (departure times, inter-departure times within a stay), before the network touched anything. Path KS: the two-sample distance between what arrived and what departed (sizes; inter-arrival against inter-departure times) — the path's effect, about 0 on a path that delays every APDU alike and loses none.</p>");
    s.push_str("<h2>Over time</h2>");
    for (name, svg) in charts.iter().filter(|(n, _)| !n.starts_with("cdf-") && !n.starts_with("delay-cdf-")) {
        s.push_str(&figure(name, svg));
    }
    s.push_str("<h2>Delay distributions</h2>");
    for (name, svg) in charts.iter().filter(|(n, _)| n.starts_with("delay-cdf-")) {
        s.push_str(&figure(name, svg));
    }
    s.push_str("<h2>Measured distributions over the model's</h2><div class=\"grid\">");
    for (name, svg) in charts.iter().filter(|(n, _)| n.starts_with("cdf-")) {
        s.push_str(&figure(name, svg));
    }
    s.push_str("</div>");
    let _ = write!(s, "<h2>Scenario</h2><pre>{}</pre>", esc(scenario));
    s.push_str(CHART_CHECK);
    s.push_str("</body></html>\n");
    s
}
