//! The run's commands through agents: a channel's or a timeline's command applied on every
//! agent and answered at once — a stop, a change of the online target stamped ahead, a link
//! change of the run's `[emu]` network answered once every agent with a part has.

use std::time::{Duration, Instant};

use horde_engine::clock::real_ns;

use super::{Event, Fleet, AGENTS_MARGIN_NS};
use crate::link::Cmd;
use crate::msg;

/// How long a link change during a run waits for every agent's answer.
const LINK_ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// A run's players and the agents that run them, with their weights (see [`Fleet::steer`]).
pub type OnlineTarget = (std::sync::Arc<horde_scenario::Players>, Vec<(usize, u32)>);

/// A link change asked of every agent during a run, waiting for their answers.
pub(super) struct PendingLink {
    id: u64,
    waiting: Vec<usize>,
    /// (agent, what it changed), in the agents' order once all answered.
    answers: Vec<(usize, String)>,
    failed: Vec<String>,
    by: Instant,
    /// When it took effect, s on the run's clock: the last agent's answer (each applies it
    /// as it hears of it and answers once applied), or the asking instant if none has.
    at_s: f64,
    what: String,
}

/// The most link counters the per-second series keeps over a run (about 200 MB at most).
const MAX_LINK_POINTS: usize = 1_000_000;

/// A second's link counters, waiting for every agent's answer.
pub(super) struct PendingStats {
    t_s: f64,
    waiting: Vec<usize>,
    answers: crate::msg::AgentLinks,
}

impl<'a> Fleet<'a> {
    /// Asks every agent for the counters of the run's emulated links (once a second, while an
    /// `[emu]` run goes): the report's per-second link series. A second whose answers are not
    /// all in by the next one is left out.
    pub(super) fn sample_links(&mut self) {
        let (Some(exp), true) = (self.emu_exp.clone(), self.t0_ns > 0) else { return };
        // bounded: the series keeps at most this many link counters (a long run of many
        // emulated links keeps its first part, and says so once)
        let kept: usize = self.link_samples.iter().flat_map(|(_, a)| a.iter().map(|(_, l)| l.len())).sum();
        if kept > MAX_LINK_POINTS {
            if !self.link_series_full {
                self.link_series_full = true;
                self.pending_stats = None;
                self.note(format!("the emulated links' series stops here: {MAX_LINK_POINTS} counters kept"));
            }
            return;
        }
        let t_s = real_ns().saturating_sub(self.t0_ns) as f64 / 1e9;
        let mut waiting = Vec::new();
        for (i, m) in self.members.iter().enumerate().filter(|(_, m)| m.ok()) {
            if m.c.cmd.send(Cmd::Emu(Box::new(msg::EmuRequest::Stats { exp: exp.clone() }))).is_ok() {
                waiting.push(i);
            }
        }
        self.pending_stats = Some(PendingStats { t_s, waiting, answers: Vec::new() });
    }

    /// Whether agent `i`'s link counters are awaited.
    pub(super) fn stats_awaited(&self, i: usize) -> bool {
        self.pending_stats.as_ref().is_some_and(|p| p.waiting.contains(&i))
    }

    /// Agent `i`'s counters for the second asked; the sample is kept once every agent answered.
    pub(super) fn stats_answered(&mut self, i: usize, links: Vec<horde_emu::fwd::LinkReport>) {
        let Some(p) = self.pending_stats.as_mut() else { return };
        p.waiting.retain(|&w| w != i);
        p.answers.push((i, links));
        if p.waiting.is_empty() {
            let p = self.pending_stats.take().expect("pending");
            self.link_samples.push((p.t_s, p.answers));
        }
    }

    /// The run's commands, applied while it is watched; `players`: the run's (a kind with an
    /// online target), and the agents that run them with their weights (a raised target's new
    /// players are shared among them).
    pub fn steer(
        &mut self,
        commands: Option<&'a horde_scenario::control::Commands>,
        players: Option<OnlineTarget>,
        timeline: Vec<(u64, horde_scenario::control::Command)>,
        emu_exp: Option<String>,
    ) {
        self.commands = commands;
        if let Some((p, growers)) = players {
            self.started = p.len();
            self.players = Some(p);
            self.growers = growers;
        }
        self.more = vec![Vec::new(); self.members.len()];
        self.timeline = horde_scenario::control::Timeline::new(timeline);
        self.emu_exp = emu_exp;
    }

    /// The next command: a timeline entry due now (once the run has started), else the
    /// channel's next.
    fn next_command(&mut self) -> Option<horde_scenario::control::Incoming> {
        let due = match self.t0_ns {
            0 => None,
            t0 => self.timeline.due(real_ns().saturating_sub(t0), AGENTS_MARGIN_NS),
        };
        due.or_else(|| self.commands.and_then(|c| c.try_next()))
    }

    /// Applies the commands waiting, each answered at once; `true` on a stop.
    pub(super) fn commands(&mut self) -> bool {
        use horde_scenario::control::Reply;
        while let Some(c) = self.next_command() {
            let r = match c.command {
                Ok(command) => self.apply(c.id, command),
                Err(m) => Err(m),
            };
            let stop = matches!(r, Ok(Some((_, _, true))));
            let reply = match r {
                Ok(Some((at_s, text, _))) => Reply::applied(c.id, Some(at_s), text),
                // answered when every agent has
                Ok(None) => continue,
                Err(m) => Reply::refused(c.id, m),
            };
            (self.ev)(&Event::Reply(reply));
            if stop {
                return true;
            }
        }
        false
    }

    /// Applies one command on every agent: when it takes effect (s on the run's clock), what it
    /// did, whether the run is to stop (`None`: a link change, answered when every agent has);
    /// or why not.
    fn apply(&mut self, id: u64, c: horde_scenario::control::Command) -> Result<Option<(f64, String, bool)>, String> {
        use horde_scenario::control::Command;
        let now = if self.t0_ns > 0 { real_ns().saturating_sub(self.t0_ns) } else { 0 };
        match c {
            Command::Stop {} => Ok(Some((now as f64 / 1e9, "stop: stopping the run on every agent".into(), true))),
            Command::Players { online, at_ns } => {
                let players = self.players.clone().ok_or_else(|| format!("players online = {online}: this run has no online target"))?;
                players.check_change_at(online, now, AGENTS_MARGIN_NS, at_ns)?;
                // above the plan: the new players planned here first (within the stated limit)
                players.grow(online).map_err(|e| format!("players online = {online}: {e}"))?;
                let at = players.roster.set_ahead(now, AGENTS_MARGIN_NS, at_ns, online).map_err(|e| format!("players: {e}"))?;
                let starts = self.share_new_players(online);
                let owners: Vec<(std::ops::Range<u32>, i64)> =
                    starts.iter().zip(&self.members).filter_map(|(s, m)| Some((s.clone()?, m.c.clock.offset_ns))).collect();
                let mut text = format!("players online → {online} from {:.2} s (every agent)", at as f64 / 1e9);
                for (i, m) in self.members.iter().enumerate().filter(|(_, m)| m.ok()) {
                    let start = starts[i].clone();
                    if let Some(r) = &start {
                        text.push_str(&format!("; {} starts players {}..{}", m.c.name, r.start, r.end));
                    }
                    let _ = m.c.cmd.send(Cmd::Players { online, at_ns: at, start, owners: owners.clone() });
                }
                Ok(Some((at as f64 / 1e9, text, false)))
            }
            Command::Link { ref a, ref b, .. } => {
                let Some(exp) = self.emu_exp.clone() else {
                    return Err(format!("link {a}–{b}: this run has no [emu] topology, so no link to change"));
                };
                if self.pending_link.is_some() {
                    return Err(format!("link {a}–{b}: the last link change still waits for the agents' answers; send this one after it"));
                }
                let op = c.link_op()?.ok_or("not a link command")?;
                let what = match &op {
                    horde_emu::links::LinkOp::Set { dir, .. } => format!("link {a}–{b} ({dir}) changed"),
                    horde_emu::links::LinkOp::Down => format!("{a} – {b}: down"),
                    _ => format!("{a} – {b}: up"),
                };
                let mut waiting = Vec::new();
                for (i, m) in self.members.iter().enumerate().filter(|(_, m)| m.ok()) {
                    let req = msg::EmuRequest::Link { exp: exp.clone(), a: a.clone(), b: b.clone(), op: op.clone() };
                    if m.c.cmd.send(Cmd::Emu(Box::new(req))).is_ok() {
                        waiting.push(i);
                    }
                }
                let at_s = now as f64 / 1e9;
                self.pending_link =
                    Some(PendingLink { id, waiting, answers: Vec::new(), failed: Vec::new(), by: Instant::now() + LINK_ANSWER_WITHIN, at_s, what });
                Ok(None)
            }
            Command::Flow { flow, .. } => {
                Err(format!("flow {flow}: a run through agents takes stop, players and link; change a flow's laws in `horde send --commands` on one machine"))
            }
        }
    }

    /// The players a raise to `online` starts, shared among the agents that run players by
    /// their weights (in id order, as the plan's shards are); recorded per agent for the merge.
    fn share_new_players(&mut self, online: u32) -> Vec<Option<std::ops::Range<u32>>> {
        let mut starts = vec![None; self.members.len()];
        if online <= self.started || self.growers.is_empty() {
            return starts;
        }
        let from = self.started;
        let weights: Vec<u32> = self.growers.iter().map(|g| g.1).collect();
        let Ok(shards) = horde_scenario::shards(online - from, &weights) else { return starts };
        for (&(i, _), s) in self.growers.iter().zip(shards) {
            if !s.is_empty() {
                let r = from + s.start..from + s.end;
                self.more[i].push(r.clone());
                starts[i] = Some(r);
            }
        }
        self.started = online;
        starts
    }

    /// An agent answered the pending link change (or the wait is over): once every agent has,
    /// the command's reply — applied where the link is, or refused with each agent's reason.
    pub(super) fn link_answered(&mut self, answer: Option<(usize, msg::EmuReply)>) {
        let Some(p) = self.pending_link.as_mut() else { return };
        if let Some((i, r)) = answer {
            if !p.waiting.contains(&i) {
                return;
            }
            p.waiting.retain(|&w| w != i);
            if self.t0_ns > 0 {
                p.at_s = p.at_s.max(real_ns().saturating_sub(self.t0_ns) as f64 / 1e9);
            }
            let name = &self.members[i].c.name;
            match r {
                msg::EmuReply::Link { here: true, output } => p.answers.push((i, format!("{name}: {}", output.trim().replace('\n', "; ")))),
                msg::EmuReply::Link { here: false, .. } => {}
                msg::EmuReply::Failed { message } => p.failed.push(format!("{name}: {message}")),
                other => p.failed.push(format!("{name}: answered {other:?}")),
            }
        } else if Instant::now() < p.by {
            return;
        } else {
            let late: Vec<String> = p.waiting.drain(..).map(|i| self.members[i].c.name.clone()).collect();
            p.failed.push(format!("no answer within {} s from {}", LINK_ANSWER_WITHIN.as_secs(), late.join(", ")));
        }
        if !p.waiting.is_empty() {
            return;
        }
        let mut p = self.pending_link.take().expect("pending");
        p.answers.sort();
        let answers: Vec<String> = p.answers.iter().map(|a| a.1.clone()).collect();
        let reply = match (p.failed.is_empty(), p.answers.is_empty()) {
            (true, false) => {
                self.marks.push((p.at_s, p.what.clone()));
                horde_scenario::control::Reply::applied(p.id, Some(p.at_s), format!("{}: {}", p.what, answers.join(" | ")))
            }
            (true, true) => horde_scenario::control::Reply::refused(p.id, format!("{}: no agent has that link", p.what)),
            (false, _) => horde_scenario::control::Reply::refused(p.id, format!("{}: {}", p.what, p.failed.join("; "))),
        };
        (self.ev)(&Event::Reply(reply));
    }

    /// Answers what is left on the channel once the run stopped.
    pub fn refuse_the_rest(&self) {
        while let Some(c) = self.commands.and_then(|c| c.try_next()) {
            (self.ev)(&Event::Reply(horde_scenario::control::Reply::refused(c.id, "the run is stopping: it takes no more commands".into())));
        }
    }
}
