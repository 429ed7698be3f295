#![no_main]
use horde_q3::{huffman, oob, server, Bot, Config, Phase};
use libfuzzer_sys::fuzz_target;

// Anything a hostile or broken game server can send a bot: server-message parsing, the
// adaptive decompressor, connectionless replies, and a whole bot fed datagrams in any order
// (after a valid connection handshake, so the netchan, unscrambling and parsing are reached).
// Never panics; a bot's memory stays bounded.
fuzz_target!(|data: &[u8]| {
    let _ = server::parse(data);
    let _ = huffman::decompress(data, 16384);
    let _ = oob::parse(data);
    let mut bot = Bot::new(Config::new("f".into(), 1, 2), 0);
    let mut out = Vec::new();
    let _ = bot.poll_transmit(0, &mut out);
    bot.handle(1, b"\xff\xff\xff\xffchallengeResponse 77 2 71");
    let _ = bot.poll_transmit(2, &mut out);
    bot.handle(3, b"\xff\xff\xff\xffconnectResponse");
    let mut now = 4;
    for chunk in data.split(|&b| b == 0xA5) {
        bot.handle(now, chunk);
        now += 10_000_000;
        bot.handle_timeout(now);
        let mut sent = 0;
        while bot.poll_transmit(now, &mut out) {
            assert!(out.len() <= 1400);
            sent += 1;
            assert!(sent < 64, "a bounded number of datagrams per turn");
        }
        while bot.poll_event().is_some() {}
        if matches!(bot.phase(), Phase::Gone(_)) {
            break;
        }
    }
    assert!(bot.stats.response_ns.len() < 100_000);
});
