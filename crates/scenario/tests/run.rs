//! A scenario end to end through the library API: plan, server side, players, report; a shard;
//! an interruption while planning.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use horde_model::scenario::Scenario;
use horde_scenario::{execute, Error, Event, RunOptions, ServerSide};

fn scenario(service: &str, players: u32, seconds: u32) -> Scenario {
    let text = format!(
        "name = \"lib\"\nservice = \"{service}\"\nplayers = {players}\nduration = \"{seconds}s\"\nseed = 3\nstart_hour = 20\nserver = \"127.0.0.1:0\"\n{}",
        if service == "wow" { "[variables]\nN = 100\n" } else { "" }
    );
    Scenario::parse(&text, "lib.toml", Path::new(".")).unwrap()
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("horde-scenario-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_small_scenario_runs_end_to_end_through_the_library() {
    let sc = scenario("wow", 6, 3);
    let out = tmp("e2e");
    let stop = AtomicBool::new(false);
    let events = Mutex::new(Vec::new());
    let record = |e: &Event| events.lock().unwrap().push(e.clone());
    let opts = RunOptions { out: &out, scenario_file: None, server: ServerSide::InProcess, shard: None, events: &record, stop: &stop, commands: None };
    let r = execute(&sc, &opts).expect("the run completes");
    let s = &r.summary;
    assert!(r.server_died.is_none() && !r.interrupted());
    assert_eq!(s.schema_version, horde_scenario::SUMMARY_SCHEMA_VERSION);
    assert_eq!(s.server_connections, 6, "every player was granted once");
    assert_eq!(s.mismatched, 0);
    assert!(s.analysis.up.received > 0 && s.analysis.down.received > 0, "traffic both ways");
    assert_eq!(s.analysis.up.lost, 0);
    for f in ["summary.json", "index.html", "client.hlog", "server.hlog", "scenario.toml"] {
        assert!(out.join(f).is_file(), "{f} written");
    }
    let ev = events.into_inner().unwrap();
    assert!(matches!(ev.first(), Some(Event::Planned { .. })), "planning is reported first");
    let ticks = ev.iter().filter(|e| matches!(e, Event::Tick(_))).count();
    assert!((2..=4).contains(&ticks), "one progress tick a second ({ticks})");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_shard_runs_only_its_players() {
    let sc = scenario("quake3", 5, 2);
    let out = tmp("shard");
    let stop = AtomicBool::new(false);
    let opts = RunOptions { out: &out, scenario_file: None, server: ServerSide::InProcess, shard: Some(1..3), events: &|_| {}, stop: &stop, commands: None };
    let r = execute(&sc, &opts).unwrap();
    assert_eq!(r.summary.server_connections, 2);
    let ids: Vec<u32> = r.summary.client.flows.iter().map(|f| f.id).collect();
    assert_eq!(ids, [1, 2]);
    // Its report covers its two players: each category's player-seconds come from them alone.
    let player_s: f64 = r.summary.analysis.categories.iter().map(|c| c.player_seconds).sum();
    assert!((player_s - 2.0 * 2.0).abs() < 0.5, "player-seconds of a 2-player shard over 2 s: {player_s}");
    let bad = RunOptions { shard: Some(4..9), ..opts };
    assert!(matches!(execute(&sc, &bad), Err(Error::BadInput(_))));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_stop_while_planning_is_an_interruption_not_a_failure() {
    let sc = scenario("wow", 2000, 60);
    let out = tmp("stop");
    let stop = AtomicBool::new(true);
    let opts = RunOptions { out: &out, scenario_file: None, server: ServerSide::InProcess, shard: None, events: &|_| {}, stop: &stop, commands: None };
    let e = execute(&sc, &opts).err().expect("interrupted");
    assert_eq!(e.exit_code(), 130, "{e}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Every player connects at the run's start: a burst of thousands of connects, accepted before
/// any hello is read, must not be cut down by the pending-hello cap (it was: 1,024 per server
/// thread, so only 2,048 of 4,000 players got in).
#[test]
fn a_burst_of_thousands_of_players_all_get_in() {
    let mut sc = scenario("wow", 3000, 2);
    sc.spin_us = 0;
    let out = tmp("burst");
    let stop = AtomicBool::new(false);
    let opts = RunOptions { out: &out, scenario_file: None, server: ServerSide::InProcess, shard: None, events: &|_| {}, stop: &stop, commands: None };
    let r = execute(&sc, &opts).expect("the run completes");
    assert_eq!(r.server.refusals.closed_before_hello, 0, "no player was cut off before its hello");
    assert_eq!(r.summary.client.errors, 0, "no player saw its connection closed");
    assert!(r.summary.server_connections >= 2990, "{} players served", r.summary.server_connections);
    let _ = std::fs::remove_dir_all(&out);
}
