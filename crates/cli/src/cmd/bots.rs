use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context;
use horde_engine::bots::{self, BotsOptions, BotsReport};
use horde_q3::Protocol;
use serde::Serialize;

use crate::{bad_input, Outcome};

/// Automated Quake 3 players against a real game server (OpenArena / ioquake3): N bots on a few
/// threads connect, spawn, move, turn, jump and shoot, then disconnect cleanly. Reports the
/// server's response rate and the response time at the clients.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The game server, IP:PORT (loopback or an address inside a namespace this host created)
    #[arg(short = 'a', long, value_name = "IP:PORT", required_unless_present = "start_server")]
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
    /// Recorded action file every bot replays from the start (CSV: t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon; see docs/cli.md); default: the behaviour model
    #[arg(long, value_name = "FILE")]
    pub actions: Option<PathBuf>,
    /// Benchmark: player counts to step through, one run of --duration each (e.g. 1,2,4,8,16,32,48,64); with --start-server, one server per 64 players
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    pub steps: Vec<usize>,
    /// Servers to start with --start-server (players spread over them); default: one per 64 players
    #[arg(long, value_name = "N")]
    pub servers: Option<usize>,
    /// Benchmark: a step saturates the server when its p99 response time exceeds this
    #[arg(long, default_value = "150ms", value_parser = super::duration, value_name = "DURATION")]
    pub p99_bound: Duration,
    #[arg(skip)]
    pub actions_parsed: Option<horde_q3::input::Recorded>,
    #[arg(skip)]
    pub place: Option<Emu>,
    #[arg(skip)]
    pub model: horde_q3::input::BotModel,
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

/// A game server this command started: stopped (and reaped) when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const OA_SERVER: &str = "/usr/games/openarena-server";

fn free_udp_port() -> std::io::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Asks `addr` for its status; returns (players, their pings) or None without an answer.
fn status(addr: SocketAddr, ns: Option<&std::fs::File>) -> Option<Vec<(i32, String)>> {
    let bind = || UdpSocket::bind(if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" });
    let s = match ns {
        Some(ns) => horde_engine::net::within_netns(ns, bind).ok()?.ok()?,
        None => bind().ok()?,
    };
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.send_to(&horde_q3::oob::packet("getstatus"), addr).ok()?;
    let mut buf = [0u8; 16384];
    let n = s.recv(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf[..n]);
    let body = text.strip_prefix("\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}").unwrap_or(&text);
    let mut lines = body.lines();
    if !lines.next()?.starts_with("statusResponse") {
        return None;
    }
    lines.next()?; // server info
    Some(
        lines
            .filter_map(|l| {
                let mut w = l.splitn(3, ' ');
                let _score = w.next()?;
                let ping = w.next()?.parse().ok()?;
                Some((ping, w.next()?.trim_matches('"').to_string()))
            })
            .collect(),
    )
}

fn start_server(args: &Args, dir: &std::path::Path, index: usize, max: usize) -> anyhow::Result<Server> {
    if !std::path::Path::new(OA_SERVER).exists() {
        anyhow::bail!("{OA_SERVER} not found: install it with `apt-get install openarena-server` (Debian), or give --server IP:PORT of a running server");
    }
    let place = args.place.as_ref();
    let port = if place.is_some() { 27960 + index as u16 } else { free_udp_port()? };
    let ip = place.map_or(std::net::IpAddr::from([127, 0, 0, 1]), |p| p.server_ip);
    let log = dir.join(if index == 0 { "server.log".to_string() } else { format!("server-{index}.log") });
    let home = dir.join("server-home");
    std::fs::create_dir_all(&home)?;
    let f = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let max = max.clamp(1, 64);
    let mut cmd = Command::new(OA_SERVER);
    if let Some(p) = place {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&*p.server_ns);
        // SAFETY: only setns (async-signal-safe) between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let child = cmd
        .args(["+set", "dedicated", "1", "+set", "net_ip", &ip.to_string(), "+set", "net_port", &port.to_string()])
        .args(["+set", "sv_maxclients", &max.to_string(), "+set", "sv_pure", "0", "+set", "sv_fps", &args.sv_fps.to_string()])
        .args(["+set", "g_inactivity", "0", "+set", "sv_timeout", "30", "+map", &args.map])
        .env("HOME", &home)
        .stdin(Stdio::null())
        .stdout(f.try_clone()?)
        .stderr(f)
        .spawn()
        .with_context(|| format!("starting {OA_SERVER}"))?;
    let server = Server { child, addr: SocketAddr::new(ip, port), log };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if status(server.addr, place.map(|p| &*p.clients[0])).is_some() {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    anyhow::bail!("the server did not answer within 30 s; see {}", server.log.display())
}

/// What one run measured beside the bots' own report.
#[derive(Debug, Clone, Default, Serialize)]
struct Extras {
    /// The servers' CPU in the measured window, % of one core: their sum, and the busiest one.
    server_cpu_pct: Option<f64>,
    server_cpu_max_pct: Option<f64>,
    /// This process's CPU (the bots) in the measured window, % of one core.
    bots_cpu_pct: f64,
    /// Players the servers' `getstatus` listed near the end, and after the bots left.
    listed: Option<usize>,
    listed_after: Option<usize>,
    ping_max_ms: Option<i32>,
}

fn protocol(args: &Args) -> Result<Protocol, crate::Failure> {
    match args.protocol.as_str() {
        "openarena" => Ok(Protocol::OpenArena),
        "ioq3" => Ok(Protocol::Ioq3),
        "q3" | "68" => Ok(Protocol::Legacy68),
        p => Err(bad_input(anyhow::anyhow!("--protocol must be openarena, ioq3 or q3 (got `{p}`)"))),
    }
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    if args.players == 0 || args.players > 4096 || args.steps.iter().any(|&n| n == 0 || n > 4096) {
        return Err(bad_input(anyhow::anyhow!("--players and every --steps value must be 1..=4096")));
    }
    if args.servers == Some(0) {
        return Err(bad_input(anyhow::anyhow!("--servers must be at least 1")));
    }
    let protocol = protocol(&args)?;
    let actions = match &args.actions {
        Some(p) => {
            let text = horde_model::files::read_text(p, horde_model::files::MAX_DATA, "action files").context("reading the action file").map_err(bad_input)?;
            Some(horde_q3::input::Recorded::parse(&text).map_err(|e| bad_input(anyhow::anyhow!("{}: {e}", p.display())))?)
        }
        None => None,
    };
    let place = match &args.emu {
        Some(id) => Some(resolve_emu(&args, id)?),
        None => None,
    };
    let svc = horde_model::service::Service::load(&args.service).map_err(|e| bad_input(anyhow::anyhow!("--service: {e}")))?;
    if svc.bot.is_empty() && actions.is_none() {
        return Err(bad_input(anyhow::anyhow!(
            "--service {}: no [bot] table (the behaviour model of automated players); use --service quake3 or add one",
            svc.name
        )));
    }
    let model = horde_q3::input::BotModel::from_table(&svc.bot).map_err(|e| bad_input(anyhow::anyhow!("--service {}: {e}", svc.name)))?;
    let args = Args { actions_parsed: actions, place, model, ..args };
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from("horde-bots"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    if !args.steps.is_empty() {
        return benchmark(&args, protocol, &out, stop);
    }
    let n = args.players;
    let (servers, addrs) = servers_for(&args, &out, n)?;
    say!("horde bots: {n} bot(s) against {}, joining over {:?}, playing {:?}", list(&addrs), args.ramp, args.duration);
    let (report, x) = run_once(&args, protocol, &addrs, &servers, n, stop)?;
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

fn run_once(
    args: &Args,
    protocol: Protocol,
    addrs: &[SocketAddr],
    servers: &[Server],
    n: usize,
    stop: &AtomicBool,
) -> Result<(BotsReport, Extras), crate::Failure> {
    let opts = BotsOptions {
        servers: addrs.to_vec(),
        bots: n,
        ramp: args.ramp,
        duration: args.duration,
        warmup: args.warmup,
        threads: args.threads,
        maxpackets: args.maxpackets,
        fps: args.fps,
        packetdup: args.packetdup,
        rate: 25_000,
        snaps: args.sv_fps.max(20),
        protocol,
        seed: args.seed,
        name_prefix: "horde".into(),
        sources: bots::loopback_sources(addrs[0], n),
        actions: args.actions_parsed.clone(),
        model: args.model.clone(),
        log: if args.steps.is_empty() { args.log.clone() } else { None },
        netns: args.place.as_ref().map(|p| p.clients.clone()).unwrap_or_default(),
    };
    let probe_ns = args.place.as_ref().map(|p| p.clients[0].clone());
    let status = |a: SocketAddr| status(a, probe_ns.as_deref());
    let t0 = Instant::now();
    let pids: Vec<u32> = servers.iter().map(|s| s.child.id()).collect();
    let cpu = || -> (Option<f64>, Vec<Option<f64>>, f64) { (None, pids.iter().map(|&p| proc_cpu(p)).collect(), self_cpu()) };
    let sleep_until = |d: Duration| {
        while t0.elapsed() < d && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let report = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            sleep_until(args.ramp + args.warmup);
            let (_, s0, b0) = cpu();
            let a = t0.elapsed();
            sleep_until(args.ramp + args.duration.saturating_sub(Duration::from_millis(700)));
            let (_, s1, b1) = cpu();
            let secs = (t0.elapsed() - a).as_secs_f64().max(1e-3);
            let listed: Vec<Option<Vec<(i32, String)>>> = addrs.iter().map(|&a| status(a)).collect();
            (s0, s1, b1 - b0, secs, listed)
        });
        let sampler = sc.spawn(|| {
            // Each started server's user and system CPU, second by second, until the bots end.
            let mut out = Vec::new();
            let mut last: Vec<Option<(f64, f64)>> = pids.iter().map(|&p| proc_cpu_split(p)).collect();
            let mut k = 1u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) && !pids.is_empty() {
                let due = Duration::from_secs(k);
                while t0.elapsed() < due && !done.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
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
        let r = bots::run(&opts, stop);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (r, h.join().ok(), sampler.join().unwrap_or_default())
    });
    let (report, peek, cpu_series) = (report.0, report.1, report.2);
    let mut report = report.context("running the bots")?;
    report.server_cpu = cpu_series;
    std::thread::sleep(Duration::from_millis(300));
    let mut x = Extras::default();
    if let Some((s0, s1, bots_s, secs, listed)) = peek {
        x.bots_cpu_pct = bots_s / secs * 100.0;
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

fn print_extras(x: &Extras) {
    if let Some(n) = x.listed {
        say!("  server status near the end: {n} player(s) listed; highest ping {} ms (the server's frame resolution)", x.ping_max_ms.unwrap_or(0));
    }
    if let Some(c) = x.server_cpu_pct {
        say!("  server CPU: {c:.1} % of one core (busiest server {:.1} %)", x.server_cpu_max_pct.unwrap_or(c));
    }
    say!("  bots' CPU (this process): {:.1} % of one core", x.bots_cpu_pct);
    if let Some(n) = x.listed_after {
        say!("  server status after: {n} player(s)");
    }
}

/// User and system CPU seconds of a process so far.
fn proc_cpu_split(pid: u32) -> Option<(f64, f64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((f.get(11)?.parse::<f64>().ok()? / tick, f.get(12)?.parse::<f64>().ok()? / tick))
}

/// This process's user + system CPU seconds so far.
fn self_cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// One step of the benchmark.
#[derive(Debug, Clone, Serialize)]
struct Step {
    players: usize,
    servers: usize,
    entered: usize,
    quit_cleanly: usize,
    /// Client packets/s and server packets/s, all bots.
    request_rate: f64,
    response_rate: f64,
    response_rate_per_bot: f64,
    snapshot_rate_per_bot: f64,
    request_bytes_mean: f64,
    reply_bytes_mean: f64,
    response_ms_mean: f64,
    response_ms_p50: f64,
    response_ms_p99: f64,
    server_cpu_pct: Option<f64>,
    server_cpu_max_pct: Option<f64>,
    bots_cpu_pct: f64,
    /// Bots one core of this load generator would hold at this step's cost.
    bots_per_core: f64,
    lost: u64,
    kicked: usize,
    saturated: bool,
}

#[derive(Debug, Clone, Serialize)]
struct Benchmark {
    server: String,
    sv_fps: u32,
    duration_s: f64,
    warmup_s: f64,
    p99_bound_ms: f64,
    /// The first step where the response rate per bot fell under 95 % of sv_fps or the p99
    /// response time passed the bound.
    saturation_players: Option<usize>,
    steps: Vec<Step>,
}

fn benchmark(args: &Args, protocol: Protocol, out: &std::path::Path, stop: &AtomicBool) -> Outcome {
    let mut steps = Vec::new();
    say!("horde bots: benchmark over {:?} players, {:?} per step ({:?} warm-up excluded)", args.steps, args.duration, args.warmup);
    for &n in &args.steps {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let (servers, addrs) = servers_for(args, out, n)?;
        let (r, x) = run_once(args, protocol, &addrs, &servers, n, stop)?;
        drop(servers);
        let q = &r.response_ms;
        let lost: u64 = r.bots.iter().map(|b| b.dropped).sum();
        let per_bot = r.response_rate / n as f64;
        let saturated = per_bot < 0.95 * args.sv_fps as f64 || q.p99 > args.p99_bound.as_secs_f64() * 1e3 || r.entered < n;
        let step = Step {
            players: n,
            servers: addrs.len(),
            entered: r.entered,
            quit_cleanly: r.quit_cleanly,
            request_rate: r.request_rate,
            response_rate: r.response_rate,
            response_rate_per_bot: per_bot,
            snapshot_rate_per_bot: r.snapshot_rate_per_bot,
            request_bytes_mean: r.request_bytes_mean,
            reply_bytes_mean: r.response_bytes_mean,
            response_ms_mean: q.mean,
            response_ms_p50: q.p50,
            response_ms_p99: q.p99,
            server_cpu_pct: x.server_cpu_pct,
            server_cpu_max_pct: x.server_cpu_max_pct,
            bots_cpu_pct: x.bots_cpu_pct,
            bots_per_core: if x.bots_cpu_pct > 0.0 { n as f64 * 100.0 / x.bots_cpu_pct } else { 0.0 },
            lost,
            kicked: r.bots.iter().filter(|b| b.end.starts_with("kicked")).count(),
            saturated,
        };
        say!(
            "  {n:>4} players on {} server(s): {}/{n} in, responses {:.1}/s per bot, response p50 {:.1} ms p99 {:.1} ms, reply {:.0} B, server CPU {}, bots CPU {:.1} %{}",
            step.servers,
            step.entered,
            per_bot,
            q.p50,
            q.p99,
            step.reply_bytes_mean,
            step.server_cpu_pct.map_or("-".into(), |c| format!("{c:.1} %")),
            step.bots_cpu_pct,
            if saturated { " — saturated" } else { "" }
        );
        steps.push(step);
    }
    let b = Benchmark {
        server: if args.start_server {
            format!("openarena-server (started by horde, map {}, sv_fps {})", args.map, args.sv_fps)
        } else {
            args.server.clone().unwrap_or_default()
        },
        sv_fps: args.sv_fps,
        duration_s: args.duration.as_secs_f64(),
        warmup_s: args.warmup.as_secs_f64(),
        p99_bound_ms: args.p99_bound.as_secs_f64() * 1e3,
        saturation_players: steps.iter().find(|s| s.saturated).map(|s| s.players),
        steps,
    };
    match b.saturation_players {
        Some(n) => say!("  saturation: at {n} players"),
        None => say!("  saturation: not reached (every step within 95 % of sv_fps and the p99 bound)"),
    }
    let json = serde_json::to_string_pretty(&b).expect("benchmark serialises");
    std::fs::write(out.join("summary.json"), &json).with_context(|| format!("writing {}", out.join("summary.json").display()))?;
    std::fs::write(out.join("index.html"), bench_page(&b)).with_context(|| format!("writing {}", out.join("index.html").display()))?;
    say!("  report: {}", std::path::absolute(out.join("index.html")).unwrap_or(out.join("index.html")).display());
    if let Some(p) = &args.json {
        super::write_out(p, &json)?;
    }
    Ok(if stop.load(std::sync::atomic::Ordering::Relaxed) { 130 } else { 0 })
}

fn bench_page(b: &Benchmark) -> String {
    use horde_stats::charts::{Chart, Series};
    use horde_stats::table::{Cell, Column, Table};
    let pts = |f: &dyn Fn(&Step) -> Option<f64>| -> Vec<(f64, f64)> { b.steps.iter().filter_map(|s| Some((s.players as f64, f(s)?))).collect() };
    let charts: Vec<(&str, Vec<Series>, &str)> = vec![
        (
            "Server response rate per player",
            vec![("responses/s per bot".into(), pts(&|s| Some(s.response_rate_per_bot))), ("sv_fps".into(), pts(&|_| Some(b.sv_fps as f64)))],
            "packets/s",
        ),
        (
            "Response time",
            vec![
                ("mean".into(), pts(&|s| Some(s.response_ms_mean))),
                ("p50".into(), pts(&|s| Some(s.response_ms_p50))),
                ("p99".into(), pts(&|s| Some(s.response_ms_p99))),
            ],
            "ms",
        ),
        (
            "Request and reply sizes",
            vec![("request (client)".into(), pts(&|s| Some(s.request_bytes_mean))), ("reply (server)".into(), pts(&|s| Some(s.reply_bytes_mean)))],
            "bytes (mean)",
        ),
        (
            "CPU",
            vec![
                ("servers (sum)".into(), pts(&|s| s.server_cpu_pct)),
                ("busiest server".into(), pts(&|s| s.server_cpu_max_pct)),
                ("bots (load generator)".into(), pts(&|s| Some(s.bots_cpu_pct))),
            ],
            "% of one core",
        ),
    ];
    let mut t = Table::new(vec![
        Column::new("players", "players"),
        Column::new("servers", "servers"),
        Column::new("in", "in game"),
        Column::new("req", "requests/s"),
        Column::new("resp", "responses/s"),
        Column::new("per", "responses/s per bot"),
        Column::new("p50", "response p50 ms"),
        Column::new("p99", "response p99 ms"),
        Column::new("reply", "reply B"),
        Column::new("scpu", "server CPU %"),
        Column::new("bcpu", "bots CPU %"),
        Column::new("sat", "saturated"),
    ]);
    for s in &b.steps {
        t.push(vec![
            Cell::Int(s.players as u64),
            Cell::Int(s.servers as u64),
            Cell::Int(s.entered as u64),
            Cell::Num(s.request_rate, 1),
            Cell::Num(s.response_rate, 1),
            Cell::Num(s.response_rate_per_bot, 2),
            Cell::Num(s.response_ms_p50, 1),
            Cell::Num(s.response_ms_p99, 1),
            Cell::Num(s.reply_bytes_mean, 0),
            Cell::opt(s.server_cpu_pct, 1),
            Cell::Num(s.bots_cpu_pct, 1),
            Cell::text(if s.saturated { "yes" } else { "" }),
        ]);
    }
    let mut sections = vec![("Steps".to_string(), t.html())];
    for (title, series, y) in &charts {
        sections.push((title.to_string(), Chart::new(title, "players", y, series).svg()));
    }
    let intro = format!(
        "{}\n{} s per step, first {} s left out; saturation: {} (responses per bot under 95 % of sv_fps, or p99 response time over {} ms)",
        b.server,
        b.duration_s,
        b.warmup_s,
        b.saturation_players.map_or("not reached".to_string(), |n| format!("at {n} players")),
        b.p99_bound_ms
    );
    horde_stats::html::simple_page("Game-server benchmark", &intro, &sections)
}

/// User + system CPU seconds of a process so far.
fn proc_cpu(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / tick)
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
    let bad: u64 = r.bots.iter().map(|b| b.corrupt + b.delta_misses).sum();
    let dropped: u64 = r.bots.iter().map(|b| b.dropped).sum();
    say!("  server packets lost {dropped}, unreadable or without delta base {bad}");
}
