//! Automated Quake 3 players against a real game server: the I/O shell around
//! [`horde_q3::Bot`]. Bots are multiplexed on a few threads (no thread per bot): each thread
//! owns a share of the bots, one connected UDP socket per bot, and sleeps in `poll` until the
//! next bot is due or a datagram arrives. Bots join on a ramp, play for the duration, then
//! disconnect cleanly (three `disconnect` packets, as the engine's client sends).

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use horde_q3::{Bot, Config, End, LogEvent, Phase, Protocol};
use horde_wire::{Record, RecordKind};

use crate::logger::{LogSink, LogWriter};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol as SockProto, SockAddr, Socket, Type};

use crate::clock::mono_ns;
use crate::EngineError;

#[derive(Debug, Clone)]
pub struct BotsOptions {
    /// Game servers; bot i plays on server i mod their number.
    pub servers: Vec<SocketAddr>,
    pub bots: usize,
    /// Run only these bot ids of `bots` (a shard of a run spread over agents: names, sources and
    /// join times follow the id, so the shards together make one ramp); `None`: all.
    pub ids: Option<std::ops::Range<usize>>,
    /// Bots join evenly over this long.
    pub ramp: Duration,
    /// Each bot plays this long after joining... the run ends `ramp + duration` after the start.
    pub duration: Duration,
    /// Leading part of the measured window excluded from rates (bots still spawning).
    pub warmup: Duration,
    pub threads: usize,
    pub maxpackets: u32,
    pub fps: u32,
    pub packetdup: u32,
    pub rate: u32,
    pub snaps: u32,
    pub protocol: Protocol,
    pub seed: u64,
    pub name_prefix: String,
    /// Source addresses the bots send from, cycled (bot i uses the i-th modulo their count);
    /// empty: the system's choice. The engine rate-limits connection requests per source IP
    /// (10 at once, then one a second), so many bots on one host need several addresses.
    pub sources: Vec<std::net::IpAddr>,
    /// A recorded action file every bot replays from the start; `None`: the behaviour model.
    pub actions: Option<horde_q3::input::Recorded>,
    /// The behaviour model of bots without an action file.
    pub model: horde_q3::input::BotModel,
    /// Per-packet log: each bot is a flow (its number); each packet a departure (`Sent`, its
    /// netchan sequence), each answered packet an `Echoed` record whose round trip is its
    /// response time. `horde decode` reads it.
    pub log: Option<std::path::PathBuf>,
    /// Network namespaces of emulated hosts the bots play from (bot i in the i-th modulo their
    /// number; its socket is opened there); empty: this host.
    pub netns: Vec<std::sync::Arc<std::fs::File>>,
}

/// Source addresses for `n` bots of a server at `server`: on IPv4 loopback, one address of
/// 127.0.0.0/8 per bot (127.0.1.1, 127.0.1.2, …: all loopback on Linux), else none (the
/// system's choice).
pub fn loopback_sources(server: SocketAddr, n: usize) -> Vec<std::net::IpAddr> {
    match server.ip() {
        std::net::IpAddr::V4(v4) if v4.is_loopback() => {
            (0..n).map(|i| std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 1 + (i / 250) as u8, 1 + (i % 250) as u8))).collect()
        }
        _ => Vec::new(),
    }
}

/// One bot's results.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BotReport {
    pub name: String,
    /// quit, refused: …, kicked: …, no answer, timed out, or still playing (interrupted).
    pub end: String,
    pub client_num: i32,
    /// Seconds from its start to its first snapshot (in the game).
    pub active_after_s: Option<f64>,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub cmds_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub snapshots: u64,
    /// Server packets per second received in the measured window.
    pub response_rate: f64,
    /// Client packets per second sent in the measured window.
    pub request_rate: f64,
    /// Snapshots per second received in the measured window.
    pub snapshot_rate: f64,
    pub response_ms: Quantiles,
    pub snapshot_gap_ms: Quantiles,
    pub dropped: u64,
    pub out_of_order: u64,
    pub delta_misses: u64,
    pub corrupt: u64,
    /// The ping the server reported for this player (`getstatus`, near the end), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_ping_ms: Option<i32>,
}

/// Mean and nearest-rank percentiles, ms.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Quantiles {
    pub n: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Quantiles {
    pub fn of_ns(v: &mut [u64]) -> Quantiles {
        if v.is_empty() {
            return Quantiles::default();
        }
        v.sort_unstable();
        let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1e6;
        Quantiles { n: v.len() as u64, mean: v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e6, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: q(1.0) }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BotsReport {
    pub server: String,
    pub bots: Vec<BotReport>,
    /// Bots that entered the game, and that left cleanly at the end.
    pub entered: usize,
    pub quit_cleanly: usize,
    /// Totals over the measured window: client packets/s sent and server packets/s received
    /// (all bots), and mean sizes.
    pub request_rate: f64,
    pub response_rate: f64,
    pub request_bytes_mean: f64,
    pub response_bytes_mean: f64,
    /// Snapshots per second per bot in the game (mean over bots).
    pub snapshot_rate_per_bot: f64,
    /// Response time over all bots' answered packets.
    pub response_ms: Quantiles,
    /// Seconds of the measured window (after the ramp and the warm-up, to the end).
    pub window_s: f64,
    pub interrupted: bool,
    /// The servers' CPU each second (servers this run started), from `/proc/PID/stat`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_cpu: Vec<ServerCpu>,
}

/// One server's CPU over one second, % of one core.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerCpu {
    pub server: usize,
    /// Seconds since the run's start (end of the second).
    pub t_s: f64,
    pub user_pct: f64,
    pub system_pct: f64,
}

/// Time between two bots' departures at the end.
const LEAVE_GAP_NS: u64 = 10_000_000;

struct Slot {
    bot: Option<Bot>,
    sock: std::net::UdpSocket,
    join_at: u64,
    /// Packets sent and received, and the time, at the start and the end of the measured window.
    at_window: Option<(u64, u64, u64, u64)>,
    at_end: Option<(u64, u64, u64, u64)>,
    departed: bool,
    response_ns: Vec<u64>,
}

/// Runs the bots to the end (or until `stop`), then reports.
pub fn run(opts: &BotsOptions, stop: &AtomicBool) -> Result<BotsReport, EngineError> {
    if opts.bots == 0 || opts.servers.is_empty() {
        return Err(EngineError::Config("no bots to run, or no server to play on".into()));
    }
    let start = mono_ns();
    let ramp = opts.ramp.as_nanos() as u64;
    let window_from = start + ramp + opts.warmup.as_nanos() as u64;
    let end = start + ramp + opts.duration.as_nanos() as u64;
    if window_from >= end {
        return Err(EngineError::Config("the warm-up leaves no time to measure; make --duration longer than --warmup".into()));
    }
    let start_real = crate::clock::real_ns();
    let (writer, sink) = match &opts.log {
        Some(p) => {
            let (w, s) = LogWriter::create(p, horde_wire::Role::Sender, start_real)
                .map_err(|e| EngineError::Io { what: format!("creating log {}", p.display()), err: e })?;
            (Some(w), s)
        }
        None => (None, LogSink::disabled()),
    };
    let clock = (start, start_real);
    let ids = opts.ids.clone().unwrap_or(0..opts.bots);
    if ids.is_empty() || ids.end > opts.bots {
        return Err(EngineError::Config(format!("bots {}..{} are not bots of a run of {}", ids.start, ids.end, opts.bots)));
    }
    let threads = opts.threads.clamp(1, ids.len());
    let mut shares: Vec<Vec<usize>> = vec![Vec::new(); threads];
    for (k, i) in ids.enumerate() {
        shares[k % threads].push(i);
    }
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|ids| {
                let sink = sink.clone();
                s.spawn(move || run_share(opts, &ids, clock, sink, window_from, end, stop))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(EngineError::Config("a bot thread panicked".into())))).collect::<Vec<_>>()
    });
    drop(sink);
    if let Some(w) = writer {
        w.finish().map_err(|e| EngineError::Io { what: "writing the bots' log".into(), err: e })?;
    }
    let mut bots = Vec::new();
    for r in results {
        bots.extend(r?);
    }
    bots.sort_by_key(|b: &(usize, BotReport, Vec<u64>)| b.0);
    let window_s = (mono_ns().min(end).saturating_sub(window_from)) as f64 / 1e9;
    let mut all: Vec<u64> = bots.iter().flat_map(|b| b.2.iter().copied()).collect();
    let reports: Vec<BotReport> = bots.into_iter().map(|b| b.1).collect();
    let server = opts.servers.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ");
    Ok(BotsReport::of(server, reports, &mut all, window_s, stop.load(Ordering::Relaxed)))
}

impl BotsReport {
    /// The totals over `bots` (their rows), with response times over `response_ns` (every
    /// answered packet in the measured window of `window_s` seconds): one machine's run, or the
    /// merged run of several agents.
    pub fn of(server: String, bots: Vec<BotReport>, response_ns: &mut [u64], window_s: f64, interrupted: bool) -> BotsReport {
        let sum = |f: &dyn Fn(&BotReport) -> f64| bots.iter().map(f).sum::<f64>();
        let entered: Vec<&BotReport> = bots.iter().filter(|b| b.active_after_s.is_some()).collect();
        BotsReport {
            server,
            entered: entered.len(),
            quit_cleanly: bots.iter().filter(|b| b.end == "quit").count(),
            request_rate: sum(&|b| b.request_rate),
            response_rate: sum(&|b| b.response_rate),
            request_bytes_mean: sum(&|b| b.bytes_sent as f64) / sum(&|b| b.packets_sent as f64).max(1.0),
            response_bytes_mean: sum(&|b| b.bytes_received as f64) / sum(&|b| b.packets_received as f64).max(1.0),
            snapshot_rate_per_bot: if entered.is_empty() { 0.0 } else { entered.iter().map(|b| b.snapshot_rate).sum::<f64>() / entered.len() as f64 },
            response_ms: Quantiles::of_ns(response_ns),
            window_s,
            interrupted,
            server_cpu: Vec::new(),
            bots,
        }
    }
}

fn open_socket(server: SocketAddr, source: Option<std::net::IpAddr>) -> std::io::Result<std::net::UdpSocket> {
    let s = Socket::new(Domain::for_address(server), Type::DGRAM, Some(SockProto::UDP))?;
    s.set_nonblocking(true)?;
    let any: SocketAddr = if server.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let local = source.map_or(any, |ip| SocketAddr::new(ip, 0));
    s.bind(&SockAddr::from(local))?;
    s.connect(&SockAddr::from(server))?;
    Ok(s.into())
}

/// Writes a bot's log events as records: departures and answered packets.
fn log_events(sink: &mut LogSink, bot: &mut Bot, flow: u32, (mono0, real0): (u64, u64)) {
    let real = |t: u64| real0 + t.saturating_sub(mono0);
    for e in bot.take_log() {
        let r = match e {
            LogEvent::Sent { seq, size, at } => {
                Record { flow, size, seq: seq as u64, t_a: real(at), t_b: real(at), tag: 0, tos: 0, ttl: 0, kind: RecordKind::Sent, flags: 0 }
            }
            LogEvent::Answered { seq, sent, at, size } => {
                Record { flow, size, seq: seq as u64, t_a: real(sent), t_b: real(at), tag: 0, tos: 0, ttl: 0, kind: RecordKind::Echoed, flags: 0 }
            }
        };
        sink.push(r);
    }
}

#[allow(clippy::too_many_arguments)]
fn run_share(
    opts: &BotsOptions,
    ids: &[usize],
    clock: (u64, u64),
    mut sink: LogSink,
    window_from: u64,
    end: u64,
    stop: &AtomicBool,
) -> Result<Vec<(usize, BotReport, Vec<u64>)>, EngineError> {
    let start = clock.0;
    let io = |what: &str| {
        let what = what.to_string();
        move |e| EngineError::Io { what: what.clone(), err: e }
    };
    let mut poll = Poll::new().map_err(io("creating a poll"))?;
    let mut slots = Vec::with_capacity(ids.len());
    for (k, &i) in ids.iter().enumerate() {
        let source = (!opts.sources.is_empty()).then(|| opts.sources[i % opts.sources.len()]);
        let server = opts.servers[i % opts.servers.len()];
        let sock = match opts.netns.get(i % opts.netns.len().max(1)) {
            Some(ns) => crate::net::within_netns(&**ns, || open_socket(server, source)).and_then(|r| r),
            None => open_socket(server, source),
        }
        .map_err(io(&format!("opening bot {i}'s socket to {server}")))?;
        poll.registry().register(&mut SourceFd(&sock.as_raw_fd()), Token(k), Interest::READABLE).map_err(io("registering a bot socket"))?;
        let join_at = start + (opts.ramp.as_nanos() as u64) * i as u64 / opts.bots.max(1) as u64;
        slots.push(Slot { bot: None, sock, join_at, at_window: None, at_end: None, departed: false, response_ns: Vec::new() });
    }
    let mut events = Events::with_capacity(256);
    let mut buf = vec![0u8; 65536];
    let mut leaving = false;
    let mut left_from = 0;
    loop {
        let now = mono_ns();
        if !leaving && (now >= end || stop.load(Ordering::Relaxed)) {
            leaving = true;
            left_from = now;
            for s in &mut slots {
                if let Some(b) = &s.bot {
                    s.at_end = Some((b.stats.packets_sent, b.stats.packets_received, b.stats.snapshots, now.min(end)));
                }
            }
        }
        if leaving {
            // Bots leave 10 ms apart, not all at once: every departure makes the server queue
            // reliable commands for everyone still there, and 64 at once overflow the queues
            // of those whose goodbye comes last ("Server command overflow").
            for (k, s) in slots.iter_mut().enumerate() {
                let due = left_from + LEAVE_GAP_NS * ids[k] as u64;
                if let Some(b) = &mut s.bot {
                    if now >= due && !s.departed {
                        s.departed = true;
                        b.disconnect();
                    }
                }
            }
        }
        let mut next = now + 10_000_000;
        let mut live = false;
        for (k, s) in slots.iter_mut().enumerate() {
            if s.bot.is_none() && !leaving && now >= s.join_at {
                let i = ids[k];
                let mut cfg = Config::new(format!("{}{:03}", opts.name_prefix, i), 1000 + i as u16, opts.seed.wrapping_add(i as u64 * 7919));
                cfg.protocol = opts.protocol;
                cfg.maxpackets = opts.maxpackets;
                cfg.fps = opts.fps;
                cfg.packetdup = opts.packetdup;
                cfg.rate = opts.rate;
                cfg.snaps = opts.snaps;
                let input: Box<dyn horde_q3::input::Input> = match &opts.actions {
                    Some(a) => Box::new(a.clone()),
                    None => Box::new(horde_q3::input::Behaviour::with_model(opts.model.clone(), cfg.seed)),
                };
                let mut bot = Bot::with_input(cfg, now, input);
                if sink.enabled() {
                    bot.enable_log();
                }
                s.bot = Some(bot);
            }
            let Some(bot) = &mut s.bot else {
                if !leaving {
                    live = true;
                    next = next.min(s.join_at);
                }
                continue;
            };
            if now >= window_from && s.at_window.is_none() {
                s.at_window = Some((bot.stats.packets_sent, bot.stats.packets_received, bot.stats.snapshots, now));
            }
            for p in bot.poll_transmit(now) {
                let _ = s.sock.send(&p);
            }
            log_events(&mut sink, bot, ids[k] as u32, clock);
            if let Some(d) = bot.next_deadline() {
                live = true;
                next = next.min(d);
            }
        }
        if !live
            && ((leaving && slots.iter().all(|s| s.departed || s.bot.is_none()))
                || slots.iter().all(|s| s.bot.as_ref().is_some_and(|b| matches!(b.phase(), Phase::Gone(_)))))
        {
            break;
        }
        sink.tick(mono_ns());
        let wait = next.saturating_sub(mono_ns());
        let _ = poll.poll(&mut events, Some(Duration::from_nanos(wait.min(10_000_000))));
        let now = mono_ns();
        for ev in events.iter() {
            let s = &mut slots[ev.token().0];
            while let Ok(n) = s.sock.recv(&mut buf) {
                if let Some(b) = &mut s.bot {
                    let before = b.stats.response_ns.len();
                    b.handle(now, &buf[..n]);
                    log_events(&mut sink, b, ids[ev.token().0] as u32, clock);
                    if now >= window_from && now <= end {
                        s.response_ns.extend_from_slice(&b.stats.response_ns[before..]);
                    }
                }
            }
        }
    }
    sink.flush();
    let stop_at = mono_ns().min(end);
    Ok(slots
        .into_iter()
        .enumerate()
        .filter_map(|(k, mut s)| {
            let bot = s.bot.take()?;
            Some((ids[k], report(&bot, &s, stop_at), s.response_ns))
        })
        .collect())
}

fn report(bot: &Bot, s: &Slot, stop_at: u64) -> BotReport {
    let st = &bot.stats;
    let (sent0, recv0, snap0, t0) = s.at_window.unwrap_or((st.packets_sent, st.packets_received, st.snapshots, stop_at));
    let (sent1, recv1, snap1, t1) = s.at_end.unwrap_or((st.packets_sent, st.packets_received, st.snapshots, stop_at));
    let secs = t1.saturating_sub(t0) as f64 / 1e9;
    let rate = |a: u64, b: u64| if secs > 0.0 { a.saturating_sub(b) as f64 / secs } else { 0.0 };
    let end = match bot.phase() {
        Phase::Gone(End::Quit) => "quit".to_string(),
        Phase::Gone(End::Refused(m)) => format!("refused: {m}"),
        Phase::Gone(End::Kicked(m)) => format!("kicked: {m}"),
        Phase::Gone(End::NoAnswer) => "no answer".into(),
        Phase::Gone(End::TimedOut) => "timed out".into(),
        _ => "still playing".into(),
    };
    let mut resp = s.response_ns.clone();
    let mut gaps = st.snapshot_gaps_ns.clone();
    BotReport {
        name: bot.name().to_string(),
        end,
        client_num: bot.client_num,
        active_after_s: st.active_after_ns.map(|n| n as f64 / 1e9),
        packets_sent: st.packets_sent,
        bytes_sent: st.bytes_sent,
        cmds_sent: st.cmds_sent,
        packets_received: st.packets_received,
        bytes_received: st.bytes_received,
        snapshots: st.snapshots,
        response_rate: rate(recv1, recv0),
        snapshot_rate: rate(snap1, snap0),
        request_rate: rate(sent1, sent0),
        response_ms: Quantiles::of_ns(&mut resp),
        snapshot_gap_ms: Quantiles::of_ns(&mut gaps),
        dropped: st.dropped,
        out_of_order: st.out_of_order,
        delta_misses: st.delta_misses,
        corrupt: st.corrupt,
        server_ping_ms: None,
    }
}

/// A UDP port free on loopback now (for a game server this run starts).
pub fn free_udp_port() -> std::io::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Asks the game server at `addr` for its status (`getstatus`, from inside `ns` when given); returns (players, their pings) or None without an answer.
pub fn status(addr: SocketAddr, ns: Option<&std::fs::File>) -> Option<Vec<(i32, String)>> {
    let bind = || UdpSocket::bind(if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" });
    let s = match ns {
        Some(ns) => crate::net::within_netns(ns, bind).ok()?.ok()?,
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
