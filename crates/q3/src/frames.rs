//! The server from inside, without changing it (the Quake server study's Figs. 4-11): its
//! frames found from the snapshot bursts on the wire, the server process's CPU time in each
//! (from its scheduler statistics sampled often), and the client requests each frame took in.
//!
//! A Quake 3 server runs a frame every `1000 / sv_fps` ms: it reads every client packet that
//! arrived since the last (the requests), runs the game, and sends each client its snapshot.
//! So the snapshots of one frame reach the bots together (a burst), bursts a frame apart; the
//! CPU the server used between two bursts is the frame's, and the requests sent between them
//! are the ones it took in. When the server cannot keep up, frames stretch, requests per frame
//! grow (they queue in its socket) while the time per request stays put: the paper's knee.
//!
//! Pure: times in (ns, one clock), figures out.

use serde::Serialize;

/// Two arrivals further apart than this belong to different bursts (snapshots of one frame go
/// out within a millisecond of each other; frames are 50 ms apart at `sv_fps 20`).
pub const BURST_GAP_NS: u64 = 10_000_000;
/// The most events a collector keeps (each 8 bytes): about 30 minutes of 64 bots.
pub const MAX_EVENTS: usize = 8 << 20;

/// What the bots saw, as it happened: when each request (client packet) left and each
/// answered snapshot arrived. Bounded ([`MAX_EVENTS`] each).
#[derive(Debug, Default)]
pub struct Events {
    pub requests: Vec<u64>,
    pub snapshots: Vec<u64>,
}

impl Events {
    pub fn request(&mut self, at: u64) {
        if self.requests.len() < MAX_EVENTS {
            self.requests.push(at);
        }
    }

    pub fn snapshot(&mut self, at: u64) {
        if self.snapshots.len() < MAX_EVENTS {
            self.snapshots.push(at);
        }
    }
}

/// Smallest, mean and largest of a figure over the frames.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Spread {
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

impl Spread {
    fn of(v: &[f64]) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        let (min, max) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
        Some(Spread { min, mean: v.iter().sum::<f64>() / v.len() as f64, max })
    }
}

/// The server's frames in a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Frames {
    /// Frames whose both ends are in the window.
    pub frames: usize,
    /// Time between frames (burst to burst), ms.
    pub interval_ms: Spread,
    /// Requests each frame took in.
    pub requests: Spread,
    /// The server's CPU time in a frame, ms.
    pub cpu_ms: Spread,
    /// CPU time per request in frames that took any, µs: the per-request processing time.
    pub per_request_us: Spread,
    /// The server's CPU time over the frames' time (one core = 1).
    pub busy: f64,
}

/// The cumulative CPU time at `t` from samples `(t, cumulative ns)` (sorted by time), linear
/// between samples; None outside them.
fn cpu_at(samples: &[(u64, u64)], t: u64) -> Option<f64> {
    let i = samples.partition_point(|s| s.0 <= t);
    if i == 0 || i == samples.len() && samples[i - 1].0 < t {
        return None;
    }
    let (t0, c0) = samples[i - 1];
    let Some(&(t1, c1)) = samples.get(i) else { return Some(c0 as f64) };
    let f = if t1 > t0 { (t - t0) as f64 / (t1 - t0) as f64 } else { 0.0 };
    Some(c0 as f64 + f * c1.saturating_sub(c0) as f64)
}

/// The frames between `from` and `to` (ns): `events` as the bots saw them, `cpu` the server's
/// cumulative CPU time sampled as `(t, ns)`, time ordered. None when fewer than two bursts or
/// no CPU samples cover the window.
pub fn frames(events: &Events, cpu: &[(u64, u64)], from: u64, to: u64) -> Option<Frames> {
    let mut arrivals: Vec<u64> = events.snapshots.iter().copied().filter(|t| (from..=to).contains(t)).collect();
    arrivals.sort_unstable();
    let mut bursts = Vec::new();
    let mut last = None;
    for &t in &arrivals {
        if last.is_none_or(|l: u64| t - l > BURST_GAP_NS) {
            bursts.push(t);
        }
        last = Some(t);
    }
    let mut requests = events.requests.clone();
    requests.sort_unstable();
    let (mut interval, mut reqs, mut cpu_ms, mut per) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut cpu_sum, mut span) = (0.0, 0u64);
    for w in bursts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (Some(ca), Some(cb)) = (cpu_at(cpu, a), cpu_at(cpu, b)) else { continue };
        let n = requests.partition_point(|&t| t <= b) - requests.partition_point(|&t| t <= a);
        let c = (cb - ca).max(0.0);
        interval.push((b - a) as f64 / 1e6);
        reqs.push(n as f64);
        cpu_ms.push(c / 1e6);
        if n > 0 {
            per.push(c / 1e3 / n as f64);
        }
        cpu_sum += c;
        span += b - a;
    }
    Some(Frames {
        frames: interval.len(),
        interval_ms: Spread::of(&interval)?,
        requests: Spread::of(&reqs)?,
        cpu_ms: Spread::of(&cpu_ms)?,
        per_request_us: Spread::of(&per).unwrap_or_default(),
        busy: cpu_sum / span.max(1) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server at 20 frames a second taking 8 requests a frame and 250 µs of CPU for each; then
    /// one that cannot keep up: frames stretch to 80 ms, requests queue (13 a frame), the time
    /// per request stays.
    #[test]
    fn frames_are_found_from_bursts_and_charged_their_cpu_and_requests() {
        let run = |period_ms: u64, per_frame: u64| {
            let mut e = Events::default();
            let mut cpu = vec![(0u64, 0u64)];
            let mut used = 0u64;
            for k in 1..=100u64 {
                let end = k * period_ms * 1_000_000;
                for r in 0..per_frame {
                    e.request(end - period_ms * 1_000_000 + 1 + r * (period_ms * 1_000_000 / per_frame));
                }
                // the frame's work just before its snapshots; 4 bots' snapshots within 0.3 ms
                used += per_frame * 250_000;
                cpu.push((end - 100_000, used));
                for b in 0..4 {
                    e.snapshot(end + b * 100_000);
                }
            }
            frames(&e, &cpu, 0, u64::MAX).unwrap()
        };
        let f = run(50, 8);
        assert_eq!(f.frames, 98, "the last burst is past the last CPU sample");
        assert!((f.interval_ms.mean - 50.0).abs() < 1e-6 && (f.requests.mean - 8.0).abs() < 1e-9, "{f:?}");
        assert!((f.per_request_us.mean - 250.0).abs() < 1.0, "{f:?}");
        assert!((f.busy - 0.04).abs() < 1e-3, "{f:?}");
        let slow = run(80, 13);
        assert!((slow.requests.mean - 13.0).abs() < 1e-9 && (slow.per_request_us.mean - 250.0).abs() < 1.0, "{slow:?}");
        assert!(frames(&Events::default(), &[], 0, 1).is_none());
    }
}
