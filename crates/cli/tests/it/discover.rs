//! `horde discover` (D-ITG's discovery request) against a real `horde recv` on loopback: the
//! receiver says what it is, the round trip and clock offset are measured, nothing is admitted;
//! another key, a closed port and bad flags each get a clear answer.

use crate::common::*;

fn make_key(s: &Scratch, name: &str) -> std::path::PathBuf {
    let k = s.path(name);
    assert!(horde().args(["key", "--out"]).arg(&k).output().unwrap().status.success());
    k
}

#[test]
fn a_receiver_says_what_it_is_and_admits_nothing() {
    let s = Scratch::new("discover");
    let key = make_key(&s, "run.key");
    let other = make_key(&s, "other.key");
    let k = key.to_str().unwrap();
    let report = s.path("recv.json");
    let recv = Recv::start(&["--udp", "0", "--tcp", "0", "--key-file", k, "--json", report.to_str().unwrap()]);
    let dst = recv.addrs[0].to_string();

    let out = run(horde().args(["discover", &dst, "--key-file", k, "-n", "5", "--json", "-"]));
    assert!(out.status.success(), "{}", text(&out));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["role"], "receiver");
    assert_eq!(d["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        (d["keyed"].as_bool(), d["echoes"].as_bool(), d["reverse_bulk"].as_bool(), d["icmp"].as_bool()),
        (Some(true), Some(true), Some(true), Some(false))
    );
    assert_eq!((d["udp_ports"].as_u64(), d["tcp_ports"].as_u64(), d["flows_now"].as_u64(), d["flows_max"].as_u64()), (Some(1), Some(1), Some(0), Some(65_536)));
    assert_eq!(d["replies"], 5);
    let rtt = d["rtt_ms"].as_f64().unwrap();
    assert!(rtt > 0.0 && rtt < 50.0, "loopback round trip {rtt} ms");
    // Same host, same clock: the estimate is within its own bound (plus a scheduling margin).
    let (offset, bound) = (d["clock_offset_ms"].as_f64().unwrap(), d["clock_offset_bound_ms"].as_f64().unwrap());
    assert!(offset.abs() <= bound + 1.0, "offset {offset} ms, bound {bound} ms");

    // People's form names the same things.
    let out = run(horde().args(["discover", &dst, "--key-file", k]));
    let t = text(&out);
    assert!(out.status.success() && t.contains("receiver") && t.contains("run key: yes") && t.contains("reverse bulk: yes"), "{t}");

    // Another key: silence, and the message says what that can mean.
    let other = other.to_str().unwrap();
    let out = run(horde().args(["discover", &dst, "--key-file", other, "-t", "500ms"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("another run key"), "{}", text(&out));

    let (code, _) = recv.stop();
    assert_eq!(code, 130);
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    // 5 + 5 answered (the default is 5 samples), each after one challenge; nothing admitted.
    assert_eq!(r["discoveries"], 10, "{r}");
    assert_eq!(r["refusals"]["challenges"], 2, "one challenge per discover run (the cookie then serves every sample)");
    let bad = r["refusals"]["bad_mac"].as_u64().unwrap();
    assert!((3..=5).contains(&bad), "the other key's requests, one every 100 ms for 500 ms, all unanswered: {bad}");
    assert_eq!((r["packets"].as_u64(), r["flows"].as_object().map(|f| f.len())), (Some(0), Some(0)));
}

#[test]
fn a_closed_port_and_bad_flags_are_named() {
    // An ephemeral port nobody listens on: bind one, read it, close it.
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = run(horde().args(["discover", &format!("127.0.0.1:{port}"), "-t", "1s"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("nothing listens on UDP"), "{}", text(&out));
    for bad in [&["discover", "127.0.0.1:9000", "-n", "0"][..], &["discover", "127.0.0.1:9000", "-t", "0s"], &["discover", "nohost"]] {
        let out = run(horde().args(bad));
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out));
    }
}
