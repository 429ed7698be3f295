#![no_main]
use libfuzzer_sys::fuzz_target;

// Any text as a D-ITG multi-flow script (`horde send --ditg-script`): reading it never panics,
// and every line it accepts either resolves to a flow or is refused with a reason — never a
// panic in between.
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(lines) = horde_model::ditg::parse_script(s) {
        for (i, l) in lines.iter().enumerate().take(64) {
            let _ = l.flow.resolve(i as u32, 1, "line");
        }
    }
});
