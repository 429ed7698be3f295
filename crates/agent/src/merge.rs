//! One run's records from many agents: each agent's logs, every timestamp corrected to the
//! controller's clock by the agent's measured offset, concatenated; and the agents' reports
//! merged into one client-side report whose figures are recomputed from the records.

use std::ops::Range;
use std::path::PathBuf;

use anyhow::Context as _;
use horde_engine::SendReport;
use horde_model::scenario::Scenario;
use horde_model::service::Direction;
use horde_wire::{Record, RecordKind};

use crate::clock::to_reference;

/// One agent's part of a run.
pub struct Part {
    pub name: String,
    /// Where its logs were collected.
    pub dir: PathBuf,
    /// Its clock minus the controller's (ns).
    pub offset_ns: i64,
    /// The players it ran: its shard, then those a raised target had it start (none: a
    /// dedicated server agent).
    pub players: Vec<Range<u32>>,
    pub server: bool,
    /// Its logs were collected whole.
    pub ok: bool,
    pub client: Option<SendReport>,
    pub server_report: Option<SendReport>,
}

/// The merged run.
pub struct Merged {
    pub client_records: Vec<Record>,
    pub server_records: Vec<Record>,
    pub client: SendReport,
    pub server: SendReport,
    /// Parts whose logs were refused (by name, and why): their records are not in the report.
    pub refused: Vec<(String, String)>,
}

/// What the controller's own plan allows in a log: every record's player, time and sequence
/// number. An agent's log that breaks it is refused whole and named (a peer we control can
/// still lie: it gets no say in what the report counts).
pub struct Plan {
    /// Real times (controller clock) a record may carry: the run's start less a margin to its
    /// end plus the time the agents may overrun.
    pub from_ns: u64,
    pub to_ns: u64,
    /// Per player, its departures up (client → server) and down: a record's sequence number
    /// is below its direction's count.
    pub apdus: Vec<[u64; 2]>,
    /// The run's players, to check every record against its player's exact departures
    /// regenerated here ([`crate::schedule_check::check_players`]), and the common start.
    pub exact: Option<(std::sync::Arc<horde_scenario::Players>, u64)>,
    /// The run was stopped before its end (a command, a signal, the server side lost): a
    /// summary's players may have sent their departures up to that stop only.
    pub stopped: bool,
}

impl Plan {
    /// Why a side's log (`server` or a client shard's), each record within [`Plan::refuses`],
    /// still breaks the plan: a departure its player's schedule does not have, or at another
    /// size or instant.
    fn refuses_log(&self, records: &[Record], server: bool) -> Option<String> {
        let (players, t0) = self.exact.as_ref()?;
        crate::schedule_check::check_players(players, records, server, *t0).err()
    }

    /// Why record `r` of a client (`server` false) or server log is not one the plan allows.
    fn refuses(&self, r: &Record, server: bool) -> Option<String> {
        let Some(counts) = self.apdus.get(r.flow as usize) else {
            return Some(format!("a record of player {}, which the run does not have", r.flow));
        };
        if r.t_b < self.from_ns || r.t_b > self.to_ns {
            return Some(format!("a record of player {} at {} ns, outside the run ({}..{} ns)", r.flow, r.t_b, self.from_ns, self.to_ns));
        }
        // Sent up by a client or received up by the server: the up direction's count.
        let up = (r.kind == RecordKind::Received) == server;
        let n = counts[if up { 0 } else { 1 }];
        (r.seq >= n).then(|| format!("player {}'s APDU {} {}, of {n} planned", r.flow, r.seq, if up { "up" } else { "down" }))
    }
}

fn load(p: &std::path::Path) -> anyhow::Result<Vec<Record>> {
    // Endpoint records name the agents' own sockets: the merged report counts packets only.
    let records = horde_stats::records_of(p).map_err(anyhow::Error::msg)?;
    Ok(records.into_iter().filter(|r| r.kind.is_packet()).collect())
}

pub use horde_stats::offsets::correct;

/// Client records, server records, and the parts refused (name, why).
pub type Loaded = (Vec<Record>, Vec<Record>, Vec<(String, String)>);

/// Loads the logs of the parts whose logs arrived, every record's times corrected to the
/// controller's clock: the client records of every shard, then the server side's records. A
/// part whose log has a record the plan does not allow (a player it did not run, a time outside
/// the run, a sequence number beyond the player's schedule) is refused whole: returned by name
/// with the reason, its records left out.
pub fn load_records(parts: &[Part], plan: &Plan) -> anyhow::Result<Loaded> {
    let server = parts.iter().find(|p| p.server).context("no server agent")?;
    // The offset of the agent running each player (flow id = player id).
    let mut owner: Vec<(Range<u32>, i64)> = parts.iter().flat_map(|p| p.players.iter().map(|r| (r.clone(), p.offset_ns))).collect();
    owner.sort_by_key(|o| o.0.start);
    let owner_of = |flow: u32| -> i64 {
        match owner.binary_search_by(|o| {
            if o.0.end <= flow {
                std::cmp::Ordering::Less
            } else if o.0.start > flow {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        }) {
            Ok(i) => owner[i].1,
            Err(_) => 0,
        }
    };
    let mut refused = Vec::new();
    let mut client_records = Vec::new();
    for p in parts.iter().filter(|p| p.ok && !p.players.is_empty()) {
        let mut recs = load(&p.dir.join("client.hlog"))?;
        let ran = |flow: u32| p.players.iter().any(|r| r.contains(&flow));
        for r in &mut recs {
            correct(r, p.offset_ns, server.offset_ns);
        }
        let why = recs
            .iter()
            .find_map(|r| {
                if !ran(r.flow) {
                    Some(format!("its log has records of player {}, which it did not run", r.flow))
                } else {
                    plan.refuses(r, false).map(|w| format!("its log has {w}"))
                }
            })
            .or_else(|| plan.refuses_log(&recs, false).map(|w| format!("its log breaks its players' schedules: {w}")));
        match why {
            Some(w) => refused.push((p.name.clone(), w)),
            None => client_records.append(&mut recs),
        }
    }
    let mut server_records = Vec::new();
    if server.ok {
        server_records = load(&server.dir.join("server.hlog"))?;
        for r in &mut server_records {
            correct(r, server.offset_ns, owner_of(r.flow));
        }
        let why = server_records
            .iter()
            .find_map(|r| plan.refuses(r, true))
            .map(|w| format!("its server log has {w}"))
            .or_else(|| plan.refuses_log(&server_records, true).map(|w| format!("its server log breaks the players' schedules: {w}")));
        if let Some(w) = why {
            refused.push((server.name.clone(), w));
            server_records.clear();
        }
    }
    Ok((client_records, server_records, refused))
}

/// Merges the parts whose logs arrived: their records ([`load_records`]) and reports; parts
/// whose logs the plan refuses are left out (and named in [`Merged::refused`]).
pub fn merge(sc: &Scenario, parts: &[Part], plan: &Plan) -> anyhow::Result<Merged> {
    let _ = sc;
    let (client_records, server_records, refused) = load_records(parts, plan)?;
    let (client, server) = merged_reports(parts, &refused, &client_records)?;
    Ok(Merged { client_records, server_records, client, server, refused })
}

/// The merged client report (lateness over `client_records` when there are any) and the
/// server side's, times on the controller's clock.
fn merged_reports(parts: &[Part], refused: &[(String, String)], client_records: &[Record]) -> anyhow::Result<(SendReport, SendReport)> {
    let server = parts.iter().find(|p| p.server).context("no server agent")?;
    let reports: Vec<SendReport> = parts
        .iter()
        .filter(|p| p.ok && !p.players.is_empty() && !refused.iter().any(|r| r.0 == p.name))
        .filter_map(|p| {
            p.client.clone().map(|mut rep| {
                rep.t0_real_ns = to_reference(rep.t0_real_ns, p.offset_ns);
                rep.end_real_ns = to_reference(rep.end_real_ns, p.offset_ns);
                rep
            })
        })
        .collect();
    let client = merge_reports(&reports, client_records).context("no client agent finished with a log the plan allows: nothing to report")?;
    let mut server_report = server.server_report.clone().unwrap_or_else(|| SendReport { flows: Vec::new(), interrupted: true, ..client.clone() });
    server_report.t0_real_ns = to_reference(server_report.t0_real_ns, server.offset_ns);
    server_report.end_real_ns = to_reference(server_report.end_real_ns, server.offset_ns);
    Ok((client, server_report))
}

/// The run's start on the controller's clock as the merged report will have it: the earliest
/// client shard's (a summary's seconds count from it).
pub fn epoch(parts: &[Part]) -> Option<u64> {
    let start = |p: &Part| p.client.as_ref().filter(|r| r.t0_real_ns > 0).map(|r| to_reference(r.t0_real_ns, p.offset_ns));
    parts.iter().filter(|p| p.ok && !p.players.is_empty()).filter_map(start).min()
}

/// A run merged from its agents' summaries (`--collect summaries`).
pub struct MergedSummary {
    pub digest: horde_stats::digest::GameDigest,
    pub client: SendReport,
    pub server: SendReport,
    pub refused: Vec<(String, String)>,
}

/// Merges the summaries (`digest.json`) of the parts that sent one. Each is checked against
/// our own plan before it counts ([`horde_stats::digest::GameDigest::accept`]: the run's start,
/// categories and seconds, and no more departures than the part's players and server side have
/// planned, plus the logs' 1 % and 1,024 for duplicates); one that breaks it is refused whole.
/// `accepted` sees each summary that counts, by its agent's name.
pub fn merge_summaries(
    parts: &[Part],
    plan: &Plan,
    expect: &horde_stats::digest::GameDigest,
    accepted: &mut dyn FnMut(&str, &horde_stats::digest::GameDigest),
) -> anyhow::Result<MergedSummary> {
    let mut digest = expect.clone();
    let mut refused = Vec::new();
    let all = 0..plan.apdus.len() as u32;
    let planned =
        |r: &Range<u32>| -> u64 { plan.apdus.get(r.start as usize..(r.end as usize).min(plan.apdus.len())).map_or(0, |p| p.iter().map(|c| c[0] + c[1]).sum()) };
    for p in parts.iter().filter(|p| p.ok) {
        let apdus = p.players.iter().map(planned).sum::<u64>() + if p.server { planned(&all) } else { 0 };
        let max_sent = apdus + apdus / 100 + 1024;
        let path = p.dir.join("digest.json");
        let got = std::fs::read(&path)
            .map_err(|e| format!("no summary ({e})"))
            .and_then(|b| horde_stats::digest::GameDigest::accept(&b, expect, max_sent).map_err(|e| e.to_string()))
            .and_then(|d| match &plan.exact {
                Some((players, _)) => crate::schedule_check::check_summary(players, &p.players, p.server, &d, &unsent_of(p), plan.stopped).map(|_| d),
                None => Ok(d),
            })
            .and_then(|d| {
                digest.merge(&d).map_err(|e| e.to_string())?;
                accepted(&p.name, &d);
                Ok(())
            });
        if let Err(why) = got {
            refused.push((p.name.clone(), format!("its summary: {why}")));
        }
    }
    let (mut client, server) = merged_reports(parts, &refused, &[])?;
    if let Some(l) = lateness_of(&digest) {
        client.lateness = l;
    }
    Ok(MergedSummary { digest, client, server, refused })
}

/// Per (player, direction) in a part's own reports (its client side's flows up, its server
/// side's down): how many of its departures did not leave.
fn unsent_of(p: &Part) -> std::collections::HashMap<(u32, Direction), u64> {
    let up = p.client.iter().flat_map(|r| r.flows.iter().map(|f| ((f.id, Direction::Up), f.unsent)));
    let down = p.server_report.iter().flat_map(|r| r.flows.iter().map(|f| ((f.id, Direction::Down), f.unsent)));
    up.chain(down).collect()
}

/// Send lateness from a summary's histogram (the same figures [`lateness`] takes over records).
fn lateness_of(d: &horde_stats::digest::GameDigest) -> Option<horde_engine::sender::Lateness> {
    let h = &d.lateness_us;
    let n = h.count();
    if n == 0 {
        return None;
    }
    let q = |p: f64| h.quantile(p).unwrap_or(0) as f64;
    Some(horde_engine::sender::Lateness {
        mean_us: d.lateness_sum_us / n as f64,
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: q(1.0),
        over_1ms: d.late_over_1ms,
    })
}

/// One client-side report from the shards': counters add up, flows are listed together, the
/// run starts at the earliest shard's start, and the send lateness is recomputed over all sent
/// records (percentiles do not average).
pub fn merge_reports(reports: &[SendReport], records: &[Record]) -> Option<SendReport> {
    let first = reports.first()?;
    let mut m = first.clone();
    m.flows = reports.iter().flat_map(|r| r.flows.iter().cloned()).collect();
    let sum = |f: fn(&SendReport) -> u64| reports.iter().map(f).sum::<u64>();
    m.packets = sum(|r| r.packets);
    m.bytes = sum(|r| r.bytes);
    m.errors = sum(|r| r.errors);
    m.echoes = sum(|r| r.echoes);
    m.received = sum(|r| r.received);
    m.mismatched = sum(|r| r.mismatched);
    m.unsent = sum(|r| r.unsent);
    m.log_records = sum(|r| r.log_records);
    m.threads = reports.iter().map(|r| r.threads).sum();
    m.interrupted = reports.iter().any(|r| r.interrupted);
    m.t0_real_ns = reports.iter().map(|r| r.t0_real_ns).filter(|&t| t > 0).min().unwrap_or(0);
    m.end_real_ns = reports.iter().map(|r| r.end_real_ns).max().unwrap_or(0);
    m.duration_s = reports.iter().map(|r| r.duration_s).fold(0.0, f64::max);
    m.connect_s = reports.iter().map(|r| r.connect_s).fold(0.0, f64::max);
    m.log = None;
    let mut refusals = horde_engine::sender::Refusals::default();
    for r in reports {
        refusals.add(&r.refusals);
    }
    m.refusals = refusals;
    m.lateness = lateness(records).unwrap_or(m.lateness);
    Some(m)
}

/// Send lateness (actual − scheduled departure) over all sent records.
fn lateness(records: &[Record]) -> Option<horde_engine::sender::Lateness> {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).ok()?;
    let mut over = 0u64;
    let mut sum = 0f64;
    let mut n = 0u64;
    for r in records.iter().filter(|r| r.kind == RecordKind::Sent) {
        let late_ns = r.t_b.saturating_sub(r.t_a);
        let us = late_ns / 1000;
        let _ = h.record(us.max(1));
        sum += late_ns as f64 / 1000.0;
        n += 1;
        if late_ns > 1_000_000 {
            over += 1;
        }
    }
    if n == 0 {
        return None;
    }
    let q = |p: f64| h.value_at_quantile(p) as f64;
    Some(horde_engine::sender::Lateness {
        mean_us: sum / n as f64,
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: h.max() as f64,
        over_1ms: over,
    })
}
