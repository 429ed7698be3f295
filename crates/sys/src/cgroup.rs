//! A process tree as a cgroup: every process a command starts stays in the command's cgroup
//! wherever it goes — a background child (`sh -c 'sleep 500 &'`), a daemon that calls
//! `setsid` — so ending the command ends them all (systemd's `KillMode=control-group`).
//! Grouping only, no controller: cgroup v2 (the unified hierarchy, at `/sys/fs/cgroup` or
//! `/sys/fs/cgroup/unified` on a hybrid machine), else v1's `pids` hierarchy. Needs root to
//! create groups; without a hierarchy there is no tree ([`Tree::create`] fails and callers say
//! so).

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// cgroup2's filesystem magic (`statfs.f_type`).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The hierarchy Horde groups processes in, if this machine has one.
pub fn hierarchy() -> Option<PathBuf> {
    let v2 = |p: &str| {
        let c = std::ffi::CString::new(p).expect("no NUL");
        // SAFETY: statfs on a NUL-terminated path into a zeroed struct.
        let mut s: libc::statfs = unsafe { std::mem::zeroed() };
        (unsafe { libc::statfs(c.as_ptr(), &mut s) } == 0) && s.f_type as i64 == CGROUP2_SUPER_MAGIC
    };
    for p in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        if v2(p) {
            return Some(PathBuf::from(p));
        }
    }
    let v1 = Path::new("/sys/fs/cgroup/pids");
    v1.join("cgroup.procs").is_file().then(|| v1.to_path_buf())
}

/// One cgroup: a command's process tree, or a parent of several.
#[derive(Debug, Clone)]
pub struct Tree {
    dir: PathBuf,
}

impl Tree {
    /// Creates (or opens) the group `rel` (e.g. `horde-emu/k3x9qa/c-17`) under [`hierarchy`].
    pub fn create(rel: &str) -> io::Result<Tree> {
        let root = hierarchy().ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "this machine has no cgroup hierarchy to group processes in"))?;
        let dir = root.join(rel);
        std::fs::create_dir_all(&dir)?;
        Ok(Tree { dir })
    }

    /// The group `rel` if it exists.
    pub fn open(rel: &str) -> Option<Tree> {
        let dir = hierarchy()?.join(rel);
        dir.join("cgroup.procs").is_file().then_some(Tree { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A descriptor through which a child joins this group between fork and exec
    /// ([`join_from_child`]); open it before the fork, close it after.
    pub fn joiner(&self) -> io::Result<OwnedFd> {
        use std::os::unix::fs::OpenOptionsExt;
        Ok(std::fs::OpenOptions::new().write(true).custom_flags(libc::O_CLOEXEC).open(self.dir.join("cgroup.procs"))?.into())
    }

    /// Every process in this group and the groups below it.
    pub fn pids(&self) -> Vec<i32> {
        let mut out = Vec::new();
        collect(&self.dir, &mut out);
        out
    }

    /// Kills every process of the tree (SIGKILL, again for any forked meanwhile) and waits at
    /// most 2 s for the group to empty; returns how many were killed and how many are left.
    pub fn kill(&self) -> (usize, usize) {
        let (mut killed, t) = (std::collections::HashSet::new(), Instant::now());
        loop {
            let left = self.pids();
            if left.is_empty() || t.elapsed() > Duration::from_secs(2) {
                return (killed.len(), left.len());
            }
            for p in left {
                // SAFETY: kill(2) on a process of our own group.
                unsafe { libc::kill(p, libc::SIGKILL) };
                killed.insert(p);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// [`Tree::kill`], then removes the group and the groups below it. Returns what
    /// [`Tree::kill`] did.
    pub fn remove(&self) -> (usize, usize) {
        let r = self.kill();
        remove_dirs(&self.dir);
        r
    }
}

/// Joins the group whose `cgroup.procs` is open as `fd` (writing "0" moves the writer). For
/// the child between fork and exec: only `write(2)`, async-signal-safe.
pub fn join_from_child(fd: RawFd) -> io::Result<()> {
    // SAFETY: write(2) of a 1-byte buffer to a descriptor the caller keeps open.
    if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn collect(dir: &Path, out: &mut Vec<i32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect(&e.path(), out);
        }
    }
}

/// Removes `dir` and the cgroups below it, deepest first (a cgroup directory is removed with
/// `rmdir`: its files are the kernel's).
fn remove_dirs(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_dirs(&e.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// A CPU cap: the kernel's CPU controller holds every process in the group to `fraction` of
/// one core (CFS bandwidth: `quota = fraction × period` per 100-ms period). cgroup v2's `cpu.max`
/// where the unified hierarchy has the `cpu` controller, else v1's `cpu` hierarchy
/// (`cpu.cfs_quota_us`). Needs root. The groups are removed when it is dropped (after its
/// processes are gone: the caller stops them first).
#[derive(Debug)]
pub struct CpuCap {
    /// The groups a process joins (v1: the `cpu` hierarchy's; v2: one).
    dirs: Vec<PathBuf>,
    pub fraction: f64,
}

/// CFS bandwidth period, µs: the kernel's default.
const CFS_PERIOD_US: u64 = 100_000;

impl CpuCap {
    /// Creates the group `rel` capped at `fraction` of a core (0.01..=64).
    pub fn create(rel: &str, fraction: f64) -> io::Result<CpuCap> {
        if !(0.01..=64.0).contains(&fraction) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("a CPU share of {fraction} cores: give 0.01 to 64")));
        }
        let quota = ((fraction * CFS_PERIOD_US as f64).round() as u64).max(1_000);
        let v2 = Path::new("/sys/fs/cgroup");
        if hierarchy().as_deref() == Some(v2) {
            let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "cpu") {
                let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu");
                let dir = v2.join(rel);
                std::fs::create_dir_all(&dir)?;
                let cap = CpuCap { dirs: vec![dir.clone()], fraction };
                std::fs::write(dir.join("cpu.max"), format!("{quota} {CFS_PERIOD_US}"))?;
                return Ok(cap);
            }
        }
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        if !v1.join("cpu.cfs_quota_us").is_file() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this machine's kernel has no CPU controller mounted (neither cgroup v2's cpu nor v1's cpu hierarchy)",
            ));
        }
        let dir = v1.join(rel);
        std::fs::create_dir_all(&dir)?;
        let cap = CpuCap { dirs: vec![dir.clone()], fraction };
        std::fs::write(dir.join("cpu.cfs_period_us"), CFS_PERIOD_US.to_string())?;
        std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string())?;
        Ok(cap)
    }

    /// Descriptors through which a child joins the group between fork and exec
    /// ([`join_from_child`] on each); open them before the fork, close them after.
    pub fn joiners(&self) -> io::Result<Vec<OwnedFd>> {
        self.dirs.iter().map(|d| Tree { dir: d.clone() }.joiner()).collect()
    }

    /// Periods in which the group used up its quota and waited (`nr_throttled`), if the kernel
    /// says: the cap was binding.
    pub fn throttled_periods(&self) -> Option<u64> {
        let text = std::fs::read_to_string(self.dirs.first()?.join("cpu.stat")).ok()?;
        text.lines().find_map(|l| l.strip_prefix("nr_throttled ")).and_then(|v| v.trim().parse().ok())
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        for d in &self.dirs {
            remove_dirs(d);
        }
    }
}
