use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use horde_engine::sender::{self, Accepted, Job, Progress, Responder, Source};
use horde_engine::{SendOptions, SendReport};
use horde_model::behaviour::{self, Segment};
use horde_model::flow::Transport;
use horde_model::scenario::Scenario;
use horde_model::schedule::PlayerSchedule;
use horde_model::service::{BoundTraffic, Direction};
use horde_model::Flow;
use horde_proto::RunKey;
use horde_stats::game::{self, Context, GameAnalysis};
use horde_wire::control::Status;
use serde::Serialize;

use crate::{bad_input, Outcome};

/// Runs a scenario: every player is one connection (TCP, or a UDP socket pair for UDP services)
/// carrying its client→server APDUs, and Horde's server side sends each player's server→client
/// APDUs back on it; both switch models when the player's category changes. Writes logs and a
/// report directory.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file (TOML: service, players, duration, seed, start_hour, join, server, variables, threads, server_threads, spin_us, [emu]; see examples/wow.toml, examples/wow-access.toml)
    #[arg(value_name = "SCENARIO")]
    pub scenario: PathBuf,
    /// Report directory (default: horde-out/<scenario name>-<unix time>)
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Override the scenario's player count
    #[arg(long)]
    pub players: Option<u32>,
    /// Override the scenario's duration, e.g. 30s
    #[arg(short, long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Override the scenario's seed
    #[arg(long)]
    pub seed: Option<u64>,
    /// No live progress line
    #[arg(short, long)]
    pub quiet: bool,
    /// Internal: run only the server side (started by `horde run` as a child process)
    #[arg(long, hide = true)]
    pub serve_only: bool,
    /// Internal: the server side's listening address (overrides the scenario's)
    #[arg(long, hide = true)]
    pub listen: Option<SocketAddr>,
}

/// Both sides' view of the players: segments and the bound model.
struct Players {
    transport: Transport,
    segments: Arc<Vec<Vec<Segment>>>,
    traffic: Arc<BoundTraffic>,
    seed: u64,
    duration_s: f64,
    /// Server side: players granted to a connection already (each once per run).
    claimed: Vec<std::sync::atomic::AtomicBool>,
}

impl Players {
    fn schedule(&self, player: u32, dir: Direction) -> Source {
        Box::new(PlayerSchedule::new(self.segments[player as usize].clone(), self.traffic.clone(), dir, self.seed, self.transport, self.duration_s))
    }
}

impl Responder for Players {
    /// Grants player `tag >> 8` to the connection whose flow is that player, once per run: a
    /// replayed hello cannot take a second stream of the same player.
    fn on_hello(&self, flow: u32, tag: u32) -> Result<Accepted, Status> {
        let player = tag >> 8;
        let claim = self.claimed.get(player as usize).filter(|_| flow == player && tag & 0xFF == 0).ok_or(Status::UnknownPlayer)?;
        if claim.swap(true, Ordering::AcqRel) {
            return Err(Status::Taken);
        }
        Ok(Accepted { source: self.schedule(player, Direction::Down), mirror: Some(self.schedule(player, Direction::Up)), tag })
    }
}

/// The environment variable that hands the run key to the server-side child (not its command
/// line: /proc/PID/cmdline is world-readable, /proc/PID/environ only to the same user).
const RUN_KEY_ENV: &str = "HORDE_RUN_KEY";

/// The run's key: the scenario's key file, or a fresh one.
fn run_key(sc: &Scenario) -> Result<RunKey, crate::Failure> {
    match &sc.key_file {
        Some(p) => super::read_key(p),
        None => Ok(RunKey::from_bytes(horde_engine::random_secret().context("drawing a run key")?)),
    }
}

#[derive(Serialize)]
struct Summary<'a> {
    scenario: &'a str,
    service: &'a str,
    players: u32,
    duration_s: f64,
    seed: u64,
    start_hour: f64,
    variables: &'a std::collections::BTreeMap<String, f64>,
    client: &'a SendReport,
    server_connections: u64,
    /// Received APDUs that differed from the peer's regenerated schedule, both sides (must be 0).
    mismatched: u64,
    resources: Usage,
    /// Counters of the emulated links (runs with `[emu]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    emulated_links: Option<&'a [horde_emu::fwd::LinkReport]>,
    /// A run stopped before its end (a signal, or the server side died) and what the
    /// statistics cover; absent for a complete run.
    #[serde(skip_serializing_if = "Option::is_none")]
    interruption: Option<&'a Interruption>,
    analysis: &'a GameAnalysis,
}

pub fn load(args: &Args) -> Result<Scenario, crate::Failure> {
    let mut sc = Scenario::load(&args.scenario).map_err(bad_input)?;
    apply_overrides(&mut sc, args.players, args.duration.as_deref(), args.seed)?;
    Ok(sc)
}

pub fn apply_overrides(sc: &mut Scenario, players: Option<u32>, duration: Option<&str>, seed: Option<u64>) -> Result<(), crate::Failure> {
    let before = (sc.players, sc.duration_s, sc.seed);
    if let Some(p) = players {
        if p == 0 || p > horde_model::scenario::MAX_PLAYERS {
            return Err(bad_input(anyhow::anyhow!("--players must be 1..={}", horde_model::scenario::MAX_PLAYERS)));
        }
        sc.players = p;
    }
    if let Some(d) = duration {
        let ns = horde_model::units::parse_duration_ns(d).map_err(|m| bad_input(anyhow::anyhow!("--duration: {m}")))?;
        horde_model::scenario::check_duration(ns).map_err(|m| bad_input(anyhow::anyhow!("--duration: {m}")))?;
        sc.duration_s = ns as f64 / 1e9;
    }
    if let Some(s) = seed {
        sc.seed = s;
    }
    // The report shows the scenario as run.
    let changed = [
        ("players", (sc.players != before.0).then(|| sc.players.to_string())),
        ("duration", (sc.duration_s != before.1).then(|| format!("\"{}s\"", sc.duration_s))),
        ("seed", (sc.seed != before.2).then(|| sc.seed.to_string())),
    ];
    for (what, set) in changed {
        if let Some(v) = set {
            sc.text.push_str(&format!("# overridden on the command line: {what} = {v}\n"));
        }
    }
    Ok(())
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    let sc = load(&args)?;
    let name = args.scenario.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into());
    let out = args.out.clone().unwrap_or_else(|| default_out(&name));
    if args.serve_only {
        let mut sc = sc;
        if let Some(l) = args.listen {
            sc.server = l;
        }
        return serve_only(&sc, &out, stop);
    }
    execute(&sc, Some(&args.scenario), &out, !args.quiet, stop)
}

pub fn default_out(name: &str) -> PathBuf {
    PathBuf::from(format!("horde-out/{name}-{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)))
}

/// The players of a scenario: segments from the behaviour process, bound traffic model.
fn plan(sc: &Scenario, stop: &AtomicBool) -> Result<Arc<Players>, crate::Failure> {
    let segments: Vec<Vec<Segment>> = sc.segments_unless(&|| stop.load(Ordering::Relaxed)).ok_or_else(|| crate::Failure {
        code: 130,
        err: anyhow::anyhow!("interrupted while planning the players' behaviour"),
        quiet: false,
    })?;
    let traffic = sc.service.bind(&sc.variables).map_err(|(f, m)| bad_input(anyhow::anyhow!("{}: {f}: {m}", sc.name)))?;
    Ok(Arc::new(Players {
        transport: sc.service.transport,
        segments: Arc::new(segments),
        traffic: Arc::new(traffic),
        seed: sc.seed,
        duration_s: sc.duration_s,
        claimed: (0..sc.players).map(|_| std::sync::atomic::AtomicBool::new(false)).collect(),
    }))
}

/// The server side as its own process: listens, answers every player's hello with that player's
/// server→client schedule, logs to `out/server.hlog`, and on SIGTERM writes `out/server.json`.
fn serve_only(sc: &Scenario, out: &Path, stop: &AtomicBool) -> Outcome {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let players = plan(sc, stop)?;
    let key = match std::env::var(RUN_KEY_ENV) {
        Ok(hex) => RunKey::parse_hex(&hex).map_err(|e| bad_input(anyhow::anyhow!("{RUN_KEY_ENV}: {e}")))?,
        Err(_) => run_key(sc)?,
    };
    let opts = SendOptions {
        log: Some(out.join("server.hlog")),
        responder: Some(players as Arc<dyn Responder>),
        spin_ns: sc.spin_us * 1000,
        threads: sc.server_threads,
        key,
        serve_limits: horde_engine::sender::ServeLimits { max_players: sc.players as usize, ..Default::default() },
        ..Default::default()
    };
    let report = sender::serve(&[sc.server], sc.service.transport, &opts, stop, |b| {
        use std::io::Write;
        let mut o = std::io::stdout();
        let _ = writeln!(o, "{SERVE_BANNER}{}", b[0]);
        let _ = o.flush();
    })
    .context("server side")?;
    std::fs::write(out.join("server.json"), serde_json::to_string_pretty(&report).expect("report serialises")).context("writing server.json")?;
    Ok(0)
}

const SERVE_BANNER: &str = "horde-serve: listening on ";

/// The server-side child process, stopped (SIGTERM) and reaped on drop.
struct ServerChild(std::process::Child);

impl ServerChild {
    /// `emu`: run it inside this namespace, listening on this address.
    fn start(sc: &Scenario, scenario: &Path, out: &Path, key: &RunKey, emu: Option<(&std::fs::File, SocketAddr)>) -> anyhow::Result<(ServerChild, SocketAddr)> {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe().context("locating the horde binary")?;
        let mut cmd = std::process::Command::new(exe);
        let ns_fd = emu.map(|(f, _)| std::os::fd::AsRawFd::as_raw_fd(f));
        cmd.arg("run");
        if let Some((_, listen)) = emu {
            cmd.arg("--listen").arg(listen.to_string());
        }
        // SAFETY: prctl and setns are async-signal-safe; the fd stays open until spawn returns.
        unsafe {
            cmd.pre_exec(move || {
                // The server side dies with us, even when we are killed.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Some(fd) = ns_fd {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd
            .arg(scenario)
            .arg("--serve-only")
            .arg("--out")
            .arg(out)
            .args(["--players", &sc.players.to_string(), "--duration", &format!("{}s", sc.duration_s), "--seed", &sc.seed.to_string()])
            .env(RUN_KEY_ENV, key.to_hex())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("starting the server side")?;
        let stdout = child.stdout.take().expect("piped stdout");
        let guard = ServerChild(child);
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line).context("reading the server side's address")?;
        let addr = line
            .trim()
            .strip_prefix(SERVE_BANNER)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("the server side did not start (see its error above)"))?;
        Ok((guard, addr))
    }

    /// Stops the server side and returns its report (`None` if it died and left none).
    fn finish(mut self, out: &Path, died: bool) -> anyhow::Result<Option<SendReport>> {
        if self.0.try_wait().ok().flatten().is_none() {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        }
        let status = self.0.wait().context("waiting for the server side")?;
        if !status.success() && !died {
            anyhow::bail!("the server side failed ({status})");
        }
        match std::fs::read_to_string(out.join("server.json")) {
            Ok(text) => Ok(Some(serde_json::from_str(&text).context("parsing server.json")?)),
            Err(_) if died => Ok(None),
            Err(e) => Err(anyhow::Error::new(e).context("reading server.json")),
        }
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

/// Runs a validated scenario and writes the report into `out`. The server side runs as a child
/// process (each side then has its own descriptor limit: 10,000 players are 20,000 sockets).
/// `scenario` is the scenario's file, if it has one (the embedded demo's text is written out).
pub fn execute(sc: &Scenario, scenario: Option<&Path>, out: &Path, progress: bool, stop: &AtomicBool) -> Outcome {
    std::fs::create_dir_all(out).with_context(|| format!("creating report directory {}", out.display()))?;
    let t_plan = Instant::now();
    let players = plan(sc, stop)?;
    say!(
        "horde run: {} — {} {} players for {:.0} s from hour {} (seed {}); behaviour planned in {:.2} s",
        sc.name,
        sc.players,
        sc.service.name,
        sc.duration_s,
        sc.start_hour,
        sc.seed,
        t_plan.elapsed().as_secs_f64()
    );
    let scenario_file = match scenario {
        Some(p) => std::fs::canonicalize(p).with_context(|| format!("locating {}", p.display()))?,
        None => {
            let p = out.join("scenario.toml");
            std::fs::write(&p, &sc.text).context("writing scenario.toml")?;
            std::fs::canonicalize(&p).context("locating scenario.toml")?
        }
    };
    let key = run_key(sc)?;
    let emu = match &sc.emu {
        Some(p) => Some(EmuRun::up(p, sc)?),
        None => None,
    };
    let (server, addr) = ServerChild::start(sc, &scenario_file, out, &key, emu.as_ref().map(|e| (&e.server_ns, e.server)))?;
    let client_progress = Arc::new(Progress::default());
    let jobs: Vec<Job> = (0..sc.players)
        .map(|p| Job {
            netns: emu.as_ref().map(|e| e.clients[p as usize % e.clients.len()].clone()),
            flow: player_flow(p, addr, sc.service.transport),
            source: Some(players.schedule(p, Direction::Up)),
            mirror: Some(players.schedule(p, Direction::Down)),
            // A player who joins later connects then.
            connect_at_ns: Some((sc.join_time(p) * 1e9) as u64).filter(|t| *t > 0),
        })
        .collect();
    let copts = SendOptions {
        threads: sc.threads,
        spin_ns: sc.spin_us * 1000,
        log: Some(out.join("client.hlog")),
        progress: Some(client_progress.clone()),
        linger: Duration::from_millis(1000),
        run_for: Some(Duration::from_secs_f64(sc.duration_s)),
        connect_timeout: Duration::from_secs(30),
        key,
        ..Default::default()
    };
    let done = AtomicBool::new(false);
    // The client stops on the user's signal, or when the server side dies.
    let run_stop = AtomicBool::new(false);
    let server = std::sync::Mutex::new(server);
    let died: std::sync::Mutex<Option<(String, u64)>> = std::sync::Mutex::new(None);
    let client = std::thread::scope(|s| {
        if progress {
            let (done, p, players) = (&done, &client_progress, &players);
            s.spawn(move || show_progress(sc, &players.segments, p, done));
        }
        s.spawn(|| watch_server(&server, stop, &run_stop, &done, &died));
        let r = sender::run_jobs(jobs, &copts, &run_stop);
        done.store(true, Ordering::Relaxed);
        r
    });
    let server = server.into_inner().unwrap_or_else(|p| p.into_inner());
    let died = died.into_inner().unwrap_or_else(|p| p.into_inner());
    let server_report = server.finish(out, died.is_some())?;
    let client = client.context("client side")?;
    let interruption = Interruption::of(sc, &client, server_report.as_ref(), died.as_ref(), stop.load(Ordering::Relaxed));
    let server_report = server_report.unwrap_or_else(|| empty_report(&client));
    let links = emu.as_ref().and_then(|e| e.links());
    let usage = Usage::now();
    say!(
        "  resources: client process {:.1} s CPU ({:.0} % of the run), peak RSS {} MB; server process {:.1} s CPU ({:.0} %), peak RSS {} MB",
        usage.client_cpu_s,
        usage.client_cpu_s / sc.duration_s * 100.0,
        usage.client_max_rss_kb / 1024,
        usage.server_cpu_s,
        usage.server_cpu_s / sc.duration_s * 100.0,
        usage.server_max_rss_kb / 1024
    );
    crate::cmd::send::print_report(&client);
    let mismatched = client.mismatched + server_report.mismatched;
    if mismatched > 0 {
        say!("  warning: {mismatched} APDU(s) differed from the sender's regenerated schedule: a framing or pacing bug; please report it");
    }
    let outcomes = Outcomes { client: &client, server: &server_report, usage: &usage, links: links.as_deref(), interruption: interruption.as_ref() };
    let table = report(sc, out, &players, &outcomes)?;
    crate::output::out(&table)?;
    if let Some((status, _)) = died {
        let i = interruption.expect("a death is an interruption");
        return Err(crate::Failure::from(anyhow::anyhow!(
            "the server side exited unexpectedly ({status}) {:.1} s into the run; the report covers the first {:.1} s",
            i.at_s,
            i.analysed_s
        )));
    }
    Ok(if interruption.is_some() { 130 } else { 0 })
}

/// APDUs sent this close to an interruption are left out of every count: they may have been in
/// flight (1 s covers the delay of any link Horde emulates in practice).
const IN_FLIGHT_GRACE_S: f64 = 1.0;

/// A run that stopped before its end, and what the statistics cover.
#[derive(Serialize, Clone, Debug)]
struct Interruption {
    /// Seconds into the run when it stopped.
    at_s: f64,
    /// Seconds covered by the statistics: up to `IN_FLIGHT_GRACE_S` before the stop.
    analysed_s: f64,
    /// "interrupted" (a signal), or why the server side stopped.
    reason: String,
}

impl Interruption {
    fn of(sc: &Scenario, client: &SendReport, server: Option<&SendReport>, died: Option<&(String, u64)>, signalled: bool) -> Option<Interruption> {
        if !(client.interrupted || signalled || died.is_some()) {
            return None;
        }
        let mut end = client.end_real_ns;
        if let Some(s) = server.filter(|s| s.end_real_ns > 0) {
            end = end.min(s.end_real_ns);
        }
        if let Some((_, t)) = died {
            end = end.min(*t);
        }
        let at_s = (end.saturating_sub(client.t0_real_ns) as f64 / 1e9).min(sc.duration_s);
        // A killed server side's log lacks up to its last flush interval as well.
        let (reason, grace) = match died {
            Some((status, _)) => (format!("the server side exited ({status})"), IN_FLIGHT_GRACE_S + horde_engine::logger::FLUSH_EVERY_NS as f64 / 1e9),
            None => ("interrupted".into(), IN_FLIGHT_GRACE_S),
        };
        Some(Interruption { at_s, analysed_s: (at_s - grace).max(0.0), reason })
    }

    fn note(&self, duration_s: f64) -> String {
        format!(
            "{} at {:.1} s of {:.0} s: statistics cover the first {:.1} s (APDUs sent after that may have been in flight, or unlogged by a killed process, and are left out)",
            self.reason, self.at_s, duration_s, self.analysed_s
        )
    }
}

/// Polls the server-side child while the client runs: a dead server side stops the client
/// (within 50 ms) instead of leaving it to run to the end with nobody answering.
fn watch_server(
    server: &std::sync::Mutex<ServerChild>,
    stop: &AtomicBool,
    run_stop: &AtomicBool,
    done: &AtomicBool,
    died: &std::sync::Mutex<Option<(String, u64)>>,
) {
    while !done.load(Ordering::Relaxed) {
        if stop.load(Ordering::Relaxed) {
            run_stop.store(true, Ordering::Relaxed);
            return;
        }
        let exited = server.lock().ok().and_then(|mut c| c.0.try_wait().ok().flatten());
        if let Some(status) = exited {
            if !stop.load(Ordering::Relaxed) {
                *died.lock().unwrap_or_else(|p| p.into_inner()) = Some((status.to_string(), horde_engine::clock::real_ns()));
            }
            run_stop.store(true, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The server side's report when it left none (it died).
fn empty_report(client: &SendReport) -> SendReport {
    SendReport {
        flows: Vec::new(),
        packets: 0,
        bytes: 0,
        errors: 0,
        echoes: 0,
        received: 0,
        mismatched: 0,
        unsent: 0,
        log_records: 0,
        log: None,
        interrupted: true,
        ..client.clone()
    }
}

fn player_flow(p: u32, server: SocketAddr, transport: Transport) -> Flow {
    let mut f = Flow::connection(p, format!("player {p}"), server, p << 8);
    f.transport = transport;
    f
}

fn show_progress(sc: &Scenario, segments: &[Vec<Segment>], p: &Progress, done: &AtomicBool) {
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let (mut last_sent, mut last_sb, mut last_recv, mut last_rb) = (0u64, 0u64, 0u64, 0u64);
    let mut tick = 0u64;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(250));
        tick += 1;
        if !tick.is_multiple_of(4) {
            continue;
        }
        let t = start.elapsed().as_secs_f64();
        let mut counts = vec![0u32; sc.service.states.len()];
        for segs in segments {
            if let Some(s) = behaviour::state_at(segs, t) {
                counts[s.state as usize] += 1;
            }
        }
        let (s, sb, r, rb) = (
            p.sent_packets.load(Ordering::Relaxed),
            p.sent_bytes.load(Ordering::Relaxed),
            p.recv_packets.load(Ordering::Relaxed),
            p.recv_bytes.load(Ordering::Relaxed),
        );
        let cats: Vec<String> = sc.service.states.iter().zip(&counts).map(|(st, c)| format!("{} {c}", st.name)).collect();
        let line = format!(
            "t={t:>5.0}s  up {:>7} pkt/s {:>8.1} kbit/s  down {:>7} pkt/s {:>8.1} kbit/s  | {}",
            s - last_sent,
            (sb - last_sb) as f64 * 8.0 / 1e3,
            r - last_recv,
            (rb - last_rb) as f64 * 8.0 / 1e3,
            cats.join(", ")
        );
        (last_sent, last_sb, last_recv, last_rb) = (s, sb, r, rb);
        if tty {
            say_inline!("\r{line}\x1b[K");
        } else if tick.is_multiple_of(20) {
            say!("{line}");
        }
    }
    if tty {
        say!();
    }
}

/// CPU time and peak memory of this process (the client side) and of the server-side child.
#[derive(Serialize, Clone, Copy)]
struct Usage {
    client_cpu_s: f64,
    client_max_rss_kb: u64,
    server_cpu_s: f64,
    server_max_rss_kb: u64,
}

impl Usage {
    fn now() -> Usage {
        let get = |who| {
            // SAFETY: getrusage fills a plain struct.
            let mut u: libc::rusage = unsafe { std::mem::zeroed() };
            unsafe { libc::getrusage(who, &mut u) };
            let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
            (t(u.ru_utime) + t(u.ru_stime), u.ru_maxrss as u64)
        };
        let (c, cr) = get(libc::RUSAGE_SELF);
        let (s, sr) = get(libc::RUSAGE_CHILDREN);
        Usage { client_cpu_s: c, client_max_rss_kb: cr, server_cpu_s: s, server_max_rss_kb: sr }
    }
}

/// What a run produced, for its report.
struct Outcomes<'a> {
    client: &'a SendReport,
    server: &'a SendReport,
    usage: &'a Usage,
    links: Option<&'a [horde_emu::fwd::LinkReport]>,
    interruption: Option<&'a Interruption>,
}

fn report(sc: &Scenario, out: &Path, players: &Players, o: &Outcomes) -> anyhow::Result<String> {
    let Outcomes { client, server, usage, links, interruption } = *o;
    let load = |f: &str| -> anyhow::Result<Vec<horde_wire::Record>> {
        let bytes = std::fs::read(out.join(f)).with_context(|| format!("reading {f}"))?;
        Ok(horde_stats::load(&bytes).map_err(|e| anyhow::anyhow!("{f}: {e}"))?.records)
    };
    let (c, s) = (load("client.hlog")?, load("server.hlog")?);
    let ctx = Context {
        service: &sc.service,
        traffic: &players.traffic,
        segments: &players.segments,
        duration_s: interruption.map_or(sc.duration_s, |i| i.analysed_s),
        epoch_ns: client.t0_real_ns,
        cutoff_ns: interruption.map(|i| client.t0_real_ns + (i.analysed_s * 1e9) as u64),
    };
    let g = game::analyse(&ctx, &c, &s);
    let charts = horde_stats::html::game_charts(&g, &ctx);
    std::fs::create_dir_all(out.join("charts")).context("creating charts/")?;
    for (name, svg) in &charts {
        std::fs::write(out.join("charts").join(name), svg).with_context(|| format!("writing charts/{name}"))?;
    }
    let summary = Summary {
        scenario: &sc.name,
        service: &sc.service.name,
        players: sc.players,
        duration_s: sc.duration_s,
        seed: sc.seed,
        start_hour: sc.start_hour,
        variables: &players.traffic.vars,
        client,
        server_connections: server.flows.len() as u64,
        mismatched: client.mismatched + server.mismatched,
        resources: *usage,
        emulated_links: links,
        interruption,
        analysis: &g,
    };
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)?).context("writing summary.json")?;
    std::fs::write(out.join("scenario.toml"), &sc.text).context("writing scenario.toml")?;
    let note = interruption.map(|i| format!(" — {}", i.note(sc.duration_s))).unwrap_or_default();
    let page = horde_stats::html::game_page(
        &format!("Horde run: {} ({} × {}, {:.0} s, seed {}){note}", sc.name, sc.players, sc.service.name, sc.duration_s, sc.seed),
        &sc.text,
        links.map(horde_emu::fwd::links_table).as_deref(),
        &g,
        &charts,
    );
    std::fs::write(out.join("index.html"), page).context("writing index.html")?;
    let note = interruption.map(|i| format!("\n{}\n", i.note(sc.duration_s))).unwrap_or_default();
    Ok(format!("{note}{}\nreport: {}/index.html (summary.json, charts/*.svg, logs client.hlog and server.hlog)\n", table(&g), out.display()))
}

fn table(g: &GameAnalysis) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\n{:<15} {:>6} {:>5} {:>9} {:>6} {:>10} {:>9} {:>8} {:>8} {:>8} {:>9}",
        "category", "occ %", "dir", "APDUs", "lost", "kbit/s", "APDU/s/p", "model", "KS size", "KS IAT", "delay ms"
    );
    let f = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "-".into());
    for c in &g.categories {
        for (dir, st) in [("up", &c.up), ("down", &c.down)] {
            let _ = writeln!(
                o,
                "{:<15} {:>6.1} {:>5} {:>9} {:>6} {:>10.1} {:>9.3} {:>8} {:>8} {:>8} {:>9}",
                c.category,
                c.occupancy_share * 100.0,
                dir,
                st.received,
                st.lost,
                st.bitrate_bps / 1e3,
                st.apdu_rate_per_player,
                f(st.model_apdu_rate_per_player, 3),
                f(st.ks_size, 3),
                f(st.ks_iat, 3),
                f(st.delay_mean_ms, 3)
            );
        }
    }
    let _ = writeln!(o, "{:<15} {:>6} {:>5} {:>9} {:>6} {:>10.1}", "total", "", "up", g.up.received, g.up.lost, g.up.bitrate_bps / 1e3);
    let _ = writeln!(o, "{:<15} {:>6} {:>5} {:>9} {:>6} {:>10.1}", "total", "", "down", g.down.received, g.down.lost, g.down.bitrate_bps / 1e3);
    o
}

/// A scenario's emulated topology, up for the run and taken down after it (also on errors and
/// Ctrl-C; after SIGKILL, `horde emu cleanup` removes it).
struct EmuRun {
    exp: String,
    _down: Down,
    server_ns: std::fs::File,
    server: SocketAddr,
    clients: Vec<Arc<std::fs::File>>,
    emulated: usize,
}

impl EmuRun {
    fn up(p: &horde_model::scenario::Placement, sc: &Scenario) -> Result<EmuRun, crate::Failure> {
        horde_emu::require_root().map_err(|e| bad_input(anyhow::anyhow!("{}: [emu]: {e}", sc.name)))?;
        let text = horde_model::files::read_text(&p.topology, horde_model::files::MAX_TOML, "topology files")
            .with_context(|| format!("{}: emu.topology", sc.name))
            .map_err(bad_input)?;
        let file = p.topology.display().to_string();
        // Check the placement on the plan before building anything.
        let plan = horde_topo::plan(&text, &file, "check").map_err(bad_input)?;
        let host = |name: &str| plan.node(name).filter(|&i| plan.nodes[i].kind == horde_topo::Kind::Host);
        let server_i = host(&p.server).ok_or_else(|| bad_input(anyhow::anyhow!("{}: emu.server: `{}` is not a host of {file}", sc.name, p.server)))?;
        let mut client_names = Vec::new();
        for c in &p.clients {
            let members: Vec<String> = plan
                .nodes
                .iter()
                .filter(|n| {
                    n.kind == horde_topo::Kind::Host
                        && (n.name == *c || n.name.strip_prefix(c.as_str()).is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit())))
                })
                .map(|n| n.name.clone())
                .collect();
            if members.is_empty() {
                return Err(bad_input(anyhow::anyhow!("{}: emu.clients: `{c}` names no host or group of hosts in {file}", sc.name)));
            }
            client_names.extend(members);
        }
        let server_ip =
            plan.addrs(server_i).first().copied().ok_or_else(|| bad_input(anyhow::anyhow!("{}: emu.server: `{}` has no address", sc.name, p.server)))?;
        let opts = horde_emu::UpOptions { exp: None, daemon_exe: std::env::current_exe().context("locating the horde binary")?, userspace: true, stop: None };
        let t = Instant::now();
        let r = horde_emu::up(&text, &file, &opts).map_err(|e| anyhow::anyhow!("bringing up {file}: {e}"))?;
        let exp = r.meta.exp.clone();
        let down = Down(exp.clone());
        let open = |n: &str| horde_emu::open_node(&exp, &r.plan, n).map_err(|e| anyhow::anyhow!(e));
        let server_ns = open(&p.server)?;
        let clients = client_names.iter().map(|c| open(c).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        let guard = EmuRun {
            exp: exp.clone(),
            _down: down,
            server_ns,
            server: SocketAddr::new(server_ip.into(), sc.server.port()),
            clients,
            emulated: r.meta.impaired_links,
        };
        say!(
            "horde run: emulated topology `{}` up as experiment {exp} in {:.2} s: {} nodes, {} emulated links; {} client hosts, server {} at {server_ip}",
            r.plan.name,
            t.elapsed().as_secs_f64(),
            r.plan.nodes.len(),
            r.meta.impaired_links,
            client_names.len(),
            p.server
        );
        Ok(guard)
    }

    /// The emulated links' counters at the end of the run (printed, and kept for the report).
    fn links(&self) -> Option<Vec<horde_emu::fwd::LinkReport>> {
        if self.emulated == 0 {
            return None;
        }
        let r = horde_emu::fwd::request(&self.exp, &horde_emu::fwd::Request::Stats).ok()?;
        say_inline!("{}", horde_emu::fwd::links_table(&r.links));
        Some(r.links)
    }
}

/// Takes an experiment down when dropped.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        match horde_emu::down(&self.0) {
            Ok(_) => say!("horde run: experiment {} taken down", self.0),
            Err(e) => say!("horde run: taking experiment {} down failed: {e}; run `horde emu cleanup {}`", self.0, self.0),
        }
    }
}
