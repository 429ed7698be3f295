//! The fleet core: what every kind of run through agents shares. It connects to the agents
//! (mutually authenticated TLS, version check, clock samples: [`crate::link`]), assigns each its
//! part in stages and waits until they are ready, starts them at one instant, watches progress,
//! faults and the end, stops them in order, collects their logs each bounded by the kind's own
//! plan, and closes. A run kind ([`crate::controller`] for scenarios, [`crate::flows`] for flow
//! files, [`crate::bots`] for game-server bots) plans the parts and turns what the fleet
//! gathered into its report.
//!
//! Roles: an agent's part has *upstream* roles (players, senders, bots: they end by themselves)
//! and *downstream* roles (a server side, receivers: they run until told to stop). Once every
//! upstream role has finished or its agent was lost, the downstream roles are stopped; on Ctrl-C
//! the upstream ones are stopped first, so what is in flight still arrives.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use horde_engine::clock::real_ns;

use crate::link::{Cmd, Collected, Conn, Ev, Events};
use crate::msg::{self, Part};

mod steer;
use steer::PendingLink;

/// After a stop, how long agents may take to say they finished: 10 s (a server side flushes
/// its log within a second); after Ctrl-C, 2 s, so that the controller ends within 5 s.
pub(crate) const FINISH_WITHIN: Duration = Duration::from_secs(10);
pub(crate) const FINISH_AFTER_SIGNAL: Duration = Duration::from_secs(2);

/// The roles that run until told to stop; every other role ends by itself.
const DOWNSTREAM_ROLES: [&str; 2] = ["server", "recv"];

/// One agent as the user named it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub addr: SocketAddr,
    /// Its share of the players (relative; default 1).
    pub weight: u32,
}

/// Parses an agent list: comma-separated `HOST:PORT[*WEIGHT]`, `dns:NAME:PORT` (every address
/// the name resolves to: a Kubernetes headless service), or `@FILE` (one entry per line, `#`
/// comments).
pub fn parse_agents(list: &str) -> anyhow::Result<Vec<AgentSpec>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(f) = item.strip_prefix('@') {
            let text = horde_model::files::read_text(Path::new(f), 1 << 20, "agent lists").with_context(|| format!("--agents @{f}"))?;
            for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
                if line.starts_with('@') {
                    bail!("--agents @{f}: `{line}`: an agent file cannot name another file");
                }
                out.extend(parse_agents(line)?);
            }
            continue;
        }
        let (entry, weight) = match item.rsplit_once('*') {
            Some((e, w)) => (
                e,
                w.parse::<u32>().ok().filter(|w| (1..=1000).contains(w)).with_context(|| format!("--agents `{item}`: the weight after * must be 1..=1000"))?,
            ),
            None => (item, 1),
        };
        if let Some(name) = entry.strip_prefix("dns:") {
            let mut addrs: Vec<SocketAddr> = name
                .to_socket_addrs()
                .with_context(|| format!("--agents `{item}`: resolving {name} (dns:NAME:PORT, e.g. dns:horde-agents.default.svc.cluster.local:7800)"))?
                .collect();
            addrs.sort();
            addrs.dedup();
            if addrs.is_empty() {
                bail!("--agents `{item}`: {name} resolves to no address");
            }
            out.extend(addrs.into_iter().map(|addr| AgentSpec { addr, weight }));
            continue;
        }
        let addr = entry
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .with_context(|| format!("--agents `{item}`: not HOST:PORT (e.g. 10.0.0.5:7800), dns:NAME:PORT or @FILE"))?;
        out.push(AgentSpec { addr, weight });
    }
    if out.is_empty() {
        bail!("--agents names no agent");
    }
    for (i, a) in out.iter().enumerate() {
        if out[..i].iter().any(|b| b.addr == a.addr) {
            bail!("--agents names {} twice", a.addr);
        }
    }
    Ok(out)
}

/// What the controller reports while it runs: the run's one event type, as on one machine
/// (a second's progress — the agents' rates summed and each, their totals and, for a scenario,
/// the players per category — is its `Tick`).
pub use horde_scenario::Event;

/// One agent of the fleet and what the controller learnt of it.
pub(crate) struct Member {
    pub c: Conn,
    /// It runs players, senders or bots (roles that end by themselves).
    pub upstream: bool,
    /// It runs a server side or receivers (roles stopped once the upstream ones are done).
    pub downstream: bool,
    pub roles_left: u32,
    pub upstream_done: bool,
    pub lost_at_s: Option<f64>,
    pub status: String,
    pub last: msg::Progress,
    pub prev: msg::Progress,
    /// Each finished role's report as the agent sent it (the kind parses it, bounded by its plan).
    pub reports: Vec<(String, serde_json::Value)>,
    pub cpu_s: f64,
    pub max_rss_kb: u64,
    pub log_bytes: u64,
    pub log_transferred: u64,
    pub collected: bool,
    /// Its live summary's pieces so far (a scenario run's players and server side).
    pub live: Option<crate::live::Shared>,
}

impl Member {
    /// The report of `role`, parsed; none if absent or not of the expected shape.
    pub fn report<T: serde::de::DeserializeOwned>(&self, role: &str) -> Option<T> {
        self.reports.iter().find(|(r, _)| r == role).and_then(|(_, v)| serde_json::from_value(v.clone()).ok())
    }

    pub fn ok(&self) -> bool {
        self.lost_at_s.is_none()
    }

    /// The columns every kind reports for an agent.
    pub fn stats(&self) -> horde_scenario::AgentStats {
        horde_scenario::AgentStats {
            cpu_s: self.cpu_s,
            max_rss_kb: self.max_rss_kb,
            clock_offset_ms: self.c.clock.offset_ns as f64 / 1e6,
            clock_uncertainty_ms: self.c.clock.uncertainty_ns as f64 / 1e6,
            rtt_ms: self.c.clock.rtt_ns as f64 / 1e6,
            status: if self.ok() && self.status == "connected" { "finished".into() } else { self.status.clone() },
            log_bytes: self.log_bytes,
            log_bytes_transferred: self.log_transferred,
        }
    }
}

/// How a kind wants its run watched.
pub(crate) struct Watch<'w> {
    /// Stop every agent this long after the start (the run's planned end plus a margin).
    pub hard_end: Duration,
    /// What the overrun note says.
    pub overrun: String,
    /// Losing a downstream agent (the server side) ends the run for everyone.
    pub downstream_lost_stops_all: bool,
    /// What a lost upstream agent's note adds, by its index (e.g. "; its players 0..50 are
    /// missing from the report").
    pub missing: &'w dyn Fn(usize) -> String,
}

/// How the run ended.
pub(crate) struct Watched {
    /// Ctrl-C (or a stop command) ended it.
    pub signalled: bool,
}

/// The agents of one run.
pub(crate) struct Fleet<'a> {
    pub members: Vec<Member>,
    erx: Events,
    ev: &'a (dyn Fn(&Event) + Sync),
    stop: &'a AtomicBool,
    pub run_id: String,
    /// The common start on the controller's clock (ns), once started.
    pub t0_ns: u64,
    start: Instant,
    /// Players per category at a time of the run, for a kind that has players.
    categories: Option<Categories<'a>>,
    /// The run's command channel, and the controller's copy of the players' roster (a kind
    /// with an online target).
    commands: Option<&'a horde_scenario::control::Commands>,
    players: Option<std::sync::Arc<horde_scenario::Players>>,
    /// The agents that run players, with their weights: a raised target's new players are
    /// shared among them.
    growers: Vec<(usize, u32)>,
    /// Players started so far (the plan's, then those a raised target started).
    started: u32,
    /// Per agent: the players it started during the run (its share of raised targets).
    pub more: Vec<Vec<std::ops::Range<u32>>>,
    /// The scenario's `[[at]]` entries, played through the same path as the channel's commands.
    timeline: horde_scenario::control::Timeline,
    /// The run's emulated network across the agents (the controller's experiment id), whose
    /// links the run's commands change; and a change waiting for every agent's answer.
    emu_exp: Option<String>,
    pending_link: Option<PendingLink>,
    /// Every agent's counters of the run's emulated links, asked once a second: (s on the run's
    /// clock, each agent's answer); and a sample waiting for answers.
    pub link_samples: Vec<(f64, crate::msg::AgentLinks)>,
    pending_stats: Option<steer::PendingStats>,
    link_series_full: bool,
    /// Link changes as the report marks them: (s on the run's clock, what).
    pub marks: Vec<(f64, String)>,
    /// A stop command (not a signal) ended the run.
    pub stopped_by_command: bool,
    /// Summarise the run live on its agents (a scenario's players and server side).
    live: Option<LivePlan<'a>>,
}

/// What a run summarised live needs: its categories and length, which agent runs the server
/// side and which the players, and the model's rates per category at a time of the run.
pub(crate) struct LivePlan<'a> {
    pub names: Vec<String>,
    pub duration_s: f64,
    pub server_i: usize,
    pub owners: Vec<(std::ops::Range<u32>, usize)>,
    pub model: Box<dyn Fn(f64) -> Vec<[f64; 2]> + 'a>,
}

/// How far ahead of the run's clock a change of the online target is stamped through agents:
/// every agent hears of it before it is due (a control round trip is milliseconds; this leaves
/// room for a slow link and clock offsets).
pub const AGENTS_MARGIN_NS: u64 = 1_000_000_000;

/// Players per category at a time of the run (s since the start).
pub(crate) type Categories<'a> = Box<dyn Fn(f64) -> Vec<(String, u32)> + 'a>;

impl<'a> Fleet<'a> {
    /// Connects to every agent at once (see [`crate::link::connect_all`]).
    pub fn connect(
        addrs: &[SocketAddr],
        credentials: &Path,
        deadman: Duration,
        ev: &'a (dyn Fn(&Event) + Sync),
        stop: &'a AtomicBool,
    ) -> anyhow::Result<Fleet<'a>> {
        let cfg = crate::tls::controller_config(credentials)?;
        let (conns, erx) = crate::link::connect_all(addrs, cfg, deadman, stop, &|m| ev(&Event::Note(m)))?;
        let members = conns
            .into_iter()
            .map(|c| Member {
                c,
                upstream: false,
                downstream: false,
                roles_left: 0,
                upstream_done: false,
                lost_at_s: None,
                status: "connected".into(),
                last: Default::default(),
                prev: Default::default(),
                reports: Vec::new(),
                cpu_s: 0.0,
                max_rss_kb: 0,
                log_bytes: 0,
                log_transferred: 0,
                collected: false,
                live: None,
            })
            .collect();
        let run_id = format!("{:016x}-{:08x}", real_ns(), std::process::id());
        Ok(Fleet {
            members,
            erx,
            ev,
            stop,
            run_id,
            t0_ns: 0,
            start: Instant::now(),
            categories: None,
            commands: None,
            timeline: horde_scenario::control::Timeline::new(Vec::new()),
            emu_exp: None,
            pending_link: None,
            link_samples: Vec::new(),
            pending_stats: None,
            link_series_full: false,
            marks: Vec::new(),
            players: None,
            growers: Vec::new(),
            started: 0,
            more: Vec::new(),
            stopped_by_command: false,
            live: None,
        })
    }

    pub fn note(&self, m: String) {
        (self.ev)(&Event::Note(m));
    }

    pub fn names(&self) -> Vec<String> {
        self.members.iter().map(|m| m.c.name.clone()).collect()
    }

    /// Assigns one stage of parts (agent, assignment, whether it runs upstream and downstream
    /// roles) and waits until each is ready; returns each one's server address. On any failure
    /// every link is closed and the error says the run is not starting.
    pub fn assign(&mut self, parts: Vec<(usize, Part, bool, bool)>) -> anyhow::Result<Vec<(usize, Option<SocketAddr>)>> {
        let mut waiting = Vec::new();
        for (i, a, up, down) in parts {
            let m = &mut self.members[i];
            m.upstream |= up;
            m.downstream |= down;
            m.roles_left += up as u32 + down as u32;
            let _ = m.c.cmd.send(Cmd::Assign(Box::new(a)));
            waiting.push(i);
        }
        crate::link::await_ready(&self.erx, &self.names(), waiting, self.stop).or_else(|e| {
            self.close();
            bail!("not starting: {e}")
        })
    }

    /// An assignment of this run: its shape and one agent's work.
    pub fn assignment(&self, deadman: Duration, duration_ns: u64, seed: u64, key: &horde_proto::RunKey, work: msg::Work) -> Part {
        Part::agent(&self.run_id, deadman, duration_ns, seed, key, work)
    }

    /// Starts every agent with a part at one instant of the controller's clock (told to each in
    /// its own); returns it.
    pub fn start(&mut self, what: &str) -> u64 {
        let busy = self.members.iter().filter(|m| m.roles_left > 0).count();
        let lead = Duration::from_millis(500 + 20 * self.members.len() as u64);
        self.t0_ns = real_ns() + lead.as_nanos() as u64;
        let offsets: Vec<i64> = self.members.iter().map(|m| m.c.clock.offset_ns).collect();
        for (i, m) in self.members.iter_mut().enumerate().filter(|(_, m)| m.roles_left > 0) {
            let live = self.live.as_ref().map(|p| {
                let req = crate::msg::SummaryRequest {
                    epoch_ns: self.t0_ns,
                    own_offset_ns: offsets[i],
                    server_offset_ns: offsets[p.server_i],
                    owners: p.owners.iter().map(|(r, j)| (r.clone(), offsets[*j])).collect(),
                    window_ns: 0,
                    with_logs: false,
                };
                let acc = crate::live::Acc::new(p.names.len(), self.t0_ns, p.duration_s);
                m.live = Some(acc.clone());
                (Box::new(req), acc)
            });
            let _ = m.c.cmd.send(Cmd::Start { at_controller_ns: self.t0_ns, live });
        }
        self.start = Instant::now() + lead;
        self.note(format!("run {}: {what} starting in {:.1} s (starting {busy} agents together)", self.run_id, lead.as_secs_f64()));
        self.t0_ns
    }

    /// Seconds since the common start.
    pub fn elapsed_s(&self) -> f64 {
        Instant::now().saturating_duration_since(self.start).as_secs_f64()
    }

    fn send_stop(&self, pick: impl Fn(&Member) -> bool) {
        for m in self.members.iter().filter(|m| pick(m)) {
            let _ = m.c.cmd.send(Cmd::Stop);
        }
    }

    /// Runs until every role finished (or its agent was lost), stopping in order: downstream
    /// roles once the upstream ones are done; every role at the hard end; upstream first on
    /// Ctrl-C. Once a stop is sent, agents must finish within a fixed time (no message extends
    /// it) or count as lost. Progress goes out once a second.
    pub fn watch(&mut self, w: &Watch<'_>) -> Watched {
        let mut stopped_down = false;
        let mut stopped_all = false;
        let mut signalled = false;
        let mut next_tick = self.start + Duration::from_secs(1);
        let hard_end = self.start + w.hard_end;
        let mut finish_by: Option<Instant> = None;
        let cut = |finish_by: &mut Option<Instant>, within: Duration| {
            let f = Instant::now() + within;
            *finish_by = Some(finish_by.map_or(f, |g| g.min(f)));
        };
        loop {
            let upstream_left = self.members.iter().filter(|m| m.upstream && m.ok() && !m.upstream_done).count();
            if upstream_left == 0 && !stopped_down {
                stopped_down = true;
                self.send_stop(|m| m.downstream);
                finish_by.get_or_insert(Instant::now() + FINISH_WITHIN);
            }
            if self.members.iter().all(|m| m.roles_left == 0 || !m.ok()) {
                break;
            }
            self.link_answered(None);
            let commanded = if signalled {
                // a second stop, a late change: answered, not applied
                self.refuse_the_rest();
                false
            } else {
                self.commands()
            };
            let stop = self.stop.load(Ordering::Relaxed) || commanded;
            if stop && !signalled {
                signalled = true;
                self.stopped_by_command = commanded;
                self.note(format!(
                    "{}: stopping the senders, then the receiving side, then collecting the logs",
                    if commanded { "stopped by a command" } else { "interrupted" }
                ));
                self.send_stop(|m| m.upstream);
                cut(&mut finish_by, FINISH_AFTER_SIGNAL + Duration::from_millis(500));
            }
            if Instant::now() > hard_end && !stopped_all {
                stopped_all = true;
                self.note(w.overrun.clone());
                self.send_stop(|_| true);
                cut(&mut finish_by, FINISH_WITHIN);
            }
            if finish_by.is_some_and(|f| Instant::now() >= f) {
                let (t_s, within) = (self.elapsed_s(), if signalled { FINISH_AFTER_SIGNAL } else { FINISH_WITHIN });
                for m in self.members.iter_mut().filter(|m| m.roles_left > 0 && m.ok()) {
                    m.lost_at_s = Some(t_s);
                    m.status = format!("did not finish within {:.0} s of the stop", within.as_secs_f64());
                    (self.ev)(&Event::Note(format!("agent {}: {}; its logs are not collected", m.c.name, m.status)));
                    let _ = m.c.cmd.send(Cmd::Close);
                }
                break;
            }
            if Instant::now() >= next_tick {
                next_tick += Duration::from_secs(1);
                self.progress();
                self.sample_links();
            }
            // the channel's commands and the timeline's entries are looked at every 20 ms
            match self.erx.recv_timeout(next_tick.saturating_duration_since(Instant::now()).min(Duration::from_millis(20))) {
                Ok((i, e)) => {
                    if self.on_event(i, e, w) && !stopped_all {
                        self.note("the server side was on it: stopping the others".into());
                        self.send_stop(|_| true);
                        stopped_all = true;
                        cut(&mut finish_by, FINISH_WITHIN);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        Watched { signalled }
    }

    /// Summarise the run live on its agents (before [`Fleet::start`]).
    pub fn summarise_live(&mut self, plan: LivePlan<'a>) {
        self.live = Some(plan);
    }

    /// Progress snapshots count players per category with `f`.
    pub fn set_categories(&mut self, f: Categories<'a>) {
        self.categories = Some(f);
    }

    fn progress(&mut self) {
        let t_s = if self.t0_ns > 0 { real_ns().saturating_sub(self.t0_ns) as f64 / 1e9 } else { self.elapsed_s() };
        let mut snap = horde_scenario::Snapshot { t_s, ..Default::default() };
        for m in self.members.iter_mut().filter(|m| m.upstream || m.downstream) {
            // An agent's counters are its own word: sums saturate rather than wrap.
            let r = m.last.since(&m.prev);
            m.prev = m.last;
            snap.up_pkt_s = snap.up_pkt_s.saturating_add(r[0]);
            snap.up_bit_s = snap.up_bit_s.saturating_add(r[1]);
            snap.down_pkt_s = snap.down_pkt_s.saturating_add(r[2]);
            snap.down_bit_s = snap.down_bit_s.saturating_add(r[3]);
            snap.sent_packets = snap.sent_packets.saturating_add(m.last.sent_packets);
            snap.received_packets = snap.received_packets.saturating_add(m.last.recv_packets);
            snap.agents.push(horde_scenario::AgentRates {
                agent: m.c.name.clone(),
                sent_pkt_s: r[0],
                sent_bit_s: r[1],
                received_pkt_s: r[2],
                received_bit_s: r[3],
            });
        }
        if let Some(f) = &self.categories {
            snap.categories = f(t_s);
        }
        if let Some(p) = &self.live {
            let shared: Vec<(&str, &crate::live::Shared)> =
                self.members.iter().filter(|m| m.ok()).filter_map(|m| Some((m.c.name.as_str(), m.live.as_ref()?))).collect();
            let mut guards: Vec<_> = shared.iter().map(|s| crate::live::lock(s.1)).collect();
            for (g, (name, _)) in guards.iter_mut().zip(&shared) {
                if let (Some(why), false) = (&g.refused, g.noted) {
                    (self.ev)(&Event::Note(format!("agent {name}: its live summary no longer counts: {why}")));
                    g.noted = true;
                }
            }
            let accs: Vec<&crate::live::Acc> = guards.iter().map(|g| &**g).filter(|a| a.refused.is_none()).collect();
            crate::live::View::fill(&mut snap, &accs, &p.names, &p.model);
        }
        (self.ev)(&Event::Tick(snap));
    }

    /// One event of agent `i`; true when it means the run must stop for everyone.
    fn on_event(&mut self, i: usize, e: Ev, w: &Watch<'_>) -> bool {
        if let Ev::Emu(r) = e {
            match *r {
                msg::EmuReply::Stats { links } if self.stats_awaited(i) => self.stats_answered(i, links),
                r => self.link_answered(Some((i, r))),
            }
            return false;
        }
        let t_s = self.elapsed_s();
        let m = &mut self.members[i];
        match e {
            Ev::Progress(p) => m.last = p,
            Ev::Finished { role, report, error, cpu_s, max_rss_kb } => {
                m.roles_left = m.roles_left.saturating_sub(1);
                m.cpu_s = m.cpu_s.max(cpu_s);
                m.max_rss_kb = m.max_rss_kb.max(max_rss_kb);
                if let Some(e) = &error {
                    (self.ev)(&Event::Note(format!("agent {}: its {role} side failed: {e}", m.c.name)));
                    m.status = format!("{role} side failed: {e}");
                }
                // A failed upstream role is done too (its report is absent).
                if !DOWNSTREAM_ROLES.contains(&role.as_str()) {
                    m.upstream_done = true;
                }
                if let Some(r) = report {
                    m.reports.retain(|(have, _)| *have != role);
                    m.reports.push((role, r));
                }
            }
            Ev::Lost(why) if m.ok() => {
                m.lost_at_s = Some(t_s);
                m.status = format!("lost at {t_s:.1} s: {why}");
                let missing = if m.upstream { (w.missing)(i) } else { "; what was sent to it is missing its arrivals".into() };
                (self.ev)(&Event::Note(format!("agent {} lost {t_s:.1} s into the run: {why}{missing}", m.c.name)));
                return m.downstream && w.downstream_lost_stops_all;
            }
            _ => {}
        }
        false
    }

    /// Collects the logs of every live agent with a part into `out/agents/<dir>/`, each log
    /// bounded by the limit the kind gives from its own plan (never from what the agent says).
    /// Returns the directory of each agent.
    pub fn collect(&mut self, out: &Path, limits: impl Fn(usize, &Member) -> Vec<(&'static str, u64)>) -> anyhow::Result<Vec<PathBuf>> {
        self.collect_with(out, limits, |_, _| None)
    }

    /// [`Fleet::collect`], asking each agent for its run's summary instead of its logs where
    /// `summarise` gives a request (the summary is then the one file collected).
    pub fn collect_with(
        &mut self,
        out: &Path,
        limits: impl Fn(usize, &Member) -> Vec<(&'static str, u64)>,
        summarise: impl Fn(usize, &Member) -> Option<Box<crate::msg::SummaryRequest>>,
    ) -> anyhow::Result<Vec<PathBuf>> {
        let agents_dir = out.join("agents");
        let dirs: Vec<PathBuf> = dir_names(&self.names()).into_iter().map(|d| agents_dir.join(d)).collect();
        let mut collecting = 0;
        let t = Instant::now();
        for (i, m) in self.members.iter_mut().enumerate().filter(|(_, m)| m.ok() && (m.upstream || m.downstream)) {
            let dir = dirs[i].clone();
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let limits = limits(i, m);
            let _ = m.c.cmd.send(Cmd::Collect { dir, limits, summarise: summarise(i, m) });
            collecting += 1;
        }
        let (ev, start) = (self.ev, self.start);
        let members = &mut self.members;
        crate::link::await_collections(&self.erx, collecting, self.stop, |i, how| {
            let m = &mut members[i];
            match how {
                Collected::Logs { bytes, transferred } => {
                    m.log_bytes += bytes;
                    m.log_transferred += transferred;
                    m.collected = true;
                    true
                }
                Collected::Lost(why) if m.ok() && !m.collected => {
                    m.lost_at_s = Some(start.elapsed().as_secs_f64());
                    m.status = format!("lost while collecting its logs: {why}");
                    ev(&Event::Note(format!("agent {}: {}", m.c.name, m.status)));
                    true
                }
                Collected::Lost(_) => false,
            }
        });
        let t_s = self.elapsed_s();
        for m in self.members.iter_mut().filter(|m| m.ok() && !m.collected && (m.upstream || m.downstream)) {
            m.lost_at_s = Some(t_s);
            m.status = "its logs were not collected in time".into();
            ev(&Event::Note(format!("agent {}: {}", m.c.name, m.status)));
        }
        let (raw, sent) = self.log_bytes();
        self.note(format!(
            "logs collected in {:.1} s: {:.1} MB written by the agents, {:.1} MB transferred",
            t.elapsed().as_secs_f64(),
            raw as f64 / 1e6,
            sent as f64 / 1e6
        ));
        Ok(dirs)
    }

    /// Log bytes the agents wrote, and what they took on the control channel.
    pub fn log_bytes(&self) -> (u64, u64) {
        self.members.iter().map(|m| (m.log_bytes, m.log_transferred)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// Marks an agent lost after the run (its log was refused, …).
    pub fn refuse(&mut self, name: &str, why: &str) {
        let t_s = self.elapsed_s();
        if let Some(m) = self.members.iter_mut().find(|m| m.c.name == name) {
            m.lost_at_s.get_or_insert(t_s);
            m.status = format!("log refused: {why}");
            (self.ev)(&Event::Note(format!("agent {name}: {}; its records are left out of the report", m.status)));
        }
    }

    pub fn lost(&self) -> Vec<String> {
        self.members.iter().filter(|m| !m.ok()).map(|m| m.c.name.clone()).collect()
    }

    /// Asks agents' emulators (outside runs) and waits for each answer until `within` has
    /// passed (Ctrl-C ends the wait at once, unless `through_stop`: undoing after a failure or
    /// an interruption waits its bounded time): per agent asked, its answer or why there is none.
    pub fn emu(&mut self, reqs: Vec<(usize, msg::EmuRequest)>, within: Duration, through_stop: bool) -> Vec<(usize, Result<msg::EmuReply, String>)> {
        let mut waiting: Vec<usize> = Vec::new();
        let mut out = Vec::new();
        // an `up` answered late (after an interruption) is not the answer to what follows it
        let late_up = |i: usize, r: &msg::EmuReply, asked_up: &[usize]| matches!(r, msg::EmuReply::Up { .. }) && !asked_up.contains(&i);
        let asked_up: Vec<usize> = reqs.iter().filter(|(_, r)| matches!(r, msg::EmuRequest::Up { .. })).map(|(i, _)| *i).collect();
        for (i, r) in reqs {
            match self.members[i].c.cmd.send(Cmd::Emu(Box::new(r))) {
                Ok(()) => waiting.push(i),
                Err(_) => out.push((i, Err("its link had ended".to_string()))),
            }
        }
        let deadline = Instant::now() + within;
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || (!through_stop && self.stop.load(Ordering::Relaxed)) {
                let why = if left.is_zero() { format!("no answer within {} s", within.as_secs()) } else { "interrupted".to_string() };
                out.extend(waiting.drain(..).map(|i| (i, Err(why.clone()))));
                break;
            }
            match self.erx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok((i, crate::link::Ev::Emu(r))) if waiting.contains(&i) && !late_up(i, &r, &asked_up) => {
                    waiting.retain(|&w| w != i);
                    out.push((i, Ok(*r)));
                }
                Ok((i, crate::link::Ev::Lost(why))) if waiting.contains(&i) => {
                    waiting.retain(|&w| w != i);
                    out.push((i, Err(why)));
                }
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    out.extend(waiting.drain(..).map(|i| (i, Err("every link ended".to_string()))));
                }
            }
        }
        out.sort_by_key(|x| x.0);
        out
    }

    /// Closes every link and waits for their threads.
    pub fn close(&mut self) {
        let mut conns: Vec<&mut Conn> = self.members.iter_mut().map(|m| &mut m.c).collect();
        for c in conns.iter() {
            let _ = c.cmd.send(Cmd::Close);
        }
        for c in conns.iter_mut() {
            if let Some(h) = c.handle.take() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Fleet<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

/// One directory per agent under `agents/`: its name made safe, made unique by its place in
/// the list when two names come out alike (so one agent's logs never overwrite another's).
pub fn dir_names(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let mut d = safe_name(n);
        if out.contains(&d) {
            d = format!("{d}-{i}");
        }
        out.push(d);
    }
    out
}

/// A name safe as a directory name.
pub(crate) fn safe_name(n: &str) -> String {
    let s: String = n.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).take(64).collect();
    if s.is_empty() || s.starts_with('.') {
        format!("agent{s}")
    } else {
        s
    }
}
