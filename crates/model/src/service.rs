//! The service repository: behaviour and traffic models as TOML files (schema in
//! `docs/services.md`). Built-ins are embedded in the binary; user files load by path. A file is
//! parsed into [`RawService`] and validated into a [`Service`]; every error names the file, the
//! field and the problem.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::dist::{Dist, Vars};
use crate::flow::Transport;

/// Built-in services: (name, TOML text).
pub const BUILTINS: &[(&str, &str)] = &[
    ("wow", include_str!("../services/wow.toml")),
    ("wow-sessions", include_str!("../services/wow-sessions.toml")),
    ("quake3", include_str!("../services/quake3.toml")),
    ("quake3-ditg", include_str!("../services/quake3-ditg.toml")),
    ("counter-strike", include_str!("../services/counter-strike.toml")),
    ("ngmn-gaming", include_str!("../services/ngmn-gaming.toml")),
    ("rta-mobile-gaming", include_str!("../services/rta-mobile-gaming.toml")),
    ("voip", include_str!("../services/voip.toml")),
    ("opensim", include_str!("../services/opensim.toml")),
    ("opensim-sparta", include_str!("../services/opensim-sparta.toml")),
    ("opensim-linlithgow", include_str!("../services/opensim-linlithgow.toml")),
];

pub const HOURS: usize = 24;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawService {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub source: Option<String>,
    pub transport: String,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default = "yes")]
    pub hour_advances: bool,
    #[serde(default)]
    pub variables: BTreeMap<String, f64>,
    /// The variable that is the number of players on the server: a scenario that does not set
    /// it gets its players online at the start (a law over players follows the run's count).
    #[serde(default)]
    pub players_variable: Option<String>,
    #[serde(default)]
    pub session: RawSession,
    pub states: Vec<String>,
    #[serde(default)]
    pub first: Option<Vec<f64>>,
    #[serde(default)]
    pub first_by_hour: Option<BTreeMap<String, Vec<f64>>>,
    #[serde(default)]
    pub transitions: Option<BTreeMap<String, Vec<f64>>>,
    #[serde(default)]
    pub transitions_by_hour: Option<BTreeMap<String, BTreeMap<String, Vec<f64>>>>,
    #[serde(default)]
    pub state: BTreeMap<String, RawState>,
    /// Free-form numbers for later layers (e.g. OpenSim channel drip rates), kept as data.
    #[serde(default)]
    pub channels: BTreeMap<String, f64>,
    /// Parameters of the automated players of `horde bots` (movement, aim, fire and jump
    /// phases), kept as data; `horde-q3` validates them.
    #[serde(default)]
    pub bot: BTreeMap<String, f64>,
    /// The regulated circuit's demand model (`horde circuit`), kept as data; `horde-regulate`
    /// validates it.
    #[serde(default)]
    pub circuit: BTreeMap<String, f64>,
    /// How close the model is to real traffic, by player count (a capture bench's figures).
    #[serde(default)]
    pub fidelity: Option<Fidelity>,
}

/// A service's check against real traffic: at each player count the bench measured, the
/// model's KS distance from the real server (`model_ks`) beside the real server's own spread
/// between sessions (`real_spread_ks`, the yardstick). The report of a run shows the count
/// nearest its players (docs/services.md).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fidelity {
    /// What the model was checked against, and where the figures come from.
    pub against: String,
    /// What is compared (e.g. "server → client APDU sizes").
    pub what: String,
    pub players: Vec<u32>,
    pub model_ks: Vec<f64>,
    pub real_spread_ks: Vec<f64>,
}

impl Fidelity {
    fn check(&self) -> Result<(), String> {
        let n = self.players.len();
        if n == 0 || n > 1000 || self.model_ks.len() != n || self.real_spread_ks.len() != n {
            return Err(format!(
                "players, model_ks and real_spread_ks need one value each per count (1..=1000 counts; got {n}, {}, {})",
                self.model_ks.len(),
                self.real_spread_ks.len()
            ));
        }
        if self.players.windows(2).any(|w| w[0] >= w[1]) {
            return Err("players must increase".into());
        }
        if self.model_ks.iter().chain(&self.real_spread_ks).any(|k| !(0.0..=1.0).contains(k)) {
            return Err("a KS distance is in 0..=1".into());
        }
        if self.against.len() > 300 || self.what.len() > 100 {
            return Err("against (300 characters) or what (100) is too long".into());
        }
        Ok(())
    }

    /// The measured count nearest `players` (the lower one on a tie): (count, model KS, real
    /// spread).
    pub fn nearest(&self, players: u32) -> (u32, f64, f64) {
        let i = (0..self.players.len()).min_by_key(|&i| (self.players[i].abs_diff(players), self.players[i])).unwrap_or(0);
        (self.players[i], self.model_ks[i], self.real_spread_ks[i])
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSession {
    /// "fixed" (every player plays the whole run) or "arrivals".
    #[serde(default)]
    pub model: Option<String>,
    /// Seconds between session starts of one player slot (arrivals model).
    #[serde(default)]
    pub gap: Option<String>,
    /// Session length, seconds (arrivals and diurnal models).
    #[serde(default)]
    pub length: Option<String>,
    /// Diurnal model: how many times a day a player slot that is offline logs in, on average.
    #[serde(default)]
    pub logins_per_day: Option<f64>,
    /// Diurnal model: 24 relative weights, hour 0 to 23, of the login rate by hour of day.
    #[serde(default)]
    pub logins_by_hour: Option<Vec<f64>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    /// Dwell time in seconds; absent means the state lasts the whole session.
    #[serde(default)]
    pub dwell: Option<String>,
    #[serde(default)]
    pub dwell_by_hour: BTreeMap<String, String>,
    #[serde(default)]
    pub up: Option<RawDirection>,
    #[serde(default)]
    pub down: Option<RawDirection>,
    #[serde(default)]
    pub sub: Vec<RawSub>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDirection {
    /// Inter-departure time distribution, ms.
    pub idt: String,
    /// APDU size distribution, bytes.
    pub size: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSub {
    pub name: String,
    pub p: f64,
    #[serde(default)]
    pub vars: BTreeMap<String, f64>,
}

/// Client → server or server → client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    Up,
    Down,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }
}

/// A problem in a service file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {field}: {msg}")]
pub struct ServiceError {
    pub file: String,
    pub field: String,
    pub msg: String,
}

/// Traffic of one direction in one (state, sub-activity).
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    pub idt: Dist,
    pub size: Dist,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sub {
    pub name: String,
    pub p: f64,
    pub vars: Vars,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StateModel {
    pub name: String,
    /// Dwell (seconds) per hour of day; `None`: lasts the whole session.
    pub dwell: Option<Vec<Dist>>,
    /// At least one (a single unnamed one when the file gives none); probabilities normalised.
    pub subs: Vec<Sub>,
    raw_up: Option<RawDirection>,
    raw_down: Option<RawDirection>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Session {
    Fixed,
    Arrivals {
        gap: Box<Dist>,
        length: Box<Dist>,
    },
    /// Each player slot is a subscriber who logs in and out: offline, it logs in at the rate
    /// of the hour of day (`rate`, per second, hour 0 to 23); a session lasts `length` seconds.
    /// See [`crate::sessions`].
    Diurnal {
        length: Box<Dist>,
        rate: [f64; HOURS],
    },
}

/// A validated service.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub name: String,
    pub description: String,
    pub source: Option<String>,
    pub transport: Transport,
    pub port: u16,
    pub hour_advances: bool,
    pub variables: Vars,
    /// The variable that is the number of players ([`RawService::players_variable`]).
    pub players_variable: Option<String>,
    /// Its check against real traffic ([`Fidelity`]).
    pub fidelity: Option<Fidelity>,
    pub session: Session,
    pub states: Vec<StateModel>,
    /// First-state probabilities per hour (normalised).
    pub first: Vec<Vec<f64>>,
    /// Transition matrices per hour, `[hour][from][to]` (rows normalised).
    pub transitions: Vec<Vec<Vec<f64>>>,
    pub channels: BTreeMap<String, f64>,
    /// Automated-player parameters (`[bot]`), for `horde bots`.
    pub bot: BTreeMap<String, f64>,
    /// The regulated circuit's demand (`[circuit]`), for `horde circuit`.
    pub circuit: BTreeMap<String, f64>,
    /// The text the service was loaded from (for `horde services show`).
    pub text: String,
}

/// The traffic model of a service with its variables bound: `[state][sub][direction]`.
#[derive(Debug, Clone)]
pub struct BoundTraffic {
    pub vars: Vars,
    pub by_state: Vec<Vec<[Option<Traffic>; 2]>>,
}

impl Service {
    /// A built-in by name.
    pub fn builtin(name: &str) -> Result<Service, ServiceError> {
        let (_, text) = BUILTINS.iter().find(|(n, _)| *n == name).ok_or_else(|| ServiceError {
            file: name.to_string(),
            field: "name".into(),
            msg: format!(
                "no built-in service `{name}`; built-ins: {} (or give a path to a .toml file)",
                BUILTINS.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
            ),
        })?;
        Service::parse(text, &format!("built-in `{name}`"))
    }

    /// Parses and validates a service file's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Service, ServiceError> {
        Service::parse_inner(text, file).map_err(|e| ServiceError { msg: crate::files::redact(&e.msg, text), ..e })
    }

    fn parse_inner(text: &str, file: &str) -> Result<Service, ServiceError> {
        let fail = |field: &str, msg: String| ServiceError { file: file.to_string(), field: field.to_string(), msg };
        let merged = extend(text, 0).map_err(|(f, m)| fail(&f, m))?;
        let text = merged.as_deref().unwrap_or(text);
        let raw: RawService = toml::from_str(text).map_err(|e| fail("syntax", crate::files::toml_error(text, &e)))?;
        let transport = match raw.transport.as_str() {
            "tcp" => Transport::Tcp,
            "udp" => Transport::Udp,
            t => return Err(fail("transport", format!("must be tcp or udp (got `{t}`)"))),
        };
        let n = raw.states.len();
        if n == 0 || n > 255 {
            return Err(fail("states", format!("must list 1..=255 states (got {n})")));
        }
        if let Some(dup) = raw.states.iter().enumerate().find(|(i, s)| raw.states[..*i].contains(s)) {
            return Err(fail("states", format!("`{}` is listed twice", dup.1)));
        }
        let first = hourly_rows(&raw.first, &raw.first_by_hour, n).map_err(|(f, m)| fail(&f.replace("ROW", "first"), m))?;
        let transitions = transitions(&raw, n).map_err(|(f, m)| fail(&f, m))?;
        for k in raw.state.keys() {
            if !raw.states.contains(k) {
                return Err(fail(&format!("state.{k}"), format!("`{k}` is not in `states` ({})", raw.states.join(", "))));
            }
        }
        // A state without its table would have no dwell (it would never end) and no traffic:
        // almost always a typo or a forgotten table, never what the author meant.
        if let Some(missing) = raw.states.iter().find(|s| !raw.state.contains_key(*s)) {
            return Err(fail(&format!("state.{missing}"), format!("`{missing}` is listed in `states` but has no [state.{missing}] table (dwell, up, down)")));
        }
        let mut states = Vec::new();
        for name in &raw.states {
            let rs = raw.state.get(name).cloned().unwrap_or_default();
            let at = |f: &str| format!("state.{name}.{f}");
            let dwell = match (&rs.dwell, rs.dwell_by_hour.is_empty()) {
                (None, true) => None,
                (None, false) => return Err(fail(&at("dwell"), "dwell_by_hour needs a default `dwell` for the other hours".into())),
                (Some(d), _) => {
                    let base = dist(d, &raw.variables).map_err(|m| fail(&at("dwell"), m))?;
                    let mut v = vec![base; HOURS];
                    for (h, d) in &rs.dwell_by_hour {
                        let hour = hour_key(h).map_err(|m| fail(&at("dwell_by_hour"), m))?;
                        v[hour] = dist(d, &raw.variables).map_err(|m| fail(&format!("state.{name}.dwell_by_hour.{h}"), m))?;
                    }
                    Some(v)
                }
            };
            let subs = if rs.sub.is_empty() {
                vec![Sub { name: String::new(), p: 1.0, vars: Vars::new() }]
            } else {
                let total: f64 = rs.sub.iter().map(|s| s.p).sum();
                if rs.sub.iter().any(|s| !(s.p.is_finite() && s.p >= 0.0)) || total <= 0.0 {
                    return Err(fail(&at("sub"), "probabilities `p` must be >= 0 and sum to more than 0".into()));
                }
                rs.sub.iter().map(|s| Sub { name: s.name.clone(), p: s.p / total, vars: s.vars.clone().into_iter().collect() }).collect()
            };
            states.push(StateModel { name: name.clone(), dwell, subs, raw_up: rs.up, raw_down: rs.down });
        }
        let session = match raw.session.model.as_deref() {
            None | Some("fixed") => Session::Fixed,
            Some("arrivals") => {
                let g = raw.session.gap.as_deref().ok_or_else(|| fail("session.gap", "the arrivals model needs `gap` (seconds between sessions)".into()))?;
                let l = raw.session.length.as_deref().ok_or_else(|| fail("session.length", "the arrivals model needs `length` (session seconds)".into()))?;
                Session::Arrivals {
                    gap: Box::new(dist(g, &raw.variables).map_err(|m| fail("session.gap", m))?),
                    length: Box::new(dist(l, &raw.variables).map_err(|m| fail("session.length", m))?),
                }
            }
            Some("diurnal") => diurnal(&raw).map_err(|(f, m)| fail(&f, m))?,
            Some(m) => return Err(fail("session.model", format!("must be fixed, arrivals or diurnal (got `{m}`)"))),
        };
        if let Some(v) = raw.players_variable.as_deref().filter(|v| !raw.variables.contains_key(*v)) {
            let _ = v;
            return Err(fail("players_variable", "names no variable of [variables]; declare it there with its default".into()));
        }
        if let Some(f) = &raw.fidelity {
            f.check().map_err(|m| fail("fidelity", m))?;
        }
        let svc = Service {
            name: raw.name.clone(),
            description: raw.description,
            source: raw.source,
            transport,
            port: raw.port.unwrap_or(9000),
            hour_advances: raw.hour_advances,
            variables: raw.variables.into_iter().collect(),
            players_variable: raw.players_variable,
            fidelity: raw.fidelity,
            session,
            states,
            first,
            transitions,
            channels: raw.channels,
            bot: raw.bot,
            circuit: raw.circuit,
            text: text.to_string(),
        };
        // Bind once with the defaults, so a bad traffic model is refused when loading.
        svc.bind(&Vars::new()).map_err(|(f, m)| fail(&f, m))?;
        Ok(svc)
    }

    /// Loads a built-in by name, or a file by path.
    pub fn load(name_or_path: &str) -> Result<Service, ServiceError> {
        if BUILTINS.iter().any(|b| b.0 == name_or_path) {
            return Service::builtin(name_or_path);
        }
        if name_or_path.ends_with(".toml") || name_or_path.contains('/') {
            let text = crate::files::read_text(std::path::Path::new(name_or_path), crate::files::MAX_TOML, "service files").map_err(|e| ServiceError {
                file: name_or_path.to_string(),
                field: "file".into(),
                msg: format!("cannot read: {e}"),
            })?;
            return Service::parse(&text, name_or_path);
        }
        Service::builtin(name_or_path)
    }

    pub fn state_index(&self, name: &str) -> Option<usize> {
        self.states.iter().position(|s| s.name == name)
    }

    /// Evaluates every traffic formula with the service's variables overridden by `overrides`
    /// (e.g. `N`) and each sub-activity's own variables.
    pub fn bind(&self, overrides: &Vars) -> Result<BoundTraffic, (String, String)> {
        let mut vars = self.variables.clone();
        vars.extend(overrides.clone());
        let mut by_state = Vec::new();
        for s in &self.states {
            let mut subs = Vec::new();
            for sub in &s.subs {
                let mut v = vars.clone();
                v.extend(sub.vars.clone());
                let mut dirs: [Option<Traffic>; 2] = [None, None];
                for (i, (dir, raw)) in [(Direction::Up, &s.raw_up), (Direction::Down, &s.raw_down)].into_iter().enumerate() {
                    if let Some(r) = raw {
                        let at = |f: &str| {
                            format!(
                                "state.{}.{}.{f}{}",
                                s.name,
                                dir.name(),
                                if sub.name.is_empty() { String::new() } else { format!(" (sub-activity {})", sub.name) }
                            )
                        };
                        let idt = dist(&r.idt, &v).map_err(|m| (at("idt"), m))?;
                        idt.check_advances().map_err(|m| (at("idt"), m))?;
                        let size = dist(&r.size, &v).map_err(|m| (at("size"), m))?;
                        dirs[i] = Some(Traffic { idt, size });
                    }
                }
                subs.push(dirs);
            }
            by_state.push(subs);
        }
        Ok(BoundTraffic { vars, by_state })
    }

    /// Hour of day (0..24) at `t_s` seconds after a start at `start_hour`.
    pub fn hour_at(&self, start_hour: f64, t_s: f64) -> usize {
        let h = if self.hour_advances { start_hour + t_s / 3600.0 } else { start_hour };
        (h.rem_euclid(24.0)) as usize % HOURS
    }
}

/// How deep `extends` may chain (a service extending one that extends another ...).
const MAX_EXTENDS: usize = 4;

/// A service file with `extends = "BUILT-IN"`: the built-in's text with every top-level key the
/// file gives replaced by the file's (a table is replaced whole, not merged key by key).
/// `None` when the file extends nothing.
fn extend(text: &str, depth: usize) -> Result<Option<String>, (String, String)> {
    let Ok(mut own) = text.parse::<toml::Table>() else {
        return Ok(None); // the caller's parse names the syntax error
    };
    let Some(base) = own.remove("extends") else { return Ok(None) };
    let Some(base) = base.as_str() else {
        return Err(("extends".into(), "must be the name of a built-in service, e.g. extends = \"wow\"".into()));
    };
    if depth >= MAX_EXTENDS {
        return Err(("extends".into(), format!("chains more than {MAX_EXTENDS} services deep (a loop?); extend a built-in directly")));
    }
    let Some((_, base_text)) = BUILTINS.iter().find(|(n, _)| *n == base) else {
        return Err(("extends".into(), format!("no built-in service `{base}`; built-ins: {}", BUILTINS.iter().map(|b| b.0).collect::<Vec<_>>().join(", "))));
    };
    let base_text = extend(base_text, depth + 1)?.unwrap_or_else(|| base_text.to_string());
    let mut table: toml::Table = base_text.parse().map_err(|e| ("extends".into(), format!("built-in `{base}` does not parse: {e}")))?;
    for (k, v) in own {
        table.insert(k, v);
    }
    toml::to_string(&table).map(Some).map_err(|e| ("extends".into(), format!("cannot merge with `{base}`: {e}")))
}

/// The diurnal session model's fields, checked.
fn diurnal(raw: &RawService) -> Result<Session, (String, String)> {
    let s = &raw.session;
    let l = s.length.as_deref().ok_or_else(|| ("session.length".to_string(), "the diurnal model needs `length` (session seconds)".to_string()))?;
    let length = dist(l, &raw.variables).map_err(|m| ("session.length".to_string(), m))?;
    if length.mean_estimate().is_none_or(|m| !(m.is_finite() && m > 0.0)) {
        return Err(("session.length".into(), format!("`{l}` must have a finite mean above 0 s")));
    }
    let per_day = s.logins_per_day.ok_or_else(|| ("session.logins_per_day".to_string(), "the diurnal model needs `logins_per_day` (e.g. 1.0)".to_string()))?;
    if !(per_day.is_finite() && per_day > 0.0 && per_day <= 1440.0) {
        return Err(("session.logins_per_day".into(), format!("must be above 0 and at most 1440 (got {per_day})")));
    }
    let w = s.logins_by_hour.as_deref().unwrap_or(&[1.0; HOURS]);
    let total: f64 = w.iter().sum();
    if w.len() != HOURS || w.iter().any(|x| !(x.is_finite() && *x >= 0.0)) || !(total > 0.0 && total.is_finite()) {
        return Err(("session.logins_by_hour".into(), format!("must be {HOURS} weights >= 0 (hour 0 to 23) with a sum above 0 (got {} values)", w.len())));
    }
    // A slot offline all day logs in `per_day` times: the hour's share of that, per second.
    let mut rate = [0.0; HOURS];
    for (r, x) in rate.iter_mut().zip(w) {
        *r = per_day * x / total / 3600.0;
    }
    Ok(Session::Diurnal { length: Box::new(length), rate })
}

fn dist(text: &str, vars: &Vars) -> Result<Dist, String> {
    let d = Dist::parse_with(text, vars).map_err(|e| e.to_string())?;
    d.validate().map_err(|e| e.to_string())
}

fn hour_key(h: &str) -> Result<usize, String> {
    match h.parse::<usize>() {
        Ok(v) if v < HOURS => Ok(v),
        _ => Err(format!("hour `{h}` must be 0..=23")),
    }
}

fn normalise(row: &[f64], n: usize) -> Result<Vec<f64>, String> {
    if row.len() != n {
        return Err(format!("has {} values, one per state needs {n}", row.len()));
    }
    if row.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err("values must be >= 0".into());
    }
    let total: f64 = row.iter().sum();
    if total <= 0.0 {
        return Err("values must sum to more than 0".into());
    }
    Ok(row.iter().map(|v| v / total).collect())
}

/// One row for all hours, or one per hour (all 24 required).
fn hourly_rows(all: &Option<Vec<f64>>, by_hour: &Option<BTreeMap<String, Vec<f64>>>, n: usize) -> Result<Vec<Vec<f64>>, (String, String)> {
    match (all, by_hour) {
        (Some(_), Some(_)) => Err(("ROW".into(), "give either `first` or `first_by_hour`, not both".into())),
        (Some(r), None) => {
            let r = normalise(r, n).map_err(|m| ("ROW".to_string(), m))?;
            Ok(vec![r; HOURS])
        }
        (None, Some(map)) => {
            let mut out = vec![Vec::new(); HOURS];
            for (h, r) in map {
                let hour = hour_key(h).map_err(|m| ("ROW_by_hour".to_string(), m))?;
                out[hour] = normalise(r, n).map_err(|m| (format!("ROW_by_hour.{h}"), m))?;
            }
            if let Some(h) = out.iter().position(|r| r.is_empty()) {
                return Err(("ROW_by_hour".into(), format!("hour {h} is missing; give all 24 hours or a single `first`")));
            }
            Ok(out)
        }
        (None, None) if n == 1 => Ok(vec![vec![1.0]; HOURS]),
        (None, None) => Err(("ROW".into(), "missing: give the first-state probabilities".into())),
    }
}

fn transitions(raw: &RawService, n: usize) -> Result<Vec<Vec<Vec<f64>>>, (String, String)> {
    let matrix = |m: &BTreeMap<String, Vec<f64>>, field: &str| -> Result<Vec<Vec<f64>>, (String, String)> {
        raw.states
            .iter()
            .map(|s| {
                let row = m.get(s).ok_or_else(|| (field.to_string(), format!("row `{s}` is missing")))?;
                normalise(row, n).map_err(|e| (format!("{field}.{s}"), e))
            })
            .collect()
    };
    match (&raw.transitions, &raw.transitions_by_hour) {
        (Some(_), Some(_)) => Err(("transitions".into(), "give either `transitions` or `transitions_by_hour`, not both".into())),
        (Some(m), None) => Ok(vec![matrix(m, "transitions")?; HOURS]),
        (None, Some(by)) => {
            let mut out = vec![Vec::new(); HOURS];
            for (h, m) in by {
                let hour = hour_key(h).map_err(|e| ("transitions_by_hour".to_string(), e))?;
                out[hour] = matrix(m, &format!("transitions_by_hour.{h}"))?;
            }
            if let Some(h) = out.iter().position(|r| r.is_empty()) {
                return Err(("transitions_by_hour".into(), format!("hour {h} is missing; give all 24 hours or a single `transitions`")));
            }
            Ok(out)
        }
        (None, None) if n == 1 => Ok(vec![vec![vec![1.0]]; HOURS]),
        (None, None) => Err(("transitions".into(), "missing: a service with several states needs transition probabilities".into())),
    }
}
