//! A player's input for one frame (`usercmd_t`) and its delta encoding in `clc_move`.

use crate::msg::{Overrun, Reader, Writer};

/// Button bits (`BUTTON_ATTACK` etc.).
pub const BUTTON_ATTACK: u16 = 1;
pub const BUTTON_USE_HOLDABLE: u16 = 4;
pub const BUTTON_WALKING: u16 = 16;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserCmd {
    /// The server time (ms) the command is for.
    pub server_time: i32,
    /// Pitch, yaw, roll in 1/65536 turns (`ANGLE2SHORT`).
    pub angles: [u16; 3],
    pub buttons: u16,
    pub weapon: u8,
    pub forward: i8,
    pub right: i8,
    pub up: i8,
}

/// `MSG_HashKey`: the hash of a server command that keys usercmd deltas.
pub fn hash_key(s: &str, max: usize) -> i32 {
    let mut hash: i32 = 0;
    for (i, &c) in s.as_bytes().iter().take(max).enumerate() {
        if c == 0 {
            break;
        }
        let c = if c & 0x80 != 0 || c == b'%' { b'.' } else { c };
        hash = hash.wrapping_add((c as i8 as i32).wrapping_mul(119 + i as i32));
    }
    hash ^ (hash >> 10) ^ (hash >> 20)
}

fn delta_key(w: &mut Writer, key: i32, old: u32, new: u32, bits: u32) {
    if old == new {
        w.bits(0, 1);
    } else {
        w.bits(1, 1);
        w.bits(new ^ key as u32, bits);
    }
}

/// `MSG_WriteDeltaUsercmdKey`: `to` against `from`, changed fields XORed with `key ^ to.server_time`.
pub fn write_delta(w: &mut Writer, key: i32, from: &UserCmd, to: &UserCmd) {
    let dt = to.server_time.wrapping_sub(from.server_time);
    if (0..256).contains(&dt) {
        w.bits(1, 1);
        w.bits(dt as u32, 8);
    } else {
        w.bits(0, 1);
        w.bits(to.server_time as u32, 32);
    }
    let same = UserCmd { server_time: to.server_time, ..*from } == *to;
    if same {
        w.bits(0, 1);
        return;
    }
    let key = key ^ to.server_time;
    w.bits(1, 1);
    for k in 0..3 {
        delta_key(w, key, from.angles[k] as u32, to.angles[k] as u32, 16);
    }
    delta_key(w, key, from.forward as u8 as u32, to.forward as u8 as u32, 8);
    delta_key(w, key, from.right as u8 as u32, to.right as u8 as u32, 8);
    delta_key(w, key, from.up as u8 as u32, to.up as u8 as u32, 8);
    delta_key(w, key, from.buttons as u32, to.buttons as u32, 16);
    delta_key(w, key, from.weapon as u32, to.weapon as u32, 8);
}

fn read_key(r: &mut Reader, key: i32, old: u32, bits: u32) -> Result<u32, Overrun> {
    if r.bits(1)? == 0 {
        return Ok(old);
    }
    let mask = if bits == 32 { u32::MAX } else { (1 << bits) - 1 };
    Ok((r.bits(bits)? ^ key as u32) & mask)
}

/// `MSG_ReadDeltaUsercmdKey`: the command after `from`, as [`write_delta`] wrote it.
pub fn read_delta(r: &mut Reader, key: i32, from: &UserCmd) -> Result<UserCmd, Overrun> {
    let server_time = if r.bits(1)? == 1 { from.server_time.wrapping_add(r.bits(8)? as i32) } else { r.bits(32)? as i32 };
    let mut to = UserCmd { server_time, ..*from };
    if r.bits(1)? == 0 {
        return Ok(to);
    }
    let key = key ^ server_time;
    for k in 0..3 {
        to.angles[k] = read_key(r, key, from.angles[k] as u32, 16)? as u16;
    }
    to.forward = read_key(r, key, from.forward as u8 as u32, 8)? as u8 as i8;
    to.right = read_key(r, key, from.right as u8 as u32, 8)? as u8 as i8;
    to.up = read_key(r, key, from.up as u8 as u32, 8)? as u8 as i8;
    to.buttons = read_key(r, key, from.buttons as u32, 16)? as u16;
    to.weapon = read_key(r, key, from.weapon as u32, 8)? as u8;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_key_matches_the_engine_on_known_strings() {
        // Computed by hand from MSG_HashKey's definition: sum of c * (119 + i), then folded.
        let h: i32 = (b'a' as i32) * 119;
        assert_eq!(hash_key("a", 32), h ^ (h >> 10) ^ (h >> 20));
        assert_eq!(hash_key("", 32), 0);
        assert_eq!(hash_key("a%", 32), hash_key("a.", 32), "% counts as .");
        assert_eq!(hash_key(&"x".repeat(40), 32), hash_key(&"x".repeat(32), 32), "only 32 characters count");
    }
}
