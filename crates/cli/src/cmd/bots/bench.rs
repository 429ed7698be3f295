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
}

#[derive(Debug, Clone, Serialize)]
struct Benchmark {
    server: String,
    sv_fps: u32,
    duration_s: f64,
    warmup_s: f64,
    p99_bound_ms: f64,
    /// The first step where the response rate per bot fell under 95 % of sv_fps or the p99
    /// response time passed the bound.
    saturation_players: Option<usize>,
    steps: Vec<Step>,
}

pub(super) fn benchmark(args: &Args, out: &std::path::Path, stop: &AtomicBool) -> Outcome {
    benchmark_with(args, out, stop, &mut |addrs: &[std::net::SocketAddr], servers: &[Server], n: usize| run_once(args, addrs, servers, n, stop))
}

/// The benchmark with each step's bots run by `run_step`.
pub(super) fn benchmark_with(args: &Args, out: &std::path::Path, stop: &AtomicBool, run_step: &mut RunStep) -> Outcome {
    let mut steps = Vec::new();
    say!("horde bots: benchmark over {:?} players, {:?} per step ({:?} warm-up excluded)", args.steps, args.duration, args.warmup);
    for &n in &args.steps {
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
        };
        say!(
            "  {n:>4} players on {} server(s): {}/{n} in, responses {:.1}/s per bot, response p50 {:.1} ms p99 {:.1} ms, reply {:.0} B, server CPU {}, bots CPU {:.1} %{}",
            step.servers,
            step.entered,
            per_bot,
            q.p50,
            q.p99,
            step.reply_bytes_mean,
            step.server_cpu_pct.map_or("-".into(), |c| format!("{c:.1} %")),
            step.bots_cpu_pct,
            if saturated { " — saturated" } else { "" }
        );
        steps.push(step);
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
        saturation_players: steps.iter().find(|s| s.saturated).map(|s| s.players),
        steps,
    };
    match b.saturation_players {
        Some(n) => say!("  saturation: at {n} players"),
        None => say!("  saturation: not reached (every step within 95 % of sv_fps and the p99 bound)"),
    }
    let json = serde_json::to_string_pretty(&b).expect("benchmark serialises");
    std::fs::write(out.join("summary.json"), &json).with_context(|| format!("writing {}", out.join("summary.json").display()))?;
    std::fs::write(out.join("index.html"), bench_page(&b)).with_context(|| format!("writing {}", out.join("index.html").display()))?;
    say!("  report: {}", std::path::absolute(out.join("index.html")).unwrap_or(out.join("index.html")).display());
    if let Some(p) = &args.json {
        crate::cmd::write_out(p, &json)?;
    }
    Ok(if stop.load(std::sync::atomic::Ordering::Relaxed) { 130 } else { 0 })
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
            Cell::text(if s.saturated { "yes" } else { "" }),
        ]);
    }
    let mut sections = vec![("Steps".to_string(), t.html())];
    for (title, series, y) in &charts {
        sections.push((title.to_string(), Chart::new(title, "players", y, series).svg()));
    }
    let intro = format!(
        "{}\n{} s per step, first {} s left out; saturation: {} (responses per bot under 95 % of sv_fps, or p99 response time over {} ms)",
        b.server,
        b.duration_s,
        b.warmup_s,
        b.saturation_players.map_or("not reached".to_string(), |n| format!("at {n} players")),
        b.p99_bound_ms
    );
    horde_stats::html::simple_page("Game-server benchmark", &intro, &sections)
}
