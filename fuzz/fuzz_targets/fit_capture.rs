//! Models from captures: any bytes as a capture file (as they are, and behind a valid pcap
//! header so the fuzzer reaches the frames quickly), through the reader, the server census, the
//! APDU reconstruction (UDP and TCP), the samples and the fits. Nothing may panic; a file that
//! is not a capture is an error, one cut or corrupted part-way a partial fit; the service file
//! written from any fit is one Horde reads.
#![no_main]
use horde_fit::{fit_capture, service, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let as_is = data.to_vec();
    // pcap, microseconds, Ethernet, snap length 65535
    let mut behind = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0];
    behind.extend_from_slice(data);
    for bytes in [as_is, behind] {
        for tcp_gap_ms in [0.0, 1.0] {
            let opts = Options { tcp_gap_ms, ..Options::default() };
            if let Ok(r) = fit_capture(|| Ok(&bytes[..]), &opts) {
                // whatever was fitted, the service file is one Horde reads
                let text = service::service_toml(&r, "fuzz", "fuzz.pcap");
                if let Err(e) = horde_model::service::Service::parse(&text, "fuzz.toml") {
                    panic!("{e}\n{text}");
                }
            }
        }
    }
});
