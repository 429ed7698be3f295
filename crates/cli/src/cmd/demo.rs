use horde_sys::clock::Clock as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use horde_engine::{receiver, sender, RecvOptions, SendOptions};
use horde_model::flow::FlowFile;
use horde_stats::{analyse, export, Options};

use crate::{bad_input, Outcome};

/// The embedded default scenario: game, voice and interactive flows on loopback, both UDP and
/// TCP, one-way delay and round trip. Ports are filled in at run time.
const DEMO_FLOWS: &str = r#"
[defaults]
duration = "DURATION"
start_delay = "uniform(0, 50)"

[[flow]]
name = "quake3"
preset = "quake3"
dst = "UDP_A"
repeat = 8

[[flow]]
name = "counter-strike"
preset = "csa"
dst = "UDP_A"
repeat = 8

[[flow]]
name = "voice"
preset = "voip(codec=g729.2, rtp=rtp, vad=on)"
dst = "UDP_B"
meter = "rtt"
dscp = 46
repeat = 4

[[flow]]
name = "telnet"
preset = "telnet"
dst = "TCP"
repeat = 4

[[flow]]
name = "mmo-client"
transport = "tcp"
dst = "TCP"
idt = "mix(0.9586*weibull(268.37, 0.58), 0.0414*constant(500))"
size = "discrete(6:4.57, 10:8.00, 14:16.28, 19:4.04, 22:8.28, 35:55.70, 51:3.13)"
repeat = 50
"#;

/// The embedded default scenario of `horde demo`: a WoW evening on loopback.
pub const DEMO_SCENARIO: &str = r#"# horde demo: World of Warcraft players on loopback, both directions
name = "demo"
service = "wow"
players = 300
duration = "30s"
seed = 1
start_hour = 20
server = "127.0.0.1:0"
"#;

/// Runs the embedded default scenario on loopback (no root): 300 WoW players for 30 s, both
/// directions, then a summary and a report. `--engine` runs the packet-engine demo instead.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// How long the traffic runs (default 30s; 10s with --engine)
    #[arg(short = 't', long, value_parser = super::duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Players in the WoW scenario
    #[arg(short = 'n', long, default_value_t = 300)]
    pub players: u32,
    /// Run the packet-engine demo (game, voice and telnet flows, one-way and round trip)
    #[arg(long)]
    pub engine: bool,
    #[command(flatten)]
    pub progress: super::run::ProgressArgs,
    /// Directory for logs and the report (default: horde-out/demo-<unix time>)
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed of the scenario
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    let duration = args.duration.unwrap_or(Duration::from_secs(if args.engine { 10 } else { 30 }));
    if duration.is_zero() || duration > Duration::from_secs(3600) {
        return Err(bad_input(anyhow::anyhow!("--duration must be between 1ms and 1h")));
    }
    let out = args.out.clone().unwrap_or_else(|| super::default_out("demo"));
    super::report_dir(&out)?;
    if !args.engine {
        let mut sc = horde_model::scenario::Scenario::parse(DEMO_SCENARIO, "embedded demo scenario", std::path::Path::new(".")).map_err(bad_input)?;
        let o = horde_scenario::Overrides { players: Some(args.players), online: None, duration_ns: Some(duration.as_nanos() as u64), seed: Some(args.seed) };
        horde_scenario::apply_overrides(&mut sc, &o)?;
        let progress = super::run::Progress::of(&args.progress)?;
        return super::run::execute(&sc, None, &out, progress, stop, None);
    }
    std::fs::create_dir_all(&out).with_context(|| format!("creating report directory {}", out.display()))?;
    let lo = |p| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p);
    let ropts = RecvOptions { udp: vec![lo(0), lo(0)], tcp: vec![lo(0)], log: Some(out.join("recv.hlog")), ..Default::default() };
    let rx_stop = AtomicBool::new(false);
    let (tx_addr, rx_addr) = std::sync::mpsc::channel();
    say!("horde demo: {} of quake3, counter-strike, voice (RTT), telnet and 50 MMO clients on loopback", super::decode_fmt_duration(duration));
    let (recv_res, send_res) = std::thread::scope(|s| {
        let rx_stop = &rx_stop;
        let ropts = &ropts;
        let h = s.spawn(move || receiver::run(ropts, rx_stop, |b| drop(tx_addr.send(b.to_vec()))));
        let bound: Vec<SocketAddr> = match rx_addr.recv() {
            Ok(b) => b,
            Err(_) => return (h.join().expect("receiver thread"), Err(anyhow::anyhow!("receiver did not start"))),
        };
        let text = DEMO_FLOWS
            .replace("DURATION", &format!("{}ms", duration.as_millis()))
            .replace("UDP_A", &bound[0].to_string())
            .replace("UDP_B", &bound[1].to_string())
            .replace("TCP", &bound[2].to_string());
        let send = (|| {
            let flows = FlowFile::parse_and_resolve(&text, args.seed).map_err(|e| anyhow::anyhow!("embedded scenario: {e}"))?;
            let sopts = SendOptions { log: Some(out.join("send.hlog")), ..Default::default() };
            Ok(sender::run(flows, &sopts, stop)?)
        })();
        // the last datagrams reach the receiver before it stops
        horde_sys::clock::System.sleep(Duration::from_millis(300));
        rx_stop.store(true, Ordering::Relaxed);
        (h.join().expect("receiver thread"), send)
    });
    let mut rreport = recv_res.context("receiving")?;
    // The demo itself stops the receiver; only a user's Ctrl-C counts as an interruption.
    rreport.interrupted = stop.load(Ordering::Relaxed);
    let sreport = send_res.context("sending")?;
    super::send::print_report(&sreport);
    super::recv::print_report(&rreport);
    let logs = super::decode::load_logs(&[out.join("send.hlog"), out.join("recv.hlog")])?;
    let a = analyse(&logs, Options { window_ns: Some(1_000_000_000), anchor_ns: None });
    crate::output::out(&format!("\n{}", export::table(&a, 12)))?;
    std::fs::write(out.join("summary.json"), export::json(&a)).context("writing summary.json")?;
    std::fs::write(out.join("flows.csv"), export::flows_csv(&a)).context("writing flows.csv")?;
    std::fs::write(out.join("windows.csv"), export::windows_csv(&a.windows)).context("writing windows.csv")?;
    std::fs::write(out.join("index.html"), horde_stats::html::page("Horde demo", &a)).context("writing index.html")?;
    outln!("\nreport: {}/index.html (also summary.json, flows.csv, windows.csv; logs send.hlog, recv.hlog)", out.display())?;
    Ok(if sreport.interrupted { 130 } else { 0 })
}
