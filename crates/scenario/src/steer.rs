//! The scenario kinds' driver loop on one machine: while the players run it watches the server
//! side (a dead one stops the run) and applies the run's commands ([`crate::control`]) on
//! every side — stop now; set the online target on the players' roster and the server side's
//! alike, stamped with one schedule time both hear of first; change an emulated link.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use horde_engine::sender::Progress;
use horde_model::roster::Roster;

use crate::control::{Command, Commands};
use crate::placement::EmuRun;
use crate::{Event, Events};

/// How far ahead of the players' clock a change of the online target is stamped on one
/// machine: every side hears of it well before it is due.
pub const MARGIN_NS: u64 = 250_000_000;

/// The server side as the driver sees it: whether it ended, and passing it a command.
pub(crate) trait ServerSide {
    fn exited(&mut self) -> Option<String>;
    fn forward(&mut self, c: &Command) -> anyhow::Result<()>;
}

/// What a scenario run's commands act on.
pub(crate) struct Steer<'a> {
    pub commands: Option<&'a Commands>,
    /// The players' roster on this side (`None`: a regulated run, whose circuits have none).
    pub roster: Option<&'a Roster>,
    /// The players' counters: their clock's start.
    pub progress: &'a Progress,
    pub emu: Option<&'a EmuRun<'a>>,
    pub events: Events<'a>,
    /// Set when a stop command ended the run.
    pub commanded: AtomicBool,
    /// What the commands changed in the emulated network, when (seconds since the players
    /// started): the report marks them on its time charts.
    pub marks: Mutex<Vec<(f64, String)>>,
}

impl<'a> Steer<'a> {
    pub fn new(
        commands: Option<&'a Commands>,
        roster: Option<&'a Roster>,
        progress: &'a Progress,
        emu: Option<&'a EmuRun<'a>>,
        events: Events<'a>,
    ) -> Steer<'a> {
        Steer { commands, roster, progress, emu, events, commanded: AtomicBool::new(false), marks: Mutex::new(Vec::new()) }
    }

    /// Marks an event at now on the players' clock.
    fn mark(&self, what: String) {
        let t0 = self.progress.t0_real_ns.load(Ordering::Relaxed);
        let now = if t0 == 0 { 0.0 } else { horde_engine::clock::real_ns().saturating_sub(t0) as f64 / 1e9 };
        self.marks.lock().unwrap_or_else(|p| p.into_inner()).push((now, what));
    }

    fn note(&self, m: String) {
        (self.events)(&Event::Note(m));
    }

    /// Notes a refused command; the run goes on.
    fn refused(&self, m: String) -> bool {
        self.note(format!("command refused: {m}"));
        false
    }

    /// Applies one command; `true` when the run is to stop.
    fn apply(&self, c: Command, server: &Mutex<impl ServerSide>) -> bool {
        match c {
            Command::Stop {} => {
                self.commanded.store(true, Ordering::Relaxed);
                self.note("stop command: stopping the run".into());
                return true;
            }
            Command::Players { online, at_ns } => self.players(online, at_ns, server),
            Command::Link { ref a, ref b, .. } => {
                let Some(emu) = self.emu else {
                    return self.refused(format!("link {a}–{b}: this run has no [emu] topology, so no link to change"));
                };
                let op = match c.link_op() {
                    Ok(Some(op)) => op,
                    Ok(None) => return false,
                    Err(m) => return self.refused(m),
                };
                match (emu.link(a, b, &op), &op) {
                    (Ok(now), horde_emu::links::LinkOp::Set { dir, .. }) => {
                        self.mark(format!("{a}–{b} changed"));
                        self.note(format!("link {a}–{b} ({dir}) changed: {now}"));
                    }
                    (Ok(now), _) => {
                        self.mark(now.clone());
                        self.note(format!("link {now}"));
                    }
                    (Err(m), _) => self.note(format!("command refused: link {a}–{b}: {m}")),
                }
            }
        }
        false
    }

    fn players(&self, online: u32, at_ns: Option<u64>, server: &Mutex<impl ServerSide>) {
        let Some(roster) = self.roster else {
            return self.note("command refused: players: a regulated run's circuits have no online target".into());
        };
        let t0 = self.progress.t0_real_ns.load(Ordering::Relaxed);
        let now = if t0 == 0 { 0 } else { horde_engine::clock::real_ns().saturating_sub(t0) };
        let at = match roster.set_ahead(now, MARGIN_NS, at_ns, online) {
            Ok(at) => at,
            Err(e) => return self.note(format!("command refused: players: {e}")),
        };
        let stamped = Command::Players { online, at_ns: Some(at) };
        if let Err(e) = server.lock().unwrap_or_else(|p| p.into_inner()).forward(&stamped) {
            self.note(format!("the server side did not take the change of players ({e:#}): its streams may disagree with the players'"));
        }
        self.note(format!("players online → {online} from {:.2} s", at as f64 / 1e9));
    }
}

/// Polls the server side and the commands while the client runs: a dead server side, a
/// signal or a stop command stops the client (within 50 ms).
pub(crate) fn watch(
    server: &Mutex<impl ServerSide>,
    stop: &AtomicBool,
    run_stop: &AtomicBool,
    done: &AtomicBool,
    died: &Mutex<Option<(String, u64)>>,
    steer: &Steer,
) {
    while !done.load(Ordering::Relaxed) {
        if stop.load(Ordering::Relaxed) {
            run_stop.store(true, Ordering::Relaxed);
            return;
        }
        while let Some(c) = steer.commands.and_then(|c| c.try_next()) {
            match c {
                Ok(c) => {
                    if steer.apply(c, server) {
                        run_stop.store(true, Ordering::Relaxed);
                        return;
                    }
                }
                Err(m) => steer.note(format!("command refused: {m}")),
            }
        }
        let exited = server.lock().ok().and_then(|mut c| c.exited());
        if let Some(status) = exited {
            if !stop.load(Ordering::Relaxed) {
                *died.lock().unwrap_or_else(|p| p.into_inner()) = Some((status, horde_engine::clock::real_ns()));
            }
            run_stop.store(true, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
