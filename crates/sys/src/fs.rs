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

/// Writes `bytes` as file `name` of directory `sub` (one component, made if missing) of `dir`,
/// never through a symbolic link: `sub` is opened with `O_NOFOLLOW`, the content goes to a
/// temporary file made there with `O_CREAT | O_EXCL` (which does not follow a link either; a
/// stale one is unlinked first), which is then renamed over `name` (a link there is replaced,
/// not followed). So a link planted in a runs directory can neither redirect the write nor
/// be written through. Returns the file's path.
pub fn write_beneath(dir: &Path, sub: &str, name: &str, bytes: &[u8]) -> std::io::Result<std::path::PathBuf> {
    use std::ffi::CString;
    use std::io::Write as _;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a name inside the directory");
    let one = |c: &str| !(c.is_empty() || c == "." || c == ".." || c.contains('/') || c.contains('\0'));
    if !one(sub) || !one(name) {
        return Err(invalid());
    }
    let base: OwnedFd = std::fs::File::open(dir)?.into();
    let csub = CString::new(sub).map_err(|_| invalid())?;
    // SAFETY: an open directory descriptor and a NUL-terminated name.
    if unsafe { libc::mkdirat(base.as_raw_fd(), csub.as_ptr(), 0o755) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(e);
        }
    }
    // SAFETY: as above; O_NOFOLLOW: a link in its place fails (ELOOP / ENOTDIR).
    let fd = unsafe { libc::openat(base.as_raw_fd(), csub.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let at = unsafe { OwnedFd::from_raw_fd(fd) };
    let tmp = CString::new(format!(".{name}.tmp")).map_err(|_| invalid())?;
    let cname = CString::new(name).map_err(|_| invalid())?;
    // SAFETY: unlinking a name in our directory descriptor (a link is removed, not followed).
    unsafe { libc::unlinkat(at.as_raw_fd(), tmp.as_ptr(), 0) };
    // SAFETY: as above.
    let f = unsafe { libc::openat(at.as_raw_fd(), tmp.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0o644) };
    if f < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    let mut file = unsafe { std::fs::File::from_raw_fd(f) };
    file.write_all(bytes)?;
    file.sync_all()?;
    // SAFETY: both names in our directory descriptor.
    if unsafe { libc::renameat(at.as_raw_fd(), tmp.as_ptr(), at.as_raw_fd(), cname.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(dir.join(sub).join(name))
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

#[cfg(test)]
mod write_tests {
    use super::*;

    #[test]
    fn a_planted_link_is_neither_followed_nor_written_through() {
        let d = std::env::temp_dir().join(format!("horde-write-beneath-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("runs/topologies")).unwrap();
        std::fs::write(d.join("victim"), "keep").unwrap();
        // a link where the temporary file goes, and one where the file goes
        std::os::unix::fs::symlink(d.join("victim"), d.join("runs/topologies/.lab.toml.tmp")).unwrap();
        std::os::unix::fs::symlink(d.join("victim"), d.join("runs/topologies/lab.toml")).unwrap();
        let p = write_beneath(&d.join("runs"), "topologies", "lab.toml", b"name = 'lab'\n").unwrap();
        assert_eq!(std::fs::read_to_string(d.join("victim")).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "name = 'lab'\n");
        // the directory itself a link: refused
        std::fs::create_dir_all(d.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), d.join("runs/linked")).unwrap();
        assert!(write_beneath(&d.join("runs"), "linked", "x.toml", b"x").is_err());
        assert!(std::fs::read_dir(d.join("elsewhere")).unwrap().next().is_none(), "nothing written through the link");
        assert!(write_beneath(&d.join("runs"), "..", "x", b"x").is_err() && write_beneath(&d.join("runs"), "t", "a/b", b"x").is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
