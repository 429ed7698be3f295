//! What the receiver is told (its options) and what it reports: the types of `recv --json`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use horde_proto::RunKey;
use serde::Serialize;

#[derive(Debug, Clone)]
pub struct RecvOptions {
    pub udp: Vec<SocketAddr>,
    pub tcp: Vec<SocketAddr>,
    /// Log the echo requests of `send -T icmp` (a raw socket: root), to this host or to this
    /// IPv4 address.
    pub icmp: Option<Option<std::net::Ipv4Addr>>,
    pub log: Option<PathBuf>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when nothing arrived for this long (counted from the last arrival, or the start). A
    /// TCP connection accepted is an arrival: a sender still making its connections (one that
    /// waits a second to retry a connect the listener's full queue dropped) is not idle.
    pub idle: Option<Duration>,
    /// Stop after this many packets.
    pub packets: Option<u64>,
    /// Hellos must carry a MAC under this key (OPEN: no key).
    pub key: RunKey,
    /// TCP connections open at once at most; more are closed as they come.
    pub max_conns: usize,
    /// Close a TCP connection nothing arrived on for this long.
    pub conn_idle: Option<Duration>,
    /// Send bulk back to reverse flows (`send --reverse`) that ask for it, while their
    /// keep-alives come from their validated address.
    pub reverse: bool,
    /// TCP: acknowledge at once (TCP_QUICKACK on every connection, again after every read).
    pub quickack: bool,
    /// A live log server's stream (`--log-server`): the log goes there as it is written.
    pub log_tap: crate::logger::TapSlot,
    /// UDP sockets take datagrams of one flow that arrive together (a GSO sender's
    /// super-datagrams) as one buffer (`UDP_GRO`), cut apart here: one system call for many.
    /// Each datagram is still its own record; datagrams of one buffer share its kernel
    /// timestamp (on loopback they always did: the kernel cuts a super-datagram in one go).
    pub gro: bool,
}

impl Default for RecvOptions {
    /// 10,000 connections: a WoW run of 10,000 players on one machine (the largest measured).
    fn default() -> Self {
        RecvOptions {
            udp: Vec::new(),
            tcp: Vec::new(),
            icmp: None,
            log: None,
            duration: None,
            idle: None,
            packets: None,
            key: RunKey::OPEN,
            max_conns: 10_000,
            conn_idle: None,
            reverse: true,
            quickack: false,
            log_tap: Default::default(),
            gro: true,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct FlowReceived {
    pub packets: u64,
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// The sender's end message: absent if none came (the sender died, is still running, or
    /// is not `horde send`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<FlowEndSaid>,
    /// The flow's source, address and port: a flow is one (source, flow id) pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The id the flow's sender gave it, where the receiver keys it by another (another
    /// source used that id first; the log's alias record says the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<u32>,
}

/// What a sender said when its flow ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct FlowEndSaid {
    /// "done", "interrupted" or "consent lapsed".
    pub reason: String,
    /// Packets (APDUs) and bytes the sender counted.
    pub packets: u64,
    pub bytes: u64,
}

/// What the receiver turned away.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RecvRefusals {
    /// Challenges sent to hellos from addresses not validated yet, and their bytes.
    pub challenges: u64,
    pub challenge_bytes: u64,
    /// Hellos (and end messages) without a MAC under the key (no answer).
    pub bad_mac: u64,
    /// Signalling messages of a version or type this build does not know (ignored).
    #[serde(default)]
    pub unknown_signals: u64,
    /// Hellos malformed or over the challenge budget.
    pub dropped_hellos: u64,
    /// Validated flows refused because the receiver held as many as it may.
    pub full: u64,
    /// Data datagrams of flows whose sender never passed validation: not logged, not echoed.
    pub unadmitted_datagrams: u64,
    /// TCP connections closed at once: over --max-conns with every connection a flow, or no
    /// descriptor left.
    pub refused_conns: u64,
    /// TCP connections closed without a valid hello (timeout, or a MAC not under the key).
    pub closed_before_hello: u64,
    /// TCP connections closed because their echoes were not read for 10 s.
    pub stalled_conns: u64,
    /// TCP connections closed by --conn-idle.
    pub idle_conns: u64,
    /// Reverse requests refused (--no-reverse, or keep-alives of a UDP flow whose signed hello
    /// did not ask for reverse bulk): TCP connections closed, UDP keep-alives ignored.
    #[serde(default)]
    pub reverse: u64,
    /// UDP flows forgotten because they stopped answering consent probes (nothing more was sent
    /// to them).
    #[serde(default)]
    pub consent_expired: u64,
    /// Consent messages that proved nothing (forged, stale, or for a flow without consent).
    #[serde(default)]
    pub consent_refused: u64,
}

#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RecvReport {
    pub listening: Vec<String>,
    pub packets: u64,
    pub bytes: u64,
    /// Datagrams that were not Horde packets (bad magic, version, or too short).
    pub garbage_datagrams: u64,
    /// Datagrams that came before their flow's admitting hello (they overtook it on the path)
    /// and were counted, logged and echoed once it came: already in `packets`. Those whose
    /// hello did not come within 250 ms are `refusals.unadmitted_datagrams`.
    #[serde(default)]
    pub admitted_late: u64,
    /// TCP connections closed because their bytes were not a Horde stream.
    pub garbage_streams: u64,
    /// `--icmp`: echo requests that were not Horde's (e.g. `ping`): counted, not logged.
    #[serde(default)]
    pub icmp_other: u64,
    pub tcp_connections: u64,
    pub echoed: u64,
    /// Bulk sent back to reverse flows: packets (UDP) or APDUs (TCP), and bytes.
    #[serde(default)]
    pub reverse_packets: u64,
    #[serde(default)]
    pub reverse_bytes: u64,
    /// Consent probes sent to flows that get echoes or reverse bulk, and their bytes.
    #[serde(default)]
    pub consent_probes: u64,
    #[serde(default)]
    pub consent_probe_bytes: u64,
    pub kernel_timestamps: u64,
    /// UDP datagrams this host's kernel dropped because a listening socket's receive buffer was
    /// full (the socket's own count, `SO_MEMINFO`, in datagrams even where one GRO buffer
    /// carried several): the receiving host's loss, not the network's.
    #[serde(default)]
    pub socket_drops: u64,
    /// Flows whose sender's end message arrived (see `flows[].end`).
    #[serde(default)]
    pub ended: u64,
    /// UDP flows still running when this receiver stopped, told so by a signed error message
    /// (one each, to the flow's admitted address, while its traffic was fresh).
    #[serde(default)]
    pub told_stopping: u64,
    /// Discovery requests answered (`horde discover`; only to validated addresses).
    #[serde(default)]
    pub discoveries: u64,
    pub refusals: RecvRefusals,
    /// Per flow, keyed by the id it is logged under: one entry per (source, flow id) pair.
    pub flows: BTreeMap<u32, FlowReceived>,
    pub duration_s: f64,
    pub interrupted: bool,
    pub log: Option<PathBuf>,
    pub log_records: u64,
    /// The log's live stream to a log server (`--log-server`), if there was one.
    #[serde(default)]
    pub log_server: Option<crate::logger::TapReport>,
}
