//! The fit report as one HTML page: the fit table, and per state and direction the measured
//! CDF of inter-departure times and sizes drawn under the fitted model's.

use std::fmt::Write;

use horde_model::dist::Dist;
use horde_stats::charts::{Chart, Series};
use horde_stats::table::esc;

use crate::families::Fit;
use crate::reservoir::Reservoir;
use crate::{Collected, FitReport};

/// Points a measured CDF keeps (evenly spaced in rank).
const POINTS: usize = 400;

/// The page for `report`, drawn from the samples `c` holds; `capture` names the file.
pub fn page(report: &FitReport, c: &Collected, capture: &str) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fit of {cap}</title>\
         <style>body{{font:14px system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}}\
         code{{font-size:12px}}svg{{width:100%;height:auto}}.bad{{color:#b00}}</style></head><body>\
         <h1>Fit of {cap}</h1><p>Server {srv} ({why}); {clients} clients; {dur:.1} s; {packets} packets of {frames} frames.</p>",
        cap = esc(capture),
        srv = esc(&report.server.addr.to_string()),
        why = esc(&report.server_chosen),
        clients = report.clients,
        dur = report.duration_s,
        packets = report.packets,
        frames = report.frames,
    );
    for n in &report.notes {
        let _ = write!(h, "<p>Note: {}</p>", esc(n));
    }
    let _ = write!(h, "<h2>Fits</h2><p>Chosen by AIC (within 2 of the lowest, the fewest parameters); KS at n against its 5 % critical value.</p>");
    h.push_str(
        "<table><tr><th>state</th><th>direction</th><th>what</th><th>fitted</th><th>95 % intervals</th><th>KS [critical]</th><th>n</th><th>runner-up</th></tr>",
    );
    for d in &report.directions {
        for (what, f) in [("idt (ms)", &d.idt), ("size (B)", &d.size)] {
            let Some(f) = f else { continue };
            let ci: Vec<String> = f.ci95.iter().map(|(k, [lo, hi])| format!("{k} [{lo}, {hi}]")).collect();
            let runner = f.candidates.get(1).map_or(String::new(), |c| format!("{} (KS {:.4})", c.family, c.ks));
            let class = if f.ks < f.ks_critical { "" } else { " class=\"bad\"" };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{what}</td><td><code>{}</code></td><td>{}</td><td{class}>{:.4} [{:.4}]</td><td>{}</td><td>{}</td></tr>",
                esc(&d.state),
                format!("{:?}", d.direction).to_lowercase(),
                esc(&f.dist),
                esc(&ci.join(", ")),
                f.ks,
                f.ks_critical,
                f.n,
                esc(&runner)
            );
        }
    }
    h.push_str("</table>");
    for d in &report.directions {
        let Some(over) = &d.players else { continue };
        let _ = write!(
            h,
            "<h2>{} {}: over player counts</h2><p>Online: a client heard within {} s; the service's N defaults to {}.</p>",
            esc(&d.state),
            format!("{:?}", d.direction).to_lowercase(),
            over.window_s,
            over.typical
        );
        for (what, f) in [("idt (ms)", &over.idt), ("size (B)", &over.size)] {
            let Some(f) = f else { continue };
            let _ = write!(
                h,
                "<p>{what}: <code>{}</code></p><table><tr><th>players</th><th>n</th><th>parameters</th><th>KS of the formula [critical]</th></tr>",
                esc(&f.dist)
            );
            for at in &f.counts {
                let p: Vec<String> = at.params.iter().map(|(k, v)| format!("{k} {v}")).collect();
                let _ =
                    write!(h, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.4} [{:.4}]</td></tr>", at.players, at.n, esc(&p.join(", ")), at.ks, at.ks_critical);
            }
            h.push_str("</table>");
        }
    }
    for (i, name) in c.collector.labels.names.iter().enumerate() {
        for (di, dir) in ["up", "down"].iter().enumerate() {
            let Some(d) = report.directions.iter().find(|d| &d.state == name && format!("{:?}", d.direction).to_lowercase() == *dir) else {
                continue;
            };
            let (sizes, idts) = &c.collector.samples[i][di];
            let _ = write!(h, "<h2>{} {dir}</h2>", esc(name));
            for (title, unit, sample, fit) in [("inter-departure time", "ms", idts, &d.idt), ("APDU size", "bytes", sizes, &d.size)] {
                if let Some(f) = fit {
                    h.push_str(&chart(&format!("{name} {dir}: {title}"), unit, sample, f));
                }
            }
        }
    }
    h.push_str("</body></html>\n");
    h
}

/// The measured CDF and the fitted one at the same points.
fn chart(title: &str, unit: &str, sample: &Reservoir, f: &Fit) -> String {
    let mut xs = sample.values.clone();
    xs.sort_by(|a, b| a.total_cmp(b));
    if xs.is_empty() {
        return String::new();
    }
    let n = xs.len();
    let step = (n / POINTS).max(1);
    let measured: Vec<(f64, f64)> = (0..n).step_by(step).chain([n - 1]).map(|i| (xs[i], (i + 1) as f64 / n as f64)).collect();
    let model: Option<Dist> = f.dist.parse().ok();
    let fitted: Vec<(f64, f64)> = match &model {
        // the left limit and the value at each point: a model of whole numbers draws as steps
        Some(m) => measured.iter().flat_map(|(x, _)| [(*x, m.cdf(x - 1e-9 * x.abs().max(1.0))), (*x, m.cdf(*x))]).collect(),
        None => Vec::new(),
    };
    let lo = xs.iter().copied().find(|x| *x > 0.0).unwrap_or(1.0);
    let log = xs[n - 1] / lo > 100.0;
    let series: Vec<Series> = vec![(format!("measured (n = {})", sample.seen), measured), (format!("fitted {}", f.family), fitted)];
    Chart::new(title, unit, "CDF", &series).cdf().log_x(log).svg()
}
