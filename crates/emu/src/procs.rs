//! The processes of an experiment: which ones Horde started (recorded with their start times),
//! its link emulator daemons (recognised by executable, exact arguments and namespace), and
//! stopping them. Nothing here trusts a command line alone.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::{check_id, ns, state_dir, EmuError};

/// Pids of processes whose network namespace is one of `inodes`.
pub fn processes_in(inodes: &[u64]) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let me = std::process::id() as i32;
    let Ok(rd) = std::fs::read_dir("/proc") else { return Vec::new() };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|&pid| pid != me)
        .filter(|pid| std::fs::metadata(format!("/proc/{pid}/ns/net")).map(|m| inodes.contains(&m.ino())).unwrap_or(false))
        .collect()
}

/// Whether process `pid` runs a Horde binary: its executable is named `horde` (as built and
/// installed) or is this very program. Command lines prove nothing (anyone can write `child
/// link-emulator` into theirs), so they are never enough on their own.
pub(crate) fn runs_horde(pid: i32) -> bool {
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else { return false };
    let name = exe.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // A binary rebuilt while it runs reads as "horde (deleted)".
    name.trim_end_matches(" (deleted)") == "horde" || std::env::current_exe().is_ok_and(|me| me == exe)
}

/// Whether process `pid` sees the same `/run` as this one (device and inode through its root):
/// Horde's state and named namespaces live there, so a Horde that sees another `/run` (in a
/// container or a test's sandbox that shares the machine's process ids) is another Horde, and
/// its daemons are none of this one's business — never orphans to kill.
fn sees_our_run(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let ours = id("/run");
    ours.is_some() && id(&format!("/proc/{pid}/root/run")) == ours
}

pub(crate) fn netns_inode(pid: i32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net")).ok().map(|m| m.ino())
}

/// The experiment a Horde link-emulator daemon serves, if `pid` provably is one: a Horde
/// executable, started as exactly `horde child link-emulator ID` with a valid id, living in that
/// experiment's fabric namespace (or, once the namespace is gone, in a namespace that is not the
/// machine's own: a daemon never lives there after its first instant).
pub(crate) fn daemon_of(pid: i32, host_ns: Option<u64>) -> Option<String> {
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmd.strip_suffix(&[0]).unwrap_or(&cmd).split(|&b| b == 0).collect();
    let (sub, kind) = (horde_sys::own::SUBCOMMAND.as_bytes(), horde_sys::own::Kind::LinkEmulator.as_str().as_bytes());
    if args.len() != 4 || args[1] != sub || args[2] != kind {
        return None;
    }
    let exp = std::str::from_utf8(args[3]).ok()?;
    check_id(exp).ok()?;
    if !runs_horde(pid) || !sees_our_run(pid) {
        return None;
    }
    let ns = netns_inode(pid)?;
    let at_home = match ns::inode(&format!("{}{exp}", ns::PREFIX)) {
        Some(fabric) => ns == fabric,
        None => Some(ns) != host_ns,
    };
    at_home.then(|| exp.to_string())
}

/// Pids of Horde link-emulator daemons (of one experiment, or all), proven as [`daemon_of`] says.
pub fn daemons(exp: Option<&str>) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else { return Vec::new() };
    let host_ns = netns_inode(1);
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|&pid| daemon_of(pid, host_ns).is_some_and(|d| exp.is_none_or(|x| x == d)))
        .collect()
}

pub(crate) fn kill_all(pids: &[i32]) {
    for &p in pids {
        // SAFETY: plain kill(2).
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    // wait (briefly) until they are gone, so their sockets no longer pin the namespaces
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) && pids.iter().any(|p| Path::new(&format!("/proc/{p}")).exists() && !zombie(*p)) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(crate) fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z')).unwrap_or(true)
}

/// A process's start time (clock ticks since boot, /proc/PID/stat field 22): with the pid, it
/// names one process for good (a pid alone may be reused).
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..].split(' ').nth(19)?.parse().ok()
}

/// Records that Horde started process `pid` inside experiment `exp` (e.g. `horde emu exec`'s
/// command): `down` and `cleanup` stop recorded processes and no others.
pub fn record_process(exp: &str, pid: u32) -> Result<(), EmuError> {
    check_id(exp)?;
    let dir = state_dir(exp).join("procs");
    std::fs::create_dir_all(&dir).map_err(|e| EmuError::io(&format!("creating {}", dir.display()), e))?;
    let st = start_time(pid as i32).ok_or_else(|| EmuError::Other(format!("process {pid} is gone")))?;
    std::fs::write(dir.join(pid.to_string()), st.to_string()).map_err(|e| EmuError::io("recording a process", e))
}

/// Forgets a recorded process (it ended).
pub fn forget_process(exp: &str, pid: u32) {
    if check_id(exp).is_ok() {
        let _ = std::fs::remove_file(state_dir(exp).join("procs").join(pid.to_string()));
    }
}

/// The recorded processes of `exp` that still run (same pid and start time).
pub(crate) fn recorded_processes(exp: &str) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir(state_dir(exp).join("procs")) else { return Vec::new() };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let st: u64 = std::fs::read_to_string(e.path()).ok()?.trim().parse().ok()?;
            (start_time(pid) == Some(st)).then_some(pid)
        })
        .collect()
}

pub(crate) fn describe_pid(pid: i32) -> String {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into());
    format!("process {pid} ({exe})")
}
