//! WoW's thin streams beside the seed paper's trace figures (issue 68; seed 000, §II: "client
//! to server traffic with average payload size of 36 bytes … the packet rate fluctuates between
//! 4 and 10 packets per second in one direction (including ACK packets which carry no
//! payload)"). The built-in `wow` follows Suznjevic et al. 2014's per-category model (the ns-2
//! code): its figures, regenerated here from the players' schedules over an evening hour, are
//! pinned, so the service cannot drift from what docs/models.md states beside the seed's.

use std::sync::atomic::AtomicBool;

use horde_model::scenario::Scenario;
use horde_model::service::Direction;

/// (mean client → server APDU, bytes; client → server APDUs per second per player; server →
/// client APDUs per second per player) of 200 WoW players over 30 minutes.
fn wow_figures() -> (f64, f64, f64) {
    let text = "service = \"wow\"\nplayers = 200\nduration = \"30m\"\nseed = 68\n";
    let sc = Scenario::parse(text, "wow.toml", std::path::Path::new(".")).unwrap();
    let players = horde_scenario::plan(&sc, sc.players, &AtomicBool::new(false)).unwrap();
    let (mut up_n, mut up_bytes, mut down_n) = (0u64, 0u64, 0u64);
    for p in 0..players.len() {
        for d in players.departures(p, Direction::Up) {
            up_n += 1;
            up_bytes += d.size as u64;
        }
        down_n += players.departures(p, Direction::Down).count() as u64;
    }
    let player_s = players.len() as f64 * sc.duration_s;
    (up_bytes as f64 / up_n as f64, up_n as f64 / player_s, down_n as f64 / player_s)
}

#[test]
fn wows_thin_streams_are_what_docs_models_md_states_beside_the_seeds() {
    let (up_size, up_rate, down_rate) = wow_figures();
    // What docs/models.md §1.6 states (the model's own figures, to 5 %).
    let near = |x: f64, want: f64| (x / want - 1.0).abs() <= 0.05;
    assert!(near(up_size, 26.0), "client → server APDU mean {up_size:.1} B (docs: 26 B; the seed's trace: 36 B)");
    assert!(near(up_rate, STATED_UP_RATE) && near(down_rate, STATED_DOWN_RATE), "APDUs/s per player: up {up_rate:.2}, down {down_rate:.2}");
    // With a delayed ACK for every second segment of the other direction (RFC 1122), the
    // packets one direction carries per player are within the seed's 4–10 pps.
    let up_pps = up_rate + down_rate / 2.0;
    let down_pps = down_rate + up_rate / 2.0;
    assert!((4.0..=10.0).contains(&up_pps) && (4.0..=10.0).contains(&down_pps), "packets/s with ACKs: up {up_pps:.2}, down {down_pps:.2} (the seed: 4–10)");
}

const STATED_UP_RATE: f64 = 2.34;
const STATED_DOWN_RATE: f64 = 5.24;
