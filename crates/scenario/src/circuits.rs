//! Regulated virtual-world circuits as a scenario's traffic (a `[regulation]` table with a
//! service that has a `[circuit]` demand table, e.g. opensim): every player is one circuit.
//! Its server end (in the server side) sends what the player's avatar needs — the login burst
//! at its join, task updates that follow its behaviour state, a texture and asset burst at each
//! teleport — at the rate the client end's throttle asks for, through the chosen regulator; its
//! client end (in the client side) measures loss and round trips and sends throttle packets.
//!
//! The circuits are `horde-regulate`'s I/O-free state machines; this module is their socket
//! shell, shared with `horde circuit`: one UDP socket for the server side, one connected UDP
//! socket per player on the client side, the engine's address validation first (nothing is sent
//! to an address that has not answered its challenge), ppoll for pacing (a socket timeout would
//! be rounded to the kernel's tick).

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::ops::Range;
use std::os::fd::{AsRawFd as _, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use horde_engine::clock::real_ns;
use horde_engine::sender::Progress;
use horde_model::behaviour::Segment;
use horde_model::scenario::Scenario;
use horde_proto::gate::{Decision, Gate, GateConfig};
use horde_proto::greeter::{GreetState, Greeter};
use horde_proto::RunKey;
use horde_regulate::bucket::{Mode, BURST_NS};
use horde_regulate::channels::Channel;
use horde_regulate::circuit::demand::{Avatar, Demand, DemandModel, Event};
use horde_regulate::circuit::{asked_kbps, circuit_cap_bps, Client, ClientStats, Server, ServerStats};
use horde_regulate::{Limits, ThrottleKind};
use serde::{Deserialize, Serialize};

use crate::Error;

/// Players of one regulated run at most: one socket each on the client side.
pub const MAX_CIRCUITS: u32 = 2000;
const SECOND: u64 = 1_000_000_000;

/// A scenario's regulation, checked against the controllers and the service.
#[derive(Debug, Clone)]
pub struct Config {
    pub kind: ThrottleKind,
    /// The throttle as the scenario names it, e.g. `opensim:500`.
    pub throttle: String,
    pub mode: Mode,
    pub start_bps: f64,
    pub model: DemandModel,
    states: Vec<Mapped>,
}

/// What a behaviour state means to the avatar's demand.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mapped {
    Avatar(Avatar),
    /// A teleport: the arrival's texture and asset burst, standing while it loads.
    Teleport,
}

impl Config {
    /// The scenario's `[regulation]`, if it has one; errors name the field and the fix.
    pub fn of(sc: &Scenario) -> Result<Option<Config>, Error> {
        let Some(r) = &sc.regulation else { return Ok(None) };
        let bad = |m: String| Error::BadInput(anyhow::anyhow!("{}: {m}", sc.name));
        let kind = ThrottleKind::parse(&r.throttle).map_err(|e| bad(format!("regulation.throttle {e}")))?;
        let mode = Mode::parse(&r.regulator).ok_or_else(|| bad(format!("regulation.regulator `{}`: give per-channel or dual", r.regulator)))?;
        let model = DemandModel::from_table(&sc.service.circuit).map_err(|e| bad(format!("service {}: [circuit]: {e}", sc.service.name)))?;
        if sc.players > MAX_CIRCUITS {
            return Err(bad(format!("regulated circuits: at most {MAX_CIRCUITS} players per run (one socket each; got {})", sc.players)));
        }
        let states = sc
            .service
            .states
            .iter()
            .map(|st| match Avatar::parse(&st.name) {
                Some(a) => Ok(Mapped::Avatar(a)),
                None if st.name.starts_with("teleport") => Ok(Mapped::Teleport),
                None => Err(bad(format!(
                    "regulation: service {}'s state `{}` is not an avatar state: regulated circuits need states named standing, walking, flying or teleporting",
                    sc.service.name, st.name
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Config { kind, throttle: r.throttle.clone(), mode, start_bps: r.start_kbps * 1000.0, model, states }))
    }

    /// A player's avatar life from its behaviour's stays, times from the run's start: login in
    /// the state of its first stay, then each change of state (a teleporting stay is a teleport
    /// whose burst arrives at its start; the avatar stands while it loads).
    pub fn script(&self, segs: &[Segment]) -> Vec<(u64, Event)> {
        let mut out = Vec::new();
        let mut last: Option<u16> = None;
        for s in segs {
            if last == Some(s.state) {
                continue;
            }
            let m = self.states.get(s.state as usize).copied().unwrap_or(Mapped::Avatar(Avatar::Standing));
            let ev = match (last.is_none(), m) {
                (true, Mapped::Avatar(a)) => Event::Login(a),
                (true, Mapped::Teleport) => Event::Login(Avatar::Standing),
                (false, Mapped::Teleport) => Event::Teleport(Avatar::Standing),
                (false, Mapped::Avatar(a)) => Event::Become(a),
            };
            out.push(((s.start_s.max(0.0) * 1e9) as u64, ev));
            last = Some(s.state);
        }
        out
    }
}

// ------------------------------------------------------------------------------------------
// One second of one end, as CSV rows and the summaries carry it.

/// One second of one circuit end.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Row {
    pub t_s: u64,
    /// The circuit: a player id (`horde run`) or the client's address (`horde circuit`).
    pub circuit: String,
    /// Server: the client's allowance; client: what its throttle asked for (kbit/s).
    pub rate_kbps: f64,
    /// Bytes per channel in this second, as kbit/s (resend, land, wind, cloud, task, texture,
    /// asset).
    pub kbps: [f64; 7],
    pub total_kbps: f64,
    /// Server: mean and max time from queueing to leaving on the task channel (ms).
    pub task_delay_ms: f64,
    pub task_delay_max_ms: f64,
    /// Server: bytes queued (kB); client: 0.
    pub queued_kb: f64,
    /// Client: its last round-trip time (ms); server: 0.
    pub rtt_ms: f64,
    /// Client: sequence numbers missing in this second (%); server: 0.
    pub loss_pct: f64,
    /// Data packets in this second (server: sent; client: received).
    pub packets: u64,
}

/// The CSV header of [`Row`]s.
pub const CSV_HEADER: &str = "t_s,circuit,rate_kbps,resend_kbps,land_kbps,wind_kbps,cloud_kbps,task_kbps,texture_kbps,asset_kbps,total_kbps,task_delay_ms,task_delay_max_ms,queued_kb,rtt_ms,loss_pct,packets\n";

/// A [`Row`] as a CSV line.
pub fn csv_line(r: &Row) -> String {
    let k: Vec<String> = r.kbps.iter().map(|x| format!("{x:.1}")).collect();
    format!(
        "{},{},{:.1},{},{:.1},{:.2},{:.2},{:.1},{:.2},{:.2},{}\n",
        r.t_s,
        r.circuit,
        r.rate_kbps,
        k.join(","),
        r.total_kbps,
        r.task_delay_ms,
        r.task_delay_max_ms,
        r.queued_kb,
        r.rtt_ms,
        r.loss_pct,
        r.packets
    )
}

/// Each channel's kbit/s since `prev` (bytes), and the packets since `prev_packets`.
fn channel_kbps(ch: &[horde_regulate::circuit::ChannelStats; 7], prev: &mut [u64; 7], prev_packets: &mut u64) -> ([f64; 7], u64) {
    let mut kbps = [0.0; 7];
    for (i, k) in kbps.iter_mut().enumerate() {
        *k = (ch[i].bytes - prev[i]) as f64 * 8.0 / 1000.0;
        prev[i] = ch[i].bytes;
    }
    let packets: u64 = ch.iter().map(|c| c.packets).sum();
    let n = packets - *prev_packets;
    *prev_packets = packets;
    (kbps, n)
}

/// A circuit's server end with its per-second bookkeeping.
pub struct ServerEnd {
    pub srv: Server,
    pub name: String,
    prev: [u64; 7],
    prev_packets: u64,
    prev_delay: (u128, u64),
    pub rows: Vec<Row>,
}

impl ServerEnd {
    pub fn new(srv: Server, name: String) -> ServerEnd {
        ServerEnd { srv, name, prev: [0; 7], prev_packets: 0, prev_delay: (0, 0), rows: Vec::new() }
    }

    /// Closes second `t_s`: its row is kept and returned.
    pub fn second(&mut self, t_s: u64) -> &Row {
        let st = &self.srv.stats;
        let (kbps, packets) = channel_kbps(&st.channels, &mut self.prev, &mut self.prev_packets);
        let task = &st.channels[Channel::Task.index()];
        let (dsum, dn) = (task.delay_sum_ns - self.prev_delay.0, task.packets - self.prev_delay.1);
        self.prev_delay = (task.delay_sum_ns, task.packets);
        let queued: u64 = Channel::ALL.iter().map(|&ch| self.srv.queued(ch).1).sum();
        self.rows.push(Row {
            t_s,
            circuit: self.name.clone(),
            rate_kbps: self.srv.rate_bps() / 1000.0,
            total_kbps: kbps.iter().sum(),
            kbps,
            task_delay_ms: if dn > 0 { dsum as f64 / dn as f64 / 1e6 } else { 0.0 },
            task_delay_max_ms: task.delay_max_ns as f64 / 1e6,
            queued_kb: queued as f64 / 1000.0,
            rtt_ms: 0.0,
            loss_pct: 0.0,
            packets,
        });
        self.rows.last().expect("pushed")
    }
}

/// A circuit's client end with its per-second bookkeeping.
pub struct ClientEnd {
    pub cli: Client,
    pub name: String,
    prev: [u64; 7],
    prev_packets: u64,
    prev_seq: (u64, u64),
    pub rows: Vec<Row>,
}

impl ClientEnd {
    pub fn new(cli: Client, name: String) -> ClientEnd {
        ClientEnd { cli, name, prev: [0; 7], prev_packets: 0, prev_seq: (0, 0), rows: Vec::new() }
    }

    /// Closes second `t_s`: its row is kept and returned.
    pub fn second(&mut self, t_s: u64) -> &Row {
        let st = &self.cli.stats;
        let (kbps, packets) = channel_kbps(&st.channels, &mut self.prev, &mut self.prev_packets);
        let (span, fresh) = (st.seq_span - self.prev_seq.0, st.fresh - self.prev_seq.1);
        self.prev_seq = (st.seq_span, st.fresh);
        self.rows.push(Row {
            t_s,
            circuit: self.name.clone(),
            rate_kbps: self.cli.requested_bps / 1000.0,
            total_kbps: kbps.iter().sum(),
            kbps,
            task_delay_ms: 0.0,
            task_delay_max_ms: 0.0,
            queued_kb: 0.0,
            rtt_ms: st.rtt_ms.unwrap_or(0.0),
            loss_pct: if span > 0 { 100.0 * span.saturating_sub(fresh) as f64 / span as f64 } else { 0.0 },
            packets,
        });
        self.rows.last().expect("pushed")
    }
}

/// Waits until one of `fds` is readable or `until_ns` (2 ms at most, to notice a stop); sets
/// their `revents`. ppoll's timeout is a high-resolution timer: a socket read timeout
/// (SO_RCVTIMEO) is rounded up to the kernel's tick (4 ms at HZ=250), which would cap the
/// pacing of a 1.5 Mbit/s circuit.
pub fn wait_readable(fds: &mut [libc::pollfd], until_ns: u64) {
    let wait = until_ns.saturating_sub(real_ns()).min(2_000_000);
    let ts = libc::timespec { tv_sec: 0, tv_nsec: wait as _ };
    // SAFETY: `fds` is a valid slice of pollfd and `ts` a valid timespec for the call.
    unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

/// A nonblocking UDP socket bound to `addr`.
pub fn udp(addr: SocketAddr) -> anyhow::Result<UdpSocket> {
    let s = UdpSocket::bind(addr).with_context(|| format!("binding {addr}"))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

// ------------------------------------------------------------------------------------------
// A server side's circuits on one socket, shared by `horde run` and `horde circuit serve`.

/// The circuits a server side holds, by client address: the flow its join named (the player)
/// and its server end.
pub type Circuits = HashMap<SocketAddr, (u32, ServerEnd)>;

/// A datagram that arrived on the server side's socket from `from`: a consent reply goes to
/// the gate, a circuit packet to its circuit's server end. Returns true if it was handled so;
/// false: it is a hello (or garbage) for the gate.
pub fn route(gate: &mut Gate, circuits: &mut Circuits, now: u64, from: SocketAddr, bytes: &[u8]) -> bool {
    if horde_proto::consent::is_consent(bytes) {
        gate.on_consent(from, bytes);
        return true;
    }
    match circuits.get_mut(&from) {
        Some((_, c)) if horde_wire::DatagramHeader::parse(bytes).is_err() => {
            c.srv.on_datagram(now, bytes);
            true
        }
        _ => false,
    }
}

/// When anything is due next: a consenting circuit's packet, a consent probe, or `until`.
pub fn next_wake(gate: &Gate, circuits: &Circuits, now: u64, until: u64) -> u64 {
    let due = circuits.iter().filter(|(a, (f, _))| gate.may_send(now, **a, *f)).map(|(_, (_, c))| c.srv.next_ns(now)).min().unwrap_or(u64::MAX);
    due.min(gate.next_consent_ns().unwrap_or(u64::MAX)).min(until)
}

/// Sends what every circuit whose client still consents has due and the consent probes;
/// returns the circuits that ended: their client said bye, or stopped answering probes (so
/// nothing more goes to its address, whatever arrives from it).
pub fn pump(sock: &UdpSocket, gate: &mut Gate, circuits: &mut Circuits, now: u64, buf: &mut Vec<u8>) -> Vec<(SocketAddr, u32, ServerEnd, bool)> {
    for (addr, (flow, c)) in circuits.iter_mut() {
        if gate.may_send(now, *addr, *flow) {
            while c.srv.poll_transmit(now, buf) {
                let _ = sock.send_to(buf, addr);
            }
        }
    }
    let work = gate.poll_consent(now);
    for (to, p) in &work.probes {
        let _ = sock.send_to(p, to);
    }
    let mut ended = Vec::new();
    for (addr, _) in work.expired {
        if let Some((f, c)) = circuits.remove(&addr) {
            ended.push((addr, f, c, false));
        }
    }
    let left: Vec<SocketAddr> = circuits.iter().filter(|(_, (_, c))| c.srv.closed).map(|(a, _)| *a).collect();
    for addr in left {
        let (f, c) = circuits.remove(&addr).expect("present");
        gate.forget(addr, f);
        ended.push((addr, f, c, true));
    }
    ended
}

/// The client side: answers a consent probe of its circuit's flow on `sock` (connected to the
/// server). Returns true if `bytes` was one (then it is not a circuit packet).
pub fn answer_consent(sock: &UdpSocket, flow: u32, bytes: &[u8]) -> bool {
    if !horde_proto::consent::is_consent(bytes) {
        return false;
    }
    if let Some(r) = horde_proto::consent::answer(bytes, flow) {
        let _ = sock.send(&r);
    }
    true
}

// ------------------------------------------------------------------------------------------
// The server side.

/// One circuit's server end at the end of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServedCircuit {
    pub player: u32,
    pub client: String,
    pub seconds: Vec<Row>,
    pub stats: ServerStatsOut,
}

/// The server end's counters as the report reads them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerStatsOut {
    pub resent: u64,
    pub given_up: u64,
    pub throttles: u64,
    pub dropped_full_queue: u64,
    pub bad_packets: u64,
    pub task_delay_max_ms: f64,
}

impl From<&ServerStats> for ServerStatsOut {
    fn from(s: &ServerStats) -> Self {
        ServerStatsOut {
            resent: s.resent,
            given_up: s.given_up,
            throttles: s.throttles,
            dropped_full_queue: s.dropped_full_queue,
            bad_packets: s.bad_packets,
            task_delay_max_ms: s.channels[Channel::Task.index()].delay_max_ns as f64 / 1e6,
        }
    }
}

/// The server side's file in the report directory.
pub const SERVER_FILE: &str = "circuits-server.json";
/// A client side's circuits as an agent hands them to the controller ([`JoinedCircuit`]s).
pub const CLIENT_FILE: &str = "circuits-clients.json";

/// The server side of a regulated run: listens on the scenario's server address (calls
/// `on_listening` with the bound address), admits one circuit per player after address
/// validation, and runs until `stop`; then writes [`SERVER_FILE`] into `out`.
pub fn serve(
    sc: &Scenario,
    cfg: &Config,
    out: &Path,
    key: RunKey,
    stop: &AtomicBool,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<Vec<ServedCircuit>, Error> {
    let failed = Error::Failed;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display())).map_err(failed)?;
    let segments = crate::players::plan(sc, stop)?.segments;
    let sock = udp(sc.server).map_err(failed)?;
    let addr = sock.local_addr().context("the bound address").map_err(failed)?;
    let n = sc.players as usize;
    let mut gate = Gate::new(
        GateConfig { max_flows: n, max_flows_per_ip: n, ..GateConfig::receiver(key) },
        horde_engine::random_secret().context("drawing the cookie secret").map_err(failed)?,
    );
    on_listening(addr);
    let t0 = real_ns();
    // Beyond the run's end (and joins), the server side stops by itself.
    let end = t0 + ((sc.duration_s + 120.0) * 1e9) as u64;
    let mut circuits: Circuits = HashMap::new();
    let mut taken = vec![false; n];
    let mut done: Vec<ServedCircuit> = Vec::new();
    let (mut inbuf, mut buf) = (vec![0u8; 2048], Vec::with_capacity(1600));
    let mut fds = [pollfd(sock.as_raw_fd())];
    let mut next_second = t0 + SECOND;
    // What a join may ask for at most: the scenario's throttle's most.
    let server_cap = cfg.kind.max_bps(Limits::default());
    while !stop.load(Ordering::Relaxed) && real_ns() < end {
        let wake = next_wake(&gate, &circuits, real_ns(), next_second);
        fds[0].revents = 0;
        wait_readable(&mut fds, wake);
        // At most a bounded number of datagrams per turn, so sending keeps its pace.
        for _ in 0..256 {
            let Ok((len, from)) = sock.recv_from(&mut inbuf) else { break };
            let now = real_ns();
            let bytes = &inbuf[..len];
            if route(&mut gate, &mut circuits, now, from, bytes) {
                continue;
            }
            match gate.on_hello(now, from, bytes) {
                Decision::Challenge(c) => {
                    let _ = sock.send_to(&c, from);
                }
                Decision::Again(ans) => {
                    let _ = sock.send_to(&ans, from);
                }
                Decision::Validated(h) => {
                    let p = h.header.flow;
                    let ans = if p as usize >= n {
                        gate.refuse(&h, horde_wire::control::Status::UnknownPlayer)
                    } else if taken[p as usize] || circuits.contains_key(&from) {
                        gate.refuse(&h, horde_wire::control::Status::Taken)
                    } else {
                        match gate.admit(now, from, &h, true) {
                            Ok(ans) => {
                                taken[p as usize] = true;
                                // The script counts from the player's join, which is now.
                                let join_ns = (sc.join_time(p) * 1e9) as u64;
                                let script = cfg.script(&segments[p as usize]).into_iter().map(|(t, e)| (t.saturating_sub(join_ns), e)).collect();
                                let d = Demand::new(cfg.model.clone(), script, horde_model::derive_seed(sc.seed ^ 0x00C1_C017, p as u64));
                                let cap = circuit_cap_bps(h.header.seq, server_cap);
                                let srv = Server::new(cfg.mode, cfg.start_bps, BURST_NS, d, now).with_cap(cap, now);
                                circuits.insert(from, (p, ServerEnd::new(srv, p.to_string())));
                                ans
                            }
                            Err(ans) => ans,
                        }
                    };
                    let _ = sock.send_to(&ans, from);
                }
                Decision::Drop(_) => {}
            }
        }
        let now = real_ns();
        for (addr, p, c, _) in pump(&sock, &mut gate, &mut circuits, now, &mut buf) {
            done.push(ServedCircuit { player: p, client: addr.to_string(), stats: (&c.srv.stats).into(), seconds: c.rows });
        }
        if now >= next_second {
            let t_s = (next_second - t0) / SECOND;
            next_second += SECOND;
            for (_, c) in circuits.values_mut() {
                c.second(t_s);
            }
        }
    }
    for (addr, (p, c)) in circuits {
        done.push(ServedCircuit { player: p, client: addr.to_string(), stats: (&c.srv.stats).into(), seconds: c.rows });
    }
    done.sort_by_key(|c| c.player);
    let json = serde_json::to_string(&done).context("encoding the circuits").map_err(failed)?;
    std::fs::write(out.join(SERVER_FILE), json).with_context(|| format!("writing {SERVER_FILE}")).map_err(failed)?;
    Ok(done)
}

// ------------------------------------------------------------------------------------------
// The client side.

/// One circuit's client end at the end of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JoinedCircuit {
    pub player: u32,
    /// Seconds after the start when the server admitted it (None: it never joined).
    pub joined_s: Option<f64>,
    /// Why it did not join or stopped early.
    pub error: Option<String>,
    pub seconds: Vec<Row>,
    pub stats: ClientStats,
}

enum Phase {
    Waiting,
    Greeting(Greeter),
    Up(Box<ClientEnd>),
    Failed(String),
}

struct Slot {
    player: u32,
    sock: UdpSocket,
    join_ns: u64,
    joined_ns: Option<u64>,
    phase: Phase,
}

/// The client side of a regulated run: players `shard`, each a circuit from its own connected
/// socket (in `netns[p % len]` when given) to `server`, joining at its join time, until the
/// run's end or `stop`. Progress counts what the circuits send and receive.
#[allow(clippy::too_many_arguments)]
pub fn run_clients(
    sc: &Scenario,
    cfg: &Config,
    shard: Range<u32>,
    server: SocketAddr,
    key: &RunKey,
    netns: &[Arc<std::fs::File>],
    progress: &Progress,
    stop: &AtomicBool,
) -> anyhow::Result<Vec<JoinedCircuit>> {
    horde_engine::clock::raise_fd_limit();
    let any: SocketAddr = if server.is_ipv4() { (std::net::Ipv4Addr::UNSPECIFIED, 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
    let t0 = real_ns();
    let mut slots = Vec::with_capacity(shard.len());
    for p in shard {
        let make = || -> anyhow::Result<UdpSocket> {
            let s = udp(any)?;
            // Connected: the kernel hands this socket only the server's datagrams.
            s.connect(server).with_context(|| format!("connecting to {server}"))?;
            Ok(s)
        };
        let sock = match netns.get(p as usize % netns.len().max(1)) {
            Some(ns) => horde_engine::net::within_netns(ns.as_ref(), make).context("entering a client host's namespace")?,
            None => make(),
        }
        .with_context(|| format!("player {p}'s socket (each player has one: with many players, raise the open-file limit, ulimit -n)"))?;
        slots.push(Slot { player: p, sock, join_ns: t0 + (sc.join_time(p) * 1e9) as u64, joined_ns: None, phase: Phase::Waiting });
    }
    let end = t0 + (sc.duration_s * 1e9) as u64;
    let (mut inbuf, mut buf) = (vec![0u8; 2048], Vec::with_capacity(1600));
    let mut fds: Vec<libc::pollfd> = slots.iter().map(|s| pollfd(s.sock.as_raw_fd())).collect();
    let mut next_second = t0 + SECOND;
    let limits = Limits::default();
    let asked = asked_kbps(cfg.kind.max_bps(limits));
    let count = |n: usize, sent: bool| {
        let (p, b) = if sent { (&progress.sent_packets, &progress.sent_bytes) } else { (&progress.recv_packets, &progress.recv_bytes) };
        p.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(n as u64, Ordering::Relaxed);
    };
    while !stop.load(Ordering::Relaxed) && real_ns() < end {
        let now = real_ns();
        let mut wake = next_second.min(end);
        for s in slots.iter_mut() {
            match &mut s.phase {
                // The join asks for what the throttle may ever ask: the server caps the circuit there.
                Phase::Waiting if now >= s.join_ns => s.phase = Phase::Greeting(Greeter::new(key.clone(), 0, s.player, asked, Some(now))),
                Phase::Waiting => wake = wake.min(s.join_ns),
                _ => {}
            }
            match &mut s.phase {
                Phase::Greeting(g) => {
                    if let Some(h) = g.poll_transmit(now) {
                        if s.sock.send(&h).is_ok() {
                            count(h.len(), true);
                        }
                    }
                    match g.state() {
                        GreetState::Accepted => {
                            s.joined_ns = Some(now);
                            let cli = Client::new(cfg.kind.build(limits, now), now);
                            s.phase = Phase::Up(Box::new(ClientEnd::new(cli, s.player.to_string())));
                        }
                        GreetState::Refused(st) => s.phase = Phase::Failed(format!("the server side refused the circuit ({st:?})")),
                        GreetState::GaveUp => s.phase = Phase::Failed("no answer from the server side within 5 s".into()),
                        _ => wake = wake.min(g.next_ns().unwrap_or(now + 10_000_000)),
                    }
                }
                Phase::Up(c) => {
                    while c.cli.poll_transmit(now, &mut buf) {
                        if s.sock.send(&buf).is_ok() {
                            count(buf.len(), true);
                        }
                    }
                    wake = wake.min(c.cli.next_ns(now));
                }
                _ => {}
            }
        }
        for (f, s) in fds.iter_mut().zip(&slots) {
            f.revents = 0;
            // Only sockets that expect something are watched.
            f.fd = if matches!(s.phase, Phase::Greeting(_) | Phase::Up(_)) { s.sock.as_raw_fd() } else { -1 };
        }
        wait_readable(&mut fds, wake);
        for (f, s) in fds.iter().zip(slots.iter_mut()) {
            if f.revents & libc::POLLIN == 0 {
                continue;
            }
            for _ in 0..256 {
                let Ok(len) = s.sock.recv(&mut inbuf) else { break };
                count(len, false);
                if matches!(s.phase, Phase::Up(_)) && answer_consent(&s.sock, s.player, &inbuf[..len]) {
                    continue;
                }
                match &mut s.phase {
                    Phase::Greeting(g) => {
                        g.on_datagram(&inbuf[..len]);
                    }
                    Phase::Up(c) => c.cli.on_datagram(real_ns(), &inbuf[..len]),
                    _ => {}
                }
            }
        }
        let now = real_ns();
        if now >= next_second {
            let t_s = (next_second - t0) / SECOND;
            next_second += SECOND;
            for s in slots.iter_mut() {
                if let Phase::Up(c) = &mut s.phase {
                    c.second(t_s);
                }
            }
        }
    }
    Client::bye(&mut buf);
    let mut out = Vec::with_capacity(slots.len());
    for s in slots {
        let joined_s = s.joined_ns.map(|j| j.saturating_sub(t0) as f64 / 1e9);
        out.push(match s.phase {
            Phase::Up(c) => {
                let _ = s.sock.send(&buf);
                JoinedCircuit { player: s.player, joined_s, error: None, seconds: c.rows, stats: c.cli.stats }
            }
            Phase::Failed(e) => JoinedCircuit { player: s.player, joined_s, error: Some(e), seconds: Vec::new(), stats: ClientStats::default() },
            Phase::Waiting | Phase::Greeting(_) => JoinedCircuit {
                player: s.player,
                joined_s,
                error: Some("the run ended before it joined".into()),
                seconds: Vec::new(),
                stats: ClientStats::default(),
            },
        });
    }
    Ok(out)
}

// ------------------------------------------------------------------------------------------
// A regulated run end to end.

/// What a regulated run produced.
pub struct CircuitOutcome {
    pub summary: crate::circuit_report::CircuitSummary,
    /// `Some(status)`: the server side died during the run.
    pub server_died: Option<String>,
    /// Stopped by a signal.
    pub interrupted: bool,
}

/// Runs a scenario with a `[regulation]` table: plan, place (loopback or `[emu]`), the server
/// side as a child (or a thread), every player's circuit on the client side, then the report in
/// `opts.out` (summary.json, circuits.csv, charts, index.html).
pub fn execute(sc: &Scenario, cfg: &Config, opts: &crate::RunOptions) -> Result<CircuitOutcome, Error> {
    use crate::execute::{prepare, progress, Prepared, Server};
    use std::sync::Mutex;
    let failed = Error::Failed;
    if opts.shard.is_some() {
        return Err(Error::BadInput(anyhow::anyhow!("{}: regulated circuits run on one machine (no shards)", sc.name)));
    }
    let out = opts.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating report directory {}", out.display())).map_err(failed)?;
    let Prepared { players, shard, scenario_file, key, emu } = prepare(sc, opts)?;
    let no_exe = std::path::PathBuf::new();
    let spec = crate::server::ChildSpec { exe: &no_exe, scenario: &scenario_file, out, key: &key, netns: emu.as_ref().map(|e| (&e.server_ns, e.server)) };
    let (server, addr) = Server::start(sc, &opts.server, &spec)?;
    (opts.events)(&crate::Event::Note(format!("{} circuits, {} throttle, {} regulator, server side on {addr}", sc.players, cfg.throttle, cfg.mode.name())));
    let client_progress = Arc::new(Progress::default());
    let netns = emu.as_ref().map(|e| e.clients.clone()).unwrap_or_default();
    let done = AtomicBool::new(false);
    let run_stop = AtomicBool::new(false);
    let server = Mutex::new(server);
    let died: Mutex<Option<(String, u64)>> = Mutex::new(None);
    let steer = crate::steer::Steer::new(opts.commands, None, &client_progress, emu.as_ref(), opts.events);
    let clients = std::thread::scope(|s| {
        let (done_r, p, pl) = (&done, &client_progress, &players);
        s.spawn(move || progress(sc, pl, p, done_r, opts.events));
        s.spawn(|| crate::steer::watch(&server, opts.stop, &run_stop, &done, &died, &steer));
        let r = run_clients(sc, cfg, shard, addr, &key, &netns, &client_progress, &run_stop);
        done.store(true, Ordering::Relaxed);
        r
    });
    let server = server.into_inner().unwrap_or_else(|p| p.into_inner());
    let died = died.into_inner().unwrap_or_else(|p| p.into_inner());
    let served = server.finish_circuits(out, died.is_some()).map_err(failed)?.unwrap_or_default();
    let clients = clients.context("client side").map_err(failed)?;
    let commanded = steer.commanded.load(Ordering::Relaxed);
    let interrupted = opts.stop.load(Ordering::Relaxed) || commanded;
    let interruption = match (&died, interrupted) {
        (Some((status, _)), _) => Some(format!("the server side exited ({status})")),
        (None, true) if commanded => Some("stopped by a command".into()),
        (None, true) => Some("interrupted".into()),
        _ => None,
    };
    let summary = crate::circuit_report::summarise(sc, cfg, &clients, &served, interruption);
    let links = emu.as_ref().and_then(|e| e.links()).map(|l| horde_emu::fwd::links_table(&l));
    crate::circuit_report::write(sc, out, &players.segments, &summary, links.as_deref(), &clients, &served).map_err(failed)?;
    drop(emu);
    Ok(CircuitOutcome { summary, server_died: died.map(|d| d.0), interrupted })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str) -> Result<Scenario, horde_model::scenario::ScenarioError> {
        Scenario::parse(&format!("service = \"opensim\"\nplayers = 3\nduration = \"20s\"\n{extra}"), "t.toml", Path::new("."))
    }

    #[test]
    fn a_regulation_table_is_checked_field_by_field() {
        let sc = scenario("[regulation]\nthrottle = \"mongoose\"\n").expect("parses");
        let c = Config::of(&sc).expect("valid").expect("present");
        assert_eq!((c.kind, c.mode, c.start_bps), (ThrottleKind::Mongoose, Mode::Dual, 100_000.0));
        let sc = scenario("[regulation]\nthrottle = \"opensim:2000\"\n").expect("parses");
        let e = Config::of(&sc).expect_err("a setting out of range").to_string();
        assert!(e.contains("regulation.throttle") && e.contains("50..=1500"), "{e}");
        let e = scenario("[regulation]\nthrottle = \"tfrc\"\nregulator = \"fifo\"\n").expect_err("bad regulator").to_string();
        assert!(e.contains("regulation.regulator") && e.contains("per-channel"), "{e}");
        let e = Scenario::parse("service = \"wow\"\nplayers = 3\nduration = \"20s\"\n[regulation]\nthrottle = \"tfrc\"\n", "t.toml", Path::new("."))
            .expect_err("no circuit table")
            .to_string();
        assert!(e.contains("[circuit]"), "{e}");
        assert!(Config::of(&scenario("").expect("parses")).expect("fine").is_none());
    }

    #[test]
    fn a_player_script_follows_its_stays() {
        let sc = scenario("[regulation]\nthrottle = \"mongoose\"\n").expect("parses");
        let c = Config::of(&sc).expect("valid").expect("present");
        let st = |name: &str| sc.service.states.iter().position(|s| s.name == name).expect("state") as u16;
        let seg = |state: u16, a: f64, b: f64| Segment { player: 0, state, sub: 0, start_s: a, end_s: b, complete: true, hour: 20 };
        let segs = [seg(st("walking"), 2.0, 5.0), seg(st("walking"), 5.0, 6.0), seg(st("teleporting"), 6.0, 8.0), seg(st("flying"), 8.0, 20.0)];
        assert_eq!(
            c.script(&segs),
            vec![
                (2_000_000_000, Event::Login(Avatar::Walking)),
                (6_000_000_000, Event::Teleport(Avatar::Standing)),
                (8_000_000_000, Event::Become(Avatar::Flying))
            ]
        );
    }
}
