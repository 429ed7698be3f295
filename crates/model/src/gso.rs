//! Whether UDP departures due together leave as GSO super-datagrams (`UDP_SEGMENT`).
//!
//! A super-datagram is one system call for many datagrams, cut apart by the kernel or the
//! interface on the way out. A capture on the sending host sees it before the cut: on loopback,
//! where nothing cuts it, tcpdump shows one datagram of twice (or 64 times) the size, and a fit
//! of such a capture counts one APDU. So GSO is on where it is worth it and changes nothing a
//! user checks: bulk flows, which send as fast as the path takes them (`auto`, the default).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Gso {
    /// Every flow: departures of one flow due together and of one size leave as one
    /// super-datagram.
    On,
    /// No flow: one `sendmmsg` entry per datagram, each seen as itself by a capture.
    Off,
    /// Bulk flows only; paced flows (game traffic) leave datagram by datagram.
    #[default]
    Auto,
}

impl Gso {
    /// Whether a flow (bulk or paced) sends super-datagrams.
    pub fn for_flow(self, bulk: bool) -> bool {
        match self {
            Gso::On => true,
            Gso::Off => false,
            Gso::Auto => bulk,
        }
    }
}
