//! Routing daemons on emulated routers (FRR from Debian), as root: a 4-router OSPF ring and a
//! 3-router RIP line converge, carry traffic end to end, and recover from a link taken down;
//! nodes have their own hostname, /etc/hosts and daemon state. In CI (root, FRR installed by
//! .ci/run) nothing here skips.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::emu_util::*;

fn frr_or_fail() -> bool {
    horde_testkit::tool("/usr/lib/frr/zebra", "apt-get install frr")
}

fn exec(exp: &str, node: &str, cmd: &[&str]) -> String {
    let mut args = vec!["emu", "exec", exp, node, "--"];
    args.extend_from_slice(cmd);
    let o = horde(&args);
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// The address of a host as `emu ls ID` shows it.
fn addr_of(exp: &str, node: &str) -> String {
    let ls = ok(&["emu", "ls", exp]);
    ls.lines().find(|l| l.split_whitespace().next() == Some(node)).and_then(|l| l.split_whitespace().last()).expect("the node in emu ls").to_string()
}

/// Waits until `node`'s kernel has a route to `dst` (a prefix) whose text contains `want`.
fn route_via(exp: &str, node: &str, dst: &str, want: &str, within: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let family = if dst.contains(':') { "-6" } else { "-4" };
        let r = exec(exp, node, &["ip", family, "route", "show", dst]);
        if r.contains(want) {
            return t.elapsed();
        }
        assert!(t.elapsed() < within, "{node}: no route to {dst} containing `{want}` after {within:?}: {r:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

struct Down(String);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = horde(&["emu", "down", &self.0, "--purge"]);
    }
}

fn up(dir: &Path, topo: &str) -> (String, Down) {
    let f = write(dir, "topo.toml", topo);
    let out = ok(&["emu", "up", f.to_str().unwrap()]);
    let exp = out.lines().last().unwrap().trim().to_string();
    (exp.clone(), Down(exp))
}

/// A receiver on `dst` and a 1,000 pkt/s sender from `src` for `secs` seconds, both logging.
fn flow(exp: &str, dir: &Path, src: &str, dst: &str, dst_ip: &str, secs: u32) -> (Child, Child, std::path::PathBuf) {
    let rlog = dir.join("flow-r.hlog");
    let recv = Command::new(HORDE)
        .args(["emu", "exec", exp, dst, "--", HORDE, "recv", "-b", dst_ip, "-p", "9000", "--idle", "30s", "-t", &format!("{}s", secs + 3), "-l"])
        .arg(&rlog)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let send = Command::new(HORDE)
        .args([
            "emu",
            "exec",
            exp,
            src,
            "--",
            HORDE,
            "send",
            "-a",
            &std::net::SocketAddr::new(dst_ip.parse().unwrap(), 9000).to_string(),
            "--rate",
            "1000",
            "--size",
            "64",
            "-t",
            &format!("{secs}s"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (recv, send, rlog)
}

/// Arrival times (real ns) of what the receiver logged, in order.
fn arrivals(rlog: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = crate::common::records(rlog).iter().filter(|r| r.kind == horde_wire::RecordKind::Received).map(|r| r.t_b).collect();
    v.sort_unstable();
    v
}

/// The longest silence between arrivals after `from` (real ns), in ms, and how many arrived
/// after `from`. (Counting after the longest gap instead would be wrong when the failover
/// itself leaves no gap longer than the host's scheduling noise: CI once saw a 13-ms gap late
/// in the flow and "581 after it" with 7,990 of 8,000 arrived.)
fn outage(arr: &[u64], from: u64) -> (f64, usize) {
    let i = arr.partition_point(|&t| t < from).max(1);
    let gap = arr[i - 1..].windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    (gap as f64 / 1e6, arr.len() - arr.partition_point(|&t| t < from))
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

const RING: &str = r#"
name = "ospf-ring"
[[node]]
name = "r"
kind = "router"
count = 4
routing = "ospf"
timers = "fast"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h3"
kind = "host"
[[link]]
a = "r1"
b = "r2"
[[link]]
a = "r2"
b = "r3"
[[link]]
a = "r3"
b = "r4"
[[link]]
a = "r4"
b = "r1"
cost = 100
[[link]]
a = "h1"
b = "r1"
subnet = "10.1.0.0/24"
[[link]]
a = "h3"
b = "r3"
subnet = "10.3.0.0/24"
"#;

/// Acceptance (issue 24): a 4-router OSPF ring converges, traffic crosses it along the cheap
/// side, the link on that side is taken down and the flow fails over to the other side; the
/// outage is measured. The nodes have their own hostnames, hosts file and FRR state, and
/// `vtysh` works in a router through `emu exec`.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn an_ospf_ring_converges_and_fails_over() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    // nearly alone: OSPF's fast timers (1-s hellos, 3-s dead interval) time the failover; beside
    // the whole suite a starved ospfd once took 3.9 s to reroute (alone: 18 ms to 1.2 s)
    let _share = horde_testkit::share(horde_testkit::Load::Quiet);
    if !frr_or_fail() {
        return;
    }
    let dir = tmp("ospf-ring");
    let (exp, _down) = up(&dir, RING);
    let h3 = addr_of(&exp, "h3");
    let r2 = addr_of(&exp, "r2");
    // converged: r1 reaches h3's subnet through r2 (cost 20 against 110 through r4)
    let took = route_via(&exp, "r1", "10.3.0.0/24", "proto ospf", Duration::from_secs(60));
    route_via(&exp, "r3", "10.1.0.0/24", "proto ospf", Duration::from_secs(30));
    eprintln!("OSPF ring converged {:.1} s after up", took.as_secs_f64());
    let neighbours = exec(&exp, "r1", &["vtysh", "-c", "show ip ospf neighbor"]);
    assert_eq!(neighbours.matches("Full").count(), 2, "r1 has two full adjacencies: {neighbours}");
    // identity: hostnames, the hosts file, each router its own FRR
    assert_eq!(exec(&exp, "h1", &["hostname"]).trim(), "h1");
    assert!(exec(&exp, "h1", &["cat", "/etc/hosts"]).contains(&format!("{h3}\th3")), "every node by name");
    let c1 = exec(&exp, "r1", &["vtysh", "-c", "show running-config"]);
    let c2 = exec(&exp, "r2", &["vtysh", "-c", "show running-config"]);
    assert!(c1.contains("hostname r1") && c2.contains("hostname r2"), "{c1}\n{c2}");
    let pid = |r: &str| std::fs::read_to_string(format!("/run/horde/emu/{exp}/node/{r}/fs/run/frr/zebra.pid")).unwrap();
    assert_ne!(pid("r1"), pid("r2"), "two zebras, each with its own state");
    // a flow h1 → h3; at 3 s the r1–r2 link goes down
    let (mut recv, mut send, rlog) = flow(&exp, &dir, "h1", "h3", &h3, 8);
    std::thread::sleep(Duration::from_secs(3));
    let cut = unix_ns();
    ok(&["emu", "link", &exp, "r1", "r2", "--down"]);
    assert!(ok(&["emu", "ls", &exp]).contains("link r1 – r2: down"));
    route_via(&exp, "r1", "10.3.0.0/24", "proto ospf", Duration::from_secs(10));
    assert!(send.wait().unwrap().success());
    let _ = recv.wait();
    let arr = arrivals(&rlog);
    let (gap_ms, after) = outage(&arr, cut);
    eprintln!("OSPF ring (fast timers, link down): outage {gap_ms:.0} ms, {after} packets after the cut, {} of ~8000 arrived", arr.len());
    assert!(arr.len() > 5_000 && after > 2_000, "the flow goes on through r4: {} arrived, {after} after the cut", arr.len());
    assert!(gap_ms < 3_000.0, "fails over within the dead interval: {gap_ms} ms");
    let now = exec(&exp, "r1", &["ip", "route", "show", "10.3.0.0/24"]);
    assert!(!now.contains(&r2), "r1 routes around the cut: {now}");
    // and back
    ok(&["emu", "link", &exp, "r1", "r2", "--up"]);
    route_via(&exp, "r1", "10.3.0.0/24", "eth0", Duration::from_secs(30));
    assert!(!ok(&["emu", "ls", &exp]).contains("down ("));
}

const LINE: &str = r#"
name = "rip-line"
[[node]]
name = "r"
kind = "router"
count = 3
routing = "rip"
timers = "fast"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h3"
kind = "host"
[[link]]
a = "r1"
b = "r2"
[[link]]
a = "r2"
b = "r3"
[[link]]
a = "h1"
b = "r1"
subnet = "10.1.0.0/24"
[[link]]
a = "h3"
b = "r3"
subnet = "10.3.0.0/24"
"#;

/// Acceptance (issue 24): a 3-router RIP line converges and carries traffic end to end; its
/// middle link goes down (the flow stops: a line has no other way) and comes back, and the time
/// until the flow resumes is measured.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_rip_line_converges_and_recovers() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    if !frr_or_fail() {
        return;
    }
    let dir = tmp("rip-line");
    let (exp, _down) = up(&dir, LINE);
    let h3 = addr_of(&exp, "h3");
    let took = route_via(&exp, "r1", "10.3.0.0/24", "proto rip", Duration::from_secs(60));
    route_via(&exp, "r3", "10.1.0.0/24", "proto rip", Duration::from_secs(30));
    eprintln!("RIP line converged {:.1} s after up", took.as_secs_f64());
    // 16 s: 3 s before the failure, 2 s down, up to 8 s to recover, and time after it to count
    let (mut recv, mut send, rlog) = flow(&exp, &dir, "h1", "h3", &h3, 16);
    std::thread::sleep(Duration::from_secs(3));
    ok(&["emu", "link", &exp, "r2", "r3", "--down"]);
    std::thread::sleep(Duration::from_secs(2));
    let restored = unix_ns();
    ok(&["emu", "link", &exp, "r2", "r3", "--up"]);
    assert!(send.wait().unwrap().success());
    let _ = recv.wait();
    let arr = arrivals(&rlog);
    let first_after = arr.iter().find(|&&t| t > restored).copied();
    let recovery_ms = first_after.map(|t| (t - restored) as f64 / 1e6);
    eprintln!("RIP line (fast timers): flow back {recovery_ms:?} ms after the link came up; {} of ~16000 arrived", arr.len());
    let recovery_ms = recovery_ms.expect("the flow resumes once the link is back");
    assert!(recovery_ms < 8_000.0, "{recovery_ms} ms");
    assert!(arr.len() > 4_000, "{}", arr.len());
}

/// Routing = "bgp" end to end (issue 24): the same 3-router line, each router its own AS (eBGP
/// between neighbours, `redistribute connected`); the hosts' subnets are learnt over BGP across
/// two AS hops, traffic crosses the line without loss, and withdrawing the middle link (down)
/// takes the route away at the far end until it comes back.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_bgp_line_converges_and_carries_traffic() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    if !frr_or_fail() {
        return;
    }
    let dir = tmp("bgp-line");
    let (exp, _down) = up(&dir, &LINE.replace("rip-line", "bgp-line").replace("routing = \"rip\"", "routing = \"bgp\""));
    let h3 = addr_of(&exp, "h3");
    let took = route_via(&exp, "r1", "10.3.0.0/24", "proto bgp", Duration::from_secs(60));
    route_via(&exp, "r3", "10.1.0.0/24", "proto bgp", Duration::from_secs(30));
    eprintln!("BGP line converged {:.1} s after up", took.as_secs_f64());
    // two AS hops: r1 learnt h3's subnet through AS 65002 from AS 65003
    let bgp = exec(&exp, "r1", &["vtysh", "-c", "show ip bgp 10.3.0.0/24"]);
    assert!(bgp.contains("65002 65003"), "{bgp}");
    let t = probe(&exp, &dir, "h1", "h3", &h3, &["-C", "100", "-c", "100", "-z", "100"], "bgp");
    assert_eq!((t["packets"].as_u64(), t["loss"]["lost"].as_u64()), (Some(100), Some(0)), "{t}");
    ok(&["emu", "link", &exp, "r2", "r3", "--down"]);
    let t0 = Instant::now();
    let withdrawn = loop {
        if !exec(&exp, "r1", &["ip", "route", "show", "10.3.0.0/24"]).contains("proto bgp") {
            break t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "r1 keeps a BGP route to 10.3.0.0/24 with r2–r3 down");
        std::thread::sleep(Duration::from_millis(200));
    };
    ok(&["emu", "link", &exp, "r2", "r3", "--up"]);
    let back = route_via(&exp, "r1", "10.3.0.0/24", "proto bgp", Duration::from_secs(60));
    eprintln!("BGP line: route withdrawn {:.1} s after the link went down, back {:.1} s after it came up", withdrawn.as_secs_f64(), back.as_secs_f64());
}

/// Acceptance (issue 69): the same ring with `ipv6 = true` — OSPFv3 beside OSPF, every address
/// and subnet's /64 derived from its IPv4 one — converges, carries a flow over IPv6 along the
/// cheap side, and fails over when that side's link goes down.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn an_ospfv3_ring_converges_and_fails_over_over_ipv6() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Quiet); // fast timers time the failover
    if !frr_or_fail() {
        return;
    }
    let dir = tmp("ospf6-ring");
    let (exp, _down) = up(&dir, &RING.replace("name = \"ospf-ring\"", "name = \"ospf6-ring\"\nipv6 = true"));
    // h3 is the first host of 10.3.0.0/24: 10.3.0.2 → fd68:6f72:a03::2
    let h3 = "fd68:6f72:a03::2";
    assert!(exec(&exp, "h3", &["ip", "-6", "addr", "show", "dev", "eth0"]).contains(&format!("{h3}/64")));
    let took = route_via(&exp, "r1", "fd68:6f72:a03::/64", "proto ospf", Duration::from_secs(60));
    route_via(&exp, "r3", "fd68:6f72:a01::/64", "proto ospf", Duration::from_secs(30));
    eprintln!("OSPFv3 ring converged {:.1} s after up", took.as_secs_f64());
    let neighbours = exec(&exp, "r1", &["vtysh", "-c", "show ipv6 ospf6 neighbor"]);
    assert_eq!(neighbours.matches("Full").count(), 2, "r1 has two full OSPFv3 adjacencies: {neighbours}");
    // IPv4 is still there beside it
    route_via(&exp, "r1", "10.3.0.0/24", "proto ospf", Duration::from_secs(30));
    let via_r2 = exec(&exp, "r1", &["ip", "-6", "route", "show", "fd68:6f72:a03::/64"]);
    assert!(via_r2.contains("dev eth0"), "the cheap side first (r1–r2 is r1's eth0): {via_r2}");
    let (mut recv, mut send, rlog) = flow(&exp, &dir, "h1", "h3", h3, 8);
    std::thread::sleep(Duration::from_secs(3));
    let cut = unix_ns();
    ok(&["emu", "link", &exp, "r1", "r2", "--down"]);
    route_via(&exp, "r1", "fd68:6f72:a03::/64", "dev eth1", Duration::from_secs(10));
    assert!(send.wait().unwrap().success());
    let _ = recv.wait();
    let arr = arrivals(&rlog);
    let (gap_ms, after) = outage(&arr, cut);
    eprintln!("OSPFv3 ring (fast timers, link down, over IPv6): outage {gap_ms:.0} ms, {after} packets after the cut, {} of ~8000 arrived", arr.len());
    assert!(arr.len() > 5_000 && after > 2_000, "the flow goes on through r4: {} arrived, {after} after the cut", arr.len());
    assert!(gap_ms < 3_000.0, "fails over within the dead interval: {gap_ms} ms");
    // and back: the addresses stayed (keep_addr_on_down), the route returns to the cheap side
    ok(&["emu", "link", &exp, "r1", "r2", "--up"]);
    route_via(&exp, "r1", "fd68:6f72:a03::/64", "dev eth0", Duration::from_secs(30));
}

/// Issue 69: the RIP line with `ipv6 = true` — RIPng beside RIP — converges over IPv6, and a
/// host reaches the far host's IPv6 address across it.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_ripng_line_converges_over_ipv6() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    if !frr_or_fail() {
        return;
    }
    let dir = tmp("ripng-line");
    let (exp, _down) = up(&dir, &LINE.replace("name = \"rip-line\"", "name = \"ripng-line\"\nipv6 = true"));
    let took = route_via(&exp, "r1", "fd68:6f72:a03::/64", "proto ripng", Duration::from_secs(60));
    eprintln!("RIPng line converged {:.1} s after up", took.as_secs_f64());
    route_via(&exp, "r3", "fd68:6f72:a01::/64", "proto ripng", Duration::from_secs(30));
    let ping = exec(&exp, "h1", &["ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd68:6f72:a03::2"]);
    assert!(ping.contains("3 received"), "{ping}");
}
