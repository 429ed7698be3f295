//! Bad flags, files and packets get clear errors (exit 2) or are survived.

use crate::common::*;
use std::io::Write;
use std::net::UdpSocket;

fn fails_with(args: &[&str], needle: &str) {
    let out = run(horde().args(args));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {t}");
    assert!(t.contains(needle), "{args:?}: expected `{needle}` in: {t}");
}

#[test]
fn bad_flags_name_the_field_and_the_range() {
    fails_with(&["send", "--dst", "127.0.0.1:9", "--rate", "10", "--size", "64", "--dscp", "64"], "dscp: must be 0..=63 (got 64)");
    fails_with(&["send", "--dst", "127.0.0.1:9", "--idt", "weibull(1, -1)", "--size", "64"], "idt: weibull: shape must be > 0 (got -1)");
    fails_with(&["send", "--dst", "127.0.0.1:9", "--idt", "weibul(1, 2)", "--size", "64"], "unknown distribution `weibul`");
    fails_with(&["send", "--dst", "localhost", "--rate", "10", "--size", "64"], "dst: `localhost` is not IP:PORT");
    fails_with(&["send", "--dst", "127.0.0.1:9", "--rate", "10"], "size: missing");
    fails_with(&["send", "--dst", "127.0.0.1:9", "--rate", "10", "--size", "64", "-t", "3 parsecs"], "unknown time unit");
    fails_with(&["send", "--dst", "127.0.0.1:9", "--preset", "doom"], "unknown preset `doom`");
    fails_with(&["send", "--rate", "10"], "no destination");
    fails_with(&["send", "--dst", "127.0.0.1:9", "-T", "sctp", "--rate", "1", "--size", "9"], "transport: must be udp, tcp or icmp");
    fails_with(&["recv", "--udp", "70000"], "--udp: `70000` is not a port number");
    fails_with(&["decode", "--window", "0s", "/dev/null"], "--window must be longer than 0");
}

#[test]
fn bad_files_are_named() {
    let dir = Scratch::new("badfiles");
    fails_with(&["send", "--flows", "/nonexistent/flows.toml"], "reading the flow file: /nonexistent/flows.toml: No such file");
    let f = dir.path("f.toml");
    std::fs::write(&f, "[[flow]]\ndst = '127.0.0.1:9'\nrate = 5\nsize = 9\nsizee = 4\n").unwrap();
    fails_with(&["send", "--flows", f.to_str().unwrap()], "unknown field `sizee`");
    std::fs::write(&f, "[[flow]]\ndst = '127.0.0.1:9'\nrate = 5\nsize = 9\n[[flow]]\nname = 'second'\ndst = '127.0.0.1:9'\nrate = -5\nsize = 9\n").unwrap();
    fails_with(&["send", "--flows", f.to_str().unwrap()], "flow 2 (`second`): rate: must be > 0");
    std::fs::write(&f, "not toml [[[").unwrap();
    fails_with(&["send", "--flows", f.to_str().unwrap()], "syntax");
    let junk = dir.path("junk.hlog");
    std::fs::write(&junk, b"this is not a horde log file at all").unwrap();
    fails_with(&["decode", junk.to_str().unwrap()], "not a Horde log");
    fails_with(&["send", "--flows", f.to_str().unwrap(), "--rate", "3"], "cannot be combined with --flows");
}

#[test]
fn port_in_use_and_refused_connections_are_explained() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = run(horde().args(["recv", "--udp", &port]));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("port is in use"), "{}", text(&out));
    // TCP to a closed port: the connect error names the flow and suggests the fix.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = l.local_addr().unwrap();
    drop(l);
    let out = run(horde().args(["send", "-T", "tcp", "--dst", &closed.to_string(), "--rate", "10", "--size", "36", "--packets", "3"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("is `horde recv --tcp"), "{}", text(&out));
}

#[test]
fn receiver_survives_garbage() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("garbage");
    let rx = Recv::start(&["--udp", "0", "--tcp", "0", "--log", dir.path("r.hlog").to_str().unwrap(), "--json", dir.path("r.json").to_str().unwrap()]);
    let (udp, tcp) = (rx.addrs[0], rx.addrs[1]);
    // Random, truncated and almost-valid datagrams.
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut x: u64 = 0x1234_5678;
    for i in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 200) as usize;
        let mut buf: Vec<u8> = (0..len).map(|k| (x >> (k % 56)) as u8).collect();
        if i % 3 == 0 && len >= 3 {
            buf[0] = b'H';
            buf[1] = b'D';
            buf[2] = (i % 4) as u8; // sometimes the right version, sometimes truncated
        }
        s.send_to(&buf, udp).unwrap();
    }
    s.send_to(&[], udp).unwrap();
    // Garbage TCP streams, one closing half-way.
    for k in 0..20 {
        let mut c = std::net::TcpStream::connect(tcp).unwrap();
        let _ = c.write_all(&vec![k as u8; 100 * k + 1]);
    }
    // Real traffic afterwards still arrives whole.
    let out = run(horde().args(["send", "--dst", &udp.to_string(), "--rate", "1000", "--size", "64", "--packets", "500"]));
    assert!(out.status.success());
    let out = run(horde().args(["send", "-T", "tcp", "--dst", &tcp.to_string(), "--rate", "1000", "--size", "64", "--packets", "500"]));
    assert!(out.status.success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (code, _) = rx.stop();
    assert_eq!(code, 130);
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path("r.json")).unwrap()).unwrap();
    assert!(r["garbage_datagrams"].as_u64().unwrap() >= 1500, "{r}");
    assert!(r["garbage_streams"].as_u64().unwrap() >= 15, "{r}");
    let good = records(&dir.path("r.hlog"));
    assert!(good.len() >= 1000, "real packets after the garbage: {}", good.len());
    assert!(good.iter().filter(|r| r.size == 64).count() >= 1000);
}

#[test]
fn sigterm_flushes_the_sender_log() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("sigterm");
    let rx = Recv::start(&["--udp", "0", "--tcp", "0"]);
    let log = dir.path("s.hlog");
    let child = horde()
        .args(["send", "--dst", &rx.addrs[0].to_string(), "--rate", "1000", "--size", "64", "--duration", "30s", "--log", log.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let recs = records(&log);
    assert!(recs.len() > 800 && recs.len() < 3000, "{}", recs.len());
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    // The summary counts every record written: the packets and the flow's two endpoint records.
    let written = horde_stats::load(&std::fs::read(&log).unwrap()).unwrap().records.len();
    assert_eq!(written, recs.len() + 2);
    assert!(said.contains(&format!("({written} records)")), "{said}");
    rx.stop();
}

/// `horde child` reads its task from standard input, as horde hands it to itself; anything else
/// is refused by name (exit 2), never run.
#[test]
fn a_child_task_horde_did_not_hand_itself_is_refused() {
    fails_with(&["child", "part", "r1"], "started by horde itself");
    fails_with(&["child", "daemon", "x"], "`daemon` is none of them");
    let with_stdin = |args: &[&str], line: &str, needle: &str| {
        let mut c =
            horde().args(args).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        c.stdin.take().unwrap().write_all(line.as_bytes()).unwrap();
        let out = c.wait_with_output().unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(needle), "{args:?}: expected `{needle}` in: {t}");
    };
    with_stdin(
        &["child", "part", "r1"],
        "{\"version\":1,\"kind\":\"link-emulator\",\"id\":\"r1\",\"task\":{}}\n",
        "a task for link-emulator r1 given to part r1",
    );
    with_stdin(&["child", "part", "r1"], "{\"version\":99,\"kind\":\"part\",\"id\":\"r1\",\"task\":{}}\n", "binary changed");
    with_stdin(&["child", "part", "r1"], "{\"version\":1,\"kind\":\"part\",\"id\":\"r1\",\"task\":{\"run_id\":\"r1\"}}\n", "the part task");
    with_stdin(&["child", "part", "r1"], "not json\n", "the task line");
}
