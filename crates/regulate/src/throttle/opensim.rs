//! The OpenSim viewer's throttle: AIAD around the user's setting.

use super::*;

/// How often the OpenSim throttle acts on the loss rate: every 5 s, on the loss measured over
/// that time (the Second Life viewer's DYNAMIC_UPDATE_DURATION, llviewerthrottle.cpp). The
/// Mongoose paper's summary says "every second"; with a 1 s window the loss estimate of a
/// 750 kbit/s circuit (about 250 packets) is too noisy at 2 % loss to stay pinned at the cap
/// (one second in eight reads above 3 %), which the paper's measurements show it does, so the
/// source's 5 s is the default; [`OpenSimThrottle::new`] takes any period.
pub const OPENSIM_PERIOD_NS: u64 = 5 * S;
/// Loss above this (percent, over a period) tightens the throttle.
pub const TIGHTEN_PCT: f64 = 3.0;
/// Loss at or below this eases it.
pub const EASE_PCT: f64 = 0.5;
/// The throttle moves in steps of 0.1 × the user setting, between 0.2 and 1.5 × the setting,
/// and never above 1500 kbit/s (llviewerthrottle.cpp).
const STEP: f64 = 0.1;
const MIN_FRACTION: f64 = 0.2;
const MAX_FRACTION: f64 = 1.5;
const OPENSIM_MAX_KBPS: f64 = 1500.0;

/// The Second Life / OpenSim viewer's dynamic throttle: additive increase, additive decrease,
/// independent of the round-trip time. It starts at min(1500, 1.5 × setting) kbit/s; every
/// period, loss above 3 % takes 0.1 × setting off (down to 0.2 × setting), loss at or below
/// 0.5 % puts 0.1 × setting back (up to the start value); between the two it holds.
pub struct OpenSimThrottle {
    setting_bps: f64,
    fraction: f64,
    min_fraction: f64,
    period_ns: u64,
    next_ns: u64,
    gaps: Gaps,
    received: u64,
    lost: u64,
    changed: bool,
    /// The loss rate of the last period, percent.
    pub last_loss_pct: f64,
}

impl OpenSimThrottle {
    /// `setting_kbps` is the user's setting (clamped to 50..=1500, the viewer's range).
    pub fn new(setting_kbps: f64, period_ns: u64, now_ns: u64) -> OpenSimThrottle {
        OpenSimThrottle::with_floor(setting_kbps, period_ns, None, now_ns)
    }

    /// The rate it starts at, kbit/s: min(1500, 1.5 × setting).
    pub fn start_kbps(setting_kbps: f64) -> f64 {
        (setting_kbps.clamp(50.0, OPENSIM_MAX_KBPS) * MAX_FRACTION).min(OPENSIM_MAX_KBPS)
    }

    /// With the lowest rate it may fall to, kbit/s: the viewer's is max(0.2 × setting, 50)
    /// (`None`); the Mongoose paper's analysis lets it fall to 50 ("at 4 % loss OpenSim would
    /// reduce its sending rate to 50 kbps"). Steps stay 0.1 × setting; the last one stops at the
    /// floor.
    pub fn with_floor(setting_kbps: f64, period_ns: u64, floor_kbps: Option<f64>, now_ns: u64) -> OpenSimThrottle {
        let setting_kbps = setting_kbps.clamp(50.0, OPENSIM_MAX_KBPS);
        let setting_bps = setting_kbps * KBIT;
        let floor = floor_kbps.unwrap_or((MIN_FRACTION * setting_kbps).max(50.0));
        let min_fraction = (floor.clamp(1.0, Self::start_kbps(setting_kbps)) / setting_kbps).min(MAX_FRACTION);
        OpenSimThrottle {
            setting_bps,
            fraction: MAX_FRACTION,
            min_fraction,
            period_ns: period_ns.max(1),
            next_ns: now_ns + period_ns.max(1),
            gaps: Gaps::default(),
            received: 0,
            lost: 0,
            changed: true,
            last_loss_pct: 0.0,
        }
    }

    fn current(&self) -> f64 {
        (self.setting_bps * self.fraction).min(OPENSIM_MAX_KBPS * KBIT)
    }

    fn update(&mut self) {
        let expected = self.received + self.lost;
        let loss = if expected == 0 { 0.0 } else { 100.0 * self.lost as f64 / expected as f64 };
        self.last_loss_pct = loss;
        self.received = 0;
        self.lost = 0;
        let before = self.fraction;
        if loss > TIGHTEN_PCT {
            if self.fraction > self.min_fraction + 1e-9 {
                self.fraction = (self.fraction - STEP).max(self.min_fraction);
            }
        } else if loss <= EASE_PCT && self.fraction < MAX_FRACTION - 1e-9 && self.current() < OPENSIM_MAX_KBPS * KBIT {
            self.fraction = (self.fraction + STEP).min(MAX_FRACTION);
        }
        self.changed |= (self.fraction - before).abs() > 1e-12;
    }
}

impl Throttle for OpenSimThrottle {
    fn on_packet(&mut self, now_ns: u64, seq: u64, _size: u32) {
        let ev = self.gaps.on_packet(now_ns, seq);
        self.received += 1;
        self.lost += ev.lost;
    }

    fn on_rtt(&mut self, _: u64, _: u64) {}

    fn poll(&mut self, now_ns: u64) -> Option<f64> {
        while now_ns >= self.next_ns {
            self.next_ns += self.period_ns;
            self.update();
        }
        std::mem::take(&mut self.changed).then(|| self.current())
    }

    fn rate_bps(&self) -> f64 {
        self.current()
    }

    fn name(&self) -> &'static str {
        "opensim"
    }
}
