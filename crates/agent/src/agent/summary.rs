//! An agent's part of a scenario run reduced to one mergeable summary (`horde run --collect
//! summaries`, [`horde_stats::digest`]): every timestamp put on the controller's clock with the
//! offsets the controller measured, the same stays the report counts. The summary
//! (`digest.json`) is then the one file the controller collects.
//!
//! It is built live ([`horde_scenario::live_digest::Live`]): both logs' records as they are written, pieces sent once a
//! second, the summary their sum. Reading the logs back ([`write`]) is the fallback when the
//! run was not summarised live.

use std::ops::Range;

use anyhow::{bail, Context as _};
use horde_model::service::Direction;
use horde_stats::digest::{stay_of, Builder, GameDigest};
use horde_wire::RecordKind;

use super::run::Run;
use crate::merge::correct;
use crate::msg::SummaryRequest;
use horde_scenario::run_part::Ready as Work;

/// The summary's file in the run's directory.
pub(super) const FILE: &str = "digest.json";

use crate::msg::FLOW_SUMMARIES as FLOWS_FILE;

/// Summarises the finished run `r` into its summary file (named in the answer): a scenario's
/// from the live summary when it is whole, else from its logs read back; a flow run's from its
/// logs. Says which.
pub(super) fn write(r: &Run, req: &SummaryRequest) -> anyhow::Result<(&'static str, &'static str)> {
    if let Work::Flows { .. } = &r.part.ready {
        return flows(r, req).map(|()| ("from the logs", FLOWS_FILE));
    }
    let live = match &r.live {
        Some(l) => l.finish(req.epoch_ns),
        None => Err("no live summary".into()),
    };
    let (d, how) = match live {
        Ok(d) => (d, "live"),
        Err(why) => (from_logs(r, req).with_context(|| format!("{why}; from the logs"))?, "from the logs"),
    };
    let text = serde_json::to_vec(&d).context("encoding the summary")?;
    std::fs::write(r.part.dir.join(FILE), text).with_context(|| format!("writing {FILE}"))?;
    Ok((how, FILE))
}

/// The files a summarised run sends: its summary `file`, and a flow run's logs after it when
/// the controller asked for them too (`--check-summaries`).
pub(super) fn files(r: &Run, file: &'static str, with_logs: bool) -> Vec<&'static str> {
    let mut files = vec![file];
    if with_logs && matches!(r.part.ready, Work::Flows { .. }) {
        files.extend(r.part.log_files());
    }
    files
}

/// A flow run's logs summarised ([`horde_stats::flowsum`]): each record put on the controller's
/// clock and in the order the controller merges logs, so the summary bins as the merged logs'
/// decode does.
fn flows(r: &Run, req: &SummaryRequest) -> anyhow::Result<()> {
    let peer = |flow: u32| req.owners.iter().find(|(range, _): &&(Range<u32>, i64)| range.contains(&flow)).map_or(0, |o| o.1);
    let mut out = Vec::new();
    for file in r.part.log_files() {
        let role = if file == "recv.hlog" { horde_wire::Role::Receiver } else { horde_wire::Role::Sender };
        let bytes = std::fs::read(r.part.dir.join(file)).with_context(|| format!("reading {file}"))?;
        let mut records = horde_stats::load(&bytes).map_err(|e| anyhow::anyhow!("{file}: {e}"))?.records;
        for rec in &mut records {
            correct(rec, req.own_offset_ns, peer(rec.flow));
        }
        match role {
            horde_wire::Role::Receiver => records.sort_by_key(|r| (r.flow, r.t_b)),
            _ => records.sort_by_key(|r| (r.flow, r.t_a)),
        }
        let log = horde_stats::LoadedLog { role, records, trailing_bytes: 0 };
        out.push(horde_stats::flowsum::summarise(&log, req.epoch_ns, req.window_ns));
    }
    let text = serde_json::to_vec(&out).context("encoding the flow summaries")?;
    std::fs::write(r.part.dir.join(FLOWS_FILE), text).with_context(|| format!("writing {FLOWS_FILE}"))
}

/// The summary from the run's logs, read back.
fn from_logs(r: &Run, req: &SummaryRequest) -> anyhow::Result<GameDigest> {
    let Work::Scenario { sc, players: Some(players), circuits: None, .. } = &r.part.ready else {
        bail!("only a scenario's players and server side, and flows, are summarised (regulated circuits and bots send their logs)");
    };
    let a = &r.part.part;
    let part = a.scenario_part().context("not a scenario's part")?;
    let mut b = Builder::new(sc.service.states.len(), req.epoch_ns, a.shape.duration_ns as f64 / 1e9);
    // every player the run planned, a raised target's too, with the roster as the run left it
    let all = vec![Range { start: 0, end: players.len() }];
    let segments = horde_scenario::report::analysed_segments(sc, players, &all);
    let owner = |flow: u32| req.owners.iter().find(|(range, _): &&(Range<u32>, i64)| range.contains(&flow)).map_or(0, |o| o.1);
    let (own, server) = (req.own_offset_ns, req.server_offset_ns);
    let mut sides = Vec::new();
    if part.players.is_some() {
        sides.push(("client.hlog", Direction::Up));
    }
    if part.server.is_some() {
        sides.push(("server.hlog", Direction::Down));
    }
    for (file, out) in sides {
        let bytes = std::fs::read(r.part.dir.join(file)).with_context(|| format!("reading {file}"))?;
        let (_, records) = horde_wire::log::read_all(&bytes).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        for rec in records {
            let mut rec = rec.map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
            // a received APDU's send time is its sender's: the server's, or its player's agent's
            let peer = if out == Direction::Up { server } else { owner(rec.flow) };
            correct(&mut rec, own, peer);
            match rec.kind {
                RecordKind::Sent => b.sent(&rec, out, segments.get(rec.flow as usize).map(Vec::as_slice)),
                RecordKind::Received => {
                    let stay = segments.get(rec.flow as usize).and_then(|s| stay_of(s, req.epoch_ns, rec.t_a));
                    b.received(&rec, if out == Direction::Up { Direction::Down } else { Direction::Up }, stay);
                }
                _ => {}
            }
        }
    }
    Ok(b.finish())
}
