//! A part of a run as it crosses a process boundary: typed and versioned (through
//! `horde_sys::own`), resolved before it leaves, never re-parsed from arguments or text lines.
//!
//! Today a part is the server side of a scenario's players (open-loop or regulated), run as a
//! child process of `horde run` so that each side has its own descriptor limit. The child
//! (`horde child part RUN`) reads its [`Part`] as the first line of its standard input, then the
//! run's stamped commands as JSON lines ([`crate::control::Command`]); it answers with
//! [`PartEvent`] lines on its standard output and leaves its log and report in its directory.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use horde_model::scenario::Scenario;
use horde_proto::RunKey;
use serde::{Deserialize, Serialize};

use crate::server::ServerSecond;
use crate::Error;

/// A part of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// The run it belongs to (its report directory's name).
    pub run_id: String,
    pub shape: Shape,
    pub work: Work,
    pub role: Role,
}

/// What every part of a run shares.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub duration_ns: u64,
    pub seed: u64,
    /// The run key, hex: the server side grants only players that sign with it. It travels on
    /// a pipe (or an authenticated channel), never in arguments or the environment.
    pub key: String,
}

/// What a part runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Work {
    /// A scenario's players: their open-loop traffic, or regulated circuits (`[regulation]`).
    Players(ScenarioWork),
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
}

/// Which side of the work a part is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Role {
    /// The server side: listens on `listen`, writes its log and report into `out`.
    Server { listen: SocketAddr, out: PathBuf },
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
        sc.check_join().map_err(|e| e.to_string())?;
        Ok(sc)
    }

    /// A scenario (loaded from a file in `dir`, overrides applied) as a part carries it.
    pub fn of(sc: &Scenario, dir: &Path) -> Result<ScenarioWork, Error> {
        let bad = |e: String| Error::BadInput(anyhow::anyhow!("{}: {e}", sc.name));
        let service = sc.service_text(dir).map_err(|e| bad(e.to_string()))?;
        let service = service.map(|t| horde_model::dist::inline_value_files(&t)).transpose().map_err(|e| bad(format!("service: {e}")))?;
        let scenario = horde_model::dist::inline_value_files(&sc.text).map_err(|e| bad(e.to_string()))?;
        Ok(ScenarioWork { name: sc.name.clone(), scenario, service, players: sc.players, online: sc.online, max_players: None })
    }
}

impl Part {
    /// The server side of `sc`'s run: listening on `listen`, its log and report into `out`,
    /// taking up to `limit` players (the run's stated limit).
    pub fn server(sc: &Scenario, dir: &Path, key: &RunKey, listen: SocketAddr, out: &Path, limit: u32) -> Result<Part, Error> {
        let work = Work::Players(ScenarioWork { max_players: Some(limit), ..ScenarioWork::of(sc, dir)? });
        let run_id = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into());
        let shape = Shape { duration_ns: (sc.duration_s * 1e9).round() as u64, seed: sc.seed, key: key.to_hex() };
        Ok(Part { run_id, shape, work, role: Role::Server { listen, out: out.to_path_buf() } })
    }

    /// The scenario this part runs (see [`ScenarioWork::resolve`]).
    pub fn scenario(&self) -> Result<Scenario, Error> {
        let Work::Players(w) = &self.work;
        w.resolve(self.shape.duration_ns, self.shape.seed).map_err(|m| Error::BadInput(anyhow::anyhow!("part {}: {m}", self.run_id)))
    }

    pub fn key(&self) -> Result<RunKey, Error> {
        RunKey::parse_hex(&self.shape.key).map_err(|e| Error::BadInput(anyhow::anyhow!("part {}: key: {e}", self.run_id)))
    }
}

/// Runs a part in this process (a child of `horde run`): `input` carries the run's commands
/// after the part's line, `output` takes its [`PartEvent`]s.
pub fn run(part: &Part, input: impl BufRead + Send + 'static, output: impl Write + Send, stop: &AtomicBool) -> Result<(), Error> {
    let sc = part.scenario()?;
    let key = part.key()?;
    let Role::Server { listen, out } = &part.role;
    let mut sc = sc;
    sc.server = *listen;
    let output = std::sync::Mutex::new(output);
    let say = |e: &PartEvent| {
        // the parent reads these; if it is gone, so is the run
        let _ = horde_sys::own::write_line(&mut *output.lock().unwrap_or_else(|p| p.into_inner()), e);
    };
    let listening = |addr| say(&PartEvent::Listening { addr });
    if let Some(cfg) = crate::circuits::Config::of(&sc)? {
        crate::circuits::serve(&sc, &cfg, out, key, stop, listening, &horde_engine::clock::System)?;
        return Ok(());
    }
    let (tx, commands) = crate::control::Commands::channel();
    std::thread::Builder::new()
        .name("horde-part-commands".into())
        .spawn(move || crate::control::read(input, &tx))
        .context("starting a thread")
        .map_err(Error::Failed)?;
    let live = |p: Option<horde_engine::live::Percentiles>, seconds: &[ServerSecond]| {
        say(&PartEvent::Live { delay_ms: p.map(|p| [p.p50_ms, p.p99_ms]), seconds: seconds.to_vec() });
    };
    let Work::Players(w) = &part.work;
    let hooks = crate::server::ServeHooks { commands: Some(&commands), live: Some(&live), limit: w.max_players, ..Default::default() };
    crate::server::serve(&sc, out, key, stop, listening, hooks)?;
    Ok(())
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
        let Work::Players(w) = &mut bad.work;
        w.online = Some(6);
        assert!(bad.scenario().unwrap_err().into_anyhow().to_string().contains("more than the run's 5 players"));
        let mut bad = p.clone();
        let Work::Players(w) = &mut bad.work;
        w.max_players = Some(4);
        assert!(bad.scenario().unwrap_err().into_anyhow().to_string().contains("max_players: 4 must be 5..="), "a limit below the plan");
        let mut bad = p.clone();
        bad.shape.duration_ns = 0;
        assert!(bad.scenario().unwrap_err().into_anyhow().to_string().contains("duration"));
        let mut bad = p;
        bad.shape.key = "zz".into();
        assert!(bad.key().is_err());
        assert!(serde_json::from_str::<Part>(r#"{"run_id":"x","shape":{"duration_ns":1,"seed":1,"key":""},"work":{"flows":{}},"role":{"server":{}}}"#).is_err());
    }

    #[test]
    fn events_travel_as_lines() {
        let e = PartEvent::Live { delay_ms: Some([0.25, 1.5]), seconds: vec![ServerSecond { sec: 100, down_sent: 50, up_arrived: 48 }] };
        let mut buf = Vec::new();
        horde_sys::own::write_line(&mut buf, &e).unwrap();
        assert_eq!(horde_sys::own::read_line::<PartEvent>(&mut &buf[..], MAX_EVENT).unwrap(), Some(e));
    }
}
