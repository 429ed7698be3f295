//! `recv --icmp`: echo requests carrying Horde's header, read from a raw socket and logged
//! for one-way delay. The receiver sends nothing: the host's kernel answers each request
//! itself (the sender's round trip and consent), so there is nothing to admit.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

use horde_proto::RxMeta;
use horde_wire::datagram::CONTROL_FLAGS;
use horde_wire::icmp::parse_ipv4_echo;
use horde_wire::log::{FLAG_KERNEL_TS, PROTO_ICMP};
use horde_wire::{DatagramHeader, RecordKind};

use super::{count, Receiver, FAIRNESS_BATCHES};
use crate::clock::{mono_ns, real_ns};
use crate::net;

/// (Source, flow) pairs whose endpoint records were written; past this many, no more are
/// (a flood of spoofed sources cannot grow the receiver's memory).
pub(super) const MAX_ICMP_SOURCES: usize = 65_536;

impl Receiver {
    /// Reads what waits on the ICMP socket: requests of Horde flows are logged, consent
    /// probes skipped, other pings counted.
    pub(super) fn drain_icmp(&mut self) {
        let Some(s) = &self.icmp else { return };
        let fd = s.as_raw_fd();
        for _ in 0..FAIRNESS_BATCHES {
            let n = match self.batch.recv_queued(fd) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            self.last_arrival = mono_ns();
            let now = real_ns();
            for k in 0..n {
                let info = self.batch.info(k);
                let Ok(e) = parse_ipv4_echo(self.batch.data(k)) else {
                    self.report.garbage_datagrams += 1;
                    continue;
                };
                let h = match DatagramHeader::parse(e.payload) {
                    Ok(h) if h.flags & CONTROL_FLAGS == 0 => h,
                    Ok(_) => continue,
                    Err(_) => {
                        self.report.icmp_other += 1;
                        continue;
                    }
                };
                let meta = RxMeta { len: e.payload.len(), kernel_ns: info.kernel_ns, tos: e.tos, ttl: e.ttl };
                let rec = horde_proto::conn::datagram_record(&h, &meta, now, 0, RecordKind::Received);
                if self.icmp_sources.len() < MAX_ICMP_SOURCES && self.icmp_sources.insert((e.src, h.flow)) {
                    let (src, dst) = (SocketAddr::new(IpAddr::V4(e.src), 0), SocketAddr::new(IpAddr::V4(e.dst), 0));
                    self.sink.endpoints(h.flow, 0, Some(src), Some(dst), PROTO_ICMP);
                }
                self.report.kernel_timestamps += (rec.flags & FLAG_KERNEL_TS != 0) as u64;
                count(&mut self.report, h.flow, meta.len, rec.t_b);
                self.sink.push(rec);
            }
            if n < net::BATCH {
                return;
            }
        }
    }
}
