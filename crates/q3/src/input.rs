//! What an automated player does, frame by frame: a behaviour model of movement, aim, jumps and
//! fire ([`BotModel`], whose numbers live in the service repository's `quake3` service, table
//! `[bot]`), seeded so the same seed gives the same input; or a recorded action file
//! ([`Recorded`]).
//!
//! Four independent processes, each switching state after an exponentially distributed dwell:
//! - movement: forward, forward + strafe left / right, backward, standing, by weight;
//! - aim: a yaw rate uniform in ±`yaw_rate_deg_s`, pitch drifting within ±`pitch_limit_deg`;
//! - fire: bursts of mean `fire_on_s`, pauses of mean `fire_off_s` (the attack button);
//! - jump: every `jump_interval_s` on average, the jump input held `jump_hold_s`.

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
/// in degrees, moves in -128..=127 (the engine's `ClampChar`; forward/back, right/left, jump/crouch), the button bit mask
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
                if !(-128..=127).contains(&v) {
                    return Err(fail(format!("{name} {v} is outside -128..=127")));
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

    /// The frames as read (time in ms, the command; server time 0).
    pub fn timeline(&self) -> &[(u32, UserCmd)] {
        &self.frames
    }
}

/// An action file of `frames` (time in ms from the start, the command), as [`Recorded::parse`]
/// reads it: angles in degrees, written so they read back to the same 1/65536 turns; the
/// server time is not written (a replay gets its own). `about` lines become `#` comments.
pub fn write_actions(frames: &[(u32, UserCmd)], about: &[String]) -> String {
    let mut out = String::with_capacity(40 * frames.len() + 200);
    for a in about {
        out.push_str(&format!("# {}\n", a.replace('\n', " ")));
    }
    out.push_str("t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n");
    let deg = |a: u16| a as f64 * 360.0 / 65536.0;
    for (t, c) in frames {
        out.push_str(&format!(
            "{t},{},{},{},{},{},{},{},{}\n",
            deg(c.angles[0]),
            deg(c.angles[1]),
            deg(c.angles[2]),
            c.forward,
            c.right,
            c.up,
            c.buttons,
            c.weapon
        ));
    }
    out
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

/// The numbers of the behaviour model (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct BotModel {
    /// Weights of forward, forward + strafe left, forward + strafe right, backward, standing.
    pub move_weights: [f64; 5],
    pub move_dwell_s: f64,
    pub aim_dwell_s: f64,
    pub yaw_rate_deg_s: f64,
    pub pitch_rate_deg_s: f64,
    pub pitch_limit_deg: f64,
    pub fire_on_s: f64,
    pub fire_off_s: f64,
    pub jump_interval_s: f64,
    pub jump_hold_s: f64,
}

impl Default for BotModel {
    /// The `quake3` service's `[bot]` table as shipped.
    fn default() -> Self {
        BotModel {
            move_weights: [5.0, 2.0, 2.0, 1.0, 1.0],
            move_dwell_s: 1.5,
            aim_dwell_s: 1.0,
            yaw_rate_deg_s: 180.0,
            pitch_rate_deg_s: 20.0,
            pitch_limit_deg: 20.0,
            fire_on_s: 1.0,
            fire_off_s: 2.0,
            jump_interval_s: 2.5,
            jump_hold_s: 0.1,
        }
    }
}

impl BotModel {
    /// From a service's `[bot]` table: every key optional (default above), unknown keys and
    /// out-of-range values refused with the key's name.
    pub fn from_table(t: &std::collections::BTreeMap<String, f64>) -> Result<BotModel, String> {
        let mut m = BotModel::default();
        for (k, &v) in t {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("[bot] {k} = {v}: must be a finite number ≥ 0"));
            }
            let dwell = |v: f64| if (0.01..=3600.0).contains(&v) { Ok(v) } else { Err(format!("[bot] {k} = {v}: must be 0.01..=3600 seconds")) };
            match k.as_str() {
                "move_forward" => m.move_weights[0] = v,
                "move_strafe_left" => m.move_weights[1] = v,
                "move_strafe_right" => m.move_weights[2] = v,
                "move_back" => m.move_weights[3] = v,
                "move_stand" => m.move_weights[4] = v,
                "move_dwell_s" => m.move_dwell_s = dwell(v)?,
                "aim_dwell_s" => m.aim_dwell_s = dwell(v)?,
                "fire_on_s" => m.fire_on_s = dwell(v)?,
                "fire_off_s" => m.fire_off_s = dwell(v)?,
                "jump_interval_s" => m.jump_interval_s = dwell(v)?,
                "jump_hold_s" => m.jump_hold_s = dwell(v)?,
                "yaw_rate_deg_s" | "pitch_rate_deg_s" if v > 3600.0 => return Err(format!("[bot] {k} = {v}: at most 3600 °/s")),
                "yaw_rate_deg_s" => m.yaw_rate_deg_s = v,
                "pitch_rate_deg_s" => m.pitch_rate_deg_s = v,
                "pitch_limit_deg" if v > 89.0 => return Err(format!("[bot] {k} = {v}: at most 89 °")),
                "pitch_limit_deg" => m.pitch_limit_deg = v,
                _ => {
                    return Err(format!(
                        "[bot] {k}: unknown; known: move_forward, move_strafe_left, move_strafe_right, move_back, move_stand, move_dwell_s, aim_dwell_s, yaw_rate_deg_s, pitch_rate_deg_s, pitch_limit_deg, fire_on_s, fire_off_s, jump_interval_s, jump_hold_s"
                    ))
                }
            }
        }
        if m.move_weights.iter().sum::<f64>() <= 0.0 {
            return Err("[bot] the move_* weights add up to 0; give at least one a positive weight".into());
        }
        Ok(m)
    }
}

/// Movement states: forward move, right move.
const MOVES: [(i8, i8); 5] = [(127, 0), (127, -127), (127, 127), (-127, 0), (0, 0)];

pub struct Behaviour {
    model: BotModel,
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
    /// The default model (the shipped `quake3` service's).
    pub fn new(seed: u64) -> Behaviour {
        Behaviour::with_model(BotModel::default(), seed)
    }

    pub fn with_model(model: BotModel, seed: u64) -> Behaviour {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let yaw = rng.random_range(0.0..360.0);
        Behaviour {
            model,
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
        let m = self.model.clone();
        if t_s >= self.move_until {
            let total: f64 = m.move_weights.iter().sum();
            let mut pick = self.rng.random::<f64>() * total;
            for (k, &w) in m.move_weights.iter().enumerate() {
                if pick < w || k == MOVES.len() - 1 {
                    self.mv = MOVES[k];
                    break;
                }
                pick -= w;
            }
            self.move_until = t_s + self.exp(m.move_dwell_s);
        }
        if t_s >= self.aim_until {
            let (y, p) = (m.yaw_rate_deg_s, m.pitch_rate_deg_s);
            self.yaw_rate = if y > 0.0 { self.rng.random_range(-y..y) } else { 0.0 };
            self.pitch_rate = if p > 0.0 { self.rng.random_range(-p..p) } else { 0.0 };
            self.aim_until = t_s + self.exp(m.aim_dwell_s);
        }
        if t_s >= self.fire_until {
            self.firing = !self.firing;
            self.fire_until = t_s + self.exp(if self.firing { m.fire_on_s } else { m.fire_off_s });
        }
        if self.jump_at == 0.0 {
            self.jump_at = t_s + self.exp(m.jump_interval_s);
        }
        let jumping = t_s >= self.jump_at;
        if t_s >= self.jump_at + m.jump_hold_s {
            self.jump_at = t_s + self.exp(m.jump_interval_s);
        }
        self.yaw = (self.yaw + self.yaw_rate * dt).rem_euclid(360.0);
        self.pitch = (self.pitch + self.pitch_rate * dt).clamp(-m.pitch_limit_deg, m.pitch_limit_deg);
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
    fn the_bot_model_comes_from_a_table_and_refuses_nonsense() {
        let mut t = std::collections::BTreeMap::new();
        assert_eq!(BotModel::from_table(&t).unwrap(), BotModel::default());
        t.insert("fire_on_s".to_string(), 0.5);
        t.insert("move_stand".to_string(), 0.0);
        let m = BotModel::from_table(&t).unwrap();
        assert_eq!((m.fire_on_s, m.move_weights[4]), (0.5, 0.0));
        for (k, v, what) in [("speed", 1.0, "unknown"), ("fire_on_s", 0.0, "0.01..=3600"), ("yaw_rate_deg_s", -1.0, "≥ 0"), ("pitch_limit_deg", 120.0, "89")]
        {
            let mut t = std::collections::BTreeMap::new();
            t.insert(k.to_string(), v);
            let e = BotModel::from_table(&t).unwrap_err();
            assert!(e.contains(k) && e.contains(what), "{e}");
        }
        let zero: std::collections::BTreeMap<String, f64> =
            ["move_forward", "move_strafe_left", "move_strafe_right", "move_back", "move_stand"].iter().map(|k| (k.to_string(), 0.0)).collect();
        assert!(BotModel::from_table(&zero).unwrap_err().contains("add up to 0"));
        // A model that never fires and never strafes does neither.
        let calm = BotModel { fire_on_s: 0.01, fire_off_s: 3600.0, move_weights: [1.0, 0.0, 0.0, 0.0, 0.0], ..Default::default() };
        let mut b = Behaviour::with_model(calm, 3);
        let mut c = UserCmd::default();
        let mut fired = 0;
        for k in 0..3600 {
            b.frame(k as f64 / 60.0, &mut c);
            assert_eq!(c.right, 0);
            fired += (c.buttons & BUTTON_ATTACK != 0) as u32;
        }
        assert!(fired <= 3, "{fired}");
    }

    #[test]
    fn a_written_action_file_reads_back_to_the_same_commands() {
        // Every angle of the wire's 1/65536 turns survives the degrees in between.
        let frames: Vec<(u32, UserCmd)> = (0..65536u32)
            .map(|a| {
                let c = UserCmd {
                    angles: [a as u16, (65535 - a) as u16, (a * 7) as u16],
                    forward: (a % 255) as i8,
                    right: -((a % 127) as i8),
                    up: 127,
                    buttons: (a % 65536) as u16,
                    weapon: (a % 256) as u8,
                    server_time: 0,
                };
                (a / 3, c)
            })
            .collect();
        let text = write_actions(&frames, &["from a test\nwith a second line".into()]);
        assert!(text.starts_with("# from a test with a second line\n"));
        let back = Recorded::parse(&text).unwrap();
        assert_eq!(back.timeline(), &frames[..]);
    }

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
            ("t_ms,pitch,yaw,roll,forward,right,up,buttons,weapon\n0,0,0,0,200,0,0,0,0\n", "outside -128"),
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
