//! Datagrams that came before their flow's admitting hello.
//!
//! A UDP sender (or a player) sends its admitting hello and then its departures without
//! waiting for the answer, so on a reordering or jittery path a departure can overtake the
//! hello. The receiver (`horde recv`, or a run's server side) holds such a datagram's header
//! and arrival (never more than [`EARLY_MAX`] of them, and
//! [`EARLY_BYTES`] of echo requests' bytes, each at most [`EARLY_HOLD_NS`]): when the hello
//! admits the flow they count and are logged as arrived (with their own arrival times);
//! otherwise they are refused as not admitted when their time is up. Holding sends nothing,
//! so a spoofer filling the room only costs the overtaken datagrams of that moment what they
//! cost before: being refused.

use std::collections::VecDeque;
use std::net::SocketAddr;

use horde_proto::RxMeta;
use horde_wire::DatagramHeader;

/// Datagrams held at most at once, over every flow and socket.
pub(crate) const EARLY_MAX: usize = 1024;
/// Bytes of echo requests held at once (they are echoed if the flow is admitted).
pub(crate) const EARLY_BYTES: usize = 1 << 20;
/// How long a datagram waits for its flow's hello: two and a half of a sender's hello retries
/// (`horde_proto::greeter::RETRY_NS`), so one lost admitting hello costs nothing either.
pub(crate) const EARLY_HOLD_NS: u64 = 250_000_000;

/// One datagram that came before its flow was admitted.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub from: SocketAddr,
    pub header: DatagramHeader,
    pub meta: RxMeta,
    /// The real clock when its batch was read (what a datagram read then is logged with).
    pub now_real: u64,
    /// The monotonic clock then: when its time is up.
    pub mono: u64,
    /// The listener (index) it came in on.
    pub sock: usize,
    /// The whole datagram, kept only for an echo request (to echo it once admitted).
    pub bytes: Option<Vec<u8>>,
}

/// The held datagrams, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Early {
    held: VecDeque<Held>,
    bytes: usize,
}

impl Early {
    /// Holds `h`; false (nothing kept) when the room is full. An echo request whose bytes do
    /// not fit is held without them (it counts as arrived, but is not echoed).
    pub fn hold(&mut self, mut h: Held) -> bool {
        if self.held.len() >= EARLY_MAX {
            return false;
        }
        if let Some(b) = &h.bytes {
            if self.bytes + b.len() > EARLY_BYTES {
                h.bytes = None;
            } else {
                self.bytes += b.len();
            }
        }
        self.held.push_back(h);
        true
    }

    /// Lets go of what waited [`EARLY_HOLD_NS`] or more by `now_mono`; returns how many.
    pub fn expire(&mut self, now_mono: u64) -> u64 {
        let mut n = 0;
        while self.held.front().is_some_and(|h| now_mono.saturating_sub(h.mono) >= EARLY_HOLD_NS) {
            let h = self.held.pop_front().expect("checked");
            self.bytes -= h.bytes.as_ref().map_or(0, Vec::len);
            n += 1;
        }
        n
    }

    /// Takes the datagrams of flow `flow` from `from`, in the order they came.
    pub fn take(&mut self, from: SocketAddr, flow: u32) -> Vec<Held> {
        if !self.held.iter().any(|h| h.from == from && h.header.flow == flow) {
            return Vec::new();
        }
        let (mine, rest): (VecDeque<Held>, VecDeque<Held>) = self.held.drain(..).partition(|h| h.from == from && h.header.flow == flow);
        self.held = rest;
        self.bytes -= mine.iter().map(|h| h.bytes.as_ref().map_or(0, Vec::len)).sum::<usize>();
        mine.into()
    }

    /// Lets go of everything (the receiver stops); returns how many.
    pub fn clear(&mut self) -> u64 {
        let n = self.held.len() as u64;
        self.held.clear();
        self.bytes = 0;
        n
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(port: u16, flow: u32, seq: u32, mono: u64, bytes: Option<usize>) -> Held {
        Held {
            from: SocketAddr::from(([10, 0, 0, 1], port)),
            header: DatagramHeader { flags: 0, flow, seq, send_ns: 0 },
            meta: RxMeta { len: 64, ..Default::default() },
            now_real: mono,
            mono,
            sock: 0,
            bytes: bytes.map(|n| vec![0; n]),
        }
    }

    #[test]
    fn takes_one_flows_datagrams_in_order_and_leaves_the_others() {
        let mut e = Early::default();
        for (port, flow, seq) in [(1, 0, 0), (2, 0, 0), (1, 0, 1), (1, 7, 0), (1, 0, 2)] {
            assert!(e.hold(held(port, flow, seq, 0, None)));
        }
        let mine = e.take(SocketAddr::from(([10, 0, 0, 1], 1)), 0);
        assert_eq!(mine.iter().map(|h| h.header.seq).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(e.len(), 2, "another source's and another flow's stay");
        assert!(e.take(SocketAddr::from(([10, 0, 0, 1], 1)), 0).is_empty());
    }

    #[test]
    fn holds_a_bounded_number_and_bytes_and_lets_go_when_the_time_is_up() {
        let mut e = Early::default();
        for k in 0..EARLY_MAX {
            assert!(e.hold(held(1, k as u32, 0, k as u64, None)));
        }
        assert!(!e.hold(held(1, 0, 1, 0, None)), "the room is full");
        assert_eq!(e.expire(EARLY_HOLD_NS - 1), 0);
        assert_eq!(e.expire(EARLY_HOLD_NS + 9), 10, "the ten oldest waited long enough");
        assert_eq!(e.clear(), (EARLY_MAX - 10) as u64);

        // Echo requests' bytes: beyond the budget the datagram is held without them.
        let big = EARLY_BYTES / 2 + 1;
        assert!(e.hold(held(1, 0, 0, 0, Some(big))));
        assert!(e.hold(held(1, 0, 1, 0, Some(big))));
        let both = e.take(SocketAddr::from(([10, 0, 0, 1], 1)), 0);
        assert!(both[0].bytes.is_some() && both[1].bytes.is_none());
        assert!(e.hold(held(1, 0, 2, 0, Some(big))), "taking gave the bytes back");
        assert!(e.take(SocketAddr::from(([10, 0, 0, 1], 1)), 0)[0].bytes.is_some());
    }
}
