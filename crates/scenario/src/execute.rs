//! One run of a scenario end to end: plan, place, start the server side, run the players,
//! collect, report.

use horde_engine::clock::Clock;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use horde_engine::clock::Stopwatch;

use anyhow::Context as _;
use horde_engine::sender::Progress;
use horde_engine::SendReport;
use horde_model::scenario::Scenario;

use crate::child::ServerChild;
use crate::circuits::ServedCircuit;
use crate::placement::EmuRun;
use crate::report::{self, Interruption, Outcomes, Summary, Usage};
use crate::{players, Error, Event, Events, Snapshot};

/// How to run a scenario.
pub struct RunOptions<'a> {
    /// Report directory (created).
    pub out: &'a Path,
    /// The scenario's file, if it has one: a service file it names is found beside it.
    pub scenario_file: Option<&'a Path>,
    /// Where the server side runs.
    pub server: ServerSide,
    /// Only these players run on this side (a shard, see [`crate::shards`]); all by default.
    pub shard: Option<Range<u32>>,
    /// Progress and notes; called from the run's threads.
    pub events: Events<'a>,
    /// Set by a signal: the run stops, and reports what it measured until then.
    pub stop: &'a AtomicBool,
    /// The run's command channel (stop now, players online, a link), if it has one.
    pub commands: Option<&'a crate::control::Commands>,
    /// The clock the run's driver looks at (`&horde_sys::clock::System`: the machine's).
    pub clock: &'a dyn horde_engine::clock::Clock,
}

impl<'a> RunOptions<'a> {
    /// A whole scenario on this machine with its server side in this process (tests, small
    /// runs): no scenario file, no commands, no events, the machine's clock.
    pub fn in_process(out: &'a Path, stop: &'a AtomicBool) -> RunOptions<'a> {
        RunOptions {
            out,
            scenario_file: None,
            server: ServerSide::InProcess,
            shard: None,
            events: &|_| {},
            stop,
            commands: None,
            clock: &horde_engine::clock::System,
        }
    }
}

/// Where a run's server side runs.
#[derive(Debug, Clone)]
pub enum ServerSide {
    /// A child process of this `horde` binary running the server side's
    /// [`crate::part::Part`], so each side has its own descriptor limit.
    Child,
    /// A thread of this process (tests, small runs; not with an emulated placement).
    InProcess,
}

/// The running server side: a child process, or a thread of this one; each runs the server
/// side's [`crate::part::Part`] through [`crate::run_part`] and leaves its report in `out`.
pub(crate) enum Server {
    Child(ServerChild),
    Here { running: Box<crate::run_part::Running>, done: std::sync::mpsc::Receiver<crate::run_part::Done>, live: crate::server::LiveServer },
}

impl Server {
    pub(crate) fn start(side: &ServerSide, p: &Prepared) -> Result<(Server, std::net::SocketAddr), Error> {
        match side {
            ServerSide::Child => {
                let (c, a) = ServerChild::start(&p.part, p.emu.as_ref().map(|e| &e.server_ns)).map_err(Error::Failed)?;
                Ok((Server::Child(c), a))
            }
            ServerSide::InProcess => {
                let (tx, done) = std::sync::mpsc::channel();
                let live = crate::server::LiveServer::default();
                let l2 = live.clone();
                let mut env = crate::run_part::Env::new(p.out.clone(), tx);
                env.server_live = Some(Box::new(move |p, secs| {
                    let mut l = l2.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(p) = p {
                        l.delay = Some([p.p50_ms, p.p99_ms]);
                    }
                    secs.iter().for_each(|x| l.push(*x));
                }));
                let running = crate::run_part::prepare(p.part.clone(), env).map_err(Error::Failed)?;
                let addr = running.listening().context("the server side's address").map_err(Error::Failed)?;
                Ok((Server::Here { running: Box::new(running), done, live }, addr))
            }
        }
    }

    /// The server side's live figures (none for a regulated run's).
    pub(crate) fn live(&self) -> crate::server::LiveServer {
        match self {
            Server::Child(c) => c.live(),
            Server::Here { live, .. } => live.clone(),
        }
    }

    fn exited_now(&mut self) -> Option<String> {
        match self {
            Server::Child(c) => c.exited(),
            Server::Here { running, .. } => running.server.as_ref().is_none_or(|s| s.0.is_finished()).then(|| "its thread ended".to_string()),
        }
    }

    /// Passes a (stamped) command on to the server side (a regulated one takes none).
    fn forward_now(&mut self, c: &crate::control::Command) -> anyhow::Result<()> {
        match self {
            Server::Child(child) => child.command(c),
            Server::Here { running, .. } => match &running.server_commands {
                Some(tx) => tx.send(crate::control::Incoming { id: 0, command: Ok(c.clone()) }).map_err(|_| anyhow::anyhow!("the server side's thread ended")),
                None => Ok(()),
            },
        }
    }

    /// Stops the server side and returns the text of the report `file` it left in `out`
    /// (`None` if it died and left none).
    fn finish_file(self, out: &Path, died: bool, file: &str) -> anyhow::Result<Option<String>> {
        match self {
            Server::Child(c) => c.finish_file(out, died, file),
            Server::Here { running, done, .. } => {
                running.finish();
                if let Some(Err(m)) = done.try_iter().map(|d| d.report).find(Result::is_err) {
                    return if died { Ok(None) } else { Err(anyhow::anyhow!("server side: {m}")) };
                }
                match horde_model::files::read_text(&out.join(file), 1 << 30, "the server side's report") {
                    Ok(text) => Ok(Some(text)),
                    Err(_) if died => Ok(None),
                    Err(e) => Err(anyhow::anyhow!("reading {file}: {e}")),
                }
            }
        }
    }

    /// Stops a regulated run's server side and returns its circuits (None if it died first).
    pub(crate) fn finish_circuits(self, out: &Path, died: bool) -> anyhow::Result<Option<Vec<ServedCircuit>>> {
        match self.finish_file(out, died, crate::circuits::SERVER_FILE)? {
            Some(text) => Ok(Some(serde_json::from_str(&text).context("parsing the server side's circuits")?)),
            None => Ok(None),
        }
    }

    fn finish(self, out: &Path, died: bool) -> anyhow::Result<Option<SendReport>> {
        match self.finish_file(out, died, "server.json")? {
            Some(text) => Ok(Some(serde_json::from_str(&text).context("parsing server.json")?)),
            None => Ok(None),
        }
    }
}

impl crate::steer::ServerSide for Server {
    fn exited(&mut self) -> Option<String> {
        self.exited_now()
    }

    fn forward(&mut self, c: &crate::control::Command) -> anyhow::Result<()> {
        self.forward_now(c)
    }
}

/// What a run produced.
pub struct RunOutcome {
    pub summary: Summary,
    /// The server side's report (empty if it died before writing one).
    pub server: SendReport,
    /// `Some(status)`: the server side died during the run (the report covers the time before).
    pub server_died: Option<String>,
}

impl RunOutcome {
    /// Whether the run stopped before its end (signal or dead server side).
    pub fn interrupted(&self) -> bool {
        self.summary.interruption.is_some()
    }
}

/// Runs a validated scenario and writes the report into `opts.out`. The server side runs as a
/// child process (each side then has its own descriptor limit).
pub fn execute(sc: &Scenario, opts: &RunOptions) -> Result<RunOutcome, Error> {
    let failed = Error::Failed;
    let out = opts.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating report directory {}", out.display())).map_err(failed)?;
    let prepared = prepare(sc, opts)?;
    let (server, addr) = Server::start(&opts.server, &prepared)?;
    let Prepared { players, shard, emu, timeline, part, .. } = prepared;
    let up_delay = server.live();
    // the players' side: a part of the run in this process, on the plan made here
    let (tx, ended) = std::sync::mpsc::channel();
    let mut env = crate::run_part::Env::new(out.to_path_buf(), tx);
    env.clients_ns = emu.as_ref().map(|e| e.clients.clone()).unwrap_or_default();
    env.players = Some(players.clone());
    let mut clients = crate::run_part::prepare(part.clients(shard.clone(), addr), env).map_err(failed)?;
    let client_progress = clients.progress.clone();
    // its schedule's zero is the instant its players are connected
    clients.start(0);
    let done = AtomicBool::new(false);
    let server = Mutex::new(server);
    let died: Mutex<Option<(String, u64)>> = Mutex::new(None);
    let link_series = Mutex::new(Vec::new());
    let start_more = |range: Range<u32>, at_ns: u64| drop(clients.start_more(range, at_ns));
    let steer = crate::steer::Steer::new(opts.commands, Some(&players), &client_progress, emu.as_ref(), opts.events, timeline, opts.clock)
        .starting_more((players.limit > sc.players).then_some(&start_more as &(dyn Fn(Range<u32>, u64) + Sync)));
    let client = std::thread::scope(|s| {
        let (done_r, p, pl, up) = (&done, &client_progress, &players, &up_delay);
        s.spawn(move || progress(sc, pl, p, up, done_r, opts.events, opts.clock, Some(out)));
        if let Some(e) = emu.as_ref().filter(|e| e.links().is_some()) {
            let (done_r, series) = (&done, &link_series);
            s.spawn(move || sample_links(e, p, done_r, series, opts.clock));
        }
        // The players stop on the user's signal, or when the server side dies.
        s.spawn(|| crate::steer::watch(&server, opts.stop, &clients.stop, &done, &died, &steer));
        let r = match ended.recv() {
            Ok(d) => d.report.map_err(anyhow::Error::msg).and_then(|v| serde_json::from_value::<SendReport>(v).context("the players' report")),
            Err(_) => Err(anyhow::anyhow!("the players' side ended without a report")),
        };
        done.store(true, Ordering::Relaxed);
        r
    });
    let commanded = steer.commanded.load(Ordering::Relaxed);
    let marks = steer.marks.into_inner().unwrap_or_else(|p| p.into_inner());
    clients.finish();
    let server = server.into_inner().unwrap_or_else(|p| p.into_inner());
    let died = died.into_inner().unwrap_or_else(|p| p.into_inner());
    let server_report = server.finish(out, died.is_some()).map_err(failed)?;
    let client = client.context("client side").map_err(failed)?;
    let mut interruption = Interruption::of(sc, &client, server_report.as_ref(), died.as_ref(), opts.stop.load(Ordering::Relaxed) || commanded);
    if let Some(i) = interruption.as_mut().filter(|_| commanded && died.is_none()) {
        i.reason = "stopped by a command".into();
    }
    let online = players.roster.changes();
    let server_report = server_report.unwrap_or_else(|| empty_report(&client));
    let links = emu.as_ref().and_then(|e| e.links());
    let link_series = link_series.into_inner().unwrap_or_else(|p| p.into_inner());
    let topology_svg = emu.as_ref().map(|e| {
        // the network as the run left it: links down, and emulated links' settings
        let down = horde_emu::load(&e.exp).map(|(m, _)| m.down_links).unwrap_or_default();
        let end = crate::topology::AtEnd { down: &down, links: links.as_deref().unwrap_or_default() };
        crate::topology::svg(&e.plan, &e.server_name, horde_emu::fwd::describe, &end)
    });
    let outcomes = Outcomes {
        client,
        server: server_report.clone(),
        usage: Usage::now(),
        links,
        link_series,
        topology_svg,
        interruption,
        // the players planned on demand were present here too
        present: vec![if shard == (0..sc.players) { 0..players.len() } else { shard }],
        distributed: None,
        online,
        marks,
    };
    let summary = report::write(sc, out, &players, outcomes).map_err(failed)?;
    drop(emu);
    Ok(RunOutcome { summary, server: server_report, server_died: died.map(|d| d.0) })
}

/// What both kinds of run set up first: the plan, the shard, the server side's part (with the
/// run key), the emulated placement.
pub(crate) struct Prepared<'a> {
    pub players: Arc<players::Players>,
    pub shard: Range<u32>,
    pub part: crate::part::Part,
    pub out: PathBuf,
    pub emu: Option<EmuRun<'a>>,
    /// The scenario's `[[at]]` entries as commands.
    pub timeline: Vec<(u64, crate::control::Command)>,
}

pub(crate) fn prepare<'a>(sc: &Scenario, opts: &RunOptions<'a>) -> Result<Prepared<'a>, Error> {
    let failed = Error::Failed;
    let out = opts.out;
    let timeline = crate::control::timeline(sc).map_err(|m| Error::BadInput(anyhow::anyhow!("{}: {m}", sc.name)))?;
    let t_plan = Stopwatch::start();
    // A run of the whole scenario may raise its online target above `players` (planned on
    // demand) up to what this machine holds; a shard or regulated circuits keep their plan.
    let limit = if opts.shard.is_some() || sc.regulation.is_some() {
        sc.players
    } else {
        let descriptors = horde_sys::clock::raise_fd_limit();
        // a server side in this process shares the descriptors with the players
        let descriptors = if matches!(opts.server, ServerSide::InProcess) { descriptors / 2 } else { descriptors };
        players::stated_limit(sc.players, descriptors, players::available_memory())
    };
    let players = Arc::new(players::plan(sc, limit, opts.stop)?);
    (opts.events)(&Event::Planned { seconds: t_plan.elapsed().as_secs_f64() });
    if players.limit > sc.players {
        (opts.events)(&Event::Note(format!(
            "players: {} planned; a command may raise the online target up to {} (this machine's descriptors and memory), the others planned when asked",
            sc.players, players.limit
        )));
    }
    let shard = opts.shard.clone().unwrap_or(0..sc.players);
    if shard.end > sc.players || shard.is_empty() {
        return Err(Error::BadInput(anyhow::anyhow!("shard {}..{} is not a non-empty part of players 0..{}", shard.start, shard.end, sc.players)));
    }
    let dir = opts.scenario_file.and_then(Path::parent).unwrap_or(Path::new("."));
    let key = crate::server::run_key(sc)?;
    let emu = match &sc.emu {
        Some(p) => match &opts.server {
            ServerSide::Child => Some(EmuRun::up(p, sc, &players, opts.events)?),
            ServerSide::InProcess => {
                return Err(Error::BadInput(anyhow::anyhow!("{}: [emu] runs the server side as a child process (ServerSide::Child)", sc.name)))
            }
        },
        None => None,
    };
    let listen = emu.as_ref().map_or(sc.server, |e| e.server);
    let out = std::path::absolute(out).with_context(|| format!("locating {}", out.display())).map_err(failed)?;
    let part = crate::part::Part::server(sc, dir, &key, listen, &out, players.limit)?;
    Ok(Prepared { players, shard, part, out, emu, timeline })
}

/// Samples the emulated links' counters once a second while the players run.
/// The emulated links' counters once a second of the run's clock (from the players' start, as
/// the traffic, the progress and the commands' marks are).
fn sample_links(e: &EmuRun, p: &Progress, done: &AtomicBool, series: &Mutex<Vec<crate::report::LinkSeries>>, clock: &dyn Clock) {
    let mut next = 0.0;
    while !done.load(Ordering::Relaxed) {
        clock.sleep(Duration::from_millis(50));
        let Some(t) = run_clock_s(p, clock) else { continue };
        if t >= next {
            if let Some(links) = e.links() {
                let mut s = series.lock().unwrap_or_else(|p| p.into_inner());
                crate::report::LinkSeries::record(&mut s, t, &links);
            }
            next = t.floor() + 1.0;
        }
    }
}

/// Now on the run's one clock: seconds since the players' common start (`None` before it).
pub(crate) fn run_clock_s(p: &Progress, clock: &dyn Clock) -> Option<f64> {
    match p.t0_real_ns.load(Ordering::Relaxed) {
        0 => None,
        t0 => Some(clock.real_ns().saturating_sub(t0) as f64 / 1e9),
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

/// Reports progress once a second: rates over the last second and players per category. Ticks
/// keep to the wall clock's seconds; when a busy machine delays one, its rates are still per
/// second (counts over the interval it covers, divided by its length).
#[allow(clippy::too_many_arguments)]
pub(crate) fn progress(
    sc: &Scenario,
    players: &std::sync::Arc<players::Players>,
    p: &Progress,
    up: &crate::server::LiveServer,
    done: &AtomicBool,
    events: Events,
    clock: &dyn Clock,
    logs: Option<&std::path::Path>,
) {
    // per category so far, from both sides' logs as they are written (the same summary an
    // agent keeps of its part): followed once the run's clock has its zero
    use crate::live_digest::{Clocks, Follower, Live};
    use horde_model::service::Direction;
    let mut live = logs.map(|dir| {
        let followers = [Follower::new(dir.join("client.hlog"), Direction::Up), Follower::new(dir.join("server.hlog"), Direction::Down)];
        (Live::new(sc, players), followers, false)
    });
    let names: Vec<String> = sc.service.states.iter().map(|s| s.name.clone()).collect();
    let mut loss = LossFollower::new(clock.real_ns());
    let mut last = [0u64; 4];
    let mut down = horde_engine::live::DelayWindow::default();
    let mut last_class = p.by_class.totals();
    let (mut next, mut last_t) = (1.0f64, 0.0f64);
    let rates = crate::ModelRates::of(players);
    while !done.load(Ordering::Relaxed) {
        clock.sleep(Duration::from_millis(50));
        // ticks are seconds of the run's clock, as the report's charts and the commands' marks
        let Some(t) = run_clock_s(p, clock) else { continue };
        if t < next {
            continue;
        }
        next = t.floor() + 1.0;
        if t > sc.duration_s + 0.5 {
            // The traffic is over (the last second is the linger for in-flight APDUs): a tick
            // now would only report zeros.
            continue;
        }
        let now = [
            p.sent_packets.load(Ordering::Relaxed),
            p.sent_bytes.load(Ordering::Relaxed),
            p.recv_packets.load(Ordering::Relaxed),
            p.recv_bytes.load(Ordering::Relaxed),
        ];
        let dt = (t - last_t).max(1e-3);
        last_t = t;
        let per_s = |n: u64| (n as f64 / dt).round() as u64;
        let d = |i: usize| per_s(now[i] - last[i]);
        let class_now = p.by_class.totals();
        let model = rates.at(sc, players, t);
        let category_rates = sc
            .service
            .states
            .iter()
            .enumerate()
            .map(|(k, st)| {
                let (s1, r1) = class_now.get(k).copied().unwrap_or_default();
                let (s0, r0) = last_class.get(k).copied().unwrap_or_default();
                let [up_model, down_model] = model.get(k).copied().unwrap_or_default();
                crate::CategoryRates { category: st.name.clone(), up_apdu_s: per_s(s1 - s0), down_apdu_s: per_s(r1 - r0), up_model, down_model }
            })
            .collect();
        last_class = class_now;
        let mut server = up.lock().unwrap_or_else(|e| e.into_inner());
        let snap = Snapshot {
            t_s: t,
            up_pkt_s: d(0),
            up_bit_s: d(1) * 8,
            down_pkt_s: d(2),
            down_bit_s: d(3) * 8,
            sent_packets: now[0],
            received_packets: now[2],
            categories: crate::categories_at(sc, players, t),
            agents: Vec::new(),
            down_delay_ms: down.take(&p.delay).map(|w| [w.p50_ms, w.p99_ms]),
            // the server side's last second (it counts on its own clock's seconds)
            up_delay_ms: server.delay.take(),
            loss: loss.next(&p.seconds, &server, clock.real_ns()).map(Box::new),
            category_rates,
            category_live: Vec::new(),
            circuits: None,
            bots: None,
        };
        drop(server);
        let mut snap = snap;
        if let Some((l, followers, begun)) = live.as_mut() {
            if !*begun {
                l.begin(Clocks { epoch_ns: p.t0_real_ns.load(Ordering::Relaxed), ..Clocks::default() });
                *begun = true;
            }
            for f in followers.iter_mut() {
                f.poll(l);
            }
            snap.category_live = l.category_live(&names);
        }
        last = now;
        events(&Event::Tick(snap));
    }
}

/// Live loss each way, one closed second of departures at a time: the players' side's own
/// counts (up sent, down arrived) beside the server side's (down sent, up arrived) for the same
/// second of departure.
pub(crate) struct LossFollower {
    /// Real ns the players started at (a second's `t_s` counts from it).
    t0_ns: u64,
    /// The players' side's closed seconds not yet matched with the server side's.
    ours: std::collections::VecDeque<(u64, u64, u64)>,
    next: u64,
}

impl LossFollower {
    pub(crate) fn new(t0_ns: u64) -> LossFollower {
        LossFollower { t0_ns, ours: Default::default(), next: t0_ns / 1_000_000_000 }
    }

    /// The latest second both sides closed since the last call (`None` when none did: the
    /// server side's line is late, or it reports none, as through agents).
    pub(crate) fn next(&mut self, counts: &horde_engine::live::SecondCounts, server: &crate::server::ServerLive, now_ns: u64) -> Option<crate::LiveLoss> {
        self.ours.extend(crate::server::closed_seconds(counts, &mut self.next, now_ns));
        let mut latest = None;
        while let Some(&(sec, up_sent, down_arrived)) = self.ours.front() {
            match server.second(sec) {
                Some(theirs) => {
                    let t_s = ((sec + 1) * 1_000_000_000).saturating_sub(self.t0_ns) as f64 / 1e9;
                    latest = Some(crate::LiveLoss {
                        t_s,
                        up_sent,
                        up_lost: up_sent.saturating_sub(theirs.up_arrived),
                        down_sent: theirs.down_sent,
                        down_lost: theirs.down_sent.saturating_sub(down_arrived),
                    });
                }
                // the server side has not reported it yet: wait, unless it is long overdue
                None if sec + crate::server::LOSS_LAG_S + 5 > now_ns / 1_000_000_000 => break,
                None => {}
            }
            self.ours.pop_front();
        }
        latest
    }
}
