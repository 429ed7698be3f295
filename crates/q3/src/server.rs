//! Server messages (`svc_*`), parsed from an unscrambled netchan message. Only what a load
//! generator needs is kept (reliable commands, the gamestate's system info, client number and
//! checksum feed, each snapshot's time, delta base and the player's `commandTime`); everything
//! else is read to its end so the next operation is found, with the engine's field widths.

use crate::msg::{Overrun, Reader};

pub const SVC_NOP: u8 = 1;
pub const SVC_GAMESTATE: u8 = 2;
pub const SVC_CONFIGSTRING: u8 = 3;
pub const SVC_BASELINE: u8 = 4;
pub const SVC_SERVER_COMMAND: u8 = 5;
pub const SVC_DOWNLOAD: u8 = 6;
pub const SVC_SNAPSHOT: u8 = 7;
pub const SVC_EOF: u8 = 8;

/// Entity numbers are 10 bits; 1023 ends an entity list.
const GENTITYNUM_BITS: u32 = 10;
const MAX_GENTITIES: u32 = 1 << GENTITYNUM_BITS;
const MAX_CONFIGSTRINGS: i16 = 1024;
const FLOAT_INT_BITS: u32 = 13;

/// `entityState_t` fields in wire order: bit width, 0 for a float (the engine's table).
const ENTITY_FIELDS: [u8; 51] = [
    32, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 8, 8, 8, 8, 10, 8, 19, 10, 8, 8, 0, 32, 8, 0, 0, 0, 24, 16, 8, 10, 8, 8, 0, 0, 0, 8, 0, 32, 32, 32, 0, 0, 0, 0, 32, 0,
    0, 0, 32, 16,
];
/// `playerState_t` fields in wire order: |bit width| (sign does not change the width), 0 for
/// a float. Field 0 is `commandTime`.
const PLAYER_FIELDS: [u8; 48] = [
    32, 0, 0, 8, 0, 0, 0, 0, 16, 0, 0, 8, 16, 16, 8, 4, 8, 8, 8, 16, 10, 4, 16, 10, 16, 16, 16, 8, 8, 8, 8, 8, 8, 8, 8, 16, 16, 12, 8, 8, 8, 5, 0, 0, 0, 0, 10,
    16,
];

/// Why a server message could not be read to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("message ends inside a field")]
    Overrun,
    #[error("unknown server operation {0}")]
    BadOp(u8),
    #[error("{0} out of range")]
    Range(&'static str),
    #[error("the server sent a download nobody asked for")]
    Download,
}

impl From<Overrun> for ParseError {
    fn from(_: Overrun) -> Self {
        ParseError::Overrun
    }
}

/// What a gamestate tells a client.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gamestate {
    /// The server command sequence it starts from.
    pub command_seq: i32,
    /// Config string 0 (server info) and 1 (system info: `sv_serverid`, paks).
    pub server_info: String,
    pub system_info: String,
    pub configstrings: usize,
    pub baselines: usize,
    pub client_num: i32,
    pub checksum_feed: i32,
}

/// A snapshot: its time, delta base and the player's `commandTime` if it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub server_time: i32,
    /// How many messages back its delta base is (0: none, a full snapshot).
    pub delta: u8,
    pub flags: u8,
    /// `None`: unchanged from the delta base's.
    pub command_time: Option<i32>,
    pub entities: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Command { seq: i32, text: String },
    Gamestate(Gamestate),
    Snapshot(Snapshot),
}

/// One server message: the reliable acknowledge it starts with and its operations.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub reliable_ack: i32,
    pub ops: Vec<Op>,
}

/// Parses an unscrambled server message. Operations before an error are kept in the error's
/// company (`Err((message so far, error))`) so a damaged tail does not lose a reliable command.
pub fn parse(message: &[u8]) -> Result<Message, (Message, ParseError)> {
    let mut r = Reader::new(message, 0);
    let mut m = Message { reliable_ack: 0, ops: Vec::new() };
    match r.long() {
        Ok(a) => m.reliable_ack = a,
        Err(e) => return Err((m, e.into())),
    }
    loop {
        match parse_op(&mut r) {
            Ok(Some(op)) => m.ops.push(op),
            Ok(None) => return Ok(m),
            Err(e) => return Err((m, e)),
        }
    }
}

fn parse_op(r: &mut Reader) -> Result<Option<Op>, ParseError> {
    let op = r.byte()?;
    Ok(Some(match op {
        SVC_EOF => return Ok(None),
        SVC_NOP => return parse_op(r),
        SVC_SERVER_COMMAND => {
            let seq = r.long()?;
            Op::Command { seq, text: r.string()? }
        }
        SVC_GAMESTATE => Op::Gamestate(gamestate(r)?),
        SVC_SNAPSHOT => Op::Snapshot(snapshot(r)?),
        SVC_DOWNLOAD => return Err(ParseError::Download),
        other => return Err(ParseError::BadOp(other)),
    }))
}

fn gamestate(r: &mut Reader) -> Result<Gamestate, ParseError> {
    let mut g = Gamestate { command_seq: r.long()?, ..Default::default() };
    loop {
        match r.byte()? {
            SVC_EOF => break,
            SVC_CONFIGSTRING => {
                let i = r.short()?;
                if !(0..MAX_CONFIGSTRINGS).contains(&i) {
                    return Err(ParseError::Range("config string index"));
                }
                let s = r.big_string()?;
                match i {
                    0 => g.server_info = s,
                    1 => g.system_info = s,
                    _ => {}
                }
                g.configstrings += 1;
            }
            SVC_BASELINE => {
                let n = r.bits(GENTITYNUM_BITS)?;
                skip_entity(r, n)?;
                g.baselines += 1;
            }
            other => return Err(ParseError::BadOp(other)),
        }
    }
    g.client_num = r.long()?;
    g.checksum_feed = r.long()?;
    Ok(g)
}

fn snapshot(r: &mut Reader) -> Result<Snapshot, ParseError> {
    let server_time = r.long()?;
    let delta = r.byte()?;
    let flags = r.byte()?;
    let area_bytes = r.byte()?;
    if area_bytes > 32 {
        return Err(ParseError::Range("area mask length"));
    }
    r.skip_bytes(area_bytes as usize)?;
    let command_time = player_state(r)?;
    let mut entities = 0;
    loop {
        let n = r.bits(GENTITYNUM_BITS)?;
        if n == MAX_GENTITIES - 1 {
            break;
        }
        skip_entity(r, n)?;
        entities += 1;
    }
    Ok(Snapshot { server_time, delta, flags, command_time, entities })
}

/// Reads a player state delta; returns `commandTime` if it changed.
fn player_state(r: &mut Reader) -> Result<Option<i32>, ParseError> {
    let lc = r.byte()? as usize;
    if lc > PLAYER_FIELDS.len() {
        return Err(ParseError::Range("player state field count"));
    }
    let mut command_time = None;
    for (i, &bits) in PLAYER_FIELDS[..lc].iter().enumerate() {
        if r.bits(1)? == 0 {
            continue;
        }
        if bits == 0 {
            // Integral floats in 13 bits, others in 32.
            let full = r.bits(1)?;
            r.bits(if full == 0 { FLOAT_INT_BITS } else { 32 })?;
        } else {
            let v = r.bits(bits as u32)?;
            if i == 0 {
                command_time = Some(v as i32);
            }
        }
    }
    if r.bits(1)? == 1 {
        // stats, persistant, ammo (16 shorts each at most), powerups (16 longs)
        for (count_bits, value_bits) in [(16, 16), (16, 16), (16, 16), (16, 32)] {
            if r.bits(1)? == 1 {
                let mask = r.bits(count_bits)?;
                for _ in 0..mask.count_ones() {
                    r.bits(value_bits)?;
                }
            }
        }
    }
    Ok(command_time)
}

/// Reads an entity delta (number already read).
fn skip_entity(r: &mut Reader, number: u32) -> Result<(), ParseError> {
    if number >= MAX_GENTITIES {
        return Err(ParseError::Range("entity number"));
    }
    if r.bits(1)? == 1 {
        return Ok(()); // removed
    }
    if r.bits(1)? == 0 {
        return Ok(()); // no change
    }
    let lc = r.byte()? as usize;
    if lc > ENTITY_FIELDS.len() {
        return Err(ParseError::Range("entity field count"));
    }
    for &bits in &ENTITY_FIELDS[..lc] {
        if r.bits(1)? == 0 {
            continue;
        }
        if bits == 0 {
            if r.bits(1)? == 1 {
                let full = r.bits(1)?;
                r.bits(if full == 0 { FLOAT_INT_BITS } else { 32 })?;
            }
        } else if r.bits(1)? == 1 {
            r.bits(bits as u32)?;
        }
    }
    Ok(())
}

/// The value of `key` in an info string (`\key\value\key\value`).
pub fn info_value<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    let mut it = info.strip_prefix('\\').unwrap_or(info).split('\\');
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        if k.eq_ignore_ascii_case(key) {
            return Some(v);
        }
    }
    None
}
