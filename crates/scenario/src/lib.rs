//! Horde's scenario runner as a library: what `horde run` does, without the CLI. A scenario is
//! planned ([`plan`]: every player's behaviour stays and the bound traffic model, the same on
//! every side and every shard), placed (on loopback, or on an emulated topology), run
//! ([`execute`]: the client side in this process, the server side as a child), and reported
//! ([`Summary`], `summary.json`, `index.html`). Progress and notes go through a callback
//! ([`Event`]), never to the terminal; errors say whether the input was bad, the run failed
//! or it was interrupted ([`Error`]).
//!
//! Players can be split into shards by id ([`shards`]); a shard runs only its players' client
//! sides while every side still computes every player's behaviour from the scenario alone.

pub mod child;
pub mod circuit_report;
pub mod circuits;
pub mod compare;
pub mod control;
pub mod execute;
pub mod inputs;
pub mod live_digest;
pub mod model_check;
pub mod part;
pub mod placement;
pub mod players;
pub mod regulated;
pub mod report;
pub mod run_part;
pub mod sender_charts;
pub mod server;
pub mod steer;
pub mod topology;

pub use execute::{execute, RunOptions, RunOutcome, ServerSide};
pub use players::{plan, player_flow, run_clients, shards, Clients, Players};
pub use report::{AgentRow, AgentStats, Distributed, Interruption, LiveCheck, Summary, Usage, SUMMARY_SCHEMA_VERSION};
pub use server::{read_key, run_key, serve, ServeHooks};

use horde_model::scenario::Scenario;

/// Why a run did not happen or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The scenario, a file it names, or an option is wrong (exit code 2).
    #[error("{0:#}")]
    BadInput(anyhow::Error),
    /// The run could not be carried out (I/O, the server side, the emulated network; exit 1).
    #[error("{0:#}")]
    Failed(anyhow::Error),
    /// Stopped by a signal before anything was measured (exit 130).
    #[error("{0}")]
    Interrupted(String),
}

impl Error {
    /// The process exit code for this error: 2 bad input, 1 failed, 130 interrupted.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::BadInput(_) => 2,
            Error::Failed(_) => 1,
            Error::Interrupted(_) => 130,
        }
    }

    /// The underlying error, with its context chain.
    pub fn into_anyhow(self) -> anyhow::Error {
        match self {
            Error::BadInput(e) | Error::Failed(e) => e,
            Error::Interrupted(m) => anyhow::anyhow!(m),
        }
    }
}

/// What a run reports while it runs.
#[derive(Debug, Clone)]
pub enum Event {
    /// The behaviour process planned every player, in this many seconds.
    Planned { seconds: f64 },
    /// A line for people (placement up, experiment taken down, …).
    Note(String),
    /// Once a second while the players run.
    Tick(Snapshot),
    /// The run's answer to a command, at once.
    Reply(control::Reply),
}

/// Progress over the last second, in every mode (one machine, or through agents): the
/// players' side's rates (up: what it sent, down: what it received), its totals, players per
/// category, and each agent's rates when the run goes through agents. One `--progress json`
/// line is a [`ProgressLine`] (docs/schemas/progress.schema.json).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Snapshot {
    /// Seconds since the players started.
    pub t_s: f64,
    /// Rates are per second over the interval since the last line (a second, or more when a
    /// busy machine delayed this one).
    pub up_pkt_s: u64,
    pub up_bit_s: u64,
    pub down_pkt_s: u64,
    pub down_bit_s: u64,
    /// Totals so far.
    pub sent_packets: u64,
    pub received_packets: u64,
    /// Players per behaviour state now (whole scenario, every shard; empty for runs without
    /// players, such as flows and bots).
    pub categories: Vec<(String, u32)>,
    /// Each agent's rates over the last second (empty on one machine).
    #[serde(default)]
    pub agents: Vec<AgentRates>,
    /// One-way delay of what the players received in the last second (server → players), ms:
    /// [median, 99th percentile], each within 3.1 % (live, from a log-linear histogram; the
    /// report's exact figures come from the logs). Absent when nothing arrived. Through agents,
    /// from their live summaries, of the second `loss.t_s` ends (within 1/128 of the value;
    /// the second that closed 3 s ago: every agent's records of it have arrived by then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_delay_ms: Option<[f64; 2]>,
    /// The same for what the server side received (players → server), as the server side
    /// counted it in its last second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_delay_ms: Option<[f64; 2]>,
    /// Per category over the last second: the APDUs the players sent (up) and received (down),
    /// beside what the model expects now of the players online in it. Empty for runs without
    /// categories. Through agents, of the second `loss.t_s` ends, beside the model's then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub category_rates: Vec<CategoryRates>,
    /// Per category so far, each way: APDUs sent and received and the one-way delay's median
    /// and 99th percentile (within a µs + 1/1,024 of the value). Through agents, as of their
    /// last pieces (a second or two behind), from their live summaries, which add up to the
    /// report's (`horde run --agents`); on one machine, from both sides' logs as they are
    /// written (`live_digest::Follower`: the same summary, the records a writer has handed to
    /// its file, under a second behind). Empty for a regulated run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub category_live: Vec<CategoryLive>,
    /// Loss each way of the packets sent in one second, counted 3 s after that second ended
    /// (what was still in flight has arrived by then; later arrivals count as lost here, the
    /// report is exact). Counted by second of departure, not by sequence numbers, so a player
    /// going offline is no loss. Absent until both sides closed a second. Through agents, from
    /// their live summaries, by the same rules (arrivals matched to departures once each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Box<LiveLoss>>,
    /// A regulated run's circuits in their last closed second (throttles, what they received,
    /// round trip, loss); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuits: Option<Box<circuits::CircuitsLive>>,
    /// A bots run's last second (`horde bots --progress json`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bots: Option<Box<BotsNow>>,
}

/// Loss of one second of departures, each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LiveLoss {
    /// The end of that second, in seconds since the players started (the `t_s` to plot it at).
    pub t_s: f64,
    /// APDUs the players sent in it, and how many of them the server side did not receive.
    pub up_sent: u64,
    pub up_lost: u64,
    /// APDUs the server side sent in it, and how many of them the players did not receive.
    pub down_sent: u64,
    pub down_lost: u64,
}

/// Bots against a game server, live.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct BotsNow {
    /// Bots started so far (they join over the ramp).
    pub started: u64,
    /// Packets the server answered in the last second, all bots together.
    pub answered_s: u64,
    /// The response time of those answers, ms: [median, p99] within 3.1 % (absent in a second
    /// without answers).
    pub response_ms: Option<[f64; 2]>,
}

/// One category's APDU rates over the last second, measured and expected.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CategoryRates {
    pub category: String,
    pub up_apdu_s: u64,
    pub down_apdu_s: u64,
    /// Σ over the players online in the category of 1000 / (the mean inter-departure time, ms,
    /// of the sub-activity each is in now): what the model sends per second.
    pub up_model: f64,
    pub down_model: f64,
}

/// One category's figures so far (see [`Snapshot::category_live`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CategoryLive {
    pub category: String,
    /// Players → server side.
    pub up: LiveDir,
    /// Server side → players.
    pub down: LiveDir,
}

/// One direction of a category so far.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LiveDir {
    pub sent: u64,
    pub received: u64,
    pub delay_p50_ms: Option<f64>,
    pub delay_p99_ms: Option<f64>,
}

/// One agent's rates over the last second: what it sent and what it received.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AgentRates {
    pub agent: String,
    pub sent_pkt_s: u64,
    pub sent_bit_s: u64,
    pub received_pkt_s: u64,
    pub received_bit_s: u64,
}

/// One line of a run's event stream: what `--progress json` writes (one JSON object per line)
/// and what the console's API streams (`horde ui`, docs/openapi.json) — one type for both
/// (docs/schemas/progress.schema.json). Every line names its scenario (or flow file).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventLine {
    /// The behaviour process planned every player, in `seconds`.
    Planned { scenario: String, seconds: f64 },
    /// A line for people (placement up, a command applied or refused, …).
    Note { scenario: String, text: String },
    /// Once a second while the run goes on.
    Progress { scenario: String, progress: Snapshot },
    /// The run is over: its exit code (0 done, 1 failed, 2 bad input, 130 stopped) and its
    /// report directory (written by whoever watched the run end: the console).
    Finished { scenario: String, exit: u8, report: String },
    /// The run's answer to a command (applied, when, what; or refused, why), at once.
    Reply {
        scenario: String,
        #[serde(flatten)]
        reply: control::Reply,
    },
}

impl EventLine {
    /// The line for `e` of scenario `scenario`.
    pub fn of(scenario: &str, e: &Event) -> EventLine {
        let scenario = scenario.to_string();
        match e {
            Event::Planned { seconds } => EventLine::Planned { scenario, seconds: *seconds },
            Event::Note(text) => EventLine::Note { scenario, text: text.clone() },
            Event::Tick(progress) => EventLine::Progress { scenario, progress: progress.clone() },
            Event::Reply(reply) => EventLine::Reply { scenario, reply: reply.clone() },
        }
    }
}

/// Players per behaviour state at `t_s`, of those the roster has online (stays end at the
/// run's end: just before it, players are counted as they were).
pub fn categories_at(sc: &Scenario, players: &players::Players, t_s: f64) -> Vec<(String, u32)> {
    let mut counts = vec![0u32; sc.service.states.len()];
    let at = t_s.min(sc.duration_s - 1e-6).max(0.0);
    players.each_stays(|p, segs| {
        if !players.roster.admitted(p, (at * 1e9) as u64) {
            return;
        }
        if let Some(s) = horde_model::behaviour::state_at(segs, at) {
            if let Some(c) = counts.get_mut(s.state as usize) {
                *c += 1;
            }
        }
    });
    sc.service.states.iter().zip(&counts).map(|(st, c)| (st.name.clone(), *c)).collect()
}

/// The model's APDU rate (per second) of every state × sub-activity × direction, computed once:
/// a mean inter-departure time may take a numerical integration of the distribution's CDF, far
/// too slow to repeat for every player every second while the run's senders share the CPU.
pub struct ModelRates(Vec<Vec<[Option<f64>; 2]>>);

impl ModelRates {
    pub fn of(players: &players::Players) -> ModelRates {
        let rate = |t: &Option<horde_model::service::Traffic>| t.as_ref()?.idt.mean_estimate().filter(|m| *m > 0.0).map(|m| 1000.0 / m);
        ModelRates(players.traffic.by_state.iter().map(|subs| subs.iter().map(|dirs| [rate(&dirs[0]), rate(&dirs[1])]).collect()).collect())
    }

    fn get(&self, state: usize, sub: usize, dir: usize) -> Option<f64> {
        self.0.get(state)?.get(sub)?[dir]
    }

    /// What the model expects per second now, per behaviour state: [up, down] APDUs/s summed
    /// over the players online in it, each by the mean inter-departure time of the sub-activity
    /// it is in at `t_s`.
    pub fn at(&self, sc: &Scenario, players: &players::Players, t_s: f64) -> Vec<[f64; 2]> {
        let mut rates = vec![[0.0; 2]; sc.service.states.len()];
        let at = t_s.min(sc.duration_s - 1e-6).max(0.0);
        players.each_stays(|p, segs| {
            if !players.roster.admitted(p, (at * 1e9) as u64) {
                return;
            }
            if let Some(s) = horde_model::behaviour::state_at(segs, at) {
                if let Some(r) = rates.get_mut(s.state as usize) {
                    for (dir, x) in r.iter_mut().enumerate() {
                        *x += self.get(s.state as usize, s.sub as usize, dir).unwrap_or(0.0);
                    }
                }
            }
        });
        rates
    }
}

/// Writes a file whole or not at all (a temporary name, then renamed): a side stopped while it
/// writes its report leaves none rather than half of one.
pub(crate) fn write_whole(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Where progress goes: called from the run's threads.
pub type Events<'a> = &'a (dyn Fn(&Event) + Sync);

/// Changes to a loaded scenario from the command line (or a controller), recorded in the
/// scenario's text so the report shows the scenario as run.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    pub players: Option<u32>,
    /// Players online at the start (at most `players`).
    pub online: Option<u32>,
    /// The run's duration, ns (a flag's text is read with [`duration_flag`]).
    pub duration_ns: Option<u64>,
    pub seed: Option<u64>,
}

/// A duration given as a flag or a form's field (e.g. "30s"), ns; the error names `--duration`.
pub fn duration_flag(text: &str) -> Result<u64, Error> {
    horde_model::units::parse_duration_ns(text).map_err(|m| Error::BadInput(anyhow::anyhow!("--duration: {m}")))
}

/// Applies [`Overrides`], checking them as the scenario file's own fields are checked.
pub fn apply_overrides(sc: &mut Scenario, o: &Overrides) -> Result<(), Error> {
    let bad = |m: String| Error::BadInput(anyhow::anyhow!(m));
    let before = (sc.players, sc.duration_s, sc.seed);
    if let Some(p) = o.players {
        horde_model::scenario::check_players(p, None).map_err(|(f, m)| bad(format!("--{f}: {m}")))?;
        sc.players = p;
    }
    if let Some(ns) = o.duration_ns {
        horde_model::scenario::check_duration(ns).map_err(|m| bad(format!("--duration: {m}")))?;
        sc.duration_s = ns as f64 / 1e9;
    }
    if let Some(s) = o.seed {
        if i64::try_from(s).is_err() {
            return Err(bad(format!("--seed {s}: at most {} (a scenario file's seed is a TOML integer, and the report keeps it there)", i64::MAX)));
        }
        sc.seed = s;
    }
    let online_before = sc.online;
    if let Some(n) = o.online {
        sc.online = Some(n);
    }
    horde_model::scenario::check_players(sc.players, sc.online).map_err(|(f, m)| bad(format!("{f}: {m}; raise --players or lower --online")))?;
    sc.check_join().map_err(|e| bad(format!("{e} (with --duration {} s)", sc.duration_s)))?;
    control::timeline(sc).map_err(|m| bad(format!("{}: {m} (with --duration {} s)", sc.name, sc.duration_s)))?;
    let changed = [
        ("players", (sc.players != before.0).then(|| sc.players.to_string())),
        ("duration", (sc.duration_s != before.1).then(|| format!("\"{}s\"", sc.duration_s))),
        ("seed", (sc.seed != before.2).then(|| sc.seed.to_string())),
        ("online", (sc.online != online_before).then(|| sc.online.unwrap_or(sc.players).to_string())),
    ];
    for (what, set) in changed {
        if let Some(v) = set {
            sc.text.push_str(&format!("# overridden on the command line: {what} = {v}\n"));
        }
    }
    Ok(())
}
