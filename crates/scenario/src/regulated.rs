//! A regulated run end to end (a scenario with a `[regulation]` table): plan, place, the server
//! side, every player's circuit on the client side ([`crate::circuits`]), then the report
//! ([`crate::circuit_report`]).

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use horde_model::scenario::Scenario;

use crate::circuits::Config;
use crate::Error;

/// What a regulated run produced.
pub struct CircuitOutcome {
    pub summary: crate::circuit_report::CircuitSummary,
    /// `Some(status)`: the server side died during the run.
    pub server_died: Option<String>,
    /// Stopped by a signal.
    pub interrupted: bool,
}

/// Runs a scenario with a `[regulation]` table: plan, place (loopback or `[emu]`), the server
/// side as a child (or a thread), every player's circuit on the client side, then the report in
/// `opts.out` (summary.json, circuits.csv, charts, index.html).
pub fn execute(sc: &Scenario, cfg: &Config, opts: &crate::RunOptions) -> Result<CircuitOutcome, Error> {
    use crate::execute::{prepare, progress, Prepared, Server};
    use std::sync::Mutex;
    let failed = Error::Failed;
    if opts.shard.is_some() {
        return Err(Error::BadInput(anyhow::anyhow!("{}: regulated circuits run on one machine (no shards)", sc.name)));
    }
    let out = opts.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating report directory {}", out.display())).map_err(failed)?;
    let prepared = prepare(sc, opts)?;
    let (server, addr) = Server::start(&opts.server, &prepared)?;
    let Prepared { players, shard, emu, timeline, part, .. } = prepared;
    (opts.events)(&crate::Event::Note(format!("{} circuits, {} throttle, {} regulator, server side on {addr}", sc.players, cfg.throttle, cfg.mode.name())));
    // every player's circuit: a part of the run in this process
    let (tx, ended) = std::sync::mpsc::channel();
    let live: crate::run_part::CircuitsLive = Default::default();
    let mut env = crate::run_part::Env::new(out.to_path_buf(), tx);
    env.clients_ns = emu.as_ref().map(|e| e.clients.clone()).unwrap_or_default();
    env.circuits_live = Some(live.clone());
    let mut clients = crate::run_part::prepare(part.clients(shard, addr), env).map_err(failed)?;
    let client_progress = clients.progress.clone();
    clients.start(0);
    let done = AtomicBool::new(false);
    let server = Mutex::new(server);
    let died: Mutex<Option<(String, u64)>> = Mutex::new(None);
    let steer = crate::steer::Steer::new(opts.commands, None, &client_progress, emu.as_ref(), opts.events, timeline, opts.clock);
    let ran = std::thread::scope(|s| {
        let (done_r, p, pl, live) = (&done, &client_progress, &players, &live);
        // each progress line carries the circuits' last closed second (and no open-loop model
        // rates: circuits send what their throttles ask for, not the service's traffic model)
        let events = move |e: &crate::Event| match e {
            crate::Event::Tick(snap) => {
                let mut snap = snap.clone();
                snap.circuits = live.lock().unwrap_or_else(|p| p.into_inner()).clone().map(Box::new);
                snap.category_rates.clear();
                (opts.events)(&crate::Event::Tick(snap))
            }
            e => (opts.events)(e),
        };
        s.spawn(move || progress(sc, pl, p, &Default::default(), done_r, &events, opts.clock, None));
        s.spawn(|| crate::steer::watch(&server, opts.stop, &clients.stop, &done, &died, &steer));
        let r = ended.recv().map_err(|_| anyhow::anyhow!("the circuits ended without a report")).and_then(|d| d.report.map_err(anyhow::Error::msg));
        done.store(true, Ordering::Relaxed);
        r
    });
    clients.finish();
    let server = server.into_inner().unwrap_or_else(|p| p.into_inner());
    let died = died.into_inner().unwrap_or_else(|p| p.into_inner());
    let served = server.finish_circuits(out, died.is_some()).map_err(failed)?.unwrap_or_default();
    ran.context("client side").map_err(failed)?;
    let file = out.join(crate::circuits::CLIENT_FILE);
    let text = horde_model::files::read_text(&file, 1 << 30, "the circuits' report").map_err(|e| failed(anyhow::anyhow!("{e}")))?;
    let clients: Vec<crate::circuits::JoinedCircuit> = serde_json::from_str(&text).context("parsing the circuits").map_err(failed)?;
    let commanded = steer.commanded.load(Ordering::Relaxed);
    let interrupted = opts.stop.load(Ordering::Relaxed) || commanded;
    let interruption = match (&died, interrupted) {
        (Some((status, _)), _) => Some(format!("the server side exited ({status})")),
        (None, true) if commanded => Some("stopped by a command".into()),
        (None, true) => Some("interrupted".into()),
        _ => None,
    };
    let summary = crate::circuit_report::summarise(sc, cfg, &clients, &served, interruption);
    let links = emu.as_ref().and_then(|e| e.links()).map(|l| horde_emu::fwd::links_table(&l));
    crate::circuit_report::write(sc, out, &players.segments, &summary, links.as_deref(), &clients, &served).map_err(failed)?;
    drop(emu);
    Ok(CircuitOutcome { summary, server_died: died.map(|d| d.0), interrupted })
}
