#![no_main]
use horde_proto::{Accepted, Conn, Ctx, RunKey};
use horde_wire::control::Status;
use libfuzzer_sys::fuzz_target;

struct C(u64);
impl Ctx for C {
    fn t0_real(&self) -> u64 {
        1_000
    }
    fn record(&mut self, _: horde_wire::Record) {
        self.0 += 1;
    }
    fn respond(&mut self, _: u32, tag: u32) -> Result<Accepted, Status> {
        Ok(Accepted { source: Box::new(std::iter::empty()), mirror: Some(Box::new(std::iter::empty())), tag, presence: None })
    }
}

// A server side's and a receiver's TCP connection fed any bytes in reads of any sizes: never
// panics; once closed it stays closed; a sink's echo backlog never exceeds what it was sent; a
// sink asked for bulk back (reverse) never queues past its limit plus one APDU and its hello.
fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    for key in [RunKey::OPEN, RunKey::from_bytes([3; 32])] {
        let mut server = Conn::server_tcp("s".into(), key.clone());
        let mut sink = Conn::sink_tcp("k".into(), key);
        let mut ctx = C(0);
        let (mut s_closed, mut k_closed) = (false, false);
        let mut fed = 0;
        for chunk in rest.chunks(split as usize + 1) {
            fed += chunk.len();
            if !s_closed {
                s_closed = server.on_stream(5, chunk, &mut ctx).is_err();
            }
            if !k_closed {
                k_closed = sink.on_stream(5, chunk, &mut ctx).is_err();
                if sink.reverse_requested() {
                    sink.fill_reverse(6, 4096);
                    assert!(sink.out().len() <= 4096 + horde_wire::MAX_APDU + horde_wire::HELLO_LEN);
                    let n = sink.out().len() / 2;
                    sink.wrote(n);
                } else {
                    assert!(sink.out().len() <= fed);
                }
            }
        }
    }
});
