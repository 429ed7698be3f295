//! Replays a session captured from a real OpenArena server (`fixtures/openarena-session.txt`,
//! see its header): the same bot, fed the server's datagrams, must make the same connection
//! requests byte for byte, unscramble and parse every server message (gamestate in fragments,
//! snapshots with deltas), and follow the player's command time.

use horde_q3::watch::Watch;
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

/// A passive observer of the captured session reads the client's usercmds off the wire: every
/// client packet after the gamestate decodes, and the commands kept run forward in time.
#[test]
fn the_captured_clients_usercmds_read_off_the_wire() {
    let mut w = Watch::new(horde_q3::Protocol::OpenArena, 100_000);
    for (_, from_client, bytes) in session() {
        if from_client {
            w.from_client(&bytes);
        } else {
            w.from_server(&bytes);
        }
    }
    let s = &w.stats;
    assert_eq!((s.connections, s.undecodable, s.fragmented), (1, 0, 0), "{s:?}");
    assert!(s.decoded >= 80 && s.decoded + s.before_gamestate == s.client_packets, "{s:?}");
    assert!(w.frames.len() >= 150, "3 s at 60 frames a second: {s:?}");
    assert!(w.frames.windows(2).all(|p| p[0].server_time < p[1].server_time));
    // The probe's behaviour model holds its weapon and turns within its pitch limit.
    assert!(w.frames.iter().all(|c| c.weapon == 2), "{:?}", w.frames.iter().find(|c| c.weapon != 2));
    let pitch = |c: &horde_q3::usercmd::UserCmd| (c.angles[0] as i16) as f64 * 360.0 / 65536.0;
    assert!(w.frames.iter().all(|c| pitch(c).abs() <= 30.0));
}

/// The same bot replayed against the captured server, recording what it plays: the observer,
/// fed the server's datagrams and the bot's own, reads back exactly the commands the bot made
/// that the server takes (newer server times); a wrong key or scramble would change them.
#[test]
fn the_observer_reads_exactly_what_the_bot_played() {
    let rows = session();
    let mut bot = Bot::new(Config::new("probe".into(), 4242, 1), 0);
    bot.record_input();
    let mut w = Watch::new(horde_q3::Protocol::OpenArena, 100_000);
    for p in due(&mut bot, 0) {
        w.from_client(&p);
    }
    for (t, from_client, bytes) in &rows {
        if *from_client {
            continue;
        }
        if *t >= 3_000_000_000 && *bot.phase() == Phase::Active {
            bot.disconnect();
        }
        bot.handle(*t, bytes);
        w.from_server(bytes);
        for p in due(&mut bot, *t) {
            w.from_client(&p);
        }
    }
    let mut played = Vec::new();
    for (_, c) in bot.take_tape() {
        if c.server_time > played.last().map_or(0, |p: &horde_q3::usercmd::UserCmd| p.server_time) {
            played.push(c);
        }
    }
    // (a replay answers in bursts at the captured times, so fewer distinct server times than live)
    assert!(played.len() >= 40, "{}", played.len());
    assert_eq!(w.stats.undecodable, 0, "{:?}", w.stats);
    // The last commands may not have left before the bot did.
    let n = w.frames.len();
    assert!(n + 5 >= played.len(), "{n} of {}", played.len());
    assert_eq!(w.frames[..], played[..n]);
}
