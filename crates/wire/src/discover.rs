//! Discovery (D-ITG's TSP "discovery request / reply": the sender tests the receiver): a sender
//! asks a Horde endpoint what it is before sending it anything else, and learns its version,
//! role, capacity and clock.
//!
//! The request is a UDP hello ([`crate::control::Hello`], at least 64 bytes, signed with the run
//! key) whose flags are `HELLO | CHALLENGE | ANSWER` ([`FLAG_DISCOVER`]): meaningless for a flow,
//! so no receiver takes it as one. It goes through address validation like every hello — the
//! first gets a 36-byte challenge, the one that brings the cookie back gets the reply — so the
//! reply only ever goes to an address that proved it receives there, and it admits nothing.
//!
//! ```text
//! discovery reply (receiver → a validated address), 64 bytes, never more than the request:
//!  0                  20  21  22   23   24            32        36       40    43   44   46   48     64
//!  +------------------+---+---+----+----+-------------+---------+--------+-----+----+----+----+------+
//!  | header, SIGNAL;  |ver|typ|role|caps| request's   | flows   | flows  | ver | wv | udp| tcp| MAC  |
//!  | flow, seq: the   | 1 | 4 |    |    | send_ns     | now u32 | max u32| 3 B |    | u16| u16| 16 B |
//!  | request's; send_ns: the replier's CLOCK_REALTIME |         |        |     |    |    |    |      |
//!  +------------------+---+---+----+----+-------------+---------+--------+-----+----+----+----+------+
//! ```
//! The MAC covers bytes 0..48 under the run key (made and checked by `horde-proto`), so the
//! sender knows a key holder answered. The request's send time comes back, and the replier's
//! clock is in the header: the sender gets the round trip and an estimate of the offset between
//! the two clocks (NTP's, within half the round trip) — what one-way delays across hosts need.

use crate::datagram::{FLAG_ANSWER, FLAG_CHALLENGE, FLAG_HELLO};
use crate::signal::{FLAG_SIGNAL, SIGNAL_VERSION};
use crate::{need, DatagramHeader, WireError, DATAGRAM_HEADER_LEN};

/// The flags of a discovery request (a hello).
pub const FLAG_DISCOVER: u8 = FLAG_HELLO | FLAG_CHALLENGE | FLAG_ANSWER;
/// Message type of the discovery reply (after end 1, end acknowledgement 2 and error 3).
pub const TYPE_DISCOVERED: u8 = 4;
pub const DISCOVERED_LEN: usize = 64;
/// The part of a discovery reply its MAC covers.
pub const DISCOVERED_SIGNED_LEN: usize = 48;

/// What kind of endpoint answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Role {
    #[default]
    Unknown = 0,
    /// `horde recv` (or an agent's receiver).
    Receiver = 1,
    /// The server side of a scenario (`horde run`'s players connect to it).
    ServerSide = 2,
    /// A regulated circuit server (`horde circuit serve`, a regulated run's server side).
    CircuitServer = 3,
}

impl Role {
    pub fn from_u8(v: u8) -> Role {
        match v {
            1 => Role::Receiver,
            2 => Role::ServerSide,
            3 => Role::CircuitServer,
            _ => Role::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Unknown => "unknown",
            Role::Receiver => "receiver",
            Role::ServerSide => "scenario server side",
            Role::CircuitServer => "circuit server",
        }
    }
}

/// Capability bits of a discovery reply.
pub const CAP_ECHO: u8 = 0x01;
/// It sends bulk back to flows that ask (`recv --reverse`).
pub const CAP_REVERSE: u8 = 0x02;
/// It logs ICMP echo requests (`recv --icmp`).
pub const CAP_ICMP: u8 = 0x04;
/// Its run key is not the open one.
pub const CAP_KEYED: u8 = 0x08;

/// What an endpoint says of itself (the parts its owner knows; the gate adds its flow counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct About {
    pub role: Role,
    pub caps: u8,
    pub version: [u8; 3],
    /// The UDP and TCP ports it listens on.
    pub udp_ports: u16,
    pub tcp_ports: u16,
}

/// A discovery reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Discovered {
    /// The request's flow and tag (the sender's nonce).
    pub flow: u32,
    pub tag: u32,
    /// The replier's CLOCK_REALTIME when it answered, ns since the epoch.
    pub replier_ns: u64,
    /// The request's send time, as the requester wrote it.
    pub request_ns: u64,
    pub about: About,
    /// The wire version the replier speaks ([`crate::datagram`]'s).
    pub wire_version: u8,
    pub flows_now: u32,
    pub flows_max: u32,
    pub mac: [u8; 16],
}

impl Discovered {
    pub fn parse(buf: &[u8]) -> Result<Discovered, WireError> {
        need(buf, DISCOVERED_LEN)?;
        let h = DatagramHeader::parse(buf)?;
        if h.flags != FLAG_SIGNAL || buf[20] != SIGNAL_VERSION || buf[21] != TYPE_DISCOVERED {
            return Err(WireError::BadMagic);
        }
        let u16_at = |i: usize| u16::from_be_bytes([buf[i], buf[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
        Ok(Discovered {
            flow: h.flow,
            tag: h.seq,
            replier_ns: h.send_ns,
            request_ns: u64::from_be_bytes(buf[24..32].try_into().expect("8 bytes")),
            about: About { role: Role::from_u8(buf[22]), caps: buf[23], version: [buf[40], buf[41], buf[42]], udp_ports: u16_at(44), tcp_ports: u16_at(46) },
            wire_version: buf[43],
            flows_now: u32_at(32),
            flows_max: u32_at(36),
            mac: buf[48..64].try_into().expect("16 bytes"),
        })
    }

    /// The bytes the MAC covers.
    pub fn signed(&self) -> [u8; DISCOVERED_SIGNED_LEN] {
        let mut b = [0u8; DISCOVERED_SIGNED_LEN];
        DatagramHeader { flags: FLAG_SIGNAL, flow: self.flow, seq: self.tag, send_ns: self.replier_ns }.emit(&mut b);
        b[20] = SIGNAL_VERSION;
        b[21] = TYPE_DISCOVERED;
        b[22] = self.about.role as u8;
        b[23] = self.about.caps;
        b[24..32].copy_from_slice(&self.request_ns.to_be_bytes());
        b[32..36].copy_from_slice(&self.flows_now.to_be_bytes());
        b[36..40].copy_from_slice(&self.flows_max.to_be_bytes());
        b[40..43].copy_from_slice(&self.about.version);
        b[43] = self.wire_version;
        b[44..46].copy_from_slice(&self.about.udp_ports.to_be_bytes());
        b[46..48].copy_from_slice(&self.about.tcp_ports.to_be_bytes());
        b
    }

    pub fn emit(&self) -> [u8; DISCOVERED_LEN] {
        let mut b = [0u8; DISCOVERED_LEN];
        b[..DISCOVERED_SIGNED_LEN].copy_from_slice(&self.signed());
        b[DISCOVERED_SIGNED_LEN..].copy_from_slice(&self.mac);
        b
    }
}

/// Whether a hello's header asks for discovery.
pub fn is_request(h: &DatagramHeader) -> bool {
    h.flags == FLAG_DISCOVER
}

const _: () = assert!(DISCOVERED_LEN <= crate::control::HELLO_DATAGRAM_LEN && DISCOVERED_SIGNED_LEN > DATAGRAM_HEADER_LEN);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::{is_signal, signal_type, FlowEnd, FlowError};

    fn sample() -> Discovered {
        Discovered {
            flow: 0xdead_beef,
            tag: 9,
            replier_ns: 1_700_000_000_000_000_000,
            request_ns: 1_700_000_000_000_000_123,
            about: About { role: Role::Receiver, caps: CAP_ECHO | CAP_KEYED, version: [0, 9, 1], udp_ports: 3, tcp_ports: 500 },
            wire_version: 3,
            flows_now: 12,
            flows_max: 65_536,
            mac: [5; 16],
        }
    }

    #[test]
    fn a_reply_round_trips_and_is_a_signal_no_older_parser_takes() {
        let d = sample();
        let b = d.emit();
        assert_eq!(Discovered::parse(&b), Ok(d));
        assert!(is_signal(&b) && signal_type(&b) == Some(TYPE_DISCOVERED));
        assert!(FlowEnd::parse(&b).is_err() && FlowError::parse(&b).is_err(), "end and error parsers ignore it");
        for cut in 0..DISCOVERED_LEN {
            assert!(Discovered::parse(&b[..cut]).is_err());
        }
        let mut other = b;
        other[21] = 1;
        assert!(Discovered::parse(&other).is_err());
        let mut role = b;
        role[22] = 200;
        assert_eq!(Discovered::parse(&role).map(|d| d.about.role), Ok(Role::Unknown), "an unknown role reads as unknown");
    }

    #[test]
    fn a_request_is_a_hello_with_the_signal_flags_and_no_flow_hello_is_one() {
        let h = DatagramHeader { flags: FLAG_DISCOVER, flow: 1, seq: 2, send_ns: 3 };
        assert!(is_request(&h));
        for flags in [FLAG_HELLO, FLAG_HELLO | crate::datagram::FLAG_ECHO_REQUEST, FLAG_HELLO | crate::datagram::FLAG_REVERSE] {
            assert!(!is_request(&DatagramHeader { flags, ..h }));
        }
        let mut b = [0u8; DATAGRAM_HEADER_LEN];
        h.emit(&mut b);
        assert!(!is_signal(&b), "a request is not routed as a signalling message");
    }
}
