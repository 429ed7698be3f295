//! `--commands FILE|-`: the run's command channel from the command line — one JSON object per
//! line from a file (a FIFO works: `mkfifo ctl; horde run … --commands ctl`) or standard input
//! (docs/control.md, docs/schemas/command.schema.json). Scenario runs apply every command;
//! flow runs (`send`) take `stop` and `flow` (a running flow's laws), bots `stop`; each says so
//! of the others.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use horde_scenario::control::{Command, CommandSender, Commands, Reply};

use crate::Failure;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct CommandArgs {
    /// Read commands while the run goes on, one JSON object per line, from FILE (a FIFO works) or standard input (-): {"command":"stop"} stops now and reports what was measured; {"command":"players","online":N} sets how many of a scenario's players are online; {"command":"link","a":"r1","b":"h1","set":{"delay":"50ms"}} changes an emulated link; {"command":"flow","flow":0,"rate":5000} changes a running flow's laws (send) (docs/control.md)
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
    watch(commands, stop, kind, None, reply, f)
}

/// [`stop_only`] for a flow run whose flows take changes: a `flow` command hands its laws to
/// that flow's schedule (`steer`) and is answered with the instant it was applied.
pub fn stop_or_flows<T>(
    commands: Option<Commands>,
    stop: &AtomicBool,
    steer: &horde_engine::sender::FlowSteer,
    reply: &(dyn Fn(&Reply) + Sync),
    f: impl FnOnce() -> T,
) -> T {
    watch(commands, stop, "flow run", Some(steer), reply, f)
}

fn watch<T>(
    commands: Option<Commands>,
    stop: &AtomicBool,
    kind: &str,
    steer: Option<&horde_engine::sender::FlowSteer>,
    reply: &(dyn Fn(&Reply) + Sync),
    f: impl FnOnce() -> T,
) -> T {
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
                        Ok(Command::Flow { flow, rate, idt, size }) if steer.is_some() => retune(steer.expect("checked"), c.id, flow, rate, idt, size, &t0),
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

/// Applies a `flow` command to the running flow `flow`, or says why not.
fn retune(
    steer: &horde_engine::sender::FlowSteer,
    cmd: u64,
    flow: u32,
    rate: Option<f64>,
    idt: Option<String>,
    size: Option<String>,
    t0: &horde_engine::clock::Stopwatch,
) -> Reply {
    let (idt_law, size_law) = match Reply::flow_laws(rate, idt.as_deref(), size.as_deref()) {
        Ok(l) => l,
        Err(m) => return Reply::refused(cmd, format!("flow {flow}: {m}")),
    };
    let change = horde_model::schedule::Retune { idt: idt_law.as_ref().map(|d| d.sampler()), size: size_law.as_ref().map(|d| d.sampler()) };
    // The instant it is handed over: the flow's next departure after the one already drawn
    // follows the new law.
    let real = horde_engine::clock::Clock::real_ns(&horde_sys::clock::System);
    if !steer.retune(flow, change) {
        let ids = steer.ids();
        return Reply::refused(cmd, format!("flow {flow}: no running flow has that id (the flows: {ids:?})"));
    }
    let mut what = Vec::new();
    if let Some(r) = rate {
        what.push(format!("rate {r} pkt/s"));
    } else if let Some(t) = &idt {
        what.push(format!("idt {t}"));
    }
    if let Some(t) = &size {
        what.push(format!("size {t}"));
    }
    Reply::applied(cmd, Some(t0.elapsed().as_secs_f64()), format!("flow {flow}: {}", what.join(", "))).at_real(real)
}

/// A reply as a line for people (standard error).
pub fn say_reply(r: &Reply) {
    say!("horde: {}", r.line());
}
