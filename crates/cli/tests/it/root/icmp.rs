//! ICMP traffic (`send -T icmp`, `recv --icmp`), as root: echo requests carrying Horde's header
//! cross a 20 ms emulated link — one-way delay from the receiver's log, round trips from the
//! target kernel's replies — and consent holds before and after admission: a target that does
//! not answer pings gets nothing but probes, and one that stops answering stops getting
//! traffic within 2 s. Without root both commands say what to do.

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::emu_util::*;

const PAIR: &str = "name = \"icmp\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"10.9.0.0/30\"\ndelay = \"20ms\"\n";

fn records(p: &std::path::Path) -> Vec<horde_wire::Record> {
    horde_stats::load(&std::fs::read(p).unwrap()).unwrap().records
}

/// `b` ignores pings (1) or answers them (0): its own namespace's setting.
fn ignore_pings(exp: &str, on: bool) {
    let cmd = format!("echo {} > /proc/sys/net/ipv4/icmp_echo_ignore_all", on as u8);
    ok(&["emu", "exec", exp, "b", "--", "sh", "-c", &cmd]);
}

fn recv_on_b(exp: &str, log: &std::path::Path, json: &std::path::Path, idle: &str) -> std::process::Child {
    let c = Command::new(HORDE)
        .args(["emu", "exec", exp, "b", "--", HORDE, "recv", "--icmp", "-b", "10.9.0.2", "--idle", idle, "-l"])
        .arg(log)
        .arg("--json")
        .arg(json)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    c
}

/// `horde send -T icmp --dst 10.9.0.2 ARGS` on node `a`.
fn send_from_a(exp: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["emu", "exec", exp, "a", "--", HORDE, "send", "-T", "icmp", "--dst", "10.9.0.2"];
    all.extend_from_slice(args);
    horde(&all)
}

fn ok_output(o: std::process::Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn real_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn echo_requests_cross_a_20ms_link_and_go_only_while_the_target_answers() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("icmp");
    let topo = write(&dir, "pair.toml", PAIR);
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", exp]);
    let path = |f: &str| dir.join(f);
    let p = |f: &str| path(f).to_str().unwrap().to_string();

    // 1. 200 requests a second for 3 s, measured both ways.
    let recv = recv_on_b(exp, &path("r.hlog"), &path("r.json"), "3s");
    let out = ok_output(send_from_a(exp, &["-C", "200", "-c", "100", "-t", "3s", "--meter", "rtt", "-l", &p("s.hlog"), "--json", &p("s.json")]));
    assert!(recv.wait_with_output().unwrap().status.success());
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path("s.json")).unwrap()).unwrap();
    let f = &s["flows"][0];
    assert_eq!((f["transport"].as_str(), f["packets"].as_u64(), f["echoes"].as_u64()), (Some("icmp"), Some(600), Some(600)), "{out}");
    let rtt_ms = f["rtt"]["mean_us"].as_f64().unwrap() / 1e3;
    assert!((40.0..44.0).contains(&rtt_ms), "round trip {rtt_ms} ms over a 20 ms link each way");
    let d: serde_json::Value = serde_json::from_str(&ok(&["decode", &p("s.hlog"), &p("r.hlog"), "-q", "--json", "-"])).unwrap();
    let t = &d["total"];
    let owd = t["delay"]["mean_ms"].as_f64().unwrap();
    assert!((20.0..22.0).contains(&owd), "one-way delay {owd} ms over a 20 ms link");
    assert_eq!((t["loss"]["expected"].as_u64(), t["loss"]["lost"].as_u64()), (Some(600), Some(0)), "{t}");
    let ends: Vec<horde_wire::Endpoint> = records(&path("r.hlog")).iter().filter_map(horde_wire::Endpoint::of).collect();
    assert!(
        ends.iter().any(|e| e.end == horde_wire::RecordKind::Source && e.addr.ip().to_string() == "10.9.0.1" && e.protocol == horde_wire::log::PROTO_ICMP),
        "{ends:?}"
    );
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path("r.json")).unwrap()).unwrap();
    assert_eq!(r["packets"].as_u64(), Some(600), "consent probes are not counted as traffic: {r}");

    // 2. A target that ignores pings never consented: nothing but probes goes to it.
    ignore_pings(exp, true);
    let recv = recv_on_b(exp, &path("r2.hlog"), &path("r2.json"), "4s");
    let o = send_from_a(exp, &["-C", "1000", "-c", "100", "-t", "2s", "--connect-timeout", "2s"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("no echo reply from 10.9.0.2") && err.contains("has not consented"), "{err}");
    assert!(recv.wait_with_output().unwrap().status.success());
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path("r2.json")).unwrap()).unwrap();
    assert_eq!(r["packets"].as_u64(), Some(0), "{r}");

    // 3. A target that stops answering mid-run stops getting traffic within 2 s.
    ignore_pings(exp, false);
    let recv = recv_on_b(exp, &path("r3.hlog"), &path("r3.json"), "3s");
    let switch = std::thread::spawn({
        let exp = exp.to_string();
        move || {
            std::thread::sleep(Duration::from_millis(3000));
            let at = real_ns();
            ignore_pings(&exp, true);
            at
        }
    });
    let send = send_from_a(exp, &["-C", "500", "-c", "64", "-t", "8s", "--json", &p("s3.json")]);
    let stopped_answering = switch.join().unwrap();
    assert!(send.status.success(), "{send:?}");
    let said = String::from_utf8_lossy(&send.stderr);
    assert!(said.contains("consent:") && said.contains("1 flow(s) ended"), "{said}");
    assert!(recv.wait_with_output().unwrap().status.success());
    let arrivals: Vec<u64> = records(&path("r3.hlog")).iter().filter(|r| r.kind.is_packet()).map(|r| r.t_b).collect();
    let last = *arrivals.iter().max().unwrap();
    assert!(arrivals.iter().filter(|&&t| t > stopped_answering).count() > 0, "it was sending when the target stopped answering");
    let after = last.saturating_sub(stopped_answering) as f64 / 1e9;
    assert!(last < stopped_answering + 2_000_000_000, "traffic went on {after:.3} s after the target's last answer");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path("s3.json")).unwrap()).unwrap();
    assert_eq!(s["refusals"]["consent_expired"].as_u64(), Some(1), "{s}");
    assert!(s["flows"][0]["unsent"].as_u64().unwrap() > 1_000, "{s}");
    eprintln!("traffic stopped {after:.3} s after the target stopped answering");
    ok(&["emu", "down", exp, "--purge"]);
}
