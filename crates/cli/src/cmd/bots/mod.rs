use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use horde_engine::clock::{Clock, Stopwatch};

use anyhow::Context;
use horde_engine::bots::{self, BotsOptions, BotsReport};
use serde::Serialize;

use crate::{bad_input, Outcome};

mod agents;
mod bench;
mod record;
mod server;

use bench::benchmark;
use server::{proc_cpu, proc_cpu_split, self_cpu, start_server, status, Server};

/// Automated Quake 3 players against a real game server (OpenArena / ioquake3): N bots on a few
/// threads connect, spawn, move, turn, jump and shoot, then disconnect cleanly. Reports the
/// server's response rate and the response time at the clients.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The game server, IP:PORT (loopback or an address inside a namespace this host created)
    #[arg(short = 'a', long, value_name = "IP:PORT", required_unless_present_any = ["start_server", "capture"])]
    pub server: Option<String>,
    /// Start `openarena-server` on 127.0.0.1 (a free port), stop it at the end; its log goes to --out
    #[arg(long)]
    pub start_server: bool,
    /// Map for --start-server
    #[arg(long, default_value = "oa_dm1")]
    pub map: String,
    /// Server frames (snapshots) per second for --start-server (the engine's default: 20)
    #[arg(long, default_value_t = 20)]
    pub sv_fps: u32,
    /// Number of bots
    #[arg(short = 'n', long = "players", visible_alias = "bots", default_value_t = 8)]
    pub players: usize,
    /// How long the bots play once all have joined
    #[arg(short = 't', long, default_value = "30s", value_parser = super::duration, value_name = "DURATION")]
    pub duration: Duration,
    /// Bots join evenly over this long
    #[arg(long, default_value = "2s", value_parser = super::duration, value_name = "DURATION")]
    pub ramp: Duration,
    /// Start of the play time left out of rates and response times (spawning, first snapshots)
    #[arg(long, default_value = "2s", value_parser = super::duration, value_name = "DURATION")]
    pub warmup: Duration,
    /// Packets per second each bot sends at most (cl_maxpackets, 15..125)
    #[arg(long, default_value_t = 30)]
    pub maxpackets: u32,
    /// Usercmds per second each bot makes (its frame rate)
    #[arg(long, default_value_t = 60)]
    pub fps: u32,
    /// Earlier packets' commands repeated in each packet (cl_packetdup, 0..5)
    #[arg(long, default_value_t = 1)]
    pub packetdup: u32,
    /// Wire protocol: openarena (71 = Quake III 1.32 framing), ioq3 (71 with checksums), q3 (68)
    #[arg(long, default_value = "openarena")]
    pub protocol: String,
    /// Threads multiplexing the bots
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for the summary (summary.json) and, with --start-server, the server's log
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Live progress: `json` writes one line a second to standard error (the `--progress json` event type of `horde run`, with a `bots` part: bots started, answers per second, response time p50/p99)
    #[arg(long, value_name = "json", value_parser = ["json"])]
    pub progress: Option<String>,
    /// Write the summary as JSON to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Per-packet log: each bot a flow, each packet a departure, each answered packet an echo whose round trip is its response time (`horde decode` reads it)
    #[arg(short = 'l', long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Emulated experiment (`horde emu up` prints its id) to play in, as root: bots on the --clients hosts, a --start-server server on --server-host (else --server must be reachable from the clients)
    #[arg(long, value_name = "ID")]
    pub emu: Option<String>,
    /// With --emu: the host group (or host) the bots play from, round-robin
    #[arg(long, default_value = "client", value_name = "NAME")]
    pub clients: String,
    /// With --emu --start-server: the host the server runs on (bound to its first address)
    #[arg(long, default_value = "server", value_name = "NAME")]
    pub server_host: String,
    /// Service whose `[bot]` table holds the behaviour model (built-in name or TOML file)
    #[arg(long, default_value = "quake3", value_name = "NAME|FILE")]
    pub service: String,
    /// Recorded action files (CSV: t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon; see docs/cli.md), comma-separated or repeated: dealt round-robin, bot i replays the (i mod k)-th from the start; default: the behaviour model
    #[arg(long, value_name = "FILE", value_delimiter = ',')]
    pub actions: Vec<PathBuf>,
    /// Write the first bot's input, frame by frame, to FILE as an action file (what --actions replays); with --capture, a real client's input decoded from a capture instead
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// With --record: a capture (pcap or pcapng, both directions, from before the client connects) of an OpenArena client's session, whose input is decoded instead of playing bots
    #[arg(long, value_name = "FILE", requires = "record", conflicts_with_all = ["start_server", "server", "agents", "steps", "emu"])]
    pub capture: Option<PathBuf>,
    /// With --capture: the client's IP:PORT in it (default: the first client that connects)
    #[arg(long, value_name = "IP:PORT", requires = "capture")]
    pub client: Option<String>,
    /// Benchmark: player counts to step through, one run of --duration each (e.g. 1,2,4,8,16,32,48,64); with --start-server, one server per 64 players
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    pub steps: Vec<usize>,
    /// Servers to start with --start-server (players spread over them); default: one per 64 players
    #[arg(long, value_name = "N")]
    pub servers: Option<usize>,
    /// With --start-server: hold each started server to this share of one core (e.g. 0.5), with the kernel's CPU controller (a cgroup; root); refused with the reason where it cannot be applied
    #[arg(long, value_name = "FRACTION", requires = "start_server")]
    pub server_cpu: Option<f64>,
    /// Benchmark: run each step this many times (fresh servers each time); every figure then has a 95 % interval over the repeats, and the saturation point is stated as an interval
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// Benchmark: a step saturates the server when its p99 response time exceeds this
    #[arg(long, default_value = "150ms", value_parser = super::duration, value_name = "DURATION")]
    pub p99_bound: Duration,
    /// Run the bots on agents (`horde agent` on each machine; see docs/distributed.md): comma-separated HOST:PORT[*WEIGHT], dns:NAME:PORT or @FILE; the bots are spread over them by weight against one server, with one merged report in --out
    #[arg(long, value_name = "LIST", help_heading = "Through agents")]
    pub agents: Option<String>,
    /// With --agents: the controller's credentials directory with ca.pem, controller.pem and controller.key (from `horde agent keygen`)
    #[arg(long, value_name = "DIR", env = "HORDE_CREDENTIALS", requires = "agents", help_heading = "Through agents")]
    pub credentials: Option<PathBuf>,
    /// With --agents: an agent that hears nothing from the controller for this long stops its bots, and a running agent silent this long is reported lost (1s..60s)
    #[arg(long, value_name = "DURATION", default_value = "3s", help_heading = "Through agents")]
    pub deadman: String,
    #[arg(skip)]
    pub actions_parsed: Vec<horde_q3::input::Recorded>,
    #[arg(skip)]
    pub place: Option<Emu>,
    #[arg(skip)]
    pub service_text: Option<String>,
    #[command(flatten)]
    pub commands: crate::cmd::commands::CommandArgs,
}

/// Where bots and a started server live in an emulated experiment.
#[derive(Debug, Clone)]
pub struct Emu {
    clients: Vec<std::sync::Arc<std::fs::File>>,
    server_ns: std::sync::Arc<std::fs::File>,
    server_ip: std::net::IpAddr,
}

fn resolve_emu(args: &Args, id: &str) -> Result<Emu, crate::Failure> {
    let (_, plan) = horde_emu::load(id).map_err(|e| bad_input(anyhow::anyhow!("--emu {id}: {e}")))?;
    let names: Vec<String> = match plan.hosts_of(&args.clients) {
        Some(ix) => ix.iter().map(|&i| plan.nodes[i].name.clone()).collect(),
        None => vec![args.clients.clone()],
    };
    let mut clients = Vec::new();
    for n in &names {
        clients.push(std::sync::Arc::new(horde_emu::open_node(id, &plan, n).map_err(|e| bad_input(anyhow::anyhow!("--clients: {e}")))?));
    }
    let server_ns = std::sync::Arc::new(horde_emu::open_node(id, &plan, &args.server_host).map_err(|e| bad_input(anyhow::anyhow!("--server-host: {e}")))?);
    let i = plan.node(&args.server_host).expect("opened above");
    let server_ip = plan.addrs(i).first().copied().ok_or_else(|| bad_input(anyhow::anyhow!("--server-host {} has no address", args.server_host)))?;
    Ok(Emu { clients, server_ns, server_ip: server_ip.into() })
}

/// What one run measured beside the bots' own report.
#[derive(Debug, Clone, Default, Serialize)]
struct Extras {
    /// The servers' CPU in the measured window, % of one core: their sum, and the busiest one.
    server_cpu_pct: Option<f64>,
    server_cpu_max_pct: Option<f64>,
    /// This process's CPU (the bots) in the measured window, % of one core.
    bots_cpu_pct: f64,
    /// The bots' memory per player: this process's resident memory near the end of the play
    /// time less before the bots started, KiB, divided by the players.
    bots_memory_per_player_kib: Option<f64>,
    /// Players the servers' `getstatus` listed near the end, and after the bots left.
    listed: Option<usize>,
    listed_after: Option<usize>,
    ping_max_ms: Option<i32>,
    /// The server's frames in the measured window (one server started here): requests per
    /// frame and CPU per request, from the bots' packets and its scheduler statistics.
    frames: Option<horde_q3::frames::Frames>,
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    let commands = args.commands.open()?;
    // with --progress json the answers are lines of the event stream, as the console reads them
    let json = args.progress.is_some();
    let reply = move |r: &horde_scenario::control::Reply| match json {
        true => eprintln!("{}", serde_json::to_string(&horde_scenario::EventLine::Reply { scenario: "bots".into(), reply: r.clone() }).unwrap_or_default()),
        false => crate::cmd::commands::say_reply(r),
    };
    crate::cmd::commands::stop_only(commands, stop, "bots run", &reply, || bots(args, stop))
}

fn bots(args: Args, stop: &AtomicBool) -> Outcome {
    if args.capture.is_some() {
        return record::from_capture(&args);
    }
    if args.record.is_some() && (args.agents.is_some() || !args.steps.is_empty()) {
        return Err(bad_input(anyhow::anyhow!("--record writes one run's first bot, played here: give it without --agents and --steps")));
    }
    if !(1..=1000).contains(&args.sv_fps) {
        return Err(bad_input(anyhow::anyhow!("--sv-fps must be 1..=1000 server frames per second (got {})", args.sv_fps)));
    }
    if args.servers == Some(0) {
        return Err(bad_input(anyhow::anyhow!("--servers must be at least 1")));
    }
    if let Some(f) = args.server_cpu.filter(|f| !(0.01..=64.0).contains(f)) {
        return Err(bad_input(anyhow::anyhow!("--server-cpu {f}: a share of one core, 0.01 to 64 (0.5: half a core)")));
    }
    if args.repeat > 1 && args.steps.is_empty() {
        return Err(bad_input(anyhow::anyhow!("--repeat is for the benchmark: give --steps N,N,… (each step then runs --repeat times)")));
    }
    // Nothing the part names is opened where it plays: a service file's text goes with it.
    let service_text = match horde_model::service::Service::builtin(&args.service) {
        Ok(_) => None,
        Err(_) => Some(horde_model::files::read_text(std::path::Path::new(&args.service), horde_model::files::MAX_TOML, "service files").map_err(bad_input)?),
    };
    let service_text = service_text.map(|t| horde_model::dist::inline_value_files(&t)).transpose().map_err(|e| bad_input(anyhow::anyhow!("--service: {e}")))?;
    if args.actions.len() > 16 {
        return Err(bad_input(anyhow::anyhow!("--actions: {} files; give at most 16 (they are dealt to the bots round-robin)", args.actions.len())));
    }
    let mut actions = Vec::with_capacity(args.actions.len());
    for p in &args.actions {
        let text = horde_model::files::read_text(p, horde_model::files::MAX_DATA, "action files").context("reading the action file").map_err(bad_input)?;
        actions.push(horde_q3::input::Recorded::parse(&text).map_err(|e| bad_input(anyhow::anyhow!("{}: {e}", p.display())))?);
    }
    let place = match &args.emu {
        Some(id) => Some(resolve_emu(&args, id)?),
        None => None,
    };
    let args = Args { actions_parsed: actions, place, service_text, ..args };
    // Every run's part is checked before a server starts (the servers' addresses aside).
    let given = [SocketAddr::from(([127, 0, 0, 1], 27960))];
    for n in std::iter::once(args.players).chain(args.steps.iter().copied()) {
        part(&args, &given, n).options(args.seed, args.duration.as_nanos() as u64).map_err(|e| bad_input(anyhow::anyhow!("{e}")))?;
    }
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from("horde-bots"));
    crate::cmd::report_dir(&out)?;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    if args.agents.is_some() {
        return agents::run(&args, &out, stop);
    }
    if !args.steps.is_empty() {
        return benchmark(&args, &out, stop);
    }
    let n = args.players;
    let (servers, addrs) = servers_for(&args, &out, n)?;
    say!("horde bots: {n} bot(s) against {}, joining over {:?}, playing {:?}", list(&addrs), args.ramp, args.duration);
    let (report, x) = run_once(&args, &addrs, &servers, n, stop)?;
    print_report(&report);
    print_extras(&x);
    for s in &servers {
        say!("  server log: {}", std::path::absolute(&s.log).unwrap_or(s.log.clone()).display());
    }
    if let Some(p) = &args.log {
        say!("  log: {} (horde decode: per bot, response times as round trips)", std::path::absolute(p).unwrap_or(p.clone()).display());
    }
    let json = serde_json::to_string_pretty(&report).expect("report serialises");
    std::fs::write(out.join("summary.json"), &json).with_context(|| format!("writing {}", out.join("summary.json").display()))?;
    if let Some(p) = &args.json {
        super::write_out(p, &json)?;
    }
    Ok(if report.interrupted {
        130
    } else if report.entered < n {
        1
    } else {
        0
    })
}

fn list(addrs: &[SocketAddr]) -> String {
    addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
}

/// The servers to play on: started (one per 64 players unless --servers says) or the one given.
fn servers_for(args: &Args, out: &std::path::Path, players: usize) -> Result<(Vec<Server>, Vec<SocketAddr>), crate::Failure> {
    if !args.start_server {
        let a = args.server.as_deref().expect("clap requires --server without --start-server");
        let addr = horde_model::flow::parse_addr(a).map_err(|m| bad_input(anyhow::anyhow!("--server: {m}")))?;
        return Ok((Vec::new(), vec![addr]));
    }
    let k = args.servers.unwrap_or(players.div_ceil(64)).max(1);
    if players.div_ceil(k) > 64 {
        return Err(bad_input(anyhow::anyhow!(
            "{players} players on {k} server(s) is more than 64 per server (the engine's MAX_CLIENTS); give --servers {}",
            players.div_ceil(64)
        )));
    }
    let mut servers = Vec::new();
    for i in 0..k {
        servers.push(start_server(args, out, i, players.div_ceil(k)).context("starting the game server")?);
    }
    let addrs = servers.iter().map(|s| s.addr).collect();
    Ok((servers, addrs))
}

fn run_once(args: &Args, addrs: &[SocketAddr], servers: &[Server], n: usize, stop: &AtomicBool) -> Result<(BotsReport, Extras), crate::Failure> {
    let mut opts = options(args, addrs, n)?;
    let live = args.progress.is_some().then(|| std::sync::Arc::new(bots::BotsLive::default()));
    opts.live = live.clone();
    // the server's frames: one server started here, whose scheduler statistics this reads
    let events = (servers.len() == 1).then(|| std::sync::Arc::new(std::sync::Mutex::new(horde_q3::frames::Events::default())));
    opts.frames = events.clone();
    let tape = args.record.as_ref().map(|_| std::sync::Arc::new(std::sync::Mutex::new(Vec::new())));
    opts.record = tape.clone();
    let probe_ns = args.place.as_ref().map(|p| p.clients[0].clone());
    let status = |a: SocketAddr| status(a, probe_ns.as_deref());
    // The bots' driver looks at the machine's clock (this command is where it is chosen).
    let clock: &dyn Clock = &horde_sys::clock::System;
    let rss0 = horde_sys::host::own_rss_kb();
    let t0 = Stopwatch::start();
    let start_real = clock.real_ns();
    let pids: Vec<u32> = servers.iter().map(|s| s.child.id()).collect();
    let cpu = || -> (Option<f64>, Vec<Option<f64>>, f64) { (None, pids.iter().map(|&p| proc_cpu(p)).collect(), self_cpu()) };
    let sleep_until = |d: Duration| {
        while t0.elapsed() < d && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            clock.sleep(Duration::from_millis(50));
        }
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let report = std::thread::scope(|sc| {
        if let Some(live) = &live {
            let (done, t0) = (&done, &t0);
            sc.spawn(move || progress_lines(live, done, t0, clock));
        }
        let h = sc.spawn(|| {
            sleep_until(args.ramp + args.warmup);
            let (_, s0, b0) = cpu();
            let a = t0.elapsed();
            sleep_until(args.ramp + args.duration.saturating_sub(Duration::from_millis(700)));
            let (_, s1, b1) = cpu();
            let rss1 = horde_sys::host::own_rss_kb();
            let secs = (t0.elapsed() - a).as_secs_f64().max(1e-3);
            let listed: Vec<Option<Vec<(i32, String)>>> = addrs.iter().map(|&a| status(a)).collect();
            (s0, s1, b1 - b0, secs, listed, rss1)
        });
        let sampler = sc.spawn(|| {
            // Each started server's user and system CPU, second by second, until the bots end.
            let mut out = Vec::new();
            let mut last: Vec<Option<(f64, f64)>> = pids.iter().map(|&p| proc_cpu_split(p)).collect();
            let mut k = 1u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) && !pids.is_empty() {
                let due = Duration::from_secs(k);
                while t0.elapsed() < due && !done.load(std::sync::atomic::Ordering::Relaxed) {
                    clock.sleep(Duration::from_millis(20));
                }
                if t0.elapsed() < due {
                    break;
                }
                for (i, &p) in pids.iter().enumerate() {
                    let now = proc_cpu_split(p);
                    if let (Some(a), Some(b)) = (last[i], now) {
                        out.push(bots::ServerCpu { server: i, t_s: k as f64, user_pct: (b.0 - a.0) * 100.0, system_pct: (b.1 - a.1) * 100.0 });
                    }
                    last[i] = now;
                }
                k += 1;
            }
            out
        });
        let schedstat = sc.spawn(|| match (&events, pids.first()) {
            (Some(_), Some(&pid)) => server::sample_schedstat(pid, &done, clock),
            _ => Vec::new(),
        });
        let r = bots::run(&opts, stop);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (r, h.join().ok(), sampler.join().unwrap_or_default(), schedstat.join().unwrap_or_default())
    });
    let (report, peek, cpu_series, schedstat) = (report.0, report.1, report.2, report.3);
    let mut report = report.context("running the bots")?;
    report.server_cpu = cpu_series;
    if let (Some(path), Some(tape)) = (&args.record, &tape) {
        let frames = std::mem::take(&mut *tape.lock().unwrap_or_else(|p| p.into_inner()));
        let about = [format!("input of bot horde000 (seed {}, service {}), recorded by horde bots --record", args.seed, args.service)];
        record::write(path, &frames, &about)?;
    }
    clock.sleep(Duration::from_millis(300));
    let mut x = Extras::default();
    if let Some(e) = &events {
        let from = start_real + (args.ramp + args.warmup).as_nanos() as u64;
        let to = start_real + (args.ramp + args.duration.saturating_sub(Duration::from_millis(700))).as_nanos() as u64;
        x.frames = horde_q3::frames::frames(&e.lock().unwrap_or_else(|p| p.into_inner()), &schedstat, from, to);
    }
    if let Some((s0, s1, bots_s, secs, listed, rss1)) = peek {
        x.bots_cpu_pct = bots_s / secs * 100.0;
        if let (Some(a), Some(b)) = (rss0, rss1) {
            x.bots_memory_per_player_kib = Some(b.saturating_sub(a) as f64 / n.max(1) as f64);
        }
        let per: Vec<f64> = s0.iter().zip(&s1).filter_map(|(a, b)| Some((b.as_ref()? - a.as_ref()?) / secs * 100.0)).collect();
        if !per.is_empty() {
            x.server_cpu_pct = Some(per.iter().sum());
            x.server_cpu_max_pct = per.iter().copied().reduce(f64::max);
        }
        if listed.iter().all(|l| l.is_some()) {
            let all: Vec<&(i32, String)> = listed.iter().flatten().flatten().collect();
            for b in &mut report.bots {
                // Names come back with the server's colour codes stripped or kept: match either.
                b.server_ping_ms = all.iter().find(|p| p.1 == b.name || p.1.trim_end_matches("^7") == b.name).map(|p| p.0);
            }
            x.listed = Some(all.len());
            x.ping_max_ms = all.iter().map(|p| p.0).filter(|&p| p < 999).max();
        }
    }
    let after: Vec<Option<Vec<(i32, String)>>> = addrs.iter().map(|&a| status(a)).collect();
    if after.iter().all(|l| l.is_some()) {
        x.listed_after = Some(after.iter().flatten().map(|l| l.len()).sum());
    }
    Ok((report, x))
}

/// The engine's options for one run of `n` bots on `addrs`.
/// `--progress json`: a line a second on standard error until the bots are done.
fn progress_lines(live: &bots::BotsLive, done: &AtomicBool, t0: &Stopwatch, clock: &dyn Clock) {
    use std::sync::atomic::Ordering::Relaxed;
    let (mut window, mut last, mut last_sent, mut next) = (horde_engine::live::DelayWindow::default(), 0u64, 0u64, 1.0f64);
    while !done.load(Relaxed) {
        clock.sleep(Duration::from_millis(50));
        let t = t0.elapsed().as_secs_f64();
        if t < next {
            continue;
        }
        next = t.floor() + 1.0;
        let answered = live.answered.load(Relaxed);
        let now = horde_scenario::BotsNow {
            started: live.started.load(Relaxed),
            answered_s: answered - last,
            response_ms: window.take(&live.response).map(|p| [p.p50_ms, p.p99_ms]),
        };
        let sent = live.sent.load(Relaxed);
        let snap = horde_scenario::Snapshot {
            t_s: t,
            up_pkt_s: sent - last_sent,
            down_pkt_s: answered - last,
            sent_packets: sent,
            received_packets: answered,
            bots: Some(Box::new(now)),
            ..Default::default()
        };
        (last, last_sent) = (answered, sent);
        let line = horde_scenario::EventLine::Progress { scenario: "bots".into(), progress: snap };
        if let Ok(text) = serde_json::to_string(&line) {
            eprintln!("{text}");
        }
    }
}

/// One run's part: `n` bots on the servers at `addrs`, as every placement plays it.
fn part(args: &Args, addrs: &[SocketAddr], n: usize) -> horde_agent::msg::BotsJob {
    let total = u32::try_from(n).unwrap_or(u32::MAX);
    horde_agent::msg::BotsJob {
        servers: addrs.to_vec(),
        total,
        ids: 0..total,
        ramp_ns: args.ramp.as_nanos() as u64,
        warmup_ns: args.warmup.as_nanos() as u64,
        maxpackets: args.maxpackets,
        fps: args.fps,
        packetdup: args.packetdup,
        snaps: args.sv_fps.max(20),
        protocol: args.protocol.clone(),
        service: args.service.clone(),
        service_text: args.service_text.clone(),
    }
}

/// The engine's options for one run of `n` bots on `addrs` on this machine (or its emulated hosts).
fn options(args: &Args, addrs: &[SocketAddr], n: usize) -> Result<BotsOptions, crate::Failure> {
    let o = part(args, addrs, n).options(args.seed, args.duration.as_nanos() as u64).map_err(|e| bad_input(anyhow::anyhow!("{e}")))?;
    Ok(BotsOptions {
        threads: args.threads,
        actions: args.actions_parsed.clone(),
        log: if args.steps.is_empty() { args.log.clone() } else { None },
        netns: args.place.as_ref().map(|p| p.clients.clone()).unwrap_or_default(),
        ..o
    })
}

fn print_extras(x: &Extras) {
    if let Some(n) = x.listed {
        say!("  server status near the end: {n} player(s) listed; highest ping {} ms (the server's frame resolution)", x.ping_max_ms.unwrap_or(0));
    }
    if let Some(c) = x.server_cpu_pct {
        say!("  server CPU: {c:.1} % of one core (busiest server {:.1} %)", x.server_cpu_max_pct.unwrap_or(c));
    }
    if let Some(f) = &x.frames {
        say!(
            "  server frames: {} every {:.1} ms (longest {:.1}); requests per frame {:.1} (most {:.0}); CPU per frame {:.2} ms (most {:.2}); per request {:.0}/{:.0}/{:.0} µs min/mean/max; busy {:.1} % of a core",
            f.frames,
            f.interval_ms.mean,
            f.interval_ms.max,
            f.requests.mean,
            f.requests.max,
            f.cpu_ms.mean,
            f.cpu_ms.max,
            f.per_request_us.min,
            f.per_request_us.mean,
            f.per_request_us.max,
            f.busy * 100.0
        );
    }
    say!("  bots' CPU (this process): {:.1} % of one core", x.bots_cpu_pct);
    if let Some(m) = x.bots_memory_per_player_kib {
        say!("  bots' memory: {m:.1} KiB per player (this process's resident memory near the end, less before the bots)");
    }
    if let Some(n) = x.listed_after {
        say!("  server status after: {n} player(s)");
    }
}

pub fn print_report(r: &BotsReport) {
    say!(
        "horde bots: {} of {} entered the game, {} left cleanly{}",
        r.entered,
        r.bots.len(),
        r.quit_cleanly,
        if r.interrupted { " — interrupted" } else { "" }
    );
    say!(
        "  over {:.1} s: requests {:.1} pkt/s (mean {:.0} B), responses {:.1} pkt/s (mean {:.0} B); {:.2} snapshots/s per bot",
        r.window_s,
        r.request_rate,
        r.request_bytes_mean,
        r.response_rate,
        r.response_bytes_mean,
        r.snapshot_rate_per_bot
    );
    let q = &r.response_ms;
    say!("  response time: mean {:.1} ms, p50 {:.1}, p90 {:.1}, p99 {:.1}, max {:.1} ({} answered packets)", q.mean, q.p50, q.p90, q.p99, q.max, q.n);
    for b in r.bots.iter().filter(|b| b.end != "quit" && b.end != "still playing") {
        say!("  {}: {}", b.name, b.end);
    }
    // the spread between bots (the Quake study's per-client min/max)
    let answered: Vec<&bots::BotReport> = r.bots.iter().filter(|b| b.response_ms.n > 0).collect();
    let by = |f: &dyn Fn(&bots::BotReport) -> f64| -> Option<(f64, &str, f64, &str)> {
        let lo = answered.iter().min_by(|a, b| f(a).total_cmp(&f(b)))?;
        let hi = answered.iter().max_by(|a, b| f(a).total_cmp(&f(b)))?;
        Some((f(lo), lo.name.as_str(), f(hi), hi.name.as_str()))
    };
    if let (Some(m), Some(q)) = (by(&|b| b.response_ms.mean), by(&|b| b.request_rate)) {
        say!("  per bot: mean response time {:.1} ms ({}) to {:.1} ms ({}); requests {:.1} ({}) to {:.1} pkt/s ({})", m.0, m.1, m.2, m.3, q.0, q.1, q.2, q.3);
    }
    let bad: u64 = r.bots.iter().map(|b| b.corrupt + b.delta_misses).sum();
    let dropped: u64 = r.bots.iter().map(|b| b.dropped).sum();
    say!("  server packets lost {dropped}, unreadable or without delta base {bad}");
}
