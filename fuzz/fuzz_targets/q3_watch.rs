#![no_main]
use horde_q3::msg::Writer;
use horde_q3::server::{SVC_EOF, SVC_GAMESTATE};
use horde_q3::watch::Watch;
use horde_q3::{netchan, Protocol};
use libfuzzer_sys::fuzz_target;

// Anything a capture can hold for the decoder of a client's input (`horde bots --capture`):
// after a valid handshake and gamestate (so the client messages' unscrambling, operations and
// usercmd deltas are reached), datagrams both ways in any order. Never panics; what it keeps
// stays within its limit.
fuzz_target!(|data: &[u8]| {
    for protocol in [Protocol::OpenArena, Protocol::Ioq3] {
        let mut w = Watch::new(protocol, 1000);
        w.from_server(b"\xff\xff\xff\xffchallengeResponse 77 2 71");
        w.from_server(b"\xff\xff\xff\xffconnectResponse");
        let mut g = Writer::new();
        g.long(0);
        g.byte(SVC_GAMESTATE);
        g.long(0);
        g.byte(SVC_EOF);
        g.long(0);
        g.long(12345);
        g.byte(SVC_EOF);
        let mut msg = g.finish();
        let mut packet = 1i32.to_le_bytes().to_vec();
        if protocol == Protocol::OpenArena {
            netchan::unscramble_server(&mut msg, 77, 1, |_| String::new());
        } else {
            packet.extend_from_slice(&(77 ^ 77i32).to_le_bytes());
        }
        packet.extend_from_slice(&msg);
        w.from_server(&packet);
        for chunk in data.split(|&b| b == 0xA5) {
            match chunk.split_first() {
                Some((d, rest)) if d & 1 == 0 => w.from_client(rest),
                Some((_, rest)) => w.from_server(rest),
                None => {}
            }
        }
        assert!(w.frames.len() <= 1000);
        let _ = w.timed();
    }
});
