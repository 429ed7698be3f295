//! The server side of a run: in this process ([`serve`]), or as a child process
//! ([`ServerChild`]: `horde run FILE --serve-only`, which calls [`serve`]), so that each side has
//! its own descriptor limit (10,000 players are 20,000 sockets).

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

/// The environment variable that hands the run key to the server-side child (not its command
/// line: /proc/PID/cmdline is world-readable, /proc/PID/environ only to the same user).
pub const RUN_KEY_ENV: &str = "HORDE_RUN_KEY";

/// The line a server-side child prints on standard output once it listens.
pub const SERVE_BANNER: &str = "horde-serve: listening on ";
/// The line a server-side child prints once a second for the live delay of what it received:
/// `horde-serve: delay P50_MS P99_MS`.
pub const SERVE_DELAY: &str = "horde-serve: delay ";
/// The line a server-side child prints for each second of departures it closed (see
/// [`LOSS_LAG_S`]): `horde-serve: second UNIX_SECOND DOWN_SENT UP_ARRIVED`.
pub const SERVE_SECOND: &str = "horde-serve: second ";

/// A second of departures is counted this long after it ended, so that what was still in
/// flight (delays up to this long) has arrived; later arrivals count as lost live (the
/// report, from the logs, is exact).
pub const LOSS_LAG_S: u64 = 3;

/// What the server side counted of one second of departures (Unix second `sec`): what it
/// sent to the players in it, and what arrived of what the players sent in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Default)]
pub struct ServeHooks<'a> {
    /// The run's stamped changes of the online target (see [`crate::control::follow`]).
    pub commands: Option<&'a crate::control::Commands>,
    pub live: Option<OnLive<'a>>,
    pub log_tap: horde_engine::logger::TapSlot,
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

/// The key a server-side child uses: the one its parent handed over in [`RUN_KEY_ENV`], else
/// the scenario's.
pub fn server_key(sc: &Scenario) -> Result<RunKey, Error> {
    match std::env::var(RUN_KEY_ENV) {
        Ok(hex) => RunKey::parse_hex(&hex).map_err(|e| Error::BadInput(anyhow::anyhow!("{RUN_KEY_ENV}: {e}"))),
        Err(_) => run_key(sc),
    }
}

/// Runs the server side of `sc` until `stop`: listens on `sc.server`, grants every player once
/// (signed hello, known player), sends it its server→client schedule, logs to
/// `out/server.hlog` and writes its report to `out/server.json`. `on_listening` gets the bound
/// address before the first connection is accepted.
pub fn serve(sc: &Scenario, out: &Path, key: RunKey, stop: &AtomicBool, on_listening: impl FnOnce(SocketAddr), hooks: ServeHooks) -> Result<SendReport, Error> {
    let ServeHooks { commands, live, log_tap } = hooks;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display())).map_err(Error::Failed)?;
    let players = Arc::new(players::plan(sc, stop)?);
    let roster = players.roster.clone();
    let progress = Arc::new(horde_engine::sender::Progress::default());
    let opts = SendOptions {
        log: Some(out.join("server.hlog")),
        log_tap,
        progress: Some(progress.clone()),
        responder: Some(players as Arc<dyn Responder>),
        spin_ns: sc.spin_us * 1000,
        threads: sc.server_threads.unwrap_or_else(default_server_threads),
        key,
        // Every player may connect at once (a run starts all its players together): as many
        // connections may wait for their hello as there are players (at least the default).
        serve_limits: ServeLimits {
            max_players: sc.players as usize,
            max_pending: (sc.players as usize).max(ServeLimits::default().max_pending),
            ..Default::default()
        },
        ..Default::default()
    };
    let done = AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        if let Some(c) = commands {
            s.spawn(|| crate::control::follow(c, &roster, &done));
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
                let mut next_sec = horde_engine::clock::real_ns() / 1_000_000_000;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::park_timeout(next.saturating_sub(start.elapsed()));
                    if start.elapsed() >= next {
                        next += std::time::Duration::from_secs(1);
                        let secs: Vec<ServerSecond> = closed_seconds(&progress.seconds, &mut next_sec, horde_engine::clock::real_ns())
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
    std::fs::write(out.join("server.json"), json).context("writing server.json").map_err(Error::Failed)?;
    Ok(report)
}

/// The server-side child process, stopped (SIGTERM) and reaped on drop; and its live delay,
/// read from its standard output.
pub struct ServerChild(std::process::Child, LiveServer);

/// How to start the server side as a child.
pub struct ChildSpec<'a> {
    /// The `horde` binary (its `run FILE --serve-only` calls [`serve`]).
    pub exe: &'a Path,
    /// The scenario file (absolute).
    pub scenario: &'a Path,
    pub out: &'a Path,
    pub key: &'a RunKey,
    /// Run it inside this network namespace, listening on this address (emulated placement).
    pub netns: Option<(&'a std::fs::File, SocketAddr)>,
}

impl ServerChild {
    /// Starts the server side and waits for its listening address.
    pub fn start(sc: &Scenario, spec: &ChildSpec) -> anyhow::Result<(ServerChild, SocketAddr)> {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(spec.exe);
        let ns_fd = spec.netns.map(|(f, _)| std::os::fd::AsRawFd::as_raw_fd(f));
        cmd.arg("run");
        if let Some((_, listen)) = spec.netns {
            cmd.arg("--listen").arg(listen.to_string());
        }
        // SAFETY: getpid (before the fork), prctl, getppid and setns are async-signal-safe;
        // the fd stays open until spawn returns.
        let parent = unsafe { libc::getpid() };
        unsafe {
            cmd.pre_exec(move || {
                // The server side dies with us, even when we are killed (and does not start if
                // we died before this line).
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("the parent horde exited"));
                }
                if let Some(fd) = ns_fd {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd
            .arg(spec.scenario)
            .arg("--serve-only")
            .arg("--out")
            .arg(spec.out)
            .args(["--players", &sc.players.to_string(), "--duration", &format!("{}s", sc.duration_s), "--seed", &sc.seed.to_string()])
            .args(sc.online.map(|o| format!("--online={o}")))
            .args(["--commands", "-"])
            .env(RUN_KEY_ENV, spec.key.to_hex())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("starting the server side")?;
        let stdout = child.stdout.take().context("the server side's standard output")?;
        let live = LiveServer::default();
        let guard = ServerChild(child, live.clone());
        let mut line = String::new();
        let mut out = std::io::BufReader::new(stdout);
        out.read_line(&mut line).context("reading the server side's address")?;
        let addr = line
            .trim()
            .strip_prefix(SERVE_BANNER)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("the server side did not start (see its error above)"))?;
        std::thread::Builder::new().name("horde-server-live".into()).spawn(move || follow_live(out, &live)).context("starting a thread")?;
        Ok((guard, addr))
    }

    /// The live figures the child reported.
    pub fn live(&self) -> LiveServer {
        self.1.clone()
    }

    /// Passes a (stamped) command to the child on its standard input, one JSON line.
    pub fn command(&mut self, c: &crate::control::Command) -> anyhow::Result<()> {
        use std::io::Write;
        let stdin = self.0.stdin.as_mut().context("the server side's standard input is closed")?;
        let line = serde_json::to_string(c).context("encoding a command")?;
        stdin.write_all(format!("{line}\n").as_bytes()).context("writing to the server side")?;
        stdin.flush().context("writing to the server side")
    }

    /// How the child ended, if it has (it is not reaped here, so that [`ServerChild::finish`]
    /// still gets its resource usage).
    pub fn exited(&mut self) -> Option<String> {
        // SAFETY: waitid fills a plain siginfo for our own child; WNOWAIT leaves it unreaped.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::waitid(libc::P_PID, self.0.id() as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
        if r != 0 {
            // Reaped already (or not ours): ask the standard library, which keeps the status.
            return self.0.try_wait().ok().flatten().map(|s| s.to_string());
        }
        // SAFETY: si_pid and si_status are valid for a CLD_* siginfo.
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return None;
        }
        Some(match info.si_code {
            libc::CLD_EXITED => format!("exit status: {status}"),
            _ => format!("signal: {status}"),
        })
    }

    /// Stops the server side and returns its report (`None` if it died and left none).
    pub fn finish(self, out: &Path, died: bool) -> anyhow::Result<Option<SendReport>> {
        match self.finish_file(out, died, "server.json")? {
            Some(text) => Ok(Some(serde_json::from_str(&text).context("parsing server.json")?)),
            None => Ok(None),
        }
    }

    /// Stops the server side and returns the text of the file it leaves in `out` (`None` if
    /// it died and left none).
    pub fn finish_file(mut self, out: &Path, died: bool, file: &str) -> anyhow::Result<Option<String>> {
        if self.exited().is_none() {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        }
        let status = self.reap().context("waiting for the server side")?;
        // 130: the child was interrupted (Ctrl-C reaches the whole process group, the child
        // too, and it may exit before this process has seen its own signal). That is an end
        // like any other: its report when it had written one, the run's report without it when
        // the signal came before it served.
        let interrupted = status.code() == Some(130);
        if !status.success() && !interrupted && !died {
            anyhow::bail!("the server side failed ({status})");
        }
        match horde_model::files::read_text(&out.join(file), 1 << 30, "the server side's report") {
            Ok(text) => Ok(Some(text)),
            Err(_) if died || interrupted => Ok(None),
            Err(e) => Err(anyhow::anyhow!("reading {file}: {e}")),
        }
    }
}

/// The CPU seconds and peak RSS (kB) of the last server-side child reaped: its own, from
/// wait4, not `RUSAGE_CHILDREN` (which, after `cargo run` execs horde, also holds the build's).
static CHILD_USAGE: std::sync::Mutex<Option<(f64, u64)>> = std::sync::Mutex::new(None);

/// What [`ServerChild`] measured of the last server side it reaped.
pub fn child_usage() -> Option<(f64, u64)> {
    *CHILD_USAGE.lock().unwrap_or_else(|p| p.into_inner())
}

impl ServerChild {
    /// Waits for the child and takes its own resource usage.
    fn reap(&mut self) -> std::io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt as _;
        let mut status = 0;
        // SAFETY: waiting for our own child by pid; `ru` is a plain struct wait4 fills.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = loop {
            let r = unsafe { libc::wait4(self.0.id() as i32, &mut status, 0, &mut ru) };
            if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break r;
            }
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            // Reaped already by the standard library: its status is kept there.
            return if e.raw_os_error() == Some(libc::ECHILD) { self.0.wait() } else { Err(e) };
        }
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        *CHILD_USAGE.lock().unwrap_or_else(|p| p.into_inner()) = Some((t(ru.ru_utime) + t(ru.ru_stime), ru.ru_maxrss as u64));
        Ok(std::process::ExitStatus::from_raw(status))
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Reads a server-side child's live lines (bounded lines; anything else is ignored) until it
/// closes its output.
fn follow_live(mut out: impl std::io::BufRead, live: &LiveServer) {
    use std::io::{BufRead as _, Read as _};
    let mut line = String::new();
    loop {
        line.clear();
        match (&mut out).take(4096).read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        read_live_line(line.trim(), &mut live.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// Takes one line of a server-side child's output into `live` (a line that is not a live
/// figure, or not a sane one, changes nothing).
pub fn read_live_line(line: &str, live: &mut ServerLive) {
    if let Some(rest) = line.strip_prefix(SERVE_DELAY) {
        let v: Vec<f64> = rest.split(' ').filter_map(|x| x.parse().ok()).collect();
        if let [p50, p99] = v[..] {
            if p50.is_finite() && p99.is_finite() && p50 >= 0.0 && p99 >= p50 {
                live.delay = Some([p50, p99]);
            }
        }
    } else if let Some(rest) = line.strip_prefix(SERVE_SECOND) {
        let v: Vec<u64> = rest.split(' ').filter_map(|x| x.parse().ok()).collect();
        if let [sec, down_sent, up_arrived] = v[..] {
            if live.seconds.back().is_none_or(|b| b.sec < sec) {
                live.push(ServerSecond { sec, down_sent, up_arrived });
            }
        }
    }
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
    fn live_lines_are_read_and_bad_ones_change_nothing() {
        let mut l = ServerLive::default();
        for line in ["horde-serve: delay 0.5 0.4", "horde-serve: delay NaN 1", "horde-serve: second 5 1", "horde-serve: second x 1 2", "hello"] {
            read_live_line(line, &mut l);
        }
        assert_eq!((l.delay, l.seconds.len()), (None, 0));
        read_live_line("horde-serve: delay 0.25 1.5", &mut l);
        read_live_line("horde-serve: second 100 50 48", &mut l);
        read_live_line("horde-serve: second 99 1 1", &mut l); // out of order: dropped
        assert_eq!(l.delay, Some([0.25, 1.5]));
        assert_eq!(l.second(100), Some(ServerSecond { sec: 100, down_sent: 50, up_arrived: 48 }));
        assert_eq!(l.second(99), None);
        for sec in 101..200 {
            read_live_line(&format!("horde-serve: second {sec} 1 1"), &mut l);
        }
        assert_eq!(l.seconds.len(), KEEP_SECONDS, "bounded");
    }
}
