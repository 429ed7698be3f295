//! Socket set-up and batched datagram I/O (sendmmsg / recvmmsg with ancillary data).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Datagrams moved per sendmmsg/recvmmsg call.
pub const BATCH: usize = 64;
/// Socket buffer asked for on data sockets: deep enough to absorb scheduling hiccups at
/// 250k pkt/s on loopback (SO_RCVBUFFORCE as root, else capped by net.core.rmem_max).
pub const SOCKET_BUFFER: usize = 64 << 20;
const CMSG_LEN: usize = 128;

fn domain(a: &SocketAddr) -> Domain {
    if a.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    }
}

/// The unspecified address of `a`'s family, port 0.
pub fn any_of(a: &SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

fn setsockopt_int(fd: RawFd, level: i32, opt: i32, v: i32) -> io::Result<()> {
    // SAFETY: passing a pointer to a live i32 of the stated length.
    let r = unsafe { libc::setsockopt(fd, level, opt, &v as *const i32 as *const libc::c_void, size_of::<i32>() as u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets TOS / traffic class and TTL / hop limit on a socket of the given family.
pub fn set_tos_ttl(s: &Socket, v6: bool, tos: Option<u8>, ttl: Option<u8>) -> io::Result<()> {
    if let Some(t) = tos {
        if v6 {
            setsockopt_int(s.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS, t as i32)?;
        } else {
            s.set_tos(t as u32)?;
        }
    }
    if let Some(t) = ttl {
        if v6 {
            s.set_unicast_hops_v6(t as u32)?;
        } else {
            s.set_ttl(t as u32)?;
        }
    }
    Ok(())
}

/// `SO_PRIORITY`; 7 and above need CAP_NET_ADMIN (the error says so).
pub fn set_priority(s: &Socket, prio: u32) -> io::Result<()> {
    setsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PRIORITY, prio as i32).map_err(|e| {
        if e.raw_os_error() == Some(libc::EPERM) {
            io::Error::new(e.kind(), format!("priority {prio} needs root (CAP_NET_ADMIN); 0..6 does not"))
        } else {
            e
        }
    })
}

/// `TCP_QUICKACK` on a TCP socket: its next ACKs leave at once. The kernel may fall back to
/// delayed ACKs later, so it is set again after every read.
pub fn quickack(fd: RawFd) {
    let _ = setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1);
}

/// Large send and receive buffers; forced past rmem_max when running as root.
pub fn grow_buffers(s: &Socket) {
    let fd = s.as_raw_fd();
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, SOCKET_BUFFER as i32).is_err() {
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    }
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SOCKET_BUFFER as i32).is_err() {
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    }
}

/// Asks for kernel receive timestamps and the received TOS/TTL as ancillary data.
pub fn enable_rx_info(s: &Socket, v6: bool) -> io::Result<()> {
    let fd = s.as_raw_fd();
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    if v6 {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, 1)?;
    } else {
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTTL, 1)?;
    }
    Ok(())
}

/// A non-blocking UDP socket connected to `dst`, optionally bound to `src`.
pub fn udp_connected(dst: SocketAddr, src: Option<SocketAddr>, tos: Option<u8>, ttl: Option<u8>) -> io::Result<Socket> {
    let s = Socket::new(domain(&dst), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    grow_buffers(&s);
    set_tos_ttl(&s, dst.is_ipv6(), tos, ttl)?;
    s.bind(&SockAddr::from(src.unwrap_or_else(|| any_of(&dst))))?;
    s.connect(&SockAddr::from(dst))?;
    Ok(s)
}

/// A non-blocking UDP socket bound to `addr` for receiving.
pub fn udp_listener(addr: SocketAddr) -> io::Result<Socket> {
    udp_listener_shared(addr, false)
}

/// [`udp_listener`]; with `shared`, SO_REUSEPORT lets one socket per worker bind the port (the
/// kernel keeps each client address on one socket).
pub fn udp_listener_shared(addr: SocketAddr, shared: bool) -> io::Result<Socket> {
    let s = Socket::new(domain(&addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    if shared {
        s.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    grow_buffers(&s);
    enable_rx_info(&s, addr.is_ipv6())?;
    s.bind(&SockAddr::from(addr))?;
    Ok(s)
}

/// A non-blocking TCP listener on `addr` with a backlog deep enough for 10,000 connects at once.
pub fn tcp_listener(addr: SocketAddr) -> io::Result<Socket> {
    tcp_listener_shared(addr, false)
}

/// [`tcp_listener`]; with `shared`, SO_REUSEPORT lets several listeners (one per worker thread)
/// bind the same port, and the kernel spreads incoming connections over them.
pub fn tcp_listener_shared(addr: SocketAddr, shared: bool) -> io::Result<Socket> {
    let s = Socket::new(domain(&addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_nonblocking(true)?;
    s.set_reuse_address(true)?;
    if shared {
        s.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&SockAddr::from(addr))?;
    s.listen(65_535)?;
    Ok(s)
}

/// Starts a non-blocking TCP connect. Completion shows as writability.
pub fn tcp_connect(dst: SocketAddr, src: Option<SocketAddr>, tos: Option<u8>, ttl: Option<u8>, nodelay: bool) -> io::Result<Socket> {
    let s = tcp_socket(dst, src, tos, ttl, nodelay)?;
    start_connect(&s, dst)?;
    Ok(s)
}

/// A non-blocking TCP socket set up for `dst`, not yet connected (see [`start_connect`]).
pub fn tcp_socket(dst: SocketAddr, src: Option<SocketAddr>, tos: Option<u8>, ttl: Option<u8>, nodelay: bool) -> io::Result<Socket> {
    let s = Socket::new(domain(&dst), Type::STREAM, Some(Protocol::TCP))?;
    s.set_nonblocking(true)?;
    s.set_nodelay(nodelay)?;
    set_tos_ttl(&s, dst.is_ipv6(), tos, ttl)?;
    if let Some(src) = src {
        s.bind(&SockAddr::from(src))?;
    }
    Ok(s)
}

/// Starts a non-blocking connect; completion shows as writability.
pub fn start_connect(s: &Socket, dst: SocketAddr) -> io::Result<()> {
    match s.connect(&SockAddr::from(dst)) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sends `bufs` as datagrams on a connected socket in one sendmmsg call; returns how many left.
/// `WouldBlock` means none did.
pub fn send_batch(fd: RawFd, bufs: &[&[u8]]) -> io::Result<usize> {
    let mut iovs: [libc::iovec; BATCH] = unsafe { zeroed() };
    let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
    let n = bufs.len().min(BATCH);
    for i in 0..n {
        iovs[i] = libc::iovec { iov_base: bufs[i].as_ptr() as *mut libc::c_void, iov_len: bufs[i].len() };
        hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: hdrs[..n] point at iovecs that point at live buffers for the duration of the call.
    let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT as _) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Most datagrams one GSO super-datagram carries (the kernel's `UDP_MAX_SEGMENTS`).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Most payload bytes of one super-datagram (an IPv6 packet's 65,535 less its headers).
const GSO_MAX_BYTES: usize = 65_000;
/// Room for one `UDP_SEGMENT` control message (CMSG_SPACE of a u16).
const GSO_CMSG: usize = 32;

/// Whether `bufs` can leave as GSO super-datagrams: two or more, every one as long as the
/// first but the last, which may be shorter, and that length within what a super-datagram
/// holds twice.
pub fn gso_fits(bufs: &[&[u8]]) -> bool {
    let Some((first, rest)) = bufs.split_first() else { return false };
    let seg = first.len();
    !rest.is_empty() && seg > 0 && 2 * seg <= GSO_MAX_BYTES && rest.iter().enumerate().all(|(k, b)| b.len() == seg || (k + 1 == rest.len() && b.len() <= seg))
}

/// Sends `bufs` ([`gso_fits`]) on a connected socket as GSO super-datagrams (`UDP_SEGMENT`):
/// one `sendmmsg` of super-datagrams of up to [`GSO_MAX_SEGMENTS`] segments each, which the
/// kernel (or the interface) cuts into exactly the datagrams [`send_batch`] would send. Returns
/// how many datagrams left (whole super-datagrams only); `WouldBlock` means none did. An error
/// such as `EIO` (the interface cannot checksum them) means the caller sends them plainly.
pub fn send_gso(fd: RawFd, bufs: &[&[u8]]) -> io::Result<usize> {
    debug_assert!(gso_fits(bufs));
    let seg = bufs[0].len();
    let per = (GSO_MAX_BYTES / seg).min(GSO_MAX_SEGMENTS);
    let n = bufs.len().min(BATCH);
    let mut iovs: [libc::iovec; BATCH] = unsafe { zeroed() };
    let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
    let mut cmsgs = [[0u64; GSO_CMSG / 8]; BATCH];
    let msgs = n.div_ceil(per);
    for (i, b) in bufs[..n].iter().enumerate() {
        iovs[i] = libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() };
    }
    for m in 0..msgs {
        let (a, b) = (m * per, ((m + 1) * per).min(n));
        let h = &mut hdrs[m].msg_hdr;
        h.msg_iov = &mut iovs[a];
        h.msg_iovlen = b - a;
        h.msg_control = cmsgs[m].as_mut_ptr() as *mut libc::c_void;
        // SAFETY: CMSG_SPACE of a u16 fits the control buffer (GSO_CMSG); the header is written
        // through the macros that lay it out as the kernel reads it.
        unsafe {
            h.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
            let c = libc::CMSG_FIRSTHDR(h);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, seg as u16);
        }
    }
    // SAFETY: hdrs[..msgs] point at iovecs over live buffers and at their own control data.
    let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), msgs as u32, libc::MSG_DONTWAIT as _) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((r as usize * per).min(n))
    }
}

/// Asks the kernel to hand a UDP socket's datagrams of one flow that arrive together as one
/// buffer with their segment size (`UDP_GRO`); [`RecvBatch`] cuts them apart again. Needs
/// receive buffers of 64 KiB.
pub fn enable_gro(s: &Socket) -> io::Result<()> {
    setsockopt_int(s.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// A TCP socket's send queue: bytes written and not yet acknowledged by the peer
/// (`SIOCOUTQ`), and of them the bytes not yet sent at all (`SIOCOUTQNSD`: held back by the
/// congestion or receive window). None where the kernel does not say.
pub fn tcp_send_queue(fd: RawFd) -> Option<(u64, u64)> {
    let (mut outq, mut unsent): (libc::c_int, libc::c_int) = (0, 0);
    // SAFETY: both ioctls write one int to the pointer given.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut outq) == 0 && libc::ioctl(fd, SIOCOUTQNSD, &mut unsent) == 0 };
    ok.then(|| (outq.max(0) as u64, unsent.max(0) as u64))
}

/// `SIOCOUTQNSD` (linux/sockios.h): a TCP socket's bytes not yet sent.
const SIOCOUTQNSD: libc::c_ulong = 0x894B;

/// Bytes waiting to be read on stream socket `fd` (`FIONREAD`); 0 where the kernel does not say.
pub fn unread_bytes(fd: RawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int to the pointer given.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if r == 0 {
        n.max(0) as usize
    } else {
        0
    }
}

/// Datagrams socket `fd` dropped because its receive buffer was full, since it was opened
/// (`SO_MEMINFO`'s `SK_MEMINFO_DROPS`); 0 where the kernel does not say.
pub fn socket_drops(fd: RawFd) -> u64 {
    const SO_MEMINFO: libc::c_int = 55;
    let mut info = [0u32; 9]; // SK_MEMINFO_VARS; SK_MEMINFO_DROPS is the last
    let mut len = size_of_val(&info) as libc::socklen_t;
    // SAFETY: the buffer holds `len` bytes; the kernel writes at most that.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, SO_MEMINFO, info.as_mut_ptr() as *mut libc::c_void, &mut len) };
    if r == 0 && len as usize >= size_of_val(&info) {
        info[8] as u64
    } else {
        0
    }
}

/// Sends each datagram to its own address (echo replies) in one sendmmsg call.
pub fn send_batch_to(fd: RawFd, bufs: &[&[u8]], to: &[SocketAddr]) -> io::Result<usize> {
    let mut iovs: [libc::iovec; BATCH] = unsafe { zeroed() };
    let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
    let names: Vec<SockAddr> = to.iter().map(|a| SockAddr::from(*a)).collect();
    let n = bufs.len().min(BATCH).min(to.len());
    for i in 0..n {
        iovs[i] = libc::iovec { iov_base: bufs[i].as_ptr() as *mut libc::c_void, iov_len: bufs[i].len() };
        hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
        hdrs[i].msg_hdr.msg_name = names[i].as_ptr() as *mut libc::c_void;
        hdrs[i].msg_hdr.msg_namelen = names[i].len();
    }
    // SAFETY: as in send_batch; names outlive the call.
    let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT as _) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// What the kernel told about one received datagram.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxInfo {
    pub len: usize,
    /// CLOCK_REALTIME ns from SO_TIMESTAMPNS, 0 if absent.
    pub kernel_ns: u64,
    /// 255 if not reported.
    pub tos: u8,
    /// 0 if not reported.
    pub ttl: u8,
    pub from: Option<SocketAddr>,
}

/// Socket errors in a row that [`RecvBatch::recv_queued`] reads past (each read clears one).
pub const PENDING_ERRORS: usize = 8;

/// Reusable buffers for recvmmsg. Heap storage never moves, so the pointers set up once stay
/// valid; lengths are reset before each call.
pub struct RecvBatch {
    slot: usize,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<[u64; CMSG_LEN / 8]>,
    hdrs: Vec<libc::mmsghdr>,
    /// The datagrams of the last call: where each lies in `bufs` and what the kernel said of it
    /// (a GRO buffer's segments share its timestamp and address).
    segs: Vec<(usize, RxInfo)>,
}

// SAFETY: the raw pointers inside point only into the struct's own heap buffers.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    pub fn new(slot: usize) -> RecvBatch {
        let mut b = RecvBatch {
            slot,
            bufs: vec![0u8; slot * BATCH],
            iovs: vec![libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; BATCH],
            names: vec![unsafe { zeroed() }; BATCH],
            cmsgs: vec![[0u64; CMSG_LEN / 8]; BATCH],
            hdrs: vec![unsafe { zeroed() }; BATCH],
            segs: Vec::with_capacity(BATCH),
        };
        for i in 0..BATCH {
            b.iovs[i] = libc::iovec { iov_base: b.bufs[i * slot..].as_mut_ptr() as *mut libc::c_void, iov_len: slot };
            let h = &mut b.hdrs[i].msg_hdr;
            h.msg_iov = &mut b.iovs[i];
            h.msg_iovlen = 1;
            h.msg_name = &mut b.names[i] as *mut _ as *mut libc::c_void;
            h.msg_control = b.cmsgs[i].as_mut_ptr() as *mut libc::c_void;
        }
        b
    }

    /// Receives up to BATCH buffers without blocking; returns how many datagrams they held (a
    /// GRO buffer holds several: each is one of them, in order).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as u32;
            h.msg_hdr.msg_controllen = CMSG_LEN as _;
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: every header points into buffers owned by self.
        let r = unsafe { libc::recvmmsg(fd, self.hdrs.as_mut_ptr(), BATCH as u32, libc::MSG_DONTWAIT as _, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        self.segs.clear();
        for i in 0..r as usize {
            let (info, seg) = self.parse(i);
            let len = info.len.min(self.slot);
            let seg = if seg == 0 { len.max(1) } else { seg };
            for off in (0..len.max(1)).step_by(seg) {
                self.segs.push((i * self.slot + off, RxInfo { len: (len - off).min(seg), ..info }));
            }
        }
        Ok(self.segs.len())
    }

    /// [`recv`](Self::recv) past pending socket errors. A connected socket reports an ICMP
    /// error (ECONNREFUSED from a port unreachable, …) once, on its next read, before the
    /// datagrams queued behind it; readiness is edge-triggered, so stopping at the error would
    /// leave them unread until another datagram comes (a receiver's signed "stopping" message
    /// waited seconds so, while its sender kept sending). At most [`PENDING_ERRORS`] errors in
    /// a row are passed; `WouldBlock` or `Ok(0)` mean nothing more now.
    pub fn recv_queued(&mut self, fd: RawFd) -> io::Result<usize> {
        let mut errors = 0;
        loop {
            match self.recv(fd) {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock && errors < PENDING_ERRORS => errors += 1,
                r => return r,
            }
        }
    }

    pub fn data(&self, i: usize) -> &[u8] {
        let (at, info) = &self.segs[i];
        &self.bufs[*at..*at + info.len]
    }

    pub fn info(&self, i: usize) -> RxInfo {
        self.segs[i].1
    }

    /// What the kernel said of buffer `i`, and its GRO segment size (0: one datagram).
    fn parse(&self, i: usize) -> (RxInfo, usize) {
        let h = &self.hdrs[i];
        let mut seg = 0;
        let mut info = RxInfo { len: h.msg_len as usize, tos: 255, ..Default::default() };
        info.from = sockaddr_to(&self.names[i], h.msg_hdr.msg_namelen);
        // SAFETY: the kernel filled msg_control up to msg_controllen with well-formed cmsgs.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
            while !c.is_null() {
                let (lvl, ty, data) = ((*c).cmsg_level, (*c).cmsg_type, libc::CMSG_DATA(c));
                match (lvl, ty) {
                    (libc::SOL_SOCKET, libc::SO_TIMESTAMPNS) => {
                        let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                        info.kernel_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                    }
                    (libc::IPPROTO_IP, libc::IP_TOS) => info.tos = *data,
                    (libc::IPPROTO_IP, libc::IP_TTL) => info.ttl = std::ptr::read_unaligned(data as *const i32) as u8,
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => info.tos = std::ptr::read_unaligned(data as *const i32) as u8,
                    (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT) => info.ttl = std::ptr::read_unaligned(data as *const i32) as u8,
                    (libc::SOL_UDP, libc::UDP_GRO) => seg = std::ptr::read_unaligned(data as *const i32).max(0) as usize,
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
            }
        }
        (info, seg)
    }
}

fn sockaddr_to(ss: &libc::sockaddr_storage, len: u32) -> Option<SocketAddr> {
    // SAFETY: reinterpreting sockaddr_storage by its family, as the kernel wrote it.
    unsafe {
        match ss.ss_family as i32 {
            libc::AF_INET if len as usize >= size_of::<libc::sockaddr_in>() => {
                let a = &*(ss as *const _ as *const libc::sockaddr_in);
                Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)), u16::from_be(a.sin_port))))
            }
            libc::AF_INET6 if len as usize >= size_of::<libc::sockaddr_in6>() => {
                let a = &*(ss as *const _ as *const libc::sockaddr_in6);
                Some(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(a.sin6_addr.s6_addr), u16::from_be(a.sin6_port), a.sin6_flowinfo, a.sin6_scope_id)))
            }
            _ => None,
        }
    }
}

pub use horde_sys::netns::within_netns;

#[cfg(test)]
mod option_tests {
    use super::*;

    fn getsockopt_int(fd: RawFd, level: i32, opt: i32) -> i32 {
        let mut v: i32 = -1;
        let mut len = size_of::<i32>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `v`.
        let r = unsafe { libc::getsockopt(fd, level, opt, &mut v as *mut i32 as *mut libc::c_void, &mut len) };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        v
    }

    #[test]
    fn priority_and_quickack_reach_the_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = tcp_socket(l.local_addr().unwrap(), None, None, None, true).unwrap();
        set_priority(&s, 5).unwrap();
        assert_eq!(getsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PRIORITY), 5);
        let _ = s.connect(&SockAddr::from(l.local_addr().unwrap()));
        let (peer, _) = l.accept().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        quickack(peer.as_raw_fd());
        assert_eq!(getsockopt_int(peer.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK), 1);
    }
}
