//! The one pass over the logs' records that every output starts from: packets sorted into
//! flows (forward, and the reverse direction's arrivals), and each flow's endpoints. The
//! analysis ([`crate::analyse`]) and the per-packet table ([`crate::packets`]) both read what
//! this returns, so their counts cannot disagree.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use horde_wire::{Endpoint, RecordKind, Role};

use crate::LoadedLog;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival {
    pub seq: u64,
    pub send: u64,
    pub recv: u64,
    pub size: u32,
    pub tos: u8,
    pub ttl: u8,
}

#[derive(Default)]
pub(crate) struct FlowAcc {
    pub rx: Vec<Arrival>,
    pub echo: Vec<Arrival>,
    /// (seq, scheduled, actual, size)
    pub tx: Vec<(u64, u64, u64, u32)>,
    /// The sender's end-of-flow message, as a receiver logged it (the first of its copies).
    pub said: Option<horde_wire::signal::FlowEnd>,
}

impl FlowAcc {
    /// The sequence numbers loss is counted over, given the lowest and highest that arrived:
    /// what the sender's log says it sent; else 0 up to what its end message says it sent
    /// (so the packets lost at the end count too); else the range that arrived. The analysis'
    /// loss and the packet table's lost rows both take it from here.
    pub(crate) fn loss_range(&self, arrived: Option<(u64, u64)>) -> Option<(u64, u64)> {
        if !self.tx.is_empty() {
            return Some((self.tx.iter().map(|t| t.0).min()?, self.tx.iter().map(|t| t.0).max()?));
        }
        match (self.said, arrived) {
            (Some(e), _) if e.packets > 0 => Some((0, e.packets - 1)),
            (_, a) => a,
        }
    }
}

/// Where a flow went, from the endpoint records of every log that names it (version 2 logs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowEnds {
    pub src: Option<SocketAddr>,
    pub dst: Option<SocketAddr>,
    /// IANA protocol number.
    pub protocol: Option<u8>,
    /// More than one source named this flow id (several senders used the same ids: their
    /// packets cannot be told apart by the receiver's log).
    pub shared: bool,
    /// The id the flow's sender gave it, where a receiver logged it under another (version 5's
    /// alias records: another source used that id first).
    pub sender_id: Option<u32>,
}

impl FlowEnds {
    pub(crate) fn learn(&mut self, e: &Endpoint) {
        self.protocol.get_or_insert(e.protocol);
        let slot = if e.end == RecordKind::Source { &mut self.src } else { &mut self.dst };
        match slot {
            None => *slot = Some(e.addr),
            // A receiver bound to 0.0.0.0 names its end less precisely than the sender did.
            Some(a) if a.ip().is_unspecified() && !e.addr.ip().is_unspecified() && a.port() == e.addr.port() => *slot = Some(e.addr),
            Some(a) if e.end == RecordKind::Source && *a != e.addr && !e.addr.ip().is_unspecified() => self.shared = true,
            Some(_) => {}
        }
    }
}

/// Every log's records sorted into flows: the input of [`crate::analyse_collected`] and
/// [`crate::packets::rows`].
pub struct Collected {
    pub(crate) flows: BTreeMap<u32, FlowAcc>,
    /// Arrivals in a sender's log: the receiver's bulk back to a reverse flow (or, of a
    /// two-way pair, the second side's departures met by the first's arrivals).
    pub(crate) back: BTreeMap<u32, FlowAcc>,
    pub(crate) ends: BTreeMap<u32, FlowEnds>,
    pub(crate) ignored: u64,
    /// Gaps a live log server marked in the logs (version 4's gap records).
    pub(crate) gaps: Vec<crate::GapStats>,
    /// A receiver's log was given (or a two-way pair, whose sides log arrivals).
    pub(crate) has_receiver: bool,
}

/// Version 5's alias records: a receiver logs a (source, flow id) pair under another id where
/// another source used that id first. Returns, per alias, the sender's id and its source.
fn aliases(logs: &[LoadedLog]) -> HashMap<u32, (u32, Option<SocketAddr>)> {
    let mut out: HashMap<u32, (u32, Option<SocketAddr>)> = HashMap::new();
    for l in logs.iter().filter(|l| l.role == Role::Receiver) {
        for r in &l.records {
            if let Some(a) = horde_wire::log::Alias::of(r) {
                out.entry(a.id).or_insert((a.flow, None)).0 = a.flow;
            }
        }
        for r in &l.records {
            if let Some(e) = Endpoint::of(r).filter(|e| e.end == RecordKind::Source) {
                if let Some(x) = out.get_mut(&e.flow) {
                    x.1.get_or_insert(e.addr);
                }
            }
        }
    }
    out
}

/// A sender's log's ids that a receiver's log knows under an alias: its flows whose source
/// (the sender log's own endpoint record) is the alias's source.
fn renamed(l: &LoadedLog, aliases: &HashMap<u32, (u32, Option<SocketAddr>)>) -> HashMap<u32, u32> {
    if l.role != Role::Sender || aliases.is_empty() {
        return HashMap::new();
    }
    let by_pair: HashMap<(u32, u16), Vec<(u32, SocketAddr)>> =
        aliases.iter().filter_map(|(id, (flow, src))| src.map(|a| ((*flow, a.port()), (*id, a)))).fold(HashMap::new(), |mut m, (k, v)| {
            m.entry(k).or_default().push(v);
            m
        });
    let mut out = HashMap::new();
    for e in l.records.iter().filter_map(Endpoint::of).filter(|e| e.end == RecordKind::Source) {
        // A sender bound to the unspecified address names its port only.
        let hit = by_pair.get(&(e.flow, e.addr.port())).and_then(|v| v.iter().find(|(_, a)| *a == e.addr || e.addr.ip().is_unspecified()));
        if let Some((id, _)) = hit {
            out.insert(e.flow, *id);
        }
    }
    out
}

/// One pass over every log's records.
pub fn collect(logs: &[LoadedLog]) -> Collected {
    let mut c = Collected { flows: BTreeMap::new(), back: BTreeMap::new(), ends: BTreeMap::new(), ignored: 0, gaps: Vec::new(), has_receiver: false };
    // A two-way run's pair of logs (`horde run`'s client.hlog and server.hlog): two sender logs
    // that both sent and received. The first one's departures are the forward rows, met by the
    // second one's arrivals; the second one's departures are the `rev` rows, met by the
    // first's. Without this, both sides' departures of a player would be one flow twice over.
    let two_way: Vec<usize> = logs
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.role == Role::Sender && l.records.iter().any(|r| r.kind == RecordKind::Sent) && l.records.iter().any(|r| r.kind == RecordKind::Received)
        })
        .map(|(i, _)| i)
        .collect();
    let pair = (two_way.len() == 2 && !logs.iter().any(|l| l.role == Role::Receiver)).then(|| (two_way[0], two_way[1]));
    let aliases = aliases(logs);
    for (id, (flow, _)) in &aliases {
        c.ends.entry(*id).or_default().sender_id = Some(*flow);
    }
    for (i, l) in logs.iter().enumerate() {
        let renamed = renamed(l, &aliases);
        for r in &l.records {
            let mut r = *r;
            if let Some(id) = renamed.get(&r.flow) {
                r.flow = *id;
            }
            let r = &r;
            if r.kind == RecordKind::Alias {
                continue;
            }
            if let Some(e) = Endpoint::of(r) {
                c.ends.entry(r.flow).or_default().learn(&e);
                continue;
            }
            if let Some(g) = horde_wire::log::Gap::of(r) {
                c.gaps.push(crate::GapStats { log: i, reason: g.reason.name().to_string(), records: g.records, since_ns: g.since_ns });
                continue;
            }
            if r.kind == RecordKind::End {
                match horde_wire::signal::FlowEnd::of(r) {
                    Some(e) if l.role == Role::Receiver => {
                        c.flows.entry(r.flow).or_default().said.get_or_insert(e);
                    }
                    _ => c.ignored += 1,
                }
                continue;
            }
            if !r.kind.is_packet() {
                c.ignored += 1;
                continue;
            }
            let a = Arrival { seq: r.seq, send: r.t_a, recv: r.t_b, size: r.size, tos: r.tos, ttl: r.ttl };
            if let Some((_, second)) = pair.filter(|p| i == p.0 || i == p.1) {
                let (forward, other) = if i == second { (&mut c.back, &mut c.flows) } else { (&mut c.flows, &mut c.back) };
                match r.kind {
                    RecordKind::Sent => forward.entry(r.flow).or_default().tx.push((r.seq, r.t_a, r.t_b, r.size)),
                    RecordKind::Received => other.entry(r.flow).or_default().rx.push(a),
                    _ => c.ignored += 1,
                }
                continue;
            }
            if (l.role, r.kind) == (Role::Sender, RecordKind::Received) {
                c.back.entry(r.flow).or_default().rx.push(a);
                continue;
            }
            let acc = c.flows.entry(r.flow).or_default();
            match (l.role, r.kind) {
                (Role::Receiver, RecordKind::Received) => acc.rx.push(a),
                (Role::Sender, RecordKind::Sent) => acc.tx.push((r.seq, r.t_a, r.t_b, r.size)),
                (Role::Sender, RecordKind::Echoed) => acc.echo.push(a),
                _ => c.ignored += 1,
            }
        }
    }
    for acc in c.flows.values_mut().chain(c.back.values_mut()) {
        unwrap_seqs(&mut acc.rx);
        unwrap_seqs(&mut acc.echo);
    }
    c.has_receiver = logs.iter().any(|l| l.role == Role::Receiver) || pair.is_some();
    c
}

/// Restores 64-bit sequence numbers from the 32-bit ones UDP carries, in arrival order.
fn unwrap_seqs(v: &mut [Arrival]) {
    let mut prev: Option<u64> = None;
    for a in v.iter_mut() {
        let s = a.seq & 0xFFFF_FFFF;
        let u = match prev {
            None => a.seq,
            Some(p) => {
                let base = p & !0xFFFF_FFFF;
                [base.wrapping_sub(1 << 32), base, base.wrapping_add(1 << 32)].into_iter().map(|b| b.wrapping_add(s)).min_by_key(|c| c.abs_diff(p)).unwrap()
            }
        };
        a.seq = u;
        prev = Some(u);
    }
}
