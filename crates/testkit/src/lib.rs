//! What Horde's integration-test binaries share (README.md): each test touches only what it
//! made, says how much of the machine it takes, and says what it needs (root, a tool).
//!
//! Not for `horde` itself: this crate is a dev- and build-dependency only.

mod attack;
pub mod build;
mod ids;
mod procs;
mod sandbox;
mod share;

use std::path::{Path, PathBuf};

pub use attack::{crowd, CROWD_ADDRESSES};
pub use ids::{exp_id, free_port, ifname, unique};
pub use procs::{descendants, wait_gone};
pub use sandbox::Sandbox;
pub use share::{namespaces, share, Load, Namespaces, Share};

/// Whether this process runs as root (the emulated environment needs it).
pub fn is_root() -> bool {
    // SAFETY: no arguments, no side effects.
    unsafe { libc::geteuid() == 0 }
}

/// Whether this is CI (`CI=true`): there, a missing tool or root is a failure, never a skip.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The first line of a test that needs root. Such a test also carries
/// `#[cfg_attr(not(horde_root), ignore = "needs root …")]`, so without root it is reported as
/// ignored with its reason; this check catches a suite built as root and run as another user.
pub fn need_root() {
    assert!(is_root(), "this test needs root (network namespaces): the suite was built as root but runs as another user; run it as root (sudo -E cargo test)");
}

/// Whether `path` (a tool the test needs) exists. Under `CI=true` a missing tool fails the test
/// (`.ci/run` installs every tool); elsewhere the test says on standard error that it is
/// skipped and returns.
#[must_use]
pub fn tool(path: &str, install: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    skip(&format!("{path} is missing ({install})"));
    false
}

/// Says that the calling test is skipped, and why, where the test run's summary shows it: on
/// the process's standard error directly (libtest captures `eprintln!` and shows it only for
/// a failed test, so a skip would read as a plain `ok`), named after the test. Under `CI=true`
/// it fails the test instead (`.ci/run` installs every tool).
pub fn skip(why: &str) {
    assert!(!ci(), "CI: this test would be skipped ({why}); .ci/run installs what it needs");
    let name = std::thread::current().name().unwrap_or("a test").to_string();
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {name}: {why}");
}

/// A scratch directory of one test, under the system's temporary directory, unique to this
/// test (process id and a counter) and removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("horde-test-{}-{name}", unique()));
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("creating {}: {e}", p.display()));
        Scratch(p)
    }

    pub fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }

    /// Gives the directory up: it stays after the test (for a helper that returns a path).
    pub fn keep(self) -> PathBuf {
        let p = self.0.clone();
        std::mem::forget(self);
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    /// A skip is seen in the test run's output, not only in the captured output of a failure:
    /// this test runs itself again as a skipping test (outside CI) and reads what it printed.
    #[test]
    fn a_skip_shows_in_the_run_output() {
        if std::env::var_os("HORDE_SKIP_PROBE").is_some() {
            super::skip("the probe's tool is missing");
            return;
        }
        let me = std::env::current_exe().unwrap();
        let o = std::process::Command::new(me)
            .args(["tests::a_skip_shows_in_the_run_output", "--exact", "--test-threads=1"])
            .env("HORDE_SKIP_PROBE", "1")
            .env_remove("CI")
            .output()
            .unwrap();
        let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{all}");
        assert!(all.contains("SKIPPED tests::a_skip_shows_in_the_run_output: the probe's tool is missing"), "{all}");
    }
}
