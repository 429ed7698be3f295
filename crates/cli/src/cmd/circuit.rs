//! `horde circuit`: one regulated virtual-world circuit over real UDP — `serve` is the server
//! end (an avatar's demand per channel, regulated at the rate its client asks for), `join` the
//! client end (a throttle controller). The protocol lives in `horde-regulate` (I/O-free); this
//! is its socket shell: the engine's address validation first (hello, challenge, cookie), then
//! circuit packets, a line of figures per second (and CSV), a JSON summary.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use horde_engine::clock::real_ns;
use horde_proto::gate::{Decision, Gate, GateConfig};
use horde_proto::greeter::{GreetState, Greeter};
use horde_regulate::bucket::{Mode, BURST_NS};
use horde_regulate::channels::Channel;
use horde_regulate::circuit::demand::{parse_script, Demand, DemandModel};
use horde_regulate::circuit::{asked_kbps, circuit_cap_bps, Client, Server};
use horde_regulate::{Limits, ThrottleKind};
use horde_scenario::circuits::{self, ClientEnd, Row, ServerEnd};

use crate::{bad_input, Outcome};

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

/// A datagram from `s`, waiting for one until `until_ns` at the latest (see
/// [`horde_scenario::circuits::wait_readable`]).
fn recv(s: &UdpSocket, buf: &mut [u8], until_ns: u64) -> Option<(usize, SocketAddr)> {
    if let Ok(r) = s.recv_from(buf) {
        return Some(r);
    }
    use std::os::fd::AsRawFd as _;
    circuits::wait_readable(&mut [libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 }], until_ns);
    s.recv_from(buf).ok()
}

/// Answers the server's consent probe (circuit flow 0); true if `bytes` was one.
fn answer_consent(sock: &UdpSocket, server: SocketAddr, bytes: &[u8]) -> bool {
    if !horde_proto::consent::is_consent(bytes) {
        return false;
    }
    if let Some(r) = horde_proto::consent::answer(bytes, 0) {
        let _ = sock.send_to(&r, server);
    }
    true
}

struct Csv(Option<std::io::BufWriter<std::fs::File>>);

impl Csv {
    fn open(p: &Option<PathBuf>) -> anyhow::Result<Csv> {
        Ok(Csv(match p {
            Some(p) => {
                let mut f = std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?);
                f.write_all(circuits::CSV_HEADER.as_bytes())?;
                Some(f)
            }
            None => None,
        }))
    }

    fn row(&mut self, r: &Row) -> anyhow::Result<()> {
        if let Some(f) = &mut self.0 {
            f.write_all(circuits::csv_line(r).as_bytes())?;
            f.flush()?;
        }
        Ok(())
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
    let sock = circuits::udp(a.listen)?;
    let mut gate = Gate::new(
        GateConfig { max_flows: a.max_circuits.max(1), max_flows_per_ip: a.max_circuits.max(1), ..GateConfig::receiver(key) },
        horde_engine::random_secret().context("drawing the cookie secret")?,
    );
    let mut csv = Csv::open(&a.csv)?;
    say!("horde circuit: serving on {} ({} regulator), Ctrl-C stops", sock.local_addr().context("the bound address")?, mode.name());
    let t0 = real_ns();
    let end = t0 + a.duration.as_nanos() as u64;
    let mut ends: circuits::Circuits = HashMap::new();
    let mut closed: Vec<(String, Vec<Row>, horde_regulate::circuit::ServerStats)> = Vec::new();
    let (mut inbuf, mut out) = (vec![0u8; 2048], Vec::with_capacity(1600));
    let mut next_second = t0 + 1_000_000_000;
    let server_cap = a.max_kbps * 1000.0;
    while !stop.load(Ordering::Relaxed) && real_ns() < end {
        let wake = circuits::next_wake(&gate, &ends, real_ns(), next_second);
        if let Some((n, from)) = recv(&sock, &mut inbuf, wake) {
            let now = real_ns();
            let bytes = &inbuf[..n];
            if !circuits::route(&mut gate, &mut ends, now, from, bytes) {
                match gate.on_hello(now, from, bytes) {
                    Decision::Challenge(c) => {
                        let _ = sock.send_to(&c, from);
                    }
                    Decision::Again(ans) => {
                        let _ = sock.send_to(&ans, from);
                    }
                    Decision::Validated(h) => match gate.admit(now, from, &h, true) {
                        Ok(ans) => {
                            let _ = sock.send_to(&ans, from);
                            let mut d = Demand::new(model.clone(), script.clone(), a.seed.wrapping_add(ends.len() as u64));
                            d.backlog = backlog.clone();
                            d.backlog_packet = a.backlog_packet;
                            let cap = circuit_cap_bps(h.header.seq, server_cap);
                            say!("horde circuit: client {from} joined (at most {:.0} kbit/s)", cap / 1000.0);
                            let srv = Server::new(mode, a.start_kbps * 1000.0, BURST_NS, d, now).with_cap(cap, now);
                            ends.insert(from, (h.header.flow, ServerEnd::new(srv, from.to_string())));
                        }
                        Err(ans) => {
                            let _ = sock.send_to(&ans, from);
                        }
                    },
                    Decision::Drop(_) => {}
                }
            }
        }
        let now = real_ns();
        for (addr, _, c, left) in circuits::pump(&sock, &mut gate, &mut ends, now, &mut out) {
            say!("horde circuit: client {addr} {}", if left { "left" } else { "stopped answering consent probes: circuit closed" });
            closed.push((addr.to_string(), c.rows, c.srv.stats.clone()));
        }
        if now >= next_second {
            let t_s = (next_second - t0) / 1_000_000_000;
            next_second += 1_000_000_000;
            for (_, c) in ends.values_mut() {
                csv.row(c.second(t_s))?;
            }
        }
    }
    for (addr, (_, c)) in ends {
        closed.push((addr.to_string(), c.rows, c.srv.stats.clone()));
    }
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

fn join(a: JoinArgs, stop: &AtomicBool) -> Outcome {
    let kind = parse_throttle(&a.throttle).map_err(|e| bad_input(anyhow::anyhow!("{e}")))?;
    let key = a.key.key()?;
    let bind =
        SocketAddr::new(a.bind.unwrap_or(if a.server.is_ipv4() { std::net::Ipv4Addr::UNSPECIFIED.into() } else { std::net::Ipv6Addr::UNSPECIFIED.into() }), 0);
    let sock = circuits::udp(bind)?;
    let (mut inbuf, mut out) = (vec![0u8; 2048], Vec::with_capacity(1600));
    // Address validation: the server sends nothing before it.
    // The join asks for what the throttle may ever ask: the server caps the circuit there.
    let mut g = Greeter::new(key, 0, 0, asked_kbps(kind.max_bps(Limits::default())), Some(real_ns()));
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(130);
        }
        let now = real_ns();
        if let Some(h) = g.poll_transmit(now) {
            sock.send_to(&h, a.server).with_context(|| format!("sending to {}", a.server))?;
        }
        match g.state() {
            GreetState::Accepted => break,
            GreetState::Refused(s) => return Err(anyhow::anyhow!("the server refused the circuit ({s:?}): it is full or the run key differs").into()),
            GreetState::GaveUp => {
                return Err(
                    anyhow::anyhow!("no answer from {} within 5 s: is `horde circuit serve` listening there (with the same --key-file)?", a.server).into()
                )
            }
            _ => {}
        }
        if let Some((n, from)) = recv(&sock, &mut inbuf, g.next_ns().unwrap_or(now + 10_000_000)) {
            if from == a.server {
                g.on_datagram(&inbuf[..n]);
            }
        }
    }
    let t0 = real_ns();
    let end = t0 + a.duration.as_nanos() as u64;
    let cli = Client::new(kind.build(Limits::default(), t0), t0);
    let name = cli.throttle().name();
    let mut c = ClientEnd::new(cli, name.into());
    say!("horde circuit: joined {} with the {name} throttle", a.server);
    let mut csv = Csv::open(&a.csv)?;
    let mut next_second = t0 + 1_000_000_000;
    while !stop.load(Ordering::Relaxed) && real_ns() < end {
        let wake = c.cli.next_ns(real_ns()).min(next_second);
        if let Some((n, from)) = recv(&sock, &mut inbuf, wake) {
            if from == a.server && !answer_consent(&sock, a.server, &inbuf[..n]) {
                c.cli.on_datagram(real_ns(), &inbuf[..n]);
            }
        }
        let now = real_ns();
        while c.cli.poll_transmit(now, &mut out) {
            let _ = sock.send_to(&out, a.server);
        }
        if now >= next_second {
            let t_s = (next_second - t0) / 1_000_000_000;
            next_second += 1_000_000_000;
            csv.row(c.second(t_s))?;
        }
    }
    Client::bye(&mut out);
    let _ = sock.send_to(&out, a.server);
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
