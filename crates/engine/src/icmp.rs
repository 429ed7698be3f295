//! ICMP echo flows (`send -T icmp`, `recv --icmp`): raw sockets with kernel filters, the
//! worker's sending and reading of echoes, and the wait for every target's first reply.
//!
//! Consent is horde-proto's ([`horde_proto::echo`]): a flow sends nothing but probes until its
//! target answers one, and its requests go only while the target's replies keep coming. The
//! target's kernel answers each request 1:1 with the same bytes, so nothing is amplified.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use horde_model::{Departure, Transport};
use horde_proto::RxMeta;
use horde_wire::icmp::{emit_echo, parse_ipv4_echo, ECHO_HEADER_LEN, ECHO_REPLY, ECHO_REQUEST, MIN_PAYLOAD};
use horde_wire::DatagramHeader;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::clock::{mono_ns, real_ns};
use crate::net;
use crate::slot::{Slot, Sock};
use crate::EngineError;

/// The largest IPv4 packet a raw socket hands over (the worker sizes its read buffer by it).
pub const MAX_PACKET: usize = 65_535;

/// What to say when the kernel refuses a raw socket.
pub fn explain(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::PermissionDenied {
        " (ICMP traffic needs a raw socket: run as root, or give horde CAP_NET_RAW with `setcap cap_net_raw+ep $(which horde)`)"
    } else {
        ""
    }
}

/// A classic BPF program that passes ICMP messages of type `ty` (and, with `id`, that echo
/// identifier) and drops the rest in the kernel: a raw ICMP socket otherwise gets a copy of
/// every ICMP message the host receives.
fn echo_filter(ty: u8, id: Option<u16>) -> Vec<libc::sock_filter> {
    const LD: u16 = 0x00;
    const LDX: u16 = 0x01;
    const JMP: u16 = 0x05;
    const RET: u16 = 0x06;
    const H: u16 = 0x08;
    const B: u16 = 0x10;
    const IND: u16 = 0x40;
    const MSH: u16 = 0xa0;
    const JEQ: u16 = 0x10;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let keep = op(RET, 0, 0, 0x0004_0000);
    let drop = op(RET, 0, 0, 0);
    // X = the IP header's length; A = the ICMP type at X.
    let mut p = vec![op(LDX | B | MSH, 0, 0, 0), op(LD | B | IND, 0, 0, 0)];
    match id {
        Some(id) => p.extend([op(JMP | JEQ, 0, 3, ty as u32), op(LD | H | IND, 0, 0, 4), op(JMP | JEQ, 0, 1, id as u32), keep, drop]),
        None => p.extend([op(JMP | JEQ, 0, 1, ty as u32), keep, drop]),
    }
    p
}

/// A flow's raw socket to `dst` (IPv4): it sends echo requests and reads only the replies
/// that come from `dst` with identifier `id`.
pub fn icmp_socket(dst: SocketAddr, src: Option<SocketAddr>, tos: Option<u8>, ttl: Option<u8>, id: u16) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
    s.set_nonblocking(true)?;
    net::grow_buffers(&s);
    net::set_tos_ttl(&s, false, tos, ttl)?;
    s.attach_filter(&echo_filter(ECHO_REPLY, Some(id)))?;
    if let Some(src) = src {
        s.bind(&SockAddr::from(SocketAddr::new(src.ip(), 0)))?;
    }
    // Connected: the kernel hands over only what comes from the target.
    s.connect(&SockAddr::from(SocketAddr::new(dst.ip(), 0)))?;
    Ok(s)
}

/// A receiver's raw socket: every echo request to this host (or to `bind`), with kernel
/// receive times.
pub fn icmp_listener(bind: Option<Ipv4Addr>) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
    s.set_nonblocking(true)?;
    net::grow_buffers(&s);
    net::enable_rx_info(&s, false)?;
    s.attach_filter(&echo_filter(ECHO_REQUEST, None))?;
    if let Some(a) = bind {
        s.bind(&SockAddr::from(SocketAddr::new(IpAddr::V4(a), 0)))?;
    }
    Ok(s)
}

/// A flow's echo identifier: distinct for up to 65,536 flows of one process, and between
/// processes as far as their ids differ.
pub fn echo_id(flow: u32) -> u16 {
    (std::process::id() as u16).wrapping_mul(0x9E37).wrapping_add(flow as u16)
}

/// Sends slot `i`'s consent probe if one is due; false when the slot has none to send.
fn send_probe(s: &mut Slot, now_mono: u64) -> bool {
    let Some(c) = s.conn.echo.as_mut() else { return false };
    let Some(p) = c.poll_probe(now_mono, real_ns()) else { return false };
    let mut msg = [0u8; ECHO_HEADER_LEN + MIN_PAYLOAD];
    msg[ECHO_HEADER_LEN..].copy_from_slice(&p);
    emit_echo(&mut msg, true, c.id(), 0);
    if s.send(&msg).is_err() {
        s.conn.stats.errors += 1;
    }
    true
}

/// Reads every echo reply waiting on slot `i`'s socket into `buf`; returns the log records
/// of those that answer its requests (round-trip flows).
fn read_replies(s: &mut Slot, buf: &mut [u8], out: &mut Vec<horde_wire::Record>) {
    loop {
        let n = match s.recv(buf) {
            Ok(n) => n,
            Err(_) => return,
        };
        let now = real_ns();
        let Ok(e) = parse_ipv4_echo(&buf[..n]) else { continue };
        if e.request {
            continue;
        }
        let meta = RxMeta { len: e.payload.len(), kernel_ns: 0, tos: e.tos, ttl: e.ttl };
        if let Some(r) = s.conn.on_echo_reply(now, IpAddr::V4(e.src), e.payload, &meta) {
            out.push(r);
        }
    }
}

/// Before the start: probes every ICMP flow's target until it answers (its consent), at most
/// `timeout`. A target that does not answer gets no traffic: the run is refused.
pub fn admit_all(slots: &mut [Slot], timeout: Duration, stop: &AtomicBool) -> Result<(), EngineError> {
    let icmp: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].conn.echo.is_some()).collect();
    if icmp.is_empty() {
        return Ok(());
    }
    let io_err = |what: &'static str| move |e| EngineError::Io { what: what.to_string(), err: e };
    let mut poll = Poll::new().map_err(io_err("creating a poll"))?;
    for &i in &icmp {
        poll.registry().register(&mut SourceFd(&slots[i].fd()), Token(i), Interest::READABLE).map_err(io_err("registering a socket"))?;
    }
    let deadline = mono_ns() + timeout.as_nanos() as u64;
    let mut events = Events::with_capacity(256);
    let mut buf = vec![0u8; MAX_PACKET];
    let mut ignored = Vec::new();
    loop {
        let waiting: Vec<usize> = icmp.iter().copied().filter(|&i| !slots[i].conn.admitted()).collect();
        let Some(&first) = waiting.first() else { return Ok(()) };
        if stop.load(Ordering::Relaxed) {
            return Err(EngineError::Interrupted);
        }
        let now = mono_ns();
        if now >= deadline {
            let s = &slots[first];
            return Err(EngineError::Config(format!(
                "flow {} (`{}`): no echo reply from {} within {timeout:?}: the target does not answer pings, so it has not consented to ICMP \
                 traffic (it may ignore them, e.g. net.ipv4.icmp_echo_ignore_all = 1, or a firewall drops them); nothing was sent but {} probes",
                s.conn.flow,
                s.conn.name,
                s.dst.ip(),
                timeout.as_millis() / horde_proto::echo::PROBE_NS.div_ceil(1_000_000) as u128 + 1
            )));
        }
        for &i in &waiting {
            send_probe(&mut slots[i], now);
        }
        poll.poll(&mut events, Some(Duration::from_millis(10))).map_err(io_err("waiting for echo replies"))?;
        for ev in events.iter() {
            read_replies(&mut slots[ev.token().0], &mut buf, &mut ignored);
        }
        ignored.clear();
    }
}

/// Sends `due` on ICMP slot `s` as echo requests (built in `bufs`, stamped `real`, `mono`)
/// while the target's consent holds: how many the kernel took. Without consent they do not
/// leave: counted as unsent, and None.
pub(crate) fn send(s: &mut Slot, due: &[Departure], bufs: &mut [Vec<u8>], real: u64, mono: u64) -> Option<usize> {
    let flags = s.conn.datagram_flags();
    let flow = s.conn.flow;
    let c = s.conn.echo.as_mut()?;
    if !c.granted(mono) {
        s.conn.stats.unsent += due.len() as u64;
        return None;
    }
    let id = c.id();
    for (k, d) in due.iter().enumerate() {
        let total = ECHO_HEADER_LEN + (d.size as usize).max(MIN_PAYLOAD);
        let b = &mut bufs[k];
        if b.len() < total {
            b.resize(total, 0);
        }
        DatagramHeader { flags, flow, seq: d.seq as u32, send_ns: real }.emit(&mut b[ECHO_HEADER_LEN..]);
        c.prove(&mut b[ECHO_HEADER_LEN..total], d.seq as u32, mono);
        emit_echo(&mut b[..total], true, id, d.seq as u16);
    }
    let out: Vec<&[u8]> = due.iter().enumerate().map(|(k, d)| &bufs[k][..ECHO_HEADER_LEN + (d.size as usize).max(MIN_PAYLOAD)]).collect();
    Some(match &s.sock {
        Sock::Own(sock) => match net::send_batch(sock.as_raw_fd(), &out) {
            Ok(k) => k.min(due.len()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(_) => {
                // Unreachable, or another hard error: this request is lost.
                s.conn.stats.errors += 1;
                1
            }
        },
        _ => 0,
    })
}

/// Reads the echo replies of ICMP slot `s` (into `buf`): the round trips go to `sink`.
pub(crate) fn read(s: &mut Slot, buf: &mut [u8], sink: &mut crate::logger::LogSink) {
    let mut recs = Vec::new();
    read_replies(s, buf, &mut recs);
    recs.into_iter().for_each(|r| sink.push(r));
}

/// An ICMP flow's timers at `now`: a probe where it sent nothing for a while (or is paused);
/// true when its target stopped answering (the flow withdraws; the worker closes it).
pub(crate) fn housekeeping(s: &mut Slot, now: u64) -> bool {
    if s.conn.transport() != Transport::Icmp || matches!(s.sock, Sock::Closed) {
        return false;
    }
    if s.conn.echo.as_ref().is_some_and(|c| c.expired(now)) {
        s.conn.withdraw();
        return true;
    }
    send_probe(s, now);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_well_formed() {
        for f in [echo_filter(0, Some(7)), echo_filter(8, None)] {
            // Every jump lands inside the program, and it ends in a return.
            for (k, op) in f.iter().enumerate() {
                if op.code & 0x07 == 0x05 {
                    assert!(k + 1 + (op.jt.max(op.jf) as usize) < f.len(), "{k}");
                }
            }
            assert_eq!(f.last().unwrap().code, 0x06);
        }
    }
}
