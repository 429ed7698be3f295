//! Departure schedules: the pure, seeded sequence of (time, size) a flow asks for.
//! The engine only has to follow it; tests can check it without sockets or clocks.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::dist::Sampler;
use crate::flow::Flow;

/// Sub-stream numbers for [`crate::derive_seed`].
const STREAM_IDT: u64 = 1;
const STREAM_SIZE: u64 = 2;
const STREAM_ONOFF: u64 = 3;
const STREAM_START: u64 = 4;

/// One packet (UDP) or APDU (TCP) to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub seq: u64,
    /// Nanoseconds after the engine's start.
    pub at_ns: u64,
    pub size: u32,
    /// The drawn size was outside the transport's limits and was clamped.
    pub clamped: bool,
    /// The behaviour state (category) the packet belongs to; 0 for plain flows.
    pub class: u8,
}

/// Iterator of a flow's departures. Time accumulates in f64 nanoseconds, so a constant
/// inter-departure time does not drift from rounding.
#[derive(Debug, Clone)]
pub struct Schedule {
    idt: Sampler,
    size: Sampler,
    on_off: Option<(Sampler, Sampler)>,
    rng_idt: ChaCha8Rng,
    rng_size: ChaCha8Rng,
    rng_onoff: ChaCha8Rng,
    start_ns: f64,
    t_ns: f64,
    on_end_ns: f64,
    seq: u64,
    bytes: u64,
    limit_ns: f64,
    max_packets: u64,
    max_bytes: u64,
    min_size: u32,
    max_size: u32,
    /// Inter-departure draws below zero, sent back-to-back instead.
    pub negative_idt: u64,
}

impl Schedule {
    pub fn new(flow: &Flow) -> Self {
        let rng = |s| ChaCha8Rng::seed_from_u64(crate::derive_seed(flow.seed, s));
        let mut rng_start = rng(STREAM_START);
        let start_ns = flow.start_delay.sampler().sample(&mut rng_start).max(0.0) * 1e6;
        let mut s = Schedule {
            idt: flow.idt.sampler(),
            size: flow.size.sampler(),
            on_off: flow.on_off.as_ref().map(|(a, b)| (a.sampler(), b.sampler())),
            rng_idt: rng(STREAM_IDT),
            rng_size: rng(STREAM_SIZE),
            rng_onoff: rng(STREAM_ONOFF),
            start_ns,
            t_ns: start_ns,
            on_end_ns: f64::INFINITY,
            seq: 0,
            bytes: 0,
            limit_ns: flow.stop.duration_ns.map_or(f64::INFINITY, |d| start_ns + d as f64),
            max_packets: flow.stop.packets.unwrap_or(u64::MAX),
            max_bytes: flow.stop.bytes.unwrap_or(u64::MAX),
            min_size: flow.transport.min_size(),
            max_size: flow.transport.max_size(),
            negative_idt: 0,
        };
        if let Some((on, _)) = &mut s.on_off {
            s.on_end_ns = start_ns + on.sample(&mut s.rng_onoff).max(0.0) * 1e6;
        }
        s
    }

    /// Nanoseconds after the engine's start at which the flow begins.
    pub fn start_ns(&self) -> u64 {
        self.start_ns as u64
    }

    /// Moves `t_ns` out of any off-period it fell into.
    fn skip_off_periods(&mut self) {
        let Some((on, off)) = &mut self.on_off else {
            return;
        };
        while self.t_ns >= self.on_end_ns {
            let off_ns = off.sample(&mut self.rng_onoff).max(0.0) * 1e6;
            let on_ns = on.sample(&mut self.rng_onoff).max(0.0) * 1e6;
            // The packet that fell into the off-period leaves when the next on-period starts.
            let next_on = self.on_end_ns + off_ns;
            self.t_ns = self.t_ns.max(next_on);
            self.on_end_ns = next_on + on_ns;
            if self.on_end_ns >= self.limit_ns {
                break;
            }
        }
    }
}

impl Iterator for Schedule {
    type Item = Departure;

    fn next(&mut self) -> Option<Departure> {
        self.skip_off_periods();
        if self.t_ns >= self.limit_ns || self.seq >= self.max_packets || self.bytes >= self.max_bytes {
            return None;
        }
        let raw = self.size.sample(&mut self.rng_size).round();
        let mut size = raw.clamp(self.min_size as f64, self.max_size as f64) as u32;
        let mut clamped = raw != size as f64;
        let left = self.max_bytes - self.bytes;
        if (size as u64) > left {
            // The last packet carries what is left of the byte budget (at least a header).
            size = (left as u32).max(self.min_size);
            clamped = true;
        }
        let d = Departure { seq: self.seq, at_ns: self.t_ns as u64, size, clamped, class: 0 };
        self.seq += 1;
        self.bytes += size as u64;
        let idt = self.idt.sample(&mut self.rng_idt);
        if idt < 0.0 {
            self.negative_idt += 1;
        }
        self.t_ns += idt.max(0.0) * 1e6;
        Some(d)
    }
}

/// A change to a running flow's laws (a `flow` command): the inter-departure and size laws
/// that replace the current ones. The departure already drawn leaves as drawn; the one after it
/// is drawn from the new law (so a change shows within one old inter-departure time).
#[derive(Debug, Clone)]
pub struct Retune {
    pub idt: Option<Sampler>,
    pub size: Option<Sampler>,
}

/// Where a flow's pending [`Retune`] waits for its schedule.
pub type Tuner = std::sync::Arc<std::sync::Mutex<Option<Retune>>>;

/// A flow's [`Schedule`] that takes changes while it runs (see [`Retune`]).
pub struct Steered {
    inner: Schedule,
    tuner: Tuner,
    /// The last departure's time (ns), where a retuned schedule draws from.
    last_ns: Option<f64>,
}

impl Steered {
    pub fn new(inner: Schedule, tuner: Tuner) -> Steered {
        Steered { inner, tuner, last_ns: None }
    }
}

impl Iterator for Steered {
    type Item = Departure;

    fn next(&mut self) -> Option<Departure> {
        let change = self.tuner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(r) = change {
            let s = &mut self.inner;
            if let Some(idt) = r.idt {
                s.idt = idt;
                // the next departure: one new inter-departure time after the last one
                if let Some(last) = self.last_ns {
                    let gap = s.idt.sample(&mut s.rng_idt);
                    s.t_ns = last + gap.max(0.0) * 1e6;
                }
            }
            if let Some(size) = r.size {
                s.size = size;
            }
        }
        let d = self.inner.next()?;
        self.last_ns = Some(d.at_ns as f64);
        Some(d)
    }
}

/// How many departures `flow`'s schedule has, counted by regenerating it from its seed (the
/// engine sends exactly these, or fewer when stopped or behind): `None` when it has more than
/// `cap` (too many to count here) or never ends (no duration, packet or byte limit).
pub fn departures(flow: &Flow, cap: u64) -> Option<u64> {
    let mut n = 0u64;
    for _ in Schedule::new(flow) {
        n += 1;
        if n > cap {
            return None;
        }
    }
    Some(n)
}

/// One direction of one player's traffic: follows the player's behaviour segments, switching
/// inter-departure and size models when the state (category) changes. The IDT process restarts
/// at each segment start (first APDU one IDT after it); a stay of zero length sends nothing.
/// Samplers are built per segment, so memory does not grow with the number of states.
pub struct PlayerSchedule {
    segments: Vec<crate::behaviour::Segment>,
    traffic: std::sync::Arc<crate::service::BoundTraffic>,
    dir: usize,
    seg: usize,
    current: Option<(Sampler, Sampler)>,
    rng_idt: ChaCha8Rng,
    rng_size: ChaCha8Rng,
    t_s: f64,
    seq: u64,
    min_size: u32,
    max_size: u32,
    end_s: f64,
}

impl PlayerSchedule {
    /// `segments` of one player in time order; times in the departures are ns from the run start.
    pub fn new(
        segments: Vec<crate::behaviour::Segment>,
        traffic: std::sync::Arc<crate::service::BoundTraffic>,
        dir: crate::service::Direction,
        seed: u64,
        transport: crate::flow::Transport,
        end_s: f64,
    ) -> Self {
        let player = segments.first().map_or(0, |s| s.player) as u64;
        let rng = |s: u64| ChaCha8Rng::seed_from_u64(crate::derive_seed(crate::derive_seed(seed, player), s + 16 * dir as u64));
        let mut p = PlayerSchedule {
            segments,
            traffic,
            dir: dir as usize,
            seg: 0,
            current: None,
            rng_idt: rng(STREAM_IDT),
            rng_size: rng(STREAM_SIZE),
            t_s: 0.0,
            seq: 0,
            min_size: transport.min_size(),
            max_size: transport.max_size(),
            end_s,
        };
        p.enter(0);
        p
    }

    /// Moves to segment `i` and draws the first departure in it. A stay that begins a session
    /// at the run's start begins in equilibrium: the player was already playing, so the process
    /// is run from `WARMUP_MEANS` mean intervals before the start and what falls before is
    /// dropped. (A fresh start would add (CV² − 1)/2 APDUs per player: +8 % in a 20 s run for
    /// WoW trading, whose inter-departure CV² is 5.3.) Later stays restart the process at their
    /// start, as the model's category change does.
    fn enter(&mut self, i: usize) {
        const WARMUP_MEANS: f64 = 30.0;
        self.seg = i;
        self.current = None;
        let Some(s) = self.segments.get(i) else { return };
        if let Some(t) = &self.traffic.by_state[s.state as usize][s.sub as usize][self.dir] {
            let (mut idt, size) = (t.idt.sampler(), t.size.sampler());
            let mean_ms = rough_mean(&t.idt).max(1e-3);
            let mut at = if s.start_s == 0.0 { -(WARMUP_MEANS * mean_ms / 1e3).min(3600.0) } else { s.start_s };
            let mut guard = 0;
            loop {
                at += idt.sample(&mut self.rng_idt).max(0.0) / 1e3;
                guard += 1;
                if at >= s.start_s || guard > 100_000 {
                    break;
                }
            }
            self.t_s = at.max(s.start_s);
            self.current = Some((idt, size));
        }
    }
}

impl Iterator for PlayerSchedule {
    type Item = Departure;

    fn next(&mut self) -> Option<Departure> {
        loop {
            let s = *self.segments.get(self.seg)?;
            let end = s.end_s.min(self.end_s);
            match &mut self.current {
                Some((idt, size)) if self.t_s < end => {
                    let raw = size.sample(&mut self.rng_size).round();
                    let sz = raw.clamp(self.min_size as f64, self.max_size as f64) as u32;
                    let d = Departure { seq: self.seq, at_ns: (self.t_s * 1e9) as u64, size: sz, clamped: raw != sz as f64, class: s.state as u8 };
                    self.seq += 1;
                    self.t_s += idt.sample(&mut self.rng_idt).max(0.0) / 1e3;
                    return Some(d);
                }
                _ => {
                    if self.seg + 1 >= self.segments.len() || s.end_s >= self.end_s {
                        self.seg = self.segments.len();
                        return None;
                    }
                    self.enter(self.seg + 1);
                }
            }
        }
    }
}

/// A cheap mean of an inter-departure model, ms: the base family's analytic mean with `mul` and
/// `shift` (clamps and rounding ignored); mixtures recurse. Only sizes the warm-up.
fn rough_mean(d: &crate::dist::Dist) -> f64 {
    use crate::dist::Kind;
    let base = match &d.kind {
        Kind::Mixture(parts) => parts.iter().map(|(w, c)| w * rough_mean(c)).sum(),
        _ => crate::dist::Dist::new(d.kind.clone()).mean().unwrap_or(1000.0),
    };
    (base * d.mul + d.shift).max(0.0)
}
