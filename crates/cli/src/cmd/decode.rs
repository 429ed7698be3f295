use std::path::PathBuf;

use anyhow::Context;
use horde_stats::{export, load, LoadedLog, Options};

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
    /// Write one row per packet as Parquet to FILE (flow, addresses, size, seq, scheduled /
    /// sent / arrival times, delay, lost and duplicate flags): pandas, polars and DuckDB read it
    #[arg(long, value_name = "FILE")]
    pub parquet: Option<PathBuf>,
    /// Write the same per-packet rows as CSV to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub packets_csv: Option<PathBuf>,
    /// Write the per-flow rows (as --csv) as Parquet to FILE
    #[arg(long, value_name = "FILE")]
    pub flows_parquet: Option<PathBuf>,
    /// Write the time series (as --windows-csv) as Parquet to FILE (needs --window)
    #[arg(long, value_name = "FILE")]
    pub windows_parquet: Option<PathBuf>,
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
    for (flag, p) in [("--windows-csv", &args.windows_csv), ("--windows-parquet", &args.windows_parquet)] {
        if p.is_some() && window_ns.is_none() {
            return Err(bad_input(anyhow::anyhow!("{flag} needs --window, e.g. --window 100ms")));
        }
    }
    for (flag, p) in [("--parquet", &args.parquet), ("--flows-parquet", &args.flows_parquet), ("--windows-parquet", &args.windows_parquet)] {
        if p.as_deref() == Some(std::path::Path::new("-")) {
            return Err(bad_input(anyhow::anyhow!("{flag}: Parquet is binary and read from files: give a file name, not -")));
        }
    }
    let machine =
        crate::output::one_stdout(&[("--json", &args.json), ("--csv", &args.csv), ("--windows-csv", &args.windows_csv), ("--packets-csv", &args.packets_csv)])?;
    let logs = load_logs(&args.logs)?;
    // One pass over the records: the analysis and the per-packet rows both read it.
    let collected = horde_stats::collect(&logs);
    let mut a = horde_stats::analyse_collected(&collected, Options { window_ns, anchor_ns: None });
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
    if let Some(p) = &args.parquet {
        write_file(p, |f| horde_stats::columnar::write_packets(&collected, f))?;
    }
    if let Some(p) = &args.flows_parquet {
        write_file(p, |f| horde_stats::columnar::write_rows(&export::flow_rows(&a), f))?;
    }
    if let Some(p) = &args.windows_parquet {
        write_file(p, |f| horde_stats::columnar::write_windows(&a.windows, f))?;
    }
    if let Some(p) = &args.packets_csv {
        write_packets_csv(p, &collected)?;
    }
    Ok(0)
}

/// Writes a binary file whole or not at all: into `FILE.partial`, renamed when complete (an
/// error or Ctrl-C leaves no truncated table under the name asked for).
fn write_file(
    p: &std::path::Path,
    write: impl FnOnce(std::io::BufWriter<std::fs::File>) -> Result<u64, horde_stats::columnar::ColumnarError>,
) -> Result<(), crate::Failure> {
    let mut part = p.as_os_str().to_owned();
    part.push(".partial");
    let part = PathBuf::from(part);
    let f = std::fs::File::create(&part).with_context(|| format!("creating {}", part.display()))?;
    match write(std::io::BufWriter::with_capacity(1 << 20, f)) {
        Ok(_) => Ok(std::fs::rename(&part, p).with_context(|| format!("renaming {} to {}", part.display(), p.display()))?),
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            let bad_log = matches!(e, horde_stats::columnar::ColumnarError::Rows(_));
            let e = anyhow::anyhow!("{}: {e}", p.display());
            Err(if bad_log { bad_input(e) } else { e.into() })
        }
    }
}

/// The per-packet rows as CSV, streamed (a table can be far larger than the analysis).
fn write_packets_csv(p: &std::path::Path, c: &horde_stats::Collected) -> Result<(), crate::Failure> {
    let out: Box<dyn std::io::Write> = if p == std::path::Path::new("-") {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
    };
    let mut w = csv::Writer::from_writer(std::io::BufWriter::with_capacity(1 << 20, out));
    if let Err(e) = horde_stats::packets::rows::<anyhow::Error>(c, |r| Ok(w.serialize(r)?)) {
        let bad_log = e.downcast_ref::<horde_stats::packets::RowsError>().is_some();
        drop(w);
        if p != std::path::Path::new("-") {
            let _ = std::fs::remove_file(p);
        }
        let e = e.context(format!("writing {}", p.display()));
        return Err(if bad_log { bad_input(e) } else { e.into() });
    }
    w.flush().with_context(|| format!("writing {}", p.display()))?;
    Ok(())
}
