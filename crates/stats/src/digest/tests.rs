use horde_model::behaviour::Segment;
use horde_wire::{Record, RecordKind};

use super::builder::PlayerState;

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

/// Every player's stays in [`records`]: category k from 3.3 k s for 3.3 s.
fn stays() -> Vec<Segment> {
    (0..3u16).map(|k| Segment { player: 0, state: k, sub: 0, start_s: 3.3 * k as f64, end_s: 3.3 * (k + 1) as f64, complete: true, hour: 0 }).collect()
}

fn build(sent: &[Record], got: &[Record], keep: impl Fn(u32) -> bool) -> GameDigest {
    let segs = stays();
    let mut b = Builder::new(3, 1_000_000_000, 10.0);
    for r in sent.iter().filter(|r| keep(r.tag >> 8)) {
        b.sent(r, Direction::Up, Some(&segs));
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

/// The builder's pieces, sent over JSON and applied in order by a peer that checks them, add
/// up to the builder's final summary exactly; without pieces the same records give the same
/// counts and histograms (sums differ only by float rounding).
#[test]
fn live_pieces_add_up_to_the_final_summary_exactly() {
    let (sent, got) = records();
    let segs = stays();
    let mut b = Builder::new(3, 1_000_000_000, 10.0);
    let mut live = GameDigest::new(3, 1_000_000_000, 10.0);
    let mut pieces = 0;
    let take = |b: &mut Builder, live: &mut GameDigest, pieces: &mut u32| {
        if let Some(p) = b.take() {
            let text = serde_json::to_vec(&p).unwrap();
            live.apply_peer(&serde_json::from_slice(&text).unwrap(), 1_000_000).unwrap();
            *pieces += 1;
        }
    };
    // the two sides interleaved as two log writers would be, a piece every 997 records
    for (i, r) in sent.iter().enumerate() {
        b.sent(r, Direction::Up, Some(&segs));
        if let Some(g) = got.get(i) {
            b.received(g, Direction::Up, Some((g.seq / 100) as usize));
        }
        if i % 997 == 996 {
            take(&mut b, &mut live, &mut pieces);
        }
    }
    for g in got.iter().skip(sent.len()) {
        b.received(g, Direction::Up, Some((g.seq / 100) as usize));
    }
    let before = pieces;
    take(&mut b, &mut live, &mut pieces);
    assert_eq!(pieces, before + 1, "the last records make a last piece");
    assert!(b.take().is_none(), "nothing new: no piece");
    let fin = b.finish();
    assert!(live == fin.without_departures(), "the live pieces are the final summary (less its per-player departures)");
    let per_player: u64 = fin.departures.iter().map(|d| d.1[0] + d.1[1]).sum();
    assert_eq!(per_player, fin.counts().0, "the per-player departures add up to the summary's");
    for (k, c) in fin.categories.iter().enumerate() {
        let per_second = |col: usize| fin.seconds.iter().map(|s| s.by_category.get(k).map_or(0, |x| x[col])).sum::<u64>();
        assert_eq!((per_second(0), per_second(2)), (c[0].sent, c[0].received), "category {k}'s seconds add up to its totals");
    }
    assert!(pieces >= 10);
    let whole = build(&sent, &got, |_| true);
    for (a, w) in fin.categories.iter().zip(&whole.categories) {
        assert_eq!(
            (a[0].sent, a[0].received, &a[0].size, &a[0].iat_us, &a[0].delay.pos),
            (w[0].sent, w[0].received, &w[0].size, &w[0].iat_us, &w[0].delay.pos)
        );
    }
}

#[test]
fn a_peers_live_piece_is_checked_and_a_refused_one_adds_nothing() {
    let (sent, got) = records();
    let segs = stays();
    let mut b = Builder::new(3, 1_000_000_000, 10.0);
    for r in &sent {
        b.sent(r, Direction::Up, Some(&segs));
    }
    for g in &got {
        b.received(g, Direction::Up, None);
    }
    let piece = b.take().unwrap();
    let fresh = GameDigest::new(3, 1_000_000_000, 10.0);
    let refused = |p: &Delta, max: u64| {
        let mut live = fresh.clone();
        let r = live.apply_peer(p, max);
        assert_eq!(live, fresh, "a refused piece adds nothing");
        r.is_err()
    };
    assert!(refused(&piece, 100), "more departures than the plan allows");
    let mut p = piece.clone();
    p.epoch_ns += 1;
    assert!(refused(&p, 1_000_000), "another run's");
    let mut p = piece.clone();
    p.seconds.reverse();
    assert!(refused(&p, 1_000_000), "seconds out of order");
    let mut p = piece.clone();
    p.seconds.last_mut().unwrap().0 = 1_000;
    assert!(refused(&p, 1_000_000), "a second beyond the run");
    let mut p = piece.clone();
    p.categories[0][0].received += 1;
    assert!(refused(&p, 1_000_000), "counts that disagree with the histograms");
    let mut p = piece.clone();
    p.categories[1][0].size = Bins::new(2);
    assert!(refused(&p, 1_000_000), "another precision");
    let mut p = piece.clone();
    p.categories[1][0].jitter_ns = f64::NAN;
    assert!(refused(&p, 1_000_000));
    let mut live = fresh.clone();
    live.apply_peer(&piece, 1_000_000).unwrap();
    assert!(live.apply_peer(&piece, sent.len() as u64 + 10).is_err(), "what it sent before counts toward the bound");
}
