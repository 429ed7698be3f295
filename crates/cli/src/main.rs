//! `horde`: one binary, one subcommand per job. Exit codes: 0 success; 1 a run failed
//! (I/O, a refused connection); 2 bad usage or bad input (flags, flow files, logs);
//! 130 interrupted by SIGINT/SIGTERM after logs were flushed.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};

#[macro_use]
mod output;
mod cmd;

/// Horde: behaviour-driven traffic generator and network-emulation testbed for online games.
#[derive(Parser)]
#[command(name = "horde", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once
enum Command {
    /// Runs the embedded default scenario: 300 WoW players on loopback for 30 s, then a summary and a report.
    Demo(cmd::demo::Args),
    /// Sends one flow from flags, or many from a flow file, with microsecond pacing.
    Send(cmd::send::Args),
    /// Receives on UDP/TCP ports, timestamps and logs every packet, echoes on request.
    Recv(cmd::recv::Args),
    /// The live log server: `send`/`recv --log-server` stream their logs to it as they run (authenticated by the run key).
    Logd(cmd::logd::Args),
    /// Asks a Horde endpoint at a UDP address what it is (version, role, capacity, round trip, clock offset) without starting a flow.
    Discover(cmd::discover::Args),
    /// Computes rates, delay, jitter, loss and more from sender and/or receiver logs.
    Decode(cmd::decode::Args),
    /// Fits a service file (behaviour + traffic model) from a packet capture of a real game; compares captures and models.
    Fit(cmd::fit::Args),
    /// Sets report directories side by side against the first: each difference, and whether it is beyond the runs' own noise.
    Compare(cmd::compare::Args),
    /// Lists the built-in traffic presets and the distribution syntax.
    Presets,
    /// Lists the service repository (behaviour + traffic models), shows or checks a service.
    Services(cmd::services::Args),
    /// Runs the behaviour process alone: players' category changes, per-stay rows and a summary.
    Behave(cmd::behave::Args),
    /// Runs a scenario: many players, real two-way traffic following their behaviour, and a report.
    Run(cmd::run::Args),
    /// Emulated environment: topologies of namespace hosts, switches, routers and impaired links (root).
    Emu(cmd::emu::Args),
    /// Automated Quake 3 players against a real OpenArena/ioquake3 server: response rate and response time.
    Bots(cmd::bots::Args),
    /// Makes a run key (for --key-file and scenarios' key_file): hellos without it are dropped.
    Key(cmd::key::Args),
    /// Distributed runs: the agent daemon on each load machine, and `agent keygen` for the cluster's credentials.
    Agent(cmd::agent::Args),
    /// One regulated virtual-world circuit (OpenSim-like LLUDP): `serve` regulates an avatar's traffic at the rate `join`'s throttle asks for; `sim` runs a throttle in virtual time.
    Circuit(cmd::circuit::Args),
    /// The live console: start scenarios, watch their events and steer them from a browser (loopback, a token per start).
    Ui(cmd::ui::Args),
    /// Prints shell completions for bash, zsh or fish (`horde completions bash > …`; README's Install says where).
    Completions(cmd::manual::CompletionsArgs),
    /// Prints a manual page (`horde man run | man -l -`), or writes them all with --out DIR.
    Man(cmd::manual::ManArgs),
    /// (internal) A task horde hands itself on standard input: a part of a run, an experiment's link emulator.
    #[command(hide = true)]
    Child(cmd::child::Args),
}

/// An error with the exit code it should produce.
pub struct Failure {
    pub code: u8,
    pub err: anyhow::Error,
    /// Nothing to report (standard output was closed by its reader).
    pub quiet: bool,
}

impl Failure {
    /// Standard output was closed early (`| head`): not an error, exit 0 without a message.
    pub fn closed_pipe() -> Failure {
        Failure { code: 0, err: anyhow::anyhow!("standard output closed"), quiet: true }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(err: anyhow::Error) -> Self {
        Failure { code: 1, err, quiet: false }
    }
}

/// Marks an error as bad input (exit code 2).
pub fn bad_input(err: impl Into<anyhow::Error>) -> Failure {
    Failure { code: 2, err: err.into(), quiet: false }
}

pub type Outcome = Result<u8, Failure>;

fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal ends the process at once; the first asks for a clean stop.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone());
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    stop
}

/// Whether an error is standard output closed by its reader (`horde behave --out - | head`).
fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("HORDE_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let stop = stop_flag();
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a, &stop),
        Command::Send(a) => cmd::send::run(a, &stop),
        Command::Recv(a) => cmd::recv::run(a, &stop),
        Command::Logd(a) => cmd::logd::run(a, &stop),
        Command::Discover(a) => cmd::discover::run(a),
        Command::Decode(a) => cmd::decode::run(a),
        Command::Fit(a) => cmd::fit::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Presets => cmd::presets::run(),
        Command::Services(a) => cmd::services::run(a),
        Command::Behave(a) => cmd::behave::run(a, &stop),
        Command::Run(a) => cmd::run::run(a, &stop),
        Command::Emu(a) => cmd::emu::run(a, stop.clone()),
        Command::Key(a) => cmd::key::run(a),
        Command::Bots(a) => cmd::bots::run(a, &stop),
        Command::Agent(a) => cmd::agent::run(a, &stop),
        Command::Circuit(a) => cmd::circuit::run(a, &stop),
        Command::Ui(a) => cmd::ui::run(a, &stop),
        Command::Child(a) => cmd::child::run(a, &stop),
        Command::Completions(a) => cmd::manual::completions(a, Cli::command()),
        Command::Man(a) => cmd::manual::man(a, Cli::command()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) if f.quiet || is_closed_pipe(&f.err) => ExitCode::from(0),
        Err(f) => {
            say!("horde: error: {:#}", f.err);
            ExitCode::from(f.code)
        }
    }
}
