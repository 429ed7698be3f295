use horde_wire::RecordKind;

use super::*;

fn rec(kind: RecordKind, player: u32, cat: u32, seq: u64, t_a: u64, t_b: u64, size: u32) -> Record {
    Record { flow: player, size, seq, t_a, t_b, tag: player << 8 | cat, tos: 0, ttl: 0, kind, flags: 0 }
}

/// A synthetic run: 40 players, 3 categories, both directions, 10 s, with a few losses and a
/// duplicate; the records of each side in time order.
fn records() -> (Vec<Record>, Vec<Record>) {
    let (mut sent, mut got) = (Vec::new(), Vec::new());
    for p in 0..40u32 {
        for k in 0..300u64 {
            let t_a = 1_000_000_000 + k * 33_000_000 + p as u64 * 101_000;
            let cat = (k / 100) as u32;
            let size = 40 + ((k * 7 + p as u64 * 13) % 1_400) as u32;
            sent.push(rec(RecordKind::Sent, p, cat, k, t_a - 500, t_a, size));
            if (k + p as u64).is_multiple_of(97) {
                continue; // lost
            }
            let transit = 5_000_000 + ((k * 7919 + p as u64 * 31) % 40_000_000);
            got.push(rec(RecordKind::Received, p, cat, k, t_a, t_a + transit, size));
            if k == 17 {
                got.push(rec(RecordKind::Received, p, cat, k, t_a, t_a + transit + 1_000, size));
                // a duplicate
            }
        }
    }
    got.sort_by_key(|r| r.t_b);
    (sent, got)
}

fn build(sent: &[Record], got: &[Record], keep: impl Fn(u32) -> bool) -> GameDigest {
    let mut b = Builder::new(3, 1_000_000_000, 10.0);
    for r in sent.iter().filter(|r| keep(r.tag >> 8)) {
        b.sent(r, Direction::Up);
    }
    for r in got.iter().filter(|r| keep(r.tag >> 8)) {
        b.received(r, Direction::Up, Some((r.seq / 100) as usize));
    }
    b.finish()
}

#[test]
fn summaries_of_parts_add_up_to_the_summary_of_the_whole() {
    let (sent, got) = records();
    let whole = build(&sent, &got, |_| true);
    let mut parts = build(&sent, &got, |p| p % 3 == 0);
    parts.merge(&build(&sent, &got, |p| p % 3 == 1)).unwrap();
    parts.merge(&build(&sent, &got, |p| p % 3 == 2)).unwrap();
    for (a, b) in whole.categories.iter().zip(&parts.categories) {
        let (a, b) = (&a[0], &b[0]);
        assert_eq!((a.sent, a.received, a.bytes), (b.sent, b.received, b.bytes));
        assert_eq!((&a.size, &a.iat_us, &a.iat_ms), (&b.size, &b.iat_us, &b.iat_ms));
        assert_eq!((&a.delay.pos, a.delay.min, a.delay.max), (&b.delay.pos, b.delay.min, b.delay.max));
        assert!((a.delay.sum - b.delay.sum).abs() < 1.0);
    }
    for (a, b) in whole.seconds.iter().zip(&parts.seconds) {
        assert_eq!((a.sent, a.got, a.bits), (b.sent, b.got, b.bits));
        assert_eq!(a.delay[0].pos, b.delay[0].pos);
    }
    let sent_n: u64 = whole.seconds.iter().map(|s| s.sent[0]).sum();
    let got_n: u64 = whole.seconds.iter().map(|s| s.got[0]).sum();
    assert_eq!(sent_n, sent.len() as u64);
    assert_eq!(got_n, got.len() as u64 - 40, "each duplicate matched once");
    assert_eq!(whole.categories.iter().map(|c| c[0].received).sum::<u64>(), got.len() as u64, "every arrival is a sample");
}

#[test]
fn the_duplicate_window_counts_each_sequence_number_once() {
    let mut st = PlayerState::default();
    assert!(st.first_arrival(5));
    assert!(!st.first_arrival(5));
    assert!(st.first_arrival(3), "late but new");
    assert!(!st.first_arrival(3));
    assert!(st.first_arrival(5 + WINDOW + 10), "a jump clears the window");
    assert!(st.first_arrival(5 + WINDOW + 9));
    assert!(st.first_arrival(2), "beyond the window: counted (cannot be told apart)");
    assert!(st.first_arrival(u64::MAX));
    assert!(!st.first_arrival(u64::MAX));
}

#[test]
fn a_peers_summary_is_checked_against_our_plan() {
    let (sent, got) = records();
    let d = build(&sent, &got, |_| true);
    let bytes = serde_json::to_vec(&d).unwrap();
    let plan = GameDigest::new(3, 1_000_000_000, 10.0);
    assert_eq!(GameDigest::accept(&bytes, &plan, 1_000_000).unwrap(), d);
    assert!(GameDigest::accept(&bytes, &plan, 100).is_err(), "more departures than the plan allows");
    assert!(GameDigest::accept(&bytes, &GameDigest::new(4, 1_000_000_000, 10.0), 1_000_000).is_err(), "another run's");
    assert!(GameDigest::accept(&bytes, &GameDigest::new(3, 5, 10.0), 1_000_000).is_err());
    assert!(GameDigest::accept(b"{\"epoch_ns\": 1", &plan, 1_000_000).is_err());
    let mut lying = d.clone();
    lying.categories[0][0].received += 1;
    assert!(GameDigest::accept(&serde_json::to_vec(&lying).unwrap(), &plan, 1_000_000).is_err(), "counts that disagree with the histograms");
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    for (path, bad) in [("unit", serde_json::json!(0)), ("min", serde_json::json!(i64::MAX)), ("sum", serde_json::json!(null))] {
        let mut w = v.clone();
        w["categories"][0][0]["delay"][path] = bad;
        let text = serde_json::to_vec(&w).unwrap();
        assert!(GameDigest::accept(&text, &plan, 1_000_000).is_err(), "a delay histogram with a bad {path}");
    }
    let mut w = v.clone();
    w["categories"][1][0]["size"]["sig"] = serde_json::json!(2);
    assert!(GameDigest::accept(&serde_json::to_vec(&w).unwrap(), &plan, 1_000_000).is_err(), "another bucket scheme");
    let mut other = GameDigest::new(3, 1_000_000_000, 11.0);
    assert!(other.merge(&d).is_err());
}
