#![no_main]
use horde_q3::input::{Input, Recorded};
use horde_q3::usercmd::UserCmd;
use libfuzzer_sys::fuzz_target;

// Any text as a recorded action file: an error naming the line, or frames that replay at any
// time without panicking.
fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Recorded::parse(text) {
        Ok(mut r) => {
            let mut c = UserCmd::default();
            for t in [0.0, 0.016, 1.0, 3600.0, 1e9] {
                r.frame(t, &mut c);
            }
        }
        Err(e) => assert!(e.line <= text.lines().count().max(1)),
    }
});
