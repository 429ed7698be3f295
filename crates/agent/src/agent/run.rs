//! A run on the agent: its part prepared and run by `horde_scenario::run_part` (the one way a
//! part runs, whatever its kind), in the agent's run directory, on the hosts of its emulated
//! network; its logs streamed to the controller.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use horde_scenario::run_part::{self, Done, Running};

use super::{cpu_s, write, AgentOptions};
use crate::metrics::Metrics;
use crate::msg::{self, Part, ToController};

/// A prepared or running part, and what the agent keeps beside it.
pub(super) struct Run {
    pub(super) part: Running,
    pub(super) cpu0: f64,
    pub(super) t0: Instant,
    /// A scenario's live summary (its players and server side here; not regulated circuits).
    pub(super) live: Option<horde_scenario::live_digest::Live>,
}

impl Run {
    /// Sets the online target on this agent's sides of the run (see [`Running::steer`]);
    /// `owners`: who owns each range of players, for the live summary.
    pub(super) fn steer(&self, online: u32, at_ns: u64, start: Option<std::ops::Range<u32>>, owners: &[(std::ops::Range<u32>, i64)]) -> anyhow::Result<()> {
        if let Some(l) = &self.live {
            l.owners(owners);
        }
        self.part.steer(online, at_ns, start)
    }
}

/// Stops what still runs, waits for it, and removes the run's directory (Horde's own state)
/// unless asked to keep it.
pub(super) fn finish_run(r: Run, rx: &mpsc::Receiver<Done>, opts: &AgentOptions, log: &(dyn Fn(&str) + Sync)) {
    let dir = r.part.dir.clone();
    r.part.finish();
    while rx.try_recv().is_ok() {}
    if !opts.keep {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            log(&format!("removing {}: {e}", dir.display()));
        }
    }
}

/// Prepares a part in the agent's run directory: with `[emu]`, on the hosts of this machine's
/// part of the emulated network; a flows part's logs also streamed to a log server if asked.
pub(super) fn prepare(a: Part, opts: &AgentOptions, metrics: &Arc<Metrics>, tx: mpsc::Sender<Done>) -> anyhow::Result<Run> {
    let mut env = run_part::Env::new(opts.dir.join(&a.run_id), tx);
    if let horde_scenario::part::Work::Scenario(part) = &a.work {
        // [emu] through agents: the hosts of this machine's part the controller placed it in
        let emu = part.scenario.resolve(a.shape.duration_ns, a.shape.seed).map_err(anyhow::Error::msg)?.emu.is_some();
        match (&part.emu, emu) {
            (Some(e), true) => {
                env.clients_ns = super::emu::host_namespaces(opts, &e.exp, &e.clients).map_err(anyhow::Error::msg)?.into_iter().map(Arc::new).collect();
                env.server_ns = super::emu::host_namespaces(opts, &e.exp, e.server.as_slice()).map_err(anyhow::Error::msg)?.into_iter().next();
            }
            (None, true) => anyhow::bail!(
                "a scenario with [emu] goes through agents only placed in the emulated network they built (`horde run --agents` with agents started with --emu)"
            ),
            (Some(_), false) => anyhow::bail!("an emulated placement for a scenario without [emu]"),
            (None, false) => {}
        }
    }
    if let horde_scenario::part::Work::Flows(job) = &a.work {
        if let Some(l) = job.log_server.clone() {
            let k = horde_proto::RunKey::parse_hex(&l.key).map_err(|e| anyhow::anyhow!("log server key: {e}"))?;
            env.log_server = Some(Box::new(move |role, suffix| {
                let s = crate::logstream::LogStream::connect(l.addr, &k, role, &format!("{}-{suffix}", l.name))?;
                Ok(horde_engine::logger::TapSlot::new(Box::new(s)))
            }));
        }
    }
    let live = Arc::new(Mutex::new(None));
    let slot = live.clone();
    env.planned = Some(Box::new(move |sc, players| {
        let l = horde_scenario::live_digest::Live::new(sc, players);
        let taps = (l.tap(horde_model::service::Direction::Down), l.tap(horde_model::service::Direction::Up));
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(l);
        taps
    }));
    let dir = env.dir.clone();
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let part = match run_part::prepare(a, env) {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    metrics.players.store(part.players(), Ordering::Relaxed);
    metrics.runs.fetch_add(1, Ordering::Relaxed);
    *metrics.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(part.progress.clone());
    let live = live.lock().unwrap_or_else(|p| p.into_inner()).take();
    Ok(Run { part, cpu0: cpu_s(), t0: Instant::now(), live })
}

/// Starts the client side of a prepared run at `at_ns` (the agent's clock).
pub(super) fn start(r: &mut Run, at_ns: u64, metrics: &Arc<Metrics>) {
    metrics.running.store(true, Ordering::Relaxed);
    r.cpu0 = cpu_s();
    r.t0 = Instant::now();
    r.part.start(at_ns);
}

/// Streams the run's logs: each as LogBegin, deflate pieces, LogEnd.
pub(super) fn send_logs(tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>, r: &Run) -> anyhow::Result<()> {
    send_files(tls, r, &r.part.log_files())
}

/// Streams `files` of the run's directory to the controller (deflate), then says how many.
pub(super) fn send_files(tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>, r: &Run, files: &[&str]) -> anyhow::Result<()> {
    use flate2::write::DeflateEncoder;
    let mut sent = 0u32;
    for &f in files {
        let path = r.part.dir.join(f);
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) => {
                write(tls, &msg::encode(&ToController::Error { message: format!("{f}: {e}") }))?;
                continue;
            }
        };
        let bytes = file.metadata()?.len();
        write(tls, &msg::encode(&ToController::LogBegin { file: f.into(), bytes }))?;
        let mut enc = DeflateEncoder::new(Vec::with_capacity(msg::LOG_PIECE * 2), flate2::Compression::fast());
        let mut chunk = vec![0u8; 1 << 20];
        let mut transferred = 0u64;
        loop {
            let n = file.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            enc.write_all(&chunk[..n])?;
            if enc.get_ref().len() >= msg::LOG_PIECE {
                let out = std::mem::take(enc.get_mut());
                for piece in out.chunks(msg::LOG_PIECE) {
                    write(tls, &msg::encode_log(piece))?;
                    transferred += piece.len() as u64;
                }
            }
        }
        let out = enc.finish()?;
        for piece in out.chunks(msg::LOG_PIECE) {
            write(tls, &msg::encode_log(piece))?;
            transferred += piece.len() as u64;
        }
        write(tls, &msg::encode(&ToController::LogEnd { file: f.into(), bytes, transferred }))?;
        sent += 1;
    }
    write(tls, &msg::encode(&ToController::Collected { files: sent }))?;
    Ok(())
}
