//! Named network namespaces, compatible with `ip netns`: each is a bind mount of a namespace
//! file on `/run/netns/NAME`, so it outlives the process that made it and `ip netns exec` works.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::EmuError;

pub const RUN_NETNS: &str = "/run/netns";
/// Every namespace Horde makes starts with this.
pub const PREFIX: &str = "horde-";

pub fn path(name: &str) -> PathBuf {
    Path::new(RUN_NETNS).join(name)
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).expect("no NUL in paths")
}

fn last_os(what: String) -> EmuError {
    EmuError::io(&what, std::io::Error::last_os_error())
}

/// Makes `/run/netns` a shared mount point (as iproute2 does), so namespace mounts propagate.
pub fn prepare() -> Result<(), EmuError> {
    std::fs::create_dir_all(RUN_NETNS).map_err(|e| EmuError::io("creating /run/netns", e))?;
    let p = cstr(Path::new(RUN_NETNS));
    // Where /run is a disk file system (no tmpfs: some containers and VMs), every namespace's
    // pin is an inode on disk, and creating thousands of them after thousands were deleted
    // costs ext4 a scan of its inode table each (10,000 hosts: seconds). An empty /run/netns
    // there gets a tmpfs, as /run has on most systems — also where it is already a mount point
    // of that disk (iproute2 and Horde bind it on itself): only while it is empty, so no other
    // tool's namespace is hidden; a non-empty one is left as it is.
    let on_tmpfs = {
        // SAFETY: statfs fills the struct for a valid C string.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::statfs(p.as_ptr(), &mut st) };
        r == 0 && i128::from(st.f_type) == i128::from(libc::TMPFS_MAGIC)
    };
    let empty = std::fs::read_dir(RUN_NETNS).map(|mut d| d.next().is_none()).unwrap_or(false);
    // SAFETY: valid C strings; flags as documented in mount(2).
    unsafe {
        if !on_tmpfs && empty {
            let (fs, opts) = (c"tmpfs", c"mode=755");
            if libc::mount(fs.as_ptr(), p.as_ptr(), fs.as_ptr(), libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, opts.as_ptr() as *const libc::c_void) != 0
            {
                return Err(last_os("mounting a tmpfs on /run/netns".into()));
            }
        }
        // As iproute2 does: make it shared; where it is no mount point (EINVAL), bind it on
        // itself first. (A mount list can name /run/netns for a mount hidden under another,
        // as when /run was mounted over: only the kernel's answer tells.)
        let shared = || libc::mount(std::ptr::null(), p.as_ptr(), std::ptr::null(), libc::MS_SHARED | libc::MS_REC, std::ptr::null()) == 0;
        if !shared() {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                return Err(last_os("making /run/netns a shared mount".into()));
            }
            if libc::mount(p.as_ptr(), p.as_ptr(), std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null()) != 0 {
                return Err(last_os("bind-mounting /run/netns on itself".into()));
            }
            if !shared() {
                return Err(last_os("making /run/netns a shared mount".into()));
            }
        }
    }
    Ok(())
}

/// Moves the calling thread into a fresh network namespace and pins it as `/run/netns/NAME`.
/// Returns a handle on it. The thread stays in the new namespace (callers open their sockets
/// there, then go back with [`enter`]).
pub fn create_here(name: &str) -> Result<OwnedFd, EmuError> {
    let p = path(name);
    // SAFETY: plain syscalls on this thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(last_os(format!("creating network namespace {name}")));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
        .map_err(|e| EmuError::io(&format!("creating {} (left over from an earlier run? try `horde emu cleanup --all`)", p.display()), e))?;
    let src = cstr(Path::new("/proc/thread-self/ns/net"));
    let dst = cstr(&p);
    // SAFETY: valid C strings.
    if unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) } != 0 {
        let e = last_os(format!("bind-mounting namespace {name}"));
        let _ = std::fs::remove_file(&p);
        return Err(e);
    }
    open(name)
}

/// A handle on a named namespace.
pub fn open(name: &str) -> Result<OwnedFd, EmuError> {
    let f = File::open(path(name)).map_err(|e| EmuError::io(&format!("opening namespace {name} (is the experiment up? see `horde emu ls`)"), e))?;
    Ok(OwnedFd::from(f))
}

/// The calling thread's current network namespace.
pub fn current() -> Result<OwnedFd, EmuError> {
    let f = File::open("/proc/thread-self/ns/net").map_err(|e| EmuError::io("opening /proc/thread-self/ns/net", e))?;
    Ok(OwnedFd::from(f))
}

/// Moves the calling thread into a namespace.
pub fn enter(fd: &impl AsRawFd) -> Result<(), EmuError> {
    // SAFETY: fd is a namespace file descriptor.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(last_os("entering a network namespace".into()));
    }
    Ok(())
}

/// Runs `f` with the calling thread inside namespace `fd`, then returns to where it was.
/// Sockets opened in `f` stay in that namespace.
/// The one namespace helper (`horde_sys::netns::within_netns`) and its failure policy: an
/// error if the thread cannot enter, an abort if it cannot return.
pub fn within<T>(fd: &impl AsRawFd, f: impl FnOnce() -> T) -> Result<T, EmuError> {
    horde_sys::netns::within_netns(fd, f).map_err(|e| EmuError::io("entering a network namespace", e))
}

/// Unpins a namespace; the kernel frees it when no process or socket uses it any more.
pub fn delete(name: &str) -> Result<(), EmuError> {
    let p = path(name);
    let c = cstr(&p);
    // SAFETY: valid C string.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(EmuError::io(&format!("removing {}", p.display()), e)),
    }
}

/// Names of Horde's namespaces (optionally of one experiment).
pub fn list(exp: Option<&str>) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(RUN_NETNS) else { return Vec::new() };
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(PREFIX))
        .filter(|n| exp.is_none_or(|x| experiment_of(n) == Some(x)))
        .collect();
    v.sort();
    v
}

/// `horde-EXP` or `horde-EXP-NODE` → EXP.
pub fn experiment_of(ns: &str) -> Option<&str> {
    let rest = ns.strip_prefix(PREFIX)?;
    Some(rest.split('-').next().unwrap_or(rest))
}

/// The namespace inode of a pinned namespace, to recognise processes living in it.
pub fn inode(name: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    // Only a mounted namespace has one: the name alone (an empty file left where this process
    // does not see the mount, e.g. one made by an agent in another mount namespace) has none.
    // A namespace file is on nsfs, the device this thread's own namespace file is on (one
    // stat each, not a statfs too: `down` asks for 10,000).
    static NSFS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let nsfs = (*NSFS.get_or_init(|| std::fs::metadata("/proc/thread-self/ns/net").ok().map(|m| m.dev())))?;
    std::fs::metadata(path(name)).ok().filter(|m| m.dev() == nsfs).map(|m| m.ino())
}

/// [`delete`] for many: each unmount waits for an expedited RCU grace period (0.25 to 4 ms on
/// the bench VM), so 10,000 one after the other take seconds; unmounts from several threads at
/// once share their grace periods. The first error (each thread stops at its own first).
pub fn delete_all(names: &[String]) -> Result<(), EmuError> {
    const THREADS: usize = 16;
    let share = names.len().div_ceil(THREADS).max(32);
    std::thread::scope(|s| {
        let helpers: Vec<_> = names.chunks(share).map(|part| s.spawn(move || part.iter().map(|n| delete(n)).find(|r| r.is_err()).unwrap_or(Ok(())))).collect();
        helpers.into_iter().map(|h| h.join().expect("unmount thread")).find(|r| r.is_err()).unwrap_or(Ok(()))
    })
}

/// Wraps a raw fd we own.
///
/// # Safety
/// `fd` must be an open descriptor owned by nobody else.
pub unsafe fn own(fd: i32) -> OwnedFd {
    OwnedFd::from_raw_fd(fd)
}
