//! `horde fit CAPTURE`: a service file fitted from a packet capture of a real game
//! (`horde-fit`, which is pure; the files are opened here). docs/fit.md says how it fits and
//! what its figures mean.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::Context;
use horde_fit::apdu::{parse_server, Apdu, Direction, Server, Transport};
use horde_fit::samples::Labels;
use horde_fit::{against, collect, compare, report, service, Comparison, FitReport, Options};
use horde_model::service::Service;

use crate::{bad_input, Outcome};

/// A distribution longer than this is shortened on the terminal (a `discrete(...)` of many
/// atoms); the service file and the JSON keep it whole.
const TERMINAL_DIST: usize = 72;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  horde fit game.pcapng --out my-game.toml --json fit.json --html fit/\n  \
horde fit rerun.pcapng --compare game.pcapng        # the loop closed: a run of the fitted service against the original\n  \
horde fit game.pcapng --against quake3               # a capture against a service's model\n  \
horde fit oa-8.pcap oa-16.pcap oa-32.pcap oa-64.pcap --players-from label --out q3.toml   # a law over players, each count left out in turn\n\ndocs/fit.md: how it fits, the states, the laws over player counts, what the figures mean.")]
pub struct Args {
    /// The capture: pcap or pcapng (tcpdump, tshark, Wireshark); several, each of one player
    /// count, with --players-from: the server's side as a law of the players
    #[arg(value_name = "CAPTURE", required = true, num_args = 1..=64)]
    pub captures: Vec<PathBuf>,
    /// With several captures: each one's player count from the last number in its file name
    /// (`label`: oa-16.pcapng is 16 players) or from the clients it shows online (`online`)
    #[arg(long, value_name = "HOW", value_enum)]
    pub players_from: Option<PlayersFrom>,
    /// The game server as ADDR:PORT[/udp|/tcp] (default: the endpoint with the most peers)
    #[arg(long, value_name = "ADDR:PORT")]
    pub server: Option<String>,
    /// Activity labels: a CSV of `state,start_s,end_s` rows (seconds from the capture's first packet)
    #[arg(long, value_name = "LABELS.csv", conflicts_with = "guess_states")]
    pub states: Option<PathBuf>,
    /// Without labels: guess states where the per-player rate changes (a guess, and the report says so)
    #[arg(long)]
    pub guess_states: bool,
    /// Within one TCP direction, a pause longer than this ends an APDU
    #[arg(long, value_name = "MS", default_value_t = 1.0)]
    pub tcp_gap_ms: f64,
    /// Each client's first seconds left out of the steady state (connecting: a gamestate, the
    /// first full snapshots); 0 keeps them
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub warm_up: f64,
    /// Each client's last seconds left out of the steady state (leaving); 0 keeps them
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub cool_down: f64,
    /// A player count is a point of a law over players only if it held this long without a
    /// change (not the counts passed while players join)
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub min_hold: f64,
    /// The fitted service's name
    #[arg(long, default_value = "fitted")]
    pub name: String,
    /// Write the fitted service file here (docs/services.md's schema, the fit table as comments)
    #[arg(long, value_name = "SERVICE.toml")]
    pub out: Option<PathBuf>,
    /// Write the fit report as JSON (docs/schemas/fit.schema.json)
    #[arg(long, value_name = "FIT.json")]
    pub json: Option<PathBuf>,
    /// Write a report page with measured and fitted CDFs into this directory (index.html)
    #[arg(long, value_name = "DIR")]
    pub html: Option<PathBuf>,
    /// Compare with another capture, or with a Horde report directory's per-packet logs (its
    /// players' and server side's departures), per state and direction (two-sample KS at 5 %)
    #[arg(long, value_name = "OTHER_CAPTURE|REPORT_DIR")]
    pub compare: Option<PathBuf>,
    /// Compare with a service's model (a built-in name or a file): one-sample KS at 5 %
    #[arg(long, value_name = "SERVICE")]
    pub against: Option<String>,
    /// Write the comparison rows as JSON
    #[arg(long, value_name = "CMP.json")]
    pub compare_json: Option<PathBuf>,
}

/// Where each capture's player count comes from (`--players-from`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlayersFrom {
    /// The last number in the file name
    Label,
    /// The clients the capture shows online, most of the server's APDUs
    Online,
}

pub fn run(a: Args) -> Outcome {
    let opts = options(&a)?;
    let (c, r, capture) = match (a.captures.len(), a.players_from) {
        (1, _) => {
            let capture = a.captures[0].display().to_string();
            let c = collect(opener(&a.captures[0])?, &opts).map_err(|e| bad_input(anyhow::anyhow!("{capture}: {e}")))?;
            let r = report(&c, &opts);
            (c, r, capture)
        }
        (_, None) => {
            return Err(bad_input(anyhow::anyhow!("{} captures: say where each one's player count comes from, --players-from label|online", a.captures.len())))
        }
        (_, Some(how)) => across(&a.captures, how, &opts)?,
    };
    print_fits(&r)?;
    if let Some(path) = &a.out {
        write(path, &service::service_toml(&r, &a.name, &capture))?;
    }
    if let Some(dir) = &a.html {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        write(&dir.join("index.html"), &horde_fit::html::page(&r, &c, &capture))?;
    }
    if let Some(path) = &a.json {
        write(path, &(serde_json::to_string_pretty(&r).context("encoding the fit report")? + "\n"))?;
    }
    let mut rows = Vec::new();
    if let Some(other) = &a.compare {
        let b = if other.is_dir() {
            let (apdus, server) = report_apdus(other)?;
            let why = format!("the departures logged in the report {}", other.display());
            horde_fit::collect_apdus(apdus, server, why, &Options { server: None, ..opts.clone() })
        } else {
            collect(opener(other)?, &Options { server: None, ..opts.clone() })
        }
        .map_err(|e| bad_input(anyhow::anyhow!("{}: {e}", other.display())))?;
        rows.extend(compare(&c, &b));
    }
    if let Some(name) = &a.against {
        let s = Service::load(name).map_err(|e| bad_input(anyhow::anyhow!("--against {name}: {e}")))?;
        rows.extend(against(&c, &s).map_err(|e| bad_input(anyhow::anyhow!("--against {name}: {e}")))?);
    }
    print_comparisons(&rows)?;
    if let Some(path) = &a.compare_json {
        write(path, &(serde_json::to_string_pretty(&rows).context("encoding the comparison")? + "\n"))?;
    }
    Ok(0)
}

/// Several captures, each of one player count: each read through, its count taken as `how`
/// says, the law over players fitted across them and each count left out
/// (`horde_fit::across`); the report is the median count's, carrying the law.
fn across(paths: &[PathBuf], how: PlayersFrom, opts: &Options) -> Result<(horde_fit::Collected, FitReport, String), crate::Failure> {
    if opts.labels.is_some() || opts.guess_states {
        return Err(bad_input(anyhow::anyhow!("several captures are fitted as one state: leave out --states and --guess-states")));
    }
    let mut read = Vec::new();
    for p in paths {
        let name = p.display().to_string();
        let c = collect(opener(p)?, opts).map_err(|e| bad_input(anyhow::anyhow!("{name}: {e}")))?;
        let n = match how {
            PlayersFrom::Label => p.file_stem().and_then(|s| horde_fit::across::count_in_name(&s.to_string_lossy())).ok_or_else(|| {
                bad_input(anyhow::anyhow!("{name}: no player count in the file name (name it e.g. oa-16.pcapng, or use --players-from online)"))
            })?,
            PlayersFrom::Online => c.collector.by_players[0].iter().max_by_key(|(_, (s, _))| s.seen).map(|(n, _)| *n).unwrap_or(0),
        };
        if n == 0 {
            return Err(bad_input(anyhow::anyhow!("{name}: no player online in the capture")));
        }
        read.push((n, name, c));
    }
    read.sort_by_key(|r| r.0);
    let points: Vec<horde_fit::across::Point> = read
        .iter()
        .map(|(n, _, c)| {
            let (sizes, idts) = &c.collector.samples[0][1];
            let held_s = c.collector.first_ns.map_or(0.0, |f| (c.collector.last_ns - f) as f64 / 1e9);
            horde_fit::across::Point { players: *n, sizes, idts, held_s }
        })
        .collect();
    let a = horde_fit::across::across(&points, opts.min_hold_s).map_err(|e| bad_input(anyhow::anyhow!("{} captures: {e}", paths.len())))?;
    let (_, name, c) = read.swap_remove(read.len() / 2);
    let mut r = report(&c, opts);
    horde_fit::with_across(&mut r, a);
    Ok((c, r, format!("{name} and {} more", paths.len() - 1)))
}

fn options(a: &Args) -> Result<Options, crate::Failure> {
    let mut opts = Options { guess_states: a.guess_states, ..Options::default() };
    if let Some(s) = &a.server {
        opts.server = Some(parse_server(s).map_err(|e| bad_input(anyhow::anyhow!("--server: {e}")))?);
    }
    if !(a.tcp_gap_ms.is_finite() && a.tcp_gap_ms >= 0.0) {
        return Err(bad_input(anyhow::anyhow!("--tcp-gap-ms {}: a number of milliseconds, 0 or more", a.tcp_gap_ms)));
    }
    opts.tcp_gap_ms = a.tcp_gap_ms;
    for (flag, v) in [("--warm-up", a.warm_up), ("--cool-down", a.cool_down), ("--min-hold", a.min_hold)] {
        if !(v.is_finite() && (0.0..=86_400.0).contains(&v)) {
            return Err(bad_input(anyhow::anyhow!("{flag} {v}: a number of seconds from 0 to 86400")));
        }
    }
    (opts.warmup_s, opts.cooldown_s, opts.min_hold_s) = (a.warm_up, a.cool_down, a.min_hold);
    if let Some(path) = &a.states {
        let text = horde_model::files::read_text(path, 16 << 20, "--states").map_err(|e| bad_input(anyhow::anyhow!(e)))?;
        opts.labels = Some(Labels::parse(&text).map_err(|e| bad_input(anyhow::anyhow!("--states {}: {e}", path.display())))?);
    }
    Ok(opts)
}

/// A way to open the capture (it is read twice when the server must be found first); a path
/// that is not a regular file (a FIFO, a device) is refused before anything is read.
fn opener(path: &Path) -> Result<impl FnMut() -> std::io::Result<BufReader<File>>, crate::Failure> {
    let f = horde_sys::fs::open_for_reading(path).map_err(|e| bad_input(anyhow::anyhow!("{}: {e} (give a pcap or pcapng file)", path.display())))?;
    let meta = f.metadata().with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        return Err(bad_input(anyhow::anyhow!("{}: not a regular file (give a pcap or pcapng file; a FIFO or a device cannot be read twice)", path.display())));
    }
    let path = path.to_path_buf();
    Ok(move || File::open(&path).map(|f| BufReader::with_capacity(1 << 20, f)))
}

/// APDUs read from one report at most (24 bytes each in memory); past it the rest is left out
/// and the terminal says so.
const MAX_REPORT_APDUS: usize = 20_000_000;

/// A Horde report directory's departures as APDUs (the loop closed without a second capture):
/// the players' (`client.hlog`: up, each player one client) and the server side's
/// (`server.hlog`: down), at their actual departure instants; the server is where the
/// players' flows went (their destination records).
fn report_apdus(dir: &Path) -> Result<(Vec<Apdu>, Server), crate::Failure> {
    use std::io::Read as _;
    let mut apdus = Vec::new();
    let mut server = Server { addr: std::net::SocketAddr::from(([0, 0, 0, 0], 0)), transport: Transport::Udp };
    for (name, direction) in [("client.hlog", Direction::Up), ("server.hlog", Direction::Down)] {
        let path = dir.join(name);
        let f = horde_sys::fs::open_for_reading(&path).map_err(|e| {
            bad_input(anyhow::anyhow!("{}: {e}: --compare takes a capture or a `horde run` report directory (client.hlog and server.hlog)", path.display()))
        })?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        let mut head = [0u8; horde_wire::LOG_HEADER_LEN];
        r.read_exact(&mut head).with_context(|| format!("reading {}", path.display()))?;
        horde_wire::LogHeader::parse(&head).map_err(|e| bad_input(anyhow::anyhow!("{}: not a Horde log ({e})", path.display())))?;
        let mut rec = [0u8; horde_wire::RECORD_LEN];
        while r.read_exact(&mut rec).is_ok() {
            let Ok(x) = horde_wire::Record::parse(&rec) else { continue };
            if let Some(e) = horde_wire::Endpoint::of(&x).filter(|e| direction == Direction::Up && e.end == horde_wire::RecordKind::Destination) {
                server.addr = e.addr;
                server.transport = if e.protocol == horde_wire::log::PROTO_TCP { Transport::Tcp } else { Transport::Udp };
            }
            if x.kind != horde_wire::RecordKind::Sent {
                continue;
            }
            if apdus.len() >= MAX_REPORT_APDUS {
                eprintln!("horde fit: {}: the first {MAX_REPORT_APDUS} departures read, the rest left out", dir.display());
                return Ok((apdus, server));
            }
            apdus.push(Apdu { direction, client: x.flow, t_ns: x.t_b, size: u64::from(x.size) });
        }
    }
    Ok((apdus, server))
}

fn write(path: &Path, text: &str) -> Result<(), crate::Failure> {
    Ok(std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?)
}

fn print_fits(r: &FitReport) -> Result<(), crate::Failure> {
    let mut t = String::new();
    t.push_str(&format!("{:<10} {:<4} {:<4} {:<w$} {:>8} {:>10} {:>8}\n", "state", "dir", "of", "fitted", "KS", "5 % crit.", "n", w = TERMINAL_DIST));
    for d in &r.directions {
        for (what, f) in [("idt", &d.idt), ("size", &d.size)] {
            if let Some(f) = f {
                let flag = if f.ks > f.ks_critical { "  FAILS its test" } else { "" };
                t.push_str(&format!(
                    "{:<10} {:<4} {:<4} {:<w$} {:>8.4} {:>10.4} {:>8}{flag}\n",
                    d.state,
                    format!("{:?}", d.direction).to_lowercase(),
                    what,
                    shorten(&f.dist),
                    f.ks,
                    f.ks_critical,
                    f.n,
                    w = TERMINAL_DIST
                ));
            }
        }
    }
    for n in &r.notes {
        t.push_str(&format!("note: {n}\n"));
    }
    crate::output::out(&t)
}

/// A long distribution on one terminal line: its head and how much is left out.
fn shorten(dist: &str) -> String {
    if dist.chars().count() <= TERMINAL_DIST {
        return dist.to_string();
    }
    let atoms = dist.matches(':').count();
    let tail = if atoms > 0 { format!("… {atoms} atoms)") } else { "…".to_string() };
    let head: String = dist.chars().take(TERMINAL_DIST.saturating_sub(tail.chars().count())).collect();
    format!("{head}{tail}")
}

fn print_comparisons(rows: &[Comparison]) -> Result<(), crate::Failure> {
    let mut t = String::new();
    for c in rows {
        let dir = format!("{:?}", c.direction).to_lowercase();
        let means = format!("mean {:.2} / {}", c.mean_a, c.mean_b.map_or("-".into(), |m| format!("{m:.2}")));
        t.push_str(&format!(
            "compare {:<10} {dir:<4} {:<4} KS {:.4} [{:.4}] n {} / {} {means} {}{}\n",
            c.state,
            c.what,
            c.ks,
            c.ks_critical,
            c.n_a,
            c.n_b,
            if c.alike { "alike" } else { "DIFFERENT" },
            c.ks_us.map_or(String::new(), |us| format!(" (on whole ms; KS {us:.4} at µs)"))
        ));
    }
    crate::output::out(&t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_distributions_are_shortened_on_the_terminal_only() {
        assert_eq!(shorten("normal(130, 30)"), "normal(130, 30)");
        let atoms: Vec<String> = (0..200).map(|i| format!("{i}:0.005")).collect();
        let long = format!("discrete({})", atoms.join(", "));
        let s = shorten(&long);
        assert!(s.chars().count() <= TERMINAL_DIST && s.ends_with("… 200 atoms)"), "{s}");
        assert!(long.starts_with(s.trim_end_matches("… 200 atoms)")));
    }
}
