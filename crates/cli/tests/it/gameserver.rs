//! Automated Quake 3 players against a real OpenArena server (issue 11). Needs Debian's
//! `openarena-server` (`.ci/run` installs it); without it the test fails under CI=true and is
//! skipped, saying so, elsewhere.

use crate::common::*;

fn have_server() -> bool {
    horde_testkit::tool("/usr/games/openarena-server", "apt-get install openarena-server")
}

/// 8 bots for 10 s: all connect and enter the game, receive snapshots at the server's rate
/// (20/s at sv_fps 20, within 5 %), get their commands answered (response times measured), and
/// leave cleanly: the server lists nobody afterwards.
#[test]
fn eight_bots_play_on_a_real_openarena_server_and_leave_cleanly() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // an OpenArena server and snapshot rates within 5 %
    if !have_server() {
        return;
    }
    let dir = Scratch::new("bots");
    let o = run(horde()
        .args(["bots", "--start-server", "-n", "8", "-t", "10s", "--ramp", "1s", "--warmup", "2s", "-o"])
        .arg(dir.path("out"))
        .args(["--json", "-"]));
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["entered"], 8, "{}", text(&o));
    assert_eq!(v["quit_cleanly"], 8, "{}", text(&o));
    let rate = v["snapshot_rate_per_bot"].as_f64().unwrap();
    assert!((19.0..=21.0).contains(&rate), "snapshots per bot per second: {rate}");
    for b in v["bots"].as_array().unwrap() {
        assert!(b["response_ms"]["n"].as_u64().unwrap() > 100, "{b}");
        assert!(b["request_rate"].as_f64().unwrap() > 25.0, "30 packets/s asked: {b}");
        assert_eq!(b["corrupt"], 0, "{b}");
    }
    let p50 = v["response_ms"]["p50"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 < 100.0, "loopback response time within two server frames: {p50} ms");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("server status near the end: 8 player(s) listed"), "{err}");
    assert!(err.contains("server status after: 0 player(s)"), "{err}");
    // the server from inside (issue 69): its frames from the snapshot bursts, a frame every
    // 50 ms at sv_fps 20, each taking in the requests of 8 bots at 30 packets/s (12), each
    // charged some of the server's CPU time
    let frames = err.lines().find(|l| l.contains("server frames:")).unwrap_or_else(|| panic!("no frames line: {err}"));
    let after = |key: &str| -> f64 {
        frames.split(key).nth(1).and_then(|s| s.split([' ', ';']).next()).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{key} in {frames}"))
    };
    assert!((45.0..=55.0).contains(&after(" every ")), "{frames}");
    assert!((9.0..=15.0).contains(&after("requests per frame ")), "{frames}");
    assert!(after("CPU per frame ") > 0.0, "{frames}");
    // the spread between bots and their memory per player (the Quake study's figures)
    assert!(err.contains("  per bot: mean response time "), "{err}");
    let mem = err.lines().find(|l| l.contains("bots' memory: ")).unwrap_or_else(|| panic!("no memory line: {err}"));
    let kib: f64 = mem.split("bots' memory: ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{mem}"));
    assert!((0.0..4096.0).contains(&kib), "a bot takes less than 4 MiB: {mem}");
    let log = std::fs::read_to_string(dir.path("out/server.log")).unwrap();
    assert_eq!(log.matches("entered the game").count(), 8, "the server saw each enter");
}

/// A server that does not answer: every bot gives up, the run says so (exit 1), no panic.
#[test]
fn bots_against_a_silent_address_give_up() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = s.local_addr().unwrap().to_string();
    let dir = Scratch::new("bots-silent");
    let o = run(horde().args(["bots", "--server", &addr, "-n", "2", "-t", "1s", "--ramp", "0s", "--warmup", "0s", "-o"]).arg(dir.path("out")));
    drop(s);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("0 of 2 entered the game"), "{}", text(&o));
}

/// `--actions FILE`: bots replay a recorded action file; a wrong file is refused with its line.
#[test]
fn bots_replay_an_action_file_and_refuse_a_bad_one() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("bots-actions");
    let bad = dir.path("bad.csv");
    std::fs::write(&bad, "t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n0,0,0,0,300,0,0,0,2\n").unwrap();
    let o = run(horde().args(["bots", "--server", "127.0.0.1:9", "--actions"]).arg(&bad));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("line 2: forward 300 is outside -128..=127"), "{}", text(&o));
    // Flags that would measure nothing are refused before any server starts.
    let o = run(horde().args(["bots", "--start-server", "-t", "1s", "--warmup", "2s"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--warmup") && !text(&o).contains("against"), "{}", text(&o));
    // The behaviour model is the service's [bot] table: a wrong one is refused by name.
    let svc = dir.path("svc.toml");
    std::fs::write(
        &svc,
        "name=\"x\"\ndescription=\"d\"\ntransport=\"udp\"\nstates=[\"a\"]\n[state.a]\nup.idt=\"constant(10)\"\nup.size=\"constant(10)\"\n[bot]\nfire_on_s=0\n",
    )
    .unwrap();
    let o = run(horde().args(["bots", "--server", "127.0.0.1:9", "--service"]).arg(&svc));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("[bot] fire_on_s = 0: must be 0.01..=3600 seconds"), "{}", text(&o));
    if !have_server() {
        return;
    }
    let actions = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/actions/strafe.csv");
    let o = run(horde()
        .args(["bots", "--start-server", "-n", "2", "-t", "4s", "--ramp", "0s", "--warmup", "1s", "--actions", actions, "-o"])
        .arg(dir.path("out"))
        .args(["--json", "-"]));
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["entered"], 2, "{}", text(&o));
}

/// Issue 21: SIGKILL of `horde bots --start-server` orphaned the OpenArena server (holding its
/// port and a core); it must die with horde.
#[test]
fn killing_horde_bots_kills_the_server_it_started() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    if !have_server() {
        return;
    }
    let dir = Scratch::new("bots-kill");
    let mut h = horde()
        .args(["bots", "--start-server", "-n", "2", "-t", "60s", "--ramp", "0s", "-o"])
        .arg(dir.path("out"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    let server = loop {
        if let Some(&c) = horde_testkit::descendants(h.id()).first() {
            break c;
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "the server never started");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    std::thread::sleep(std::time::Duration::from_secs(2));
    h.kill().unwrap();
    let _ = h.wait();
    assert!(horde_testkit::wait_gone(server, std::time::Duration::from_secs(3)), "the OpenArena server {server} outlived horde");
}
