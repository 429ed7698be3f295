//! TFRC (RFC 5348) as a client throttle.

use super::*;

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
    pub(super) mean_size: f64,
    /// Closed loss intervals in packets, most recent first (at most 8).
    pub(super) intervals: VecDeque<f64>,
    /// The current loss event's start: its first lost sequence number and time.
    pub(super) event: Option<(u64, u64)>,
    pub(super) highest: u64,
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
