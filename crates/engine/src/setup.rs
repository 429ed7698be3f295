//! Everything before the first departure: sockets, TCP connects, address validation of UDP
//! flows, listeners of a server side, and the gate that starts all workers at one instant.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use horde_model::{Meter, Schedule, Transport};
use horde_proto::{Conn, GreetState, RxMeta};
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use socket2::Socket;

use crate::clock::{self, mono_ns, real_ns};
use crate::net;
use crate::sender::types::{Job, SendOptions};
use crate::slot::{Share, Slot, Sock};
use crate::EngineError;

/// Descriptors kept free beyond one per flow: log files, epoll, listeners, the spare.
const FD_SLACK: usize = 64;

/// Refuses a run whose flows cannot all have a socket, before any is opened.
pub fn check_fd_limit(flows: usize) -> Result<(), EngineError> {
    let limit = clock::raise_fd_limit() as usize;
    if flows + FD_SLACK > limit {
        return Err(EngineError::Config(format!(
            "{flows} flows need {flows} sockets, but this process may open only {limit} files: raise the limit (e.g. `ulimit -n {}`) or run fewer flows",
            (flows + FD_SLACK).next_power_of_two()
        )));
    }
    Ok(())
}

/// Opens every job's socket and builds its connection.
pub fn open_all(jobs: Vec<Job>, opts: &SendOptions) -> Result<Vec<Slot>, EngineError> {
    jobs.into_iter().map(|j| open(j, opts)).collect()
}

pub(crate) fn open(job: Job, opts: &SendOptions) -> Result<Slot, EngineError> {
    let flow = job.flow;
    let who = format!("flow {} (`{}`)", flow.id, flow.name);
    let connect_at = if flow.transport == Transport::Tcp { job.connect_at_ns } else { None };
    let open = || match (flow.transport, connect_at) {
        (Transport::Udp, _) => net::udp_connected(flow.dst, flow.src, flow.tos, flow.ttl),
        (Transport::Tcp, None) => net::tcp_connect(flow.dst, flow.src, flow.tos, flow.ttl, flow.nodelay),
        (Transport::Tcp, Some(_)) => net::tcp_socket(flow.dst, flow.src, flow.tos, flow.ttl, flow.nodelay),
        (Transport::Icmp, _) => crate::icmp::icmp_socket(flow.dst, flow.src, flow.tos, flow.ttl, crate::icmp::echo_id(flow.id)),
    };
    let sock = match &job.netns {
        None => open(),
        Some(ns) => net::within_netns(ns, open).and_then(|r| r),
    }
    .map_err(|e| EngineError::Flow {
        flow: who.clone(),
        what: format!("opening a {} socket to {}{}", flow.transport.name(), flow.dst, crate::icmp::explain(&e)),
        err: e,
    })?;
    if let Some(p) = flow.priority {
        net::set_priority(&sock, p).map_err(|e| EngineError::Flow { flow: who.clone(), what: format!("setting the socket's priority to {p}"), err: e })?;
    }
    if flow.quickack {
        net::quickack(sock.as_raw_fd());
    }
    // Echoes and a reverse flow's arrivals are timed by the kernel, as a receiver's are.
    if (flow.meter == Meter::Rtt || flow.reverse) && flow.transport == Transport::Udp {
        net::enable_rx_info(&sock, flow.dst.is_ipv6()).map_err(|e| EngineError::Flow { flow: who, what: "enabling receive timestamps".into(), err: e })?;
    }
    // A flow's duration holds whatever happens; a player's source ends with the run.
    let (source, deadline): (horde_proto::Source, Option<u64>) = match job.source {
        Some(s) => (s, opts.run_for.map(|d| d.as_nanos() as u64)),
        None => {
            let s = Schedule::new(&flow);
            let deadline = flow.stop.duration_ns.map(|d| s.start_ns() + d);
            match &opts.steer {
                Some(steer) => (Box::new(horde_model::schedule::Steered::new(s, steer.register(flow.id))), deadline),
                None => (Box::new(s), deadline),
            }
        }
    };
    let mut conn = Conn::client(&flow, source, job.mirror, opts.key.clone(), opts.greet);
    conn.steer_by(job.presence);
    conn.connect_at = connect_at;
    conn.set_deadline(deadline);
    if flow.transport == Transport::Icmp {
        let secret = crate::random_secret().map_err(|e| EngineError::Io { what: "drawing a secret for echo proofs".into(), err: e })?;
        conn.echo = Some(horde_proto::EchoConsent::new(secret, flow.dst.ip(), flow.id, crate::icmp::echo_id(flow.id)));
    }
    Ok(Slot { conn, sock: Sock::Own(sock), dst: flow.dst, peer: None, quickack: flow.quickack })
}

/// Waits until every TCP flow's non-blocking connect has completed.
pub fn connect_all(slots: &mut [Slot], timeout: Duration, stop: &AtomicBool) -> Result<(), EngineError> {
    let io_err = |what: &'static str| move |e| EngineError::Io { what: what.to_string(), err: e };
    let connecting = |s: &Slot| s.conn.transport() == Transport::Tcp && s.conn.connect_at.is_none();
    let mut poll = Poll::new().map_err(io_err("creating a poll"))?;
    let mut waiting = 0usize;
    for (i, s) in slots.iter().enumerate() {
        if connecting(s) {
            poll.registry().register(&mut SourceFd(&s.fd()), Token(i), Interest::WRITABLE).map_err(io_err("registering a socket"))?;
            waiting += 1;
        }
    }
    let mut done = vec![false; slots.len()];
    let deadline = mono_ns() + timeout.as_nanos() as u64;
    let mut events = Events::with_capacity(1024);
    while waiting > 0 {
        if stop.load(Ordering::Relaxed) {
            return Err(EngineError::Interrupted);
        }
        let now = mono_ns();
        if now >= deadline {
            let first = slots.iter().zip(&done).find(|(s, d)| connecting(s) && !**d).map(|(s, _)| s.dst);
            return Err(EngineError::Config(format!(
                "{waiting} TCP connection(s) not established within {timeout:?} (first: {}); is `horde recv` listening there?",
                first.map(|a| a.to_string()).unwrap_or_default()
            )));
        }
        poll.poll(&mut events, Some(Duration::from_nanos((deadline - now).min(100_000_000)))).map_err(io_err("waiting for connections"))?;
        for ev in events.iter() {
            let i = ev.token().0;
            if done[i] {
                continue;
            }
            let Sock::Own(sock) = &slots[i].sock else { continue };
            match sock.take_error() {
                Ok(None) if sock.peer_addr().is_ok() => {
                    done[i] = true;
                    waiting -= 1;
                    poll.registry().deregister(&mut SourceFd(&sock.as_raw_fd())).ok();
                }
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => {
                    let s = &slots[i];
                    return Err(EngineError::Flow {
                        flow: format!("flow {} (`{}`)", s.conn.flow, s.conn.name),
                        what: format!("connecting to {} (is `horde recv --tcp {}` running?)", s.dst, s.dst.port()),
                        err: e,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Validates the address of every UDP flow that greets: hellos until the receiver's challenge
/// comes back (the admission itself happens at the start, when the hello can carry it).
pub fn validate_all(slots: &mut [Slot], timeout: Duration, stop: &AtomicBool) -> Result<(), EngineError> {
    let greeting: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].conn.greeter().is_some()).collect();
    if greeting.is_empty() {
        return Ok(());
    }
    let io_err = |what: &'static str| move |e| EngineError::Io { what: what.to_string(), err: e };
    let mut poll = Poll::new().map_err(io_err("creating a poll"))?;
    for &i in &greeting {
        poll.registry().register(&mut SourceFd(&slots[i].fd()), Token(i), Interest::READABLE).map_err(io_err("registering a socket"))?;
    }
    let deadline = mono_ns() + timeout.as_nanos() as u64;
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 2048];
    let mut left = greeting.len();
    // Flows whose destination answered with ICMP port unreachable (said if they time out).
    let mut refused = vec![false; slots.len()];
    while left > 0 {
        if stop.load(Ordering::Relaxed) {
            return Err(EngineError::Interrupted);
        }
        let now = mono_ns();
        let asking = |s: &Slot| s.conn.greeter().is_some_and(|g| g.state() == GreetState::Asking);
        if now >= deadline || greeting.iter().any(|&i| slots[i].conn.greeter().is_some_and(|g| g.state() == GreetState::GaveUp)) {
            let i = greeting.iter().copied().find(|&i| !slots[i].validated()).expect("one is left");
            return Err(no_answer(&slots[i], timeout, refused[i]));
        }
        let mut next = deadline;
        for &i in &greeting {
            let s = &mut slots[i];
            if let Some(h) = s.conn.poll_hello(now) {
                // Refused now (nobody there yet) is the same as lost: the retry follows.
                if s.send(&h).is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused) {
                    refused[i] = true;
                }
            }
            if asking(s) {
                next = next.min(s.conn.greeter().and_then(|g| g.next_ns()).unwrap_or(deadline));
            }
        }
        let wait = next.saturating_sub(mono_ns()).clamp(1_000_000, 100_000_000);
        poll.poll(&mut events, Some(Duration::from_nanos(wait))).map_err(io_err("waiting for the receivers' answers"))?;
        for ev in events.iter() {
            let s = &mut slots[ev.token().0];
            let was = s.validated();
            loop {
                let n = match s.recv(&mut buf) {
                    Ok(n) => n,
                    Err(e) => {
                        refused[ev.token().0] |= e.kind() == std::io::ErrorKind::ConnectionRefused;
                        break;
                    }
                };
                let r = s.conn.on_datagram(real_ns(), &buf[..n], &RxMeta { len: n, ..Default::default() });
                if let Err(status) = r {
                    return Err(EngineError::Config(format!(
                        "flow {} (`{}`): the receiver at {} refused it: {}",
                        s.conn.flow,
                        s.conn.name,
                        s.dst,
                        status.describe()
                    )));
                }
            }
            if !was && s.validated() {
                left -= 1;
            }
        }
    }
    Ok(())
}

fn no_answer(s: &Slot, timeout: Duration, refused: bool) -> EngineError {
    if refused {
        return EngineError::Config(format!(
            "flow {} (`{}`): nothing listens on UDP at {} (its hellos drew ICMP port unreachable): start `horde recv --udp {}` there first",
            s.conn.flow,
            s.conn.name,
            s.dst,
            s.dst.port()
        ));
    }
    EngineError::Config(format!(
        "flow {} (`{}`): no answer to its hello from {} within {timeout:?}: is `horde recv` (or the run's server side) listening there on UDP? \
         With a run key, both sides need the same key; to send to something that is not Horde, use --no-greet",
        s.conn.flow, s.conn.name, s.dst
    ))
}

/// A server side's listening sockets, one set per worker (SO_REUSEPORT), and the bound
/// addresses.
pub fn listen_all(listen: &[SocketAddr], transport: Transport, threads: usize, opts: &SendOptions) -> Result<(Vec<Share>, Vec<SocketAddr>), EngineError> {
    let secret = crate::random_secret().map_err(|e| EngineError::Io { what: "drawing a secret for address-validation cookies".into(), err: e })?;
    let mut shares: Vec<Share> = (0..threads).map(|_| Share { secret, ..Share::default() }).collect();
    let mut bound = Vec::new();
    for a in listen {
        // The first socket picks the port (a may say port 0); the other workers' sockets share
        // it through SO_REUSEPORT.
        let mut addr = *a;
        for (w, share) in shares.iter_mut().enumerate() {
            let bind_err = |e: std::io::Error| EngineError::Io {
                what: format!(
                    "binding {} {addr}{}",
                    transport.name(),
                    if e.kind() == std::io::ErrorKind::AddrInUse { " (the port is in use: stop the other program or pick another port)" } else { "" }
                ),
                err: e,
            };
            let local = match transport {
                Transport::Tcp => {
                    let l = TcpListener::from_std(net::tcp_listener_shared(addr, threads > 1).map_err(bind_err)?.into());
                    let a = l.local_addr().ok();
                    share.tcp.push(l);
                    a
                }
                Transport::Udp => {
                    let u: Socket = net::udp_listener_shared(addr, threads > 1).map_err(bind_err)?;
                    let a = u.local_addr().ok().and_then(|a| a.as_socket());
                    share.udp.push(u);
                    a
                }
                Transport::Icmp => return Err(EngineError::Config("a server side serves UDP or TCP, not ICMP (services are played over UDP or TCP)".into())),
            };
            if w == 0 {
                addr = local.ok_or_else(|| EngineError::Config("cannot read the bound address".into()))?;
                bound.push(addr);
            }
        }
    }
    let _ = opts;
    Ok((shares, bound))
}

/// Releases all workers at once with a common start time. A worker that failed to set up, or
/// a thread that could not be started, aborts the gate instead of leaving the others waiting.
pub struct StartGate {
    n: usize,
    lead_ns: u64,
    not_before_real_ns: Option<u64>,
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    arrived: usize,
    aborted: bool,
    t0: Option<(u64, u64)>,
}

impl StartGate {
    pub fn new(n: usize, lead_ns: u64) -> Self {
        StartGate { n, lead_ns, not_before_real_ns: None, state: Mutex::new(GateState::default()), cv: Condvar::new() }
    }

    /// The start is no earlier than this real instant (ns), when every worker is ready before it.
    pub fn not_before(self, real_ns: Option<u64>) -> Self {
        StartGate { not_before_real_ns: real_ns, ..self }
    }

    /// Waits for every worker; returns the shared (monotonic, real) start time, or `None` if
    /// the start was aborted. `ready`: whether this worker set up fine (if not, it aborts).
    pub fn arrive(&self, ready: bool) -> Option<(u64, u64)> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.arrived += 1;
        s.aborted |= !ready;
        self.cv.notify_all();
        while s.arrived < self.n && !s.aborted {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.aborted {
            return None;
        }
        Some(*s.t0.get_or_insert_with(|| {
            let (mono, real) = (mono_ns() + self.lead_ns, real_ns() + self.lead_ns);
            let wait = self.not_before_real_ns.map_or(0, |at| at.saturating_sub(real));
            (mono + wait, real + wait)
        }))
    }

    /// Lets every waiting worker go without starting.
    pub fn abort(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).aborted = true;
        self.cv.notify_all();
    }

    pub fn t0(&self) -> Option<(u64, u64)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).t0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_a_failed_worker_does_not_leave_the_others_waiting() {
        let gate = StartGate::new(3, 0);
        let got: Vec<Option<(u64, u64)>> = std::thread::scope(|s| {
            let a = s.spawn(|| gate.arrive(true));
            let b = s.spawn(|| gate.arrive(false));
            let c = s.spawn(|| gate.arrive(true));
            vec![a.join().unwrap(), b.join().unwrap(), c.join().unwrap()]
        });
        assert!(got.iter().all(|g| g.is_none()));
        let gate = StartGate::new(2, 0);
        let got = std::thread::scope(|s| {
            let a = s.spawn(|| gate.arrive(true));
            std::thread::sleep(Duration::from_millis(20));
            gate.abort();
            a.join().unwrap()
        });
        assert!(got.is_none(), "abort frees a waiting worker (a thread that could not be spawned)");
        let gate = StartGate::new(2, 0);
        let got: Vec<_> = std::thread::scope(|s| [s.spawn(|| gate.arrive(true)), s.spawn(|| gate.arrive(true))].map(|h| h.join().unwrap()).to_vec());
        assert!(got[0].is_some() && got[0] == got[1], "one shared start");
    }

    #[test]
    fn a_common_start_ahead_is_the_schedules_zero_and_one_passed_is_not_waited_for() {
        let at = real_ns() + 300_000_000;
        let (mono, real) = StartGate::new(1, 1_000_000).not_before(Some(at)).arrive(true).unwrap();
        assert_eq!(real, at, "the common start, to the nanosecond");
        let ahead = mono.saturating_sub(mono_ns());
        assert!((200_000_000..=300_000_000).contains(&ahead), "the monotonic start as far ahead: {ahead} ns");
        let before = real_ns();
        let (_, real) = StartGate::new(1, 1_000_000).not_before(Some(before - 5_000_000_000)).arrive(true).unwrap();
        assert!(real >= before + 1_000_000 && real < before + 1_000_000_000, "a start already passed: ready plus the lead ({} ns after)", real - before);
    }
}
