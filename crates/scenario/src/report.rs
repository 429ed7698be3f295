//! A run's results: [`Summary`] (the contract behind `summary.json`, described by
//! `docs/schemas/summary.schema.json`) and the report directory.

use std::path::Path;

use anyhow::Context as _;
use horde_engine::SendReport;
use horde_model::scenario::Scenario;
use horde_stats::game::{self, Context, GameAnalysis};
use serde::{Deserialize, Serialize};

use crate::players::Players;

/// Version of `summary.json`'s layout. Bump it (and add a line to docs/CHANGELOG-results.md)
/// whenever a field changes meaning, is renamed or removed; adding a field is a minor change
/// that also gets a changelog line.
pub const SUMMARY_SCHEMA_VERSION: u32 = 3;

/// APDUs sent this close to an interruption are left out of every count: they may have been in
/// flight (1 s covers the delay of any link Horde emulates in practice).
pub const IN_FLIGHT_GRACE_S: f64 = 1.0;

/// A run that stopped before its end, and what the statistics cover.
#[derive(Serialize, Clone, Debug, schemars::JsonSchema)]
pub struct Interruption {
    /// Seconds into the run when it stopped.
    pub at_s: f64,
    /// Seconds covered by the statistics: up to `IN_FLIGHT_GRACE_S` before the stop.
    pub analysed_s: f64,
    /// "interrupted" (a signal), or why the server side stopped.
    pub reason: String,
}

impl Interruption {
    /// The interruption of a run, if it was one. `died`: the server side's exit status and the
    /// real time (ns) it was seen dead.
    pub fn of(sc: &Scenario, client: &SendReport, server: Option<&SendReport>, died: Option<&(String, u64)>, signalled: bool) -> Option<Interruption> {
        if !(client.interrupted || signalled || died.is_some()) {
            return None;
        }
        let mut end = client.end_real_ns;
        if let Some(s) = server.filter(|s| s.end_real_ns > 0) {
            end = end.min(s.end_real_ns);
        }
        if let Some((_, t)) = died {
            end = end.min(*t);
        }
        let at_s = (end.saturating_sub(client.t0_real_ns) as f64 / 1e9).min(sc.duration_s);
        // A killed server side's log lacks up to its last flush interval as well.
        let (reason, grace) = match died {
            Some((status, _)) => (format!("the server side exited ({status})"), IN_FLIGHT_GRACE_S + horde_engine::logger::FLUSH_EVERY_NS as f64 / 1e9),
            None => ("interrupted".into(), IN_FLIGHT_GRACE_S),
        };
        Some(Interruption { at_s, analysed_s: (at_s - grace).max(0.0), reason })
    }

    /// One sentence for people.
    pub fn note(&self, duration_s: f64) -> String {
        format!(
            "{} at {:.1} s of {:.0} s: statistics cover the first {:.1} s (APDUs sent after that may have been in flight, or unlogged by a killed process, and are left out)",
            self.reason, self.at_s, duration_s, self.analysed_s
        )
    }
}

/// CPU time and peak memory of this process (the client side) and of the server-side child
/// (zero when the server side ran in this process: its share is then in the client's).
#[derive(Serialize, Clone, Copy, Debug, Default, schemars::JsonSchema)]
pub struct Usage {
    pub client_cpu_s: f64,
    pub client_max_rss_kb: u64,
    pub server_cpu_s: f64,
    pub server_max_rss_kb: u64,
}

impl Usage {
    /// This process's usage so far, and that of the server-side child it reaped (measured
    /// for that child alone: `RUSAGE_CHILDREN` would also hold whatever the process that exec'd
    /// horde had reaped, e.g. `cargo run`'s build).
    pub fn now() -> Usage {
        let own = horde_sys::host::own_usage();
        let (s, sr) = crate::child::child_usage().unwrap_or((0.0, 0));
        Usage { client_cpu_s: own.cpu_s, client_max_rss_kb: own.max_rss_kb, server_cpu_s: s, server_max_rss_kb: sr }
    }
}

/// One direction of an emulated link at one sample.
#[derive(Serialize, Clone, Copy, Debug, Default, schemars::JsonSchema)]
pub struct LinkDirPoint {
    /// Frames that entered the link so far.
    pub packets: u64,
    /// Frames dropped so far: random or burst loss, queue limit, delay-line limit.
    pub dropped: u64,
    /// Bytes in the rate limiter's queue.
    pub queue_bytes: u64,
    /// Bytes inside the link (queued or being delayed).
    pub in_flight_bytes: u64,
}

/// An emulated link's counters, sampled once a second during a run.
#[derive(Serialize, Clone, Debug, Default, schemars::JsonSchema)]
pub struct LinkSeries {
    pub a: String,
    pub b: String,
    /// `(seconds since the start, a → b, b → a)`.
    pub points: Vec<(f64, LinkDirPoint, LinkDirPoint)>,
}

impl LinkSeries {
    /// Adds one sample of every link to the series.
    pub fn record(series: &mut Vec<LinkSeries>, t_s: f64, links: &[horde_emu::fwd::LinkReport]) {
        let point = |d: &horde_emu::fwd::DirReport| LinkDirPoint {
            packets: d.packets,
            dropped: d.dropped(),
            queue_bytes: d.queue_bytes,
            in_flight_bytes: d.in_flight_bytes,
        };
        for l in links {
            let i = match series.iter().position(|s| s.a == l.a && s.b == l.b) {
                Some(i) => i,
                None => {
                    series.push(LinkSeries { a: l.a.clone(), b: l.b.clone(), points: Vec::new() });
                    series.len() - 1
                }
            };
            series[i].points.push((t_s, point(&l.ab), point(&l.ba)));
        }
    }

    /// Charts of this link: queue and in-flight bytes, and drops per second, per direction.
    pub fn charts(&self, marks: &[(f64, String)]) -> Vec<(String, String)> {
        use horde_stats::charts::{Chart, Series};
        let (ab, ba) = (format!("{} → {}", self.a, self.b), format!("{} → {}", self.b, self.a));
        let pick =
            |f: fn(&LinkDirPoint) -> f64, d: usize| -> Vec<(f64, f64)> { self.points.iter().map(|(t, x, y)| (*t, f(if d == 0 { x } else { y }))).collect() };
        let queue: Vec<Series> = vec![
            (format!("{ab} queue"), pick(|p| p.queue_bytes as f64 / 1e3, 0)),
            (format!("{ab} in flight"), pick(|p| p.in_flight_bytes as f64 / 1e3, 0)),
            (format!("{ba} queue"), pick(|p| p.queue_bytes as f64 / 1e3, 1)),
            (format!("{ba} in flight"), pick(|p| p.in_flight_bytes as f64 / 1e3, 1)),
        ];
        let drops = |d: usize| -> Vec<(f64, f64)> {
            self.points
                .windows(2)
                .map(|w| {
                    let (p, q) = if d == 0 { (&w[0].1, &w[1].1) } else { (&w[0].2, &w[1].2) };
                    (w[1].0, (q.dropped - p.dropped) as f64 / (w[1].0 - w[0].0).max(1e-3))
                })
                .collect()
        };
        let drop_series: Vec<Series> = vec![(ab, drops(0)), (ba, drops(1))];
        let name = format!("{}-{}", self.a, self.b);
        vec![
            (
                format!("link-{name}-queue.svg"),
                Chart::new(&format!("Emulated link {}–{}: bytes queued and in flight", self.a, self.b), "time (s)", "kB", &queue).marks(marks).svg(),
            ),
            (
                format!("link-{name}-drops.svg"),
                Chart::new(&format!("Emulated link {}–{}: frames dropped per second", self.a, self.b), "time (s)", "frames/s", &drop_series).marks(marks).svg(),
            ),
        ]
    }
}

/// One verdict box of the report: a label, its value, the limit it was judged against, and
/// whether it is what a good run shows.
#[derive(Serialize, Deserialize, Debug, Clone, schemars::JsonSchema)]
pub struct VerdictBox {
    pub label: String,
    pub value: String,
    pub limit: String,
    /// A generator verdict: Horde did what was asked. A path figure: the network left the
    /// traffic as it departed (nothing lost, distributions unchanged beyond chance).
    pub ok: bool,
    /// Which side of the run the box judges (absent in summaries before schema 3: generator).
    #[serde(default)]
    pub kind: VerdictKind,
}

/// The three kinds of box, never mixed.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerdictKind {
    /// What Horde controls, from the sender's own records: red is Horde's failure.
    #[default]
    Generator,
    /// What the network did (loss; arrivals against departures): a figure, never a failure of
    /// the run.
    Path,
    /// How close the service's model is to real traffic at the run's player count (the
    /// service's `[fidelity]` figures from its capture bench): a figure about the model, not
    /// this run; `ok` when the model is within 1.5 × the real server's own spread.
    Model,
}

/// Everything a run produced: `summary.json`.
#[derive(Serialize, Debug, schemars::JsonSchema)]
pub struct Summary {
    /// [`SUMMARY_SCHEMA_VERSION`].
    pub schema_version: u32,
    pub scenario: String,
    pub service: String,
    pub players: u32,
    pub duration_s: f64,
    pub seed: u64,
    pub start_hour: f64,
    pub variables: std::collections::BTreeMap<String, f64>,
    pub client: SendReport,
    /// Players the server side served (granted at their hello and sent or received traffic).
    pub server_connections: u64,
    /// Received APDUs that differed from the peer's regenerated schedule, both sides (must be 0).
    pub mismatched: u64,
    pub resources: Usage,
    /// Counters of the emulated links (runs with `[emu]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated_links: Option<Vec<horde_emu::fwd::LinkReport>>,
    /// The emulated links' counters once a second (runs with `[emu]` and emulated links).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub emulated_link_series: Vec<LinkSeries>,
    /// A run stopped before its end (a signal, or the server side died) and what the
    /// statistics cover; absent for a complete run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interruption: Option<Interruption>,
    /// A distributed run's agents, clock offsets and missing players (`horde run --agents`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<Distributed>,
    /// How many players were online (the target) from when: the start's, then each change the
    /// command channel made. Absent when every player was online throughout.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub online: Vec<OnlineChange>,
    /// Players the online target had online at some time of the run — those expected to
    /// connect (a run started with `--online 50` of 100 expects 50). Absent when every player
    /// was online throughout.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub asked_online: Option<u32>,
    /// What the run's commands changed in the emulated network, when: a link taken down or
    /// brought up, a link's settings changed (marked on the report's time charts).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub network_events: Vec<NetworkEvent>,
    /// TCP runs: where a backlog waits before the network, once a second — each side's TCP
    /// send queues together (`charts/tcp-send-queue.svg`, beside an emulated link's own queue).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tcp_send_queue: Option<crate::sender_charts::TcpSendQueues>,
    pub analysis: GameAnalysis,
    /// The report's verdict boxes (the same as index.html's): every player connected, nothing
    /// lost, each rate and fit within what chance allows at its sample size (the limit shown).
    pub verdicts: Vec<VerdictBox>,
}

/// A change the run's commands made to the emulated network.
#[derive(Serialize, Deserialize, Debug, Clone, schemars::JsonSchema)]
pub struct NetworkEvent {
    /// Seconds since the players started.
    pub at_s: f64,
    pub what: String,
}

/// The online target from a time on (seconds of the players' clock).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, schemars::JsonSchema)]
pub struct OnlineChange {
    pub at_s: f64,
    pub online: u32,
}

impl OnlineChange {
    /// A roster's changes, if any player was ever offline by it.
    pub fn of(changes: &[(u64, u32)], players: u32) -> Vec<OnlineChange> {
        if changes.iter().all(|c| c.1 == players) {
            return Vec::new();
        }
        changes.iter().map(|&(t, online)| OnlineChange { at_s: t as f64 / 1e9, online }).collect()
    }

    /// "300 → 600 at 3.25 s → 150 at 8.25 s".
    pub fn describe(changes: &[OnlineChange]) -> String {
        changes.iter().map(|c| if c.at_s == 0.0 { c.online.to_string() } else { format!("{} at {:.2} s", c.online, c.at_s) }).collect::<Vec<_>>().join(" → ")
    }
}

/// What a run measured, before analysis.
pub struct Outcomes {
    pub client: SendReport,
    pub server: SendReport,
    pub usage: Usage,
    pub links: Option<Vec<horde_emu::fwd::LinkReport>>,
    pub link_series: Vec<LinkSeries>,
    /// The emulated topology's picture (runs with `[emu]`).
    pub topology_svg: Option<String>,
    pub interruption: Option<Interruption>,
    /// The players whose records the logs hold (all, a shard, or the shards of the agents
    /// that finished a distributed run).
    pub present: Vec<std::ops::Range<u32>>,
    /// A distributed run's agents (`horde run --agents`).
    pub distributed: Option<Distributed>,
    /// The roster's changes (schedule ns, online target).
    pub online: Vec<(u64, u32)>,
    /// Changes the run's commands made to the emulated network (seconds since the players
    /// started, what): marked on the time charts.
    pub marks: Vec<(f64, String)>,
}

/// A distributed run (`horde run --agents`): its agents, and what is missing if one was lost.
#[derive(Serialize, Deserialize, Clone, Debug, Default, schemars::JsonSchema)]
pub struct Distributed {
    pub agents: Vec<AgentRow>,
    /// The agent that ran the server side.
    pub server_agent: String,
    /// Some agent was lost during the run: the statistics cover the others' players only.
    pub partial: bool,
    /// Players whose agent was lost (ranges of player ids, `a..b` = a to b-1).
    pub missing_players: Vec<std::ops::Range<u32>>,
    /// Log bytes the controller collected: as the agents wrote them, and as transferred
    /// (compressed). With `collected` = "summaries", the summaries' bytes.
    pub log_bytes: u64,
    pub log_bytes_transferred: u64,
    /// What the agents sent after the run: "logs" (the report is computed over all records) or
    /// "summaries" (`--collect summaries`: one mergeable summary each; rows carry `bounds`).
    #[serde(default = "logs")]
    pub collected: String,
    /// With summaries: whether each agent's live summary (the pieces it sent once a second,
    /// what the progress lines showed) added up to its final one, exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveCheck>,
}

/// Live summaries against final ones (see [`Distributed::live`]).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
pub struct LiveCheck {
    /// Agents whose live and final summaries were compared, and of those the ones whose pieces
    /// add up to the final summary exactly.
    pub agents: u32,
    pub agree: u32,
    /// Pieces received, all agents together.
    pub pieces: u64,
    /// Each agent that did not agree, and how.
    pub differ: Vec<String>,
}

fn logs() -> String {
    "logs".into()
}

/// One agent of a distributed run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, schemars::JsonSchema)]
pub struct AgentRow {
    pub name: String,
    pub address: String,
    /// "clients", "server" or "server+clients".
    pub role: String,
    /// The player ids it ran (`a..b`), if any.
    pub players: Option<std::ops::Range<u32>>,
    pub apdus_sent: u64,
    pub apdus_received: u64,
    #[serde(flatten)]
    pub stats: AgentStats,
}

/// The columns every kind of distributed run reports for each agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, schemars::JsonSchema)]
pub struct AgentStats {
    pub cpu_s: f64,
    pub max_rss_kb: u64,
    /// Its clock minus the controller's (ms), from the best NTP-style sample over the control
    /// channel; every timestamp it logged is corrected by this before analysis.
    pub clock_offset_ms: f64,
    /// The offset's uncertainty (± ms): half the round trip of the best sample.
    pub clock_uncertainty_ms: f64,
    /// The control channel's best round-trip time (ms).
    pub rtt_ms: f64,
    /// "finished", or when and why it was lost.
    pub status: String,
    /// Log bytes it wrote and the bytes its logs took on the control channel (compressed).
    pub log_bytes: u64,
    pub log_bytes_transferred: u64,
}

impl AgentStats {
    /// The shared columns' header in the agents tables of every kind of run.
    pub const HEADER: &'static str = "  CPU s    RSS MB  clock offset ms   RTT ms    log MB  status";

    /// This agent's shared columns, aligned under [`AgentStats::HEADER`].
    pub fn cells(&self) -> String {
        format!(
            "{:>7.1} {:>9.1} {:>16} {:>8.3} {:>9.2}  {}",
            self.cpu_s,
            self.max_rss_kb as f64 / 1024.0,
            format!("{:+.3} ± {:.3}", self.clock_offset_ms, self.clock_uncertainty_ms),
            self.rtt_ms,
            self.log_bytes as f64 / 1e6,
            self.status
        )
    }
}

/// A player's stays cut to the spans the roster had it online.
fn online_only(segs: &[horde_model::behaviour::Segment], spans: &[(u64, u64)]) -> Vec<horde_model::behaviour::Segment> {
    let mut out = Vec::new();
    for &(a, b) in spans {
        let (a, b) = (a as f64 / 1e9, b as f64 / 1e9);
        for s in segs.iter().filter(|s| s.end_s > a && s.start_s < b) {
            let cut = s.start_s < a || s.end_s > b;
            out.push(horde_model::behaviour::Segment { start_s: s.start_s.max(a), end_s: s.end_s.min(b), complete: s.complete && !cut, ..*s });
        }
    }
    out
}

/// The players' stays as the analysis counts them: a shard's report covers its own players (the
/// others spent no time in any category here), and players the roster took offline spent that
/// time in no category either. An agent summarising its records uses the same stays.
pub fn analysed_segments<'a>(
    sc: &Scenario,
    players: &'a Players,
    present: &[std::ops::Range<u32>],
) -> std::borrow::Cow<'a, [Vec<horde_model::behaviour::Segment>]> {
    let segments = players.all_segments();
    let all = present.len() == 1 && present[0] == (0..segments.len() as u32);
    if all && players.roster.everyone_throughout() {
        return segments;
    }
    let here = |p: u32| present.iter().any(|r| r.contains(&p));
    let end_ns = (sc.duration_s * 1e9) as u64;
    std::borrow::Cow::Owned(
        segments.iter().enumerate().map(|(p, s)| if here(p as u32) { online_only(s, &players.roster.spans(p as u32, end_ns)) } else { Vec::new() }).collect(),
    )
}

/// Player `p`'s stays as [`analysed_segments`] counts them for a report of every player, with
/// the roster as it is now (none: `p` is not planned). A summary built while the run goes asks
/// for a record's player when the roster has changed since it last did: the changes that clip
/// a stay before a record's time are known by then (they are stamped ahead).
pub fn analysed_stays(sc: &Scenario, players: &Players, p: u32) -> Option<Vec<horde_model::behaviour::Segment>> {
    let stays = players.stays(p)?;
    if players.roster.everyone_throughout() {
        return Some(stays);
    }
    Some(online_only(&stays, &players.roster.spans(p, (sc.duration_s * 1e9) as u64)))
}

/// Analyses the logs in `out` and writes the report directory: `summary.json`,
/// the run's inputs (`scenario.toml`, `run.json`: [`crate::inputs`]), `charts/*.svg` and `index.html`.
pub fn write(sc: &Scenario, out: &Path, players: &Players, o: Outcomes) -> anyhow::Result<Summary> {
    let interrupted = o.interruption.is_some();
    let load = |f: &str| -> anyhow::Result<Vec<horde_wire::Record>> {
        let p = out.join(f);
        // a run stopped before a side opened its log has no records from it
        if interrupted && !p.exists() {
            return Ok(Vec::new());
        }
        horde_stats::records_of(&p).map_err(anyhow::Error::msg)
    };
    let (c, s) = (load("client.hlog")?, load("server.hlog")?);
    write_records(sc, out, players, o, &c, &s)
}

/// [`write`] on records already loaded (a distributed run's, merged from its agents' logs and
/// corrected to one clock).
pub fn write_records(sc: &Scenario, out: &Path, players: &Players, o: Outcomes, c: &[horde_wire::Record], s: &[horde_wire::Record]) -> anyhow::Result<Summary> {
    write_with(sc, out, players, o, |ctx| game::analyse(ctx, c, s))
}

/// Every event of the run on its clock, for the charts over time: the online target's changes
/// (from the roster, on every side alike) and what the commands changed in the network.
fn time_marks(o: &Outcomes) -> Vec<(f64, String)> {
    let mut marks: Vec<(f64, String)> = o.online.iter().skip(1).map(|(at_ns, n)| (*at_ns as f64 / 1e9, format!("online → {n}"))).collect();
    marks.extend(o.marks.iter().cloned());
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    marks
}

/// [`write`] from a merged summary instead of records (`horde run --collect summaries`): the
/// same figures, exact or within the bounds each row states.
pub fn write_summary(sc: &Scenario, out: &Path, players: &Players, o: Outcomes, d: &horde_stats::digest::GameDigest) -> anyhow::Result<Summary> {
    write_with(sc, out, players, o, |ctx| horde_stats::digest::analyse(ctx, d))
}

fn write_with(sc: &Scenario, out: &Path, players: &Players, o: Outcomes, analyse: impl FnOnce(&Context) -> GameAnalysis) -> anyhow::Result<Summary> {
    let segments = &*analysed_segments(sc, players, &o.present);
    let ctx = Context {
        service: &sc.service,
        traffic: &players.traffic,
        segments,
        duration_s: o.interruption.as_ref().map_or(sc.duration_s, |i| i.analysed_s),
        epoch_ns: o.client.t0_real_ns,
        cutoff_ns: o.interruption.as_ref().map(|i| o.client.t0_real_ns + (i.analysed_s * 1e9) as u64),
    };
    let g = analyse(&ctx);
    let marks = time_marks(&o);
    let mut charts = horde_stats::html::game_charts(&g, &ctx, &marks);
    if let Some(t) = &o.topology_svg {
        charts.insert(0, ("topology.svg".to_string(), t.clone()));
    }
    for l in &o.link_series {
        charts.extend(l.charts(&o.marks));
    }
    if let Some(svg) = crate::sender_charts::host_chart(&o.client.host) {
        charts.push(("host.svg".to_string(), svg));
    }
    let tcp_send_queue = crate::sender_charts::TcpSendQueues::of(&o.client, &o.server);
    if let Some(q) = &tcp_send_queue {
        charts.push(("tcp-send-queue.svg".to_string(), q.chart(&marks)));
    }
    std::fs::create_dir_all(out.join("charts")).context("creating charts/")?;
    for (name, svg) in &charts {
        std::fs::write(out.join("charts").join(name), svg).with_context(|| format!("writing charts/{name}"))?;
    }
    let summary = Summary {
        schema_version: SUMMARY_SCHEMA_VERSION,
        scenario: sc.name.clone(),
        service: sc.service.name.clone(),
        // every player the run planned, at its start or on demand
        players: players.len(),
        duration_s: sc.duration_s,
        seed: sc.seed,
        start_hour: sc.start_hour,
        variables: players.traffic.vars.clone(),
        // Players the server side granted (connections refused at their hello are counted in
        // the server side's refusals, not here).
        server_connections: o.server.flows.iter().filter(|f| f.packets > 0 || f.received > 0).count() as u64,
        mismatched: o.client.mismatched + o.server.mismatched,
        client: o.client,
        resources: o.usage,
        emulated_links: o.links,
        emulated_link_series: o.link_series,
        interruption: o.interruption,
        distributed: o.distributed,
        online: OnlineChange::of(&o.online, players.len()),
        asked_online: (!players.roster.everyone_throughout()).then(|| {
            let end_ns = (sc.duration_s * 1e9) as u64;
            (0..players.len()).filter(|&p| !players.roster.spans(p, end_ns).is_empty()).count() as u32
        }),
        network_events: o.marks.iter().map(|(at_s, what)| NetworkEvent { at_s: *at_s, what: what.clone() }).collect(),
        tcp_send_queue,
        analysis: g,
        verdicts: Vec::new(),
    };
    let mut summary = summary;
    // The page's boxes and summary.json's are one computation.
    summary.verdicts = verdict(&summary)
        .into_iter()
        .map(|v| VerdictBox { kind: if v.path { VerdictKind::Path } else { VerdictKind::Generator }, label: v.label, value: v.value, limit: v.limit, ok: v.ok })
        .chain(crate::model_check::model_box(sc).map(|m| VerdictBox { kind: VerdictKind::Model, label: m.label, value: m.value, limit: m.limit, ok: m.ok }))
        .collect();
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)?).context("writing summary.json")?;
    crate::inputs::write(sc, out)?;
    let mut note = summary.interruption.as_ref().map(|i| format!(" — {}", i.note(sc.duration_s))).unwrap_or_default();
    if !summary.online.is_empty() {
        note.push_str(&format!(" — players online: {}", OnlineChange::describe(&summary.online)));
    }
    let page = horde_stats::html::game_page(
        &format!("Horde run: {} ({} × {}, {:.0} s, seed {}){note}", sc.name, sc.players, sc.service.name, sc.duration_s, sc.seed),
        &sc.text,
        summary.emulated_links.as_deref().map(horde_emu::fwd::links_table).as_deref(),
        summary.distributed.as_ref().map(|d| agents_table(d, "APDUs")).as_deref(),
        &summary.analysis,
        &charts,
        &summary
            .verdicts
            .iter()
            .map(|v| horde_stats::html::Verdict {
                label: v.label.clone(),
                value: v.value.clone(),
                limit: v.limit.clone(),
                ok: v.ok,
                path: v.kind == VerdictKind::Path,
                model: v.kind == VerdictKind::Model,
            })
            .collect::<Vec<_>>(),
    );
    std::fs::write(out.join("index.html"), page).context("writing index.html")?;
    Ok(summary)
}

/// The per-agent table of a distributed run's report, as text; `unit` names what the sent and
/// received columns count ("APDUs" for players, "packets" for regulated circuits).
pub fn agents_table(d: &Distributed, unit: &str) -> String {
    let sent = format!("{unit} sent");
    let mut t = format!("{:<22} {:<14} {:<13} {:>12} {:>10} {}\n", "agent", "role", "players", sent, "received", AgentStats::HEADER);
    for a in &d.agents {
        let players = a.players.as_ref().map(|r| format!("{}..{}", r.start, r.end)).unwrap_or_else(|| "-".into());
        t.push_str(&format!("{:<22} {:<14} {:<13} {:>12} {:>10} {}\n", a.name, a.role, players, a.apdus_sent, a.apdus_received, a.stats.cells()));
    }
    if d.partial {
        let m: Vec<String> = d.missing_players.iter().map(|r| format!("{}..{}", r.start, r.end)).collect();
        t.push_str(&format!("PARTIAL: players {} were lost with their agent; the statistics cover the others.\n", m.join(", ")));
    }
    t.push_str(&format!(
        "{} collected: {:.2} MB written by the agents, {:.2} MB transferred (deflate)\n",
        if d.collected == "summaries" { "summaries" } else { "logs" },
        d.log_bytes as f64 / 1e6,
        d.log_bytes_transferred as f64 / 1e6
    ));
    t
}

/// Significance of every verdict that is a statistical test: 5 %, shared among the tests of
/// one kind on the page (Bonferroni), so a healthy run shows a red box by chance at most one
/// time in twenty.
pub const VERDICT_ALPHA: f64 = 0.05;
/// The smallest KS distance judged a misfit whatever the sample size: with hundreds of
/// thousands of samples the test's critical value falls below what the 1-ms rounding of
/// inter-arrival times and the realised sub-activity mix leave in a faithful run (0.011 at
/// 10,000 WoW players, bench/RESULTS-players.md).
pub const KS_FLOOR: f64 = 0.02;
/// Departures more than 1 ms late, as a share of all: above 1 % the generator did not keep up.
pub const LATE_SHARE_LIMIT: f64 = 0.01;

/// The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
#[allow(clippy::excessive_precision)] // Acklam's published coefficients, kept as published
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.383577518672690e2, -3.066479806614716e1, 2.506628277459239];
    const B: [f64; 5] = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0);
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// How far a category's measured rate may stray from the model's by chance, in %: the
/// two-sided (1 − α) interval of a renewal process's count over `n` departures, z·CV/√n, plus
/// the bias of its fresh starts ((CV² − 1)/2 departures each, over `stays` stays).
pub fn rate_limit_pct(cv: f64, n: u64, stays: u64, alpha: f64) -> f64 {
    let n = n.max(1) as f64;
    let z = normal_quantile(1.0 - alpha / 2.0);
    100.0 * (z * cv / n.sqrt() + ((cv * cv - 1.0) / 2.0).max(0.0) * stays as f64 / n)
}

/// The KS distance above which a fit of `n` samples is rejected at significance `alpha`
/// (asymptotic critical value, sqrt(−ln(α/2)/2)/√n), never below [`KS_FLOOR`].
pub fn ks_limit(n: u64, alpha: f64) -> f64 {
    ((-(alpha / 2.0).ln() / 2.0).sqrt() / (n.max(1) as f64).sqrt()).max(KS_FLOOR)
}

/// The boxes at the top of the report, of two kinds never mixed ([`VerdictKind`]).
/// Generator verdicts judge what Horde controls, from the sender's own records: did every
/// agent finish and every player asked to be online connect, do the departures follow the
/// model (rate and distributions, each against what chance allows at its sample size, the
/// limit shown), did the generator keep its schedule. Path figures describe what the network
/// did: what was lost, and how far what arrived is from what departed.
pub fn verdict(s: &Summary) -> Vec<horde_stats::html::Verdict> {
    use horde_stats::html::Verdict;
    let missing: u32 = s.distributed.as_ref().map_or(0, |d| d.missing_players.iter().map(|r| r.end - r.start).sum());
    // Those asked to be online: a run started (or steered) below its pool is not a failure.
    let expected = match (s.asked_online, &s.distributed) {
        (Some(n), None) => n as usize,
        _ => s.client.flows.len() + missing as usize,
    };
    let connected = s.client.flows.iter().filter(|f| f.packets > 0 || f.received > 0).count();
    let mut v = Vec::new();
    if let Some(d) = &s.distributed {
        let lost = d.agents.iter().filter(|a| a.stats.status != "finished").count();
        v.push(Verdict::generator("agents finished", format!("{} of {}", d.agents.len() - lost, d.agents.len()), "all".into(), lost == 0));
    }
    let limit = match s.asked_online {
        Some(_) if s.distributed.is_none() => format!("all those online ({expected} of the {} planned)", s.client.flows.len()),
        _ => "all".into(),
    };
    v.push(Verdict::generator("players connected", format!("{connected} of {expected}"), limit, connected == expected));
    v.extend(departure_verdicts(&s.analysis));
    if s.client.packets > 0 {
        v.push(lateness_verdict(&s.client));
    }
    if let Some(i) = &s.interruption {
        v.push(Verdict::generator("interrupted", format!("at {:.1} s", i.at_s), "ran to its end".into(), false));
    }
    v.extend(path_figures(&s.analysis));
    v
}

/// Generator verdicts on the departures (the sender's own records, before the network):
/// the worst category's rate against the model's, and the worst fit of sizes and
/// inter-departure times, each a test at its own sample size (Bonferroni over its kind).
pub fn departure_verdicts(g: &GameAnalysis) -> Vec<horde_stats::html::Verdict> {
    use horde_stats::html::Verdict;
    let mut v = Vec::new();
    let rows = || g.categories.iter().flat_map(|c| [(c, "up", &c.up), (c, "down", &c.down)]);
    // Rates: every category and direction with a model rate and a finite CV is a test.
    let rated: Vec<_> = rows().filter(|r| r.2.departure_rate_error_pct.is_some() && r.2.model_idt_cv.is_some() && r.2.sent > 0).collect();
    let alpha = VERDICT_ALPHA / rated.len().max(1) as f64;
    let judged = rated.iter().map(|(c, d, st)| {
        let limit = rate_limit_pct(st.model_idt_cv.unwrap_or(0.0), st.sent, c.stays, alpha);
        (c, d, st, st.departure_rate_error_pct.unwrap_or(0.0), limit)
    });
    if let Some((c, d, st, e, limit)) = judged.max_by(|a, b| (a.3.abs() / a.4).total_cmp(&(b.3.abs() / b.4))) {
        v.push(Verdict::generator(
            &format!("worst departure rate vs model ({} {d})", c.category),
            format!("{e:+.2} %"),
            format!("limit ±{limit:.2} % at n = {}, CV {:.2} ({} tests, α = {VERDICT_ALPHA})", st.sent, st.model_idt_cv.unwrap_or(0.0), rated.len()),
            e.abs() <= limit,
        ));
    }
    let mut fits = Vec::new();
    for (c, d, st) in rows() {
        if let Some(k) = st.ks_departure_size {
            fits.push((c, d, "sizes", k, st.sent));
        }
        if let Some(k) = st.ks_departure_iat {
            fits.push((c, d, "inter-departures", k, st.departure_iat_samples));
        }
    }
    let alpha = VERDICT_ALPHA / fits.len().max(1) as f64;
    if let Some((c, d, what, k, n)) = fits.iter().max_by(|a, b| (a.3 / ks_limit(a.4, alpha)).total_cmp(&(b.3 / ks_limit(b.4, alpha)))) {
        let limit = ks_limit(*n, alpha);
        v.push(Verdict::generator(
            &format!("worst departure fit to the model ({} {d}, {what})", c.category),
            format!("KS {k:.3}"),
            format!("limit {limit:.3} at n = {n} ({} tests, α = {VERDICT_ALPHA}; at least {KS_FLOOR})", fits.len()),
            *k <= limit,
        ));
    }
    v
}

/// The generator's schedule: departures more than 1 ms late, excused where the host allows it.
fn lateness_verdict(c: &SendReport) -> horde_stats::html::Verdict {
    let l = &c.lateness;
    let share = l.over_1ms as f64 / c.packets as f64;
    let h = &c.host;
    // Red only when Horde is later than the host allows: a host that lets a busy-waiting
    // pacer be as late (its floor, measured before the run) excuses it, and says so.
    let host = match (&h.floor, h.allowed_p99_us) {
        (Some(f), Some(a)) => format!(
            "; unless the host allows it: p99 ≤ {:.0} µs = max(20 µs, 1.5 × the busy-wait floor's p99 {:.0} µs); steal {:.1} %, {} of the late ones in seconds with steal",
            a,
            f.p99_us,
            h.steal_mean.unwrap_or(0.0) * 100.0,
            h.late_in_steal
        ),
        _ => String::new(),
    };
    horde_stats::html::Verdict::generator(
        "departures over 1 ms late",
        format!("{:.2} % (p99 {:.2} ms)", share * 100.0, l.p99_us / 1e3),
        format!("limit {:.0} % of {} departures: above it the generator did not keep up{host}", LATE_SHARE_LIMIT * 100.0, c.packets),
        share <= LATE_SHARE_LIMIT || h.within_floor == Some(true),
    )
}

/// Path figures: what the network did, never the generator's failure. APDUs lost (UDP: sent
/// and never received; TCP: undelivered when the run ended), and the largest change the path
/// made to a distribution — the two-sample KS distance between what arrived and what departed,
/// against what chance allows at the two sample sizes.
pub fn path_figures(g: &GameAnalysis) -> Vec<horde_stats::html::Verdict> {
    use horde_stats::html::Verdict;
    let lost = if g.tcp { "undelivered at the end (TCP)" } else { "lost: sent and never received (UDP)" };
    let mut v = vec![Verdict::path(
        &format!("APDUs {lost}, up / down"),
        format!("{} / {}", g.up.lost, g.down.lost),
        "what the network did: a figure, not the generator's failure".into(),
        g.up.lost + g.down.lost == 0,
    )];
    let mut changes = Vec::new();
    for c in &g.categories {
        for (d, st) in [("up", &c.up), ("down", &c.down)] {
            if let Some(k) = st.path_ks_size {
                changes.push((c, d, "sizes", k, st.received, st.sent));
            }
            if let Some(k) = st.path_ks_iat {
                changes.push((c, d, "inter-arrivals against inter-departures", k, st.iat_samples, st.departure_iat_samples));
            }
        }
    }
    let alpha = VERDICT_ALPHA / changes.len().max(1) as f64;
    let limit = |n: u64, m: u64| horde_model::fit::ks_two_sample_critical(n, m, alpha).max(KS_FLOOR);
    if let Some((c, d, what, k, n, m)) = changes.iter().max_by(|a, b| (a.3 / limit(a.4, a.5)).total_cmp(&(b.3 / limit(b.4, b.5)))) {
        v.push(Verdict::path(
            &format!("largest change by the path ({} {d}, {what})", c.category),
            format!("KS {k:.3}"),
            format!(
                "beyond chance above {:.3} at n = {n} arrived, {m} departed ({} tests, α = {VERDICT_ALPHA}; at least {KS_FLOOR})",
                limit(*n, *m),
                changes.len()
            ),
            *k <= limit(*n, *m),
        ));
    }
    v
}
