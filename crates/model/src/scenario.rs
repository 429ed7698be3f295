//! Scenario files for `horde run`: which service, how many players, how long, which seed,
//! where the server side listens. Parsed, then validated into a [`Scenario`]; errors name the
//! file and the field.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;

use crate::dist::Vars;
use crate::flow::Quantity;
use crate::service::Service;

/// The most players one run may hold: player ids travel in 24 bits of a record's tag.
pub const MAX_PLAYERS: u32 = 1 << 24;
/// The longest run: 7 days. Every player's stays are planned before the first packet (both
/// sides compute them), so the plan grows with the duration; a week of WoW behaviour for 10,000
/// players is ~10 M stays (~0.5 GB). Longer soaks are a chain of runs.
pub const MAX_RUN_DURATION_NS: u64 = 7 * 86_400 * 1_000_000_000;

/// Checks a run's duration (from a scenario file or a `--duration` override).
pub fn check_duration(ns: u64) -> Result<(), String> {
    if ns == 0 {
        return Err("must be longer than 0".into());
    }
    if ns > MAX_RUN_DURATION_NS {
        return Err(format!("{} s is longer than a run may be (7 days); split a longer soak into several runs", ns / 1_000_000_000));
    }
    Ok(())
}

/// The `[[at]]` entries as (ns, the command's fields), in time order: each `t` a duration
/// within the run.
fn timeline(at: &[toml::Table], duration_ns: u64) -> Result<Vec<(u64, serde_json::Value)>, (String, String)> {
    let mut out = Vec::with_capacity(at.len());
    for (k, entry) in at.iter().enumerate() {
        let field = |f: &str| format!("at[{k}].{f}");
        let mut fields = entry.clone();
        let t = match fields.remove("t") {
            Some(toml::Value::String(t)) => crate::units::parse_duration_ns(&t).map_err(|m| (field("t"), m))?,
            Some(toml::Value::Integer(0)) => 0,
            _ => return Err((field("t"), "a time on the run's clock, e.g. \"10s\"".into())),
        };
        if t > duration_ns {
            return Err((field("t"), format!("{:.3} s is after the run's end ({:.3} s)", t as f64 / 1e9, duration_ns as f64 / 1e9)));
        }
        let json = serde_json::to_value(&fields).map_err(|e| (field("command"), e.to_string()))?;
        out.push((t, json));
    }
    out.sort_by_key(|e| e.0);
    Ok(out)
}

/// Checks a run's player count and how many of them are online at the start: the one check
/// of both, wherever they come from (a scenario file, a flag, the console, a controller).
/// The error names the field (`players` or `online`) and says what is wrong with it.
pub fn check_players(players: u32, online: Option<u32>) -> Result<(), (&'static str, String)> {
    if players == 0 || players > MAX_PLAYERS {
        return Err(("players", format!("must be 1..={MAX_PLAYERS} (got {players})")));
    }
    match online {
        Some(o) if o > players => Err(("online", format!("{o} is more than the run's {players} players: `players` is every player the run may have online"))),
        _ => Ok(()),
    }
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    #[serde(default)]
    pub name: Option<String>,
    /// Built-in service name or a path (relative to the scenario file).
    pub service: String,
    #[schemars(range(min = 1))]
    pub players: u32,
    /// How many of the players (the first by id) are online at the start (default: all); the
    /// run's command channel changes it while it runs (`{"command":"players","online":N}`).
    #[serde(default)]
    pub online: Option<u32>,
    /// e.g. "60s", "10m", "2h"
    #[schemars(with = "String")]
    pub duration: Quantity,
    #[serde(default)]
    pub seed: Option<u64>,
    /// Hour of day (0..24) at the start of the run.
    #[serde(default)]
    pub start_hour: Option<f64>,
    /// Keep the hour of day fixed instead of advancing it with time.
    #[serde(default)]
    pub fixed_hour: Option<bool>,
    /// Where the server side listens (default 127.0.0.1, any free port).
    #[serde(default)]
    pub server: Option<String>,
    /// Values for the service's formula variables, e.g. `N = 500` (players on the server).
    #[serde(default)]
    pub variables: BTreeMap<String, f64>,
    /// Worker threads on the client side.
    #[serde(default)]
    pub threads: Option<usize>,
    /// Worker threads on the server side (default 2, or 1 on a machine of 2 cores or fewer; each
    /// has its own listener on the port).
    #[serde(default)]
    pub server_threads: Option<usize>,
    /// When each player joins, seconds after the start: a distribution drawn once per player
    /// (seeded). A ramp over a minute: `uniform(0, 60)`; a release-day surge at 20 s:
    /// `mix(0.2*constant(0), 0.8*uniform(20, 25))`. Default: everyone plays from the start.
    #[serde(default)]
    pub join: Option<String>,
    /// Busy-wait before each departure, µs (default 80: µs precision at the cost of a core
    /// when departures are dense; 0 sleeps only, ~50 µs precision, for big populations).
    #[serde(default)]
    pub spin_us: Option<u64>,
    /// UDP departures due together as GSO super-datagrams: "auto" (default: bulk flows only,
    /// so a capture on the sending host shows each datagram as it is), "on", or "off".
    #[serde(default)]
    pub gso: Option<crate::gso::Gso>,
    /// Place the players on an emulated topology (`horde emu`; needs root).
    #[serde(default)]
    pub emu: Option<RawEmu>,
    /// A run key file (from `horde key --out FILE`), relative to the scenario: both sides of the
    /// run use it. Without one, each run makes a fresh key and hands it to its server side.
    #[serde(default)]
    pub key_file: Option<String>,
    /// Run through agents (`horde agent`) instead of on this machine: `horde run` is then the
    /// controller (`--agents` on the command line overrides the list).
    #[serde(default)]
    pub agents: Option<RawAgents>,
    /// Regulated virtual-world circuits instead of open-loop traffic (a service with a
    /// `[circuit]` table, e.g. opensim): each player is one circuit whose server sends what the
    /// client's throttle asks for.
    #[serde(default)]
    pub regulation: Option<RawRegulation>,
    /// The run's timeline: commands played at their time on the run's clock, each an `[[at]]`
    /// table with `t` (e.g. "10s") and the fields of a command line (`command = "players"`,
    /// `online = 600`; `command = "link"`, `a`, `b`, `set`/`state`; `command = "stop"`), answered
    /// and reported as a command from the channel is.
    #[serde(default)]
    #[schemars(with = "Vec<BTreeMap<String, serde_json::Value>>")]
    pub at: Vec<toml::Table>,
}

/// `[regulation]`: the client throttle and the server regulator of every circuit.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRegulation {
    /// `fixed:KBPS`, `opensim[:SETTING]`, `mongoose`, `mongoose-paper` or `tfrc`.
    pub throttle: String,
    /// `per-channel` (OpenSim) or `dual` (Mongoose; default).
    #[serde(default)]
    pub regulator: Option<String>,
    /// The server's rate for a circuit before its first throttle packet, kbit/s (default 100).
    #[serde(default)]
    pub start_kbps: Option<f64>,
    /// How often an `opensim` throttle acts on the loss it measured, seconds (default: the
    /// viewer's 5; the Mongoose paper's 1). Only with `opensim`.
    #[serde(default)]
    pub throttle_period_s: Option<f64>,
    /// The lowest rate an `opensim` throttle falls to, kbit/s (default: the viewer's
    /// max(0.2 × setting, 50); the Mongoose paper's 50). Only with `opensim`.
    #[serde(default)]
    pub floor_kbps: Option<f64>,
}

/// A scenario's `[regulation]` table (the throttle is checked by the runner, which knows the
/// controllers).
#[derive(Debug, Clone, PartialEq)]
pub struct Regulation {
    pub throttle: String,
    pub regulator: String,
    pub start_kbps: f64,
    pub throttle_period_s: Option<f64>,
    pub floor_kbps: Option<f64>,
}

/// `[agents]`: where a distributed run's shards and server side go.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAgents {
    /// Agents: `HOST:PORT`, `HOST:PORT*WEIGHT`, `dns:NAME:PORT` or `@FILE` (relative to the
    /// scenario file).
    pub list: Vec<String>,
    /// The agent that runs the server side (default: the first of `list`).
    #[serde(default)]
    pub server: Option<String>,
    /// The controller's credentials directory (relative to the scenario file).
    #[serde(default)]
    pub credentials: Option<String>,
    /// The dead-man interval (default 3s).
    #[serde(default)]
    pub deadman: Option<String>,
}

/// A scenario's `[agents]` table, paths resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Agents {
    pub list: Vec<String>,
    pub server: Option<String>,
    pub credentials: Option<std::path::PathBuf>,
    pub deadman: Option<String>,
}

/// `[emu]`: which topology, where the players and the server live.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEmu {
    /// Topology file, relative to the scenario file.
    pub topology: String,
    /// Client hosts: node names, or group names (a group `client` of `count = 200` is
    /// `client1` … `client200`). Players are dealt to them in turn.
    pub clients: Vec<String>,
    /// The host the server side runs on.
    pub server: String,
    /// Players reach the server over IPv6 (the topology must have `ipv6 = true`).
    #[serde(default)]
    pub ipv6: bool,
}

/// A scenario's placement on an emulated topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub topology: std::path::PathBuf,
    pub clients: Vec<String>,
    pub server: String,
    /// Over IPv6: the server's IPv6 address (see [`RawEmu::ipv6`]).
    pub ipv6: bool,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub service: Service,
    pub players: u32,
    /// Players online at the start (the first by id); `None`: all of them.
    pub online: Option<u32>,
    pub duration_s: f64,
    pub seed: u64,
    pub start_hour: f64,
    pub server: SocketAddr,
    pub variables: Vars,
    pub threads: usize,
    /// None: the server side decides by the cores of the machine it runs on.
    pub server_threads: Option<usize>,
    pub spin_us: u64,
    /// Which flows send GSO super-datagrams (both sides of the run).
    pub gso: crate::gso::Gso,
    /// Join-time distribution, seconds (None: all at 0).
    pub join: Option<crate::dist::Dist>,
    /// Players on emulated hosts (None: loopback or the given server address).
    pub emu: Option<Placement>,
    /// The run key's file, if the scenario names one.
    pub key_file: Option<std::path::PathBuf>,
    /// `[agents]`: run through agents (None: on this machine).
    pub agents: Option<Agents>,
    /// `[regulation]`: regulated circuits (None: the service's open-loop traffic).
    pub regulation: Option<Regulation>,
    /// `[[at]]`: (when, ns on the run's clock, the command's fields as on a command line), in
    /// time order; the commands are checked where commands are (`horde_scenario::control`).
    pub timeline: Vec<(u64, serde_json::Value)>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {field}: {msg}")]
pub struct ScenarioError {
    pub file: String,
    pub field: String,
    pub msg: String,
}

/// `variables` with the service's players variable (if it has one and `variables` does not set
/// it) at the players online at the start: a law over players follows the run's count.
fn with_players(service: &Service, variables: &Vars, players: u32, online: Option<u32>) -> Vars {
    let mut v = variables.clone();
    if let Some(name) = &service.players_variable {
        v.entry(name.clone()).or_insert(online.unwrap_or(players).min(players) as f64);
    }
    v
}

impl Scenario {
    /// The variables the service is bound with: the scenario's own, and the service's players
    /// variable at the players online at the start (after any override of `players` or
    /// `online`) unless the scenario sets it.
    pub fn bound_variables(&self) -> Vars {
        with_players(&self.service, &self.variables, self.players, self.online)
    }

    /// Parses a scenario; `dir` resolves a relative service path.
    pub fn parse(text: &str, file: &str, dir: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::parse_with(text, file, dir, None)
    }

    /// The text of the service file a scenario names (None for a built-in service): what a
    /// controller ships to its agents with the scenario's text.
    pub fn service_text(&self, dir: &Path) -> Result<Option<String>, ScenarioError> {
        let fail = |field: &str, msg: String| ScenarioError { file: self.name.clone(), field: field.to_string(), msg };
        let raw: RawScenario = toml::from_str(&self.text).map_err(|e| fail("syntax", crate::files::toml_error(&self.text, &e)))?;
        if crate::service::BUILTINS.iter().any(|b| b.0 == raw.service) {
            return Ok(None);
        }
        crate::files::read_text(&dir.join(&raw.service), crate::files::MAX_TOML, "service files")
            .map(Some)
            .map_err(|e| fail("service", format!("cannot read: {e}")))
    }

    /// Parses a scenario whose service file's text came with it (`service`: an agent parses
    /// what its controller shipped, and reads no file a scenario names).
    pub fn parse_with(text: &str, file: &str, dir: &Path, service: Option<&str>) -> Result<Scenario, ScenarioError> {
        Scenario::parse_inner(text, file, dir, service).map_err(|e| ScenarioError { msg: crate::files::redact(&e.msg, text), ..e })
    }

    fn parse_inner(text: &str, file: &str, dir: &Path, service: Option<&str>) -> Result<Scenario, ScenarioError> {
        let fail = |field: &str, msg: String| ScenarioError { file: file.to_string(), field: field.to_string(), msg };
        let raw: RawScenario = toml::from_str(text).map_err(|e| fail("syntax", crate::files::toml_error(text, &e)))?;
        let builtin = crate::service::BUILTINS.iter().any(|b| b.0 == raw.service);
        let mut service = match service {
            Some(t) if !builtin => Service::parse(t, &raw.service).map_err(|e| fail("service", e.to_string()))?,
            _ => {
                let svc_ref = if builtin { raw.service.clone() } else { dir.join(&raw.service).to_string_lossy().into_owned() };
                Service::load(&svc_ref).map_err(|e| fail("service", e.to_string()))?
            }
        };
        if raw.fixed_hour == Some(true) {
            service.hour_advances = false;
        }

        check_players(raw.players, raw.online).map_err(|(f, m)| fail(f, m))?;
        let text_of = |q: &Quantity| match q {
            Quantity::Int(v) => v.to_string(),
            Quantity::Float(v) => v.to_string(),
            Quantity::Text(s) => s.clone(),
        };
        let dur = crate::units::parse_duration_ns(&text_of(&raw.duration)).map_err(|m| fail("duration", m))?;
        check_duration(dur).map_err(|m| fail("duration", m))?;
        let start_hour = raw.start_hour.unwrap_or(20.0);
        if !(0.0..24.0).contains(&start_hour) {
            return Err(fail("start_hour", format!("must be in 0..24 (got {start_hour})")));
        }
        let server = crate::flow::parse_addr(raw.server.as_deref().unwrap_or("127.0.0.1:0")).map_err(|m| fail("server", m))?;
        for k in raw.variables.keys() {
            if !service.variables.contains_key(k) {
                let known: Vec<&str> = service.variables.keys().map(|s| s.as_str()).collect();
                return Err(fail(
                    &format!("variables.{k}"),
                    format!("service `{}` has no variable `{k}` (it has: {})", service.name, if known.is_empty() { "none".into() } else { known.join(", ") }),
                ));
            }
        }
        let variables: Vars = raw.variables.into_iter().collect();
        service.bind(&with_players(&service, &variables, raw.players, raw.online)).map_err(|(f, m)| fail(&format!("variables (in service {})", f), m))?;
        let join = match &raw.join {
            Some(j) => {
                let d = j.parse::<crate::dist::Dist>().map_err(|e| fail("join", e.to_string()))?.validate().map_err(|e| fail("join", e.to_string()))?;
                Some(d)
            }
            None => None,
        };
        let threads = raw.threads.unwrap_or(1);
        if threads == 0 || threads > 64 {
            return Err(fail("threads", format!("must be 1..=64 (got {threads})")));
        }
        let regulation = match raw.regulation {
            None => None,
            Some(r) => {
                if service.circuit.is_empty() {
                    return Err(fail(
                        "regulation",
                        format!("service `{}` has no [circuit] table, which regulated circuits need (the built-in opensim has one)", service.name),
                    ));
                }
                let regulator = r.regulator.unwrap_or_else(|| "dual".into());
                if regulator != "dual" && regulator != "per-channel" {
                    return Err(fail("regulation.regulator", format!("`{regulator}`: give per-channel (OpenSim) or dual (Mongoose)")));
                }
                let start_kbps = r.start_kbps.unwrap_or(100.0);
                if !(1.0..=10_000.0).contains(&start_kbps) {
                    return Err(fail("regulation.start_kbps", format!("must be 1..=10000 kbit/s (got {start_kbps})")));
                }
                Some(Regulation { throttle: r.throttle, regulator, start_kbps, throttle_period_s: r.throttle_period_s, floor_kbps: r.floor_kbps })
            }
        };
        let sc = Scenario {
            name: raw.name.unwrap_or_else(|| file.to_string()),
            service,
            players: raw.players,
            online: raw.online,
            duration_s: dur as f64 / 1e9,
            seed: raw.seed.unwrap_or(1),
            start_hour,
            server,
            variables,
            threads,
            server_threads: raw.server_threads.map(|n| n.clamp(1, 64)),
            spin_us: raw.spin_us.unwrap_or(80),
            gso: raw.gso.unwrap_or_default(),
            join,
            emu: match raw.emu {
                None => None,
                Some(e) => {
                    if e.clients.is_empty() {
                        return Err(fail("emu.clients", "name at least one client host or group".into()));
                    }
                    Some(Placement { topology: dir.join(&e.topology), clients: e.clients, server: e.server, ipv6: e.ipv6 })
                }
            },
            key_file: raw.key_file.map(|k| dir.join(k)),
            agents: match raw.agents {
                None => None,
                Some(a) => {
                    if a.list.is_empty() {
                        return Err(fail("agents.list", "name at least one agent (HOST:PORT, dns:NAME:PORT or @FILE)".into()));
                    }
                    if let Some(d) = &a.deadman {
                        let ns = crate::units::parse_duration_ns(d).map_err(|m| fail("agents.deadman", m))?;
                        if !(1_000_000_000..=60_000_000_000).contains(&ns) {
                            return Err(fail("agents.deadman", format!("must be 1s..60s (got {d})")));
                        }
                    }
                    let list = a.list.into_iter().map(|e| match e.strip_prefix('@') {
                        Some(f) => format!("@{}", dir.join(f).display()),
                        None => e,
                    });
                    Some(Agents { list: list.collect(), server: a.server, credentials: a.credentials.map(|c| dir.join(c)), deadman: a.deadman })
                }
            },
            regulation,
            timeline: timeline(&raw.at, dur).map_err(|(f, m)| fail(&f, m))?,
            text: text.to_string(),
        };
        sc.check_join()?;
        Ok(sc)
    }

    /// Reads and parses a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = crate::files::read_text(path, crate::files::MAX_TOML, "scenario files").map_err(|e| ScenarioError {
            file: file.clone(),
            field: "file".into(),
            msg: format!("cannot read: {e}"),
        })?;
        Scenario::parse(&text, &file, path.parent().unwrap_or(Path::new(".")))
    }

    /// When player `p` joins, seconds after the start (0 without a `join` distribution). Never
    /// after the run's end: a draw beyond it (at most 1 % of them, [`Scenario::check_join`])
    /// joins at the end, so that it is not played and nothing waits for it.
    pub fn join_time(&self, p: u32) -> f64 {
        use rand::SeedableRng;
        let Some(d) = &self.join else { return 0.0 };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(crate::derive_seed(self.seed ^ 0x4A01_4E00, p as u64));
        d.sampler().sample(&mut rng).clamp(0.0, self.duration_s)
    }

    /// Players join within the run: a `join` distribution that puts more than 1 % of them
    /// after the run's end is refused, naming the share and the fix (checked again when the
    /// duration is overridden).
    pub fn check_join(&self) -> Result<(), ScenarioError> {
        let Some(d) = &self.join else { return Ok(()) };
        let within = d.cdf(self.duration_s);
        if within < 0.99 {
            return Err(ScenarioError {
                file: self.name.clone(),
                field: "join".into(),
                msg: format!(
                    "puts {:.1} % of the players after the run's end ({} s): give a join distribution within the duration (e.g. uniform(0, {})) or a longer duration",
                    (1.0 - within) * 100.0,
                    self.duration_s,
                    (self.duration_s * 0.8).floor().max(1.0)
                ),
            });
        }
        Ok(())
    }

    /// Every player's stays, each from its join time.
    pub fn segments(&self) -> Vec<Vec<crate::behaviour::Segment>> {
        self.segments_unless(&|| false).expect("never stopped")
    }

    /// [`Scenario::segments`], asking `stop` between players: `None` if it said stop (a long
    /// plan must not outlive Ctrl-C).
    pub fn segments_unless(&self, stop: &dyn Fn() -> bool) -> Option<Vec<Vec<crate::behaviour::Segment>>> {
        let params = self.behaviour_params();
        let mut out = Vec::with_capacity(self.players as usize);
        for p in 0..self.players {
            if p % 256 == 0 && stop() {
                return None;
            }
            out.push(crate::behaviour::player_joining(&self.service, &params, p, self.join_time(p)));
        }
        Some(out)
    }

    /// Who is online: `online` of the players from the start, each later joiner at its own
    /// `join` draw after the change that admits it.
    pub fn roster(&self) -> crate::roster::Roster {
        let join = (0..self.players).map(|p| (self.join_time(p) * 1e9) as u64).collect();
        crate::roster::Roster::new(self.online.unwrap_or(self.players).min(self.players), join).expect("online is at most players")
    }

    pub fn behaviour_params(&self) -> crate::behaviour::Params {
        crate::behaviour::Params { players: self.players, duration_s: self.duration_s, seed: self.seed, start_hour: self.start_hour }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 21: `join = "constant(1e15)"` ran forever and `uniform(0, 60)` stretched a 15 s run
    /// to 61 s; joins must fall within the run.
    #[test]
    fn joins_after_the_runs_end_are_refused_and_draws_never_pass_it() {
        let sc = |join: &str| Scenario::parse(&format!("service = \"wow\"\nplayers = 100\nduration = \"15s\"\njoin = \"{join}\"\n"), "t.toml", Path::new("."));
        for bad in ["constant(1e15)", "uniform(0, 60)"] {
            let e = sc(bad).unwrap_err();
            assert_eq!(e.field, "join", "{bad}");
            assert!(e.msg.contains("after the run's end"), "{}", e.msg);
        }
        let ok = sc("exponential(2)").unwrap();
        assert!((0..100).all(|p| ok.join_time(p) <= ok.duration_s));
    }
}
