//! A command in a PID namespace of its own, under a small init (as `tini` or `docker --init`):
//! whatever the command leaves behind — a background child, a daemon that called `setsid` —
//! is in the namespace, and when its init ends the kernel ends every process in it. So a
//! command's tree ends with it where no cgroup hierarchy is visible (an agent started by `ip
//! netns exec`), and `down` ends it by ending one process.
//!
//! [`run_init`] is the whole of a process that horde starts for the purpose (`horde child
//! exec-init`, single-threaded when it gets here): it makes the namespace, forks the init (pid
//! 1 inside, tied to this process by its parent-death signal), which forks and execs the
//! command and reaps whatever is reparented to it. Signals this process gets (SIGTERM, SIGINT,
//! SIGHUP) go to the init, and from it to the command. Exit status: the command's (128 + the
//! signal that ended it).

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The process signals are forwarded to (the init, in this process; the command, in the init).
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);
/// A signal came: a supervised command is not started again.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// A supervised command ([`Restart::Always`]) waits this long before its first new start,
/// doubling to [`BACKOFF_MAX_S`] while it keeps ending; one that ran [`BACKOFF_MAX_S`] or more
/// starts from the first wait again.
pub const BACKOFF_FIRST_S: i64 = 1;
pub const BACKOFF_MAX_S: i64 = 30;
/// A supervised command that ends this soon after its first start is not started again: it
/// cannot start at all (a wrong option, a missing file), and whoever started it is told by the
/// init's end (`up` watches a service for half a second).
pub const FIRST_RUN_MIN_MS: i64 = 400;

/// Whether the init starts the command again when it has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    Never,
    /// Once the command and everything it left in the namespace have ended, after a wait (see
    /// [`BACKOFF_FIRST_S`]), until a signal ends the init (a node's service: `down`).
    Always,
}

extern "C" fn forward(sig: libc::c_int) {
    STOPPING.store(true, Ordering::Relaxed);
    let pid = FORWARD_TO.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

fn code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}

/// Runs `program` with `argv` (argv[0] included) in a new PID namespace and returns its exit
/// status. `keep`: the init stays until every process in the namespace has ended (a command
/// started in the background whose daemons should run on); otherwise the namespace ends with
/// the command. `restart`: see [`Restart`] (with `keep`). Call only in a single-threaded process.
pub fn run_init(program: &str, argv: &[String], keep: bool, restart: Restart) -> io::Result<i32> {
    let prog = CString::new(program).map_err(|_| io::Error::other("a program path with a NUL"))?;
    let args: Vec<CString> = argv.iter().map(|a| CString::new(a.as_str())).collect::<Result<_, _>>().map_err(|_| io::Error::other("an argument with a NUL"))?;
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: plain system call.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("a PID namespace for the command: {e}")));
    }
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: installing an async-signal-safe handler.
        unsafe { libc::signal(sig, forward as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
    // SAFETY: fork in a single-threaded process; the child makes only async-signal-safe calls.
    let init = unsafe { libc::fork() };
    if init < 0 {
        return Err(io::Error::last_os_error());
    }
    if init == 0 {
        // SAFETY: pid 1 of the new namespace: only async-signal-safe calls until _exit.
        unsafe { init_main(prog.as_ptr(), ptrs.as_ptr(), keep, restart == Restart::Always) }
    }
    FORWARD_TO.store(init, Ordering::Relaxed);
    loop {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(init, &mut status, 0) };
        if r == init {
            return Ok(code(status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The init: pid 1 of the namespace.
///
/// # Safety
/// Called in the child of a fork; makes only async-signal-safe calls.
unsafe fn init_main(prog: *const libc::c_char, argv: *const *const libc::c_char, keep: bool, restart: bool) -> ! {
    // it ends with the process that started it, and with it the namespace. (getppid() says 0
    // here, its parent being outside the namespace, so a parent killed between the fork and
    // this call cannot be told: the parent forwards every signal but SIGKILL, and one in that
    // window leaves the command running until `down`.)
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    let mut backoff = BACKOFF_FIRST_S;
    let mut first = true;
    loop {
        let started = now_ms();
        let exit = run_once(prog, argv, keep);
        let ran_ms = now_ms() - started;
        if !restart || STOPPING.load(Ordering::Relaxed) || (first && ran_ms < FIRST_RUN_MIN_MS) {
            libc::_exit(exit);
        }
        first = false;
        if ran_ms >= BACKOFF_MAX_S * 1000 {
            backoff = BACKOFF_FIRST_S;
        }
        let msg = b"horde: the service ended; starting it again\n";
        libc::write(2, msg.as_ptr().cast(), msg.len());
        let mut wait = libc::timespec { tv_sec: backoff, tv_nsec: 0 };
        // a signal while it waits ends the init
        while libc::nanosleep(&wait, &mut wait) != 0 {
            if STOPPING.load(Ordering::Relaxed) {
                libc::_exit(exit);
            }
        }
        if STOPPING.load(Ordering::Relaxed) {
            libc::_exit(exit);
        }
        backoff = (backoff * 2).min(BACKOFF_MAX_S);
    }
}

/// Milliseconds on the monotonic clock (async-signal-safe).
unsafe fn now_ms() -> i64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t);
    t.tv_sec * 1000 + t.tv_nsec / 1_000_000
}

/// Forks and execs the command, then reaps until it has ended (and, with `keep`, everything
/// else in the namespace too; without, the init ends with it). Returns its exit status.
///
/// # Safety
/// As [`init_main`].
unsafe fn run_once(prog: *const libc::c_char, argv: *const *const libc::c_char, keep: bool) -> i32 {
    let cmd = libc::fork();
    if cmd < 0 {
        libc::_exit(126);
    }
    if cmd == 0 {
        // the command: exec resets the handlers to their defaults
        libc::execvp(prog, argv);
        libc::_exit(127);
    }
    FORWARD_TO.store(cmd, Ordering::Relaxed);
    let mut exit = None;
    loop {
        let mut status = 0;
        let pid = libc::waitpid(-1, &mut status, 0);
        if pid == cmd {
            exit = Some(code(status));
            if !keep {
                // the namespace ends with its init: whatever the command left is ended
                libc::_exit(code(status));
            }
        } else if pid < 0 && *libc::__errno_location() == libc::ECHILD {
            return exit.unwrap_or(1);
        }
    }
}
