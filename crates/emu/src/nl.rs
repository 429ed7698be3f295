//! Batched rtnetlink: requests are serialized into one buffer and sent many at a time on one
//! socket; the acks are matched to requests by sequence number, so a failure names the object.
//! Interface indexes are chosen by us (RTM_NEWLINK honours `ifi_index`), so no request waits for
//! the answer of another and the whole topology goes down the socket in a few large writes.

use std::net::Ipv4Addr;
use std::os::fd::RawFd;

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{InfoBridge, InfoData, InfoKind, InfoVeth, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteScope, RouteType};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::EmuError;
use horde_impair::{LinkSpec, Loss};
use netlink_packet_core::{DefaultNla, NLM_F_REPLACE};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};

/// Requests sent per write; their acks must fit the socket's receive buffer.
const BATCH: usize = 256;

/// One rtnetlink socket, bound to the network namespace it was opened in.
pub struct Nl {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
    pending: Vec<(u32, String)>,
}

impl Nl {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> Result<Nl, EmuError> {
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(|e| EmuError::io("opening an rtnetlink socket", e))?;
        sock.bind_auto().map_err(|e| EmuError::io("binding an rtnetlink socket", e))?;
        sock.connect(&SocketAddr::new(0, 0)).map_err(|e| EmuError::io("connecting an rtnetlink socket", e))?;
        let _ = sock.set_rx_buf_sz(4 << 20);
        let _ = sock.set_ext_ack(true);
        let _ = sock.set_cap_ack(true);
        Ok(Nl { sock, seq: 0, buf: Vec::with_capacity(64 << 10), pending: Vec::new() })
    }

    fn push(&mut self, msg: RouteNetlinkMessage, flags: u16, what: String) -> Result<(), EmuError> {
        self.seq += 1;
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        header.sequence_number = self.seq;
        let mut m = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        m.finalize();
        let at = self.buf.len();
        self.buf.resize(at + m.buffer_len(), 0);
        m.serialize(&mut self.buf[at..]);
        self.pending.push((self.seq, what));
        if self.pending.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Sends what is queued and checks every ack.
    pub fn flush(&mut self) -> Result<(), EmuError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let sent = self.sock.send(&self.buf, 0).map_err(|e| EmuError::io("writing to rtnetlink", e))?;
        if sent != self.buf.len() {
            return Err(EmuError::Netlink { what: "batch".into(), msg: format!("short write ({sent} of {} bytes)", self.buf.len()) });
        }
        self.buf.clear();
        let first = self.pending[0].0;
        let mut acked = 0usize;
        let mut failure: Option<EmuError> = None;
        let mut rx = vec![0u8; 1 << 20];
        while acked < self.pending.len() {
            let n = self.sock.recv(&mut &mut rx[..], 0).map_err(|e| EmuError::io("reading rtnetlink acks", e))?;
            let mut off = 0;
            while off + 16 <= n {
                let len = u32::from_ne_bytes(rx[off..off + 4].try_into().expect("4 bytes")) as usize;
                if len < 16 || off + len > n {
                    break;
                }
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..off + len]);
                off += (len + 3) & !3;
                let Ok(msg) = msg else { continue };
                let seq = msg.header.sequence_number;
                if let NetlinkPayload::Error(e) = msg.payload {
                    acked += 1;
                    if let Some(code) = e.code {
                        if failure.is_none() {
                            let what = seq.checked_sub(first).and_then(|i| self.pending.get(i as usize)).map(|p| p.1.clone()).unwrap_or_default();
                            let err = std::io::Error::from_raw_os_error(-code.get());
                            failure = Some(EmuError::Netlink { what, msg: err.to_string() });
                        }
                    }
                }
            }
        }
        self.pending.clear();
        failure.map_or(Ok(()), Err)
    }

    /// A veth pair: `a` in this socket's namespace (optionally enslaved to bridge `master`), `b`
    /// in namespace `ns_b`, with the given interface indexes. `a` comes up; `b` must be set up
    /// afterwards from its own namespace (the kernel opens a veth only once it has its peer). (The kernel looks a given
    /// index up in the socket's namespace, so the local end must be the first one.)
    pub fn veth(&mut self, a: &str, idx_a: u32, master: Option<u32>, b: &str, idx_b: u32, ns_b: RawFd) -> Result<(), EmuError> {
        let mut peer = LinkMessage::default();
        peer.header.index = idx_b;
        // One queue each way, asked for: left to the kernel, a veth gets one per CPU and is cut
        // down to one right after it exists, which waits for an RCU grace period per end
        // (most of `up`'s idle time at 10,000 hosts).
        let queues = [LinkAttribute::NumTxQueues(1), LinkAttribute::NumRxQueues(1)];
        peer.attributes = vec![LinkAttribute::IfName(b.into()), LinkAttribute::NetNsFd(ns_b)];
        peer.attributes.extend(queues.clone());
        let mut m = LinkMessage::default();
        m.header.index = idx_a;
        m.header.flags = LinkFlags::Up;
        m.header.change_mask = LinkFlags::Up;
        m.attributes = vec![
            LinkAttribute::IfName(a.into()),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Veth), LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer)))]),
        ];
        m.attributes.extend(queues);
        if let Some(master) = master {
            m.attributes.push(LinkAttribute::Controller(master));
        }
        self.push(RouteNetlinkMessage::NewLink(m), NLM_F_CREATE | NLM_F_EXCL, format!("veth pair {a} – {b}"))
    }

    /// A VXLAN tunnel device named `name` with index `idx` in namespace `ns`, its UDP socket in
    /// this socket's namespace (the machine's: the tunnel's packets leave by its routes), to
    /// `t.remote` only (no learning, no multicast). Its MTU is an Ethernet's, as the emulated
    /// links have: the machines' network fragments the tunnel's packets where it must.
    pub fn vxlan(&mut self, name: &str, idx: u32, ns: RawFd, t: &horde_topo::partition::Tunnel) -> Result<(), EmuError> {
        let mut m = LinkMessage::default();
        m.header.index = idx;
        let data = vec![
            InfoVxlan::Id(t.vni),
            InfoVxlan::Group(t.remote),
            InfoVxlan::Local(t.local),
            InfoVxlan::Port(t.port),
            InfoVxlan::Learning(false),
            InfoVxlan::Ttl(64),
        ];
        m.attributes = vec![
            LinkAttribute::IfName(name.into()),
            LinkAttribute::NetNsFd(ns),
            LinkAttribute::Mtu(1500),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Vxlan), LinkInfo::Data(InfoData::Vxlan(data))]),
        ];
        self.push(
            RouteNetlinkMessage::NewLink(m),
            NLM_F_CREATE | NLM_F_EXCL,
            format!("VXLAN tunnel {name} (id {}) from {} to {}:{}", t.vni, t.local, t.remote, t.port),
        )
    }

    /// A bridge, up, in this socket's namespace. A hub is a bridge that never learns addresses
    /// (ageing time 0), so it floods every frame to every port.
    pub fn bridge(&mut self, name: &str, idx: u32, hub: bool) -> Result<(), EmuError> {
        let mut m = LinkMessage::default();
        m.header.index = idx;
        m.header.flags = LinkFlags::Up;
        m.header.change_mask = LinkFlags::Up;
        let mut info = vec![LinkInfo::Kind(InfoKind::Bridge)];
        if hub {
            info.push(LinkInfo::Data(InfoData::Bridge(vec![InfoBridge::AgeingTime(0)])));
        }
        m.attributes = vec![LinkAttribute::IfName(name.into()), LinkAttribute::LinkInfo(info)];
        self.push(RouteNetlinkMessage::NewLink(m), NLM_F_CREATE | NLM_F_EXCL, format!("bridge {name}"))
    }

    /// Enslaves interface `idx` to bridge `master`.
    pub fn set_master(&mut self, idx: u32, master: u32, what: &str) -> Result<(), EmuError> {
        let mut m = LinkMessage::default();
        m.header.index = idx;
        m.attributes = vec![LinkAttribute::Controller(master)];
        self.push(RouteNetlinkMessage::SetLink(m), 0, format!("attaching {what} to its bridge"))
    }

    /// Sets an interface administratively down (`up` false) or up: a veth end set down takes
    /// its peer's carrier with it, as a pulled cable would.
    pub fn set_state(&mut self, idx: u32, up: bool, what: &str) -> Result<(), EmuError> {
        let mut m = LinkMessage::default();
        m.header.index = idx;
        m.header.flags = if up { LinkFlags::Up } else { LinkFlags::empty() };
        m.header.change_mask = LinkFlags::Up;
        self.push(RouteNetlinkMessage::SetLink(m), 0, format!("setting {what} {}", if up { "up" } else { "down" }))
    }

    /// Gives interface `idx` no IPv6 addresses (`addrgenmode none`): set before its carrier
    /// comes, it never runs duplicate-address detection or router solicitation, so thousands
    /// of interfaces on a bridge stay quiet. (The emulated network is IPv4.)
    pub fn no_ipv6(&mut self, idx: u32, what: &str) -> Result<(), EmuError> {
        use netlink_packet_route::link::{AfSpecInet6, AfSpecUnspec, In6AddrGenMode};
        let mut m = LinkMessage::default();
        m.header.index = idx;
        m.attributes = vec![LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(vec![AfSpecInet6::AddrGenMode(In6AddrGenMode::None)])])];
        self.push(RouteNetlinkMessage::SetLink(m), 0, format!("turning IPv6 addresses off on {what}"))
    }

    /// The ARP table's garbage-collection thresholds (one table for every namespace: only the
    /// machine's own namespace may set them).
    pub fn arp_thresholds(&mut self, thresh2: u32, thresh3: u32) -> Result<(), EmuError> {
        use netlink_packet_route::neighbour_table::{NeighbourTableAttribute, NeighbourTableMessage};
        let mut m = NeighbourTableMessage::default();
        m.header.family = AddressFamily::Inet;
        m.attributes =
            vec![NeighbourTableAttribute::Name("arp_cache".into()), NeighbourTableAttribute::Threshold2(thresh2), NeighbourTableAttribute::Threshold3(thresh3)];
        self.push(RouteNetlinkMessage::SetNeighbourTable(m), 0, "the ARP table's limits (gc_thresh2, gc_thresh3)".into())
    }

    /// How many times the node asks for a neighbour's address on interface `idx` before giving
    /// up (the kernel's default is 3, a second apart; see `spaces::NEIGHBOUR_PROBES`).
    pub fn neighbour_probes(&mut self, idx: u32, probes: u32, what: &str) -> Result<(), EmuError> {
        use netlink_packet_route::neighbour_table::{NeighbourTableAttribute, NeighbourTableMessage, NeighbourTableParameter};
        let mut m = NeighbourTableMessage::default();
        m.header.family = AddressFamily::Inet;
        m.attributes = vec![
            NeighbourTableAttribute::Name("arp_cache".into()),
            NeighbourTableAttribute::Parms(vec![NeighbourTableParameter::Ifindex(idx), NeighbourTableParameter::McastProbes(probes)]),
        ];
        self.push(RouteNetlinkMessage::SetNeighbourTable(m), 0, format!("neighbour probes on {what}"))
    }

    /// Sets an interface up (e.g. `lo`, index 1).
    pub fn up(&mut self, idx: u32, what: &str) -> Result<(), EmuError> {
        let mut m = LinkMessage::default();
        m.header.index = idx;
        m.header.flags = LinkFlags::Up;
        m.header.change_mask = LinkFlags::Up;
        self.push(RouteNetlinkMessage::SetLink(m), 0, format!("setting {what} up"))
    }

    pub fn addr(&mut self, idx: u32, ip: Ipv4Addr, prefix: u8, what: &str) -> Result<(), EmuError> {
        let mut m = AddressMessage::default();
        m.header.family = AddressFamily::Inet;
        m.header.prefix_len = prefix;
        m.header.index = idx;
        m.attributes = vec![AddressAttribute::Local(ip.into()), AddressAttribute::Address(ip.into())];
        self.push(RouteNetlinkMessage::NewAddress(m), NLM_F_CREATE | NLM_F_EXCL, format!("address {ip}/{prefix} on {what}"))
    }

    /// An IPv6 address, without duplicate-address detection (the plan made it unique).
    pub fn addr6(&mut self, idx: u32, ip: std::net::Ipv6Addr, prefix: u8, what: &str) -> Result<(), EmuError> {
        use netlink_packet_route::address::AddressHeaderFlags;
        let mut m = AddressMessage::default();
        m.header.family = AddressFamily::Inet6;
        m.header.prefix_len = prefix;
        m.header.index = idx;
        m.header.flags = AddressHeaderFlags::Nodad;
        m.attributes = vec![AddressAttribute::Address(ip.into())];
        self.push(RouteNetlinkMessage::NewAddress(m), NLM_F_CREATE | NLM_F_EXCL, format!("address {ip}/{prefix} on {what}"))
    }

    /// A static IPv6 route (`dst` None: the default route) via a gateway, replacing one to the
    /// same destination (`replace`) or failing on it.
    pub fn route6(&mut self, dst: Option<(std::net::Ipv6Addr, u8)>, via: std::net::Ipv6Addr, replace: bool, what: &str) -> Result<(), EmuError> {
        self.static_route(dst.map(|(d, p)| (d.into(), p)), via.into(), replace, what)
    }

    /// A static route (`dst` None: the default route) via a gateway.
    pub fn route(&mut self, dst: Option<(Ipv4Addr, u8)>, via: Ipv4Addr, what: &str) -> Result<(), EmuError> {
        self.route_with(dst, via, false, what)
    }

    /// [`Nl::route`], replacing a route to the same destination (`replace`) instead of failing.
    pub fn route_with(&mut self, dst: Option<(Ipv4Addr, u8)>, via: Ipv4Addr, replace: bool, what: &str) -> Result<(), EmuError> {
        self.static_route(dst.map(|(d, p)| (d.into(), p)), via.into(), replace, what)
    }

    /// A static route of either family (the gateway's) in the main table.
    fn static_route(&mut self, dst: Option<(std::net::IpAddr, u8)>, via: std::net::IpAddr, replace: bool, what: &str) -> Result<(), EmuError> {
        let addr = |a: std::net::IpAddr| match a {
            std::net::IpAddr::V4(a) => RouteAddress::Inet(a),
            std::net::IpAddr::V6(a) => RouteAddress::Inet6(a),
        };
        let mut m = RouteMessage::default();
        m.header.address_family = if via.is_ipv6() { AddressFamily::Inet6 } else { AddressFamily::Inet };
        m.header.table = 254; // RT_TABLE_MAIN
        m.header.protocol = RouteProtocol::Static;
        m.header.scope = RouteScope::Universe;
        m.header.kind = RouteType::Unicast;
        if let Some((d, p)) = dst {
            m.header.destination_prefix_length = p;
            m.attributes.push(RouteAttribute::Destination(addr(d)));
        }
        m.attributes.push(RouteAttribute::Gateway(addr(via)));
        let to = dst.map_or("default".to_string(), |(d, p)| format!("{d}/{p}"));
        let flags = if replace { NLM_F_CREATE | NLM_F_REPLACE } else { NLM_F_CREATE | NLM_F_EXCL };
        self.push(RouteNetlinkMessage::NewRoute(m), flags, format!("route {to} via {via} on {what}"))
    }
}

/// linux/pkt_sched.h
const TCA_OPTIONS: u16 = 2;
const TCA_NETEM_CORRUPT: u16 = 4;
const TCA_NETEM_LOSS: u16 = 5;
const TCA_NETEM_RATE: u16 = 6;
const TCA_NETEM_RATE64: u16 = 8;
const TCA_NETEM_LATENCY64: u16 = 10;
const TCA_NETEM_JITTER64: u16 = 11;
const NETEM_LOSS_GE: u16 = 2;
/// netem's limit is in packets: a byte limit becomes this many full-size frames.
const FRAME_BYTES: u64 = 1514;

/// A probability as netem's 32-bit fraction.
fn prob32(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * u32::MAX as f64).round() as u32
}

fn nla(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let len = 4 + value.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(out.len() + ((4 - len % 4) % 4), 0);
}

/// netem's TCA_OPTIONS: a `struct tc_netem_qopt` followed by netlink attributes (64-bit
/// latency and jitter in ns, rate in bytes/s, Gilbert–Elliott loss, corruption).
pub fn netem_options(spec: &LinkSpec) -> Vec<u8> {
    // netem's `limit` counts every packet it holds, queued for the rate or being delayed; the
    // userspace link's queue limit counts only those waiting for the rate. So the limit is the
    // queue's frames plus what the delay holds at the rate; unbounded is as many as netem takes;
    // a link without a rate keeps netem's default (1,000).
    let in_delay = |bps: u64| (bps as u128 * spec.delay_ns as u128 / 8 / 1_000_000_000) as u64;
    let limit = match (spec.queue_limit(), spec.rate_bps) {
        _ if spec.queue_unbounded => u32::MAX as u64,
        (Some(b), Some(bps)) => (b + in_delay(bps)).div_ceil(FRAME_BYTES).max(1),
        (Some(b), None) => b.div_ceil(FRAME_BYTES).max(1),
        (None, _) => 1000,
    }
    .min(u32::MAX as u64) as u32;
    let loss = if let Loss::Random(p) = spec.loss { prob32(p) } else { 0 };
    let mut out = Vec::with_capacity(96);
    // latency, limit, loss, gap, duplicate, jitter (latency and jitter: the 64-bit attributes)
    for v in [0u32, limit, loss, 0, prob32(spec.duplicate), 0] {
        out.extend_from_slice(&v.to_ne_bytes());
    }
    nla(&mut out, TCA_NETEM_LATENCY64, &(spec.delay_ns as i64).to_ne_bytes());
    nla(&mut out, TCA_NETEM_JITTER64, &(spec.jitter_ns as i64).to_ne_bytes());
    if let Some(bps) = spec.rate_bps {
        let bytes = bps / 8;
        let mut r = Vec::with_capacity(16);
        r.extend_from_slice(&(bytes.min(u32::MAX as u64) as u32).to_ne_bytes());
        r.extend_from_slice(&[0u8; 12]); // packet_overhead, cell_size, cell_overhead
        nla(&mut out, TCA_NETEM_RATE, &r);
        if bytes >= u32::MAX as u64 {
            nla(&mut out, TCA_NETEM_RATE64, &bytes.to_ne_bytes());
        }
    }
    if let Loss::GilbertElliott { p, r, loss_bad, loss_good } = spec.loss {
        // struct tc_netem_gemodel { p, r, h, k1 }: the kernel loses in the bad state when a draw
        // exceeds h, in the good state when it is below k1.
        let mut ge = Vec::with_capacity(16);
        for v in [prob32(p), prob32(r), prob32(1.0 - loss_bad), prob32(loss_good)] {
            ge.extend_from_slice(&v.to_ne_bytes());
        }
        let mut nested = Vec::new();
        nla(&mut nested, NETEM_LOSS_GE, &ge);
        nla(&mut out, TCA_NETEM_LOSS | NLA_F_NESTED, &nested);
    }
    if spec.corrupt > 0.0 {
        let mut c = Vec::with_capacity(8);
        c.extend_from_slice(&prob32(spec.corrupt).to_ne_bytes());
        c.extend_from_slice(&0u32.to_ne_bytes());
        nla(&mut out, TCA_NETEM_CORRUPT, &c);
    }
    out
}

const NLA_F_NESTED: u16 = 1 << 15;

impl Nl {
    /// A netem root qdisc on interface `idx` of this socket's namespace (`replace`: change the
    /// one in place, as `tc qdisc replace`).
    pub fn netem(&mut self, idx: u32, spec: &LinkSpec, replace: bool, what: &str) -> Result<(), EmuError> {
        let (m, flags) = netem_request(idx, spec, replace);
        self.push(m, flags, format!("a netem qdisc on {what} (kernel path; `--userspace` avoids it)"))
    }
}

/// The request for a netem root qdisc on interface `idx`, and its flags: created once at `up`
/// (`NLM_F_EXCL`), replaced in place by `horde emu link` (`NLM_F_REPLACE`, as `tc qdisc
/// replace`: queue and counters of the old qdisc go, the link never runs without one).
pub fn netem_request(idx: u32, spec: &LinkSpec, replace: bool) -> (RouteNetlinkMessage, u16) {
    let mut m = TcMessage::default();
    m.header.index = idx as i32;
    m.header.parent = TcHandle::ROOT;
    m.header.handle = TcHandle { major: 1, minor: 0 };
    m.attributes = vec![TcAttribute::Kind("netem".into()), TcAttribute::Other(DefaultNla::new(TCA_OPTIONS, netem_options(spec)))];
    let flags = if replace { NLM_F_CREATE | NLM_F_REPLACE } else { NLM_F_CREATE | NLM_F_EXCL };
    (RouteNetlinkMessage::NewQueueDiscipline(m), flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(b: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let mut v = Vec::new();
        let mut o = 0;
        while o + 4 <= b.len() {
            let len = u16::from_ne_bytes([b[o], b[o + 1]]) as usize;
            let kind = u16::from_ne_bytes([b[o + 2], b[o + 3]]);
            v.push((kind, b[o + 4..o + len].to_vec()));
            o += (len + 3) & !3;
        }
        v
    }

    #[test]
    fn a_live_change_replaces_the_netem_qdisc_in_place() {
        let spec = LinkSpec { delay_ns: 50_000_123, loss: Loss::Random(0.02), ..LinkSpec::default() };
        let (m, flags) = netem_request(7, &spec, true);
        assert_eq!(flags & NLM_F_REPLACE, NLM_F_REPLACE, "replace in place");
        assert_eq!(flags & NLM_F_CREATE, NLM_F_CREATE);
        assert_eq!(flags & NLM_F_EXCL, 0, "not refused because one exists");
        let RouteNetlinkMessage::NewQueueDiscipline(tc) = m else { panic!("a new-qdisc request") };
        assert_eq!(tc.header.index, 7);
        assert_eq!(tc.header.parent, TcHandle::ROOT);
        assert!(tc.attributes.contains(&TcAttribute::Kind("netem".into())));
        let opts = tc
            .attributes
            .iter()
            .find_map(|a| {
                if let TcAttribute::Other(n) = a {
                    use netlink_packet_core::Nla as _;
                    let mut v = vec![0; n.value_len()];
                    n.emit_value(&mut v);
                    Some(v)
                } else {
                    None
                }
            })
            .unwrap();
        assert_eq!(opts, netem_options(&spec));
        let a = attrs(&opts[24..]);
        assert_eq!(a[0], (TCA_NETEM_LATENCY64, 50_000_123i64.to_ne_bytes().to_vec()), "nanoseconds kept");
        let (_, at_up) = netem_request(7, &spec, false);
        assert_eq!(at_up & (NLM_F_REPLACE | NLM_F_EXCL), NLM_F_EXCL, "created once at up");
    }

    #[test]
    fn netem_options_layout() {
        let spec = LinkSpec {
            rate_bps: Some(10_000_000),
            delay_ns: 20_000_000,
            jitter_ns: 5_000_000,
            loss: Loss::Random(0.01),
            duplicate: 0.5,
            queue_limit_bytes: Some(64_000),
            ..LinkSpec::default()
        };
        let b = netem_options(&spec);
        let word = |i: usize| u32::from_ne_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!(word(1), 59, "64 kB and the 25 kB that 20 ms at 10 Mbit/s hold in the delay: 59 full frames");
        let default = netem_options(&LinkSpec { queue_limit_bytes: None, ..spec.clone() });
        assert_eq!(u32::from_ne_bytes(default[4..8].try_into().unwrap()), 100, "the default queue (125 kB) and the delay's 25 kB: 100 frames");
        let unbounded = netem_options(&LinkSpec { queue_limit_bytes: None, queue_unbounded: true, ..spec.clone() });
        assert_eq!(u32::from_ne_bytes(unbounded[4..8].try_into().unwrap()), u32::MAX);
        assert_eq!(word(2), (0.01 * u32::MAX as f64).round() as u32);
        assert_eq!(word(4), (0.5 * u32::MAX as f64).round() as u32);
        let a = attrs(&b[24..]);
        assert_eq!(a[0], (TCA_NETEM_LATENCY64, 20_000_000i64.to_ne_bytes().to_vec()));
        assert_eq!(a[1], (TCA_NETEM_JITTER64, 5_000_000i64.to_ne_bytes().to_vec()));
        assert_eq!(a[2].0, TCA_NETEM_RATE);
        assert_eq!(u32::from_ne_bytes(a[2].1[..4].try_into().unwrap()), 1_250_000, "bytes per second");
        assert_eq!(a.len(), 3);

        let ge = LinkSpec { loss: Loss::GilbertElliott { p: 0.01, r: 0.25, loss_bad: 1.0, loss_good: 0.0 }, corrupt: 0.001, ..LinkSpec::default() };
        let a = attrs(&netem_options(&ge)[24..]);
        assert_eq!(a[2].0, TCA_NETEM_LOSS | NLA_F_NESTED);
        let inner = attrs(&a[2].1);
        assert_eq!(inner[0].0, NETEM_LOSS_GE);
        let w = |i: usize| u32::from_ne_bytes(inner[0].1[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!((w(0), w(1), w(2), w(3)), (prob32(0.01), prob32(0.25), 0, 0), "always lost in the bad state, never in the good");
        assert_eq!(a[3].0, TCA_NETEM_CORRUPT);
    }
}
