//! A regulated virtual-world circuit, as two I/O-free state machines: the [`Server`] end (an
//! avatar's demand per channel, the regulator at the rate the client asked for, reliable
//! packets acknowledged and resent on the resend channel) and the [`Client`] end (its throttle
//! controller fed by every data packet and by ping round trips; acknowledgements, pings and
//! throttle packets back). Datagrams in, datagrams out; time passed in. Address validation is
//! the shell's (the engine's hello/challenge handshake), so nothing here sends to an address
//! that did not ask.

pub mod demand;
pub mod wire;

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use crate::bucket::{Mode, Queued, Regulator};
use crate::channels::{split, Channel};
use crate::throttle::Throttle;
use demand::{Demand, Want};
use wire::{Packet, FLAG_RELIABLE, FLAG_RESENT};

/// A reliable packet unacknowledged this long is resent: RFC 6298's SRTT + 4·RTTVAR, at least
/// 200 ms (LLUDP resends after its own RTO; 200 ms is Linux TCP's floor), at most 3 s.
pub const RTO_MIN_NS: u64 = 200_000_000;
pub const RTO_MAX_NS: u64 = 3_000_000_000;
/// Resends of one packet before it is given up.
pub const MAX_RESENDS: u32 = 3;
/// Reliable packets awaiting an acknowledgement at most (the oldest is forgotten past it).
pub const MAX_UNACKED: usize = 65_536;
/// Packets kept queued on a backlogged channel.
const BACKLOG_DEPTH: usize = 64;

/// Per-channel counters of one end.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct ChannelStats {
    pub packets: u64,
    pub bytes: u64,
    /// Server: time from queueing to leaving (sum, count, max), ns.
    pub delay_sum_ns: u128,
    pub delay_max_ns: u64,
}

/// The server end's counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerStats {
    pub channels: [ChannelStats; 7],
    pub resent: u64,
    pub given_up: u64,
    pub throttles: u64,
    pub pings: u64,
    pub bad_packets: u64,
    pub dropped_full_queue: u64,
}

struct Unacked {
    channel: Channel,
    size: u32,
    sent_ns: u64,
    tries: u32,
}

/// One circuit's server end.
pub struct Server {
    reg: Regulator,
    demand: Demand,
    seq: u32,
    next_id: u64,
    /// What each queued id is: a new packet (channel, size, reliable) or a resend of `seq`.
    pending: HashMap<u64, (Channel, u32, bool, Option<u32>)>,
    unacked: HashMap<u32, Unacked>,
    order: VecDeque<u32>,
    srtt: Option<(f64, f64)>,
    pongs: VecDeque<(u32, u64)>,
    wants: Vec<Want>,
    pub stats: ServerStats,
    pub closed: bool,
    /// The most a throttle packet may set the circuit's rate to, bit/s.
    cap_bps: f64,
}

/// The largest rate a circuit may have when its server sets no cap: 10 Gbit/s.
pub const NO_CAP_BPS: f64 = 1e10;

/// A circuit's cap from what its join asked for (`asked_kbps`, 1000 bit/s each; 0: nothing
/// asked) and the server's own limit: the smaller.
pub fn circuit_cap_bps(asked_kbps: u32, server_cap_bps: f64) -> f64 {
    if asked_kbps == 0 {
        server_cap_bps
    } else {
        (asked_kbps as f64 * 1000.0).min(server_cap_bps)
    }
}

/// What a join asks for: the throttle's most, in kbit/s (1000 bit/s) rounded up.
pub fn asked_kbps(max_bps: f64) -> u32 {
    (max_bps / 1000.0).ceil().clamp(1.0, u32::MAX as f64) as u32
}

impl Server {
    /// The demand's script runs from `now_ns` (the circuit's start).
    pub fn new(mode: Mode, start_bps: f64, burst_ns: u64, mut demand: Demand, now_ns: u64) -> Server {
        demand.start_at(now_ns);
        Server {
            reg: Regulator::new(mode, start_bps, burst_ns, now_ns),
            demand,
            seq: 0,
            next_id: 0,
            pending: HashMap::new(),
            unacked: HashMap::new(),
            order: VecDeque::new(),
            srtt: None,
            pongs: VecDeque::new(),
            wants: Vec::new(),
            stats: ServerStats::default(),
            closed: false,
            cap_bps: NO_CAP_BPS,
        }
    }

    /// Caps the circuit: no throttle packet raises its rate above `cap_bps` (what its join asked
    /// for and the server allows, [`circuit_cap_bps`]); the start rate too.
    pub fn with_cap(mut self, cap_bps: f64, now_ns: u64) -> Server {
        self.cap_bps = cap_bps.clamp(1.0, NO_CAP_BPS);
        if self.reg.rate_bps() > self.cap_bps {
            self.reg.set_rate(self.cap_bps, now_ns);
        }
        self
    }

    /// The rate the client last asked for (the circuit's allowance), bit/s.
    pub fn rate_bps(&self) -> f64 {
        self.reg.rate_bps()
    }

    pub fn queued(&self, c: Channel) -> (usize, u64) {
        self.reg.queued(c)
    }

    pub fn demand(&self) -> &Demand {
        &self.demand
    }

    fn rto_ns(&self) -> u64 {
        match self.srtt {
            Some((s, v)) => ((s + 4.0 * v) as u64).clamp(RTO_MIN_NS, RTO_MAX_NS),
            None => RTO_MAX_NS / 3,
        }
    }

    fn enqueue(&mut self, channel: Channel, size: u32, reliable: bool, resend: Option<u32>, now_ns: u64) {
        self.next_id += 1;
        let id = self.next_id;
        if self.reg.enqueue(Queued { id, channel, size, enqueued_ns: now_ns }) {
            self.pending.insert(id, (channel, size, reliable, resend));
        } else {
            self.stats.dropped_full_queue += 1;
        }
    }

    /// A datagram from the client.
    pub fn on_datagram(&mut self, now_ns: u64, bytes: &[u8]) {
        let p = match Packet::parse(bytes) {
            Ok(p) => p,
            Err(_) => {
                self.stats.bad_packets += 1;
                return;
            }
        };
        match p {
            Packet::Ack { seqs } => {
                for s in seqs {
                    if let Some(u) = self.unacked.remove(&s) {
                        // Karn: only packets sent once give round-trip samples.
                        if u.tries == 0 {
                            let r = now_ns.saturating_sub(u.sent_ns) as f64;
                            self.srtt = Some(match self.srtt {
                                None => (r, r / 2.0),
                                Some((s, v)) => (s + (r - s) / 8.0, v + ((r - s).abs() - v) / 4.0),
                            });
                        }
                    }
                }
            }
            Packet::Throttle { bps } => {
                let total: f64 = bps.iter().map(|&b| b as f64).sum();
                self.reg.set_rate(total.min(self.cap_bps), now_ns);
                self.stats.throttles += 1;
            }
            Packet::Ping { id, t_ns } => {
                self.stats.pings += 1;
                if self.pongs.len() < 16 {
                    self.pongs.push_back((id, t_ns));
                }
            }
            Packet::Bye => self.closed = true,
            Packet::Data { .. } | Packet::Pong { .. } => self.stats.bad_packets += 1,
        }
    }

    fn refill(&mut self, now_ns: u64) {
        self.wants.clear();
        let mut wants = std::mem::take(&mut self.wants);
        self.demand.due(now_ns, 10_000, &mut wants);
        for w in wants.drain(..) {
            self.enqueue(w.channel, w.size, w.reliable, None, now_ns);
        }
        self.wants = wants;
        for c in self.demand.backlog.clone() {
            while self.reg.queued(c).0 < BACKLOG_DEPTH {
                let size = self.demand.backlog_packet.unwrap_or_else(|| self.demand.packet_size(c));
                self.enqueue(c, size, false, None, now_ns);
            }
        }
        // Resends of reliable packets whose acknowledgement is overdue.
        let rto = self.rto_ns();
        let mut checked = 0;
        while let Some(&s) = self.order.front() {
            checked += 1;
            if checked > 1024 {
                break;
            }
            let Some(u) = self.unacked.get(&s) else {
                self.order.pop_front();
                continue;
            };
            if now_ns < u.sent_ns + rto {
                break;
            }
            self.order.pop_front();
            let u = self.unacked.remove(&s).expect("present");
            if u.tries >= MAX_RESENDS {
                self.stats.given_up += 1;
                continue;
            }
            self.unacked.insert(s, Unacked { sent_ns: u64::MAX, ..u });
            let _ = u.channel;
            self.enqueue(Channel::Resend, u.size, true, Some(s), now_ns);
        }
    }

    /// The next datagram to send now, written into `buf`; false if nothing is due.
    pub fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool {
        if let Some((id, t_ns)) = self.pongs.pop_front() {
            Packet::Pong { id, t_ns }.emit(buf);
            return true;
        }
        self.refill(now_ns);
        let Some(q) = self.reg.poll(now_ns) else { return false };
        let Some((channel, size, reliable, resend)) = self.pending.remove(&q.id) else { return false };
        let delay = now_ns.saturating_sub(q.enqueued_ns);
        let st = &mut self.stats.channels[q.channel.index()];
        st.packets += 1;
        st.bytes += size as u64;
        st.delay_sum_ns += delay as u128;
        st.delay_max_ns = st.delay_max_ns.max(delay);
        let (seq, flags) = match resend {
            Some(s) => {
                self.stats.resent += 1;
                if let Some(u) = self.unacked.get_mut(&s) {
                    u.sent_ns = now_ns;
                    u.tries += 1;
                    self.order.push_back(s);
                }
                (s, FLAG_RELIABLE | FLAG_RESENT)
            }
            None => {
                self.seq = self.seq.wrapping_add(1);
                let s = self.seq;
                if reliable {
                    if self.unacked.len() >= MAX_UNACKED {
                        if let Some(old) = self.order.pop_front() {
                            self.unacked.remove(&old);
                        }
                    }
                    self.unacked.insert(s, Unacked { channel, size, sent_ns: now_ns, tries: 0 });
                    self.order.push_back(s);
                }
                (s, if reliable { FLAG_RELIABLE } else { 0 })
            }
        };
        Packet::Data { seq, channel: q.channel, flags, send_ns: now_ns, size: size as u16 }.emit(buf);
        true
    }

    /// When to call [`Server::poll_transmit`] next.
    pub fn next_ns(&self, now_ns: u64) -> u64 {
        if !self.pongs.is_empty() {
            return now_ns;
        }
        let reg = self.reg.next_ready_ns(now_ns).unwrap_or(u64::MAX);
        let resend = self.order.front().and_then(|s| self.unacked.get(s)).map_or(u64::MAX, |u| u.sent_ns.saturating_add(self.rto_ns()));
        reg.min(self.demand.next_ns()).min(resend).max(now_ns)
    }
}

/// The client end's counters.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct ClientStats {
    pub channels: [ChannelStats; 7],
    pub packets: u64,
    pub resent_received: u64,
    pub bad_packets: u64,
    pub throttles_sent: u64,
    pub acks_sent: u64,
    pub rtt_ms: Option<f64>,
    /// Data packets that carried a new sequence number, and the sequence numbers spanned from
    /// the first to the highest: the circuit's loss is 1 − fresh / span.
    pub fresh: u64,
    pub seq_span: u64,
    /// One-way delay of the last data packet (server's send time to arrival; meaningful when
    /// both ends share a clock, as emulated hosts on one machine do), ns.
    pub last_owd_ns: u64,
}

/// Between two pings (a round-trip sample each; LLUDP's StartPingCheck).
pub const PING_NS: u64 = 1_000_000_000;
/// A throttle is sent when its rate changes, and an unchanged one again after this long (the
/// server keeps the last it got; a lost one is repaired so): a viewer sends AgentThrottle when
/// its setting changes, not once a round trip (Mongoose's paper, seed 003).
pub const THROTTLE_REFRESH_NS: u64 = 5_000_000_000;
/// A rate within this fraction of the one sent last is unchanged.
pub const THROTTLE_SAME: f64 = 0.001;
/// Acknowledgements wait at most this long to be sent together.
pub const ACK_DELAY_NS: u64 = 20_000_000;

/// One circuit's client end.
pub struct Client {
    throttle: Box<dyn Throttle + Send>,
    highest: Option<u64>,
    first: Option<u64>,
    acks: Vec<u32>,
    ack_due_ns: u64,
    next_ping_ns: u64,
    ping_id: u32,
    pings: VecDeque<(u32, u64)>,
    request: Option<f64>,
    /// When an unchanged rate is sent again (none sent yet: 0, now).
    refresh_ns: u64,
    /// The rate asked for last, bit/s.
    pub requested_bps: f64,
    pub stats: ClientStats,
}

impl Client {
    pub fn new(throttle: Box<dyn Throttle + Send>, now_ns: u64) -> Client {
        let r = throttle.rate_bps();
        Client {
            throttle,
            highest: None,
            first: None,
            acks: Vec::new(),
            ack_due_ns: u64::MAX,
            next_ping_ns: now_ns,
            ping_id: 0,
            pings: VecDeque::new(),
            request: None,
            refresh_ns: 0,
            requested_bps: r,
            stats: ClientStats::default(),
        }
    }

    pub fn throttle(&self) -> &dyn Throttle {
        self.throttle.as_ref()
    }

    /// Unwraps a 32-bit sequence number against the highest so far.
    fn unwrap(&mut self, seq: u32) -> u64 {
        let s = match self.highest {
            None => seq as u64,
            Some(h) => {
                let base = h & !0xFFFF_FFFF;
                let cands = [base.wrapping_sub(1 << 32) | seq as u64, base | seq as u64, (base + (1 << 32)) | seq as u64];
                *cands.iter().min_by_key(|c| (**c as i128 - h as i128).unsigned_abs()).expect("three")
            }
        };
        self.highest = Some(self.highest.map_or(s, |h| h.max(s)));
        let first = *self.first.get_or_insert(s);
        self.stats.seq_span = self.highest.unwrap_or(s).saturating_sub(first) + 1;
        s
    }

    /// A datagram from the server.
    pub fn on_datagram(&mut self, now_ns: u64, bytes: &[u8]) {
        let p = match Packet::parse(bytes) {
            Ok(p) => p,
            Err(_) => {
                self.stats.bad_packets += 1;
                return;
            }
        };
        match p {
            Packet::Data { seq, channel, flags, send_ns, size } => {
                self.stats.packets += 1;
                let st = &mut self.stats.channels[channel.index()];
                st.packets += 1;
                st.bytes += size as u64;
                self.stats.last_owd_ns = now_ns.saturating_sub(send_ns);
                if flags & FLAG_RELIABLE != 0 {
                    if self.acks.is_empty() {
                        self.ack_due_ns = now_ns + ACK_DELAY_NS;
                    }
                    if self.acks.len() < 4 * wire::MAX_ACKS {
                        self.acks.push(seq);
                    }
                }
                if flags & FLAG_RESENT != 0 {
                    // A resend carries an old sequence number: not news to the loss tracker.
                    self.stats.resent_received += 1;
                    return;
                }
                let s = self.unwrap(seq);
                self.stats.fresh += 1;
                self.throttle.on_packet(now_ns, s, size as u32);
            }
            Packet::Pong { id, t_ns } => {
                if let Some(i) = self.pings.iter().position(|p| p.0 == id && p.1 == t_ns) {
                    self.pings.remove(i);
                    let rtt = now_ns.saturating_sub(t_ns);
                    self.stats.rtt_ms = Some(rtt as f64 / 1e6);
                    self.throttle.on_rtt(now_ns, rtt);
                }
            }
            _ => self.stats.bad_packets += 1,
        }
    }

    /// The next datagram to send now, written into `buf`; false if nothing is due.
    pub fn poll_transmit(&mut self, now_ns: u64, buf: &mut Vec<u8>) -> bool {
        if let Some(r) = self.throttle.poll(now_ns) {
            let same = (r - self.requested_bps).abs() <= THROTTLE_SAME * self.requested_bps.abs().max(1.0);
            if !same || now_ns >= self.refresh_ns {
                self.request = Some(r);
            }
        }
        if let Some(r) = self.request.take() {
            self.requested_bps = r;
            self.refresh_ns = now_ns.saturating_add(THROTTLE_REFRESH_NS);
            let shares = split(r);
            let mut bps = [0f32; 7];
            for (b, s) in bps.iter_mut().zip(shares) {
                *b = s as f32;
            }
            Packet::Throttle { bps }.emit(buf);
            self.stats.throttles_sent += 1;
            return true;
        }
        if !self.acks.is_empty() && (now_ns >= self.ack_due_ns || self.acks.len() >= wire::MAX_ACKS) {
            let n = self.acks.len().min(wire::MAX_ACKS);
            let seqs: Vec<u32> = self.acks.drain(..n).collect();
            self.ack_due_ns = if self.acks.is_empty() { u64::MAX } else { now_ns };
            Packet::Ack { seqs }.emit(buf);
            self.stats.acks_sent += 1;
            return true;
        }
        if now_ns >= self.next_ping_ns {
            self.next_ping_ns = now_ns + PING_NS;
            self.ping_id = self.ping_id.wrapping_add(1);
            if self.pings.len() >= 8 {
                self.pings.pop_front();
            }
            self.pings.push_back((self.ping_id, now_ns));
            Packet::Ping { id: self.ping_id, t_ns: now_ns }.emit(buf);
            return true;
        }
        false
    }

    /// When to call [`Client::poll_transmit`] next (at the latest: controllers poll on their
    /// own schedule, so the shell also calls it every few milliseconds).
    pub fn next_ns(&self, now_ns: u64) -> u64 {
        self.ack_due_ns.min(self.next_ping_ns).min(now_ns + 5_000_000).max(now_ns)
    }

    pub fn bye(buf: &mut Vec<u8>) {
        Packet::Bye.emit(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::demand::{parse_script, DemandModel};
    use super::*;
    use crate::channels::KBIT;
    use crate::throttle::{Limits, ThrottleKind};

    /// A circuit over a perfect 20 ms path in virtual time: the client's throttle decides, the
    /// server follows.
    fn run(kind: ThrottleKind, mode: Mode, backlog: &[Channel], secs: u64, lose_every: u64) -> (Server, Client) {
        let model = DemandModel::from_table(&super::demand::tests_table()).unwrap();
        let mut d = Demand::new(model, parse_script("0:login:walking").unwrap(), 1);
        d.backlog = backlog.to_vec();
        let mut srv = Server::new(mode, 100.0 * KBIT, crate::bucket::BURST_NS, d, 0);
        let mut cli = Client::new(kind.build(Limits::default(), 0), 0);
        let one_way = 10_000_000u64;
        let mut down: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
        let mut up: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
        let mut buf = Vec::new();
        let mut n = 0u64;
        for t in (0..secs * 10_000).map(|k| k * 100_000) {
            while srv.poll_transmit(t, &mut buf) {
                n += 1;
                if lose_every == 0 || !n.is_multiple_of(lose_every) {
                    down.push_back((t + one_way, buf.clone()));
                }
            }
            while down.front().is_some_and(|d| d.0 <= t) {
                cli.on_datagram(t, &down.pop_front().unwrap().1);
            }
            while cli.poll_transmit(t, &mut buf) {
                up.push_back((t + one_way, buf.clone()));
            }
            while up.front().is_some_and(|d| d.0 <= t) {
                srv.on_datagram(t, &up.pop_front().unwrap().1);
            }
        }
        (srv, cli)
    }

    #[test]
    fn the_server_sends_what_the_client_asks_for() {
        let (srv, cli) = run(ThrottleKind::Fixed { bps: 400.0 * KBIT }, Mode::Dual, &[Channel::Texture], 20, 0);
        assert_eq!(srv.rate_bps(), 400.0 * KBIT);
        let bytes: u64 = cli.stats.channels.iter().map(|c| c.bytes).sum();
        // 20 s at 400 kbit/s (the first 20 ms at the start rate), within the buckets' bursts.
        assert!((bytes as f64 * 8.0 / 20.0 / (400.0 * KBIT) - 1.0).abs() < 0.03, "{}", bytes as f64 * 8.0 / 20.0);
        assert!(cli.stats.rtt_ms.is_some_and(|r| (r - 20.0).abs() < 1.0), "{:?}", cli.stats.rtt_ms);
        assert_eq!(srv.stats.resent, 0, "nothing lost, nothing resent");
        assert_eq!(srv.stats.bad_packets + cli.stats.bad_packets, 0);
    }

    #[test]
    fn lost_reliable_packets_are_resent_on_the_resend_channel() {
        // Every 50th datagram lost; the demand's channels are reliable in the test table.
        let (srv, cli) = run(ThrottleKind::Fixed { bps: 300.0 * KBIT }, Mode::Dual, &[], 20, 50);
        assert!(srv.stats.resent > 0);
        assert_eq!(srv.stats.channels[Channel::Resend.index()].packets, srv.stats.resent);
        assert!(cli.stats.resent_received > 0);
        assert_eq!(srv.stats.given_up, 0, "a 2 % loss never loses one packet four times");
    }

    #[test]
    fn a_throttle_never_raises_a_circuit_above_its_cap() {
        let model = DemandModel::from_table(&super::demand::tests_table()).unwrap();
        let d = Demand::new(model, parse_script("0:login:walking").unwrap(), 1);
        let cap = circuit_cap_bps(asked_kbps(400.0 * KBIT), 1e9);
        let mut srv = Server::new(Mode::Dual, 100.0 * KBIT, crate::bucket::BURST_NS, d, 0).with_cap(cap, 0);
        let mut buf = Vec::new();
        Packet::Throttle { bps: [1e9; 7] }.emit(&mut buf);
        srv.on_datagram(1, &buf);
        assert_eq!(srv.rate_bps(), cap);
        assert!((cap - 409_600.0).abs() < 1000.0, "what the join asked for: {cap}");
        assert_eq!(circuit_cap_bps(0, 2e6), 2e6, "nothing asked: the server's limit");
        assert_eq!(circuit_cap_bps(u32::MAX, 2e6), 2e6, "asked for more than the server allows");
    }

    #[test]
    fn mongoose_climbs_to_the_cap_on_a_clean_path() {
        let (srv, cli) = run(ThrottleKind::Mongoose, Mode::Dual, &[Channel::Texture], 30, 0);
        assert!((srv.rate_bps() / Limits::default().max_bps - 1.0).abs() < 0.01, "{}", srv.rate_bps());
        assert!((2..=12).contains(&cli.stats.throttles_sent), "{} throttles: the climb, then a refresh every 5 s", cli.stats.throttles_sent);
    }

    /// Seed 003 (issue 69): Mongoose must not send an unchanged rate. At the cap the rate stops
    /// changing: 30 s more there add a refresh every 5 s, not one throttle a round trip (about
    /// 380 a minute before).
    #[test]
    fn an_unchanged_rate_is_not_sent_again_until_its_refresh() {
        let (_, short) = run(ThrottleKind::Mongoose, Mode::Dual, &[Channel::Texture], 30, 0);
        let (srv, long) = run(ThrottleKind::Mongoose, Mode::Dual, &[Channel::Texture], 60, 0);
        assert!((srv.rate_bps() / Limits::default().max_bps - 1.0).abs() < 0.01, "at the cap: {}", srv.rate_bps());
        let extra = long.stats.throttles_sent - short.stats.throttles_sent;
        assert!(extra <= 30 * 1_000_000_000 / THROTTLE_REFRESH_NS + 1, "{extra} throttles in 30 s at the cap");
    }
}
