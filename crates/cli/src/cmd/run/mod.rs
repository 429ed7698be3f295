//! `horde run`: a scenario on this machine (its server side a child process running its
//! `Part`), or through agents (`agents.rs`).

mod agents;
mod progress;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use horde_model::scenario::Scenario;
use horde_scenario::{Event, Overrides, RunOptions, ServerSide};
use horde_stats::game::GameAnalysis;

pub use progress::{Printer, Progress, ProgressArgs, ProgressMode};

use crate::{bad_input, Outcome};

/// Runs a scenario: every player is one connection (TCP, or a UDP socket pair for UDP services)
/// carrying its client→server APDUs, and Horde's server side sends each player's server→client
/// APDUs back on it; both switch models when the player's category changes. Writes logs and a
/// report directory. With a `[regulation]` table, every player is a regulated virtual-world
/// circuit instead (docs/regulation.md).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file, or a report directory to run its experiment again (its scenario.toml as it ran, with the service and topology files it read; same seed, same departures). A scenario file is TOML: service, players, duration, seed, start_hour, join, server, variables, threads, server_threads, spin_us, [emu], [agents], [regulation]; see examples/wow.toml, examples/wow-access.toml, examples/opensim-regulated.toml)
    #[arg(value_name = "SCENARIO")]
    pub scenario: PathBuf,
    /// Report directory (default: horde-out/<scenario file name>-<unix time>)
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Override the scenario's player count (every player the run may have online)
    #[arg(short = 'n', long)]
    pub players: Option<u32>,
    /// How many of the players are online at the start (default: the scenario's `online`, else all); change it while the run goes on with --commands
    #[arg(long, value_name = "N")]
    pub online: Option<u32>,
    /// Override the scenario's duration, e.g. 30s
    #[arg(short = 't', long, short_alias = 'd', value_name = "DURATION")]
    pub duration: Option<String>,
    /// Override the scenario's seed
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the scenario's `gso`: UDP departures due together as GSO super-datagrams for `auto` bulk flows only (the default), `on` every flow, `off` none
    #[arg(long, value_enum, value_name = "auto|on|off")]
    pub gso: Option<super::send::GsoArg>,
    #[command(flatten)]
    pub progress: super::run::ProgressArgs,
    #[command(flatten)]
    pub commands: super::commands::CommandArgs,
    /// Run through agents (`horde agent` on each load machine): comma-separated HOST:PORT[*WEIGHT], dns:NAME:PORT (every address of a name, e.g. a Kubernetes headless service) or @FILE. Players are sharded over them by id, in proportion to the weights
    #[arg(long, value_name = "LIST")]
    pub agents: Option<String>,
    /// With --agents (or the scenario's [agents]): the agent that runs the server side, HOST:PORT (one of --agents, which then also runs players, or one that runs only the server side; default: the first of --agents)
    #[arg(long, value_name = "ADDR")]
    pub server_agent: Option<String>,
    /// With --agents: the controller's credentials directory with ca.pem, controller.pem and controller.key (from `horde agent keygen`)
    #[arg(long, value_name = "DIR", env = "HORDE_CREDENTIALS")]
    pub credentials: Option<PathBuf>,
    /// With --agents: an agent that hears nothing from the controller for this long stops its traffic, and a running agent silent this long is reported lost (1s..60s; default: the [agents] table's deadman, else 3s)
    #[arg(long, value_name = "DURATION")]
    pub deadman: Option<String>,
    /// With --agents: what the agents send after the run — `logs` (every record; the report is computed over all of them) or `summaries` (one mergeable summary per agent: exact counts, loss and rates, percentiles and KS distances within the bounds the report states; a fraction of the bytes and of the controller's memory). Either way the agents summarise as they go, so --progress json and the console show per-category loss and delay live
    #[arg(long, value_enum, default_value_t = super::CollectArg::Logs)]
    pub collect: super::CollectArg,
    /// Attach a live console (`horde ui`'s) at ADDR, e.g. 127.0.0.1:7070 (loopback; port 0: any free one): it shows this run's events and takes its commands; its URL, with the token, is printed
    #[arg(long, value_name = "ADDR")]
    pub ui: Option<SocketAddr>,
}

impl From<horde_scenario::Error> for crate::Failure {
    fn from(e: horde_scenario::Error) -> Self {
        crate::Failure { code: e.exit_code(), err: e.into_anyhow(), quiet: false }
    }
}

pub fn load(args: &Args) -> Result<Scenario, crate::Failure> {
    let mut sc = Scenario::load(&args.scenario).map_err(bad_input)?;
    let duration_ns = args.duration.as_deref().map(horde_scenario::duration_flag).transpose()?;
    let o = Overrides { players: args.players, online: args.online, duration_ns, seed: args.seed };
    horde_scenario::apply_overrides(&mut sc, &o)?;
    if let Some(g) = args.gso {
        sc.gso = g.into();
    }
    Ok(sc)
}

pub fn run(mut args: Args, stop: &AtomicBool) -> Outcome {
    // A report directory runs its experiment again: its scenario.toml names only files beside it.
    if args.scenario.is_dir() {
        let inside = args.scenario.join("scenario.toml");
        if !inside.is_file() {
            return Err(bad_input(anyhow::anyhow!(
                "{}: a directory, and not a Horde report (it has no scenario.toml): give a scenario file, or a report directory to run its experiment again",
                args.scenario.display()
            )));
        }
        args.scenario = inside;
    }
    let sc = load(&args)?;
    run_loaded(&args, sc, stop)
}

/// Runs a loaded scenario (its overrides applied) as `args` say: report directory, progress,
/// commands, console, agents.
pub fn run_loaded(args: &Args, sc: Scenario, stop: &AtomicBool) -> Outcome {
    // a report's scenario.toml is named after its report directory
    let name = match args.scenario.file_stem().map(|s| s.to_string_lossy().into_owned()) {
        Some(s) if s == "scenario" && args.scenario.with_file_name("run.json").is_file() => {
            args.scenario.parent().and_then(|d| d.file_name()).map_or(s, |d| format!("{}-again", d.to_string_lossy()))
        }
        Some(s) => s,
        None => "run".into(),
    };
    let out = args.out.clone().unwrap_or_else(|| super::default_out(&name));
    super::report_dir(&out)?;
    let progress = Progress::of(&args.progress)?;
    let (console, commands) = match args.ui {
        Some(addr) => {
            let (c, commands) = super::ui::attach(addr, &sc, &out, &args.commands)?;
            (Some(c), Some(commands))
        }
        None => (None, args.commands.open()?),
    };
    let through_agents = args.agents.is_some() || sc.agents.is_some();
    if args.collect == super::CollectArg::Summaries && (!through_agents || sc.regulation.is_some()) {
        return Err(bad_input(anyhow::anyhow!(
            "--collect summaries is for a scenario's players run through agents (--agents LIST or an [agents] table, no [regulation]): a run on this machine analyses its own logs, and regulated circuits send theirs"
        )));
    }
    // `--agents` (or the scenario's `[agents]` table): this process is the controller.
    let r = if let Some(list) = args.agents.clone().or_else(|| sc.agents.as_ref().map(|a| a.list.join(","))) {
        agents::run(args, &sc, &list, &out, progress, stop, commands.as_ref())
    } else if args.server_agent.is_some() {
        Err(bad_input(anyhow::anyhow!("--server-agent needs agents: --agents LIST, or an [agents] table in the scenario")))
    } else {
        execute(&sc, Some(&args.scenario), &out, progress, stop, commands.as_ref())
    };
    if let Some(c) = console {
        super::ui::finished(c, &r);
    }
    r
}

/// Runs a scenario through the library and prints what it reports.
pub fn execute(
    sc: &Scenario,
    scenario: Option<&Path>,
    out: &Path,
    progress: Progress,
    stop: &AtomicBool,
    commands: Option<&horde_scenario::control::Commands>,
) -> Outcome {
    let printer = Printer::new(sc, progress);
    let events = |e: &Event| printer.event(e);
    let opts =
        RunOptions { out, scenario_file: scenario, server: ServerSide::Child, shard: None, events: &events, stop, commands, clock: &horde_sys::clock::System };
    if let Some(cfg) = horde_scenario::circuits::Config::of(sc)? {
        return circuits(sc, &cfg, &opts, &printer);
    }
    let r = horde_scenario::execute(sc, &opts);
    printer.done();
    let r = r?;
    let s = &r.summary;
    let u = &s.resources;
    say!(
        "  resources: client process {:.1} s CPU ({:.0} % of the run), peak RSS {} MB; server process {:.1} s CPU ({:.0} %), peak RSS {} MB",
        u.client_cpu_s,
        u.client_cpu_s / sc.duration_s * 100.0,
        u.client_max_rss_kb / 1024,
        u.server_cpu_s,
        u.server_cpu_s / sc.duration_s * 100.0,
        u.server_max_rss_kb / 1024
    );
    if let Some(links) = &s.emulated_links {
        say_inline!("{}", horde_emu::fwd::links_table(links));
    }
    crate::cmd::send::print_report(&s.client);
    if s.mismatched > 0 {
        say!("  warning: {} APDU(s) differed from the sender's regenerated schedule: a framing or pacing bug; please report it", s.mismatched);
    }
    let note = s.interruption.as_ref().map(|i| format!("\n{}\n", i.note(sc.duration_s))).unwrap_or_default();
    crate::output::out(&format!(
        "{note}{}\nreport: {}/index.html (summary.json, charts/*.svg, logs client.hlog and server.hlog)\n",
        table(&s.analysis),
        out.display()
    ))?;
    if let Some(status) = &r.server_died {
        let i = s.interruption.as_ref().map(|i| (i.at_s, i.analysed_s)).unwrap_or_default();
        return Err(crate::Failure::from(anyhow::anyhow!(
            "the server side exited unexpectedly ({status}) {:.1} s into the run; the report covers the first {:.1} s",
            i.0,
            i.1
        )));
    }
    Ok(if r.interrupted() { 130 } else { 0 })
}

/// A regulated run ([regulation]): its circuits, then their totals.
fn circuits(sc: &Scenario, cfg: &horde_scenario::circuits::Config, opts: &RunOptions, printer: &Printer) -> Outcome {
    let r = horde_scenario::regulated::execute(sc, cfg, opts);
    printer.done();
    let r = r?;
    circuits_outcome(&r.summary, opts.out, r.server_died.as_deref(), &[])
}

/// What a regulated run's report says, on one machine or through agents (`lost`: agents lost
/// during the run).
fn circuits_outcome(s: &horde_scenario::circuit_report::CircuitSummary, out: &Path, server_died: Option<&str>, lost: &[String]) -> Outcome {
    let note = s.interruption.as_ref().map(|i| format!("\nstopped early: {i}\n")).unwrap_or_default();
    let agents = s.distributed.as_ref().map(|d| horde_scenario::report::agents_table(d, "packets")).unwrap_or_default();
    crate::output::out(&format!(
        "{note}\n{agents}{}\nreport: {}/index.html (summary.json, circuits.csv, charts/*.svg)\n",
        horde_scenario::circuit_report::text(s),
        out.display()
    ))?;
    if let Some(status) = server_died {
        return Err(crate::Failure::from(anyhow::anyhow!("the server side exited unexpectedly ({status}); the report covers the time before")));
    }
    if !lost.is_empty() {
        return Err(crate::Failure::from(anyhow::anyhow!(
            "agent(s) {} were lost during the run: the report is partial (summary.json: distributed.missing_players)",
            lost.join(", ")
        )));
    }
    if s.totals.joined == 0 {
        return Err(crate::Failure::from(anyhow::anyhow!(
            "no circuit joined: {}",
            s.circuits.iter().find_map(|c| c.error.clone()).unwrap_or_else(|| "the run ended first".into())
        )));
    }
    Ok(if s.interruption.is_some() { 130 } else { 0 })
}

fn table(g: &GameAnalysis) -> String {
    format!("\n{}", horde_stats::game::table(g).text(true))
}
