//! Flow specifications. A [`RawFlow`] is what a user wrote (CLI flags or one `[[flow]]` table of
//! a flow file); [`RawFlow::resolve`] validates it into a [`Flow`] that the engine takes as is.
//! Errors name the flow, the field and what is allowed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde::Deserialize;

use crate::dist::Dist;
use crate::preset::Preset;
pub use crate::transport::{Transport, MAX_UDP_PAYLOAD};
use crate::units::{parse_count, parse_duration_ns};

/// Default stop condition when none is given: 10 s, as D-ITG's ITGSend does.
pub const DEFAULT_DURATION_NS: u64 = 10_000_000_000;
/// Default base seed when neither the flow nor the command line gives one.
pub const DEFAULT_SEED: u64 = 1;
/// Upper bound on `repeat`, so a typo cannot ask for a billion flows.
pub const MAX_REPEAT: u64 = 1_000_000;
/// The smallest UDP reverse flow: the header and the keep-alive's 20-byte proof of consent.
pub const REVERSE_MIN_SIZE: u32 = 40;

/// A reverse flow's own departures, ms apart: each renews the receiver's consent to keep
/// sending (it stops [`REVERSE_CONSENT_MS`] after the last one) and carries the size to use.
pub const REVERSE_KEEPALIVE_MS: f64 = 100.0;
/// How long a receiver keeps sending a reverse flow after its last keep-alive: 1 s, ten
/// keep-alives (a lossy link loses several in a row before the flow stops).
pub const REVERSE_CONSENT_MS: u64 = 1000;
/// Upper bound on the flows of one file, all `repeat`s included: each flow is a socket.
pub const MAX_FLOWS: usize = 1_000_000;

/// What the receiver side measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Meter {
    /// One-way delay: the receiver logs each packet against the send time it carries.
    #[default]
    Owd,
    /// Round-trip time: the receiver echoes each packet, the sender logs its return.
    Rtt,
}

/// When a flow stops: the first condition reached wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stop {
    pub duration_ns: Option<u64>,
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
}

/// A number or a text, as TOML gives either for quantities.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    Int(i64),
    Float(f64),
    Text(String),
}

impl Quantity {
    fn text(&self) -> String {
        match self {
            Quantity::Int(v) => v.to_string(),
            Quantity::Float(v) => v.to_string(),
            Quantity::Text(s) => s.clone(),
        }
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity::Text(s.to_string())
    }
}

/// The highest `SO_PRIORITY` accepted (the kernel's limit is the value's range; 7 and above
/// need CAP_NET_ADMIN, which the kernel checks when the socket is opened).
pub const MAX_PRIORITY: u32 = 255;

/// A flow as written by the user; every field optional so defaults and presets can fill it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFlow {
    pub name: Option<String>,
    pub transport: Option<String>,
    pub dst: Option<String>,
    pub src: Option<String>,
    /// Inter-departure time distribution, milliseconds.
    pub idt: Option<Quantity>,
    /// Shorthand for a constant inter-departure time: packets per second.
    pub rate: Option<Quantity>,
    /// Payload (UDP) or APDU (TCP) size distribution, bytes.
    pub size: Option<Quantity>,
    pub preset: Option<String>,
    /// On-period length distribution, milliseconds (bursty sources).
    pub on: Option<Quantity>,
    /// Off-period length distribution, milliseconds.
    pub off: Option<Quantity>,
    pub seed: Option<u64>,
    pub dscp: Option<u8>,
    pub tos: Option<u8>,
    pub ttl: Option<u8>,
    pub nodelay: Option<bool>,
    /// `SO_PRIORITY` of the flow's socket (the queueing discipline's band; 0..=6 unprivileged).
    pub priority: Option<u32>,
    /// TCP: acknowledge at once (`TCP_QUICKACK`, re-armed after every read) instead of delaying
    /// ACKs — for thin streams whose sender waits on them.
    pub quickack: Option<bool>,
    pub duration: Option<Quantity>,
    pub packets: Option<Quantity>,
    pub bytes: Option<Quantity>,
    /// Delay before the first packet, a distribution in milliseconds drawn once per flow.
    pub start_delay: Option<Quantity>,
    pub meter: Option<String>,
    /// Number of identical copies of this flow (each with its own id and derived seed).
    pub repeat: Option<u64>,
    /// Free number carried into log records (the scenario layer uses it for players).
    pub tag: Option<u32>,
    /// Send as fast as the path allows (no inter-departure model).
    pub bulk: Option<bool>,
    /// Bulk from the receiver back to the sender (the sender measures what arrives).
    pub reverse: Option<bool>,
    /// The emulated host (or group of hosts, round-robin over the copies) that sends this flow:
    /// `horde send --emu ID` only.
    pub node: Option<String>,
}

/// A validated flow: the engine takes this as is.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub id: u32,
    pub name: String,
    pub transport: Transport,
    pub dst: SocketAddr,
    pub src: Option<SocketAddr>,
    /// Milliseconds.
    pub idt: Dist,
    /// Bytes.
    pub size: Dist,
    /// Milliseconds on, milliseconds off.
    pub on_off: Option<(Dist, Dist)>,
    /// Milliseconds, drawn once.
    pub start_delay: Dist,
    pub seed: u64,
    pub tos: Option<u8>,
    pub ttl: Option<u8>,
    pub nodelay: bool,
    /// `SO_PRIORITY` (none: the kernel's default, 0).
    pub priority: Option<u32>,
    /// TCP: `TCP_QUICKACK` after every read.
    pub quickack: bool,
    pub stop: Stop,
    pub meter: Meter,
    pub tag: u32,
    /// As fast as the path allows: departures leave when the socket takes them (`idt` unused).
    pub bulk: bool,
    /// Bulk, from the receiver back to this host; the flow itself sends only what keeps the
    /// reverse direction alive (see docs/cli.md, "Bulk modes").
    pub reverse: bool,
}

impl Flow {
    /// A TCP connection whose departures come from elsewhere (a player's behaviour-driven
    /// schedule, or the server side's answer to a client): no model of its own, TCP_NODELAY on.
    pub fn connection(id: u32, name: String, dst: SocketAddr, tag: u32) -> Flow {
        Flow {
            id,
            name,
            transport: Transport::Tcp,
            dst,
            src: None,
            idt: Dist::constant(0.0),
            size: Dist::constant(0.0),
            on_off: None,
            start_delay: Dist::constant(0.0),
            seed: 0,
            tos: None,
            ttl: None,
            nodelay: true,
            priority: None,
            quickack: false,
            stop: Stop::default(),
            meter: Meter::Owd,
            tag,
            bulk: false,
            reverse: false,
        }
    }
}

/// A field of a flow that is not acceptable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{flow}: {field}: {msg}")]
pub struct FlowError {
    /// e.g. "flow 3 (`voice`)".
    pub flow: String,
    pub field: &'static str,
    pub msg: String,
}

/// A flow file: optional `[defaults]` applied to every `[[flow]]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowFile {
    #[serde(default)]
    pub defaults: Option<toml::Table>,
    #[serde(default)]
    pub flow: Vec<toml::Table>,
}

/// What names an emulated host in a flow file: its first address, for `dst = "NAME:PORT"`.
pub type HostAddr<'a> = &'a dyn Fn(&str) -> Option<IpAddr>;

/// A resolved flow and the emulated host (or group) its file placed it on.
pub type PlacedFlow = (Flow, Option<String>);

impl FlowFile {
    /// Parses a TOML flow file and resolves every flow. `base_seed` seeds flows that give none.
    /// A flow placed on an emulated host (`node`) is refused here: only
    /// [`FlowFile::parse_placed`] (`horde send --emu`) takes it.
    pub fn parse_and_resolve(text: &str, base_seed: u64) -> Result<Vec<Flow>, FlowError> {
        let placed = Self::parse_placed(text, base_seed, None)?;
        if let Some((f, Some(n))) = placed.iter().find(|(_, n)| n.is_some()) {
            return Err(FlowError {
                flow: format!("flow {} (`{}`)", f.id + 1, f.name),
                field: "node",
                msg: format!(
                    "places the flow on emulated host `{n}`: run it with `horde send --flows FILE --emu ID` (the id `horde emu up` printed), or drop `node`"
                ),
            });
        }
        Ok(placed.into_iter().map(|(f, _)| f).collect())
    }

    /// Like [`FlowFile::parse_and_resolve`], keeping each flow's `node`; with `hosts`, a
    /// destination may name an emulated host instead of its address (`dst = "server:9000"`).
    pub fn parse_placed(text: &str, base_seed: u64, hosts: Option<HostAddr>) -> Result<Vec<PlacedFlow>, FlowError> {
        FlowFile::parse_placed_inner(text, base_seed, hosts).map_err(|e| FlowError {
            flow: crate::files::redact(&e.flow, text),
            msg: crate::files::redact(&e.msg, text),
            ..e
        })
    }

    fn parse_placed_inner(text: &str, base_seed: u64, hosts: Option<HostAddr>) -> Result<Vec<PlacedFlow>, FlowError> {
        let file: FlowFile =
            toml::from_str(text).map_err(|e| FlowError { flow: "flow file".into(), field: "syntax", msg: crate::files::toml_error(text, &e) })?;
        if file.flow.is_empty() {
            return Err(FlowError { flow: "flow file".into(), field: "flow", msg: "no [[flow]] tables; add at least one (see examples/flows.toml)".into() });
        }
        let mut flows: Vec<PlacedFlow> = Vec::new();
        for (i, table) in file.flow.into_iter().enumerate() {
            let mut merged = file.defaults.clone().unwrap_or_default();
            if table.contains_key("preset") {
                // A flow's own preset beats model fields inherited from [defaults].
                for k in ["idt", "rate", "size", "transport"] {
                    merged.remove(k);
                }
            }
            merged.extend(table);
            let label = format!("flow {}", i + 1);
            let mut raw: RawFlow =
                merged.try_into().map_err(|e: toml::de::Error| FlowError { flow: label.clone(), field: "table", msg: e.message().to_string() })?;
            if flows.len() as u64 + raw.repeat.unwrap_or(1) > MAX_FLOWS as u64 {
                return Err(FlowError { flow: label, field: "repeat", msg: format!("the file asks for more than {MAX_FLOWS} flows in all") });
            }
            if let (Some(hosts), Some(d)) = (hosts, raw.dst.as_deref()) {
                raw.dst = Some(host_dst(d, hosts));
            }
            if let Some(n) = &raw.node {
                if n.is_empty() || n.len() > 64 {
                    return Err(FlowError { flow: label, field: "node", msg: "must name an emulated host or group (1..=64 characters)".into() });
                }
            }
            let node = raw.node.clone();
            flows.extend(raw.resolve_all(flows.len() as u32, base_seed, &label)?.into_iter().map(|f| (f, node.clone())));
        }
        Ok(flows)
    }
}

/// `NAME:PORT` (or `NAME` alone, for ICMP) with NAME an emulated host: its address instead.
/// Anything else is left for the address parser to judge.
pub fn host_dst(d: &str, hosts: HostAddr) -> String {
    if d.parse::<IpAddr>().is_ok() || d.parse::<SocketAddr>().is_ok() {
        return d.to_string();
    }
    match d.rsplit_once(':') {
        Some((name, port)) if port.parse::<u16>().is_ok() => match hosts(name) {
            Some(ip) => SocketAddr::new(ip, port.parse().unwrap_or(0)).to_string(),
            None => d.to_string(),
        },
        _ => hosts(d).map_or_else(|| d.to_string(), |ip| ip.to_string()),
    }
}

impl RawFlow {
    /// Checks the socket options (TOS from `dscp` or `tos`, TTL, priority, quickack); returns
    /// the TOS byte.
    fn socket_options(&self, transport: Transport) -> Result<Option<u8>, (&'static str, String)> {
        let tos = match (self.dscp, self.tos) {
            (Some(_), Some(_)) => return Err(("dscp", "give either dscp or tos, not both".into())),
            (Some(d), None) if d > 63 => return Err(("dscp", format!("must be 0..=63 (got {d})"))),
            (Some(d), None) => Some(d << 2),
            (None, t) => t,
        };
        if self.ttl == Some(0) {
            return Err(("ttl", "must be 1..=255 (got 0)".into()));
        }
        if let Some(p) = self.priority.filter(|&p| p > MAX_PRIORITY) {
            return Err(("priority", format!("must be 0..={MAX_PRIORITY} (got {p}); 7 and above need root (CAP_NET_ADMIN)")));
        }
        if self.quickack == Some(true) && transport != Transport::Tcp {
            return Err(("quickack", "is for TCP (UDP has no acknowledgements): drop it or use -T tcp".into()));
        }
        Ok(tos)
    }

    /// Resolves this flow and its `repeat` copies, numbering them from `first_id`.
    pub fn resolve_all(&self, first_id: u32, base_seed: u64, label: &str) -> Result<Vec<Flow>, FlowError> {
        let n = self.repeat.unwrap_or(1);
        if n == 0 || n > MAX_REPEAT {
            return Err(FlowError { flow: label.to_string(), field: "repeat", msg: format!("must be 1..={MAX_REPEAT} (got {n})") });
        }
        let proto = self.resolve(first_id, base_seed, label)?;
        Ok((0..n as u32)
            .map(|k| {
                let mut f = proto.clone();
                f.id = first_id + k;
                if n > 1 {
                    f.name = format!("{}#{k}", proto.name);
                    f.seed = crate::derive_seed(proto.seed, k as u64 + 1);
                }
                f
            })
            .collect())
    }

    /// The transport (or the preset's) and the destination: an address alone for ICMP, which
    /// has no ports; HOST:PORT otherwise.
    fn transport_and_dst(&self, preset: Option<&Preset>, fail: &dyn Fn(&'static str, String) -> FlowError) -> Result<(Transport, SocketAddr), FlowError> {
        let transport = match self.transport.as_deref() {
            Some("udp" | "UDP") => Transport::Udp,
            Some("tcp" | "TCP") => Transport::Tcp,
            Some("icmp" | "ICMP") => Transport::Icmp,
            Some(t) if ["sctp", "dccp"].contains(&t.to_ascii_lowercase().as_str()) => {
                return Err(fail(
                    "transport",
                    format!("must be udp, tcp or icmp (got `{t}`): Horde does not send SCTP or DCCP (D-ITG's -T SCTP/DCCP; see docs/cli.md)"),
                ))
            }
            Some(t) => return Err(fail("transport", format!("must be udp, tcp or icmp (got `{t}`)"))),
            None => preset.map(|p| p.transport).unwrap_or_default(),
        };
        let dst_text = self.dst.as_deref().ok_or_else(|| fail("dst", "missing; give the receiver as HOST:PORT, e.g. 127.0.0.1:9000 or [::1]:9000".into()))?;
        let dst = match (transport, dst_text.parse::<std::net::IpAddr>()) {
            // ICMP has no ports: an address alone (a port given is ignored).
            (Transport::Icmp, Ok(ip)) => SocketAddr::new(ip, 0),
            _ => parse_addr(dst_text).map_err(|m| fail("dst", m))?,
        };
        if transport == Transport::Icmp {
            if !dst.is_ipv4() {
                return Err(fail("dst", format!("ICMP flows go to IPv4 addresses (got {}): ICMPv6 is not sent yet", dst.ip())));
            }
            if self.reverse == Some(true) || self.quickack == Some(true) || self.nodelay.is_some() {
                return Err(fail("transport", "an ICMP flow has no reverse mode, quickack or nodelay: drop them or use udp/tcp".into()));
            }
        } else if dst.port() == 0 {
            return Err(fail("dst", "port must be 1..=65535 (got 0)".into()));
        }
        Ok((transport, dst))
    }

    /// Validates one flow.
    pub fn resolve(&self, id: u32, base_seed: u64, label: &str) -> Result<Flow, FlowError> {
        let name = self.name.clone().unwrap_or_else(|| format!("flow{id}"));
        let who = match &self.name {
            Some(n) => format!("{label} (`{n}`)"),
            None => label.to_string(),
        };
        let fail = |field: &'static str, msg: String| FlowError { flow: who.clone(), field, msg };

        let preset = match &self.preset {
            Some(p) => Some(p.parse::<Preset>().map_err(|m| fail("preset", m))?),
            None => None,
        };
        let (transport, dst) = self.transport_and_dst(preset.as_ref(), &fail)?;
        let src = match &self.src {
            Some(s) => Some(parse_addr_or_ip(s).map_err(|m| fail("src", m))?),
            None => None,
        };
        if let Some(s) = src {
            if s.is_ipv4() != dst.is_ipv4() {
                return Err(fail("src", format!("{s} and dst {dst} are of different IP versions")));
            }
        }

        let reverse = self.reverse.unwrap_or(false);
        let bulk = self.bulk.unwrap_or(false) || reverse;
        if bulk {
            let modelled = [("idt", self.idt.is_some()), ("rate", self.rate.is_some()), ("preset", self.preset.is_some()), ("on", self.on.is_some())];
            if let Some((field, _)) = modelled.iter().find(|m| m.1) {
                return Err(fail(
                    field,
                    "bulk sends as fast as the path allows and has no timing model; drop it (or drop bulk/reverse to send the modelled flow)".into(),
                ));
            }
            if self.meter.as_deref() == Some("rtt") {
                return Err(fail("meter", "bulk flows measure one-way delay and throughput; drop --meter rtt (or send a modelled flow)".into()));
            }
        }
        let idt = match (&self.idt, &self.rate) {
            _ if reverse => Dist::constant(REVERSE_KEEPALIVE_MS),
            _ if bulk => Dist::constant(0.0),
            (Some(_), Some(_)) => return Err(fail("rate", "give either idt or rate, not both".into())),
            (Some(q), None) => dist(q).map_err(|m| fail("idt", m))?,
            (None, Some(q)) => {
                let r: f64 = q
                    .text()
                    .trim()
                    .parse()
                    .or_else(|_| parse_count(&q.text()).map(|v| v as f64))
                    .map_err(|_| fail("rate", format!("must be packets per second, e.g. 1000 or 10k (got `{}`)", q.text())))?;
                if !(r.is_finite() && r > 0.0) {
                    return Err(fail("rate", format!("must be > 0 packets per second (got {r})")));
                }
                Dist::constant(1000.0 / r)
            }
            (None, None) => match &preset {
                Some(p) => p.idt.clone(),
                None => return Err(fail("idt", "missing; give --idt (ms), --rate (pkt/s) or a --preset".into())),
            },
        };
        let size = match (&self.size, &preset) {
            (Some(q), _) => dist(q).map_err(|m| fail("size", m))?,
            (None, _) if bulk => Dist::constant(transport.bulk_size() as f64),
            (None, Some(p)) => p.size.clone(),
            (None, None) => return Err(fail("size", "missing; give --size in bytes, e.g. 64 or normal(64, 3)".into())),
        };
        // A UDP reverse flow's keep-alives carry its proof of consent after the header (the
        // latest probe's number and nonce, horde-wire's `control::KeepAliveProof`): 40 bytes.
        if reverse && transport == Transport::Udp && size.cdf(REVERSE_MIN_SIZE as f64 - 0.5) > 0.0 {
            return Err(fail(
                "size",
                format!("a UDP reverse flow's size is at least {REVERSE_MIN_SIZE} bytes (its keep-alives carry a proof of consent after the header)"),
            ));
        }
        let on_off = match (&self.on, &self.off) {
            (Some(a), Some(b)) => Some((dist(a).map_err(|m| fail("on", m))?, dist(b).map_err(|m| fail("off", m))?)),
            (None, None) => None,
            (Some(_), None) => return Err(fail("off", "on/off traffic needs both `on` and `off` periods".into())),
            (None, Some(_)) => return Err(fail("on", "on/off traffic needs both `on` and `off` periods".into())),
        };
        let start_delay = match &self.start_delay {
            Some(q) => dist(q).map_err(|m| fail("start_delay", m))?,
            None => Dist::constant(0.0),
        };

        let tos = self.socket_options(transport).map_err(|(f, m)| fail(f, m))?;
        let meter = match self.meter.as_deref() {
            None | Some("owd") => Meter::Owd,
            Some("rtt") => Meter::Rtt,
            Some(m) => return Err(fail("meter", format!("must be owd (one-way delay) or rtt (round trip) (got `{m}`)"))),
        };
        let stop = self.stop().map_err(|(f, m)| fail(f, m))?;
        if reverse && (stop.packets.is_some() || stop.bytes.is_some()) {
            let field = if stop.packets.is_some() { "packets" } else { "bytes" };
            return Err(fail(field, "a reverse flow runs for a duration (the receiver does not know a budget); give duration (-t) instead".into()));
        }
        // A schedule that cannot advance would send without end (or flood until the deadline):
        // refuse it, unless a packet or byte budget makes it a finite burst.
        if stop.packets.is_none() && stop.bytes.is_none() && !bulk {
            let field = if self.rate.is_some() { "rate" } else { "idt" };
            idt.check_advances().map_err(|m| fail(field, m))?;
        }
        if let Some((on, _)) = &on_off {
            on.check_advances().map_err(|m| fail("on", m))?;
        }

        Ok(Flow {
            id,
            name,
            transport,
            dst,
            src,
            idt,
            size,
            on_off,
            start_delay,
            seed: self.seed.unwrap_or_else(|| crate::derive_seed(base_seed, id as u64)),
            tos,
            ttl: self.ttl,
            nodelay: self.nodelay.unwrap_or(true),
            priority: self.priority,
            quickack: self.quickack.unwrap_or(false),
            stop,
            meter,
            tag: self.tag.unwrap_or(0),
            bulk,
            reverse,
        })
    }

    fn stop(&self) -> Result<Stop, (&'static str, String)> {
        let duration_ns = self.duration.as_ref().map(|q| parse_duration_ns(&q.text())).transpose().map_err(|m| ("duration", m))?;
        let packets = self.packets.as_ref().map(|q| parse_count(&q.text())).transpose().map_err(|m| ("packets", m))?;
        let bytes = self.bytes.as_ref().map(|q| parse_count(&q.text())).transpose().map_err(|m| ("bytes", m))?;
        for (f, v) in [("duration", duration_ns), ("packets", packets), ("bytes", bytes)] {
            if v == Some(0) {
                return Err((f, "must be > 0".into()));
            }
        }
        let mut stop = Stop { duration_ns, packets, bytes };
        if stop == Stop::default() {
            stop.duration_ns = Some(DEFAULT_DURATION_NS);
        }
        Ok(stop)
    }
}

fn dist(q: &Quantity) -> Result<Dist, String> {
    let d: Dist = q.text().parse().map_err(|e: crate::dist::ParseError| e.to_string())?;
    d.validate().map_err(|e| e.to_string())
}

/// `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT` (hostnames are not resolved: the core does no I/O).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        if let Ok(p) = port.parse::<u16>() {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p));
        }
    }
    Err(format!("`{s}` is not IP:PORT; write e.g. 127.0.0.1:9000 or [::1]:9000 (host names other than localhost are not resolved)"))
}

/// Like [`parse_addr`], but a bare IP means "any port".
fn parse_addr_or_ip(s: &str) -> Result<SocketAddr, String> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, 0));
    }
    parse_addr(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_and_reverse_resolve_with_their_defaults_and_refuse_a_timing_model() {
        let f = raw(&[("dst", "'127.0.0.1:9000'"), ("bulk", "true")]).resolve(0, 1, "flow 1").unwrap();
        assert!(f.bulk && !f.reverse);
        assert_eq!(f.size, Dist::constant(1472.0), "UDP default: a 1500-byte MTU's payload");
        let f = raw(&[("dst", "'127.0.0.1:9000'"), ("bulk", "true"), ("transport", "'tcp'"), ("size", "1000")]).resolve(0, 1, "flow 1").unwrap();
        assert_eq!(f.size, Dist::constant(1000.0));
        let f = raw(&[("dst", "'127.0.0.1:9000'"), ("reverse", "true")]).resolve(0, 1, "flow 1").unwrap();
        assert!(f.bulk && f.reverse, "reverse implies bulk");
        assert_eq!(f.idt, Dist::constant(REVERSE_KEEPALIVE_MS), "its own departures are keep-alives");
        for (k, v, field) in [("rate", "100", "rate"), ("idt", "'10'", "idt"), ("preset", "'voip'", "preset"), ("meter", "'rtt'", "meter")] {
            let e = raw(&[("dst", "'127.0.0.1:9000'"), ("bulk", "true"), (k, v)]).resolve(0, 1, "flow 1").unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
        let e = raw(&[("dst", "'127.0.0.1:9000'"), ("reverse", "true"), ("packets", "10")]).resolve(0, 1, "flow 1").unwrap_err();
        assert!(e.msg.contains("runs for a duration"), "{e}");
    }

    fn raw(pairs: &[(&str, &str)]) -> RawFlow {
        let mut t = toml::Table::new();
        for (k, v) in pairs {
            let val: toml::Value = toml::from_str::<toml::Table>(&format!("x = {v}")).unwrap()["x"].clone();
            t.insert(k.to_string(), val);
        }
        t.try_into().unwrap()
    }

    #[test]
    fn resolves_a_full_flow() {
        let f = raw(&[("dst", "'127.0.0.1:9000'"), ("rate", "1000"), ("size", "64"), ("dscp", "46"), ("ttl", "7"), ("packets", "'10k'")])
            .resolve(0, 1, "flow 1")
            .unwrap();
        assert_eq!(f.idt, Dist::constant(1.0));
        assert_eq!(f.tos, Some(46 << 2));
        assert_eq!(f.stop, Stop { duration_ns: None, packets: Some(10_000), bytes: None });
        assert!(f.nodelay);
    }

    #[test]
    fn sctp_and_dccp_are_refused_with_the_reason() {
        for t in ["sctp", "DCCP"] {
            let e = raw(&[("dst", "'127.0.0.1:9000'"), ("rate", "10"), ("size", "64"), ("transport", &format!("'{t}'"))]).resolve(0, 1, "flow 1").unwrap_err();
            assert_eq!(e.field, "transport");
            assert!(e.msg.starts_with("must be udp, tcp or icmp") && e.msg.contains("does not send SCTP or DCCP"), "{e}");
        }
    }

    #[test]
    fn icmp_flows_take_an_address_without_a_port_and_refuse_what_icmp_lacks() {
        let f = raw(&[("dst", "'10.0.0.2'"), ("rate", "10"), ("size", "10"), ("transport", "'icmp'")]).resolve(0, 1, "flow 1").unwrap();
        assert_eq!((f.transport, f.dst.to_string()), (Transport::Icmp, "10.0.0.2:0".to_string()));
        assert_eq!(Transport::Icmp.min_size(), 36, "Horde's header and the echo proof");
        let port = raw(&[("dst", "'10.0.0.2:8999'"), ("rate", "10"), ("size", "64"), ("transport", "'ICMP'")]).resolve(0, 1, "flow 1").unwrap();
        assert_eq!(port.dst.ip().to_string(), "10.0.0.2", "a port is ignored");
        for (field, extra) in [("dst", ("dst", "'::1'")), ("transport", ("reverse", "true")), ("transport", ("nodelay", "false"))] {
            let mut kv = vec![("rate", "10"), ("size", "64"), ("transport", "'icmp'"), extra];
            if extra.0 != "dst" {
                kv.push(("dst", "'10.0.0.2'"));
            }
            let e = raw(&kv).resolve(0, 1, "flow 1").unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn priority_and_quickack_are_checked() {
        let f = raw(&[("dst", "'127.0.0.1:9000'"), ("transport", "'tcp'"), ("rate", "10"), ("size", "64"), ("priority", "5"), ("quickack", "true")])
            .resolve(0, 1, "flow 1")
            .unwrap();
        assert_eq!((f.priority, f.quickack), (Some(5), true));
        let f = raw(&[("dst", "'127.0.0.1:9000'"), ("rate", "10"), ("size", "64")]).resolve(0, 1, "flow 1").unwrap();
        assert_eq!((f.priority, f.quickack), (None, false));
        let e = raw(&[("dst", "'127.0.0.1:9000'"), ("rate", "10"), ("size", "64"), ("quickack", "true")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "quickack", "{e}");
        assert!(e.msg.contains("TCP"), "{e}");
        let e = raw(&[("dst", "'127.0.0.1:9000'"), ("rate", "10"), ("size", "64"), ("priority", "256")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "priority", "{e}");
        assert!(e.msg.contains("0..=255") && e.msg.contains("CAP_NET_ADMIN"), "{e}");
    }

    #[test]
    fn default_stop_is_ten_seconds() {
        let f = raw(&[("dst", "'[::1]:9'"), ("idt", "'exp(10)'"), ("size", "100")]).resolve(0, 1, "flow 1").unwrap();
        assert_eq!(f.stop.duration_ns, Some(DEFAULT_DURATION_NS));
        assert!(f.dst.is_ipv6());
    }

    #[test]
    fn errors_name_flow_field_and_range() {
        let e = raw(&[("name", "'voice'"), ("dst", "'127.0.0.1:9000'"), ("idt", "'weibull(1, -1)'"), ("size", "64")]).resolve(2, 1, "flow 3").unwrap_err();
        assert_eq!(e.to_string(), "flow 3 (`voice`): idt: weibull: shape must be > 0 (got -1)");
        let e = raw(&[("dst", "'127.0.0.1:9000'"), ("rate", "10"), ("size", "64"), ("dscp", "64")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "dscp");
        assert!(e.msg.contains("0..=63"));
        let e = raw(&[("dst", "'nowhere'"), ("rate", "10"), ("size", "64")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "dst");
        let e = raw(&[("dst", "'127.0.0.1:1'"), ("rate", "10")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "size");
        let e = raw(&[("dst", "'127.0.0.1:1'"), ("rate", "10"), ("size", "1"), ("on", "'exp(5)'")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "off");
    }

    #[test]
    fn regression_schedules_that_cannot_advance_are_refused() {
        let dst = ("dst", "'127.0.0.1:9'");
        let e = raw(&[dst, ("rate", "1e12"), ("size", "64")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "rate");
        assert!(e.msg.contains("beyond what a socket can pace"), "{e}");
        let e = raw(&[dst, ("idt", "'normal(-5, 1)'"), ("size", "64")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "idt");
        let e = raw(&[dst, ("idt", "0"), ("size", "64")]).resolve(0, 1, "flow 1").unwrap_err();
        assert!(e.msg.contains("never advance"), "{e}");
        let e = raw(&[dst, ("idt", "1"), ("size", "64"), ("on", "0"), ("off", "'exp(5)'")]).resolve(0, 1, "flow 1").unwrap_err();
        assert_eq!(e.field, "on");
        // a finite burst is fine, and so are realistic models with some zero gaps
        assert!(raw(&[dst, ("idt", "0"), ("size", "64"), ("packets", "100")]).resolve(0, 1, "flow 1").is_ok());
        assert!(raw(&[dst, ("idt", "'mix(0.8*exp(200), 0.2*constant(0))'"), ("size", "64")]).resolve(0, 1, "flow 1").is_ok());
        assert!(raw(&[dst, ("rate", "'1M'"), ("size", "64")]).resolve(0, 1, "flow 1").is_ok());
    }

    #[test]
    fn flow_file_defaults_repeat_and_unknown_fields() {
        let text = "[defaults]\ndst = '127.0.0.1:9000'\nsize = 36\n[[flow]]\nrate = 3\ntransport = 'tcp'\nrepeat = 3\n[[flow]]\npreset = 'quake3'\n";
        let flows = FlowFile::parse_and_resolve(text, 7).unwrap();
        assert_eq!(flows.len(), 4);
        assert_eq!(flows.iter().map(|f| f.id).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert_ne!(flows[0].seed, flows[1].seed);
        assert_eq!(flows[0].transport, Transport::Tcp);
        assert_eq!(flows[3].transport, Transport::Udp);
        // the flow's own preset wins over model fields from [defaults]
        assert_eq!(flows[3].size, "normal(64.151757, 3.2035755)".parse::<Dist>().unwrap());
        let e = FlowFile::parse_and_resolve("[[flow]]\ndst='127.0.0.1:1'\nrat = 3\n", 1).unwrap_err();
        assert!(e.msg.contains("unknown field `rat`"), "{e}");
        let e = FlowFile::parse_and_resolve("[[flow]\n", 1).unwrap_err();
        assert_eq!(e.field, "syntax");
    }
}
