//! The links `up` builds: veth pairs between nodes, into a switch's bridge, or to the link
//! emulator's ends in the fabric, and netem qdiscs where the kernel impairs a link.

use std::os::fd::AsRawFd;

use horde_impair::LinkSpec;
use horde_topo::Plan;

use crate::nl::Nl;
use crate::spaces::NEIGHBOUR_PROBES;
use crate::{bridges, interrupted, EmuError, NodeNs, UpOptions};

/// Every link of the plan: veth pairs between nodes (or into a bridge, in the fabric shard the
/// bridge is in), or, for a link the userspace forwarder impairs, a pair from each end to the
/// forwarder's ends in the fabric (named hdEXPiNa / hdEXPiNb); netem qdiscs on the links in
/// `netem_links`. `slot[k]` is the index in `spaces` of fabric shard `k`. Returns how many
/// links the forwarder carries.
#[allow(clippy::too_many_arguments)]
pub(crate) fn links(
    plan: &Plan,
    exp: &str,
    spaces: &mut [NodeNs],
    which: &[Option<usize>],
    bridges: &mut bridges::Bridges,
    slot: &[usize],
    netem_links: &[usize],
    opts: &UpOptions,
) -> Result<usize, EmuError> {
    let fabric_fd = spaces[0].fd.as_raw_fd();
    let mut n_imp = 0usize;
    // (namespace slot, index, bridge, name): ends attached to their bridge once both exist
    let mut late_masters: Vec<(usize, u32, u32, String)> = Vec::new();
    // peers come up from their own namespace's socket once the pairs exist
    let mut peer_up: Vec<(usize, u32, String)> = Vec::new();
    // Where each plain link's ends landed (namespace slot, index), for netem qdiscs.
    let mut qdiscs: Vec<(usize, u32, LinkSpec, String)> = Vec::new();
    // This machine's own namespace, where tunnels' sockets live (opened for the first one).
    let mut machine: Option<Nl> = None;
    for (li, l) in plan.links.iter().enumerate() {
        if !plan.built_here(li) {
            continue; // both ends on other machines
        }
        let on_netem = netem_links.contains(&li);
        let mark = peer_up.len();
        let mut landed: Vec<(usize, u32)> = Vec::new();
        let ends: Vec<(&horde_topo::Port, Option<(String, u32)>)> = if l.impaired() && !on_netem {
            let k = n_imp;
            n_imp += 1;
            let fa = format!("hd{exp}i{k}a");
            let fb = format!("hd{exp}i{k}b");
            let ia = spaces[0].index();
            let ib = spaces[0].index();
            vec![(&l.a, Some((fa, ia))), (&l.b, Some((fb, ib)))]
        } else {
            vec![(&l.a, None)]
        };
        for (port, fabric_end) in ends {
            // The far end of a link to another machine: a tunnel where its forwarder end would be.
            if let (Some(t), Some((fname, fidx))) = (&l.tunnel, &fabric_end) {
                let far = if t.here == 0 { &l.b } else { &l.a };
                if std::ptr::eq(port, far) {
                    if machine.is_none() {
                        machine = Some(Nl::open()?);
                    }
                    machine.as_mut().expect("just opened").vxlan(fname, *fidx, fabric_fd, t)?;
                    peer_up.push((0, *fidx, fname.clone()));
                    continue;
                }
            }
            let other = if std::ptr::eq(port, &l.a) { &l.b } else { &l.a };
            match fabric_end {
                // node end ↔ the forwarder's end in the fabric
                Some((fname, fidx)) => {
                    if let Some((s, br)) = bridges.port(port.node) {
                        let pidx = spaces[s].index();
                        spaces[s].nl()?.veth(&port.ifname, pidx, Some(br), &fname, fidx, fabric_fd)?;
                        peer_up.push((0, fidx, fname.clone()));
                    } else {
                        let k = which[port.node].expect("host or router");
                        let nidx = spaces[k].index_for(&port.ifname);
                        let nfd = spaces[k].fd.as_raw_fd();
                        spaces[0].nl()?.veth(&fname, fidx, None, &port.ifname, nidx, nfd)?;
                        peer_up.push((k, nidx, port.ifname.clone()));
                    }
                }
                // a plain veth pair between the two nodes
                None => match (bridges.port(port.node), bridges.port(other.node)) {
                    (Some((sa, ba)), Some((sb, bb))) => {
                        let ia = spaces[sa].index();
                        let ib = spaces[sb].index();
                        let bfd = spaces[sb].fd.as_raw_fd();
                        spaces[sa].nl()?.veth(&port.ifname, ia, Some(ba), &other.ifname, ib, bfd)?;
                        late_masters.push((sb, ib, bb, other.ifname.clone()));
                        peer_up.push((sb, ib, other.ifname.clone()));
                        landed = vec![(sa, ia), (sb, ib)];
                    }
                    (Some((s, br)), None) | (None, Some((s, br))) => {
                        let (sw, host) = if bridges.is(port.node) { (port, other) } else { (other, port) };
                        let k = which[host.node].expect("host or router");
                        let hidx = spaces[k].index_for(&host.ifname);
                        let hfd = spaces[k].fd.as_raw_fd();
                        let sidx = spaces[s].index();
                        spaces[s].nl()?.veth(&sw.ifname, sidx, Some(br), &host.ifname, hidx, hfd)?;
                        peer_up.push((k, hidx, host.ifname.clone()));
                        landed = if std::ptr::eq(sw, port) { vec![(s, sidx), (k, hidx)] } else { vec![(k, hidx), (s, sidx)] };
                    }
                    (None, None) => {
                        let ka = which[port.node].expect("host or router");
                        let kb = which[other.node].expect("host or router");
                        let ia = spaces[ka].index_for(&port.ifname);
                        let ib = spaces[kb].index_for(&other.ifname);
                        let bfd = spaces[kb].fd.as_raw_fd();
                        let nl = spaces[ka].nl()?;
                        nl.veth(&port.ifname, ia, None, &other.ifname, ib, bfd)?;
                        nl.neighbour_probes(ia, NEIGHBOUR_PROBES, &port.ifname)?;
                        if !spaces[ka].v6 {
                            spaces[ka].nl()?.no_ipv6(ia, &port.ifname)?;
                        }
                        spaces[ka].release()?;
                        peer_up.push((kb, ib, other.ifname.clone()));
                        landed = vec![(ka, ia), (kb, ib)];
                    }
                },
            }
        }
        // The ends in hosts and routers are finished now, from their own sockets, while they
        // are the newest interfaces on the machine: the kernel finds an interface's neighbour
        // parameters by walking every interface's, newest first (set later, 10,000 hosts cost
        // seconds). Ends in the fabric wait for their bridges (below).
        node_ends(spaces, slot, &mut peer_up, mark)?;
        if on_netem {
            let name = |p: &horde_topo::Port| format!("{}:{}", plan.nodes[p.node].name, p.ifname);
            qdiscs.push((landed[0].0, landed[0].1, l.ab.clone(), name(&l.a)));
            qdiscs.push((landed[1].0, landed[1].1, l.ba.clone(), name(&l.b)));
        }
    }
    if let Some(nl) = machine.as_mut() {
        nl.flush()?;
    }
    for s in spaces.iter_mut() {
        s.release()?;
    }
    interrupted(opts)?;
    for (s, idx, master, name) in &late_masters {
        spaces[*s].nl()?.set_master(*idx, *master, name)?;
    }
    // the fabric's ends come up once attached
    for (k, idx, name) in &peer_up {
        spaces[*k].nl()?.up(*idx, name)?;
        spaces[*k].release()?;
    }
    for (k, idx, spec, name) in &qdiscs {
        if *spec != LinkSpec::default() {
            spaces[*k].nl()?.netem(*idx, spec, false, name)?;
            spaces[*k].release()?;
        }
    }
    for &k in slot {
        spaces[k].nl()?.flush()?;
    }
    Ok(n_imp)
}

/// The ends `peer_up[mark..]` made in hosts and routers, finished ([`node_end`]) once the fabric's
/// sockets have made the pairs; the fabric's ends stay in `peer_up` for later.
fn node_ends(spaces: &mut [NodeNs], slot: &[usize], peer_up: &mut Vec<(usize, u32, String)>, mark: usize) -> Result<(), EmuError> {
    let (nodes, fabric): (Vec<_>, Vec<_>) = peer_up.drain(mark..).partition(|(k, _, _)| !spaces[*k].is_fabric());
    peer_up.extend(fabric);
    if !nodes.is_empty() {
        for &k in slot {
            spaces[k].nl()?.flush()?;
        }
        for (k, idx, name) in nodes {
            node_end(&mut spaces[k], idx, &name)?;
        }
    }
    Ok(())
}

/// A node's end of a link, once the pair exists, from the node's own socket (opened and closed
/// in turn: a socket per namespace held at once would be 10,000 descriptors more): patient
/// neighbour probes ([`NEIGHBOUR_PROBES`]); no IPv6 address before its carrier comes (IPv4 only:
/// else each end runs duplicate-address detection and router solicitation, flooded by the
/// switches to every port — with thousands of hosts, minutes of kernel work and dropped frames;
/// the fabric has IPv6 off altogether); then up.
fn node_end(space: &mut NodeNs, idx: u32, name: &str) -> Result<(), EmuError> {
    let v6 = space.v6;
    let nl = space.nl()?;
    nl.neighbour_probes(idx, NEIGHBOUR_PROBES, name)?;
    if !v6 {
        nl.no_ipv6(idx, name)?;
    }
    nl.up(idx, name)?;
    space.release()
}
