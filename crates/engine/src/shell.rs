//! The socket shells around `horde_proto`'s endpoints: the only loops that move a datagram
//! endpoint's bytes.
//!
//! - [`listen`]: one socket, many peers ([`Endpoint`]: gate, consent, peers by address) — the
//!   server side of a regulated run and `horde circuit serve`.
//! - [`population`]: many clients, a connected socket each ([`Joiner`]s), multiplexed on the
//!   calling thread with `ppoll` — the client side of a regulated run and `horde circuit join`.
//!
//! Both wait with `ppoll` (a high-resolution timer; a socket read timeout is rounded up to the
//! kernel's tick, 4 ms at HZ=250, which would cap the pacing of a 1.5 Mbit/s circuit), read at
//! most 256 datagrams per socket and turn (so sending keeps its pace), close a second of every
//! peer's figures on the second, and stop at `stop` or `end_ns` (the real clock).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use horde_proto::endpoint::{Ended, Endpoint, Joiner, Joining, Peer};
use horde_wire::control::{Hello, Status};

use crate::clock::real_ns;
use crate::sender::Progress;
use crate::EngineError;

const SECOND: u64 = 1_000_000_000;
/// Datagrams read from one socket per turn at most.
const READS_PER_TURN: usize = 256;

/// A nonblocking UDP socket bound to `addr`.
pub fn udp(addr: SocketAddr) -> Result<UdpSocket, EngineError> {
    let io = |what: String| move |err| EngineError::Io { what, err };
    let s = UdpSocket::bind(addr).map_err(io(format!("binding {addr}")))?;
    s.set_nonblocking(true).map_err(io(format!("making {addr} nonblocking")))?;
    Ok(s)
}

/// Waits until one of `fds` is readable or `until_ns` (real clock; 2 ms at most, to notice a
/// stop); sets their `revents`.
fn wait_readable(fds: &mut [libc::pollfd], until_ns: u64) {
    let wait = until_ns.saturating_sub(real_ns()).min(2_000_000);
    let ts = libc::timespec { tv_sec: 0, tv_nsec: wait as _ };
    // SAFETY: `fds` is a valid slice of pollfd and `ts` a valid timespec for the call.
    unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
}

/// When the run stops: `stop` set, or the real clock at `end_ns`.
#[derive(Clone, Copy)]
pub struct Until<'a> {
    pub stop: &'a AtomicBool,
    pub end_ns: u64,
}

impl Until<'_> {
    fn reached(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || real_ns() >= self.end_ns
    }
}

/// What a listener's owner decides.
pub trait Listening<P> {
    /// A validated hello from `from` without a peer: its peer, or why not.
    fn admit(&mut self, now_ns: u64, from: SocketAddr, hello: &Hello) -> Result<P, Status>;
    /// A peer ended (it left, or stopped answering consent probes).
    fn ended(&mut self, e: Ended<P>);
    /// Second `t_s` of peer `addr` closed (after [`Peer::second`]).
    fn second(&mut self, _addr: SocketAddr, _peer: &P) {}
}

/// Serves `ep`'s peers on `sock` (nonblocking) from `t0` (real clock) until `until`; the peers
/// held at the end go to [`Listening::ended`] too.
pub fn listen<P: Peer>(sock: &UdpSocket, mut ep: Endpoint<P>, host: &mut impl Listening<P>, t0: u64, until: Until) {
    let (mut inbuf, mut buf) = (vec![0u8; 2048], Vec::with_capacity(1600));
    let mut fds = [libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
    let mut next_second = t0 + SECOND;
    while !until.reached() {
        let now = real_ns();
        fds[0].revents = 0;
        wait_readable(&mut fds, ep.poll_timeout(now).unwrap_or(u64::MAX).min(next_second));
        for _ in 0..READS_PER_TURN {
            let Ok((len, from)) = sock.recv_from(&mut inbuf) else { break };
            let now = real_ns();
            ep.handle(now, from, &inbuf[..len], |h| host.admit(now, from, h));
        }
        let now = real_ns();
        ep.transmit(now, &mut buf, |b, to| {
            let _ = sock.send_to(b, to);
        });
        while let Some(e) = ep.poll_ended() {
            host.ended(e);
        }
        if now >= next_second {
            let t_s = (next_second - t0) / SECOND;
            next_second += SECOND;
            for (addr, _, p) in ep.peers_mut() {
                p.second(t_s);
                host.second(addr, p);
            }
        }
    }
    for e in ep.into_peers() {
        host.ended(e);
    }
}

/// One connected, nonblocking UDP socket per client to `server`, from `bind` (any address when
/// None), client `i` in `netns[i % len]` when given.
pub fn client_sockets(server: SocketAddr, bind: Option<IpAddr>, count: usize, netns: &[Arc<std::fs::File>]) -> Result<Vec<UdpSocket>, EngineError> {
    crate::clock::raise_fd_limit();
    let any = bind.unwrap_or(if server.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() });
    let make = || -> std::io::Result<UdpSocket> {
        let s = UdpSocket::bind(SocketAddr::new(any, 0))?;
        s.set_nonblocking(true)?;
        // Connected: the kernel hands this socket only the server's datagrams.
        s.connect(server)?;
        Ok(s)
    };
    (0..count)
        .map(|i| {
            let made = match netns.get(i % netns.len().max(1)) {
                Some(ns) => crate::net::within_netns(ns.as_ref(), make).and_then(|r| r),
                None => make(),
            };
            made.map_err(|err| EngineError::Io {
                what: format!("client {i}'s socket to {server} (each client has one: with many clients, raise the open-file limit, ulimit -n)"),
                err,
            })
        })
        .collect()
}

/// What a population's owner decides.
pub trait Crowd<P> {
    /// Member `i` was admitted at `now_ns`: its peer.
    fn start(&mut self, i: usize, now_ns: u64) -> P;
    /// Second `t_s` of member `i`'s peer closed (after [`Peer::second`]).
    fn second(&mut self, _i: usize, _peer: &P) {}
    /// An end the owner set during the run (real clock), e.g. a duration counted from a join.
    fn deadline(&self) -> Option<u64> {
        None
    }
}

/// Runs `members`, member `i` on `socks[i]`, from `t0` (real clock) until `until` or until every
/// member is finished (or the owner's [`Crowd::deadline`]); counts what they send and receive
/// in `progress`.
pub fn population<P: Peer>(members: &mut [Joiner<P>], socks: &[UdpSocket], host: &mut impl Crowd<P>, progress: &Progress, t0: u64, until: Until) {
    assert_eq!(members.len(), socks.len(), "a socket per member");
    let (mut inbuf, mut buf) = (vec![0u8; 2048], Vec::with_capacity(1600));
    let mut fds: Vec<libc::pollfd> = socks.iter().map(|s| libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    let mut next_second = t0 + SECOND;
    let count = |n: usize, sent: bool| {
        let (p, b) = if sent { (&progress.sent_packets, &progress.sent_bytes) } else { (&progress.recv_packets, &progress.recv_bytes) };
        p.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(n as u64, Ordering::Relaxed);
    };
    let end = |host: &dyn Crowd<P>| until.end_ns.min(host.deadline().unwrap_or(u64::MAX));
    while !until.reached() && real_ns() < end(host) && !members.iter().all(|m| m.finished()) {
        let now = real_ns();
        let mut wake = next_second.min(end(host));
        for (i, (m, s)) in members.iter_mut().zip(socks).enumerate() {
            if matches!(m.phase(), Joining::Admitted) {
                let p = host.start(i, now);
                m.up(now, p);
            }
            while m.poll_transmit(now, &mut buf) {
                if s.send(&buf).is_ok() {
                    count(buf.len(), true);
                }
            }
            wake = wake.min(m.poll_timeout(now).unwrap_or(u64::MAX));
        }
        for ((f, m), s) in fds.iter_mut().zip(members.iter()).zip(socks) {
            f.revents = 0;
            // Only sockets that expect something are watched.
            f.fd = if m.listening() { s.as_raw_fd() } else { -1 };
        }
        wait_readable(&mut fds, wake);
        for ((f, m), s) in fds.iter().zip(members.iter_mut()).zip(socks) {
            if f.revents & libc::POLLIN == 0 {
                continue;
            }
            for _ in 0..READS_PER_TURN {
                let Ok(len) = s.recv(&mut inbuf) else { break };
                count(len, false);
                m.handle(real_ns(), &inbuf[..len]);
            }
        }
        if real_ns() >= next_second {
            let t_s = (next_second - t0) / SECOND;
            next_second += SECOND;
            for (i, m) in members.iter_mut().enumerate() {
                if let Joining::Up(p) = m.phase_mut() {
                    p.second(t_s);
                    host.second(i, p);
                }
            }
        }
    }
    for (m, s) in members.iter_mut().zip(socks) {
        if let Joining::Up(p) = m.phase_mut() {
            if p.farewell(&mut buf) {
                let _ = s.send(&buf);
            }
        }
    }
}
