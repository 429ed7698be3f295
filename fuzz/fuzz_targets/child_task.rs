//! What `horde child` reads: any bytes as the task line (versioned envelope, the label checked,
//! a run's part, a console's run request, the link emulator's task) and as a part's answers.
//! Nothing may panic; a part that reads back is resolved or refused with a message.
#![no_main]
use horde_sys::own::{read_line, read_task, Kind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(part) = read_task::<horde_scenario::part::Part>(&mut &data[..], Kind::Part, "r1") {
        match part.scenario() {
            Ok(sc) => assert!(sc.players > 0),
            Err(e) => assert!(!e.into_anyhow().to_string().is_empty()),
        }
        let _ = part.key();
    }
    let _ = read_task::<horde_scenario::part::RunRequest>(&mut &data[..], Kind::Run, "r1");
    let _ = read_task::<horde_emu::fwd::DaemonTask>(&mut &data[..], Kind::LinkEmulator, "abc");
    let mut r = &data[..];
    while let Ok(Some(_)) = read_line::<horde_scenario::part::PartEvent>(&mut r, horde_scenario::part::MAX_EVENT) {}
});
