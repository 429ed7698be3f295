//! A client's input read off the wire: a passive observer of one client's packets both ways
//! (as a capture holds them) that keeps what the server executes, the usercmds, frame by frame.
//!
//! Both directions are needed, exactly as each end needs the other: the server's challenge
//! (connectionless reply) and gamestate (its checksum feed) and its reliable commands key the
//! client's usercmd deltas (`checksumFeed ^ messageAcknowledge ^ MSG_HashKey(server command)`),
//! and in the legacy protocol each side's messages are scrambled with the other side's
//! reliable commands. A command is kept when its server time is newer than the last one kept,
//! as the server takes them (earlier and repeated ones are the packets' redundancy).

use crate::msg::Reader;
use crate::netchan::{self, Channel, MAX_RELIABLE};
use crate::oob::{self, Reply};
use crate::server::{self, Op};
use crate::usercmd::{self, UserCmd};
use crate::Protocol;

const CLC_NOP: u8 = 1;
const CLC_MOVE: u8 = 2;
const CLC_MOVE_NO_DELTA: u8 = 3;
const CLC_CLIENT_COMMAND: u8 = 4;
const CLC_EOF: u8 = 5;
const FRAGMENT_BIT: u32 = 1 << 31;

/// What the observer saw and why it left packets out.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WatchStats {
    /// Netchan packets from the client, and those whose usercmds were read.
    pub client_packets: u64,
    pub decoded: u64,
    /// Client packets before the connection was seen (no challenge or gamestate yet: the
    /// capture started late), fragmented ones, and ones that did not parse to their end.
    pub before_gamestate: u64,
    pub fragmented: u64,
    pub undecodable: u64,
    /// Usercmds read, and those kept (newer than the last kept).
    pub commands_read: u64,
    pub commands_kept: u64,
    /// Connections seen (a reconnect starts a new one; frames continue).
    pub connections: u64,
}

/// One client's connection as an observer follows it.
pub struct Watch {
    protocol: Protocol,
    challenge: i32,
    chan: Option<Channel>,
    checksum_feed: Option<i32>,
    server_cmd_seq: i32,
    server_cmds: Vec<String>,
    client_cmd_seq: i32,
    client_cmds: Vec<String>,
    /// The server time of the last command kept (the server starts from 0, as here).
    last_time: i32,
    limit: usize,
    /// The commands kept, in order.
    pub frames: Vec<UserCmd>,
    pub stats: WatchStats,
}

impl Watch {
    /// An observer keeping at most `limit` commands.
    pub fn new(protocol: Protocol, limit: usize) -> Watch {
        Watch {
            protocol,
            challenge: 0,
            chan: None,
            checksum_feed: None,
            server_cmd_seq: 0,
            server_cmds: vec![String::new(); MAX_RELIABLE],
            client_cmd_seq: 0,
            client_cmds: vec![String::new(); MAX_RELIABLE],
            last_time: 0,
            limit,
            frames: Vec::new(),
            stats: WatchStats::default(),
        }
    }

    fn legacy(&self) -> bool {
        self.protocol.legacy()
    }

    /// A datagram from the server to the client.
    pub fn from_server(&mut self, data: &[u8]) {
        if data.starts_with(&oob::PREFIX) {
            match oob::parse(data) {
                Some(Reply::Challenge { challenge, .. }) => self.challenge = challenge,
                Some(Reply::Connect) => {
                    self.chan = Some(Channel::new(self.challenge, 0, self.legacy()));
                    self.checksum_feed = None;
                    self.server_cmds.iter_mut().for_each(String::clear);
                    self.client_cmds.iter_mut().for_each(String::clear);
                    (self.server_cmd_seq, self.client_cmd_seq, self.last_time) = (0, 0, 0);
                    self.stats.connections += 1;
                }
                _ => {}
            }
            return;
        }
        let legacy = self.legacy();
        let Some(chan) = &mut self.chan else { return };
        let Ok((seq, mut msg)) = chan.process(data) else { return };
        if legacy {
            let cmds = &self.client_cmds;
            netchan::unscramble_server(&mut msg, self.challenge, seq, |ack| cmds[(ack as usize) & (MAX_RELIABLE - 1)].clone());
        }
        let m = match server::parse(&msg) {
            Ok(m) => m,
            Err((m, _)) => m,
        };
        for op in m.ops {
            match op {
                Op::Command { seq, text } if seq > self.server_cmd_seq => {
                    self.server_cmd_seq = seq;
                    self.server_cmds[(seq as usize) & (MAX_RELIABLE - 1)] = text;
                }
                Op::Gamestate(g) => {
                    self.server_cmd_seq = g.command_seq;
                    self.checksum_feed = Some(g.checksum_feed);
                }
                _ => {}
            }
        }
    }

    /// A datagram from the client to the server.
    pub fn from_client(&mut self, data: &[u8]) {
        if data.is_empty() || data.starts_with(&oob::PREFIX) {
            return;
        }
        self.stats.client_packets += 1;
        let (Some(_), Some(feed)) = (&self.chan, self.checksum_feed) else {
            self.stats.before_gamestate += 1;
            return;
        };
        let Some(head) = data.get(..4) else {
            self.stats.undecodable += 1;
            return;
        };
        if u32::from_le_bytes(head.try_into().expect("4 bytes")) & FRAGMENT_BIT != 0 {
            self.stats.fragmented += 1;
            return;
        }
        let at = if self.legacy() { 6 } else { 10 };
        let Some(body) = data.get(at..) else {
            self.stats.undecodable += 1;
            return;
        };
        let mut msg = body.to_vec();
        match self.client_message(&mut msg, feed) {
            Ok(()) => self.stats.decoded += 1,
            Err(()) => self.stats.undecodable += 1,
        }
    }

    fn client_message(&mut self, msg: &mut [u8], feed: i32) -> Result<(), ()> {
        let mut r = Reader::new(msg, 0);
        let (server_id, msg_ack, cmd_ack) = (r.long().map_err(drop)?, r.long().map_err(drop)?, r.long().map_err(drop)?);
        let last = self.server_cmds[(cmd_ack as usize) & (MAX_RELIABLE - 1)].clone();
        if self.legacy() {
            netchan::scramble_client(msg, self.challenge, server_id, msg_ack, &last);
        }
        let mut r = Reader::new(msg, 0);
        for _ in 0..3 {
            r.long().map_err(drop)?;
        }
        loop {
            match r.byte().map_err(drop)? {
                CLC_EOF => return Ok(()),
                CLC_NOP => {}
                CLC_CLIENT_COMMAND => {
                    let seq = r.long().map_err(drop)?;
                    let text = r.string().map_err(drop)?;
                    if seq > self.client_cmd_seq {
                        self.client_cmd_seq = seq;
                        self.client_cmds[(seq as usize) & (MAX_RELIABLE - 1)] = text;
                    }
                }
                CLC_MOVE | CLC_MOVE_NO_DELTA => {
                    let count = r.byte().map_err(drop)?;
                    if !(1..=32).contains(&count) {
                        return Err(());
                    }
                    let key = feed ^ msg_ack ^ usercmd::hash_key(&last, 32);
                    let mut from = UserCmd::default();
                    for _ in 0..count {
                        let c = usercmd::read_delta(&mut r, key, &from).map_err(drop)?;
                        self.stats.commands_read += 1;
                        if c.server_time > self.last_time && self.frames.len() < self.limit {
                            self.last_time = c.server_time;
                            self.frames.push(c);
                            self.stats.commands_kept += 1;
                        }
                        from = c;
                    }
                }
                _ => return Err(()),
            }
        }
    }

    /// The kept commands as an action file's frames: milliseconds from the first command,
    /// by server time (never back, across a reconnect).
    pub fn timed(&self) -> Vec<(u32, UserCmd)> {
        let mut t = 0u32;
        let mut prev = self.frames.first().map_or(0, |c| c.server_time);
        self.frames
            .iter()
            .map(|c| {
                t = t.saturating_add(c.server_time.saturating_sub(prev).max(0) as u32);
                prev = c.server_time;
                (t, *c)
            })
            .collect()
    }
}
