//! Regression tests of the emulated environment's defects (issue "Hardening"), as root. Like
//! every emulated-environment test they skip without root, except under CI.

mod emu_util;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use emu_util::*;

const PAIR: &str =
    "name = \"p\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\ndelay = \"5ms\"\n";

/// Reported: `horde emu down ID` treated the id as a path: `emu down /tmp/v` deleted `/tmp/v`,
/// `emu down ../../../tmp/v2` deleted `/tmp/v2`, `emu down ''` deleted `/run/horde/emu` and
/// orphaned running experiments.
#[test]
fn regression_emu_down_never_deletes_a_path() {
    if !root_or_skip("regression_emu_down_never_deletes_a_path") {
        return;
    }
    let dir = tmp("reg-down");
    let victim = dir.join("v");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    let pair = write(&dir, "pair.toml", PAIR);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", "rdown"]);
    let rel = format!("../../..{}", victim.display());
    for id in [victim.to_str().unwrap(), rel.as_str(), "", ".", "..", "rdown/../../x"] {
        let o = horde(&["emu", "down", id, "--purge"]);
        assert_eq!(o.status.code(), Some(2), "emu down {id:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("experiment id"), "{}", String::from_utf8_lossy(&o.stderr));
        let o = horde(&["emu", "cleanup", id]);
        assert_eq!(o.status.code(), Some(2), "emu cleanup {id:?}");
    }
    assert!(victim.join("inner").is_dir(), "nothing outside Horde's state was deleted");
    assert!(std::path::Path::new("/run/horde/emu/rdown/meta.json").exists(), "the running experiment is intact");
    assert_eq!(namespaces("rdown").len(), 3);
    ok(&["emu", "down", "rdown", "--purge"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reported: `emu cleanup` killed a non-Horde process whose command line merely contained
/// `emu daemon`, and it always removed every experiment on the machine.
#[test]
fn regression_cleanup_needs_an_id_and_kills_only_horde_processes() {
    if !root_or_skip("regression_cleanup_needs_an_id_and_kills_only_horde_processes") {
        return;
    }
    let dir = tmp("reg-cleanup");
    let o = horde(&["emu", "cleanup"]);
    assert_eq!(o.status.code(), Some(2), "cleanup without an id or --all does nothing");
    let pair = write(&dir, "pair.toml", PAIR);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", "rkeep"]);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", "rgone"]);
    let fake = lookalike(&dir, "rgone");
    let dry = ok(&["emu", "cleanup", "rgone", "--dry-run"]);
    assert!(dry.contains("would remove") && dry.contains("horde-rgone"), "{dry}");
    assert_eq!(namespaces("rgone").len(), 3, "a dry run removes nothing");
    ok(&["emu", "cleanup", "rgone"]);
    assert!(namespaces("rgone").is_empty());
    assert_eq!(namespaces("rkeep").len(), 3, "cleanup of one id leaves the other experiment alone");
    if let Some(mut f) = fake {
        assert!(f.try_wait().unwrap().is_none(), "the lookalike was killed by `cleanup rgone`");
        let _ = f.kill();
        let _ = f.wait();
    }
    // (`cleanup --all` with a lookalike running is in emu_cleanup.rs, a binary of its own:
    // it removes every experiment on the machine, other tests' included.)
    ok(&["emu", "cleanup", "rkeep"]);
    assert!(namespaces("rkeep").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reported: a switch loop was built with STP off and started a broadcast storm; overlapping
/// subnets were accepted and gave duplicate addresses.
#[test]
fn regression_switch_loops_and_reused_subnets_are_refused_before_anything_is_built() {
    if !root_or_skip("regression_switch_loops_and_reused_subnets_are_refused_before_anything_is_built") {
        return;
    }
    let dir = tmp("reg-loop");
    let looped = write(
        &dir,
        "loop.toml",
        "name = \"l\"\n[[node]]\nname = \"h\"\nkind = \"host\"\n[[node]]\nname = \"s1\"\nkind = \"switch\"\n[[node]]\nname = \"s2\"\nkind = \"switch\"\n\
         [[link]]\na = \"h\"\nb = \"s1\"\n[[link]]\na = \"s1\"\nb = \"s2\"\n[[link]]\na = \"s2\"\nb = \"s1\"\n",
    );
    let o = horde(&["emu", "up", looped.to_str().unwrap(), "--id", "rloop"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("closes a loop"));
    assert!(namespaces("rloop").is_empty());
    let reused = write(
        &dir,
        "reuse.toml",
        "name = \"r\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[node]]\nname = \"c\"\nkind = \"host\"\n\
         [[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"10.9.0.0/24\"\n[[link]]\na = \"b\"\nb = \"c\"\nsubnet = \"10.9.0.0/24\"\n",
    );
    let o = horde(&["emu", "up", reused.to_str().unwrap(), "--id", "rreuse"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(namespaces("rreuse").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reported: `emu link --trace FIFO` blocked the link daemon while it held the forwarder lock:
/// no packet crossed and other `emu link` calls hung. `emu link … --delay 50` silently meant
/// 50 s.
#[test]
fn regression_emu_link_cannot_block_the_link_emulator() {
    if !root_or_skip("regression_emu_link_cannot_block_the_link_emulator") {
        return;
    }
    let dir = tmp("reg-fifo");
    let pair = write(&dir, "pair.toml", PAIR);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", "rfifo", "--userspace"]);
    let fifo = dir.join("trace.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let t = Instant::now();
    let o = horde(&["emu", "link", "rfifo", "a", "b", "--trace", fifo.to_str().unwrap()]);
    assert!(!o.status.success() && t.elapsed() < Duration::from_secs(3), "{:?} {}", t.elapsed(), String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("FIFO"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = horde(&["emu", "link", "rfifo", "a", "b", "--delay", "50"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no unit"), "{}", String::from_utf8_lossy(&o.stderr));
    let t = Instant::now();
    let out = ok(&["emu", "link", "rfifo", "a", "b", "--delay", "20ms"]);
    assert!(out.contains("delay 20.000 ms") && t.elapsed() < Duration::from_secs(2), "{out}");
    // A client that connects to the control socket and says nothing does not hold it.
    let _silent = std::os::unix::net::UnixStream::connect("/run/horde/emu/rfifo/ctl.sock").unwrap();
    let t = Instant::now();
    ok(&["emu", "link", "rfifo", "a", "b"]);
    assert!(t.elapsed() < Duration::from_secs(7), "a silent control client held the daemon for {:?}", t.elapsed());
    ok(&["emu", "down", "rfifo", "--purge"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reported: SIGINT during `emu up` was ignored.
#[test]
fn regression_sigint_during_emu_up_rolls_back() {
    if !root_or_skip("regression_sigint_during_emu_up_rolls_back") {
        return;
    }
    let dir = tmp("reg-upint");
    let star = write(&dir, "star.toml", "name = \"s\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = 800\n[[node]]\nname = \"s\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"s\"\nsubnet = \"10.0.0.0/22\"\n");
    let mut up = Command::new(HORDE).args(["emu", "up", star.to_str().unwrap(), "--id", "rint"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t = Instant::now();
    while namespaces("rint").len() < 30 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(up.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let status = up.wait().unwrap();
    let took = t.elapsed();
    if status.success() {
        // The build finished before the signal landed: nothing to roll back; take it down.
        ok(&["emu", "down", "rint", "--purge"]);
        eprintln!("the build won the race; not a failure of rollback");
    } else {
        assert_eq!(status.code(), Some(130), "interrupted `up` exits 130");
        assert!(took < Duration::from_secs(15), "took {took:?}");
        assert!(namespaces("rint").is_empty(), "rolled back: {} namespaces left", namespaces("rint").len());
        assert!(!std::path::Path::new("/run/horde/emu/rint").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reported (issue 13): a relative `--log` inside `emu exec` was reported as `log: c1.hlog`
/// though it lay in the node's directory, and `emu down` deleted it without a word.
#[test]
fn files_written_inside_nodes_are_named_and_kept() {
    if !root_or_skip("files_written_inside_nodes_are_named_and_kept") {
        return;
    }
    let dir = tmp("keep");
    let pair = write(&dir, "pair.toml", PAIR);
    let _ = horde(&["emu", "down", "rfile", "--purge"]);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", "rfile"]);
    // `horde` inside the node is this binary even though it is not on PATH here.
    let o = horde(&["emu", "exec", "rfile", "a", "--", "horde", "recv", "--udp", "0", "-t", "100ms", "--log", "c1.hlog"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("log: /run/horde/emu/rfile/node/a/c1.hlog"), "the log's real place: {err}");
    let keep = dir.join("kept");
    let out = ok(&["emu", "down", "rfile", "--keep-to", keep.to_str().unwrap()]);
    assert!(out.contains("kept 1 file(s)"), "{out}");
    assert!(keep.join("a/c1.hlog").is_file(), "the node's log survived `down`");
    assert!(!std::path::Path::new("/run/horde/emu/rfile").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reported (issue 13): `emu link` worked only on links the file already impaired, with no
/// way out named. `up --live` makes every link changeable.
#[test]
fn any_link_can_be_changed_when_brought_up_live() {
    if !root_or_skip("any_link_can_be_changed_when_brought_up_live") {
        return;
    }
    let dir = tmp("live");
    let plain = write(&dir, "plain.toml", &PAIR.replace("delay = \"5ms\"\n", ""));
    let _ = horde(&["emu", "down", "rplain", "--purge"]);
    ok(&["emu", "up", plain.to_str().unwrap(), "--id", "rplain"]);
    let o = horde(&["emu", "link", "rplain", "a", "b", "--delay", "10ms"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--live"), "the way out is named: {}", String::from_utf8_lossy(&o.stderr));
    ok(&["emu", "down", "rplain", "--purge"]);
    ok(&["emu", "up", plain.to_str().unwrap(), "--id", "rplain", "--live"]);
    let out = ok(&["emu", "link", "rplain", "a", "b", "--delay", "10ms"]);
    assert!(out.contains("delay 10.000 ms"), "{out}");
    ok(&["emu", "down", "rplain", "--purge"]);
    let _ = std::fs::remove_dir_all(&dir);
}
