use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::{analyse, Options};
use horde_wire::signal::{EndReason, FlowEnd};
use horde_wire::Record;

const ANCHOR: u64 = 1_700_000_000_000_000_000;
const WINDOW: u64 = 250_000_000;

fn rec(kind: RecordKind, flow: u32, seq: u64, (t_a, t_b): (u64, u64), size: u32, (tos, ttl): (u8, u8)) -> Record {
    Record { flow, size, seq, t_a, t_b, tag: 0, tos, ttl, kind, flags: 0 }
}

fn endpoint(flow: u32, source: bool, addr: &str, at: u64) -> Record {
    let end = if source { RecordKind::Source } else { RecordKind::Destination };
    Endpoint { flow, end, addr: addr.parse().unwrap(), protocol: horde_wire::log::PROTO_UDP, tag: 0, at_ns: at }.record()
}

/// Two senders' and two receivers' logs of a run with every kind of flow the decode knows:
/// losses in bursts and at the tail, duplicates, reordering, clock error (negative delays),
/// several TOS values, end messages, a reverse flow's bulk, round trips by echo, a flow whose
/// receiver got nothing, and a flow whose sender's log is missing.
fn run(seed: u64) -> (Vec<Vec<Record>>, Vec<Vec<Record>>) {
    let mut g = ChaCha8Rng::seed_from_u64(seed);
    let (mut tx, mut rx) = (vec![Vec::new(), Vec::new()], vec![Vec::new(), Vec::new()]);
    for flow in 0..14u32 {
        let (s, r) = ((flow % 2) as usize, (flow / 2 % 2) as usize);
        let n: u64 = g.random_range(1..4_000);
        let gap_ns: u64 = g.random_range(100_000..2_000_000);
        let start = ANCHOR + g.random_range(0..50_000_000);
        let skew: i64 = if flow % 5 == 0 { -3_000_000 } else { g.random_range(-50_000..50_000) };
        tx[s].push(endpoint(flow, true, "10.0.0.1:4000", start));
        rx[r].push(endpoint(flow, false, "10.0.0.9:9000", start));
        rx[r].push(endpoint(flow, true, "10.0.0.1:4000", start));
        let mut lossy = false;
        let mut arrivals = Vec::new();
        for seq in 0..n {
            let sched = start + seq * gap_ns;
            let actual = (sched as i64 + g.random_range(-2_000i64..40_000)) as u64;
            let size = g.random_range(40..1_400);
            if flow != 9 {
                tx[s].push(rec(RecordKind::Sent, flow, seq, (sched, actual), size, (0, 0)));
            }
            // Gilbert losses, and everything lost after 90 % of flow 3
            lossy = if lossy { g.random_bool(0.6) } else { g.random_bool(0.03) };
            if lossy || (flow == 3 && seq * 10 > n * 9) || flow == 11 {
                continue;
            }
            let delay = (g.random_range(1_000_000..30_000_000) as i64 + skew).max(-5_000_000);
            let recv = (actual as i64 + delay) as u64;
            let tos = if g.random_bool(0.2) { 0xb8 } else { 0 };
            arrivals.push(rec(RecordKind::Received, flow, seq & 0xFFFF_FFFF, (actual, recv), size, (tos, 64)));
            if g.random_bool(0.01) {
                arrivals.push(rec(RecordKind::Received, flow, seq, (actual, recv + 10_000), size, (tos, 63)));
            }
        }
        // reordering: some neighbours swap arrival times
        for k in 1..arrivals.len() {
            if g.random_bool(0.02) {
                let (a, b) = (arrivals[k - 1].t_b, arrivals[k].t_b);
                arrivals[k - 1].t_b = b;
                arrivals[k].t_b = a;
            }
        }
        if flow == 6 {
            // round trips: the sender's log holds echoes, the receiver logs nothing
            tx[s].extend(arrivals.iter().map(|a| Record { kind: RecordKind::Echoed, t_b: a.t_b + 5_000_000, ..*a }));
            continue;
        }
        if flow == 7 {
            // a reverse flow's bulk arrives at the sender
            tx[s].extend(arrivals.iter().map(|a| Record { size: a.size * 2, ..*a }));
        }
        if flow % 4 == 1 {
            let end = FlowEnd { ack: false, flow, reason: EndReason::Done, packets: n, bytes: n * 700, at_ns: start + n * gap_ns, mac: [0; 16] };
            arrivals.push(end.record(start + n * gap_ns + 1_000_000, 0));
            arrivals.push(end.record(start + n * gap_ns + 2_000_000, 0));
        }
        rx[r].extend(arrivals);
    }
    // as the controller merges them: sorted by flow, then send or arrival time (stable)
    for t in &mut tx {
        t.sort_by_key(|r| (r.flow, r.t_a));
    }
    for r in &mut rx {
        r.sort_by_key(|r| (r.flow, r.t_b));
    }
    (tx, rx)
}

fn log(role: Role, records: Vec<Record>) -> LoadedLog {
    LoadedLog { role, records, trailing_bytes: 0 }
}

#[test]
fn the_summaries_give_the_decodes_figures_exactly_or_within_the_stated_bound() {
    for seed in 0..6 {
        let (tx, rx) = run(seed);
        let merged = |v: &[Vec<Record>], key: fn(&Record) -> (u32, u64)| {
            let mut all: Vec<Record> = v.concat();
            all.sort_by_key(key);
            all
        };
        let logs = [log(Role::Sender, merged(&tx, |r| (r.flow, r.t_a))), log(Role::Receiver, merged(&rx, |r| (r.flow, r.t_b)))];
        let want = analyse(&logs, Options { window_ns: Some(WINDOW), anchor_ns: Some(ANCHOR) });
        let mut parts = Vec::new();
        for (role, v) in [(Role::Sender, &tx), (Role::Receiver, &rx)] {
            for records in v {
                let s = summarise(&log(role, records.clone()), ANCHOR, WINDOW);
                // what travels
                let s: FlowSummaries = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
                let mine = |f: u32| records.iter().any(|r| r.flow == f).then_some(10_000u64);
                s.check(&Allowed { packets: &mine, window_ns: WINDOW, anchor_ns: ANCHOR, windows: 1_000 }).unwrap();
                parts.push(s);
            }
        }
        let got = flowsum::analyse(&parts, true).unwrap();
        assert_eq!(want.flows.len(), 15, "14 flows and a reverse one");
        assert!(want.flows.iter().any(|f| f.loss.as_ref().is_some_and(|l| l.bursts > 3 && l.duplicates > 0 && l.reordered > 0)));
        assert!(want.flows.iter().any(|f| f.delay.as_ref().is_some_and(|d| d.kind == "rtt")));
        assert!(want.flows.iter().any(|f| f.delay.as_ref().is_some_and(|d| d.min_ms < 0.0)));
        assert!(!want.windows.is_empty() && want.windows.iter().any(|w| w.lost.unwrap_or(0) > 0));
        let c = compare(&want, &got);
        assert!(c.figures > 1_000, "{} figures compared", c.figures);
        assert!(c.differences.is_empty(), "seed {seed}: {} differences, the first: {:#?}", c.differences.len(), &c.differences[..c.differences.len().min(12)]);
    }
}

#[test]
fn a_summary_beyond_its_plan_or_out_of_shape_is_refused() {
    let (tx, rx) = run(1);
    let s = summarise(&log(Role::Receiver, rx[0].clone()), ANCHOR, WINDOW);
    let all = |_: u32| Some(10_000u64);
    let ok = Allowed { packets: &all, window_ns: WINDOW, anchor_ns: ANCHOR, windows: 1_000 };
    s.check(&ok).unwrap();
    let refused = |s: &FlowSummaries, a: &Allowed, what: &str| {
        let e = s.check(a).expect_err(what).to_string();
        assert!(e.contains(what), "{what}: {e}");
    };
    let none = |f: u32| (f != 0).then_some(10_000u64);
    refused(&s, &Allowed { packets: &none, ..ok }, "did not receive");
    let few = |_: u32| Some(3u64);
    refused(&s, &Allowed { packets: &few, ..ok }, "the plan allows");
    refused(&s, &Allowed { window_ns: 1, ..ok }, "other windows");
    refused(&s, &Allowed { windows: 2, ..ok }, "windows that are not");
    let mut bad = s.clone();
    bad.flows[0].rx.as_mut().unwrap().seqs.push((u64::MAX - 1, u64::MAX));
    refused(&bad, &ok, "sequence ranges");
    let mut bad = s.clone();
    bad.flows[0].rx.as_mut().unwrap().delay.n += 1;
    refused(&bad, &ok, "delay summary");
    let mut bad = s.clone();
    bad.flows.push(bad.flows[0].clone());
    refused(&bad, &ok, "twice");
    let mut bad = s.clone();
    bad.flows[0].tx = summarise(&log(Role::Sender, tx[0].clone()), ANCHOR, WINDOW).flows[0].tx.clone();
    refused(&bad, &ok, "does not have");
    let mut t = summarise(&log(Role::Sender, tx[0].clone()), ANCHOR, WINDOW);
    t.flows[0].tx.as_mut().unwrap().windows[0].1.push((0, u64::MAX));
    refused(&t, &ok, "outside the flow's");
    // two agents claiming one flow's arrivals contradict each other
    let e = flowsum::analyse(&[s.clone(), s], true).unwrap_err().to_string();
    assert!(e.contains("two summaries hold flow"), "{e}");
}

use crate::flowsum;

#[test]
fn the_comparison_names_a_figure_beyond_its_bound() {
    let (tx, rx) = run(2);
    let logs = [log(Role::Sender, tx.concat()), log(Role::Receiver, rx.concat())];
    let want = analyse(&logs, Options { window_ns: Some(WINDOW), anchor_ns: Some(ANCHOR) });
    let mut got = want.clone();
    assert!(compare(&want, &got).differences.is_empty());
    let d = got.flows[0].delay.as_mut().unwrap();
    d.p99_ms += d.p99_ms.abs() / 1024.0 + 2e-6;
    got.windows[0].packets += 1;
    let c = compare(&want, &got);
    assert_eq!(c.differences.len(), 2, "{:?}", c.differences);
    assert!(c.differences[0].contains("flows[0].delay.p99_ms") && c.differences[1].contains("windows[0].packets"), "{:?}", c.differences);
}
