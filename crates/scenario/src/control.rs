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
    /// Parses one line, naming what is wrong and what a command looks like.
    pub fn parse(line: &str) -> Result<Command, String> {
        if line.len() > MAX_LINE {
            return Err(format!("a command of {} bytes (at most {MAX_LINE})", line.len()));
        }
        serde_json::from_str(line).map_err(|e| {
            format!("{e}: a command is one JSON object per line: {{\"command\":\"stop\"}}, {{\"command\":\"players\",\"online\":600}} or {{\"command\":\"link\",\"a\":\"r1\",\"b\":\"h1\",\"set\":{{\"delay\":\"50ms\"}}}}")
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
        }
    }
}

/// The receiving end a run's driver polls.
pub struct Commands {
    rx: Mutex<Receiver<Result<Command, String>>>,
}

impl Commands {
    /// A channel: commands (or a refused line's message) go in through the sender.
    pub fn channel() -> (Sender<Result<Command, String>>, Commands) {
        let (tx, rx) = std::sync::mpsc::channel();
        (tx, Commands { rx: Mutex::new(rx) })
    }

    /// The next command waiting, if any (a refused line comes as its message).
    pub fn try_next(&self) -> Option<Result<Command, String>> {
        self.rx.lock().ok()?.try_recv().ok()
    }
}

/// Wrong lines a channel may send before it is read no more.
pub const MAX_REFUSED: usize = 100;

/// Reads commands from `r` until its end (or until the run's side of the channel is gone),
/// each line checked at once; a blank line is skipped. A line longer than [`MAX_LINE`], or the
/// [`MAX_REFUSED`]th wrong line, ends the reading (said on the channel): what sends that is
/// not a person or a script writing commands, and reading it on would only spin.
pub fn read(mut r: impl BufRead, tx: &Sender<Result<Command, String>>) {
    let mut buf = Vec::new();
    let mut refused = 0;
    loop {
        buf.clear();
        let n = match std::io::Read::take(&mut r, MAX_LINE as u64 + 1).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if n > MAX_LINE && buf.last() != Some(&b'\n') {
            let _ = tx.send(Err(format!("a command line over {MAX_LINE} bytes: no more commands are read from this input")));
            return;
        }
        let item = match std::str::from_utf8(&buf) {
            Ok(l) if l.trim().is_empty() => continue,
            Ok(l) => Command::parse(l.trim()),
            Err(_) => Err("a command line that is not UTF-8".into()),
        };
        refused += item.is_err() as usize;
        if tx.send(item).is_err() {
            return;
        }
        if refused >= MAX_REFUSED {
            let _ = tx.send(Err(format!("{MAX_REFUSED} wrong command lines: no more commands are read from this input")));
            return;
        }
    }
}

/// A server side's half of the channel: applies stamped changes of the online target to its
/// roster until `done` (other commands are the driver's).
pub fn follow(commands: &Commands, roster: &horde_model::roster::Roster, done: &std::sync::atomic::AtomicBool) {
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        while let Some(c) = commands.try_next() {
            if let Ok(Command::Players { online, at_ns: Some(at) }) = c {
                if let Err(e) = roster.set(at, online) {
                    tracing::warn!("server side: players online → {online}: {e}");
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
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
        assert_eq!(got[0], Ok(Command::Stop {}));
        assert!(got[1].as_ref().unwrap_err().contains("UTF-8"));
        assert_eq!(got[2], Ok(Command::Players { online: 3, at_ns: None }));
        assert!(got[3].as_ref().unwrap_err().contains("no more commands"), "nothing read after a line of 48 KiB");
        // An endless input of zeros (`--commands /dev/zero`) ends the reading at once.
        let (tx, cmds) = Commands::channel();
        read(std::io::BufReader::new(std::io::repeat(0)), &tx);
        assert!(cmds.try_next().unwrap().unwrap_err().contains("no more commands"));
        // As does an endless run of wrong lines.
        let (tx, cmds) = Commands::channel();
        read(std::io::Cursor::new("x\n".repeat(1000)), &tx);
        assert_eq!(std::iter::from_fn(|| cmds.try_next()).count(), MAX_REFUSED + 1);
    }
}
