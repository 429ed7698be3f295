//! The console's runs, I/O-free: each run's event stream (numbered lines of
//! [`horde_scenario::EventLine`], the last [`KEEP`] kept so a stream that reconnects resumes
//! where it stopped) and its command channel's sending end. The server side's tasks wait on a
//! generation counter that every change bumps.

use std::collections::VecDeque;
use std::sync::Mutex;

use horde_scenario::control::{Command, Reply};
use horde_scenario::EventLine;
use serde::Serialize;

/// Event lines kept per run (more than an hour of seconds with notes).
pub const KEEP: usize = 20_000;
/// Runs the console holds at once (finished ones are dropped first, oldest first).
pub const MAX_RUNS: usize = 64;

/// Where a run's commands go, each with the id its answer names: the run's channel (attached
/// runs) or a child's standard input.
pub type CommandSink = Box<dyn Fn(u64, Command) -> Result<(), String> + Send + Sync>;

/// Commands of one run waiting for their answer at once (more are refused until some are
/// answered).
pub const MAX_PENDING: usize = 64;

/// The run's answer to a command, when it comes ([`Hub::command`]).
pub type Answer = tokio::sync::oneshot::Receiver<Reply>;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum RunState {
    Running,
    /// Ended. `stopped`: a stop command was applied first — the run did as it was told (its
    /// exit code, 130, says "interrupted", not that anything failed).
    Finished {
        exit: u8,
        #[serde(default)]
        stopped: bool,
    },
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
    /// Commands sent and not answered yet: id → (whether it is a stop, where its answer goes).
    pending: Vec<(u64, bool, tokio::sync::oneshot::Sender<Reply>)>,
    next_command: u64,
    /// A stop was applied: the run takes no more commands.
    stopping: bool,
}

/// Why a command or a request about a run was refused.
#[derive(Debug, PartialEq)]
pub enum Refused {
    NoSuchRun(u32),
    Finished(u32),
    Full,
    /// A stop was applied: the run takes no more commands.
    Stopping(u32),
    /// [`MAX_PENDING`] commands wait for their answer.
    Busy(u32),
    Command(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NoSuchRun(id) => write!(f, "no run {id} (GET /api/v1/runs lists them)"),
            Refused::Finished(id) => write!(f, "run {id} has finished: it takes no more commands"),
            Refused::Full => write!(f, "{MAX_RUNS} runs are still running: stop one first"),
            Refused::Stopping(id) => write!(f, "run {id} is stopping: it takes no more commands"),
            Refused::Busy(id) => write!(f, "{MAX_PENDING} commands of run {id} wait for their answer: wait for them first"),
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
        runs.push(Run { info, log: VecDeque::new(), commands, pending: Vec::new(), next_command: 0, stopping: false });
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
                r.info.state = RunState::Finished { exit: *exit, stopped: r.stopping };
                r.commands = None;
                // what still waits learns the run ended before it answered
                r.pending.clear();
            }
            if let EventLine::Reply { reply, .. } = line {
                if let Some(k) = r.pending.iter().position(|p| p.0 == reply.id) {
                    let (_, stop, tx) = r.pending.swap_remove(k);
                    r.stopping |= stop && reply.applied;
                    let _ = tx.send(reply.clone());
                }
            }
        });
        self.bump();
    }

    /// Run `id` ended with `exit`: its last line says so.
    pub fn finish(&self, id: u32, exit: u8) {
        let Ok((scenario, report)) = self.with(id, |r| (r.info.scenario.clone(), r.info.out.clone())) else { return };
        self.push(id, &EventLine::Finished { scenario, exit, report });
    }

    /// Passes `c` to run `id`'s channel; the run's answer comes on the receiver (the run's
    /// [`EventLine::Reply`] naming it). Refused here, at once, when the run cannot take it.
    pub fn command(&self, id: u32, c: Command) -> Result<Answer, Refused> {
        self.with(id, |r| {
            let Some(sink) = r.commands.as_ref().filter(|_| r.info.state == RunState::Running) else { return Err(Refused::Finished(id)) };
            if r.stopping {
                return Err(Refused::Stopping(id));
            }
            if r.pending.len() >= MAX_PENDING {
                return Err(Refused::Busy(id));
            }
            r.next_command += 1;
            let cid = r.next_command;
            let stop = c == Command::Stop {};
            sink(cid, c).map_err(Refused::Command)?;
            let (tx, rx) = tokio::sync::oneshot::channel();
            r.pending.push((cid, stop, tx));
            Ok(rx)
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
                Some(Box::new(move |cid, c| {
                    g.lock().unwrap().push((cid, c));
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
        let mut answer = hub.command(id, Command::Stop {}).unwrap();
        assert_eq!(got.lock().unwrap().len(), 1);
        assert!(answer.try_recv().is_err(), "no answer yet");
        hub.finish(id, 130);
        assert!(answer.try_recv().is_err(), "the run ended before it answered: the waiter learns it");
        assert_eq!(hub.command(id, Command::Stop {}).err(), Some(Refused::Finished(id)), "a finished run takes no commands");
        let (_, lines, done) = hub.since(id, KEEP as u64 + 10, 100).unwrap();
        assert!(done && lines[0].contains("\"finished\"") && lines[0].contains("130"));
        assert_eq!(hub.command(99, Command::Stop {}).err(), Some(Refused::NoSuchRun(99)));
    }

    #[test]
    fn a_command_is_answered_by_the_reply_that_names_it_and_a_stop_closes_the_channel() {
        let hub = Hub::new();
        let id = hub.add("s", "/tmp/o", true, Some(Box::new(|_, _| Ok(())))).unwrap();
        let mut players = hub.command(id, Command::Players { online: 80, at_ns: None }).unwrap();
        let mut stop = hub.command(id, Command::Stop {}).unwrap();
        let reply = |r: Reply| EventLine::Reply { scenario: "s".into(), reply: r };
        hub.push(id, &reply(Reply::applied(2, Some(3.5), "stop: stopping the run".into())));
        hub.push(id, &reply(Reply::refused(1, "players: 80 is more than the scenario's 50 players".into())));
        hub.push(id, &reply(Reply::applied(7, None, "not ours".into())));
        assert_eq!(stop.try_recv().unwrap(), Reply::applied(2, Some(3.5), "stop: stopping the run".into()));
        assert!(!players.try_recv().unwrap().applied);
        let e = hub.command(id, Command::Stop {}).err().unwrap();
        assert!(e.to_string().contains("is stopping"), "a second stop is refused at once: {e}");
        let id2 = hub.add("s", "/tmp/o", true, Some(Box::new(|_, _| Ok(())))).unwrap();
        let waiting: Vec<_> = (0..MAX_PENDING).map(|_| hub.command(id2, Command::Stop {}).unwrap()).collect();
        assert!(hub.command(id2, Command::Stop {}).err().unwrap().to_string().contains("wait for their answer"), "bounded");
        drop(waiting);
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
