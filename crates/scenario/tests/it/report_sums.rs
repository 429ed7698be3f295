//! Issue 21: the report's loss per second must add up to its loss in total. A departure that
//! was scheduled just before a second's end and left (and so carried a send time) just after it
//! once counted as lost in the first second and arrived in the second: the demo's chart showed
//! losses its table did not.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use horde_model::scenario::Scenario;
use horde_stats::game::{analyse, Context};
use horde_wire::{Record, RecordKind};

#[test]
fn late_departures_across_a_second_boundary_are_not_lost_and_seconds_add_up_to_totals() {
    let sc = Scenario::parse("service = \"wow\"\nplayers = 2\nduration = \"3s\"\nseed = 1\n", "t.toml", Path::new(".")).unwrap();
    let players = horde_scenario::plan(&sc, sc.players, &AtomicBool::new(false)).unwrap();
    let epoch = 1_700_000_000_000_000_000u64;
    let ctx = Context { service: &sc.service, traffic: &players.traffic, segments: &players.segments, duration_s: 3.0, epoch_ns: epoch, cutoff_ns: None };
    let class = players.segments[0][0].state as u32;
    let rec = |seq: u64, t_a: u64, t_b: u64, kind| Record { flow: 0, size: 100, seq, t_a, t_b, tag: class, tos: 0, ttl: 64, kind, flags: 0 };
    let mut client = Vec::new();
    let mut server = Vec::new();
    for k in 0..3u64 {
        // Scheduled 100 ns before second k+1 ends, left 200 ns later (in second k+1), arrived.
        let sched = epoch + (k + 1) * 1_000_000_000 - 100;
        let left = sched + 200;
        client.push(rec(k, sched, left, RecordKind::Sent));
        server.push(rec(k, left, left + 50_000, RecordKind::Received));
    }
    // One departure that never arrives.
    client.push(rec(3, epoch + 2_500_000_000, epoch + 2_500_000_000, RecordKind::Sent));
    let g = analyse(&ctx, &client, &server);
    let per_second: u64 = g.seconds.iter().map(|s| s.lost[0]).sum();
    assert_eq!(g.up.lost, 1, "one departure never arrived");
    assert_eq!(per_second, g.up.lost, "the seconds add up to the total: {:?}", g.seconds.iter().map(|s| s.lost[0]).collect::<Vec<_>>());
    let sent: u64 = g.seconds.iter().map(|s| s.sent[0]).sum();
    assert_eq!(sent, g.up.sent);
}
