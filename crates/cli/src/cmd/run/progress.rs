//! Where a run's progress goes (`--progress text|json`, `--progress-file`) and how each kind of
//! event is printed.

use std::path::Path;

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

    /// A run through agents: each agent's rates over the last second (sent pkt/s, sent bit/s,
    /// received pkt/s, received bit/s). True if it left a line open on the terminal.
    pub fn agents(&self, scenario: &str, t_s: f64, agents: &[(String, [u64; 4])], tty: bool) -> bool {
        let tot = agents.iter().fold([0u64; 4], |mut a, (_, r)| {
            for i in 0..4 {
                a[i] += r[i];
            }
            a
        });
        match self {
            Progress::None => false,
            Progress::Json(_) => {
                let per: Vec<serde_json::Value> = agents
                    .iter()
                    .map(|(n, r)| serde_json::json!({"agent": n, "sent_pkt_s": r[0], "sent_bit_s": r[1], "received_pkt_s": r[2], "received_bit_s": r[3]}))
                    .collect();
                self.json(&(serde_json::json!({"event": "progress", "scenario": scenario, "t_s": t_s, "sent_pkt_s": tot[0], "sent_bit_s": tot[1], "received_pkt_s": tot[2], "received_bit_s": tot[3], "agents": per}).to_string() + "\n"));
                false
            }
            Progress::Text => {
                let per: Vec<String> = agents.iter().map(|(n, r)| format!("{n} {}/{}", r[0], r[2])).collect();
                let line = format!(
                    "t={t_s:>5.0}s  all agents: sent {:>7} pkt/s {:>9.1} kbit/s, received {:>7} pkt/s {:>9.1} kbit/s | sent/received pkt/s: {}",
                    tot[0],
                    tot[1] as f64 / 1e3,
                    tot[2],
                    tot[3] as f64 / 1e3,
                    per.join(", ")
                );
                if tty {
                    say_inline!("\r{line}\x1b[K");
                    return true;
                }
                if (t_s.round() as u64).is_multiple_of(5) {
                    say!("{line}");
                }
                false
            }
        }
    }

    pub fn of(quiet: bool, mode: ProgressMode, file: Option<&Path>) -> Result<Progress, crate::Failure> {
        if let Some(f) = file {
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

/// Prints a run's events: notes as lines, progress as one line rewritten in place on a terminal
/// (every 5 s otherwise).
pub struct Printer<'a> {
    pub sc: &'a Scenario,
    pub progress: Progress,
    pub tty: bool,
}

impl Printer<'_> {
    pub fn event(&self, e: &Event) {
        let sc = self.sc;
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
            Event::Tick(s) if matches!(self.progress, Progress::Json(_)) => {
                self.progress.json(&(serde_json::json!({ "event": "progress", "scenario": sc.name, "progress": s }).to_string() + "\n"));
            }
            Event::Tick(s) if matches!(self.progress, Progress::Text) => {
                let cats: Vec<String> = s.categories.iter().map(|(n, c)| format!("{n} {c}")).collect();
                let line = format!(
                    "t={:>5.0}s  up {:>7} pkt/s {:>8.1} kbit/s  down {:>7} pkt/s {:>8.1} kbit/s  | {}",
                    s.t_s,
                    s.up_pkt_s,
                    s.up_bit_s as f64 / 1e3,
                    s.down_pkt_s,
                    s.down_bit_s as f64 / 1e3,
                    cats.join(", ")
                );
                if self.tty {
                    say_inline!("\r{line}\x1b[K");
                } else if (s.t_s.round() as u64).is_multiple_of(5) {
                    say!("{line}");
                }
            }
            Event::Tick(_) => {}
        }
    }
}
