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
                RecordKind::Sent => b.sent(r, out),
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
    let b = d.bounds.clone().expect("rows from summaries state their bounds");
    for (got, want, bound, name) in
        [(d.ks_size, r.ks_size, b.ks_size, "KS size"), (d.ks_iat, r.ks_iat, b.ks_iat, "KS IAT"), (d.ks_iat_exact, r.ks_iat_exact, b.ks_iat_exact, "KS IAT µs")]
    {
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
    let _ = std::fs::remove_dir_all(&out);
}
