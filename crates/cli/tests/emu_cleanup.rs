//! Crash recovery, as root: `horde emu up` killed (SIGKILL) half-way, an experiment left with
//! its link emulator and a process inside a node, and a `horde run` on an emulated topology
//! killed mid-run; then `horde emu cleanup` must leave none of Horde's namespaces, interfaces,
//! state or processes. (Its own test binary: cleanup removes every experiment on the machine.)

mod emu_util;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use emu_util::*;

fn kill9(child: &mut std::process::Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
}

fn horde_pids(pattern: &[&str]) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).replace('\0', " ");
            cmd.starts_with(HORDE) && pattern.iter().all(|p| cmd.contains(p))
        })
        .collect()
}

fn leftovers() -> (Vec<String>, Vec<String>, Vec<String>) {
    let list = |d: &str, f: &dyn Fn(&str) -> bool| -> Vec<String> {
        std::fs::read_dir(d).map(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| f(n)).collect()).unwrap_or_default()
    };
    (list("/run/netns", &|n| n.starts_with("horde-")), list("/run/horde/emu", &|_| true), list("/sys/class/net", &|n| n.starts_with("hd")))
}

/// `cleanup --all` acts on the whole machine: the tests here take turns.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn sigkill_then_cleanup_leaves_nothing() {
    if !root_or_skip("sigkill_then_cleanup_leaves_nothing") {
        return;
    }
    let _machine = MACHINE.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tmp("cleanup");
    // 1. `emu up` of 600 hosts, killed while it builds.
    let star = write(&dir, "star.toml", "name = \"star\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = 600\n[[node]]\nname = \"s\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"s\"\nsubnet = \"10.0.0.0/22\"\n");
    let mut up = Command::new(HORDE).args(["emu", "up", star.to_str().unwrap(), "--id", "kup"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let t = Instant::now();
    while namespaces("kup").len() < 50 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    kill9(&mut up);
    assert!(!namespaces("kup").is_empty(), "the kill should land mid-way");

    // 2. A finished experiment with its link emulator and a process living in a node.
    let pair = write(
        &dir,
        "pair.toml",
        "name = \"p\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\ndelay = \"5ms\"\n",
    );
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", "kpair"]);
    let mut exec = Command::new(HORDE).args(["emu", "exec", "kpair", "a", "--", "sleep", "300"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    kill9(&mut exec); // the sleep lives on inside node a
    assert!(!horde_pids(&["emu", "daemon", "kpair"]).is_empty(), "the link emulator runs");

    // 3. `horde run` with players on emulated hosts, killed mid-run.
    write(&dir, "access.toml", &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topologies/access.toml")).unwrap());
    let sc = write(
        &dir,
        "sc.toml",
        "service = \"wow\"\nplayers = 100\nduration = \"60s\"\n[emu]\ntopology = \"access.toml\"\nclients = [\"client\"]\nserver = \"server\"\n",
    );
    let mut run = Command::new(HORDE)
        .args(["run", sc.to_str().unwrap(), "-q", "--out"])
        .arg(dir.join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while horde_pids(&["--serve-only"]).is_empty() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(2));
    kill9(&mut run);
    let (ns, state, _) = leftovers();
    assert!(ns.len() > 200 && state.len() >= 2, "there is something to clean: {} namespaces, state {state:?}", ns.len());

    // Regression: cleanup killed a non-Horde process whose command line read `emu daemon`.
    let mut fake = lookalike(&dir, "kpair");
    let out = ok(&["emu", "cleanup", "--all"]);
    if let Some(f) = &mut fake {
        assert!(f.try_wait().unwrap().is_none(), "cleanup --all killed a process that only looks like Horde's");
        let _ = f.kill();
        let _ = f.wait();
    }
    eprintln!("{out}");
    let t = Instant::now();
    let (ns, state, ifs) = leftovers();
    assert!(ns.is_empty(), "namespaces left: {ns:?}");
    assert!(state.is_empty(), "state left: {state:?}");
    assert!(ifs.is_empty(), "interfaces left in the host namespace: {ifs:?}");
    // The server side dies with its parent (PDEATHSIG); daemons and node processes are killed.
    while !(horde_pids(&["--serve-only"]).is_empty()) && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(horde_pids(&["emu", "daemon"]).is_empty(), "link emulators left");
    assert!(horde_pids(&["--serve-only"]).is_empty(), "server sides left");
    // Killed by cleanup; on a busy machine it may take a moment to go.
    let sleeping = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .any(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == "sleep\x00300\x00"))
    };
    let t = Instant::now();
    while sleeping() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!sleeping(), "the process started in node a is gone");
    // And the machine is usable again: the same ids come up.
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", "kpair"]);
    ok(&["emu", "down", "kpair", "--purge"]);
}

/// Issue 21: `emu cleanup` killed any process in a namespace that merely had a Horde-like name.
/// It acts only on experiments Horde recorded, and stops only processes Horde started.
#[test]
fn cleanup_leaves_namespaces_and_processes_horde_did_not_make() {
    if !root_or_skip("cleanup_leaves_namespaces_and_processes_horde_did_not_make") {
        return;
    }
    let _machine = MACHINE.lock().unwrap_or_else(|p| p.into_inner());
    let ns = "horde-zzfake-h1";
    let _ = Command::new("ip").args(["netns", "del", ns]).status();
    assert!(Command::new("ip").args(["netns", "add", ns]).status().unwrap().success());
    let mut stranger = Command::new("ip").args(["netns", "exec", ns, "sleep", "30"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = ok(&["emu", "cleanup", "--all"]);
    let alive = stranger.try_wait().unwrap().is_none();
    let still = std::path::Path::new("/run/netns").join(ns).exists();
    let _ = stranger.kill();
    let _ = stranger.wait();
    let _ = Command::new("ip").args(["netns", "del", ns]).status();
    assert!(alive, "cleanup killed a process Horde did not start: {out}");
    assert!(still, "cleanup deleted a namespace Horde has no record of: {out}");
}
