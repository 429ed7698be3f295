//! One automated player as an I/O-free state machine in the endpoint contract's shape
//! (`horde_proto::endpoint::Peer`, which it implements): datagrams in ([`Bot::handle`]), timers
//! ([`Bot::handle_timeout`] when [`Bot::poll_timeout`] passes: frames, resends, a silent
//! server), datagrams out ([`Bot::poll_transmit`]), log events out ([`Bot::poll_event`]). Times
//! are monotonic nanoseconds from any origin.
//!
//! Connection, as the engine's client does it: `getchallenge` (resent every 3 s) →
//! `challengeResponse` → `connect` with the userinfo (resent every 3 s) → `connectResponse` →
//! netchan packets once a second until the gamestate arrives → then a packet every
//! `1000 / maxpackets` ms carrying the usercmds made at `fps` frames per second since the packet
//! `packetdup + 1` back (so a lost packet's commands arrive with the next one). The first
//! usercmd puts the player in the game; each snapshot's player state says up to which command
//! time the server has run its commands.
//!
//! **Response time** (the benchmark's measure): for each packet carrying usercmds, from its
//! sending to the arrival of the first snapshot whose `commandTime` is at least the packet's
//! newest command's `serverTime`, i.e. the server has run it. Resolution: the caller's clock
//! (ns); the value includes the wait for the server's next snapshot frame (up to
//! `1000 / sv_fps` ms).

use std::collections::VecDeque;

use crate::input::{Behaviour, Input};
use crate::msg::Writer;
use crate::netchan::{self, Channel, Drop, MAX_RELIABLE};
use crate::oob::{self, Reply};
use crate::server::{self, info_value, Op};
use crate::usercmd::{self, UserCmd};

const CLC_MOVE: u8 = 2;
const CLC_MOVE_NO_DELTA: u8 = 3;
const CLC_CLIENT_COMMAND: u8 = 4;
const CLC_EOF: u8 = 5;
/// Connectionless requests are resent this often (the engine's RETRANSMIT_TIMEOUT).
const RESEND_NS: u64 = 3_000_000_000;
/// Tries before giving up on a server that does not answer.
const MAX_TRIES: u32 = 5;
/// Before the gamestate, a packet a second (the engine's pace while connecting).
const CONNECTED_PACKET_NS: u64 = 1_000_000_000;
/// A server silent this long has dropped us (the engine's cl_timeout is 200 s; a benchmark
/// wants to know sooner).
const SERVER_TIMEOUT_NS: u64 = 10_000_000_000;
/// Snapshots remembered as delta bases (PACKET_BACKUP).
const BACKUP: usize = 32;
/// Commands a packet may carry (MAX_PACKET_USERCMDS).
const MAX_PACKET_CMDS: u64 = 32;
/// Packets awaiting their response, at most.
const MAX_PENDING: usize = 256;
/// Log events held until [`Bot::poll_event`] takes them, at most (newer ones are dropped).
pub const MAX_LOG_EVENTS: usize = 4096;

/// Which wire protocol the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Quake III 1.32 (68) framing under the number 71: OpenArena's Debian server
    /// (`com_legacyprotocol 71`). Scrambled messages, no checksum.
    OpenArena,
    /// ioquake3's protocol 71: checksummed netchan, no scrambling.
    Ioq3,
    /// Quake III Arena 1.32c, protocol 68.
    Legacy68,
}

impl Protocol {
    /// `openarena`, `ioq3`, or `q3` (also `68`), as `--protocol` names them.
    pub fn from_name(name: &str) -> Option<Protocol> {
        match name {
            "openarena" => Some(Protocol::OpenArena),
            "ioq3" => Some(Protocol::Ioq3),
            "q3" | "68" => Some(Protocol::Legacy68),
            _ => None,
        }
    }

    fn number(self) -> u32 {
        match self {
            Protocol::OpenArena | Protocol::Ioq3 => 71,
            Protocol::Legacy68 => 68,
        }
    }

    pub(crate) fn legacy(self) -> bool {
        self != Protocol::Ioq3
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub name: String,
    pub protocol: Protocol,
    /// Distinguishes this client's netchan behind NAT; unique per bot on a host.
    pub qport: u16,
    /// The client's own challenge (hijack protection): any number, unique per bot.
    pub client_challenge: i32,
    /// Userinfo `rate` (bytes/s the server may send) and `snaps` (snapshots/s asked for).
    pub rate: u32,
    pub snaps: u32,
    /// Packets per second at most (`cl_maxpackets`, 15..=125).
    pub maxpackets: u32,
    /// Usercmds made per second (the client's frame rate).
    pub fps: u32,
    /// Earlier packets' commands repeated in each packet (`cl_packetdup`, 0..=5).
    pub packetdup: u32,
    pub model: String,
    /// Seed of the behaviour model.
    pub seed: u64,
}

impl Config {
    /// The engine's defaults for a player on a fast link: `rate 25000`, `snaps 20`,
    /// `cl_maxpackets 30`, `cl_packetdup 1`, 60 frames per second.
    pub fn new(name: String, qport: u16, seed: u64) -> Config {
        Config {
            name,
            protocol: Protocol::OpenArena,
            qport,
            client_challenge: (seed as i32) & 0x7FFF_FFFF,
            rate: 25_000,
            snaps: 20,
            maxpackets: 30,
            fps: 60,
            packetdup: 1,
            model: "sarge".into(),
            seed,
        }
    }
}

/// Where a bot stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Challenging,
    Connecting,
    /// The netchan is up; the gamestate has not arrived.
    Connected,
    /// The gamestate arrived; no snapshot yet.
    Primed,
    /// In the game: snapshots arrive.
    Active,
    /// Saying goodbye (three packets carrying `disconnect`).
    Leaving(u8),
    Gone(End),
}

/// Why a bot left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// It disconnected as asked.
    Quit,
    /// The server refused the connection (its message).
    Refused(String),
    /// The server dropped it (its reason).
    Kicked(String),
    /// No answer to the connection requests.
    NoAnswer,
    /// The server fell silent.
    TimedOut,
}

/// What a bot did that a per-packet log records (taken with [`Bot::poll_event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEvent {
    /// A netchan packet of `size` bytes, sequence `seq`, left at `at`.
    Sent { seq: i32, size: u32, at: u64 },
    /// The first snapshot showing that the server ran packet `seq`'s newest command arrived at
    /// `at` (the packet left at `sent`); `size`: that server datagram's length.
    Answered { seq: i32, sent: u64, at: u64, size: u32 },
}

/// Counters of one bot.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub cmds_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub snapshots: u64,
    /// Response times, ns, one per answered packet.
    pub response_ns: Vec<u64>,
    /// Packets never answered (a later command's answer came first, or none came).
    pub unanswered: u64,
    /// Snapshot inter-arrival times, ns.
    pub snapshot_gaps_ns: Vec<u64>,
    /// Server datagrams missing (netchan sequence gaps), duplicated or out of order.
    pub dropped: u64,
    pub out_of_order: u64,
    /// Snapshots whose delta base this bot no longer had.
    pub delta_misses: u64,
    /// Server datagrams or messages that could not be read (counted, not fatal).
    pub corrupt: u64,
    pub server_commands: u64,
    /// When the bot entered the game (first snapshot), ns after its start.
    pub active_after_ns: Option<u64>,
}

pub struct Bot {
    cfg: Config,
    phase: Phase,
    started: u64,
    challenge: i32,
    chan: Option<Channel>,
    tries: u32,
    next_resend: u64,
    last_heard: u64,
    reliable: Vec<String>,
    reliable_seq: i32,
    reliable_ack: i32,
    server_cmds: Vec<String>,
    server_cmd_seq: i32,
    server_msg_seq: i32,
    server_id: i32,
    checksum_feed: i32,
    pub client_num: i32,
    /// (message number, commandTime) of recent snapshots, by message number.
    snaps: [(i32, i32); BACKUP],
    /// The last message held a valid snapshot (then commands may ask for delta snapshots).
    snap_valid: bool,
    last_snap: Option<(i32, u64)>,
    cmds: VecDeque<UserCmd>,
    cmd_number: u64,
    packet_cmd: [u64; BACKUP],
    next_frame: u64,
    next_packet: u64,
    /// Packets awaiting their answer: (newest command's server time, sent at, packet sequence).
    pending: VecDeque<(i32, u64, i32)>,
    behaviour: Box<dyn Input>,
    /// The commands made, as an action file's frames (ms from the bot's start), when recording.
    tape: Option<Vec<(u32, UserCmd)>>,
    /// Log events not yet taken (at most [`MAX_LOG_EVENTS`]).
    events: VecDeque<LogEvent>,
    /// Datagrams made and not yet taken by [`Bot::poll_transmit`].
    out: VecDeque<Vec<u8>>,
    /// Length of the server datagram being handled.
    rx_len: u32,
    pub stats: Stats,
}

impl Bot {
    /// A bot that starts connecting at `now`, its input from the behaviour model.
    pub fn new(cfg: Config, now: u64) -> Bot {
        let input = Box::new(Behaviour::new(cfg.seed));
        Bot::with_input(cfg, now, input)
    }

    /// A bot whose input comes from `input` (e.g. a recorded action file).
    pub fn with_input(cfg: Config, now: u64, behaviour: Box<dyn Input>) -> Bot {
        Bot {
            phase: Phase::Challenging,
            started: now,
            challenge: 0,
            chan: None,
            tries: 0,
            next_resend: now,
            last_heard: now,
            reliable: vec![String::new(); MAX_RELIABLE],
            reliable_seq: 0,
            reliable_ack: 0,
            server_cmds: vec![String::new(); MAX_RELIABLE],
            server_cmd_seq: 0,
            server_msg_seq: 0,
            server_id: 0,
            checksum_feed: 0,
            client_num: -1,
            snaps: [(-1, 0); BACKUP],
            snap_valid: false,
            last_snap: None,
            cmds: VecDeque::with_capacity(64),
            cmd_number: 0,
            packet_cmd: [0; BACKUP],
            next_frame: now,
            next_packet: now,
            pending: VecDeque::new(),
            behaviour,
            tape: None,
            events: VecDeque::new(),
            out: VecDeque::new(),
            rx_len: 0,
            cfg,
            stats: Stats::default(),
        }
    }

    /// Keeps every command the bot makes from now on (at most [`crate::input::MAX_ACTIONS`]),
    /// with its time from the bot's start: [`Bot::take_tape`] hands them over.
    pub fn record_input(&mut self) {
        self.tape.get_or_insert_with(Vec::new);
    }

    /// The commands recorded so far (see [`Bot::record_input`]), as an action file's frames.
    pub fn take_tape(&mut self) -> Vec<(u32, UserCmd)> {
        self.tape.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The oldest log event not yet taken.
    pub fn poll_event(&mut self) -> Option<LogEvent> {
        self.events.pop_front()
    }

    fn record(&mut self, e: LogEvent) {
        if self.events.len() < MAX_LOG_EVENTS {
            self.events.push_back(e);
        }
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    /// Queues a reliable command (`say hello`, `team free`); it is resent in every packet until
    /// the server acknowledges it.
    pub fn command(&mut self, text: &str) {
        if self.reliable_seq - self.reliable_ack >= MAX_RELIABLE as i32 - 1 {
            return; // the engine would drop the connection; a bot keeps quiet instead
        }
        self.reliable_seq += 1;
        self.reliable[(self.reliable_seq as usize) & (MAX_RELIABLE - 1)] = text.to_string();
    }

    /// Starts leaving: the next three packets carry `disconnect`, as the engine's client sends.
    pub fn disconnect(&mut self) {
        match self.phase {
            Phase::Connected | Phase::Primed | Phase::Active => {
                self.command("disconnect");
                self.phase = Phase::Leaving(3);
            }
            Phase::Leaving(_) | Phase::Gone(_) => {}
            // Never connected: the server did not answer in time.
            _ => self.phase = Phase::Gone(End::NoAnswer),
        }
    }

    /// When the bot next needs [`Bot::handle_timeout`] and [`Bot::poll_transmit`] (None: gone).
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            _ if !self.out.is_empty() => Some(0),
            Phase::Challenging | Phase::Connecting => Some(self.next_resend),
            Phase::Connected | Phase::Leaving(_) => Some(self.next_packet),
            Phase::Primed | Phase::Active => Some(self.next_frame.min(self.next_packet).min(self.last_heard + SERVER_TIMEOUT_NS)),
            Phase::Gone(_) => None,
        }
    }

    /// The timers due at `now`: a server that never answered or fell silent ends the bot; the
    /// usercmds of every frame due are made.
    pub fn handle_timeout(&mut self, now: u64) {
        match self.phase {
            Phase::Challenging | Phase::Connecting if now >= self.next_resend && self.tries >= MAX_TRIES => self.phase = Phase::Gone(End::NoAnswer),
            Phase::Primed | Phase::Active if now >= self.last_heard + SERVER_TIMEOUT_NS => self.phase = Phase::Gone(End::TimedOut),
            Phase::Primed | Phase::Active => self.make_commands(now),
            _ => {}
        }
    }

    fn userinfo(&self) -> String {
        let mut info = String::new();
        let c = &self.cfg;
        for (k, v) in [
            ("name", c.name.clone()),
            ("rate", c.rate.to_string()),
            ("snaps", c.snaps.to_string()),
            ("model", c.model.clone()),
            ("headmodel", c.model.clone()),
            ("handicap", "100".into()),
            ("color1", "4".into()),
            ("color2", "5".into()),
            ("sex", "male".into()),
            ("protocol", c.protocol.number().to_string()),
            ("qport", c.qport.to_string()),
            ("challenge", self.challenge.to_string()),
            // OpenArena's game code refuses players without a 32-hex-digit GUID.
            ("cl_guid", format!("{:016X}{:016X}", c.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), c.seed ^ 0xD1B5_4A32_D192_ED03)),
        ] {
            oob::info_set(&mut info, k, &v);
        }
        info
    }

    /// Puts the next datagram due at `now` in `buf`; false when none is.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut Vec<u8>) -> bool {
        if self.out.is_empty() {
            let due = self.due(now);
            self.out.extend(due);
        }
        self.out.pop_front().is_some_and(|p| {
            *buf = p;
            true
        })
    }

    /// The datagrams due at `now` (a netchan packet may be fragments).
    fn due(&mut self, now: u64) -> Vec<Vec<u8>> {
        match self.phase.clone() {
            Phase::Challenging | Phase::Connecting if now >= self.next_resend && self.tries < MAX_TRIES => {
                self.tries += 1;
                self.next_resend = now + RESEND_NS;
                let p =
                    if self.phase == Phase::Challenging { oob::getchallenge(self.cfg.client_challenge, "Quake3Arena") } else { oob::connect(&self.userinfo()) };
                self.count_sent(&p);
                vec![p]
            }
            Phase::Connected if now >= self.next_packet => {
                self.next_packet = now + CONNECTED_PACKET_NS;
                self.packet(now, false)
            }
            Phase::Primed | Phase::Active if now >= self.next_packet => {
                self.make_commands(now);
                let gap = 1_000_000_000 / self.cfg.maxpackets.clamp(15, 125) as u64;
                // Keep the cadence; after a stall, start again from now.
                self.next_packet = (self.next_packet + gap).max(now + gap / 2);
                self.packet(now, true)
            }
            Phase::Leaving(n) if now >= self.next_packet => {
                self.next_packet = now + 10_000_000;
                self.phase = if n > 1 { Phase::Leaving(n - 1) } else { Phase::Gone(End::Quit) };
                self.packet(now, false)
            }
            _ => Vec::new(),
        }
    }

    fn count_sent(&mut self, p: &[u8]) {
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += p.len() as u64;
    }

    /// Makes the usercmds of every frame due by `now`.
    fn make_commands(&mut self, now: u64) {
        let frame = 1_000_000_000 / self.cfg.fps.clamp(10, 1000) as u64;
        while self.next_frame <= now {
            let t = self.next_frame;
            self.next_frame += frame;
            let mut cmd = UserCmd { weapon: 2, ..Default::default() };
            self.behaviour.frame(t.saturating_sub(self.started) as f64 / 1e9, &mut cmd);
            // The server's time now, estimated from the last snapshot: behind the server's
            // own clock by the one-way delay, so the server never clamps it.
            let last = self.cmds.back().map_or(0, |c| c.server_time);
            cmd.server_time = match self.last_snap {
                Some((st, at)) => (st as i64 + (t.saturating_sub(at) / 1_000_000) as i64).max(last as i64) as i32,
                None => 0,
            };
            if self.cmds.len() == 64 {
                self.cmds.pop_front();
            }
            self.cmds.push_back(cmd);
            self.cmd_number += 1;
            if let Some(tape) = self.tape.as_mut().filter(|t| t.len() < crate::input::MAX_ACTIONS) {
                tape.push(((t.saturating_sub(self.started) / 1_000_000).min(u32::MAX as u64) as u32, cmd));
            }
        }
    }

    /// The next netchan packet (with usercmds when `moves`).
    fn packet(&mut self, now: u64, moves: bool) -> Vec<Vec<u8>> {
        let Some(chan) = &self.chan else { return Vec::new() };
        let last_cmd = self.server_cmds[(self.server_cmd_seq as usize) & (MAX_RELIABLE - 1)].clone();
        let mut w = Writer::new();
        w.long(self.server_id);
        w.long(self.server_msg_seq);
        w.long(self.server_cmd_seq);
        for i in self.reliable_ack + 1..=self.reliable_seq {
            w.byte(CLC_CLIENT_COMMAND);
            w.long(i);
            w.string(&self.reliable[(i as usize) & (MAX_RELIABLE - 1)]);
        }
        let out_seq = chan.outgoing;
        let back = (out_seq - 1 - self.cfg.packetdup.min(5) as i32) as usize & (BACKUP - 1);
        let count = if moves { self.cmd_number.saturating_sub(self.packet_cmd[back]).min(MAX_PACKET_CMDS).min(self.cmds.len() as u64) } else { 0 };
        if count > 0 {
            w.byte(if self.snap_valid { CLC_MOVE } else { CLC_MOVE_NO_DELTA });
            w.byte(count as u8);
            let key = self.checksum_feed ^ self.server_msg_seq ^ usercmd::hash_key(&last_cmd, 32);
            let mut from = UserCmd::default();
            for c in self.cmds.iter().skip(self.cmds.len() - count as usize) {
                usercmd::write_delta(&mut w, key, &from, c);
                from = *c;
            }
            self.stats.cmds_sent += count;
            let newest = from.server_time;
            if newest > 0 && self.pending.back().is_none_or(|p| p.0 < newest) {
                if self.pending.len() == MAX_PENDING {
                    self.pending.pop_front();
                    self.stats.unanswered += 1;
                }
                self.pending.push_back((newest, now, out_seq));
            }
        }
        self.packet_cmd[(out_seq as usize) & (BACKUP - 1)] = self.cmd_number;
        w.byte(CLC_EOF);
        let mut msg = w.finish();
        if self.cfg.protocol.legacy() {
            netchan::scramble_client(&mut msg, self.challenge, self.server_id, self.server_msg_seq, &last_cmd);
        }
        let packets = self.chan.as_mut().expect("checked").transmit(&msg);
        for p in &packets {
            self.count_sent(p);
        }
        let size = packets.iter().map(|p| p.len() as u32).sum();
        self.record(LogEvent::Sent { seq: out_seq, size, at: now });
        packets
    }

    /// A datagram from the server arrived at `now`.
    pub fn handle(&mut self, now: u64, data: &[u8]) {
        if matches!(self.phase, Phase::Gone(_)) {
            return;
        }
        self.stats.packets_received += 1;
        self.stats.bytes_received += data.len() as u64;
        self.rx_len = data.len() as u32;
        if data.starts_with(&oob::PREFIX) {
            self.handle_oob(now, data);
            return;
        }
        let Some(chan) = &mut self.chan else {
            self.stats.corrupt += 1;
            return;
        };
        let (seq, mut msg) = match chan.process(data) {
            Ok(x) => x,
            Err(Drop::Partial) => return,
            Err(Drop::Old) => {
                self.stats.out_of_order += 1;
                return;
            }
            Err(_) => {
                self.stats.corrupt += 1;
                return;
            }
        };
        self.stats.dropped = chan.dropped;
        self.last_heard = now;
        if self.cfg.protocol.legacy() {
            let reliable = &self.reliable;
            netchan::unscramble_server(&mut msg, self.challenge, seq, |ack| reliable[(ack as usize) & (MAX_RELIABLE - 1)].clone());
        }
        self.server_msg_seq = seq;
        self.snap_valid = false;
        let m = match server::parse(&msg) {
            Ok(m) => m,
            Err((m, _)) => {
                self.stats.corrupt += 1;
                m
            }
        };
        self.reliable_ack =
            if m.reliable_ack < self.reliable_seq - MAX_RELIABLE as i32 || m.reliable_ack > self.reliable_seq { self.reliable_seq } else { m.reliable_ack };
        for op in m.ops {
            self.apply(now, seq, op);
        }
    }

    fn handle_oob(&mut self, now: u64, data: &[u8]) {
        match (oob::parse(data), &self.phase) {
            (Some(Reply::Challenge { challenge, .. }), Phase::Challenging) => {
                self.challenge = challenge;
                self.phase = Phase::Connecting;
                self.tries = 0;
                self.next_resend = now;
            }
            (Some(Reply::Connect), Phase::Connecting) => {
                self.chan = Some(Channel::new(self.challenge, self.cfg.qport, self.cfg.protocol.legacy()));
                self.phase = Phase::Connected;
                self.next_packet = now;
                self.last_heard = now;
            }
            (Some(Reply::Print(text)), Phase::Challenging | Phase::Connecting) => {
                self.phase = Phase::Gone(End::Refused(text));
            }
            _ => {}
        }
    }

    fn apply(&mut self, now: u64, seq: i32, op: Op) {
        match op {
            Op::Command { seq: s, text } => {
                if s <= self.server_cmd_seq {
                    return;
                }
                self.server_cmd_seq = s;
                self.stats.server_commands += 1;
                if let Some(reason) = text.strip_prefix("disconnect") {
                    // While leaving, this is the server's goodbye; otherwise it dropped us.
                    self.phase = match self.phase {
                        Phase::Leaving(_) => Phase::Gone(End::Quit),
                        _ => Phase::Gone(End::Kicked(reason.trim().trim_matches('"').to_string())),
                    };
                }
                self.server_cmds[(s as usize) & (MAX_RELIABLE - 1)] = text;
            }
            Op::Gamestate(g) => {
                self.server_cmd_seq = g.command_seq;
                self.server_id = info_value(&g.system_info, "sv_serverid").and_then(|v| v.parse().ok()).unwrap_or(0);
                self.checksum_feed = g.checksum_feed;
                self.client_num = g.client_num;
                self.snaps = [(-1, 0); BACKUP];
                self.last_snap = None;
                if self.phase == Phase::Connected {
                    self.phase = Phase::Primed;
                    self.next_frame = now;
                    self.next_packet = now;
                }
            }
            Op::Snapshot(s) => self.snapshot(now, seq, s),
        }
    }

    fn snapshot(&mut self, now: u64, seq: i32, s: server::Snapshot) {
        let command_time = if s.delta == 0 {
            s.command_time.unwrap_or(0)
        } else {
            let base = seq - s.delta as i32;
            match self.snaps[(base as usize) & (BACKUP - 1)] {
                (n, t) if n == base => s.command_time.unwrap_or(t),
                _ => {
                    self.stats.delta_misses += 1;
                    return;
                }
            }
        };
        self.snaps[(seq as usize) & (BACKUP - 1)] = (seq, command_time);
        self.snap_valid = true;
        self.stats.snapshots += 1;
        if let Some((_, at)) = self.last_snap {
            self.stats.snapshot_gaps_ns.push(now.saturating_sub(at));
        }
        self.last_snap = Some((s.server_time, now));
        if matches!(self.phase, Phase::Primed) {
            self.phase = Phase::Active;
            self.stats.active_after_ns = Some(now.saturating_sub(self.started));
        }
        while let Some(&(t, sent, packet)) = self.pending.front() {
            if t > command_time {
                break;
            }
            self.pending.pop_front();
            self.stats.response_ns.push(now.saturating_sub(sent));
            self.record(LogEvent::Answered { seq: packet, sent, at: now, size: self.rx_len });
        }
    }
}
