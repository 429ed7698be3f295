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

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::usercmd::{UserCmd, BUTTON_ATTACK};

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
