//! The controller: `horde run SCENARIO --agents …`. It connects to every agent over mutually
//! authenticated TLS, checks versions, measures clocks, places the server side and shards the
//! players, starts every shard at one instant, watches progress and faults, collects the logs
//! and writes one report computed over all agents' records.
//!
//! One thread per agent ([`crate::link`]) owns its TLS connection; the main thread drives the
//! run through commands and learns through events.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use horde_model::scenario::Scenario;

pub use crate::fleet::{dir_names, parse_agents, AgentSpec, Event};
use crate::fleet::{Fleet, Watch, FINISH_WITHIN};
use crate::msg::{self, Part};

/// How the controller runs a scenario.
pub struct ControllerOptions<'a> {
    pub agents: Vec<AgentSpec>,
    /// The agent that runs the server side (an index into `agents`, or an extra agent that runs
    /// only the server side).
    pub server: ServerPlace,
    /// The controller's credentials (ca.pem, controller.pem, controller.key).
    pub credentials: PathBuf,
    pub out: &'a Path,
    /// The scenario file's directory (its service file is shipped to the agents).
    pub scenario_dir: PathBuf,
    /// An agent that hears nothing from the controller for this long stops its traffic.
    pub deadman: Duration,
    /// A running agent silent for this long is lost.
    pub lost_after: Duration,
    pub events: &'a (dyn Fn(&Event) + Sync),
    pub stop: &'a AtomicBool,
    /// The run's command channel (stop; players online for a scenario's open-loop players).
    pub commands: Option<&'a horde_scenario::control::Commands>,
    /// What the agents send after the run: their logs, or one mergeable summary each.
    pub collect: Collect,
}

/// What the controller collects from the agents after a scenario run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Collect {
    /// Every agent's raw logs (the report is computed over all records; the logs are kept).
    #[default]
    Logs,
    /// One summary per agent ([`horde_stats::digest`]): O(agents × bins) at the controller,
    /// the same figures exactly or within the bounds the report states; no raw logs. An
    /// interrupted run's logs are collected instead (a summary cannot be cut at the
    /// interruption).
    Summaries,
}

/// Where the server side runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerPlace {
    /// On this one of the client agents (it runs both).
    Agent(usize),
    /// On an agent that runs no players.
    Dedicated(SocketAddr),
}

/// The outcome of a distributed run.
pub struct Outcome {
    pub summary: horde_scenario::Summary,
    pub lost: Vec<String>,
}

/// Every agent's address, client agents first, then a dedicated server agent; and which is the
/// server's.
pub(crate) fn addresses(agents: &[AgentSpec], server: &ServerPlace) -> anyhow::Result<(Vec<SocketAddr>, usize)> {
    let mut addrs: Vec<SocketAddr> = agents.iter().map(|a| a.addr).collect();
    let server_i = match server {
        ServerPlace::Agent(i) if *i < addrs.len() => *i,
        ServerPlace::Agent(i) => bail!("the server agent index {i} names no agent"),
        ServerPlace::Dedicated(a) => match addrs.iter().position(|x| x == a) {
            Some(i) => i,
            None => {
                addrs.push(*a);
                addrs.len() - 1
            }
        },
    };
    Ok((addrs, server_i))
}

/// The players' plan, noted.
fn plan(sc: &Scenario, fleet: &Fleet, stop: &AtomicBool) -> anyhow::Result<std::sync::Arc<horde_scenario::Players>> {
    let t_plan = Instant::now();
    // A raised target may plan players above `players` up to what this controller can plan and
    // merge (the agents' sockets are theirs); regulated circuits keep their plan.
    let limit = match sc.regulation {
        Some(_) => sc.players,
        None => horde_scenario::players::stated_limit(sc.players, u64::MAX, horde_scenario::players::available_memory()),
    };
    let players = std::sync::Arc::new(horde_scenario::plan(sc, limit, stop).map_err(|e| e.into_anyhow())?);
    fleet.note(format!(
        "{} {} players for {:.0} s planned in {:.2} s (seed {})",
        sc.players,
        sc.service.name,
        sc.duration_s,
        t_plan.elapsed().as_secs_f64(),
        sc.seed
    ));
    Ok(players)
}

/// A scenario's run on the agents up to its end: connected, planned, placed, started together
/// and watched; what both kinds of scenario (open-loop players, regulated circuits) share.
pub(crate) struct Played<'a> {
    pub fleet: Fleet<'a>,
    pub players: std::sync::Arc<horde_scenario::Players>,
    pub server_i: usize,
    /// Each agent's players (a dedicated server agent has none).
    pub ranges: Vec<Option<Range<u32>>>,
    /// The common start, on the controller's clock.
    pub t0: u64,
    pub signalled: bool,
    /// The agents sent summaries instead of logs.
    pub summarised: bool,
    /// A scenario's `[emu]` network across the agents, taken down when the run is done with.
    pub emu: Option<crate::emu_place::EmuAcross<'a>>,
}

impl Played<'_> {
    /// Agent `i`'s players: its shard, then those a raised target had it start.
    pub fn players_of(&self, i: usize) -> Vec<Range<u32>> {
        self.ranges[i].iter().cloned().chain(self.fleet.more.get(i).into_iter().flatten().cloned()).collect()
    }
}

/// Connects to the agents, plans the players (calls `planned` with them, e.g. to count the
/// APDUs the logs are bounded by), places the server side, then the players told where it
/// listens, starts them together and watches the run to its end.
pub(crate) fn play<'a>(
    sc: &Scenario,
    opts: &ControllerOptions<'a>,
    planned: impl FnOnce(&std::sync::Arc<horde_scenario::Players>),
) -> anyhow::Result<Played<'a>> {
    std::fs::create_dir_all(opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    // the scenario as the agents get it: value files inlined (agents open no file a scenario
    // names), the service file shipped
    let mut work = horde_scenario::part::ScenarioWork::of(sc, &opts.scenario_dir).map_err(|e| e.into_anyhow())?;
    let key = horde_scenario::run_key(sc).map_err(|e| e.into_anyhow())?;
    // [emu]: the topology up across the agents first (taken down when `emu` is dropped); each
    // agent's share of the players is its client hosts, the server side goes in the server host
    let emu = match &sc.emu {
        Some(p) => Some(crate::emu_place::EmuAcross::up(sc, p, &opts.agents, &opts.credentials, opts.stop, opts.events)?),
        None => None,
    };
    let agents = emu.as_ref().map_or_else(|| opts.agents.clone(), |e| e.weighted());
    let server_place = emu.as_ref().map_or_else(|| opts.server.clone(), |e| ServerPlace::Agent(e.server_i));
    let (addrs, server_i) = addresses(&agents, &server_place)?;
    let mut fleet = Fleet::connect(&addrs, &opts.credentials, opts.deadman, opts.events, opts.stop)?;
    let players = plan(sc, &fleet, opts.stop)?;
    planned(&players);
    work.max_players = (players.limit > sc.players).then_some(players.limit);
    let (sc2, p2) = (sc.clone(), players.clone());
    fleet.set_categories(Box::new(move |t_s| horde_scenario::categories_at(&sc2, &p2, t_s)));
    let timeline = horde_scenario::control::timeline(sc).map_err(|m| anyhow::anyhow!("{}: {m}", sc.name))?;
    let weights: Vec<u32> = agents.iter().map(|a| a.weight).collect();
    let mut shards = horde_scenario::shards(sc.players, &weights).map_err(|e| e.into_anyhow())?;
    shards.resize(addrs.len(), 0..0);
    let ranges: Vec<Option<Range<u32>>> = shards.iter().map(|r| Some(r.clone()).filter(|r| !r.is_empty())).collect();
    // a raised target's new players go to the agents that run players, by the same weights
    let growers: Vec<(usize, u32)> = ranges.iter().enumerate().filter(|(_, r)| r.is_some()).map(|(i, _)| (i, weights.get(i).copied().unwrap_or(1))).collect();
    let online_target = sc.regulation.is_none().then(|| (players.clone(), growers));
    fleet.steer(opts.commands, online_target, timeline, emu.as_ref().map(|e| e.exp.clone()));
    let run_id = fleet.run_id.clone();
    let part = |server, players, server_addr, emu| {
        let work = msg::Work::Scenario(msg::ScenarioPart { scenario: work.clone(), server, players, server_addr, emu });
        Part::agent(&run_id, opts.deadman, (sc.duration_s * 1e9).round() as u64, sc.seed, &key, work)
    };
    // The server side first, on the server agent's address (the one the controller reached) at
    // the scenario's port; then the players, told where it listens.
    let listen = emu.as_ref().map_or_else(|| SocketAddr::new(addrs[server_i].ip(), sc.server.port()), |e| e.listen(sc));
    let place = |i: usize| emu.as_ref().map(|e| e.place(i));
    let server = part(Some(listen), ranges[server_i].clone(), None, place(server_i));
    let ready = fleet.assign(vec![(server_i, server, ranges[server_i].is_some(), true)])?;
    let Some(server_addr) = ready.into_iter().find(|(i, _)| *i == server_i).and_then(|(_, a)| a) else {
        bail!("not starting: the server agent {} did not say where its server side listens", fleet.members[server_i].c.name);
    };
    fleet.note(format!("server side on agent {} at {server_addr}", fleet.members[server_i].c.name));
    let clients =
        (0..addrs.len()).filter(|&i| i != server_i).filter_map(|i| Some((i, part(None, Some(ranges[i].clone()?), Some(server_addr), place(i)), true, false)));
    fleet.assign(clients.collect())?;
    for (m, r) in fleet.members.iter().zip(&ranges) {
        if let Some(r) = r {
            fleet.note(format!("agent {}: players {}..{} ({})", m.c.name, r.start, r.end, r.end - r.start));
        }
    }
    if sc.regulation.is_none() {
        // every agent summarises its part as it goes: live figures, and `--collect summaries`
        let (sc2, p2, rates) = (sc.clone(), players.clone(), horde_scenario::ModelRates::of(&players));
        fleet.summarise_live(crate::fleet::LivePlan {
            names: sc.service.states.iter().map(|s| s.name.clone()).collect(),
            duration_s: sc.duration_s,
            server_i,
            owners: ranges.iter().enumerate().filter_map(|(i, r)| Some((r.clone()?, i))).collect(),
            model: Box::new(move |t_s| rates.at(&sc2, &p2, t_s)),
        });
    }
    let t0 = fleet.start(&format!("{} players", sc.players));
    let missing = |i: usize| ranges[i].as_ref().map(|r| format!("; its players {}..{} are missing from the report", r.start, r.end)).unwrap_or_default();
    let watched = fleet.watch(&Watch {
        hard_end: Duration::from_secs_f64(sc.duration_s) + OVERRUN,
        overrun: format!("the agents overran the run by {} s: stopping them", OVERRUN.as_secs()),
        downstream_lost_stops_all: true,
        missing: &missing,
    });
    Ok(Played { fleet, players, server_i, ranges, t0, signalled: watched.signalled, summarised: false, emu })
}

/// The agents' rows, shared by both kinds of scenario: role, players and what each sent and
/// received (`count` reads it from the agent's reports).
pub(crate) fn agent_rows(p: &Played, count: impl Fn(usize, &crate::fleet::Member) -> (u64, u64)) -> Vec<horde_scenario::AgentRow> {
    p.fleet
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let (apdus_sent, apdus_received) = count(i, m);
            horde_scenario::AgentRow {
                name: m.c.name.clone(),
                address: m.c.addr.to_string(),
                role: match (i == p.server_i, p.ranges[i].is_some()) {
                    (true, true) => "server+clients",
                    (true, false) => "server",
                    _ => "clients",
                }
                .into(),
                players: p.ranges[i].clone(),
                apdus_sent,
                apdus_received,
                stats: m.stats(),
            }
        })
        .collect()
}

/// The players of the agents that were lost or refused.
fn missing_players(p: &Played) -> Vec<Range<u32>> {
    (0..p.fleet.members.len()).filter(|&i| !p.fleet.members[i].ok()).flat_map(|i| p.players_of(i)).collect()
}

/// Runs `sc` on the agents and writes the merged report into `opts.out`.
pub fn run(sc: &Scenario, opts: &ControllerOptions) -> anyhow::Result<Outcome> {
    let mut counting = None;
    let mut played = play(sc, opts, |players| {
        let p = players.clone();
        counting = Some(std::thread::Builder::new().name("horde-plan-count".into()).spawn(move || p.planned_apdus()));
    })?;
    let counting = counting.context("the plan count")?.context("starting the plan count")?;
    let mut planned = counting.join().map_err(|_| anyhow::anyhow!("counting the planned APDUs failed"))?;
    // players a raised target planned during the run are bounded by their own plans too
    planned.extend(played.players.planned_apdus_from(planned.len() as u32));
    let n = played.players.len();
    // Connections per player: one per online span of the roster as the run left it (commands
    // may have added spans); each connection logs its two endpoint records on each side.
    let end_ns = (sc.duration_s * 1e9) as u64;
    let connections: Vec<u64> = (0..n).map(|p| played.players.roster.spans(p, end_ns).len().max(1) as u64).collect();
    let players_of: Vec<Vec<Range<u32>>> = (0..played.fleet.members.len()).map(|i| played.players_of(i)).collect();
    let whole = !played.signalled && played.fleet.members[played.server_i].lost_at_s.is_none() && !played.fleet.stopped_by_command;
    let summaries = match opts.collect {
        Collect::Summaries if whole => Some(summary_plan(sc, &played)?),
        Collect::Summaries => {
            played.fleet.note("the run was interrupted: collecting the agents' logs (a summary cannot be cut at the interruption)".into());
            None
        }
        Collect::Logs => None,
    };
    let dirs = match &summaries {
        Some((expect, req)) => {
            let bound = summary_bound(expect);
            played.fleet.collect_with(
                opts.out,
                |_, _| vec![("digest.json", bound)],
                |_, m| Some(Box::new(crate::msg::SummaryRequest { own_offset_ns: m.c.clock.offset_ns, ..req.clone() })),
            )?
        }
        None => played.fleet.collect(opts.out, |i, m| {
            let client = players_of[i].iter().map(|r| log_bound(&planned, &connections, r.clone())).sum::<u64>();
            let server = if m.downstream { log_bound(&planned, &connections, 0..n) } else { 0 };
            vec![("client.hlog", client), ("server.hlog", server)]
        })?,
    };
    played.fleet.close();
    played.summarised = summaries.is_some();
    report(sc, opts.out, &mut played, dirs, planned, summaries.map(|s| s.0))
}

/// What a summary of this run must be (its start, categories, seconds) and the request each
/// agent gets (offsets of every agent; its own is filled in per agent).
fn summary_plan(sc: &Scenario, p: &Played) -> anyhow::Result<(horde_stats::digest::GameDigest, crate::msg::SummaryRequest)> {
    // the common start every agent was told (the live summaries count their seconds from it)
    let epoch_ns = p.t0;
    let expect = horde_stats::digest::GameDigest::new(sc.service.states.len(), epoch_ns, sc.duration_s);
    let offset = |i: usize| p.fleet.members[i].c.clock.offset_ns;
    let owners: Vec<(Range<u32>, i64)> = (0..p.ranges.len()).flat_map(|i| p.players_of(i).into_iter().map(move |r| (r, offset(i)))).collect();
    Ok((expect, crate::msg::SummaryRequest { epoch_ns, own_offset_ns: 0, server_offset_ns: offset(p.server_i), owners, window_ns: 0, with_logs: false }))
}

/// The most bytes a summary may have: its categories' histograms at most 2 MB each way, its
/// seconds' at most 256 KB each (a real one has a few KB a second).
fn summary_bound(d: &horde_stats::digest::GameDigest) -> u64 {
    (1 << 20) + d.categories.len() as u64 * (4 << 20) + d.seconds.len() as u64 * (256 << 10)
}

/// Every agent's part as the merge sees it, its files in `dirs`.
fn parts(p: &Played, dirs: &[PathBuf]) -> Vec<crate::merge::Part> {
    p.fleet
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| crate::merge::Part {
            name: m.c.name.clone(),
            dir: dirs[i].clone(),
            offset_ns: m.c.clock.offset_ns,
            players: p.players_of(i),
            server: i == p.server_i,
            ok: m.collected && m.ok(),
            client: m.report("clients"),
            server_report: m.report("server"),
        })
        .collect()
}

/// One report over all records, every one on the controller's clock.
fn report(
    sc: &Scenario,
    out: &Path,
    p: &mut Played,
    dirs: Vec<PathBuf>,
    planned: Vec<[u64; 2]>,
    summary: Option<horde_stats::digest::GameDigest>,
) -> anyhow::Result<Outcome> {
    let t_merge = Instant::now();
    let parts = parts(p, &dirs);
    let mut live_check = None;
    let plan = crate::merge::Plan {
        from_ns: p.t0.saturating_sub(PLAN_MARGIN.as_nanos() as u64),
        to_ns: p.t0 + (sc.duration_s * 1e9) as u64 + (OVERRUN + FINISH_WITHIN + PLAN_MARGIN).as_nanos() as u64,
        apdus: planned,
        exact: Some((p.players.clone(), p.t0)),
        stopped: p.signalled || p.fleet.stopped_by_command || p.fleet.members[p.server_i].lost_at_s.is_some(),
    };
    enum Data {
        Records(Vec<horde_wire::Record>, Vec<horde_wire::Record>),
        Summary(Box<horde_stats::digest::GameDigest>),
    }
    let (mut client, server_report, refused, data) = match summary {
        Some(expect) => {
            // each agent's live pieces against its final summary: they must be equal
            let mut check = horde_scenario::LiveCheck::default();
            let members = &p.fleet.members;
            let mut compare = |name: &str, d: &horde_stats::digest::GameDigest| {
                let Some(acc) = members.iter().find(|m| m.c.name == name).and_then(|m| m.live.as_ref()) else { return };
                let acc = crate::live::lock(acc);
                check.agents += 1;
                check.pieces += acc.pieces;
                match acc.agrees(d) {
                    Ok(()) => check.agree += 1,
                    Err(why) => check.differ.push(format!("{name}: {why}")),
                }
            };
            let m = crate::merge::merge_summaries(&parts, &plan, &expect, &mut compare)?;
            for why in &check.differ {
                p.fleet.note(format!("live summary of agent {why}"));
            }
            live_check = Some(check);
            (m.client, m.server, m.refused, Data::Summary(Box::new(m.digest)))
        }
        None => {
            let m = crate::merge::merge(sc, &parts, &plan)?;
            (m.client, m.server, m.refused, Data::Records(m.client_records, m.server_records))
        }
    };
    // one clock: the report counts from the common start every agent was given (their players'
    // schedules start there; the commands' answers and marks count from it too)
    client.t0_real_ns = p.t0;
    for (name, why) in &refused {
        p.fleet.refuse(name, why);
    }
    let server = &p.fleet.members[p.server_i];
    let server_lost = server.lost_at_s;
    let interruption = (p.signalled || server_lost.is_some()).then(|| {
        let at_s = server_lost.unwrap_or_else(|| client.end_real_ns.saturating_sub(client.t0_real_ns) as f64 / 1e9).min(sc.duration_s);
        let reason = match server_lost {
            Some(_) => format!("the server agent {} was lost", server.c.name),
            None if p.fleet.stopped_by_command => "stopped by a command".into(),
            None => "interrupted".into(),
        };
        let grace = horde_scenario::report::IN_FLIGHT_GRACE_S + if server_lost.is_some() { horde_engine::logger::FLUSH_EVERY_NS as f64 / 1e9 } else { 0.0 };
        horde_scenario::Interruption { at_s, analysed_s: (at_s - grace).max(0.0), reason }
    });
    let usage_of = |pick: &dyn Fn(usize) -> bool| -> (f64, u64) {
        p.fleet.members.iter().enumerate().filter(|(i, _)| pick(*i)).fold((0.0, 0), |a, (_, m)| (a.0 + m.cpu_s, a.1.max(m.max_rss_kb)))
    };
    let ((client_cpu_s, client_max_rss_kb), (server_cpu_s, server_max_rss_kb)) = (usage_of(&|i| p.ranges[i].is_some()), usage_of(&|i| i == p.server_i));
    let usage = horde_scenario::Usage { client_cpu_s, client_max_rss_kb, server_cpu_s, server_max_rss_kb };
    let count = |_, m: &crate::fleet::Member| {
        let reports: Vec<horde_engine::SendReport> = ["clients", "server"].iter().filter_map(|r| m.report(r)).collect();
        (reports.iter().map(|r| r.packets).sum(), reports.iter().map(|r| r.received).sum())
    };
    let distributed = horde_scenario::Distributed { live: live_check, ..distributed(p, agent_rows(p, count)) };
    let present = (0..p.fleet.members.len()).filter(|&i| p.fleet.members[i].ok()).flat_map(|i| p.players_of(i)).collect();
    let links = p.emu.as_ref().and_then(|e| e.links());
    let outcomes = horde_scenario::report::Outcomes {
        client,
        server: server_report,
        usage,
        links: links.clone(),
        link_series: p.emu.as_ref().map(|e| link_series(e, &p.fleet.link_samples)).unwrap_or_default(),
        // the emulated links' settings as they ended (links down across machines are not drawn)
        topology_svg: p.emu.as_ref().map(|e| {
            let end = horde_scenario::topology::AtEnd { down: &[], links: links.as_deref().unwrap_or_default() };
            horde_scenario::topology::svg(&e.plan, &e.server_host, horde_emu::fwd::describe, &end)
        }),
        interruption,
        present,
        distributed: Some(distributed),
        online: p.players.roster.changes(),
        marks: p.fleet.marks.clone(),
    };
    let (summary, what) = match &data {
        Data::Records(c, s) => (horde_scenario::report::write_records(sc, out, &p.players, outcomes, c, s)?, format!("{} + {} records", c.len(), s.len())),
        Data::Summary(d) => (
            horde_scenario::report::write_summary(sc, out, &p.players, outcomes, d)?,
            format!("{} summaries", parts.iter().filter(|q| q.ok).count() - refused.len()),
        ),
    };
    p.fleet.note(format!("merged {what} and analysed them in {:.1} s", t_merge.elapsed().as_secs_f64()));
    Ok(Outcome { summary, lost: p.fleet.lost() })
}

/// The report's distributed part: the agents' rows, the server agent, what is missing.
pub(crate) fn distributed(p: &Played, agents: Vec<horde_scenario::AgentRow>) -> horde_scenario::Distributed {
    let (log_bytes, log_bytes_transferred) = p.fleet.log_bytes();
    horde_scenario::Distributed {
        agents,
        server_agent: p.fleet.members[p.server_i].c.name.clone(),
        partial: !p.fleet.lost().is_empty(),
        missing_players: missing_players(p),
        log_bytes,
        log_bytes_transferred,
        collected: if p.summarised { "summaries" } else { "logs" }.into(),
        live: None,
    }
}

/// How long agents may overrun the run's end before they are stopped: 15 s (no departure
/// leaves after the run's end; a side lingers 0.5 s for what is in flight and flushes its log
/// within a second).
const OVERRUN: Duration = Duration::from_secs(15);
/// Records may carry times this far outside the run (clock offsets measured to well under a
/// millisecond; a start lead of under a second).
const PLAN_MARGIN: Duration = Duration::from_secs(10);

/// The most bytes a log of the players `range` may have by our plan: a header, one record per
/// APDU planned each way (a side logs what it sends and what it receives), two endpoint records
/// (source, destination) per connection, plus 1 % and 1,024 records for duplicates an emulated
/// link may add. (Without the endpoint records, an honest server side of 3,000 players was
/// refused in the podman run: 616 records over.)
fn log_bound(planned: &[[u64; 2]], connections: &[u64], range: Range<u32>) -> u64 {
    let span = range.start as usize..(range.end as usize).min(planned.len());
    let apdus: u64 = planned.get(span.clone()).map_or(0, |p| p.iter().map(|c| c[0] + c[1]).sum());
    let endpoints: u64 = 2 * connections.get(span).map_or(0, |c| c.iter().sum::<u64>());
    let records = apdus + apdus / 100 + endpoints + 1024;
    horde_wire::LOG_HEADER_LEN as u64 + horde_wire::RECORD_LEN as u64 * records
}

/// The emulated links' per-second series from the agents' counters asked during the run.
fn link_series(e: &crate::emu_place::EmuAcross, samples: &[(f64, crate::msg::AgentLinks)]) -> Vec<horde_scenario::report::LinkSeries> {
    let mut series = Vec::new();
    for (t_s, answers) in samples {
        horde_scenario::report::LinkSeries::record(&mut series, *t_s, &e.merge(answers.clone()));
    }
    series
}
