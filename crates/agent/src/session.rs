//! An agent's side of one control session as an I/O-free state machine: messages and time in,
//! actions out. The TLS shell ([`crate::agent`]) feeds it and carries the actions out; the
//! tests drive it with virtual time.
//!
//! Rules it enforces:
//! - the controller speaks first, with Hello; protocol and version must equal the agent's, else
//!   the agent says why and closes;
//! - one assignment per session, with a run id the agent has not run before (a replayed
//!   assignment does nothing);
//! - traffic starts only on Start after an accepted assignment;
//! - the dead-man's switch: once assigned, a controller silent for the assignment's
//!   `deadman_ms` (or gone) stops the run: no orphan load generators.

use crate::msg::{Part, ToAgent, ToController, Work, PROTOCOL};

/// How long a peer may take to say Hello after the handshake.
pub const HELLO_WITHIN_NS: u64 = 10_000_000_000;
/// The dead-man interval's bounds (ms).
pub const DEADMAN_MS: std::ops::RangeInclusive<u64> = 1_000..=60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the controller's Hello.
    Greeting,
    /// Greeted; waiting for an assignment (clock samples are answered).
    Idle,
    /// Part being prepared or prepared; not started.
    Assigned,
    Running,
    /// Every role ended; logs may be collected.
    Finished,
    Closed,
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Send(ToController),
    /// Answer a clock sample: the shell stamps t3 just before writing.
    TimeReply {
        t1: u64,
        t2: u64,
    },
    /// Prepare this assignment (then call [`Session::prepared`]).
    Prepare(Box<Part>),
    /// Start the prepared run at this instant of the agent's clock.
    Start {
        at_ns: u64,
    },
    /// Stop the run's traffic now; the reason is for the agent's log.
    StopRun(String),
    /// Set the run's online target from this schedule time on (every side of it).
    Players {
        online: u32,
        at_ns: u64,
        start: Option<std::ops::Range<u32>>,
        owners: Vec<(std::ops::Range<u32>, i64)>,
    },
    /// Summarise the run as it goes, on the controller's clock.
    Live(Box<crate::msg::SummaryRequest>),
    /// Send the finished run's logs, or (with a request) its summary instead.
    Collect(Option<Box<crate::msg::SummaryRequest>>),
    /// Do what the controller asks of this machine's emulator, and answer.
    Emu(Box<crate::msg::EmuRequest>),
    /// End the session; the reason is for the agent's log.
    Close(String),
}

pub struct Session {
    phase: Phase,
    started_ns: u64,
    last_heard_ns: u64,
    deadman_ns: u64,
    version: String,
    name: String,
    cores: u32,
    roles_running: u32,
}

impl Session {
    pub fn new(now_ns: u64, version: &str, name: &str, cores: u32) -> Session {
        Session {
            phase: Phase::Greeting,
            started_ns: now_ns,
            last_heard_ns: now_ns,
            deadman_ns: 3_000_000_000,
            version: version.into(),
            name: name.into(),
            cores,
            roles_running: 0,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    fn refuse(&mut self, why: String) -> Vec<Action> {
        self.phase = Phase::Closed;
        vec![Action::Send(ToController::Error { message: why.clone() }), Action::Close(why)]
    }

    /// A message from the controller. `seen` tells whether a run id was already run here.
    pub fn on_msg(&mut self, now_ns: u64, m: ToAgent, seen: impl Fn(&str) -> bool) -> Vec<Action> {
        self.last_heard_ns = now_ns;
        match (self.phase, m) {
            (Phase::Closed, _) => vec![],
            (Phase::Greeting, ToAgent::Hello { protocol, version }) => {
                if protocol != PROTOCOL || version != self.version {
                    return self.refuse(format!(
                        "agent {} runs horde {} (control protocol {PROTOCOL}); the controller runs horde {version} (protocol {protocol}): run the same version on both",
                        self.name, self.version
                    ));
                }
                self.phase = Phase::Idle;
                vec![Action::Send(ToController::Hello { protocol: PROTOCOL, version: self.version.clone(), name: self.name.clone(), cores: self.cores })]
            }
            (Phase::Greeting, other) => self.refuse(format!("expected hello first, got {}", kind(&other))),
            (_, ToAgent::Hello { .. }) => self.refuse("hello twice".into()),
            (_, ToAgent::Time { t1 }) => vec![Action::TimeReply { t1, t2: now_ns }],
            (_, ToAgent::Ping) => vec![Action::Send(ToController::Pong)],
            (Phase::Idle, ToAgent::Assign(a)) => {
                if let Err(e) = check_assignment(&a) {
                    return self.refuse(format!("assignment refused: {e}"));
                }
                if seen(&a.run_id) {
                    return self.refuse(format!("run {} was already run here: a replayed assignment is refused", a.run_id));
                }
                self.deadman_ns = a.deadman_ms().unwrap_or(0) * 1_000_000;
                self.phase = Phase::Assigned;
                self.roles_running = roles(&a);
                vec![Action::Prepare(a)]
            }
            (Phase::Assigned, ToAgent::Live(req)) => vec![Action::Live(req)],
            // the emulator is driven outside runs, but for a run's own link changes and counters
            // (also once this agent's part has ended: the run's network is up until the run ends)
            (Phase::Idle, ToAgent::Emu(req)) => vec![Action::Emu(req)],
            (Phase::Assigned | Phase::Running | Phase::Finished, ToAgent::Emu(req))
                if matches!(*req, crate::msg::EmuRequest::Link { .. } | crate::msg::EmuRequest::Stats { .. }) =>
            {
                vec![Action::Emu(req)]
            }
            (Phase::Assigned, ToAgent::Start { at_ns }) => {
                self.phase = Phase::Running;
                vec![Action::Start { at_ns }]
            }
            (Phase::Assigned | Phase::Running, ToAgent::Stop) => vec![Action::StopRun("the controller stopped the run".into())],
            (Phase::Finished, ToAgent::Stop) => vec![],
            (Phase::Assigned | Phase::Running, ToAgent::Players { online, at_ns, start, owners }) => {
                if let Err(e) = check_owners(&owners, online) {
                    return self.refuse(format!("players online → {online}: {e}"));
                }
                vec![Action::Players { online, at_ns, start, owners }]
            }
            (Phase::Finished, ToAgent::Players { .. }) => vec![],
            (Phase::Finished, ToAgent::Collect) => vec![Action::Collect(None)],
            (Phase::Finished, ToAgent::Summarise(req)) => vec![Action::Collect(Some(req))],
            (p, other) => self.refuse(format!("{} is not expected now ({p:?})", kind(&other))),
        }
    }

    /// The shell prepared the assignment (or failed to: `Err(why)`).
    pub fn prepared(&mut self, r: Result<Option<std::net::SocketAddr>, String>) -> Vec<Action> {
        match r {
            Ok(server_addr) => vec![Action::Send(ToController::Ready { server_addr })],
            Err(e) => self.refuse(format!("preparing the run failed: {e}")),
        }
    }

    /// One role of the run ended (the shell sends its Finished message).
    pub fn role_ended(&mut self) {
        self.roles_running = self.roles_running.saturating_sub(1);
        if self.roles_running == 0 && matches!(self.phase, Phase::Assigned | Phase::Running) {
            self.phase = Phase::Finished;
        }
    }

    /// Time passes: the hello deadline and the dead-man's switch.
    pub fn on_tick(&mut self, now_ns: u64) -> Vec<Action> {
        match self.phase {
            Phase::Greeting if now_ns.saturating_sub(self.started_ns) > HELLO_WITHIN_NS => {
                self.phase = Phase::Closed;
                vec![Action::Close("no hello within 10 s".into())]
            }
            Phase::Assigned | Phase::Running if now_ns.saturating_sub(self.last_heard_ns) > self.deadman_ns => {
                self.phase = Phase::Closed;
                let why = format!("the controller was silent for {:.1} s: dead-man's switch", now_ns.saturating_sub(self.last_heard_ns) as f64 / 1e9);
                vec![Action::StopRun(why.clone()), Action::Close(why)]
            }
            _ => vec![],
        }
    }

    /// The controller's connection ended.
    pub fn on_closed(&mut self, why: &str) -> Vec<Action> {
        let was = self.phase;
        self.phase = Phase::Closed;
        match was {
            Phase::Assigned | Phase::Running => vec![Action::StopRun(format!("the controller's connection ended ({why})")), Action::Close(why.into())],
            Phase::Closed => vec![],
            _ => vec![Action::Close(why.into())],
        }
    }

    /// The collection is over: the session ends.
    pub fn collected(&mut self) -> Vec<Action> {
        self.phase = Phase::Closed;
        vec![Action::Close("run collected".into())]
    }
}

/// How many roles an assignment runs (each ends with one Finished message).
pub fn roles(a: &Part) -> u32 {
    match &a.work {
        Work::Bots(_) => 1,
        Work::Flows(f) => !f.send.is_empty() as u32 + (!f.recv_udp.is_empty() || !f.recv_tcp.is_empty()) as u32,
        Work::Scenario(p) => p.server.is_some() as u32 + p.players.is_some() as u32,
    }
}

fn kind(m: &ToAgent) -> &'static str {
    match m {
        ToAgent::Hello { .. } => "hello",
        ToAgent::Time { .. } => "time",
        ToAgent::Assign(_) => "assign",
        ToAgent::Start { .. } => "start",
        ToAgent::Ping => "ping",
        ToAgent::Stop => "stop",
        ToAgent::Players { .. } => "players",
        ToAgent::Collect => "collect",
        ToAgent::Summarise(_) => "summarise",
        ToAgent::Live(_) => "live",
        ToAgent::Emu(_) => "emu",
    }
}

/// Checks an assignment's fields that do not need the scenario parsed.
/// A raise's owners: at most [`crate::msg::MAX_OWNERS`] ranges, each of players the raise
/// brings online (not empty, below `online`).
fn check_owners(owners: &[(std::ops::Range<u32>, i64)], online: u32) -> Result<(), String> {
    if owners.len() > crate::msg::MAX_OWNERS {
        return Err(format!("{} owner ranges (at most {})", owners.len(), crate::msg::MAX_OWNERS));
    }
    match owners.iter().find(|(r, _)| r.is_empty() || r.end > online) {
        Some((r, _)) => Err(format!("owners: players {}..{} are not players of a raise to {online}", r.start, r.end)),
        None => Ok(()),
    }
}

pub fn check_assignment(a: &Part) -> Result<(), String> {
    if a.run_id.is_empty() || a.run_id.len() > 64 || !a.run_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(format!("run id `{}` must be 1..=64 letters, digits or '-'", a.run_id.escape_debug()));
    }
    let Some(deadman_ms) = a.deadman_ms() else { return Err("a part for a child of `horde run`, not for an agent".into()) };
    if !DEADMAN_MS.contains(&deadman_ms) {
        return Err(format!("deadman_ms must be {}..={} (got {deadman_ms})", DEADMAN_MS.start(), DEADMAN_MS.end()));
    }
    match &a.work {
        Work::Scenario(p) => check_scenario_part(p)?,
        Work::Flows(f) => check_flows(f)?,
        Work::Bots(b) => b.check()?,
    }
    horde_proto::RunKey::parse_hex(&a.shape.key).map_err(|e| format!("key: {e}"))?;
    Ok(())
}

fn check_scenario_part(p: &crate::msg::ScenarioPart) -> Result<(), String> {
    if let Some(e) = &p.emu {
        crate::agent::emu::check_exp(&e.exp)?;
        let name_ok = |n: &String| !n.is_empty() && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if e.clients.len() > crate::msg::MAX_EMU_CLIENTS || !e.clients.iter().chain(&e.server).all(name_ok) {
            return Err(format!("an emulated placement names at most {} hosts, each 1..=64 letters, digits, '-' or '_'", crate::msg::MAX_EMU_CLIENTS));
        }
        if p.players.is_some() && e.clients.is_empty() || e.server.is_some() != p.server.is_some() {
            return Err("an emulated placement without hosts for its players or its server side".into());
        }
    }
    if p.server.is_none() && p.players.is_none() {
        return Err("it assigns neither a server side nor players".into());
    }
    if let Some(r) = &p.players {
        if r.is_empty() {
            return Err(format!("players {}..{} is empty", r.start, r.end));
        }
        if p.server_addr.is_none() && p.server.is_none() {
            return Err("players without the server side's address".into());
        }
    }
    Ok(())
}

fn check_flows(f: &crate::msg::FlowsJob) -> Result<(), String> {
    if f.send.len() > crate::msg::MAX_RECV_ADDRS {
        return Err(format!("flows: more than {} ranges of flow ids", crate::msg::MAX_RECV_ADDRS));
    }
    if let Some(r) = f.send.iter().find(|r| r.is_empty()) {
        return Err(format!("flows: id range {}..{} is empty", r.start, r.end));
    }
    if f.send.is_empty() && f.recv_udp.is_empty() && f.recv_tcp.is_empty() {
        return Err("flows: nothing to send or receive".into());
    }
    if let Some(l) = &f.log_server {
        // The longest name plus "-send" must still be a log name.
        if !horde_wire::logstream::name_ok(&format!("{}-send", l.name)) {
            return Err(format!("flows: log server name `{}` is not 1 to 59 of A-Z a-z 0-9 . _ -", l.name));
        }
        if horde_proto::RunKey::parse_hex(&l.key).map_or(true, |k| k.is_open()) {
            return Err("flows: the log server's key is not a run key".into());
        }
    }
    if f.recv_udp.len() + f.recv_tcp.len() > crate::msg::MAX_RECV_ADDRS {
        return Err(format!("flows: more than {} receive addresses", crate::msg::MAX_RECV_ADDRS));
    }
    if let Some(a) = f.recv_udp.iter().chain(&f.recv_tcp).find(|a| a.port() == 0) {
        return Err(format!("flows: receive address {a} has no port"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn assignment(run: &str) -> Part {
        Part {
            run_id: run.into(),
            shape: horde_scenario::part::Shape { duration_ns: 1_000_000_000, seed: 1, key: "ab".repeat(32) },
            place: horde_scenario::part::Place::Agent { deadman_ms: 3000 },
            work: Work::Scenario(crate::msg::ScenarioPart {
                scenario: horde_scenario::part::ScenarioWork {
                    name: "s".into(),
                    scenario: String::new(),
                    service: None,
                    players: 10,
                    online: None,
                    max_players: None,
                    gso: None,
                },
                server: None,
                players: Some(0..10),
                server_addr: Some("127.0.0.1:9".parse().unwrap()),
                emu: None,
            }),
        }
    }

    fn greeted() -> Session {
        let mut s = Session::new(0, "1.0", "a1", 2);
        let a = s.on_msg(1, ToAgent::Hello { protocol: PROTOCOL, version: "1.0".into() }, |_| false);
        assert!(matches!(&a[0], Action::Send(ToController::Hello { name, .. }) if name == "a1"));
        s
    }

    #[test]
    fn a_run_goes_through_its_phases() {
        let mut s = greeted();
        assert_eq!(s.on_msg(2, ToAgent::Time { t1: 5 }, |_| false), vec![Action::TimeReply { t1: 5, t2: 2 }]);
        assert!(matches!(s.on_msg(3, ToAgent::Assign(Box::new(assignment("r1"))), |_| false)[0], Action::Prepare(_)));
        assert!(matches!(s.prepared(Ok(None))[0], Action::Send(ToController::Ready { .. })));
        assert_eq!(s.on_msg(4, ToAgent::Start { at_ns: 9 }, |_| false), vec![Action::Start { at_ns: 9 }]);
        assert_eq!(s.phase(), Phase::Running);
        for _ in 0..roles(&assignment("r1")) {
            s.role_ended();
        }
        assert_eq!(s.phase(), Phase::Finished);
        assert_eq!(s.on_msg(5, ToAgent::Collect, |_| false), vec![Action::Collect(None)]);
        s.collected();
        assert_eq!(s.phase(), Phase::Closed);
    }

    #[test]
    fn nothing_happens_before_hello_and_versions_must_match() {
        let mut s = Session::new(0, "1.0", "a1", 2);
        let a = s.on_msg(1, ToAgent::Assign(Box::new(assignment("r1"))), |_| false);
        assert!(matches!(&a[1], Action::Close(w) if w.contains("expected hello")));
        assert!(!a.iter().any(|a| matches!(a, Action::Prepare(_) | Action::Start { .. })));
        let mut s = Session::new(0, "1.0", "a1", 2);
        let a = s.on_msg(1, ToAgent::Hello { protocol: PROTOCOL, version: "0.9".into() }, |_| false);
        assert!(matches!(&a[0], Action::Send(ToController::Error { message }) if message.contains("horde 1.0") && message.contains("horde 0.9")));
        let mut s = Session::new(0, "1.0", "a1", 2);
        let a = s.on_msg(1, ToAgent::Hello { protocol: PROTOCOL + 1, version: "1.0".into() }, |_| false);
        assert!(matches!(&a[1], Action::Close(_)));
    }

    #[test]
    fn a_run_changes_and_counts_its_own_links_and_nothing_else_of_the_emulator() {
        let link = || {
            let op = horde_emu::links::LinkOp::Down;
            ToAgent::Emu(Box::new(crate::msg::EmuRequest::Link { exp: "e1".into(), a: "r1".into(), b: "r2".into(), op }))
        };
        let mut s = greeted();
        let _ = s.on_msg(2, ToAgent::Assign(Box::new(assignment("r1"))), |_| false);
        assert_eq!(
            s.on_msg(3, link(), |_| false),
            vec![Action::Emu(Box::new(match link() {
                ToAgent::Emu(r) => *r,
                _ => unreachable!(),
            }))]
        );
        let _ = s.on_msg(4, ToAgent::Start { at_ns: 1 }, |_| false);
        assert_eq!(s.on_msg(5, ToAgent::Emu(Box::new(crate::msg::EmuRequest::Stats { exp: "e1".into() })), |_| false).len(), 1);
        let down = ToAgent::Emu(Box::new(crate::msg::EmuRequest::Down { exp: "e1".into() }));
        for _ in 0..roles(&assignment("r1")) {
            s.role_ended();
        }
        assert_eq!(s.phase(), Phase::Finished);
        assert_eq!(s.on_msg(6, ToAgent::Emu(Box::new(crate::msg::EmuRequest::Stats { exp: "e1".into() })), |_| false).len(), 1, "counted after its part ended");
        assert!(
            matches!(s.on_msg(7, down, |_| false)[..], [Action::Send(ToController::Error { .. }), Action::Close(_)]),
            "a run's network is not taken down under it"
        );
    }

    #[test]
    fn the_emulator_is_asked_between_runs_only() {
        let ls = || ToAgent::Emu(Box::new(crate::msg::EmuRequest::Ls));
        let mut s = Session::new(0, "1.0", "a1", 2);
        assert!(matches!(s.on_msg(1, ls(), |_| false)[..], [Action::Send(ToController::Error { .. }), Action::Close(_)]), "not before hello");
        let mut s = greeted();
        assert_eq!(s.on_msg(2, ls(), |_| false), vec![Action::Emu(Box::new(crate::msg::EmuRequest::Ls))]);
        assert_eq!(s.on_msg(3, ls(), |_| false).len(), 1, "as often as asked");
        assert_eq!(s.phase(), Phase::Idle);
        let _ = s.on_msg(4, ToAgent::Assign(Box::new(assignment("r1"))), |_| false);
        assert!(matches!(s.on_msg(5, ls(), |_| false)[..], [Action::Send(ToController::Error { .. }), Action::Close(_)]), "not during a run");
    }

    #[test]
    fn start_without_assignment_and_replayed_runs_are_refused() {
        let mut s = greeted();
        let a = s.on_msg(2, ToAgent::Start { at_ns: 1 }, |_| false);
        assert!(matches!(&a[1], Action::Close(w) if w.contains("start is not expected")));
        let mut s = greeted();
        let a = s.on_msg(2, ToAgent::Assign(Box::new(assignment("r1"))), |r| r == "r1");
        assert!(matches!(&a[1], Action::Close(w) if w.contains("replayed")));
    }

    /// A scenario's assignment with its part changed by `f`.
    fn with_part(f: impl FnOnce(&mut crate::msg::ScenarioPart)) -> Part {
        let mut a = assignment("x");
        let Work::Scenario(p) = &mut a.work else { unreachable!() };
        f(p);
        a
    }

    fn place(exp: &str, clients: &[&str]) -> crate::msg::EmuPlace {
        crate::msg::EmuPlace { exp: exp.into(), clients: clients.iter().map(|c| c.to_string()).collect(), server: None }
    }

    #[test]
    fn a_raise_whose_owners_are_not_its_players_is_refused() {
        let players = |owners: Vec<(std::ops::Range<u32>, i64)>| ToAgent::Players { online: 80, at_ns: 1, start: None, owners };
        let mut s = greeted();
        let _ = s.on_msg(2, ToAgent::Assign(Box::new(assignment("r1"))), |_| false);
        assert!(matches!(s.on_msg(3, players(vec![(50..80, 7)]), |_| false)[..], [Action::Players { .. }]));
        for bad in [vec![(50..81, 0)], vec![(60..60, 0)], vec![(0..1, 0); crate::msg::MAX_OWNERS + 1]] {
            let mut s = greeted();
            let _ = s.on_msg(2, ToAgent::Assign(Box::new(assignment("r1"))), |_| false);
            assert!(matches!(s.on_msg(3, players(bad), |_| false)[..], [Action::Send(ToController::Error { .. }), Action::Close(_)]));
        }
    }

    #[test]
    fn hostile_assignments_are_refused() {
        for (a, why) in [
            (Part { run_id: "../../etc".into(), ..assignment("x") }, "run id"),
            (Part { place: horde_scenario::part::Place::Agent { deadman_ms: 0 }, ..assignment("x") }, "deadman_ms"),
            (Part { place: horde_scenario::part::Place::Child { out: "/tmp".into() }, ..assignment("x") }, "a child"),
            (with_part(|p| p.players = None), "neither"),
            (with_part(|p| p.players = Some(5..5)), "empty"),
            (Part { shape: horde_scenario::part::Shape { key: "zz".into(), ..assignment("x").shape }, ..assignment("x") }, "key"),
            // an emulated placement: a valid experiment id, host names only, hosts for its players
            (with_part(|p| p.emu = Some(place("../x", &["a1"]))), "experiment id"),
            (with_part(|p| p.emu = Some(place("abc", &["../../etc"]))), "hosts, each"),
            (with_part(|p| p.emu = Some(place("abc", &[]))), "without hosts"),
            (with_part(|p| p.emu = Some(place("abc", &vec!["h"; crate::msg::MAX_EMU_CLIENTS + 1]))), "at most"),
        ] {
            let mut s = greeted();
            let out = s.on_msg(2, ToAgent::Assign(Box::new(a)), |_| false);
            assert!(matches!(&out[1], Action::Close(w) if w.contains(why)), "{why}: {out:?}");
        }
    }

    #[test]
    fn dead_mans_switch_stops_a_run_whose_controller_is_silent() {
        let mut s = greeted();
        s.on_msg(S, ToAgent::Assign(Box::new(assignment("r1"))), |_| false);
        s.on_msg(S, ToAgent::Start { at_ns: 0 }, |_| false);
        assert!(s.on_tick(3 * S).is_empty());
        assert!(matches!(s.on_msg(3 * S, ToAgent::Ping, |_| false)[..], [Action::Send(ToController::Pong)]), "every ping is answered");
        assert!(s.on_tick(6 * S).is_empty(), "3 s after the last ping is not yet over 3 s");
        let a = s.on_tick(6 * S + 1);
        assert!(matches!(&a[0], Action::StopRun(w) if w.contains("dead-man")));
        assert_eq!(s.phase(), Phase::Closed);
    }

    #[test]
    fn a_lost_connection_stops_the_run_and_a_silent_greeter_is_dropped() {
        let mut s = greeted();
        s.on_msg(S, ToAgent::Assign(Box::new(assignment("r1"))), |_| false);
        assert!(matches!(&s.on_closed("eof")[0], Action::StopRun(_)));
        let mut s = Session::new(0, "1.0", "a1", 2);
        assert!(s.on_tick(HELLO_WITHIN_NS).is_empty());
        assert!(matches!(&s.on_tick(HELLO_WITHIN_NS + 1)[0], Action::Close(_)));
    }

    fn log_server(name: &str, key: &str) -> crate::msg::LogServerJob {
        crate::msg::LogServerJob { addr: "127.0.0.1:9720".parse().unwrap(), key: key.into(), name: name.into() }
    }

    fn flows_job() -> crate::msg::FlowsJob {
        crate::msg::FlowsJob {
            text: "x".into(),
            seed: 1,
            send: std::iter::once(0..3).collect(),
            recv_udp: vec![],
            recv_tcp: vec!["127.0.0.1:9000".parse().unwrap()],
            log_server: None,
        }
    }

    #[test]
    fn a_flows_assignment_runs_a_sender_and_a_receiver_and_bad_ones_are_refused() {
        let flows = |f: crate::msg::FlowsJob| Part { work: Work::Flows(f), ..assignment("f1") };
        let ok = flows(flows_job());
        assert_eq!(roles(&ok), 2);
        assert_eq!(roles(&flows(crate::msg::FlowsJob { recv_tcp: vec![], ..flows_job() })), 1);
        let mut s = greeted();
        assert!(matches!(s.on_msg(2, ToAgent::Assign(Box::new(ok)), |_| false)[0], Action::Prepare(_)));
        // Both roles must end before the run is finished.
        s.on_msg(3, ToAgent::Start { at_ns: 4 }, |_| false);
        s.role_ended();
        assert_eq!(s.phase(), Phase::Running);
        for _ in 0..roles(&assignment("r1")) {
            s.role_ended();
        }
        assert_eq!(s.phase(), Phase::Finished);
        for (a, why) in [
            (flows(crate::msg::FlowsJob { send: vec![], recv_tcp: vec![], ..flows_job() }), "nothing to send or receive"),
            (flows(crate::msg::FlowsJob { send: std::iter::once(4..4).collect(), ..flows_job() }), "is empty"),
            (flows(crate::msg::FlowsJob { recv_udp: vec!["127.0.0.1:0".parse().unwrap()], ..flows_job() }), "has no port"),
            (flows(crate::msg::FlowsJob { recv_udp: vec!["127.0.0.1:1".parse().unwrap(); 1025], ..flows_job() }), "receive addresses"),
            (flows(crate::msg::FlowsJob { log_server: Some(log_server("../up", &"ab".repeat(32))), ..flows_job() }), "log server name"),
            (flows(crate::msg::FlowsJob { log_server: Some(log_server("lab", &"00".repeat(32))), ..flows_job() }), "not a run key"),
            (flows(crate::msg::FlowsJob { log_server: Some(log_server("lab", "xyz")), ..flows_job() }), "not a run key"),
        ] {
            let mut s = greeted();
            let out = s.on_msg(2, ToAgent::Assign(Box::new(a)), |_| false);
            assert!(matches!(&out[1], Action::Close(w) if w.contains(why)), "{why}: {out:?}");
        }
    }
}
