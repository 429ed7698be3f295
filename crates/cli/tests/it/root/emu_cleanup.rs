//! Crash recovery, as root, on a machine of the test's own (`horde_testkit::Sandbox`: its own
//! `/run`, `/sys` and network namespace, so `cleanup --all` sees only what the test made there):
//! `horde emu up` killed (SIGKILL) half-way, an experiment left with its link emulator and the
//! `emu exec` of a process in a node killed, and a `horde run` on an emulated topology killed
//! mid-run; then
//! `horde emu cleanup --all` must leave none of Horde's namespaces, interfaces, state or
//! processes there — and must not touch an experiment of the real machine (a bystander the
//! test brings up beside it) nor a process that only looks like Horde's.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use horde_testkit::{descendants, exp_id, wait_gone, Sandbox};

use crate::emu_util::*;

fn kill9(child: &mut Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
}

/// Horde on the sandbox's machine.
struct Machine(Sandbox);

impl Machine {
    fn new() -> Machine {
        Machine(Sandbox::start())
    }

    fn horde(&self, args: &[&str]) -> Command {
        let mut c = self.0.command(HORDE);
        c.args(args);
        c
    }

    fn ok(&self, args: &[&str]) -> String {
        let o: Output = self.horde(args).output().unwrap();
        assert!(o.status.success(), "horde {args:?} in the sandbox: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn list(&self, dir: &str) -> Vec<String> {
        std::fs::read_dir(self.0.path(dir)).map(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect()).unwrap_or_default()
    }

    /// Horde's namespaces of `exp` on this machine.
    fn namespaces(&self, exp: &str) -> Vec<String> {
        self.list("/run/netns").into_iter().filter(|n| n == &format!("horde-{exp}") || n.starts_with(&format!("horde-{exp}-"))).collect()
    }

    /// What Horde left: named namespaces, experiment state, interfaces (other than loopback).
    fn leftovers(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        (self.list("/run/netns"), self.list("/run/horde/emu"), self.0.interfaces().into_iter().filter(|i| i != "lo").collect())
    }

    /// The pid of `exp`'s link emulator (its `ready` file).
    fn daemon(&self, exp: &str) -> u32 {
        std::fs::read_to_string(self.0.path(&format!("/run/horde/emu/{exp}/ready"))).unwrap().trim().parse().unwrap()
    }
}

impl Drop for Machine {
    /// Whatever happened in the test, nothing of Horde's keeps the sandbox's namespaces alive.
    fn drop(&mut self) {
        let _ = self.horde(&["emu", "cleanup", "--all"]).output();
    }
}

fn alive(pid: u32) -> bool {
    !wait_gone(pid, Duration::ZERO)
}

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn sigkill_then_cleanup_leaves_nothing() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few); // killed while it builds: a few tens of namespaces at a time
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("cleanup");
    let pair = write(
        &dir,
        "pair.toml",
        "name = \"p\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\ndelay = \"5ms\"\n",
    );
    // A bystander on the real machine: someone else's experiment, which the sandbox's
    // `cleanup --all` must not see.
    let bystander = exp_id();
    let _bystander_down = Down(bystander.clone());
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", &bystander]);
    let bystander_daemon: u32 = std::fs::read_to_string(format!("/run/horde/emu/{bystander}/ready")).unwrap().trim().parse().unwrap();
    let m = Machine::new();

    // 1. `emu up` of 600 hosts, killed while it builds.
    let star = write(&dir, "star.toml", "name = \"star\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = 600\n[[node]]\nname = \"s\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"s\"\nsubnet = \"10.0.0.0/22\"\n");
    let kup = exp_id();
    let mut up = m.horde(&["emu", "up", star.to_str().unwrap(), "--id", &kup]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let t = Instant::now();
    while m.namespaces(&kup).len() < 50 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    kill9(&mut up);
    assert!(!m.namespaces(&kup).is_empty(), "the kill should land mid-way");

    // 2. A finished experiment with its link emulator, and a process started in a node whose
    // `emu exec` is killed (the command is told to end with it: PDEATHSIG).
    let kpair = exp_id();
    m.ok(&["emu", "up", pair.to_str().unwrap(), "--id", &kpair]);
    let mut exec = m.horde(&["emu", "exec", &kpair, "a", "--", "sleep", "300"]).spawn().unwrap();
    let t = Instant::now();
    let in_node = loop {
        let d = descendants(exec.id());
        if !d.is_empty() {
            break d;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "emu exec started nothing");
        std::thread::sleep(Duration::from_millis(20));
    };
    kill9(&mut exec);
    let daemon = m.daemon(&kpair);
    assert!(alive(daemon), "the link emulator runs");

    // 3. `horde run` with players on emulated hosts, killed mid-run (once players are on).
    write(&dir, "access.toml", &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topologies/access.toml")).unwrap());
    let sc = write(
        &dir,
        "sc.toml",
        "service = \"wow\"\nplayers = 100\nduration = \"60s\"\n[emu]\ntopology = \"access.toml\"\nclients = [\"client\"]\nserver = \"server\"\n",
    );
    let progress = dir.join("progress.jsonl");
    let mut run = m
        .horde(&["run", sc.to_str().unwrap(), "-q", "--progress-file", progress.to_str().unwrap(), "--out"])
        .arg(dir.join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !std::fs::read_to_string(&progress).unwrap_or_default().contains("\"progress\"") {
        assert!(t.elapsed() < Duration::from_secs(30), "the run never reported progress");
        std::thread::sleep(Duration::from_millis(50));
    }
    let run_tree = descendants(run.id());
    assert!(!run_tree.is_empty(), "the run has its server side and link emulator");
    kill9(&mut run);
    let (ns, state, _) = m.leftovers();
    assert!(ns.len() > 200 && state.len() >= 2, "there is something to clean: {} namespaces, state {state:?}", ns.len());

    // Regression: cleanup killed a non-Horde process whose command line read as a link emulator's.
    let mut fake = lookalike(&dir, &kpair);
    let out = m.ok(&["emu", "cleanup", "--all"]);
    eprintln!("{out}");
    if let Some(f) = &mut fake {
        assert!(f.try_wait().unwrap().is_none(), "cleanup --all killed a process that only looks like Horde's");
        let _ = f.kill();
        let _ = f.wait();
    }
    let (ns, state, ifs) = m.leftovers();
    assert!(ns.is_empty(), "namespaces left: {ns:?}");
    assert!(state.is_empty(), "state left: {state:?}");
    assert!(ifs.is_empty(), "interfaces left in the machine's namespace: {ifs:?}");
    // The server side dies with its parent (PDEATHSIG); daemons and node processes are killed;
    // on a busy machine they may take a moment to go.
    for p in run_tree.iter().chain(&in_node).chain([&daemon]) {
        assert!(wait_gone(*p, Duration::from_secs(2)), "process {p} of the experiments outlived cleanup");
    }
    // The real machine's experiment is untouched.
    assert!(alive(bystander_daemon), "the sandbox's cleanup --all killed the machine's link emulator");
    assert_eq!(namespaces(&bystander).len(), 3, "the machine's experiment keeps its namespaces");
    // And the sandbox's machine is usable again: the same id comes up.
    m.ok(&["emu", "up", pair.to_str().unwrap(), "--id", &kpair]);
    m.ok(&["emu", "down", &kpair, "--purge"]);
}

/// Issue 21: `emu cleanup` killed any process in a namespace that merely had a Horde-like name.
/// It acts only on experiments Horde recorded, and stops only processes Horde started.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn cleanup_leaves_namespaces_and_processes_horde_did_not_make() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let m = Machine::new();
    let ns = "horde-zzfake-h1";
    let ip = |args: &[&str]| m.0.command("ip").args(args).status().unwrap().success();
    assert!(ip(&["netns", "add", ns]));
    let mut stranger = m.0.command("ip").args(["netns", "exec", ns, "sleep", "30"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = m.ok(&["emu", "cleanup", "--all"]);
    let alive = stranger.try_wait().unwrap().is_none();
    let still = m.0.path(&format!("/run/netns/{ns}")).exists();
    let _ = stranger.kill();
    let _ = stranger.wait();
    assert!(alive, "cleanup killed a process Horde did not start: {out}");
    assert!(still, "cleanup deleted a namespace Horde has no record of: {out}");
}
