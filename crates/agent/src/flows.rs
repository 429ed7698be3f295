//! The controller for flows (`horde send --flows FILE --agents … --recv-agent …`): D-ITG's
//! manager use. Each flow of a flow file is sent by one agent (the one whose address is the
//! flow's `src`, else spread over the sending agents by weight) to a receiver that an agent runs
//! (the one whose address is the flow's destination). The controller starts every sender at one
//! instant, stops the receivers when the senders are done, collects every log, corrects each
//! record's times by its agents' clock offsets, and decodes them all together: one table,
//! `summary.json`, `flows.csv`, `windows.csv`, `index.html`, and the merged logs. With
//! `--collect summaries` each agent summarises its own logs instead ([`horde_stats::flowsum`])
//! and the controller builds the same report from the summaries, without a raw record.
//!
//! Consent: every hello carries a MAC under a key drawn for the run, and the receivers the agents
//! start drop any other; so a receiver started through an agent takes this run's flows only, and
//! the senders send UDP only after the receiver answered their address validation.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context as _};
use horde_engine::{RecvReport, SendReport};
use horde_model::flow::{FlowFile, Transport};
use horde_model::Flow;
use horde_wire::{Record, Role};
use serde::Serialize;

use crate::clock::to_reference;
use crate::fleet::{AgentSpec, Event, Fleet, Watch};
use crate::msg::{FlowsJob, Work};

/// How the controller runs a flow file.
pub struct FlowsOptions<'a> {
    /// The agents that send (weights spread the flows that name no source).
    pub senders: Vec<AgentSpec>,
    /// The agents that run receivers.
    pub receivers: Vec<SocketAddr>,
    pub credentials: PathBuf,
    pub out: &'a Path,
    pub seed: u64,
    /// Time-series windows of the decoded report.
    pub window_ns: u64,
    pub deadman: Duration,
    pub events: &'a (dyn Fn(&Event) + Sync),
    pub stop: &'a AtomicBool,
    /// Stream every agent's logs to this live log server, proving this key, as NAME-AGENT-send /
    /// -recv (`send --agents --log-server`).
    pub log_server: Option<(SocketAddr, horde_proto::RunKey, String)>,
    /// What the agents send after the run: their logs, or one summary per log.
    pub collect: crate::controller::Collect,
    /// With summaries: collect the logs too, decode them, and compare every figure
    /// (`--check-summaries`; summary.json's `distributed.check`).
    pub check_summaries: bool,
}

/// One agent's row in the report.
#[derive(Debug, Clone, Serialize)]
pub struct FlowAgentRow {
    pub name: String,
    pub address: String,
    /// "send", "recv" or "send+recv".
    pub role: String,
    pub flows_sent: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    #[serde(flatten)]
    pub stats: horde_scenario::AgentStats,
}

/// The outcome of a distributed flows run.
pub struct FlowsOutcome {
    pub analysis: horde_stats::Analysis,
    pub agents: Vec<FlowAgentRow>,
    /// The senders' reports, times on the controller's clock.
    pub sent: Vec<SendReport>,
    pub received: Vec<RecvReport>,
    /// Agents lost during the run (their flows' records are missing).
    pub lost: Vec<String>,
    pub interrupted: bool,
    /// The report came from the agents' summaries (no merged logs were written).
    pub summarised: bool,
    /// `--check-summaries`: the summaries' figures against the logs'.
    pub checked: Option<horde_stats::flowsum::Comparison>,
}

/// Where each flow goes: the sending agent and the receiving agent (indices into the agent
/// list: senders first, then receivers that are not also senders), and what each receiver
/// listens on.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub addrs: Vec<SocketAddr>,
    /// Per flow (by position in the resolved file): sender, receiver.
    pub by_flow: Vec<(usize, usize)>,
    /// Per agent: the flow ids it sends (as ranges), and its receive addresses (UDP, TCP).
    pub send: Vec<Vec<Range<u32>>>,
    pub recv_udp: Vec<Vec<SocketAddr>>,
    pub recv_tcp: Vec<Vec<SocketAddr>>,
}

/// Places the flows (pure, for tests). A flow whose `src` address is a sending agent's goes
/// from it; one that names no source goes from the sending agents in proportion to their
/// weights, in id order. Its destination must be a receiving agent's address (with one
/// receiving agent, any destination is its: it may have several addresses).
pub fn place(flows: &[Flow], senders: &[AgentSpec], receivers: &[SocketAddr]) -> anyhow::Result<Placement> {
    if senders.is_empty() {
        bail!("no sending agents: give --agents HOST:PORT,…");
    }
    if receivers.is_empty() {
        bail!("no receiving agent: give --recv-agent HOST:PORT (an agent on the flows' destination host)");
    }
    let mut addrs: Vec<SocketAddr> = senders.iter().map(|a| a.addr).collect();
    let recv_at: Vec<usize> = receivers
        .iter()
        .map(|r| match addrs.iter().position(|a| a == r) {
            Some(i) => i,
            None => {
                addrs.push(*r);
                addrs.len() - 1
            }
        })
        .collect();
    let mut by_flow = Vec::with_capacity(flows.len());
    let mut unplaced = Vec::new();
    for (k, f) in flows.iter().enumerate() {
        let r = if receivers.len() == 1 {
            recv_at[0]
        } else {
            recv_at.iter().copied().find(|&i| addrs[i].ip() == f.dst.ip()).with_context(|| {
                format!(
                    "flow {} ({}) goes to {}, which is none of the receiving agents' addresses ({}): with several --recv-agent, each flow's destination names one of them",
                    f.id,
                    f.name,
                    f.dst,
                    receivers.iter().map(|a| a.ip().to_string()).collect::<Vec<_>>().join(", ")
                )
            })?
        };
        let s = match f.src {
            Some(src) => senders.iter().position(|a| a.addr.ip() == src.ip()).with_context(|| {
                format!(
                    "flow {} ({}) is sent from {}, which is none of the sending agents' addresses ({}): drop its src to let the controller place it",
                    f.id,
                    f.name,
                    src.ip(),
                    senders.iter().map(|a| a.addr.ip().to_string()).collect::<Vec<_>>().join(", ")
                )
            })?,
            None => {
                unplaced.push(k);
                usize::MAX
            }
        };
        by_flow.push((s, r));
    }
    if !unplaced.is_empty() {
        let weights: Vec<u32> = senders.iter().map(|a| a.weight).collect();
        let n = u32::try_from(unplaced.len()).context("too many flows")?;
        let shards = horde_scenario::shards(n, &weights).map_err(|e| e.into_anyhow())?;
        for (agent, r) in shards.iter().enumerate() {
            for j in r.clone() {
                by_flow[unplaced[j as usize]].0 = agent;
            }
        }
    }
    let mut send: Vec<Vec<Range<u32>>> = vec![Vec::new(); addrs.len()];
    let mut udp: Vec<BTreeSet<SocketAddr>> = vec![BTreeSet::new(); addrs.len()];
    let mut tcp: Vec<BTreeSet<SocketAddr>> = vec![BTreeSet::new(); addrs.len()];
    for (f, &(s, r)) in flows.iter().zip(&by_flow) {
        let ranges = &mut send[s];
        match ranges.last_mut() {
            Some(last) if last.end == f.id => last.end += 1,
            _ => ranges.push(f.id..f.id + 1),
        }
        match f.transport {
            Transport::Udp => udp[r].insert(f.dst),
            Transport::Tcp => tcp[r].insert(f.dst),
            Transport::Icmp => bail!(
                "flow {} is ICMP: agents run UDP and TCP flows; send ICMP with `horde send -T icmp` (and `horde recv --icmp`) on the machines themselves",
                f.id
            ),
        };
    }
    for (i, v) in send.iter().enumerate() {
        if v.len() > crate::msg::MAX_RECV_ADDRS {
            bail!("agent {} would send {} separate ranges of flow ids (at most {}): give fewer flows a src", addrs[i], v.len(), crate::msg::MAX_RECV_ADDRS);
        }
    }
    for (i, (u, t)) in udp.iter().zip(&tcp).enumerate() {
        if u.len() + t.len() > crate::msg::MAX_RECV_ADDRS {
            bail!("agent {} would listen on {} addresses (at most {})", addrs[i], u.len() + t.len(), crate::msg::MAX_RECV_ADDRS);
        }
    }
    Ok(Placement {
        addrs,
        by_flow,
        send,
        recv_udp: udp.into_iter().map(|s| s.into_iter().collect()).collect(),
        recv_tcp: tcp.into_iter().map(|s| s.into_iter().collect()).collect(),
    })
}

/// The longest any flow may run, to bound the receivers: flows stop on their own, and the
/// controller stops the receivers once the senders are done.
fn run_bound_ns(flows: &[Flow]) -> u64 {
    let longest = flows.iter().map(|f| f.stop.duration_ns.unwrap_or(horde_model::scenario::MAX_RUN_DURATION_NS)).max().unwrap_or(0);
    longest.clamp(1_000_000_000, horde_model::scenario::MAX_RUN_DURATION_NS)
}

/// Runs the flow file `text` through the agents and writes the decoded report into `opts.out`.
pub fn run(text: &str, opts: &FlowsOptions) -> anyhow::Result<FlowsOutcome> {
    let flows = FlowFile::parse_and_resolve(text, opts.seed).map_err(|e| anyhow::anyhow!("{e}"))?;
    let placement = place(&flows, &opts.senders, &opts.receivers)?;
    std::fs::create_dir_all(opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    let key = horde_proto::RunKey::from_bytes(horde_engine::random_secret().context("drawing a run key")?);
    let mut fleet = Fleet::connect(&placement.addrs, &opts.credentials, opts.deadman, opts.events, opts.stop)?;
    // The agents open no file the flow file names: value files go inline, read here.
    let inlined = horde_model::dist::inline_value_files(text).map_err(|e| anyhow::anyhow!("flow file: {e}"))?;
    let bound_ns = run_bound_ns(&flows);
    let mut parts = Vec::new();
    for i in 0..placement.addrs.len() {
        let (sends, recvs) = (!placement.send[i].is_empty(), !placement.recv_udp[i].is_empty() || !placement.recv_tcp[i].is_empty());
        if !sends && !recvs {
            fleet.members[i].status = "idle (no flows)".into();
            continue;
        }
        let job = FlowsJob {
            text: inlined.clone(),
            seed: opts.seed,
            send: placement.send[i].clone(),
            recv_udp: placement.recv_udp[i].clone(),
            recv_tcp: placement.recv_tcp[i].clone(),
            log_server: opts.log_server.as_ref().map(|(addr, k, name)| crate::msg::LogServerJob {
                addr: *addr,
                key: k.to_hex(),
                name: format!("{name}-{}", fleet.members[i].c.name)
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
                    .take(59)
                    .collect(),
            }),
        };
        parts.push((i, fleet.assignment(opts.deadman, bound_ns, opts.seed, &key, Work::Flows(job)), sends, recvs));
        fleet.note(format!("agent {}: {}", fleet.members[i].c.name, describe(&placement, i)));
    }
    fleet.assign(parts)?;
    let t0 = fleet.start(&format!("{} flow(s)", flows.len()));
    let flows_of = |i: usize| placement.send[i].iter().map(|r| (r.end - r.start) as u64).sum::<u64>();
    let missing = |i: usize| format!("; its {} flow(s) are missing from the report", flows_of(i));
    let watched = fleet.watch(&Watch {
        hard_end: Duration::from_nanos(bound_ns) + Duration::from_secs(60),
        overrun: "the agents overran the flows by 60 s: stopping them".into(),
        downstream_lost_stops_all: false,
        missing: &missing,
    });
    let summarised = opts.collect == crate::controller::Collect::Summaries;
    let (mut analysis, checked) = collect_and_analyse(&mut fleet, &flows, &placement, opts, (t0, bound_ns))?;
    for f in &mut analysis.flows {
        f.name = f.flow.and_then(|id| flows.binary_search_by_key(&id, |f| f.id).ok()).map(|k| flows[k].name.clone());
    }
    let rows: Vec<FlowAgentRow> = fleet
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| FlowAgentRow {
            name: m.c.name.clone(),
            address: m.c.addr.to_string(),
            role: match (m.upstream, m.downstream) {
                (true, true) => "send+recv",
                (true, false) => "send",
                (false, true) => "recv",
                _ => "idle",
            }
            .into(),
            flows_sent: flows_of(i),
            packets_sent: m.report::<SendReport>("send").map_or(0, |r| r.packets),
            packets_received: m.report::<RecvReport>("recv").map_or(0, |r| r.packets),
            stats: m.stats(),
        })
        .collect();
    let lost = fleet.lost();
    let sent: Vec<SendReport> = fleet
        .members
        .iter()
        .filter_map(|m| {
            m.report::<SendReport>("send").map(|mut r| {
                r.t0_real_ns = to_reference(r.t0_real_ns, m.c.clock.offset_ns);
                r.end_real_ns = to_reference(r.end_real_ns, m.c.clock.offset_ns);
                r
            })
        })
        .collect();
    let received: Vec<RecvReport> = fleet.members.iter().filter_map(|m| m.report("recv")).collect();
    write_report(opts.out, &fleet.run_id, &analysis, &rows, (!lost.is_empty(), watched.signalled, summarised), checked.as_ref())?;
    Ok(FlowsOutcome { analysis, agents: rows, sent, received, lost, interrupted: watched.signalled, summarised, checked })
}

/// Collects the agents' logs or summaries (and with `--check-summaries` both) into `opts.out`
/// and analyses them: from the summaries when collected, and their comparison with the logs'.
fn collect_and_analyse(
    fleet: &mut Fleet,
    flows: &[Flow],
    placement: &Placement,
    opts: &FlowsOptions,
    (t0, bound_ns): (u64, u64),
) -> anyhow::Result<(horde_stats::Analysis, Option<horde_stats::flowsum::Comparison>)> {
    let offsets: Vec<i64> = fleet.members.iter().map(|m| m.c.clock.offset_ns).collect();
    let summarised = opts.collect == crate::controller::Collect::Summaries;
    let check = summarised && opts.check_summaries;
    // Each log bounded by our own plan of the flows it can hold, never by what the agent says.
    let per_flow = planned_records(flows);
    let log_limits = |i: usize, m: &crate::fleet::Member| {
        let max = |records: u64| (horde_wire::LOG_HEADER_LEN + horde_wire::RECORD_LEN * 16) as u64 + horde_wire::RECORD_LEN as u64 * records;
        let planned =
            |pick: &dyn Fn(&(usize, usize)) -> bool| -> u64 { per_flow.iter().zip(&placement.by_flow).filter(|(_, b)| pick(b)).map(|(n, _)| 2 * n).sum() };
        let mut limits = Vec::new();
        if m.upstream {
            limits.push(("send.hlog", max(planned(&|b| b.0 == i))));
        }
        if m.downstream {
            limits.push(("recv.hlog", max(planned(&|b| b.1 == i))));
        }
        limits
    };
    let planned: Vec<(u32, u64)> = flows.iter().zip(&per_flow).map(|(f, n)| (f.id, *n)).collect();
    let summary_plan = crate::flowsum::SummaryPlan {
        flows: &planned,
        by_flow: &placement.by_flow,
        addrs: &placement.addrs,
        t0,
        window_ns: opts.window_ns,
        bound_ns,
        with_logs: check,
    };
    let (from_summaries, dirs) = if summarised {
        let plan = &summary_plan;
        let requests = (0..placement.addrs.len()).map(|i| plan.request(i, &offsets)).collect::<anyhow::Result<Vec<_>>>()?;
        let limits = |i: usize, m: &crate::fleet::Member| {
            let mut l = vec![(crate::msg::FLOW_SUMMARIES, plan.bytes(i))];
            if check {
                l.extend(log_limits(i, m));
            }
            l
        };
        let dirs = fleet.collect_with(opts.out, limits, |i, _| Some(Box::new(requests[i].clone())))?;
        fleet.close();
        let (parts, refused) = plan.load(fleet, &dirs);
        for (name, why) in refused {
            fleet.refuse(&name, &why);
        }
        (Some(horde_stats::flowsum::analyse(&parts, true).map_err(|e| anyhow::anyhow!("the agents' flow summaries: {e}"))?), dirs)
    } else {
        let dirs = fleet.collect(opts.out, log_limits)?;
        fleet.close();
        (None, dirs)
    };
    let from_logs = if !summarised || check {
        let (tx_records, rx_records, refused) = merge_records(fleet, flows, placement, &dirs, t0)?;
        for (name, why) in refused {
            fleet.refuse(&name, &why);
        }
        write_log(&opts.out.join("send.hlog"), Role::Sender, to_reference(t0, 0), &tx_records)?;
        write_log(&opts.out.join("recv.hlog"), Role::Receiver, to_reference(t0, 0), &rx_records)?;
        let logs = [
            horde_stats::LoadedLog { role: Role::Sender, records: tx_records, trailing_bytes: 0 },
            horde_stats::LoadedLog { role: Role::Receiver, records: rx_records, trailing_bytes: 0 },
        ];
        // windows from the run's start, as the summaries count them
        Some(horde_stats::analyse(&logs, horde_stats::Options { window_ns: Some(opts.window_ns), anchor_ns: Some(t0) }))
    } else {
        None
    };
    let checked = match (&from_logs, &from_summaries) {
        (Some(l), Some(s)) => Some(horde_stats::flowsum::compare(l, s)),
        _ => None,
    };
    match from_summaries.or(from_logs) {
        Some(a) => Ok((a, checked)),
        None => bail!("neither logs nor summaries were collected"),
    }
}

/// What an agent does in the run, for its note.
fn describe(p: &Placement, i: usize) -> String {
    let mut what = Vec::new();
    if !p.send[i].is_empty() {
        what.push(format!("sends {} flow(s)", p.send[i].iter().map(|r| r.end - r.start).sum::<u32>()));
    }
    let l: Vec<String> = p.recv_udp[i].iter().map(|x| format!("udp {x}")).chain(p.recv_tcp[i].iter().map(|x| format!("tcp {x}"))).collect();
    if !l.is_empty() {
        what.push(format!("receives on {}", l.join(", ")));
    }
    what.join("; ")
}

/// Sent records, received records, and the agents refused (name, why).
type Merged = (Vec<Record>, Vec<Record>, Vec<(String, String)>);

/// Every collected record on the controller's clock, each checked against the placement (an
/// agent's log holds only the flows it sent or received: an agent whose log breaks that is
/// refused whole, its name and why returned), sorted.
fn merge_records(fleet: &Fleet, flows: &[Flow], placement: &Placement, dirs: &[PathBuf], t0: u64) -> anyhow::Result<Merged> {
    let (mut tx, mut rx, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    let exact: Vec<bool> = exact_departures(flows).iter().map(Option::is_some).collect();
    for (i, m) in fleet.members.iter().enumerate().filter(|(_, m)| m.collected && m.ok()) {
        match agent_records(fleet, i, flows, placement, &dirs[i]).and_then(|(t, r)| check_schedules(flows, &exact, &t, &r, t0).map(|_| (t, r))) {
            Ok((mut t, mut r)) => {
                tx.append(&mut t);
                rx.append(&mut r);
            }
            Err(e) => refused.push((m.c.name.clone(), format!("{e:#}"))),
        }
    }
    tx.sort_by_key(|r| (r.flow, r.t_a));
    rx.sort_by_key(|r| (r.flow, r.t_b));
    Ok((tx, rx, refused))
}

/// Every flow whose schedule is regenerated here ([`exact_departures`]) against an agent's
/// records of it: its departures, exactly, and its arrivals' numbers and sizes
/// ([`crate::schedule_check`]).
fn check_schedules(flows: &[Flow], exact: &[bool], tx: &[Record], rx: &[Record], t0: u64) -> anyhow::Result<()> {
    use std::collections::BTreeMap;
    let mut sent: BTreeMap<u32, Vec<(u64, u32, u64)>> = BTreeMap::new();
    for r in tx.iter().filter(|r| r.kind == horde_wire::RecordKind::Sent) {
        sent.entry(r.flow).or_default().push((r.seq, r.size, r.t_a));
    }
    let mut got: BTreeMap<u32, Vec<(u64, u32)>> = BTreeMap::new();
    for r in rx.iter().filter(|r| r.kind == horde_wire::RecordKind::Received) {
        got.entry(r.flow).or_default().push((r.seq, r.size));
    }
    let flow = |id: u32| flows.binary_search_by_key(&id, |f| f.id).ok().filter(|&k| exact[k]).map(|k| &flows[k]);
    for (id, mut s) in sent {
        if let Some(f) = flow(id) {
            crate::schedule_check::check_sent(f, &mut s, t0).map_err(anyhow::Error::msg)?;
        }
    }
    for (id, mut g) in got {
        if let Some(f) = flow(id) {
            crate::schedule_check::check_received(f, &mut g).map_err(anyhow::Error::msg)?;
        }
    }
    Ok(())
}

/// Agent `i`'s records, on the controller's clock, or why they are refused.
fn agent_records(fleet: &Fleet, i: usize, flows: &[Flow], placement: &Placement, dir: &Path) -> anyhow::Result<(Vec<Record>, Vec<Record>)> {
    let offset = |i: usize| fleet.members[i].c.clock.offset_ns;
    let flow_at = |id: u32| flows.binary_search_by_key(&id, |f| f.id).ok();
    let m = &fleet.members[i];
    let (mut tx, mut rx) = (Vec::new(), Vec::new());
    if m.upstream {
        for mut r in horde_stats::records_of(&dir.join("send.hlog")).map_err(anyhow::Error::msg)? {
            let Some(k) = flow_at(r.flow).filter(|&k| placement.by_flow[k].0 == i) else {
                bail!("its send log has records of flow {}, which it did not send", r.flow);
            };
            // Arrivals at a sender (a reverse flow's bulk) carry the receiver's send time.
            crate::merge::correct(&mut r, offset(i), offset(placement.by_flow[k].1));
            tx.push(r);
        }
    }
    if m.downstream {
        for mut r in horde_stats::records_of(&dir.join("recv.hlog")).map_err(anyhow::Error::msg)? {
            let Some(k) = flow_at(r.flow).filter(|&k| placement.by_flow[k].1 == i) else {
                bail!("its receive log has records of flow {}, which was not sent to it", r.flow);
            };
            crate::merge::correct(&mut r, offset(i), offset(placement.by_flow[k].0));
            rx.push(r);
        }
    }
    Ok((tx, rx))
}

/// Departures counted exactly, over all of a run's flows, at most this many (counting is a
/// walk through each flow's seeded schedule: ~20 ns a departure).
const COUNT_BUDGET: u64 = 50_000_000;
/// Records a flow may log beside its packets: endpoint records (one per admitting hello, which
/// a sender repeats until answered) and its end message's copies.
const FLOW_OVERHEAD: u64 = 64;

/// The most packets each flow may log one way, by our own plan (issue 47: a bound of rate ×
/// 1.5 + 10,000 let an agent add 9,000 forged records to a flow of 400): a flow with a schedule
/// gets exactly its schedule's departures, regenerated from its seed (the engine sends those or
/// fewer); past [`COUNT_BUDGET`], and for bulk or reverse flows, the coarse bound of
/// [`rate_bound`].
fn planned_records(flows: &[Flow]) -> Vec<u64> {
    flows.iter().zip(exact_departures(flows)).map(|(f, exact)| exact.map_or_else(|| rate_bound(f), |n| n + FLOW_OVERHEAD)).collect()
}

/// Each flow's departures counted exactly by regenerating its schedule (None: bulk, reverse,
/// or past [`COUNT_BUDGET`]): the flows whose logs are checked against their schedule.
fn exact_departures(flows: &[Flow]) -> Vec<Option<u64>> {
    let mut budget = COUNT_BUDGET;
    flows
        .iter()
        .map(|f| {
            let coarse = rate_bound(f);
            let exact = (!f.bulk && !f.reverse && coarse <= budget).then(|| horde_model::schedule::departures(f, coarse)).flatten();
            if let Some(n) = exact {
                budget -= n;
            }
            exact
        })
        .collect()
}

/// A coarse bound: its packet limit, else its duration at its model's mean rate with half again
/// as margin (heavy-tailed draws bunch), else (bulk, or a model without a mean) its duration at
/// 2 million packets a second (ten times the most one core sends, bench/RESULTS-engine.md);
/// plus 10,000 for short flows' noise.
fn rate_bound(f: &Flow) -> u64 {
    let secs = f.stop.duration_ns.unwrap_or(horde_model::scenario::MAX_RUN_DURATION_NS) as f64 / 1e9;
    let by_rate = match f.idt.mean().or_else(|| f.idt.mean_estimate()).filter(|m| *m > 0.0 && !f.bulk) {
        Some(mean_ms) => secs * 1e3 / mean_ms * 1.5,
        None => secs * 2e6,
    };
    let by_rate = by_rate.min(u64::MAX as f64 / 2.0) as u64 + 10_000;
    f.stop.packets.map_or(by_rate, |p| p.saturating_add(10_000).min(by_rate))
}

/// Writes records as a Horde log (`horde decode` reads it).
pub fn write_log(p: &Path, role: Role, start_ns: u64, records: &[Record]) -> anyhow::Result<()> {
    let f = std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
    let mut w = std::io::BufWriter::new(f);
    let mut h = [0u8; horde_wire::LOG_HEADER_LEN];
    horde_wire::LogHeader { role, start_ns }.emit(&mut h);
    w.write_all(&h)?;
    let mut b = [0u8; horde_wire::RECORD_LEN];
    for r in records {
        r.emit(&mut b);
        w.write_all(&b)?;
    }
    w.flush().with_context(|| format!("writing {}", p.display()))
}

/// The agents' table as text.
pub fn agents_table(rows: &[FlowAgentRow]) -> String {
    let mut t = format!("{:<22} {:<10} {:>6} {:>10} {:>10} {}\n", "agent", "role", "flows", "pkts sent", "received", horde_scenario::AgentStats::HEADER);
    for a in rows {
        t.push_str(&format!("{:<22} {:<10} {:>6} {:>10} {:>10} {}\n", a.name, a.role, a.flows_sent, a.packets_sent, a.packets_received, a.stats.cells()));
    }
    t
}

/// summary.json (the decode's JSON with a `distributed` part), flows.csv, windows.csv,
/// index.html.
fn write_report(
    out: &Path,
    run_id: &str,
    a: &horde_stats::Analysis,
    rows: &[FlowAgentRow],
    (partial, interrupted, summarised): (bool, bool, bool),
    check: Option<&horde_stats::flowsum::Comparison>,
) -> anyhow::Result<()> {
    let mut agents_html = String::from("<h2>Agents</h2>");
    if partial {
        agents_html.push_str("<p class=\"bad\"><b>PARTIAL</b>: agents were lost; their flows' records are missing.</p>");
    }
    let (collect, bound) = if summarised { ("summaries", Some(horde_stats::flowsum::BOUND_TEXT)) } else { ("logs", None) };
    if let Some(b) = bound {
        agents_html.push_str(&format!("<p>From the agents' summaries of their logs: {}.</p>", horde_stats::table::esc(b)));
    }
    if let Some(c) = check {
        let verdict =
            if c.beyond == 0 { "every one equal or within its bound".to_string() } else { format!("<b class=\"bad\">{} beyond their bounds</b>", c.beyond) };
        agents_html.push_str(&format!("<p>Checked against the agents' logs: {} figures, {verdict}.</p>", c.figures));
    }
    agents_html.push_str(&format!("<pre>{}</pre>", horde_stats::table::esc(&agents_table(rows))));
    let part = serde_json::json!({"run_id": run_id, "partial": partial, "interrupted": interrupted, "collect": collect, "bound": bound, "check": check, "agents": rows});
    report_files(out, "Horde send through agents", a, ("distributed", part), &agents_html)
}

/// A flow run's report files from its analysis: summary.json (the decode's JSON with one more
/// part, `part`), flows.csv, windows.csv and index.html (with `section` before its flows).
/// Shared by runs through agents and on emulated hosts.
pub fn report_files(out: &Path, title: &str, a: &horde_stats::Analysis, part: (&str, serde_json::Value), section: &str) -> anyhow::Result<()> {
    let mut v: serde_json::Value = serde_json::from_str(&horde_stats::export::json(a)).context("the decode's JSON")?;
    if let Some(o) = v.as_object_mut() {
        o.insert(part.0.into(), part.1);
    }
    let w = |name: &str, text: String| std::fs::write(out.join(name), text).with_context(|| format!("writing {}", out.join(name).display()));
    w("summary.json", serde_json::to_string_pretty(&v)?)?;
    w("flows.csv", horde_stats::export::flows_csv(a))?;
    w("windows.csv", horde_stats::export::windows_csv(&a.windows))?;
    let mut page = horde_stats::html::page(title, a);
    if let Some(i) = page.find("<h2>Flows</h2>") {
        page.insert_str(i, section);
    }
    w("index.html", page)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(text: &str) -> Vec<Flow> {
        FlowFile::parse_and_resolve(text, 1).unwrap()
    }

    fn spec(s: &str, weight: u32) -> AgentSpec {
        AgentSpec { addr: s.parse().unwrap(), weight }
    }

    #[test]
    fn flows_go_from_their_source_and_the_rest_by_weight() {
        let f = flows(
            r#"
            [defaults]
            rate = 10
            size = 100
            duration = "1s"
            [[flow]]
            dst = "10.0.0.9:9000"
            src = "10.0.0.2"
            [[flow]]
            dst = "10.0.0.9:9001"
            repeat = 6
            [[flow]]
            dst = "10.0.0.9:9002"
            transport = "tcp"
            "#,
        );
        let p = place(&f, &[spec("10.0.0.1:7800", 1), spec("10.0.0.2:7800", 2)], &["10.0.0.9:7800".parse().unwrap()]).unwrap();
        assert_eq!(p.addrs.len(), 3);
        assert_eq!(p.by_flow[0].0, 1, "flow 0 names 10.0.0.2 as its source");
        let from = |a: usize| p.by_flow.iter().filter(|x| x.0 == a).count();
        // Seven flows without a source, weights 1:2 → about 2 and 5 (with flow 0: 6 from 10.0.0.2).
        assert_eq!(from(0) + from(1), 8);
        assert!((2..=3).contains(&from(0)), "{:?}", p.by_flow);
        assert!(p.by_flow.iter().all(|x| x.1 == 2));
        assert_eq!(p.recv_udp[2], vec!["10.0.0.9:9000".parse().unwrap(), "10.0.0.9:9001".parse().unwrap()]);
        assert_eq!(p.recv_tcp[2], vec!["10.0.0.9:9002".parse::<SocketAddr>().unwrap()]);
        assert!(p.send[2].is_empty());
        // The ranges cover every id once.
        let ids: Vec<u32> = p.send.iter().flatten().flat_map(|r| r.clone()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn several_receivers_are_matched_by_destination_and_strangers_are_refused() {
        let f = flows("[defaults]\nrate = 10\nsize = 100\n[[flow]]\ndst = \"10.0.0.8:9000\"\n[[flow]]\ndst = \"10.0.0.9:9000\"\n");
        let r: Vec<SocketAddr> = vec!["10.0.0.8:7800".parse().unwrap(), "10.0.0.9:7800".parse().unwrap()];
        let p = place(&f, &[spec("10.0.0.1:7800", 1)], &r).unwrap();
        assert_eq!(p.by_flow, vec![(0, 1), (0, 2)]);
        let g = flows("[defaults]\nrate = 10\nsize = 100\n[[flow]]\ndst = \"192.0.2.1:9000\"\n");
        let e = place(&g, &[spec("10.0.0.1:7800", 1)], &r).unwrap_err().to_string();
        assert!(e.contains("192.0.2.1:9000") && e.contains("none of the receiving agents"), "{e}");
        let h = flows("[defaults]\nrate = 10\nsize = 100\n[[flow]]\ndst = \"10.0.0.9:9000\"\nsrc = \"10.0.0.5\"\n");
        let e = place(&h, &[spec("10.0.0.1:7800", 1)], &r).unwrap_err().to_string();
        assert!(e.contains("10.0.0.5") && e.contains("drop its src"), "{e}");
        assert!(place(&f, &[], &r).is_err());
        assert!(place(&f, &[spec("10.0.0.1:7800", 1)], &[]).is_err());
    }

    #[test]
    fn an_agent_that_sends_and_receives_is_listed_once() {
        let f = flows("[defaults]\nrate = 10\nsize = 100\n[[flow]]\ndst = \"127.0.0.2:9000\"\n");
        let p = place(&f, &[spec("127.0.0.2:7800", 1)], &["127.0.0.2:7800".parse().unwrap()]).unwrap();
        assert_eq!(p.addrs.len(), 1);
        assert_eq!(p.by_flow, vec![(0, 0)]);
    }

    #[test]
    fn the_receivers_bound_is_the_longest_flow() {
        let f = flows("[defaults]\nrate = 10\nsize = 100\n[[flow]]\ndst = \"127.0.0.2:9000\"\nduration = \"30s\"\n[[flow]]\ndst = \"127.0.0.2:9000\"\nduration = \"5s\"\n");
        assert_eq!(run_bound_ns(&f), 30_000_000_000);
    }
}
