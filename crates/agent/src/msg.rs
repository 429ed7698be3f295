//! Control messages between a controller and its agents, and their framing: an I/O-free codec
//! (bytes in, messages out) that the TLS shells on both sides feed.
//!
//! ```text
//! frame: length u32 (big-endian, of what follows, 1..=MAX_FRAME) | kind u8 | body
//!   kind 0: one control message, JSON (serde tag "type")
//!   kind 1: a piece of a log being collected (deflate stream bytes)
//! ```
//! A frame longer than [`MAX_FRAME`], an unknown kind, or a body that is not a known message is
//! an error that ends the session: the peer is broken or hostile, and nothing it sent after can
//! be trusted to be in step.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

pub use horde_scenario::part::{BotsJob, EmuPlace, FlowsJob, LogServerJob, Part, ScenarioPart, Work};

/// The control protocol's version: both sides must speak the same one. Version 2: the agent
/// answers every ping ([`ToController::Pong`]), so a controller tells an idle agent from a
/// dead one in every phase. Version 3: a link change is a typed
/// [`horde_emu::links::LinkOp`], not option names and values. Version 4: an assignment is one
/// kind of [`Work`] (an enum), not optional fields. Version 7: an assignment is a [`Part`],
/// the type a child of `horde run` gets too.
pub const PROTOCOL: u32 = 7;

/// Each agent's counters of an experiment's links: (agent index, its links).
pub type AgentLinks = Vec<(usize, Vec<horde_emu::fwd::LinkReport>)>;

/// The largest frame either side accepts (a scenario with its service file fits many times).
pub const MAX_FRAME: usize = 4 << 20;

/// A log piece's largest size on the wire.
pub const LOG_PIECE: usize = 256 << 10;

const KIND_MSG: u8 = 0;
const KIND_LOG: u8 = 1;

/// Controller → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToAgent {
    /// First message: who is talking. `version` is the controller's `horde` version.
    Hello { protocol: u32, version: String },
    /// A clock sample: `t1` is the controller's real time (ns) at sending.
    Time { t1: u64 },
    /// Prepare a part of a run (nothing is sent before [`ToAgent::Start`]).
    Assign(Box<Part>),
    /// Start the assigned part at this instant of the agent's own real-time clock (ns).
    Start { at_ns: u64 },
    /// The controller is alive (sent every second; an agent that hears nothing for
    /// `deadman_ms` stops its traffic).
    Ping,
    /// Stop the run now (Ctrl-C at the controller, or the run is over for this side).
    Stop,
    /// The run's command channel set how many players are online, from this schedule time on
    /// (ns after the common start; see `horde_model::roster`). A target above the players
    /// planned so far plans the rest on every side; `start`: the ones of them this agent starts
    /// (its share, by weight); `owners`: every player the raise starts, by the clock offset of
    /// the agent that runs it (a live summary puts their APDUs' send times on its clock).
    Players {
        online: u32,
        at_ns: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start: Option<std::ops::Range<u32>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        owners: Vec<(std::ops::Range<u32>, i64)>,
    },
    /// Send the logs of the finished run.
    Collect,
    /// Reduce the finished run's logs into one mergeable summary (`horde run --collect
    /// summaries`) and send it instead of the logs: the one file collected, `digest.json`.
    Summarise(Box<SummaryRequest>),
    /// Before Start: summarise the run as it goes (a scenario's players and server side) and
    /// send what was added once a second ([`ToController::Summary`]); the summary `Summarise`
    /// asks for is then the sum of those pieces.
    Live(Box<SummaryRequest>),
    /// Outside a run, to an agent started with `--emu`: its part of an emulated network that
    /// spans machines (answered by [`ToController::Emu`]).
    Emu(Box<EmuRequest>),
}

/// What the controller asks of an agent's emulator (`horde emu … --agents`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum EmuRequest {
    /// Build this machine's part of experiment `exp` (the controller's id, 1..=5 characters:
    /// the part's own id adds the machine's letter).
    Up { exp: String, topology: String, file: String, part: horde_topo::partition::Part, live_all: bool },
    /// Take this machine's part of `exp` down.
    Down { exp: String },
    /// The parts this agent built and has not taken down.
    Ls,
    /// Run a command in a node of `exp` if the node is on this machine: until it ends (at
    /// most `timeout_ms`), or started in the background (`detach`: its output goes to a file in
    /// the node's directory, and `down` stops it).
    Exec { exp: String, node: String, argv: Vec<String>, timeout_ms: u64, detach: bool },
    /// Change or show link `a`–`b` of `exp` where it is built on this machine, as the user
    /// named its ends. On a link between machines each machine changes only the direction
    /// that leaves it.
    Link { exp: String, a: String, b: String, op: horde_emu::links::LinkOp },
    /// The counters of every emulated link of `exp` this machine built (a scenario's `[emu]`
    /// run through agents reports them).
    Stats { exp: String },
}

/// An agent's answer to an [`EmuRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum EmuReply {
    Up {
        local: String,
        nodes: usize,
        tunnels: usize,
        emulated_links: usize,
        seconds: f64,
    },
    Down {
        local: String,
        namespaces: usize,
        processes: usize,
    },
    /// (controller's id, this machine's id) of every part.
    Ls {
        parts: Vec<(String, String)>,
    },
    /// `here` false: the link (or the asked direction) is not on this machine; else what
    /// changed, one line each, or the link's counters as JSON.
    Link {
        here: bool,
        output: String,
    },
    /// Every emulated link of the part built here, its counters both ways (a link between
    /// machines: the direction that leaves this machine counts, the other is its far end's).
    Stats {
        links: Vec<horde_emu::fwd::LinkReport>,
    },
    /// `here` false: the node is not on this machine (nothing ran).
    Exec {
        here: bool,
        code: Option<i32>,
        stdout: String,
        stderr: String,
        timed_out: bool,
    },
    Failed {
        message: String,
    },
}

/// A flow run's summary file, the one file collected with `--collect summaries`: a JSON list
/// of [`horde_stats::flowsum::FlowSummaries`], one per log the agent kept (what it sent, what
/// it received).
pub const FLOW_SUMMARIES: &str = "flow-summaries.json";

/// What an agent needs to summarise its part of a run on the controller's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryRequest {
    /// The run's start on the controller's clock (ns): the summary's seconds count from it.
    pub epoch_ns: u64,
    /// This agent's clock minus the controller's (ns).
    pub own_offset_ns: i64,
    /// The server agent's offset, and each player range's agent's: a received APDU carries its
    /// sender's send time. For a flow run: the offset of the agent at each flow's other end.
    pub server_offset_ns: i64,
    pub owners: Vec<(std::ops::Range<u32>, i64)>,
    /// A flow run's windows (ns, counted from `epoch_ns`; 0: none): the flow summaries bin
    /// their arrivals and departures in them (`horde send --agents --collect summaries`).
    #[serde(default)]
    pub window_ns: u64,
    /// A flow run: send the logs after the summary (`--check-summaries`: the controller checks
    /// the one against the other).
    #[serde(default)]
    pub with_logs: bool,
}

/// Most client hosts an agent's part may name.
pub const MAX_EMU_CLIENTS: usize = 20_000;

/// Most receive addresses one flows assignment may ask for.
pub const MAX_RECV_ADDRS: usize = 1024;

/// The most owner ranges one `players` message may carry (one per agent that starts players).
pub const MAX_OWNERS: usize = 1024;

/// Agent → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToController {
    /// Answer to Hello: the agent's name, `horde` version and protocol, and its machine.
    Hello {
        protocol: u32,
        version: String,
        name: String,
        cores: u32,
    },
    /// Answer to Time: `t2` the agent's real time at receiving, `t3` at answering.
    Time {
        t1: u64,
        t2: u64,
        t3: u64,
    },
    /// The assignment is prepared (the server side listens on `server_addr`).
    Ready {
        server_addr: Option<SocketAddr>,
    },
    /// Progress, once a second while running: totals since the start.
    Progress(Progress),
    /// One role of the assigned part ended (`role`: "clients" or "server"); its report (a
    /// [`horde_engine::SendReport`] as JSON, absent if it failed) and the agent's usage.
    Finished {
        role: String,
        report: Option<serde_json::Value>,
        error: Option<String>,
        cpu_s: f64,
        max_rss_kb: u64,
    },
    /// A log follows in `kind 1` frames, then [`ToController::LogEnd`].
    LogBegin {
        file: String,
        bytes: u64,
    },
    LogEnd {
        file: String,
        bytes: u64,
        transferred: u64,
    },
    /// Every log of the run was sent (`files` of them).
    Collected {
        files: u32,
    },
    /// The agent refuses or failed; the message says why.
    Error {
        message: String,
    },
    /// Answer to a ping: the agent is alive (whatever it is doing or waiting for).
    Pong,
    /// What the run's live summary gained since the last piece (once a second while running,
    /// and a last piece before the logs or the summary are sent).
    Summary(Box<horde_stats::digest::Delta>),
    /// The answer to [`ToAgent::Emu`].
    Emu(Box<EmuReply>),
}

/// An agent's running totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    pub t_s: f64,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub recv_packets: u64,
    pub recv_bytes: u64,
    pub connections: u64,
}

impl Progress {
    /// What changed since `prev`: sent packets, sent bits, received packets, received bits (a
    /// second apart: the rates the controllers print).
    pub fn since(&self, prev: &Progress) -> [u64; 4] {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        [
            d(self.sent_packets, prev.sent_packets),
            d(self.sent_bytes, prev.sent_bytes) * 8,
            d(self.recv_packets, prev.recv_packets),
            d(self.recv_bytes, prev.recv_bytes) * 8,
        ]
    }
}

/// What one frame carried.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame<M> {
    Msg(M),
    Log(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes (the limit is {MAX_FRAME}): not a Horde control peer, or a broken one")]
    TooLong(usize),
    #[error("empty frame")]
    Empty,
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("bad control message: {0}")]
    Message(String),
}

/// Encodes a control message as a frame.
pub fn encode<M: Serialize>(m: &M) -> Vec<u8> {
    let body = serde_json::to_vec(m).expect("control messages serialize");
    frame(KIND_MSG, &body)
}

/// Encodes a log piece as a frame.
pub fn encode_log(piece: &[u8]) -> Vec<u8> {
    frame(KIND_LOG, piece)
}

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + body.len());
    v.extend_from_slice(&((body.len() + 1) as u32).to_be_bytes());
    v.push(kind);
    v.extend_from_slice(body);
    v
}

/// Splits a byte stream into frames. Holds at most one frame's bytes.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// Adds bytes read from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that do not yet make a frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame, if there is one. An error leaves the decoder unusable (the
    /// session must end).
    pub fn frame<M: serde::de::DeserializeOwned>(&mut self) -> Result<Option<Frame<M>>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > MAX_FRAME {
            return Err(FrameError::TooLong(len));
        }
        if len == 0 {
            return Err(FrameError::Empty);
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let kind = self.buf[4];
        let body = &self.buf[5..4 + len];
        let f = match kind {
            KIND_MSG => Frame::Msg(serde_json::from_slice(body).map_err(|e| FrameError::Message(e.to_string()))?),
            KIND_LOG => Frame::Log(body.to_vec()),
            k => return Err(FrameError::Kind(k)),
        };
        self.buf.drain(..4 + len);
        Ok(Some(f))
    }
}

/// A byte count a peer may hold in a decoder before the frame is refused: bounds memory.
pub const fn max_buffer() -> usize {
    MAX_FRAME + 5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_is_one_kind_of_work() {
        // the fuzz corpus's seed (fuzz/run.sh) is an assignment of today's shape
        let seed = r#"{"type":"assign","run_id":"r-1","shape":{"duration_ns":1000000000,"seed":1,"key":"abababababababababababababababababababababababababababababababab"},"place":{"agent":{"deadman_ms":3000}},"work":{"scenario":{"scenario":{"name":"s","scenario":"service = \"wow\"","service":null,"players":10,"online":null},"server":null,"players":{"start":0,"end":10},"server_addr":"127.0.0.1:9","emu":null}}}"#;
        let ToAgent::Assign(a) = serde_json::from_str::<ToAgent>(seed).unwrap() else { panic!() };
        assert_eq!(a.scenario_part().and_then(|p| p.players.clone()), Some(0..10));
        let two = seed.replace(r#""work":{"scenario""#, r#""work":{"bots":{},"scenario""#);
        assert!(serde_json::from_str::<ToAgent>(&two).is_err(), "two kinds of work in one assignment cannot be said");
        assert!(serde_json::from_str::<ToAgent>(&seed.replace(r#","work""#, r#","deadman_ms":3000,"work""#)).is_err(), "nor an old field");
    }

    #[test]
    fn frames_round_trip_in_any_split() {
        let req = SummaryRequest { epoch_ns: 5, own_offset_ns: -3, server_offset_ns: 2, owners: vec![(0..10, 4)], window_ns: 1_000, with_logs: true };
        let msgs = vec![
            ToAgent::Hello { protocol: PROTOCOL, version: "0.1.0".into() },
            ToAgent::Time { t1: 42 },
            ToAgent::Assign(Box::new(Part {
                run_id: "r1".into(),
                shape: horde_scenario::part::Shape { duration_ns: 1_000_000_000, seed: 1, key: "00".repeat(32) },
                place: horde_scenario::part::Place::Agent { deadman_ms: 3000 },
                work: Work::Scenario(ScenarioPart {
                    scenario: horde_scenario::part::ScenarioWork {
                        name: "s".into(),
                        scenario: "players = 2".into(),
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
            })),
            ToAgent::Start { at_ns: 7 },
            ToAgent::Ping,
            ToAgent::Stop,
            ToAgent::Collect,
            ToAgent::Summarise(Box::new(req.clone())),
            ToAgent::Live(Box::new(req)),
        ];
        let mut bytes = Vec::new();
        for m in &msgs {
            bytes.extend(encode(m));
        }
        bytes.extend(encode_log(b"piece"));
        for split in [1, 3, 7, bytes.len()] {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for c in bytes.chunks(split) {
                d.push(c);
                while let Some(f) = d.frame::<ToAgent>().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got.len(), msgs.len() + 1);
            for (g, m) in got.iter().zip(&msgs) {
                assert_eq!(g, &Frame::Msg(m.clone()));
            }
            assert_eq!(got.last(), Some(&Frame::Log(b"piece".to_vec())));
            assert_eq!(d.pending(), 0);
        }
    }

    #[test]
    fn hostile_frames_are_errors() {
        let mut d = Decoder::default();
        d.push(&(MAX_FRAME as u32 + 1).to_be_bytes());
        assert!(matches!(d.frame::<ToAgent>(), Err(FrameError::TooLong(_))));
        let mut d = Decoder::default();
        d.push(&[0, 0, 0, 0]);
        assert_eq!(d.frame::<ToAgent>(), Err(FrameError::Empty));
        let mut d = Decoder::default();
        d.push(&[0, 0, 0, 1, 9]);
        assert_eq!(d.frame::<ToAgent>(), Err(FrameError::Kind(9)));
        let mut d = Decoder::default();
        d.push(&frame(KIND_MSG, b"{\"type\":\"launch_missiles\"}"));
        assert!(matches!(d.frame::<ToAgent>(), Err(FrameError::Message(_))));
        // A controller's message is not an agent's.
        let mut d = Decoder::default();
        d.push(&encode(&ToController::Ready { server_addr: None }));
        assert!(matches!(d.frame::<ToAgent>(), Err(FrameError::Message(_))));
    }
}
