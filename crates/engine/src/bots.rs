//! Automated Quake 3 players against a real game server: [`horde_q3::Bot`] (a `Peer`) on the
//! population shell ([`shell::population`]). Bots are multiplexed on a few threads (no thread
//! per bot): each thread runs a share of the bots, one connected UDP socket per bot, and sleeps
//! until the next bot is due or a datagram arrives. Bots join on a ramp, play for the duration,
//! then disconnect cleanly one after another (three `disconnect` packets, as the engine's
//! client sends).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use horde_proto::endpoint::Peer;
use horde_q3::{Bot, Config, End, LogEvent, Phase, Protocol};
use horde_wire::{Record, RecordKind};
use serde::{Deserialize, Serialize};

use crate::clock::real_ns;
use crate::logger::{LogSink, LogWriter};
use crate::sender::Progress;
use crate::shell::{self, Crowd, Until};
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
    /// Recorded action files dealt round-robin (bot i replays the (i mod k)-th from the start,
    /// as the Quake server study dealt its five recorded inputs); empty: the behaviour model.
    pub actions: Vec<horde_q3::input::Recorded>,
    /// The behaviour model of bots without an action file.
    pub model: horde_q3::input::BotModel,
    /// Per-packet log: each bot is a flow (its number); each packet a departure (`Sent`, its
    /// netchan sequence), each answered packet an `Echoed` record whose round trip is its
    /// response time. `horde decode` reads it.
    pub log: Option<std::path::PathBuf>,
    /// Network namespaces of emulated hosts the bots play from (bot i in the i-th modulo their
    /// number; its socket is opened there); empty: this host.
    pub netns: Vec<std::sync::Arc<std::fs::File>>,
    /// Counters a progress display reads while the bots play.
    pub live: Option<std::sync::Arc<BotsLive>>,
    /// Every request's departure and answered snapshot's arrival, for the server's frames
    /// ([`horde_q3::frames`]).
    pub frames: Option<std::sync::Arc<std::sync::Mutex<horde_q3::frames::Events>>>,
    /// The first bot's input, frame by frame (an action file's frames), filled at the end.
    pub record: Option<Tape>,
}

/// A bot's input, frame by frame (ms from its start, the command), as an action file holds it.
pub type Tape = std::sync::Arc<std::sync::Mutex<Vec<(u32, horde_q3::usercmd::UserCmd)>>>;

/// What a bots run shows while it runs: bots started, packets answered, and the response time
/// of each answer (a live histogram, within 3.1 %; the report's figures come from the bots).
#[derive(Debug, Default)]
pub struct BotsLive {
    pub started: std::sync::atomic::AtomicU64,
    /// Packets the bots sent.
    pub sent: std::sync::atomic::AtomicU64,
    pub answered: std::sync::atomic::AtomicU64,
    pub response: crate::live::DelayHist,
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

/// Packets sent and received, snapshots, and the time: a bot's counts at one instant.
type Counts = (u64, u64, u64, u64);

fn counts(b: &Bot, at: u64) -> Counts {
    (b.stats.packets_sent, b.stats.packets_received, b.stats.snapshots, at)
}

/// One bot of a thread's share, as the population shell runs it: its bot once it has joined,
/// and what its report needs (the counts at the start and the end of the measured window, its
/// answered packets' response times in the window).
struct Player {
    id: usize,
    bot: Option<Bot>,
    /// When the share next has business with it: its join, then its departure.
    next: u64,
    departed: bool,
    at_window: Option<Counts>,
    at_end: Option<Counts>,
    response_ns: Vec<u64>,
}

impl Peer for Player {
    type Event = LogEvent;
    fn handle(&mut self, now_ns: u64, bytes: &[u8]) {
        if let Some(b) = &mut self.bot {
            b.handle(now_ns, bytes)
        }
    }
    fn handle_timeout(&mut self, now_ns: u64) {
        if let Some(b) = &mut self.bot {
            b.handle_timeout(now_ns)
        }
    }
    fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool {
        self.bot.as_mut().is_some_and(|b| b.poll_transmit(now_ns, buf))
    }
    fn poll_timeout(&self, _now_ns: u64) -> u64 {
        self.bot.as_ref().and_then(|b| b.poll_timeout()).unwrap_or(u64::MAX).min(self.next)
    }
    fn poll_event(&mut self) -> Option<LogEvent> {
        self.bot.as_mut()?.poll_event()
    }
    fn is_closed(&self) -> bool {
        self.bot.as_ref().map_or(self.departed, Peer::is_closed)
    }
}

/// A thread's share of the bots: joins them on the ramp, takes the measured window's counts,
/// logs their packets, and makes them leave one after another at the end.
struct Share<'a> {
    opts: &'a BotsOptions,
    sink: LogSink,
    window_from: u64,
    end: u64,
    left_from: Option<u64>,
    last_id: usize,
}

impl Share<'_> {
    fn make(&self, i: usize, now: u64) -> Bot {
        let o = self.opts;
        let mut cfg = Config::new(format!("{}{:03}", o.name_prefix, i), 1000 + i as u16, o.seed.wrapping_add(i as u64 * 7919));
        (cfg.protocol, cfg.maxpackets, cfg.fps, cfg.packetdup, cfg.rate, cfg.snaps) = (o.protocol, o.maxpackets, o.fps, o.packetdup, o.rate, o.snaps);
        let input = input_of(o, i, cfg.seed);
        let mut bot = Bot::with_input(cfg, now, input);
        if o.record.is_some() && i == first_id(o) {
            bot.record_input();
        }
        bot
    }
}

/// The first bot of this run's share (the one `record` follows).
fn first_id(o: &BotsOptions) -> usize {
    o.ids.as_ref().map_or(0, |r| r.start)
}

/// Bot `i`'s input: the (i mod k)-th of the k action files, or the behaviour model.
fn input_of(o: &BotsOptions, i: usize, seed: u64) -> Box<dyn horde_q3::input::Input> {
    match o.actions.get(i % o.actions.len().max(1)) {
        Some(a) => Box::new(a.clone()),
        None => Box::new(horde_q3::input::Behaviour::with_model(o.model.clone(), seed)),
    }
}

impl Crowd<Player> for Share<'_> {
    fn turn(&mut self, _i: usize, now: u64, p: &mut Player) {
        match self.left_from {
            None if p.bot.is_none() && now >= p.next => {
                p.bot = Some(self.make(p.id, now));
                p.next = u64::MAX;
                if let Some(l) = &self.opts.live {
                    l.started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            // Bots leave 10 ms apart, not all at once: every departure makes the server queue
            // reliable commands for everyone still there, and 64 at once overflow the queues
            // of those whose goodbye comes last ("Server command overflow").
            Some(from) if !p.departed => {
                if let Some(b) = &p.bot {
                    p.at_end.get_or_insert(counts(b, from.min(self.end)));
                }
                p.next = from + LEAVE_GAP_NS * p.id as u64;
                if now >= p.next {
                    (p.departed, p.next) = (true, u64::MAX);
                    if let Some(b) = &mut p.bot {
                        b.disconnect();
                    }
                }
            }
            _ => {}
        }
        if let (Some(b), None) = (&p.bot, p.at_window) {
            if now >= self.window_from {
                p.at_window = Some(counts(b, now));
            }
        }
    }

    fn event(&mut self, _i: usize, p: &mut Player, ev: LogEvent) {
        let (seq, size, t_a, t_b, kind) = match ev {
            LogEvent::Sent { seq, size, at } => {
                if let Some(l) = &self.opts.live {
                    l.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                if let Some(f) = &self.opts.frames {
                    f.lock().unwrap_or_else(|e| e.into_inner()).request(at);
                }
                (seq, size, at, at, RecordKind::Sent)
            }
            LogEvent::Answered { seq, sent, at, size } => {
                if (self.window_from..=self.end).contains(&at) {
                    p.response_ns.push(at.saturating_sub(sent));
                }
                if let Some(l) = &self.opts.live {
                    l.answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    l.response.record(sent, at);
                }
                if let Some(f) = &self.opts.frames {
                    f.lock().unwrap_or_else(|e| e.into_inner()).snapshot(at);
                }
                (seq, size, sent, at, RecordKind::Echoed)
            }
        };
        if self.sink.enabled() {
            self.sink.push(Record { flow: p.id as u32, size, seq: seq as u64, t_a, t_b, tag: 0, tos: 0, ttl: 0, kind, flags: 0 });
            self.sink.tick(t_b);
        }
    }

    /// The game's clients keep time in milliseconds: a bot acts within a millisecond of its time,
    /// and many bots share one wake-up.
    fn slack_ns(&self) -> u64 {
        1_000_000
    }

    fn leave(&mut self, now: u64) -> Option<u64> {
        self.left_from = Some(now);
        // The last bot's turn to leave, its three goodbye packets, and a margin.
        Some(now + LEAVE_GAP_NS * (self.last_id as u64 + 4) + 1_000_000_000)
    }
}

/// Runs the bots to the end (or until `stop`), then reports.
pub fn run(opts: &BotsOptions, stop: &AtomicBool) -> Result<BotsReport, EngineError> {
    if opts.bots == 0 || opts.servers.is_empty() {
        return Err(EngineError::Config("no bots to run, or no server to play on".into()));
    }
    let start = real_ns();
    let ramp = opts.ramp.as_nanos() as u64;
    let window_from = start + ramp + opts.warmup.as_nanos() as u64;
    let end = start + ramp + opts.duration.as_nanos() as u64;
    if window_from >= end {
        return Err(EngineError::Config("the warm-up leaves no time to measure; make --duration longer than --warmup".into()));
    }
    let (writer, sink) = match &opts.log {
        Some(p) => {
            let (w, s) = LogWriter::create(Some(p), horde_wire::Role::Sender, start, None)
                .map_err(|e| EngineError::Io { what: format!("creating log {}", p.display()), err: e })?;
            (Some(w), s)
        }
        None => (None, LogSink::disabled()),
    };
    let ids = opts.ids.clone().unwrap_or(0..opts.bots);
    if ids.is_empty() || ids.end > opts.bots {
        return Err(EngineError::Config(format!("bots {}..{} are not bots of a run of {}", ids.start, ids.end, opts.bots)));
    }
    crate::clock::raise_fd_limit();
    let threads = opts.threads.clamp(1, ids.len());
    let mut shares: Vec<Vec<usize>> = vec![Vec::new(); threads];
    for (k, i) in ids.enumerate() {
        shares[k % threads].push(i);
    }
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|ids| {
                let mut share = Share { opts, sink: sink.clone(), window_from, end, left_from: None, last_id: ids.iter().copied().max().unwrap_or(0) };
                s.spawn(move || -> Result<Vec<(usize, BotReport, Vec<u64>)>, EngineError> {
                    let socks = ids
                        .iter()
                        .map(|&i| {
                            let (server, source) =
                                (opts.servers[i % opts.servers.len()], (!opts.sources.is_empty()).then(|| opts.sources[i % opts.sources.len()]));
                            shell::client_socket(server, source, opts.netns.get(i % opts.netns.len().max(1)).map(|n| n.as_ref()))
                                .map_err(|err| EngineError::Io { what: format!("opening bot {i}'s socket to {server}"), err })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let mut players: Vec<Player> = ids
                        .iter()
                        .map(|&id| Player {
                            id,
                            bot: None,
                            next: start + ramp * id as u64 / opts.bots as u64,
                            departed: false,
                            at_window: None,
                            at_end: None,
                            response_ns: Vec::new(),
                        })
                        .collect();
                    shell::population(&mut players, &socks, &mut share, &Progress::default(), start, Until { stop, end_ns: end })?;
                    share.sink.flush();
                    let stop_at = real_ns().min(end);
                    Ok(players
                        .into_iter()
                        .filter_map(|mut p| {
                            let mut bot = p.bot.take()?;
                            if let Some(tape) = opts.record.as_ref().filter(|_| p.id == first_id(opts)) {
                                *tape.lock().unwrap_or_else(|e| e.into_inner()) = bot.take_tape();
                            }
                            Some((p.id, report(&bot, &p, stop_at), p.response_ns))
                        })
                        .collect())
                })
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
    let window_s = (real_ns().min(end).saturating_sub(window_from)) as f64 / 1e9;
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

fn report(bot: &Bot, s: &Player, stop_at: u64) -> BotReport {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 002's five recorded inputs dealt round-robin (issue 69): bot i replays the
    /// (i mod k)-th action file; without one, the behaviour model.
    #[test]
    fn action_files_are_dealt_to_the_bots_round_robin() {
        let file = |forward: i32| {
            horde_q3::input::Recorded::parse(&format!("t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n0,0,0,0,{forward},0,0,0,2\n")).unwrap()
        };
        let mut o = BotsOptions {
            servers: vec!["127.0.0.1:27960".parse().unwrap()],
            bots: 5,
            ids: None,
            ramp: Duration::ZERO,
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            threads: 1,
            maxpackets: 30,
            fps: 60,
            packetdup: 1,
            rate: 25_000,
            snaps: 20,
            protocol: horde_q3::Protocol::OpenArena,
            seed: 1,
            name_prefix: "t".into(),
            sources: Vec::new(),
            actions: vec![file(127), file(-127), file(64)],
            model: horde_q3::input::BotModel::default(),
            log: None,
            netns: Vec::new(),
            live: None,
            frames: None,
            record: None,
        };
        let forward = |o: &BotsOptions, i: usize| {
            let mut cmd = horde_q3::usercmd::UserCmd::default();
            input_of(o, i, 7).frame(0.0, &mut cmd);
            cmd.forward
        };
        assert_eq!((0..5).map(|i| forward(&o, i)).collect::<Vec<_>>(), vec![127, -127, 64, 127, -127]);
        o.actions.clear();
        let _ = forward(&o, 0); // the behaviour model, without a file
    }
}
