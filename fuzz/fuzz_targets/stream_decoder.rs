#![no_main]
use horde_wire::{StreamDecoder, StreamEvent};
use libfuzzer_sys::fuzz_target;

// A sequence of reads of arbitrary sizes: the decoder never panics, sequence numbers count up,
// and once failed it stays failed.
fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let mut d = StreamDecoder::new();
    let mut next_seq = 0;
    let mut failed = false;
    for chunk in rest.chunks(split as usize + 1) {
        let r = d.feed(chunk, |ev| {
            if let StreamEvent::Apdu { seq, len, .. } = ev {
                assert_eq!(seq, next_seq);
                assert!(len >= 6);
                next_seq += 1;
            }
        });
        if failed {
            assert!(r.is_err());
        }
        failed |= r.is_err();
    }
});
