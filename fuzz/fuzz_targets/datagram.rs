#![no_main]
use horde_wire::DatagramHeader;
use libfuzzer_sys::fuzz_target;

// Any bytes: parse never panics, and what parses re-emits to the same header bytes.
fuzz_target!(|data: &[u8]| {
    if let Ok(h) = DatagramHeader::parse(data) {
        let mut buf = [0u8; 20];
        h.emit(&mut buf);
        assert_eq!(&buf[..], &data[..20]);
    }
});
