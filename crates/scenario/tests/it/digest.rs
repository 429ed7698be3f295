//! Issue 27: analysis where the data is. On the records of one real run (WoW players over
//! loopback, in this process), every figure computed from summaries — one agent's, and two
//! agents' merged — equals the raw-record figure exactly (counts, bytes, loss, rates, the
//! seconds) or within the bound the summary states (delay percentiles, KS distances).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use horde_model::scenario::Scenario;
use horde_model::service::Direction;
use horde_scenario::{execute, RunOptions};
use horde_stats::digest::{self, Builder, GameDigest};
use horde_stats::game::{self, Context, DirectionStats, GameAnalysis};
use horde_wire::{Record, RecordKind};

const SCENARIO: &str = "name = \"digest\"\nservice = \"wow\"\nplayers = 100\nduration = \"8s\"\nseed = 11\nstart_hour = 20\nserver = \"127.0.0.1:0\"\n";

/// A summary of the records an agent holds: `client` (its players' side) and `server` (the
/// server side's, if it ran it), each in log order.
fn summarise(ctx: &Context, cats: usize, client: &[&Record], server: &[&Record]) -> GameDigest {
    let mut b = Builder::new(cats, ctx.epoch_ns, ctx.duration_s);
    let stay = |r: &Record| ctx.segments.get((r.tag >> 8) as usize).and_then(|s| digest::stay_of(s, ctx.epoch_ns, r.t_a));
    for (recs, out, back) in [(client, Direction::Up, Direction::Down), (server, Direction::Down, Direction::Up)] {
        for r in recs {
            match r.kind {
                RecordKind::Sent => b.sent(r, out, ctx.segments.get((r.tag >> 8) as usize).map(Vec::as_slice)),
                RecordKind::Received => b.received(r, back, stay(r)),
                _ => {}
            }
        }
    }
    b.finish()
}

fn all(v: &[Record]) -> Vec<&Record> {
    v.iter().collect()
}

fn part(v: &[Record], odd: u32) -> Vec<&Record> {
    v.iter().filter(|r| (r.tag >> 8) % 2 == odd).collect()
}

fn close(a: Option<f64>, b: Option<f64>, tol: f64, what: &str) {
    match (a, b) {
        (Some(a), Some(b)) => assert!((a - b).abs() <= tol + 1e-9, "{what}: {a} vs {b} (bound {tol})"),
        (a, b) => assert_eq!(a.is_some(), b.is_some(), "{what}: {a:?} vs {b:?}"),
    }
}

/// `d` (from summaries) against `r` (from raw records).
fn same_row(d: &DirectionStats, r: &DirectionStats, what: &str) {
    assert_eq!(
        (d.sent, d.received, d.lost, d.bytes, d.size_samples, d.iat_samples),
        (r.sent, r.received, r.lost, r.bytes, r.size_samples, r.iat_samples),
        "{what}: counts"
    );
    assert_eq!((d.bitrate_bps, d.apdu_rate_per_player, d.mean_size), (r.bitrate_bps, r.apdu_rate_per_player, r.mean_size), "{what}: rates");
    assert_eq!((d.rate_error_pct, d.model_apdu_rate_per_player), (r.rate_error_pct, r.model_apdu_rate_per_player), "{what}: model rate");
    assert_eq!(
        (d.departure_rate_error_pct, d.departure_rate_per_player, d.departure_iat_samples),
        (r.departure_rate_error_pct, r.departure_rate_per_player, r.departure_iat_samples),
        "{what}: departures"
    );
    let b = d.bounds.clone().expect("rows from summaries state their bounds");
    for (got, want, bound, name) in [
        (d.ks_size, r.ks_size, b.ks_size, "KS size"),
        (d.ks_iat, r.ks_iat, b.ks_iat, "KS IAT"),
        (d.ks_iat_exact, r.ks_iat_exact, b.ks_iat_exact, "KS IAT µs"),
        (d.ks_departure_size, r.ks_departure_size, b.ks_departure_size, "KS departure size"),
        (d.ks_departure_iat, r.ks_departure_iat, b.ks_departure_iat, "KS departure IAT"),
        (d.path_ks_size, r.path_ks_size, b.path_ks_size, "path KS size"),
        (d.path_ks_iat, r.path_ks_iat, b.path_ks_iat, "path KS IAT"),
    ] {
        if let (Some(g), Some(w)) = (got, want) {
            let bound = bound.expect("a bound beside every KS distance");
            assert!(g <= w + 1e-9 && w <= g + bound + 1e-9, "{what}: {name} {w} not in [{g}, {g} + {bound}]");
        } else {
            assert_eq!(got.is_some(), want.is_some(), "{what}: {name}");
        }
    }
    // sizes below 2,048 B have a bucket each: their KS distance is the raw one
    if r.size_cdf.last().is_some_and(|p| p.0 < 2_048.0) {
        assert_eq!(b.ks_size, r.ks_size.map(|_| 0.0), "{what}: sizes are exact");
        close(d.ks_size, r.ks_size, 1e-12, what);
    }
    let dl = b.delay_ms.unwrap_or(0.0);
    close(d.delay_p50_ms, r.delay_p50_ms, dl, &format!("{what}: delay p50"));
    close(d.delay_p99_ms, r.delay_p99_ms, dl, &format!("{what}: delay p99"));
    close(d.delay_max_ms, r.delay_max_ms, 1e-6, &format!("{what}: delay max"));
    close(d.delay_mean_ms, r.delay_mean_ms, 1e-6, &format!("{what}: delay mean"));
}

fn same_run(d: &GameAnalysis, r: &GameAnalysis, jitter_exact: bool) {
    assert_eq!(d.categories.len(), r.categories.len());
    for (a, b) in d.categories.iter().zip(&r.categories) {
        assert_eq!((&a.category, a.stays, a.player_seconds), (&b.category, b.stays, b.player_seconds));
        same_row(&a.up, &b.up, &format!("{} up", a.category));
        same_row(&a.down, &b.down, &format!("{} down", a.category));
        if jitter_exact {
            close(a.up.jitter_ms, b.up.jitter_ms, 1e-9, "jitter");
        }
    }
    same_row(&d.up, &r.up, "all up");
    same_row(&d.down, &r.down, "all down");
    assert_eq!(d.throughput, r.throughput, "throughput per second");
    assert_eq!(d.seconds.len(), r.seconds.len());
    for (a, b) in d.seconds.iter().zip(&r.seconds) {
        assert_eq!((a.t_s, a.sent, a.lost), (b.t_s, b.sent, b.lost), "second {}", a.t_s);
        for k in 0..2 {
            // per-second histograms have 2 digits: a bucket is 1/128 of the value wide
            let tol = |v: Option<f64>| v.map_or(0.0, |v| 0.001 + v.abs() / 128.0);
            close(a.delay_p50_ms[k], b.delay_p50_ms[k], tol(b.delay_p50_ms[k]), "second p50");
            close(a.delay_p99_ms[k], b.delay_p99_ms[k], tol(b.delay_p99_ms[k]), "second p99");
        }
    }
}

#[test]
fn figures_from_merged_summaries_equal_the_raw_records_figures_or_lie_within_their_bounds() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let sc = Scenario::parse(SCENARIO, "digest.toml", Path::new(".")).unwrap();
    let out = std::env::temp_dir().join(format!("horde-digest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let stop = AtomicBool::new(false);
    let opts = RunOptions::in_process(&out, &stop);
    let run = execute(&sc, &opts).unwrap();
    let load = |f: &str| horde_stats::load(&std::fs::read(out.join(f)).unwrap()).unwrap().records;
    let (client, server) = (load("client.hlog"), load("server.hlog"));
    let players = horde_scenario::plan(&sc, sc.players, &stop).unwrap();
    let ctx = Context {
        service: &sc.service,
        traffic: &players.traffic,
        segments: &players.segments,
        duration_s: sc.duration_s,
        epoch_ns: run.summary.client.t0_real_ns,
        cutoff_ns: None,
    };
    let raw = game::analyse(&ctx, &client, &server);
    assert!(raw.up.received > 500 && raw.down.received > 1_000, "a run with traffic both ways: {} / {}", raw.up.received, raw.down.received);
    let cats = sc.service.states.len();

    // one agent: everything
    let one = summarise(&ctx, cats, &all(&client), &all(&server));
    same_run(&digest::analyse(&ctx, &one), &raw, true);

    // two agents: even players on one; odd players and the server side on the other; merged
    // after a trip through the wire format and the controller's checks
    let a = summarise(&ctx, cats, &part(&client, 0), &[]);
    let b = summarise(&ctx, cats, &part(&client, 1), &all(&server));
    let plan = GameDigest::new(cats, ctx.epoch_ns, ctx.duration_s);
    let max_sent = players.planned_apdus().iter().map(|p| p[0] + p[1]).sum::<u64>() * 2;
    let mut merged = GameDigest::accept(&serde_json::to_vec(&a).unwrap(), &plan, max_sent).unwrap();
    merged.merge(&GameDigest::accept(&serde_json::to_vec(&b).unwrap(), &plan, max_sent).unwrap()).unwrap();
    let m = digest::analyse(&ctx, &merged);
    same_run(&m, &raw, false);
    // and the merged summary's jitter is the agents' estimates pooled
    for (x, y) in m.categories.iter().zip(&raw.categories) {
        if let (Some(p), Some(q)) = (x.down.jitter_ms, y.down.jitter_ms) {
            assert!(p >= 0.0 && q >= 0.0);
        }
    }

    // Issue 48: generator verdicts judge the departures, path figures what the network did.
    // This run over loopback: the generator is green and the path changed nothing.
    let gen = horde_scenario::report::departure_verdicts(&raw);
    let path = horde_scenario::report::path_figures(&raw);
    assert!(gen.len() == 2 && gen.iter().all(|v| v.ok && !v.path), "{:?}", gen.iter().map(|v| (&v.label, &v.value, &v.limit)).collect::<Vec<_>>());
    assert!(path.len() == 2 && path.iter().all(|v| v.ok && v.path), "{:?}", path.iter().map(|v| (&v.label, &v.value, &v.limit)).collect::<Vec<_>>());
    // The same run with its players' generator broken: every departure held to the next
    // 100 ms tick (a pacer that wakes ten times a second), its packet delayed by the network
    // exactly as before. The generator's fit turns red; the path's figures stay clean.
    let (late_client, late_server) = late_generator(&client, &server);
    let broken = game::analyse(&ctx, &late_client, &late_server);
    let gen = horde_scenario::report::departure_verdicts(&broken);
    let fit = gen.iter().find(|v| v.label.starts_with("worst departure fit")).expect("a fit verdict");
    assert!(!fit.ok && fit.label.contains(" up, inter-departures"), "{} {} {}", fit.label, fit.value, fit.limit);
    let path = horde_scenario::report::path_figures(&broken);
    assert!(path.iter().all(|v| v.ok), "{:?}", path.iter().map(|v| (&v.label, &v.value, &v.limit)).collect::<Vec<_>>());
    assert_eq!((broken.up.lost, broken.up.delay_mean_ms), (raw.up.lost, raw.up.delay_mean_ms), "the path is the same");
    let _ = std::fs::remove_dir_all(&out);
}

/// The records of a run whose players' sender left each APDU at the next 100 ms tick after it
/// did: the departures (`t_b` of the client's Sent records) and their arrivals at the server
/// (sent time `t_a`, arrival `t_b`) move together, so the path delays each by what it did.
fn late_generator(client: &[Record], server: &[Record]) -> (Vec<Record>, Vec<Record>) {
    const TICK: u64 = 100_000_000;
    let shift = |t: u64| t.div_ceil(TICK) * TICK - t;
    let mut moved = std::collections::HashMap::new();
    let client: Vec<Record> = client
        .iter()
        .map(|r| {
            let mut r = *r;
            if r.kind == RecordKind::Sent {
                let d = shift(r.t_b);
                moved.insert((r.tag >> 8, r.seq), d);
                r.t_b += d;
            }
            r
        })
        .collect();
    let server = server
        .iter()
        .map(|r| {
            let mut r = *r;
            if r.kind == RecordKind::Received {
                let d = moved.get(&(r.tag >> 8, r.seq)).copied().unwrap_or(0);
                r.t_a += d;
                r.t_b += d;
            }
            r
        })
        .collect();
    (client, server)
}

/// Inter-departure times measured within stays are the model's truncated at each departure's
/// room: a faithful generator whose stays are short against its long gaps (WoW traders, CV²
/// 5.3, in 2-s stays) passes the fit to the truncated model and fails the plain one.
#[test]
fn short_stays_are_judged_against_the_model_truncated_at_their_ends() {
    use horde_model::behaviour::Segment;
    use rand::SeedableRng;
    let sc = Scenario::parse(SCENARIO, "digest.toml", Path::new(".")).unwrap();
    let stop = AtomicBool::new(false);
    let planned = horde_scenario::plan(&sc, sc.players, &stop).unwrap();
    let trading = sc.service.states.iter().position(|s| s.name == "trading").unwrap();
    let t = planned.traffic.by_state[trading][0][Direction::Up as usize].clone().expect("traders send up");
    let (mut idt, mut size) = (t.idt.sampler(), t.size.sampler());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(48);
    const EPOCH: u64 = 1_000_000_000;
    let (players, stay_s) = (3_000u32, 2.0);
    let segments: Vec<Vec<Segment>> =
        (0..players).map(|p| vec![Segment { player: p, state: trading as u16, sub: 0, start_s: 0.0, end_s: stay_s, complete: false, hour: 20 }]).collect();
    let mut client = Vec::new();
    for p in 0..players {
        let mut t_ms = idt.sample(&mut rng);
        let mut seq = 0;
        while t_ms < stay_s * 1e3 {
            let t = EPOCH + (t_ms * 1e6) as u64;
            let r = Record {
                flow: p,
                size: size.sample(&mut rng) as u32,
                seq,
                t_a: t,
                t_b: t,
                tag: p << 8 | trading as u32,
                kind: RecordKind::Sent,
                ..Default::default()
            };
            client.push(r);
            seq += 1;
            t_ms += idt.sample(&mut rng);
        }
    }
    let ctx = Context { service: &sc.service, traffic: &planned.traffic, segments: &segments, duration_s: stay_s, epoch_ns: EPOCH, cutoff_ns: None };
    let g = game::analyse(&ctx, &client, &[]);
    let up = &g.categories[trading].up;
    let n = up.departure_iat_samples;
    assert!(n > 2_000, "{n} inter-departure times");
    let limit = horde_scenario::report::ks_limit(n, 0.05);
    let ks = up.ks_departure_iat.unwrap();
    assert!(ks <= limit, "against the truncated model: KS {ks} above {limit} at n = {n}");
    // the plain model, F itself: what short stays never show
    let mut rounded: Vec<f64> = Vec::new();
    let mut last = std::collections::HashMap::new();
    for r in &client {
        if let Some(prev) = last.insert(r.flow, r.t_b) {
            rounded.push(((r.t_b - prev) as f64 / 1e6).round());
        }
    }
    let plain = horde_model::fit::ks_distance(&mut rounded, |x| t.idt.cdf(x.floor() + 0.5));
    assert!(plain > 2.0 * limit, "the plain model: KS {plain}, limit {limit}");
    eprintln!("truncated model: KS {ks:.4}, plain model: KS {plain:.4}, limit {limit:.4} at n = {n}");
}
