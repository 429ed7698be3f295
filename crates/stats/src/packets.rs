//! The per-packet table: one row per packet the logs know of, for pandas, polars and DuckDB
//! (`decode --parquet`, `--packets-csv`). Built from the same pass over the records as the
//! analysis ([`crate::collect`]) and by the same rules, so that in every flow the rows not lost
//! are the analysis' `packets` and the lost rows its `lost`:
//! - with arrivals (a receiver's log, or echoes): one row per arrival (duplicates included,
//!   flagged), then one `lost` row per sequence number of the flow's range that never arrived
//!   (the range is the sender's, when its log is given, else the arrivals');
//! - a sender's log alone: one row per departure, `lost` unknown (null).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::collect::{Collected, FlowAcc, FlowEnds};

/// One packet. Times are ns since the Unix epoch; absent values are null (empty in CSV).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PacketRow {
    pub flow: u32,
    /// forward (sender → receiver) or reverse (the receiver's bulk back, `send --reverse`).
    pub direction: &'static str,
    /// udp, tcp or icmp (from the logs' endpoint records; null for logs before version 2).
    pub protocol: Option<String>,
    pub src_addr: Option<String>,
    pub src_port: Option<u16>,
    pub dst_addr: Option<String>,
    pub dst_port: Option<u16>,
    pub seq: u64,
    /// Bytes (UDP payload or APDU); null for a lost packet the sender's log does not describe.
    pub size: Option<u32>,
    /// Scheduled and actual departure, from the sender's log.
    pub scheduled_ns: Option<u64>,
    /// The actual departure: the sender's log's, else the send time the packet carried.
    pub sent_ns: Option<u64>,
    pub arrival_ns: Option<u64>,
    /// arrival − sent: one-way delay, or the round trip when `delay_kind` is rtt.
    pub delay_ms: Option<f64>,
    pub delay_kind: Option<&'static str>,
    /// Never arrived (null: unknown, no receiver's log and no echoes).
    pub lost: Option<bool>,
    /// A second (or later) arrival of the same sequence number.
    pub duplicate: bool,
    /// TOS and TTL as read at the receiver.
    pub tos: Option<u8>,
    pub ttl: Option<u8>,
}

/// Why the table cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowsError {
    #[error("flow {flow}'s sequence numbers span {lost} lost packets, more than the {limit} rows a table may have (a log of another run, or a damaged one?)")]
    TooManyLost { flow: u32, lost: u64, limit: u64 },
}

/// The most lost rows one table may have: 1,000 × the records given, at least 10 million. A
/// log with sequence numbers far apart would otherwise ask for rows without end.
fn lost_limit(c: &Collected) -> u64 {
    let records: u64 = c.flows.values().chain(c.back.values()).map(|a| (a.rx.len() + a.echo.len() + a.tx.len()) as u64).sum();
    records.saturating_mul(1000).max(10_000_000)
}

/// Calls `f` with every row, flow by flow (forward flows, then reverse ones), arrivals in
/// arrival order, then the lost ones in sequence order. Stops at `f`'s first error.
pub fn rows<E: From<RowsError>>(c: &Collected, mut f: impl FnMut(&PacketRow) -> Result<(), E>) -> Result<(), E> {
    let limit = lost_limit(c);
    let all = c.flows.iter().map(|(id, acc)| (*id, acc, false)).chain(c.back.iter().map(|(id, acc)| (*id, acc, true)));
    for (id, acc, reverse) in all {
        let ends = c.ends.get(&id).cloned().unwrap_or_default();
        flow_rows(id, acc, reverse, &ends, c.has_receiver || reverse, limit, &mut f)?;
    }
    Ok(())
}

fn flow_rows<E: From<RowsError>>(
    id: u32,
    acc: &FlowAcc,
    reverse: bool,
    ends: &FlowEnds,
    has_receiver: bool,
    limit: u64,
    f: &mut impl FnMut(&PacketRow) -> Result<(), E>,
) -> Result<(), E> {
    let base = PacketRow {
        // the sender's id: the source columns tell two senders' flows of one id apart
        flow: ends.sender_id.unwrap_or(id),
        direction: if reverse { "reverse" } else { "forward" },
        protocol: ends.protocol.map(horde_wire::log::protocol_name),
        src_addr: ends.src.map(|a| a.ip().to_string()),
        src_port: ends.src.map(|a| a.port()),
        dst_addr: ends.dst.map(|a| a.ip().to_string()),
        dst_port: ends.dst.map(|a| a.port()),
        ..Default::default()
    };
    // As the analysis: round trips only when the flow has echoes and no one-way arrivals.
    let rtt = acc.rx.is_empty() && !acc.echo.is_empty();
    let arr = if rtt { &acc.echo } else { &acc.rx };
    let kind = if rtt { "rtt" } else { "owd" };
    let mut row = base.clone();
    if arr.is_empty() && acc.said.is_none() && (acc.tx.is_empty() || !has_receiver) {
        // A sender's log alone: what left, nothing known of what arrived.
        for &(seq, sched, actual, size) in &acc.tx {
            row.seq = seq;
            row.size = Some(size);
            row.scheduled_ns = Some(sched);
            row.sent_ns = Some(actual);
            f(&row)?;
        }
        return Ok(());
    }
    let tx: HashMap<u64, (u64, u64, u32)> = acc.tx.iter().map(|&(seq, sched, actual, size)| (seq, (sched, actual, size))).collect();
    let mut seen: HashSet<u64> = HashSet::with_capacity(arr.len());
    for a in arr {
        row.seq = a.seq;
        row.size = Some(a.size);
        row.scheduled_ns = tx.get(&a.seq).map(|t| t.0);
        row.sent_ns = Some(a.send);
        row.arrival_ns = Some(a.recv);
        row.delay_ms = Some((a.recv as i64).saturating_sub(a.send as i64) as f64 / 1e6);
        row.delay_kind = Some(kind);
        row.lost = Some(false);
        row.duplicate = !seen.insert(a.seq);
        (row.tos, row.ttl) = if rtt { (None, None) } else { (Some(a.tos), Some(a.ttl)) };
        f(&row)?;
    }
    // The range the analysis' loss counts over.
    let Some((lo, hi)) = acc.loss_range(seen.iter().min().copied().zip(seen.iter().max().copied())) else {
        return Ok(());
    };
    let got_in_range = seen.iter().filter(|s| (lo..=hi).contains(*s)).count() as u64;
    let lost = (hi - lo).saturating_add(1).saturating_sub(got_in_range);
    if lost > limit {
        return Err(RowsError::TooManyLost { flow: id, lost, limit }.into());
    }
    let mut row = PacketRow { lost: Some(true), ..base };
    for seq in (lo..=hi).filter(|s| !seen.contains(s)) {
        let t = tx.get(&seq);
        row.seq = seq;
        row.size = t.map(|t| t.2);
        row.scheduled_ns = t.map(|t| t.0);
        row.sent_ns = t.map(|t| t.1);
        f(&row)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analyse_collected, collect, LoadedLog, Options};
    use horde_wire::{Endpoint, Record, RecordKind, Role};

    fn rec(kind: RecordKind, flow: u32, seq: u64, a: u64, b: u64) -> Record {
        Record { flow, size: 100, seq, t_a: a, t_b: b, tos: 0, ttl: 64, kind, ..Default::default() }
    }

    fn table(logs: &[LoadedLog]) -> Vec<PacketRow> {
        let mut v = Vec::new();
        rows::<RowsError>(&collect(logs), |r| {
            v.push(r.clone());
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn rows_count_what_the_analysis_counts() {
        let ends = |flow: u32| {
            [RecordKind::Source, RecordKind::Destination].map(|end| {
                let addr = if end == RecordKind::Source { "10.0.0.1:4000" } else { "10.0.0.2:9000" };
                Endpoint { flow, end, addr: addr.parse().unwrap(), protocol: horde_wire::log::PROTO_UDP, tag: 0, at_ns: 1 }.record()
            })
        };
        let mut tx: Vec<Record> = ends(1).to_vec();
        tx.extend((0..10).map(|s| rec(RecordKind::Sent, 1, s, s * 1000, s * 1000 + 5)));
        let mut rx: Vec<Record> = ends(1).to_vec();
        rx.extend([0, 1, 2, 5, 4, 4, 9].iter().map(|&s| rec(RecordKind::Received, 1, s, s * 1000 + 5, s * 1000 + 505)));
        let logs = [LoadedLog { role: Role::Sender, records: tx, trailing_bytes: 0 }, LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 }];
        let t = table(&logs);
        let a = analyse_collected(&collect(&logs), Options::default());
        let f = &a.flows[0];
        let loss = f.loss.as_ref().unwrap();
        assert_eq!(t.iter().filter(|r| r.lost == Some(false)).count() as u64, f.packets);
        assert_eq!(t.iter().filter(|r| r.lost == Some(true)).count() as u64, loss.lost);
        assert_eq!(t.iter().filter(|r| r.duplicate).count() as u64, loss.duplicates);
        assert_eq!((f.src.as_deref(), f.dst.as_deref(), f.protocol.as_deref()), (Some("10.0.0.1:4000"), Some("10.0.0.2:9000"), Some("udp")));
        let r5 = t.iter().find(|r| r.seq == 5).unwrap();
        assert_eq!((r5.scheduled_ns, r5.sent_ns, r5.arrival_ns, r5.delay_ms), (Some(5000), Some(5005), Some(5505), Some(0.0005)));
        assert_eq!((r5.src_addr.as_deref(), r5.dst_port, r5.protocol.as_deref()), (Some("10.0.0.1"), Some(9000), Some("udp")));
        let r3 = t.iter().find(|r| r.seq == 3).unwrap();
        assert_eq!((r3.lost, r3.arrival_ns, r3.sent_ns, r3.size), (Some(true), None, Some(3005), Some(100)));
    }

    #[test]
    fn an_end_message_counts_the_loss_at_the_end_of_a_receivers_log() {
        use horde_wire::signal::{EndReason, FlowEnd};
        // 100 sent (the sender said so at the end); 0..89 arrived, 5 and 6 twice.
        let mut rx: Vec<Record> = (0..90).chain([5, 6]).map(|s| rec(RecordKind::Received, 4, s, s, s + 10)).collect();
        let end = FlowEnd { ack: false, flow: 4, reason: EndReason::Done, packets: 100, bytes: 10_000, at_ns: 0, mac: [0; 16] };
        rx.push(end.record(5_000, 0));
        rx.push(end.record(5_001, 0));
        let logs = [LoadedLog { role: Role::Receiver, records: rx.clone(), trailing_bytes: 0 }];
        let a = analyse_collected(&collect(&logs), Options::default());
        let f = &a.flows[0];
        let l = f.loss.as_ref().unwrap();
        assert_eq!((l.sent, l.expected, l.lost, l.duplicates), (Some(100), 100, 10, 2));
        assert_eq!(f.end.as_ref().map(|e| (e.reason.as_str(), e.packets, e.bytes)), Some(("done", 100, 10_000)));
        assert_eq!(a.ignored_records, 0, "the second copy is kept out, not an unknown record");
        let t = table(&logs);
        assert_eq!(t.iter().filter(|r| r.lost == Some(true)).map(|r| r.seq).collect::<Vec<_>>(), (90..100).collect::<Vec<_>>());
        // Without the end message, the last ten are invisible; with every packet lost, the
        // end message alone says so.
        rx.retain(|r| r.kind != RecordKind::End);
        let a = analyse_collected(&collect(&[LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 }]), Options::default());
        assert_eq!(a.flows[0].loss.as_ref().map(|l| l.lost), Some(0));
        let only_end = [LoadedLog { role: Role::Receiver, records: vec![end.record(1, 0)], trailing_bytes: 0 }];
        let a = analyse_collected(&collect(&only_end), Options::default());
        assert_eq!(a.flows[0].loss.as_ref().map(|l| (l.expected, l.lost)), Some((100, 100)));
        assert_eq!(table(&only_end).len(), 100);
    }

    #[test]
    fn a_sender_log_alone_knows_nothing_of_loss() {
        let tx: Vec<Record> = (0..3).map(|s| rec(RecordKind::Sent, 2, s, s, s + 1)).collect();
        let t = table(&[LoadedLog { role: Role::Sender, records: tx, trailing_bytes: 0 }]);
        assert_eq!(t.len(), 3);
        assert!(t.iter().all(|r| r.lost.is_none() && r.arrival_ns.is_none() && r.protocol.is_none()));
    }

    #[test]
    fn a_hostile_sequence_range_is_refused_not_expanded() {
        let rx = vec![rec(RecordKind::Received, 3, 0, 0, 1), rec(RecordKind::Received, 3, 1 << 31, 0, 2), rec(RecordKind::Received, 3, u32::MAX as u64, 0, 3)];
        let logs = [LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 }];
        let err = rows::<RowsError>(&collect(&logs), |_| Ok(())).unwrap_err();
        assert!(matches!(err, RowsError::TooManyLost { flow: 3, .. }), "{err}");
    }

    #[test]
    fn two_sources_with_one_id_are_flagged() {
        let e = |addr: &str| Endpoint { flow: 7, end: RecordKind::Source, addr: addr.parse().unwrap(), protocol: 17, tag: 0, at_ns: 0 }.record();
        let rx = vec![e("10.0.0.1:1"), e("10.0.0.3:1"), rec(RecordKind::Received, 7, 0, 0, 1)];
        let a = crate::analyse(&[LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 }], Options::default());
        assert!(a.flows[0].shared_id);
    }
}

#[cfg(test)]
mod hostile {
    use crate::{analyse_collected, collect, LoadedLog, Options};
    use horde_wire::{Record, RecordKind, Role};

    /// What the fuzzer found (issue 26): sequence numbers spanning all of u64 and times at
    /// both ends of it made the analysis overflow; now they give numbers, not a panic.
    #[test]
    fn extreme_sequence_numbers_and_times_do_not_panic() {
        let r = |kind, seq, a, b| Record { flow: 1, size: 1, seq, t_a: a, t_b: b, kind, ..Default::default() };
        for role in [Role::Sender, Role::Receiver] {
            let recs = vec![
                r(RecordKind::Sent, 0, u64::MAX, 0),
                r(RecordKind::Sent, u64::MAX, 0, u64::MAX),
                r(RecordKind::Received, u64::MAX, 0, u64::MAX),
                r(RecordKind::Received, 0, u64::MAX, 0),
                r(RecordKind::Echoed, 1 << 63, 1, u64::MAX),
            ];
            let logs = [LoadedLog { role, records: recs, trailing_bytes: 0 }];
            let c = collect(&logs);
            let a = analyse_collected(&c, Options { window_ns: Some(1), anchor_ns: None });
            assert!(a.flows.iter().all(|f| f.loss.as_ref().is_none_or(|l| l.lost <= l.expected)));
            let _ = super::rows::<super::RowsError>(&c, |_| Ok(()));
        }
    }
}
