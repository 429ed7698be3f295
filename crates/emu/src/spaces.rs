//! The namespaces `up` builds in, and what it does inside each: forwarding on routers, then
//! loopback, addresses and routes. A namespace is held by one descriptor while building; its
//! netlink and inet sockets are opened when needed and closed again once its work is flushed,
//! so 10,000 hosts take about 10,000 descriptors, not 30,000 (a machine's hard limit is often
//! 20,000, and not every root may raise it).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use horde_topo::Plan;

use crate::nl::Nl;
use crate::{interrupted, ns, EmuError, UpOptions};

/// Per namespace, what `up` keeps while building.
pub(crate) struct NodeNs {
    pub(crate) fd: OwnedFd,
    nl: Option<Nl>,
    next_index: u32,
    /// The node's link ends by name and the index they were made with.
    named: Vec<(String, u32)>,
    /// A fabric namespace: its socket stays open (it makes many interfaces).
    keep: bool,
    /// A host or router with IPv6 beside IPv4 (the topology's `ipv6 = true`): its link ends
    /// keep their link-local addresses (OSPFv3 and RIPng speak from them).
    pub(crate) v6: bool,
}

impl NodeNs {
    pub(crate) fn index(&mut self) -> u32 {
        self.next_index += 1;
        self.next_index
    }

    /// The index a node's link end `name` is made with, kept for its addresses.
    pub(crate) fn index_for(&mut self, name: &str) -> u32 {
        let i = self.index();
        self.named.push((name.to_string(), i));
        i
    }

    fn named(&self, name: &str) -> Option<u32> {
        self.named.iter().find(|(n, _)| n == name).map(|&(_, i)| i)
    }

    /// The namespace's netlink socket, opened inside it on first use.
    pub(crate) fn nl(&mut self) -> Result<&mut Nl, EmuError> {
        if self.nl.is_none() {
            self.nl = Some(ns::within(&self.fd, Nl::open)??);
        }
        Ok(self.nl.as_mut().expect("just opened"))
    }

    pub(crate) fn is_fabric(&self) -> bool {
        self.keep
    }

    /// Sends what is queued on the namespace's socket; a host's or router's socket is then
    /// closed, a fabric namespace's kept.
    pub(crate) fn release(&mut self) -> Result<(), EmuError> {
        if let Some(nl) = self.nl.as_mut() {
            nl.flush()?;
        }
        if !self.keep {
            self.nl = None;
        }
        Ok(())
    }

    /// An AF_INET socket inside the namespace (for interface ioctls).
    fn inet(&self) -> Result<OwnedFd, EmuError> {
        ns::within(&self.fd, || {
            // SAFETY: plain socket(2).
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
            if fd < 0 {
                return Err(EmuError::io("opening a socket in a namespace", std::io::Error::last_os_error()));
            }
            // SAFETY: just opened, owned here.
            Ok(unsafe { ns::own(fd) })
        })?
    }
}

/// The namespaces `names`, made on helper threads so this thread stays where it is, with
/// forwarding where `routers` says; the first `fabric` of `names` are fabric namespaces (their
/// netlink sockets are opened at once and kept: they make every bridge and most veth pairs;
/// the others' when needed).
pub(crate) fn namespaces(names: &[(String, NsRole)], opts: &UpOptions, v6: bool) -> Result<Vec<NodeNs>, EmuError> {
    // Part of a namespace's making runs in the kernel outside its routing lock (RTNL; its
    // loopback device is registered under it): a helper thread per core (at most 4) makes a
    // contiguous share of them (10,000: 3.7 s on one thread, 2.3 s on two).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    let share = names.len().div_ceil(threads).max(64);
    std::thread::scope(|s| {
        let helpers: Vec<_> = names.chunks(share).map(|part| s.spawn(move || make(part, opts, v6))).collect();
        let mut out = Vec::with_capacity(names.len());
        let mut first_err = None;
        for h in helpers {
            match h.join().expect("namespace thread") {
                Ok(v) => out.extend(v),
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        // On an error every namespace made is in /run/netns under the experiment's id, where
        // `up`'s clean-up finds it.
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

/// One helper thread's share of [`namespaces`], in order.
fn make(names: &[(String, NsRole)], opts: &UpOptions, v6: bool) -> Result<Vec<NodeNs>, EmuError> {
    let mut out = Vec::with_capacity(names.len());
    for (name, role) in names {
        interrupted(opts)?;
        let fd = ns::create_here(name)?;
        let keep = *role == NsRole::Fabric;
        let nl = if keep { Some(Nl::open()?) } else { None };
        match role {
            NsRole::Fabric => fabric_without_ipv6(name)?,
            NsRole::Router => std::fs::write("/proc/sys/net/ipv4/ip_forward", "1").map_err(|e| EmuError::io(&format!("enabling forwarding in {name}"), e))?,
            NsRole::Host => {}
        }
        let v6 = v6 && *role != NsRole::Fabric;
        if v6 {
            dual_stack(name, *role == NsRole::Router)?;
        }
        out.push(NodeNs { fd, nl, next_index: 1, named: Vec::new(), keep, v6 });
    }
    Ok(out)
}

/// What a namespace `up` makes is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NsRole {
    /// The fabric or one of its shards: bridges and the link emulator's ends.
    Fabric,
    Host,
    Router,
}

/// The fabric holds one end of every link and every bridge: tens of thousands of interfaces
/// at 10,000 hosts. With IPv6 on, each gets a multicast route in one table whose entries the
/// kernel walks on every insertion and every interface that comes up (quadratic: a fifth of
/// `up`'s time at 10,000 hosts). Nothing in the fabric needs IPv6 (it only bridges frames,
/// which keep whatever the nodes put in them), so it is off there before any interface exists
/// (and its interfaces need no `addrgenmode none`). Called on the thread inside the namespace.
fn fabric_without_ipv6(name: &str) -> Result<(), EmuError> {
    if !Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(()); // a kernel without IPv6
    }
    for which in ["default", "all"] {
        let p = format!("/proc/sys/net/ipv6/conf/{which}/disable_ipv6");
        std::fs::write(&p, "1").map_err(|e| EmuError::io(&format!("turning IPv6 off in {name} ({p})"), e))?;
    }
    Ok(())
}

/// A node with IPv6 beside IPv4: its interfaces (all made after this) skip duplicate-address
/// detection, whose second of "tentative" would hold every address and route back (the
/// addresses are planned unique), and a router forwards IPv6. Called on the thread inside the
/// namespace.
fn dual_stack(name: &str, router: bool) -> Result<(), EmuError> {
    // (and keeps its addresses on a link taken down, as IPv4 does: `horde emu link --down`)
    let mut set = vec![("default", "accept_dad", "0"), ("all", "accept_dad", "0"), ("default", "keep_addr_on_down", "1"), ("all", "keep_addr_on_down", "1")];
    if router {
        set.push(("all", "forwarding", "1"));
    }
    for (which, key, v) in set {
        let p = format!("/proc/sys/net/ipv6/conf/{which}/{key}");
        std::fs::write(&p, v)
            .map_err(|e| EmuError::io(&format!("setting up IPv6 in {name} ({p}); a kernel without IPv6 cannot run a topology with ipv6 = true"), e))?;
    }
    Ok(())
}

/// How many times a node asks for a neighbour's address before giving up (the kernel's
/// default is 3, one second apart). Hundreds of nodes share this machine's cores: while they
/// all start, an answer can take longer than three seconds to be scheduled, and a connect then
/// fails with "no route to host" although the emulated network is fine. Ten probes keep a busy
/// machine from passing for a broken network; a neighbour that really is gone still fails
/// (after ten seconds instead of three). Set on every node's end of a link (`wire`).
pub(crate) const NEIGHBOUR_PROBES: u32 = 10;

/// Loopback, addresses and routes, node by node on the node's own netlink socket (addresses
/// first: a route's gateway must be on a configured subnet).
pub(crate) fn addresses_and_routes(plan: &Plan, spaces: &mut [NodeNs], which: &[Option<usize>], has_impaired: bool, opts: &UpOptions) -> Result<(), EmuError> {
    let mut addrs: Vec<Vec<(String, std::net::Ipv4Addr, u8)>> = vec![Vec::new(); plan.nodes.len()];
    for l in &plan.links {
        let prefix = plan.segments[l.segment].subnet.prefix;
        for p in [&l.a, &l.b] {
            if let Some(a) = p.addr {
                addrs[p.node].push((p.ifname.clone(), a, prefix));
            }
        }
    }
    let mut routes: HashMap<usize, Vec<&horde_topo::Route>> = HashMap::new();
    for r in &plan.routes {
        routes.entry(r.node).or_default().push(r);
    }
    interrupted(opts)?;
    for (i, n) in plan.nodes.iter().enumerate() {
        let Some(k) = which[i] else { continue };
        let s = &mut spaces[k];
        // A socket for interface ioctls only where one is needed: an end not made by `wire`,
        // or segmentation offload to turn off.
        let need = has_impaired || addrs[i].iter().any(|(ifname, _, _)| s.named(ifname).is_none());
        let inet = if need && !addrs[i].is_empty() { Some(s.inet()?) } else { None };
        let idxs: Vec<u32> = addrs[i]
            .iter()
            .map(|(ifname, _, _)| match s.named(ifname) {
                Some(idx) => Ok(idx),
                None => if_index(inet.as_ref().expect("opened for unnamed ends"), ifname),
            })
            .collect::<Result<_, _>>()?;
        let idxs6 = idxs.clone();
        let nl = s.nl()?;
        nl.up(1, &format!("lo in {}", n.name))?;
        for ((ifname, a, prefix), idx) in addrs[i].iter().zip(idxs) {
            nl.addr(idx, *a, *prefix, &format!("{}:{ifname}", n.name))?;
            if let Some(sock) = inet.as_ref().filter(|_| has_impaired) {
                // The link emulator impairs TCP segments one by one: the node's stack cuts them
                // before they leave. UDP GSO super-frames reach the link whole (the link cuts
                // them, impairs each datagram and joins them again on the way out), and
                // checksums left to the interface are finished there.
                tso_off(sock, ifname)?;
            }
        }
        if plan.ipv6 {
            for ((ifname, a, _), idx) in addrs[i].iter().zip(idxs6) {
                let a6 = plan.v6_of(*a).expect("a planned address is on a planned subnet");
                nl.addr6(idx, a6, 64, &format!("{}:{ifname}", n.name))?;
            }
        }
        nl.flush()?;
        for r in routes.get(&i).into_iter().flatten() {
            nl.route(r.dst.map(|d| (d.base, d.prefix)), r.via, &n.name)?;
            if plan.ipv6 {
                let via = plan.v6_of(r.via).expect("a gateway is on a planned subnet");
                nl.route6(r.dst.map(|d| (horde_topo::v6::subnet(&d), 64)), via, false, &n.name)?;
            }
        }
        s.release()?;
    }
    Ok(())
}

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

fn ifreq(name: &str) -> IfReq {
    let mut r = IfReq { name: [0; 16], data: std::ptr::null_mut(), _pad: [0; 16] };
    r.name[..name.len().min(15)].copy_from_slice(&name.as_bytes()[..name.len().min(15)]);
    r
}

/// The index of an interface in the namespace of `sock`.
fn if_index(sock: &OwnedFd, name: &str) -> Result<u32, EmuError> {
    let mut r = ifreq(name);
    // SAFETY: SIOCGIFINDEX writes an int into the union at `data`'s offset; the struct is large enough.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFINDEX as _, &mut r) } != 0 {
        return Err(EmuError::io(&format!("looking up interface {name}"), std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel stored an int at the start of the union.
    Ok(unsafe { *(&r.data as *const *mut libc::c_void as *const i32) } as u32)
}

/// `ethtool -K NAME tso off`.
fn tso_off(sock: &OwnedFd, name: &str) -> Result<(), EmuError> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    const ETHTOOL_STSO: u32 = 0x1f;
    let mut v: [u32; 2] = [ETHTOOL_STSO, 0];
    let mut r = ifreq(name);
    r.data = v.as_mut_ptr() as *mut libc::c_void;
    // SAFETY: ifreq with a pointer to a struct ethtool_value.
    if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut r) } != 0 {
        return Err(EmuError::io(&format!("turning TCP segmentation offload off on {name}"), std::io::Error::last_os_error()));
    }
    Ok(())
}
