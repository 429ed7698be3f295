//! Players who come and go: the diurnal session model of `wow-sessions`, its derivation from the
//! published WoW model, its expectation, and `extends`.
//!
//! Bounds: hourly login and logout counts of 10,000 slots over a day are tested against the
//! model's own expectation with Pearson's χ² at α = 0.001 (what `horde behave` reports); the test
//! that a different login profile is caught uses the same statistic. Session lengths that began
//! and ended within a 20-day run are compared with the Weibull by KS ≤ 0.02 (≥ 30,000 sessions:
//! sampling noise alone stays under 0.012 at α = 0.001; the run's end cuts < 1 % of sessions).

use horde_model::behaviour::{self, Params};
use horde_model::fit::ks_distance;
use horde_model::service::{Service, Session};
use horde_model::sessions::{self, Hourly};

fn sessions_svc() -> Service {
    Service::builtin("wow-sessions").unwrap()
}

fn hourly(svc: &Service, p: &Params) -> Hourly {
    let mut h = Hourly::new(p.duration_s);
    for player in 0..p.players {
        h.add(&behaviour::sessions(svc, p, player, 0.0));
    }
    h
}

/// The login weights are the session counts behind the published first-category percentages:
/// every percentage of `wow`'s `first_by_hour` is `count_in_category / weight` to its four
/// decimals, with whole counts.
#[test]
fn logins_by_hour_are_the_session_counts_behind_the_published_percentages() {
    let wow: toml::Table = Service::builtin("wow").unwrap().text.parse().unwrap();
    let first = wow["first_by_hour"].as_table().unwrap();
    let own: toml::Table = Service::builtin("wow-sessions").unwrap().text.parse().unwrap();
    let weights = own["session"]["logins_by_hour"].as_array().unwrap();
    assert_eq!(weights.len(), 24);
    let mut total = 0.0;
    for (h, w) in weights.iter().enumerate() {
        let n = w.as_float().or_else(|| w.as_integer().map(|i| i as f64)).unwrap();
        total += n;
        let row = first[&h.to_string()].as_array().unwrap();
        let mut sum = 0.0;
        for pct in row {
            let pct = pct.as_float().unwrap();
            let count = (pct * n / 100.0).round();
            let again = count / n * 100.0;
            assert!((again - pct).abs() < 6e-5, "hour {h}: {pct} % is not a whole number of {n} sessions");
            sum += count;
        }
        assert_eq!(sum, n, "hour {h}: the category counts add up to the hour's sessions");
        // And no smaller number of sessions reproduces the row.
        let smaller = (1..n as u32)
            .find(|m| row.iter().all(|p| ((p.as_float().unwrap() * *m as f64 / 100.0).round() / *m as f64 * 100.0 - p.as_float().unwrap()).abs() < 6e-5));
        assert_eq!(smaller, None, "hour {h}: {n} is the smallest count");
    }
    assert_eq!(total, 5608.0);
}

#[test]
fn a_days_logins_and_logouts_follow_the_models_expectation() {
    let svc = sessions_svc();
    for (seed, start) in [(1, 0.0), (5, 17.5)] {
        let p = Params { players: 10_000, duration_s: 86_400.0, seed, start_hour: start };
        let obs = hourly(&svc, &p);
        let sum = sessions::Summary::new(&svc, &p, obs);
        let (li, lo) = (sum.logins_test.unwrap(), sum.logouts_test.unwrap());
        assert_eq!(li.bins, 24);
        assert!(li.fits, "logins: chi-square {:.1}, p {:.4}", li.statistic, li.p_value);
        assert!(lo.fits, "logouts: chi-square {:.1}, p {:.4}", lo.statistic, lo.p_value);
        let e = sum.expected.unwrap();
        // The population online: each hour's count within 5 binomial standard deviations.
        for (i, (o, x)) in sum.observed.online.iter().zip(&e.online).enumerate() {
            let sd = (x * (1.0 - x / 10_000.0)).sqrt();
            assert!((o - x).abs() < 5.0 * sd.max(1.0), "seed {seed}, hour {i}: {o} online, model {x:.1}");
        }
        // The published profile shows: evening logins are many times early-morning ones.
        let day = |i: usize| ((start + i as f64) % 24.0).floor() as usize;
        let at = |d: usize| (0..24).find(|i| day(*i) == d).unwrap();
        assert!(sum.observed.logins[at(18)] > 5.0 * sum.observed.logins[at(5)].max(1.0));
    }
}

/// The verdict can fail: the same slots with logins spread evenly over the day are far from
/// wow-sessions' expectation.
#[test]
fn a_flat_login_profile_is_told_apart_from_the_published_one() {
    let svc = sessions_svc();
    let flat_text = svc.text.replace(
        "[174, 106, 71, 40, 18, 12, 16, 44, 89, 135, 218, 285, 343, 359, 327, 315, 363, 402, 566, 498, 383, 306, 271, 267]",
        "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]",
    );
    assert_ne!(flat_text, svc.text, "the weights are in the merged text");
    let flat = Service::parse(&flat_text, "flat").unwrap();
    let p = Params { players: 10_000, duration_s: 86_400.0, seed: 1, start_hour: 0.0 };
    let sum = sessions::Summary::new(&svc, &p, hourly(&flat, &p));
    let li = sum.logins_test.unwrap();
    assert!(!li.fits && li.p_value < 1e-9, "chi-square {:.1}, p {}", li.statistic, li.p_value);
}

#[test]
fn session_lengths_follow_the_weibull() {
    let svc = sessions_svc();
    let Session::Diurnal { length, .. } = &svc.session else { panic!("wow-sessions is diurnal") };
    assert!((length.mean_estimate().unwrap() - 7560.0).abs() < 1.0, "mean 2.1 h");
    let p = Params { players: 2000, duration_s: 20.0 * 86_400.0, seed: 3, start_hour: 0.0 };
    let mut lens = Vec::new();
    for player in 0..p.players {
        lens.extend(behaviour::sessions(&svc, &p, player, 0.0).iter().filter(|s| s.login && s.logout).map(|s| s.end_s - s.start_s));
    }
    assert!(lens.len() > 30_000, "{} sessions", lens.len());
    let d = ks_distance(&mut lens, |x| length.cdf(x));
    assert!(d < 0.02, "KS {d:.4} over {} sessions", lens.len());
}

/// A player's stays lie inside its sessions, and the sessions are the same draws every time.
#[test]
fn stays_fall_inside_sessions_and_are_reproducible() {
    let svc = sessions_svc();
    let p = Params { players: 50, duration_s: 4.0 * 3600.0, seed: 9, start_hour: 19.0 };
    let mut online_at_start = 0;
    for player in 0..p.players {
        let spans = behaviour::sessions(&svc, &p, player, 0.0);
        assert_eq!(spans, behaviour::sessions(&svc, &p, player, 0.0));
        online_at_start += spans.iter().filter(|s| s.start_s == 0.0 && !s.login).count();
        for seg in behaviour::player(&svc, &p, player) {
            assert!(
                spans.iter().any(|s| seg.start_s >= s.start_s && seg.end_s <= s.end_s + 1e-9),
                "player {player}: stay {:.1}..{:.1} outside every session {spans:?}",
                seg.start_s,
                seg.end_s
            );
        }
        for w in spans.windows(2) {
            assert!(w[0].end_s <= w[1].start_s, "sessions overlap: {spans:?}");
        }
    }
    // At 19:00 the warm-up leaves about 12 % online: some, not all.
    assert!((1..25).contains(&online_at_start), "{online_at_start} of 50 online at the start");
}

#[test]
fn extends_replaces_whole_tables_and_refuses_what_it_cannot_use() {
    let mine = Service::parse("extends = \"wow\"\nname = \"my-wow\"\n[variables]\nN = 500\n", "my.toml").unwrap();
    let wow = Service::builtin("wow").unwrap();
    assert_eq!(mine.name, "my-wow");
    assert_eq!(mine.states, wow.states);
    assert_eq!(mine.first, wow.first);
    assert_eq!(mine.variables.get("N"), Some(&500.0));
    // The kept text is whole: it parses again without the built-in.
    assert!(!mine.text.contains("extends"));
    assert_eq!(Service::parse(&mine.text, "again").unwrap().states, wow.states);
    // A chain through a built-in that extends another.
    let deeper = Service::parse("extends = \"wow-sessions\"\nname = \"x\"\n", "x.toml").unwrap();
    assert!(matches!(deeper.session, Session::Diurnal { .. }));
    for (text, field, says) in [
        ("extends = \"nope\"\n", "extends", "no built-in service `nope`"),
        ("extends = 3\n", "extends", "name of a built-in"),
        ("extends = \"wow\"\n[session]\nmodel = \"diurnal\"\n", "session.length", "needs `length`"),
        ("extends = \"wow\"\n[session]\nmodel = \"diurnal\"\nlength = \"weibull(3780, 0.5)\"\n", "session.logins_per_day", "needs `logins_per_day`"),
        ("extends = \"wow\"\n[session]\nmodel = \"diurnal\"\nlength = \"weibull(3780, 0.5)\"\nlogins_per_day = -1\n", "session.logins_per_day", "above 0"),
        ("extends = \"wow\"\n[session]\nmodel = \"diurnal\"\nlength = \"weibull(3780, 0.5)\"\nlogins_per_day = 1\nlogins_by_hour = [1, 2]\n", "session.logins_by_hour", "24 weights"),
        ("extends = \"wow\"\n[session]\nmodel = \"diurnal\"\nlength = \"weibull(3780, 0.5)\"\nlogins_per_day = 1\nlogins_by_hour = [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]\n", "session.logins_by_hour", "sum above 0"),
        ("extends = \"wow\"\n[session]\nmodel = \"sometimes\"\n", "session.model", "fixed, arrivals or diurnal"),
    ] {
        let e = Service::parse(text, "bad.toml").unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
        assert!(e.msg.contains(says), "{text}: {}", e.msg);
    }
}

/// A slot whose hour never advances and whose hour has no logins never logs in (and the draw
/// ends instead of walking forever).
#[test]
fn an_hour_without_logins_and_a_fixed_clock_give_no_sessions() {
    let mut w = vec!["0"; 24];
    w[12] = "1";
    let text = format!(
        "extends = \"wow\"\nname = \"noon\"\nhour_advances = false\n[session]\nmodel = \"diurnal\"\nlength = \"exponential(600)\"\nlogins_per_day = 24\nlogins_by_hour = [{}]\n",
        w.join(", ")
    );
    let svc = Service::parse(&text, "noon.toml").unwrap();
    let night = Params { players: 20, duration_s: 3600.0, seed: 1, start_hour: 3.0 };
    assert!((0..20).all(|p| behaviour::sessions(&svc, &night, p, 0.0).is_empty()));
    let noon = Params { start_hour: 12.0, ..night };
    assert!((0..20).any(|p| !behaviour::sessions(&svc, &noon, p, 0.0).is_empty()));
}
