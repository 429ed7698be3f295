//! The transports a flow runs over and their payload bounds.

use serde::Deserialize;

/// Largest UDP payload over IPv4 (65535 − 20 IP − 8 UDP).
pub const MAX_UDP_PAYLOAD: u32 = 65_507;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    #[default]
    Udp,
    Tcp,
    /// ICMP echo requests carrying Horde's header (`send -T icmp`; raw sockets, root).
    Icmp,
}

impl Transport {
    /// Smallest payload that carries Horde's header on this transport.
    pub fn min_size(self) -> u32 {
        match self {
            Transport::Udp => horde_wire::DATAGRAM_HEADER_LEN as u32,
            Transport::Tcp => horde_wire::APDU_HEADER_LEN as u32,
            Transport::Icmp => horde_wire::icmp::MIN_PAYLOAD as u32,
        }
    }

    pub fn max_size(self) -> u32 {
        match self {
            Transport::Udp => MAX_UDP_PAYLOAD,
            Transport::Tcp => horde_wire::MAX_APDU as u32,
            Transport::Icmp => horde_wire::icmp::MAX_PAYLOAD as u32,
        }
    }

    /// A bulk flow's payload (UDP) or APDU (TCP) size when none is given: 1,472 B over UDP (the
    /// largest IPv4 payload a 1,500-byte MTU carries unfragmented, as iperf3 and D-ITG users
    /// expect), 65,535 B over TCP (the largest APDU; the stream is segmented by TCP anyway).
    pub fn bulk_size(self) -> u32 {
        match self {
            // 1,500 − 20 IP − 8 ICMP, as UDP's.
            Transport::Udp | Transport::Icmp => 1472,
            Transport::Tcp => horde_wire::MAX_APDU as u32,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Icmp => "icmp",
        }
    }
}
