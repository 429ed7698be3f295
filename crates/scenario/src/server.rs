//! The server side of a run: in this process ([`serve`]), or as a child process
//! ([`crate::child::ServerChild`]: a [`crate::part::Part`] run by `horde child part RUN`, which calls
//! [`serve`]), so that each side has its own descriptor limit (10,000 players are 20,000
//! sockets).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context as _;
use horde_engine::sender::{self, Responder, ServeLimits};
use horde_engine::{SendOptions, SendReport};
use horde_model::scenario::Scenario;
use horde_proto::RunKey;

use crate::{players, Error};

/// A second of departures is counted this long after it ended, so that what was still in
/// flight (delays up to this long) has arrived; later arrivals count as lost live (the
/// report, from the logs, is exact).
pub const LOSS_LAG_S: u64 = 3;

/// What the server side counted of one second of departures (Unix second `sec`): what it
/// sent to the players in it, and what arrived of what the players sent in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSecond {
    pub sec: u64,
    pub down_sent: u64,
    pub up_arrived: u64,
}

/// Seconds the parent keeps of a server side's (it reads them within [`LOSS_LAG_S`] + 1).
const KEEP_SECONDS: usize = 32;

/// The server side's live figures as the players' side reads them: its last second of one-way
/// delays (players → server), ms [median, p99], and its closed seconds.
#[derive(Debug, Default)]
pub struct ServerLive {
    pub delay: Option<[f64; 2]>,
    pub seconds: std::collections::VecDeque<ServerSecond>,
}

impl ServerLive {
    /// Keeps a closed second (the last [`KEEP_SECONDS`]).
    pub fn push(&mut self, s: ServerSecond) {
        if self.seconds.len() == KEEP_SECONDS {
            self.seconds.pop_front();
        }
        self.seconds.push_back(s);
    }

    /// Takes a second's live figures (a delay that is not sane, or a second out of order,
    /// changes nothing).
    pub fn take(&mut self, delay_ms: Option<[f64; 2]>, seconds: &[ServerSecond]) {
        if let Some([p50, p99]) = delay_ms.filter(|[p50, p99]| p50.is_finite() && p99.is_finite() && *p50 >= 0.0 && p99 >= p50) {
            self.delay = Some([p50, p99]);
        }
        for s in seconds {
            if self.seconds.back().is_none_or(|b| b.sec < s.sec) {
                self.push(*s);
            }
        }
    }

    /// The server side's count of Unix second `sec`, if it reported it.
    pub fn second(&self, sec: u64) -> Option<ServerSecond> {
        self.seconds.iter().find(|s| s.sec == sec).copied()
    }
}

/// Shared between whoever reads the server side and the run's progress loop.
pub type LiveServer = Arc<std::sync::Mutex<ServerLive>>;

/// What a server side does once a second with its live figures: the last second's delay
/// percentiles (none when nothing arrived) and the seconds of departures it closed.
/// What else a server side does besides serving: follow the run's commands, report its live
/// delay, hand its log to a tap as it is written.
pub struct ServeHooks<'a> {
    /// The run's stamped changes of the online target (see [`crate::control::follow`]).
    pub commands: Option<&'a crate::control::Commands>,
    pub live: Option<OnLive<'a>>,
    pub log_tap: horde_engine::logger::TapSlot,
    /// The clock the live figures' seconds are read on (by default the machine's).
    pub clock: &'a dyn horde_engine::clock::Clock,
    /// The most players the run may have (its stated limit; none: the scenario's `players`).
    pub limit: Option<u32>,
}

impl Default for ServeHooks<'_> {
    fn default() -> Self {
        ServeHooks { commands: None, live: None, log_tap: Default::default(), clock: &horde_engine::clock::System, limit: None }
    }
}

pub type OnLive<'a> = &'a (dyn Fn(Option<horde_engine::live::Percentiles>, &[ServerSecond]) + Sync);

/// The closed seconds of `counts` from `*next` up to [`LOSS_LAG_S`] before `now_ns` (real);
/// `*next` moves past them. Seconds already gone from the ring are skipped.
pub fn closed_seconds(counts: &horde_engine::live::SecondCounts, next: &mut u64, now_ns: u64) -> Vec<(u64, u64, u64)> {
    let now = now_ns / 1_000_000_000;
    let mut out = Vec::new();
    while *next + LOSS_LAG_S <= now {
        if let Some((sent, arrived)) = counts.read(*next, now) {
            out.push((*next, sent, arrived));
        }
        *next += 1;
    }
    out
}

/// Reads a run key file: a regular file of 64 hex digits (as `horde key` writes it). A key
/// others can read is no secret: a file readable by group or others is refused, as ssh refuses
/// such private keys.
pub fn read_key(p: &Path) -> Result<RunKey, Error> {
    let text = horde_model::files::read_text(p, 4096, "key files").context("reading the run key").map_err(Error::BadInput)?;
    horde_model::files::check_private(p).map_err(|e| Error::BadInput(anyhow::anyhow!("the run key {e}")))?;
    RunKey::parse_hex(&text).map_err(|e| Error::BadInput(anyhow::anyhow!("{}: {e}", p.display())))
}

/// The run's key: the scenario's key file, or a fresh one.
pub fn run_key(sc: &Scenario) -> Result<RunKey, Error> {
    match &sc.key_file {
        Some(p) => read_key(p),
        None => Ok(RunKey::from_bytes(horde_engine::random_secret().context("drawing a run key").map_err(Error::Failed)?)),
    }
}

/// Runs the server side of `sc` until `stop`: listens on `sc.server`, grants every player once
/// (signed hello, known player), sends it its server→client schedule, logs to
/// `out/server.hlog` and writes its report to `out/server.json`. `on_listening` gets the bound
/// address before the first connection is accepted.
pub fn serve(sc: &Scenario, out: &Path, key: RunKey, stop: &AtomicBool, on_listening: impl FnOnce(SocketAddr), hooks: ServeHooks) -> Result<SendReport, Error> {
    let ServeHooks { commands, live, log_tap, clock, limit } = hooks;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display())).map_err(Error::Failed)?;
    let players = Arc::new(players::plan(sc, limit.unwrap_or(sc.players), stop)?);
    let progress = Arc::new(horde_engine::sender::Progress::default());
    let opts = SendOptions {
        log: Some(out.join("server.hlog")),
        log_tap,
        progress: Some(progress.clone()),
        responder: Some(players.clone() as Arc<dyn Responder>),
        spin_ns: sc.spin_us * 1000,
        gso: sc.gso,
        threads: sc.server_threads.unwrap_or_else(default_server_threads),
        key,
        // Every player may connect at once (a run starts all its players together): as many
        // connections may wait for their hello as there are players (at least the default).
        serve_limits: ServeLimits {
            max_players: players.limit as usize,
            max_pending: (sc.players as usize).max(ServeLimits::default().max_pending),
            ..Default::default()
        },
        ..Default::default()
    };
    let done = AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        if let Some(c) = commands {
            s.spawn(|| crate::control::follow(c, &players, &done, stop));
        }
        // The live delay once a second; woken at once when serving ends, so that a stopped
        // server side exits before its parent's SIGTERM (a second signal ends it at once,
        // without its report).
        let reporter = live.map(|live| {
            let (done, progress) = (&done, &progress);
            s.spawn(move || {
                let mut w = horde_engine::live::DelayWindow::default();
                let start = horde_engine::clock::Stopwatch::start();
                let mut next = std::time::Duration::from_secs(1);
                let mut next_sec = clock.real_ns() / 1_000_000_000;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::park_timeout(next.saturating_sub(start.elapsed()));
                    if start.elapsed() >= next {
                        next += std::time::Duration::from_secs(1);
                        let secs: Vec<ServerSecond> = closed_seconds(&progress.seconds, &mut next_sec, clock.real_ns())
                            .into_iter()
                            .map(|(sec, down_sent, up_arrived)| ServerSecond { sec, down_sent, up_arrived })
                            .collect();
                        live(w.take(&progress.delay), &secs);
                    }
                }
            })
        });
        let r = sender::serve(&[sc.server], sc.service.transport, &opts, stop, |b| on_listening(b[0]));
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = &reporter {
            h.thread().unpark();
        }
        r
    });
    let report = report.context("server side").map_err(Error::Failed)?;
    let json = serde_json::to_string_pretty(&report).context("encoding server.json").map_err(Error::Failed)?;
    crate::write_whole(&out.join("server.json"), json.as_bytes()).context("writing server.json").map_err(Error::Failed)?;
    Ok(report)
}

/// Server-side worker threads when the scenario does not say: 2, or 1 on a machine of 2 cores or
/// fewer, where the players' side needs a core of its own: at 10,000 WoW players on 2 cores, two
/// server threads beside the players' one left 71 % of the players' departures and 70 % of the
/// server's within 1 ms, one left 98.6 % and 90 % (bench/RESULTS-engine.md, section 6).
fn default_server_threads() -> usize {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) <= 2 {
        1
    } else {
        2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_figures_are_kept_and_bad_ones_change_nothing() {
        let mut l = ServerLive::default();
        l.take(Some([0.5, 0.4]), &[]);
        l.take(Some([f64::NAN, 1.0]), &[]);
        assert_eq!((l.delay, l.seconds.len()), (None, 0));
        let sec = |sec| ServerSecond { sec, down_sent: 50, up_arrived: 48 };
        l.take(Some([0.25, 1.5]), &[sec(100), sec(99)]); // 99 out of order: dropped
        assert_eq!(l.delay, Some([0.25, 1.5]));
        assert_eq!(l.second(100), Some(sec(100)));
        assert_eq!(l.second(99), None);
        l.take(None, &(101..200).map(sec).collect::<Vec<_>>());
        assert_eq!(l.delay, Some([0.25, 1.5]), "no delay this second keeps the last");
        assert_eq!(l.seconds.len(), KEEP_SECONDS, "bounded");
    }
}
