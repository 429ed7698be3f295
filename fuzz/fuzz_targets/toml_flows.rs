#![no_main]
use horde_model::FlowFile;
use libfuzzer_sys::fuzz_target;

// Any text as a flow file: parsing and validation never panic, and every flow that resolves
// has a schedule that yields departures without panicking (a bounded number of them).
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if s.contains("file(") {
        return;
    }
    if let Ok(flows) = FlowFile::parse_and_resolve(s, 1) {
        for f in flows.iter().take(4) {
            for d in horde_model::Schedule::new(f).take(64) {
                assert!(d.size >= f.transport.min_size() && d.size <= f.transport.max_size());
            }
        }
    }
});
