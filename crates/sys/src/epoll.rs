//! A readiness set with a nanosecond timer: epoll (level-triggered, readable only) waited on
//! with `epoll_pwait2`, whose timeout is a `timespec` — `epoll_wait`'s milliseconds would
//! round every wait up to the next millisecond, and a kernel tick rounds a socket timeout to
//! 4 ms. While descriptors are ready a wait costs one system call and arms no timer. Kernels
//! before 5.11 lack `epoll_pwait2`: there a timerfd in the set (armed before each wait) keeps the
//! nanosecond timeout, at one more system call per wait.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
    /// `epoll_pwait2` is missing (ENOSYS): the timerfd that times each wait instead.
    timer: Option<OwnedFd>,
    /// `epoll_pwait2` was tried and is missing.
    no_pwait2: bool,
}

/// The token of the fallback timer in the set; [`Epoll::add`] refuses it.
const TIMER: u64 = u64::MAX;

impl Epoll {
    /// An empty set reporting at most `capacity` ready descriptors per wait.
    pub fn new(capacity: usize) -> io::Result<Epoll> {
        // SAFETY: plain system call; a non-negative result is a descriptor we now own.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by epoll_create1 and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd, events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)], timer: None, no_pwait2: false })
    }

    /// Watches `fd` for reading; its readiness is reported as `token` (any but `u64::MAX`).
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        if token == TIMER {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "epoll token u64::MAX is the set's own timer"));
        }
        self.watch(fd, token)
    }

    fn watch(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the call; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits at most `wait_ns` for readiness; returns the ready tokens (empty on a timeout or
    /// an interrupted wait). A wait of 0 only looks.
    pub fn wait(&mut self, wait_ns: u64) -> impl Iterator<Item = u64> + '_ {
        let (ep, evs, max) = (self.fd.as_raw_fd(), self.events.as_mut_ptr(), self.events.len() as libc::c_int);
        let ts = libc::timespec { tv_sec: (wait_ns / 1_000_000_000).min(i32::MAX as u64) as _, tv_nsec: (wait_ns % 1_000_000_000) as _ };
        let mut n = -1;
        if !self.no_pwait2 {
            // SAFETY: `evs` has room for `max` events, `ts` is a valid timespec, no signal mask.
            n = unsafe { libc::syscall(libc::SYS_epoll_pwait2, ep, evs, max, &ts as *const libc::timespec, std::ptr::null::<libc::sigset_t>(), 0usize) }
                as libc::c_int;
            self.no_pwait2 = n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS);
        }
        if self.no_pwait2 {
            n = self.wait_with_timer(ts);
        }
        let timer = self.timer.as_ref().map(|t| t.as_raw_fd());
        self.events[..n.max(0) as usize].iter().map(|e| e.u64).filter(move |&t| {
            if t == TIMER {
                let mut x = 0u64;
                // SAFETY: reading the timerfd's 8-byte expiry count into `x`.
                unsafe { libc::read(timer.unwrap_or(-1), &mut x as *mut u64 as *mut libc::c_void, 8) };
            }
            t != TIMER
        })
    }

    /// The wait without `epoll_pwait2`: a relative timerfd in the set, armed for this wait (a
    /// wait of 0 polls); milliseconds if even the timerfd cannot be had.
    fn wait_with_timer(&mut self, ts: libc::timespec) -> libc::c_int {
        let (ep, evs, max) = (self.fd.as_raw_fd(), self.events.as_mut_ptr(), self.events.len() as libc::c_int);
        if self.timer.is_none() {
            // SAFETY: plain system call; a non-negative result is a descriptor we now own.
            let t = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
            if t >= 0 {
                // SAFETY: `t` was just returned by timerfd_create and is owned by nothing else.
                let t = unsafe { OwnedFd::from_raw_fd(t) };
                if self.watch(t.as_raw_fd(), TIMER).is_ok() {
                    self.timer = Some(t);
                }
            }
        }
        let zero = ts.tv_sec == 0 && ts.tv_nsec == 0;
        let Some(t) = self.timer.as_ref().filter(|_| !zero) else {
            let ms = (ts.tv_sec as u64 * 1000 + (ts.tv_nsec as u64).div_ceil(1_000_000)).min(i32::MAX as u64) as libc::c_int;
            // SAFETY: `evs` has room for `max` events.
            return unsafe { libc::epoll_wait(ep, evs, max, ms) };
        };
        let spec = libc::itimerspec { it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 }, it_value: ts };
        // SAFETY: a valid itimerspec for our own timerfd.
        unsafe { libc::timerfd_settime(t.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        // SAFETY: `evs` has room for `max` events.
        unsafe { libc::epoll_wait(ep, evs, max, -1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_makes_its_socket_ready_and_a_wait_ends_on_time() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ep = Epoll::new(8).unwrap();
        ep.add(a.as_raw_fd(), 7).unwrap();
        let t = std::time::Instant::now();
        assert_eq!(ep.wait(3_000_000).count(), 0, "nothing ready");
        assert!(t.elapsed() >= std::time::Duration::from_millis(3), "waited its time");
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        assert_eq!(ep.wait(1_000_000_000).collect::<Vec<_>>(), vec![7]);
        // Level-triggered: still ready until read.
        assert_eq!(ep.wait(0).collect::<Vec<_>>(), vec![7]);
    }

    #[test]
    fn without_epoll_pwait2_a_timerfd_times_the_wait_and_is_never_reported() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ep = Epoll::new(8).unwrap();
        ep.no_pwait2 = true; // as on a kernel before 5.11
        ep.add(a.as_raw_fd(), 7).unwrap();
        assert!(ep.add(b.as_raw_fd(), TIMER).is_err(), "the timer's token is refused");
        for _ in 0..3 {
            let t = std::time::Instant::now();
            assert_eq!(ep.wait(2_500_000).count(), 0, "nothing ready, the timer not reported");
            let took = t.elapsed();
            assert!(took >= std::time::Duration::from_micros(2_500), "waited its time: {took:?}");
        }
        assert!(ep.timer.is_some(), "the fallback timer is in the set");
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        assert_eq!(ep.wait(1_000_000_000).collect::<Vec<_>>(), vec![7]);
        assert_eq!(ep.wait(0).collect::<Vec<_>>(), vec![7], "a wait of 0 only looks");
    }
}
