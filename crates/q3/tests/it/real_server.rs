//! Replays a session captured from a real OpenArena server (`fixtures/openarena-session.txt`,
//! see its header): the same bot, fed the server's datagrams, must make the same connection
//! requests byte for byte, unscramble and parse every server message (gamestate in fragments,
//! snapshots with deltas), and follow the player's command time.

use horde_q3::{Bot, Config, End, Phase};

fn session() -> Vec<(u64, bool, Vec<u8>)> {
    let text = include_str!("../fixtures/openarena-session.txt");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split(' ');
            let t: u64 = f.next().unwrap().parse().unwrap();
            let from_client = f.next().unwrap() == "c";
            let hex = f.next().unwrap();
            let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            (t * 1000, from_client, bytes)
        })
        .collect()
}

/// Everything the bot sends at `now` (its timers first), as a socket loop would.
fn due(bot: &mut Bot, now: u64) -> Vec<Vec<u8>> {
    bot.handle_timeout(now);
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    while bot.poll_transmit(now, &mut buf) {
        out.push(buf.clone());
    }
    out
}

#[test]
fn a_captured_openarena_session_replays() {
    let rows = session();
    let mut bot = Bot::new(Config::new("probe".into(), 4242, 1), 0);
    let client: Vec<&Vec<u8>> = rows.iter().filter(|r| r.1).map(|r| &r.2).collect();
    // The connectionless requests are the captured ones, byte for byte (the connect's userinfo
    // is Huffman-compressed: the server accepted exactly these bytes).
    assert_eq!(due(&mut bot, 0), vec![client[0].clone()], "getchallenge");
    let mut connect_checked = false;
    for (t, from_client, bytes) in &rows {
        if *from_client {
            continue;
        }
        // The probe left after 3 s (its `disconnect` is the reliable command the server's last
        // messages acknowledge, and their scrambling key).
        if *t >= 3_000_000_000 && *bot.phase() == Phase::Active {
            bot.disconnect();
        }
        bot.handle(*t, bytes);
        if *bot.phase() == Phase::Connecting && !connect_checked {
            assert_eq!(due(&mut bot, *t), vec![client[1].clone()], "connect");
            connect_checked = true;
        }
    }
    assert!(connect_checked);
    let s = &bot.stats;
    assert_eq!((s.corrupt, s.delta_misses, s.dropped), (0, 0, 0), "{s:?}");
    assert!(s.snapshots >= 55, "{} snapshots in 3 s at sv_fps 20", s.snapshots);
    assert!(s.active_after_ns.is_some());
    assert_eq!(bot.client_num, 0);
    // The server's goodbye (its `disconnect` command) answered the probe's.
    assert_eq!(*bot.phase(), Phase::Gone(End::Quit));
}

/// The same session with datagrams cut short or bit-flipped: counted, never fatal.
#[test]
fn a_damaged_session_is_counted_not_fatal() {
    let rows = session();
    let mut bot = Bot::new(Config::new("probe".into(), 4242, 1), 0);
    let _ = due(&mut bot, 0);
    let mut damaged = 0;
    // The second half of the session damaged (a replay cannot ask for a fresh full snapshot as
    // a live bot does, so deltas after a damaged one miss their base: counted).
    let half = rows.len() / 2;
    for (k, (t, from_client, bytes)) in rows.iter().enumerate() {
        if *from_client || *t >= 3_000_000_000 {
            continue;
        }
        let mut b = bytes.clone();
        if k > half && k % 7 == 0 && b.len() > 12 {
            b.truncate(b.len() / 2);
            damaged += 1;
        } else if k > half && k % 11 == 0 && b.len() > 12 {
            let i = b.len() - 3;
            b[i] ^= 0x5A;
            damaged += 1;
        }
        bot.handle(*t, &b);
        let _ = due(&mut bot, *t);
    }
    assert!(damaged > 3);
    let s = &bot.stats;
    assert!(s.corrupt > 0 && s.delta_misses > 0, "{s:?}");
    assert!(s.snapshots > 20, "the intact snapshots still count: {s:?}");
}
