//! Horde's own binary as a child process: the one way Horde starts itself ([`spawn`]) — a part
//! of a run in another process, an experiment's link emulator, a run the console starts. The child's task travels as one
//! typed, versioned JSON line on its standard input, never as arguments; its arguments are only
//! a label (`horde child KIND ID`) that `ps` and a crash cleanup can read, and the child checks
//! that the label and the task agree. A child whose standard output is piped answers with
//! typed JSON lines (the caller's type).
//!
//! [`arm`] is the one `pre_exec` of every child Horde starts (its own binary or a command in an
//! emulated node): the parent-death signal, the check that the parent still lives, a session
//! of its own, the network namespace, then the caller's last step.

use std::io::{self, BufRead, Write};
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// The subcommand of the `horde` binary that runs a task read from standard input.
pub const SUBCOMMAND: &str = "child";
/// The task line's version: parent and child are the same binary, so a mismatch is a binary
/// replaced under a running parent, refused by name.
pub const VERSION: u32 = 1;
/// The task line's largest size (a scenario with its service file fits many times).
pub const MAX_TASK: usize = 8 << 20;

/// What a child of ours is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A part of a run (`horde_scenario::part::Part`).
    Part,
    /// An emulated experiment's userspace link emulator (it outlives the command that started it).
    LinkEmulator,
    /// A whole run another process asks for (`horde_scenario::part::RunRequest`: the console's).
    Run,
    /// A command in an emulated node, under an init in a PID namespace of its own
    /// (`horde_emu::exec::ExecTask`, read from [`TASK_FD`]: its standard input is the
    /// command's).
    ExecInit,
}

/// The descriptor an `exec-init` child reads its task from.
pub const TASK_FD: RawFd = 3;

/// Writes a child's task line (an [`Envelope`]) to `out`.
pub fn write_task(out: &mut impl Write, kind: Kind, id: &str, task: &impl Serialize) -> io::Result<()> {
    let mut line = serde_json::to_vec(&Envelope { version: VERSION, kind, id: id.to_string(), task }).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Part => "part",
            Kind::LinkEmulator => "link-emulator",
            Kind::Run => "run",
            Kind::ExecInit => "exec-init",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        [Kind::Part, Kind::LinkEmulator, Kind::Run, Kind::ExecInit].into_iter().find(|k| k.as_str() == s)
    }
}

/// The line a child reads first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope<T> {
    pub version: u32,
    pub kind: Kind,
    pub id: String,
    pub task: T,
}

/// How a child is tied to this process.
pub struct Tie {
    /// The signal the child gets when this process dies (and it does not start if this process
    /// died first); `None`: it outlives this process (a daemon).
    pub death_signal: Option<i32>,
    /// A session of its own: the terminal's Ctrl-C does not reach it.
    pub own_session: bool,
    /// The network namespace it runs in (a descriptor open until `spawn` returns).
    pub netns: Option<RawFd>,
    /// Standard input stays open after the task line (typed lines follow, e.g. commands).
    pub keep_stdin: bool,
    pub stdout: Stdio,
    pub stderr: Stdio,
}

/// Arms `cmd` as every child of Horde is armed; `then` runs last in the child, before exec.
/// It must be async-signal-safe (as must everything between fork and exec).
pub fn arm(
    cmd: &mut Command,
    death_signal: Option<i32>,
    own_session: bool,
    netns: Option<RawFd>,
    mut then: impl FnMut() -> io::Result<()> + Send + Sync + 'static,
) {
    // SAFETY: getpid (before the fork), prctl, getppid, setsid and setns are
    // async-signal-safe; `then` must be too (its contract).
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            if let Some(sig) = death_signal {
                libc::prctl(libc::PR_SET_PDEATHSIG, sig);
                if libc::getppid() != parent {
                    return Err(io::Error::other("the parent horde exited"));
                }
            }
            if own_session {
                libc::setsid();
            }
            if let Some(fd) = netns {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            then()
        });
    }
}

/// Starts this binary as `horde child KIND ID` with `task` as its first standard-input line.
pub fn spawn(kind: Kind, id: &str, task: &impl Serialize, tie: Tie) -> io::Result<Child> {
    let exe = std::env::current_exe().map_err(|e| io::Error::new(e.kind(), format!("locating the horde binary: {e}")))?;
    let line = serde_json::to_vec(&Envelope { version: VERSION, kind, id: id.to_string(), task }).map_err(io::Error::other)?;
    let mut cmd = Command::new(exe);
    cmd.args([SUBCOMMAND, kind.as_str(), id]).stdin(Stdio::piped()).stdout(tie.stdout).stderr(tie.stderr);
    arm(&mut cmd, tie.death_signal, tie.own_session, tie.netns, || Ok(()));
    let mut child = cmd.spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let written = stdin.write_all(&line).and_then(|_| stdin.write_all(b"\n")).and_then(|_| stdin.flush());
    if let Err(e) = written {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::new(e.kind(), format!("handing the {} its task: {e}", kind.as_str())));
    }
    if tie.keep_stdin {
        child.stdin = Some(stdin);
    }
    Ok(child)
}

/// The signal a child tied to us gets when we die ([`Tie::death_signal`], [`arm`]).
pub const DIE_WITH_US: i32 = libc::SIGKILL;

/// How a child of ours ended, if it has — without reaping it, so that [`reap`] still gets its
/// own resource usage.
pub fn exited(child: &mut Child) -> Option<String> {
    // SAFETY: waitid fills a plain siginfo for our own child; WNOWAIT leaves it unreaped.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::waitid(libc::P_PID, child.id() as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
    if r != 0 {
        // Reaped already (or not ours): ask the standard library, which keeps the status.
        return child.try_wait().ok().flatten().map(|s| s.to_string());
    }
    // SAFETY: si_pid and si_status are valid for a CLD_* siginfo.
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if pid == 0 {
        return None;
    }
    Some(match info.si_code {
        libc::CLD_EXITED => format!("exit status: {status}"),
        _ => format!("signal: {status}"),
    })
}

/// Asks a child of ours to stop (SIGTERM): it ends its run and writes what it has.
pub fn terminate(child: &Child) {
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

/// Asks a child of ours to stop ([`terminate`]), gives it `grace` to do so, then kills it; reaped
/// either way.
pub fn stop_within(child: &mut Child, grace: std::time::Duration) {
    terminate(child);
    let t = crate::clock::Stopwatch::start();
    while t.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits for a child of ours and takes its own resource usage (from wait4: not
/// `RUSAGE_CHILDREN`, which also holds whatever else this process reaped). `None` for the usage
/// when the standard library had reaped it already.
pub fn reap(child: &mut Child) -> io::Result<(std::process::ExitStatus, Option<crate::host::Usage>)> {
    use std::os::unix::process::ExitStatusExt as _;
    let mut status = 0;
    // SAFETY: waiting for our own child by pid; `ru` is a plain struct wait4 fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = loop {
        let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
        if r >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break r;
        }
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        // Reaped already by the standard library: its status is kept there.
        return if e.raw_os_error() == Some(libc::ECHILD) { child.wait().map(|s| (s, None)) } else { Err(e) };
    }
    let usage = crate::host::Usage::of(&ru);
    Ok((std::process::ExitStatus::from_raw(status), Some(usage)))
}

/// The child's side: reads and checks its task line (`kind` and `id` as its arguments say).
pub fn read_task<T: DeserializeOwned>(input: &mut impl BufRead, kind: Kind, id: &str) -> io::Result<T> {
    let mut line = Vec::new();
    let n = io::Read::take(&mut *input, MAX_TASK as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(io::Error::other("no task on standard input: `horde child` is started by horde itself, with its task as a JSON line"));
    }
    if n > MAX_TASK {
        return Err(io::Error::other(format!("a task line over {MAX_TASK} bytes")));
    }
    let e: Envelope<serde_json::Value> = serde_json::from_slice(&line).map_err(|e| io::Error::other(format!("the task line: {e}")))?;
    if e.version != VERSION {
        return Err(io::Error::other(format!("a task of version {} (this horde reads {VERSION}): the binary changed under its parent; run again", e.version)));
    }
    if e.kind != kind || e.id != id {
        return Err(io::Error::other(format!("a task for {} {} given to {} {id}", e.kind.as_str(), e.id, kind.as_str())));
    }
    serde_json::from_value(e.task).map_err(|e| io::Error::other(format!("the {} task: {e}", kind.as_str())))
}

/// Writes one typed line (a child's answer) and flushes it.
pub fn write_line(out: &mut impl Write, msg: &impl Serialize) -> io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

/// Reads one typed line (a child's answer); `None` at the end of the stream. A line longer than
/// `max` bytes is an error.
pub fn read_line<T: DeserializeOwned>(input: &mut impl BufRead, max: usize) -> io::Result<Option<T>> {
    let mut line = Vec::new();
    let n = io::Read::take(&mut *input, max as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if n > max {
        return Err(io::Error::other(format!("a line over {max} bytes from a child")));
    }
    serde_json::from_slice(&line).map(Some).map_err(|e| io::Error::other(format!("a child's line: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Task {
        exp: String,
    }

    fn line(v: u32, kind: &str, id: &str) -> Vec<u8> {
        format!("{{\"version\":{v},\"kind\":\"{kind}\",\"id\":\"{id}\",\"task\":{{\"exp\":\"{id}\"}}}}\n").into_bytes()
    }

    #[test]
    fn a_task_is_read_once_checked_against_the_label() {
        let t: Task = read_task(&mut &line(VERSION, "link-emulator", "ab1")[..], Kind::LinkEmulator, "ab1").unwrap();
        assert_eq!(t, Task { exp: "ab1".into() });
        let e = read_task::<Task>(&mut &line(VERSION, "part", "ab1")[..], Kind::LinkEmulator, "ab1").unwrap_err();
        assert!(e.to_string().contains("a task for part ab1 given to link-emulator ab1"), "{e}");
        let e = read_task::<Task>(&mut &line(VERSION + 1, "link-emulator", "ab1")[..], Kind::LinkEmulator, "ab1").unwrap_err();
        assert!(e.to_string().contains("binary changed"), "{e}");
        let e = read_task::<Task>(&mut &b""[..], Kind::Part, "x").unwrap_err();
        assert!(e.to_string().contains("started by horde itself"), "{e}");
        let e = read_task::<Task>(&mut &b"{\"version\":1}\n"[..], Kind::Part, "x").unwrap_err();
        assert!(e.to_string().contains("the task line"), "{e}");
    }

    #[test]
    fn answers_are_lines_and_a_long_one_is_refused() {
        let mut buf = Vec::new();
        write_line(&mut buf, &Task { exp: "a".into() }).unwrap();
        write_line(&mut buf, &Task { exp: "b".into() }).unwrap();
        let mut r = &buf[..];
        assert_eq!(read_line::<Task>(&mut r, 100).unwrap(), Some(Task { exp: "a".into() }));
        assert_eq!(read_line::<Task>(&mut r, 100).unwrap(), Some(Task { exp: "b".into() }));
        assert_eq!(read_line::<Task>(&mut r, 100).unwrap(), None);
        assert!(read_line::<Task>(&mut &buf[..], 5).is_err());
        assert_eq!(Kind::parse("link-emulator"), Some(Kind::LinkEmulator));
        assert_eq!(Kind::parse("daemon"), None);
    }
}
