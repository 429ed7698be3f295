//! What an automated player does, frame by frame: a behaviour model of movement, aim, jumps and
//! fire, seeded so the same seed gives the same input.
//!
//! Four independent processes, each switching state after an exponentially distributed dwell
//! (means below, chosen so a player visibly roams, turns, jumps and shoots like a human in a
//! deathmatch, and the server runs movement, collision and weapon code every frame):
//! - movement: forward (weight 5), forward + strafe left / right (2 each), backward (1), stand
//!   still (1); dwell mean 1.5 s;
//! - aim: yaw rate uniform in ±180 °/s, pitch drifting within ±20 °; dwell mean 1 s;
//! - fire: on for mean 1 s, off for mean 2 s (the attack button);
//! - jump: at 0.4 per second on average, the jump input held for 100 ms.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::usercmd::{UserCmd, BUTTON_ATTACK};

/// Where a bot's input comes from, frame by frame.
pub trait Input: Send {
    /// Fills `cmd`'s input for the frame at `t_s` seconds after the bot's start (the server
    /// time is set by the caller).
    fn frame(&mut self, t_s: f64, cmd: &mut UserCmd);
}

impl Input for Behaviour {
    fn frame(&mut self, t_s: f64, cmd: &mut UserCmd) {
        Behaviour::frame(self, t_s, cmd)
    }
}

/// Largest action file: 100,000 frames (over 20 minutes at 60 frames per second).
pub const MAX_ACTIONS: usize = 100_000;

/// A recorded action file's line that is not right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct ActionError {
    pub line: usize,
    pub msg: String,
}

/// A recorded action file, replayed from the start and looped: at time t a bot plays the last
/// frame recorded at or before t (modulo the file's length).
///
/// Format (CSV, `#` comments): a header `t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon`,
/// then one line per recorded frame: milliseconds from the start (non-decreasing), view angles
/// in degrees, moves in -127..=127 (forward/back, right/left, jump/crouch), the button bit mask
/// (1 attack, 2 talk, 4 use item, 16 walk, ...) and the weapon number.
#[derive(Clone, Debug)]
pub struct Recorded {
    frames: Arc<Vec<(u32, UserCmd)>>,
    next: usize,
    lap_ms: f64,
}

impl Recorded {
    /// Parses an action file.
    pub fn parse(text: &str) -> Result<Recorded, ActionError> {
        let mut frames: Vec<(u32, UserCmd)> = Vec::new();
        let mut header = false;
        for (k, raw) in text.lines().enumerate() {
            let line = k + 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let fail = |msg: String| ActionError { line, msg };
            if !header {
                if l.replace(' ', "") != "t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon" {
                    return Err(fail("the first line must be the header t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon".into()));
                }
                header = true;
                continue;
            }
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            if f.len() != 9 {
                return Err(fail(format!("{} fields; a frame has 9 (t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon)", f.len())));
            }
            let t: u32 = f[0].parse().map_err(|_| fail(format!("t_ms `{}` is not a whole number of milliseconds", f[0])))?;
            if frames.last().is_some_and(|p| p.0 > t) {
                return Err(fail(format!("t_ms {t} goes back in time")));
            }
            let mut cmd = UserCmd::default();
            for (i, name) in ["pitch", "yaw", "roll"].iter().enumerate() {
                let deg: f64 = f[1 + i].parse().map_err(|_| fail(format!("{name} `{}` is not a number of degrees", f[1 + i])))?;
                if !deg.is_finite() || deg.abs() > 1e6 {
                    return Err(fail(format!("{name} {deg} is not a usable angle")));
                }
                cmd.angles[i] = ((deg * 65536.0 / 360.0).round() as i64 & 0xFFFF) as u16;
            }
            let mv = |i: usize, name: &str| -> Result<i8, ActionError> {
                let v: i32 = f[i].parse().map_err(|_| fail(format!("{name} `{}` is not a whole number", f[i])))?;
                if !(-127..=127).contains(&v) {
                    return Err(fail(format!("{name} {v} is outside -127..=127")));
                }
                Ok(v as i8)
            };
            cmd.forward = mv(4, "forward")?;
            cmd.right = mv(5, "right")?;
            cmd.up = mv(6, "up")?;
            cmd.buttons = f[7].parse().map_err(|_| fail(format!("buttons `{}` is not a bit mask 0..=65535", f[7])))?;
            cmd.weapon = f[8].parse().map_err(|_| fail(format!("weapon `{}` is not 0..=255", f[8])))?;
            if frames.len() == MAX_ACTIONS {
                return Err(fail(format!("more than {MAX_ACTIONS} frames")));
            }
            frames.push((t, cmd));
        }
        if frames.is_empty() {
            return Err(ActionError { line: text.lines().count(), msg: "no frames after the header".into() });
        }
        // One frame's length past the last, so a file of one frame still loops.
        let last = frames.last().map_or(0, |f| f.0) as f64;
        let step = if frames.len() > 1 { (last - frames[0].0 as f64) / (frames.len() - 1) as f64 } else { 16.0 };
        Ok(Recorded { lap_ms: last + step.max(1.0), frames: Arc::new(frames), next: 0 })
    }

    pub fn frames(&self) -> usize {
        self.frames.len()
    }
}

impl Input for Recorded {
    fn frame(&mut self, t_s: f64, cmd: &mut UserCmd) {
        let t = (t_s * 1000.0) % self.lap_ms;
        if self.next > 0 && (self.frames[self.next - 1].0 as f64) > t {
            self.next = 0; // a new lap
        }
        while self.next < self.frames.len() && self.frames[self.next].0 as f64 <= t {
            self.next += 1;
        }
        let f = &self.frames[self.next.saturating_sub(1)].1;
        let server_time = cmd.server_time;
        *cmd = UserCmd { server_time, ..*f };
    }
}

const MOVES: [(i8, i8, u32); 5] = [(127, 0, 5), (127, -127, 2), (127, 127, 2), (-127, 0, 1), (0, 0, 1)];

pub struct Behaviour {
    rng: ChaCha8Rng,
    move_until: f64,
    mv: (i8, i8),
    aim_until: f64,
    yaw_rate: f64,
    pitch_rate: f64,
    yaw: f64,
    pitch: f64,
    fire_until: f64,
    firing: bool,
    jump_at: f64,
    last_s: Option<f64>,
}

impl Behaviour {
    pub fn new(seed: u64) -> Behaviour {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let yaw = rng.random_range(0.0..360.0);
        Behaviour {
            rng,
            move_until: 0.0,
            mv: (0, 0),
            aim_until: 0.0,
            yaw_rate: 0.0,
            pitch_rate: 0.0,
            yaw,
            pitch: 0.0,
            fire_until: 0.0,
            firing: false,
            jump_at: 0.0,
            last_s: None,
        }
    }

    fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.rng.random::<f64>()).ln()
    }

    /// Fills `cmd`'s input for the frame at `t_s` seconds (the server time is set by the caller).
    pub fn frame(&mut self, t_s: f64, cmd: &mut UserCmd) {
        let dt = self.last_s.map_or(0.0, |l| (t_s - l).max(0.0));
        self.last_s = Some(t_s);
        if t_s >= self.move_until {
            let total: u32 = MOVES.iter().map(|m| m.2).sum();
            let mut pick = self.rng.random_range(0..total);
            for &(f, r, w) in &MOVES {
                if pick < w {
                    self.mv = (f, r);
                    break;
                }
                pick -= w;
            }
            self.move_until = t_s + self.exp(1.5);
        }
        if t_s >= self.aim_until {
            self.yaw_rate = self.rng.random_range(-180.0..180.0);
            self.pitch_rate = self.rng.random_range(-20.0..20.0);
            self.aim_until = t_s + self.exp(1.0);
        }
        if t_s >= self.fire_until {
            self.firing = !self.firing;
            self.fire_until = t_s + self.exp(if self.firing { 1.0 } else { 2.0 });
        }
        if self.jump_at == 0.0 {
            self.jump_at = t_s + self.exp(2.5);
        }
        let jumping = t_s >= self.jump_at;
        if t_s >= self.jump_at + 0.1 {
            self.jump_at = t_s + self.exp(2.5);
        }
        self.yaw = (self.yaw + self.yaw_rate * dt).rem_euclid(360.0);
        self.pitch = (self.pitch + self.pitch_rate * dt).clamp(-20.0, 20.0);
        let short = |deg: f64| ((deg * 65536.0 / 360.0) as i64 & 0xFFFF) as u16;
        cmd.angles = [short(self.pitch), short(self.yaw), 0];
        cmd.forward = self.mv.0;
        cmd.right = self.mv.1;
        cmd.up = if jumping { 127 } else { 0 };
        cmd.buttons = if self.firing { BUTTON_ATTACK } else { 0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_file_replays_in_order_and_loops() {
        let text = "# two frames\nt_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n0,0,90,0,127,0,0,0,2\n100,10,180,0,0,-127,127,1,5\n";
        let mut r = Recorded::parse(text).unwrap();
        let mut c = UserCmd { server_time: 77, ..Default::default() };
        r.frame(0.05, &mut c);
        assert_eq!((c.server_time, c.angles[1], c.forward, c.weapon), (77, 16384, 127, 2));
        r.frame(0.15, &mut c);
        assert_eq!((c.angles[1], c.right, c.up, c.buttons, c.weapon), (32768, -127, 127, 1, 5));
        r.frame(0.21, &mut c);
        assert_eq!(c.forward, 127, "looped: lap of 200 ms");
        for (bad, what) in [
            ("0,0,0,0,0,0,0,0,0\n", "header"),
            ("t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n", "no frames"),
            ("t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n0,0,0,0,200,0,0,0,0\n", "outside -127"),
            ("t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n5,0,0,0,0,0,0,0,0\n1,0,0,0,0,0,0,0,0\n", "back in time"),
            ("t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n0,nan,0,0,0,0,0,0,0\n", "angle"),
            ("t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n0,0,0\n", "9"),
        ] {
            let e = Recorded::parse(bad).err().unwrap_or_else(|| panic!("{bad:?} must be refused"));
            assert!(e.to_string().contains(what), "{e}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_input_and_everything_happens() {
        let run = |seed| {
            let mut b = Behaviour::new(seed);
            (0..60 * 60)
                .map(|k| {
                    let mut c = UserCmd::default();
                    b.frame(k as f64 / 60.0, &mut c);
                    c
                })
                .collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        let share = |f: &dyn Fn(&UserCmd) -> bool| a.iter().filter(|c| f(c)).count() as f64 / a.len() as f64;
        assert!(share(&|c| c.forward > 0) > 0.5, "mostly running forward");
        assert!((0.15..0.6).contains(&share(&|c| c.buttons & BUTTON_ATTACK != 0)), "fires about a third of the time");
        assert!(share(&|c| c.up > 0) > 0.01, "jumps");
        let yaws: std::collections::HashSet<u16> = a.iter().map(|c| c.angles[1]).collect();
        assert!(yaws.len() > 1000, "turns");
    }
}
