#![no_main]
use horde_proto::gate::{Decision, Gate, GateConfig};
use horde_proto::RunKey;
use libfuzzer_sys::fuzz_target;

// The server side's handling of UDP hellos and consent replies: any datagrams from any
// addresses, at any times. Never panics; never answers with more bytes than it received; never
// admits more flows than its caps; answers only hellos made with the key; garbage never proves
// consent; probes go only to admitted flows; a discovery reply admits nothing.
fuzz_target!(|data: &[u8]| {
    let key = RunKey::from_bytes([7; 32]);
    let mut g = Gate::new(GateConfig { max_flows: 8, max_flows_per_ip: 4, ..GateConfig::receiver(key) }, [1; 32]);
    let mut now = 0u64;
    for chunk in data.chunks(80) {
        let Some((&head, body)) = chunk.split_first() else { continue };
        now += head as u64 * 7_919_000;
        let from = std::net::SocketAddr::from(([10, 0, 0, head % 8], 4000 + (head as u16 % 3)));
        match g.on_hello(now, from, body) {
            Decision::Challenge(c) => assert!(c.len() <= body.len()),
            Decision::Again(a) => assert!(a.len() <= body.len()),
            Decision::Discover(d) => {
                // A proven discovery request: one reply, no larger, nothing admitted.
                let before = g.admitted_count();
                assert!(d.len() <= body.len());
                assert_eq!(g.admitted_count(), before);
            }
            Decision::Validated(h) => {
                let r = g.admit(now, from, &h, head % 2 == 0);
                assert!(r.map(|a| a.len()).unwrap_or_else(|a| a.len()) <= body.len());
            }
            Decision::Drop(_) => {}
        }
        assert!(!g.on_consent(from, body), "fuzzed bytes proved consent");
        for (to, p) in g.poll_consent(now).probes {
            let flow = horde_wire::control::ConsentProbe::parse(&p).unwrap().flow;
            assert!(g.admitted(to, flow).is_some());
        }
        assert!(g.admitted_count() <= 8);
    }
});
