//! A part of a run as it crosses a process boundary: typed and versioned, resolved before it
//! leaves, never re-parsed from arguments or text lines. One type for every placement:
//! - a **child** of `horde run` runs a scenario's server side (open-loop or regulated) in its
//!   own process, so that each side has its own descriptor limit. It (`horde child part RUN`)
//!   reads its [`Part`] as the first line of its standard input (`horde_sys::own`), then the
//!   run's stamped commands as JSON lines ([`crate::control::Command`]); it answers with
//!   [`PartEvent`] lines on its standard output and leaves its log and report in its directory;
//! - an **agent** (`horde agent`) gets its part in the control channel (`ToAgent::Assign`):
//!   a scenario's server side and/or players, flows to send and receive, or bots.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use horde_model::scenario::Scenario;
use horde_proto::RunKey;
use serde::{Deserialize, Serialize};

use crate::server::ServerSecond;
use crate::Error;

/// A part of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// The run it belongs to (unique: an agent refuses a run id it has already run, so a
    /// replayed part does nothing; a child's is its report directory's name).
    pub run_id: String,
    pub shape: Shape,
    pub work: Work,
    pub place: Place,
}

/// What every part of a run shares: every side plans the same from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub duration_ns: u64,
    pub seed: u64,
    /// The run key, hex: the server side grants only players that sign with it. It travels on
    /// a pipe (or an authenticated channel), never in arguments or the environment.
    pub key: String,
}

/// What a part runs: one kind of work (an enum: exactly one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Work {
    /// A scenario's part: its server side, a range of its players, or both (with
    /// `[regulation]`, regulated circuits).
    Scenario(ScenarioPart),
    /// A set of `send`/`recv` flows.
    Flows(FlowsJob),
    /// Game-server bots (`horde bots`).
    Bots(BotsJob),
}

/// Where a part runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Place {
    /// A child process of this `horde`, or a thread of it: its log and report go into `out`.
    Child { out: PathBuf },
    /// An agent: it stops the traffic when nothing is heard from the controller for this long.
    Agent { deadman_ms: u64 },
}

/// An agent's part of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioPart {
    /// The scenario's and its service's texts (value files inlined) and the run's players.
    pub scenario: ScenarioWork,
    /// Run the server side, listening on this address (port 0: any free port).
    pub server: Option<SocketAddr>,
    /// Run these players' client side against the server side at `server_addr`.
    pub players: Option<Range<u32>>,
    pub server_addr: Option<SocketAddr>,
    /// A scenario with `[emu]` through agents: where this part runs in the emulated network the
    /// agent built (`emu up` before the run).
    #[serde(default)]
    pub emu: Option<EmuPlace>,
}

/// Where an agent's part of a scenario with `[emu]` runs: hosts of its part of experiment `exp`
/// (the controller's id). Its players go on `clients` in turn (player `p` on
/// `clients[p % len]`), its server side (if it has it) in host `server`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmuPlace {
    pub exp: String,
    pub clients: Vec<String>,
    pub server: Option<String>,
}

/// Bots against a game server that this agent runs: the ids `ids` of `total` (names and join
/// times follow from the id, so the shards of all agents make one ramp).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BotsJob {
    pub servers: Vec<SocketAddr>,
    pub total: u32,
    pub ids: Range<u32>,
    pub ramp_ns: u64,
    pub warmup_ns: u64,
    pub maxpackets: u32,
    pub fps: u32,
    pub packetdup: u32,
    pub snaps: u32,
    /// "openarena", "ioq3" or "q3".
    pub protocol: String,
    /// The built-in service whose `[bot]` table is the behaviour model, or a service file's
    /// text (`service_text`, the controller read it).
    pub service: String,
    #[serde(default)]
    pub service_text: Option<String>,
}

/// The D-ITG manager's use: flows of a flow file that this agent sends, and receivers it runs.
/// Every flow signs its hellos with the run's key and its receivers drop any other, so a
/// receiver started through an agent takes traffic of this run only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowsJob {
    /// The flow file's text (TOML), resolved with `seed` on every agent alike.
    pub text: String,
    pub seed: u64,
    /// Send the flows whose ids are in these ranges.
    #[serde(default)]
    pub send: Vec<Range<u32>>,
    /// Receive on these UDP and TCP addresses (the flows' destinations on this agent).
    #[serde(default)]
    pub recv_udp: Vec<SocketAddr>,
    #[serde(default)]
    pub recv_tcp: Vec<SocketAddr>,
    /// Stream this agent's logs to a live log server as they are written (`send --agents
    /// --log-server`); absent otherwise, so an older agent still takes the assignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_server: Option<LogServerJob>,
}

/// Where an agent streams its logs: the server, the run key it proves (the user's, which the
/// log server was started with; it travels only inside the mutually authenticated channel), and
/// the name its logs take there (`NAME-send.log`, `NAME-recv.log`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogServerJob {
    pub addr: SocketAddr,
    pub key: String,
    pub name: String,
}

/// A scenario as a part carries it: its text and its service's, with every value file
/// inlined, so that whoever runs the part opens no file the scenario names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioWork {
    pub name: String,
    pub scenario: String,
    pub service: Option<String>,
    /// Every player the run plans at its start, and how many are online at the start.
    pub players: u32,
    pub online: Option<u32>,
    /// The most players the run may have online (a raised target plans more on demand), as its
    /// driver stated at the start; none: `players`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_players: Option<u32>,
    /// The run's GSO choice, where the command line overrode the scenario's (`run --gso`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso: Option<horde_model::gso::Gso>,
}

/// What a server-side part says on its standard output, one JSON line each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum PartEvent {
    /// It listens (the first line).
    Listening { addr: SocketAddr },
    /// Once a second: the last second's one-way delay of what it received, ms [median, p99]
    /// (none when nothing arrived), and the seconds of departures it closed.
    Live { delay_ms: Option<[f64; 2]>, seconds: Vec<ServerSecond> },
}

/// A whole run another process asks for (the console's runs, `horde child run NAME`): resolved
/// by the asker — the scenario file found, the overrides checked — and run as `horde run` or
/// `horde bots` would, its events as `--progress json` lines, its commands (with ids) on the
/// child's standard input after this line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RunRequest {
    /// A scenario file's run, with the overrides `horde run` takes.
    Scenario { file: PathBuf, out: PathBuf, overrides: crate::Overrides },
    /// Quake 3 bots against a game server (none: an `openarena-server` the run starts).
    Bots { players: u32, duration_ns: u64, ramp_ns: Option<u64>, server: Option<SocketAddr>, out: PathBuf },
}

/// An event line is at most this long (a second's figures fit many times).
pub const MAX_EVENT: usize = 64 * 1024;

/// Most game servers one run plays on, and most bots (the CLI's bound).
const MAX_SERVERS: usize = 64;
const MAX_BOTS: u32 = 4096;
/// Longest ramp and warm-up (an hour, as a run's duration is bounded).
const MAX_RAMP_NS: u64 = 3_600_000_000_000;
const MAX_SERVICE_TEXT: usize = 1 << 20;

impl BotsJob {
    /// Checks a bots part before anything is opened.
    pub fn check(&self) -> Result<(), String> {
        let b = self;
        if b.servers.is_empty() || b.servers.len() > MAX_SERVERS || b.servers.iter().any(|s| s.port() == 0) {
            return Err(format!("bots: 1..={MAX_SERVERS} game servers, each with a port"));
        }
        if b.total == 0 || b.total > MAX_BOTS || b.ids.is_empty() || b.ids.end > b.total {
            return Err(format!("bots: --players {2} (ids {0}..{1}): 1..={MAX_BOTS} bots, a non-empty range within them", b.ids.start, b.ids.end, b.total));
        }
        if b.ramp_ns > MAX_RAMP_NS || b.warmup_ns > MAX_RAMP_NS {
            return Err("bots: --ramp and --warmup must be at most an hour".into());
        }
        for (flag, v, range) in [
            ("--maxpackets", b.maxpackets, 15..=125),
            ("--fps", b.fps, 1..=1000),
            ("--packetdup", b.packetdup, 0..=5),
            ("snapshots (--sv-fps)", b.snaps, 1..=1000),
        ] {
            if !range.contains(&v) {
                return Err(format!("bots: {flag} must be {}..={} (got {v})", range.start(), range.end()));
            }
        }
        if b.service_text.as_ref().is_some_and(|t| t.len() > MAX_SERVICE_TEXT) {
            return Err(format!("bots: the service text is over {MAX_SERVICE_TEXT} bytes"));
        }
        protocol(&b.protocol).map(|_| ())
    }

    /// The engine's options for a bots part, checked: the one validator of a bots run, wherever it
    /// plays (this machine, emulated hosts, an agent). `threads`, `log`, `netns`, `actions` and
    /// `live` are the placement's own (here: every core, none).
    pub fn options(&self, seed: u64, duration_ns: u64) -> Result<horde_engine::bots::BotsOptions, String> {
        let b = self;
        b.check()?;
        horde_model::scenario::check_duration(duration_ns).map_err(|m| format!("duration: {m}"))?;
        if b.warmup_ns >= duration_ns {
            return Err(format!(
                "bots: --warmup ({}) must be shorter than --duration ({}): nothing would be measured",
                horde_model::units::fmt_ns(b.warmup_ns as f64),
                horde_model::units::fmt_ns(duration_ns as f64)
            ));
        }
        let svc = match &b.service_text {
            // Nothing opens a file the service names: its values came inline.
            Some(t) => horde_model::files::without_value_files(|| horde_model::service::Service::parse(t, &b.service)),
            None => horde_model::service::Service::builtin(&b.service),
        }
        .map_err(|e| format!("bots: service: {e}"))?;
        if svc.bot.is_empty() {
            return Err(format!(
                "bots: service {} has no [bot] table (the behaviour model of automated players): use the service quake3, or add one",
                svc.name
            ));
        }
        let model = horde_q3::input::BotModel::from_table(&svc.bot).map_err(|e| format!("bots: service {}: {e}", svc.name))?;
        let (total, ids) = (b.total as usize, b.ids.start as usize..b.ids.end as usize);
        Ok(horde_engine::bots::BotsOptions {
            servers: b.servers.clone(),
            bots: total,
            ids: Some(ids),
            ramp: std::time::Duration::from_nanos(b.ramp_ns),
            duration: std::time::Duration::from_nanos(duration_ns),
            warmup: std::time::Duration::from_nanos(b.warmup_ns),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            maxpackets: b.maxpackets,
            fps: b.fps,
            packetdup: b.packetdup,
            rate: 25_000,
            snaps: b.snaps,
            protocol: protocol(&b.protocol)?,
            seed,
            name_prefix: "horde".into(),
            sources: horde_engine::bots::loopback_sources(b.servers[0], total),
            actions: Vec::new(),
            model,
            log: None,
            netns: Vec::new(),
            live: None,
            frames: None,
            record: None,
        })
    }
}

fn protocol(p: &str) -> Result<horde_q3::Protocol, String> {
    horde_q3::Protocol::from_name(p).ok_or_else(|| format!("bots: --protocol must be openarena, ioq3 or q3 (got `{p}`)"))
}

impl ScenarioWork {
    /// The scenario as run with this shape: the shipped texts parsed (no file they name is
    /// opened), checked as a scenario file's own fields are — the one resolution of a scenario
    /// another process hands over (a child, an agent).
    pub fn resolve(&self, duration_ns: u64, seed: u64) -> Result<Scenario, String> {
        let nowhere = Path::new("/nonexistent/horde-part");
        let mut sc = horde_model::files::without_value_files(|| Scenario::parse_with(&self.scenario, &self.name, nowhere, self.service.as_deref()))
            .map_err(|e| e.to_string())?;
        horde_model::scenario::check_players(self.players, self.online).map_err(|(f, m)| format!("{f}: {m}"))?;
        if let Some(m) = self.max_players.filter(|&m| m < self.players || m > horde_model::scenario::MAX_PLAYERS) {
            return Err(format!("max_players: {m} must be {}..={}", self.players, horde_model::scenario::MAX_PLAYERS));
        }
        horde_model::scenario::check_duration(duration_ns).map_err(|m| format!("duration: {m}"))?;
        sc.players = self.players;
        sc.online = self.online;
        sc.duration_s = duration_ns as f64 / 1e9;
        sc.seed = seed;
        if let Some(g) = self.gso {
            sc.gso = g;
        }
        sc.check_join().map_err(|e| e.to_string())?;
        Ok(sc)
    }

    /// A scenario (loaded from a file in `dir`, overrides applied) as a part carries it.
    pub fn of(sc: &Scenario, dir: &Path) -> Result<ScenarioWork, Error> {
        let bad = |e: String| Error::BadInput(anyhow::anyhow!("{}: {e}", sc.name));
        let service = sc.service_text(dir).map_err(|e| bad(e.to_string()))?;
        let service = service.map(|t| horde_model::dist::inline_value_files(&t)).transpose().map_err(|e| bad(format!("service: {e}")))?;
        let scenario = horde_model::dist::inline_value_files(&sc.text).map_err(|e| bad(e.to_string()))?;
        Ok(ScenarioWork { name: sc.name.clone(), scenario, service, players: sc.players, online: sc.online, max_players: None, gso: Some(sc.gso) })
    }
}

impl Part {
    /// The server side of `sc`'s run in a child: listening on `listen`, its log and report into
    /// `out`, taking up to `limit` players (the run's stated limit).
    pub fn server(sc: &Scenario, dir: &Path, key: &RunKey, listen: SocketAddr, out: &Path, limit: u32) -> Result<Part, Error> {
        let scenario = ScenarioWork { max_players: Some(limit), ..ScenarioWork::of(sc, dir)? };
        let work = Work::Scenario(ScenarioPart { scenario, server: Some(listen), players: None, server_addr: None, emu: None });
        let run_id = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into());
        let shape = Shape { duration_ns: (sc.duration_s * 1e9).round() as u64, seed: sc.seed, key: key.to_hex() };
        Ok(Part { run_id, shape, work, place: Place::Child { out: out.to_path_buf() } })
    }

    /// The players' side of the same run beside this server side's part: players `shard`
    /// against the server side at `server` (a thread of the same process).
    pub fn clients(&self, shard: Range<u32>, server: SocketAddr) -> Part {
        let mut p = self.clone();
        if let Work::Scenario(w) = &mut p.work {
            (w.server, w.players, w.server_addr, w.emu) = (None, Some(shard), Some(server), None);
        }
        p
    }

    /// An agent's part of run `run_id` (`deadman`: it stops the traffic when the controller is
    /// silent this long).
    pub fn agent(run_id: &str, deadman: std::time::Duration, duration_ns: u64, seed: u64, key: &RunKey, work: Work) -> Part {
        let shape = Shape { duration_ns, seed, key: key.to_hex() };
        Part { run_id: run_id.to_string(), shape, work, place: Place::Agent { deadman_ms: deadman.as_millis() as u64 } }
    }

    /// An agent's dead-man interval (none: a child's part).
    pub fn deadman_ms(&self) -> Option<u64> {
        match self.place {
            Place::Agent { deadman_ms } => Some(deadman_ms),
            Place::Child { .. } => None,
        }
    }

    /// The scenario's part, if this is one.
    pub fn scenario_part(&self) -> Option<&ScenarioPart> {
        match &self.work {
            Work::Scenario(p) => Some(p),
            _ => None,
        }
    }

    /// The scenario this part runs (see [`ScenarioWork::resolve`]).
    pub fn scenario(&self) -> Result<Scenario, Error> {
        let p = self.scenario_part().ok_or_else(|| Error::BadInput(anyhow::anyhow!("part {}: not a scenario's", self.run_id)))?;
        p.scenario.resolve(self.shape.duration_ns, self.shape.seed).map_err(|m| Error::BadInput(anyhow::anyhow!("part {}: {m}", self.run_id)))
    }

    pub fn key(&self) -> Result<RunKey, Error> {
        RunKey::parse_hex(&self.shape.key).map_err(|e| Error::BadInput(anyhow::anyhow!("part {}: key: {e}", self.run_id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        Scenario::parse(text, "t.toml", Path::new(".")).unwrap()
    }

    #[test]
    fn a_part_carries_the_run_as_resolved_and_reads_back_the_same() {
        let mut sc = scenario("service = \"wow\"\nplayers = 50\nduration = \"10s\"\nseed = 3\n");
        crate::apply_overrides(&mut sc, &crate::Overrides { players: Some(80), online: Some(20), duration_ns: Some(1_500_000_000), seed: Some(9) }).unwrap();
        let key = RunKey::from_bytes([7; 32]);
        let p = Part::server(&sc, Path::new("."), &key, "127.0.0.1:0".parse().unwrap(), Path::new("/tmp/r1"), sc.players).unwrap();
        assert_eq!(p.shape.duration_ns, 1_500_000_000);
        let line = serde_json::to_string(&p).unwrap();
        let back: Part = serde_json::from_str(&line).unwrap();
        let sc2 = back.scenario().unwrap();
        assert_eq!((sc2.players, sc2.online, sc2.duration_s, sc2.seed), (80, Some(20), 1.5, 9));
        assert_eq!(sc2.name, sc.name);
        assert_eq!(back.key().unwrap().to_hex(), key.to_hex());
    }

    #[test]
    fn a_part_is_checked_when_it_is_read() {
        let sc = scenario("service = \"wow\"\nplayers = 5\nduration = \"2s\"\n");
        let p = Part::server(&sc, Path::new("."), &RunKey::from_bytes([1; 32]), "127.0.0.1:0".parse().unwrap(), Path::new("/tmp/r2"), sc.players).unwrap();
        let mut bad = p.clone();
        let Work::Scenario(w) = &mut bad.work else { unreachable!() };
        w.scenario.online = Some(6);
        assert!(bad.scenario().unwrap_err().into_anyhow().to_string().contains("more than the run's 5 players"));
        let mut bad = p.clone();
        let Work::Scenario(w) = &mut bad.work else { unreachable!() };
        w.scenario.max_players = Some(4);
        assert!(bad.scenario().unwrap_err().into_anyhow().to_string().contains("max_players: 4 must be 5..="), "a limit below the plan");
        let mut bad = p.clone();
        bad.shape.duration_ns = 0;
        assert!(bad.scenario().unwrap_err().into_anyhow().to_string().contains("duration"));
        let mut bad = p;
        bad.shape.key = "zz".into();
        assert!(bad.key().is_err());
        assert!(serde_json::from_str::<Part>(r#"{"run_id":"x","shape":{"duration_ns":1,"seed":1,"key":""},"work":{"flows":{}},"place":{"child":{}}}"#).is_err());
    }

    #[test]
    fn events_travel_as_lines() {
        let e = PartEvent::Live { delay_ms: Some([0.25, 1.5]), seconds: vec![ServerSecond { sec: 100, down_sent: 50, up_arrived: 48 }] };
        let mut buf = Vec::new();
        horde_sys::own::write_line(&mut buf, &e).unwrap();
        assert_eq!(horde_sys::own::read_line::<PartEvent>(&mut &buf[..], MAX_EVENT).unwrap(), Some(e));
    }

    fn job() -> BotsJob {
        BotsJob {
            servers: vec!["127.0.0.1:27960".parse().unwrap()],
            total: 4,
            ids: 0..4,
            ramp_ns: 0,
            warmup_ns: 1_000_000_000,
            maxpackets: 30,
            fps: 60,
            packetdup: 1,
            snaps: 20,
            protocol: "openarena".into(),
            service: "quake3".into(),
            service_text: None,
        }
    }

    #[test]
    fn a_bots_part_is_checked_once_and_names_the_wrong_value() {
        assert!(job().options(1, 5_000_000_000).is_ok());
        for (bad, says) in [
            (BotsJob { maxpackets: 5, ..job() }, "--maxpackets must be 15..=125 (got 5)"),
            (BotsJob { packetdup: 9, ..job() }, "--packetdup must be 0..=5 (got 9)"),
            (BotsJob { protocol: "q4".into(), ..job() }, "--protocol"),
            (BotsJob { total: 0, ids: 0..0, ..job() }, "--players 0"),
        ] {
            assert!(bad.options(1, 5_000_000_000).unwrap_err().contains(says), "{says}");
        }
        assert!(job().options(1, 1_000_000_000).unwrap_err().contains("--warmup"), "warm-up not shorter than the duration");
    }
}
