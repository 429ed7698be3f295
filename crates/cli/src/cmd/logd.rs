use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use horde_agent::logd::{self, LogdOptions, SourceReport};

use crate::{bad_input, Outcome};

/// The live log server (D-ITG's ITGLog): `send`/`recv --log-server ADDR` stream their per-packet
/// logs to it as they run, over TLS 1.3, each side proving the run key on the connection. One
/// log per source in --dir, written as it arrives; a source that dies leaves what reached the
/// server and a gap record that says so (`horde decode` shows it). Stops on Ctrl-C/SIGTERM or
/// after --duration.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on (127.0.0.1 unless you give another; 0.0.0.0 listens on all interfaces)
    #[arg(long, default_value = "127.0.0.1:9720", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Directory for the logs (created; logs are only ever created new: NAME.log, NAME-2.log, …)
    #[arg(long, default_value = "horde-logs", value_name = "DIR")]
    pub dir: PathBuf,
    #[command(flatten)]
    pub key: super::KeyArgs,
    /// Sources streaming at once, at most (more are told the server is busy)
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_sources: usize,
    /// Size of one log, at most, in MiB; past it records are not written and the log says so
    #[arg(long, default_value_t = 4096, value_name = "MIB")]
    pub max_log_mib: u64,
    /// Stop after this long
    #[arg(short = 't', long, value_parser = super::duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Write what the server received, per source, as JSON to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// A network whose connections the admission policy always trusts, ADDR or ADDR/PREFIX (repeat, or comma-separate): never rate-limited or struck, its places reserved (as OpenSSH's PerSourcePenaltyExemptList). Sources that authenticated in the last 15 minutes are trusted anyway
    #[arg(long, value_name = "ADDR[/PREFIX]", value_delimiter = ',', value_parser = super::exempt)]
    pub exempt: Vec<(std::net::IpAddr, u8)>,
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    let key = args.key.key()?;
    if key.is_open() {
        return Err(bad_input(anyhow::anyhow!(
            "horde logd needs a run key: make one with `horde key --out run.key` and give it here and to the sources (--key-file run.key, or HORDE_KEY_FILE)"
        )));
    }
    if !(1..=4096).contains(&args.max_sources) {
        return Err(bad_input(anyhow::anyhow!("--max-sources must be 1..=4096 (got {})", args.max_sources)));
    }
    if !(1..=1 << 24).contains(&args.max_log_mib) {
        return Err(bad_input(anyhow::anyhow!("--max-log-mib must be 1..=16777216 (got {})", args.max_log_mib)));
    }
    let opts = LogdOptions {
        listen: args.listen,
        dir: args.dir.clone(),
        key,
        max_sources: args.max_sources,
        max_bytes: args.max_log_mib << 20,
        duration: args.duration,
        exempt: args.exempt.clone(),
        max_logs: logd::MAX_LOGS,
    };
    let dir = std::path::absolute(&args.dir).unwrap_or_else(|_| args.dir.clone());
    let report = logd::serve(&opts, stop, |a| say!("horde logd: listening on {a}, logs in {} (Ctrl-C stops)", dir.display()), |s| say!("{}", source_line(s)))
        .context("serving logs")?;
    say!(
        "horde logd: {} source(s){}{}{}{}",
        report.sources.len(),
        if report.unauthenticated > 0 {
            format!("; {} connection(s) closed without a valid proof of the run key", report.unauthenticated)
        } else {
            String::new()
        },
        if report.busy > 0 { format!("; {} turned away (--max-sources)", report.busy) } else { String::new() },
        if report.full > 0 {
            format!("; {} turned away at the server's totals (10,000 logs a run, or less room on the disk than two logs at --max-log-mib)", report.full)
        } else {
            String::new()
        },
        if report.interrupted { " — stopped" } else { "" }
    );
    if let Some(p) = &args.json {
        super::write_out(p, &serde_json::to_string_pretty(&report).expect("report serialises"))?;
    }
    Ok(if report.interrupted { 130 } else { 0 })
}

fn source_line(s: &SourceReport) -> String {
    let mut line = format!("  {} ({} from {}): {} record(s) in {}", s.name, s.role, s.peer, s.records, s.file.display());
    if s.ended {
        line.push_str(", ended by the source");
        if let Some(said) = s.said.filter(|n| *n != s.records) {
            line.push_str(&format!(" (it streamed {said})"));
        }
    } else {
        line.push_str(", the source was lost: the log ends with a gap record");
    }
    for g in &s.gaps {
        line.push_str(&format!("; gap: {}{}", g.reason, g.records.map(|n| format!(" ({n} records)")).unwrap_or_default()));
    }
    if s.refused > 0 {
        line.push_str(&format!("; {} record(s) not written (not a log's, or past --max-log-mib)", s.refused));
    }
    line
}
