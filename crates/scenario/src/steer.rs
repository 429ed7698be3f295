//! The scenario kinds' driver loop on one machine: while the players run it watches the server
//! side (a dead one stops the run) and applies the run's commands ([`crate::control`]) on
//! every side — stop now; set the online target on the players' roster and the server side's
//! alike, stamped with one schedule time both hear of first; change an emulated link.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use horde_engine::clock::Clock;
use horde_engine::sender::Progress;

use crate::control::{Command, Commands, Incoming, Reply};
use crate::placement::EmuRun;
use crate::{Event, Events};

/// How far ahead of the players' clock a change of the online target is stamped on one
/// machine: every side hears of it well before it is due.
pub const MARGIN_NS: u64 = 250_000_000;

/// The server side as the driver sees it: whether it ended, and passing it a command.
/// How often the driver looks at the run's commands and timeline: every 20 ms.
const POLL: Duration = Duration::from_millis(20);

pub(crate) trait ServerSide {
    fn exited(&mut self) -> Option<String>;
    fn forward(&mut self, c: &Command) -> anyhow::Result<()>;
}

/// What a scenario run's commands act on.
pub(crate) struct Steer<'a> {
    pub commands: Option<&'a Commands>,
    /// The players on this side, with their roster (`None`: a regulated run, whose circuits
    /// have no online target).
    pub players: Option<&'a crate::Players>,
    /// Starts players planned on demand (a target above the plan), from a schedule time on;
    /// `None`: this side runs only its plan.
    start: Option<&'a (dyn Fn(Range<u32>, u64) + Sync)>,
    /// Players started so far (those of the plan, then those started on demand).
    started: AtomicU32,
    /// The players' counters: their clock's start.
    pub progress: &'a Progress,
    pub emu: Option<&'a EmuRun<'a>>,
    pub events: Events<'a>,
    /// Set when a stop command ended the run.
    pub commanded: AtomicBool,
    /// What the commands changed in the emulated network, when (seconds since the players
    /// started): the report marks them on its time charts.
    pub marks: Mutex<Vec<(f64, String)>>,
    /// The scenario's `[[at]]` entries, played through the same path as the channel's commands.
    timeline: Mutex<crate::control::Timeline>,
    clock: &'a dyn Clock,
}

impl<'a> Steer<'a> {
    pub fn new(
        commands: Option<&'a Commands>,
        players: Option<&'a crate::Players>,
        progress: &'a Progress,
        emu: Option<&'a EmuRun<'a>>,
        events: Events<'a>,
        timeline: Vec<(u64, Command)>,
        clock: &'a dyn Clock,
    ) -> Steer<'a> {
        let timeline = Mutex::new(crate::control::Timeline::new(timeline));
        let started = AtomicU32::new(players.map_or(0, |p| p.len()));
        Steer {
            commands,
            players,
            start: None,
            started,
            progress,
            emu,
            events,
            commanded: AtomicBool::new(false),
            marks: Mutex::new(Vec::new()),
            timeline,
            clock,
        }
    }

    /// Lets a target above the plan start the players it plans (see [`Steer::start`]).
    pub fn starting_more(mut self, start: Option<&'a (dyn Fn(Range<u32>, u64) + Sync)>) -> Steer<'a> {
        self.start = start;
        self
    }

    /// The next timeline entry due now (none before the players start).
    fn due(&self) -> Option<Incoming> {
        if self.progress.t0_real_ns.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.timeline.lock().unwrap_or_else(|p| p.into_inner()).due(self.now_ns(), MARGIN_NS)
    }

    /// Now on the players' clock, ns (0 before they start).
    fn now_ns(&self) -> u64 {
        let t0 = self.progress.t0_real_ns.load(Ordering::Relaxed);
        if t0 == 0 {
            0
        } else {
            self.clock.real_ns().saturating_sub(t0)
        }
    }

    /// Marks an event at `at_s` on the players' clock.
    fn mark(&self, at_s: f64, what: String) {
        self.marks.lock().unwrap_or_else(|p| p.into_inner()).push((at_s, what));
    }

    fn note(&self, m: String) {
        (self.events)(&Event::Note(m));
    }

    /// Applies one command and answers it at once; `true` when the run is to stop.
    fn answer(&self, c: Incoming, server: &Mutex<impl ServerSide>) -> bool {
        let r = match c.command {
            Ok(command) => self.apply(command, server),
            Err(m) => Err(m),
        };
        let stop = matches!(r, Ok((_, _, true)));
        let reply = match r {
            Ok((at_s, text, _)) => Reply::applied(c.id, Some(at_s), text),
            Err(m) => Reply::refused(c.id, m),
        };
        (self.events)(&Event::Reply(reply));
        stop
    }

    /// Applies one command: when it takes effect (s on the players' clock), what it did, and
    /// whether the run is to stop; or why it cannot be applied.
    fn apply(&self, c: Command, server: &Mutex<impl ServerSide>) -> Result<(f64, String, bool), String> {
        let now_s = self.now_ns() as f64 / 1e9;
        match c {
            Command::Stop {} => {
                self.commanded.store(true, Ordering::Relaxed);
                // the server side stops sending with the players (not when they have lingered)
                if let Ok(mut s) = server.lock() {
                    let _ = s.forward(&Command::Stop {});
                }
                Ok((now_s, "stop: stopping the run".into(), true))
            }
            Command::Players { online, at_ns } => self.players(online, at_ns, server).map(|(at, text)| (at, text, false)),
            Command::Link { ref a, ref b, .. } => {
                let Some(emu) = self.emu else {
                    return Err(format!("link {a}–{b}: this run has no [emu] topology, so no link to change"));
                };
                let op = c.link_op()?.ok_or("not a link command")?;
                let now = emu.link(a, b, &op).map_err(|m| format!("link {a}–{b}: {m}"))?;
                let at_s = self.now_ns() as f64 / 1e9;
                let text = match &op {
                    horde_emu::links::LinkOp::Set { dir, .. } => {
                        self.mark(at_s, format!("{a}–{b} changed"));
                        format!("link {a}–{b} ({dir}) changed: {now}")
                    }
                    _ => {
                        self.mark(at_s, now.clone());
                        format!("link {now}")
                    }
                };
                Ok((at_s, text, false))
            }
            Command::Flow { flow, .. } => {
                Err(format!("flow {flow}: a scenario's traffic is its players'; change it with `players`, or run flows with `horde send --commands`"))
            }
        }
    }

    fn players(&self, online: u32, at_ns: Option<u64>, server: &Mutex<impl ServerSide>) -> Result<(f64, String), String> {
        let Some(players) = self.players else {
            return Err("players: a regulated run's circuits have no online target".into());
        };
        let planned = players.len();
        players.check_change_at(online, self.now_ns(), MARGIN_NS, at_ns)?;
        if online > planned {
            if self.start.is_none() {
                return Err(format!("players online = {online}: more than the {planned} players this side runs (a shard keeps its plan)"));
            }
            players.grow(online).map_err(|e| format!("players online = {online}: {e}"))?;
        }
        let at = players.roster.set_ahead(self.now_ns(), MARGIN_NS, at_ns, online).map_err(|e| format!("players: {e}"))?;
        let stamped = Command::Players { online, at_ns: Some(at) };
        if let Err(e) = server.lock().unwrap_or_else(|p| p.into_inner()).forward(&stamped) {
            self.note(format!("the server side did not take the change of players ({e:#}): its streams may disagree with the players'"));
        }
        let mut text = format!("players online → {online} from {:.2} s", at as f64 / 1e9);
        if let Some(start) = self.start {
            let from = self.started.fetch_max(online, Ordering::AcqRel);
            if online > from {
                start(from..online, at);
                text.push_str(&format!(" ({} more planned and started: players {from}..{online})", online - from));
            }
        }
        Ok((at as f64 / 1e9, text))
    }
}

/// Polls the server side and the commands while the client runs: a dead server side, a
/// signal or a stop command stops the client (within 50 ms). What comes after the end (a
/// second stop, a late change) is answered too.
pub(crate) fn watch(
    server: &Mutex<impl ServerSide>,
    stop: &AtomicBool,
    run_stop: &AtomicBool,
    done: &AtomicBool,
    died: &Mutex<Option<(String, u64)>>,
    steer: &Steer,
) {
    'watch: while !done.load(Ordering::Relaxed) {
        if stop.load(Ordering::Relaxed) {
            run_stop.store(true, Ordering::Relaxed);
            break;
        }
        while let Some(c) = steer.due().or_else(|| steer.commands.and_then(|c| c.try_next())) {
            if steer.answer(c, server) {
                run_stop.store(true, Ordering::Relaxed);
                break 'watch;
            }
        }
        let exited = server.lock().ok().and_then(|mut c| c.exited());
        if let Some(status) = exited {
            if !stop.load(Ordering::Relaxed) {
                *died.lock().unwrap_or_else(|p| p.into_inner()) = Some((status, steer.clock.real_ns()));
            }
            run_stop.store(true, Ordering::Relaxed);
            break;
        }
        steer.clock.sleep(POLL);
    }
    while let Some(c) = steer.commands.and_then(|c| c.try_next()) {
        (steer.events)(&Event::Reply(Reply::refused(c.id, "the run is stopping: it takes no more commands".into())));
    }
}
