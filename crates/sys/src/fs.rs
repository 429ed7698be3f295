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

/// Opens `rel` (components separated by `/`) for reading inside directory `dir`, never
/// through a symbolic link in any component: each directory is opened relative to the one
/// before with `O_NOFOLLOW`, so a link anywhere (`REPORT/d -> /etc`) fails (`ELOOP` or
/// `ENOTDIR`) instead of leaving `dir`, and nothing can swap a component for a link between a
/// check and the open. Empty, `.` and `..` components are refused. The caller checks the
/// file's type (a FIFO does not block the open).
pub fn open_beneath(dir: &Path, rel: &str) -> std::io::Result<std::fs::File> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a path inside the directory");
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.iter().any(|c| c.is_empty() || *c == "." || *c == ".." || c.contains('\0')) {
        return Err(invalid());
    }
    let mut at: OwnedFd = std::fs::File::open(dir)?.into();
    for (k, c) in parts.iter().enumerate() {
        let last = k + 1 == parts.len();
        let name = CString::new(*c).map_err(|_| invalid())?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | if last { libc::O_NONBLOCK } else { libc::O_DIRECTORY };
        // SAFETY: `at` is an open descriptor and `name` a NUL-terminated string.
        let fd = unsafe { libc::openat(at.as_raw_fd(), name.as_ptr(), flags) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        at = unsafe { OwnedFd::from_raw_fd(fd) };
    }
    Ok(std::fs::File::from(at))
}

/// Bytes an unprivileged writer may still write on the filesystem that holds `path`
/// (`statvfs`: available blocks × fragment size).
pub fn available_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: a valid C string and a zeroed statvfs for the call to fill.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the kernel writes only into `s`.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_beneath_refuses_a_link_in_any_component() {
        let d = std::env::temp_dir().join(format!("horde-open-beneath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("charts")).unwrap();
        std::fs::write(d.join("charts/a.svg"), "<svg/>").unwrap();
        std::fs::write(d.join("outside"), "secret").unwrap();
        std::os::unix::fs::symlink(&d, d.join("charts/up")).unwrap();
        std::os::unix::fs::symlink(d.join("outside"), d.join("charts/f")).unwrap();
        let read = |rel: &str| open_beneath(&d.join("charts"), rel).and_then(|mut f| std::io::read_to_string(&mut f));
        assert_eq!(read("a.svg").unwrap(), "<svg/>");
        assert!(read("up/outside").is_err(), "a linked directory");
        assert!(read("f").is_err(), "a linked file");
        for bad in ["../outside", "./a.svg", "", "a.svg/", "x//a.svg"] {
            assert_eq!(read(bad).unwrap_err().kind(), std::io::ErrorKind::InvalidInput, "{bad}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
    #[test]
    fn the_temporary_directory_has_room_and_a_missing_path_is_an_error() {
        assert!(super::available_bytes(&std::env::temp_dir()).unwrap() > 0);
        assert!(super::available_bytes(std::path::Path::new("/nonexistent/horde")).is_err());
    }
}
