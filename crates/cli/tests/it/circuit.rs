//! `horde circuit`: a regulated circuit over real UDP, on loopback (no root) and on an emulated
//! lossy link (root; CI runs as root); `horde run` with a `[regulation]` table: every player a
//! circuit, on loopback and on an emulated access network (root).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::emu_util::{ok, tmp, write, HORDE};

fn serve(args: &[&str]) -> Child {
    Command::new(HORDE).arg("circuit").arg("serve").args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

pub(crate) fn json(p: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

/// Mean of a per-second field over the seconds after `from`.
pub(crate) fn mean_after(v: &serde_json::Value, field: &str, from: u64) -> f64 {
    let s: Vec<f64> = v["seconds"].as_array().unwrap().iter().filter(|r| r["t_s"].as_u64().unwrap() > from).map(|r| r[field].as_f64().unwrap()).collect();
    s.iter().sum::<f64>() / s.len().max(1) as f64
}

#[test]
fn the_server_end_sends_what_the_client_end_asks_for_on_loopback() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("circuit-lo");
    let port = horde_testkit::free_port("127.0.0.1");
    let listen = format!("127.0.0.1:{port}");
    let sj = d.join("server.json");
    let mut s = serve(&["--listen", &listen, "--backlog", "texture", "-t", "12s", "--json", sj.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(300));
    let cj = d.join("client.json");
    let out = ok(&["circuit", "join", "--server", &listen, "--throttle", "fixed:400", "-t", "8s", "--json", cj.to_str().unwrap()]);
    let _ = out;
    let st = s.wait().unwrap();
    assert!(st.success());
    let c = json(&cj);
    // With a saturating backlog the client receives what it asked for (400 kbit/s) from the 2nd s.
    let got = mean_after(&c, "total_kbps", 2);
    assert!((got / 400.0 - 1.0).abs() < 0.05, "received {got} kbit/s for 400 asked");
    let srv = json(&sj);
    let circuit = &srv["circuits"][0];
    assert_eq!(circuit["regulator"], "dual");
    let allowed = circuit["seconds"].as_array().unwrap().last().unwrap()["rate_kbps"].as_f64().unwrap();
    assert!((allowed - 400.0).abs() < 0.5, "{allowed}");
    // The client said goodbye: the server closed the circuit before its own end.
    assert!(circuit["seconds"].as_array().unwrap().len() <= 9);
}

/// Issue 21's second reproduction: after `horde circuit join` is killed, spoofed throttle and
/// ping packets from its address neither keep its circuit alive nor speed it up. The spoofer
/// here binds the dead client's address (it sees nothing of the past probes, as an off-path
/// spoofer would not) and counts what reaches that address.
#[test]
fn a_killed_clients_circuit_cannot_be_kept_alive_by_spoofed_throttles() {
    use std::io::BufRead as _;
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let port = horde_testkit::free_port("127.0.0.1");
    let listen = format!("127.0.0.1:{port}");
    let mut srv = Command::new(HORDE)
        .args(["circuit", "serve", "--listen", &listen, "--backlog", "texture", "-t", "20s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (l2, err) = (lines.clone(), srv.stderr.take().unwrap());
    std::thread::spawn(move || std::io::BufReader::new(err).lines().map_while(Result::ok).for_each(|l| l2.lock().unwrap().push(l)));
    std::thread::sleep(Duration::from_millis(300));
    let mut join = Command::new(HORDE)
        .args(["circuit", "join", "--server", &listen, "--bind", "127.0.0.9", "--throttle", "fixed:400", "-t", "60s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wait_line = |needle: &str| -> String {
        for _ in 0..200 {
            if let Some(l) = lines.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no `{needle}` from the server: {:?}", lines.lock().unwrap());
    };
    let joined = wait_line("joined");
    assert!(joined.contains("at most 400 kbit/s"), "the join asked for its throttle's most: {joined}");
    let client: std::net::SocketAddr = joined.split("client ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    join.kill().unwrap();
    let _ = join.wait();
    std::thread::sleep(Duration::from_millis(2_500));
    // The spoofer: 30 throttle packets asking for 7 × 1 Gbit/s and pings, over 3 s.
    let spoofer = std::net::UdpSocket::bind(client).unwrap();
    spoofer.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut throttle = b"HV\x01\x02\x00\x00\x00\x00\x00\x00\x00\x00".to_vec();
    for _ in 0..7 {
        throttle.extend_from_slice(&1e9f32.to_be_bytes());
    }
    let (mut sent, mut got, mut data) = (0usize, 0usize, 0usize);
    let t = std::time::Instant::now();
    let mut buf = [0u8; 2048];
    let mut next = t;
    while t.elapsed() < Duration::from_secs(8) {
        if sent < 30 * throttle.len() && std::time::Instant::now() >= next {
            sent += spoofer.send_to(&throttle, &listen).unwrap();
            next += Duration::from_millis(100);
        }
        if let Ok(n) = spoofer.recv(&mut buf) {
            got += n;
            data += buf.starts_with(b"HV") as usize;
        }
    }
    assert_eq!(data, 0, "no circuit packet reached the dead client's address");
    assert!(got <= sent, "{got} B reached the spoofed address for {sent} B sent");
    wait_line("stopped answering consent probes");
    let _ = srv.kill();
    let _ = srv.wait();
}

#[test]
fn bad_circuit_flags_are_refused_naming_the_fix() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let o = Command::new(HORDE).args(["circuit", "join", "--server", "127.0.0.1:9", "--throttle", "vegas"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give fixed:KBPS, opensim[:SETTING], mongoose, mongoose-paper or tfrc"));
    let o = Command::new(HORDE).args(["circuit", "join", "--server", "127.0.0.1:9", "--throttle", "opensim:5000"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("50..=1500"));
    let o = Command::new(HORDE).args(["circuit", "serve", "--listen", "127.0.0.1:0", "--backlog", "textures"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`textures` is not a channel"));
    let o = Command::new(HORDE).args(["circuit", "serve", "--listen", "127.0.0.1:0", "--script", "5:swimming"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("swimming"));
    // The opensim throttle's period and floor belong to it alone, within bounds.
    for (args, why) in [
        (vec!["--throttle", "mongoose", "--floor", "50"], "the floor belongs to the opensim throttle"),
        (vec!["--throttle", "tfrc", "--throttle-period", "1"], "the throttle period belongs to the opensim throttle"),
        (vec!["--throttle", "opensim:500", "--throttle-period", "0"], "0.1..=60 s"),
        (vec!["--throttle", "opensim:500", "--floor", "900"], "1..=750 kbit/s"),
    ] {
        let o = Command::new(HORDE).args(["circuit", "join", "--server", "127.0.0.1:9"]).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    // Nobody serving: the client says so after its hellos go unanswered, and sends nothing else.
    // a port nothing of the test's listens on (free when taken)
    let silent = format!("127.0.0.1:{}", horde_testkit::free_port("127.0.0.1"));
    let o = Command::new(HORDE).args(["circuit", "join", "--server", &silent, "-t", "1s"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("no answer from {silent}")), "{}", String::from_utf8_lossy(&o.stderr));
}

pub(crate) fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn a_regulated_scenario_runs_every_player_as_a_circuit() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("circuit-run");
    let out = d.join("out");
    let ex = examples().join("opensim-regulated.toml");
    let prog = d.join("progress.jsonl");
    let o = ok(&[
        "run",
        ex.to_str().unwrap(),
        "-n",
        "6",
        "-t",
        "10s",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
        "--progress",
        "json",
        "--progress-file",
        prog.to_str().unwrap(),
    ]);
    assert!(o.contains("6 regulated circuits (mongoose throttle, dual regulator)") && o.contains("6 joined"), "{o}");
    // live: each progress line carries the circuits' last closed second
    let live: Vec<serde_json::Value> = std::fs::read_to_string(&prog)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "progress")
        .filter_map(|v| v["progress"].get("circuits").cloned())
        .collect();
    let last = live.last().unwrap_or_else(|| panic!("circuits in the progress lines"));
    assert!(last["circuits"] == 6 && last["received_kbps"].as_f64().unwrap() > 0.0, "{last}");
    let thr = last["throttle_kbps"].as_array().unwrap();
    assert!(thr[0].as_f64() <= thr[1].as_f64() && thr[1].as_f64() <= thr[2].as_f64() && thr[2].as_f64().unwrap() <= 1536.1, "{last}");
    let s = json(&out.join("summary.json"));
    assert_eq!(s["kind"], "circuits");
    let circuits = s["circuits"].as_array().unwrap();
    assert_eq!(circuits.len(), 6);
    for c in circuits {
        // Each joined at its join time (uniform over 0..10 s) and got its login burst.
        assert!(c["joined_s"].as_f64().unwrap() < 10.0, "{c}");
        assert!(c["received_kbps"].as_f64().unwrap() > 0.0 && c["packets"].as_u64().unwrap() > 0, "{c}");
        assert!(c["request_kbps"].as_f64().unwrap() <= 1536.1, "within the viewer's limits: {c}");
    }
    assert!(s["totals"]["loss_pct"].as_f64().unwrap() < 1.0, "loopback: {}", s["totals"]);
    // The per-second series covers the run, with every channel.
    let secs = s["seconds"].as_array().unwrap();
    assert!(secs.len() >= 9, "{}", secs.len());
    assert!(secs.iter().any(|r| r["channel_kbps"][5].as_f64().unwrap() > 0.0), "texture bursts at the logins");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    for h in ["Throttle over time", "Per-channel throughput", "Avatars per state", "Circuits"] {
        assert!(html.contains(h), "{h}");
    }
    assert_eq!(std::fs::read_dir(out.join("charts")).unwrap().count(), 5);
}

#[test]
fn bad_regulation_tables_are_refused_naming_the_field() {
    let d = tmp("circuit-bad");
    let run = |name: &str, text: &str, extra: &[&str]| {
        let p = write(&d, name, text);
        let mut args = vec!["run", p.to_str().unwrap(), "--quiet", "-o"];
        let out = d.join(format!("{name}.out"));
        args.push(out.to_str().unwrap());
        args.extend_from_slice(extra);
        let o = Command::new(HORDE).args(&args).output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let base = "service = \"opensim\"\nplayers = 2\nduration = \"5s\"\n";
    let (c, e) = run("a.toml", &format!("{base}[regulation]\nthrottle = \"vegas\"\n"), &[]);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("regulation.throttle") && e.contains("mongoose-paper"), "{e}");
    let (c, e) = run("b.toml", &format!("{base}[regulation]\nthrottle = \"tfrc\"\nregulator = \"fifo\"\n"), &[]);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("regulation.regulator") && e.contains("per-channel"), "{e}");
    let (c, e) = run("c.toml", "service = \"wow\"\nplayers = 2\nduration = \"5s\"\n[regulation]\nthrottle = \"tfrc\"\n", &[]);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("[circuit]"), "{e}");
    let (c, e) = run("d.toml", &format!("{base}[regulation]\nthrottle = \"tfrc\"\nsetting = 3\n"), &[]);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("setting"), "{e}");
    let (c, e) = run("f.toml", &format!("{base}[regulation]\nthrottle = \"tfrc\"\nfloor_kbps = 50\n"), &[]);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("regulation.throttle_period_s/floor_kbps") && e.contains("opensim"), "{e}");
    let (c, e) = run("g.toml", &format!("{base}[regulation]\nthrottle = \"opensim:500\"\nthrottle_period_s = 100\n"), &[]);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("0.1..=60 s"), "{e}");
    // Through agents, the agents' settings are checked like any scenario's.
    let (c, e) = run("e.toml", &format!("{base}[regulation]\nthrottle = \"tfrc\"\n"), &["--agents", "127.0.0.1:9"]);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("--credentials"), "{e}");
}

/// A "server" that answers every hello with a fresh challenge and never admits: the client's
/// greeting would go on for ever; `horde circuit join` still ends by its own bound (the
/// duration plus 10 s) with an error naming the server, not a hang.
#[test]
fn a_server_that_only_challenges_cannot_hold_a_join() {
    use horde_wire::control::{Challenge, Hello};
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // the joining client retries at full speed
    let srv = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    srv.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let addr = srv.local_addr().unwrap().to_string();
    let t = std::time::Instant::now();
    let mut join = Command::new(HORDE).args(["circuit", "join", "--server", &addr, "-t", "1s"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut buf = [0u8; 2048];
    let (mut challenged, mut n) = (0, 0u8);
    while t.elapsed() < Duration::from_secs(20) && join.try_wait().unwrap().is_none() {
        let Ok((len, from)) = srv.recv_from(&mut buf) else { continue };
        let Ok(h) = Hello::parse(&buf[..len]) else { continue };
        n = n.wrapping_add(1);
        let c = Challenge { flow: h.header.flow, tag: h.header.seq, base_ns: h.header.send_ns, cookie: [n; 16] };
        srv.send_to(&c.emit(), from).unwrap();
        challenged += 1;
    }
    let o = join.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(challenged > 50, "the server kept the greeting going ({challenged} challenges)");
    assert!(t.elapsed() < Duration::from_secs(15), "the join ended by its own bound: {:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&addr) && err.contains("did not admit the circuit within 11 s"), "{err}");
}

#[test]
fn circuit_sim_takes_the_papers_opensim_to_50_kbps_where_the_viewer_holds_100() {
    let d = tmp("circuit-sim");
    let sim = |name: &str, extra: &[&str]| {
        let j = d.join(name);
        let mut args = vec!["circuit", "sim", "--throttle", "opensim:500", "--periodic", "--loss", "0:0%,20:5%", "-t", "120s", "--json", j.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = Command::new(HORDE).args(&args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (json(&j), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let at = |v: &serde_json::Value, t: u64| v["seconds"].as_array().unwrap().iter().find(|r| r["t_s"] == t).unwrap()["requested_kbps"].as_f64().unwrap();
    // The paper's analysis: every second, down to 50 kbit/s (× 1024: the viewer's kbit).
    let (p, line) = sim("paper.json", &["--throttle-period", "1", "--floor", "50"]);
    assert!(line.contains("opensim:500 period 1s floor 50") && line.contains("TCP-fair"), "{line}");
    assert!((at(&p, 15) - 768.0).abs() < 1e-6, "no loss: 1.5 × setting");
    assert!((at(&p, 40) - 51.2).abs() < 1e-6, "{}", at(&p, 40));
    // The viewer's: every 5 s, down to 0.2 × 500 = 100 (102.4) — 14 steps take 70 s.
    let (v, _) = sim("viewer.json", &[]);
    assert!(at(&v, 40) > 400.0 && (at(&v, 110) - 102.4).abs() < 1e-6, "{} {}", at(&v, 40), at(&v, 110));
    assert!((v["padhye_kbps"].as_f64().unwrap() - 110.6).abs() < 0.5, "{}", v["padhye_kbps"]);
    // Bad flags name the fix.
    for (args, why) in [
        (vec!["--loss", "5:1%,3:2%"], "the times must increase"),
        (vec!["--loss", "150%"], "0..=100"),
        (vec!["-t", "2h"], "1..=3600"),
        (vec!["--rtt", "0s"], "--rtt"),
        (vec!["--packet", "5"], "20..=65507"),
        (vec!["--throttle", "mongoose", "--floor", "50"], "belongs to the opensim throttle"),
    ] {
        let o = Command::new(HORDE).args(["circuit", "sim"]).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn a_regulated_scenario_takes_the_papers_opensim_period_and_floor() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("circuit-tuned");
    let sc = write(
        &d,
        "tuned.toml",
        "service = \"opensim\"\nplayers = 2\nduration = \"4s\"\n[regulation]\nthrottle = \"opensim:500\"\nthrottle_period_s = 1\nfloor_kbps = 50\n",
    );
    let out = d.join("out");
    let o = ok(&["run", sc.to_str().unwrap(), "--quiet", "-o", out.to_str().unwrap()]);
    assert!(o.contains("opensim:500 period 1s floor 50 throttle"), "{o}");
    let s = json(&out.join("summary.json"));
    assert_eq!(s["throttle"], "opensim:500 period 1s floor 50", "{}", s["throttle"]);
}
