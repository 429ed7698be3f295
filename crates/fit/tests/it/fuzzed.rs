//! Inputs the fuzzer (fuzz/fuzz_targets/fit_capture.rs) found, replayed the way it feeds them:
//! as they are and behind a pcap header, both TCP gap settings. Nothing may panic.

use horde_fit::{fit_capture, service, Options};

fn replay(data: &[u8]) {
    let mut behind = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0];
    behind.extend_from_slice(data);
    for bytes in [data.to_vec(), behind] {
        for tcp_gap_ms in [0.0, 1.0] {
            let opts = Options { tcp_gap_ms, ..Options::default() };
            if let Ok(r) = fit_capture(|| Ok(&bytes[..]), &opts) {
                let text = service::service_toml(&r, "fuzz", "fuzz.pcap");
                if let Err(e) = horde_model::service::Service::parse(&text, "fuzz.toml") {
                    panic!("{e}\n{text}");
                }
            }
        }
    }
}

/// A pcapng capture with a cut and corrupted tail (found in CI's 15-s pass, a debug build).
#[test]
fn a_corrupted_pcapng_tail_is_no_panic() {
    replay(include_bytes!("data/fuzz-crash-1.pcapng"));
}
