//! Regression tests of the emulated environment's defects (issue "Hardening"), as root.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::emu_util::*;

const PAIR: &str =
    "name = \"p\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\ndelay = \"5ms\"\n";

/// Reported: `horde emu down ID` treated the id as a path: `emu down /tmp/v` deleted `/tmp/v`,
/// `emu down ../../../tmp/v2` deleted `/tmp/v2`, `emu down ''` deleted `/run/horde/emu` and
/// orphaned running experiments.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn regression_emu_down_never_deletes_a_path() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let id_rdown = horde_testkit::exp_id();
    let id_rdown = id_rdown.as_str();
    let _down_rdown = Down(id_rdown.to_string());
    let dir = tmp("reg-down");
    let victim = dir.join("v");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    let pair = write(&dir, "pair.toml", PAIR);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", id_rdown]);
    let rel = format!("../../..{}", victim.display());
    for id in [victim.to_str().unwrap(), rel.as_str(), "", ".", "..", &format!("{id_rdown}/../../x")] {
        let o = horde(&["emu", "down", id, "--purge"]);
        assert_eq!(o.status.code(), Some(2), "emu down {id:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("experiment id"), "{}", String::from_utf8_lossy(&o.stderr));
        let o = horde(&["emu", "cleanup", id]);
        assert_eq!(o.status.code(), Some(2), "emu cleanup {id:?}");
    }
    assert!(victim.join("inner").is_dir(), "nothing outside Horde's state was deleted");
    assert!(std::path::Path::new(&format!("/run/horde/emu/{id_rdown}/meta.json")).exists(), "the running experiment is intact");
    assert_eq!(namespaces(id_rdown).len(), 3);
    ok(&["emu", "down", id_rdown, "--purge"]);
}

/// Reported: `emu cleanup` killed a non-Horde process whose command line merely contained
/// a link emulator's, and it always removed every experiment on the machine.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn regression_cleanup_needs_an_id_and_kills_only_horde_processes() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let id_rgone = horde_testkit::exp_id();
    let id_rgone = id_rgone.as_str();
    let _down_rgone = Down(id_rgone.to_string());
    let id_rkeep = horde_testkit::exp_id();
    let id_rkeep = id_rkeep.as_str();
    let _down_rkeep = Down(id_rkeep.to_string());
    let dir = tmp("reg-cleanup");
    let o = horde(&["emu", "cleanup"]);
    assert_eq!(o.status.code(), Some(2), "cleanup without an id or --all does nothing");
    let pair = write(&dir, "pair.toml", PAIR);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", id_rkeep]);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", id_rgone]);
    let fake = lookalike(&dir, id_rgone);
    let dry = ok(&["emu", "cleanup", id_rgone, "--dry-run"]);
    assert!(dry.contains("would remove") && dry.contains(&format!("horde-{id_rgone}")), "{dry}");
    assert_eq!(namespaces(id_rgone).len(), 3, "a dry run removes nothing");
    ok(&["emu", "cleanup", id_rgone]);
    assert!(namespaces(id_rgone).is_empty());
    assert_eq!(namespaces(id_rkeep).len(), 3, "cleanup of one id leaves the other experiment alone");
    if let Some(mut f) = fake {
        assert!(f.try_wait().unwrap().is_none(), "the lookalike was killed by `cleanup` of the other id");
        let _ = f.kill();
        let _ = f.wait();
    }
    // (`cleanup --all` with a lookalike running is in `root::emu_cleanup`, on a machine of its
    // own: namespaces that stand in for the machine's network and state.)
    ok(&["emu", "cleanup", id_rkeep]);
    assert!(namespaces(id_rkeep).is_empty());
}

/// Reported: a switch loop was built with STP off and started a broadcast storm; overlapping
/// subnets were accepted and gave duplicate addresses.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn regression_switch_loops_and_reused_subnets_are_refused_before_anything_is_built() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let id_rreuse = horde_testkit::exp_id();
    let id_rreuse = id_rreuse.as_str();
    let _down_rreuse = Down(id_rreuse.to_string());
    let id_rloop = horde_testkit::exp_id();
    let id_rloop = id_rloop.as_str();
    let _down_rloop = Down(id_rloop.to_string());
    let dir = tmp("reg-loop");
    let looped = write(
        &dir,
        "loop.toml",
        "name = \"l\"\n[[node]]\nname = \"h\"\nkind = \"host\"\n[[node]]\nname = \"s1\"\nkind = \"switch\"\n[[node]]\nname = \"s2\"\nkind = \"switch\"\n\
         [[link]]\na = \"h\"\nb = \"s1\"\n[[link]]\na = \"s1\"\nb = \"s2\"\n[[link]]\na = \"s2\"\nb = \"s1\"\n",
    );
    let o = horde(&["emu", "up", looped.to_str().unwrap(), "--id", id_rloop]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("closes a loop"));
    assert!(namespaces(id_rloop).is_empty());
    let reused = write(
        &dir,
        "reuse.toml",
        "name = \"r\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[node]]\nname = \"c\"\nkind = \"host\"\n\
         [[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"10.9.0.0/24\"\n[[link]]\na = \"b\"\nb = \"c\"\nsubnet = \"10.9.0.0/24\"\n",
    );
    let o = horde(&["emu", "up", reused.to_str().unwrap(), "--id", id_rreuse]);
    assert_eq!(o.status.code(), Some(2));
    assert!(namespaces(id_rreuse).is_empty());
}

/// Reported: `emu link --trace FIFO` blocked the link daemon while it held the forwarder lock:
/// no packet crossed and other `emu link` calls hung. `emu link … --delay 50` silently meant
/// 50 s.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn regression_emu_link_cannot_block_the_link_emulator() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let id_rfifo = horde_testkit::exp_id();
    let id_rfifo = id_rfifo.as_str();
    let _down_rfifo = Down(id_rfifo.to_string());
    let dir = tmp("reg-fifo");
    let pair = write(&dir, "pair.toml", PAIR);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", id_rfifo, "--userspace"]);
    let fifo = dir.join("trace.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let t = Instant::now();
    let o = horde(&["emu", "link", id_rfifo, "a", "b", "--trace", fifo.to_str().unwrap()]);
    assert!(!o.status.success() && t.elapsed() < Duration::from_secs(3), "{:?} {}", t.elapsed(), String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("FIFO"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = horde(&["emu", "link", id_rfifo, "a", "b", "--delay", "50"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no unit"), "{}", String::from_utf8_lossy(&o.stderr));
    let t = Instant::now();
    let out = ok(&["emu", "link", id_rfifo, "a", "b", "--delay", "20ms"]);
    assert!(out.contains("delay 20.000 ms") && t.elapsed() < Duration::from_secs(2), "{out}");
    // A client that connects to the control socket and says nothing does not hold it.
    let _silent = std::os::unix::net::UnixStream::connect(format!("/run/horde/emu/{id_rfifo}/ctl.sock")).unwrap();
    let t = Instant::now();
    ok(&["emu", "link", id_rfifo, "a", "b"]);
    assert!(t.elapsed() < Duration::from_secs(7), "a silent control client held the daemon for {:?}", t.elapsed());
    ok(&["emu", "down", id_rfifo, "--purge"]);
}

/// Reported: SIGINT during `emu up` was ignored.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn regression_sigint_during_emu_up_rolls_back() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let id_rint = horde_testkit::exp_id();
    let id_rint = id_rint.as_str();
    let _down_rint = Down(id_rint.to_string());
    let dir = tmp("reg-upint");
    let star = write(&dir, "star.toml", "name = \"s\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = 800\n[[node]]\nname = \"s\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"s\"\nsubnet = \"10.0.0.0/22\"\n");
    let mut up = Command::new(HORDE).args(["emu", "up", star.to_str().unwrap(), "--id", id_rint]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t = Instant::now();
    while namespaces(id_rint).len() < 30 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(up.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let status = up.wait().unwrap();
    let took = t.elapsed();
    if status.success() {
        // The build finished before the signal landed: nothing to roll back; take it down.
        ok(&["emu", "down", id_rint, "--purge"]);
        eprintln!("the build won the race; not a failure of rollback");
    } else {
        assert_eq!(status.code(), Some(130), "interrupted `up` exits 130");
        assert!(took < Duration::from_secs(15), "took {took:?}");
        assert!(namespaces(id_rint).is_empty(), "rolled back: {} namespaces left", namespaces(id_rint).len());
        assert!(!std::path::Path::new(&format!("/run/horde/emu/{id_rint}")).exists());
    }
}

/// Reported (issue 13): a relative `--log` inside `emu exec` was reported as `log: c1.hlog`
/// though it lay in the node's directory, and `emu down` deleted it without a word.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn files_written_inside_nodes_are_named_and_kept() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let id_rfile = horde_testkit::exp_id();
    let id_rfile = id_rfile.as_str();
    let _down_rfile = Down(id_rfile.to_string());
    let dir = tmp("keep");
    let pair = write(&dir, "pair.toml", PAIR);
    ok(&["emu", "up", pair.to_str().unwrap(), "--id", id_rfile]);
    // `horde` inside the node is this binary even though it is not on PATH here.
    let o = horde(&["emu", "exec", id_rfile, "a", "--", "horde", "recv", "--udp", "0", "-t", "100ms", "--log", "c1.hlog"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("log: /run/horde/emu/{id_rfile}/node/a/c1.hlog")), "the log's real place: {err}");
    let keep = dir.join("kept");
    let out = ok(&["emu", "down", id_rfile, "--keep-to", keep.to_str().unwrap()]);
    assert!(out.contains("kept 1 file(s)"), "{out}");
    assert!(keep.join("a/c1.hlog").is_file(), "the node's log survived `down`");
    assert!(!std::path::Path::new(&format!("/run/horde/emu/{id_rfile}")).exists());
}

/// Reported (issue 13): `emu link` worked only on links the file already impaired, with no
/// way out named. `up --live` makes every link changeable.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn any_link_can_be_changed_when_brought_up_live() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let id_rplain = horde_testkit::exp_id();
    let id_rplain = id_rplain.as_str();
    let _down_rplain = Down(id_rplain.to_string());
    let dir = tmp("live");
    let plain = write(&dir, "plain.toml", &PAIR.replace("delay = \"5ms\"\n", ""));
    ok(&["emu", "up", plain.to_str().unwrap(), "--id", id_rplain]);
    let o = horde(&["emu", "link", id_rplain, "a", "b", "--delay", "10ms"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--live"), "the way out is named: {}", String::from_utf8_lossy(&o.stderr));
    ok(&["emu", "down", id_rplain, "--purge"]);
    ok(&["emu", "up", plain.to_str().unwrap(), "--id", id_rplain, "--live"]);
    let out = ok(&["emu", "link", id_rplain, "a", "b", "--delay", "10ms"]);
    assert!(out.contains("delay 10.000 ms"), "{out}");
    ok(&["emu", "down", id_rplain, "--purge"]);
}

/// Reported (issue 65): a run behind an overloaded link showed seconds of one-way delay, and
/// nothing in the report said where it waited. The link's queue stays bounded (100 ms at its
/// rate); the server side's TCP send queues hold the backlog, and the report now draws them.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn regression_the_report_shows_where_an_overloaded_link_s_backlog_waits() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("reg-backlog");
    write(
        &dir,
        "slow.toml",
        "name = \"slow\"\n[[node]]\nname = \"c\"\nkind = \"host\"\n[[node]]\nname = \"s\"\nkind = \"host\"\n[[link]]\na = \"c\"\nb = \"s\"\nrate = \"1mbit\"\ndelay = \"10ms\"\n",
    );
    let sc = write(
        &dir,
        "sc.toml",
        "service = \"wow\"\nplayers = 100\nduration = \"6s\"\nseed = 2\nstart_hour = 20\n[emu]\ntopology = \"slow.toml\"\nclients = [\"c\"]\nserver = \"s\"\n",
    );
    let out = dir.join("out");
    let o = Command::new(HORDE).args(["run", sc.to_str().unwrap(), "-q", "--out", out.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let q = &s["tcp_send_queue"];
    // the link holds 100 ms at 1 Mbit/s (12.5 kB); the server's sockets hold many times that
    let down_max = q["down_max"].as_u64().unwrap_or_else(|| panic!("{q}"));
    assert!(down_max > 20 * 12_500, "the server side's send queues: {q}");
    assert!(q["down"].as_array().unwrap().len() >= 5 && q["up"].as_array().is_some(), "{q}");
    let chart = std::fs::read_to_string(out.join("charts/tcp-send-queue.svg")).unwrap();
    assert!(chart.contains("server side → players: not yet sent") && chart.contains("class=\"series\""), "{chart}");
    assert!(std::fs::read_to_string(out.join("index.html")).unwrap().contains("tcp-send-queue.svg"));
}
