#![no_main]
use horde_model::{Flow, Meter, Transport};
use horde_proto::{Conn, RunKey, RxMeta};
use libfuzzer_sys::fuzz_target;

// A UDP client (two-way, greeting) fed any datagrams: never panics, never turns a control
// datagram into traffic.
fuzz_target!(|data: &[u8]| {
    let mut f = Flow::connection(3, "p".into(), "127.0.0.1:9".parse().unwrap(), 3 << 8);
    f.transport = Transport::Udp;
    for meter in [Meter::Owd, Meter::Rtt] {
        f.meter = meter;
        let mut c = Conn::client(&f, Box::new(std::iter::empty()), Some(Box::new(std::iter::empty())), RunKey::OPEN, true);
        let _ = c.poll_hello(0);
        for d in data.split(|b| *b == 0xFE) {
            if let Ok(Some(r)) = c.on_datagram(1, d, &RxMeta { len: d.len(), ..Default::default() }) {
                assert!(d.len() >= 20 && d[3] & horde_wire::datagram::CONTROL_FLAGS == 0);
                assert_eq!(r.size as usize, d.len());
            }
            let _ = c.poll_hello(1_000_000_000);
        }
    }
});
