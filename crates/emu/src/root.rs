//! A node's own root file system (`root = "overlay"`, IMUNES's per-node jail): an overlay whose
//! lower layer is the machine's root and whose upper layer, on a tmpfs of the node's own, takes
//! every write. Mounted at `up` under the experiment's state (`/run/horde/emu/ID/root/NODE/`,
//! outside the node's directory, so nothing that walks node files walks the machine's tree);
//! every process that enters the node ([`crate::identity::Identity::apply`]) has the machine's
//! other file systems bound inside it and changes its root to it. Unmounted before `down`
//! removes the experiment's state: nothing of the machine's file tree is ever written.
//!
//! An overlay does not reach into the lower layer's submounts (`/proc`, `/dev`, a separate
//! `/home`): those are bound in as they are, shared with the machine (as in a container that
//! bind-mounts them); only the root file system's own tree is the node's.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use crate::{state_dir, EmuError, STATE_DIR};

/// Where node `node`'s root lives: `rw` (its tmpfs: `upper`, `work`) and `merged` (the root).
pub fn dir(exp: &str, node: &str) -> PathBuf {
    state_dir(exp).join("root").join(node)
}

/// The node's root as its processes see it.
pub fn merged(exp: &str, node: &str) -> PathBuf {
    dir(exp, node).join("merged")
}

fn cstr(p: &Path) -> Result<CString, EmuError> {
    CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| EmuError::Other(format!("{} has a NUL byte", p.display())))
}

fn mount(src: &str, target: &Path, fstype: &str, data: &str) -> Result<(), EmuError> {
    let (s, t, f, d) = (CString::new(src).expect("no NUL"), cstr(target)?, CString::new(fstype).expect("no NUL"), CString::new(data).expect("no NUL"));
    // SAFETY: valid C strings; the data string is what this file system type reads.
    if unsafe { libc::mount(s.as_ptr(), t.as_ptr(), f.as_ptr(), 0, d.as_ptr().cast()) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(EmuError::io(&format!("mounting {fstype} at {} (a node's root = \"overlay\"; the kernel needs overlayfs)", target.display()), e));
    }
    Ok(())
}

/// Makes node `node`'s root: a tmpfs for its writes, the overlay over the machine's root.
pub fn make(exp: &str, node: &str) -> Result<(), EmuError> {
    let d = dir(exp, node);
    let (rw, m) = (d.join("rw"), d.join("merged"));
    for p in [&rw, &m] {
        std::fs::create_dir_all(p).map_err(|e| EmuError::io(&format!("creating {}", p.display()), e))?;
    }
    mount("horde-root", &rw, "tmpfs", "mode=755")?;
    for p in ["upper", "work"] {
        std::fs::create_dir(rw.join(p)).map_err(|e| EmuError::io(&format!("creating {}", rw.join(p).display()), e))?;
    }
    if rw.to_string_lossy().contains([',', ':']) {
        return Err(EmuError::Other(format!("{}: a path with ',' or ':' cannot name an overlay layer", rw.display())));
    }
    let data = format!("lowerdir=/,upperdir={},workdir={}", rw.join("upper").display(), rw.join("work").display());
    mount("horde-root", &m, "overlay", &data)
}

/// Mount points of this process's mount namespace, parents before children (as the kernel
/// lists them), with the kernel's octal escapes (`\040` for a space) undone.
pub fn mount_points() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines().filter_map(|l| l.split(' ').nth(4)).map(|p| PathBuf::from(unescape(p))).collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The machine's mount points a node's root binds in, each with its submounts: the topmost ones
/// below `/`, except `/sys` (the node mounts its own) and Horde's experiment state (other
/// nodes' roots among it).
pub fn host_mounts() -> Vec<PathBuf> {
    let all = mount_points();
    let mut top: Vec<PathBuf> = Vec::new();
    for p in all {
        if p == Path::new("/") || p.starts_with("/sys") || p.starts_with(STATE_DIR) || top.iter().any(|t| p.starts_with(t)) {
            continue;
        }
        // a later entry may be the parent of an earlier one (mounted after it): keep the parent
        top.retain(|t| !t.starts_with(&p));
        top.push(p);
    }
    top
}

/// Unmounts everything mounted under `dir` (deepest first, detached), so removing `dir` never
/// reaches through a mount. Returns the mount points still there afterwards.
pub fn unmount_under(dir: &Path) -> Vec<PathBuf> {
    let mut under: Vec<PathBuf> = mount_points().into_iter().filter(|p| p.starts_with(dir)).collect();
    under.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in &under {
        if let Ok(c) = cstr(p) {
            // SAFETY: a valid C string.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
    mount_points().into_iter().filter(|p| p.starts_with(dir)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_read_the_kernels_escapes() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
        assert_eq!(unescape(r"/plain\04"), r"/plain\04");
        assert!(mount_points().contains(&PathBuf::from("/")));
        let top = host_mounts();
        assert!(top.iter().all(|p| p != Path::new("/") && !p.starts_with("/sys")));
        assert!(top.iter().all(|a| top.iter().all(|b| a == b || !a.starts_with(b))), "topmost only: {top:?}");
    }
}
