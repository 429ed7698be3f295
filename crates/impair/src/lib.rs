//! Link impairment as an I/O-free, seeded state machine, for the userspace link emulator (this
//! project's kernels may lack netem). Feed it each packet with its arrival time; it answers with
//! a [`Verdict`]. Time is nanoseconds, passed in: tests drive it in virtual time.
//!
//! Order of operations per packet, as in Linux netem: loss (random, or Gilbert–Elliott), then
//! duplication and corruption, then the rate limiter (a FIFO queue drained at `rate_bps`, or by
//! the delivery opportunities of a Mahimahi trace) with tail drop past its queue limit, then
//! delay plus jitter.
//!
//! Every queue is finite unless asked otherwise ([`LinkSpec::queue_limit`]): without a
//! `queue_limit_bytes`, a link with a rate (or a trace) holds 100 ms at that rate, at least ten
//! full Ethernet frames ([`default_queue_bytes`]); `queue_unbounded` is the explicit choice of
//! no limit.
//!
//! Bit errors: `ber` flips each bit of a delivered packet independently (the count drawn from
//! the binomial law of its bits, the positions uniformly among them), beside `corrupt`, which
//! flips one bit of a chosen packet. Reordering as netem's `reorder P gap G`: every G-th packet
//! (G = 1: every packet) is, with probability P, sent at once without its delay, overtaking the
//! ones delayed before it.
//!
//! Ordering: by default packets leave in order (a packet is never delivered before the one ahead
//! of it, as netem does when a rate is set); when the jitter range exceeds the packets' spacing
//! this lifts the mean delay above `delay`. `reorder = true` gives each packet its own delay
//! (netem without a rate), which keeps the mean delay exact but reorders packets.
//!
//! Architecture invariant: no clock, no socket, no global state; the same seed and inputs give
//! the same verdicts.

use std::collections::VecDeque;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Packet loss model.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub enum Loss {
    #[default]
    None,
    /// Each packet lost independently with this probability.
    Random(f64),
    /// Gilbert–Elliott: a good and a bad state. `p`: good → bad per packet; `r`: bad → good;
    /// loss probability `loss_bad` in the bad state and `loss_good` in the good one (netem
    /// `loss gemodel p r 1-h 1-k`). With `loss_bad = 1, loss_good = 0` the mean loss burst is 1/r
    /// packets and the loss rate p / (p + r).
    GilbertElliott { p: f64, r: f64, loss_bad: f64, loss_good: f64 },
}

/// How the jitter around `delay` is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Jitter {
    /// Uniform in ±jitter (netem's default).
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter` (netem `distribution normal`).
    Normal,
}

/// Mahimahi packet-delivery trace: each entry is a millisecond at which one packet of up to
/// [`Trace::MTU`] bytes may leave; the trace repeats with a period equal to its last entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    opportunities_ms: Vec<u64>,
    period_ms: u64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceError {
    /// (The line itself is not quoted: the file may not be a trace at all.)
    #[error("line {line} is not a whole number of milliseconds")]
    NotANumber { line: usize },
    #[error("line {line}: {value} ms comes before the previous line's {prev} ms; a trace must not go back in time")]
    Decreasing { line: usize, value: u64, prev: u64 },
    #[error("the trace has no delivery opportunity (no lines), or its last one is at 0 ms (a trace needs a period > 0)")]
    Empty,
}

impl Trace {
    pub const MTU: u32 = 1500;

    /// Parses Mahimahi's format: one non-negative integer (ms) per line, non-decreasing.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut v = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            let ms: u64 = t.parse().map_err(|_| TraceError::NotANumber { line: i + 1 })?;
            if let Some(&prev) = v.last() {
                if ms < prev {
                    return Err(TraceError::Decreasing { line: i + 1, value: ms, prev });
                }
            }
            v.push(ms);
        }
        let period_ms = *v.last().ok_or(TraceError::Empty)?;
        if period_ms == 0 {
            return Err(TraceError::Empty);
        }
        Ok(Trace { opportunities_ms: v, period_ms })
    }

    /// Mean capacity, bits per second (full-MTU packets).
    pub fn capacity_bps(&self) -> f64 {
        self.opportunities_ms.len() as f64 * Self::MTU as f64 * 8.0 / (self.period_ms as f64 / 1e3)
    }

    /// The `k`-th delivery opportunity over the repeating trace, in ns from its start.
    fn opportunity_ns(&self, k: u64) -> u64 {
        let n = self.opportunities_ms.len() as u64;
        ((k / n) * self.period_ms + self.opportunities_ms[(k % n) as usize]) * 1_000_000
    }

    /// Index of the first opportunity at or after `t_ns`.
    fn first_at_or_after(&self, t_ns: u64) -> u64 {
        let n = self.opportunities_ms.len() as u64;
        let period_ns = self.period_ms * 1_000_000;
        let cycle = t_ns / period_ns;
        let within_ms = (t_ns % period_ns).div_ceil(1_000_000);
        let i = self.opportunities_ms.partition_point(|&ms| ms < within_ms) as u64;
        cycle * n + i
    }
}

/// A link direction's impairments.
/// Serialisable (a link emulator's state, an experiment's metadata) except for a trace, which
/// is data read from a file and is stored by its path by whoever keeps the spec.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct LinkSpec {
    /// Serialization rate; `None` with no trace: no rate limit.
    pub rate_bps: Option<u64>,
    /// Trace-driven capacity (replaces `rate_bps`).
    #[serde(skip)]
    pub trace: Option<Arc<Trace>>,
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub jitter: Jitter,
    pub loss: Loss,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability that a packet is delivered with a bit flipped.
    pub corrupt: f64,
    /// Tail drop when the bytes waiting for the rate limiter would exceed this; `None`: the
    /// default ([`default_queue_bytes`]) unless `queue_unbounded`.
    pub queue_limit_bytes: Option<u64>,
    /// No queue limit at all, chosen explicitly (`queue = "unbounded"`): a load above the rate
    /// then grows the queue, and the delay, without bound.
    #[serde(default)]
    pub queue_unbounded: bool,
    /// Let jitter reorder packets (each packet its own delay).
    pub reorder: bool,
    /// Bit-error rate: each bit of a packet flipped independently with this probability.
    #[serde(default)]
    pub ber: f64,
    /// netem's `reorder P gap G`: an eligible packet leaves at once with this probability.
    #[serde(default)]
    pub reorder_prob: f64,
    /// Every this-many-th packet is eligible (0 or 1: every packet).
    #[serde(default)]
    pub reorder_gap: u32,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {msg}")]
pub struct SpecError {
    pub field: &'static str,
    pub msg: String,
}

impl LinkSpec {
    pub fn validate(&self) -> Result<(), SpecError> {
        let prob = |field: &'static str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(SpecError { field, msg: format!("must be a probability 0..=1 (got {v})") })
            }
        };
        prob("duplicate", self.duplicate)?;
        prob("corrupt", self.corrupt)?;
        prob("ber", self.ber)?;
        prob("reorder_prob", self.reorder_prob)?;
        if self.reorder_prob > 0.0 && self.delay_ns == 0 && self.jitter_ns == 0 {
            return Err(SpecError { field: "reorder_prob", msg: "reordering sends some packets without their delay: give the link a delay".into() });
        }
        match self.loss {
            Loss::None => {}
            Loss::Random(p) => prob("loss", p)?,
            Loss::GilbertElliott { p, r, loss_bad, loss_good } => {
                prob("loss.p", p)?;
                prob("loss.r", r)?;
                prob("loss.loss_bad", loss_bad)?;
                prob("loss.loss_good", loss_good)?;
                if r == 0.0 && p > 0.0 {
                    return Err(SpecError { field: "loss.r", msg: "must be > 0, or the bad state is never left".into() });
                }
            }
        }
        if self.rate_bps == Some(0) {
            return Err(SpecError { field: "rate", msg: "must be > 0 bit/s (omit it for no limit)".into() });
        }
        if self.rate_bps.is_some() && self.trace.is_some() {
            return Err(SpecError { field: "rate", msg: "give either a rate or a trace, not both".into() });
        }
        if self.queue_unbounded && self.queue_limit_bytes.is_some() {
            return Err(SpecError { field: "queue", msg: "give either a limit in bytes or \"unbounded\", not both".into() });
        }
        if self.queue_limit_bytes == Some(0) {
            return Err(SpecError { field: "queue", msg: "must be > 0 bytes (or \"unbounded\")".into() });
        }
        Ok(())
    }
}

/// The default queue of a link: 100 ms at its rate.
pub const DEFAULT_QUEUE_MS: u64 = 100;
/// The default queue holds at least this many bytes: ten full Ethernet frames (1,514 bytes).
pub const MIN_DEFAULT_QUEUE_BYTES: u64 = 10 * 1514;

/// The queue a link with this rate gets when none is given: [`DEFAULT_QUEUE_MS`] at the rate
/// (one 100 ms round trip's worth, the classic buffer-sizing rule), at least
/// [`MIN_DEFAULT_QUEUE_BYTES`] so a slow link still holds a burst. (netem's default, 1,000
/// packets, is 1.2 s at 10 Mbit/s and 24 s at 500 kbit/s of 1,514-byte frames: a bufferbloat.)
pub fn default_queue_bytes(rate_bps: f64) -> u64 {
    ((rate_bps * DEFAULT_QUEUE_MS as f64 / 1e3 / 8.0) as u64).max(MIN_DEFAULT_QUEUE_BYTES)
}

impl LinkSpec {
    /// The rate limiter's queue limit in bytes: the one given, else the default for the rate
    /// (or the trace's mean capacity); `None` when there is no rate limiter or the queue was
    /// asked to be unbounded.
    pub fn queue_limit(&self) -> Option<u64> {
        if self.queue_limit_bytes.is_some() {
            return self.queue_limit_bytes;
        }
        if self.queue_unbounded {
            return None;
        }
        let rate = self.rate_bps.map(|r| r as f64).or_else(|| self.trace.as_ref().map(|t| t.capacity_bps()))?;
        Some(default_queue_bytes(rate))
    }

    /// The queue limit is the default one (none given, not unbounded, a rate limiter present).
    pub fn queue_is_default(&self) -> bool {
        self.queue_limit_bytes.is_none() && !self.queue_unbounded && (self.rate_bps.is_some() || self.trace.is_some())
    }
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    Loss,
    Queue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Drop(DropReason),
    /// Deliver at `at_ns`; `copies` is 2 for a duplicated packet; `corrupt`: flip a bit;
    /// `bit_errors`: flip this many bits (see [`Link::flip_bits`]).
    Deliver {
        at_ns: u64,
        copies: u8,
        corrupt: bool,
        bit_errors: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    pub packets: u64,
    pub lost: u64,
    pub queue_drops: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub delivered: u64,
    pub delivered_bytes: u64,
    /// Bits flipped by the bit-error rate, and the packets that had any.
    pub bit_errors: u64,
    pub errored: u64,
    /// Packets sent at once by `reorder_prob`.
    pub reordered: u64,
}

/// One direction of an impaired link.
pub struct Link {
    spec: LinkSpec,
    rng: ChaCha8Rng,
    /// Departure times and sizes of packets still in the rate limiter's queue.
    queue: VecDeque<(u64, u32)>,
    queued_bytes: u64,
    busy_until_ns: u64,
    next_opportunity: u64,
    last_delivery_ns: u64,
    bad: bool,
    /// Packets since the last one reordered (netem's `gap` counter).
    since_reorder: u32,
    stats: LinkStats,
}

impl Link {
    pub fn new(spec: LinkSpec, seed: u64) -> Result<Link, SpecError> {
        spec.validate()?;
        Ok(Link {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed),
            queue: VecDeque::new(),
            queued_bytes: 0,
            busy_until_ns: 0,
            next_opportunity: 0,
            last_delivery_ns: 0,
            bad: false,
            since_reorder: 0,
            stats: LinkStats::default(),
        })
    }

    /// Changes the impairments of a running link (as `tc qdisc change`): packets already
    /// scheduled keep their times; the queue and the loss state carry over.
    pub fn set_spec(&mut self, spec: LinkSpec) -> Result<(), SpecError> {
        spec.validate()?;
        self.spec = spec;
        Ok(())
    }

    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Bytes waiting in the rate limiter's queue at `now_ns` (packets whose serialisation has
    /// not ended by then): the queue a `queue` limit applies to.
    pub fn queued_bytes(&self, now_ns: u64) -> u64 {
        self.queue.iter().filter(|(t, _)| *t > now_ns).map(|(_, l)| *l as u64).sum()
    }

    /// Decides the fate of a packet of `len` bytes arriving at `now_ns` (non-decreasing).
    pub fn on_packet(&mut self, now_ns: u64, len: u32) -> Verdict {
        self.stats.packets += 1;
        if self.lost() {
            self.stats.lost += 1;
            return Verdict::Drop(DropReason::Loss);
        }
        let copies = if self.chance(self.spec.duplicate) { 2 } else { 1 };
        let corrupt = self.chance(self.spec.corrupt);
        let Some(depart) = self.serialize(now_ns, len) else {
            self.stats.queue_drops += 1;
            return Verdict::Drop(DropReason::Queue);
        };
        let bit_errors = self.bit_errors(len);
        let at = if self.reorder_now() {
            // sent at once, ahead of what waits in the delay line
            self.stats.reordered += 1;
            depart
        } else {
            let at = (depart as i64 + self.spec.delay_ns as i64 + self.jitter()).max(depart as i64) as u64;
            let at = if self.spec.reorder { at } else { at.max(self.last_delivery_ns) };
            self.last_delivery_ns = self.last_delivery_ns.max(at);
            at
        };
        self.stats.duplicated += (copies == 2) as u64;
        self.stats.corrupted += corrupt as u64;
        self.stats.bit_errors += bit_errors as u64;
        self.stats.errored += (bit_errors > 0) as u64;
        self.stats.delivered += 1;
        self.stats.delivered_bytes += len as u64;
        Verdict::Deliver { at_ns: at, copies, corrupt, bit_errors }
    }

    /// How many of a `len`-byte packet's bits the bit-error rate flips: binomial over its bits.
    fn bit_errors(&mut self, len: u32) -> u32 {
        if self.spec.ber <= 0.0 || len == 0 {
            return 0;
        }
        use rand_distr::Distribution;
        match rand_distr::Binomial::new(len as u64 * 8, self.spec.ber) {
            Ok(b) => b.sample(&mut self.rng) as u32,
            Err(_) => 0,
        }
    }

    /// netem's reorder: every `gap`-th packet is eligible, and goes at once with `reorder_prob`.
    fn reorder_now(&mut self) -> bool {
        if self.spec.reorder_prob <= 0.0 {
            return false;
        }
        let eligible = self.spec.reorder_gap <= 1 || self.since_reorder + 1 >= self.spec.reorder_gap;
        if eligible && self.chance(self.spec.reorder_prob) {
            self.since_reorder = 0;
            true
        } else {
            self.since_reorder = self.since_reorder.saturating_add(1);
            false
        }
    }

    /// Flips `n` distinct bits of `data`, uniformly placed (the bit errors of a [`Verdict`];
    /// at most every bit).
    pub fn flip_bits(&mut self, data: &mut [u8], n: u32) {
        let bits = data.len() as u64 * 8;
        let n = (n as u64).min(bits);
        if n == 0 {
            return;
        }
        let mut seen = vec![0u64; bits.div_ceil(64) as usize];
        let mut done = 0;
        while done < n {
            let b = self.rng.random_range(0..bits);
            let (w, m) = ((b / 64) as usize, 1u64 << (b % 64));
            if seen[w] & m == 0 {
                seen[w] |= m;
                data[(b / 8) as usize] ^= 1 << (b % 8);
                done += 1;
            }
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    fn lost(&mut self) -> bool {
        match self.spec.loss {
            Loss::None => false,
            Loss::Random(p) => self.chance(p),
            Loss::GilbertElliott { p, r, loss_bad, loss_good } => {
                // The state moves first, then the packet meets it (as netem's gemodel).
                self.bad = if self.bad { !self.chance(r) } else { self.chance(p) };
                self.chance(if self.bad { loss_bad } else { loss_good })
            }
        }
    }

    fn jitter(&mut self) -> i64 {
        let j = self.spec.jitter_ns as f64;
        if j == 0.0 {
            return 0;
        }
        match self.spec.jitter {
            Jitter::Uniform => (self.rng.random::<f64>() * 2.0 - 1.0) * j,
            Jitter::Normal => {
                use rand_distr::Distribution;
                rand_distr::Normal::new(0.0, j).expect("jitter > 0").sample(&mut self.rng)
            }
        }
        .round() as i64
    }

    /// When the packet leaves the rate limiter, or `None` if the queue is full.
    fn serialize(&mut self, now: u64, len: u32) -> Option<u64> {
        while let Some(&(t, l)) = self.queue.front() {
            if t > now {
                break;
            }
            self.queue.pop_front();
            self.queued_bytes -= l as u64;
        }
        if self.spec.rate_bps.is_none() && self.spec.trace.is_none() {
            return Some(now);
        }
        if let Some(limit) = self.spec.queue_limit() {
            if self.queued_bytes + len as u64 > limit {
                return None;
            }
        }
        let depart = if let Some(trace) = &self.spec.trace {
            // One packet per opportunity (Mahimahi: up to an MTU each), in order.
            let k = self.next_opportunity.max(trace.first_at_or_after(now));
            self.next_opportunity = k + 1;
            trace.opportunity_ns(k)
        } else {
            let rate = self.spec.rate_bps.expect("checked above") as u128;
            let start = self.busy_until_ns.max(now);
            let d = start + (len as u128 * 8 * 1_000_000_000 / rate) as u64;
            self.busy_until_ns = d;
            d
        };
        self.queue.push_back((depart, len));
        self.queued_bytes += len as u64;
        Some(depart)
    }
}
