//! How routers route: static routes computed from the topology (the default), or a routing
//! protocol (OSPF, RIP, BGP) run by FRR's daemons inside the router, configured from the plan
//! (horde-emu writes the configuration and starts the daemons).

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::{Kind, PlannedNode, PlannedSegment, Route};

/// A router's routing, as a topology file writes it (`routing = "ospf"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Routes to every subnet along fewest router hops, computed here (no daemon).
    #[default]
    Static,
    Ospf,
    Rip,
    Bgp,
}

impl Protocol {
    /// The FRR daemon that speaks it (`None` for static routing).
    pub fn daemon(self) -> Option<&'static str> {
        match self {
            Protocol::Static => None,
            Protocol::Ospf => Some("ospfd"),
            Protocol::Rip => Some("ripd"),
            Protocol::Bgp => Some("bgpd"),
        }
    }
}

/// A routing protocol's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Timers {
    /// FRR's own defaults (OSPF hello 10 s / dead 40 s; RIP update 30 s, timeout 180 s;
    /// BGP keepalive 60 s / hold 180 s).
    #[default]
    Default,
    /// Tuned for fast convergence: OSPF hello 1 s / dead 3 s; RIP update 5 s, timeout 15 s,
    /// garbage 10 s; BGP keepalive 1 s / hold 3 s.
    Fast,
}

/// What a router runs, resolved from its `[[node]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutingPlan {
    pub protocol: Protocol,
    /// OSPF area of the router's interfaces (dotted, e.g. "0.0.0.0").
    pub area: Ipv4Addr,
    /// BGP AS number.
    pub asn: u32,
    pub timers: Timers,
    /// BFD on the protocol's router-to-router links (failures seen within ~300 ms).
    pub bfd: bool,
}

/// The most a BGP AS number may be (4-byte ASNs).
const MAX_ASN: u64 = u32::MAX as u64;

/// Resolves a router's routing fields. `ordinal`: the router's place among the topology's
/// routers (its default AS number is 65001 + ordinal: every router its own AS, eBGP).
#[allow(clippy::too_many_arguments)]
pub(crate) fn resolve(
    kind: Kind,
    protocol: Option<Protocol>,
    area: Option<&str>,
    asn: Option<u32>,
    timers: Option<Timers>,
    bfd: Option<bool>,
    ordinal: usize,
) -> Result<Option<RoutingPlan>, (&'static str, String)> {
    let given = protocol.is_some() || area.is_some() || asn.is_some() || timers.is_some() || bfd.is_some();
    if kind != Kind::Router {
        return if given { Err(("routing", "routing fields are for routers (kind = \"router\")".into())) } else { Ok(None) };
    }
    let protocol = protocol.unwrap_or_default();
    if protocol == Protocol::Static {
        if area.is_some() || asn.is_some() || timers.is_some() || bfd == Some(true) {
            return Err(("routing", "area, asn, timers and bfd need a routing protocol: routing = \"ospf\", \"rip\" or \"bgp\"".into()));
        }
        return Ok(None);
    }
    if area.is_some() && protocol != Protocol::Ospf {
        return Err(("area", "an area is OSPF's (routing = \"ospf\")".into()));
    }
    if asn.is_some() && protocol != Protocol::Bgp {
        return Err(("asn", "an AS number is BGP's (routing = \"bgp\")".into()));
    }
    let area = match area {
        None => Ipv4Addr::UNSPECIFIED,
        Some(a) => match (a.parse::<Ipv4Addr>(), a.parse::<u32>()) {
            (Ok(ip), _) => ip,
            (_, Ok(n)) => Ipv4Addr::from(n),
            _ => return Err(("area", format!("`{a}` is not an OSPF area: write it dotted (\"0.0.0.1\") or as a number (\"1\")"))),
        },
    };
    let asn = match asn {
        Some(0) => return Err(("asn", "AS 0 is reserved: use 1..=4294967295 (private: 64512..=65534)".into())),
        Some(n) => n,
        None => u32::try_from((65_001 + ordinal as u64).min(MAX_ASN)).unwrap_or(u32::MAX),
    };
    Ok(Some(RoutingPlan { protocol, area, asn, timers: timers.unwrap_or_default(), bfd: bfd.unwrap_or(false) }))
}

/// Static routes: routers without a routing protocol to every other subnet along fewest router
/// hops; hosts a default route via the first router on one of their segments. A router that
/// runs a protocol gets none (its daemon finds its routes).
pub(crate) fn static_routes(nodes: &[PlannedNode], segs: &[PlannedSegment]) -> Vec<Route> {
    let mut on: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()]; // node -> segments
    for (s, seg) in segs.iter().enumerate() {
        for (n, _) in &seg.members {
            on[*n].push(s);
        }
    }
    let addr_on = |n: usize, s: usize| segs[s].members.iter().find(|(m, _)| *m == n).map(|(_, a)| *a);
    let mut out = Vec::new();
    for (r, node) in nodes.iter().enumerate() {
        match node.kind {
            Kind::Router if node.routing.is_none() => {
                // BFS over segments through routers, remembering the first hop.
                let mut first_hop: HashMap<usize, Ipv4Addr> = HashMap::new();
                let mut seen: Vec<bool> = vec![false; segs.len()];
                let mut q = VecDeque::new();
                for &s in &on[r] {
                    seen[s] = true;
                    q.push_back((s, None::<Ipv4Addr>));
                }
                while let Some((s, hop)) = q.pop_front() {
                    for (m, _) in &segs[s].members {
                        if *m == r || nodes[*m].kind != Kind::Router {
                            continue;
                        }
                        let via = hop.or_else(|| addr_on(*m, s));
                        for &t in &on[*m] {
                            if !seen[t] {
                                seen[t] = true;
                                if let Some(v) = via {
                                    first_hop.insert(t, v);
                                }
                                q.push_back((t, via));
                            }
                        }
                    }
                }
                let mut dsts: Vec<_> = first_hop.into_iter().collect();
                dsts.sort_by_key(|(s, _)| *s);
                out.extend(dsts.into_iter().map(|(s, via)| Route { node: r, dst: Some(segs[s].subnet), via }));
            }
            Kind::Host => {
                if let Some(via) = on[r].iter().find_map(|&s| segs[s].members.iter().find(|(m, _)| nodes[*m].kind == Kind::Router).map(|(_, a)| *a)) {
                    out.push(Route { node: r, dst: None, via });
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_fields_resolve_with_defaults_and_clear_refusals() {
        let r = resolve(Kind::Router, Some(Protocol::Ospf), None, None, None, None, 2).unwrap().unwrap();
        assert_eq!((r.area, r.timers, r.bfd), (Ipv4Addr::UNSPECIFIED, Timers::Default, false));
        let b = resolve(Kind::Router, Some(Protocol::Bgp), None, None, Some(Timers::Fast), None, 2).unwrap().unwrap();
        assert_eq!(b.asn, 65_003, "each router its own AS by default");
        assert_eq!(resolve(Kind::Router, Some(Protocol::Ospf), Some("1"), None, None, None, 0).unwrap().unwrap().area, Ipv4Addr::new(0, 0, 0, 1));
        assert_eq!(resolve(Kind::Router, None, None, None, None, None, 0).unwrap(), None, "static by default");
        for (k, p, area, asn, field) in [
            (Kind::Host, Some(Protocol::Ospf), None, None, "routing"),
            (Kind::Router, Some(Protocol::Rip), Some("0.0.0.0"), None, "area"),
            (Kind::Router, Some(Protocol::Ospf), None, Some(65_000), "asn"),
            (Kind::Router, Some(Protocol::Ospf), Some("backbone"), None, "area"),
            (Kind::Router, Some(Protocol::Bgp), None, Some(0), "asn"),
            (Kind::Router, None, Some("0"), None, "routing"),
        ] {
            assert_eq!(resolve(k, p, area, asn, None, None, 0).unwrap_err().0, field, "{k:?} {p:?} {area:?} {asn:?}");
        }
    }
}
