//! `horde send --emu ID`: flows sent from emulated hosts to receivers this command starts on
//! the hosts their destinations name, in one process. Each sender socket is opened inside its
//! host's network namespace (the engine's `Job::netns`; one set of pacing workers for every
//! host), each receiver runs on a thread that entered its host's namespace. One run key, both
//! logs, one report, as a run through agents writes it.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::Context;
use horde_engine::sender::Job;
use horde_engine::{receiver, sender, RecvOptions, RecvReport, SendOptions, SendReport};
use horde_model::flow::{FlowFile, PlacedFlow};
use horde_model::{Flow, Transport};
use horde_topo::Plan;
use horde_wire::{Record, Role};
use serde::Serialize;

use crate::{bad_input, Outcome};

/// How long the receivers may take to open their sockets.
const RECEIVERS_READY: Duration = Duration::from_secs(10);

/// Where each flow leaves from and arrives, by node index in the experiment's plan.
#[derive(Debug, PartialEq)]
pub struct Placement {
    /// The sending host of each flow, in flow order.
    pub from: Vec<usize>,
    /// The receiving host of each flow.
    pub to: Vec<usize>,
    /// What each receiving host listens on.
    pub receivers: BTreeMap<usize, Listen>,
}

/// One receiving host's sockets: exactly the flows' destinations.
#[derive(Debug, Default, PartialEq)]
pub struct Listen {
    pub udp: Vec<SocketAddr>,
    pub tcp: Vec<SocketAddr>,
    /// ICMP echo requests are logged (at any of the host's addresses).
    pub icmp: bool,
}

/// Hosts (and routers) of the plan with their addresses, for error messages: the first eight.
fn hosts_list(plan: &Plan) -> String {
    let hosts: Vec<String> = (0..plan.nodes.len())
        .filter(|&i| !plan.nodes[i].kind.is_l2())
        .map(|i| match plan.addrs(i).first() {
            Some(a) => format!("{} {a}", plan.nodes[i].name),
            None => plan.nodes[i].name.clone(),
        })
        .collect();
    let groups: Vec<&str> = plan.groups.iter().filter(|(_, m)| m.len() > 1).map(|(g, _)| g.as_str()).collect();
    format!(
        "hosts: {}{}{}",
        hosts.iter().take(8).cloned().collect::<Vec<_>>().join(", "),
        if hosts.len() > 8 { format!(", … ({} in all)", hosts.len()) } else { String::new() },
        if groups.is_empty() { String::new() } else { format!("; groups: {}", groups.join(", ")) }
    )
}

/// The node that owns address `ip`, if it is a host's or a router's.
fn owner(plan: &Plan, ip: IpAddr) -> Option<usize> {
    let IpAddr::V4(v4) = ip else { return None };
    (0..plan.nodes.len()).find(|&i| !plan.nodes[i].kind.is_l2() && plan.addrs(i).contains(&v4))
}

/// Places every flow: from its `node` (a group's members in turn, in flow order), to the host
/// that owns its destination. A flow with no node, a node that is no host, or a destination no
/// host owns is refused with the list of hosts.
pub fn place(plan: &Plan, flows: &[PlacedFlow]) -> Result<Placement, String> {
    let mut turn: BTreeMap<&str, usize> = BTreeMap::new();
    let mut p = Placement { from: Vec::new(), to: Vec::new(), receivers: BTreeMap::new() };
    for (f, node) in flows {
        let who = format!("flow id {} (`{}`)", f.id, f.name);
        let Some(n) = node.as_deref() else {
            return Err(format!(
                "{who} has no `node`: with --emu every flow leaves from an emulated host; add node = \"HOST\" to it or to [defaults] (or --node HOST); {}",
                hosts_list(plan)
            ));
        };
        let members: Vec<usize> = match plan.hosts_of(n) {
            Some(m) => m.to_vec(),
            None => plan.node(n).into_iter().collect(),
        };
        let members: Vec<usize> = members.into_iter().filter(|&i| !plan.nodes[i].kind.is_l2()).collect();
        if members.is_empty() {
            return Err(format!("{who}: node `{n}` is not a host or router of experiment {} (switches and hubs send nothing); {}", plan.exp, hosts_list(plan)));
        }
        let k = turn.entry(n).or_default();
        let from = members[*k % members.len()];
        *k += 1;
        let to = owner(plan, f.dst.ip()).ok_or_else(|| {
            format!(
                "{who}: destination {} is no emulated host's address in experiment {}: name the host (dst = \"server:9000\") or give one of its addresses; {}",
                f.dst.ip(),
                plan.exp,
                hosts_list(plan)
            )
        })?;
        let l = p.receivers.entry(to).or_default();
        match f.transport {
            Transport::Udp if !l.udp.contains(&f.dst) => l.udp.push(f.dst),
            Transport::Tcp if !l.tcp.contains(&f.dst) => l.tcp.push(f.dst),
            Transport::Icmp => l.icmp = true,
            _ => {}
        }
        p.from.push(from);
        p.to.push(to);
    }
    Ok(p)
}

/// The flows of `--flows FILE` (or the one-flow flags), each with its node; a destination may
/// name a host of the experiment.
fn placed_flows(args: &super::Args, plan: &Plan) -> Result<Vec<PlacedFlow>, crate::Failure> {
    let first = |name: &str| -> Option<IpAddr> {
        let i = plan.node(name).filter(|&i| !plan.nodes[i].kind.is_l2())?;
        plan.addrs(i).first().map(|a| IpAddr::V4(*a))
    };
    let hint = |e: String| bad_input(anyhow::anyhow!("{e}{}", if e.contains("dst") { format!(" ({})", hosts_list(plan)) } else { String::new() }));
    let mut flows = match &args.flows {
        Some(path) => {
            if args.flow.any() {
                return Err(bad_input(anyhow::anyhow!(
                    "one-flow flags (--dst, --node, ...) cannot be combined with --flows; put them in the file's [defaults] table"
                )));
            }
            let text = horde_model::files::read_text(path, horde_model::files::MAX_TOML, "flow files").context("reading the flow file").map_err(bad_input)?;
            FlowFile::parse_placed(&text, args.seed, Some(&first)).map_err(|e| hint(format!("{}: {e}", path.display())))?
        }
        None => {
            let mut raw = args.flow.to_raw();
            let Some(dst) = raw.dst.take() else {
                return Err(bad_input(anyhow::anyhow!(
                    "no destination: give --dst HOST:PORT (an emulated host's name or address) and --node HOST, or --flows FILE"
                )));
            };
            raw.dst = Some(horde_model::flow::host_dst(&dst, &first));
            let node = raw.node.clone();
            raw.resolve_all(0, args.seed, "flow").map_err(|e| hint(e.to_string()))?.into_iter().map(|f| (f, node.clone())).collect()
        }
    };
    for (f, _) in &mut flows {
        f.id += args.id_base;
    }
    Ok(flows)
}

/// One host's part in the run, for the report's table.
#[derive(Debug, Clone, Serialize)]
pub struct HostRow {
    pub host: String,
    pub address: String,
    pub role: String,
    pub flows_sent: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
}

/// What `summary.json` holds beside the decode's figures (`emulated`).
#[derive(Debug, Serialize)]
struct EmulatedPart<'a> {
    experiment: &'a str,
    interrupted: bool,
    /// This process (every sender and receiver), % of one core, over the run.
    process_cpu_pct: f64,
    /// The whole machine's CPU load over the run, % of all its CPUs (cpuidle's idle time).
    host_busy_pct: Option<f64>,
    cpus: usize,
    hosts: &'a [HostRow],
    send: &'a SendReport,
    receivers: BTreeMap<String, &'a RecvReport>,
}

/// Starts one receiver per receiving host, each on a thread inside its host's namespace, and
/// waits until all listen; each one's result goes to `ended` with its host.
fn start_receivers(
    plan: &Plan,
    placement: &Placement,
    spaces: &BTreeMap<usize, Arc<std::fs::File>>,
    out: &Path,
    key: &horde_proto::RunKey,
    stop: &Arc<AtomicBool>,
    ended: &mpsc::Sender<(usize, Result<RecvReport, String>)>,
) -> Result<Vec<std::thread::JoinHandle<()>>, crate::Failure> {
    let mut running = Vec::new();
    for (&node, l) in &placement.receivers {
        let name = &plan.nodes[node].name;
        let opts = RecvOptions {
            udp: l.udp.clone(),
            tcp: l.tcp.clone(),
            icmp: l.icmp.then_some(None),
            log: Some(out.join(format!("recv-{name}.hlog"))),
            key: key.clone(),
            ..Default::default()
        };
        let tx = ended.clone();
        let ended = move |r| drop(tx.send((node, r)));
        match receiver::spawn(opts, stop.clone(), Some(spaces[&node].clone()), format!("recv-{name}"), RECEIVERS_READY, ended) {
            Ok(r) => running.push(r.handle),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                running.into_iter().for_each(|h| drop(h.join()));
                return Err(crate::Failure::from(anyhow::anyhow!("the receiver on {name} did not start: {e}")));
            }
        }
    }
    Ok(running)
}

/// `horde send --emu ID`.
pub fn run(args: &super::Args, id: &str, stop: &AtomicBool) -> Outcome {
    let refuse = |flag: &str, why: &str| Err(bad_input(anyhow::anyhow!("{flag} cannot be used with --emu: {why}")));
    if args.log.is_some() {
        return refuse("--log", "both logs go to --out DIR (send.hlog, recv.hlog)");
    }
    if args.json.is_some() {
        return refuse("--json", "the report is --out DIR/summary.json");
    }
    if args.log_server.log_server.is_some() {
        return refuse("--log-server", "not streamed yet from emulated hosts; the logs are in --out DIR");
    }
    if args.threads == 0 {
        return Err(bad_input(anyhow::anyhow!("--threads must be at least 1")));
    }
    if args.floor > super::MAX_FLOOR {
        return Err(bad_input(anyhow::anyhow!("--floor {:?}: at most {}s (0 skips it)", args.floor, super::MAX_FLOOR.as_secs())));
    }
    horde_emu::require_root().map_err(|e| bad_input(anyhow::anyhow!("--emu: {e}")))?;
    let (_, plan) = horde_emu::load(id).map_err(|e| bad_input(anyhow::anyhow!("--emu {id}: {e}")))?;
    let placed = placed_flows(args, &plan)?;
    let placement = place(&plan, &placed).map_err(|e| bad_input(anyhow::anyhow!("{e}")))?;
    let flows: Vec<Flow> = placed.into_iter().map(|(f, _)| f).collect();
    let name = args.flows.as_ref().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "flows".into());
    let out = args.through.out.clone().unwrap_or_else(|| super::super::default_out(&name));
    super::super::report_dir(&out)?;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    descriptors(&flows, &placement)?;
    let mut key = args.key.key()?;
    if key.is_open() {
        key = horde_proto::RunKey::from_bytes(horde_engine::random_secret().context("drawing a run key")?);
    }
    let mut spaces: BTreeMap<usize, Arc<std::fs::File>> = BTreeMap::new();
    for &n in placement.from.iter().chain(&placement.to) {
        if let std::collections::btree_map::Entry::Vacant(v) = spaces.entry(n) {
            v.insert(Arc::new(horde_emu::open_node(id, &plan, &plan.nodes[n].name).map_err(|e| bad_input(anyhow::anyhow!("--emu {id}: {e}")))?));
        }
    }
    say!(
        "horde send: {} flow(s) from {} host(s) to receivers on {} host(s) of experiment {id}",
        flows.len(),
        placement.from.iter().collect::<std::collections::BTreeSet<_>>().len(),
        placement.receivers.len()
    );
    let recv_stop = Arc::new(AtomicBool::new(false));
    let (ended, results) = mpsc::channel();
    let receivers = start_receivers(&plan, &placement, &spaces, &out, &key, &recv_stop, &ended)?;
    drop(ended);
    let jobs: Vec<Job> = flows
        .iter()
        .zip(&placement.from)
        .map(|(f, n)| Job { flow: f.clone(), source: None, mirror: None, connect_at_ns: None, netns: Some(spaces[n].clone()), presence: None })
        .collect();
    let opts = SendOptions {
        threads: args.threads,
        spin_ns: args.spin_us * 1000,
        log: Some(out.join("send.hlog")),
        connect_timeout: args.connect_timeout,
        linger: args.linger,
        key,
        greet: true,
        end_messages: true,
        floor: args.floor,
        gso: args.gso.into(),
        ..Default::default()
    };
    let (cpu0, busy0) = (horde_agent::agent::cpu_s(), horde_sys::host::idle_sample());
    let sent = sender::run_jobs(jobs, &opts, stop);
    let (cpu1, busy1) = (horde_agent::agent::cpu_s(), horde_sys::host::idle_sample());
    recv_stop.store(true, Ordering::Relaxed);
    receivers.into_iter().for_each(|h| drop(h.join()));
    let mut received: BTreeMap<usize, RecvReport> = BTreeMap::new();
    let mut failed = Vec::new();
    for (node, r) in results.try_iter() {
        match r {
            Ok(rep) => drop(received.insert(node, rep)),
            Err(e) => failed.push(format!("{}: {e}", plan.nodes[node].name)),
        }
    }
    if received.len() + failed.len() < placement.receivers.len() {
        failed.push("a receiver's thread ended without its report".into());
    }
    let report = sent.context("sending")?;
    if !failed.is_empty() {
        return Err(crate::Failure::from(anyhow::anyhow!("receiver(s) failed: {}", failed.join("; "))));
    }
    super::print_report(&report);
    let rx = merge_receivers(&plan, &out, &received, &flows)?;
    let tx = horde_stats::records_of(&out.join("send.hlog")).map_err(anyhow::Error::msg)?;
    let logs = [
        horde_stats::LoadedLog { role: Role::Sender, records: tx, trailing_bytes: 0 },
        horde_stats::LoadedLog { role: Role::Receiver, records: rx, trailing_bytes: 0 },
    ];
    let mut analysis = horde_stats::analyse(&logs, horde_stats::Options { window_ns: Some(1_000_000_000), anchor_ns: None });
    for f in &mut analysis.flows {
        f.name = f.flow.and_then(|id| flows.binary_search_by_key(&id, |f| f.id).ok()).map(|k| flows[k].name.clone());
    }
    let rows = host_rows(&plan, &placement, &flows, &report, &received);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy = busy0.zip(busy1).and_then(|(a, b)| horde_sys::host::busy_pct(a, b));
    let process_cpu_pct = if report.duration_s > 0.0 { (cpu1 - cpu0) * 100.0 / report.duration_s } else { 0.0 };
    let table = hosts_table(&rows);
    say_inline!("{table}");
    say!(
        "  CPU over the run: this process {process_cpu_pct:.1} % of one core; the machine {} of its {cpus} CPU(s)",
        busy.map_or("n/a".into(), |b| format!("{b:.1} %"))
    );
    let names: BTreeMap<String, &RecvReport> = received.iter().map(|(n, r)| (plan.nodes[*n].name.clone(), r)).collect();
    let part = EmulatedPart {
        experiment: id,
        interrupted: report.interrupted,
        process_cpu_pct,
        host_busy_pct: busy,
        cpus,
        hosts: &rows,
        send: &report,
        receivers: names,
    };
    let section = format!(
        "<h2>Emulated hosts</h2><p>Experiment {}: this process used {process_cpu_pct:.1} % of one core; the machine {} of its {cpus} CPU(s).</p><pre>{}</pre>",
        horde_stats::table::esc(id),
        busy.map_or("n/a".into(), |b| format!("{b:.1} %")),
        horde_stats::table::esc(&table)
    );
    horde_agent::flows::report_files(
        &out,
        "Horde send on emulated hosts",
        &analysis,
        ("emulated", serde_json::to_value(&part).context("the report")?),
        &section,
    )?;
    crate::output::out(&format!(
        "\n{}\nreport: {}/index.html (summary.json, flows.csv, windows.csv; logs send.hlog, recv.hlog)\n",
        horde_stats::export::table(&analysis, 20),
        out.display()
    ))?;
    if report.interrupted {
        return Ok(130);
    }
    let refused = report.flows.iter().filter(|f| f.packets == 0 && f.errors > 0).count();
    if refused > 0 {
        return Err(crate::Failure::from(anyhow::anyhow!("{refused} of {} flow(s) sent nothing: their receivers refused them", report.flows.len())));
    }
    Ok(0)
}

/// Refuses a run whose sockets cannot all be open in this one process: every flow's socket,
/// and at the receivers every TCP flow's accepted connection, the listeners, the namespaces
/// and the logs.
fn descriptors(flows: &[Flow], placement: &Placement) -> Result<(), crate::Failure> {
    let tcp = flows.iter().filter(|f| f.transport == Transport::Tcp).count();
    let listeners: usize = placement.receivers.values().map(|l| l.udp.len() + l.tcp.len() + usize::from(l.icmp)).sum();
    let hosts = placement.from.iter().chain(&placement.to).collect::<std::collections::BTreeSet<_>>().len();
    let need = flows.len() + tcp + listeners + hosts + 2 * placement.receivers.len() + 64;
    let limit = horde_sys::clock::raise_fd_limit() as usize;
    if need > limit {
        return Err(bad_input(anyhow::anyhow!(
            "{} flow(s) ({tcp} TCP) need about {need} descriptors in this process (each TCP flow has a socket at both ends here), but it may open {limit}: raise the hard limit (`ulimit -Hn {}` as root with CAP_SYS_RESOURCE) or run fewer flows",
            flows.len(),
            need.next_power_of_two()
        )));
    }
    Ok(())
}

/// One receiving log: every receiver's records of this run's flows, in order; their own files
/// are removed once merged.
fn merge_receivers(plan: &Plan, out: &Path, received: &BTreeMap<usize, RecvReport>, flows: &[Flow]) -> anyhow::Result<Vec<Record>> {
    let mut rx = Vec::new();
    let mut parts: Vec<PathBuf> = Vec::new();
    for &node in received.keys() {
        let p = out.join(format!("recv-{}.hlog", plan.nodes[node].name));
        rx.extend(horde_stats::records_of(&p).map_err(anyhow::Error::msg)?.into_iter().filter(|r| flows.binary_search_by_key(&r.flow, |f| f.id).is_ok()));
        parts.push(p);
    }
    rx.sort_by_key(|r| (r.flow, r.t_b));
    let start = rx.iter().map(|r| r.t_b).filter(|&t| t > 0).min().unwrap_or(0);
    horde_agent::flows::write_log(&out.join("recv.hlog"), Role::Receiver, start, &rx)?;
    for p in parts {
        let _ = std::fs::remove_file(p);
    }
    Ok(rx)
}

fn host_rows(plan: &Plan, placement: &Placement, flows: &[Flow], report: &SendReport, received: &BTreeMap<usize, RecvReport>) -> Vec<HostRow> {
    let sent_by: BTreeMap<u32, u64> = report.flows.iter().map(|f| (f.id, f.packets)).collect();
    let mut nodes: Vec<usize> = placement.from.iter().chain(&placement.to).copied().collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
        .into_iter()
        .map(|n| {
            let mine: Vec<&Flow> = flows.iter().zip(&placement.from).filter(|(_, &m)| m == n).map(|(f, _)| f).collect();
            let recv = received.get(&n);
            HostRow {
                host: plan.nodes[n].name.clone(),
                address: plan.addrs(n).first().map(|a| a.to_string()).unwrap_or_default(),
                role: match (!mine.is_empty(), recv.is_some()) {
                    (true, true) => "send+recv",
                    (true, false) => "send",
                    _ => "recv",
                }
                .into(),
                flows_sent: mine.len() as u64,
                packets_sent: mine.iter().map(|f| sent_by.get(&f.id).copied().unwrap_or(0)).sum(),
                packets_received: recv.map_or(0, |r| r.packets),
            }
        })
        .collect()
}

/// The hosts' table as text (the first 40 rows and a total).
fn hosts_table(rows: &[HostRow]) -> String {
    let mut t = format!("{:<16} {:<16} {:<10} {:>6} {:>12} {:>12}\n", "host", "address", "role", "flows", "pkts sent", "received");
    for r in rows.iter().take(40) {
        t.push_str(&format!("{:<16} {:<16} {:<10} {:>6} {:>12} {:>12}\n", r.host, r.address, r.role, r.flows_sent, r.packets_sent, r.packets_received));
    }
    if rows.len() > 40 {
        t.push_str(&format!("… {} more host(s)\n", rows.len() - 40));
    }
    let (f, s, r) = rows.iter().fold((0, 0, 0), |a, x| (a.0 + x.flows_sent, a.1 + x.packets_sent, a.2 + x.packets_received));
    t.push_str(&format!("{:<16} {:<16} {:<10} {:>6} {:>12} {:>12}\n", "total", "", "", f, s, r));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPO: &str = r#"
name = "t"
[[node]]
name = "h"
kind = "host"
count = 3
[[node]]
name = "sw"
kind = "switch"
[[node]]
name = "server"
kind = "host"
[[link]]
a = "h"
b = "sw"
subnet = "10.1.0.0/24"
[[link]]
a = "server"
b = "sw"
"#;

    fn plan() -> Plan {
        horde_topo::plan(TOPO, "t.toml", "tst").unwrap()
    }

    fn flows(plan: &Plan, text: &str) -> Result<Vec<PlacedFlow>, String> {
        let first = |name: &str| plan.node(name).and_then(|i| plan.addrs(i).first().map(|a| IpAddr::V4(*a)));
        FlowFile::parse_placed(text, 1, Some(&first)).map_err(|e| e.to_string())
    }

    #[test]
    fn a_group_sends_in_turn_and_the_destination_host_receives_on_exactly_the_flows_ports() {
        let p = plan();
        let f = flows(&p, "[defaults]\nrate = 100\nsize = 64\n[[flow]]\nnode = \"h\"\nrepeat = 4\ndst = \"server:9000\"\n[[flow]]\nnode = \"h2\"\ntransport = \"tcp\"\ndst = \"server:9001\"\n").unwrap();
        let pl = place(&p, &f).unwrap();
        let names: Vec<&str> = pl.from.iter().map(|&i| p.nodes[i].name.as_str()).collect();
        assert_eq!(names, ["h1", "h2", "h3", "h1", "h2"]);
        let server = p.node("server").unwrap();
        assert!(pl.to.iter().all(|&t| t == server));
        let l = &pl.receivers[&server];
        let ip = p.addrs(server)[0];
        assert_eq!(l.udp, vec![SocketAddr::new(ip.into(), 9000)]);
        assert_eq!(l.tcp, vec![SocketAddr::new(ip.into(), 9001)]);
        assert_eq!(pl.receivers.len(), 1);
    }

    #[test]
    fn a_destination_given_as_an_address_finds_its_host() {
        let p = plan();
        let h3 = p.addrs(p.node("h3").unwrap())[0];
        let f = flows(&p, &format!("[[flow]]\nnode = \"server\"\nrate = 10\nsize = 64\ndst = \"{h3}:7000\"\n")).unwrap();
        let pl = place(&p, &f).unwrap();
        assert_eq!(p.nodes[pl.to[0]].name, "h3");
    }

    #[test]
    fn bad_nodes_and_destinations_are_refused_with_the_hosts() {
        let p = plan();
        for (text, says) in [
            ("[[flow]]\nrate = 10\nsize = 64\ndst = \"server:9000\"\n", "has no `node`"),
            ("[[flow]]\nnode = \"h9\"\nrate = 10\nsize = 64\ndst = \"server:9000\"\n", "node `h9` is not a host"),
            ("[[flow]]\nnode = \"sw\"\nrate = 10\nsize = 64\ndst = \"server:9000\"\n", "switches and hubs"),
            ("[[flow]]\nnode = \"h1\"\nrate = 10\nsize = 64\ndst = \"10.9.9.9:9000\"\n", "no emulated host's address"),
        ] {
            let e = place(&p, &flows(&p, text).unwrap()).unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(e.contains("hosts: h1 10.1.0."), "the hosts are listed: {e}");
            assert!(e.contains("groups: h"), "{e}");
        }
        // An unknown host name in dst is not an address either.
        let e = flows(&p, "[[flow]]\nnode = \"h1\"\nrate = 10\nsize = 64\ndst = \"nosuch:9000\"\n").unwrap_err();
        assert!(e.contains("dst"), "{e}");
    }

    #[test]
    fn without_emu_a_placed_flow_is_refused() {
        let e = FlowFile::parse_and_resolve("[[flow]]\nnode = \"h1\"\nrate = 10\nsize = 64\ndst = \"127.0.0.1:9000\"\n", 1).unwrap_err();
        assert_eq!(e.field, "node");
        assert!(e.msg.contains("--emu"), "{e}");
    }
}
