//! A readiness set with a nanosecond timer: epoll (level-triggered, readable only) waited on
//! with `epoll_pwait2`, whose timeout is a `timespec` — `epoll_wait`'s milliseconds would
//! round every wait up to the next millisecond, and a kernel tick rounds a socket timeout to
//! 4 ms. Kernels before 5.11 lack `epoll_pwait2`: the wait falls back to milliseconds.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
    /// `epoll_pwait2` is missing (ENOSYS): wait in milliseconds.
    coarse: bool,
}

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
        Ok(Epoll { fd, events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)], coarse: false })
    }

    /// Watches `fd` for reading; its readiness is reported as `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the call; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits at most `wait_ns` for readiness; returns the ready tokens (empty on a timeout or
    /// an interrupted wait).
    pub fn wait(&mut self, wait_ns: u64) -> impl Iterator<Item = u64> + '_ {
        let (ep, evs, max) = (self.fd.as_raw_fd(), self.events.as_mut_ptr(), self.events.len() as libc::c_int);
        let mut n = -1;
        if !self.coarse {
            let ts = libc::timespec { tv_sec: (wait_ns / 1_000_000_000) as _, tv_nsec: (wait_ns % 1_000_000_000) as _ };
            // SAFETY: `evs` has room for `max` events, `ts` is a valid timespec, no signal mask.
            n = unsafe { libc::syscall(libc::SYS_epoll_pwait2, ep, evs, max, &ts as *const libc::timespec, std::ptr::null::<libc::sigset_t>(), 0usize) }
                as libc::c_int;
            self.coarse = n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS);
        }
        if self.coarse {
            let ms = wait_ns.div_ceil(1_000_000).min(i32::MAX as u64) as libc::c_int;
            // SAFETY: `evs` has room for `max` events.
            n = unsafe { libc::epoll_wait(ep, evs, max, ms) };
        }
        self.events[..n.max(0) as usize].iter().map(|e| e.u64)
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
}
