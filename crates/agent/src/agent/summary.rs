//! An agent's part of a scenario run reduced to one mergeable summary (`horde run --collect
//! summaries`, [`horde_stats::digest`]): every timestamp put on the controller's clock with the
//! offsets the controller measured, the same stays the report counts. The summary
//! (`digest.json`) is then the one file the controller collects.
//!
//! It is built live ([`super::live::Live`]): both logs' records as they are written, pieces sent once a
//! second, the summary their sum. Reading the logs back ([`write`]) is the fallback when the
//! run was not summarised live.

use std::ops::Range;

use anyhow::{bail, Context as _};
use horde_model::service::Direction;
use horde_stats::digest::{stay_of, Builder, GameDigest};
use horde_wire::RecordKind;

use super::run::{Run, Work};
use crate::merge::correct;
use crate::msg::SummaryRequest;

/// The summary's file in the run's directory.
pub(super) const FILE: &str = "digest.json";

/// Summarises the finished run `r` into `FILE` in its directory: the live summary when it is
/// whole, else its logs read back. Says which.
pub(super) fn write(r: &Run, req: &SummaryRequest) -> anyhow::Result<&'static str> {
    let live = match &r.live {
        Some(l) => l.finish(req.epoch_ns),
        None => Err("no live summary".into()),
    };
    let (d, how) = match live {
        Ok(d) => (d, "live"),
        Err(why) => (from_logs(r, req).with_context(|| format!("{why}; from the logs"))?, "from the logs"),
    };
    let text = serde_json::to_vec(&d).context("encoding the summary")?;
    std::fs::write(r.dir.join(FILE), text).with_context(|| format!("writing {FILE}"))?;
    Ok(how)
}

/// The summary from the run's logs, read back.
fn from_logs(r: &Run, req: &SummaryRequest) -> anyhow::Result<GameDigest> {
    let Work::Scenario { sc, players, circuits: None } = &r.work else {
        bail!("only a scenario's players and server side are summarised (regulated circuits, flows and bots send their logs)");
    };
    let a = &r.assignment;
    let mut b = Builder::new(sc.service.states.len(), req.epoch_ns, a.duration_ns as f64 / 1e9);
    let all = vec![Range { start: 0, end: a.players_total }];
    let segments = horde_scenario::report::analysed_segments(sc, players, &all);
    let owner = |flow: u32| req.owners.iter().find(|(range, _): &&(Range<u32>, i64)| range.contains(&flow)).map_or(0, |o| o.1);
    let (own, server) = (req.own_offset_ns, req.server_offset_ns);
    let mut sides = Vec::new();
    if a.players.is_some() {
        sides.push(("client.hlog", Direction::Up));
    }
    if a.server.is_some() {
        sides.push(("server.hlog", Direction::Down));
    }
    for (file, out) in sides {
        let bytes = std::fs::read(r.dir.join(file)).with_context(|| format!("reading {file}"))?;
        let (_, records) = horde_wire::log::read_all(&bytes).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        for rec in records {
            let mut rec = rec.map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
            // a received APDU's send time is its sender's: the server's, or its player's agent's
            let peer = if out == Direction::Up { server } else { owner(rec.flow) };
            correct(&mut rec, own, peer);
            match rec.kind {
                RecordKind::Sent => b.sent(&rec, out),
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
