//! A node's own identity: its hostname (a UTS namespace), an `/etc/hosts` that names every node
//! of the experiment, its own view of `/sys` (its interfaces), and its own writable directories
//! where daemons keep state (a mount namespace: `/etc/frr`, `/run/frr`, `/var/lib/frr`,
//! `/var/log/frr`, `/var/tmp/frr` — those the machine has — bound to
//! `/run/horde/emu/EXP/node/NODE/fs/…`). Every process Horde starts in a node (`emu exec`, a
//! routing daemon) enters it, so two nodes' daemons of the same program never share a file, and
//! what one node's processes write the next one started there finds again.
//!
//! The mount namespace is made per process (not pinned): the node's directories are what
//! persists. Mounts never propagate back to the machine (the new namespace is made private
//! first), so nothing of the host's file tree changes.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use horde_topo::Plan;

use crate::{node_dir, state_dir, EmuError};

/// Where daemons keep state: each one the machine has becomes the node's own.
pub const STATE_DIRS: &[&str] = &["/etc/frr", "/run/frr", "/var/lib/frr", "/var/log/frr", "/var/tmp/frr"];

/// The file every node sees as `/etc/hosts`.
pub fn hosts_file(exp: &str) -> PathBuf {
    state_dir(exp).join("hosts")
}

/// Writes the experiment's hosts file: localhost, then each host and router by its first
/// address (the addresses of its other interfaces as `NAME-ethN`).
pub fn write_hosts(exp: &str, plan: &Plan) -> Result<(), EmuError> {
    let mut out = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    let mut first: Vec<bool> = vec![true; plan.nodes.len()];
    for l in &plan.links {
        for p in [&l.a, &l.b] {
            let Some(a) = p.addr else { continue };
            let name = &plan.nodes[p.node].name;
            if std::mem::take(&mut first[p.node]) {
                out.push_str(&format!("{a}\t{name} {name}-{}\n", p.ifname));
            } else {
                out.push_str(&format!("{a}\t{name}-{}\n", p.ifname));
            }
        }
    }
    std::fs::write(hosts_file(exp), out).map_err(|e| EmuError::io("writing the experiment's hosts file", e))
}

/// The node's own directory standing in for `mount` (`/etc/frr` → `NODE/fs/etc/frr`).
pub fn state_path(exp: &str, node: &str, mount: &str) -> PathBuf {
    node_dir(exp, node).join("fs").join(mount.trim_start_matches('/'))
}

/// What a process entering a node applies, prepared before the fork (no allocation after it).
#[derive(Debug, Clone)]
pub struct Identity {
    hostname: CString,
    /// (source, target) bind mounts (targets inside the node's root when it has its own).
    binds: Vec<(CString, CString)>,
    /// A root of the node's own (`root = "overlay"`).
    root: Option<OwnRoot>,
}

/// What entering a node's own root takes ([`crate::root`]).
#[derive(Debug, Clone)]
struct OwnRoot {
    merged: CString,
    /// The machine's file systems bound in, with their submounts: (source, target).
    rbinds: Vec<(CString, CString)>,
    sys: CString,
}

fn cstr(p: &Path) -> Result<CString, EmuError> {
    CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| EmuError::Other(format!("{} has a NUL byte", p.display())))
}

impl Identity {
    /// Prepares node `node` of `exp`: its directories exist, the hosts file too.
    pub fn prepare(exp: &str, plan: &Plan, node: &str) -> Result<Identity, EmuError> {
        crate::node_ns(plan, node)?;
        if !hosts_file(exp).exists() {
            write_hosts(exp, plan)?;
        }
        let overlay = plan.node(node).is_some_and(|i| plan.nodes[i].overlay);
        let merged = crate::root::merged(exp, node);
        // a target inside the node's root, when it has its own
        let inside = |p: &str| if overlay { merged.join(p.trim_start_matches('/')) } else { PathBuf::from(p) };
        let mut binds = vec![(cstr(&hosts_file(exp))?, cstr(&inside("/etc/hosts"))?)];
        for m in STATE_DIRS {
            if !Path::new(m).is_dir() {
                continue;
            }
            let own = state_path(exp, node, m);
            std::fs::create_dir_all(&own).map_err(|e| EmuError::io(&format!("creating {}", own.display()), e))?;
            binds.push((cstr(&own)?, cstr(&inside(m))?));
        }
        let root = match overlay {
            false => None,
            true => {
                if !merged.is_dir() {
                    return Err(EmuError::Other(format!("node {node}'s root ({}) is not there: is the experiment up?", merged.display())));
                }
                let rbinds = crate::root::host_mounts()
                    .iter()
                    .filter(|p| p.is_dir())
                    .map(|p| Ok((cstr(p)?, cstr(&inside(&p.to_string_lossy()))?)))
                    .collect::<Result<Vec<_>, EmuError>>()?;
                Some(OwnRoot { merged: cstr(&merged)?, rbinds, sys: cstr(&inside("/sys"))? })
            }
        };
        Ok(Identity { hostname: CString::new(node).map_err(|_| EmuError::Other("a node name has a NUL byte".into()))?, binds, root })
    }

    /// Enters the identity: a private mount namespace and a UTS namespace, the hostname, the
    /// node's `/sys` (call it inside the node's network namespace), its hosts file and
    /// directories.
    ///
    /// # Safety
    /// Meant for a child between fork and exec: it makes only async-signal-safe system calls
    /// and allocates nothing.
    pub unsafe fn apply(&self) -> std::io::Result<()> {
        let err = std::io::Error::last_os_error;
        if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS) != 0 {
            return Err(err());
        }
        let root = c"/";
        // nothing mounted below may propagate back to the machine
        if libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0 {
            return Err(err());
        }
        if libc::sethostname(self.hostname.as_ptr(), self.hostname.as_bytes().len()) != 0 {
            return Err(err());
        }
        if let Some(r) = &self.root {
            return self.enter_own_root(r);
        }
        // /sys as the node's network namespace shows it (its own interfaces), as `ip netns exec`
        let sys = c"/sys";
        if libc::umount2(sys.as_ptr(), libc::MNT_DETACH) == 0 {
            let fs = c"sysfs";
            if libc::mount(fs.as_ptr(), sys.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) != 0 {
                return Err(err());
            }
        }
        for (src, dst) in &self.binds {
            if libc::mount(src.as_ptr(), dst.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0 {
                return Err(err());
            }
        }
        Ok(())
    }

    /// The rest of [`Identity::apply`] for a node with its own root: the machine's other file
    /// systems bound in, the node's `/sys`, hosts file and directories inside it, then the root
    /// changed to it (the working directory kept where the node's root has it).
    ///
    /// # Safety
    /// As [`Identity::apply`].
    unsafe fn enter_own_root(&self, r: &OwnRoot) -> std::io::Result<()> {
        let err = std::io::Error::last_os_error;
        for (src, dst) in &r.rbinds {
            if libc::mount(src.as_ptr(), dst.as_ptr(), std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null()) != 0 {
                return Err(err());
            }
        }
        let fs = c"sysfs";
        if libc::mount(fs.as_ptr(), r.sys.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) != 0 {
            return Err(err());
        }
        for (src, dst) in &self.binds {
            if libc::mount(src.as_ptr(), dst.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0 {
                return Err(err());
            }
        }
        let mut cwd = [0u8; 4096];
        let have_cwd = !libc::getcwd(cwd.as_mut_ptr().cast(), cwd.len()).is_null();
        if libc::chdir(r.merged.as_ptr()) != 0 || libc::chroot(c".".as_ptr()) != 0 {
            return Err(err());
        }
        if !have_cwd || libc::chdir(cwd.as_ptr().cast()) != 0 {
            libc::chdir(c"/".as_ptr());
        }
        Ok(())
    }
}
