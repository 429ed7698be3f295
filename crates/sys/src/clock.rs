//! Clocks and precise waiting. Pacing uses CLOCK_MONOTONIC; timestamps carried in packets and
//! logs use CLOCK_REALTIME (so one-way delay across synchronised hosts is meaningful).

/// Default length of the final busy-wait before a departure. Sleeping closer than this to the
/// deadline risks oversleeping: nanosleep on a virtual machine wakes tens of µs late.
pub const DEFAULT_SPIN_NS: u64 = 80_000;

fn now(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; these clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn mono_ns() -> u64 {
    now(libc::CLOCK_MONOTONIC)
}

pub fn real_ns() -> u64 {
    now(libc::CLOCK_REALTIME)
}

/// Time elapsed since it started, on the monotonic clock: how the layers above the engine time
/// a phase (planning, building a network) without reading a clock themselves.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch(u64);

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch(mono_ns())
    }

    pub fn elapsed(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(mono_ns().saturating_sub(self.0))
    }
}

/// Sleeps until the monotonic clock reads `deadline_ns` (no busy-wait).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec { tv_sec: (deadline_ns / 1_000_000_000) as _, tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long };
    // SAFETY: valid timespec; EINTR simply returns early and callers re-check the clock.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC now: what turns a monotonic time into a wall-clock one
/// (read again now and then: the wall clock may be slewed or stepped).
pub fn wall_offset_ns() -> i64 {
    (real_ns() as i128 - mono_ns() as i128) as i64
}

/// Sleeps until `spin_ns` before `deadline_ns`, then spins. Returns the monotonic time reached.
pub fn wait_until(deadline_ns: u64, spin_ns: u64) -> u64 {
    let mut t = mono_ns();
    if t + spin_ns < deadline_ns {
        sleep_until(deadline_ns - spin_ns);
        t = mono_ns();
    }
    while t < deadline_ns {
        std::hint::spin_loop();
        t = mono_ns();
    }
    t
}

/// Asks the kernel for the finest timer slack on this thread (default slack is 50 µs).
pub fn tighten_timer_slack() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Raises the open-file limit to the hard limit (10,000 flows need 10,000 sockets).
pub fn raise_fd_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid out-pointer / in-pointer.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
    r.rlim_cur
}

/// The time a driver above the engine runs on, handed to it rather than read (the engine's
/// pacing reads the clocks itself): the wall clock, and waiting between two looks at what it
/// drives. [`System`] is the machine's; a test can hand a driver a clock it steps itself.
pub trait Clock: Send + Sync {
    /// CLOCK_REALTIME, ns since the Unix epoch.
    fn real_ns(&self) -> u64;
    /// Waits `d` (a driver's look interval).
    fn sleep(&self, d: std::time::Duration);
}

/// The machine's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct System;

impl Clock for System {
    fn real_ns(&self) -> u64 {
        real_ns()
    }

    fn sleep(&self, d: std::time::Duration) {
        std::thread::sleep(d)
    }
}

/// Whole seconds since the Unix epoch (names of report directories).
pub fn unix_secs() -> u64 {
    real_ns() / 1_000_000_000
}
