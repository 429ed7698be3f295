//! External nodes ([`horde_topo::external`]): an interface of this machine joins the topology.
//!
//! The interface itself moves: out of the machine's namespace into the experiment's fabric
//! namespace, where it becomes a port of its node's bridge, so frames from the emulated hosts
//! leave by it unchanged and what is beyond it (real equipment, another machine, or a veth
//! standing in for a NIC) is on the segment. Moving an interface between namespaces drops its
//! addresses and routes, so they are saved first, in the experiment's `external.json` (before
//! the interface moves: a `horde emu up` killed half-way leaves the record behind), and given
//! back by `down` and `cleanup`, which move the interface back before the namespaces go.
//!
//! An interface the machine uses (an address, a route that is not the kernel's own for an
//! address, a bridge it is a port of) is refused unless the node says `force = true`: taking it
//! would cut the machine off that network while the experiment runs.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_REPLACE, NLM_F_REQUEST};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteScope, RouteType};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use serde::{Deserialize, Serialize};

use horde_topo::Plan;

use crate::{ns, state_dir, EmuError};

const FILE: &str = "external.json";

/// What an interface had in the machine's namespace, to give back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saved {
    pub node: String,
    pub interface: String,
    pub was_up: bool,
    pub addrs: Vec<(IpAddr, u8)>,
    pub routes: Vec<SavedRoute>,
}

/// A route through the interface (not one the kernel makes for an address).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedRoute {
    pub dst: Option<(IpAddr, u8)>,
    pub gateway: Option<IpAddr>,
    pub priority: Option<u32>,
}

impl std::fmt::Display for SavedRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.dst {
            Some((a, p)) => write!(f, "{a}/{p}")?,
            None => write!(f, "default")?,
        }
        if let Some(g) = self.gateway {
            write!(f, " via {g}")?;
        }
        Ok(())
    }
}

/// The interface's state as the kernel has it.
struct LinkState {
    index: u32,
    up: bool,
    master: Option<u32>,
}

/// One rtnetlink socket for questions and single changes (the bulk builder is [`crate::nl`]).
struct Query {
    sock: Socket,
    seq: u32,
}

impl Query {
    fn open() -> Result<Query, EmuError> {
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(|e| EmuError::io("opening an rtnetlink socket", e))?;
        sock.bind_auto().map_err(|e| EmuError::io("binding an rtnetlink socket", e))?;
        sock.connect(&SocketAddr::new(0, 0)).map_err(|e| EmuError::io("connecting an rtnetlink socket", e))?;
        Ok(Query { sock, seq: 0 })
    }

    /// Sends one request; returns the messages of the answer, or the kernel's error.
    fn ask(&mut self, msg: RouteNetlinkMessage, flags: u16) -> Result<Vec<RouteNetlinkMessage>, std::io::Error> {
        self.seq += 1;
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | flags;
        header.sequence_number = self.seq;
        let mut m = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        m.finalize();
        let mut buf = vec![0u8; m.buffer_len()];
        m.serialize(&mut buf);
        self.sock.send(&buf, 0)?;
        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut out = Vec::new();
        let mut rx = vec![0u8; 1 << 16];
        loop {
            let n = self.sock.recv(&mut &mut rx[..], 0)?;
            let mut off = 0;
            while off + 16 <= n {
                let len = u32::from_ne_bytes(rx[off..off + 4].try_into().expect("4 bytes")) as usize;
                if len < 16 || off + len > n {
                    break;
                }
                let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..off + len]);
                off += (len + 3) & !3;
                let Ok(msg) = parsed else { continue };
                if msg.header.sequence_number != self.seq {
                    continue;
                }
                match msg.payload {
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => return e.code.map_or(Ok(out), |c| Err(std::io::Error::from_raw_os_error(-c.get()))),
                    NetlinkPayload::InnerMessage(m) => {
                        out.push(m);
                        if !dump {
                            return Ok(out);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn change(&mut self, msg: RouteNetlinkMessage, flags: u16, what: &str) -> Result<(), EmuError> {
        self.ask(msg, NLM_F_ACK | flags).map(|_| ()).map_err(|e| EmuError::Netlink { what: what.into(), msg: e.to_string() })
    }

    fn link(&mut self, name: &str) -> Result<Option<LinkState>, EmuError> {
        let mut m = LinkMessage::default();
        m.attributes = vec![LinkAttribute::IfName(name.into())];
        match self.ask(RouteNetlinkMessage::GetLink(m), 0) {
            Ok(v) => Ok(v.into_iter().find_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(LinkState {
                    index: l.header.index,
                    up: l.header.flags.contains(LinkFlags::Up),
                    master: l.attributes.iter().find_map(|a| if let LinkAttribute::Controller(c) = a { Some(*c) } else { None }),
                }),
                _ => None,
            })),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(EmuError::io(&format!("looking up interface {name}"), e)),
        }
    }

    /// Addresses on `index`, IPv6 link-local ones left out (the kernel makes those itself).
    fn addresses(&mut self, index: u32) -> Result<Vec<(IpAddr, u8)>, EmuError> {
        let v = self.ask(RouteNetlinkMessage::GetAddress(AddressMessage::default()), NLM_F_DUMP).map_err(|e| EmuError::io("listing addresses", e))?;
        Ok(v.into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(a) if a.header.index == index => {
                    let ip = a.attributes.iter().find_map(|x| if let AddressAttribute::Local(ip) = x { Some(*ip) } else { None });
                    let ip = ip.or_else(|| a.attributes.iter().find_map(|x| if let AddressAttribute::Address(ip) = x { Some(*ip) } else { None }))?;
                    (!matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)).then_some((ip, a.header.prefix_len))
                }
                _ => None,
            })
            .collect())
    }

    /// Routes of the main table out of `index` that the kernel did not make for an address.
    fn routes(&mut self, index: u32) -> Result<Vec<SavedRoute>, EmuError> {
        let mut out = Vec::new();
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut q = RouteMessage::default();
            q.header.address_family = family;
            let v = self.ask(RouteNetlinkMessage::GetRoute(q), NLM_F_DUMP).map_err(|e| EmuError::io("listing routes", e))?;
            for m in v {
                let RouteNetlinkMessage::NewRoute(r) = m else { continue };
                let oif = r.attributes.iter().find_map(|a| if let RouteAttribute::Oif(o) = a { Some(*o) } else { None });
                if oif != Some(index) || r.header.table != 254 || r.header.protocol == RouteProtocol::Kernel || r.header.kind != RouteType::Unicast {
                    continue;
                }
                let addr = |a: &RouteAddress| match a {
                    RouteAddress::Inet(v) => Some(IpAddr::V4(*v)),
                    RouteAddress::Inet6(v) => Some(IpAddr::V6(*v)),
                    _ => None,
                };
                let dst = r.attributes.iter().find_map(|a| if let RouteAttribute::Destination(d) = a { addr(d) } else { None });
                let dst = dst.map(|d| (d, r.header.destination_prefix_length)).filter(|(_, p)| *p > 0);
                if matches!(dst, Some((IpAddr::V6(v6), _)) if (v6.segments()[0] & 0xffc0) == 0xfe80 || v6.is_multicast()) {
                    continue;
                }
                let gateway = r.attributes.iter().find_map(|a| if let RouteAttribute::Gateway(g) = a { addr(g) } else { None });
                let priority = r.attributes.iter().find_map(|a| if let RouteAttribute::Priority(p) = a { Some(*p) } else { None });
                out.push(SavedRoute { dst, gateway, priority });
            }
        }
        Ok(out)
    }

    fn set_link(&mut self, index: u32, attrs: Vec<LinkAttribute>, up: Option<bool>, what: &str) -> Result<(), EmuError> {
        let mut m = LinkMessage::default();
        m.header.index = index;
        if let Some(up) = up {
            m.header.flags = if up { LinkFlags::Up } else { LinkFlags::empty() };
            m.header.change_mask = LinkFlags::Up;
        }
        m.attributes = attrs;
        self.change(RouteNetlinkMessage::SetLink(m), 0, what)
    }
}

/// The external nodes of a plan: (node name, interface, force).
fn externals(plan: &Plan) -> Vec<(usize, &str, bool)> {
    plan.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.away.is_none())
        .filter_map(|(i, n)| n.external.as_ref().map(|x| (i, x.interface.as_str(), x.force)))
        .collect()
}

/// Checks, in the machine's namespace (the calling thread's), that every external node's
/// interface exists and is free to take (or forced); returns what to give back later. Nothing
/// is changed.
pub(crate) fn check(plan: &Plan) -> Result<Vec<Saved>, EmuError> {
    let list = externals(plan);
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Query::open()?;
    let mut saved = Vec::new();
    for (node, ifname, force) in list {
        let name = &plan.nodes[node].name;
        let Some(st) = q.link(ifname)? else {
            return Err(EmuError::Other(format!(
                "external node `{name}`: this machine has no interface `{ifname}` (see `ip link`; an interface another experiment took is in that experiment until it goes down)"
            )));
        };
        let addrs = q.addresses(st.index)?;
        let routes = q.routes(st.index)?;
        let mut uses = Vec::new();
        if !addrs.is_empty() {
            uses.push(format!("addresses {}", addrs.iter().map(|(a, p)| format!("{a}/{p}")).collect::<Vec<_>>().join(", ")));
        }
        if !routes.is_empty() {
            uses.push(format!("routes {}", routes.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")));
        }
        if st.master.is_some() {
            uses.push("it is a port of a bridge or bond".into());
        }
        if !uses.is_empty() && !force {
            return Err(EmuError::Other(format!(
                "external node `{name}`: interface `{ifname}` is in use by this machine ({}); taking it would cut the machine off that network while the experiment runs. Use a free interface, or set `force = true` on node `{name}` to take it anyway (its addresses and routes come back on `horde emu down` and `horde emu cleanup`)",
                uses.join("; ")
            )));
        }
        saved.push(Saved { node: name.clone(), interface: ifname.to_string(), was_up: st.up, addrs, routes });
    }
    Ok(saved)
}

/// Records `saved`, then moves each interface into the fabric namespace (`fabric`), makes it a
/// port of its node's bridge (`bridge_of(node)`), and sets it up.
pub(crate) fn take(exp: &str, plan: &Plan, saved: &[Saved], fabric: &impl AsRawFd, mut bridge_of: impl FnMut(usize) -> Option<u32>) -> Result<(), EmuError> {
    if saved.is_empty() {
        return Ok(());
    }
    let p = state_dir(exp).join(FILE);
    let tmp = p.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(saved).expect("serializable")).map_err(|e| EmuError::io("writing external.json", e))?;
    std::fs::rename(&tmp, &p).map_err(|e| EmuError::io("writing external.json", e))?;
    let mut here = Query::open()?;
    let mut there = ns::within(fabric, Query::open)??;
    for s in saved {
        let node = plan.node(&s.node).expect("planned");
        let st = here.link(&s.interface)?.ok_or_else(|| EmuError::Other(format!("interface {} went away while the experiment was built", s.interface)))?;
        here.set_link(st.index, vec![LinkAttribute::NetNsFd(fabric.as_raw_fd())], None, &format!("moving {} into the experiment", s.interface))?;
        // the kernel keeps the index if it is free in the fabric, else picks one: ask again
        let moved =
            there.link(&s.interface)?.ok_or_else(|| EmuError::Other(format!("interface {} did not arrive in the experiment's namespace", s.interface)))?;
        let mut attrs = Vec::new();
        if let Some(br) = bridge_of(node) {
            attrs.push(LinkAttribute::Controller(br));
        }
        there.set_link(moved.index, attrs, Some(true), &format!("making {} a port of {}", s.interface, s.node))?;
    }
    Ok(())
}

/// What the experiment's external nodes took (empty if none, or no record).
pub fn taken(exp: &str) -> Vec<Saved> {
    std::fs::read(state_dir(exp).join(FILE)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// Moves every taken interface back from `fabric` (the experiment's fabric namespace, if it
/// still exists) into the calling thread's namespace and gives it back its state. Returns one
/// line per interface for the caller's report; an interface that cannot be found is reported,
/// not fatal (a virtual interface is deleted with its namespace).
pub(crate) fn give_back(exp: &str, fabric: Option<&impl AsRawFd>) -> Vec<String> {
    let saved = taken(exp);
    if saved.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    let home = ns::current();
    for s in &saved {
        let r = (|| -> Result<String, EmuError> {
            let home = home.as_ref().map_err(|e| EmuError::Other(e.to_string()))?;
            if let Some(fabric) = fabric {
                let mut there = ns::within(fabric, Query::open)??;
                if let Some(st) = there.link(&s.interface)? {
                    let fd: RawFd = home.as_raw_fd();
                    there.set_link(st.index, vec![LinkAttribute::NetNsFd(fd)], Some(false), &format!("giving {} back to the machine", s.interface))?;
                }
            }
            let mut here = Query::open()?;
            let Some(st) = here.link(&s.interface)? else {
                return Ok(format!("interface {} could not be given back: it is gone (a virtual interface is deleted with its namespace)", s.interface));
            };
            restore(&mut here, st.index, s)?;
            Ok(format!(
                "interface {} from the experiment: given back to the machine{}",
                s.interface,
                if s.addrs.is_empty() { String::new() } else { " with its addresses".into() }
            ))
        })();
        lines.push(r.unwrap_or_else(|e| format!("interface {}: {e}", s.interface)));
    }
    let _ = std::fs::remove_file(state_dir(exp).join(FILE));
    lines
}

/// Puts back the state, addresses and routes of an interface in this namespace (replacing
/// whatever is there of the same name, so giving back twice changes nothing).
fn restore(q: &mut Query, index: u32, s: &Saved) -> Result<(), EmuError> {
    q.set_link(index, Vec::new(), Some(s.was_up), &format!("setting {} {}", s.interface, if s.was_up { "up" } else { "down" }))?;
    for (ip, prefix) in &s.addrs {
        let mut m = AddressMessage::default();
        m.header.family = if ip.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
        m.header.prefix_len = *prefix;
        m.header.index = index;
        m.attributes = vec![AddressAttribute::Local(*ip), AddressAttribute::Address(*ip)];
        q.change(RouteNetlinkMessage::NewAddress(m), NLM_F_CREATE | NLM_F_REPLACE, &format!("address {ip}/{prefix} on {}", s.interface))?;
    }
    for r in &s.routes {
        let mut m = RouteMessage::default();
        let v4 = r.dst.map(|d| d.0.is_ipv4()).or(r.gateway.map(|g| g.is_ipv4())).unwrap_or(true);
        m.header.address_family = if v4 { AddressFamily::Inet } else { AddressFamily::Inet6 };
        m.header.table = 254;
        m.header.protocol = RouteProtocol::Static;
        m.header.scope = if r.gateway.is_some() { RouteScope::Universe } else { RouteScope::Link };
        m.header.kind = RouteType::Unicast;
        let ra = |a: IpAddr| match a {
            IpAddr::V4(v) => RouteAddress::Inet(v),
            IpAddr::V6(v) => RouteAddress::Inet6(v),
        };
        if let Some((d, p)) = r.dst {
            m.header.destination_prefix_length = p;
            m.attributes.push(RouteAttribute::Destination(ra(d)));
        }
        if let Some(g) = r.gateway {
            m.attributes.push(RouteAttribute::Gateway(ra(g)));
        }
        if let Some(p) = r.priority {
            m.attributes.push(RouteAttribute::Priority(p));
        }
        m.attributes.push(RouteAttribute::Oif(index));
        q.change(RouteNetlinkMessage::NewRoute(m), NLM_F_CREATE | NLM_F_REPLACE, &format!("route {r} on {}", s.interface))?;
    }
    Ok(())
}
