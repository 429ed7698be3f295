use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use horde_engine::{receiver, RecvOptions, RecvReport};

use crate::{bad_input, Outcome};

/// Receives Horde traffic, logs every packet, echoes when asked. Listens on 127.0.0.1 unless
/// --bind says otherwise; stops on Ctrl-C/SIGTERM (logs are flushed) or a stop condition.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// UDP and TCP ports to listen on: 9000, 9000-9010 or 9000,9005 (default 9000 when no ports are given)
    #[arg(short = 'p', long, value_name = "PORTS")]
    pub port: Option<String>,
    /// UDP-only ports
    #[arg(long, value_name = "PORTS")]
    pub udp: Option<String>,
    /// TCP-only ports
    #[arg(long, value_name = "PORTS")]
    pub tcp: Option<String>,
    /// Address to listen on (0.0.0.0 or :: listens on all interfaces)
    #[arg(short = 'b', long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Per-packet binary log of arrivals
    #[arg(short = 'l', long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Stop after this long
    #[arg(short = 't', long, value_parser = super::duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Stop after nothing arrived (no packet, no new connection) for this long
    #[arg(long, value_parser = super::duration, value_name = "DURATION")]
    pub idle: Option<Duration>,
    /// Stop after this many packets
    #[arg(long, value_name = "N")]
    pub packets: Option<u64>,
    /// Write the receive report as JSON to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub key: super::KeyArgs,
    #[command(flatten)]
    pub log_server: super::LogServerArgs,
    /// TCP connections open at once at most; past it the oldest one that has not sent its hello is closed (else the newcomer)
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_conns: usize,
    /// Close a TCP connection on which nothing arrived for this long (default: never)
    #[arg(long, value_parser = super::duration, value_name = "DURATION")]
    pub conn_idle: Option<Duration>,
    /// Refuse reverse flows (`send --reverse`); by default they get bulk back while their keep-alives come from their validated address
    #[arg(long)]
    pub no_reverse: bool,
    /// TCP: acknowledge what arrives at once (TCP_QUICKACK on every connection, re-armed after
    /// every read) instead of delaying ACKs — for thin streams whose sender waits on them
    #[arg(long)]
    pub quickack: bool,
    /// Also log the echo requests of `horde send -T icmp` arriving at --bind (0.0.0.0: any
    /// address) for one-way delay; the kernel answers them itself. A raw socket: needs root
    /// (or CAP_NET_RAW). With --icmp alone no UDP/TCP port is opened
    #[arg(long)]
    pub icmp: bool,
}

/// Parses `9000`, `9000-9010`, `9000,9005,9100-9101`.
pub fn parse_ports(s: &str) -> Result<Vec<u16>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let port = |p: &str| p.trim().parse::<u16>().map_err(|_| format!("`{p}` is not a port number 1..65535"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (port(a)?, port(b)?);
                if a > b {
                    return Err(format!("port range `{part}` goes backwards"));
                }
                out.extend(a..=b);
            }
            None => out.push(port(part)?),
        }
    }
    if out.is_empty() {
        return Err(format!("`{s}` names no ports"));
    }
    Ok(out)
}

pub fn options(args: &Args) -> Result<RecvOptions, crate::Failure> {
    let ports = |o: &Option<String>, flag: &str| -> Result<Vec<u16>, crate::Failure> {
        o.as_deref().map(parse_ports).transpose().map(|v| v.unwrap_or_default()).map_err(|m| bad_input(anyhow::anyhow!("--{flag}: {m}")))
    };
    let both = ports(&args.port, "port")?;
    let mut udp = ports(&args.udp, "udp")?;
    let mut tcp = ports(&args.tcp, "tcp")?;
    if both.is_empty() && udp.is_empty() && tcp.is_empty() && !args.icmp {
        udp.push(9000);
        tcp.push(9000);
    }
    udp.extend(&both);
    tcp.extend(&both);
    let addr = |p: &u16| SocketAddr::new(args.bind, *p);
    let icmp = match (args.icmp, args.bind) {
        (false, _) => None,
        (true, IpAddr::V4(a)) => Some((!a.is_unspecified()).then_some(a)),
        (true, IpAddr::V6(a)) => {
            return Err(bad_input(anyhow::anyhow!("--icmp listens on IPv4 (ICMPv6 is not sent yet): give --bind an IPv4 address, not {a}")))
        }
    };
    Ok(RecvOptions {
        icmp,
        udp: udp.iter().map(addr).collect(),
        tcp: tcp.iter().map(addr).collect(),
        log: args.log.clone(),
        duration: args.duration,
        idle: args.idle,
        packets: args.packets,
        log_tap: args.log_server.tap(&args.key.key()?, horde_wire::Role::Receiver)?,
        key: args.key.key()?,
        max_conns: args.max_conns.max(1),
        conn_idle: args.conn_idle.filter(|d| !d.is_zero()),
        reverse: !args.no_reverse,
        quickack: args.quickack,
        gro: true,
    })
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    let opts = options(&args)?;
    let report = receiver::run(&opts, stop, |bound| {
        // Bound addresses come UDP first, then TCP, in the order given.
        let mut list: Vec<String> = bound.iter().enumerate().map(|(i, a)| format!("{} {a}", if i < opts.udp.len() { "udp" } else { "tcp" })).collect();
        if let Some(a) = opts.icmp {
            list.push(format!("icmp echo requests to {}", a.map_or("any address".to_string(), |a| a.to_string())));
        }
        say!("horde recv: listening on {} (Ctrl-C stops)", list.join(", "));
    })
    .context("receiving")?;
    print_report(&report);
    if let Some(p) = &args.json {
        super::write_out(p, &serde_json::to_string_pretty(&report).expect("report serialises"))?;
    }
    Ok(if report.interrupted { 130 } else { 0 })
}

pub fn print_report(r: &RecvReport) {
    say!(
        "horde recv: {} packets, {} bytes from {} flow(s) in {:.3} s; {} TCP connection(s); {} echoed{}",
        r.packets,
        r.bytes,
        r.flows.len(),
        r.duration_s,
        r.tcp_connections,
        r.echoed,
        if r.interrupted { " — interrupted" } else { "" }
    );
    if r.reverse_packets > 0 {
        say!("  reverse: sent {} packets, {} bytes back to reverse flows", r.reverse_packets, r.reverse_bytes);
    }
    if r.refusals.reverse > 0 {
        say!("  reverse: refused {} request(s) (--no-reverse)", r.refusals.reverse);
    }
    if r.garbage_datagrams + r.garbage_streams > 0 {
        say!("  ignored: {} datagram(s) and {} TCP stream(s) that were not Horde traffic", r.garbage_datagrams, r.garbage_streams);
    }
    end_lines(r);
    if r.icmp_other > 0 {
        say!("  ignored: {} echo request(s) that were not Horde's (e.g. ping; the kernel answered them)", r.icmp_other);
    }
    if let Some(p) = &r.log {
        say!("  log: {} ({} records)", std::path::absolute(p).unwrap_or_else(|_| p.clone()).display(), r.log_records);
    }
    if let Some(t) = &r.log_server {
        say!("{}", super::tap_line(t));
    }
}

/// What the senders said at the end of their flows, beside what arrived.
fn end_lines(r: &RecvReport) {
    let n = r.flows.len();
    if n == 0 {
        return;
    }
    if r.told_stopping > 0 {
        say!("  stopping: told the senders of {} running UDP flow(s) (a signed error message each, with what had arrived)", r.told_stopping);
    }
    let ended: Vec<_> = r.flows.values().filter_map(|f| f.end.as_ref().map(|e| (e, f.packets))).collect();
    if ended.is_empty() {
        say!("  ends: no end message from the {n} flow(s)' senders (they are still running, died, or are not `horde send`): loss at their ends cannot be told");
        return;
    }
    let sent: u64 = ended.iter().map(|(e, _)| e.packets).sum();
    let arrived: u64 = ended.iter().map(|(_, p)| *p).sum();
    let stopped = ended.iter().filter(|(e, _)| e.reason != "done").count();
    say!(
        "  ends: {} of {n} flow(s) ended with their sender's counts: {sent} sent, {arrived} arrived ({} lost){}{}",
        ended.len(),
        sent.saturating_sub(arrived),
        if stopped > 0 { format!("; {stopped} stopped early (interrupted or consent lapsed)") } else { String::new() },
        if ended.len() < n {
            format!("; {} without an end message (the sender died, is still running, or is not `horde send`)", n - ended.len())
        } else {
            String::new()
        }
    );
}
