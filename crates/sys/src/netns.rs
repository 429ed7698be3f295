//! Entering a network namespace for one call.

use std::io;
use std::os::fd::AsRawFd;

/// Runs `f` with the calling thread inside network namespace `ns`, then moves the thread back:
/// Horde's one way into a namespace (the engine opening players' sockets, the emulator
/// configuring interfaces). Sockets opened in `f` keep the namespace they were opened in.
///
/// Failure policy: if the thread cannot enter `ns`, nothing happened and the error is
/// returned. If it cannot return, the process aborts: a thread left in another network would
/// send every later packet there, and no caller can undo that.
pub fn within_netns<T>(ns: &impl std::os::fd::AsRawFd, f: impl FnOnce() -> T) -> io::Result<T> {
    thread_local! {
        static HOME: Option<std::fs::File> = std::fs::File::open("/proc/thread-self/ns/net").ok();
    }
    HOME.with(|home| {
        let home = home.as_ref().ok_or_else(|| io::Error::other("cannot open this thread's network namespace"))?;
        // SAFETY: setns on namespace descriptors; the thread returns home before leaving.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let out = f();
        if unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            eprintln!("horde: fatal: cannot return to this thread's network namespace ({}); stopping", io::Error::last_os_error());
            std::process::abort();
        }
        Ok(out)
    })
}
