//! `horde run SCENARIO --agents …`: this process is the controller. The settings come from the
//! flags, the scenario's `[agents]` table and HORDE_CREDENTIALS, resolved once (flags win); the
//! run goes through the fleet as open-loop players or, with `[regulation]`, as regulated
//! circuits.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use horde_agent::controller::{self, ControllerOptions, ServerPlace};
use horde_model::scenario::Scenario;

use horde_scenario::Event;

use super::progress::{Printer, Progress, DEADMAN};
use super::Args;
use crate::{bad_input, Outcome};

/// The controller's settings, resolved once.
struct Settings {
    fleet: crate::cmd::Fleet,
    server: ServerPlace,
}

impl Settings {
    /// From the flags, else the scenario's `[agents]` table (its server agent only when its
    /// list is the one used), else the defaults; every value checked here.
    fn resolve(args: &Args, sc: &Scenario, list: &str) -> Result<Settings, crate::Failure> {
        let table = sc.agents.as_ref();
        let credentials = args.credentials.clone().or_else(|| table.and_then(|a| a.credentials.clone()));
        let deadman = args.deadman.clone().or_else(|| table.and_then(|a| a.deadman.clone())).unwrap_or_else(|| DEADMAN.into());
        let fleet = crate::cmd::Fleet::resolve(list, credentials, &deadman)?;
        let server_agent = args.server_agent.clone().or_else(|| table.filter(|_| args.agents.is_none()).and_then(|t| t.server.clone()));
        let server = match &server_agent {
            None => ServerPlace::Agent(0),
            Some(s) => {
                let a = controller::parse_agents(s).map_err(bad_input)?;
                if a.len() != 1 {
                    return Err(bad_input(anyhow::anyhow!("--server-agent names one agent (got {})", a.len())));
                }
                match fleet.agents.iter().position(|x| x.addr == a[0].addr) {
                    Some(i) => ServerPlace::Agent(i),
                    None => ServerPlace::Dedicated(a[0].addr),
                }
            }
        };
        Ok(Settings { fleet, server })
    }
}

/// Runs `sc` through the agents `list` and prints what the merged report says.
pub fn run(
    args: &Args,
    sc: &Scenario,
    list: &str,
    out: &Path,
    progress: Progress,
    stop: &AtomicBool,
    commands: Option<&horde_scenario::control::Commands>,
) -> Outcome {
    let s = Settings::resolve(args, sc, list)?;
    let printer = Printer::new(sc, progress);
    let events = |e: &Event| printer.event(e);
    let opts = ControllerOptions {
        agents: s.fleet.agents,
        server: s.server,
        credentials: s.fleet.credentials,
        out,
        scenario_dir: args.scenario.parent().map(Path::to_path_buf).unwrap_or_default(),
        deadman: s.fleet.deadman,
        lost_after: s.fleet.deadman,
        events: &events,
        stop,
        commands,
        collect: match args.collect {
            crate::cmd::CollectArg::Logs => horde_agent::controller::Collect::Logs,
            crate::cmd::CollectArg::Summaries => horde_agent::controller::Collect::Summaries,
        },
    };
    let interrupted_early = |e: anyhow::Error| -> Outcome {
        // Ctrl-C before the run started: nothing ran, nothing to report.
        if stop.load(Ordering::Relaxed) {
            say!("horde run: interrupted before the run started ({e:#})");
            return Ok(130);
        }
        Err(e.into())
    };
    if let Some(cfg) = horde_scenario::circuits::Config::of(sc)? {
        let r = horde_agent::circuits::run(sc, &cfg, &opts);
        printer.done();
        let r = match r {
            Ok(r) => r,
            Err(e) => return interrupted_early(e),
        };
        return super::circuits_outcome(&r.summary, out, None, &r.lost);
    }
    let r = controller::run(sc, &opts);
    printer.done();
    let r = match r {
        Ok(r) => r,
        Err(e) => return interrupted_early(e),
    };
    let s = &r.summary;
    if let Some(d) = &s.distributed {
        say_inline!("{}", horde_scenario::report::agents_table(d, "APDUs"));
    }
    crate::cmd::send::print_report(&s.client);
    let note = s.interruption.as_ref().map(|i| format!("\n{}\n", i.note(sc.duration_s))).unwrap_or_default();
    crate::output::out(&format!(
        "{note}{}\nreport: {}/index.html (summary.json, charts/*.svg, agents' logs in agents/)\n",
        super::table(&s.analysis),
        out.display()
    ))?;
    if !r.lost.is_empty() {
        return Err(crate::Failure::from(anyhow::anyhow!(
            "agent(s) {} were lost during the run: the report is partial (summary.json: distributed.missing_players)",
            r.lost.join(", ")
        )));
    }
    Ok(if s.interruption.is_some() { 130 } else { 0 })
}
