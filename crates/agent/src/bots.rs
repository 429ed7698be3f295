//! Game-server bots through agents (`horde bots --agents A,B`): the bots' ids are sharded over
//! the agents by weight; every agent runs its shard against the same game server from the
//! common start (names, source addresses and join times follow the id, so the shards make one
//! ramp); the controller collects every agent's per-packet log, puts every record on its own
//! clock and computes the response times of the merged report in one pass over all of them.
//! The agents' own reports give the per-bot rows, each checked against the shard it was given.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context as _};
use horde_engine::bots::{BotReport, BotsReport};
use horde_wire::{Record, RecordKind};
use serde::Serialize;

use crate::fleet::{AgentSpec, Event, Fleet, Watch};
use crate::msg::{BotsJob, Work};

/// How the controller runs bots through agents.
pub struct BotsRun<'a> {
    pub agents: Vec<AgentSpec>,
    pub credentials: PathBuf,
    pub out: &'a Path,
    /// The run's part as one machine would play it (every bot: `ids` is `0..total`), checked;
    /// each agent gets its shard of the ids.
    pub job: BotsJob,
    pub duration: Duration,
    pub seed: u64,
    pub deadman: Duration,
    pub events: &'a (dyn Fn(&Event) + Sync),
    pub stop: &'a AtomicBool,
}

/// One agent's row in the merged report.
#[derive(Debug, Clone, Serialize)]
pub struct BotsAgentRow {
    pub name: String,
    pub address: String,
    /// The bot ids it ran (`a..b`).
    pub bots: Range<u32>,
    pub entered: usize,
    pub packets_sent: u64,
    pub packets_received: u64,
    #[serde(flatten)]
    pub stats: horde_scenario::AgentStats,
}

/// The merged report: the bots' report over every agent, and the agents.
#[derive(Debug, Clone, Serialize)]
pub struct BotsOutcome {
    #[serde(flatten)]
    pub report: BotsReport,
    pub agents: Vec<BotsAgentRow>,
    pub lost: Vec<String>,
    pub partial: bool,
}

/// Runs the bots on the agents; writes `summary.json` and the merged log `bots.hlog` into `out`.
pub fn run(r: &BotsRun) -> anyhow::Result<BotsOutcome> {
    let b = &r.job;
    b.options(r.seed, r.duration.as_nanos() as u64).map_err(anyhow::Error::msg)?;
    let n = b.total;
    std::fs::create_dir_all(r.out).with_context(|| format!("creating {}", r.out.display()))?;
    let addrs: Vec<SocketAddr> = r.agents.iter().map(|a| a.addr).collect();
    let mut fleet = Fleet::connect(&addrs, &r.credentials, r.deadman, r.events, r.stop)?;
    let weights: Vec<u32> = r.agents.iter().map(|a| a.weight).collect();
    let shards = horde_scenario::shards(n, &weights).map_err(|e| e.into_anyhow())?;
    // The run key is not used by bots (the game server has its own protocol); it is drawn anyway
    // so that an assignment is never without one.
    let key = horde_proto::RunKey::from_bytes(horde_engine::random_secret().context("drawing a run key")?);
    let assignment = |work| fleet.assignment(r.deadman, r.duration.as_nanos() as u64, r.seed, &key, work);
    let job = |ids: Range<u32>| BotsJob { ids, ..b.clone() };
    let parts = shards.iter().enumerate().filter(|(_, s)| !s.is_empty()).map(|(i, s)| (i, assignment(Work::Bots(job(s.clone()))), true, false)).collect();
    fleet.assign(parts)?;
    for (m, s) in fleet.members.iter().zip(&shards) {
        fleet.note(format!("agent {}: bots {}..{} ({})", m.c.name, s.start, s.end, s.len()));
    }
    let t0 = fleet.start(&format!("{n} bots against {}", b.servers.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")));
    let missing = |i: usize| format!("; its bots {}..{} are missing from the report", shards[i].start, shards[i].end);
    let watched = fleet.watch(&Watch {
        hard_end: Duration::from_nanos(b.ramp_ns) + r.duration + Duration::from_secs(15),
        overrun: "the agents overran the bots' run by 15 s: stopping them".into(),
        downstream_lost_stops_all: false,
        missing: &missing,
    });
    // Each log bounded by our own plan: every bot sends at most maxpackets a second, and each
    // packet makes at most two records (sent, answered), over the ramp, the play and 5 s of
    // joining and leaving.
    let secs = (b.ramp_ns + r.duration.as_nanos() as u64) / 1_000_000_000 + 5;
    let bound = |s: &Range<u32>| (horde_wire::LOG_HEADER_LEN as u64) + horde_wire::RECORD_LEN as u64 * (s.len() as u64 * b.maxpackets as u64 * secs * 2 + 1024);
    let dirs = fleet.collect(r.out, |i, _| vec![("bots.hlog", bound(&shards[i]))])?;
    fleet.close();
    let window = (t0 + b.ramp_ns + b.warmup_ns, t0 + b.ramp_ns + r.duration.as_nanos() as u64);
    // at most maxpackets a second from each bot over the ramp, the play and 5 s more
    let max_departures = b.maxpackets as u64 * secs;
    let outcome = merge(&mut fleet, &shards, &dirs, window, watched.signalled, max_departures)?;
    let json = serde_json::to_string_pretty(&outcome).context("the merged report")?;
    std::fs::write(r.out.join("summary.json"), json).with_context(|| format!("writing {}", r.out.join("summary.json").display()))?;
    Ok(outcome)
}

/// One report over every agent: per-bot rows from the agents' reports (each must hold exactly
/// the bots of its shard), response times from every answered packet in the window, on the
/// controller's clock.
fn merge(fleet: &mut Fleet, shards: &[Range<u32>], dirs: &[PathBuf], window: (u64, u64), signalled: bool, max_departures: u64) -> anyhow::Result<BotsOutcome> {
    let mut bots: Vec<BotReport> = Vec::new();
    let mut response_ns: Vec<u64> = Vec::new();
    let mut rows = Vec::new();
    let mut servers = String::new();
    let mut refused = Vec::new();
    for (i, m) in fleet.members.iter().enumerate() {
        let report: Option<BotsReport> = m.report("bots").filter(|_| m.ok() && m.collected);
        let mine: Option<BotsReport> =
            report.filter(|r| r.bots.len() == shards[i].len() && r.bots.iter().all(|b| bot_id(&b.name).is_some_and(|id| shards[i].contains(&id))));
        let records = match mine.as_ref().map(|_| load(&dirs[i].join("bots.hlog"), &shards[i], max_departures)) {
            Some(Ok(r)) => Some(r),
            Some(Err(e)) => {
                refused.push((m.c.name.clone(), format!("{e:#}")));
                None
            }
            None => None,
        };
        if let (Some(rep), Some(records)) = (&mine, records) {
            for mut r in records.into_iter().filter(|r| r.kind == RecordKind::Echoed) {
                crate::merge::correct(&mut r, m.c.clock.offset_ns, m.c.clock.offset_ns);
                if (window.0..=window.1).contains(&r.t_b) {
                    response_ns.push(r.t_b.saturating_sub(r.t_a));
                }
            }
            bots.extend(rep.bots.iter().cloned());
            servers = rep.server.clone();
        } else if m.ok() && m.report::<BotsReport>("bots").is_some() {
            refused.push((m.c.name.clone(), format!("its report does not hold exactly the bots {}..{} it ran", shards[i].start, shards[i].end)));
        }
        let rep = mine.as_ref();
        rows.push(BotsAgentRow {
            name: m.c.name.clone(),
            address: m.c.addr.to_string(),
            bots: shards[i].clone(),
            entered: rep.map_or(0, |r| r.entered),
            packets_sent: rep.map_or(0, |r| r.bots.iter().map(|b| b.packets_sent).sum()),
            packets_received: rep.map_or(0, |r| r.bots.iter().map(|b| b.packets_received).sum()),
            stats: m.stats(),
        });
    }
    for (name, why) in &refused {
        fleet.refuse(name, why);
        if let Some(row) = rows.iter_mut().find(|r| &r.name == name) {
            row.stats.status = format!("log refused: {why}");
        }
    }
    bots.sort_by_key(|b| bot_id(&b.name));
    let window_s = (window.1 - window.0) as f64 / 1e9;
    let report = BotsReport::of(servers, bots, &mut response_ns, window_s, signalled);
    let lost = fleet.lost();
    Ok(BotsOutcome { report, agents: rows, partial: !lost.is_empty(), lost })
}

/// The id in a bot's name (`horde12` → 12).
fn bot_id(name: &str) -> Option<u32> {
    name.trim_start_matches(|c: char| !c.is_ascii_digit()).parse().ok()
}

/// An agent's bots log; every record must be of a bot of its shard, and each bot's records
/// what a Quake client can have logged ([`crate::schedule_check::check_bot_log`]).
fn load(p: &Path, shard: &Range<u32>, max_departures: u64) -> anyhow::Result<Vec<Record>> {
    let records = horde_stats::records_of(p).map_err(anyhow::Error::msg)?;
    if let Some(r) = records.iter().find(|r| !shard.contains(&r.flow)) {
        bail!("its log has records of bot {}, which it did not run", r.flow);
    }
    crate::schedule_check::check_bot_log(&records, max_departures).map_err(|e| anyhow::anyhow!("its log breaks what its bots can have sent: {e}"))?;
    Ok(records)
}
