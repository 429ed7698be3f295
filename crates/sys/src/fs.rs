//! Files as Horde reads what a user names: opened without waiting on a FIFO's writer, and the
//! process's own group, for checking that a secret's file is private.

use std::path::Path;

/// Opens `path` for reading without blocking (a FIFO must not wait for a writer; the caller
/// checks the file's type right after).
pub fn open_for_reading(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)
}

/// This process's effective group id.
pub fn effective_gid() -> u32 {
    // SAFETY: getegid has no arguments and cannot fail.
    unsafe { libc::getegid() }
}
