use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context;
use horde_engine::bots::{self, BotsOptions, BotsReport};
use horde_q3::Protocol;

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
fn status(addr: SocketAddr) -> Option<Vec<(i32, String)>> {
    let s = UdpSocket::bind(if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).ok()?;
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

fn start_server(args: &Args, dir: &std::path::Path) -> anyhow::Result<Server> {
    if !std::path::Path::new(OA_SERVER).exists() {
        anyhow::bail!("{OA_SERVER} not found: install it with `apt-get install openarena-server` (Debian), or give --server IP:PORT of a running server");
    }
    let port = free_udp_port()?;
    let log = dir.join("server.log");
    let home = dir.join("server-home");
    std::fs::create_dir_all(&home)?;
    let f = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let max = args.players.clamp(1, 64);
    let child = Command::new(OA_SERVER)
        .args(["+set", "dedicated", "1", "+set", "net_ip", "127.0.0.1", "+set", "net_port", &port.to_string()])
        .args(["+set", "sv_maxclients", &max.to_string(), "+set", "sv_pure", "0", "+set", "sv_fps", &args.sv_fps.to_string()])
        .args(["+set", "g_inactivity", "0", "+set", "sv_timeout", "30", "+map", &args.map])
        .env("HOME", &home)
        .stdin(Stdio::null())
        .stdout(f.try_clone()?)
        .stderr(f)
        .spawn()
        .with_context(|| format!("starting {OA_SERVER}"))?;
    let server = Server { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), log };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if status(server.addr).is_some() {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    anyhow::bail!("the server did not answer within 30 s; see {}", server.log.display())
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    if args.players == 0 || args.players > 4096 {
        return Err(bad_input(anyhow::anyhow!("--players must be 1..=4096 (got {})", args.players)));
    }
    if args.start_server && args.players > 64 {
        return Err(bad_input(anyhow::anyhow!("one Quake 3 server holds at most 64 players (MAX_CLIENTS); start several servers for more")));
    }
    let protocol = match args.protocol.as_str() {
        "openarena" => Protocol::OpenArena,
        "ioq3" => Protocol::Ioq3,
        "q3" | "68" => Protocol::Legacy68,
        p => return Err(bad_input(anyhow::anyhow!("--protocol must be openarena, ioq3 or q3 (got `{p}`)"))),
    };
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from("horde-bots"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let server = if args.start_server { Some(start_server(&args, &out).context("starting the game server")?) } else { None };
    let addr: SocketAddr = match (&server, &args.server) {
        (Some(s), _) => s.addr,
        (None, Some(a)) => horde_model::flow::parse_addr(a).map_err(|m| bad_input(anyhow::anyhow!("--server: {m}")))?,
        (None, None) => unreachable!("clap requires one"),
    };
    say!("horde bots: {} bot(s) against {addr}, joining over {:?}, playing {:?}", args.players, args.ramp, args.duration);
    let opts = BotsOptions {
        server: addr,
        bots: args.players,
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
        sources: bots::loopback_sources(addr, args.players),
    };
    let cpu0 = server.as_ref().and_then(|s| proc_cpu(s.child.id()));
    let t0 = Instant::now();
    // The server's view of its players, just before they leave.
    let peek = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            let until = args.ramp + args.duration.saturating_sub(Duration::from_millis(700));
            while t0.elapsed() < until && !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
            (status(addr), server.as_ref().and_then(|s| proc_cpu(s.child.id())), t0.elapsed())
        });
        let r = bots::run(&opts, stop);
        (r, h.join().ok())
    });
    let (report, peek) = peek;
    let report = report.context("running the bots")?;
    std::thread::sleep(Duration::from_millis(300));
    let after = status(addr);
    print_report(&report);
    if let Some((Some(players), cpu1, at)) = &peek {
        let pings: Vec<i32> = players.iter().map(|p| p.0).collect();
        say!(
            "  server status near the end: {} player(s) listed; pings (ms, the server's frame resolution) min {} / max {}; {} still connecting (999)",
            players.len(),
            pings.iter().min().unwrap_or(&0),
            pings.iter().filter(|&&p| p < 999).max().unwrap_or(&0),
            pings.iter().filter(|&&p| p >= 999).count()
        );
        if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
            say!("  server CPU: {:.1} % of one core", (c1 - c0) / at.as_secs_f64() * 100.0);
        }
    }
    if let Some(p) = &after {
        say!("  server status after: {} player(s)", p.len());
    }
    if let Some(s) = &server {
        say!("  server log: {}", std::path::absolute(&s.log).unwrap_or(s.log.clone()).display());
    }
    let json = serde_json::to_string_pretty(&report).expect("report serialises");
    std::fs::write(out.join("summary.json"), &json).with_context(|| format!("writing {}", out.join("summary.json").display()))?;
    if let Some(p) = &args.json {
        super::write_out(p, &json)?;
    }
    Ok(if report.interrupted {
        130
    } else if report.entered < args.players {
        1
    } else {
        0
    })
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
