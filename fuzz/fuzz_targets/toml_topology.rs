#![no_main]
use libfuzzer_sys::fuzz_target;

// Any text as a topology file: planning never panics, and a plan's names fit the kernel's
// 15-byte interface names.
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(p) = horde_topo::plan(s, "fuzz.toml", "fz1") {
        for l in &p.links {
            assert!(l.a.ifname.len() <= 15 && l.b.ifname.len() <= 15);
        }
    }
});
