//! `horde circuit`: one regulated virtual-world circuit over real UDP — `serve` is the server
//! end (an avatar's demand per channel, regulated at the rate its client asks for), `join` the
//! client end (a throttle controller). The protocol lives in `horde-regulate` (I/O-free); this
//! is its socket shell: the engine's address validation first (hello, challenge, cookie), then
//! circuit packets, a line of figures per second (and CSV), a JSON summary.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use horde_engine::clock::{Clock as _, System};
use horde_engine::shell::{Crowd, Listening, Until};
use horde_proto::endpoint::{EndReason, Ended, Endpoint, JoinError, Joiner, Joining};
use horde_proto::gate::{Gate, GateConfig};
use horde_regulate::bucket::{Mode, BURST_NS};
use horde_regulate::channels::Channel;
use horde_regulate::circuit::demand::{parse_script, Demand, DemandModel};
use horde_regulate::circuit::{asked_kbps, circuit_cap_bps, Client, Server};
use horde_regulate::{Limits, ThrottleKind};
use horde_scenario::circuits::{self, ClientEnd, Row, ServerEnd};
use horde_wire::control::{Hello, Status};

use crate::{bad_input, Outcome};

pub mod sim;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum Cmd {
    /// The server end: waits for clients (address validation first), sends each one avatar's demand under the rate its client asks for.
    Serve(ServeArgs),
    /// The client end: validates its address with the server, then runs a throttle controller and reports what arrives.
    Join(JoinArgs),
    /// A throttle controller in a closed loop in virtual time (no sockets): steady state and convergence over a loss schedule in seconds.
    Sim(sim::SimArgs),
}

/// The OpenSim throttle's period and floor (the viewer's by default; the Mongoose paper's are 1 s and 50 kbit/s).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TuneArgs {
    /// How often the opensim throttle acts on the loss it measured, seconds (default: the viewer's 5; the Mongoose paper's 1)
    #[arg(long, value_name = "SECS")]
    pub throttle_period: Option<f64>,
    /// The lowest rate the opensim throttle falls to, kbit/s (default: the viewer's max(0.2 × setting, 50); the Mongoose paper's 50)
    #[arg(long, value_name = "KBPS")]
    pub floor: Option<f64>,
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on, IP:PORT (nothing listens on all interfaces unless you give 0.0.0.0)
    #[arg(long, value_name = "IP:PORT")]
    pub listen: SocketAddr,
    /// per-channel (OpenSim: one token bucket per channel) or dual (Mongoose: a circuit bucket over the channel buckets)
    #[arg(long, default_value = "dual", value_parser = ["per-channel", "dual"])]
    pub regulator: String,
    /// The avatar's life on each circuit: comma-separated T:EVENT (seconds; login:STATE, teleport:STATE, or standing/walking/flying)
    #[arg(long, default_value = "0:login:walking")]
    pub script: String,
    /// Channels kept backlogged on top of the demand (a saturating download), e.g. texture
    #[arg(long, value_name = "CHANNELS", value_delimiter = ',')]
    pub backlog: Vec<String>,
    /// Packet size of the backlog, bytes (default: the channel's from the service's [circuit] table)
    #[arg(long, value_name = "BYTES")]
    pub backlog_packet: Option<u32>,
    /// Service file with the [circuit] demand table (default: the built-in opensim)
    #[arg(long, default_value = "opensim")]
    pub service: String,
    /// The rate before the client's first throttle packet, kbit/s
    #[arg(long, default_value_t = 100.0)]
    pub start_kbps: f64,
    /// Stop after this long
    #[arg(short = 't', long, value_parser = super::duration, default_value = "60s")]
    pub duration: Duration,
    /// Circuits at most
    #[arg(long, default_value_t = 16)]
    pub max_circuits: usize,
    /// The most any circuit may get, kbit/s: a client's throttle packets never raise its circuit above this or above what its join asked for
    #[arg(long, value_name = "KBPS", default_value_t = 10_000.0)]
    pub max_kbps: f64,
    /// Per-second figures of every circuit as CSV
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The summary as JSON (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Seed of the demand's packet arrivals
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub key: super::KeyArgs,
}

#[derive(clap::Args, Debug)]
pub struct JoinArgs {
    /// The server end, IP:PORT
    #[arg(long, value_name = "IP:PORT")]
    pub server: SocketAddr,
    /// fixed:KBPS, opensim[:SETTING] (the viewer's setting in kbit/s, default 500), mongoose (with TCP's timeouts), mongoose-paper (without) or tfrc
    #[arg(long, default_value = "mongoose")]
    pub throttle: String,
    #[command(flatten)]
    pub tune: TuneArgs,
    /// Address to send from
    #[arg(long, value_name = "IP")]
    pub bind: Option<std::net::IpAddr>,
    /// Stop after this long
    #[arg(short = 't', long, value_parser = super::duration, default_value = "60s")]
    pub duration: Duration,
    /// Per-second figures as CSV
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The summary as JSON (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub key: super::KeyArgs,
}

pub fn run(a: Args, stop: &AtomicBool) -> Outcome {
    match a.cmd {
        Cmd::Serve(s) => serve(s, stop),
        Cmd::Join(j) => join(j, stop),
        Cmd::Sim(s) => sim::run(s),
    }
}

/// `fixed:KBPS`, `opensim[:SETTING]`, `mongoose`, `mongoose-paper`, `tfrc`.
pub fn parse_throttle(s: &str) -> Result<ThrottleKind, String> {
    ThrottleKind::parse(s).map_err(|e| format!("--throttle {e}"))
}

fn channels(list: &[String]) -> Result<Vec<Channel>, String> {
    list.iter()
        .map(|n| {
            Channel::ALL
                .iter()
                .copied()
                .find(|c| c.name() == n.trim())
                .ok_or_else(|| format!("--backlog: `{n}` is not a channel (resend, land, wind, cloud, task, texture, asset)"))
        })
        .collect()
}

/// Per-second rows as CSV, written (and flushed) as each second closes; the first write error
/// is kept for [`Csv::done`].
struct Csv(Option<std::io::BufWriter<std::fs::File>>, Option<std::io::Error>);

impl Csv {
    fn open(p: &Option<PathBuf>) -> anyhow::Result<Csv> {
        Ok(Csv(
            match p {
                Some(p) => {
                    let mut f = std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?);
                    f.write_all(circuits::CSV_HEADER.as_bytes())?;
                    Some(f)
                }
                None => None,
            },
            None,
        ))
    }

    fn row(&mut self, r: &Row) {
        if let (Some(f), None) = (&mut self.0, &self.1) {
            self.1 = f.write_all(circuits::csv_line(r).as_bytes()).and_then(|_| f.flush()).err();
        }
    }

    fn done(self) -> anyhow::Result<()> {
        self.1.map_or(Ok(()), |e| Err(anyhow::anyhow!("writing the CSV: {e}")))
    }
}

fn serve(a: ServeArgs, stop: &AtomicBool) -> Outcome {
    let mode = if a.regulator == "dual" { Mode::Dual } else { Mode::PerChannel };
    let service = horde_model::service::Service::load(&a.service).map_err(|e| bad_input(anyhow::anyhow!("--service {}: {e}", a.service)))?;
    let model = DemandModel::from_table(&service.circuit).map_err(|e| bad_input(anyhow::anyhow!("service {}: {e}", a.service)))?;
    let script = parse_script(&a.script).map_err(|e| bad_input(anyhow::anyhow!("--script: {e}")))?;
    let backlog = channels(&a.backlog).map_err(|e| bad_input(anyhow::anyhow!("{e}")))?;
    if let Some(b) = a.backlog_packet {
        let (lo, hi) = (horde_regulate::circuit::wire::DATA_MIN as u32, horde_regulate::circuit::wire::DATA_MAX as u32);
        if !(lo..=hi).contains(&b) {
            return Err(bad_input(anyhow::anyhow!("--backlog-packet must be {lo}..={hi} bytes (got {b})")));
        }
    }
    if !(1.0..=1e7).contains(&a.start_kbps) {
        return Err(bad_input(anyhow::anyhow!("--start-kbps must be 1..=10000000")));
    }
    if !(1.0..=1e7).contains(&a.max_kbps) {
        return Err(bad_input(anyhow::anyhow!("--max-kbps must be 1..=10000000 (got {})", a.max_kbps)));
    }
    let key = a.key.key()?;
    let sock = horde_engine::shell::udp(a.listen).map_err(anyhow::Error::from)?;
    let gate = Gate::new(
        GateConfig {
            max_flows: a.max_circuits.max(1),
            max_flows_per_ip: a.max_circuits.max(1),
            ..GateConfig::receiver(key).about(horde_scenario::circuits::circuit_server())
        },
        horde_engine::random_secret().context("drawing the cookie secret")?,
    );
    say!("horde circuit: serving on {} ({} regulator), Ctrl-C stops", sock.local_addr().context("the bound address")?, mode.name());
    let t0 = System.real_ns();
    let mut host = Serving { a: &a, mode, model, script, backlog, csv: Csv::open(&a.csv)?, joined: 0, closed: Vec::new() };
    horde_engine::shell::listen(&sock, Endpoint::new(gate), &mut host, t0, Until { stop, end_ns: t0 + a.duration.as_nanos() as u64 })
        .context("the server side")?;
    let closed = host.closed;
    host.csv.done()?;
    let summary: Vec<serde_json::Value> =
        closed.iter().map(|(addr, rows, st)| serde_json::json!({"client": addr, "seconds": rows, "stats": st, "regulator": mode.name()})).collect();
    for (addr, rows, st) in &closed {
        let n = rows.len().max(1) as f64;
        say!(
            "horde circuit: {addr}: {} s, mean allowance {:.1} kbit/s, sent {:.1} kbit/s, task delay mean {:.2} ms; {} resent, {} throttle packets",
            rows.len(),
            rows.iter().map(|r| r.rate_kbps).sum::<f64>() / n,
            rows.iter().map(|r| r.total_kbps).sum::<f64>() / n,
            rows.iter().map(|r| r.task_delay_ms).sum::<f64>() / n,
            st.resent,
            st.throttles
        );
    }
    if let Some(p) = &a.json {
        super::write_out(p, &serde_json::to_string_pretty(&serde_json::json!({"circuits": summary})).expect("serialises"))?;
    }
    Ok(if stop.load(Ordering::Relaxed) { 130 } else { 0 })
}

/// `horde circuit serve`'s admission: any client of the run (up to --max-circuits), each with
/// the avatar's demand under the rate it asks for.
struct Serving<'a> {
    a: &'a ServeArgs,
    mode: Mode,
    model: DemandModel,
    script: Vec<(u64, horde_regulate::circuit::demand::Event)>,
    backlog: Vec<Channel>,
    csv: Csv,
    joined: u64,
    closed: Vec<(String, Vec<Row>, horde_regulate::circuit::ServerStats)>,
}

impl Listening<ServerEnd> for Serving<'_> {
    fn admit(&mut self, now: u64, from: SocketAddr, h: &Hello) -> Result<ServerEnd, Status> {
        let mut d = Demand::new(self.model.clone(), self.script.clone(), self.a.seed.wrapping_add(self.joined));
        self.joined += 1;
        d.backlog = self.backlog.clone();
        d.backlog_packet = self.a.backlog_packet;
        let cap = circuit_cap_bps(h.header.seq, self.a.max_kbps * 1000.0);
        say!("horde circuit: client {from} joined (at most {:.0} kbit/s)", cap / 1000.0);
        Ok(ServerEnd::new(Server::new(self.mode, self.a.start_kbps * 1000.0, BURST_NS, d, now).with_cap(cap, now), from.to_string()))
    }

    fn ended(&mut self, e: Ended<ServerEnd>) {
        match e.why {
            EndReason::Left => say!("horde circuit: client {} left", e.addr),
            EndReason::Silent => say!("horde circuit: client {} stopped answering consent probes: circuit closed", e.addr),
            EndReason::RunEnded => {}
        }
        self.closed.push((e.addr.to_string(), e.peer.rows, e.peer.srv.stats));
    }

    fn second(&mut self, _addr: SocketAddr, peer: &ServerEnd) {
        self.csv.row(peer.rows.last().expect("a second closed"));
    }
}

fn join(a: JoinArgs, stop: &AtomicBool) -> Outcome {
    let kind = parse_throttle(&a.throttle)
        .and_then(|k| k.tuned(a.tune.tuning()).map_err(|e| format!("--throttle-period/--floor: {e}")))
        .map_err(|e| bad_input(anyhow::anyhow!("{e}")))?;
    let key = a.key.key()?;
    let socks = horde_engine::shell::client_sockets(a.server, a.bind, 1, &[]).context("the client's socket")?;
    let t0 = System.real_ns();
    // The join asks for what the throttle may ever ask: the server caps the circuit there.
    let mut members = [Joiner::new(key, 0, asked_kbps(kind.max_bps(Limits::default())), t0)];
    // The duration counts from the join (greeting gives up by itself after 5 s).
    let mut host = JoinHost { kind, server: a.server, csv: Csv::open(&a.csv)?, duration_ns: a.duration.as_nanos() as u64, end_ns: None };
    let progress = horde_engine::sender::Progress::default();
    // Our own bound whatever the server says: a server that only ever answers with challenges
    // keeps a greeter asking, so the whole join ends at most 10 s past the duration.
    let end_ns = t0 + a.duration.as_nanos() as u64 + 10_000_000_000;
    horde_engine::shell::population(&mut members, &socks, &mut host, &progress, t0, Until { stop, end_ns }).context("the client side")?;
    host.csv.done()?;
    let [m] = members;
    let c = match m.into_phase() {
        Joining::Up(c) => c,
        Joining::Failed(JoinError::Refused(s)) => {
            return Err(anyhow::anyhow!("the server refused the circuit ({s:?}): it is full or the run key differs").into())
        }
        Joining::Failed(JoinError::NoAnswer) => {
            return Err(anyhow::anyhow!("no answer from {} within 5 s: is `horde circuit serve` listening there (with the same --key-file)?", a.server).into())
        }
        _ if stop.load(Ordering::Relaxed) => return Ok(130),
        _ => {
            return Err(anyhow::anyhow!(
                "{} did not admit the circuit within {} s (it kept answering without admitting it)",
                a.server,
                a.duration.as_secs() + 10
            )
            .into())
        }
    };
    let name = c.name.clone();
    let (rows, st) = (&c.rows, &c.cli.stats);
    let n = rows.len().max(1) as f64;
    say!(
        "horde circuit: {name}: {} s, mean request {:.1} kbit/s, received {:.1} kbit/s, RTT {:.2} ms; {} packets ({} resent), {} throttle packets",
        rows.len(),
        rows.iter().map(|r| r.rate_kbps).sum::<f64>() / n,
        rows.iter().map(|r| r.total_kbps).sum::<f64>() / n,
        st.rtt_ms.unwrap_or(0.0),
        st.packets,
        st.resent_received,
        st.throttles_sent
    );
    if let Some(p) = &a.json {
        super::write_out(
            p,
            &serde_json::to_string_pretty(&serde_json::json!({"throttle": name, "server": a.server.to_string(), "seconds": rows, "stats": st}))
                .expect("serialises"),
        )?;
    }
    Ok(if stop.load(Ordering::Relaxed) { 130 } else { 0 })
}

/// `horde circuit join`'s one circuit: its throttle starts at its admission.
struct JoinHost {
    kind: ThrottleKind,
    server: SocketAddr,
    csv: Csv,
    duration_ns: u64,
    end_ns: Option<u64>,
}

impl Crowd<Joiner<ClientEnd>> for JoinHost {
    fn turn(&mut self, _i: usize, now: u64, m: &mut Joiner<ClientEnd>) {
        if matches!(m.phase(), Joining::Admitted) {
            let cli = Client::new(self.kind.build(Limits::default(), now), now);
            let name = cli.throttle().name();
            say!("horde circuit: joined {} with the {name} throttle", self.server);
            self.end_ns = Some(now + self.duration_ns);
            m.up(now, ClientEnd::new(cli, name.into()));
        }
    }

    fn deadline(&self) -> Option<u64> {
        self.end_ns
    }

    fn second(&mut self, _i: usize, m: &Joiner<ClientEnd>) {
        if let Joining::Up(peer) = m.phase() {
            self.csv.row(peer.rows.last().expect("a second closed"));
        }
    }
}
