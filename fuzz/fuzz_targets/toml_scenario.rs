#![no_main]
use horde_model::scenario::Scenario;
use libfuzzer_sys::fuzz_target;

// Any text as a scenario file (services by built-in name only: no file is read).
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if s.contains('/') || s.contains(".toml") || s.contains("file(") {
        return;
    }
    if let Ok(sc) = Scenario::parse(s, "fuzz.toml", std::path::Path::new("/nonexistent")) {
        if sc.players <= 4 && sc.duration_s <= 600.0 {
            let _ = sc.segments();
        }
    }
});
