//! Topology files and their resolution into a plan the emulator can build.
//!
//! ```toml
//! name = "access"
//! [[node]]
//! name = "client"          # with count = N: client1 .. clientN
//! kind = "host"            # host | router | switch | hub
//! count = 200
//! [[node]]
//! name = "sw"
//! kind = "switch"
//! [[link]]
//! a = "client"             # a group links every member
//! b = "sw"
//! subnet = "10.1.0.0/16"   # optional: the segment's subnet (else one is assigned)
//! delay = "5ms"            # impairments for both directions ...
//! [link.ab]                # ... or per direction (a → b, b → a)
//! rate = "10mbit"
//! ```
//!
//! Resolution: links that meet at a switch or hub form one L2 segment (switches joined by links
//! merge their segments); a link between two hosts/routers is a segment of its own. Each
//! segment gets a subnet (given, or the next free /24-or-larger from 10.0.0.0/8) and its
//! hosts/routers get addresses in order of appearance (routers first). Routers forward; a
//! router gets a static route to every subnet it is not on, via the next hop on a shortest path
//! (fewest router hops), unless it runs a routing protocol (`routing = "ospf" | "rip" | "bgp"`,
//! FRR's daemons: see [`routing`]); a host gets a default route via the first router on one of
//! its segments. Names carry the experiment id so experiments never collide.
//!
//! Architecture invariant: pure — no namespaces, sockets or files are touched here.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use horde_impair::LinkSpec;

mod change;
mod dot;
pub mod external;
pub mod partition;
mod paths;
mod services;
mod spec;
mod subnet;
pub mod v6;
pub use subnet::Subnet;
pub mod routing;
mod write;
pub use change::LinkChange;
pub use dot::{addresses, collapsed, dot, GROUP_ABOVE};
pub use paths::Crossing;
use serde::{Deserialize, Serialize};
pub use services::MAX_SERVICES;
pub use spec::{impairment, parse_bytes, parse_queue, parse_rate};
pub(crate) use spec::{percent, probability};
pub use write::{parse, render};

/// The most nodes one file may expand to (a typo in `count` must not ask for a million).
pub const MAX_NODES: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Host,
    Router,
    Switch,
    Hub,
    /// An interface of this machine joined to the topology (see [`external`]).
    External,
}

impl Kind {
    pub fn is_l2(self) -> bool {
        matches!(self, Kind::Switch | Kind::Hub | Kind::External)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    pub name: String,
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Where the console's editor draws the node (ignored by the emulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui: Option<NodeUi>,
    /// A router's routing: "static" (default), "ospf", "rip" or "bgp" (FRR's daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<routing::Protocol>,
    /// OSPF area of its interfaces, dotted or a number (default "0.0.0.0").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub area: Option<String>,
    /// BGP AS number (default: 65001 + the router's place among the routers: eBGP everywhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asn: Option<u32>,
    /// The protocol's timers: "default" (FRR's) or "fast".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timers: Option<routing::Timers>,
    /// BFD on its router-to-router links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd: Option<bool>,
    /// An external node's interface of this machine, and whether to take it while in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// The machine (agent) it runs on when the topology is brought up across machines
    /// (`horde emu up --agents`): an agent's name or its address as `--agents` gives it.
    /// Nodes without one are placed so that few links cross machines. Ignored on one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Commands started in the node when the topology comes up (a host's or router's; each a
    /// command line split as a shell splits words, not run by a shell), their output in the
    /// node's directory (`service-K.out`), ended at down. At most [`MAX_SERVICES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<Vec<String>>,
    /// The node's root file system: "host" (the machine's, default) or "overlay" (a writable
    /// layer of its own over the machine's root: what its processes write there no other node
    /// and not the machine sees; removed at down). A host's or router's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

/// A node's place in the console's topology editor: a position on a page (canvas).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeUi {
    pub x: i32,
    pub y: i32,
    /// The page (canvas) it is drawn on; the first page when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<String>,
}

/// Impairments as written (both directions, or one).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawImpair {
    /// e.g. "10mbit", "1.5gbit", "500kbit"
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// "1%", or a Gilbert–Elliott table { p = "1%", r = "25%" }
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<RawLoss>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<String>,
    /// Queue limit, e.g. "100kB", "64kB"
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Let jitter reorder packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<bool>,
    /// Bit-error rate, e.g. "1e-6" (each bit flipped independently).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ber: Option<String>,
    /// netem's reorder: an eligible packet goes at once, skipping its delay, e.g. "25%".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_prob: Option<String>,
    /// Every this-many-th packet is eligible for `reorder_prob` (default 1: every packet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_gap: Option<u32>,
    /// Mahimahi trace file (resolved by the emulator, which reads files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RawLoss {
    Percent(String),
    GilbertElliott { p: String, r: String, loss_bad: Option<String>, loss_good: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLink {
    pub a: String,
    pub b: String,
    /// Route the link through the emulator even without impairments, so `horde emu link` can
    /// impair it later.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub live: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    /// The link's routing cost (OSPF), 1..=65535, both ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<u32>,
    // Impairments for both directions (the fields of RawImpair, listed so typos are refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<RawLoss>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ber: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_prob: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_gap: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ab: Option<RawImpair>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ba: Option<RawImpair>,
}

impl RawLink {
    fn both(&self) -> RawImpair {
        RawImpair {
            rate: self.rate.clone(),
            delay: self.delay.clone(),
            jitter: self.jitter.clone(),
            loss: self.loss.clone(),
            duplicate: self.duplicate.clone(),
            corrupt: self.corrupt.clone(),
            queue: self.queue.clone(),
            reorder: self.reorder,
            ber: self.ber.clone(),
            reorder_prob: self.reorder_prob.clone(),
            reorder_gap: self.reorder_gap,
            trace: self.trace.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    pub name: String,
    /// IPv6 beside IPv4 on every host and router (dual stack; see [`v6`]): each subnet's /64
    /// and each address derived from its IPv4 one, static routes for both, OSPFv3 and RIPng
    /// beside OSPF and RIP. Off by default: at thousands of hosts, IPv6's start-up chatter
    /// (duplicate-address detection, router solicitations, MLD) floods every switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<bool>,
    #[serde(default)]
    pub node: Vec<RawNode>,
    #[serde(default)]
    pub link: Vec<RawLink>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {field}: {msg}")]
pub struct TopoError {
    pub file: String,
    pub field: String,
    pub msg: String,
}

/// One end of a link inside a node.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Port {
    pub node: usize,
    /// Interface name inside the node's namespace (or on the host for a bridge port).
    pub ifname: String,
    /// `None` on switches and hubs.
    pub addr: Option<Ipv4Addr>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlannedNode {
    pub name: String,
    pub kind: Kind,
    /// Network namespace (hosts, routers) or bridge name (switches, hubs).
    pub ns: String,
    /// A router's routing protocol; `None`: static routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<routing::RoutingPlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<external::ExternalPlan>,
    /// The machine the topology asks for (see [`RawNode::machine`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Built on another machine (its name): this machine's part of a topology across machines
    /// has no namespace or bridge for it (see [`partition::split`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub away: Option<String>,
    /// Its services' words (see [`RawNode::services`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Vec<String>>,
    /// A root file system of its own (`root = "overlay"`, see [`RawNode::root`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overlay: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlannedLink {
    pub a: Port,
    pub b: Port,
    /// Impairments a → b and b → a (default: none).
    pub ab: LinkSpec,
    pub ba: LinkSpec,
    /// Mahimahi trace paths, read by the emulator.
    pub trace_ab: Option<String>,
    pub trace_ba: Option<String>,
    pub segment: usize,
    /// Changeable while running (impaired, or `live = true`).
    pub live: bool,
    /// Routing cost (OSPF); `None`: the protocol's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<u32>,
    /// A link between this machine's part and another's: its far end is a VXLAN tunnel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<partition::Tunnel>,
}

impl PlannedLink {
    /// Whether packets on this link go through the emulator.
    pub fn impaired(&self) -> bool {
        self.live || self.ab != LinkSpec::default() || self.ba != LinkSpec::default() || self.trace_ab.is_some() || self.trace_ba.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlannedSegment {
    pub subnet: Subnet,
    /// Hosts and routers on it, with their addresses.
    pub members: Vec<(usize, Ipv4Addr)>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Route {
    pub node: usize,
    /// `None`: default route.
    pub dst: Option<Subnet>,
    pub via: Ipv4Addr,
}

/// What the emulator builds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    pub name: String,
    pub exp: String,
    pub nodes: Vec<PlannedNode>,
    pub links: Vec<PlannedLink>,
    pub segments: Vec<PlannedSegment>,
    pub routes: Vec<Route>,
    /// Every `[[node]]` entry by its name: the members of a group (`count = N`), or the one
    /// node it declares.
    pub groups: BTreeMap<String, Vec<usize>>,
    /// IPv6 beside IPv4 (see [`RawTopology::ipv6`] and [`v6`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ipv6: bool,
}

impl Plan {
    pub fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The nodes a `[[node]]` entry declared: every member of group `name`, or the single node
    /// of that name. `None` when no entry has that name (a member such as `client1` is not a
    /// group; look it up with [`Plan::node`]).
    pub fn hosts_of(&self, name: &str) -> Option<&[usize]> {
        self.groups.get(name).map(|v| v.as_slice())
    }

    /// Whether this machine builds link `li`: both ends are here, or one is and the other is
    /// a tunnel to another machine (see [`partition::split`]).
    pub fn built_here(&self, li: usize) -> bool {
        let l = &self.links[li];
        l.tunnel.is_some() || (self.nodes[l.a.node].away.is_none() && self.nodes[l.b.node].away.is_none())
    }

    /// Addresses of a node, in link order.
    pub fn addrs(&self, node: usize) -> Vec<Ipv4Addr> {
        self.links.iter().flat_map(|l| [&l.a, &l.b]).filter(|p| p.node == node).filter_map(|p| p.addr).collect()
    }

    /// IPv6 addresses of a node, in link order (none unless the topology asks for IPv6).
    pub fn addrs6(&self, node: usize) -> Vec<std::net::Ipv6Addr> {
        if !self.ipv6 {
            return Vec::new();
        }
        self.links
            .iter()
            .flat_map(|l| [(l, &l.a), (l, &l.b)])
            .filter(|(_, p)| p.node == node)
            .filter_map(|(l, p)| Some(v6::addr(&self.segments[l.segment].subnet, p.addr?)))
            .collect()
    }

    /// The IPv6 address of an IPv4 address of the plan (on one of its subnets).
    pub fn v6_of(&self, a: Ipv4Addr) -> Option<std::net::Ipv6Addr> {
        let s = self.segments.iter().find(|s| s.subnet.contains(a))?;
        Some(v6::addr(&s.subnet, a))
    }
}

/// Checks an experiment id: 1..=6 lowercase ASCII letters or digits, as `horde emu up` makes
/// them. Every name an experiment owns (namespaces, bridges, interfaces, its state directory)
/// carries its id, so an id can never be a path, be empty, or match another experiment's prefix.
pub fn check_exp_id(exp: &str) -> Result<(), String> {
    if exp.is_empty() || exp.len() > 6 || !exp.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return Err(format!("experiment id `{}` must be 1..=6 lowercase letters or digits (as `horde emu up` prints them)", exp.escape_debug()));
    }
    Ok(())
}

/// Parses and resolves a topology. `exp` is the experiment id (see [`check_exp_id`]) that every
/// namespace, bridge and interface name carries.
pub fn plan(text: &str, file: &str, exp: &str) -> Result<Plan, TopoError> {
    plan_inner(text, file, exp).map_err(|e| TopoError { field: horde_model::files::redact(&e.field, text), msg: horde_model::files::redact(&e.msg, text), ..e })
}

fn plan_inner(text: &str, file: &str, exp: &str) -> Result<Plan, TopoError> {
    let fail = |field: String, msg: String| TopoError { file: file.to_string(), field, msg };
    check_exp_id(exp).map_err(|m| fail("experiment id".into(), m))?;
    let raw: RawTopology = toml::from_str(text).map_err(|e| fail("syntax".into(), horde_model::files::toml_error(text, &e)))?;
    let (nodes, groups) = expand_nodes(&raw, &fail, exp)?;
    let mut links = Vec::new();
    let mut link_subnets: Vec<Option<Subnet>> = Vec::new();
    let mut ifcount: HashMap<usize, usize> = HashMap::new();
    for (li, l) in raw.link.iter().enumerate() {
        let at = |f: &str| format!("link {} ({} – {}): {f}", li + 1, l.a, l.b);
        // a node, a group, or one member of a group (`h1` of group `h`)
        let members = |name: &str, end: &str| -> Result<Vec<usize>, TopoError> {
            groups
                .get(name)
                .cloned()
                .or_else(|| nodes.iter().position(|n| n.name == name).map(|i| vec![i]))
                .ok_or_else(|| fail(at(end), format!("unknown node `{name}`")))
        };
        let a_members = members(&l.a, "a")?;
        let b_members = members(&l.b, "b")?;
        let pairs: Vec<(usize, usize)> = match (a_members.len(), b_members.len()) {
            (1, _) => b_members.iter().map(|b| (a_members[0], *b)).collect(),
            (_, 1) => a_members.iter().map(|a| (*a, b_members[0])).collect(),
            (x, y) if x == y => a_members.iter().copied().zip(b_members.iter().copied()).collect(),
            (x, y) => {
                return Err(fail(at("b"), format!("groups of {x} and {y} nodes cannot be paired; link a group to one node, or to a group of the same size")))
            }
        };
        let subnet = l.subnet.as_deref().map(Subnet::parse).transpose().map_err(|m| fail(at("subnet"), m))?;
        if l.cost.is_some_and(|c| !(1..=65_535).contains(&c)) {
            return Err(fail(at("cost"), "must be 1..=65535".into()));
        }
        let both = l.both();
        let ab_raw = merge(&both, l.ab.as_ref());
        let ba_raw = merge(&both, l.ba.as_ref());
        let ab = impairment(&ab_raw).map_err(|(f, m)| fail(at(&format!("ab.{f}")), m))?;
        let ba = impairment(&ba_raw).map_err(|(f, m)| fail(at(&format!("ba.{f}")), m))?;
        for (a, b) in pairs {
            if a == b {
                return Err(fail(at("b"), format!("`{}` is linked to itself", nodes[a].name)));
            }
            let port = |n: usize, ifcount: &mut HashMap<usize, usize>| {
                let k = ifcount.entry(n).or_insert(0);
                *k += 1;
                Port { node: n, ifname: format!("eth{}", *k - 1), addr: None }
            };
            let pa = port(a, &mut ifcount);
            let pb = port(b, &mut ifcount);
            links.push(PlannedLink {
                a: pa,
                b: pb,
                ab: ab.clone(),
                ba: ba.clone(),
                trace_ab: ab_raw.trace.clone(),
                trace_ba: ba_raw.trace.clone(),
                segment: 0,
                live: l.live,
                cost: l.cost,
                tunnel: None,
            });
            link_subnets.push(subnet);
        }
    }
    // Switch ports are interfaces on the host side: give them experiment-tagged names.
    let mut n_port = 0usize;
    for l in &mut links {
        for p in [&mut l.a, &mut l.b] {
            if nodes[p.node].kind.is_l2() {
                p.ifname = format!("hd{exp}p{}", base36(n_port));
                n_port += 1;
            }
        }
    }
    check_l2_loops(&nodes, &links).map_err(|(field, msg)| fail(field, msg))?;
    let segments = segments_of(&nodes, &mut links);
    let planned = address(&nodes, &mut links, &link_subnets, segments, &fail)?;
    let routes = routing::static_routes(&nodes, &planned);
    let groups = groups.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    Ok(Plan { name: raw.name, exp: exp.to_string(), nodes, links, segments: planned, routes, groups, ipv6: raw.ipv6.unwrap_or(false) })
}

/// `n` in base 36 (digits, then lowercase letters): short, interface-name-safe numbers.
pub fn base36(mut n: usize) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = Vec::new();
    loop {
        s.push(digits[n % 36]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).expect("ascii")
}

type Groups<'a> = BTreeMap<&'a str, Vec<usize>>;

fn expand_nodes<'a>(raw: &'a RawTopology, fail: &dyn Fn(String, String) -> TopoError, exp: &str) -> Result<(Vec<PlannedNode>, Groups<'a>), TopoError> {
    let mut nodes = Vec::new();
    let mut groups: Groups = BTreeMap::new();
    let mut routers = 0usize;
    for (i, n) in raw.node.iter().enumerate() {
        let at = |f: &str| format!("node {} (`{}`): {f}", i + 1, n.name);
        if n.name.is_empty() || n.name.len() > 32 || !n.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(fail(at("name"), "must be 1..=32 letters, digits, - or _".into()));
        }
        if n.machine.as_ref().is_some_and(|m| m.is_empty() || m.len() > 64 || m.chars().any(|c| c.is_control() || c.is_whitespace())) {
            return Err(fail(at("machine"), "must be an agent's name or address: 1..=64 characters, no spaces".into()));
        }
        let count = n.count.unwrap_or(1) as usize;
        if count == 0 || nodes.len() + count > MAX_NODES {
            return Err(fail(at("count"), format!("must be 1.., and all nodes together at most {MAX_NODES} (got {count})")));
        }
        if groups.contains_key(n.name.as_str()) {
            return Err(fail(at("name"), "is used twice".into()));
        }
        let mut members = Vec::new();
        for k in 0..count {
            let name = if n.count.is_some() { format!("{}{}", n.name, k + 1) } else { n.name.clone() };
            let ns = if n.kind.is_l2() { format!("hd{exp}b{}", base36(nodes.len())) } else { format!("horde-{exp}-{name}") };
            let routing = routing::resolve(n.kind, n.routing, n.area.as_deref(), n.asn, n.timers, n.bfd, routers).map_err(|(f, m)| fail(at(f), m))?;
            routers += (n.kind == Kind::Router) as usize;
            let external = external::resolve(n.kind, n.interface.as_deref(), n.force, n.count).map_err(|(f, m)| fail(at(f), m))?;
            external::check_unique(&nodes, external.as_ref()).map_err(|m| fail(at("interface"), m))?;
            let services = services::resolve(n.kind, external.is_some(), n.services.as_deref()).map_err(|(f, m)| fail(at(&f), m))?;
            let overlay = match n.root.as_deref() {
                None | Some("host") => false,
                Some("overlay") if !n.kind.is_l2() => true,
                Some("overlay") => return Err(fail(at("root"), "a switch, hub or external node has no file system; give root to a host or router".into())),
                Some(other) => {
                    return Err(fail(
                        at("root"),
                        format!("`{other}` is not a root: \"host\" (the machine's) or \"overlay\" (a writable layer of the node's own)"),
                    ))
                }
            };
            members.push(nodes.len());
            nodes.push(PlannedNode { name, kind: n.kind, ns, routing, external, machine: n.machine.clone(), away: None, services, overlay });
        }
        groups.insert(n.name.as_str(), members);
    }
    // Expanded names must not collide with other nodes (e.g. group "h" member "h1" and node "h1").
    let mut seen = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if let Some(j) = seen.insert(n.name.clone(), i) {
            return Err(fail(format!("node `{}`", n.name), format!("the name is taken twice (nodes {} and {})", j + 1, i + 1)));
        }
    }
    Ok((nodes, groups))
}

pub fn merge(both: &RawImpair, one: Option<&RawImpair>) -> RawImpair {
    let Some(o) = one else { return both.clone() };
    RawImpair {
        rate: o.rate.clone().or_else(|| both.rate.clone()),
        delay: o.delay.clone().or_else(|| both.delay.clone()),
        jitter: o.jitter.clone().or_else(|| both.jitter.clone()),
        loss: o.loss.clone().or_else(|| both.loss.clone()),
        duplicate: o.duplicate.clone().or_else(|| both.duplicate.clone()),
        corrupt: o.corrupt.clone().or_else(|| both.corrupt.clone()),
        queue: o.queue.clone().or_else(|| both.queue.clone()),
        reorder: o.reorder.or(both.reorder),
        ber: o.ber.clone().or_else(|| both.ber.clone()),
        reorder_prob: o.reorder_prob.clone().or_else(|| both.reorder_prob.clone()),
        reorder_gap: o.reorder_gap.or(both.reorder_gap),
        trace: o.trace.clone().or_else(|| both.trace.clone()),
    }
}

/// Refuses loops among switches and hubs. Horde's bridges run without STP (a spanning tree would
/// block ports for 30 s while it converges and change which path frames take), so a loop would
/// flood every broadcast forever: both CPUs in softirq until the experiment is taken down.
fn check_l2_loops(nodes: &[PlannedNode], links: &[PlannedLink]) -> Result<(), (String, String)> {
    let mut parent: Vec<usize> = (0..nodes.len()).collect();
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for (i, l) in links.iter().enumerate() {
        let (a, b) = (l.a.node, l.b.node);
        if !(nodes[a].kind.is_l2() && nodes[b].kind.is_l2()) {
            continue;
        }
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        if ra == rb {
            return Err((
                format!("link {} ({} – {})", i + 1, nodes[a].name, nodes[b].name),
                format!(
                    "closes a loop: `{}` and `{}` are already connected through other switches or hubs. Horde's bridges run without STP, so a loop would flood frames forever; remove one of the links",
                    nodes[a].name, nodes[b].name
                ),
            ));
        }
        parent[ra] = rb;
    }
    Ok(())
}

/// Groups links into L2 segments: links meeting at a switch/hub share one.
fn segments_of(nodes: &[PlannedNode], links: &mut [PlannedLink]) -> usize {
    // union-find over links, joined through switch nodes
    let mut parent: Vec<usize> = (0..links.len()).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        let mut c = x;
        while p[c] != r {
            let n = p[c];
            p[c] = r;
            c = n;
        }
        r
    }
    let mut by_switch: HashMap<usize, usize> = HashMap::new();
    for (i, l) in links.iter().enumerate() {
        for n in [l.a.node, l.b.node] {
            if nodes[n].kind.is_l2() {
                if let Some(&j) = by_switch.get(&n) {
                    let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                    parent[ri] = rj;
                } else {
                    by_switch.insert(n, i);
                }
            }
        }
    }
    let mut ids: HashMap<usize, usize> = HashMap::new();
    for (i, l) in links.iter_mut().enumerate() {
        let r = find(&mut parent, i);
        let next = ids.len();
        l.segment = *ids.entry(r).or_insert(next);
    }
    ids.len()
}

fn address(
    nodes: &[PlannedNode],
    links: &mut [PlannedLink],
    link_subnets: &[Option<Subnet>],
    n_seg: usize,
    fail: &dyn Fn(String, String) -> TopoError,
) -> Result<Vec<PlannedSegment>, TopoError> {
    // L3 members per segment, routers first, each once per segment
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n_seg];
    let mut given: Vec<Option<Subnet>> = vec![None; n_seg];
    for (i, l) in links.iter().enumerate() {
        for n in [l.a.node, l.b.node] {
            if !nodes[n].kind.is_l2() && !members[l.segment].contains(&n) {
                members[l.segment].push(n);
            }
        }
        if let Some(s) = link_subnets[i] {
            match given[l.segment] {
                Some(g) if g != s => return Err(fail(format!("link {} subnet", i + 1), format!("{s} conflicts with {g} given for the same segment"))),
                _ => given[l.segment] = Some(s),
            }
        }
    }
    for m in &mut members {
        m.sort_by_key(|n| (nodes[*n].kind != Kind::Router, *n));
    }
    // Subnets given for different segments must not overlap, identical ones included: two
    // segments with one subnet would hand out the same addresses twice.
    let given_by_seg: Vec<(usize, Subnet)> = given.iter().enumerate().filter_map(|(s, g)| g.map(|g| (s, g))).collect();
    for (i, (_, a)) in given_by_seg.iter().enumerate() {
        if let Some((_, b)) = given_by_seg[i + 1..].iter().find(|(_, b)| a.overlaps(b)) {
            let what = if a == b { "is given to two separate segments" } else { "overlaps" };
            return Err(fail(
                "subnet".into(),
                format!("{a} {what} {b}; give every segment (a switch and what hangs on it, or a point-to-point link) its own subnet"),
            ));
        }
    }
    let mut used: Vec<Subnet> = given_by_seg.iter().map(|(_, g)| *g).collect();
    let mut segs = Vec::new();
    let mut next_auto: u32 = u32::from(Ipv4Addr::new(10, 0, 0, 0));
    for s in 0..n_seg {
        let need = members[s].len() as u64;
        let subnet = match given[s] {
            Some(g) => {
                if g.capacity() < need {
                    return Err(fail("subnet".into(), format!("{g} holds {} hosts but its segment has {need}", g.capacity())));
                }
                g
            }
            None => {
                // The smallest prefix (at most /24) that holds the segment, aligned, not used.
                let mut prefix = 24u8;
                while prefix > 8 && ((1u64 << (32 - prefix)) - 2) < need {
                    prefix -= 1;
                }
                let size = 1u32 << (32 - prefix);
                loop {
                    let base = next_auto.div_ceil(size) * size;
                    let cand = Subnet { base: Ipv4Addr::from(base), prefix };
                    next_auto = base + size;
                    if u32::from(cand.base) >> 24 != 10 {
                        return Err(fail("subnet".into(), "10.0.0.0/8 is exhausted; give subnets explicitly".into()));
                    }
                    if !used.iter().any(|u| u.overlaps(&cand)) {
                        used.push(cand);
                        break cand;
                    }
                }
            }
        };
        let m = members[s].iter().enumerate().map(|(k, n)| (*n, subnet.host(k as u64))).collect();
        segs.push(PlannedSegment { subnet, members: m });
    }
    for l in links.iter_mut() {
        let seg = &segs[l.segment];
        for p in [&mut l.a, &mut l.b] {
            if !nodes[p.node].kind.is_l2() {
                p.addr = seg.members.iter().find(|(n, _)| *n == p.node).map(|(_, a)| *a);
            }
        }
    }
    Ok(segs)
}
