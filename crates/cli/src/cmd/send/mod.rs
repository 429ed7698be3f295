use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use horde_engine::{sender, SendOptions, SendReport};
use horde_model::flow::{FlowFile, Quantity, RawFlow};
use horde_model::units::fmt_ns;
use horde_model::Flow;

use crate::{bad_input, Outcome};

mod emu;

/// Flow flags (one flow), shared with the demo.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "One flow from flags (see `horde presets` for the distribution syntax)")]
pub struct FlowFlags {
    /// Receiver address, IP:PORT (e.g. 127.0.0.1:9000 or [::1]:9000)
    #[arg(short = 'a', long, value_name = "IP:PORT")]
    pub dst: Option<String>,
    /// Source address to bind, IP or IP:PORT
    #[arg(long, value_name = "IP[:PORT]")]
    pub src: Option<String>,
    /// udp, tcp or icmp (default udp, or the preset's). icmp sends echo requests (raw socket:
    /// root) to an IPv4 --dst (a port is ignored) while the target answers them
    #[arg(short = 'T', long)]
    pub transport: Option<String>,
    /// Inter-departure time distribution in milliseconds, e.g. 'exponential(10)'
    #[arg(long, value_name = "DIST")]
    pub idt: Option<String>,
    /// Constant rate in packets per second (instead of --idt), e.g. 1000 or 10k
    #[arg(short = 'C', long, value_name = "PPS")]
    pub rate: Option<String>,
    /// Payload (UDP) or APDU (TCP) size distribution in bytes, e.g. 64 or 'normal(64, 3)'
    #[arg(short = 'c', long, value_name = "DIST")]
    pub size: Option<String>,
    /// Named model: voip, telnet, dns, quake3, csa, csi (`horde presets` lists them)
    #[arg(long)]
    pub preset: Option<String>,
    /// On-period length distribution in ms (bursty on/off source; needs --off)
    #[arg(long, value_name = "DIST")]
    pub on: Option<String>,
    /// Off-period length distribution in ms (needs --on)
    #[arg(long, value_name = "DIST")]
    pub off: Option<String>,
    /// DSCP code point 0..63 (sets the TOS / traffic class byte to DSCP << 2)
    #[arg(long)]
    pub dscp: Option<u8>,
    /// Raw TOS / traffic class byte 0..255 (instead of --dscp)
    #[arg(long)]
    pub tos: Option<u8>,
    /// IP TTL / hop limit 1..255
    #[arg(long)]
    pub ttl: Option<u8>,
    /// Let Nagle's algorithm batch small TCP writes (TCP_NODELAY is on by default)
    #[arg(long)]
    pub nagle: bool,
    /// Socket priority (SO_PRIORITY, as D-ITG's priority option): the band a priority queueing
    /// discipline puts the flow's packets in; 0..6, 7..255 as root
    #[arg(long, value_name = "N")]
    pub priority: Option<u32>,
    /// TCP: acknowledge what arrives at once (TCP_QUICKACK, re-armed after every read) instead
    /// of delaying ACKs
    #[arg(long)]
    pub quickack: bool,
    /// Stop after this long, e.g. 3s, 500ms, 2m (default 10s if no other stop is given)
    #[arg(short = 't', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Stop after this many packets/APDUs, e.g. 1000 or 10k
    #[arg(short = 'z', long, value_name = "N")]
    pub packets: Option<String>,
    /// Stop after this many payload bytes, e.g. 1M
    #[arg(short = 'k', long, value_name = "N")]
    pub bytes: Option<String>,
    /// Delay before the first packet, a distribution in ms drawn once per flow
    #[arg(long, value_name = "DIST")]
    pub start_delay: Option<String>,
    /// owd: receiver logs one-way delay; rtt: receiver echoes, sender logs round-trip time
    #[arg(long, value_name = "owd|rtt")]
    pub meter: Option<String>,
    /// Number of identical flows to run (each with its own id and seed); -P/--parallel as in iperf3
    #[arg(short = 'P', long, visible_alias = "parallel", value_name = "N")]
    pub count: Option<u64>,
    /// As fast as the path allows (iperf3's default): no --rate/--idt; --size defaults to 1472 B (UDP) or 65535 B APDUs (TCP)
    #[arg(long)]
    pub bulk: bool,
    /// Bulk from the receiver back to this host (iperf3 -R); this host logs what arrives. Implies --bulk
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// With --emu: the emulated host (or group of hosts, round-robin over -P copies) that sends the flow
    #[arg(long, value_name = "HOST")]
    pub node: Option<String>,
}

/// Sends traffic. One flow from flags, or many from a TOML flow file (see examples/flows.toml).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub flow: FlowFlags,
    /// TOML flow file with [defaults] and [[flow]] tables; excludes the one-flow flags
    #[arg(short = 'F', long, value_name = "FILE")]
    pub flows: Option<PathBuf>,
    /// A D-ITG multi-flow script as it is: one line of ITGSend options per flow (-a, -rp, -sp,
    /// -T, -C/-c and the other distributions, -t, -z, -k, -d, -s, -m, -b, -f, -D, -B, presets
    /// such as Quake3 or VoIP -x …); options Horde does not take are refused by name
    #[arg(long, value_name = "FILE", conflicts_with = "flows")]
    pub ditg_script: Option<PathBuf>,
    /// Base seed; flows without their own seed derive theirs from it and their id
    #[arg(long, default_value_t = horde_model::flow::DEFAULT_SEED)]
    pub seed: u64,
    /// First flow id (give several senders to one receiver distinct ranges)
    #[arg(long, default_value_t = 0)]
    pub id_base: u32,
    /// Per-packet binary log of departures (and echoes in rtt mode)
    #[arg(short = 'l', long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Worker threads driving the flows (no thread per flow)
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Busy-wait window before each departure, microseconds (trades CPU for precision)
    #[arg(long, default_value_t = horde_engine::clock::DEFAULT_SPIN_NS / 1000, value_name = "US")]
    pub spin_us: u64,
    /// UDP departures of a flow due together as GSO super-datagrams: `auto` for bulk flows only (a capture on this host then shows paced flows' datagrams as they are), `on` for every flow, `off` for none
    #[arg(long, value_enum, default_value_t = GsoArg::Auto)]
    pub gso: GsoArg,
    /// How long to measure the host's floor before the run: a pacer that only busy-waits for
    /// its departure times at the run's rate (what this host allows anyone); 0 skips it
    #[arg(long, default_value = "200ms", value_parser = super::duration, value_name = "DURATION")]
    pub floor: Duration,
    /// How long set-up may take: TCP connects, UDP address validation, an ICMP target's first echo reply
    #[arg(long, default_value = "10s", value_parser = super::duration, value_name = "DURATION")]
    pub connect_timeout: Duration,
    /// After the last departure, wait this long for echoes and TCP buffers to drain
    #[arg(long, default_value = "500ms", value_parser = super::duration, value_name = "DURATION")]
    pub linger: Duration,
    /// Write the send report as JSON to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub key: super::KeyArgs,
    #[command(flatten)]
    pub log_server: super::LogServerArgs,
    #[command(flatten)]
    pub commands: super::commands::CommandArgs,
    /// Send UDP without validating the address first: for a destination that is not `horde recv` (a capture, a device); a Horde receiver drops such flows
    #[arg(long)]
    pub no_greet: bool,
    #[command(flatten)]
    pub through: Through,
    /// Send from emulated hosts of experiment ID (`horde emu up` prints it), as root: each flow
    /// from its `node` (a host, or a group round-robin), to a receiver this command starts on
    /// the host its destination names (`dst = "server:9000"` or the host's address); both logs
    /// and the report go to --out DIR
    #[arg(long, value_name = "ID", conflicts_with_all = ["agents", "ditg_script", "no_greet"])]
    pub emu: Option<String>,
}

/// `horde send --flows FILE --agents …`: the flows are sent by agents, received by agents.
#[derive(clap::Args, Debug, Default)]
#[command(next_help_heading = "Through agents (`horde agent` on each machine; D-ITG's manager use, see docs/distributed.md)")]
pub struct Through {
    /// Agents that send the flows of --flows: comma-separated HOST:PORT[*WEIGHT], dns:NAME:PORT or @FILE. A flow whose `src` is an agent's address goes from it; the others are spread over the agents by weight
    #[arg(long, value_name = "LIST", requires = "flows")]
    pub agents: Option<String>,
    /// With --agents: the agent(s) that run the receivers, HOST:PORT[,…] (a flow goes to the one whose address is its destination; one of them may also be in --agents)
    #[arg(long, value_name = "LIST", requires = "agents")]
    pub recv_agent: Option<String>,
    /// With --agents: the controller's credentials directory with ca.pem, controller.pem and controller.key (from `horde agent keygen`)
    #[arg(long, value_name = "DIR", env = "HORDE_CREDENTIALS")]
    pub credentials: Option<PathBuf>,
    /// With --agents or --emu: report directory (default: horde-out/<flow file name>-<unix time>); the logs are collected into it
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --agents: an agent that hears nothing from the controller for this long stops its traffic, and a running agent silent this long is reported lost (1s..60s)
    #[arg(long, value_name = "DURATION", default_value = "3s")]
    pub deadman: String,
    /// With --agents: time-series window of the report (windows count from the run's start)
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub window: String,
    /// With --agents: what the agents send after the run — `logs` (every record: the controller merges them into send.hlog and recv.hlog and decodes them) or `summaries` (each agent summarises its own logs per flow: the same report with counts, loss, bursts, jitter and windows exact and percentiles within 1 ns + 1/1,024; no raw record travels)
    #[arg(long, value_enum, default_value_t = super::CollectArg::Logs, requires = "agents")]
    pub collect: super::CollectArg,
    /// With --collect summaries: collect the logs too, decode them, and compare every figure with the summaries' (summary.json: distributed.check; fails the run if one is beyond its bound)
    #[arg(long)]
    pub check_summaries: bool,
}

impl FlowFlags {
    /// Whether any one-flow flag was given (every flag is a field of the flow it makes).
    fn any(&self) -> bool {
        self.to_raw() != RawFlow::default()
    }

    pub fn to_raw(&self) -> RawFlow {
        let q = |o: &Option<String>| o.as_deref().map(Quantity::from);
        RawFlow {
            name: None,
            transport: self.transport.clone(),
            dst: self.dst.clone(),
            src: self.src.clone(),
            idt: q(&self.idt),
            rate: q(&self.rate),
            size: q(&self.size),
            preset: self.preset.clone(),
            on: q(&self.on),
            off: q(&self.off),
            seed: None,
            dscp: self.dscp,
            tos: self.tos,
            ttl: self.ttl,
            nodelay: self.nagle.then_some(false),
            priority: self.priority,
            quickack: self.quickack.then_some(true),
            duration: q(&self.duration),
            packets: q(&self.packets),
            bytes: q(&self.bytes),
            start_delay: q(&self.start_delay),
            meter: self.meter.clone(),
            repeat: self.count,
            tag: None,
            bulk: self.bulk.then_some(true),
            reverse: self.reverse.then_some(true),
            node: self.node.clone(),
        }
    }
}

/// Resolves the flows the user asked for, refusing bad input before anything is sent.
pub fn flows_from(args: &Args) -> Result<Vec<Flow>, crate::Failure> {
    if let Some(path) = &args.ditg_script {
        if args.flow.any() {
            return Err(bad_input(anyhow::anyhow!(
                "one-flow flags (--dst, --rate, ...) cannot be combined with --ditg-script; put them on the script's lines"
            )));
        }
        let mut flows = ditg_flows(path, args.seed)?;
        for f in &mut flows {
            f.id += args.id_base;
        }
        return Ok(flows);
    }
    let mut flows = match &args.flows {
        Some(path) => {
            if args.flow.any() {
                return Err(bad_input(anyhow::anyhow!(
                    "one-flow flags (--dst, --rate, ...) cannot be combined with --flows; put them in the file's [defaults] table"
                )));
            }
            let text = horde_model::files::read_text(path, horde_model::files::MAX_TOML, "flow files").context("reading the flow file").map_err(bad_input)?;
            FlowFile::parse_and_resolve(&text, args.seed).map_err(|e| bad_input(anyhow::anyhow!("{}: {e}", path.display())))?
        }
        None => {
            if args.flow.node.is_some() {
                return Err(bad_input(anyhow::anyhow!("--node places the flow on an emulated host: give --emu ID too (the id `horde emu up` printed)")));
            }
            if args.flow.dst.is_none() {
                return Err(bad_input(anyhow::anyhow!(
                    "no destination: give --dst IP:PORT (and --rate/--idt, --size or --preset), or a flow file with --flows FILE"
                )));
            }
            args.flow.to_raw().resolve_all(0, args.seed, "flow").map_err(|e| bad_input(anyhow::anyhow!("{e}")))?
        }
    };
    for f in &mut flows {
        f.id += args.id_base;
    }
    Ok(flows)
}

/// The longest floor measurement `--floor` may ask for (it spins a core the whole time).
const MAX_FLOOR: Duration = Duration::from_secs(10);

/// The host's part: steal during the run, the busy-wait floor, and whose the lateness is.
fn host_lines(h: &horde_engine::sender::HostReport, p99_us: f64) {
    if let (Some(mean), Some(max)) = (h.steal_mean, h.steal_max) {
        let late = if h.late_total > 0 {
            format!("; {} of the {} departures > 1 ms late fell in seconds with steal ≥ 1 %", h.late_in_steal, h.late_total)
        } else {
            String::new()
        };
        say!("  host: steal {:.1} % of CPU time (worst second {:.1} %) over {} s{late}", mean * 100.0, max * 100.0, h.steal_seconds.len());
    }
    if let (Some(f), Some(allowed), Some(ok)) = (&h.floor, h.allowed_p99_us, h.within_floor) {
        say!(
            "  host floor (a busy-wait pacer at {:.0} pkt/s before the run): p50 {:.2} us, p99 {:.2} us, max {:.1} us{} → p99 {:.1} us is {} (≤ {:.1} us = max(20 us, 1.5 × floor p99))",
            f.rate_pps,
            f.p50_us,
            f.p99_us,
            f.max_us,
            f.steal.map(|s| format!(", steal {:.1} %", s * 100.0)).unwrap_or_default(),
            p99_us,
            if ok { "within what the host allows" } else { "ABOVE what the host allows: Horde's own lateness" },
            allowed
        );
    }
}

/// A D-ITG script's flows, one per line, numbered from 0 in line order; what D-ITG would have
/// ignored on a line is said.
fn ditg_flows(path: &std::path::Path, seed: u64) -> Result<Vec<Flow>, crate::Failure> {
    let text = horde_model::files::read_text(path, horde_model::files::MAX_TOML, "D-ITG scripts").context("reading the D-ITG script").map_err(bad_input)?;
    let lines = horde_model::ditg::parse_script(&text).map_err(|e| bad_input(anyhow::anyhow!("{}: {e}", path.display())))?;
    let mut flows = Vec::with_capacity(lines.len());
    for l in &lines {
        for n in &l.notes {
            say!("horde send: note: {} line {}: {n}", path.display(), l.line);
        }
        let label = format!("line {}", l.line);
        let f = l.flow.resolve(flows.len() as u32, seed, &label).map_err(|e| bad_input(anyhow::anyhow!("{}: {e}", path.display())))?;
        flows.push(f);
    }
    Ok(flows)
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    let commands = args.commands.open()?;
    // a plain send's flows take changes while they run (`flow` commands)
    let steer = std::sync::Arc::new(horde_engine::sender::FlowSteer::default());
    let plain = args.through.agents.is_none() && args.emu.is_none();
    match plain {
        true => super::commands::stop_or_flows(commands, stop, &steer.clone(), &super::commands::say_reply, || send(args, stop, Some(steer))),
        false => super::commands::stop_only(commands, stop, "flow run", &super::commands::say_reply, || send(args, stop, None)),
    }
}

fn send(args: Args, stop: &AtomicBool, steer: Option<std::sync::Arc<horde_engine::sender::FlowSteer>>) -> Outcome {
    if args.through.agents.is_some() {
        return through_agents(&args, stop);
    }
    if let Some(id) = &args.emu {
        return emu::run(&args, id, stop);
    }
    if args.through.out.is_some() {
        return Err(bad_input(anyhow::anyhow!(
            "--out is for runs through agents (--agents) or on emulated hosts (--emu); a plain send writes --log and --json"
        )));
    }
    if args.floor > MAX_FLOOR {
        return Err(bad_input(anyhow::anyhow!(
            "--floor {:?} busy-waits a core that long before the run; at most {}s (0 skips it)",
            args.floor,
            MAX_FLOOR.as_secs()
        )));
    }
    if args.threads == 0 {
        return Err(bad_input(anyhow::anyhow!("--threads must be at least 1")));
    }
    let flows = flows_from(&args)?;
    let opts = SendOptions {
        threads: args.threads,
        spin_ns: args.spin_us * 1000,
        log: args.log.clone(),
        connect_timeout: args.connect_timeout,
        linger: args.linger,
        key: args.key.key()?,
        greet: !args.no_greet,
        end_messages: true,
        floor: args.floor,
        gso: args.gso.into(),
        steer,
        ..Default::default()
    };
    // Connected and authenticated both ways before the first packet.
    let opts = SendOptions { log_tap: args.log_server.tap(&opts.key, horde_wire::Role::Sender)?, ..opts };
    let keyed = !opts.key.is_open();
    let report = sender::run(flows, &opts, stop).context("sending")?;
    print_report(&report);
    if let Some(p) = &args.json {
        super::write_out(p, &serde_json::to_string_pretty(&report).expect("report serialises"))?;
    }
    if report.interrupted {
        return Ok(130);
    }
    // Flows that sent nothing and only met errors were refused: a failure, with the likely
    // reasons (a TCP receiver with a run key closes a connection whose hello lacks it).
    let refused: Vec<&horde_engine::sender::FlowSent> = report.flows.iter().filter(|f| f.packets == 0 && f.errors > 0).collect();
    if !refused.is_empty() {
        let names: Vec<String> = refused.iter().take(5).map(|f| format!("{} ({})", f.id, f.name)).collect();
        return Err(crate::Failure::from(anyhow::anyhow!(
            "{} of {} flow(s) sent nothing: the receiver refused them ({}{}). {}",
            refused.len(),
            report.flows.len(),
            names.join(", "),
            if refused.len() > 5 { ", …" } else { "" },
            if keyed {
                "Does the receiver use the same run key (--key-file)?"
            } else {
                "If the receiver was started with --key-file, give the sender the same key (--key-file); else is `horde recv` listening there?"
            }
        )));
    }
    Ok(0)
}

/// Through agents, `--log-server`: each agent streams its logs there as `NAME-AGENT-send` and
/// `-recv`, proving the key of `--key-file` (the log server's), which reaches the agents only
/// inside the control channel.
fn log_server(args: &Args) -> Result<Option<(std::net::SocketAddr, horde_proto::RunKey, String)>, crate::Failure> {
    let Some(a) = &args.log_server.log_server else { return Ok(None) };
    let addr = super::resolve(a).map_err(|e| bad_input(anyhow::anyhow!("--log-server {a}: {e}")))?;
    let key = args.key.key()?;
    if key.is_open() {
        return Err(bad_input(anyhow::anyhow!("--log-server needs the run key the log server was started with (--key-file, or HORDE_KEY_FILE)")));
    }
    let name = args.log_server.log_name.clone().unwrap_or_else(|| "agents".into());
    if name.len() > 32 || !horde_wire::logstream::name_ok(&name) {
        return Err(bad_input(anyhow::anyhow!("--log-name `{name}`: 1 to 32 of A-Z a-z 0-9 . _ - with --agents (each agent adds its name)")));
    }
    Ok(Some((addr, key, name)))
}

/// `horde send --flows F --agents … --recv-agent …`: this process is the controller.
fn through_agents(args: &Args, stop: &AtomicBool) -> Outcome {
    use horde_agent::controller::{parse_agents, Event};
    let t = &args.through;
    let refuse = |flag: &str, why: &str| Err(bad_input(anyhow::anyhow!("{flag} cannot be used with --agents: {why}")));
    if args.log.is_some() {
        return refuse("--log", "the agents' logs are collected into --out DIR (send.hlog, recv.hlog, and each agent's in agents/)");
    }
    if args.no_greet {
        return refuse("--no-greet", "flows through agents go only to receivers the agents run, which take a run's validated flows only");
    }
    if args.json.is_some() {
        return refuse("--json", "the report is --out DIR/summary.json");
    }
    if args.id_base != 0 {
        return refuse("--id-base", "flow ids are the flow file's");
    }
    let Some(path) = &args.flows else {
        return Err(bad_input(anyhow::anyhow!("--agents needs the flows in a file: --flows FILE")));
    };
    let text = horde_model::files::read_text(path, horde_model::files::MAX_TOML, "flow files").context("reading the flow file").map_err(bad_input)?;
    let fleet = super::Fleet::resolve(t.agents.as_deref().unwrap_or_default(), t.credentials.clone(), &t.deadman)?;
    let Some(recv) = t.recv_agent.as_deref() else {
        return Err(bad_input(anyhow::anyhow!("--agents needs --recv-agent HOST:PORT: the agent on the flows' destination host, which runs their receiver")));
    };
    let receivers: Vec<std::net::SocketAddr> = parse_agents(recv).map_err(bad_input)?.into_iter().map(|a| a.addr).collect();
    if t.check_summaries && t.collect != super::CollectArg::Summaries {
        return Err(bad_input(anyhow::anyhow!("--check-summaries checks the agents' summaries against their logs: give it with --collect summaries")));
    }
    let window_ns = horde_model::units::parse_duration_ns(&t.window).map_err(|e| bad_input(anyhow::anyhow!("--window: {e}")))?;
    if window_ns < 1_000_000 {
        return Err(bad_input(anyhow::anyhow!("--window must be at least 1ms (got {})", t.window)));
    }
    // Bad input is refused before any agent is contacted (the controller checks it again).
    let flows = FlowFile::parse_and_resolve(&text, args.seed).map_err(|e| bad_input(anyhow::anyhow!("{}: {e}", path.display())))?;
    horde_agent::flows::place(&flows, &fleet.agents, &receivers).map_err(|e| bad_input(anyhow::anyhow!("{}: {e:#}", path.display())))?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "flows".into());
    let out = t.out.clone().unwrap_or_else(|| super::default_out(&name));
    super::report_dir(&out)?;
    let events = |e: &Event| match e {
        Event::Note(m) => say!("horde send: {m}"),
        Event::Tick(s) => {
            if (s.t_s.round() as u64).is_multiple_of(5) && s.t_s >= 1.0 {
                let per: Vec<String> = s.agents.iter().map(|a| format!("{} {}", a.agent, a.sent_pkt_s)).collect();
                say!("t={:>5.0}s  sending {} pkt/s, {:.1} kbit/s | per agent pkt/s: {}", s.t_s, s.up_pkt_s, s.up_bit_s as f64 / 1e3, per.join(", "));
            }
        }
        Event::Reply(r) => say!("horde send: {}", r.line()),
        Event::Planned { .. } => {}
    };
    let opts = horde_agent::flows::FlowsOptions {
        senders: fleet.agents,
        receivers,
        credentials: fleet.credentials,
        out: &out,
        seed: args.seed,
        window_ns,
        deadman: fleet.deadman,
        events: &events,
        stop,
        log_server: log_server(args)?,
        collect: match t.collect {
            super::CollectArg::Logs => horde_agent::controller::Collect::Logs,
            super::CollectArg::Summaries => horde_agent::controller::Collect::Summaries,
        },
        check_summaries: t.check_summaries,
    };
    let r = match horde_agent::flows::run(&text, &opts) {
        Ok(r) => r,
        Err(e) if stop.load(std::sync::atomic::Ordering::Relaxed) => {
            say!("horde send: interrupted before the flows started ({e:#})");
            return Ok(130);
        }
        Err(e) => return Err(e.into()),
    };
    say_inline!("{}", horde_agent::flows::agents_table(&r.agents));
    let refused: u64 = r.received.iter().map(|x| x.refusals.bad_mac + x.refusals.unadmitted_datagrams + x.refusals.closed_before_hello).sum();
    if refused > 0 {
        say!("  receivers turned away {refused} hello(s)/datagram(s)/connection(s) not of this run");
    }
    let files = if r.checked.is_some() {
        "summary.json, flows.csv, windows.csv from the agents' summaries; the merged logs send.hlog, recv.hlog they were checked against"
    } else if r.summarised {
        "summary.json, flows.csv, windows.csv; from the agents' summaries in agents/: counts, loss and windows exact, percentiles within 1 ns + 1/1,024"
    } else {
        "summary.json, flows.csv, windows.csv; merged logs send.hlog, recv.hlog; agents' logs in agents/"
    };
    crate::output::out(&format!("\n{}\nreport: {}/index.html ({files})\n", horde_stats::export::table(&r.analysis, 20), out.display()))?;
    if let Some(c) = &r.checked {
        say!("summaries checked against the logs: {} figures, {} beyond their bounds", c.figures, c.beyond);
        if c.beyond > 0 {
            return Err(crate::Failure::from(anyhow::anyhow!(
                "{} figure(s) from the agents' summaries are beyond their bounds from the logs' (the first: {}); summary.json: distributed.check",
                c.beyond,
                c.differences.first().map_or("", String::as_str)
            )));
        }
    }
    if !r.lost.is_empty() {
        return Err(crate::Failure::from(anyhow::anyhow!(
            "agent(s) {} were lost: the report is partial (summary.json: distributed.partial)",
            r.lost.join(", ")
        )));
    }
    Ok(if r.interrupted { 130 } else { 0 })
}

pub fn print_report(r: &SendReport) {
    let rate = if r.duration_s > 0.0 { (r.packets.saturating_sub(r.flows.iter().filter(|f| f.packets > 0).count() as u64)) as f64 / r.duration_s } else { 0.0 };
    say!(
        "horde send: {} flow(s) on {} thread(s): {} packets, {} bytes in {:.3} s ({:.1} pkt/s){}",
        r.flows.len(),
        r.threads,
        r.packets,
        r.bytes,
        r.duration_s,
        rate,
        if r.interrupted { " — interrupted" } else { "" }
    );
    let bulk = r.flows.iter().any(|f| f.bulk);
    if bulk && r.duration_s > 0.0 {
        let bytes: u64 = r.flows.iter().filter(|f| f.bulk).map(|f| f.bytes).sum();
        say!("  bulk throughput: {:.1} Mbit/s of payload sent ({} B)", bytes as f64 * 8.0 / r.duration_s / 1e6, bytes);
    }
    let reverse: Vec<&horde_engine::sender::FlowSent> = r.flows.iter().filter(|f| f.reverse).collect();
    if !reverse.is_empty() {
        let bytes: u64 = reverse.iter().map(|f| f.received_bytes).sum();
        let packets: u64 = reverse.iter().map(|f| f.received).sum();
        let first = reverse.iter().filter(|f| f.received > 0).map(|f| f.received_first_ns).min().unwrap_or(0);
        let last = reverse.iter().map(|f| f.received_last_ns).max().unwrap_or(0);
        let secs = last.saturating_sub(first) as f64 / 1e9;
        if packets == 0 {
            say!("  warning: the receiver sent nothing back to the reverse flow(s): it refuses reverse flows (--no-reverse) or is not `horde recv`");
        }
        say!(
            "  reverse: received {packets} packets, {bytes} B from the receiver{}{}",
            if secs > 0.0 { format!(" ({:.1} Mbit/s over {secs:.3} s)", bytes as f64 * 8.0 / secs / 1e6) } else { String::new() },
            if r.log.is_some() { "; delays, loss and windows: horde decode on the log" } else { "" }
        );
    }
    let l = &r.lateness;
    if r.flows.iter().any(|f| !f.bulk && !f.reverse) {
        say!(
            "  lateness (actual − scheduled departure): p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us; {} packet(s) > 1 ms late",
            l.p50_us,
            l.p99_us,
            l.p999_us,
            l.max_us,
            l.over_1ms
        );
        host_lines(&r.host, l.p99_us);
    }
    if r.connect_s > 0.0 {
        say!("  set-up (TCP connects, UDP address validation): {:.3} s", r.connect_s);
    }
    let icmp_unsent: u64 = r.flows.iter().filter(|f| f.transport == "icmp").map(|f| f.unsent).sum();
    if icmp_unsent > 0 || r.refusals.consent_expired > 0 {
        say!(
            "  consent: {icmp_unsent} ICMP departure(s) not sent while their target did not answer echo requests ({} flow(s) ended after {} s of silence); ICMP traffic goes only while the target's replies come back",
            r.refusals.consent_expired,
            horde_proto::echo::EXPIRE_NS / 1_000_000_000
        );
    }
    if r.unsent > icmp_unsent {
        say!(
            "  warning: {} departure(s) were still due when their flow's duration ended and were not sent: the sender fell behind the schedule (lower the rate, add --threads, or give up precision with --spin-us 0)",
            r.unsent - icmp_unsent
        );
    }
    let clamped: u64 = r.flows.iter().map(|f| f.clamped).sum();
    if clamped > 0 {
        say!("  note: {clamped} packet(s) had their drawn size clamped to the transport's limits (UDP 20..65507 B, TCP 6..65535 B, ICMP 36..65507 B) or to the byte budget");
    }
    if r.errors > 0 {
        say!("  warning: {} send error(s): the receiver refused packets (is `horde recv` listening?)", r.errors);
    }
    receiver_line(r);
    if r.echoes > 0 {
        let rtts: Vec<(u64, horde_engine::sender::Rtt)> = r.flows.iter().filter_map(|f| f.rtt.map(|x| (f.echoes, x))).collect();
        let min = rtts.iter().map(|x| x.1.min_us).fold(f64::INFINITY, f64::min);
        let max = rtts.iter().map(|x| x.1.max_us).fold(0.0, f64::max);
        let mean = rtts.iter().map(|(n, x)| x.mean_us * *n as f64).sum::<f64>() / r.echoes as f64;
        let sent: u64 = r.flows.iter().filter(|f| f.rtt.is_some() || f.echoes > 0).map(|f| f.packets).sum();
        say!(
            "  round trip: {} echoes of {} sent; min {:.3} / mean {:.3} / max {:.3} ms{}",
            r.echoes,
            sent,
            min / 1e3,
            mean / 1e3,
            max / 1e3,
            if r.log.is_some() { " (percentiles, jitter, loss: horde decode on the log)" } else { " (give --log for percentiles and jitter)" }
        );
    }
    if let Some(p) = &r.log {
        // Absolute: inside `emu exec` a relative path is in the node's own directory.
        say!("  log: {} ({} records)", std::path::absolute(p).unwrap_or_else(|_| p.clone()).display(), r.log_records);
    }
    if let Some(t) = &r.log_server {
        say!("{}", super::tap_line(t));
    }
    let _ = fmt_ns;
}

/// What the receiver said arrived, acknowledging the flows' end messages (UDP).
fn receiver_line(r: &SendReport) {
    let acked: Vec<(&horde_engine::sender::FlowSent, horde_engine::sender::ReceiverSaid)> = r.flows.iter().filter_map(|f| f.receiver.map(|x| (f, x))).collect();
    if acked.is_empty() {
        return;
    }
    let udp = r.flows.iter().filter(|f| f.transport == "udp" && !f.reverse).count();
    let sent: u64 = acked.iter().map(|(f, _)| f.packets).sum();
    let got: u64 = acked.iter().map(|(_, x)| x.packets).sum();
    let lost = sent.saturating_sub(got);
    let stopped = acked.iter().filter(|(_, x)| x.stopped).count();
    say!(
        "  receiver: acknowledged the end of {} of {udp} UDP flow(s): {got} of {sent} packets arrived ({lost} lost, {:.3} %){}",
        acked.len(),
        if sent > 0 { lost as f64 * 100.0 / sent as f64 } else { 0.0 },
        if acked.len() < udp { "; the others' acknowledgements did not come (lost, or the receiver is older)" } else { "" }
    );
    if stopped > 0 {
        say!("  receiver: stopped while {stopped} flow(s) were running and said so; they ended then (what had arrived is counted above)");
    }
}

/// `--gso` (docs/cli.md; [`horde_model::gso`]).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoArg {
    Auto,
    On,
    Off,
}

impl From<GsoArg> for horde_model::gso::Gso {
    fn from(g: GsoArg) -> Self {
        match g {
            GsoArg::Auto => horde_model::gso::Gso::Auto,
            GsoArg::On => horde_model::gso::Gso::On,
            GsoArg::Off => horde_model::gso::Gso::Off,
        }
    }
}
