//! A machine of the test's own, for a command that acts on "the whole machine" (`horde emu
//! cleanup --all`): a private mount namespace with fresh `/run` and `/sys`, and a network
//! namespace of its own (with its loopback up). Horde's state (`/run/horde`), its named
//! namespaces (`/run/netns`) and the interfaces of "the machine's namespace" are then the
//! sandbox's alone; nothing the machine has is in sight of what runs inside.
//!
//! What the sandbox does not separate: process ids (one `/proc`). A command run inside still
//! sees every process of the machine, so Horde's cleanup must itself refuse processes of
//! another mount namespace (`horde_emu::procs::daemon_of`).
//!
//! When the holder process goes (the sandbox is dropped, or the test's thread ends), its
//! namespaces go with the last process inside them, and with them every network namespace
//! mounted under the sandbox's `/run/netns`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The holder's script: a fresh `/run` and `/sys` (so `/sys/class/net` shows the sandbox's
/// network), loopback up, then wait to be killed.
const HOLD: &str = "mount -t tmpfs -o mode=755 horde-sandbox /run && mount -t sysfs sysfs /sys && ip link set lo up && echo ready && exec sleep 3600";

pub struct Sandbox {
    holder: Child,
}

impl Sandbox {
    /// Starts the sandbox (root only: `unshare` and `mount`).
    pub fn start() -> Sandbox {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--net", "--propagation", "private", "--", "sh", "-c", HOLD]).stdin(Stdio::null()).stdout(Stdio::piped());
        // SAFETY: prctl is async-signal-safe; the holder dies with the thread that made it.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut holder = cmd.spawn().expect("unshare (util-linux) starts");
        let mut line = String::new();
        let _ = BufReader::new(holder.stdout.take().expect("stdout")).read_line(&mut line);
        assert_eq!(line.trim(), "ready", "the sandbox did not start (root? util-linux's unshare, iproute2's ip): {:?}", holder.try_wait());
        Sandbox { holder }
    }

    /// The holder's pid (its namespaces are the sandbox's).
    pub fn pid(&self) -> u32 {
        self.holder.id()
    }

    /// `program` to run inside the sandbox (`nsenter` execs it: the child's pid is the
    /// program's own).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("--target").arg(self.pid().to_string()).args(["--mount", "--net", "--"]).arg(program);
        c
    }

    /// A path as the sandbox sees it (`/run/horde/emu` → the sandbox's own).
    pub fn path(&self, p: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{p}", self.pid()))
    }

    /// The interfaces of the sandbox's own network namespace (its "machine's namespace").
    pub fn interfaces(&self) -> Vec<String> {
        let dev = std::fs::read_to_string(format!("/proc/{}/net/dev", self.pid())).unwrap_or_default();
        dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(|n| n.trim().to_string()).collect()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}
