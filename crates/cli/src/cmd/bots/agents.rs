//! `horde bots --agents A,B`: this process is the controller; the bots run on the agents
//! (`horde_agent::bots`), against one game server, with one merged report — one run, or with
//! `--steps` the benchmark's steps (each an agents run in `out/step-N/`) and its report.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use horde_agent::controller::Event;

use super::{list, part, print_report, servers_for, Args, Extras};
use crate::{bad_input, Outcome};

pub(super) fn run(args: &Args, out: &Path, stop: &AtomicBool) -> Outcome {
    let refuse = |flag: &str, why: &str| Err(bad_input(anyhow::anyhow!("{flag} cannot be used with --agents: {why}")));
    if args.emu.is_some() {
        return refuse("--emu", "the bots play from the agents' machines (run agents inside the emulated hosts instead)");
    }
    if !args.actions.is_empty() {
        return refuse("--actions", "the agents open no file; give the behaviour model with --service");
    }
    if args.log.is_some() || args.json.is_some() {
        return refuse(if args.log.is_some() { "--log" } else { "--json" }, "the agents' logs and the merged summary.json go into --out DIR");
    }
    let fleet = crate::cmd::Fleet::resolve(args.agents.as_deref().unwrap_or_default(), args.credentials.clone(), &args.deadman)?;
    if args.start_server && !fleet.agents.iter().all(|a| a.addr.ip().is_loopback()) {
        return refuse("--start-server", "the server would listen on this machine's loopback, which agents elsewhere cannot reach; give --server IP:PORT");
    }
    let events = |e: &Event| match e {
        Event::Note(m) => say!("horde bots: {m}"),
        Event::Reply(r) => say!("horde bots: {}", r.line()),
        Event::Planned { .. } | Event::Tick(_) => {}
    };
    let run = |out: &Path, addrs: &[std::net::SocketAddr], n: usize| {
        let run = horde_agent::bots::BotsRun {
            agents: fleet.agents.clone(),
            credentials: fleet.credentials.clone(),
            out,
            job: part(args, addrs, n),
            duration: args.duration,
            seed: args.seed,
            deadman: fleet.deadman,
            events: &events,
            stop,
        };
        horde_agent::bots::run(&run)
    };
    if !args.steps.is_empty() {
        // each step a whole agents run; the servers' CPU over the step, the agents' over theirs
        let mut step = |addrs: &[std::net::SocketAddr], servers: &[super::Server], n: usize| {
            let dir = out.join(format!("step-{n}"));
            std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
            let cpu = || servers.iter().filter_map(|s| super::proc_cpu(s.child.id())).sum::<f64>();
            let (t0, c0) = (horde_engine::clock::Stopwatch::start(), cpu());
            let o = run(&dir, addrs, n)?;
            let secs = t0.elapsed().as_secs_f64().max(1e-3);
            let server_cpu_pct = (!servers.is_empty()).then(|| (cpu() - c0) / secs * 100.0);
            let bots_cpu_pct = o.agents.iter().map(|a| a.stats.cpu_s).sum::<f64>() / secs * 100.0;
            Ok((o.report, Extras { server_cpu_pct, server_cpu_max_pct: server_cpu_pct, bots_cpu_pct, ..Default::default() }))
        };
        say!("horde bots: the benchmark's bots on {} agent(s)", fleet.agents.len());
        return super::bench::benchmark_with(args, out, stop, &mut step);
    }
    let n = args.players;
    let (servers, addrs) = servers_for(args, out, n)?;
    say!("horde bots: {n} bot(s) on {} agent(s) against {}, joining over {:?}, playing {:?}", fleet.agents.len(), list(&addrs), args.ramp, args.duration);
    let o = run(out, &addrs, n)?;
    drop(servers);
    print_report(&o.report);
    say!("{}", agents_table(&o.agents));
    say!("report: {}/summary.json (agents' logs in agents/)", out.display());
    Ok(if o.report.interrupted {
        130
    } else if o.partial || o.report.entered < n {
        1
    } else {
        0
    })
}

fn agents_table(rows: &[horde_agent::bots::BotsAgentRow]) -> String {
    let mut t = format!("{:<22} {:<11} {:>7} {:>10} {:>10} {}\n", "agent", "bots", "entered", "pkts sent", "received", horde_scenario::AgentStats::HEADER);
    for a in rows {
        let ids = format!("{}..{}", a.bots.start, a.bots.end);
        t.push_str(&format!("{:<22} {:<11} {:>7} {:>10} {:>10} {}\n", a.name, ids, a.entered, a.packets_sent, a.packets_received, a.stats.cells()));
    }
    t
}
