//! The controller's side of `--collect summaries` at scale, on synthetic summaries
//! (bench/distributed-merge.sh):
//!
//!   merge_summaries gen DIR --agents 100 --players 1000000 --seconds 300 --categories 6
//!   merge_summaries merge DIR
//!
//! `gen` writes one summary per agent (JSON, as agents send them), each filled with as many
//! APDUs as its share of the players sends in the run at WoW's mean rate (≈ 3.6 APDUs per player
//! and second both ways), their sizes, delays and inter-arrival times drawn from wide
//! distributions so every summary has as many buckets as a real one. `merge` is what the
//! controller does with them: read, check against its plan, add up, and compute the report's
//! percentiles and CDFs; it prints its time, and its peak memory is measured around it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use horde_model::service::Direction;
use horde_stats::digest::{Builder, GameDigest};
use horde_wire::{Record, RecordKind};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal};

const EPOCH: u64 = 1_800_000_000_000_000_000;

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn gen(dir: &Path, args: &[String]) {
    let agents = arg(args, "--agents", 100);
    let players = arg(args, "--players", 1_000_000);
    let seconds = arg(args, "--seconds", 300);
    let cats = arg(args, "--categories", 6) as usize;
    // per agent, a sample of APDUs with the run's full spread; counts scaled to the whole share
    let samples = arg(args, "--samples", 400_000);
    std::fs::create_dir_all(dir).unwrap();
    let apdus_per_agent = players / agents * seconds * 36 / 10;
    let size: LogNormal<f64> = LogNormal::new(4.5, 1.0).unwrap();
    let delay: LogNormal<f64> = LogNormal::new(10.0, 1.2).unwrap(); // µs: median ~22 ms, a long tail
    let iat: LogNormal<f64> = LogNormal::new(11.5, 1.5).unwrap(); // µs: median ~100 ms
    let mut total = 0u64;
    for a in 0..agents {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(a);
        let mut b = Builder::new(cats, EPOCH, seconds as f64);
        let player0 = (a * (players / agents)) as u32;
        for k in 0..samples {
            let p = player0 + (k % 5_000) as u32;
            let c = rng.random_range(0..cats as u32);
            let dir = if rng.random_bool(0.3) { Direction::Up } else { Direction::Down };
            let t_a = EPOCH + rng.random_range(0..seconds * 1_000_000_000);
            let d = (delay.sample(&mut rng) * 1e3) as u64;
            let r = Record {
                flow: p,
                size: size.sample(&mut rng).min(65_000.0) as u32 + 1,
                seq: k / 5_000,
                t_a,
                t_b: t_a + d,
                tag: p << 8 | c,
                tos: 0,
                ttl: 0,
                kind: RecordKind::Sent,
                flags: 0,
            };
            b.sent(&Record { t_b: t_a, ..r }, dir, None);
            // an inter-arrival time from the previous arrival of this player and stay
            let gap = (iat.sample(&mut rng) * 1e3) as u64;
            b.received(&Record { kind: RecordKind::Received, t_a: t_a.saturating_sub(gap), t_b: t_a + d - gap.min(d), ..r }, dir, Some(0));
            b.received(&Record { kind: RecordKind::Received, ..r }, dir, Some(0));
        }
        let mut d = b.finish();
        // scale the counts to the agent's whole share (the histograms keep their buckets)
        let scale = apdus_per_agent as f64 / samples.max(1) as f64;
        for c in d.categories.iter_mut().flat_map(|c| c.iter_mut()) {
            c.sent = (c.sent as f64 * scale).round() as u64;
        }
        total += d.categories.iter().flat_map(|c| c.iter()).map(|c| c.sent).sum::<u64>();
        let bytes = serde_json::to_vec(&d).unwrap();
        std::fs::write(dir.join(format!("agent-{a:04}.json")), &bytes).unwrap();
        if a == 0 {
            println!("one agent's summary: {:.1} MB of JSON", bytes.len() as f64 / 1e6);
        }
    }
    std::fs::write(dir.join("plan.json"), serde_json::to_vec(&(cats, seconds, total)).unwrap()).unwrap();
    println!("{agents} summaries of {players} players × {seconds} s ({total} APDUs) in {}", dir.display());
}

fn merge(dir: &Path) {
    let t = Instant::now();
    let (cats, seconds, total): (usize, u64, u64) = serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    let plan = GameDigest::new(cats, EPOCH, seconds as f64);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("agent-")).collect();
    files.sort();
    let mut merged = plan.clone();
    let mut bytes_in = 0usize;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        bytes_in += bytes.len();
        let d = GameDigest::accept(&bytes, &plan, total).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        merged.merge(&d).unwrap();
    }
    let t_merge = t.elapsed();
    // the report's distribution figures from the merged histograms
    let mut lines = Vec::new();
    for (k, c) in merged.categories.iter().enumerate() {
        for (d, name) in [(&c[0], "up"), (&c[1], "down")] {
            let p = |q: f64| d.delay.quantile(q).unwrap_or(0) as f64 / 1e6;
            let _ = (d.size.cdf_points(1.0, 200), d.iat_us.cdf_points(1e-3, 200));
            lines.push(format!("category {k} {name}: {} sent, delay p50 {:.2} ms p99 {:.2} ms", d.sent, p(0.5), p(0.99)));
        }
    }
    let per_second: u64 = merged.seconds.iter().map(|s| s.delay[0].quantile(0.99).unwrap_or(0) as u64 + s.delay[1].quantile(0.5).unwrap_or(0) as u64).sum();
    println!("{}", lines.join("\n"));
    println!(
        "merged {} summaries ({:.1} MB) in {:.2} s, report figures in {:.2} s more ({} seconds, checksum {per_second})",
        files.len(),
        bytes_in as f64 / 1e6,
        t_merge.as_secs_f64(),
        (t.elapsed() - t_merge).as_secs_f64(),
        merged.seconds.len()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("gen"), Some(d)) => gen(Path::new(d), &args),
        (Some("merge"), Some(d)) => merge(Path::new(d)),
        _ => {
            eprintln!("usage: merge_summaries gen DIR [--agents N --players N --seconds N --categories N --samples N] | merge DIR");
            std::process::exit(2);
        }
    }
}
