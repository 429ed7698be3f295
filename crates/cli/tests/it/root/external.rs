//! External nodes (issue 24), as root: a veth pair of the test's own (a fresh name) stands in
//! for a NIC. Its one end (with an address and a route the machine "uses") is given to the
//! topology as an external node; its other end stays in the machine's namespace, where a `horde recv` takes a
//! flow from an emulated host across an impaired link and the NIC. The interface must come back
//! with its addresses and routes after `down`, and after `cleanup` following a SIGKILL of
//! `emu up` half-way.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::emu_util::*;

/// The stand-in NIC and its peer: a veth pair whose names no interface of the machine had.
fn names() -> &'static (String, String) {
    static NAMES: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let base = horde_testkit::ifname("hz", 13);
        (format!("{base}a"), format!("{base}b"))
    })
}

fn nic() -> &'static str {
    &names().0
}

fn far() -> &'static str {
    &names().1
}

fn ip(args: &[&str]) -> String {
    let o = Command::new("ip").args(args).output().expect("`ip` (iproute2) is installed: .ci/run installs it");
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Removes the stand-in pair, whatever the test did.
struct Pair;
impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", nic()]).stderr(Stdio::null()).status();
    }
}

fn make_pair() -> Pair {
    ip(&["link", "add", nic(), "type", "veth", "peer", "name", far()]);
    ip(&["addr", "add", "192.0.2.1/24", "dev", nic()]);
    ip(&["link", "set", nic(), "up"]);
    ip(&["route", "add", "198.51.100.0/24", "via", "192.0.2.254", "dev", nic()]);
    ip(&["addr", "add", "10.78.0.100/24", "dev", far()]);
    ip(&["link", "set", far(), "up"]);
    Pair
}

fn in_host() -> bool {
    std::path::Path::new(&format!("/sys/class/net/{}", nic())).exists()
}

/// The NIC is in the machine's namespace, up, with its address and its route.
fn assert_given_back(when: &str) {
    assert!(in_host(), "{when}: {} is not back", nic());
    let a = ip(&["-br", "addr", "show", nic()]);
    assert!(a.contains("192.0.2.1/24") && a.contains("UP"), "{when}: {a}");
    let r = ip(&["route", "show", "dev", nic()]);
    assert!(r.contains("198.51.100.0/24 via 192.0.2.254"), "{when}: {r}");
}

fn topology(force: bool, hosts: u32) -> String {
    let mut t = format!("name = \"ext\"\n[[node]]\nname = \"lab\"\nkind = \"external\"\ninterface = \"{}\"\n", nic());
    if force {
        t.push_str("force = true\n");
    }
    t.push_str("[[node]]\nname = \"sw\"\nkind = \"switch\"\n[[node]]\nname = \"h1\"\nkind = \"host\"\n");
    t.push_str("[[link]]\na = \"h1\"\nb = \"sw\"\nsubnet = \"10.78.0.0/24\"\ndelay = \"5ms\"\n[[link]]\na = \"lab\"\nb = \"sw\"\n");
    if hosts > 0 {
        t.push_str(&format!("[[node]]\nname = \"m\"\nkind = \"host\"\ncount = {hosts}\n[[node]]\nname = \"sw2\"\nkind = \"switch\"\n[[link]]\na = \"m\"\nb = \"sw2\"\nsubnet = \"10.79.0.0/16\"\n"));
    }
    t
}

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn an_interface_of_the_machine_joins_the_topology_and_comes_back() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few); // killed while it builds: a few tens of namespaces at a time
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("external");
    let _pair = make_pair();
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());

    // In use (an address, a route) and not forced: refused, nothing built, nothing taken.
    let unforced = write(&dir, "unforced.toml", &topology(false, 0));
    let o = horde(&["emu", "up", unforced.to_str().unwrap(), "--id", exp]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("in use") && err.contains("192.0.2.1/24") && err.contains("force = true"), "{err}");
    assert!(namespaces(exp).is_empty());
    assert_given_back("after the refusal");
    let none = horde_testkit::ifname("hn", 13);
    let missing = write(&dir, "missing.toml", &topology(true, 0).replace(nic(), &none));
    let o = horde(&["emu", "up", missing.to_str().unwrap(), "--id", exp]);
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("no interface `{none}`")), "{o:?}");

    // Forced: the NIC leaves the machine's namespace and carries a flow to the machine.
    let forced = write(&dir, "forced.toml", &topology(true, 0));
    ok(&["emu", "up", forced.to_str().unwrap(), "--id", exp]);
    assert!(!in_host(), "{} moved into the experiment", nic());
    let rlog = dir.join("r.hlog");
    let slog = dir.join("s.hlog");
    let mut cmd = Command::new(HORDE);
    cmd.args(["recv", "-b", "10.78.0.100", "-p", "9000", "--idle", "3s", "-l"]).arg(&rlog);
    let mut recv = recv_listening(cmd);
    ok(&["emu", "exec", exp, "h1", "--", HORDE, "send", "-a", "10.78.0.100:9000", "-C", "100", "-c", "100", "-z", "200", "-l", slog.to_str().unwrap()]);
    assert!(recv.wait().unwrap().success());
    let v: serde_json::Value = serde_json::from_str(&ok(&["decode", slog.to_str().unwrap(), rlog.to_str().unwrap(), "-q", "--json", "-"])).unwrap();
    let t = &v["total"];
    // the median: a mean moves with a few packets a busy machine held back (8.6 ms once in CI)
    let d = t["delay"]["p50_ms"].as_f64().unwrap();
    eprintln!("through {}: {} packets, lost {}, one-way delay median {d:.3} ms", nic(), t["packets"], t["loss"]["lost"]);
    assert_eq!((t["packets"].as_u64(), t["loss"]["lost"].as_u64()), (Some(200), Some(0)), "{t}");
    assert!((5.0..8.0).contains(&d), "the 5 ms link is on the way: median {d} ms");
    ok(&["emu", "down", exp, "--purge"]);
    assert_given_back("after down");

    // `emu up` killed once the NIC is in (while it still builds 1,000 more hosts), then cleanup.
    let big = write(&dir, "big.toml", &topology(true, 1000));
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    let mut up = Command::new(HORDE).args(["emu", "up", big.to_str().unwrap(), "--id", exp]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let t0 = Instant::now();
    while in_host() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_micros(200));
    }
    let still_building = up.try_wait().unwrap().is_none();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(up.id() as i32, libc::SIGKILL) };
    let _ = up.wait();
    assert!(!in_host(), "{} was taken", nic());
    assert!(still_building, "the kill should land while `emu up` builds");
    let out = ok(&["emu", "cleanup", exp]);
    eprintln!("{out}");
    assert!(namespaces(exp).is_empty());
    assert_given_back("after cleanup following a SIGKILL");
}
