//! Recorded inputs (issue 69, the Quake study's recorded players): `horde bots --record` writes
//! the first bot's input as it played, and `--capture` decodes a client's input from a capture
//! of its session with a real OpenArena server. Both must agree: what the decoder reads off the
//! wire is what the bot played, command for command. In a sandbox of the test's own (its own
//! loopback, so the capture holds only this test's traffic); as root, with Debian's
//! openarena-server and tshark, both required under CI=true.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::common::*;

/// An action file's frames after its header, as (t_ms, the rest of the line).
fn frames(path: &std::path::Path) -> Vec<(u32, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .map(|l| {
            let (t, rest) = l.split_once(',').unwrap();
            (t.parse().unwrap(), rest.to_string())
        })
        .collect()
}

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: a sandbox of its own (sudo -E cargo test)")]
fn a_bots_recorded_input_is_what_a_capture_of_its_session_decodes_to() {
    horde_testkit::need_root();
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    if !horde_testkit::tool("/usr/games/openarena-server", "apt-get install openarena-server")
        || !horde_testkit::tool("/usr/bin/tshark", "apt-get install tshark")
    {
        return;
    }
    let dir = Scratch::new("bots-record");
    let sandbox = horde_testkit::Sandbox::start();
    let pcap = dir.path("session.pcap");
    let mut tshark = sandbox
        .command("tshark")
        .args(["-i", "lo", "-f", "udp", "-F", "pcap", "-w"])
        .arg(&pcap)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tshark starts");
    let mut err = BufReader::new(tshark.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("Capturing on") {
        line.clear();
    }
    assert!(line.contains("Capturing on"), "tshark did not start capturing: {line}");
    let played = dir.path("played.csv");
    let o = run(sandbox
        .command(env!("CARGO_BIN_EXE_horde"))
        .args(["bots", "--start-server", "-n", "2", "-t", "5s", "--ramp", "1s", "--warmup", "1s", "-o"])
        .arg(dir.path("out"))
        .arg("--record")
        .arg(&played));
    unsafe { libc::kill(tshark.id() as i32, libc::SIGINT) };
    let _ = tshark.wait();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("recorded: "), "{}", text(&o));
    let decoded = dir.path("decoded.csv");
    let d = run(horde().args(["bots", "--capture"]).arg(&pcap).arg("--record").arg(&decoded));
    assert!(d.status.success(), "{}", text(&d));
    assert!(text(&d).contains("(2 client(s) connect in the capture)"), "{}", text(&d));
    // The recording replays: it is a valid action file.
    let (a, b) = (frames(&played), frames(&decoded));
    assert!(a.len() > 250, "about 6 s at 60 frames a second: {}", a.len());
    // What the server took (newer server times) is the bot's commands in order, each one exactly
    // (angles to 1/65536 turn, moves, buttons, weapon); at most the frames made while a packet
    // was on its way are missing.
    let mut k = 0;
    for (t, f) in &b {
        while k < a.len() && &a[k].1 != f {
            k += 1;
        }
        assert!(k < a.len(), "decoded frame at {t} ms ({f}) is not among the bot's frames in order");
        k += 1;
    }
    assert!(b.len() * 10 >= a.len() * 9, "{} of the bot's {} frames decoded: {}", b.len(), a.len(), text(&d));
    // Both files are action files a bot replays (--actions reads them so).
    for p in [&played, &decoded] {
        let text = std::fs::read_to_string(p).unwrap();
        let r = horde_q3::input::Recorded::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(r.frames() > 200);
    }
}
