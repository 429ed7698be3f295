//! Processes of one test: the descendants of a process the test started, found through their
//! parent links (never by name), so that a test asserts only about what it made.

use std::time::{Duration, Instant};

/// The parent of `pid`, from `/proc/PID/stat` (field 4, after the command name in parentheses,
/// which may itself hold spaces and parentheses).
fn parent(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()
}

/// Whether `pid` is a zombie (dead, waiting for its parent to reap it).
fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z'))).unwrap_or(false)
}

/// Every living descendant of `pid` (children, their children, …), found by parent links.
/// A descendant whose parent died is re-parented and no longer found: take the list while the
/// test's own process is alive.
pub fn descendants(pid: u32) -> Vec<u32> {
    let all: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .map(|rd| rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()).filter_map(|p| Some((p, parent(p)?))).collect())
        .unwrap_or_default();
    let mut out: Vec<i32> = vec![pid as i32];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(all.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c).filter(|c| !zombie(*c)));
        i += 1;
    }
    out.into_iter().skip(1).map(|p| p as u32).collect()
}

/// Waits up to `within` for `pid` to be gone (or a zombie); whether it went.
pub fn wait_gone(pid: u32, within: Duration) -> bool {
    let t = Instant::now();
    loop {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() || zombie(pid as i32) {
            return true;
        }
        if t.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
