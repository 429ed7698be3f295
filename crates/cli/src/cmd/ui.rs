//! `horde ui`: the live console (`horde-console`) — start scenarios, watch their events and
//! steer them from a browser; and `horde run … --ui ADDR`, the same console attached to one run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use horde_console::hub::{Hub, RunState};
use horde_model::scenario::Scenario;
use horde_scenario::control::{Command, Commands};
use horde_scenario::EventLine;

use crate::{bad_input, Outcome};

/// Where a run's events go besides its printer: the console it is attached to (`--ui`).
pub static TEE: std::sync::OnceLock<Tee> = std::sync::OnceLock::new();

/// A receiver of a run's events.
pub type Tee = Box<dyn Fn(&horde_scenario::Event) + Send + Sync>;

/// How long the console waits for its runs to stop and write their reports when it is stopped.
const DRAIN: Duration = Duration::from_secs(90);

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the console listens (loopback only; port 0: any free one). Open the URL it prints: it carries this start's token
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// Report directories of the runs it starts, and where it lists past runs from
    #[arg(long, value_name = "DIR", default_value = "horde-out")]
    pub runs: PathBuf,
}

pub fn run(a: Args, stop: &AtomicBool) -> Outcome {
    let hub = Arc::new(Hub::new());
    let opts = horde_console::Options { listen: a.listen, runs_dir: a.runs.clone(), can_start: true };
    let console = horde_console::start(opts, hub.clone()).map_err(bad_input)?;
    say!("horde ui: the console is at {}", console.url);
    say!("horde ui: runs write their reports under {}/; Ctrl-C stops the console (its runs stop first and report)", a.runs.display());
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let running: Vec<u32> = hub.list().into_iter().filter(|r| r.state == RunState::Running).map(|r| r.id).collect();
    if !running.is_empty() {
        say!("horde ui: stopping {} run(s); each writes what it measured (Ctrl-C again to quit at once)", running.len());
        for id in &running {
            let _ = hub.command(*id, Command::Stop {});
        }
        let t = horde_sys::clock::Stopwatch::start();
        while hub.list().iter().any(|r| r.state == RunState::Running) && t.elapsed() < DRAIN {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    console.stop();
    Ok(0)
}

/// Starts a console at `addr` attached to one run of `sc` (report in `out`): the run's events go
/// to it, its commands come from it and from `--commands`. Returns the console and the run's
/// command channel.
pub fn attach(
    addr: SocketAddr,
    sc: &Scenario,
    out: &Path,
    from_flag: &super::commands::CommandArgs,
) -> Result<(horde_console::Console, Commands), crate::Failure> {
    let hub = Arc::new(Hub::new());
    let runs_dir = out.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let console = horde_console::start(horde_console::Options { listen: addr, runs_dir, can_start: false }, hub.clone()).map_err(bad_input)?;
    let (tx, commands) = Commands::channel();
    from_flag.feed(tx.clone())?;
    let tx = std::sync::Mutex::new(tx);
    let sink =
        Box::new(move |c: Command| tx.lock().unwrap_or_else(|p| p.into_inner()).send(Ok(c)).map_err(|_| "the run has stopped reading commands".to_string()));
    let id = hub.add(&sc.name, &out.display().to_string(), true, Some(sink)).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (name, h) = (sc.name.clone(), hub.clone());
    let _ = TEE.set(Box::new(move |e| h.push(id, &EventLine::of(&name, e))));
    say!("horde run: the console is at {}", console.url);
    Ok((console, commands))
}

/// The attached run ended with `r`: the console's stream says so before the console stops.
pub fn finished(console: horde_console::Console, r: &Outcome) {
    let code = match r {
        Ok(c) => *c,
        Err(f) => f.code,
    };
    for info in console.hub.list() {
        console.hub.finish(info.id, code);
    }
    // Open streams get the last lines before the console goes.
    std::thread::sleep(Duration::from_millis(300));
    console.stop();
}
