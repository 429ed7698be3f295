//! The console's runs, I/O-free: each run's event stream (numbered lines of
//! [`horde_scenario::EventLine`], the last [`KEEP`] kept so a stream that reconnects resumes
//! where it stopped) and its command channel's sending end. The server side's tasks wait on a
//! generation counter that every change bumps.

use std::collections::VecDeque;
use std::sync::Mutex;

use horde_scenario::control::Command;
use horde_scenario::EventLine;
use serde::Serialize;

/// Event lines kept per run (more than an hour of seconds with notes).
pub const KEEP: usize = 20_000;
/// Runs the console holds at once (finished ones are dropped first, oldest first).
pub const MAX_RUNS: usize = 64;

/// Where a run's commands go: the run's channel (attached runs) or a child's standard input.
pub type CommandSink = Box<dyn Fn(Command) -> Result<(), String> + Send + Sync>;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum RunState {
    Running,
    Finished { exit: u8 },
}

/// What the API says of a run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunInfo {
    pub id: u32,
    pub scenario: String,
    /// Its report directory.
    pub out: String,
    #[serde(flatten)]
    pub state: RunState,
    /// Event lines so far (the next line's number).
    pub events: u64,
    /// The oldest line still kept.
    pub first_event: u64,
    /// Started from the console (a child process) or attached (`horde run … --ui`).
    pub attached: bool,
}

struct Run {
    info: RunInfo,
    log: VecDeque<String>,
    commands: Option<CommandSink>,
}

/// Why a command or a request about a run was refused.
#[derive(Debug, PartialEq)]
pub enum Refused {
    NoSuchRun(u32),
    Finished(u32),
    Full,
    Command(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NoSuchRun(id) => write!(f, "no run {id} (GET /api/v1/runs lists them)"),
            Refused::Finished(id) => write!(f, "run {id} has finished: it takes no more commands"),
            Refused::Full => write!(f, "{MAX_RUNS} runs are still running: stop one first"),
            Refused::Command(m) => write!(f, "{m}"),
        }
    }
}

#[derive(Default)]
pub struct Hub {
    runs: Mutex<Vec<Run>>,
    next_id: Mutex<u32>,
    generation: Option<tokio::sync::watch::Sender<u64>>,
}

impl Hub {
    pub fn new() -> Hub {
        Hub { generation: Some(tokio::sync::watch::channel(0).0), ..Default::default() }
    }

    fn bump(&self) {
        if let Some(g) = &self.generation {
            g.send_modify(|n| *n += 1);
        }
    }

    /// A receiver that sees every change.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.as_ref().map(|g| g.subscribe()).unwrap_or_else(|| tokio::sync::watch::channel(0).1)
    }

    /// Adds a running run; its commands go to `commands`.
    pub fn add(&self, scenario: &str, out: &str, attached: bool, commands: Option<CommandSink>) -> Result<u32, Refused> {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        if runs.len() >= MAX_RUNS {
            let Some(k) = runs.iter().position(|r| r.info.state != RunState::Running) else { return Err(Refused::Full) };
            runs.remove(k);
        }
        let mut next = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
        *next += 1;
        let info = RunInfo { id: *next, scenario: scenario.into(), out: out.into(), state: RunState::Running, events: 0, first_event: 0, attached };
        runs.push(Run { info, log: VecDeque::new(), commands });
        drop(runs);
        self.bump();
        Ok(*next)
    }

    fn with<T>(&self, id: u32, f: impl FnOnce(&mut Run) -> T) -> Result<T, Refused> {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.iter_mut().find(|r| r.info.id == id).map(f).ok_or(Refused::NoSuchRun(id))
    }

    /// Appends an event line to run `id`'s stream.
    pub fn push(&self, id: u32, line: &EventLine) {
        let text = serde_json::to_string(line).unwrap_or_default();
        let _ = self.with(id, |r| {
            r.log.push_back(text);
            r.info.events += 1;
            if r.log.len() > KEEP {
                r.log.pop_front();
                r.info.first_event += 1;
            }
            if let EventLine::Finished { exit, .. } = line {
                r.info.state = RunState::Finished { exit: *exit };
                r.commands = None;
            }
        });
        self.bump();
    }

    /// Run `id` ended with `exit`: its last line says so.
    pub fn finish(&self, id: u32, exit: u8) {
        let Ok((scenario, report)) = self.with(id, |r| (r.info.scenario.clone(), r.info.out.clone())) else { return };
        self.push(id, &EventLine::Finished { scenario, exit, report });
    }

    /// Passes `c` to run `id`'s channel.
    pub fn command(&self, id: u32, c: Command) -> Result<(), Refused> {
        self.with(id, |r| match (&r.info.state, &r.commands) {
            (RunState::Running, Some(sink)) => sink(c).map_err(Refused::Command),
            _ => Err(Refused::Finished(id)),
        })?
    }

    /// Run `id`'s lines from number `from` on (at most `max`), the number of the first one
    /// returned (later than `from` when older lines were dropped), and whether the run is over.
    pub fn since(&self, id: u32, from: u64, max: usize) -> Result<(u64, Vec<String>, bool), Refused> {
        self.with(id, |r| {
            let start = from.max(r.info.first_event);
            let skip = (start - r.info.first_event) as usize;
            let lines: Vec<String> = r.log.iter().skip(skip).take(max).cloned().collect();
            (start, lines, r.info.state != RunState::Running)
        })
    }

    pub fn info(&self, id: u32) -> Result<RunInfo, Refused> {
        self.with(id, |r| r.info.clone())
    }

    pub fn list(&self) -> Vec<RunInfo> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|r| r.info.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(t: &str) -> EventLine {
        EventLine::Note { scenario: "s".into(), text: t.into() }
    }

    #[test]
    fn a_stream_resumes_where_it_stopped_and_old_lines_age_out() {
        let hub = Hub::new();
        let got = std::sync::Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let id = hub
            .add(
                "s",
                "/tmp/o",
                true,
                Some(Box::new(move |c| {
                    g.lock().unwrap().push(c);
                    Ok(())
                })),
            )
            .unwrap();
        for i in 0..(KEEP + 10) {
            hub.push(id, &note(&i.to_string()));
        }
        let (first, lines, done) = hub.since(id, 0, 5).unwrap();
        assert_eq!((first, lines.len(), done), (10, 5, false), "the oldest 10 aged out, and the answer says from where");
        assert!(lines[0].contains("\"10\""));
        let (first, lines, _) = hub.since(id, KEEP as u64 + 8, 100).unwrap();
        assert_eq!((first, lines.len()), (KEEP as u64 + 8, 2), "resumes at the line asked for");
        assert_eq!(hub.command(id, Command::Stop {}), Ok(()));
        assert_eq!(got.lock().unwrap().len(), 1);
        hub.finish(id, 130);
        assert_eq!(hub.command(id, Command::Stop {}), Err(Refused::Finished(id)), "a finished run takes no commands");
        let (_, lines, done) = hub.since(id, KEEP as u64 + 10, 100).unwrap();
        assert!(done && lines[0].contains("\"finished\"") && lines[0].contains("130"));
        assert_eq!(hub.command(99, Command::Stop {}), Err(Refused::NoSuchRun(99)));
    }

    #[test]
    fn the_hub_holds_a_bounded_number_of_runs() {
        let hub = Hub::new();
        for _ in 0..MAX_RUNS {
            hub.add("s", "o", true, None).unwrap();
        }
        assert_eq!(hub.add("s", "o", true, None), Err(Refused::Full));
        hub.finish(3, 0);
        assert!(hub.add("s", "o", true, None).is_ok(), "a finished run makes room");
        assert_eq!(hub.list().len(), MAX_RUNS);
    }
}
