//! One regression test per defect found by probing Horde as an attacker and as a careless user
//! would (issue "Hardening"); each reproduces the reported command or packet. Tests that need
//! root (the emulated environment) are in `regression_emu.rs`.

use crate::common::*;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use horde_proto::{gate::sign_stream_hello, RunKey};
use horde_wire::control::Hello;
use horde_wire::datagram::{FLAG_ECHO_REQUEST, FLAG_HELLO};
use horde_wire::{DatagramHeader, StreamHello, HELLO_LEN};

const KEY_HEX: &str = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7";

/// A scenario's server side alone, as `horde run` starts it (its part on `horde child`'s
/// standard input), with a known run key. Returns the child and the address it listens on.
fn serve_only(dir: &Scratch, service: &str, players: u32) -> (Child, SocketAddr) {
    use horde_scenario::part::{Part, PartEvent, MAX_EVENT};
    use horde_sys::own;
    let text = format!("service = '{service}'\nplayers = {players}\nduration = '60s'\nseed = 1\n");
    let sc = horde_model::scenario::Scenario::parse(&text, "sc.toml", dir.as_ref()).unwrap();
    let part = Part::server(&sc, dir.as_ref(), &RunKey::parse_hex(KEY_HEX).unwrap(), "127.0.0.1:0".parse().unwrap(), &dir.path("srv"), sc.players).unwrap();
    let mut child = horde()
        .args([own::SUBCOMMAND, own::Kind::Part.as_str(), &part.run_id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = serde_json::to_string(&own::Envelope { version: own::VERSION, kind: own::Kind::Part, id: part.run_id.clone(), task: &part }).unwrap();
    writeln!(child.stdin.as_mut().unwrap(), "{line}").unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let Some(PartEvent::Listening { addr }) = own::read_line(&mut out, MAX_EVENT).unwrap() else { panic!("the part did not say where it listens") };
    (child, addr)
}

fn sigterm(c: &mut Child) {
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let _ = c.wait();
}

/// Bytes arriving on `s` within `window`.
fn bytes_within(s: &UdpSocket, window: Duration) -> usize {
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let end = Instant::now() + window;
    let mut buf = [0u8; 65536];
    let mut got = 0;
    while Instant::now() < end {
        if let Ok(n) = s.recv(&mut buf) {
            got += n;
        }
    }
    got
}

fn udp_hello(key: &RunKey, flow: u32, tag: u32, cookie: [u8; 16]) -> [u8; 64] {
    let mut h = Hello { header: DatagramHeader { flags: FLAG_HELLO, flow, seq: tag, send_ns: 1 }, cookie, mac: [0; 16] };
    h.mac = key.mac_udp_hello(&h.signed());
    h.emit()
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

// ---- amplification and reflection ------------------------------------------------------------

/// Reported: one spoofed 20-byte hello made the quake3 server side stream 311,851 B to the
/// spoofed address (15,600×); 200 hellos produced 62.7 MB; 50,000 added players without a cap.
#[test]
fn regression_spoofed_udp_hellos_get_at_most_a_smaller_challenge() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("reg-amplify");
    let (mut srv, addr) = serve_only(&dir, "quake3", 100);
    let victim = UdpSocket::bind("127.0.0.1:0").unwrap();
    // The reported packet: a 20-byte hello in the old layout. Now: no answer at all.
    let mut old = [0u8; 20];
    DatagramHeader { flags: FLAG_HELLO, flow: 3, seq: 3 << 8, send_ns: 1 }.emit(&mut old);
    victim.send_to(&old, addr).unwrap();
    assert_eq!(bytes_within(&victim, Duration::from_millis(500)), 0, "a short hello gets nothing");
    // An attacker without the run key: hellos are dropped unanswered.
    let sent: usize = (0..1000).map(|p| victim.send_to(&udp_hello(&RunKey::OPEN, p, p << 8, [0; 16]), addr).unwrap()).sum();
    assert_eq!(bytes_within(&victim, Duration::from_millis(500)), 0, "{sent} B of hellos without the key got an answer");
    // Even an attacker holding the key (on path) who spoofs 10,000 hellos from the victim's
    // address makes the server send the victim less than it received, and adds no player.
    let key = RunKey::parse_hex(KEY_HEX).unwrap();
    let mut sent = 0;
    let mut got = 0;
    for p in 0..10_000u32 {
        sent += victim.send_to(&udp_hello(&key, p % 100, (p % 100) << 8, [0; 16]), addr).unwrap();
        if p % 500 == 499 {
            got += bytes_within(&victim, Duration::from_millis(5));
        }
    }
    got += bytes_within(&victim, Duration::from_millis(500));
    assert!(got <= sent, "amplification: {got} B sent to the victim for {sent} B of hellos");
    sigterm(&mut srv);
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path("srv/server.json")).unwrap()).unwrap();
    assert_eq!(r["flows"].as_array().unwrap().len(), 0, "no player was created for an unvalidated address");
    assert!(r["refusals"]["challenges"].as_u64().unwrap() > 0, "{}", r["refusals"]);
    eprintln!("spoofed hellos: {sent} B sent, {got} B back (ratio {:.3})", got as f64 / sent as f64);
}

/// Reported: `horde recv` echoed 1:1 to any source, and logged injected packets of any flow id
/// as real traffic.
#[test]
fn regression_recv_neither_echoes_nor_logs_unvalidated_sources() {
    let dir = Scratch::new("reg-reflect");
    let rx = Recv::start(&["--udp", "0", "--log", dir.path("r.hlog").to_str().unwrap(), "--json", dir.path("r.json").to_str().unwrap()]);
    let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut sent = 0;
    for seq in 0..500u32 {
        let mut b = [0u8; 200];
        DatagramHeader { flags: FLAG_ECHO_REQUEST, flow: seq % 7, seq, send_ns: 1 }.emit(&mut b);
        sent += attacker.send_to(&b, rx.addrs[0]).unwrap();
    }
    assert_eq!(bytes_within(&attacker, Duration::from_millis(500)), 0, "{sent} B of echo requests were reflected");
    let (code, _) = rx.stop();
    assert_eq!(code, 130);
    assert!(records(&dir.path("r.hlog")).is_empty(), "injected datagrams were logged as traffic");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path("r.json")).unwrap()).unwrap();
    assert_eq!(r["refusals"]["unadmitted_datagrams"], 500, "{r}");
    assert_eq!(r["echoed"], 0);
}

/// A real round-trip flow still gets its echoes (the fix must not break the feature).
#[test]
fn validated_round_trip_flows_are_still_echoed() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let rx = Recv::start(&["--udp", "0", "--tcp", "0"]);
    for t in ["udp", "tcp"] {
        let dst = if t == "udp" { rx.addrs[0] } else { rx.addrs[1] };
        let out = run(horde().args([
            "send",
            "-T",
            t,
            "--dst",
            &dst.to_string(),
            "--rate",
            "500",
            "--size",
            "64",
            "--packets",
            "300",
            "--meter",
            "rtt",
            "--json",
            "-",
        ]));
        assert!(out.status.success(), "{}", text(&out));
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["echoes"], 300, "{t}: {}", text(&out));
    }
    rx.stop();
}

// ---- bounded memory and descriptors --------------------------------------------------------

/// Reported: the `horde run` TCP server side never closed connections the peer had closed:
/// one descriptor more per connect/close, until real players were starved.
#[test]
fn regression_the_tcp_server_side_closes_what_peers_close() {
    let dir = Scratch::new("reg-fds");
    let (mut srv, addr) = serve_only(&dir, "wow", 50);
    std::thread::sleep(Duration::from_millis(200));
    let before = fd_count(srv.id());
    for k in 0..400 {
        let mut c = TcpStream::connect(addr).unwrap();
        if k % 2 == 0 {
            let _ = c.write_all(b"not a hello at all, just garbage bytes to be closed");
        }
        drop(c);
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = fd_count(srv.id());
    sigterm(&mut srv);
    assert!(after <= before + 10, "descriptors grew from {before} to {after} over 400 connect/close");
}

/// Reported: a TCP peer that asks for echoes and never reads made `horde recv` buffer without
/// limit (2.1 GB).
#[test]
fn regression_an_echo_peer_that_never_reads_is_bounded() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("reg-echo");
    let mut child = horde().args(["recv", "--tcp", "0"]).stderr(Stdio::piped()).spawn().unwrap();
    let mut banner = String::new();
    BufReader::new(child.stderr.as_mut().unwrap()).read_line(&mut banner).unwrap();
    let addr: SocketAddr = banner.split("listening on tcp ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    let mut c = TcpStream::connect(addr).unwrap();
    let h = sign_stream_hello(&RunKey::OPEN, StreamHello { flags: horde_wire::stream::HELLO_ECHO, flow: 1, base_ns: 1, tag: 0, mac: [0; 16] });
    let mut hb = [0u8; HELLO_LEN];
    h.emit(&mut hb);
    c.write_all(&hb).unwrap();
    c.set_nonblocking(true).unwrap();
    // 1460-byte APDUs, written for 3 s, never reading the echoes.
    let mut apdu = vec![0u8; 1460];
    horde_wire::ApduHeader { len: 1460, offset_us: 0 }.emit(&mut apdu);
    let mut written = 0usize;
    let end = Instant::now() + Duration::from_secs(3);
    let mut pos = 0;
    while Instant::now() < end {
        match c.write(&apdu[pos..]) {
            Ok(k) => {
                written += k;
                pos = (pos + k) % apdu.len();
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let rss = rss_kb(child.id());
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    drop(dir);
    assert!(rss < 128 * 1024, "recv holds {rss} kB after {written} B from a peer that never reads");
    assert!(written < 256 << 20, "recv kept reading ({written} B): no back-pressure");
}

/// Issue 21: 800 echo peers that never read pushed `recv` to 956 MB (1 MiB backlog each); the
/// backlogs together now have a budget (64 MiB).
#[test]
fn many_echo_peers_that_never_read_share_one_memory_budget() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // a core's worth of echo peers
    let mut child = horde().args(["recv", "--tcp", "0"]).stderr(Stdio::piped()).spawn().unwrap();
    let mut banner = String::new();
    BufReader::new(child.stderr.as_mut().unwrap()).read_line(&mut banner).unwrap();
    let addr: SocketAddr = banner.split("listening on tcp ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    let mut apdu = vec![0u8; 1460];
    horde_wire::ApduHeader { len: 1460, offset_us: 0 }.emit(&mut apdu);
    let mut peers: Vec<(TcpStream, usize)> = (0..300u32)
        .map(|i| {
            let mut c = TcpStream::connect(addr).unwrap();
            let h = sign_stream_hello(&RunKey::OPEN, StreamHello { flags: horde_wire::stream::HELLO_ECHO, flow: i, base_ns: 1, tag: 0, mac: [0; 16] });
            let mut hb = [0u8; HELLO_LEN];
            h.emit(&mut hb);
            c.write_all(&hb).unwrap();
            c.set_nonblocking(true).unwrap();
            (c, 0)
        })
        .collect();
    let end = Instant::now() + Duration::from_secs(4);
    let mut peak = 0;
    while Instant::now() < end {
        for (c, pos) in peers.iter_mut() {
            for _ in 0..64 {
                match c.write(&apdu[*pos..]) {
                    Ok(k) => *pos = (*pos + k) % apdu.len(),
                    Err(_) => break,
                }
            }
        }
        peak = peak.max(rss_kb(child.id()));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    assert!(peak < 160 * 1024, "recv held {peak} kB for 300 peers that never read (1 MiB each would be 300 MB)");
}

/// Reported: idle TCP connections to `horde recv` had no limit or timeout; 24,000 idle connects
/// delayed a real flow's APDUs by 26.5 s.
#[test]
fn regression_idle_connections_cannot_lock_out_a_real_flow() {
    let dir = Scratch::new("reg-idle");
    let rx = Recv::start(&["--tcp", "0", "--max-conns", "50", "--log", dir.path("r.hlog").to_str().unwrap()]);
    let idle: Vec<TcpStream> = (0..300).filter_map(|_| TcpStream::connect(rx.addrs[0]).ok()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let out = run(horde().args(["send", "-T", "tcp", "--dst", &rx.addrs[0].to_string(), "--rate", "1000", "--size", "64", "--packets", "500"]));
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(Duration::from_millis(300));
    rx.stop();
    let got = records(&dir.path("r.hlog"));
    assert_eq!(got.len(), 500, "the real flow's APDUs all arrived");
    let late = got.iter().map(|r| r.t_b.saturating_sub(r.t_a)).max().unwrap();
    assert!(late < 200_000_000, "worst delay {} ms behind 300 idle connections", late / 1_000_000);
    assert!(t.elapsed() < Duration::from_secs(5));
    drop(idle);
}

// ---- runs that must end ------------------------------------------------------------------

/// Reported: `--rate 1e12` and `--idt 'normal(-5,1)'` flooded until Ctrl-C; a scenario
/// `duration = "99999999999999999h"` was accepted.
#[test]
fn regression_schedules_that_cannot_advance_are_input_errors() {
    let fails = |args: &[&str], needle: &str| {
        let out = run(horde().args(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(needle), "{args:?}: {}", text(&out));
    };
    fails(&["send", "--dst", "127.0.0.1:9", "--rate", "1e12", "--size", "64"], "beyond what a socket can pace");
    fails(&["send", "--dst", "127.0.0.1:9", "--idt", "normal(-5,1)", "--size", "64"], "idt");
    fails(&["send", "--dst", "127.0.0.1:9", "--rate", "10", "--size", "64", "-t", "50"], "has no unit");
    let dir = Scratch::new("reg-duration");
    let sc = dir.path("sc.toml");
    std::fs::write(&sc, "service = 'wow'\nplayers = 10\nduration = '99999999999999999h'\n").unwrap();
    fails(&["run", sc.to_str().unwrap()], "duration");
    std::fs::write(&sc, "service = 'wow'\nplayers = 10\nduration = '30d'\n").unwrap();
    fails(&["run", sc.to_str().unwrap()], "longer than a run may be");
}

/// A flow asked to send faster than the machine can stops at its duration anyway, and says
/// how much it did not send.
#[test]
fn regression_a_flow_behind_schedule_stops_at_its_duration() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // a bulk or catching-up sender: a core
    let rx = Recv::start(&["--udp", "0"]);
    let t = Instant::now();
    let out = run(horde().args(["send", "--dst", &rx.addrs[0].to_string(), "--rate", "5M", "--size", "1400", "-t", "2s", "--json", "-"]));
    let took = t.elapsed();
    rx.stop();
    assert!(out.status.success(), "{}", text(&out));
    assert!(took < Duration::from_secs(5), "a 2 s flow took {took:?}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["unsent"].as_u64().unwrap() > 0, "the sender could not keep 5 M pkt/s: {}", text(&out));
}

// ---- no panic on any input ---------------------------------------------------------------

/// Reported: `poisson(1e20)` and `uniform(-1e308,1e308)` panicked; 10,000 nested `mix(` and
/// 50,000 parentheses overflowed the stack; `services check` accepted what `run` panicked on.
#[test]
fn regression_extreme_and_deep_distributions_are_input_errors() {
    for idt in ["poisson(1e20)", "uniform(-1e308,1e308)"] {
        let out = run(horde().args(["send", "--dst", "127.0.0.1:9", "--idt", idt, "--size", "64"]));
        assert_eq!(out.status.code(), Some(2), "{idt}: {}", text(&out));
        assert!(!text(&out).contains("panicked"));
    }
    let deep = format!("{}exp(1){}", "mix(1*".repeat(10_000), ")".repeat(10_000));
    let parens = format!("{}1{}", "(".repeat(50_000), ")".repeat(50_000));
    for idt in [deep.as_str(), parens.as_str()] {
        let out = run(horde().args(["send", "--dst", "127.0.0.1:9", "--idt", idt, "--size", "64"]));
        assert_eq!(out.status.code(), Some(2), "{}", &text(&out)[..200.min(text(&out).len())]);
        assert!(text(&out).contains("nested more than"));
    }
    let dir = Scratch::new("reg-check");
    let svc = dir.path("svc.toml");
    std::fs::write(&svc, "name = 'x'\ndescription = 'x'\ntransport = 'udp'\nstates = ['a']\n[state.a]\nup = { idt = 'poisson(1e20)', size = '64' }\ndown = { idt = '10', size = '64' }\n").unwrap();
    let out = run(horde().args(["services", "check", svc.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(2), "check runs the validation run runs: {}", text(&out));
}

/// Reported: `horde presets | head -1`, `horde emu ls ID | head` and `decode --csv - | head -1`
/// panicked on the closed pipe (exit 101). The reader here closes its end before Horde writes.
#[test]
fn regression_closed_pipes_end_quietly_with_exit_0() {
    let dir = Scratch::new("reg-pipe");
    let log = dir.path("s.hlog");
    let rx = Recv::start(&["--udp", "0"]);
    assert!(run(horde().args(["send", "--dst", &rx.addrs[0].to_string(), "--rate", "100", "--size", "64", "--packets", "50", "-l", log.to_str().unwrap()]))
        .status
        .success());
    rx.stop();
    for args in [
        vec!["presets"],
        vec!["services"],
        vec!["services", "show", "wow"],
        vec!["decode", log.to_str().unwrap(), "--csv", "-"],
        vec!["behave", "--players", "200", "--out", "-"],
    ] {
        let mut child = horde().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
    }
}

// ---- unbounded reads ---------------------------------------------------------------------

/// Reported: `service = "/dev/zero"` reached 15 GB in 10 s; a 50 MB flow file took 6.4 GB; a
/// missing `[state.X]` table was accepted (that state then took 99 % of the time); errors
/// quoted the first line of whatever file they failed on (`/etc/shadow`).
#[test]
fn regression_special_huge_and_foreign_files_are_refused() {
    let dir = Scratch::new("reg-files");
    let sc = dir.path("sc.toml");
    std::fs::write(&sc, "service = '/dev/zero'\nplayers = 1\nduration = '1s'\n").unwrap();
    let t = Instant::now();
    let out = run(horde().args(["run", sc.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not a regular file") && t.elapsed() < Duration::from_secs(5), "{}", text(&out));
    let big = dir.path("big.toml");
    let mut f = std::fs::File::create(&big).unwrap();
    let flow = "[[flow]]\ndst = '127.0.0.1:9'\nrate = 10\nsize = 64\n";
    for _ in 0..(50_000_000 / flow.len()) {
        f.write_all(flow.as_bytes()).unwrap();
    }
    drop(f);
    let out = run(horde().args(["send", "--flows", big.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("more than the"), "{}", text(&out));
    let svc = dir.path("svc.toml");
    std::fs::write(&svc, "name = 'x'\ndescription = 'x'\ntransport = 'udp'\nstates = ['a', 'b']\nfirst = [1, 1]\ntransitions = { a = [0, 1], b = [1, 0] }\n[state.a]\ndwell = '10'\nup = { idt = '10', size = '64' }\n").unwrap();
    let out = run(horde().args(["services", "check", svc.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no [state.b] table"), "{}", text(&out));
    let secret = dir.path("shadow");
    std::fs::write(&secret, "root:$6$s3cr3tSALT$hashhashhash:19000:0:99999:7:::\n").unwrap();
    for args in [vec!["services", "check", secret.to_str().unwrap()], vec!["send", "--flows", secret.to_str().unwrap()]] {
        let out = run(horde().args(&args));
        assert_eq!(out.status.code(), Some(2));
        assert!(!text(&out).contains("s3cr3t"), "{args:?} quoted the file: {}", text(&out));
    }
}

/// Reported (issue 66): validation messages past the syntax check still quoted values from the
/// file (a duration, a destination, a distribution, a service path, a state name).
#[test]
fn regression_validation_messages_never_quote_the_files_values() {
    let dir = Scratch::new("reg-quote");
    let x = "$6$s3cr3tSALT/x.y";
    let files: Vec<(&str, String, Vec<&str>)> = vec![
        ("sc-dur.toml", format!("service = 'wow'\nplayers = 1\nduration = '{x}'\n"), vec!["run"]),
        ("sc-svc.toml", format!("service = '{x}'\nplayers = 1\nduration = '1s'\n"), vec!["run"]),
        ("fl-dst.toml", format!("[[flow]]\ndst = '{x}'\nrate = 10\nsize = 64\n"), vec!["send", "--flows"]),
        ("fl-size.toml", format!("[[flow]]\ndst = '127.0.0.1:9'\nrate = 10\nsize = '{x}'\n"), vec!["send", "--flows"]),
        (
            "svc-row.toml",
            format!("name='x'\ndescription='x'\ntransport='udp'\nstates=['{x}']\nfirst=[1]\ntransitions={{a=[1]}}\n"),
            vec!["services", "check"],
        ),
        (
            "svc-dwell.toml",
            format!("name='x'\ndescription='x'\ntransport='udp'\nstates=['a']\nfirst=[1]\ntransitions={{a=[1]}}\n[state.a]\ndwell='{x}'\nup={{idt='10',size='64'}}\n"),
            vec!["services", "check"],
        ),
        ("topo-link.toml", format!("name = 'tq'\n[[node]]\nname='a'\nkind='host'\n[[link]]\na='a'\nb='{x}'\n"), vec!["emu", "up"]),
        ("topo-subnet.toml", format!("name = 'tq'\n[[node]]\nname='a'\nkind='host'\n[[node]]\nname='b'\nkind='switch'\n[[link]]\na='a'\nb='b'\nsubnet='{x}'\n"), vec!["emu", "up"]),
    ];
    for (name, body, args) in files {
        let path = dir.path(name);
        std::fs::write(&path, body).unwrap();
        let o = dir.path("o");
        let out = run(horde().args(&args).arg(&path).args(if args[0] == "run" { vec!["--out", o.to_str().unwrap()] } else { vec![] }));
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out));
        let t = text(&out);
        assert!(!t.contains("s3cr3t"), "{name} quoted the file: {t}");
        assert!(t.contains(name) && t.contains('…'), "{name}: the message still names the file and marks what it left out: {t}");
    }
}

// ---- honest runs ---------------------------------------------------------------------------

fn summary(dir: &Scratch) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.path("out/summary.json")).unwrap()).unwrap()
}

/// Reported: a run stopped by Ctrl-C at 10 s of 60 computed its rates over 60 s (trading down
/// 0.968 APDU/s per player instead of ~5.4) and counted in-flight APDUs as lost, silently.
#[test]
fn regression_an_interrupted_run_reports_over_the_time_run() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // rates within 10 % of the model
    let dir = Scratch::new("reg-interrupt");
    let child = horde()
        .args(["demo", "-t", "30s", "--players", "600", "--quiet", "--out", dir.path("out").to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(8));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("interrupted at") && table.contains("statistics cover the first"), "{table}");
    let s = summary(&dir);
    let i = &s["interruption"];
    let at = i["at_s"].as_f64().unwrap();
    assert!((5.0..12.0).contains(&at), "{i}");
    let mut report = String::new();
    for c in s["analysis"]["categories"].as_array().unwrap() {
        for d in ["up", "down"] {
            let x = &c[d];
            report.push_str(&format!("{} {d}: lost {} rate err {}\n", c["category"], x["lost"], x["rate_error_pct"]));
            assert_eq!(x["lost"], 0, "in-flight APDUs counted as lost\n{report}");
        }
    }
    let trading = s["analysis"]["categories"].as_array().unwrap().iter().find(|c| c["category"] == "trading").unwrap();
    let err = trading["down"]["rate_error_pct"].as_f64().unwrap();
    assert!(err.abs() < 10.0, "trading down rate {err:+.1} % off the model over the time run\n{report}");
}

/// Reported: if the server side died, the client ran to the end and exited with no report.
#[test]
fn regression_the_client_stops_and_reports_when_the_server_side_dies() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("reg-death");
    let out_dir = dir.path("out");
    let child = horde()
        .args(["demo", "-t", "60s", "--players", "200", "--quiet", "--out", out_dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // the demo's one child process is its server side
    let server = {
        let t = Instant::now();
        loop {
            if let Some(&p) = horde_testkit::descendants(child.id()).first() {
                break p as i32;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "server side not found");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    std::thread::sleep(Duration::from_secs(4));
    unsafe { libc::kill(server, libc::SIGKILL) };
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "the client took {:?} to notice", t.elapsed());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("server side exited unexpectedly"), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&dir);
    assert!(s["interruption"]["reason"].as_str().unwrap().contains("server side exited"), "{}", s["interruption"]);
}

/// Reported: after SIGKILL both logs were 0 bytes. Now at most about the last second is lost.
#[test]
fn regression_sigkill_loses_at_most_the_last_second_of_the_log() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("reg-sigkill");
    let rx = Recv::start(&["--udp", "0"]);
    let log = dir.path("s.hlog");
    let mut child = horde()
        .args(["send", "--dst", &rx.addrs[0].to_string(), "--rate", "1000", "--size", "64", "-t", "30s", "-l", log.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    rx.stop();
    let n = records(&log).len();
    assert!(n >= 2000, "{n} records survived 3.5 s at 1000 pkt/s");
}

/// Reported: `horde decode send.hlog` alone reported 100 % loss; `decode` printed p99.9 above
/// the maximum.
#[test]
fn regression_a_sender_log_alone_is_not_loss_and_percentiles_stay_below_max() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("reg-decode");
    let (slog, rlog) = (dir.path("s.hlog"), dir.path("r.hlog"));
    let rx = Recv::start(&["--udp", "0", "-l", rlog.to_str().unwrap()]);
    assert!(run(horde().args([
        "send",
        "--dst",
        &rx.addrs[0].to_string(),
        "--rate",
        "2000",
        "--size",
        "64",
        "--packets",
        "3000",
        "-l",
        slog.to_str().unwrap()
    ]))
    .status
    .success());
    std::thread::sleep(Duration::from_millis(200));
    rx.stop();
    let out = run(horde().args(["decode", slog.to_str().unwrap()]));
    assert!(out.status.success());
    assert!(!text(&out).contains("loss:") && text(&out).contains("sender log only"), "{}", text(&out));
    let v = decode(&[&slog]);
    assert!(v["total"]["loss"].is_null(), "{}", v["total"]);
    let v = decode(&[&slog, &rlog]);
    let d = &v["total"]["delay"];
    for p in ["p50_ms", "p90_ms", "p99_ms", "p999_ms"] {
        assert!(d[p].as_f64().unwrap() <= d["max_ms"].as_f64().unwrap(), "{p} above max: {d}");
    }
}

#[test]
fn run_keys_are_made_private_and_refused_when_readable() {
    let dir = Scratch::new("reg-key");
    let k = dir.path("k");
    let out = run(horde().args(["key", "--out", k.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&k).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(run(horde().args(["key", "--out", k.to_str().unwrap()])).status.code() != Some(0), "an existing key is not overwritten");
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(horde().args(["recv", "--udp", "0", "--key-file", k.to_str().unwrap(), "--duration", "1s"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("chmod 600"), "{}", text(&out));
    let mut s = String::new();
    std::fs::File::open(&k).unwrap().read_to_string(&mut s).unwrap();
    assert!(!text(&out).contains(s.trim()), "the key itself is never printed");
}

/// With a run key, a sender without it is refused (no answer, a clear error); with it, traffic flows.
#[test]
fn a_receiver_with_a_key_serves_only_senders_with_it() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("reg-keyed");
    let k = dir.path("k");
    assert!(run(horde().args(["key", "--out", k.to_str().unwrap()])).status.success());
    let rx = Recv::start(&["--udp", "0", "--tcp", "0", "--key-file", k.to_str().unwrap()]);
    let udp = rx.addrs[0].to_string();
    let out = run(horde().args(["send", "--dst", &udp, "--rate", "100", "--size", "64", "--packets", "20", "--connect-timeout", "1s"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no answer to its hello") && text(&out).contains("same key"), "{}", text(&out));
    let out = run(horde().args(["send", "-T", "tcp", "--dst", &rx.addrs[1].to_string(), "--rate", "100", "--size", "64", "--packets", "20"]));
    // The connect works; the receiver drops the stream: a failure that names the key (issue 21).
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--key-file"), "{}", text(&out));
    for t in ["udp", "tcp"] {
        let dst = if t == "udp" { rx.addrs[0] } else { rx.addrs[1] };
        let out = run(horde().args([
            "send",
            "-T",
            t,
            "--dst",
            &dst.to_string(),
            "--rate",
            "500",
            "--size",
            "64",
            "--packets",
            "200",
            "--meter",
            "rtt",
            "--key-file",
            k.to_str().unwrap(),
            "--json",
            "-",
        ]));
        assert!(out.status.success(), "{}", text(&out));
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["echoes"], 200, "{t}");
    }
    let (_, err) = rx.stop();
    assert!(err.contains("packets"), "{err}");
    let _ = Command::new("true");
}

/// Issue 21: a TCP `send` that a keyed receiver refuses (its hello has no key) sent nothing,
/// exited 0 and blamed a missing receiver; it must fail and name the key.
#[test]
fn a_tcp_send_refused_for_a_missing_key_fails_and_names_the_key() {
    let dir = Scratch::new("reg-tcp-key");
    let key = dir.path("run.key");
    std::fs::write(&key, KEY_HEX).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let rx = Recv::start(&["--tcp", "0", "--key-file", key.to_str().unwrap()]);
    let o = run(horde().args(["send", "-a", &rx.addrs[0].to_string(), "-T", "tcp", "-C", "100", "-c", "64", "-t", "1s"]));
    let _ = rx.stop();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("sent nothing") && text(&o).contains("--key-file"), "{}", text(&o));
}

/// Issue 21: `decode --flows` named flows by the file's ids, so a sender's `--id-base` made it
/// name every flow wrong (or none); `decode --id-base` shifts them as `send` did, and without it
/// decode says what to give.
#[test]
fn decode_names_flows_sent_with_an_id_base() {
    let dir = Scratch::new("reg-id-base");
    let rx = Recv::start(&["--udp", "0"]);
    let file = dir.path("f.toml");
    std::fs::write(
        &file,
        format!("[defaults]\ndst = \"{}\"\nduration = \"400ms\"\nrate = 50\nsize = 64\n[[flow]]\nname = \"alpha\"\n[[flow]]\nname = \"beta\"\n", rx.addrs[0]),
    )
    .unwrap();
    let log = dir.path("s.hlog");
    let o = run(horde().args(["send", "--flows", file.to_str().unwrap(), "--id-base", "100", "-l", log.to_str().unwrap()]));
    let _ = rx.stop();
    assert!(o.status.success(), "{}", text(&o));
    let o = run(horde().args(["decode", log.to_str().unwrap(), "-F", file.to_str().unwrap()]));
    assert!(text(&o).contains("--id-base 100"), "decode says what to give: {}", text(&o));
    let o = run(horde().args(["decode", log.to_str().unwrap(), "-F", file.to_str().unwrap(), "--id-base", "100", "--json", "-"]));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<(u64, String)> =
        v["flows"].as_array().unwrap().iter().map(|f| (f["flow"].as_u64().unwrap(), f["name"].as_str().unwrap_or("").to_string())).collect();
    assert_eq!(names, vec![(100, "alpha".to_string()), (101, "beta".to_string())]);
}
