#![no_main]
use horde_stats::digest::{Bins, BinsWire, Builder, GameDigest, Signed};
use horde_wire::{Record, RecordKind};
use libfuzzer_sys::fuzz_target;

// An agent's summary (`--collect summaries`) is a peer's input: any bytes as its JSON are
// accepted against a small plan or refused, never a panic, and what is accepted merges and
// answers every figure. The same bytes as histogram bins (value, count pairs) and as records
// fed to a summary builder exercise the checks, the KS bounds and the percentiles directly.
fuzz_target!(|data: &[u8]| {
    // the same bytes as a report's summary.json for `horde compare`: read or refused with the
    // report named, never a panic; what is read compares with itself (the same schedules, nothing
    // beyond noise) and renders as text and HTML
    if let Ok(text) = std::str::from_utf8(data) {
        match horde_scenario::compare::Report::parse("fz", text) {
            Ok(r) => {
                let again = horde_scenario::compare::Report::parse("fz", text).expect("the same text reads again");
                let c = horde_scenario::compare::compare(&[("a".into(), r), ("b".into(), again)], 0.05).expect("two reports compare");
                assert!(c.figures.iter().all(|f| f.beyond_noise != Some(true)), "a report against itself is within noise");
                let _ = (horde_scenario::compare::text(&c, true), horde_scenario::compare::html(&c));
            }
            Err(e) => assert!(e.starts_with("fz: "), "{e}"),
        }
    }
    let plan = GameDigest::new(3, 1_000_000_000, 5.0);
    if let Ok(d) = GameDigest::accept(data, &plan, 1_000_000) {
        let mut m = plan.clone();
        m.merge(&d).expect("an accepted summary merges into its plan");
        for c in m.categories.iter().flat_map(|c| c.iter()) {
            let _ = (c.delay.quantile(0.99), c.size.ks(1.0, |x| x / 1e4), c.iat_us.cdf_points(1e-3, 50));
        }
    }
    // the same bytes as a live piece (`ToController::Summary`): checked, and a refused one
    // adds nothing; an accepted one answers every figure
    if let Ok(p) = serde_json::from_slice::<horde_stats::digest::Delta>(data) {
        let mut live = plan.clone();
        match live.apply_peer(&p, 1_000_000) {
            Ok(()) => {
                for c in live.categories.iter().flat_map(|c| c.iter()) {
                    let _ = (c.delay.quantile(0.99), c.size.quantile(0.5));
                }
            }
            Err(_) => assert!(live == plan, "a refused piece adds nothing"),
        }
    }
    // bins: 10 bytes each, sig from the first byte
    if let Some((&sig, rest)) = data.split_first() {
        let bins: Vec<(u64, u64)> = rest.chunks_exact(10).map(|c| (u64::from_le_bytes(c[..8].try_into().unwrap()), u16::from_le_bytes([c[8], c[9]]) as u64)).collect();
        if let Ok(b) = Bins::from_wire(&BinsWire { sig, bins }) {
            if let Some((lo, hi)) = b.ks(1.0, |x| (x / 1e6).clamp(0.0, 1.0)) {
                assert!(lo <= hi + 1e-12 && (0.0..=1.0 + 1e-9).contains(&lo), "{lo} {hi}");
            }
            let _ = (b.quantile(0.5), b.cdf_points(1.0, 20), Bins::from_wire(&b.to_wire()).expect("round trip"));
        }
    }
    // records: 24 bytes each
    let mut builder = Builder::new(3, 1_000_000_000, 5.0);
    let mut s = Signed::new(3, 1_000);
    // a player's stays, for the departures' rooms (sub-activities beyond the kept ones included)
    let stays: Vec<horde_model::behaviour::Segment> = (0..4u16)
        .map(|k| horde_model::behaviour::Segment { player: 0, state: k % 3, sub: k * 40, start_s: k as f64, end_s: k as f64 + 1.5, complete: true, hour: 0 })
        .collect();
    for c in data.chunks_exact(24) {
        let u = |i: usize| u64::from_le_bytes(c[i..i + 8].try_into().unwrap());
        let (seq, t_a, t_b) = (u(0) % 4096, u(8), u(16));
        let r = Record { flow: (seq % 7) as u32, size: (t_a % 70_000) as u32, seq, t_a, t_b, tag: ((seq % 7) as u32) << 8 | (t_b % 5) as u32, tos: 0, ttl: 0, kind: RecordKind::Received, flags: 0 };
        let dir = if t_a % 2 == 0 { horde_model::service::Direction::Up } else { horde_model::service::Direction::Down };
        builder.sent(&Record { kind: RecordKind::Sent, ..r }, dir, (seq % 2 == 0).then_some(&stays[..]));
        builder.received(&r, dir, Some((t_b % 3) as usize));
        s.record((t_b as i64).wrapping_sub(t_a as i64));
    }
    if let Some(q) = s.quantile(0.5) {
        assert!(q >= s.min && q <= s.max);
    }
    // pieces add up to the summary
    let mut live = plan.clone();
    if let Some(p) = builder.take() {
        live.apply_peer(&serde_json::from_slice(&serde_json::to_vec(&p).unwrap()).unwrap(), u64::MAX / 4).expect("a builder's own piece is accepted");
    }
    let d = builder.finish();
    assert!(live == d, "the pieces are the summary");
    let bytes = serde_json::to_vec(&d).unwrap();
    GameDigest::accept(&bytes, &plan, u64::MAX / 4).expect("a builder's own summary is accepted");
});
