//! The run's command channel (issue 22): commands written to a running `horde run … --commands -`
//! stop it with an honest partial report, and steer how many players are online.

use crate::common::*;
use std::io::Write as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Starts `horde ARGS --commands -` with its standard input open for commands.
fn steered(args: &[&str]) -> (Child, std::process::ChildStdin, Instant) {
    let mut child = horde().args(args).args(["--commands", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin, Instant::now())
}

/// Waits until `t` after `start`, then writes one command line.
fn at(start: Instant, t: f64, stdin: &mut std::process::ChildStdin, line: &str) {
    let due = start + Duration::from_secs_f64(t);
    std::thread::sleep(due.saturating_duration_since(Instant::now()));
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
}

fn summary(p: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Acceptance: a WoW scenario's online target goes 300 → 600 → 150 through the channel; the
/// online count follows within the join ramp (2 s), both sides agree on every APDU (0
/// mismatched, 0 lost), no player above the target sends, and the report says what happened.
#[test]
fn the_online_target_of_a_running_wow_scenario_follows_the_channel() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("control-players");
    let sc = dir.path("wow.toml");
    std::fs::write(&sc, "service = 'wow'\nplayers = 600\nonline = 300\nduration = '14s'\nseed = 5\njoin = 'uniform(0, 2)'\nspin_us = 0\n").unwrap();
    let (out, progress) = (dir.path("out"), dir.path("progress.jsonl"));
    let (child, mut stdin, start) = steered(&["run", sc.to_str().unwrap(), "--out", out.to_str().unwrap(), "--progress-file", progress.to_str().unwrap()]);
    at(start, 4.0, &mut stdin, r#"{"command":"players","online":600}"#);
    at(start, 9.0, &mut stdin, "{\"command\":\"players\",\"online\":150}\n{\"command\":\"fly\"}");
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("players online → 600 from") && err.contains("players online → 150 from"), "{err}");
    assert!(err.contains("command refused") && err.contains("one JSON object per line"), "a wrong line is refused, the run goes on: {err}");
    let s = summary(&out.join("summary.json"));
    assert_eq!(s["mismatched"], 0, "both sides decided the same APDUs");
    let cats = s["analysis"]["categories"].as_array().unwrap();
    assert_eq!(cats.iter().map(|c| c["up"]["lost"].as_u64().unwrap() + c["down"]["lost"].as_u64().unwrap()).sum::<u64>(), 0);
    let changes = s["online"].as_array().unwrap();
    assert_eq!(changes.iter().map(|c| c["online"].as_u64().unwrap()).collect::<Vec<_>>(), vec![300, 600, 150]);
    let (up_at, down_at) = (changes[1]["at_s"].as_f64().unwrap(), changes[2]["at_s"].as_f64().unwrap());
    // The online count (players per category, summed) in the progress lines follows.
    let lines = progress_lines(&progress);
    let online = |l: &serde_json::Value| l["progress"]["categories"].as_array().unwrap().iter().map(|c| c[1].as_u64().unwrap()).sum::<u64>();
    let t = |l: &serde_json::Value| l["progress"]["t_s"].as_f64().unwrap();
    let when = |a: f64, b: f64| lines.iter().filter(move |l| t(l) > a && t(l) < b).map(online).collect::<Vec<_>>();
    let before = when(2.5, up_at - 0.5);
    assert!(!before.is_empty() && before.iter().all(|n| *n == 300), "{before:?}");
    let raised = when(up_at + 2.5, down_at - 0.5);
    assert!(!raised.is_empty() && raised.iter().all(|n| *n == 600), "600 within the 2 s ramp: {raised:?}");
    let cut = when(down_at + 1.0, 13.5);
    assert!(!cut.is_empty() && cut.iter().all(|n| *n == 150), "{cut:?}");
    // The logs agree: nobody above the target sent, and the raised players did send.
    let recs = records(&out.join("client.hlog"));
    let t0 = s["client"]["t0_real_ns"].as_u64().unwrap();
    let sent = |r: &&horde_wire::Record| r.kind == horde_wire::RecordKind::Sent;
    let secs = |r: &horde_wire::Record| r.t_b.saturating_sub(t0) as f64 / 1e9;
    assert!(recs.iter().filter(sent).all(|r| r.tag >> 8 < 300 || secs(r) >= up_at - 0.01), "a player above 300 sent before the raise");
    assert!(recs.iter().filter(sent).all(|r| r.tag >> 8 < 150 || secs(r) < down_at + 0.01), "a player above 150 sent after the cut");
    let raised_players: std::collections::HashSet<u32> = recs.iter().filter(sent).map(|r| r.tag >> 8).filter(|p| *p >= 300).collect();
    assert!(raised_players.len() > 250, "{} of the 300 raised players sent", raised_players.len());
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("players online: 300 → 600 at"), "the report says what happened");
    // every chart over time carries the changes as marks (issue 65), not only link charts
    for chart in ["occupancy", "throughput", "delay-over-time", "loss-over-time"] {
        let svg = std::fs::read_to_string(out.join(format!("charts/{chart}.svg"))).unwrap();
        assert!(svg.contains("online → 600") && svg.contains("online → 150"), "{chart}.svg has no marks");
    }
}

/// Acceptance (issue 46): a player target above the scenario's `players` (50 → 80) is applied
/// at once: the 30 new players are planned on demand from the same seed, started, and online
/// within the join ramp; both sides agree on every APDU; the report counts 80 players. The
/// run states its limit at its start.
#[test]
fn a_target_above_the_scenarios_players_plans_and_starts_more() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("control-above");
    let sc = dir.path("wow.toml");
    std::fs::write(&sc, "service = 'wow'\nplayers = 50\nduration = '10s'\nseed = 8\njoin = 'uniform(0, 1)'\nspin_us = 0\n").unwrap();
    let (out, progress) = (dir.path("out"), dir.path("progress.jsonl"));
    let (child, mut stdin, start) = steered(&["run", sc.to_str().unwrap(), "--out", out.to_str().unwrap(), "--progress-file", progress.to_str().unwrap()]);
    at(start, 3.0, &mut stdin, r#"{"command":"players","online":80,"id":3}"#);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("a command may raise the online target up to"), "the limit is stated at the start: {err}");
    assert!(err.contains("command applied (#3)") && err.contains("players online → 80 from") && err.contains("30 more planned and started"), "{err}");
    let s = summary(&out.join("summary.json"));
    assert_eq!(s["players"], 80, "the report counts every player the run had");
    assert_eq!(s["mismatched"], 0, "both sides decided the same APDUs");
    let cats = s["analysis"]["categories"].as_array().unwrap();
    assert_eq!(cats.iter().map(|c| c["up"]["lost"].as_u64().unwrap() + c["down"]["lost"].as_u64().unwrap()).sum::<u64>(), 0);
    let changes = s["online"].as_array().unwrap();
    assert_eq!(changes.iter().map(|c| c["online"].as_u64().unwrap()).collect::<Vec<_>>(), vec![50, 80]);
    let up_at = changes[1]["at_s"].as_f64().unwrap();
    let lines = progress_lines(&progress);
    let online = |l: &serde_json::Value| l["progress"]["categories"].as_array().unwrap().iter().map(|c| c[1].as_u64().unwrap()).sum::<u64>();
    let t = |l: &serde_json::Value| l["progress"]["t_s"].as_f64().unwrap();
    let after: Vec<u64> = lines.iter().filter(|l| t(l) > up_at + 1.5 && t(l) < 9.5).map(online).collect();
    assert!(!after.is_empty() && after.iter().all(|n| *n == 80), "80 online within the 1 s ramp: {after:?}");
    // The new players' traffic is in both logs, none before the raise.
    let recs = records(&out.join("client.hlog"));
    let t0 = s["client"]["t0_real_ns"].as_u64().unwrap();
    let sent = |r: &&horde_wire::Record| r.kind == horde_wire::RecordKind::Sent;
    let secs = |r: &horde_wire::Record| r.t_b.saturating_sub(t0) as f64 / 1e9;
    assert!(recs.iter().filter(sent).all(|r| r.tag >> 8 < 50 || secs(r) >= up_at - 0.01), "a new player sent before the raise");
    let new_players: std::collections::HashSet<u32> = recs.iter().filter(sent).map(|r| r.tag >> 8).filter(|p| *p >= 50).collect();
    assert!(new_players.len() >= 28 && new_players.iter().all(|p| *p < 80), "{} of the 30 new players sent: {new_players:?}", new_players.len());
    let server: std::collections::HashSet<u32> =
        records(&out.join("server.hlog")).iter().filter(|r| r.kind == horde_wire::RecordKind::Sent).map(|r| r.tag >> 8).filter(|p| *p >= 50).collect();
    assert!(server.len() >= 28, "the server side sent to {} of the new players", server.len());
}

/// The same over UDP (Quake 3): each new player validates its address with the server side
/// before its first departure (none is lost to an unvalidated start), and is served.
#[test]
fn udp_players_planned_on_demand_validate_before_they_send() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("control-above-udp");
    let sc = dir.path("q3.toml");
    std::fs::write(&sc, "service = 'quake3'\nplayers = 20\nduration = '8s'\nseed = 3\njoin = 'uniform(0, 1)'\nspin_us = 0\n").unwrap();
    let out = dir.path("out");
    let (child, mut stdin, start) = steered(&["run", sc.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    at(start, 3.0, &mut stdin, r#"{"command":"players","online":35}"#);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("15 more planned and started: players 20..35"), "{err}");
    let s = summary(&out.join("summary.json"));
    assert_eq!((s["players"].as_u64(), s["server_connections"].as_u64(), s["mismatched"].as_u64()), (Some(35), Some(35), Some(0)), "every new player served");
    let cats = s["analysis"]["categories"].as_array().unwrap();
    assert_eq!(
        cats.iter().map(|c| c["up"]["lost"].as_u64().unwrap() + c["down"]["lost"].as_u64().unwrap()).sum::<u64>(),
        0,
        "nothing sent before its address was validated"
    );
    assert_eq!(s["client"]["errors"], 0);
}

/// Acceptance (scenario kind): a stop command ends the run mid-way with a partial report that
/// says so.
#[test]
fn a_stop_command_ends_a_scenario_with_an_honest_partial_report() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("control-stop");
    let sc = dir.path("wow.toml");
    std::fs::write(&sc, "service = 'wow'\nplayers = 50\nduration = '30s'\nseed = 3\n").unwrap();
    let out = dir.path("out");
    let (child, mut stdin, start) = steered(&["run", sc.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    at(start, 4.0, &mut stdin, r#"{"command":"stop"}"#);
    let o = child.wait_with_output().unwrap();
    let took = start.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(130), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(took < 15.0, "stopped at once, not after 30 s: {took:.1} s");
    let s = summary(&out.join("summary.json"));
    assert_eq!(s["interruption"]["reason"], "stopped by a command");
    let at_s = s["interruption"]["at_s"].as_f64().unwrap();
    assert!(at_s > 1.0 && at_s < 6.0, "{at_s}");
    assert!(s["interruption"]["analysed_s"].as_f64().unwrap() < at_s, "the statistics cover the time before the stop only");
    assert_eq!(s["mismatched"], 0);
    assert!(s["client"]["packets"].as_u64().unwrap() > 100);
    assert!(std::fs::read_to_string(out.join("index.html")).unwrap().contains("stopped by a command"));
}

/// A scenario's `[[at]]` timeline is played through the channel's own path: each entry answered
/// (applied, at its time), a change of players stamped with its own time (both sides agree:
/// 0 mismatched), a stop ending the run there; a command from the channel beside it is
/// answered by its id.
#[test]
fn a_timeline_in_the_scenario_is_played_and_answered() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("control-timeline");
    let sc = dir.path("tl.toml");
    let text = "service = 'wow'\nplayers = 120\nonline = 60\nduration = '20s'\nseed = 4\nspin_us = 0\n\
                [[at]]\nt = '2s'\ncommand = 'players'\nonline = 120\n[[at]]\nt = '5s'\ncommand = 'stop'\n";
    std::fs::write(&sc, text).unwrap();
    let out = dir.path("out");
    let (child, mut stdin, start) = steered(&["run", sc.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    at(start, 1.0, &mut stdin, r#"{"command":"players","online":4000000000,"id":7}"#);
    // an instant past the run's end is refused in the reply (issue 66): before, it was
    // "applied", never happened, and pushed the timeline's change at 2 s past the end
    at(start, 1.1, &mut stdin, r#"{"command":"players","online":100,"at_ns":30000000000,"id":8}"#);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("command refused (#8): players online = 100 at 30.00 s: the run ends at 20.00 s"), "{err}");
    assert!(err.contains("command refused (#7): players") && err.contains("above this run's limit of"), "the channel's command, by its id: {err}");
    assert!(err.contains("command applied (#1000000000) at 2.00 s: players online → 120"), "{err}");
    assert!(err.contains("command applied (#1000000001) at 5.") && err.contains("stop: stopping the run"), "{err}");
    let s = summary(&out.join("summary.json"));
    let changes = s["online"].as_array().unwrap();
    assert_eq!(changes[1]["online"], 120);
    assert!((changes[1]["at_s"].as_f64().unwrap() - 2.0).abs() < 1e-6, "in force at its own time: {changes:?}");
    let stop_at = s["interruption"]["at_s"].as_f64().unwrap();
    assert!((5.0..5.2).contains(&stop_at), "stopped at 5 s (the driver polls every 50 ms): {stop_at}");
    assert_eq!(s["mismatched"], 0);
}

/// Acceptance (regulated kind): a stop command ends a `[regulation]` scenario mid-way; the
/// report covers the circuits until then and says why it is short.
#[test]
fn a_stop_command_ends_a_regulated_run_with_an_honest_partial_report() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("control-regulated");
    let sc = dir.path("os.toml");
    std::fs::write(&sc, "service = 'opensim'\nplayers = 4\nduration = '40s'\nseed = 2\n[regulation]\nthrottle = 'mongoose'\n").unwrap();
    let out = dir.path("out");
    let (child, mut stdin, start) = steered(&["run", sc.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    at(start, 5.0, &mut stdin, r#"{"command":"players","online":2}"#);
    at(start, 6.0, &mut stdin, r#"{"command":"stop"}"#);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(start.elapsed().as_secs_f64() < 20.0);
    assert!(err.contains("command refused (#1): players: a regulated run"), "answered at once, naming its line: {err}");
    let s = summary(&out.join("summary.json"));
    assert_eq!(s["interruption"], "stopped by a command", "{s}");
    let circuits = s["circuits"].as_array().unwrap();
    assert_eq!(circuits.len(), 4);
    assert!(circuits.iter().all(|c| c["received_kbps"].as_f64().unwrap() > 10.0), "every circuit carried traffic until the stop");
}

/// Acceptance (flows kind): `horde send --commands -` stops on a stop command; its report says
/// interrupted and counts what left.
#[test]
fn a_stop_command_ends_a_flow_run_with_an_honest_partial_report() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("control-flows");
    let rx = Recv::start(&["--udp", "0", "--tcp", "0"]);
    let dst = rx.addrs[0].to_string();
    let json = dir.path("send.json");
    let (child, mut stdin, start) = steered(&["send", "--dst", &dst, "--rate", "1000", "--size", "100", "--duration", "60s", "--json", json.to_str().unwrap()]);
    at(start, 3.0, &mut stdin, "{\"command\":\"players\",\"online\":3}\n{\"command\":\"stop\"}");
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    rx.stop();
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(start.elapsed().as_secs_f64() < 15.0);
    assert!(err.contains("command refused (#1): players online = 3: a flow run has no players target"), "{err}");
    assert!(err.contains("command applied (#2)") && err.contains("stop: stopping the flow run"), "{err}");
    let r = summary(&json);
    assert_eq!(r["interrupted"], true);
    let sent = r["packets"].as_u64().unwrap();
    assert!((1_000..=4_500).contains(&sent), "about 3 s of 1,000 pkt/s: {sent}");
}

/// Acceptance (bots kind): a stop command ends a bots run against a real OpenArena server; the
/// bots leave cleanly and the report covers the time until the stop.
#[test]
fn a_stop_command_ends_a_bots_run_with_an_honest_partial_report() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    if !horde_testkit::tool("/usr/games/openarena-server", "apt-get install openarena-server") {
        return;
    }
    let dir = Scratch::new("control-bots");
    let (json, out) = (dir.path("bots.json"), dir.path("out"));
    let args =
        ["bots", "--start-server", "-n", "4", "-t", "60s", "--ramp", "0s", "--warmup", "2s", "-o", out.to_str().unwrap(), "--json", json.to_str().unwrap()];
    let (child, mut stdin, start) = steered(&args);
    at(start, 8.0, &mut stdin, r#"{"command":"stop"}"#);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(start.elapsed().as_secs_f64() < 30.0, "stopped, not after 60 s");
    let v = summary(&json);
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(v["entered"], 4, "{v}");
    assert_eq!(v["quit_cleanly"], 4, "the bots left cleanly on the stop: {v}");
    assert!(v["response_ms"]["n"].as_u64().unwrap() > 100, "{v}");
}

/// Issue 69 (D-ITG's per-flow API): a running flow's rate goes from 1,000 to 5,000 packets per
/// second by a `flow` command, applied in its reply with the instant. The sender's schedule
/// (its log's scheduled departures, the real clock) follows the new law from at most one old
/// inter-departure time (1 ms) after that instant; the receiver's arrivals show it too (on a
/// quiet machine 0.16 ms after; under the whole suite the host's scheduling adds milliseconds,
/// so that bound is loose). An unknown flow and a law that does not parse are refused.
#[test]
fn a_flow_command_changes_a_running_flows_rate_at_the_replys_instant() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("control-flow-rate");
    let rlog = dir.path("r.hlog");
    let rx = Recv::start(&["--udp", "0", "--tcp", "0", "-l", rlog.to_str().unwrap()]);
    let dst = rx.addrs[0].to_string();
    let slog = dir.path("s.hlog");
    let (child, mut stdin, start) = steered(&["send", "--dst", &dst, "--rate", "1000", "--size", "64", "--duration", "5s", "-l", slog.to_str().unwrap()]);
    at(start, 2.5, &mut stdin, "{\"command\":\"flow\",\"flow\":0,\"rate\":5000}\n{\"command\":\"flow\",\"flow\":9,\"rate\":10}\n{\"command\":\"flow\",\"flow\":0,\"size\":\"nope(3)\"}");
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let (_, rerr) = rx.stop();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("command refused (#2): flow 9: no running flow has that id (the flows: [0])"), "{err}");
    assert!(err.contains("command refused (#3): flow 0: size `nope(3)`: unknown distribution"), "{err}");
    let line = err.lines().find(|l| l.contains("command applied (#1)")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("flow 0: rate 5000 pkt/s"), "{line}");
    let applied: u64 = line.split("(real clock ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{line}"));
    let mut arr: Vec<u64> = records(&rlog).iter().filter(|r| r.kind == horde_wire::RecordKind::Received).map(|r| r.t_b).collect();
    arr.sort_unstable();
    let count = |from: u64, to: u64| arr.iter().filter(|&&t| t >= from && t < to).count();
    let s = 1_000_000_000u64;
    let before = count(applied - 2 * s, applied - s / 2);
    let after = count(applied + s / 2, applied + 2 * s);
    assert!((1_400..=1_600).contains(&before), "1,000 pkt/s before: {before} in 1.5 s; {rerr}");
    assert!((7_000..=8_000).contains(&after), "5,000 pkt/s after: {after} in 1.5 s");
    // the schedule: the first scheduled departure of the new law (0.2 ms after the one before)
    let mut sched: Vec<u64> = records(&slog).iter().filter(|r| r.kind == horde_wire::RecordKind::Sent).map(|r| r.t_a).collect();
    sched.sort_unstable();
    let j = (1..sched.len()).find(|&j| sched[j] - sched[j - 1] < 500_000).expect("a new-law departure");
    let sched_ms = (sched[j - 1] as f64 - applied as f64) / 1e6;
    assert!((-50.0..=1.05).contains(&sched_ms), "the new law starts after at most one old inter-departure time past the reply's instant: {sched_ms:.3} ms");
    assert!(sched[j..].windows(2).take(1000).all(|w| (w[1] - w[0]).abs_diff(200_000) <= 2), "then one every 0.2 ms (to the ns the schedule rounds to)");
    // the arrivals: the first of 20 in a row less than 0.5 ms apart
    let k = (1..arr.len().saturating_sub(20))
        .find(|&k| arr[k - 1] + 300_000 > applied && (k..k + 20).all(|j| arr[j] - arr[j - 1] < 500_000))
        .expect("a fast stretch");
    let off_ms = (arr[k - 1] as f64 - applied as f64) / 1e6;
    eprintln!("the schedule changed {sched_ms:.3} ms and the arrivals {off_ms:.3} ms after the reply's instant");
    assert!((-0.3..=50.0).contains(&off_ms), "the arrivals follow: {off_ms:.3} ms");
}
