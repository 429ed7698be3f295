//! A command in an emulated node: the one way into a node, for `horde emu exec`, agents and
//! the console alike. The command runs in the node's network namespace with its identity
//! (hostname, hosts file, `/sys`, state directories), in the node's directory, recorded as
//! Horde's (so `down` and `cleanup` stop it, and no process Horde did not start), and ends with
//! the thread that started it (SIGTERM, so it can clean up). Each command runs in a PID
//! namespace of its own under a small init (`horde child exec-init`, [`horde_sys::pidns`]), and
//! in a cgroup of its own under the experiment's where a cgroup hierarchy is visible
//! (`horde_sys::cgroup`): whatever it starts — a background child, a daemon that calls
//! `setsid` — stays in both, so a command run to its end ([`run`]) takes its whole tree with
//! it, with or without cgroups, and `down` ends every process any command left.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::EmuError;

/// Most arguments a command may have, and most bytes in one.
pub const MAX_ARGS: usize = 256;
pub const MAX_ARG_BYTES: usize = 4096;

/// Checks a command's arguments: 1..=256 of at most 4096 bytes, no NUL.
pub fn check_argv(argv: &[String]) -> Result<(), EmuError> {
    if argv.is_empty() || argv.len() > MAX_ARGS || argv.iter().any(|a| a.len() > MAX_ARG_BYTES || a.contains('\0')) {
        return Err(EmuError::Other(format!("a command is 1..={MAX_ARGS} arguments of at most {MAX_ARG_BYTES} bytes, without NUL")));
    }
    Ok(())
}

/// A command running in a node; forgotten from the experiment's record when it is dropped.
pub struct InNode {
    child: Child,
    exp: String,
    /// Its process tree (absent where no cgroup hierarchy is mounted: then the command leads a
    /// process group of its own, which holds what it leaves running unless that leaves it).
    tree: Option<horde_sys::cgroup::Tree>,
}

impl InNode {
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait()
    }

    /// Ends what the command left running (its background children, wherever they went) and
    /// removes its group; returns how many processes that killed.
    pub fn end_tree(&mut self) -> usize {
        match self.tree.take() {
            Some(t) => t.remove().0,
            None => {
                // its process group (it leads one when there is no group to join); the
                // leader has exited or been stopped already
                // SAFETY: kill(2) on the group our own child leads.
                let ended = unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) } == 0;
                usize::from(ended)
            }
        }
    }
}

/// The cgroup (relative to `horde_sys::cgroup::hierarchy`) holding every command's group of
/// experiment `exp`.
pub fn experiment_tree(exp: &str) -> String {
    format!("horde-emu/{exp}")
}

/// A fresh group for one command of `exp`.
fn command_tree(exp: &str) -> Option<horde_sys::cgroup::Tree> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let name = format!("{}/c-{}-{stamp}-{}", experiment_tree(exp), std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    horde_sys::cgroup::Tree::create(&name).ok()
}

impl Drop for InNode {
    fn drop(&mut self) {
        // (a command started in the background keeps its record: `exp` cleared)
        if !self.exp.is_empty() {
            crate::forget_process(&self.exp, self.child.id());
        }
    }
}

/// What `horde child exec-init` runs: a command in its own PID namespace.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecTask {
    /// The program, resolved (a path).
    pub program: String,
    /// Its arguments, argv[0] included.
    pub argv: Vec<String>,
    /// Keep the namespace until everything in it has ended (a background command), rather
    /// than ending it with the command.
    pub keep: bool,
    /// Start the command again once it and everything it left have ended (a node's service:
    /// supervised until `down`), after a growing wait (`horde_sys::pidns::Restart`).
    #[serde(default)]
    pub restart: bool,
}

/// Runs an [`ExecTask`] (the `exec-init` child's whole work); returns the command's exit status.
pub fn run_task(t: &ExecTask) -> std::io::Result<i32> {
    check_argv(&t.argv).map_err(|e| std::io::Error::other(e.to_string()))?;
    let restart = if t.restart && t.keep { horde_sys::pidns::Restart::Always } else { horde_sys::pidns::Restart::Never };
    horde_sys::pidns::run_init(&t.program, &t.argv, t.keep, restart)
}

/// Starts `argv` in node `node` of experiment `exp` (`stdio`: its standard input, output and
/// error). `horde` is this binary when no `horde` is on the PATH (sudo resets PATH; a freshly
/// built binary is in target/release).
pub fn spawn(exp: &str, node: &str, argv: &[String], stdio: [Stdio; 3]) -> Result<InNode, EmuError> {
    spawn_with(exp, node, argv, stdio, false)
}

fn spawn_with(exp: &str, node: &str, argv: &[String], stdio: [Stdio; 3], keep: bool) -> Result<InNode, EmuError> {
    spawn_tied(exp, node, argv, stdio, (keep, false), Some(libc::SIGTERM))
}

/// [`spawn_with`], the command's init ending on `death_signal` when the thread that started it
/// does (None: not tied, for a command that outlives this process).
/// `(keep, restart)`: see [`ExecTask`].
fn spawn_tied(exp: &str, node: &str, argv: &[String], stdio: [Stdio; 3], (keep, restart): (bool, bool), death_signal: Option<i32>) -> Result<InNode, EmuError> {
    crate::require_root()?;
    check_argv(argv)?;
    let (_, plan) = crate::load(exp)?;
    let nsf = crate::open_node(exp, &plan, node)?;
    let dir = crate::node_dir(exp, node);
    std::fs::create_dir_all(&dir).map_err(|e| EmuError::io(&format!("creating {}", dir.display()), e))?;
    // the program, found as exec would find it, so that a wrong name is said here and not as
    // the init's exit status 127
    let program = match argv[0].as_str() {
        "horde" if which("horde").is_none() => std::env::current_exe().map_err(|e| EmuError::io("locating the horde binary", e))?,
        p if p.contains('/') => PathBuf::from(p),
        p => which(p).ok_or_else(|| {
            EmuError::Other(format!(
                "running `{p}` in {node}: no such program (the node runs this machine's programs: check the name, give its full path, or install it)"
            ))
        })?,
    };
    match std::fs::metadata(dir.join(&program)) {
        Err(_) => {
            return Err(EmuError::Other(format!(
                "running `{}` in {node}: no such program (the node runs this machine's programs: check the name, give its full path, or install it)",
                argv[0]
            )))
        }
        Ok(m) if !m.is_file() || std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 == 0 => {
            return Err(EmuError::Other(format!("running `{}` in {node}: not executable (check its permissions, or give the program that runs it)", argv[0])))
        }
        Ok(_) => {}
    }
    let identity = crate::identity::Identity::prepare(exp, &plan, node)?;
    let [stdin, stdout, stderr] = stdio;
    // the init (this binary), its task on a pipe of its own: its standard input is the command's
    let me = std::env::current_exe().map_err(|e| EmuError::io("locating the horde binary", e))?;
    let (task_r, task_w) = pipe().map_err(|e| EmuError::io("a pipe for the command's task", e))?;
    let mut cmd = Command::new(&me);
    cmd.args([horde_sys::own::SUBCOMMAND, horde_sys::own::Kind::ExecInit.as_str(), exp])
        .current_dir(&dir)
        .env("HORDE_EXPERIMENT", exp)
        .env("HORDE_NODE", node)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&nsf);
    let task_fd = std::os::fd::AsRawFd::as_raw_fd(&task_r);
    let tree = command_tree(exp);
    let joiner = tree.as_ref().and_then(|t| t.joiner().ok());
    let join = joiner.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    // SAFETY (the closure's contract): joining a cgroup is one write(2), Identity::apply makes
    // only async-signal-safe calls, and so are setpgid, dup2 and fcntl.
    horde_sys::own::arm(&mut cmd, death_signal, death_signal.is_none(), Some(fd), move || {
        match join {
            Some(j) => horde_sys::cgroup::join_from_child(j)?,
            // no cgroup hierarchy here (e.g. an agent started by `ip netns exec`, whose /sys is
            // the namespace's): the PID namespace holds its tree, and a process group of its own
            None => {
                unsafe { libc::setpgid(0, 0) };
            }
        }
        unsafe { identity.apply()? };
        let ok = unsafe {
            if task_fd == horde_sys::own::TASK_FD {
                libc::fcntl(task_fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(task_fd, horde_sys::own::TASK_FD)
            }
        };
        if ok < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    });
    let child = cmd.spawn().map_err(|e| EmuError::io(&format!("running `{}` in {node}", argv[0]), e))?;
    drop((nsf, joiner, task_r));
    let task = ExecTask { program: program.display().to_string(), argv: argv.to_vec(), keep, restart };
    let mut w = std::fs::File::from(task_w);
    horde_sys::own::write_task(&mut w, horde_sys::own::Kind::ExecInit, exp, &task).map_err(|e| EmuError::io("handing the command to its init", e))?;
    drop(w);
    let _ = crate::record_process(exp, child.id());
    Ok(InNode { child, exp: exp.to_string(), tree: tree.filter(|_| join.is_some()) })
}

/// What a command run with [`run`] did.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Ran {
    /// Exit status (absent when it was stopped for taking too long, or ended by a signal).
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

/// Runs `argv` in a node until it ends, at most `limit` (then SIGTERM, and SIGKILL half a second
/// later), keeping at most `max_output` bytes of each output stream. What it left running (a
/// background child holding its output open) ends with it: to leave a process running, start
/// it with [`start_detached`].
pub fn run(exp: &str, node: &str, argv: &[String], limit: Duration, max_output: usize) -> Result<Ran, EmuError> {
    let mut p = spawn(exp, node, argv, [Stdio::null(), Stdio::piped(), Stdio::piped()])?;
    let keep = |r: Option<Box<dyn Read + Send>>| r.map(|r| std::thread::spawn(move || bounded(r, max_output)));
    let out = keep(p.child.stdout.take().map(|r| Box::new(r) as _));
    let err = keep(p.child.stderr.take().map(|r| Box::new(r) as _));
    let until = Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        match p.child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() >= until => {
                timed_out = true;
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(p.child.id() as i32, libc::SIGTERM) };
                std::thread::sleep(Duration::from_millis(500));
                let _ = p.child.kill();
                break p.child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(EmuError::io("waiting for the command", e)),
        }
    };
    // Its tree ends with it: a background child would hold the output open (and the caller
    // waiting) for as long as it ran.
    p.end_tree();
    let text = |h: Option<std::thread::JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(Ran { exit: status.and_then(|s| s.code()), stdout: text(out), stderr: text(err), timed_out })
}

/// Starts `argv` in a node in the background, for a process that then exits (`horde emu exec
/// --detach`): not tied to this process, its namespace kept until everything in it has ended
/// or `down`; its output goes to `exec-MS.out` in the node's directory. Returns its pid and
/// the output file.
pub fn start_background(exp: &str, node: &str, argv: &[String]) -> Result<(u32, PathBuf), EmuError> {
    let (out, err, path) = output_file(exp, node)?;
    let mut p = spawn_tied(exp, node, argv, [Stdio::null(), out.into(), err.into()], (true, false), None)?;
    let pid = p.child.id();
    // it outlives this process: its record (for `down`) stays
    p.exp.clear();
    Ok((pid, path))
}

/// Starts service `argv` in a node as [`start_background`] starts a command, its output in
/// `file` of the node's directory; returns it (still this process's child, so that whether it
/// ended at once can be seen) and the output file.
pub fn start_service(exp: &str, node: &str, argv: &[String], file: &str) -> Result<(InNode, PathBuf), EmuError> {
    let (out, err, path) = output_file_named(exp, node, Some(file))?;
    let mut p = spawn_tied(exp, node, argv, [Stdio::null(), out.into(), err.into()], (true, true), None)?;
    p.exp.clear();
    Ok((p, path))
}

fn output_file(exp: &str, node: &str) -> Result<(std::fs::File, std::fs::File, PathBuf), EmuError> {
    output_file_named(exp, node, None)
}

fn output_file_named(exp: &str, node: &str, file: Option<&str>) -> Result<(std::fs::File, std::fs::File, PathBuf), EmuError> {
    let dir = crate::node_dir(exp, node);
    std::fs::create_dir_all(&dir).map_err(|e| EmuError::io(&format!("creating {}", dir.display()), e))?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let path = dir.join(file.map_or_else(|| format!("exec-{stamp}.out"), str::to_string));
    let out = std::fs::File::create(&path).map_err(|e| EmuError::io(&format!("creating {}", path.display()), e))?;
    let err = out.try_clone().map_err(|e| EmuError::io(&path.display().to_string(), e))?;
    Ok((out, err, path))
}

/// Starts `argv` in a node in the background: its output goes to `exec-MS.out` in the node's
/// directory and `down` stops it. A thread of its own starts it and waits for it (so it leaves
/// no zombie, and its parent-death signal is tied to that thread). Returns its pid and the
/// output file.
pub fn start_detached(exp: &str, node: &str, argv: &[String]) -> Result<(u32, PathBuf), EmuError> {
    let (out, err, path) = output_file(exp, node)?;
    let (exp, node, argv) = (exp.to_string(), node.to_string(), argv.to_vec());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("horde-exec-detached".into())
        .spawn(move || match spawn_with(&exp, &node, &argv, [Stdio::null(), out.into(), err.into()], true) {
            Ok(mut p) => {
                let _ = tx.send(Ok(p.child.id()));
                let _ = p.wait();
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        })
        .map_err(|e| EmuError::io("starting a thread", e))?;
    let pid = rx.recv().map_err(|_| EmuError::Other("the command's thread ended before it started".into()))??;
    Ok((pid, path))
}

/// A pipe, both ends close-on-exec.
fn pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both were just returned by pipe2 and are owned by nothing else.
    Ok(unsafe { (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1])) })
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

/// Reads `r` to its end, keeping its first `max` bytes (and saying how many more there were).
fn bounded(mut r: impl Read, max: usize) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut dropped = 0usize;
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
                dropped += n - room;
            }
        }
    }
    let mut s = String::from_utf8_lossy(&kept).into_owned();
    if dropped > 0 {
        s.push_str(&format!("\n[… {dropped} more bytes not kept]\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_bounded_before_anything_runs() {
        for bad in [vec![], vec!["x".to_string(); MAX_ARGS + 1], vec!["a\0b".to_string()], vec!["y".repeat(MAX_ARG_BYTES + 1)]] {
            assert!(check_argv(&bad).unwrap_err().to_string().contains("without NUL"));
        }
        assert!(check_argv(&["ip".into(), "addr".into()]).is_ok());
    }

    #[test]
    fn output_is_kept_up_to_its_bound() {
        assert_eq!(bounded(&b"hello"[..], 10), "hello");
        let s = bounded(&[b'x'; 100][..], 10);
        assert!(s.starts_with("xxxxxxxxxx\n") && s.contains("90 more bytes"), "{s}");
    }
}
