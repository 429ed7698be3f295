#![no_main]
use horde_wire::log::read_all;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((_, recs)) = read_all(data) {
        for r in recs.flatten() {
            let mut b = [0u8; 40];
            r.emit(&mut b);
            assert_eq!(horde_wire::Record::parse(&b).unwrap(), r);
        }
    }
});
