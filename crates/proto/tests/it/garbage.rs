//! The protocol fuzz targets' properties on stable, over deterministic pseudo-random input:
//! the gate and the connections never panic on any bytes, never answer with more bytes than
//! they received, and never admit past their caps (coverage-guided versions: `fuzz/`).

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use horde_model::{Flow, Meter, Transport};
use horde_proto::gate::{Decision, Gate, GateConfig};
use horde_proto::{Accepted, Conn, Ctx, RunKey, RxMeta};
use horde_wire::control::Status;

/// Random bytes, often shaped like Horde's control datagrams (magic, version, flags set).
fn datagram(r: &mut ChaCha8Rng) -> Vec<u8> {
    let n = (r.next_u64() % 90) as usize;
    let mut b = vec![0u8; n];
    r.fill_bytes(&mut b);
    if n >= 4 && r.next_u64().is_multiple_of(2) {
        b[0] = b'H';
        b[1] = b'D';
        b[2] = horde_wire::VERSION;
        b[3] = [0x04, 0x08, 0x10, 0x05, 0x01, 0x80, 0x82][(r.next_u64() % 7) as usize];
    }
    b
}

#[test]
fn the_gate_never_amplifies_or_overfills() {
    let mut r = ChaCha8Rng::seed_from_u64(77);
    let mut g = Gate::new(GateConfig { max_flows: 16, max_flows_per_ip: 4, ..GateConfig::receiver(RunKey::OPEN) }, [4; 32]);
    for i in 0..200_000u64 {
        let b = datagram(&mut r);
        let from = std::net::SocketAddr::from(([10, 0, (i % 3) as u8, (r.next_u64() % 9) as u8], 5000));
        match g.on_hello(i * 1_000_000, from, &b) {
            Decision::Challenge(c) => assert!(c.len() <= b.len()),
            Decision::Again(a) => assert!(a.len() <= b.len()),
            Decision::Discover(d) => assert!(d.len() <= b.len()),
            Decision::Validated(h) => {
                let a = g.admit(i * 1_000_000, from, &h, true).unwrap_or_else(|a| a);
                assert!(a.len() <= b.len());
            }
            Decision::Drop(_) => {}
        }
        // Garbage never proves consent; probes go only to admitted peers, and no admitted peer
        // that never answered keeps consent past the lapse.
        assert!(!g.on_consent(from, &b), "garbage proved consent");
        for (to, p) in g.poll_consent(i * 1_000_000).probes {
            assert!(p.len() <= 36 && g.admitted(to, horde_wire::control::ConsentProbe::parse(&p).unwrap().flow).is_some());
        }
        assert!(g.admitted_count() <= 16);
    }
}

struct NullCtx;
impl Ctx for NullCtx {
    fn t0_real(&self) -> u64 {
        7
    }
    fn record(&mut self, _: horde_wire::Record) {}
    fn respond(&mut self, _: u32, tag: u32) -> Result<Accepted, Status> {
        Ok(Accepted { source: Box::new(std::iter::empty()), mirror: None, tag, presence: None })
    }
}

#[test]
fn connections_survive_any_bytes() {
    let mut r = ChaCha8Rng::seed_from_u64(91);
    for round in 0..2_000 {
        let mut server = Conn::server_tcp("s".into(), RunKey::OPEN);
        let mut sink = Conn::sink_tcp("k".into(), RunKey::OPEN);
        let mut fed = 0;
        let n = (r.next_u64() % 400) as usize;
        let mut stream = vec![0u8; n];
        r.fill_bytes(&mut stream);
        if round % 2 == 0 && stream.len() > 36 {
            // a valid hello start, then garbage
            let h = horde_proto::gate::sign_stream_hello(&RunKey::OPEN, horde_wire::StreamHello { flags: 1, flow: 1, base_ns: 2, tag: 3 << 8, mac: [0; 16] });
            h.emit(&mut stream[..36]);
        }
        for chunk in stream.chunks(1 + (r.next_u64() % 50) as usize) {
            fed += chunk.len();
            let _ = server.on_stream(9, chunk, &mut NullCtx);
            let _ = sink.on_stream(9, chunk, &mut NullCtx);
            assert!(sink.out().len() <= fed);
        }
        let mut f = Flow::connection(3, "p".into(), "127.0.0.1:9".parse().unwrap(), 3 << 8);
        f.transport = Transport::Udp;
        f.meter = if round % 2 == 0 { Meter::Rtt } else { Meter::Owd };
        let mut c = Conn::client(&f, Box::new(std::iter::empty()), Some(Box::new(std::iter::empty())), RunKey::OPEN, true);
        for _ in 0..20 {
            let d = datagram(&mut r);
            let _ = c.on_datagram(1, &d, &RxMeta { len: d.len(), ..Default::default() });
        }
    }
}
