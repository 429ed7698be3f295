//! A regulated run's results: [`CircuitSummary`] (the contract behind its `summary.json`,
//! described by `docs/schemas/circuits-summary.schema.json`), `circuits.csv` (every circuit's
//! seconds at both ends) and `index.html` (the throttles over time, per-channel throughput
//! stacked with the allowance, loss, task-channel delay, avatars per state, a table per
//! circuit).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use horde_model::behaviour;
use horde_model::scenario::Scenario;
use horde_stats::charts::{Chart, Series};
use horde_stats::table::esc;
use serde::{Deserialize, Serialize};

use crate::circuits::{Config, JoinedCircuit, Row, ServedCircuit, CSV_HEADER};

/// Version of a regulated run's `summary.json` layout (see docs/CHANGELOG-results.md).
pub const CIRCUITS_SCHEMA_VERSION: u32 = 1;

/// Channel names in the order of every `[f64; 7]`.
pub const CHANNELS: [&str; 7] = ["resend", "land", "wind", "cloud", "task", "texture", "asset"];

/// A circuit queue above this (kB) counts as "packets waiting": the allowance could be used.
const BUSY_KB: f64 = 2.0;

/// A regulated run's `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CircuitSummary {
    pub schema_version: u32,
    /// Always "circuits" (an open-loop run's summary has no `kind`).
    pub kind: String,
    pub scenario: String,
    pub service: String,
    pub players: u32,
    pub duration_s: f64,
    pub seed: u64,
    /// The client throttle, as the scenario names it (e.g. `opensim:500`, `mongoose`).
    pub throttle: String,
    /// The server regulator: `per-channel` or `dual`.
    pub regulator: String,
    /// Why the run stopped early, if it did.
    pub interruption: Option<String>,
    pub totals: CircuitTotals,
    /// One row per player.
    pub circuits: Vec<CircuitRow>,
    /// Every second of the run, over all circuits (each side's seconds from its own start; the
    /// server side starts a fraction of a second before the clients).
    pub seconds: Vec<SecondRow>,
    /// A run through agents (`horde run --agents`): its agents, and the players of any agent
    /// that was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<crate::Distributed>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CircuitTotals {
    /// Circuits that joined, and players whose circuit did not.
    pub joined: u32,
    pub failed: u32,
    /// Mean over circuits of the rate each one's throttle asked for (kbit/s, its seconds up).
    pub request_kbps_mean: f64,
    /// Sum over circuits of each one's mean received rate (kbit/s).
    pub received_kbps: f64,
    /// Sum over circuits of what the server side sent (kbit/s, each one's mean).
    pub sent_kbps: f64,
    /// Sequence numbers never received, of all the circuits' data packets (%).
    pub loss_pct: f64,
    /// Mean of the circuits' last round-trip times (ms), if any was measured.
    pub rtt_ms_mean: Option<f64>,
    /// Over the circuit-seconds with packets waiting (more than 2 kB queued): what the server
    /// sent over what the throttle allowed (%). None: no circuit ever had a queue.
    pub allowance_use_pct: Option<f64>,
    /// Task channel: mean throughput per circuit (kbit/s), mean and worst queueing delay (ms).
    pub task_kbps_mean: f64,
    pub task_delay_ms_mean: f64,
    pub task_delay_ms_max: f64,
    /// Reliable packets the server resent, and throttle packets the clients sent.
    pub resent: u64,
    pub throttle_packets: u64,
}

/// One circuit.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CircuitRow {
    pub player: u32,
    /// Seconds after the start when it joined (None: it did not).
    pub joined_s: Option<f64>,
    pub error: Option<String>,
    /// Client end: mean requested and received rates (kbit/s), loss (%), last RTT (ms).
    pub request_kbps: f64,
    pub received_kbps: f64,
    pub loss_pct: f64,
    pub rtt_ms: Option<f64>,
    pub packets: u64,
    pub throttles_sent: u64,
    /// Server end: mean allowance and sent rate (kbit/s), task-channel delay (ms), resends.
    pub allowance_kbps: f64,
    pub sent_kbps: f64,
    pub task_delay_ms: f64,
    pub task_delay_max_ms: f64,
    pub resent: u64,
    pub given_up: u64,
}

/// One second over all circuits.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SecondRow {
    pub t_s: u64,
    /// Circuits up (client side) in this second.
    pub circuits: u32,
    /// The throttles' requests: mean, 10th and 90th percentile over circuits (kbit/s).
    pub request_kbps_mean: f64,
    pub request_kbps_p10: f64,
    pub request_kbps_p90: f64,
    /// Server side, summed over circuits: the allowances and what each channel carried (kbit/s,
    /// resend, land, wind, cloud, task, texture, asset).
    pub allowance_kbps: f64,
    pub channel_kbps: [f64; 7],
    /// Client side: received (kbit/s, sum) and loss (%, all circuits).
    pub received_kbps: f64,
    pub loss_pct: f64,
    /// Server side: mean task-channel queueing delay (ms, over circuits that sent task packets).
    pub task_delay_ms: f64,
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Builds the summary from both sides' circuits.
pub fn summarise(sc: &Scenario, cfg: &Config, clients: &[JoinedCircuit], served: &[ServedCircuit], interruption: Option<String>) -> CircuitSummary {
    let by_player: BTreeMap<u32, &ServedCircuit> = served.iter().map(|s| (s.player, s)).collect();
    let mut rows = Vec::with_capacity(clients.len());
    for c in clients {
        let s = by_player.get(&c.player);
        let srows: &[Row] = s.map_or(&[], |s| &s.seconds);
        let st = &c.stats;
        rows.push(CircuitRow {
            player: c.player,
            joined_s: c.joined_s,
            error: c.error.clone(),
            request_kbps: mean(c.seconds.iter().map(|r| r.rate_kbps)),
            received_kbps: mean(c.seconds.iter().map(|r| r.total_kbps)),
            loss_pct: if st.seq_span > 0 { 100.0 * st.seq_span.saturating_sub(st.fresh) as f64 / st.seq_span as f64 } else { 0.0 },
            rtt_ms: st.rtt_ms,
            packets: st.packets,
            throttles_sent: st.throttles_sent,
            allowance_kbps: mean(srows.iter().map(|r| r.rate_kbps)),
            sent_kbps: mean(srows.iter().map(|r| r.total_kbps)),
            task_delay_ms: mean(srows.iter().filter(|r| r.kbps[4] > 0.0).map(|r| r.task_delay_ms)),
            task_delay_max_ms: s.map_or(0.0, |s| s.stats.task_delay_max_ms),
            resent: s.map_or(0, |s| s.stats.resent),
            given_up: s.map_or(0, |s| s.stats.given_up),
        });
    }
    // Per second, over circuits.
    let mut secs: BTreeMap<u64, SecondRow> = BTreeMap::new();
    let blank = |t_s| SecondRow {
        t_s,
        circuits: 0,
        request_kbps_mean: 0.0,
        request_kbps_p10: 0.0,
        request_kbps_p90: 0.0,
        allowance_kbps: 0.0,
        channel_kbps: [0.0; 7],
        received_kbps: 0.0,
        loss_pct: 0.0,
        task_delay_ms: 0.0,
    };
    let mut requests: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    let mut losses: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for c in clients {
        for r in &c.seconds {
            let e = secs.entry(r.t_s).or_insert_with(|| blank(r.t_s));
            e.circuits += 1;
            e.received_kbps += r.total_kbps;
            requests.entry(r.t_s).or_default().push(r.rate_kbps);
            let l = losses.entry(r.t_s).or_default();
            l.0 += r.loss_pct;
            l.1 += 1.0;
        }
    }
    let mut delays: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for s in served {
        for r in &s.seconds {
            let e = secs.entry(r.t_s).or_insert_with(|| blank(r.t_s));
            e.allowance_kbps += r.rate_kbps;
            for (a, b) in e.channel_kbps.iter_mut().zip(r.kbps) {
                *a += b;
            }
            if r.kbps[4] > 0.0 {
                let d = delays.entry(r.t_s).or_default();
                d.0 += r.task_delay_ms;
                d.1 += 1.0;
            }
        }
    }
    for (t, e) in secs.iter_mut() {
        if let Some(v) = requests.get_mut(t) {
            v.sort_by(f64::total_cmp);
            e.request_kbps_mean = mean(v.iter().copied());
            e.request_kbps_p10 = pct(v, 0.1);
            e.request_kbps_p90 = pct(v, 0.9);
        }
        if let Some(l) = losses.get(t) {
            e.loss_pct = l.0 / l.1;
        }
        if let Some(d) = delays.get(t) {
            e.task_delay_ms = d.0 / d.1;
        }
    }
    let busy: Vec<&Row> = served.iter().flat_map(|s| s.seconds.iter()).filter(|r| r.queued_kb > BUSY_KB && r.rate_kbps > 0.0).collect();
    let (span, fresh) = clients.iter().fold((0u64, 0u64), |a, c| (a.0 + c.stats.seq_span, a.1 + c.stats.fresh));
    let joined: Vec<&CircuitRow> = rows.iter().filter(|r| r.joined_s.is_some()).collect();
    let rtts: Vec<f64> = rows.iter().filter_map(|r| r.rtt_ms).collect();
    let totals = CircuitTotals {
        joined: joined.len() as u32,
        failed: (rows.len() - joined.len()) as u32,
        request_kbps_mean: mean(joined.iter().map(|r| r.request_kbps)),
        received_kbps: rows.iter().map(|r| r.received_kbps).sum(),
        sent_kbps: rows.iter().map(|r| r.sent_kbps).sum(),
        loss_pct: if span > 0 { 100.0 * span.saturating_sub(fresh) as f64 / span as f64 } else { 0.0 },
        rtt_ms_mean: (!rtts.is_empty()).then(|| mean(rtts.iter().copied())),
        allowance_use_pct: (!busy.is_empty())
            .then(|| 100.0 * busy.iter().map(|r| r.total_kbps).sum::<f64>() / busy.iter().map(|r| r.rate_kbps).sum::<f64>().max(1e-9)),
        task_kbps_mean: mean(served.iter().map(|s| mean(s.seconds.iter().map(|r| r.kbps[4])))),
        task_delay_ms_mean: mean(rows.iter().filter(|r| r.joined_s.is_some()).map(|r| r.task_delay_ms)),
        task_delay_ms_max: rows.iter().map(|r| r.task_delay_max_ms).fold(0.0, f64::max),
        resent: rows.iter().map(|r| r.resent).sum(),
        throttle_packets: rows.iter().map(|r| r.throttles_sent).sum(),
    };
    CircuitSummary {
        schema_version: CIRCUITS_SCHEMA_VERSION,
        kind: "circuits".into(),
        scenario: sc.name.clone(),
        service: sc.service.name.clone(),
        players: sc.players,
        duration_s: sc.duration_s,
        seed: sc.seed,
        throttle: cfg.throttle.clone(),
        regulator: cfg.mode.name().into(),
        interruption,
        totals,
        circuits: rows,
        seconds: secs.into_values().collect(),
        distributed: None,
    }
}

/// A few lines for people: what ran and the totals.
pub fn text(s: &CircuitSummary) -> String {
    let t = &s.totals;
    let mut o = format!(
        "{} regulated circuits ({} throttle, {} regulator) for {:.0} s: {} joined{}\n",
        s.players,
        s.throttle,
        s.regulator,
        s.duration_s,
        t.joined,
        if t.failed > 0 { format!(", {} did not", t.failed) } else { String::new() }
    );
    let _ = writeln!(
        o,
        "  throttles asked for {:.1} kbit/s per circuit on average; the clients received {:.1} kbit/s in all (server sent {:.1}), loss {:.2} %, RTT {}",
        t.request_kbps_mean,
        t.received_kbps,
        t.sent_kbps,
        t.loss_pct,
        t.rtt_ms_mean.map_or("-".into(), |r| format!("{r:.1} ms"))
    );
    let _ = writeln!(
        o,
        "  task channel {:.1} kbit/s per circuit, queueing {:.2} ms mean ({:.0} ms worst); allowance used while packets waited: {}; {} resent, {} throttle packets",
        t.task_kbps_mean,
        t.task_delay_ms_mean,
        t.task_delay_ms_max,
        t.allowance_use_pct.map_or("- (no queue)".into(), |u| format!("{u:.1} %")),
        t.resent,
        t.throttle_packets
    );
    o
}

/// Writes summary.json, circuits.csv, charts/*.svg and index.html into `out`.
pub fn write(
    sc: &Scenario,
    out: &Path,
    segments: &[Vec<behaviour::Segment>],
    s: &CircuitSummary,
    links: Option<&str>,
    clients: &[JoinedCircuit],
    served: &[ServedCircuit],
) -> anyhow::Result<()> {
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(s).context("encoding summary.json")?).context("writing summary.json")?;
    crate::inputs::write(sc, out)?;
    let mut csv = String::from("side,");
    csv.push_str(CSV_HEADER);
    for c in clients {
        for r in &c.seconds {
            csv.push_str("client,");
            csv.push_str(&crate::circuits::csv_line(r));
        }
    }
    for c in served {
        for r in &c.seconds {
            csv.push_str("server,");
            csv.push_str(&crate::circuits::csv_line(r));
        }
    }
    std::fs::write(out.join("circuits.csv"), csv).context("writing circuits.csv")?;
    let charts = charts(sc, segments, s, clients);
    std::fs::create_dir_all(out.join("charts")).context("creating charts/")?;
    for (name, _, svg) in &charts {
        std::fs::write(out.join("charts").join(name), svg).with_context(|| format!("writing charts/{name}"))?;
    }
    let mut sections: Vec<(String, String)> = charts.into_iter().map(|(_, title, svg)| (title, svg)).collect();
    sections.push(("Circuits".into(), table(s)));
    let title = format!("Horde regulated run: {}", s.scenario);
    let agents = s.distributed.as_ref().map(|d| format!("\nagents:\n{}", crate::report::agents_table(d, "packets"))).unwrap_or_default();
    let intro = format!("{}{}{agents}", text(s), links.map(|l| format!("\nemulated links:\n{l}")).unwrap_or_default());
    std::fs::write(out.join("index.html"), horde_stats::html::simple_page(&title, &intro, &sections)).context("writing index.html")?;
    Ok(())
}

/// `(file, section title, SVG)` of each chart.
fn charts(sc: &Scenario, segments: &[Vec<behaviour::Segment>], s: &CircuitSummary, clients: &[JoinedCircuit]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let t = |r: &SecondRow| r.t_s as f64;
    // The throttles over time: every circuit when they are few, else mean and the 10–90 % band.
    let req: Vec<Series> = if clients.iter().filter(|c| !c.seconds.is_empty()).count() <= 8 {
        clients
            .iter()
            .filter(|c| !c.seconds.is_empty())
            .map(|c| (format!("player {}", c.player), c.seconds.iter().map(|r| (r.t_s as f64, r.rate_kbps)).collect()))
            .collect()
    } else {
        vec![
            ("mean".into(), s.seconds.iter().map(|r| (t(r), r.request_kbps_mean)).collect()),
            ("10th percentile".into(), s.seconds.iter().map(|r| (t(r), r.request_kbps_p10)).collect()),
            ("90th percentile".into(), s.seconds.iter().map(|r| (t(r), r.request_kbps_p90)).collect()),
        ]
    };
    let title = format!("What the {} throttles asked for", s.throttle);
    out.push(("throttle.svg".into(), "Throttle over time".into(), Chart::new(&title, "time (s)", "kbit/s per circuit", &req).svg()));
    // Per-channel throughput, stacked, with the allowance.
    let mut ch: Vec<Series> =
        CHANNELS.iter().enumerate().map(|(i, n)| (n.to_string(), s.seconds.iter().map(|r| (t(r), r.channel_kbps[i])).collect())).collect();
    ch.push(("allowance".into(), s.seconds.iter().map(|r| (t(r), r.allowance_kbps)).collect()));
    let title = format!("Server → clients per channel, stacked ({} regulator), and the allowance", s.regulator);
    out.push(("channels.svg".into(), "Per-channel throughput".into(), Chart::new(&title, "time (s)", "kbit/s, all circuits", &ch).stack(7).svg()));
    let loss: Vec<Series> = vec![("".into(), s.seconds.iter().map(|r| (t(r), r.loss_pct)).collect())];
    out.push(("loss.svg".into(), "Loss".into(), Chart::new("Sequence numbers lost, per second (all circuits)", "time (s)", "%", &loss).svg()));
    let delay: Vec<Series> = vec![("".into(), s.seconds.iter().map(|r| (t(r), r.task_delay_ms)).collect())];
    out.push((
        "task-delay.svg".into(),
        "Task-channel delay".into(),
        Chart::new("Task-channel queueing delay at the server (mean over circuits)", "time (s)", "ms", &delay).svg(),
    ));
    // Avatars per state, from the behaviour process.
    let end = sc.duration_s.floor() as u64;
    let states: Vec<Series> = sc
        .service
        .states
        .iter()
        .enumerate()
        .map(|(k, st)| {
            let pts = (0..=end)
                .map(|x| {
                    let at = (x as f64).min(sc.duration_s - 1e-6);
                    (x as f64, segments.iter().filter(|segs| behaviour::state_at(segs, at).is_some_and(|g| g.state as usize == k)).count() as f64)
                })
                .collect();
            (st.name.clone(), pts)
        })
        .collect();
    out.push(("states.svg".into(), "Avatars per state".into(), Chart::new("Avatars per state (the behaviour process)", "time (s)", "players", &states).svg()));
    out
}

/// The per-circuit table (the first 500 circuits).
fn table(s: &CircuitSummary) -> String {
    let mut h = String::from("<table><tr><th>player</th><th>joined s</th><th>requested kbit/s</th><th>received kbit/s</th><th>loss %</th><th>RTT ms</th><th>allowance kbit/s</th><th>sent kbit/s</th><th>task delay ms (max)</th><th>resent</th><th>throttle packets</th><th class=\"t\">note</th></tr>");
    for r in s.circuits.iter().take(500) {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2} ({:.0})</td><td>{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            r.player,
            r.joined_s.map_or("-".into(), |j| format!("{j:.1}")),
            r.request_kbps,
            r.received_kbps,
            r.loss_pct,
            r.rtt_ms.map_or("-".into(), |x| format!("{x:.1}")),
            r.allowance_kbps,
            r.sent_kbps,
            r.task_delay_ms,
            r.task_delay_max_ms,
            r.resent,
            r.throttles_sent,
            esc(r.error.as_deref().unwrap_or(""))
        );
    }
    h.push_str("</table>");
    if s.circuits.len() > 500 {
        let _ = write!(h, "<p>The first 500 of {} circuits; every one is in summary.json and circuits.csv.</p>", s.circuits.len());
    }
    h
}
