use std::path::PathBuf;

use anyhow::Context;
use horde_stats::{analyse, export, load, LoadedLog, Options};

use crate::{bad_input, Outcome};

/// Decodes sender and/or receiver logs: per flow and in total, packets, rates, one-way delay
/// (or RTT) percentiles, RFC 3550 jitter, loss and loss bursts, duplicates, reordering and send
/// lateness. Given both logs of a run, matches them by flow and sequence number.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Log files written by `horde send --log` and `horde recv --log`
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// Also compute a time series in windows of this length, e.g. 100ms or 1s
    #[arg(short = 'w', long, value_name = "DURATION")]
    pub window: Option<String>,
    /// Write the full analysis as JSON to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write per-flow and total rows as CSV to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the time series as CSV to FILE (needs --window)
    #[arg(long, value_name = "FILE")]
    pub windows_csv: Option<PathBuf>,
    /// Flows shown in the table, 0 for all (all are always in JSON/CSV)
    #[arg(long, default_value_t = 20)]
    pub max_flows: usize,
    /// The flow file the logs came from: its flows' names are shown beside their ids
    #[arg(short = 'F', long, value_name = "FILE")]
    pub flows: Option<PathBuf>,
    /// With --flows: the first flow id the sender used (its --id-base)
    #[arg(long, default_value_t = 0, requires = "flows")]
    pub id_base: u32,
    /// Order of the flows in the table: id, loss (worst first), delay (highest p99 first) or
    /// packets (most first); with many flows, `loss` or `delay` shows the interesting ones
    #[arg(long, value_enum, default_value_t = Sort::Id)]
    pub sort: Sort,
    /// Do not print the table
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sort {
    Id,
    Loss,
    Delay,
    Packets,
}

/// The largest log `decode` reads: 4 GiB is 100 M records, ~5 GB of memory once decoded.
const MAX_LOG: u64 = 4 << 30;

pub fn load_logs(paths: &[PathBuf]) -> Result<Vec<LoadedLog>, crate::Failure> {
    let mut logs = Vec::new();
    for p in paths {
        let bytes = horde_model::files::read_bytes(p, MAX_LOG, "logs").context("reading a log").map_err(bad_input)?;
        let l = load(&bytes)
            .map_err(|e| bad_input(anyhow::anyhow!("{}: not a Horde log ({e}); logs come from `horde send --log` or `horde recv --log`", p.display())))?;
        if l.trailing_bytes > 0 {
            say!("horde decode: note: {} ends with a partial record ({} bytes), ignored", p.display(), l.trailing_bytes);
        }
        logs.push(l);
    }
    Ok(logs)
}

pub fn run(args: Args) -> Outcome {
    let window_ns = args.window.as_deref().map(horde_model::units::parse_duration_ns).transpose().map_err(|m| bad_input(anyhow::anyhow!("--window: {m}")))?;
    if window_ns == Some(0) {
        return Err(bad_input(anyhow::anyhow!("--window must be longer than 0")));
    }
    if args.windows_csv.is_some() && window_ns.is_none() {
        return Err(bad_input(anyhow::anyhow!("--windows-csv needs --window, e.g. --window 100ms")));
    }
    let machine = crate::output::one_stdout(&[("--json", &args.json), ("--csv", &args.csv), ("--windows-csv", &args.windows_csv)])?;
    let logs = load_logs(&args.logs)?;
    let mut a = analyse(&logs, Options { window_ns });
    if let Some(p) = &args.flows {
        let text = horde_model::files::read_text(p, horde_model::files::MAX_TOML, "flow files").context("reading the flow file").map_err(bad_input)?;
        let flows = horde_model::flow::FlowFile::parse_and_resolve(&text, 0).map_err(|e| bad_input(anyhow::anyhow!("{}: {e}", p.display())))?;
        let n = flows.len() as u32;
        let names: std::collections::HashMap<u32, String> = flows.into_iter().map(|f| (f.id.saturating_add(args.id_base), f.name)).collect();
        for f in &mut a.flows {
            f.name = f.flow.and_then(|id| names.get(&id).cloned());
        }
        if !a.flows.is_empty() && a.flows.iter().all(|f| f.name.is_none()) {
            let lo = a.flows.iter().filter_map(|f| f.flow).min().unwrap_or(0);
            say!(
                "warning: no flow id in the logs is one of {}'s ({}..{}): if the sender ran with --id-base {lo}, give decode --id-base {lo}",
                p.display(),
                args.id_base,
                args.id_base.saturating_add(n)
            );
        }
    }
    if !args.quiet {
        // Only the table's order; JSON and CSV keep flow order.
        let mut shown = a.clone();
        let key = |f: &horde_stats::FlowStats| -> f64 {
            match args.sort {
                Sort::Id => f.flow.unwrap_or(0) as f64,
                Sort::Loss => -f.loss.as_ref().map_or(0.0, |l| l.loss_pct),
                Sort::Delay => -f.delay.as_ref().map_or(0.0, |d| d.p99_ms),
                Sort::Packets => -(f.packets as f64),
            }
        };
        shown.flows.sort_by(|x, y| key(x).total_cmp(&key(y)).then(x.flow.cmp(&y.flow)));
        let mut text = export::table(&shown, args.max_flows);
        if args.sort == Sort::Id && args.max_flows > 0 && a.flows.len() > args.max_flows {
            text.push_str("  (first flows by id; --sort loss or --sort delay shows the worst first)\n");
        }
        crate::output::human(&text, machine)?;
    }
    if let Some(p) = &args.json {
        super::write_out(p, &export::json(&a))?;
    }
    if let Some(p) = &args.csv {
        super::write_out(p, &export::flows_csv(&a))?;
    }
    if let Some(p) = &args.windows_csv {
        super::write_out(p, &export::windows_csv(&a.windows))?;
    }
    Ok(0)
}
