#![no_main]
use horde_wire::control::{Answer, Challenge, ConsentProbe, Hello, KeepAliveProof};
use libfuzzer_sys::fuzz_target;

// The control datagrams' parsers: never panic; what parses re-emits what was parsed.
fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Hello::parse(data) {
        assert_eq!(Hello::parse(&h.emit()).unwrap(), h);
    }
    if let Ok(c) = Challenge::parse(data) {
        assert_eq!(Challenge::parse(&c.emit()).unwrap(), c);
    }
    if let Ok(a) = Answer::parse(data) {
        assert_eq!(Answer::parse(&a.emit()).unwrap(), a);
    }
    if let Ok(k) = KeepAliveProof::parse(data) {
        let mut b = data.to_vec();
        k.emit(&mut b);
        assert_eq!(KeepAliveProof::parse(&b).unwrap(), k);
    }
    if let Ok(p) = ConsentProbe::parse(data) {
        assert_eq!(ConsentProbe::parse(&p.emit()).unwrap(), p);
        // The peer's answer is never larger than what asked for it.
        if let Some(r) = horde_proto::consent::answer(data, p.flow) {
            assert!(r.len() <= data.len());
        }
    }
});
