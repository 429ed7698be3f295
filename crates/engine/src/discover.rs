//! `horde discover`: asks a Horde endpoint what it is before anything is sent to it (D-ITG's
//! discovery request). The socket shell around `horde_proto`'s discovery greeter
//! ([`Greeter::discover`]): one connected UDP socket, the greeter's hellos, its deadline.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use horde_proto::auth::RunKey;
use horde_proto::{GreetEvent, GreetState, Greeter};
use horde_wire::discover::{Discovered, CAP_ECHO, CAP_ICMP, CAP_KEYED, CAP_REVERSE};
use serde::Serialize;

use crate::clock::{mono_ns, real_ns};
use crate::EngineError;

/// What to ask, and how long to wait.
#[derive(Debug, Clone)]
pub struct DiscoverOptions {
    pub dst: SocketAddr,
    pub key: RunKey,
    /// Replies to collect (the round trip and clock offset are taken from the fastest).
    pub samples: u32,
    /// How long to wait for them all.
    pub timeout: Duration,
    /// The request's nonce (flow id and tag): the caller's randomness.
    pub nonce: (u32, u32),
}

/// What the endpoint said, and what the exchange measured.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Discovery {
    pub addr: SocketAddr,
    /// `receiver`, `scenario server side`, `circuit server` or `unknown`.
    pub role: String,
    /// Its Horde version (major.minor.patch) and wire version.
    pub version: String,
    pub wire_version: u8,
    /// Whether it holds a run key (it answered, so it is the key this request was signed with).
    pub keyed: bool,
    pub echoes: bool,
    pub reverse_bulk: bool,
    pub icmp: bool,
    pub udp_ports: u16,
    pub tcp_ports: u16,
    /// Flows (players, circuits) it holds now, and at most.
    pub flows_now: u32,
    pub flows_max: u32,
    /// Replies received, of the samples asked for.
    pub replies: u32,
    /// The fastest round trip, ms.
    pub rtt_ms: f64,
    /// Its wall clock minus ours, ms, from the fastest exchange (NTP's estimate: the true offset
    /// is within ± half the round trip of it).
    pub clock_offset_ms: f64,
    pub clock_offset_bound_ms: f64,
}

/// One exchange: request sent at `t1` (our clock), answered at `t2` (its clock), back at `t4`.
fn sample(d: &Discovered, t4: u64) -> (u64, i128) {
    let t1 = d.request_ns as i128;
    let rtt = (t4 as i128 - t1).max(0) as u64;
    let offset = d.replier_ns as i128 - (t1 + t4 as i128) / 2;
    (rtt, offset)
}

/// Asks `opts.dst` until `opts.samples` replies came or the timeout passed.
pub fn discover(opts: &DiscoverOptions) -> Result<Discovery, EngineError> {
    let io_err = |what: &str, err: io::Error| EngineError::Io { what: format!("{what} {}", opts.dst), err };
    let bind: SocketAddr = if opts.dst.is_ipv4() { "0.0.0.0:0".parse().expect("addr") } else { "[::]:0".parse().expect("addr") };
    let sock = UdpSocket::bind(bind).map_err(|e| io_err("opening a UDP socket for", e))?;
    sock.connect(opts.dst).map_err(|e| io_err("connecting a UDP socket to", e))?;
    let mut g = Greeter::discover(opts.key.clone(), opts.nonce.0, opts.nonce.1, real_ns());
    let deadline = mono_ns() + opts.timeout.as_nanos() as u64;
    let mut best: Option<(Discovered, u64, i128)> = None;
    let mut replies = 0u32;
    let mut buf = [0u8; 2048];
    while replies < opts.samples.max(1) {
        let now = mono_ns();
        if now >= deadline || g.state() == GreetState::GaveUp {
            break;
        }
        g.set_base(real_ns());
        if let Some(h) = g.poll_transmit(now) {
            if let Err(e) = sock.send(&h) {
                return Err(refused_or(e, opts.dst));
            }
        }
        let wake = g.next_ns().unwrap_or(deadline).min(deadline);
        let _ = sock.set_read_timeout(Some(Duration::from_nanos(wake.saturating_sub(mono_ns()).max(1_000))));
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted) => continue,
            Err(e) => return Err(refused_or(e, opts.dst)),
        };
        let t4 = real_ns();
        match g.on_datagram(&buf[..n]) {
            Some(GreetEvent::Discovered(d)) => {
                replies += 1;
                let (rtt, offset) = sample(&d, t4);
                if best.as_ref().is_none_or(|b| rtt < b.1) {
                    best = Some((d, rtt, offset));
                }
                g.ask_again();
            }
            Some(GreetEvent::Accepted | GreetEvent::Refused(_)) => {
                return Err(EngineError::Config(format!(
                    "{} answered as for a flow: a Horde endpoint older than discovery (signalling version 1 without type 4); update it",
                    opts.dst
                )))
            }
            _ => {}
        }
    }
    let Some((d, rtt, offset)) = best else {
        return Err(EngineError::Config(format!(
            "no answer from {} within {:?}: no Horde endpoint listens on that UDP port, or it holds another run key (an endpoint never answers a hello signed with another key: give the same --key-file)",
            opts.dst, opts.timeout
        )));
    };
    let a = d.about;
    Ok(Discovery {
        addr: opts.dst,
        role: a.role.name().to_string(),
        version: format!("{}.{}.{}", a.version[0], a.version[1], a.version[2]),
        wire_version: d.wire_version,
        keyed: a.caps & CAP_KEYED != 0,
        echoes: a.caps & CAP_ECHO != 0,
        reverse_bulk: a.caps & CAP_REVERSE != 0,
        icmp: a.caps & CAP_ICMP != 0,
        udp_ports: a.udp_ports,
        tcp_ports: a.tcp_ports,
        flows_now: d.flows_now,
        flows_max: d.flows_max,
        replies,
        rtt_ms: rtt as f64 / 1e6,
        clock_offset_ms: offset as f64 / 1e6,
        clock_offset_bound_ms: rtt as f64 / 2e6,
    })
}

/// A connected UDP socket reports the target's ICMP port unreachable as "connection refused".
fn refused_or(e: io::Error, dst: SocketAddr) -> EngineError {
    if e.kind() == io::ErrorKind::ConnectionRefused {
        return EngineError::Config(format!(
            "nothing listens on UDP {dst} (its host answered: port unreachable); start `horde recv --udp {}` there",
            dst.port()
        ));
    }
    EngineError::Io { what: format!("asking {dst}"), err: e }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_and_round_trip_of_one_exchange() {
        // Sent at 1,000 (ours), answered at 10,600 (its clock, 10 µs ahead), back at 2,200.
        let d = Discovered { request_ns: 1_000, replier_ns: 11_600, ..Discovered::default() };
        assert_eq!(sample(&d, 2_200), (1_200, 10_000));
        // A reply stamped before the request (clocks far apart) still gives a round trip ≥ 0.
        let d = Discovered { request_ns: 5_000, replier_ns: 0, ..Discovered::default() };
        assert_eq!(sample(&d, 4_000).0, 0);
    }
}
