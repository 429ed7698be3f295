#![no_main]
use horde_scenario::control::{read, Command, Commands};
use libfuzzer_sys::fuzz_target;

// The run's command channel (`--commands FILE|-`): any bytes are read line by line without
// panicking or holding more than a line; every line (with or without its `id`) either parses
// into a command that re-encodes to itself, or is refused with a message.
fuzz_target!(|data: &[u8]| {
    let (tx, cmds) = Commands::channel();
    read(std::io::Cursor::new(data), &tx);
    while let Some(item) = cmds.try_next() {
        match item.command {
            Ok(c) => {
                let again = Command::parse(&serde_json::to_string(&c).unwrap()).unwrap();
                assert_eq!(again, c);
                // a link command's settings were checked as its line arrived
                assert!(c.link_op().is_ok());
            }
            Err(m) => assert!(!m.is_empty()),
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = Command::parse(s);
        let _ = Command::parse_line(s);
    }
});
