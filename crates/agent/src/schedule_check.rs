//! An agent's log against the exact schedule of each flow it holds, regenerated here from the
//! flow's seed (`horde_model::schedule`): the engine sends every departure of a schedule in
//! order and never drops one, so a sender's log holds a prefix of it — departure 0, 1, 2, …,
//! each once, each of its scheduled size, each at its scheduled instant from one common start —
//! and a receiver's log only departures of it, each of its scheduled size. One record that
//! breaks this (a departure added, removed, renumbered, resized or moved) refuses the agent's
//! log whole, naming the flow and the departure (issue 66: 400 forged departures in a flow of
//! 400 made a report of 50 % loss with exit code 0).
//!
//! The same for a scenario's players (`check_players`): each player's departures each way are
//! regenerated from the run's seed and its roster, on the client shards' logs and the server
//! side's.
//!
//! Pure: records in, a verdict out.

use horde_model::flow::Flow;
use horde_model::schedule::{Departure, Schedule};
use horde_model::service::Direction;
use horde_wire::{Record, RecordKind};

/// How far a departure's scheduled instant may be from its schedule's, once the agent's start
/// is known from its first departure (the rounding of a clock correction).
pub const INSTANT_TOLERANCE_NS: i128 = 1_000;
/// How far that start may be from the run's common start (the agents' clock offsets' error).
pub const START_TOLERANCE_NS: i128 = 1_000_000_000;

/// Checks one flow's departures in a sender's log: `sent` as (sequence number, size, scheduled
/// instant on the controller's clock), in any order; `t0` the run's common start.
pub fn check_sent(f: &Flow, sent: &mut [(u64, u32, u64)], t0: u64) -> Result<(), String> {
    check_departures(&format!("flow {}", f.id), Schedule::new(f), sent, t0)
}

/// Checks one flow's arrivals in a receiver's log: `got` as (sequence number, size), in any
/// order (a packet may arrive twice: the network duplicates).
pub fn check_received(f: &Flow, got: &mut [(u64, u32)]) -> Result<(), String> {
    check_arrivals(&format!("flow {}", f.id), Schedule::new(f), got)
}

/// [`check_sent`] against any schedule (`what` names it: "flow 3", "player 17 up").
pub fn check_departures(what: &str, mut schedule: impl Iterator<Item = Departure>, sent: &mut [(u64, u32, u64)], t0: u64) -> Result<(), String> {
    sent.sort_unstable();
    let mut start: Option<i128> = None;
    for (k, &(seq, size, at)) in sent.iter().enumerate() {
        let k = k as u64;
        if seq < k {
            return Err(format!("{what}: departure {seq} is logged twice"));
        }
        if seq > k {
            return Err(format!("{what}: departure {k} is missing before departure {seq} (a sender logs every departure, in order)"));
        }
        let Some(d) = schedule.next() else {
            return Err(format!("{what}: departure {seq}, beyond the {k} its schedule has"));
        };
        if d.size != size {
            return Err(format!("{what}: departure {seq} of {size} B, where its schedule has {} B", d.size));
        }
        let s = at as i128 - d.at_ns as i128;
        match start {
            None if (s - t0 as i128).abs() > START_TOLERANCE_NS => {
                return Err(format!("{what}: its schedule starts {:.3} s from the run's start", (s - t0 as i128) as f64 / 1e9));
            }
            None => start = Some(s),
            Some(s0) if (s - s0).abs() > INSTANT_TOLERANCE_NS => {
                return Err(format!("{what}: departure {seq} is scheduled {:.3} ms from its schedule's instant", (s - s0) as f64 / 1e6));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// [`check_received`] against any schedule.
pub fn check_arrivals(what: &str, mut schedule: impl Iterator<Item = Departure>, got: &mut [(u64, u32)]) -> Result<(), String> {
    got.sort_unstable();
    let mut d = schedule.next();
    for &(seq, size) in got.iter() {
        while d.is_some_and(|x| x.seq < seq) {
            d = schedule.next();
        }
        match d {
            Some(x) if x.seq == seq && x.size != size => {
                return Err(format!("{what}: an arrival of departure {seq} of {size} B, where its schedule has {} B", x.size));
            }
            Some(x) if x.seq == seq => {}
            _ => return Err(format!("{what}: an arrival of departure {seq}, which its schedule does not have")),
        }
    }
    Ok(())
}

/// A scenario side's records (a client shard's, `server` false, or the server side's) against
/// every player's regenerated departures: what it sent, exactly ([`check_departures`]); what it
/// received, departures of the other side's schedule at their sizes ([`check_arrivals`]).
pub fn check_players(players: &horde_scenario::Players, records: &[Record], server: bool, t0: u64) -> Result<(), String> {
    use std::collections::BTreeMap;
    let mut sent: BTreeMap<u32, Vec<(u64, u32, u64)>> = BTreeMap::new();
    let mut got: BTreeMap<u32, Vec<(u64, u32)>> = BTreeMap::new();
    for r in records {
        match r.kind {
            RecordKind::Sent => sent.entry(r.flow).or_default().push((r.seq, r.size, r.t_a)),
            RecordKind::Received => got.entry(r.flow).or_default().push((r.seq, r.size)),
            _ => {}
        }
    }
    let (mine, theirs) = if server { (Direction::Down, Direction::Up) } else { (Direction::Up, Direction::Down) };
    let name = |p: u32, d: Direction| format!("player {p} {}", if d == Direction::Up { "up" } else { "down" });
    for (p, mut s) in sent {
        check_departures(&name(p, mine), players.departures(p, mine), &mut s, t0)?;
    }
    for (p, mut g) in got {
        check_arrivals(&name(p, theirs), players.departures(p, theirs), &mut g)?;
    }
    Ok(())
}

/// How far apart a stopped run's players may have stopped on one agent: one player's last
/// departure may be at most this far past another's first missing one.
pub const STOP_TOLERANCE_NS: u64 = 1_000_000_000;

/// A scenario side's summary (`--collect summaries`) against its players' regenerated
/// departures. The summary counts each player's departures each way (`departures`); the sender
/// sends every departure of its schedule in order, so player by player those are the first
/// ones of its schedule, and:
/// - a run that ran to its end (`stopped` false) sent each player's every departure: one
///   removed or added is seen at its player;
/// - a stopped run sent each player's departures up to one stop: no player's last departure
///   more than [`STOP_TOLERANCE_NS`] past another's first missing one (a departure removed is
///   seen unless it is among its player's last second's).
///
/// Departures that did not leave are the side's report's: a flow's `unsent` (a server side's
/// stream to a player that stopped answering its consent probes, a broken TCP connection) add
/// to its count, and a player the server side never heard from (not in its report) has no
/// departures down. The categories' departed sizes must then be exactly those of these
/// departures, bucket by bucket (one added, removed or resized is seen). A summary holds no
/// sequence numbers or instants: those are checked only where logs are collected. `ranges`:
/// the client players the side ran; `server`: it was the server side too (every player's
/// departures down); `unsent`: per (player, direction) in the side's reports, its unsent count.
pub fn check_summary(
    players: &horde_scenario::Players,
    ranges: &[std::ops::Range<u32>],
    server: bool,
    d: &horde_stats::digest::GameDigest,
    unsent: &std::collections::HashMap<(u32, Direction), u64>,
    stopped: bool,
) -> Result<(), String> {
    use horde_stats::bins::Bins;
    let n = d.categories.len();
    let side = |dir: Direction| -> Vec<std::ops::Range<u32>> {
        match dir {
            Direction::Up => ranges.to_vec(),
            Direction::Down if server => std::iter::once(0..players.len()).collect(),
            Direction::Down => Vec::new(),
        }
    };
    let way = |dir: Direction| if dir == Direction::Up { "up" } else { "down" };
    for &(p, c) in &d.departures {
        for dir in [Direction::Up, Direction::Down] {
            if c[dir as usize] > 0 && !side(dir).iter().any(|r| r.contains(&p)) {
                return Err(format!("player {p}: {} departures {}, where this agent did not run it", c[dir as usize], way(dir)));
            }
        }
    }
    let count = |p: u32, dir: Direction| d.departures.binary_search_by_key(&p, |x| x.0).map_or(0, |i| d.departures[i].1[dir as usize]);
    for dir in [Direction::Up, Direction::Down] {
        let mut want: Vec<Bins> = d.categories.iter().map(|c| Bins::new(c[dir as usize].sent_size.sig())).collect();
        // (player, instant) of the latest departure sent and of the earliest one missing
        let mut last_sent: Option<(u32, u64)> = None;
        let mut first_missing: Option<(u32, u64)> = None;
        for p in side(dir).into_iter().flatten() {
            let sent = count(p, dir);
            let mut schedule = players.departures(p, dir);
            let mut k = 0u64;
            for dep in schedule.by_ref().take(usize::try_from(sent).unwrap_or(usize::MAX)) {
                match want.get_mut(dep.class as usize) {
                    Some(b) => b.record(dep.size as u64),
                    None => return Err(format!("player {p}: a category beyond the summary's {n}")),
                }
                k += 1;
                if last_sent.is_none_or(|l| dep.at_ns > l.1) {
                    last_sent = Some((p, dep.at_ns));
                }
            }
            if k < sent {
                return Err(format!("player {p} {}: {sent} departures, where its schedule has {k}", way(dir)));
            }
            let not_left = unsent.get(&(p, dir)).copied();
            let rest = schedule.by_ref().take(usize::try_from(not_left.unwrap_or(0)).unwrap_or(usize::MAX)).count() as u64;
            if rest < not_left.unwrap_or(0) {
                return Err(format!("player {p} {}: {sent} departures and {} unsent, where its schedule has {}", way(dir), not_left.unwrap_or(0), sent + rest));
            }
            let never_heard = dir == Direction::Down && sent == 0 && not_left.is_none();
            if let Some(next) = schedule.next().filter(|_| !never_heard) {
                if !stopped {
                    return Err(format!(
                        "player {p} {}: {sent} departures, where its schedule has more (departure {sent}, due at {:.3} s, is missing; the run was not stopped)",
                        way(dir),
                        next.at_ns as f64 / 1e9
                    ));
                }
                if not_left.unwrap_or(0) == 0 && first_missing.is_none_or(|f| next.at_ns < f.1) {
                    first_missing = Some((p, next.at_ns));
                }
            }
        }
        if let (Some((a, last)), Some((b, missing))) = (last_sent, first_missing) {
            if last > missing + STOP_TOLERANCE_NS {
                return Err(format!(
                    "{}: player {a} sent a departure due at {:.3} s, player {b} none from {:.3} s on (one stop ends every player's departures)",
                    way(dir),
                    last as f64 / 1e9,
                    missing as f64 / 1e9
                ));
            }
        }
        for (c, (cat, want)) in d.categories.iter().zip(&want).enumerate() {
            let got = cat[dir as usize].sent_size.to_wire().bins;
            let want = want.to_wire().bins;
            if got != want {
                let total = |b: &[(u64, u64)]| b.iter().map(|x| x.1).sum::<u64>();
                return Err(format!(
                    "category {c} {}: {} departures whose sizes are not its players' {} first departures' ({} of them)",
                    way(dir),
                    total(&got),
                    way(dir),
                    total(&want)
                ));
            }
        }
    }
    Ok(())
}

/// A client side's regulated circuits against the server side's (circuits are closed-loop: the
/// throttle follows the network, so no schedule can be regenerated; what one side says is held
/// against the other's): a client's circuit spans no more sequence numbers than its server end
/// issued (its data packets less its resends: a span stretched makes loss that never was), and
/// one whose player the server side never admitted received nothing. Returns the first circuit
/// that breaks this, by player.
pub fn check_circuits(clients: &[horde_scenario::circuits::JoinedCircuit], served: &[horde_scenario::circuits::ServedCircuit]) -> Result<(), (u32, String)> {
    let issued: std::collections::HashMap<u32, u64> = served.iter().map(|s| (s.player, s.stats.sent.saturating_sub(s.stats.resent))).collect();
    for c in clients {
        match issued.get(&c.player) {
            None if c.stats.packets > 0 => {
                return Err((c.player, format!("player {}'s circuit received {} data packets; the server side never admitted it", c.player, c.stats.packets)));
            }
            Some(&n) if c.stats.seq_span > n => {
                return Err((c.player, format!("player {}'s circuit spans {} sequence numbers; its server end issued {n}", c.player, c.stats.seq_span)));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A bots agent's log, bot by bot, against what a Quake client can have done (its packets are
/// the game's answers' doing, not a seeded schedule: nothing more exact can be regenerated):
/// its departures numbered by the channel's outgoing sequence, each number once and none
/// skipped, in time order, at most `max_departures` of them; and each answer (`Echoed`) the
/// answer to one of those departures, at its departure's instant, after it, once.
pub fn check_bot_log(records: &[Record], max_departures: u64) -> Result<(), String> {
    use std::collections::BTreeMap;
    let mut sent: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    let mut answered: BTreeMap<u32, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for r in records {
        match r.kind {
            RecordKind::Sent => sent.entry(r.flow).or_default().push((r.seq, r.t_a)),
            RecordKind::Echoed => answered.entry(r.flow).or_default().push((r.seq, r.t_a, r.t_b)),
            _ => {}
        }
    }
    for (bot, s) in sent.iter_mut() {
        s.sort_unstable();
        for w in s.windows(2) {
            if w[1].0 == w[0].0 {
                return Err(format!("bot {bot}: departure {} is logged twice", w[0].0));
            }
            if w[1].0 != w[0].0 + 1 {
                return Err(format!("bot {bot}: departure {} is missing before departure {}", w[0].0 + 1, w[1].0));
            }
            if w[1].1 < w[0].1 {
                return Err(format!("bot {bot}: departure {} left before departure {}", w[1].0, w[0].0));
            }
        }
        if s.len() as u64 > max_departures {
            return Err(format!("bot {bot}: {} departures, beyond the {max_departures} its packet rate allows", s.len()));
        }
    }
    for (bot, a) in answered.iter_mut() {
        a.sort_unstable();
        let s = sent.get(bot).map(Vec::as_slice).unwrap_or_default();
        for (k, &(seq, t_a, t_b)) in a.iter().enumerate() {
            if k > 0 && a[k - 1].0 == seq {
                return Err(format!("bot {bot}: departure {seq} is answered twice"));
            }
            match s.binary_search_by_key(&seq, |x| x.0) {
                Ok(i) if s[i].1 == t_a && t_b >= t_a => {}
                Ok(_) => return Err(format!("bot {bot}: the answer to departure {seq} is not timed from its departure")),
                Err(_) => return Err(format!("bot {bot}: an answer to departure {seq}, which it did not send")),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        let text = "[[flow]]\ndst = \"127.0.0.1:9000\"\nidt = \"exponential(10)\"\nsize = \"uniform(40, 400)\"\npackets = 400\n";
        horde_model::flow::FlowFile::parse_and_resolve(text, 7).unwrap().remove(0)
    }

    /// A sender's departures as the check takes them.
    type Sent = Vec<(u64, u32, u64)>;

    fn honest(f: &Flow, t0: u64) -> Sent {
        Schedule::new(f).map(|d| (d.seq, d.size, t0 + d.at_ns)).collect()
    }

    #[test]
    fn an_honest_log_passes_and_every_lie_is_named() {
        let f = flow();
        let t0 = 1_700_000_000_000_000_000;
        let good = honest(&f, t0 + 300);
        assert_eq!(good.len(), 400);
        assert_eq!(check_sent(&f, &mut good.clone(), t0), Ok(()));
        assert_eq!(check_sent(&f, &mut good[..123].to_vec(), t0), Ok(()), "stopped early: a prefix");
        let lie = |edit: &dyn Fn(&mut Sent)| {
            let mut l = good.clone();
            edit(&mut l);
            check_sent(&f, &mut l, t0).unwrap_err()
        };
        assert!(lie(&|l| l.push((400, 100, t0 + 10))).contains("beyond the 400"), "one added at the end");
        assert!(lie(&|l| l.push(l[17])).contains("departure 17 is logged twice"), "one added twice");
        assert!(lie(&|l| {
            l.remove(50);
        })
        .contains("departure 50 is missing"));
        assert!(lie(&|l| l[9].1 += 1).contains("departure 9 of"), "resized");
        assert!(lie(&|l| l[9].2 += 5_000).contains("departure 9 is scheduled"), "moved");
        assert!(lie(&|l| l[9].0 = 10).contains("departure 9 is missing"), "renumbered");
        assert!(lie(&|l| l.iter_mut().for_each(|x| x.2 += 5_000_000_000)).contains("starts 5.000 s"), "another start");
        let mut got: Vec<(u64, u32)> = good.iter().map(|x| (x.0, x.1)).collect();
        got.push(got[3]);
        assert_eq!(check_received(&f, &mut got.clone()), Ok(()), "a duplicate arrival is the network's");
        got.push((400, 50));
        assert!(check_received(&f, &mut got).unwrap_err().contains("departure 400, which its schedule does not have"));
        let mut resized = vec![(5, good[5].1 + 1)];
        assert!(check_received(&f, &mut resized).unwrap_err().contains("departure 5 of"));
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // a side's ranges of players: one range here
    fn a_summary_holds_each_players_departures_exactly() {
        let text = "service = \"wow\"\nplayers = 6\nduration = \"20s\"\nseed = 9\n";
        let sc = horde_model::scenario::Scenario::parse(text, "t.toml", std::path::Path::new(".")).unwrap();
        let players = horde_scenario::plan(&sc, sc.players, &std::sync::atomic::AtomicBool::new(false)).unwrap();
        // the summary of players 0..6 up, each player's departures due before `until_ns`, all
        // but departure `skip.1` of player `skip.0` (counted at its player when `skip.2`)
        let summary_until = |until_ns: &dyn Fn(u32) -> u64, skip: (u32, u64, bool)| {
            let mut d = horde_stats::digest::GameDigest::new(sc.service.states.len(), 0, sc.duration_s);
            for p in 0..6 {
                let mut k = 0;
                for dep in players.departures(p, Direction::Up).take_while(|x| x.at_ns < until_ns(p)) {
                    k += 1;
                    if (p, dep.seq) == (skip.0, skip.1) {
                        k -= u64::from(!skip.2);
                        continue;
                    }
                    let c = &mut d.categories[dep.class as usize][0];
                    c.sent += 1;
                    c.sent_size.record(dep.size as u64);
                }
                if k > 0 {
                    d.departures.push((p, [k, 0]));
                }
            }
            d
        };
        let summary_but = |until_ns: u64, skip: (u32, u64, bool)| summary_until(&|_| until_ns, skip);
        let summary = |until_ns: u64| summary_but(until_ns, (u32::MAX, 0, false));
        let none = std::collections::HashMap::new();
        let d = summary(u64::MAX);
        let n: u64 = d.departures.iter().map(|x| x.1[0]).sum();
        assert!(n > 20, "{n} departures");
        assert_eq!(check_summary(&players, &[0..6], false, &d, &none, false), Ok(()), "an honest summary");
        assert_eq!(check_summary(&players, &[0..3, 3..6], false, &d, &none, false), Ok(()), "shards in two ranges");
        // one more departure of a size the schedules have, in the category that has it, and
        // counted at its player
        let mut added = d.clone();
        let c = added.categories.iter().position(|c| c[0].sent > 0).unwrap();
        let size = added.categories[c][0].sent_size.quantile(0.5).unwrap();
        added.categories[c][0].sent += 1;
        added.categories[c][0].sent_size.record(size);
        assert!(check_summary(&players, &[0..6], false, &added, &none, false).unwrap_err().contains(&format!("category {c} up")));
        added.departures[0].1[0] += 1;
        assert!(check_summary(&players, &[0..6], false, &added, &none, false).unwrap_err().contains("its schedule has"), "beyond the schedule");
        // a departure resized to a size no schedule has
        let mut resized = d.clone();
        resized.categories[c][0].sent_size.record(60_000);
        assert!(check_summary(&players, &[0..6], false, &resized, &none, false).is_err());
        // one departure removed (player 0's fifth): from its category only, and from its
        // player's count too
        let cat = players.departures(0, Direction::Up).nth(4).unwrap().class;
        let e = check_summary(&players, &[0..6], false, &summary_but(u64::MAX, (0, 4, true)), &none, false).unwrap_err();
        assert!(e.contains(&format!("category {cat} up")), "from its category: {e}");
        let removed = summary_but(u64::MAX, (0, 4, false));
        let e = check_summary(&players, &[0..6], false, &removed, &none, false).unwrap_err();
        assert!(e.contains("player 0 up") && e.contains("is missing"), "{e}");
        // ... and even in a stopped run, unless among its player's last second's
        assert!(check_summary(&players, &[0..6], false, &removed, &none, true).is_err(), "stopped");
        // a run stopped at 12 s: every player's departures up to then
        let early = summary(12_000_000_000);
        assert!(check_summary(&players, &[0..6], false, &early, &none, false).unwrap_err().contains("the run was not stopped"));
        assert_eq!(check_summary(&players, &[0..6], false, &early, &none, true), Ok(()), "a stopped run");
        // departures that did not leave, as the side's report says: they count
        let cut = |p: u32| if p == 3 { 12_000_000_000 } else { u64::MAX };
        let tail = players.departures(3, Direction::Up).filter(|x| x.at_ns >= 12_000_000_000).count() as u64;
        let short = summary_until(&cut, (u32::MAX, 0, false));
        assert!(check_summary(&players, &[0..6], false, &short, &none, false).unwrap_err().contains("player 3 up"));
        let unsent = std::collections::HashMap::from([((3, Direction::Up), tail)]);
        assert_eq!(check_summary(&players, &[0..6], false, &short, &unsent, false), Ok(()), "player 3's last {tail} unsent");
        // the same summary claimed by a side that ran fewer players
        assert!(check_summary(&players, &[0..2], false, &d, &none, false).unwrap_err().contains("did not run it"));
        // one player's departures to the end, the others' up to 12 s: not one stop
        let mut uneven = early.clone();
        uneven.merge(&summary(u64::MAX)).unwrap();
        let e = check_summary(&players, &[0..6], false, &uneven, &none, true).unwrap_err();
        assert!(e.contains("its schedule has") || e.contains("one stop"), "{e}");
    }

    #[test]
    fn a_client_circuit_spans_no_more_than_its_server_end_issued() {
        use horde_scenario::circuits::{JoinedCircuit, ServedCircuit, ServerStatsOut};
        let client = |player: u32, packets: u64, seq_span: u64| JoinedCircuit {
            player,
            joined_s: Some(0.1),
            error: None,
            seconds: Vec::new(),
            stats: horde_regulate::circuit::ClientStats { packets, fresh: packets, seq_span, ..Default::default() },
        };
        let served = |player: u32, sent: u64, resent: u64| ServedCircuit {
            player,
            client: "127.0.0.1:1".into(),
            seconds: Vec::new(),
            stats: ServerStatsOut { sent, resent, ..Default::default() },
        };
        let server = [served(0, 110, 10), served(1, 50, 0)];
        assert_eq!(check_circuits(&[client(0, 95, 100), client(1, 50, 50)], &server), Ok(()), "honest: 5 lost of player 0's 100");
        let e = check_circuits(&[client(0, 95, 101)], &server).unwrap_err();
        assert!(e.0 == 0 && e.1.contains("spans 101 sequence numbers; its server end issued 100"), "{e:?}");
        let e = check_circuits(&[client(2, 3, 3)], &server).unwrap_err();
        assert!(e.0 == 2 && e.1.contains("never admitted"), "{e:?}");
        assert_eq!(check_circuits(&[client(2, 0, 0)], &server), Ok(()), "a player that never joined received nothing");
    }

    #[test]
    fn a_bots_log_holds_each_departure_once_and_answers_only_to_them() {
        let rec = |bot: u32, seq: u64, t_a: u64, t_b: u64, kind: RecordKind| Record { flow: bot, seq, t_a, t_b, kind, size: 60, ..Default::default() };
        let mut good = Vec::new();
        for bot in 0..3 {
            for k in 0..30u64 {
                let t = 1_000 + k * 33_000_000;
                good.push(rec(bot, 5 + k, t, t, RecordKind::Sent));
                if k % 2 == 0 {
                    good.push(rec(bot, 5 + k, t, t + 40_000_000, RecordKind::Echoed));
                }
            }
        }
        assert_eq!(check_bot_log(&good, 30), Ok(()));
        let lie = |edit: &dyn Fn(&mut Vec<Record>)| {
            let mut l = good.clone();
            edit(&mut l);
            check_bot_log(&l, 30).unwrap_err()
        };
        assert!(lie(&|l| l.push(l[0])).contains("bot 0: departure 5 is logged twice"));
        assert!(lie(&|l| {
            l.remove(3);
        })
        .contains("departure 7 is missing"));
        assert!(lie(&|l| l[2].seq = 77).contains("missing"), "renumbered");
        assert!(lie(&|l| l.push(rec(1, 35, 2_000_000_000, 2_000_000_000, RecordKind::Sent))).contains("beyond the 30"), "added past the rate");
        assert!(lie(&|l| l.push(rec(2, 99, 1, 2, RecordKind::Echoed))).contains("which it did not send"));
        assert!(lie(&|l| l[1].t_b = l[1].t_a - 1).contains("not timed"), "an answer before its question");
        assert!(lie(&|l| l.push(l[1])).contains("answered twice"));
    }
}
