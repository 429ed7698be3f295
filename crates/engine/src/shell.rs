//! The socket shells around `horde_proto`'s endpoints: the only loops that move a datagram
//! endpoint's bytes.
//!
//! - [`listen`]: one socket, many peers ([`Endpoint`]: gate, consent, peers by address) — the
//!   server side of a regulated run and `horde circuit serve`.
//! - [`population`]: many clients, a connected socket each (any [`Peer`]s: `Joiner`s that greet
//!   a Horde listener, or Quake 3 bots that speak the game's own handshake), multiplexed on the
//!   calling thread in one epoll set — the client side of a regulated run, `horde circuit join`, and
//!   each of the bots' threads.
//!
//! Both wait in an epoll set with a nanosecond timer (`horde_sys::epoll`; a socket read timeout
//! is rounded up to the kernel's tick, 4 ms at HZ=250, which would cap the pacing of a
//! 1.5 Mbit/s circuit), read at
//! most 256 datagrams per socket and turn (so sending keeps its pace), close a second of every
//! peer's figures on the second, and stop at `stop` or `end_ns` (the real clock).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use horde_proto::endpoint::{Ended, Endpoint, Peer};
use horde_wire::control::{Hello, Status};

use crate::clock::real_ns;
use crate::sender::Progress;
use crate::EngineError;
use horde_sys::epoll::Epoll;

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

/// A population's members as it steps them: when each is due next, whether it is closed.
struct Steps {
    due: Vec<u64>,
    closed: Vec<bool>,
    open: usize,
    buf: Vec<u8>,
}

impl Steps {
    /// Member `i`'s step at `now`: its owner's turn, its timers, what it sends, its events.
    fn step<M: Peer>(&mut self, i: usize, now: u64, m: &mut M, sock: &UdpSocket, host: &mut impl Crowd<M>, count: &impl Fn(usize, bool)) {
        host.turn(i, now, m);
        if m.poll_timeout(now) <= now {
            m.handle_timeout(now);
        }
        while m.poll_transmit(now, &mut self.buf) {
            if sock.send(&self.buf).is_ok() {
                count(self.buf.len(), true);
            }
        }
        while let Some(ev) = m.poll_event() {
            host.event(i, m, ev);
        }
        self.due[i] = m.poll_timeout(now);
        if m.is_closed() != self.closed[i] {
            self.closed[i] = !self.closed[i];
            self.open = if self.closed[i] { self.open - 1 } else { self.open + 1 };
        }
    }
}

/// How long to wait for `until_ns` (real clock): 2 ms at most, to notice a stop.
fn wait_ns(until_ns: u64) -> u64 {
    until_ns.saturating_sub(real_ns()).min(2_000_000)
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
pub trait Listening<P: Peer> {
    /// A validated hello from `from` without a peer: its peer, or why not.
    fn admit(&mut self, now_ns: u64, from: SocketAddr, hello: &Hello) -> Result<P, Status>;
    /// A peer ended (it left, or stopped answering consent probes).
    fn ended(&mut self, e: Ended<P>);
    /// Second `t_s` of peer `addr` closed (after [`Peer::second`]).
    fn second(&mut self, _addr: SocketAddr, _peer: &P) {}
    /// An event peer `addr` reported.
    fn event(&mut self, _addr: SocketAddr, _ev: P::Event) {}
}

/// Serves `ep`'s peers on `sock` (nonblocking) from `t0` (real clock) until `until`; the peers
/// held at the end go to [`Listening::ended`] too.
pub fn listen<P: Peer>(sock: &UdpSocket, mut ep: Endpoint<P>, host: &mut impl Listening<P>, t0: u64, until: Until) -> Result<(), EngineError> {
    let (mut inbuf, mut buf) = (vec![0u8; 2048], Vec::with_capacity(1600));
    let mut set = Epoll::new(1).map_err(|err| EngineError::Io { what: "creating an epoll set for a listener".into(), err })?;
    set.add(sock.as_raw_fd(), 0).map_err(|err| EngineError::Io { what: "watching the listener's socket".into(), err })?;
    let mut next_second = t0 + SECOND;
    while !until.reached() {
        let now = real_ns();
        set.wait(wait_ns(ep.poll_timeout(now).unwrap_or(u64::MAX).min(next_second))).for_each(drop);
        for _ in 0..READS_PER_TURN {
            let Ok((len, from)) = sock.recv_from(&mut inbuf) else { break };
            let now = real_ns();
            ep.handle(now, from, &inbuf[..len], |h| host.admit(now, from, h));
        }
        let now = real_ns();
        ep.transmit(now, &mut buf, |b, to| {
            let _ = sock.send_to(b, to);
        });
        for (addr, _, p) in ep.peers_mut() {
            while let Some(ev) = p.poll_event() {
                host.event(addr, ev);
            }
        }
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
    Ok(())
}

/// One connected, nonblocking UDP socket to `server` from `bind` (any address when None), opened
/// in `netns` when given.
pub fn client_socket(server: SocketAddr, bind: Option<IpAddr>, netns: Option<&std::fs::File>) -> std::io::Result<UdpSocket> {
    let any = bind.unwrap_or(if server.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() });
    let make = || -> std::io::Result<UdpSocket> {
        let s = UdpSocket::bind(SocketAddr::new(any, 0))?;
        s.set_nonblocking(true)?;
        // Connected: the kernel hands this socket only the server's datagrams.
        s.connect(server)?;
        Ok(s)
    };
    match netns {
        Some(ns) => crate::net::within_netns(ns, make).and_then(|r| r),
        None => make(),
    }
}

/// One connected, nonblocking UDP socket per client to `server`, from `bind` (any address when
/// None), client `i` in `netns[i % len]` when given.
pub fn client_sockets(server: SocketAddr, bind: Option<IpAddr>, count: usize, netns: &[Arc<std::fs::File>]) -> Result<Vec<UdpSocket>, EngineError> {
    crate::clock::raise_fd_limit();
    (0..count)
        .map(|i| {
            client_socket(server, bind, netns.get(i % netns.len().max(1)).map(|n| n.as_ref())).map_err(|err| EngineError::Io {
                what: format!("client {i}'s socket to {server} (each client has one: with many clients, raise the open-file limit, ulimit -n)"),
                err,
            })
        })
        .collect()
}

/// What a population's owner decides.
pub trait Crowd<M: Peer> {
    /// Member `i`'s turn at `now_ns`, before it sends: start it, steer it (e.g. make an admitted
    /// joiner's peer, start a player at its join time, ask it to leave).
    fn turn(&mut self, _i: usize, _now_ns: u64, _m: &mut M) {}
    /// An event member `i` reported.
    fn event(&mut self, _i: usize, _m: &mut M, _ev: M::Event) {}
    /// Second `t_s` of member `i` closed (after [`Peer::second`]).
    fn second(&mut self, _i: usize, _m: &M) {}
    /// An end the owner set during the run (real clock), e.g. a duration counted from a join.
    fn deadline(&self) -> Option<u64> {
        None
    }
    /// How late a member may be stepped after its time, to step several in one wake-up (0: at
    /// its time, as a paced circuit needs).
    fn slack_ns(&self) -> u64 {
        0
    }
    /// The run reached its end at `now_ns`: until when the members may still run to leave as
    /// their protocol does (the owner asks them in [`Crowd::turn`]); None: each says its
    /// [`Peer::farewell`] at once.
    fn leave(&mut self, _now_ns: u64) -> Option<u64> {
        None
    }
}

/// Runs `members`, member `i` on `socks[i]`, from `t0` (real clock) until `until`, the owner's
/// [`Crowd::deadline`] or every member closed (then through the owner's [`Crowd::leave`], at
/// most until the time it gives); counts what they send and receive in `progress`.
///
/// A turn steps only the members that are due (their [`Peer::poll_timeout`] passed) or that
/// received something: the sockets sit in one epoll set (readiness in O(ready), a wait with
/// nanosecond resolution: `horde_sys::epoll`).
pub fn population<M: Peer>(
    members: &mut [M],
    socks: &[UdpSocket],
    host: &mut impl Crowd<M>,
    progress: &Progress,
    t0: u64,
    until: Until,
) -> Result<(), EngineError> {
    assert_eq!(members.len(), socks.len(), "a socket per member");
    let io = |what: &'static str| move |err| EngineError::Io { what: what.into(), err };
    let mut inbuf = vec![0u8; 2048];
    let mut set = Epoll::new(1024).map_err(io("creating an epoll set for a population"))?;
    for (i, s) in socks.iter().enumerate() {
        set.add(s.as_raw_fd(), i as u64).map_err(io("watching a member's socket"))?;
    }
    let mut next_second = t0 + SECOND;
    let count = |n: usize, sent: bool| {
        let (p, b) = if sent { (&progress.sent_packets, &progress.sent_bytes) } else { (&progress.recv_packets, &progress.recv_bytes) };
        p.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(n as u64, Ordering::Relaxed);
    };
    let mut st = Steps { due: vec![0; members.len()], closed: vec![false; members.len()], open: members.len(), buf: Vec::with_capacity(1600) };
    let mut leaving: Option<u64> = None;
    loop {
        let now = real_ns();
        if leaving.is_none() && (until.reached() || now >= until.end_ns.min(host.deadline().unwrap_or(u64::MAX))) {
            match host.leave(now) {
                // Every member's owner is asked to let it leave.
                Some(t) => (leaving, st.due) = (Some(t), vec![0; members.len()]),
                None => break,
            }
        }
        if leaving.is_some_and(|t| now >= t) || st.open == 0 {
            break;
        }
        for (i, m) in members.iter_mut().enumerate() {
            if st.due[i] <= now {
                st.step(i, now, m, &socks[i], host, &count);
            }
        }
        let wake = st
            .due
            .iter()
            .copied()
            .min()
            .unwrap_or(u64::MAX)
            .saturating_add(host.slack_ns())
            .min(next_second)
            .min(leaving.unwrap_or(until.end_ns))
            .min(host.deadline().unwrap_or(u64::MAX));
        for i in set.wait(wait_ns(wake)) {
            let (i, m) = (i as usize, &mut members[i as usize]);
            // Level-triggered: what is left after this turn's reads is reported again.
            for _ in 0..READS_PER_TURN {
                let Ok(len) = socks[i].recv(&mut inbuf) else { break };
                count(len, false);
                m.handle(real_ns(), &inbuf[..len]);
            }
            st.step(i, real_ns(), m, &socks[i], host, &count);
        }
        if real_ns() >= next_second {
            let t_s = (next_second - t0) / SECOND;
            next_second += SECOND;
            for (i, m) in members.iter_mut().enumerate() {
                m.second(t_s);
                host.second(i, m);
            }
        }
    }
    for (m, s) in members.iter_mut().zip(socks) {
        if m.farewell(&mut st.buf) {
            let _ = s.send(&st.buf);
        }
    }
    Ok(())
}
