//! IPv6 inside the emulation (issue 69, IMUNES's dual-stack nodes): a topology with
//! `ipv6 = true` gives every host and router an IPv6 address beside its IPv4 one, and a game
//! scenario runs over IPv6 between emulated hosts (`[emu] ipv6 = true`).

use crate::emu_util::*;

const TOPO: &str = r#"
name = "v6"
ipv6 = true
[[node]]
name = "client"
kind = "host"
count = 4
[[node]]
name = "sw"
kind = "switch"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "server"
kind = "host"
[[link]]
a = "client"
b = "sw"
subnet = "10.61.0.0/24"
[[link]]
a = "sw"
b = "r1"
[[link]]
a = "r1"
b = "server"
subnet = "10.62.0.0/24"
delay = "5ms"
"#;

/// 30 WoW players on 4 emulated hosts reach their server through a switch, a router (static
/// routes for both families) and a 5-ms link, over IPv6 only: every player connects, nothing
/// is mismatched, and the upstream delay shows the link's 5 ms.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_wow_run_goes_over_ipv6_between_emulated_hosts() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("v6-run");
    write(&dir, "v6.toml", TOPO);
    let sc = write(
        &dir,
        "sc.toml",
        "service = \"wow\"\nplayers = 30\nduration = \"6s\"\nseed = 3\n[emu]\ntopology = \"v6.toml\"\nclients = [\"client\"]\nserver = \"server\"\nipv6 = true\n",
    );
    let out = dir.join("out");
    let o = std::process::Command::new(HORDE).args(["run", sc.to_str().unwrap(), "-q", "--out", out.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // the server's address is the IPv6 one of 10.62.0.2
    assert!(err.contains("server server at fd68:6f72:a3e::2"), "{err}");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["server_connections"], 30, "every player connected over IPv6");
    assert_eq!(s["mismatched"], 0);
    let mut seen = 0;
    for c in s["analysis"]["categories"].as_array().unwrap() {
        let up = &c["up"];
        if up["received"].as_u64().unwrap_or(0) >= 20 {
            let p50 = up["delay_p50_ms"].as_f64().unwrap();
            assert!((5.0..30.0).contains(&p50), "{}: upstream delay p50 {p50} ms behind the 5-ms link", c["category"]);
            seen += 1;
        }
    }
    assert!(seen > 0, "{s}");
    // a topology without IPv6 refuses a scenario that asks for it, naming the fix
    write(&dir, "v4.toml", &TOPO.replace("ipv6 = true\n", ""));
    let sc4 = write(&dir, "sc4.toml", &std::fs::read_to_string(&sc).unwrap().replace("v6.toml", "v4.toml"));
    let o = std::process::Command::new(HORDE).args(["run", sc4.to_str().unwrap(), "-q", "--out", dir.join("out4").to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("has no IPv6; give it `ipv6 = true`"), "{err}");
}
