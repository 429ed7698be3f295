//! Client throttle controllers: what rate a virtual-world client asks its server for, from the
//! packets it receives. Each is an I/O-free state machine: the shell reports every data packet
//! of the circuit (its sequence number, size and arrival time) and round-trip samples, and polls
//! for a request to send (a throttle packet). Rates are bit/s; times are nanoseconds.

//!
//! One file per controller, as quinn's `congestion/`: `opensim.rs` (the viewer's AIAD),
//! `mongoose.rs` (window tracking), `tfrc.rs` (RFC 5348); `gaps.rs` holds the sequence-gap loss
//! detector and the RTT estimate they share.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::channels::KBIT;
use crate::tcp::{padhye_bytes_per_s, padhye_inverse_p};

mod gaps;
mod mongoose;
mod opensim;
mod tfrc;

pub use gaps::*;
pub use mongoose::*;
pub use opensim::*;
pub use tfrc::*;

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
    /// The viewer's AIAD throttle around a user setting (kbit/s, 50–1500, default 500), acting
    /// every `period_s` (the viewer's 5 s; the Mongoose paper's 1 s) and never asking below
    /// `floor_kbps` (the viewer's max(0.2 × setting, 50); the paper's 50).
    Opensim {
        setting_kbps: f64,
        #[serde(default = "opensim_period_s")]
        period_s: f64,
        #[serde(default)]
        floor_kbps: Option<f64>,
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
                Ok(ThrottleKind::Opensim { setting_kbps: v, period_s: opensim_period_s(), floor_kbps: None })
            }
            ("mongoose", None) => Ok(ThrottleKind::Mongoose),
            ("mongoose-paper", None) => Ok(ThrottleKind::MongoosePaper),
            ("tfrc", None) => Ok(ThrottleKind::Tfrc),
            _ => Err(format!("`{s}`: give fixed:KBPS, opensim[:SETTING], mongoose, mongoose-paper or tfrc")),
        }
    }

    /// `--throttle-period` and `--floor` (`[regulation]`'s `throttle_period_s` and `floor_kbps`):
    /// the OpenSim throttle's period and lowest rate. Both belong to `opensim` alone — Mongoose and
    /// TFRC ask once per round trip and never below the viewer's 50 kbit/s — so with any other
    /// throttle they are refused, naming what to give instead.
    pub fn tuned(self, t: Tuning) -> Result<ThrottleKind, String> {
        if t == Tuning::default() {
            return Ok(self);
        }
        let ThrottleKind::Opensim { setting_kbps, mut period_s, mut floor_kbps } = self else {
            let what = if t.period_s.is_some() { "throttle period" } else { "floor" };
            return Err(format!(
                "the {what} belongs to the opensim throttle (mongoose and tfrc ask once per round trip, never below 50 kbit/s): give opensim[:SETTING] or leave it out"
            ));
        };
        if let Some(p) = t.period_s {
            if !(0.1..=60.0).contains(&p) {
                return Err(format!("throttle period: 0.1..=60 s (got {p}; the viewer's is 5, the Mongoose paper's 1)"));
            }
            period_s = p;
        }
        if let Some(f) = t.floor_kbps {
            let top = OpenSimThrottle::start_kbps(setting_kbps);
            if !(1.0..=top).contains(&f) {
                return Err(format!("floor: 1..={top} kbit/s for opensim:{setting_kbps} (its starting rate; got {f}; the Mongoose paper's is 50)"));
            }
            floor_kbps = Some(f);
        }
        Ok(ThrottleKind::Opensim { setting_kbps, period_s, floor_kbps })
    }

    /// How a report names it: `opensim:500`, with its period and floor when they are not the
    /// viewer's (`opensim:500 period 1s floor 50`).
    pub fn label(&self) -> String {
        match *self {
            ThrottleKind::Fixed { bps } => format!("fixed:{}", bps / 1000.0),
            ThrottleKind::Opensim { setting_kbps, period_s, floor_kbps } => {
                let mut s = format!("opensim:{setting_kbps}");
                if period_s != opensim_period_s() {
                    s += &format!(" period {period_s}s");
                }
                if let Some(f) = floor_kbps {
                    s += &format!(" floor {f}");
                }
                s
            }
            _ => self.build(Limits::default(), 0).name().to_string(),
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
            ThrottleKind::Opensim { setting_kbps, period_s, floor_kbps } => {
                Box::new(OpenSimThrottle::with_floor(setting_kbps, (period_s * 1e9) as u64, floor_kbps, now_ns))
            }
            ThrottleKind::Mongoose => Box::new(Mongoose::new(limits, now_ns)),
            ThrottleKind::MongoosePaper => Box::new(Mongoose::with_timeouts(limits, now_ns, false)),
            ThrottleKind::Tfrc => Box::new(Tfrc::new(limits, now_ns)),
        }
    }
}

fn opensim_period_s() -> f64 {
    OPENSIM_PERIOD_NS as f64 / 1e9
}

/// The OpenSim throttle's period (s) and floor (kbit/s) when not the viewer's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tuning {
    pub period_s: Option<f64>,
    pub floor_kbps: Option<f64>,
}

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

    #[test]
    fn period_and_floor_tune_opensim_alone_and_bad_values_are_refused() {
        let o = ThrottleKind::parse("opensim:500").expect("valid");
        let t = o.tuned(Tuning { period_s: Some(1.0), floor_kbps: Some(50.0) }).expect("valid");
        assert_eq!(t, ThrottleKind::Opensim { setting_kbps: 500.0, period_s: 1.0, floor_kbps: Some(50.0) });
        assert_eq!(t.label(), "opensim:500 period 1s floor 50");
        assert_eq!(o.label(), "opensim:500");
        assert_eq!(o.tuned(Tuning::default()).expect("nothing to tune"), o);
        for (k, tu, why) in [
            (o, Tuning { period_s: Some(0.0), floor_kbps: None }, "0.1..=60"),
            (o, Tuning { period_s: Some(f64::NAN), floor_kbps: None }, "0.1..=60"),
            (o, Tuning { period_s: None, floor_kbps: Some(800.0) }, "1..=750"),
            (ThrottleKind::Mongoose, Tuning { period_s: None, floor_kbps: Some(50.0) }, "floor belongs to the opensim"),
            (ThrottleKind::Tfrc, Tuning { period_s: Some(1.0), floor_kbps: None }, "period belongs to the opensim"),
        ] {
            let e = k.tuned(tu).expect_err("refused");
            assert!(e.contains(why), "{e}");
        }
        // A tuned throttle survives a plan's JSON; an old plan without the fields reads as the viewer's.
        let j = serde_json::to_string(&t).expect("serialises");
        assert_eq!(serde_json::from_str::<ThrottleKind>(&j).expect("reads"), t);
        let old: ThrottleKind = serde_json::from_str(r#"{"kind":"opensim","setting_kbps":500.0}"#).expect("reads");
        assert_eq!(old, o);
    }
}
