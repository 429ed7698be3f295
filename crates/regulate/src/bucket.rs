//! The server's regulators: which queued packet of a circuit may leave now, under the rate its
//! client asked for.
//!
//! - `per-channel` (OpenSim): one token bucket per channel at the channel's share of the rate.
//!   A channel with a backlog cannot use another's idle share: a texture burst while the task
//!   channel is quiet leaves the circuit below its allowance.
//! - `dual` (Mongoose): a parent bucket at the circuit's rate over the channel buckets. Channels
//!   with queued packets are served round robin; a channel within its own share goes first, and
//!   when none is, the parent's tokens go to the next queued channel anyway (the channel buckets
//!   limit only under contention). A circuit then uses its whole allowance while a busy channel
//!   cannot starve another's share.
//!
//! Rates are bit/s; sizes bytes; times nanoseconds, passed in.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::channels::{split, Channel};

/// A token bucket: `rate` bytes/s, holding at most `burst` bytes.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last_ns: u64,
}

impl TokenBucket {
    /// Starts full.
    pub fn new(rate_bytes_s: f64, burst: f64, now_ns: u64) -> TokenBucket {
        TokenBucket { rate: rate_bytes_s.max(0.0), burst: burst.max(0.0), tokens: burst.max(0.0), last_ns: now_ns }
    }

    pub fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            self.tokens = (self.tokens + self.rate * (now_ns - self.last_ns) as f64 / 1e9).min(self.burst);
            self.last_ns = now_ns;
        }
    }

    pub fn set(&mut self, rate_bytes_s: f64, burst: f64, now_ns: u64) {
        self.refill(now_ns);
        self.rate = rate_bytes_s.max(0.0);
        self.burst = burst.max(0.0);
        self.tokens = self.tokens.min(self.burst);
    }

    pub fn has(&self, bytes: u32) -> bool {
        self.tokens + 1e-9 >= bytes as f64
    }

    pub fn take(&mut self, bytes: u32) {
        self.tokens -= bytes as f64;
    }

    /// How long from `now_ns` until it holds `bytes` (never, if it cannot: `None`).
    pub fn wait_ns(&self, now_ns: u64, bytes: u32) -> Option<u64> {
        let since = now_ns.saturating_sub(self.last_ns) as f64 / 1e9;
        let tokens = (self.tokens + self.rate * since).min(self.burst);
        let need = bytes as f64 - tokens;
        if need <= 0.0 {
            return Some(0);
        }
        if self.rate <= 0.0 || bytes as f64 > self.burst + 1e-9 {
            return None;
        }
        Some((need / self.rate * 1e9).ceil() as u64)
    }

    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

/// Which regulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    PerChannel,
    Dual,
}

impl Mode {
    /// `per-channel` or `dual`.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "per-channel" => Some(Mode::PerChannel),
            "dual" => Some(Mode::Dual),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::PerChannel => "per-channel",
            Mode::Dual => "dual",
        }
    }
}

/// A packet waiting in a channel's queue (the regulator sees only its size; `id` is the
/// shell's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Queued {
    pub id: u64,
    pub channel: Channel,
    pub size: u32,
    pub enqueued_ns: u64,
}

/// OpenSim's token-bucket burst: 10 ms of the rate (docs/models.md §4) — but at least one
/// largest packet, or a slow channel could never send one.
pub const BURST_NS: u64 = 10_000_000;
/// The largest packet a bucket must hold (an LLUDP packet fits a 1500-byte MTU).
pub const MAX_PACKET: u32 = 1500;
/// Most packets queued per channel; past it the newest is refused (bounded memory).
pub const MAX_QUEUE: usize = 100_000;

struct Lane {
    bucket: TokenBucket,
    queue: VecDeque<Queued>,
    bytes: u64,
}

/// One circuit's regulator.
pub struct Regulator {
    mode: Mode,
    rate_bps: f64,
    burst_ns: u64,
    parent: TokenBucket,
    lanes: Vec<Lane>,
    next: usize,
}

fn burst(rate_bytes_s: f64, burst_ns: u64) -> f64 {
    (rate_bytes_s * burst_ns as f64 / 1e9).max(MAX_PACKET as f64)
}

impl Regulator {
    pub fn new(mode: Mode, rate_bps: f64, burst_ns: u64, now_ns: u64) -> Regulator {
        let shares = split(rate_bps);
        let lanes = shares
            .iter()
            .map(|&bps| Lane { bucket: TokenBucket::new(bps / 8.0, burst(bps / 8.0, burst_ns), now_ns), queue: VecDeque::new(), bytes: 0 })
            .collect();
        Regulator { mode, rate_bps, burst_ns, parent: TokenBucket::new(rate_bps / 8.0, burst(rate_bps / 8.0, burst_ns), now_ns), lanes, next: 0 }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn rate_bps(&self) -> f64 {
        self.rate_bps
    }

    /// The client asked for a new rate: the circuit's and every channel's share follow.
    pub fn set_rate(&mut self, rate_bps: f64, now_ns: u64) {
        self.rate_bps = rate_bps.max(0.0);
        let b = self.burst_ns;
        self.parent.set(self.rate_bps / 8.0, burst(self.rate_bps / 8.0, b), now_ns);
        for (lane, bps) in self.lanes.iter_mut().zip(split(self.rate_bps)) {
            lane.bucket.set(bps / 8.0, burst(bps / 8.0, b), now_ns);
        }
    }

    /// Queues a packet; false if its channel's queue is full (the packet is dropped).
    pub fn enqueue(&mut self, q: Queued) -> bool {
        let lane = &mut self.lanes[q.channel.index()];
        if lane.queue.len() >= MAX_QUEUE {
            return false;
        }
        lane.bytes += q.size as u64;
        lane.queue.push_back(q);
        true
    }

    /// Packets and bytes queued on a channel.
    pub fn queued(&self, c: Channel) -> (usize, u64) {
        let l = &self.lanes[c.index()];
        (l.queue.len(), l.bytes)
    }

    pub fn total_queued_bytes(&self) -> u64 {
        self.lanes.iter().map(|l| l.bytes).sum()
    }

    /// The next packet allowed to leave now, if any (call until `None`).
    pub fn poll(&mut self, now_ns: u64) -> Option<Queued> {
        self.parent.refill(now_ns);
        for l in &mut self.lanes {
            l.bucket.refill(now_ns);
        }
        let n = self.lanes.len();
        let order: Vec<usize> = (0..n).map(|k| (self.next + k) % n).collect();
        // Round robin over the channels whose head fits their own share (and, dual, the circuit's).
        let own = order.iter().copied().find(|&i| {
            let l = &self.lanes[i];
            l.queue.front().is_some_and(|h| l.bucket.has(h.size) && (self.mode == Mode::PerChannel || self.parent.has(h.size)))
        });
        let pick = match (own, self.mode) {
            (Some(i), _) => Some((i, true)),
            // Dual: the circuit's tokens go to the next queued channel even beyond its share.
            (None, Mode::Dual) => order.iter().copied().find(|&i| self.lanes[i].queue.front().is_some_and(|h| self.parent.has(h.size))).map(|i| (i, false)),
            (None, Mode::PerChannel) => None,
        };
        let (i, within_share) = pick?;
        let l = &mut self.lanes[i];
        let p = l.queue.pop_front().expect("a queued head");
        l.bytes -= p.size as u64;
        if within_share {
            l.bucket.take(p.size);
        }
        if self.mode == Mode::Dual {
            self.parent.take(p.size);
        }
        self.next = (i + 1) % n;
        Some(p)
    }

    /// When [`Regulator::poll`] may next give a packet (None: nothing queued, or nothing can
    /// ever leave at the current rate).
    pub fn next_ready_ns(&self, now_ns: u64) -> Option<u64> {
        let heads = self.lanes.iter().filter_map(|l| l.queue.front().map(|h| (l, h.size)));
        let wait = match self.mode {
            Mode::PerChannel => heads.filter_map(|(l, size)| l.bucket.wait_ns(now_ns, size)).min(),
            Mode::Dual => heads.filter_map(|(_, size)| self.parent.wait_ns(now_ns, size)).min(),
        };
        wait.map(|w| now_ns + w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::KBIT;

    const MS: u64 = 1_000_000;

    /// Runs a regulator for `secs`, keeping `backlog` channels' queues full of 1000-byte packets
    /// and offering `trickle` channels one packet every `trickle_ms`; bytes sent per channel.
    fn run(mode: Mode, rate_bps: f64, backlog: &[Channel], trickle: &[(Channel, u64)], secs: u64) -> [u64; 7] {
        let mut r = Regulator::new(mode, rate_bps, BURST_NS, 0);
        let mut sent = [0u64; 7];
        let mut id = 0;
        for t in (0..secs * 1000).map(|ms| ms * MS) {
            for &c in backlog {
                while r.queued(c).0 < 50 {
                    id += 1;
                    r.enqueue(Queued { id, channel: c, size: 1000, enqueued_ns: t });
                }
            }
            for &(c, every) in trickle {
                if (t / MS).is_multiple_of(every) {
                    id += 1;
                    r.enqueue(Queued { id, channel: c, size: 500, enqueued_ns: t });
                }
            }
            while let Some(p) = r.poll(t) {
                sent[p.channel.index()] += p.size as u64;
            }
        }
        sent
    }

    #[test]
    fn a_bucket_refills_at_its_rate_up_to_its_burst() {
        let mut b = TokenBucket::new(1000.0, 1500.0, 0);
        assert!(b.has(1500));
        b.take(1500);
        assert!(!b.has(1));
        assert_eq!(b.wait_ns(0, 500), Some(500 * MS));
        assert_eq!(b.wait_ns(200 * MS, 500), Some(300 * MS), "time since the last refill counts");
        b.refill(500 * MS);
        assert!(b.has(500) && !b.has(501));
        b.refill(100_000 * MS);
        assert!((b.tokens() - 1500.0).abs() < 1e-9, "capped at the burst");
        assert_eq!(b.wait_ns(100_000 * MS, 1501), None, "more than the burst never fits");
    }

    #[test]
    fn per_channel_leaves_an_idle_channels_share_unused_and_dual_uses_it() {
        // 750 kbit/s; only textures are queued.
        let rate = 750.0 * KBIT;
        let secs = 10;
        let allowance = rate / 8.0 * secs as f64;
        let pc = run(Mode::PerChannel, rate, &[Channel::Texture], &[], secs);
        let dual = run(Mode::Dual, rate, &[Channel::Texture], &[], secs);
        let texture_share = split(rate)[Channel::Texture.index()] / 8.0 * secs as f64;
        let used = |s: &[u64; 7]| s.iter().sum::<u64>() as f64 / allowance;
        // Per-channel: texture gets its share (plus its first burst), the rest stays unused.
        assert!((pc[Channel::Texture.index()] as f64 / texture_share - 1.0).abs() < 0.02, "{pc:?}");
        assert!(used(&pc) < 0.4, "per-channel used {:.2} of the allowance", used(&pc));
        // Dual: the circuit's whole allowance.
        assert!(used(&dual) > 0.97 && used(&dual) < 1.02, "dual used {:.2}", used(&dual));
    }

    #[test]
    fn dual_keeps_the_task_share_during_a_texture_burst() {
        let rate = 750.0 * KBIT;
        let secs = 10;
        let task_share = split(rate)[Channel::Task.index()] / 8.0 * secs as f64;
        // Task is backlogged too: it must get at least its share while texture takes the rest.
        let both = run(Mode::Dual, rate, &[Channel::Texture, Channel::Task], &[], secs);
        let task = both[Channel::Task.index()] as f64;
        assert!(task >= task_share * 0.98, "task got {task} of its share {task_share}");
        let all: u64 = both.iter().sum();
        assert!(all as f64 > rate / 8.0 * secs as f64 * 0.97, "the circuit is fully used: {both:?}");
        // A light task stream (500 B every 20 ms = 200 kbit/s, below its share) goes through whole
        // and promptly beside a texture backlog.
        let light = run(Mode::Dual, rate, &[Channel::Texture], &[(Channel::Task, 20)], secs);
        assert_eq!(light[Channel::Task.index()], 500 * (secs * 1000 / 20));
    }

    #[test]
    fn a_new_rate_applies_to_the_circuit_and_its_channels() {
        let mut r = Regulator::new(Mode::Dual, 100.0 * KBIT, BURST_NS, 0);
        r.set_rate(1000.0 * KBIT, 0);
        assert_eq!(r.rate_bps(), 1000.0 * KBIT);
        let mut sent = 0u64;
        for t in (0..1000).map(|ms| ms * MS) {
            while r.queued(Channel::Asset).0 < 10 {
                r.enqueue(Queued { id: 0, channel: Channel::Asset, size: 1000, enqueued_ns: t });
            }
            while let Some(p) = r.poll(t) {
                sent += p.size as u64;
            }
        }
        assert!((sent as f64 / (1000.0 * KBIT / 8.0) - 1.0).abs() < 0.03, "{sent}");
        assert_eq!(r.next_ready_ns(5000 * MS).map(|t| t >= 5000 * MS), Some(true));
        // Nothing queued: nothing to wait for.
        let empty = Regulator::new(Mode::PerChannel, 100.0 * KBIT, BURST_NS, 0);
        assert_eq!(empty.next_ready_ns(0), None);
    }

    #[test]
    fn queues_are_bounded() {
        let mut r = Regulator::new(Mode::Dual, 0.0, BURST_NS, 0);
        for i in 0..MAX_QUEUE as u64 {
            assert!(r.enqueue(Queued { id: i, channel: Channel::Wind, size: 100, enqueued_ns: 0 }));
        }
        assert!(!r.enqueue(Queued { id: 0, channel: Channel::Wind, size: 100, enqueued_ns: 0 }));
    }
}
