//! Who may hold a place on a TCP listener before proving who they are: one admission policy for
//! every listener Horde runs (agent control port, console, logd, metrics). I/O-free: sources and
//! time in (ns on any monotonic clock), decisions out; the listener closes what it is told to.
//!
//! The shape is OpenSSH's `MaxStartups` with `PerSourcePenalties` (and its exemption list),
//! nginx's `limit_conn` and `limit_req`, and SYN-flood defences that keep state for the unproven
//! cheap and shed it under pressure instead of refusing newcomers:
//! - a connection is **pending** from its accept until it authenticates (TLS handshake with a
//!   certificate, a token, a run-key proof); only pending connections count against the budget;
//! - a **source** is an IPv4 address or an IPv6 /64 (one host); its **network** is the IPv4 /24
//!   or the IPv6 /56 (where one attacker's fresh addresses come from);
//! - **a newcomer always finds a place** while anything unproven can make room: when the budget
//!   is full, the pending connection **shed** is a penalised one if any (oldest first), else the
//!   oldest of the network holding the most places. A legitimate handshake, the youngest
//!   connection, is shed only after every place has turned over once; an attacker's connections
//!   that reset themselves early or come from fresh addresses only ever displace each other;
//! - one source holds at most `per_source` places and one network `per_network` (its own oldest
//!   makes room for it);
//! - **new connections are rate-limited** (token buckets): a source over its own rate is
//!   refused while its network is over the network's rate (a penalised source or network: over
//!   a lower rate), so a flood is refused at accept for the price of a close, and a light source
//!   (a user beside the flood in its network) still passes;
//! - a connection that holds its place to its deadline, or goes away without proving anything,
//!   is a **strike** against its source and its network (one shed is not: it may be a slow
//!   user's); penalties need repeated
//!   strikes within a window (`source_strikes`, `network_strikes`), so one timeout does not
//!   shut out an address, and a penalty lowers priority and rate, it does not refuse outright;
//! - a source that **authenticated recently** (`trust_ns`), or is in the listener's exemption
//!   list, is **trusted**: no rate limit, no strikes, and `reserved` places that untrusted
//!   newcomers cannot take from it (the penalty-by-proxy and shared-address cases).
//!
//! Memory is bounded: at most `pending` connections and [`MAX_TRACKED`] sources and networks
//! each (stale ones forgotten first).

use std::collections::HashMap;
use std::net::IpAddr;

/// Sources and networks remembered at most (strikes, trust, rate).
pub const MAX_TRACKED: usize = 4_096;

#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionConfig {
    /// Pending (unauthenticated) connections at most, from all sources.
    pub pending: usize,
    /// Pending connections one source may hold.
    pub per_source: usize,
    /// Pending connections one network (IPv4 /24, IPv6 /56) may hold.
    pub per_network: usize,
    /// Places only trusted sources may take (of `pending`).
    pub reserved: usize,
    /// New connections a second one network may open (untrusted); the bucket holds twice this.
    pub network_rate: f64,
    /// New connections a second one source may open however busy its network (untrusted).
    pub source_rate: f64,
    /// The same for a penalised network or source.
    pub penalised_rate: f64,
    /// Strikes within `window_ns` that penalise a source, and a network.
    pub source_strikes: u32,
    pub network_strikes: u32,
    /// How long strikes are remembered, and a penalty lasts.
    pub window_ns: u64,
    /// How long a source that authenticated stays trusted.
    pub trust_ns: u64,
    /// Networks always trusted (address, prefix length): the listener's exemption list.
    pub exempt: Vec<(IpAddr, u8)>,
}

impl AdmissionConfig {
    /// `pending` places, `per_source` of them per source, half of them per network, an eighth
    /// reserved for trusted sources; 100 new connections a second per network, 10 per source
    /// whatever its network does (5 penalised);
    /// 3 strikes penalise a source and 16 a network for a minute; trust lasts 15 minutes.
    pub fn new(pending: usize, per_source: usize) -> Self {
        let pending = pending.max(2);
        AdmissionConfig {
            pending,
            per_source: per_source.clamp(1, pending),
            per_network: (pending / 2).max(per_source.max(1)),
            reserved: (pending / 8).max(1),
            network_rate: 100.0,
            source_rate: 10.0,
            penalised_rate: 5.0,
            source_strikes: 3,
            network_strikes: 16,
            window_ns: 60_000_000_000,
            trust_ns: 900_000_000_000,
            exempt: Vec::new(),
        }
    }

    /// The same with an exemption list.
    pub fn exempting(self, exempt: Vec<(IpAddr, u8)>) -> Self {
        AdmissionConfig { exempt, ..self }
    }
}

/// Parses an exemption entry: `ADDR` or `ADDR/PREFIX` (IPv4 or IPv6).
pub fn parse_exempt(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, p) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
    let ip: IpAddr = a.trim().parse().map_err(|_| format!("`{s}`: not an address; give ADDR or ADDR/PREFIX, e.g. 10.1.0.0/16"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = match p {
        None => max,
        Some(p) => p.trim().parse::<u8>().ok().filter(|&n| n <= max).ok_or_else(|| format!("`{s}`: the prefix length must be 0..={max}"))?,
    };
    Ok((ip, prefix))
}

/// A pending connection's handle.
pub type Id = u64;

/// What to do with a new connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer {
    /// Serve it as `id`; first close `evict` (a pending connection shed to make room).
    Admit { id: Id, evict: Option<Id> },
    /// Close it: why, in words for a log line (without the peer's address).
    Refuse(String),
}

/// How a pending connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It proved who it is: it no longer counts against the budget, and its source is trusted.
    Authenticated,
    /// It was answered something that needs no proof (a public page): no strike.
    Answered,
    /// It held its place until its deadline without proving anything (silent or slow): a strike.
    TimedOut,
    /// It went away, or was refused, without proving anything: a strike (one is no penalty).
    Closed,
}

/// The source key of an address: IPv4 whole, IPv6 by its /64 (one host's share of a network).
pub fn source_of(ip: IpAddr) -> IpAddr {
    prefix_of(unmapped(ip), 32, 64)
}

/// The network of an address: IPv4 /24, IPv6 /56.
pub fn network_of(ip: IpAddr) -> IpAddr {
    prefix_of(unmapped(ip), 24, 56)
}

fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn prefix_of(ip: IpAddr, v4: u8, v6: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask32(v4)).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask128(v6)).into()),
    }
}

fn mask32(p: u8) -> u32 {
    if p == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(p.min(32)))
    }
}

fn mask128(p: u8) -> u128 {
    if p == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(p.min(128)))
    }
}

fn within(ip: IpAddr, (net, p): (IpAddr, u8)) -> bool {
    match (unmapped(ip), unmapped(net)) {
        (IpAddr::V4(a), IpAddr::V4(n)) => u32::from(a) & mask32(p) == u32::from(n) & mask32(p),
        (IpAddr::V6(a), IpAddr::V6(n)) => u128::from(a) & mask128(p) == u128::from(n) & mask128(p),
        _ => false,
    }
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    src: IpAddr,
    net: IpAddr,
    at: u64,
    trusted: bool,
}

/// What is remembered of a source or a network.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    /// Strikes since `since` (forgotten `window_ns` after it).
    strikes: u32,
    since: u64,
    /// Penalised until.
    penalised_until: u64,
    /// Last authenticated (sources).
    trusted_at: Option<u64>,
    /// Token bucket (networks): tokens (None: full), and when it was last filled.
    tokens: Option<f64>,
    filled_at: u64,
    /// Last time anything happened (for forgetting).
    last: u64,
}

#[derive(Debug)]
pub struct Admission {
    cfg: AdmissionConfig,
    next: Id,
    pending: HashMap<Id, Pending>,
    sources: HashMap<IpAddr, Seen>,
    networks: HashMap<IpAddr, Seen>,
}

/// Counts for a listener's log and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub pending: usize,
    /// Sources and networks penalised now.
    pub penalised: usize,
    /// Sources and networks remembered.
    pub tracked: usize,
}

impl Admission {
    pub fn new(cfg: AdmissionConfig) -> Self {
        Admission { cfg, next: 0, pending: HashMap::new(), sources: HashMap::new(), networks: HashMap::new() }
    }

    fn trusted(&self, ip: IpAddr, src: IpAddr, now: u64) -> bool {
        self.cfg.exempt.iter().any(|e| within(ip, *e))
            || self.sources.get(&src).and_then(|s| s.trusted_at).is_some_and(|t| now.saturating_sub(t) < self.cfg.trust_ns)
    }

    fn penalised(&self, p: &Pending, now: u64) -> bool {
        !p.trusted && (penalised_in(&self.sources, &p.src, now) || penalised_in(&self.networks, &p.net, now))
    }

    /// A new connection from `ip` at `now_ns`.
    pub fn offer(&mut self, ip: IpAddr, now_ns: u64) -> Offer {
        let (src, net) = (source_of(ip), network_of(ip));
        let trusted = self.trusted(ip, src, now_ns);
        let me = Pending { src, net, at: now_ns, trusted };
        if !trusted {
            // A flood is refused at accept: a source over its own rate (a penalised one over a
            // lower rate) is refused while its network is over the network's rate; a light
            // source (a user, not the flood beside it in its network) always passes.
            let now = now_ns;
            let (src_pen, net_pen) = (penalised_in(&self.sources, &src, now), penalised_in(&self.networks, &net, now));
            let src_rate = if src_pen { self.cfg.penalised_rate } else { self.cfg.source_rate };
            let net_rate = if net_pen { self.cfg.penalised_rate } else { self.cfg.network_rate };
            let light = take(remember(&mut self.sources, src, now, &self.cfg), src_rate, now, true);
            let net_ok = !src_pen && take(remember(&mut self.networks, net, now, &self.cfg), net_rate, now, true);
            if !light && !net_ok {
                let whose = if src_pen { "this address (penalised)".to_string() } else { format!("this address, and {net_rate:.0} from its network") };
                return Offer::Refuse(format!("more than {src_rate:.0} new connections a second from {whose}"));
            }
            take(remember(&mut self.sources, src, now, &self.cfg), src_rate, now, false);
            if net_ok {
                take(remember(&mut self.networks, net, now, &self.cfg), net_rate, now, false);
            }
        }
        // the source's own oldest, then the network's, make room for it (no strike: the same
        // host or network)
        let mut evict = None;
        if self.pending.values().filter(|p| p.src == src).count() >= self.cfg.per_source {
            evict = self.oldest(|p| p.src == src);
        } else if !trusted && self.pending.values().filter(|p| p.net == net && !p.trusted).count() >= self.cfg.per_network {
            evict = self.oldest(|p| p.net == net && !p.trusted);
        }
        if let Some(old) = evict {
            self.pending.remove(&old);
        } else if self.pending.len() >= self.cfg.pending || (!trusted && self.untrusted() >= self.cfg.pending - self.cfg.reserved) {
            // full: shed an untrusted one (a trusted newcomer may shed a trusted one last)
            let Some(old) = self.shed(now_ns).or_else(|| if trusted { self.oldest(|_| true) } else { None }) else {
                return Offer::Refuse(format!("{} unauthenticated connections already, from sources that authenticated recently", self.cfg.pending));
            };
            // no strike: a shed connection may be a slow user's; only what ends unproven is
            self.pending.remove(&old);
            evict = Some(old);
        }
        let id = self.next;
        self.next += 1;
        self.pending.insert(id, me);
        Offer::Admit { id, evict }
    }

    fn untrusted(&self) -> usize {
        self.pending.values().filter(|p| !p.trusted).count()
    }

    /// The oldest pending connection that `which` (ties: the lowest id, so the choice is
    /// deterministic).
    fn oldest(&self, which: impl Fn(&Pending) -> bool) -> Option<Id> {
        self.pending.iter().filter(|(_, p)| which(p)).min_by_key(|(id, p)| (p.at, **id)).map(|(id, _)| *id)
    }

    /// The untrusted pending connection to shed: a penalised one (oldest), else the oldest of
    /// the network holding the most places.
    fn shed(&self, now: u64) -> Option<Id> {
        if let Some(id) = self.oldest(|p| self.penalised(p, now)) {
            return Some(id);
        }
        let mut by_net: HashMap<IpAddr, usize> = HashMap::new();
        for p in self.pending.values().filter(|p| !p.trusted) {
            *by_net.entry(p.net).or_insert(0) += 1;
        }
        let most = by_net.values().copied().max()?;
        self.oldest(|p| !p.trusted && by_net.get(&p.net) == Some(&most))
    }

    /// Pending connection `id` ended as `outcome` at `now_ns` (unknown ids — shed already —
    /// are ignored).
    pub fn finished(&mut self, id: Id, outcome: Outcome, now_ns: u64) {
        let Some(p) = self.pending.remove(&id) else { return };
        match outcome {
            Outcome::Authenticated => remember(&mut self.sources, p.src, now_ns, &self.cfg).trusted_at = Some(now_ns),
            Outcome::Answered => {}
            Outcome::TimedOut | Outcome::Closed => self.strike(&p, now_ns),
        }
    }

    /// A strike against an untrusted connection's source and network.
    fn strike(&mut self, p: &Pending, now: u64) {
        if p.trusted {
            return;
        }
        let (window, cfg) = (self.cfg.window_ns, self.cfg.clone());
        for (map, key, limit) in [(&mut self.sources, p.src, cfg.source_strikes), (&mut self.networks, p.net, cfg.network_strikes)] {
            let s = remember(map, key, now, &cfg);
            if now.saturating_sub(s.since) >= window || s.strikes == 0 {
                (s.strikes, s.since) = (0, now);
            }
            s.strikes += 1;
            if s.strikes >= limit {
                s.penalised_until = now.saturating_add(window);
            }
        }
    }

    /// Pending connections, penalised and remembered sources and networks now.
    pub fn counts(&self, now_ns: u64) -> Counts {
        let pen = |m: &HashMap<IpAddr, Seen>| m.values().filter(|s| s.penalised_until > now_ns).count();
        Counts { pending: self.pending.len(), penalised: pen(&self.sources) + pen(&self.networks), tracked: self.sources.len() + self.networks.len() }
    }
}

/// Whether `key` (a source or a network) is penalised at `now`.
fn penalised_in(m: &HashMap<IpAddr, Seen>, key: &IpAddr, now: u64) -> bool {
    m.get(key).is_some_and(|s| s.penalised_until > now)
}

/// Takes a token from `s`'s bucket (`rate` a second, holding twice that); `peek`: only fills it.
fn take(s: &mut Seen, rate: f64, now: u64, peek: bool) -> bool {
    let tokens = s.tokens.map_or(2.0 * rate, |t| (t + now.saturating_sub(s.filled_at) as f64 / 1e9 * rate).min(2.0 * rate));
    s.filled_at = now;
    let ok = tokens >= 1.0;
    s.tokens = Some(if ok && !peek { tokens - 1.0 } else { tokens });
    ok
}

/// `key`'s entry, made (forgetting the stalest when [`MAX_TRACKED`] are kept).
fn remember<'a>(m: &'a mut HashMap<IpAddr, Seen>, key: IpAddr, now: u64, cfg: &AdmissionConfig) -> &'a mut Seen {
    if !m.contains_key(&key) && m.len() >= MAX_TRACKED {
        // forget everything stale (nothing to remember past the window and the trust), else the
        // least recent half
        m.retain(|_, s| now.saturating_sub(s.last) < cfg.window_ns || s.trusted_at.is_some_and(|t| now.saturating_sub(t) < cfg.trust_ns));
        if m.len() >= MAX_TRACKED {
            let mut lasts: Vec<u64> = m.values().map(|s| s.last).collect();
            lasts.sort_unstable();
            let cut = lasts[lasts.len() / 2];
            m.retain(|_, s| s.last > cut);
        }
    }
    let s = m.entry(key).or_default();
    s.last = now;
    s
}

#[cfg(test)]
mod tests;
