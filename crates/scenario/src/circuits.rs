//! Regulated virtual-world circuits as a scenario's traffic (a `[regulation]` table with a
//! service that has a `[circuit]` demand table, e.g. opensim): every player is one circuit.
//! Its server end (in the server side) sends what the player's avatar needs — the login burst
//! at its join, task updates that follow its behaviour state, a texture and asset burst at each
//! teleport — at the rate the client end's throttle asks for, through the chosen regulator; its
//! client end (in the client side) measures loss and round trips and sends throttle packets.
//!
//! The circuits are `horde-regulate`'s I/O-free state machines, each end a
//! [`horde_proto::endpoint::Peer`]; the engine's shells move their bytes (`horde_engine::shell`:
//! one socket and an [`Endpoint`] for the server side — address validation first, nothing sent
//! to an address that has not answered its challenge or stopped answering consent probes — and
//! one connected socket per player on the client side). `horde circuit` uses the same ends.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context as _;
use horde_engine::clock::Clock;
use horde_engine::sender::Progress;
use horde_engine::shell::{self, Crowd, Listening, Until};
use horde_model::behaviour::Segment;
use horde_model::scenario::Scenario;
use horde_proto::endpoint::{self, Ended, Endpoint, Joiner, Peer};
use horde_proto::gate::{Gate, GateConfig};
use horde_proto::RunKey;
use horde_regulate::bucket::{Mode, BURST_NS};
use horde_regulate::channels::Channel;
use horde_regulate::circuit::demand::{Avatar, Demand, DemandModel, Event};
use horde_regulate::circuit::{asked_kbps, circuit_cap_bps, Client, ClientStats, Server, ServerStats};
use horde_regulate::{Limits, ThrottleKind, Tuning};
use horde_wire::control::{Hello, Status};
use serde::{Deserialize, Serialize};

use crate::Error;

/// Players of one regulated run at most: one socket each on the client side.
pub const MAX_CIRCUITS: u32 = 2000;

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
        let kind = kind
            .tuned(Tuning { period_s: r.throttle_period_s, floor_kbps: r.floor_kbps })
            .map_err(|e| bad(format!("regulation.throttle_period_s/floor_kbps: {e}")))?;
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
        Ok(Some(Config { kind, throttle: kind.label(), mode, start_bps: r.start_kbps * 1000.0, model, states }))
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

impl Peer for ServerEnd {
    type Event = ();
    fn handle(&mut self, now_ns: u64, bytes: &[u8]) {
        self.srv.on_datagram(now_ns, bytes)
    }
    fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool {
        self.srv.poll_transmit(now_ns, buf)
    }
    fn poll_timeout(&self, now_ns: u64) -> u64 {
        self.srv.next_ns(now_ns)
    }
    fn is_closed(&self) -> bool {
        self.srv.closed
    }
    fn second(&mut self, t_s: u64) {
        ServerEnd::second(self, t_s);
    }
}

impl Peer for ClientEnd {
    type Event = ();
    fn handle(&mut self, now_ns: u64, bytes: &[u8]) {
        self.cli.on_datagram(now_ns, bytes)
    }
    fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool {
        self.cli.poll_transmit(now_ns, buf)
    }
    fn poll_timeout(&self, now_ns: u64) -> u64 {
        self.cli.next_ns(now_ns)
    }
    fn second(&mut self, t_s: u64) {
        ClientEnd::second(self, t_s);
    }
    fn farewell(&mut self, buf: &mut Vec<u8>) -> bool {
        Client::bye(buf);
        true
    }
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
    /// Data packets it sent, resends included (so `sent − resent` sequence numbers were
    /// issued: no client of the circuit can span more).
    #[serde(default)]
    pub sent: u64,
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
            sent: s.channels.iter().map(|c| c.packets).sum(),
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
    clock: &dyn Clock,
) -> Result<Vec<ServedCircuit>, Error> {
    let failed = Error::Failed;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display())).map_err(failed)?;
    let segments = crate::players::plan(sc, sc.players, stop)?.segments;
    let sock = shell::udp(sc.server).map_err(|e| failed(e.into()))?;
    let addr = sock.local_addr().context("the bound address").map_err(failed)?;
    let n = sc.players as usize;
    let gate = Gate::new(
        GateConfig { max_flows: n, max_flows_per_ip: n, ..GateConfig::receiver(key).about(circuit_server()) },
        horde_engine::random_secret().context("drawing the cookie secret").map_err(failed)?,
    );
    on_listening(addr);
    let t0 = clock.real_ns();
    // What a join may ask for at most: the scenario's throttle's most.
    let mut host = Served { sc, cfg, segments, taken: vec![false; n], server_cap: cfg.kind.max_bps(Limits::default()), done: Vec::new() };
    // Beyond the run's end (and joins), the server side stops by itself.
    shell::listen(&sock, Endpoint::new(gate), &mut host, t0, Until { stop, end_ns: t0 + ((sc.duration_s + 120.0) * 1e9) as u64 })
        .map_err(|e| failed(e.into()))?;
    let mut done = host.done;
    done.sort_by_key(|c| c.player);
    let json = serde_json::to_string(&done).context("encoding the circuits").map_err(failed)?;
    crate::write_whole(&out.join(SERVER_FILE), json.as_bytes()).with_context(|| format!("writing {SERVER_FILE}")).map_err(failed)?;
    Ok(done)
}

/// The server side's admission: a player of the scenario, once; its avatar's script counts from
/// its join.
struct Served<'a> {
    sc: &'a Scenario,
    cfg: &'a Config,
    segments: Arc<Vec<Vec<Segment>>>,
    taken: Vec<bool>,
    server_cap: f64,
    done: Vec<ServedCircuit>,
}

impl Listening<ServerEnd> for Served<'_> {
    fn admit(&mut self, now: u64, _from: SocketAddr, h: &Hello) -> Result<ServerEnd, Status> {
        let p = h.header.flow;
        match self.taken.get_mut(p as usize) {
            None => return Err(Status::UnknownPlayer),
            Some(true) => return Err(Status::Taken),
            Some(t) => *t = true,
        }
        // The script counts from the player's join, which is now.
        let join_ns = (self.sc.join_time(p) * 1e9) as u64;
        let script = self.cfg.script(&self.segments[p as usize]).into_iter().map(|(t, e)| (t.saturating_sub(join_ns), e)).collect();
        let d = Demand::new(self.cfg.model.clone(), script, horde_model::derive_seed(self.sc.seed ^ 0x00C1_C017, p as u64));
        let cap = circuit_cap_bps(h.header.seq, self.server_cap);
        let srv = Server::new(self.cfg.mode, self.cfg.start_bps, BURST_NS, d, now).with_cap(cap, now);
        Ok(ServerEnd::new(srv, p.to_string()))
    }

    fn ended(&mut self, e: Ended<ServerEnd>) {
        self.done.push(ServedCircuit { player: e.flow, client: e.addr.to_string(), stats: (&e.peer.srv.stats).into(), seconds: e.peer.rows });
    }
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
    live: Option<&std::sync::Mutex<Option<CircuitsLive>>>,
    clock: &dyn Clock,
) -> anyhow::Result<Vec<JoinedCircuit>> {
    let socks = shell::client_sockets(server, None, shard.len(), netns)?;
    let t0 = clock.real_ns();
    // the run's clock starts here (progress, commands and marks count from it)
    progress.t0_real_ns.store(t0, std::sync::atomic::Ordering::Relaxed);
    // The join asks for what the throttle may ever ask: the server caps the circuit there.
    let asked = asked_kbps(cfg.kind.max_bps(Limits::default()));
    let mut members: Vec<Joiner<ClientEnd>> = shard.map(|p| Joiner::new(key.clone(), p, asked, t0 + (sc.join_time(p) * 1e9) as u64)).collect();
    let mut host = Joining { cfg, players: members.iter().map(|m| m.flow).collect(), rows: Vec::new(), live };
    shell::population(&mut members, &socks, &mut host, progress, t0, Until { stop, end_ns: t0 + (sc.duration_s * 1e9) as u64 })?;
    Ok(members
        .into_iter()
        .map(|m| {
            let (player, joined_s) = (m.flow, m.joined_ns.map(|j| j.saturating_sub(t0) as f64 / 1e9));
            match m.into_phase() {
                endpoint::Joining::Up(c) => JoinedCircuit { player, joined_s, error: None, seconds: c.rows, stats: c.cli.stats },
                endpoint::Joining::Failed(e) => {
                    JoinedCircuit { player, joined_s, error: Some(e.to_string()), seconds: Vec::new(), stats: ClientStats::default() }
                }
                _ => unreachable!("into_phase gives Up or Failed"),
            }
        })
        .collect())
}

/// The client side's circuits: each admitted player's throttle starts at its admission.
struct Joining<'a> {
    cfg: &'a Config,
    players: Vec<u32>,
    /// This second's rows of the circuits up (throttle, received, rtt, loss), and where the
    /// closed second goes.
    rows: Vec<[f64; 4]>,
    live: Option<&'a std::sync::Mutex<Option<CircuitsLive>>>,
}

impl Crowd<Joiner<ClientEnd>> for Joining<'_> {
    fn turn(&mut self, i: usize, now: u64, m: &mut Joiner<ClientEnd>) {
        if matches!(m.phase(), endpoint::Joining::Admitted) {
            m.up(now, ClientEnd::new(Client::new(self.cfg.kind.build(Limits::default(), now), now), self.players[i].to_string()));
        }
    }

    fn second(&mut self, i: usize, m: &Joiner<ClientEnd>) {
        let Some(live) = self.live else { return };
        let mut t_s = None;
        if let endpoint::Joining::Up(c) = m.phase() {
            if let Some(r) = c.rows.last() {
                self.rows.push([r.rate_kbps, r.total_kbps, r.rtt_ms, r.loss_pct]);
                t_s = Some(r.t_s);
            }
        }
        // every member closes the second in turn: the last one publishes it
        if i + 1 == self.players.len() {
            let closed = CircuitsLive::of(t_s.unwrap_or_default(), &self.rows);
            *live.lock().unwrap_or_else(|p| p.into_inner()) = closed;
            self.rows.clear();
        }
    }
}

/// A regulated run's circuits in their last closed second, live (`--progress json`, the console).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CircuitsLive {
    /// The second, counted from the run's start.
    pub t_s: u64,
    /// Circuits up in it.
    pub circuits: u32,
    /// What their throttles asked for, kbit/s: [min, median, max].
    pub throttle_kbps: [f64; 3],
    /// What they received, kbit/s, all together.
    pub received_kbps: f64,
    /// Their last round-trip times, ms: the median (absent before one was measured).
    pub rtt_ms: Option<f64>,
    /// Sequence numbers missing in the second, %: the mean over circuits.
    pub loss_pct: f64,
}

impl CircuitsLive {
    /// The figures of one second's rows `[throttle, received, rtt, loss]`; None without rows.
    fn of(t_s: u64, rows: &[[f64; 4]]) -> Option<CircuitsLive> {
        let n = rows.len();
        if n == 0 {
            return None;
        }
        let sorted = |k: usize| {
            let mut v: Vec<f64> = rows.iter().map(|r| r[k]).filter(|x| x.is_finite() && (k != 2 || *x > 0.0)).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let thr = sorted(0);
        let rtt = sorted(2);
        Some(CircuitsLive {
            t_s,
            circuits: n as u32,
            throttle_kbps: if thr.is_empty() { [0.0; 3] } else { [thr[0], thr[thr.len() / 2], thr[thr.len() - 1]] },
            received_kbps: rows.iter().map(|r| r[1]).sum(),
            rtt_ms: (!rtt.is_empty()).then(|| rtt[rtt.len() / 2]),
            loss_pct: rows.iter().map(|r| r[3]).sum::<f64>() / n as f64,
        })
    }
}

/// What a circuit server says of itself to a discovery request (`horde discover`; its clock is
/// the wall clock already: `shell::listen` runs on it).
pub fn circuit_server() -> horde_wire::discover::About {
    horde_wire::discover::About { role: horde_wire::discover::Role::CircuitServer, udp_ports: 1, ..Default::default() }
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
