#![no_main]
use horde_stats::flowsum::{analyse, compare, summarise, Allowed, FlowSummaries};
use horde_stats::{LoadedLog, Options};
use horde_wire::{Record, RecordKind, Role};
use libfuzzer_sys::fuzz_target;

const ANCHOR: u64 = 1 << 40;
const WINDOW: u64 = 100_000_000;

// A flow run's summaries (`send --agents --collect summaries`) are a peer's input: any bytes as
// their JSON are checked against a small plan or refused, never a panic, and what is accepted
// is analysed. The same bytes as a sender's and a receiver's records: their summaries are
// accepted, and their analysis is the logs' decode, figure for figure within the stated bound.
fuzz_target!(|data: &[u8]| {
    let most = |f: u32| (f < 8).then_some(100_000u64);
    let allowed = Allowed { packets: &most, window_ns: WINDOW, anchor_ns: ANCHOR, windows: 64 };
    if let Ok(parts) = serde_json::from_slice::<Vec<FlowSummaries>>(data) {
        let ok: Vec<FlowSummaries> = parts.into_iter().filter(|p| p.check(&allowed).is_ok()).collect();
        if let Ok(a) = analyse(&ok, true) {
            assert_eq!(compare(&a, &a).beyond, 0);
        }
    }
    // records: 20 bytes each, sent or received by byte 0, flow < 8
    let (mut tx, mut rx) = (Vec::new(), Vec::new());
    for c in data.chunks_exact(20) {
        let u = |i: usize| u32::from_le_bytes(c[i..i + 4].try_into().unwrap()) as u64;
        let kind = match c[0] % 8 {
            0..=2 => RecordKind::Sent,
            3..=5 => RecordKind::Received,
            6 => RecordKind::Echoed,
            _ => RecordKind::End,
        };
        // within 1.7 s of the anchor: 17 windows at most, so a run stays quick
        let (t_a, t_b) = (ANCHOR + (u(4) % (1 << 24)) * 100, ANCHOR + (u(8) % (1 << 24)) * 100);
        let r = Record { flow: (c[1] % 8) as u32, size: u(12) as u32 % 2_000, seq: u(16) % 64, t_a, t_b, tag: 0, tos: c[2] % 3, ttl: c[3] % 2, kind, flags: 0 };
        if c[0] & 0x80 == 0 {
            tx.push(r)
        } else {
            rx.push(r)
        }
    }
    tx.sort_by_key(|r| (r.flow, r.t_a));
    rx.sort_by_key(|r| (r.flow, r.t_b));
    let (tx, rx) = (LoadedLog { role: Role::Sender, records: tx, trailing_bytes: 0 }, LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 });
    let mut parts = Vec::new();
    for log in [&tx, &rx] {
        let s = summarise(log, ANCHOR, WINDOW);
        let s: FlowSummaries = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
        s.check(&allowed).expect("a summary of records within the plan is accepted");
        parts.push(s);
    }
    let got = analyse(&parts, true).expect("two logs' summaries analyse");
    let want = horde_stats::analyse(&[tx, rx], Options { window_ns: Some(WINDOW), anchor_ns: Some(ANCHOR) });
    let c = compare(&want, &got);
    assert_eq!(c.beyond, 0, "{:?}", c.differences);
});
