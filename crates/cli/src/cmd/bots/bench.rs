//! `horde bots --steps`: the game-server benchmark (one run per player count on fresh servers),
//! its saturation point and its HTML report — the bots of each step on this machine or on
//! agents (`--agents`), the same steps and the same report either way.

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use serde::Serialize;

use super::{run_once, servers_for, Args, Extras, Server};
use crate::Outcome;

/// One step's bots: on the servers (started or given) at these addresses, `n` of them.
pub(super) type RunStep<'a> = dyn FnMut(&[std::net::SocketAddr], &[Server], usize) -> Result<(horde_engine::bots::BotsReport, Extras), crate::Failure> + 'a;

/// One step of the benchmark.
#[derive(Debug, Clone, Serialize)]
struct Step {
    players: usize,
    /// Which run of this player count (0..--repeat).
    repeat: u32,
    servers: usize,
    entered: usize,
    quit_cleanly: usize,
    /// Client packets/s and server packets/s, all bots.
    request_rate: f64,
    response_rate: f64,
    response_rate_per_bot: f64,
    snapshot_rate_per_bot: f64,
    request_bytes_mean: f64,
    reply_bytes_mean: f64,
    response_ms_mean: f64,
    response_ms_p50: f64,
    response_ms_p99: f64,
    server_cpu_pct: Option<f64>,
    server_cpu_max_pct: Option<f64>,
    bots_cpu_pct: f64,
    /// Bots one core of this load generator would hold at this step's cost.
    bots_per_core: f64,
    lost: u64,
    kicked: usize,
    saturated: bool,
    /// The server's frames (one server started here): requests per frame and CPU per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    frames: Option<horde_q3::frames::Frames>,
}

#[derive(Debug, Clone, Serialize)]
struct Benchmark {
    server: String,
    sv_fps: u32,
    duration_s: f64,
    warmup_s: f64,
    p99_bound_ms: f64,
    /// `--server-cpu`: each started server's share of one core.
    server_cpu_cap: Option<f64>,
    /// Runs of each player count (`--repeat`).
    repeats: u32,
    /// The first player count where the response rate per bot fell under 95 % of sv_fps or the
    /// p99 response time passed the bound, in most of its runs.
    saturation_players: Option<usize>,
    /// The saturation point of each series of steps (repeat k: the first saturated count of
    /// run k of every step), lowest and highest: the knee as an interval over the repeats.
    saturation_interval: Option<[usize; 2]>,
    /// Series of steps that saturated at all, of `repeats`.
    saturated_series: u32,
    /// Each player count over its runs: the mean and its 95 % interval (Student's t over the
    /// runs; none with one run).
    by_players: Vec<PlayersRow>,
    steps: Vec<Step>,
}

/// A figure over a step's runs: the mean and its 95 % interval (Student's t over the runs; every
/// figure here is a rate, a time or a share, none below 0, so the interval starts at 0 at
/// least: two runs far apart give a wide interval, never a negative CPU share).
#[derive(Debug, Clone, Copy, Serialize)]
struct Interval {
    mean: f64,
    lo: Option<f64>,
    hi: Option<f64>,
}

/// Student's t 97.5 % quantiles for 1..=19 degrees of freedom (two-sided 95 %; any statistics
/// table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
const T975: [f64; 19] = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093];

impl Interval {
    fn of(xs: &[f64]) -> Interval {
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n.max(1) as f64;
        if n < 2 {
            return Interval { mean, lo: None, hi: None };
        }
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let half = T975[(n - 2).min(T975.len() - 1)] * sd / (n as f64).sqrt();
        Interval { mean, lo: Some((mean - half).max(0.0)), hi: Some(mean + half) }
    }

    fn text(&self, digits: usize) -> String {
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) => format!("{:.digits$} [{lo:.digits$}, {hi:.digits$}]", self.mean),
            _ => format!("{:.digits$}", self.mean),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct PlayersRow {
    players: usize,
    runs: usize,
    response_rate_per_bot: Interval,
    response_ms_p50: Interval,
    response_ms_p99: Interval,
    server_cpu_pct: Option<Interval>,
    saturated_runs: usize,
}

fn by_players(steps: &[Step]) -> Vec<PlayersRow> {
    let mut counts: Vec<usize> = steps.iter().map(|s| s.players).collect();
    counts.dedup();
    counts
        .into_iter()
        .map(|n| {
            let runs: Vec<&Step> = steps.iter().filter(|s| s.players == n).collect();
            let of = |f: &dyn Fn(&Step) -> f64| Interval::of(&runs.iter().map(|s| f(s)).collect::<Vec<_>>());
            let cpu: Option<Vec<f64>> = runs.iter().map(|s| s.server_cpu_pct).collect();
            PlayersRow {
                players: n,
                runs: runs.len(),
                response_rate_per_bot: of(&|s| s.response_rate_per_bot),
                response_ms_p50: of(&|s| s.response_ms_p50),
                response_ms_p99: of(&|s| s.response_ms_p99),
                server_cpu_pct: cpu.map(|c| Interval::of(&c)),
                saturated_runs: runs.iter().filter(|s| s.saturated).count(),
            }
        })
        .collect()
}

/// The knee of each series of steps (run k of every count), and the first count saturated in
/// most of its runs.
fn saturation(steps: &[Step], repeats: u32) -> (Option<usize>, Option<[usize; 2]>, u32) {
    let knees: Vec<usize> = (0..repeats).filter_map(|k| steps.iter().find(|s| s.repeat == k && s.saturated).map(|s| s.players)).collect();
    let interval = knees.iter().min().zip(knees.iter().max()).map(|(a, b)| [*a, *b]);
    let most = by_players(steps).into_iter().find(|r| 2 * r.saturated_runs > r.runs).map(|r| r.players);
    (most, interval, knees.len() as u32)
}

pub(super) fn benchmark(args: &Args, out: &std::path::Path, stop: &AtomicBool) -> Outcome {
    benchmark_with(args, out, stop, &mut |addrs: &[std::net::SocketAddr], servers: &[Server], n: usize| run_once(args, addrs, servers, n, stop))
}

/// The benchmark with each step's bots run by `run_step`.
pub(super) fn benchmark_with(args: &Args, out: &std::path::Path, stop: &AtomicBool, run_step: &mut RunStep) -> Outcome {
    let mut steps = Vec::new();
    say!("horde bots: benchmark over {:?} players, {:?} per step ({:?} warm-up excluded)", args.steps, args.duration, args.warmup);
    if args.repeat > 1 {
        say!("  each step {} times, on fresh servers: figures with 95 % intervals over the runs", args.repeat);
    }
    if let Some(f) = args.server_cpu {
        say!("  each server held to {f} of a core (the kernel's CPU controller)");
    }
    let runs = args.steps.iter().flat_map(|&n| (0..args.repeat).map(move |k| (n, k)));
    for (n, repeat) in runs {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let (servers, addrs) = servers_for(args, out, n)?;
        let (r, x) = run_step(&addrs, &servers, n)?;
        drop(servers);
        let q = &r.response_ms;
        let lost: u64 = r.bots.iter().map(|b| b.dropped).sum();
        let per_bot = r.response_rate / n as f64;
        let saturated = per_bot < 0.95 * args.sv_fps as f64 || q.p99 > args.p99_bound.as_secs_f64() * 1e3 || r.entered < n;
        let step = Step {
            players: n,
            repeat,
            servers: addrs.len(),
            entered: r.entered,
            quit_cleanly: r.quit_cleanly,
            request_rate: r.request_rate,
            response_rate: r.response_rate,
            response_rate_per_bot: per_bot,
            snapshot_rate_per_bot: r.snapshot_rate_per_bot,
            request_bytes_mean: r.request_bytes_mean,
            reply_bytes_mean: r.response_bytes_mean,
            response_ms_mean: q.mean,
            response_ms_p50: q.p50,
            response_ms_p99: q.p99,
            server_cpu_pct: x.server_cpu_pct,
            server_cpu_max_pct: x.server_cpu_max_pct,
            bots_cpu_pct: x.bots_cpu_pct,
            bots_per_core: if x.bots_cpu_pct > 0.0 { n as f64 * 100.0 / x.bots_cpu_pct } else { 0.0 },
            lost,
            kicked: r.bots.iter().filter(|b| b.end.starts_with("kicked")).count(),
            saturated,
            frames: x.frames.clone(),
        };
        say!(
            "  {n:>4} players{} on {} server(s): {}/{n} in, responses {:.1}/s per bot, response p50 {:.1} ms p99 {:.1} ms, reply {:.0} B, server CPU {}{}, bots CPU {:.1} %{}",
            if args.repeat > 1 { format!(" (run {}/{})", repeat + 1, args.repeat) } else { String::new() },
            step.servers,
            step.entered,
            per_bot,
            q.p50,
            q.p99,
            step.reply_bytes_mean,
            step.server_cpu_pct.map_or("-".into(), |c| format!("{c:.1} %")),
            step.frames.as_ref().map_or(String::new(), |f| format!(
                " (frames every {:.1} ms, {:.1} requests each, {:.0} µs per request)",
                f.interval_ms.mean, f.requests.mean, f.per_request_us.mean
            )),
            step.bots_cpu_pct,
            if saturated { " — saturated" } else { "" }
        );
        steps.push(step);
    }
    let (saturation_players, saturation_interval, saturated_series) = saturation(&steps, args.repeat);
    let by_players = by_players(&steps);
    if args.repeat > 1 {
        for r in &by_players {
            say!(
                "  {:>4} players over {} runs: responses/s per bot {}, response p50 {} ms, p99 {} ms, server CPU {} %, saturated in {}",
                r.players,
                r.runs,
                r.response_rate_per_bot.text(2),
                r.response_ms_p50.text(1),
                r.response_ms_p99.text(1),
                r.server_cpu_pct.map_or("-".into(), |c| c.text(1)),
                r.saturated_runs
            );
        }
    }
    let b = Benchmark {
        server: if args.start_server {
            format!("openarena-server (started by horde, map {}, sv_fps {})", args.map, args.sv_fps)
        } else {
            args.server.clone().unwrap_or_default()
        },
        sv_fps: args.sv_fps,
        duration_s: args.duration.as_secs_f64(),
        warmup_s: args.warmup.as_secs_f64(),
        p99_bound_ms: args.p99_bound.as_secs_f64() * 1e3,
        server_cpu_cap: args.server_cpu,
        repeats: args.repeat,
        saturation_players,
        saturation_interval,
        saturated_series,
        by_players,
        steps,
    };
    say!("  saturation: {}", saturation_text(&b));
    let json = serde_json::to_string_pretty(&b).expect("benchmark serialises");
    std::fs::write(out.join("summary.json"), &json).with_context(|| format!("writing {}", out.join("summary.json").display()))?;
    std::fs::write(out.join("index.html"), bench_page(&b)).with_context(|| format!("writing {}", out.join("index.html").display()))?;
    say!("  report: {}", std::path::absolute(out.join("index.html")).unwrap_or(out.join("index.html")).display());
    if let Some(p) = &args.json {
        crate::cmd::write_out(p, &json)?;
    }
    Ok(if stop.load(std::sync::atomic::Ordering::Relaxed) { 130 } else { 0 })
}

fn saturation_text(b: &Benchmark) -> String {
    let first = b.saturation_players.map_or("not reached in most runs".to_string(), |n| format!("at {n} players"));
    match (b.repeats, b.saturation_interval) {
        (1, _) if b.saturation_players.is_none() => "not reached (every step within 95 % of sv_fps and the p99 bound)".into(),
        (1, _) => first,
        (k, Some([lo, hi])) => format!("{first}; over {k} series of steps the knee lies at {lo}–{hi} players ({} of {k} series saturated)", b.saturated_series),
        (k, None) => format!("not reached in any of {k} series of steps"),
    }
}

fn bench_page(b: &Benchmark) -> String {
    use horde_stats::charts::{Chart, Series};
    use horde_stats::table::{Cell, Column, Table};
    let pts = |f: &dyn Fn(&Step) -> Option<f64>| -> Vec<(f64, f64)> { b.steps.iter().filter_map(|s| Some((s.players as f64, f(s)?))).collect() };
    let charts: Vec<(&str, Vec<Series>, &str)> = vec![
        (
            "Server response rate per player",
            vec![("responses/s per bot".into(), pts(&|s| Some(s.response_rate_per_bot))), ("sv_fps".into(), pts(&|_| Some(b.sv_fps as f64)))],
            "packets/s",
        ),
        (
            "Response time",
            vec![
                ("mean".into(), pts(&|s| Some(s.response_ms_mean))),
                ("p50".into(), pts(&|s| Some(s.response_ms_p50))),
                ("p99".into(), pts(&|s| Some(s.response_ms_p99))),
            ],
            "ms",
        ),
        (
            "Request and reply sizes",
            vec![("request (client)".into(), pts(&|s| Some(s.request_bytes_mean))), ("reply (server)".into(), pts(&|s| Some(s.reply_bytes_mean)))],
            "bytes (mean)",
        ),
        (
            "CPU",
            vec![
                ("servers (sum)".into(), pts(&|s| s.server_cpu_pct)),
                ("busiest server".into(), pts(&|s| s.server_cpu_max_pct)),
                ("bots (load generator)".into(), pts(&|s| Some(s.bots_cpu_pct))),
            ],
            "% of one core",
        ),
    ];
    let mut t = Table::new(vec![
        Column::new("players", "players"),
        Column::new("servers", "servers"),
        Column::new("in", "in game"),
        Column::new("req", "requests/s"),
        Column::new("resp", "responses/s"),
        Column::new("per", "responses/s per bot"),
        Column::new("p50", "response p50 ms"),
        Column::new("p99", "response p99 ms"),
        Column::new("reply", "reply B"),
        Column::new("scpu", "server CPU %"),
        Column::new("bcpu", "bots CPU %"),
        Column::new("fint", "server frame interval ms (mean/max)"),
        Column::new("rpf", "requests per frame (mean/max)"),
        Column::new("pr", "µs per request (min/mean/max)"),
        Column::new("sat", "saturated"),
    ]);
    for s in &b.steps {
        t.push(vec![
            Cell::Int(s.players as u64),
            Cell::Int(s.servers as u64),
            Cell::Int(s.entered as u64),
            Cell::Num(s.request_rate, 1),
            Cell::Num(s.response_rate, 1),
            Cell::Num(s.response_rate_per_bot, 2),
            Cell::Num(s.response_ms_p50, 1),
            Cell::Num(s.response_ms_p99, 1),
            Cell::Num(s.reply_bytes_mean, 0),
            Cell::opt(s.server_cpu_pct, 1),
            Cell::Num(s.bots_cpu_pct, 1),
            Cell::text(s.frames.as_ref().map_or("-".into(), |f| format!("{:.1}/{:.1}", f.interval_ms.mean, f.interval_ms.max))),
            Cell::text(s.frames.as_ref().map_or("-".into(), |f| format!("{:.1}/{:.0}", f.requests.mean, f.requests.max))),
            Cell::text(s.frames.as_ref().map_or("-".into(), |f| {
                let p = f.per_request_us;
                format!("{:.0}/{:.0}/{:.0}", p.min, p.mean, p.max)
            })),
            Cell::text(if s.saturated { "yes" } else { "" }),
        ]);
    }
    let mut sections = Vec::new();
    if b.repeats > 1 {
        let mut r = Table::new(vec![
            Column::new("players", "players"),
            Column::new("runs", "runs"),
            Column::new("per", "responses/s per bot, mean [95 %]"),
            Column::new("p50", "response p50 ms [95 %]"),
            Column::new("p99", "response p99 ms [95 %]"),
            Column::new("scpu", "server CPU % [95 %]"),
            Column::new("sat", "saturated runs"),
        ]);
        for row in &b.by_players {
            r.push(vec![
                Cell::Int(row.players as u64),
                Cell::Int(row.runs as u64),
                Cell::text(row.response_rate_per_bot.text(2)),
                Cell::text(row.response_ms_p50.text(1)),
                Cell::text(row.response_ms_p99.text(1)),
                Cell::text(row.server_cpu_pct.map_or("-".into(), |c| c.text(1))),
                Cell::Int(row.saturated_runs as u64),
            ]);
        }
        sections.push(("Each player count over its runs".to_string(), r.html()));
    }
    sections.push(("Steps".to_string(), t.html()));
    for (title, series, y) in &charts {
        sections.push((title.to_string(), Chart::new(title, "players", y, series).svg()));
    }
    let intro = format!(
        "{}{}\n{} s per step, first {} s left out; saturation: {} (responses per bot under 95 % of sv_fps, or p99 response time over {} ms)",
        b.server,
        b.server_cpu_cap.map_or(String::new(), |f| format!(", held to {f} of a core")),
        b.duration_s,
        b.warmup_s,
        saturation_text(b),
        b.p99_bound_ms
    );
    horde_stats::html::simple_page("Game-server benchmark", &intro, &sections)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(players: usize, repeat: u32, per_bot: f64, saturated: bool) -> Step {
        Step {
            players,
            repeat,
            servers: 1,
            entered: players,
            quit_cleanly: players,
            request_rate: 0.0,
            response_rate: per_bot * players as f64,
            response_rate_per_bot: per_bot,
            snapshot_rate_per_bot: per_bot,
            request_bytes_mean: 0.0,
            reply_bytes_mean: 0.0,
            response_ms_mean: 10.0,
            response_ms_p50: 10.0,
            response_ms_p99: 20.0,
            server_cpu_pct: Some(40.0),
            server_cpu_max_pct: Some(40.0),
            bots_cpu_pct: 10.0,
            bots_per_core: 0.0,
            lost: 0,
            kicked: 0,
            saturated,
            frames: None,
        }
    }

    #[test]
    fn an_interval_is_students_t_over_the_runs() {
        let i = Interval::of(&[19.0, 20.0, 21.0]);
        // sd 1, n 3: t(2) = 4.303, half width 4.303 / √3
        assert!((i.mean - 20.0).abs() < 1e-12 && (i.hi.unwrap() - 20.0 - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(Interval::of(&[5.0]).lo, None, "one run: no interval");
        let wide = Interval::of(&[6.7, 3.3]);
        assert_eq!(wide.lo, Some(0.0), "no negative share: {wide:?}");
        assert!(wide.hi.unwrap() > 26.0, "{wide:?}");
    }

    #[test]
    fn the_knee_is_an_interval_over_the_series_of_steps() {
        // three series: saturate at 32, at 16, and not at all
        let steps = vec![
            step(16, 0, 20.0, false),
            step(16, 1, 18.0, true),
            step(16, 2, 20.0, false),
            step(32, 0, 17.0, true),
            step(32, 1, 16.0, true),
            step(32, 2, 19.5, false),
        ];
        let (most, interval, series) = saturation(&steps, 3);
        assert_eq!((most, interval, series), (Some(32), Some([16, 32]), 2));
        let rows = by_players(&steps);
        assert_eq!((rows[0].players, rows[0].runs, rows[0].saturated_runs), (16, 3, 1));
    }
}
