//! TCP listeners for Horde's control ports: a listen backlog sized to what the listener admits
//! (the kernel's default of 128 drops SYNs under a flood of a few thousand connections a second,
//! and a legitimate client then waits for its one-second retransmission), and an accept that
//! waits for a connection (or `wait`, to look at its stop flag) instead of sleeping.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

/// The backlog Horde's listeners ask for (the kernel caps it at `net.core.somaxconn`, 4096 by
/// default since Linux 5.4).
pub const BACKLOG: i32 = 4096;

/// Binds `addr` (address reuse on, as `std` does) and listens with [`BACKLOG`]; non-blocking.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain system call; a non-negative result is a descriptor we now own.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket() and is owned by nothing else.
    let l = unsafe { TcpListener::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: a valid descriptor and an int option of the size given.
    if unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, (&one as *const libc::c_int).cast(), size_of::<libc::c_int>() as u32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` holds a sockaddr of `len` bytes for this family.
    if unsafe { libc::bind(fd, (&storage as *const libc::sockaddr_storage).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain system call on our descriptor.
    if unsafe { libc::listen(fd, BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(l)
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe { std::ptr::write((&mut s as *mut libc::sockaddr_storage).cast(), sin) };
            (s, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in6 and suitably aligned.
            unsafe { std::ptr::write((&mut s as *mut libc::sockaddr_storage).cast(), sin6) };
            (s, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// Accepts one connection, waiting for one at most `wait` (then `Ok(None)`): the loop around
/// it looks at its stop flag that often, and sleeps never. The stream is blocking.
pub fn accept(l: &TcpListener, wait: Duration) -> io::Result<Option<(TcpStream, SocketAddr)>> {
    loop {
        match l.accept() {
            Ok((s, peer)) => {
                s.set_nonblocking(false)?;
                return Ok(Some((s, peer)));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd { fd: l.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd.
                let n = unsafe { libc::poll(&mut p, 1, wait.as_millis().min(i32::MAX as u128) as i32) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
                if n == 0 {
                    return Ok(None);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_listens_and_accepts_without_sleeping() {
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::time::Instant::now();
        assert!(accept(&l, Duration::from_millis(30)).unwrap().is_none(), "nothing came");
        assert!(t.elapsed() >= Duration::from_millis(25));
        let c = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            TcpStream::connect(addr).unwrap()
        });
        let t = std::time::Instant::now();
        let (_s, peer) = accept(&l, Duration::from_secs(5)).unwrap().expect("a connection");
        assert!(t.elapsed() < Duration::from_secs(1), "woken by the connection, not the timeout");
        assert_eq!(peer, c.join().unwrap().local_addr().unwrap());
        let v6 = bind("[::1]:0".parse().unwrap());
        if let Ok(v6) = v6 {
            assert!(v6.local_addr().unwrap().is_ipv6());
        }
        assert!(bind(addr).is_err(), "the port is taken");
    }
}
