//! Bots on emulated hosts against an OpenArena server on another emulated host, behind a link
//! with 25 ms of delay each way (issue 11): the response time grows by the round trip. As root,
//! with Debian's openarena-server; both are required under CI=true.

use crate::emu_util::*;

/// Two client hosts behind a switch and a router, a server host behind a 25-ms link (also the
/// matrix test's network).
pub(super) const TOPO: &str = r#"
name = "oa"
[[node]]
name = "client"
kind = "host"
count = 2
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
subnet = "10.41.0.0/24"
[[link]]
a = "r1"
b = "sw"
[[link]]
a = "r1"
b = "server"
subnet = "10.42.0.0/24"
delay = "25ms"
"#;

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn bots_on_emulated_hosts_see_the_link_delay_in_their_response_time() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let id_oabots = horde_testkit::exp_id();
    let id_oabots = id_oabots.as_str();
    let _down_oabots = Down(id_oabots.to_string());
    if !horde_testkit::tool("/usr/games/openarena-server", "apt-get install openarena-server") {
        return;
    }
    let dir = tmp("oa-emu");
    let topo = write(&dir, "oa.toml", TOPO);
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", id_oabots]);
    let out = dir.join("out");
    let o = horde(&[
        "bots",
        "--emu",
        id_oabots,
        "--start-server",
        "-n",
        "4",
        "-t",
        "6s",
        "--ramp",
        "1s",
        "--warmup",
        "2s",
        "-o",
        out.to_str().unwrap(),
        "--json",
        "-",
    ]);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{text}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["entered"], 4, "{text}");
    assert_eq!(v["quit_cleanly"], 4, "{text}");
    // 50 ms of round trip on top of the frame wait (25 ms on average at sv_fps 20).
    let p50 = v["response_ms"]["p50"].as_f64().unwrap();
    assert!((55.0..=120.0).contains(&p50), "p50 {p50} ms: {text}");
    assert!(v["server"].as_str().unwrap().starts_with("10.42.0."), "the server runs on the emulated host: {}", v["server"]);
}
