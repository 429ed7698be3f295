//! Client throttle controllers: what rate a virtual-world client asks its server for, from the
//! packets it receives. Each is an I/O-free state machine: the shell reports every data packet
//! of the circuit (its sequence number, size and arrival time) and round-trip samples, and polls
//! for a request to send (a throttle packet). Rates are bit/s; times are nanoseconds.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::channels::KBIT;
use crate::tcp::{padhye_bytes_per_s, padhye_inverse_p};

const S: u64 = 1_000_000_000;

/// The rates a client may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub min_bps: f64,
    pub max_bps: f64,
}

impl Default for Limits {
    /// The viewer's range: 50–1500 kbit/s (llviewerthrottle.cpp MIN_BANDWIDTH/MAX_BANDWIDTH).
    fn default() -> Self {
        Limits { min_bps: 50.0 * KBIT, max_bps: 1500.0 * KBIT }
    }
}

impl Limits {
    pub fn clamp(&self, bps: f64) -> f64 {
        bps.clamp(self.min_bps, self.max_bps)
    }
}

/// A client throttle controller.
pub trait Throttle {
    /// A data packet of the circuit arrived (`seq` unwrapped, `size` in bytes).
    fn on_packet(&mut self, now_ns: u64, seq: u64, size: u32);
    /// A round-trip sample (the circuit's ping, or an acknowledged reliable packet).
    fn on_rtt(&mut self, now_ns: u64, rtt_ns: u64);
    /// Time passes: the rate to ask the server for, when a request is due.
    fn poll(&mut self, now_ns: u64) -> Option<f64>;
    /// The rate it asks for now.
    fn rate_bps(&self) -> f64;
    /// Its name, as `--throttle` spells it.
    fn name(&self) -> &'static str;
}

/// Which controller, as configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ThrottleKind {
    /// Always the same rate.
    Fixed {
        bps: f64,
    },
    /// The viewer's AIAD throttle around a user setting (kbit/s, 50–1500, default 500).
    Opensim {
        setting_kbps: f64,
    },
    /// Window tracking with TCP's timeouts (see [`Mongoose`]).
    Mongoose,
    /// Window tracking by the paper's rule alone: no timeouts.
    #[serde(rename = "mongoose-paper")]
    MongoosePaper,
    Tfrc,
}

impl ThrottleKind {
    /// `fixed:KBPS`, `opensim[:SETTING]` (the viewer's setting, 50..=1500 kbit/s, default 500),
    /// `mongoose`, `mongoose-paper`, `tfrc`. The error names what is wrong and what to give.
    pub fn parse(s: &str) -> Result<ThrottleKind, String> {
        let (name, arg) = s.split_once(':').map_or((s, None), |(a, b)| (a, Some(b)));
        let num = |x: &str| -> Result<f64, String> {
            x.parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0).ok_or_else(|| format!("`{s}`: `{x}` is not a positive number of kbit/s"))
        };
        match (name, arg) {
            ("fixed", Some(k)) => {
                let v = num(k)?;
                if v > 1e7 {
                    return Err(format!("`{s}`: at most 10000000 kbit/s"));
                }
                Ok(ThrottleKind::Fixed { bps: v * 1000.0 })
            }
            ("fixed", None) => Err("fixed needs a rate: fixed:KBPS, e.g. fixed:500".into()),
            ("opensim", k) => {
                let v = k.map(num).transpose()?.unwrap_or(500.0);
                if !(50.0..=1500.0).contains(&v) {
                    return Err(format!("`{s}`: the viewer's setting is 50..=1500 kbit/s"));
                }
                Ok(ThrottleKind::Opensim { setting_kbps: v })
            }
            ("mongoose", None) => Ok(ThrottleKind::Mongoose),
            ("mongoose-paper", None) => Ok(ThrottleKind::MongoosePaper),
            ("tfrc", None) => Ok(ThrottleKind::Tfrc),
            _ => Err(format!("`{s}`: give fixed:KBPS, opensim[:SETTING], mongoose, mongoose-paper or tfrc")),
        }
    }

    /// The most this throttle ever asks for, bit/s: what its circuit's join asks the server
    /// for (the server never lets a throttle packet raise the circuit above it).
    pub fn max_bps(&self, limits: Limits) -> f64 {
        match *self {
            ThrottleKind::Fixed { bps } => bps,
            _ => limits.max_bps,
        }
    }

    pub fn build(&self, limits: Limits, now_ns: u64) -> Box<dyn Throttle + Send> {
        match *self {
            ThrottleKind::Fixed { bps } => Box::new(Fixed::new(bps)),
            ThrottleKind::Opensim { setting_kbps } => Box::new(OpenSimThrottle::new(setting_kbps, OPENSIM_PERIOD_NS, now_ns)),
            ThrottleKind::Mongoose => Box::new(Mongoose::new(limits, now_ns)),
            ThrottleKind::MongoosePaper => Box::new(Mongoose::with_timeouts(limits, now_ns, false)),
            ThrottleKind::Tfrc => Box::new(Tfrc::new(limits, now_ns)),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Sequence gaps, shared by the loss-driven controllers.

/// What one packet told the gap tracker.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SeqEvent {
    /// It is the successor of the highest sequence number so far.
    pub in_sequence: bool,
    /// Packets now known lost: a gap before which three later packets have arrived (as TCP's
    /// three duplicate ACKs, RFC 5681; RFC 5348 §5.1 NDUPACK = 3).
    pub lost: u64,
    /// The first lost sequence number, and the interpolated time it would have arrived at.
    pub first_lost: u64,
    pub lost_at_ns: u64,
}

/// A gap not yet confirmed: sequence numbers `from..to` missing, the arrival times of the
/// packets either side, and how many packets arrived after it.
#[derive(Debug, Clone)]
struct Gap {
    from: u64,
    to: u64,
    before_ns: u64,
    after_ns: u64,
    later: u32,
}

/// Tracks the highest sequence number and the gaps behind it.
#[derive(Debug, Clone, Default)]
pub struct Gaps {
    highest: Option<u64>,
    last_ns: u64,
    pending: VecDeque<Gap>,
}

/// Packets after a gap that confirm it as loss.
pub const NDUPACK: u32 = 3;
/// Most unconfirmed gaps kept (a hostile or broken sender cannot grow it).
const MAX_GAPS: usize = 1024;

impl Gaps {
    pub fn on_packet(&mut self, now_ns: u64, seq: u64) -> SeqEvent {
        let mut ev = SeqEvent::default();
        match self.highest {
            None => ev.in_sequence = true,
            Some(h) if seq == h + 1 => ev.in_sequence = true,
            Some(h) if seq > h + 1 => {
                if self.pending.len() >= MAX_GAPS {
                    self.pending.pop_front();
                }
                self.pending.push_back(Gap { from: h + 1, to: seq, before_ns: self.last_ns, after_ns: now_ns, later: 0 });
            }
            Some(_) => {
                // Late (reordered) or duplicate: it fills a pending gap if it is in one.
                self.fill(seq);
                return ev;
            }
        }
        // Every packet above a gap counts toward confirming it, the one that revealed it too
        // (RFC 5348 §5.1: lost once NDUPACK packets with a higher sequence number arrived).
        for g in self.pending.iter_mut() {
            g.later += 1;
        }
        while let Some(g) = self.pending.front() {
            if g.later < NDUPACK {
                break;
            }
            let g = self.pending.pop_front().expect("front exists");
            if ev.lost == 0 {
                ev.first_lost = g.from;
                // Interpolated: the missing packets were due between their neighbours.
                ev.lost_at_ns = g.before_ns + (g.after_ns.saturating_sub(g.before_ns)) / (g.to - g.from + 1);
            }
            ev.lost += g.to - g.from;
        }
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        self.last_ns = now_ns;
        ev
    }

    fn fill(&mut self, seq: u64) {
        let Some(i) = self.pending.iter().position(|g| (g.from..g.to).contains(&seq)) else { return };
        let g = self.pending[i].clone();
        if g.to - g.from == 1 {
            self.pending.remove(i);
        } else if seq == g.from {
            self.pending[i].from += 1;
        } else if seq == g.to - 1 {
            self.pending[i].to -= 1;
        } else {
            self.pending[i].to = seq;
            self.pending.insert(i + 1, Gap { from: seq + 1, ..g });
        }
    }
}

/// A smoothed round-trip time (RFC 6298's gain 1/8).
#[derive(Debug, Clone, Copy, Default)]
pub struct Srtt(Option<f64>);

impl Srtt {
    pub fn add(&mut self, rtt_ns: u64) {
        let r = rtt_ns as f64;
        self.0 = Some(match self.0 {
            None => r,
            Some(s) => s + (r - s) / 8.0,
        });
    }

    pub fn ns(&self) -> Option<f64> {
        self.0
    }
}

// ------------------------------------------------------------------------------------------

/// A constant request.
pub struct Fixed {
    bps: f64,
    sent: bool,
}

impl Fixed {
    pub fn new(bps: f64) -> Fixed {
        Fixed { bps, sent: false }
    }
}

impl Throttle for Fixed {
    fn on_packet(&mut self, _: u64, _: u64, _: u32) {}
    fn on_rtt(&mut self, _: u64, _: u64) {}
    fn poll(&mut self, _: u64) -> Option<f64> {
        (!std::mem::replace(&mut self.sent, true)).then_some(self.bps)
    }
    fn rate_bps(&self) -> f64 {
        self.bps
    }
    fn name(&self) -> &'static str {
        "fixed"
    }
}

// ------------------------------------------------------------------------------------------

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
        let setting_bps = setting_kbps.clamp(50.0, OPENSIM_MAX_KBPS) * KBIT;
        OpenSimThrottle {
            setting_bps,
            fraction: MAX_FRACTION,
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
            if self.fraction > MIN_FRACTION + 1e-9 && self.current() > 50.0 * KBIT {
                self.fraction = (self.fraction - STEP).max(MIN_FRACTION);
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

// ------------------------------------------------------------------------------------------

/// Mean packet size before any packet arrived (the mean OpenSim packet, Mongoose's measurement;
/// docs/models.md §4).
pub const INITIAL_PACKET: f64 = 375.0;
/// The round-trip time assumed before the first sample (a request before it uses the floor).
const FEEDBACK_MIN_NS: u64 = 10_000_000;
const FEEDBACK_MAX_NS: u64 = S;

/// The Mongoose client: tracks a congestion window as TCP would from the packets it receives
/// (Oliver, Miller & Allison). CWND and SSTHRESH in bytes; every in-sequence packet adds one
/// mean packet size below SSTHRESH (slow start) or size²/CWND above it (congestion avoidance);
/// a loss event — a gap followed by three packets — halves CWND and sets SSTHRESH to it (every
/// such gap, as the paper states the rule). It asks for CWND / RTT, clamped to the limits, at
/// most once per round trip.
///
/// **Timeouts (Horde's addition, `mongoose`; `mongoose-paper` leaves it out).** The paper's rule
/// alone is TCP without its retransmission timeout: a rate-paced stream always brings three
/// packets after a gap, so at high loss it follows the Mathis law (measured 1.9 × Padhye at
/// 5 % loss, RTT 100 ms) while the TCP it is meant to be fair to — and Padhye's equation, whose
/// second term is exactly this — times out when a loss leaves fewer than three packets of its
/// window to signal it. So the tracker also counts the packets in round trips of one window
/// (CWND / mean size, in sequence numbers: the server sends one window per round trip at the
/// rate asked for), and a loss with fewer than three packets of its window after it (always
/// when the window is under four packets) is a timeout, as TCP Reno's: SSTHRESH = max(CWND/2,
/// 2 packets), CWND = one packet, and for t_RTO = 4·RTT (RFC 5348 §4.3, the value Padhye's
/// equation is used with) it asks for its floor and neither grows nor takes loss events from
/// the packets sent before or during the timeout; the first packet after it starts a round of
/// one packet. The window grows in a round trip at most as TCP's would (doubling in slow start,
/// one packet in congestion avoidance): the server never sends below the viewer's floor, which
/// can be more than CWND/RTT, and packets beyond the window must not grow it. No exponential back-off: TCP doubles t_RTO only when the retransmission itself
/// is lost, which a rate-paced stream has no counterpart of (in Padhye's equation as RFC 5348
/// writes it, the back-off is the factor 1 + 32p², under 1.08 up to 5 % loss).
pub struct Mongoose {
    limits: Limits,
    cwnd: f64,
    ssthresh: f64,
    mean_size: f64,
    srtt: Srtt,
    gaps: Gaps,
    next_feedback_ns: u64,
    timeouts_on: bool,
    /// The current round: sequence numbers `round.0..round.1`; and the one before.
    round: (u64, u64),
    prev_round: (u64, u64),
    highest: u64,
    /// A timeout's end, and the sequence numbers sent before it or during it (their losses are
    /// not counted again).
    idle_until_ns: u64,
    recover_seq: u64,
    after_timeout: bool,
    /// The window's growth left in this round trip, and when the round trip ends.
    budget: f64,
    budget_until_ns: u64,
    /// Loss events so far, and how many of them were timeouts.
    pub loss_events: u64,
    pub timeouts: u64,
}

impl Mongoose {
    pub fn new(limits: Limits, now_ns: u64) -> Mongoose {
        Mongoose::with_timeouts(limits, now_ns, true)
    }

    /// `timeouts: false` is the paper's rule alone (`mongoose-paper`).
    pub fn with_timeouts(limits: Limits, now_ns: u64, timeouts: bool) -> Mongoose {
        Mongoose {
            limits,
            // TCP's initial window (RFC 3390: min(4·MSS, max(2·MSS, 4380 B))).
            cwnd: (4.0 * INITIAL_PACKET).min((2.0 * INITIAL_PACKET).max(4380.0)),
            ssthresh: f64::INFINITY,
            mean_size: INITIAL_PACKET,
            srtt: Srtt::default(),
            gaps: Gaps::default(),
            next_feedback_ns: now_ns,
            timeouts_on: timeouts,
            round: (0, 0),
            prev_round: (0, 0),
            highest: 0,
            idle_until_ns: 0,
            recover_seq: 0,
            after_timeout: false,
            budget: 0.0,
            budget_until_ns: 0,
            loss_events: 0,
            timeouts: 0,
        }
    }

    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    pub fn ssthresh(&self) -> f64 {
        self.ssthresh
    }

    fn rtt_ns(&self) -> Option<f64> {
        self.srtt.ns()
    }

    fn window_packets(&self) -> u64 {
        ((self.cwnd / self.mean_size).floor() as u64).max(1)
    }

    /// Whether a loss at `seq` left fewer than NDUPACK packets of its round after it.
    fn is_timeout(&self, seq: u64) -> bool {
        let end = if (self.round.0..self.round.1).contains(&seq) {
            self.round.1
        } else if (self.prev_round.0..self.prev_round.1).contains(&seq) {
            self.prev_round.1
        } else {
            return false;
        };
        seq + NDUPACK as u64 >= end
    }

    fn idle(&self, now_ns: u64) -> bool {
        now_ns < self.idle_until_ns
    }
}

impl Throttle for Mongoose {
    fn on_packet(&mut self, now_ns: u64, seq: u64, size: u32) {
        self.mean_size += (size as f64 - self.mean_size) / 16.0;
        let ev = self.gaps.on_packet(now_ns, seq);
        let idle = self.idle(now_ns);
        if self.timeouts_on && !idle && (seq >= self.round.1 || self.after_timeout) {
            // Rounds tile the sequence numbers, one window each, from the first packet after
            // the last timeout (or the start).
            let w = self.window_packets();
            if self.after_timeout || seq >= self.round.1 + w {
                // Past a timeout, or a jump of more than a round: the skipped numbers are one round.
                if self.after_timeout {
                    // What was sent during the timeout is not part of any window.
                    self.recover_seq = seq;
                    self.after_timeout = false;
                }
                self.prev_round = (self.round.1, seq);
                self.round = (seq, seq + w);
            } else {
                self.prev_round = self.round;
                self.round = (self.round.1, self.round.1 + w);
            }
        }
        self.highest = self.highest.max(seq);
        if self.timeouts_on && (idle || (ev.lost > 0 && ev.first_lost < self.recover_seq)) {
            // Inside a timeout, or a loss among the packets sent before it: already counted.
            return;
        }
        if ev.lost > 0 {
            self.loss_events += 1;
            if self.timeouts_on && self.is_timeout(ev.first_lost) {
                self.timeouts += 1;
                self.ssthresh = (self.cwnd / 2.0).max(2.0 * self.mean_size);
                self.cwnd = self.mean_size;
                let rto = 4.0 * self.rtt_ns().unwrap_or(S as f64);
                self.idle_until_ns = now_ns + rto as u64;
                self.recover_seq = self.highest + 1;
                self.after_timeout = true;
                self.next_feedback_ns = now_ns;
                return;
            }
            self.cwnd = (self.cwnd / 2.0).max(self.mean_size);
            self.ssthresh = self.cwnd;
        } else if ev.in_sequence {
            let s = self.mean_size;
            let mut inc = if self.cwnd < self.ssthresh { s } else { s * s / self.cwnd };
            if self.timeouts_on {
                // At most what TCP's window gains in a round trip (double in slow start, one
                // packet in congestion avoidance): when the server sends more than CWND/RTT —
                // it never sends less than the viewer's floor — the packets beyond the window
                // add nothing.
                if let Some(r) = self.rtt_ns() {
                    if now_ns >= self.budget_until_ns {
                        self.budget_until_ns = now_ns + r as u64;
                        self.budget = if self.cwnd < self.ssthresh { self.cwnd } else { s };
                    }
                    inc = inc.min(self.budget);
                    self.budget -= inc;
                }
            }
            self.cwnd += inc;
            // A window worth more than the highest rate over the round trip is no use.
            if let Some(r) = self.rtt_ns() {
                self.cwnd = self.cwnd.min(self.limits.max_bps / 8.0 * r / 1e9 * 2.0).max(s);
            }
        }
    }

    fn on_rtt(&mut self, _now_ns: u64, rtt_ns: u64) {
        self.srtt.add(rtt_ns);
    }

    fn poll(&mut self, now_ns: u64) -> Option<f64> {
        if now_ns < self.next_feedback_ns {
            return None;
        }
        let mut gap = self.rtt_ns().map_or(FEEDBACK_MAX_NS, |r| (r as u64).clamp(FEEDBACK_MIN_NS, FEEDBACK_MAX_NS));
        if self.idle(now_ns) {
            // Ask again the moment the timeout ends.
            gap = gap.min(self.idle_until_ns - now_ns);
            self.next_feedback_ns = now_ns + gap;
            return Some(self.limits.min_bps);
        }
        self.next_feedback_ns = now_ns + gap;
        Some(self.rate_bps())
    }

    fn rate_bps(&self) -> f64 {
        match self.rtt_ns() {
            Some(r) if r > 0.0 => self.limits.clamp(self.cwnd * 8.0 / (r / 1e9)),
            _ => self.limits.min_bps,
        }
    }

    fn name(&self) -> &'static str {
        if self.timeouts_on {
            "mongoose"
        } else {
            "mongoose-paper"
        }
    }
}

// ------------------------------------------------------------------------------------------

/// TFRC's loss-interval weights, most recent first (RFC 5348 §5.4, n = 8).
pub const TFRC_WEIGHTS: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
/// t_mbi: the longest a TFRC sender waits between packets (RFC 5348 §4.3: 64 s).
const T_MBI_S: f64 = 64.0;

/// TFRC (RFC 5348) computed at the client, which then asks for the rate a TFRC sender would
/// use: the loss event rate p from the weighted average of the last eight loss intervals (the
/// open interval counted when it raises the average), the TCP throughput equation, slow start
/// (doubling once per round trip, at most twice the receive rate) until the first loss event,
/// the first interval seeded from the receive rate (§6.3.1), and feedback once per round trip.
pub struct Tfrc {
    limits: Limits,
    gaps: Gaps,
    srtt: Srtt,
    mean_size: f64,
    /// Closed loss intervals in packets, most recent first (at most 8).
    intervals: VecDeque<f64>,
    /// The current loss event's start: its first lost sequence number and time.
    event: Option<(u64, u64)>,
    highest: u64,
    /// Arrivals of the last round trips (time, bytes), for X_recv.
    arrivals: VecDeque<(u64, u32)>,
    x_bps: f64,
    x_recv_set: VecDeque<f64>,
    tld_ns: Option<u64>,
    next_feedback_ns: u64,
    new_event: bool,
}

impl Tfrc {
    pub fn new(limits: Limits, now_ns: u64) -> Tfrc {
        Tfrc {
            limits,
            gaps: Gaps::default(),
            srtt: Srtt::default(),
            mean_size: INITIAL_PACKET,
            intervals: VecDeque::new(),
            event: None,
            highest: 0,
            arrivals: VecDeque::new(),
            x_bps: limits.min_bps,
            x_recv_set: VecDeque::new(),
            tld_ns: None,
            next_feedback_ns: now_ns,
            new_event: false,
        }
    }

    /// The loss event rate (0 before the first loss event).
    pub fn p(&self) -> f64 {
        let Some((start, _)) = self.event else { return 0.0 };
        let open = (self.highest + 1).saturating_sub(start) as f64;
        let mean = |xs: &mut dyn Iterator<Item = f64>| -> f64 {
            let (mut tot, mut w) = (0.0, 0.0);
            for (x, wt) in xs.zip(TFRC_WEIGHTS) {
                tot += x * wt;
                w += wt;
            }
            if w > 0.0 {
                tot / w
            } else {
                0.0
            }
        };
        // I_tot0 with the open interval, I_tot1 without; the larger is used (RFC 5348 §5.4).
        let with_open = mean(&mut std::iter::once(open).chain(self.intervals.iter().copied()));
        let without = mean(&mut self.intervals.iter().copied());
        let i_mean = with_open.max(without);
        if i_mean > 0.0 {
            (1.0 / i_mean).min(1.0)
        } else {
            1.0
        }
    }

    pub fn intervals(&self) -> Vec<f64> {
        self.intervals.iter().copied().collect()
    }

    fn x_recv_bps(&self, now_ns: u64) -> f64 {
        let r = self.srtt.ns().unwrap_or(1e8).max(1e6);
        let from = now_ns.saturating_sub(r as u64);
        let bytes: u64 = self.arrivals.iter().filter(|a| a.0 > from).map(|a| a.1 as u64).sum();
        bytes as f64 * 8.0 / (r / 1e9)
    }

    fn on_loss(&mut self, ev: SeqEvent, now_ns: u64) {
        let r = self.srtt.ns().unwrap_or(0.0) as u64;
        match self.event {
            None => {
                // §6.3.1: the first interval is the one that would give the receive rate.
                let x_recv = self.x_recv_bps(now_ns).max(self.limits.min_bps) / 8.0;
                let p = padhye_inverse_p(self.mean_size, self.srtt.ns().unwrap_or(1e8) / 1e9, x_recv);
                self.intervals.push_front((1.0 / p).max(1.0));
                self.event = Some((ev.first_lost, ev.lost_at_ns));
                self.new_event = true;
            }
            Some((start, t)) if ev.lost_at_ns > t + r => {
                self.intervals.push_front(ev.first_lost.saturating_sub(start).max(1) as f64);
                self.intervals.truncate(TFRC_WEIGHTS.len());
                self.event = Some((ev.first_lost, ev.lost_at_ns));
                self.new_event = true;
            }
            Some(_) => {}
        }
    }

    fn update_rate(&mut self, now_ns: u64) {
        let Some(r_ns) = self.srtt.ns() else { return };
        let r = r_ns / 1e9;
        let s = self.mean_size;
        let x_recv = self.x_recv_bps(now_ns);
        if self.new_event {
            self.x_recv_set.clear();
        }
        self.x_recv_set.push_back(x_recv);
        while self.x_recv_set.len() > 2 {
            self.x_recv_set.pop_front();
        }
        let recv_limit = 2.0 * self.x_recv_set.iter().copied().fold(0.0, f64::max);
        let p = self.p();
        let initial = (4.0 * s).min((2.0 * s).max(4380.0)) * 8.0 / r;
        if p > 0.0 {
            let x_calc = padhye_bytes_per_s(s, r, p) * 8.0;
            self.x_bps = x_calc.min(recv_limit).max(s * 8.0 / T_MBI_S);
        } else {
            match self.tld_ns {
                None => {
                    self.x_bps = initial;
                    self.tld_ns = Some(now_ns);
                }
                Some(t) if now_ns.saturating_sub(t) as f64 >= r_ns => {
                    self.x_bps = (2.0 * self.x_bps).min(recv_limit).max(initial);
                    self.tld_ns = Some(now_ns);
                }
                Some(_) => {}
            }
        }
        self.new_event = false;
    }
}

impl Throttle for Tfrc {
    fn on_packet(&mut self, now_ns: u64, seq: u64, size: u32) {
        self.mean_size += (size as f64 - self.mean_size) / 16.0;
        self.arrivals.push_back((now_ns, size));
        let keep = (self.srtt.ns().unwrap_or(1e9) * 4.0) as u64;
        while self.arrivals.front().is_some_and(|a| a.0 + keep < now_ns) || self.arrivals.len() > 100_000 {
            self.arrivals.pop_front();
        }
        let ev = self.gaps.on_packet(now_ns, seq);
        self.highest = self.highest.max(seq);
        if ev.lost > 0 {
            self.on_loss(ev, now_ns);
            if self.new_event {
                // A new loss event is reported at once (RFC 5348 §6.2).
                self.next_feedback_ns = now_ns;
            }
        }
    }

    fn on_rtt(&mut self, _now_ns: u64, rtt_ns: u64) {
        self.srtt.add(rtt_ns);
    }

    fn poll(&mut self, now_ns: u64) -> Option<f64> {
        if now_ns < self.next_feedback_ns {
            return None;
        }
        self.update_rate(now_ns);
        let gap = self.srtt.ns().map_or(FEEDBACK_MAX_NS, |r| (r as u64).clamp(FEEDBACK_MIN_NS, FEEDBACK_MAX_NS));
        self.next_feedback_ns = now_ns + gap;
        Some(self.rate_bps())
    }

    fn rate_bps(&self) -> f64 {
        self.limits.clamp(self.x_bps)
    }

    fn name(&self) -> &'static str {
        "tfrc"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Feeds `n` packets 1 ms apart from `seq`, skipping those in `lose`.
    fn feed(t: &mut dyn Throttle, now: &mut u64, seq: &mut u64, n: u64, lose: &[u64]) {
        for _ in 0..n {
            if !lose.contains(seq) {
                t.on_packet(*now, *seq, 375);
            }
            *seq += 1;
            *now += MS;
        }
    }

    #[test]
    fn a_gap_is_loss_only_after_three_later_packets_and_a_late_packet_fills_it() {
        let mut g = Gaps::default();
        for s in 0..5 {
            assert!(g.on_packet(s * MS, s).in_sequence);
        }
        // 5 and 6 missing: 7 reveals the gap (one packet above it), 8 is the second, 9 the third
        // and confirms it.
        assert_eq!(g.on_packet(7 * MS, 7).lost, 0);
        assert_eq!(g.on_packet(8 * MS, 8).lost, 0);
        let ev = g.on_packet(9 * MS, 9);
        assert_eq!((ev.lost, ev.first_lost), (2, 5));
        assert!(ev.lost_at_ns > 4 * MS && ev.lost_at_ns < 7 * MS, "{}", ev.lost_at_ns);
        assert!(g.on_packet(10 * MS, 10).in_sequence);
        // Reordering is not loss: 11 and 12 missing when 13 arrives, then both come late.
        assert_eq!(g.on_packet(13 * MS, 13).lost, 0);
        assert_eq!(g.on_packet(14 * MS, 11).lost, 0, "11 arrives late");
        assert_eq!(g.on_packet(15 * MS, 12).lost, 0, "12 arrives late");
        for s in 14..20 {
            assert_eq!(g.on_packet(s * MS, s).lost, 0, "nothing is missing any more ({s})");
        }
        // A hostile stream of gaps keeps the tracker bounded.
        let mut h = Gaps::default();
        for i in 0..10_000u64 {
            h.on_packet(i, i * 2);
        }
        assert!(h.pending.len() <= MAX_GAPS);
    }

    #[test]
    fn opensim_steps_by_a_tenth_of_the_setting_with_its_thresholds() {
        let mut t = OpenSimThrottle::new(500.0, S, 0);
        // It starts at 1.5 × 500 = 750 kbit/s and says so at once.
        assert_eq!(t.poll(0), Some(750.0 * KBIT));
        let (mut now, mut seq) = (0, 0);
        // A second at 4 % loss (40 of 1000): −50 kbit/s.
        let lose: Vec<u64> = (0..1000).filter(|s| s % 25 == 3).collect();
        feed(&mut t, &mut now, &mut seq, 1000, &lose);
        assert_eq!(t.poll(S), Some(700.0 * KBIT));
        assert!((t.last_loss_pct - 4.0).abs() < 0.2, "{}", t.last_loss_pct);
        // A second at 2 % loss: between the thresholds, it holds (no request).
        let lose: Vec<u64> = (seq..seq + 1000).filter(|s| s % 50 == 7).collect();
        feed(&mut t, &mut now, &mut seq, 1000, &lose);
        assert_eq!(t.poll(2 * S), None);
        assert_eq!(t.rate_bps(), 700.0 * KBIT);
        // Exactly 0.5 % eases (≤), +50 kbit/s, back to the start value; then it stays there.
        let lose: Vec<u64> = (seq..seq + 1000).filter(|s| s % 200 == 11).collect();
        feed(&mut t, &mut now, &mut seq, 1000, &lose);
        assert_eq!(t.poll(3 * S), Some(750.0 * KBIT));
        feed(&mut t, &mut now, &mut seq, 1000, &[]);
        assert_eq!(t.poll(4 * S), None);
        assert_eq!(t.rate_bps(), 750.0 * KBIT);
        // Heavy loss walks it down to 0.2 × the setting and no further.
        for k in 5..30 {
            let lose: Vec<u64> = (seq..seq + 1000).filter(|s| s % 10 == 1).collect();
            feed(&mut t, &mut now, &mut seq, 1000, &lose);
            t.poll(k * S);
        }
        assert!((t.rate_bps() - 100.0 * KBIT).abs() < 1e-6, "{}", t.rate_bps() / KBIT);
        // The round-trip time plays no part.
        t.on_rtt(now, 500 * MS);
        assert!((t.rate_bps() - 100.0 * KBIT).abs() < 1e-6);
        // A setting of 1200 starts at the 1500 kbit/s cap.
        assert_eq!(OpenSimThrottle::new(1200.0, S, 0).rate_bps(), 1500.0 * KBIT);
    }

    #[test]
    fn mongoose_grows_a_window_per_packet_and_halves_it_on_a_loss_event() {
        // The paper's rule alone (the timeouts are tested below).
        let mut m = Mongoose::with_timeouts(Limits { min_bps: 1.0, max_bps: 1e12 }, 0, false);
        m.on_rtt(0, 100 * MS);
        let (mut now, mut seq) = (0, 0);
        let w0 = m.cwnd();
        // Slow start: +1 mean packet (375 B) per in-sequence packet.
        feed(&mut m, &mut now, &mut seq, 10, &[]);
        assert!((m.cwnd() - (w0 + 10.0 * 375.0)).abs() < 1e-6, "{}", m.cwnd());
        // A gap (seq 10) followed by two packets is not yet a loss event.
        feed(&mut m, &mut now, &mut seq, 3, &[10]);
        assert_eq!(m.loss_events, 0);
        let before = m.cwnd();
        // The third packet after the gap is: CWND and SSTHRESH become CWND / 2.
        feed(&mut m, &mut now, &mut seq, 1, &[]);
        assert_eq!(m.loss_events, 1);
        assert!((m.cwnd() - before / 2.0).abs() < 1e-6 && m.ssthresh() == m.cwnd(), "{} {}", m.cwnd(), before);
        // Congestion avoidance: +size²/CWND per packet.
        let w = m.cwnd();
        feed(&mut m, &mut now, &mut seq, 1, &[]);
        assert!((m.cwnd() - (w + 375.0 * 375.0 / w)).abs() < 1e-6);
        // Every gap confirmed by three packets is a loss event, however close to the last.
        let lose = [seq + 1];
        feed(&mut m, &mut now, &mut seq, 5, &lose);
        assert_eq!(m.loss_events, 2);
        // It asks for CWND / RTT.
        assert!((m.rate_bps() - m.cwnd() * 8.0 / 0.1).abs() < 1e-3);
    }

    #[test]
    fn mongoose_times_out_when_a_loss_leaves_under_three_packets_of_its_window() {
        let lim = Limits { min_bps: 1000.0, max_bps: 1e12 };
        let mut m = Mongoose::new(lim, 0);
        // One packet a millisecond and a round trip of one: every packet is inside the window.
        m.on_rtt(0, MS);
        let (mut now, mut seq) = (0, 0);
        // Slow start from 4 packets; rounds of one window each: 0..4, 4..12, 12..28, 28..60.
        feed(&mut m, &mut now, &mut seq, 40, &[]);
        assert_eq!(m.round, (28, 60));
        // A loss early in its round is signalled by three packets of that round: halving.
        feed(&mut m, &mut now, &mut seq, 5, &[41]);
        assert_eq!((m.loss_events, m.timeouts), (1, 0));
        // A loss with fewer than three packets of its round after it: a timeout.
        while seq < m.round.1 - 2 {
            feed(&mut m, &mut now, &mut seq, 1, &[]);
        }
        let before = m.cwnd();
        let lost = m.round.1 - 2; // one packet of its round after it
        feed(&mut m, &mut now, &mut seq, 4, &[lost]);
        assert_eq!((m.loss_events, m.timeouts), (2, 1));
        assert_eq!(m.cwnd(), 375.0, "one packet");
        // (The second packet after the gap is in sequence and grew it first, by size²/CWND.)
        let w1 = before + 375.0 * 375.0 / before;
        assert!((m.ssthresh() - w1 / 2.0).abs() < 1e-9, "{} vs {}", m.ssthresh(), w1 / 2.0);
        // For t_RTO = 4 × RTT it asks for its floor, takes no growth and no loss from what arrives.
        let until = m.idle_until_ns;
        assert_eq!(until, now - MS + 4 * MS);
        assert_eq!(m.poll(now), Some(lim.min_bps));
        let lose = [seq + 1];
        feed(&mut m, &mut now, &mut seq, 3, &lose);
        assert_eq!((m.cwnd(), m.loss_events), (375.0, 2));
        // Then slow start again: one packet per in-sequence packet.
        now = until;
        feed(&mut m, &mut now, &mut seq, 1, &[]);
        assert_eq!(m.cwnd(), 2.0 * 375.0);
        assert!(m.poll(now).is_some_and(|r| (r - 2.0 * 375.0 * 8.0 / 0.001).abs() < 1e-3));
        // A window of under four packets cannot signal a loss: a second timeout.
        let lose = [seq];
        feed(&mut m, &mut now, &mut seq, 4, &lose);
        assert_eq!((m.timeouts, m.cwnd()), (2, 375.0));
        assert_eq!(m.idle_until_ns, now - MS + 4 * MS);
    }

    #[test]
    fn mongoose_grows_no_more_in_a_round_trip_than_tcp_would() {
        // The server sends more than CWND/RTT (its floor): 20 packets within one 100 ms round
        // trip double the 4-packet window in slow start, no more.
        let mut m = Mongoose::new(Limits { min_bps: 1.0, max_bps: 1e12 }, 0);
        m.on_rtt(0, 100 * MS);
        let (mut now, mut seq) = (0, 0);
        let w0 = m.cwnd();
        feed(&mut m, &mut now, &mut seq, 20, &[]);
        assert_eq!(m.cwnd(), 2.0 * w0);
        // The next round trip doubles it again.
        now = 100 * MS;
        feed(&mut m, &mut now, &mut seq, 20, &[]);
        assert_eq!(m.cwnd(), 4.0 * w0);
        // The paper's rule counts every packet.
        let mut p = Mongoose::with_timeouts(Limits { min_bps: 1.0, max_bps: 1e12 }, 0, false);
        p.on_rtt(0, 100 * MS);
        let (mut now, mut seq) = (0, 0);
        feed(&mut p, &mut now, &mut seq, 20, &[]);
        assert_eq!(p.cwnd(), w0 + 20.0 * 375.0);
    }

    #[test]
    fn mongoose_asks_once_per_round_trip_and_within_its_limits() {
        let lim = Limits::default();
        let mut m = Mongoose::new(lim, 0);
        assert_eq!(m.poll(0), Some(lim.min_bps), "before any round-trip sample: the floor");
        m.on_rtt(0, 100 * MS);
        assert_eq!(m.poll(1), None, "the next request is a round trip later (1 s before a sample)");
        assert!(m.poll(S).is_some());
        assert_eq!(m.poll(S + 50 * MS), None);
        assert!(m.poll(S + 100 * MS).is_some());
        let (mut now, mut seq) = (0, 0);
        feed(&mut m, &mut now, &mut seq, 100_000, &[]);
        assert_eq!(m.rate_bps(), lim.max_bps, "a loss-free path takes it to the cap");
    }

    #[test]
    fn tfrc_weights_the_last_eight_intervals() {
        let mut t = Tfrc::new(Limits::default(), 0);
        // Eight closed intervals of known lengths and an open one shorter than their mean.
        t.intervals = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0].into_iter().collect();
        t.event = Some((1000, 0));
        t.highest = 1000;
        let w: f64 = TFRC_WEIGHTS.iter().sum();
        let mean = (10.0 + 20.0 + 30.0 + 40.0 + 50.0 * 0.8 + 60.0 * 0.6 + 70.0 * 0.4 + 80.0 * 0.2) / w;
        assert!((t.p() - 1.0 / mean).abs() < 1e-12, "{} {}", t.p(), 1.0 / mean);
        // A long open interval raises the mean (the intervals shift by one, the oldest drops out).
        t.highest = 1000 + 999;
        let with_open = (1000.0 + 10.0 + 20.0 + 30.0 + 40.0 * 0.8 + 50.0 * 0.6 + 60.0 * 0.4 + 70.0 * 0.2) / w;
        assert!((t.p() - 1.0 / with_open).abs() < 1e-12);
    }

    #[test]
    fn tfrc_slow_starts_then_follows_the_equation() {
        let lim = Limits { min_bps: 1.0, max_bps: 1e12 };
        let mut t = Tfrc::new(lim, 0);
        t.on_rtt(0, 100 * MS);
        let (mut now, mut seq) = (0, 0);
        // First feedback: the initial rate, W_init / R with W_init = min(4s, max(2s, 4380)).
        t.poll(0);
        assert!((t.rate_bps() - 1500.0 * 8.0 / 0.1).abs() < 1.0, "{}", t.rate_bps());
        // With packets arriving fast, it doubles once per round trip.
        let mut last = t.rate_bps();
        for k in 1..4u64 {
            feed(&mut t, &mut now, &mut seq, 100, &[]);
            t.poll(k * 100 * MS);
            assert!((t.rate_bps() / last - 2.0).abs() < 1e-6, "round {k}: {} after {last}", t.rate_bps());
            last = t.rate_bps();
        }
        // The first loss event seeds an interval from the receive rate; the rate then follows
        // the equation for that p.
        let lose = [seq + 2];
        feed(&mut t, &mut now, &mut seq, 10, &lose);
        assert!(t.p() > 0.0 && t.intervals().len() == 1);
        t.poll(now);
        let x_calc = padhye_bytes_per_s(t.mean_size, 0.1, t.p()) * 8.0;
        assert!(t.rate_bps() <= x_calc + 1e-6 && t.rate_bps() > 0.0, "{} vs {x_calc}", t.rate_bps());
        // Losses one round trip apart close intervals of the packets between them.
        let n0 = t.intervals().len();
        now += 200 * MS;
        let lose = [seq + 10];
        feed(&mut t, &mut now, &mut seq, 50, &lose);
        assert_eq!(t.intervals().len(), n0 + 1);
    }
}
