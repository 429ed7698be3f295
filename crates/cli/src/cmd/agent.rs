use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use crate::{bad_input, Outcome};

/// The agent of a distributed run: on each load machine, it waits for a controller
/// (`horde run SCENARIO --agents …`) on its control address and runs the part of the run it is
/// given (a shard of the players, the server side, or both). Control connections are TLS 1.3
/// with certificates of one private authority on both sides (`horde agent keygen`): nothing
/// else can make it do anything. An agent whose controller goes silent stops its traffic
/// within the run's dead-man interval (3 s by default).
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Option<Sub>,
    /// Control address to listen on, e.g. 10.0.0.5:7800 (required: nothing listens on all interfaces unless you give 0.0.0.0)
    #[arg(long, value_name = "ADDR", required = true)]
    pub listen: Option<SocketAddr>,
    /// Credentials directory with ca.pem, agent.pem and agent.key (from `horde agent keygen`)
    #[arg(long, value_name = "DIR", env = "HORDE_CREDENTIALS", required = true)]
    pub credentials: Option<PathBuf>,
    /// Where runs keep their logs until the controller collects them (default: ~/.local/state/horde/agent)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The name this agent reports to controllers (default: host name:port)
    #[arg(long)]
    pub name: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (players, pkt/s and bit/s each way, errors)
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Keep each run's logs after they were collected
    #[arg(long)]
    pub keep: bool,
    /// Let controllers build this machine's part of an emulated network across machines
    /// (`horde emu up TOPO --agents …`), run commands in its nodes and take it down. Needs root.
    /// At start-up the agent takes down every part it built before and did not take down (a crash)
    #[arg(long)]
    pub emu: bool,
    /// With --emu: build and take down this machine's part, change its links, but refuse every command in its nodes (`emu exec`), in the reply
    #[arg(long, requires = "emu")]
    pub no_exec: bool,
    /// A network whose connections the admission policy always trusts, ADDR or ADDR/PREFIX (repeat, or comma-separate): never rate-limited or struck, its places reserved (as OpenSSH's PerSourcePenaltyExemptList). Sources that authenticated in the last 15 minutes are trusted anyway
    #[arg(long, value_name = "ADDR[/PREFIX]", value_delimiter = ',', value_parser = super::exempt)]
    pub exempt: Vec<(std::net::IpAddr, u8)>,
}

#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Makes the credentials of a Horde cluster: a private certificate authority (ca.pem), an agent identity (agent.pem, agent.key) and a controller identity (controller.pem, controller.key). Give agents ca.pem + agent.*, the controller ca.pem + controller.*.
    Keygen {
        /// Directory to create them in (must not hold credentials already)
        #[arg(long, short, value_name = "DIR")]
        out: PathBuf,
        /// Validity in days
        #[arg(long, default_value_t = 365)]
        days: u32,
        /// Also an identity of its own for each of N agents (agent-K.pem, agent-K.key for K = 0..N): an agent named NAME-K (a StatefulSet pod) uses its own
        #[arg(long, value_name = "N", default_value_t = 0)]
        agents: u32,
    },
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    if let Some(Sub::Keygen { out, days, agents }) = args.cmd {
        let g = horde_agent::tls::keygen_for(&out, days, agents).map_err(bad_input)?;
        for f in &g.files {
            say!("horde agent keygen: wrote {}", f.display());
        }
        say!("give every agent ca.pem, agent.pem and agent.key (or agent-K.pem and agent-K.key to the agent named NAME-K); give the controller ca.pem, controller.pem and controller.key (keys stay mode 600)");
        return Ok(0);
    }
    let (Some(listen), Some(credentials)) = (args.listen, args.credentials) else {
        return Err(bad_input(anyhow::anyhow!("horde agent needs --listen ADDR and --credentials DIR")));
    };
    let dir = match args.dir {
        Some(d) => d,
        None => match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".local/state/horde/agent"),
            None => return Err(bad_input(anyhow::anyhow!("no HOME: give the run directory with --dir DIR"))),
        },
    };
    let name = args.name.unwrap_or_else(|| format!("{}:{}", hostname(), listen.port()));
    if name.is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control()) {
        return Err(bad_input(anyhow::anyhow!("--name must be 1..=64 printable characters")));
    }
    let opts = horde_agent::agent::AgentOptions {
        listen,
        credentials,
        dir,
        name,
        metrics: args.metrics,
        keep: args.keep,
        max_handshakes: 256,
        exempt: args.exempt.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
        emu: args.emu,
        no_exec: args.no_exec,
    };
    let log = |m: &str| say!("horde agent: {m}");
    horde_agent::agent::serve(&opts, stop, &log).map_err(bad_input)?;
    say!("horde agent: stopped");
    Ok(0)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "agent".into())
}
