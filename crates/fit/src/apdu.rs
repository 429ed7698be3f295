//! From packets to APDUs: which endpoint is the game server, and where one application data
//! unit ends.
//!
//! - **The server**: given (`--server ADDR:PORT`; address 0.0.0.0 or :: matches any), or the
//!   endpoint with the most peers, then the most packets, then the lower port ([`Census`]).
//! - **UDP**: one datagram is one APDU.
//! - **TCP**: payload is followed per connection and direction by sequence number (what was
//!   seen before is a retransmission and is skipped); an APDU ends at a segment with PSH, at a
//!   pause longer than the gap threshold, or at FIN/RST. A sender that writes two APDUs faster
//!   than the network takes them may see them leave in one segment: from the wire they are one.
//!
//! I/O-free: packets in, APDUs out, in the order they complete (per client and direction, in
//! start-time order).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

use serde::Serialize;

use crate::capture::{Packet, L4};

/// At most this many endpoints and clients are followed; more are counted and left out.
pub const MAX_ENDPOINTS: usize = 200_000;
/// Peers counted per endpoint (enough to rank servers).
const MAX_PEERS: usize = 4096;
/// Peers remembered over all endpoints together: a crafted capture with many endpoints of
/// many peers each stays within ≈ 100 MB of census (an endpoint past the budget still counts
/// its packets; its peers are counted in `untracked`).
pub const MAX_REMEMBERED_PEERS: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Udp,
    Tcp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client → server.
    Up,
    /// Server → client.
    Down,
}

/// The server endpoint the fit is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Server {
    #[schemars(with = "String")]
    pub addr: SocketAddr,
    pub transport: Transport,
}

impl Server {
    fn matches(&self, a: SocketAddr, t: Transport) -> bool {
        t == self.transport && a.port() == self.addr.port() && (self.addr.ip().is_unspecified() || a.ip() == self.addr.ip())
    }
}

fn transport(p: &Packet) -> Transport {
    match p.l4 {
        L4::Udp => Transport::Udp,
        L4::Tcp { .. } => Transport::Tcp,
    }
}

/// Pass one: packets and distinct peers per endpoint, to pick the server. Bounded: at most
/// [`MAX_ENDPOINTS`] endpoints, [`MAX_PEERS`] peers each and [`MAX_REMEMBERED_PEERS`] in all,
/// each look-up O(1) (a crafted capture of distinct pairs took 276 MB and 14 s before).
pub struct Census {
    endpoints: HashMap<(SocketAddr, Transport), (u64, HashSet<SocketAddr>)>,
    remembered: usize,
    budget: (usize, usize),
    pub untracked: u64,
}

impl Default for Census {
    fn default() -> Self {
        Census::with_budget(MAX_ENDPOINTS, MAX_REMEMBERED_PEERS)
    }
}

impl Census {
    /// A census of at most `endpoints` endpoints and `peers` remembered peers in all.
    pub fn with_budget(endpoints: usize, peers: usize) -> Self {
        Census { endpoints: HashMap::new(), remembered: 0, budget: (endpoints, peers), untracked: 0 }
    }

    /// Peers remembered over every endpoint (never above the budget).
    pub fn remembered(&self) -> usize {
        self.remembered
    }

    pub fn see(&mut self, p: &Packet) {
        let t = transport(p);
        for (me, peer) in [(p.src, p.dst), (p.dst, p.src)] {
            let room = self.remembered < self.budget.1;
            let full = self.endpoints.len() >= self.budget.0 || !room;
            match self.endpoints.get_mut(&(me, t)) {
                Some((n, peers)) => {
                    *n += 1;
                    if peers.len() < MAX_PEERS && !peers.contains(&peer) {
                        if room {
                            peers.insert(peer);
                            self.remembered += 1;
                        } else {
                            self.untracked += 1;
                        }
                    }
                }
                None if full => self.untracked += 1,
                None => {
                    self.endpoints.insert((me, t), (1, HashSet::from([peer])));
                    self.remembered += 1;
                }
            }
        }
    }

    /// The busiest server: most peers, then most packets, then the lower port. With its peers
    /// and packets, for the report to say why.
    pub fn server(&self) -> Option<(Server, usize, u64)> {
        self.endpoints
            .iter()
            .max_by(|a, b| {
                let ((aa, _), (an, ap)) = a;
                let ((ba, _), (bn, bp)) = b;
                ap.len().cmp(&bp.len()).then(an.cmp(bn)).then(ba.port().cmp(&aa.port())).then(ba.cmp(aa))
            })
            .map(|((addr, t), (n, peers))| (Server { addr: *addr, transport: *t }, peers.len(), *n))
    }
}

/// One application data unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Apdu {
    pub direction: Direction,
    /// Index of the client (its address in [`Reassembly::clients`]).
    pub client: u32,
    /// Time of its first byte on the wire, ns since the Unix epoch.
    pub t_ns: u64,
    pub size: u64,
}

/// Counters the report shows beside the fit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Counts {
    /// Packets of other endpoints than the server's.
    pub other_flows: u64,
    /// TCP segments whose bytes were seen before.
    pub retransmissions: u64,
    /// TCP segments after a hole in the sequence (bytes the capture missed).
    pub holes: u64,
    /// Clients beyond the followed maximum.
    pub clients_left_out: u64,
    /// UDP GSO super-datagrams of Horde's (captured on the sending host before the cut), each
    /// split into the datagrams it carried.
    #[serde(default)]
    pub gso_datagrams: u64,
    /// Horde's own stream hellos and end-of-flow signals on TCP (how Horde's streams start and
    /// end, not the game's traffic): taken out of the APDUs they arrived with.
    pub horde_control: u64,
}

#[derive(Default)]
struct Stream {
    next_seq: Option<u32>,
    /// (start, bytes, last segment) of the APDU being assembled.
    open: Option<(u64, u64, u64)>,
    /// APDUs this stream has ended (Horde's hello can only be the first).
    ended: u64,
    /// What Horde's own framing says the open APDU starts with.
    starts: Start,
}

/// Horde's TCP framing (`horde_wire::stream`), seen at the start of an APDU.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Start {
    #[default]
    Apdu,
    /// The stream's 36-byte hello ('HS', version).
    Hello,
    /// An end-of-flow signal: an APDU header of length 0, then 60 bytes.
    Signal,
}

impl Start {
    fn of(head: [u8; 4], first: bool) -> Start {
        if first && head[..3] == [b'H', b'S', horde_wire::VERSION] {
            Start::Hello
        } else if head[..2] == [0, 0] {
            Start::Signal
        } else {
            Start::Apdu
        }
    }
}

/// An APDU as the game sent it: Horde's hello and signal taken out (counted).
fn game_bytes(start: Start, size: u64, counts: &mut Counts) -> Option<u64> {
    use horde_wire::stream::HELLO_LEN;
    const SIGNAL: u64 = horde_wire::stream::APDU_HEADER_LEN as u64 + 60;
    let size = match start {
        Start::Hello if size >= HELLO_LEN as u64 => {
            counts.horde_control += 1;
            size - HELLO_LEN as u64
        }
        Start::Signal if size == SIGNAL => {
            counts.horde_control += 1;
            0
        }
        _ => size,
    };
    (size > 0).then_some(size)
}

/// Pass two: APDUs of the server's flows.
pub struct Reassembly {
    server: Server,
    gap_ns: u64,
    index: HashMap<SocketAddr, u32>,
    pub clients: Vec<SocketAddr>,
    streams: HashMap<(u32, bool), Stream>,
    pub counts: Counts,
}

impl Reassembly {
    /// `gap_ns`: a pause within a TCP direction longer than this ends an APDU.
    pub fn new(server: Server, gap_ns: u64) -> Reassembly {
        Reassembly { server, gap_ns, index: HashMap::new(), clients: Vec::new(), streams: HashMap::new(), counts: Counts::default() }
    }

    /// Feeds one packet; APDUs it completes are pushed to `out`.
    pub fn push(&mut self, p: &Packet, out: &mut Vec<Apdu>) {
        let t = transport(p);
        let (direction, client) = if self.server.matches(p.dst, t) {
            (Direction::Up, p.src)
        } else if self.server.matches(p.src, t) {
            (Direction::Down, p.dst)
        } else {
            self.counts.other_flows += 1;
            return;
        };
        let Some(client) = self.client(client) else {
            return;
        };
        match p.l4 {
            L4::Udp => match p.segment.filter(|&g| g > 0 && g < p.payload) {
                // a GSO super-datagram: each of its segments is an APDU that left at this instant
                Some(g) => {
                    let mut left = p.payload;
                    while left > 0 {
                        out.push(Apdu { direction, client, t_ns: p.t_ns, size: u64::from(left.min(g)) });
                        left = left.saturating_sub(g);
                    }
                    self.counts.gso_datagrams += 1;
                }
                None => out.push(Apdu { direction, client, t_ns: p.t_ns, size: u64::from(p.payload) }),
            },
            L4::Tcp { seq, syn, fin, rst, psh } => {
                let gap = self.gap_ns;
                let counts = &mut self.counts;
                let s = self.streams.entry((client, direction == Direction::Up)).or_default();
                let flush = |s: &mut Stream, out: &mut Vec<Apdu>, counts: &mut Counts| {
                    if let Some((t_ns, size, _)) = s.open.take() {
                        s.ended += 1;
                        if let Some(size) = game_bytes(s.starts, size, counts) {
                            out.push(Apdu { direction, client, t_ns, size });
                        }
                    }
                };
                let mut seq = seq;
                let mut len = p.payload;
                if syn {
                    s.next_seq = Some(seq.wrapping_add(1));
                    seq = seq.wrapping_add(1);
                }
                if let Some(next) = s.next_seq {
                    let ahead = seq.wrapping_sub(next) as i32;
                    if ahead < 0 {
                        // bytes seen before: skip them, keep what is new
                        let old = ahead.unsigned_abs().min(len);
                        if old == len && len > 0 {
                            counts.retransmissions += 1;
                        }
                        len -= old;
                    } else if ahead > 0 && len > 0 {
                        counts.holes += 1;
                    }
                }
                if len > 0 {
                    let end = seq.wrapping_add(p.payload);
                    s.next_seq = Some(match s.next_seq {
                        Some(n) if (end.wrapping_sub(n) as i32) < 0 => n,
                        _ => end,
                    });
                    if s.open.is_some_and(|(_, _, last)| p.t_ns.saturating_sub(last) > gap) {
                        flush(s, out, counts);
                    }
                    if s.open.is_none() {
                        // only a segment that starts where the new bytes start shows its head
                        let whole = len == p.payload;
                        s.starts = if whole { Start::of(p.head, s.ended == 0) } else { Start::Apdu };
                    }
                    let open = s.open.get_or_insert((p.t_ns, 0, p.t_ns));
                    open.1 += u64::from(len);
                    open.2 = p.t_ns;
                    if psh {
                        flush(s, out, counts);
                    }
                }
                if fin || rst {
                    flush(s, out, counts);
                    if rst {
                        s.next_seq = None;
                    }
                }
            }
        }
    }

    /// APDUs still open at the end of the capture.
    pub fn finish(&mut self, out: &mut Vec<Apdu>) {
        let mut keys: Vec<(u32, bool)> = self.streams.keys().copied().collect();
        keys.sort_unstable();
        for (client, up) in keys {
            let Some(s) = self.streams.get_mut(&(client, up)) else { continue };
            if let Some((t_ns, size, _)) = s.open.take() {
                if let Some(size) = game_bytes(s.starts, size, &mut self.counts) {
                    out.push(Apdu { direction: if up { Direction::Up } else { Direction::Down }, client, t_ns, size });
                }
            }
        }
    }

    fn client(&mut self, addr: SocketAddr) -> Option<u32> {
        if let Some(i) = self.index.get(&addr) {
            return Some(*i);
        }
        if self.clients.len() >= MAX_ENDPOINTS {
            self.counts.clients_left_out += 1;
            return None;
        }
        let i = self.clients.len() as u32;
        self.index.insert(addr, i);
        self.clients.push(addr);
        Some(i)
    }
}

/// `ADDR:PORT/udp`, `ADDR:PORT/tcp`, `:PORT/udp` (any address); the transport defaults to UDP.
pub fn parse_server(text: &str) -> Result<Server, String> {
    let (addr, t) = match text.rsplit_once('/') {
        Some((a, "udp")) => (a, Transport::Udp),
        Some((a, "tcp")) => (a, Transport::Tcp),
        Some((_, other)) => return Err(format!("server {text:?}: transport {other:?} is not udp or tcp")),
        None => (text, Transport::Udp),
    };
    let addr = if let Some(port) = addr.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| format!("server {text:?}: {port:?} is not a port"))?;
        SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port)
    } else {
        addr.parse().map_err(|_| format!("server {text:?}: write ADDR:PORT[/udp|/tcp], e.g. 10.0.0.1:27960/udp or :4000/tcp"))?
    };
    Ok(Server { addr, transport: t })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(t_ms: u64, up: bool, seq: u32, len: u32, psh: bool) -> Packet {
        let (c, s): (SocketAddr, SocketAddr) = ("10.0.0.2:50000".parse().unwrap(), "10.0.0.1:4000".parse().unwrap());
        let (src, dst) = if up { (c, s) } else { (s, c) };
        Packet {
            t_ns: t_ms * 1_000_000,
            src,
            dst,
            l4: L4::Tcp { seq, syn: false, fin: false, rst: false, psh },
            payload: len,
            head: [1, 2, 3, 4],
            segment: None,
        }
    }

    #[test]
    fn tcp_apdus_end_at_push_or_a_pause_and_retransmissions_are_skipped() {
        let server = parse_server("10.0.0.1:4000/tcp").unwrap();
        let mut r = Reassembly::new(server, 5_000_000);
        let mut out = Vec::new();
        // one 3000-byte APDU in three segments, PSH on the last
        for (i, seq) in [1000u32, 2000, 3000].iter().enumerate() {
            r.push(&tcp(10, true, *seq, 1000, i == 2), &mut out);
        }
        // its last segment again (a retransmission)
        r.push(&tcp(11, true, 3000, 1000, true), &mut out);
        // two APDUs without PSH, split by a 20-ms pause
        r.push(&tcp(40, true, 4000, 100, false), &mut out);
        r.push(&tcp(60, true, 4100, 50, false), &mut out);
        r.finish(&mut out);
        let sizes: Vec<u64> = out.iter().map(|a| a.size).collect();
        assert_eq!(sizes, vec![3000, 100, 50]);
        assert_eq!(out[1].t_ns, 40_000_000);
        assert_eq!(r.counts.retransmissions, 1);
        // a segment half old, half new keeps the new half; sequence numbers wrap
        let mut r = Reassembly::new(server, 5_000_000);
        let mut out = Vec::new();
        r.push(&tcp(1, false, u32::MAX - 99, 200, true), &mut out);
        r.push(&tcp(2, false, 100, 150, true), &mut out);
        r.push(&tcp(3, false, 200, 100, true), &mut out);
        assert_eq!(out.iter().map(|a| a.size).collect::<Vec<_>>(), vec![200, 150, 50]);
        assert!(out.iter().all(|a| a.direction == Direction::Down));
    }

    #[test]
    fn the_busiest_server_has_the_most_peers() {
        let mut c = Census::default();
        let s: SocketAddr = "10.0.0.1:27960".parse().unwrap();
        for i in 0..8u16 {
            let client: SocketAddr = format!("10.0.0.{}:{}", 10 + i, 40000 + i).parse().unwrap();
            for _ in 0..10 {
                c.see(&Packet { t_ns: 0, src: client, dst: s, l4: L4::Udp, payload: 10, head: [0; 4], segment: None });
            }
        }
        let (server, peers, packets) = c.server().unwrap();
        assert_eq!((server.addr, server.transport, peers, packets), (s, Transport::Udp, 8, 80));
        assert!(parse_server("nonsense").unwrap_err().contains("ADDR:PORT"));
        assert_eq!(parse_server(":4000/tcp").unwrap().addr.port(), 4000);
        assert!(parse_server("1.2.3.4:5/sctp").is_err());
    }

    #[test]
    fn the_census_remembers_a_bounded_number_of_peers_however_many_pairs_a_capture_has() {
        // 400 endpoints talking to 400 peers each (160,000 distinct pairs) against a budget of
        // 1,000 endpoints and 5,000 peers: before, every pair was kept (320,000 peers).
        let mut c = Census::with_budget(1_000, 5_000);
        for a in 0..400u32 {
            for b in 0..400u32 {
                let src = SocketAddr::from(([10, 1, (a >> 8) as u8, a as u8], 1000));
                let dst = SocketAddr::from(([10, 2, (b >> 8) as u8, b as u8], 2000));
                c.see(&Packet { t_ns: 0, src, dst, l4: L4::Udp, payload: 10, head: [0; 4], segment: None });
            }
        }
        assert!(c.remembered() <= 5_000, "{} peers remembered", c.remembered());
        assert!(c.endpoints.len() <= 1_000);
        assert!(c.untracked > 0);
        let peers: usize = c.endpoints.values().map(|(_, p)| p.len()).sum();
        assert_eq!(peers, c.remembered());
        assert!(c.server().is_some());
    }
}
