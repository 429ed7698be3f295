//! Models from captures: a packet capture of a real game in, a Horde service and a fit report
//! out.
//!
//! The steps, each its own module:
//! 1. [`capture`] reads pcap or pcapng frames, streamed, into UDP datagrams and TCP segments;
//! 2. [`apdu`] picks the game server's flows and rebuilds application data units;
//! 3. [`samples`] splits them by state (from a labels file) and direction into sizes and
//!    inter-departure times, in bounded reservoirs;
//! 4. [`families`] fits every family Horde can draw by maximum likelihood and picks by AIC;
//!    [`players`] writes the server's side as power laws of the player count where the
//!    capture shows several;
//! 5. [`service`] writes the result as a service file (`docs/services.md`'s schema) with the
//!    fit table as comments, and [`html`] the report page with measured and fitted CDFs.
//!
//! Architecture invariant: pure — no files, sockets or clocks. The caller hands over a way to
//! open the capture (it is read twice when the server must be found first).

use std::io::Read;

use serde::Serialize;

pub mod across;
pub mod apdu;
pub mod capture;
pub mod changes;
pub mod families;
pub mod html;
pub mod players;
pub mod reservoir;
pub mod samples;
pub mod service;

use apdu::{Apdu, Census, Counts, Direction, Reassembly, Server};
use capture::{Capture, CaptureError, Skipped};
use families::{fit, Fit, Sample};
use samples::{Collector, Labels, Steady};

/// What to fit and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// The game server; None: the endpoint with the most peers.
    pub server: Option<Server>,
    /// A pause within one TCP direction longer than this ends an APDU (ms).
    pub tcp_gap_ms: f64,
    /// Activity ranges; None: one state over the whole capture.
    pub labels: Option<Labels>,
    /// Without labels: guess states where the per-player rate changes ([`changes`]; a guess,
    /// and the report says so).
    pub guess_states: bool,
    /// Each client's first and last seconds left out of the steady state (connecting: a game's
    /// gamestate and first full snapshots; leaving); 0 keeps all (docs/fit.md).
    pub warmup_s: f64,
    pub cooldown_s: f64,
    /// A player count is a point of a law over players only if it held this long (s) without
    /// a change (the counts a server passes through while players join are not).
    pub min_hold_s: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options { server: None, tcp_gap_ms: 1.0, labels: None, guess_states: false, warmup_s: 2.0, cooldown_s: 1.0, min_hold_s: 5.0 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error("the capture holds no UDP or TCP packet{0}")]
    NoTraffic(String),
    #[error("no packet goes to or from the server {0}; pick another with --server ADDR:PORT[/udp|/tcp]")]
    ServerSilent(String),
}

/// The fit report (`docs/schemas/fit.schema.json`).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct FitReport {
    pub schema_version: u32,
    pub server: Server,
    /// How the server was chosen.
    pub server_chosen: String,
    /// Frames read, and UDP/TCP packets among them.
    pub frames: u64,
    pub packets: u64,
    pub skipped: Skipped,
    pub counts: Counts,
    pub clients: usize,
    /// From the first APDU to the last.
    pub duration_s: f64,
    pub tcp_gap_ms: f64,
    /// APDUs outside every labelled range.
    pub unlabelled: u64,
    pub states: Vec<StateFit>,
    /// Per state and direction: inter-departure times and sizes.
    pub directions: Vec<DirectionFit>,
    /// What the reader should know (choices made, what was left out).
    pub notes: Vec<String>,
    /// Fitted from several captures, each of one player count (`horde fit A B C
    /// --players-from`): the law over players and each count left out ([`with_across`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub across: Option<across::Across>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct StateFit {
    pub name: String,
    /// Share of the labelled time: the first-state weight.
    pub share: f64,
    /// Labelled ranges of this state.
    pub stays: usize,
    /// Dwell time (s), fitted when the state has two stays or more.
    pub dwell: Option<Fit>,
    /// Moves to each state (in `states` order) seen after a stay of this one.
    pub transitions: Vec<u64>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct DirectionFit {
    pub direction: Direction,
    pub state: String,
    /// APDUs seen (the fit uses a reservoir of at most 200,000).
    pub apdus: u64,
    pub idt: Option<Fit>,
    pub size: Option<Fit>,
    /// Server → client, where the capture shows the server with three player counts or more:
    /// the same families with power laws of the player count `N` (docs/fit.md).
    pub players: Option<players::OverPlayers>,
}

/// Puts the law over players of several captures ([`across::across`]) into the report of one
/// of them: its server → client direction (the first state's) carries the law, and the notes
/// say which law was kept or rejected and how each count left out was predicted.
pub fn with_across(r: &mut FitReport, a: across::Across) {
    let state = r.states.first().map(|s| s.name.clone()).unwrap_or_default();
    r.notes.extend(law_notes(&state, &a.law));
    for h in &a.held_out {
        r.notes.push(format!(
            "{state} down size, {} players left out: the law of the other counts is KS {:.4} there, against {:.4} ({} capture(s); its own fit {:.4}{}) — {}",
            h.players,
            h.ks,
            h.limit,
            h.captures,
            h.own_ks,
            h.spread_ks.map(|s| format!(", sessions apart by {s:.4}")).unwrap_or_default(),
            if h.holds { "predicted" } else { "NOT predicted" }
        ));
    }
    if let Some(d) = r.directions.iter_mut().find(|d| d.direction == Direction::Down && d.state == state) {
        d.players = Some(a.law.clone());
    }
    r.across = Some(a);
}

/// A capture read through: its samples and what the report says about the reading.
pub struct Collected {
    pub collector: Collector,
    pub server: Server,
    pub server_chosen: String,
    pub frames: u64,
    pub packets: u64,
    pub skipped: Skipped,
    pub counts: Counts,
    pub clients: usize,
    /// How the states were guessed, when they were.
    pub guessed: Option<String>,
}

/// Reads the capture `open()` returns (once, or twice when the server must be found) into
/// samples per state and direction.
pub fn collect<R: Read>(mut open: impl FnMut() -> std::io::Result<R>, opts: &Options) -> Result<Collected, FitError> {
    let (server, server_chosen) = match opts.server {
        Some(s) => (s, "given".to_string()),
        None => {
            let mut cap = Capture::new(open().map_err(CaptureError::Io)?)?;
            let mut census = Census::default();
            while let Some(p) = cap.next_packet() {
                census.see(&p);
            }
            let Some((s, peers, packets)) = census.server() else {
                return Err(FitError::NoTraffic(ended(&cap.skipped)));
            };
            let why = format!("the endpoint with the most peers ({peers} clients, {packets} packets); pass --server to choose another");
            (s, why)
        }
    };
    let mut c = read(&mut open, server, server_chosen, opts.labels.clone().unwrap_or_else(Labels::whole), opts)?;
    if opts.guess_states && opts.labels.is_none() {
        if let Some(labels) = changes::guess(&c.collector.per_second) {
            let (server_chosen, names) = (c.server_chosen.clone(), labels.names.join(", "));
            c = read(&mut open, server, server_chosen, labels, opts)?;
            c.guessed = Some(format!("states guessed where the per-player rate changes ({names}); label the capture (--states) to know"));
        }
    }
    Ok(c)
}

/// One pass over the capture with the server and the states known.
fn read<R: Read>(
    open: &mut impl FnMut() -> std::io::Result<R>,
    server: Server,
    server_chosen: String,
    labels: Labels,
    opts: &Options,
) -> Result<Collected, FitError> {
    let gap_ns = (opts.tcp_gap_ms.max(0.0) * 1e6) as u64;
    // the first pass: each client's first and last APDU and how many (who is a player, and
    // where its steady state starts and ends)
    let mut steady = Steady { warmup_ns: secs(opts.warmup_s), cooldown_ns: secs(opts.cooldown_s), ..Steady::all() };
    each_apdu(open, server, gap_ns, |seen| {
        if let Seen::Apdu(a) = seen {
            steady.see(a);
        }
    })?;
    let mut collector = Collector::new(labels, steady);
    let (skipped, frames, re, packets) = each_apdu(open, server, gap_ns, |seen| match seen {
        Seen::Packet(t_ns) => collector.origin(t_ns),
        Seen::Apdu(a) => collector.push(a),
    })?;
    collector.finish();
    if packets == 0 {
        return Err(FitError::NoTraffic(ended(&skipped)));
    }
    if re.clients.is_empty() {
        return Err(FitError::ServerSilent(format!("{}/{:?}", server.addr, server.transport).to_lowercase()));
    }
    let clients = collector.steady.players();
    Ok(Collected { collector, server, server_chosen, frames, packets, skipped, counts: re.counts, clients, guessed: None })
}

/// APDUs that did not come from a capture (a Horde report's per-packet logs: each side's
/// departures), read as a capture's are: the same steady state, the same samples, so
/// `compare` closes the loop without a second capture. `server` names where they went and on
/// which transport (the notes on sizes below Horde's header depend on it).
pub fn collect_apdus(mut apdus: Vec<Apdu>, server: Server, server_chosen: String, opts: &Options) -> Result<Collected, FitError> {
    if apdus.is_empty() {
        return Err(FitError::NoTraffic(" (the logs hold no departure)".into()));
    }
    apdus.sort_by_key(|a| a.t_ns);
    let mut steady = Steady { warmup_ns: secs(opts.warmup_s), cooldown_ns: secs(opts.cooldown_s), ..Steady::all() };
    for a in &apdus {
        steady.see(a);
    }
    let mut collector = Collector::new(opts.labels.clone().unwrap_or_else(Labels::whole), steady);
    collector.origin(apdus[0].t_ns);
    for a in &apdus {
        collector.push(a);
    }
    collector.finish();
    let clients = collector.steady.players();
    let packets = apdus.len() as u64;
    Ok(Collected { collector, server, server_chosen, frames: packets, packets, skipped: Skipped::default(), counts: Counts::default(), clients, guessed: None })
}

/// Seconds as whole ns; anything but a positive finite number is 0.
fn secs(s: f64) -> u64 {
    if s.is_finite() && s > 0.0 {
        (s * 1e9) as u64
    } else {
        0
    }
}

/// What one pass over a capture sees, in order: each packet's time, and each APDU rebuilt.
enum Seen<'a> {
    Packet(u64),
    Apdu(&'a Apdu),
}

/// One pass over the capture `open()` gives, each packet and each APDU rebuilt for `server`
/// handed to `f`. Returns what the capture skipped, its frames, the reassembly as it ended
/// (its clients and counts) and the packets read.
fn each_apdu<R: Read>(
    open: &mut impl FnMut() -> std::io::Result<R>,
    server: Server,
    gap_ns: u64,
    mut f: impl FnMut(Seen<'_>),
) -> Result<(Skipped, u64, Reassembly, u64), FitError> {
    let mut cap = Capture::new(open().map_err(CaptureError::Io)?)?;
    let mut re = Reassembly::new(server, gap_ns);
    let mut apdus = Vec::new();
    let mut packets = 0u64;
    while let Some(p) = cap.next_packet() {
        packets += 1;
        f(Seen::Packet(p.t_ns));
        re.push(&p, &mut apdus);
        apdus.drain(..).for_each(|a| f(Seen::Apdu(&a)));
    }
    re.finish(&mut apdus);
    apdus.drain(..).for_each(|a| f(Seen::Apdu(&a)));
    let frames = cap.frames();
    Ok((cap.skipped, frames, re, packets))
}

/// Fits the capture `open()` returns (see [`collect`]).
pub fn fit_capture<R: Read>(open: impl FnMut() -> std::io::Result<R>, opts: &Options) -> Result<FitReport, FitError> {
    Ok(report(&collect(open, opts)?, opts))
}

/// The fit report of a capture read through.
pub fn report(c: &Collected, opts: &Options) -> FitReport {
    let mut notes: Vec<String> = c.guessed.iter().cloned().collect();
    if let Some(why) = &c.skipped.ended {
        notes.push(format!("the capture ends early: {why}"));
    }
    if c.server.transport == apdu::Transport::Tcp {
        notes.push(format!("TCP: an APDU ends at PSH, FIN/RST or a pause over {} ms (--tcp-gap-ms)", opts.tcp_gap_ms));
    }
    if c.skipped.horde_control > 0 {
        notes.push(format!(
            "{} of Horde's own control datagrams (hellos, challenges, consent probes, echo replies) are not part of the model",
            c.skipped.horde_control
        ));
    }
    if c.counts.gso_datagrams > 0 {
        notes.push(format!(
            "{} GSO super-datagrams (several of Horde's datagrams sent in one, captured before the cut) split into the datagrams they carried",
            c.counts.gso_datagrams
        ));
    }
    if c.counts.horde_control > 0 {
        notes.push(format!("{} of Horde's own stream hellos and end-of-flow signals (TCP) are not part of the model", c.counts.horde_control));
    }
    let col = &c.collector;
    let (states, directions, law_notes) = fits(col, opts);
    notes.extend(steady_notes(col, opts));
    notes.extend(law_notes);
    notes.extend(failed_fits(&directions));
    notes.extend(below_header(col, c.server.transport));
    let duration_s = col.first_ns.map_or(0.0, |f| (col.last_ns - f) as f64 / 1e9);
    FitReport {
        schema_version: 1,
        server: c.server,
        server_chosen: c.server_chosen.clone(),
        frames: c.frames,
        packets: c.packets,
        skipped: c.skipped.clone(),
        counts: c.counts.clone(),
        clients: c.clients,
        duration_s,
        tcp_gap_ms: opts.tcp_gap_ms,
        unlabelled: col.unlabelled,
        states,
        directions,
        notes,
        across: None,
    }
}

/// What was left out of the steady state: query-only clients and each player's warm-up and
/// cool-down.
fn steady_notes(col: &Collector, opts: &Options) -> Vec<String> {
    let mut out = Vec::new();
    let queries = col.steady.spans.len() - col.steady.players();
    if queries > 0 {
        out.push(format!(
            "{queries} client(s) with fewer than {} APDUs are queries, not players (a status request's socket): not counted, their {} APDUs left out",
            samples::MIN_PLAYER_APDUS,
            col.query_apdus
        ));
    }
    if opts.warmup_s > 0.0 || opts.cooldown_s > 0.0 {
        out.push(format!(
            "steady state: each client's first {} s and last {} s left out ({} APDUs: connecting and leaving traffic; --warm-up 0 --cool-down 0 keeps all)",
            opts.warmup_s, opts.cooldown_s, col.transient_apdus
        ));
    }
    out
}

/// One sample of two captures side by side: the two-sample KS distance against its critical
/// value at both sizes (5 %).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Comparison {
    pub state: String,
    pub direction: Direction,
    /// `idt` (ms) or `size` (bytes).
    pub what: String,
    pub n_a: u64,
    /// 0 when B is a model (a one-sample distance).
    pub n_b: u64,
    /// Means of A and B (for a model: its mean, or an estimate where rounding or bounds
    /// leave no closed form); a point-mass model's KS distance says little, the means say more.
    pub mean_a: f64,
    pub mean_b: Option<f64>,
    pub ks: f64,
    pub ks_critical: f64,
    /// The KS distance is below its critical value: the two cannot be told apart at 5 %.
    pub alike: bool,
    /// Gaps judged on whole milliseconds (a sample on a 1-ms lattice, as the fit reads it):
    /// the distance at microseconds, shown beside `ks` (jitter of microseconds around whole
    /// milliseconds makes two such samples look different at microseconds alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ks_us: Option<f64>,
}

/// Every sample the two captures share (by state name and direction), compared.
pub fn compare(a: &Collected, b: &Collected) -> Vec<Comparison> {
    let mut out = Vec::new();
    for (i, name) in a.collector.labels.names.iter().enumerate() {
        let Some(j) = b.collector.labels.names.iter().position(|n| n == name) else {
            continue;
        };
        for (d, direction) in [Direction::Up, Direction::Down].into_iter().enumerate() {
            let (sa, ia) = &a.collector.samples[i][d];
            let (sb, ib) = &b.collector.samples[j][d];
            for (what, x, y) in [("idt", ia, ib), ("size", sa, sb)] {
                let (mut xa, mut yb) = (x.values.clone(), y.values.clone());
                let Some((ks, ks_us)) = distance(&mut xa, &mut yb, what == "idt") else {
                    continue;
                };
                let (n_a, n_b) = (xa.len() as u64, yb.len() as u64);
                let ks_critical = horde_model::fit::ks_two_sample_critical(n_a, n_b, families::ALPHA);
                let (mean_a, mean_b) = (mean(&xa), Some(mean(&yb)));
                out.push(Comparison {
                    state: name.clone(),
                    direction,
                    what: what.into(),
                    n_a,
                    n_b,
                    mean_a,
                    mean_b,
                    ks,
                    ks_critical,
                    alike: ks < ks_critical,
                    ks_us,
                });
            }
        }
    }
    out
}

/// Every sample of a capture against a service's model (its variables at their defaults, the
/// first sub-activity): the one-sample KS distance of the capture against the model's CDF.
/// States pair by name, or the capture's only state with the service's only one.
pub fn against(a: &Collected, service: &horde_model::service::Service) -> Result<Vec<Comparison>, String> {
    let bound = service.bind(&Default::default()).map_err(|(field, msg)| format!("{field}: {msg}"))?;
    let names = &a.collector.labels.names;
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let j = match service.states.iter().position(|s| &s.name == name) {
            Some(j) => j,
            None if names.len() == 1 && service.states.len() == 1 => 0,
            None => continue,
        };
        for (d, direction) in [Direction::Up, Direction::Down].into_iter().enumerate() {
            let Some(model) = bound.by_state[j].first().and_then(|subs| subs[d].as_ref()) else {
                continue;
            };
            let (sizes, idts) = &a.collector.samples[i][d];
            for (what, sample, dist) in [("idt", idts, &model.idt), ("size", sizes, &model.size)] {
                if sample.values.is_empty() {
                    continue;
                }
                // a model of whole numbers is judged on the sample's nearest whole numbers
                // (a gap of 54.98 ms is the model's 55 sent 20 µs early)
                let whole = dist.round != horde_model::dist::Round::None;
                let mut xs: Vec<f64> = sample.values.iter().map(|x| if whole { x.round() } else { *x }).collect();
                let ks = horde_model::fit::ks_distance(&mut xs, |x| dist.cdf(x));
                let n = xs.len() as u64;
                let ks_critical = horde_model::fit::ks_critical(xs.len(), families::ALPHA);
                let state = format!("{name} vs {}", service.states[j].name);
                let (mean_a, mean_b) = (mean(&sample.values), dist.mean().or_else(|| dist.mean_estimate()));
                out.push(Comparison {
                    state,
                    direction,
                    what: what.into(),
                    n_a: n,
                    n_b: 0,
                    mean_a,
                    mean_b,
                    ks,
                    ks_critical,
                    alike: ks < ks_critical,
                    ks_us: None,
                });
            }
        }
    }
    Ok(out)
}

/// Where the chosen family fails its own goodness-of-fit test (KS above its 5 % critical value
/// at n): said, not hidden, because the service file is then only the best of what Horde can
/// draw, not a model the capture supports.
fn failed_fits(directions: &[DirectionFit]) -> Vec<String> {
    let mut out = Vec::new();
    for d in directions {
        for (what, f) in [("inter-departure times", &d.idt), ("sizes", &d.size)] {
            if let Some(f) = f.as_ref().filter(|f| f.ks > f.ks_critical) {
                out.push(format!(
                    "FIT FAILS ITS TEST: {} {} {what}: the best family, {}, is KS {:.4} from the capture, above the 5 % critical value {:.4} at n = {}: the service draws something the capture does not show (label states, or fit a shorter, steadier stretch)",
                    d.state,
                    dir_name(d.direction),
                    f.family,
                    f.ks,
                    f.ks_critical,
                    f.n
                ));
            }
        }
    }
    out
}

/// APDUs smaller than what Horde can send on the capture's transport (a datagram carries
/// Horde's 20-byte header, a TCP APDU its 6-byte framing): a run sends them at that size.
fn below_header(c: &Collector, transport: apdu::Transport) -> Vec<String> {
    let floor = match transport {
        apdu::Transport::Udp => horde_wire::datagram::DATAGRAM_HEADER_LEN,
        apdu::Transport::Tcp => horde_wire::stream::APDU_HEADER_LEN,
    } as f64;
    let mut out = Vec::new();
    for (i, name) in c.labels.names.iter().enumerate() {
        for (d, direction) in [Direction::Up, Direction::Down].into_iter().enumerate() {
            let sizes = &c.samples[i][d].0.values;
            let small = sizes.iter().filter(|&&x| x < floor).count();
            if small > 0 {
                let least = sizes.iter().copied().fold(f64::INFINITY, f64::min);
                out.push(format!(
                    "{name} {}: {small} of {} APDUs sampled are smaller than the {floor} bytes Horde's header takes on this transport (the smallest {least} B); a run sends those at {floor} B, so its sizes sit slightly above the capture's there",
                    dir_name(direction),
                    sizes.len()
                ));
            }
        }
    }
    out
}

fn dir_name(d: Direction) -> &'static str {
    match d {
        Direction::Up => "client→server",
        Direction::Down => "server→client",
    }
}

/// The two-sample KS distance; for gaps (`gaps`) on a 1-ms lattice in either sample, on whole
/// milliseconds (the resolution the fit reads them at), with the microsecond distance beside.
fn distance(a: &mut [f64], b: &mut [f64], gaps: bool) -> Option<(f64, Option<f64>)> {
    let fine = horde_model::fit::ks_two_sample(a, b)?;
    if !(gaps && (families::lattice_c(a) >= families::LATTICE_C || families::lattice_c(b) >= families::LATTICE_C)) {
        return Some((fine, None));
    }
    let (mut ra, mut rb): (Vec<f64>, Vec<f64>) = (a.iter().map(|v| v.round()).collect(), b.iter().map(|v| v.round()).collect());
    Some((horde_model::fit::ks_two_sample(&mut ra, &mut rb).unwrap_or(fine), Some(fine)))
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

fn ended(s: &Skipped) -> String {
    let mut why = format!(
        " ({} not IP, {} fragments, {} other protocols, {} malformed, {} of unknown link types, {} Horde control datagrams)",
        s.not_ip, s.fragments, s.other_protocol, s.malformed, s.unknown_link, s.horde_control
    );
    if let Some(e) = &s.ended {
        why.push_str(&format!("; it ends early: {e}"));
    }
    why
}

/// Per state and direction, the fits; and what the reader should know of the laws over
/// players: tried, kept or rejected, and why.
fn fits(c: &Collector, opts: &Options) -> (Vec<StateFit>, Vec<DirectionFit>, Vec<String>) {
    let mut notes = Vec::new();
    let (share, stays, moves) = c.behaviour();
    let total: f64 = share.iter().sum();
    let states = c
        .labels
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| StateFit {
            name: name.clone(),
            share: if total > 0.0 { families::sig(share[i] / total) } else { 0.0 },
            stays: stays[i].len(),
            dwell: (c.labels.names.len() > 1).then(|| fit(&stays[i], Sample::Seconds)).flatten(),
            transitions: moves[i].clone(),
        })
        .collect();
    let mut directions = Vec::new();
    for (i, name) in c.labels.names.iter().enumerate() {
        for (d, direction) in [Direction::Up, Direction::Down].into_iter().enumerate() {
            let (sizes, idts) = &c.samples[i][d];
            if sizes.seen == 0 {
                continue;
            }
            let (idt, size) = (fit(&idts.values, Sample::Millis), fit(&sizes.values, Sample::Counts));
            let players = match direction {
                Direction::Down if c.by_players[i].len() > 1 => match players::over_players(&c.by_players[i], &c.held_s, opts.min_hold_s, players::MIN_SHARE) {
                    Ok(over) => {
                        notes.extend(law_notes(name, &over));
                        Some(over)
                    }
                    Err(why) => {
                        // said where the capture shows the server at two counts or more with
                        // APDUs enough (not where players only joined at the start)
                        let counts = c.by_players[i].values().filter(|(s, _)| s.seen >= players::MIN_PER_COUNT).count();
                        if counts >= 2 {
                            notes.push(format!("{name} down: {why}"));
                        }
                        None
                    }
                },
                _ => None,
            };
            directions.push(DirectionFit { direction, state: name.clone(), apdus: sizes.seen, idt, size, players });
        }
    }
    (states, directions, notes)
}

/// Each law over players tried: kept (it holds at every count) or rejected (where it misses),
/// and the counts left out of it.
fn law_notes(state: &str, over: &players::OverPlayers) -> Vec<String> {
    let mut out = Vec::new();
    for (what, f) in [("idt", &over.idt), ("size", &over.size)] {
        let Some(f) = f else { continue };
        let counts = f.counts.iter().map(|c| c.players.to_string()).collect::<Vec<_>>().join(", ");
        out.push(match &f.missed {
            None => format!("{state} down {what}: law over players kept, {} (holds at {counts} players)", f.dist),
            Some(why) => format!("{state} down {what}: law over players REJECTED, {} ({why}); the service keeps the pooled fit", f.dist),
        });
    }
    if !over.left_out.is_empty() {
        out.push(format!("{state} down: player counts left out of the laws: {}", over.left_out.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two captures of one sender whose gaps are whole milliseconds, each seen with its own
    /// microseconds of jitter: alike on whole milliseconds (the fit's resolution), far apart at
    /// microseconds (issue 65: every real-vs-Horde comparison read DIFFERENT).
    #[test]
    fn gaps_on_a_lattice_are_compared_on_whole_milliseconds() {
        let gap = |k: usize, jitter: f64| (k % 7 + 10) as f64 + jitter * ((k * 7919) % 100) as f64 / 100.0;
        let mut a: Vec<f64> = (0..4000).map(|k| gap(k, 0.05)).collect();
        let mut b: Vec<f64> = (0..4000).map(|k| gap(k + 3, -0.05)).collect();
        let (ks, us) = distance(&mut a, &mut b, true).unwrap();
        let crit = horde_model::fit::ks_two_sample_critical(4000, 4000, 0.05);
        assert!(ks < crit && us.unwrap() > 3.0 * crit, "whole ms {ks}, µs {us:?}, critical {crit}");
        // sizes and smooth gaps: one resolution
        let mut c: Vec<f64> = (0..1000).map(|k| k as f64 * 0.37).collect();
        let mut d = c.clone();
        assert_eq!(distance(&mut c, &mut d, true).unwrap().1, None);
    }
}
