//! Mongoose: the client tracks a TCP-like window from the sequence numbers it receives.

use super::*;

/// Mean packet size before any packet arrived (the mean OpenSim packet, Mongoose's measurement;
/// docs/models.md §4).
pub const INITIAL_PACKET: f64 = 375.0;
/// The round-trip time assumed before the first sample (a request before it uses the floor).
/// (Also TFRC's: requests go once per round trip, within these bounds.)
pub(super) const FEEDBACK_MIN_NS: u64 = 10_000_000;
pub(super) const FEEDBACK_MAX_NS: u64 = S;

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
    pub(super) round: (u64, u64),
    prev_round: (u64, u64),
    highest: u64,
    /// A timeout's end, and the sequence numbers sent before it or during it (their losses are
    /// not counted again).
    pub(super) idle_until_ns: u64,
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
