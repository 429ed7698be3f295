//! The run's command channel: typed commands in — stop now, set how many players are online,
//! change an emulated link — one JSON object per line (`horde run … --commands FILE|-`,
//! docs/schemas/command.schema.json). Parsed once here, at the edge; the run's driver applies
//! them on every side (see `execute`). The event half of the channel is [`crate::Event`].

use std::io::BufRead;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// A command line is at most this long (a link change with a trace path fits many times).
pub const MAX_LINE: usize = 16 * 1024;

/// One command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// Stop now: the run ends and reports what it measured until then, saying so.
    Stop {},
    /// Set how many of the scenario's players are online (the first `online` by id): players
    /// above it leave at once; players a raise admits join over the scenario's `join` ramp.
    Players {
        online: u32,
        /// When it takes effect, ns of schedule time (after the players' start). Left out, the
        /// driver picks a time every side hears of in time (a quarter second ahead on one
        /// machine, more through agents) and passes the stamped command on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ns: Option<u64>,
    },
    /// Change one emulated link of the run's `[emu]` topology, as `horde emu link` does: the
    /// fields of `set` replace the current ones (`clear`: the others go back to none).
    Link {
        a: String,
        b: String,
        /// "ab", "ba" or "both" (default).
        #[serde(default = "both")]
        dir: String,
        #[serde(default)]
        set: Box<horde_topo::RawImpair>,
        #[serde(default)]
        clear: bool,
        /// Take the link down (as a pulled cable) or bring it back up, as `horde emu link …
        /// --down/--up` does; not together with `set` or `clear`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<LinkState>,
    },
    /// Change a running flow's laws (`horde send --commands`): `rate` (packets per second: a
    /// constant inter-departure time), or `idt` and `size` in the flow-file syntax
    /// (`exponential(0.2)`: ms and bytes). The departure already drawn leaves as drawn; the next
    /// one is drawn from the new law.
    Flow {
        /// The flow's id (as the sender's report and log name it).
        flow: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idt: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<String>,
    },
}

/// A link's state, for [`Command::Link`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LinkState {
    Up,
    Down,
}

fn both() -> String {
    "both".into()
}

impl Command {
    /// Parses one line that may carry its `"id"` (a number the answer names): the id, if it
    /// has one, and the command or what is wrong with it.
    pub fn parse_line(line: &str) -> (Option<u64>, Result<Command, String>) {
        if line.len() > MAX_LINE {
            return (None, Command::parse(line));
        }
        let Ok(serde_json::Value::Object(mut o)) = serde_json::from_str::<serde_json::Value>(line) else { return (None, Command::parse(line)) };
        let id = match o.remove("id") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(id) => Some(id),
                None => return (None, Err(format!("id {v}: a command's id is a whole number"))),
            },
        };
        let rest = serde_json::Value::Object(o).to_string();
        (id, Command::parse(&rest))
    }

    /// Parses one line, naming what is wrong and what a command looks like.
    pub fn parse(line: &str) -> Result<Command, String> {
        if line.len() > MAX_LINE {
            return Err(format!("a command of {} bytes (at most {MAX_LINE})", line.len()));
        }
        serde_json::from_str(line).map_err(|e| {
            format!("{e}: a command is one JSON object per line: {{\"command\":\"stop\"}}, {{\"command\":\"players\",\"online\":600}}, {{\"command\":\"flow\",\"flow\":0,\"rate\":5000}} or {{\"command\":\"link\",\"a\":\"r1\",\"b\":\"h1\",\"set\":{{\"delay\":\"50ms\"}}}}")
        })
        .and_then(|c: Command| {
            // a link's settings are checked as the line arrives, with the topology's rules
            c.link_op().map(|_| c)
        })
    }

    /// What a link command asks of its link, typed (`None` for other commands).
    pub fn link_op(&self) -> Result<Option<horde_emu::links::LinkOp>, String> {
        use horde_emu::links::{LinkDir, LinkOp};
        let Command::Link { a, b, dir, set, clear, state } = self else { return Ok(None) };
        let refuse = |m: String| format!("link {a}–{b}: {m}");
        let dir: LinkDir = dir.parse().map_err(refuse)?;
        match state {
            Some(_) if *clear || **set != horde_topo::RawImpair::default() || dir != LinkDir::Both => {
                Err(refuse("`state` goes alone (no `set`, `clear` or `dir`): send the change and the state as two commands".into()))
            }
            Some(LinkState::Up) => Ok(Some(LinkOp::Up)),
            Some(LinkState::Down) => Ok(Some(LinkOp::Down)),
            None => {
                let change = horde_topo::LinkChange::parse(set).map_err(|(f, m)| refuse(format!("{f}: {m}")))?;
                Ok(Some(LinkOp::Set { dir, change: Box::new(change), clear: *clear }))
            }
        }
    }

    /// A short name for notes.
    pub fn describe(&self) -> String {
        match self {
            Command::Stop {} => "stop".into(),
            Command::Players { online, .. } => format!("players online = {online}"),
            Command::Link { a, b, state: Some(st), .. } => format!("link {a}–{b} {}", if *st == LinkState::Up { "up" } else { "down" }),
            Command::Link { a, b, dir, .. } => format!("link {a}–{b} ({dir})"),
            Command::Flow { flow, .. } => format!("flow {flow}"),
        }
    }
}

/// A command as the run's driver receives it: its id (what the answer names) and the command,
/// or what was wrong with its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub id: u64,
    pub command: Result<Command, String>,
}

/// The sending end: whoever reads commands (a line reader, the console) sends here.
pub type CommandSender = Sender<Incoming>;

/// The run's answer to one command, at once: applied (the run-clock instant it takes effect,
/// when it has one) or refused, with what it did or why not. A line of the run's event stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reply {
    /// The command's id: the one its line gave, else its number on its channel (from 1).
    pub id: u64,
    pub applied: bool,
    /// Seconds on the run's clock (0 = the players' start) at which it takes effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
    /// What it did, or why it was refused.
    pub text: String,
    /// The machine's real clock (ns since the Unix epoch) when it was applied, where the run
    /// has no clock of its own to give it on (a flow change in `horde send`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_ns: Option<u64>,
}

impl Reply {
    pub fn applied(id: u64, at_s: Option<f64>, text: String) -> Reply {
        Reply { id, applied: true, at_s, text, real_ns: None }
    }

    pub fn refused(id: u64, text: String) -> Reply {
        Reply { id, applied: false, at_s: None, text, real_ns: None }
    }

    /// The reply, stamped with the real clock's instant it was applied at.
    pub fn at_real(self, real_ns: u64) -> Reply {
        Reply { real_ns: Some(real_ns), ..self }
    }

    /// The laws a `flow` command sets, checked: (inter-departure law, size law).
    pub fn flow_laws(
        rate: Option<f64>,
        idt: Option<&str>,
        size: Option<&str>,
    ) -> Result<(Option<horde_model::dist::Dist>, Option<horde_model::dist::Dist>), String> {
        use horde_model::dist::Dist;
        let law = |what: &str, t: &str| -> Result<Dist, String> {
            t.parse::<Dist>().map_err(|e| format!("{what} `{t}`: {e}"))?.validate().map_err(|e| format!("{what} `{t}`: {e}"))
        };
        let idt = match (rate, idt) {
            (Some(_), Some(_)) => return Err("give rate or idt, not both".into()),
            (Some(r), None) if !(r.is_finite() && (0.001..=10_000_000.0).contains(&r)) => {
                return Err(format!("rate {r}: packets per second, 0.001 to 10,000,000"))
            }
            (Some(r), None) => Some(Dist::constant(1000.0 / r)),
            (None, Some(t)) => Some(law("idt", t)?),
            (None, None) => None,
        };
        let size = size.map(|t| law("size", t)).transpose()?;
        if idt.is_none() && size.is_none() {
            return Err("a flow command changes rate, idt or size; it gave none".into());
        }
        Ok((idt, size))
    }

    /// The reply for people: `command applied: …` or `command refused: …`.
    pub fn line(&self) -> String {
        let at = self.at_s.map(|t| format!(" at {t:.2} s")).unwrap_or_default();
        let real = self.real_ns.map(|t| format!(" (real clock {t} ns)")).unwrap_or_default();
        format!("command {} (#{}){at}{real}: {}", if self.applied { "applied" } else { "refused" }, self.id, self.text)
    }
}

/// The schema of a command line: a [`Command`] with an optional `"id"` (a whole number its
/// answer names), as docs/schemas/command.schema.json publishes it.
pub fn line_schema() -> schemars::schema::RootSchema {
    use schemars::schema::{InstanceType, Schema, SchemaObject};
    let mut root = schemars::schema_for!(Command);
    let id = SchemaObject {
        instance_type: Some(InstanceType::Integer.into()),
        format: Some("uint64".into()),
        metadata: Some(Box::new(schemars::schema::Metadata {
            description: Some("A number the command's answer (the run's `reply` line) names; without one, the command's line number on its channel.".into()),
            ..Default::default()
        })),
        number: Some(Box::new(schemars::schema::NumberValidation { minimum: Some(0.0), ..Default::default() })),
        ..Default::default()
    };
    for variant in root.schema.subschemas.iter_mut().flat_map(|s| s.one_of.iter_mut().flatten()) {
        if let Schema::Object(o) = variant {
            o.object().properties.insert("id".into(), Schema::Object(id.clone()));
        }
    }
    root
}

/// The receiving end a run's driver polls.
pub struct Commands {
    rx: Mutex<Receiver<Incoming>>,
}

impl Commands {
    /// A channel: commands (or a refused line's message) go in through the sender.
    pub fn channel() -> (CommandSender, Commands) {
        let (tx, rx) = std::sync::mpsc::channel();
        (tx, Commands { rx: Mutex::new(rx) })
    }

    /// The next command waiting, if any (a refused line comes as its message).
    pub fn try_next(&self) -> Option<Incoming> {
        self.rx.lock().ok()?.try_recv().ok()
    }

    /// The next command, waiting for it up to `within`.
    pub fn next_within(&self, within: std::time::Duration) -> Option<Incoming> {
        self.rx.lock().ok()?.recv_timeout(within).ok()
    }
}

/// The ids of a scenario's timeline entries start here (`at[k]` is `TIMELINE_IDS + k`), far
/// from the numbers of a channel's lines.
pub const TIMELINE_IDS: u64 = 1_000_000_000;

/// A scenario's `[[at]]` timeline as commands (ns on the run's clock, the command), each
/// checked as a command line is, and every one within the run.
pub fn timeline(sc: &horde_model::scenario::Scenario) -> Result<Vec<(u64, Command)>, String> {
    let end = (sc.duration_s * 1e9).round() as u64;
    let mut out = Vec::with_capacity(sc.timeline.len());
    for (k, (t, fields)) in sc.timeline.iter().enumerate() {
        if *t > end {
            return Err(format!("at[{k}].t: {:.3} s is after the run's end ({:.3} s)", *t as f64 / 1e9, sc.duration_s));
        }
        let c = Command::parse(&fields.to_string()).map_err(|m| format!("at[{k}]: {m}"))?;
        out.push((*t, c));
    }
    Ok(out)
}

/// Plays a timeline: the entries due at `now_ns` on the run's clock (a change of the online
/// target `lead_ns` early, stamped with its own time, so every side hears of it first; the
/// others at their time), each once.
pub struct Timeline {
    entries: Vec<(u64, Command)>,
    next: usize,
}

impl Timeline {
    pub fn new(entries: Vec<(u64, Command)>) -> Timeline {
        Timeline { entries, next: 0 }
    }

    /// The next entry due at `now_ns`, as the command to apply (a players change stamped with
    /// its time, or `now + lead` when that is later).
    pub fn due(&mut self, now_ns: u64, lead_ns: u64) -> Option<Incoming> {
        let (t, c) = self.entries.get(self.next)?;
        let lead = if matches!(c, Command::Players { .. }) { lead_ns } else { 0 };
        if now_ns + lead < *t {
            return None;
        }
        let c = match c {
            // its own time when every side still hears of it first (a driver polls late by
            // less than half the lead), else as soon as they can
            Command::Players { online, at_ns: None } => Command::Players { online: *online, at_ns: Some((*t).max(now_ns + lead_ns / 2 + 1_000_000)) },
            c => c.clone(),
        };
        self.next += 1;
        Some(Incoming { id: TIMELINE_IDS + self.next as u64 - 1, command: Ok(c) })
    }
}

/// Wrong lines a channel may send before it is read no more.
pub const MAX_REFUSED: usize = 100;

/// Reads commands from `r` until its end (or until the run's side of the channel is gone),
/// each line checked at once; a blank line is skipped. A line longer than [`MAX_LINE`], or the
/// [`MAX_REFUSED`]th wrong line, ends the reading (said on the channel): what sends that is
/// not a person or a script writing commands, and reading it on would only spin.
pub fn read(mut r: impl BufRead, tx: &CommandSender) {
    let mut buf = Vec::new();
    let mut refused = 0;
    let mut n_line = 0u64;
    loop {
        buf.clear();
        let n = match std::io::Read::take(&mut r, MAX_LINE as u64 + 1).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        n_line += 1;
        if n > MAX_LINE && buf.last() != Some(&b'\n') {
            let _ = tx.send(Incoming { id: n_line, command: Err(format!("a command line over {MAX_LINE} bytes: no more commands are read from this input")) });
            return;
        }
        let (id, command) = match std::str::from_utf8(&buf) {
            Ok(l) if l.trim().is_empty() => {
                n_line -= 1;
                continue;
            }
            Ok(l) => Command::parse_line(l.trim()),
            Err(_) => (None, Err("a command line that is not UTF-8".into())),
        };
        refused += command.is_err() as usize;
        if tx.send(Incoming { id: id.unwrap_or(n_line), command }).is_err() {
            return;
        }
        if refused >= MAX_REFUSED {
            let _ = tx.send(Incoming { id: n_line, command: Err(format!("{MAX_REFUSED} wrong command lines: no more commands are read from this input")) });
            return;
        }
    }
}

/// A server side's half of the channel: applies stamped changes of the online target to its
/// players until `done` (other commands are the driver's). A target above the players planned so
/// far plans the rest first (within the run's stated limit), as the driver's side did.
pub fn follow(commands: &Commands, players: &crate::Players, done: &std::sync::atomic::AtomicBool, stop: &std::sync::atomic::AtomicBool) {
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        let Some(c) = commands.next_within(std::time::Duration::from_millis(20)) else { continue };
        match c.command {
            Ok(Command::Players { online, at_ns: Some(at) }) => {
                if let Err(e) = players.grow(online).map_err(|e| e.to_string()).and_then(|_| players.roster.set(at, online).map_err(|e| e.to_string())) {
                    tracing::warn!("server side: players online → {online}: {e}");
                }
            }
            // the run stopped: the server side stops sending with the players
            Ok(Command::Stop {}) => stop.store(true, std::sync::atomic::Ordering::Relaxed),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_wrong_lines_say_what_a_command_is() {
        assert_eq!(Command::parse(r#"{"command":"stop"}"#), Ok(Command::Stop {}));
        assert_eq!(Command::parse(r#"{"command":"players","online":600}"#), Ok(Command::Players { online: 600, at_ns: None }));
        let Ok(Command::Link { a, dir, set, clear, .. }) = Command::parse(r#"{"command":"link","a":"r1","b":"h1","set":{"delay":"50ms"}}"#) else { panic!() };
        assert_eq!((a.as_str(), dir.as_str(), set.delay.as_deref(), clear), ("r1", "both", Some("50ms"), false));
        for bad in [r#"{"command":"players"}"#, r#"{"command":"players","online":-1}"#, r#"{"command":"fly"}"#, r#"{"command":"stop","x":1}"#, "stop"] {
            let e = Command::parse(bad).unwrap_err();
            assert!(e.contains("one JSON object per line"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_line_may_name_its_id_and_the_answer_names_it() {
        let (tx, cmds) = Commands::channel();
        read(std::io::Cursor::new("{\"command\":\"stop\",\"id\":41}\n{\"id\":\"x\",\"command\":\"stop\"}\n{\"command\":\"stop\"}\n"), &tx);
        let got: Vec<_> = std::iter::from_fn(|| cmds.try_next()).collect();
        assert_eq!(got[0], Incoming { id: 41, command: Ok(Command::Stop {}) });
        assert!(got[1].command.as_ref().unwrap_err().contains("whole number"));
        assert_eq!(got[2].id, 3, "without an id, its line's number");
        let r = Reply::applied(41, Some(2.5), "stopping the run".into());
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"id":41,"applied":true,"at_s":2.5,"text":"stopping the run"}"#);
        assert_eq!(Reply::refused(3, "the run is already stopping".into()).line(), "command refused (#3): the run is already stopping");
    }

    #[test]
    fn a_timeline_plays_each_entry_once_players_ahead_of_their_time() {
        let text = "service = 'wow'\nplayers = 600\nonline = 300\nduration = '40s'\n[[at]]\nt = '20s'\ncommand = 'link'\na = 'r1'\nb = 'r2'\nset = { delay = '150ms' }\n[[at]]\nt = '10s'\ncommand = 'players'\nonline = 600\n[[at]]\nt = '35s'\ncommand = 'stop'\n";
        let sc = horde_model::scenario::Scenario::parse(text, "t.toml", std::path::Path::new(".")).unwrap();
        let entries = timeline(&sc).unwrap();
        assert_eq!(entries.iter().map(|e| e.0 / 1_000_000_000).collect::<Vec<_>>(), [10, 20, 35], "in time order");
        let mut tl = Timeline::new(entries);
        let s = 1_000_000_000;
        assert_eq!(tl.due(9 * s, s / 4), None);
        let p = tl.due(10 * s - s / 4 + s / 20, s / 4).unwrap();
        assert_eq!(
            p,
            Incoming { id: TIMELINE_IDS, command: Ok(Command::Players { online: 600, at_ns: Some(10 * s) }) },
            "stamped with its own time, polled 50 ms late"
        );
        assert_eq!(tl.due(19 * s, s / 4), None, "a link changes at its time, not ahead");
        assert!(matches!(tl.due(20 * s, s / 4).unwrap().command, Ok(Command::Link { .. })));
        assert_eq!(tl.due(36 * s, s / 4).unwrap().command, Ok(Command::Stop {}));
        assert_eq!(tl.due(99 * s, s / 4), None, "each once");
        for (bad, says) in [("t = '50s'\ncommand = 'stop'", "after the run's end"), ("t = '5s'\ncommand = 'fly'", "at[0]"), ("command = 'stop'", "at[0].t")] {
            let e = horde_model::scenario::Scenario::parse(
                &format!("service = 'wow'\nplayers = 6\nduration = '40s'\n[[at]]\n{bad}\n"),
                "t.toml",
                std::path::Path::new("."),
            )
            .map_err(|e| e.to_string())
            .and_then(|sc| timeline(&sc).map(|_| ()));
            assert!(e.as_ref().unwrap_err().contains(says), "{bad}: {e:?}");
        }
    }

    #[test]
    fn a_link_command_is_checked_as_it_arrives() {
        use horde_emu::links::{LinkDir, LinkOp};
        let c = Command::parse(r#"{"command":"link","a":"r1","b":"h1","dir":"ba","set":{"delay":"50ms"}}"#).unwrap();
        let Ok(Some(LinkOp::Set { dir: LinkDir::Ba, change, clear: false })) = c.link_op() else { panic!("{c:?}") };
        assert_eq!(change.delay_ns, Some(50_000_000));
        let down = Command::parse(r#"{"command":"link","a":"r1","b":"h1","state":"down"}"#).unwrap();
        assert_eq!(down.link_op(), Ok(Some(LinkOp::Down)));
        for (bad, says) in [
            (r#"{"command":"link","a":"r1","b":"h1","set":{"delay":"soon"}}"#, "delay"),
            (r#"{"command":"link","a":"r1","b":"h1","dir":"up","set":{"delay":"5ms"}}"#, "direction `up`"),
            (r#"{"command":"link","a":"r1","b":"h1","state":"down","set":{"delay":"5ms"}}"#, "goes alone"),
        ] {
            let e = Command::parse(bad).unwrap_err();
            assert!(e.contains("link r1–h1") && e.contains(says), "{bad}: {e}");
        }
        assert_eq!(Command::Stop {}.link_op(), Ok(None));
    }

    #[test]
    fn reading_skips_blank_lines_refuses_binary_ones_and_stops_at_a_long_one() {
        let text = "\n{\"command\":\"stop\"}\n\u{0}\u{ff}\n{\"command\":\"players\",\"online\":3}\n";
        let mut bytes = text.as_bytes().to_vec();
        let i = bytes.iter().position(|b| *b == 0).unwrap();
        bytes[i + 1] = 0xff;
        bytes.extend(std::iter::repeat_n(b'x', MAX_LINE * 3));
        bytes.extend(b"\n{\"command\":\"stop\"}\n");
        let (tx, cmds) = Commands::channel();
        read(std::io::Cursor::new(bytes), &tx);
        let got: Vec<_> = std::iter::from_fn(|| cmds.try_next()).collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0], Incoming { id: 1, command: Ok(Command::Stop {}) });
        assert!(got[1].command.as_ref().unwrap_err().contains("UTF-8"));
        assert_eq!(got[2], Incoming { id: 3, command: Ok(Command::Players { online: 3, at_ns: None }) }, "blank lines are not numbered");
        assert!(got[3].command.as_ref().unwrap_err().contains("no more commands"), "nothing read after a line of 48 KiB");
        // An endless input of zeros (`--commands /dev/zero`) ends the reading at once.
        let (tx, cmds) = Commands::channel();
        read(std::io::BufReader::new(std::io::repeat(0)), &tx);
        assert!(cmds.try_next().unwrap().command.unwrap_err().contains("no more commands"));
        // As does an endless run of wrong lines.
        let (tx, cmds) = Commands::channel();
        read(std::io::Cursor::new("x\n".repeat(1000)), &tx);
        assert_eq!(std::iter::from_fn(|| cmds.try_next()).count(), MAX_REFUSED + 1);
    }
}
