//! `horde discover`: what Horde endpoint listens at an address (D-ITG's discovery request).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use horde_engine::discover::{self, DiscoverOptions, Discovery};
use horde_engine::EngineError;

use crate::{bad_input, Failure, Outcome};

/// Asks a Horde endpoint (a `recv`, a scenario's server side, a circuit server) at a UDP address
/// what it is — version, role, capacity, the round trip and its clock against ours — without
/// starting a flow there. The request is signed with the run key and goes through address
/// validation, so only an address that proves it receives gets the reply (one reply per
/// request, never larger). An endpoint with another key stays silent.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The endpoint's UDP address (host:port, e.g. 127.0.0.1:9000: `horde recv`'s default)
    #[arg(value_name = "HOST:PORT", value_parser = super::resolve)]
    pub addr: std::net::SocketAddr,
    #[command(flatten)]
    pub key: super::KeyArgs,
    /// Replies to collect; the round trip and clock offset come from the fastest (1..=100)
    #[arg(short = 'n', long, default_value_t = 5, value_name = "N")]
    pub samples: u32,
    /// How long to wait for an answer
    #[arg(short = 't', long, default_value = "2s", value_parser = super::duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// Write the answer as JSON to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(args: Args) -> Outcome {
    if !(1..=100).contains(&args.samples) {
        return Err(bad_input(anyhow::anyhow!("--samples must be 1..=100 (got {})", args.samples)));
    }
    if args.timeout.is_zero() || args.timeout > Duration::from_secs(60) {
        return Err(bad_input(anyhow::anyhow!("--timeout must be more than 0 and at most 60s (got {:?})", args.timeout)));
    }
    let secret = horde_engine::random_secret().context("drawing a nonce")?;
    let nonce = (u32::from_le_bytes(secret[..4].try_into().expect("4 bytes")), u32::from_le_bytes(secret[4..8].try_into().expect("4 bytes")));
    let opts = DiscoverOptions { dst: args.addr, key: args.key.key()?, samples: args.samples, timeout: args.timeout, nonce };
    let d = match discover::discover(&opts) {
        Ok(d) => d,
        // Nobody there (or another key) is the answer to the question, not bad input.
        Err(EngineError::Config(m)) => return Err(Failure::from(anyhow::anyhow!(m))),
        Err(e) => return Err(Failure::from(anyhow::Error::new(e))),
    };
    match &args.json {
        Some(p) => super::write_out(p, &serde_json::to_string_pretty(&d).expect("discovery serialises"))?,
        None => outln!("{}", describe(&d))?,
    }
    Ok(0)
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The answer for people.
pub fn describe(d: &Discovery) -> String {
    format!(
        "{}: Horde {} {} (wire version {}), run key: {}\n  listens on {} UDP and {} TCP port(s); flows {} of at most {}\n  echoes: {}, reverse bulk: {}, ICMP logging: {}\n  round trip {:.3} ms (fastest of {} replies); its clock − ours: {:+.3} ms ± {:.3} ms",
        d.addr,
        d.version,
        d.role,
        d.wire_version,
        yes(d.keyed),
        d.udp_ports,
        d.tcp_ports,
        d.flows_now,
        d.flows_max,
        yes(d.echoes),
        yes(d.reverse_bulk),
        yes(d.icmp),
        d.rtt_ms,
        d.replies,
        d.clock_offset_ms,
        d.clock_offset_bound_ms,
    )
}
