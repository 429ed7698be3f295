#![no_main]
use horde_model::FlowFile;
use libfuzzer_sys::fuzz_target;

// Any text as a flow file: parsing and validation never panic, and every flow that resolves
// has a schedule that yields departures without panicking (a bounded number of them). The
// same text placed on emulated hosts (`send --emu`: host names in `dst`) never panics either,
// and resolves to the same flows as without placement unless a host name was substituted.
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if s.contains("file(") {
        return;
    }
    let hosts = |name: &str| -> Option<std::net::IpAddr> { (name.len() <= 8 && name.starts_with('h')).then(|| std::net::IpAddr::from([10, 0, 0, name.len() as u8])) };
    let placed = FlowFile::parse_placed(s, 1, Some(&hosts));
    if let Ok(flows) = FlowFile::parse_and_resolve(s, 1) {
        let placed = placed.expect("a file that resolves without hosts resolves with them");
        assert_eq!(placed.len(), flows.len());
        for f in flows.iter().take(4) {
            for d in horde_model::Schedule::new(f).take(64) {
                assert!(d.size >= f.transport.min_size() && d.size <= f.transport.max_size());
            }
        }
    }
});
