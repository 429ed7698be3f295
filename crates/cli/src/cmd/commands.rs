//! `--commands FILE|-`: the run's command channel from the command line — one JSON object per
//! line from a file (a FIFO works: `mkfifo ctl; horde run … --commands ctl`) or standard input
//! (docs/control.md, docs/schemas/command.schema.json). Scenario runs apply every command;
//! runs of other kinds (flows, bots) take `stop` and say so of the others.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use horde_scenario::control::{Command, CommandSender, Commands, Reply};

use crate::Failure;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct CommandArgs {
    /// Read commands while the run goes on, one JSON object per line, from FILE (a FIFO works) or standard input (-): {"command":"stop"} stops now and reports what was measured; {"command":"players","online":N} sets how many of a scenario's players are online; {"command":"link","a":"r1","b":"h1","set":{"delay":"50ms"}} changes an emulated link (docs/control.md)
    #[arg(long, value_name = "FILE|-")]
    pub commands: Option<PathBuf>,
}

impl CommandArgs {
    /// Starts reading (a thread that ends with its input) and returns the channel; `None`
    /// without `--commands`.
    pub fn open(&self) -> Result<Option<Commands>, Failure> {
        if self.commands.is_none() {
            return Ok(None);
        }
        let (tx, commands) = Commands::channel();
        self.feed(tx)?;
        Ok(Some(commands))
    }

    /// Starts reading `--commands` into `tx` (another source, such as the console, may send
    /// there too); nothing without `--commands`.
    pub fn feed(&self, tx: CommandSender) -> Result<(), Failure> {
        let Some(path) = self.commands.clone() else { return Ok(()) };
        if path.as_os_str() != "-" && !path.exists() {
            return Err(crate::bad_input(anyhow::anyhow!("--commands {}: no such file (give a file, a FIFO, or - for standard input)", path.display())));
        }
        let spawned = std::thread::Builder::new().name("horde-commands".into()).spawn(move || {
            if path.as_os_str() == "-" {
                horde_scenario::control::read(std::io::stdin().lock(), &tx);
            } else {
                // Opened here: a FIFO's open waits for its writer.
                match std::fs::File::open(&path) {
                    Ok(f) => horde_scenario::control::read(std::io::BufReader::new(f), &tx),
                    Err(e) => {
                        let _ = tx.send(horde_scenario::control::Incoming { id: 0, command: Err(format!("--commands {}: {e}", path.display())) });
                    }
                }
            }
        });
        spawned.map_err(|e| anyhow::anyhow!("starting the command reader: {e}"))?;
        Ok(())
    }
}

/// Runs `f` (a run of `kind` that has no players or links) while the commands are watched: a
/// `stop` sets `stop` as a signal would, the others are refused; each is answered at once
/// (`reply`: how the run says it).
pub fn stop_only<T>(commands: Option<Commands>, stop: &AtomicBool, kind: &str, reply: &(dyn Fn(&Reply) + Sync), f: impl FnOnce() -> T) -> T {
    let Some(commands) = commands else { return f() };
    let done = AtomicBool::new(false);
    let t0 = horde_engine::clock::Stopwatch::start();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if let Some(c) = commands.next_within(Duration::from_millis(50)) {
                    let r = match c.command {
                        Ok(Command::Stop {}) if stop.load(Ordering::Relaxed) => Reply::refused(c.id, format!("the {kind} is stopping already")),
                        Ok(Command::Stop {}) => {
                            stop.store(true, Ordering::Relaxed);
                            Reply::applied(c.id, Some(t0.elapsed().as_secs_f64()), format!("stop: stopping the {kind} and reporting what it measured"))
                        }
                        Ok(other) => Reply::refused(c.id, format!("{}: a {kind} has no players target or emulated links", other.describe())),
                        Err(m) => Reply::refused(c.id, m),
                    };
                    reply(&r);
                }
            }
        });
        let r = f();
        done.store(true, Ordering::Relaxed);
        r
    })
}

/// A reply as a line for people (standard error).
pub fn say_reply(r: &Reply) {
    say!("horde: {}", r.line());
}
