//! Where a run's progress goes (`--progress text|json`, `--progress-file`) and how each kind of
//! event is printed.

use std::io::IsTerminal as _;

use horde_model::scenario::Scenario;
use horde_scenario::Event;

use crate::bad_input;

/// The dead-man's interval of a run through agents when neither the flag nor the scenario's
/// `[agents]` table gives one.
pub const DEADMAN: &str = "3s";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    Text,
    Json,
}

/// The progress flags `run` and `demo` share.
#[derive(clap::Args, Debug)]
pub struct ProgressArgs {
    /// No live progress line
    #[arg(short, long)]
    pub quiet: bool,
    /// Progress as `text` (a line on the terminal) or `json` (one JSON object per second on
    /// standard error, or in --progress-file: t_s, rates, totals, players per category, and
    /// each agent's rates through agents; docs/schemas/progress.schema.json)
    #[arg(long, value_enum, default_value_t = ProgressMode::Text)]
    pub progress: ProgressMode,
    /// Write JSON progress lines to this file instead of standard error (implies --progress json)
    #[arg(long, value_name = "FILE")]
    pub progress_file: Option<std::path::PathBuf>,
}

/// Where a run's progress goes.
pub enum Progress {
    None,
    Text,
    /// JSON lines to standard error, or to a file.
    Json(Option<std::sync::Mutex<std::fs::File>>),
}

impl Progress {
    /// Writes one JSON line (to the file, or standard error).
    fn json(&self, line: &str) {
        match self {
            Progress::Json(Some(f)) => {
                use std::io::Write as _;
                let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                let _ = f.write_all(line.as_bytes()).and_then(|_| f.flush());
            }
            Progress::Json(None) => say_inline!("{line}"),
            _ => {}
        }
    }

    pub fn of(a: &ProgressArgs) -> Result<Progress, crate::Failure> {
        let (quiet, mode) = (a.quiet, a.progress);
        if let Some(f) = &a.progress_file {
            let file = std::fs::File::create(f).map_err(|e| bad_input(anyhow::anyhow!("--progress-file {}: {e}", f.display())))?;
            return Ok(Progress::Json(Some(std::sync::Mutex::new(file))));
        }
        Ok(match (quiet, mode) {
            (true, _) => Progress::None,
            (false, ProgressMode::Text) => Progress::Text,
            (false, ProgressMode::Json) => Progress::Json(None),
        })
    }
}

/// Prints a run's events, on one machine or through agents alike: notes as lines, progress as
/// one line rewritten in place on a terminal (every 5 s otherwise), or every event as a JSON
/// line ([`horde_scenario::EventLine`], docs/schemas/progress.schema.json).
pub struct Printer<'a> {
    pub sc: &'a Scenario,
    pub progress: Progress,
    pub tty: bool,
    /// A progress line is open on the terminal (a note starts a new line first).
    pub open: std::sync::atomic::AtomicBool,
}

impl<'a> Printer<'a> {
    pub fn new(sc: &'a Scenario, progress: Progress) -> Printer<'a> {
        Printer { sc, progress, tty: std::io::stderr().is_terminal(), open: Default::default() }
    }

    pub fn event(&self, e: &Event) {
        use std::sync::atomic::Ordering::Relaxed;
        let sc = self.sc;
        if let Some(tee) = crate::cmd::ui::TEE.get() {
            tee(e);
        }
        if let Progress::Json(file) = &self.progress {
            // Every event is a line of the stream, notes included: a reader sees one format.
            let line = serde_json::to_string(&horde_scenario::EventLine::of(&sc.name, e)).unwrap_or_default();
            self.progress.json(&(line + "\n"));
            // On standard error the stream is all there is; beside a file, people still read
            // the notes on the terminal.
            if file.is_none() || matches!(e, Event::Tick(_)) {
                return;
            }
        }
        if !matches!(e, Event::Tick(_)) && self.open.swap(false, Relaxed) {
            say!();
        }
        match e {
            Event::Planned { seconds } => say!(
                "horde run: {} — {} {} players for {:.0} s from hour {} (seed {}); behaviour planned in {seconds:.2} s",
                sc.name,
                sc.players,
                sc.service.name,
                sc.duration_s,
                sc.start_hour,
                sc.seed
            ),
            Event::Note(m) => say!("horde run: {m}"),
            Event::Reply(r) => say!("horde run: {}", r.line()),
            Event::Tick(s) if matches!(self.progress, Progress::Text) => {
                let cats: Vec<String> = s.categories.iter().map(|(n, c)| format!("{n} {c}")).collect();
                let agents: Vec<String> = s.agents.iter().map(|a| format!("{} {}/{}", a.agent, a.sent_pkt_s, a.received_pkt_s)).collect();
                let line = format!(
                    "t={:>5.0}s  up {:>7} pkt/s {:>8.1} kbit/s  down {:>7} pkt/s {:>8.1} kbit/s  | {}{}",
                    s.t_s,
                    s.up_pkt_s,
                    s.up_bit_s as f64 / 1e3,
                    s.down_pkt_s,
                    s.down_bit_s as f64 / 1e3,
                    cats.join(", "),
                    if agents.is_empty() { String::new() } else { format!(" | agents sent/received pkt/s: {}", agents.join(", ")) }
                );
                if self.tty {
                    say_inline!("\r{line}\x1b[K");
                    self.open.store(true, Relaxed);
                } else if (s.t_s.round() as u64).is_multiple_of(5) {
                    say!("{line}");
                }
            }
            Event::Tick(_) => {}
        }
    }

    /// The run is over: a progress line left open on the terminal is ended.
    pub fn done(&self) {
        if self.open.swap(false, std::sync::atomic::Ordering::Relaxed) {
            say!();
        }
    }
}
