#![no_main]
use horde_proto::endpoint::{Endpoint, Joiner, Peer};
use horde_proto::gate::{Gate, GateConfig};
use horde_proto::RunKey;
use libfuzzer_sys::fuzz_target;

/// A peer that keeps what it got (bounded) and sends one datagram per datagram received.
#[derive(Default)]
struct Count {
    owed: u32,
    got: u64,
}

impl Peer for Count {
    type Event = ();
    fn handle(&mut self, _now: u64, bytes: &[u8]) {
        self.got += bytes.len() as u64;
        self.owed = (self.owed + 1).min(4);
    }
    fn poll_transmit(&mut self, _now: u64, buf: &mut Vec<u8>) -> bool {
        if self.owed == 0 {
            return false;
        }
        self.owed -= 1;
        buf.clear();
        buf.extend_from_slice(b"data");
        true
    }
    fn poll_timeout(&self, now: u64) -> u64 {
        if self.owed > 0 { now } else { u64::MAX }
    }
}

// The listener's endpoint and a client's joiner fed any datagrams from any addresses at any
// times. Never panics; answers an address that never proved itself with at most the bytes it
// sent; never holds more peers than the gate's caps; the joiner's answers stay bounded.
fuzz_target!(|data: &[u8]| {
    let key = RunKey::from_bytes([7; 32]);
    let mut ep: Endpoint<Count> = Endpoint::new(Gate::new(GateConfig { max_flows: 8, max_flows_per_ip: 4, ..GateConfig::receiver(key.clone()) }, [1; 32]));
    let mut j: Joiner<Count> = Joiner::new(key, 1, 0, 0);
    let (mut now, mut buf) = (0u64, Vec::new());
    for chunk in data.chunks(80) {
        let Some((&head, body)) = chunk.split_first() else { continue };
        now += head as u64 * 7_919_000;
        let from = std::net::SocketAddr::from(([10, 0, 0, head % 8], 4000 + (head as u16 % 3)));
        ep.handle(now, from, body, |h| if h.header.flow < 6 { Ok(Count::default()) } else { Err(horde_wire::control::Status::UnknownPlayer) });
        let mut replied = 0usize;
        ep.transmit(now, &mut buf, |b, to| {
            if to == from && b != b"data" {
                replied += b.len();
            }
        });
        assert!(replied <= body.len().max(horde_wire::control::CONSENT_LEN), "{replied} B answered {} B", body.len());
        while ep.poll_ended().is_some() {}
        assert!(ep.gate().admitted_count() <= 8);
        j.handle(now, body);
        if matches!(j.phase(), horde_proto::endpoint::Joining::Admitted) {
            j.up(now, Count::default());
        }
        let mut n = 0;
        while j.poll_transmit(now, &mut buf) && n < 100 {
            n += 1;
        }
        assert!(n < 100, "a joiner's transmits are bounded");
    }
});
