//! The receiver's UDP side: reading a socket's datagrams in batches, admitting flows by their
//! hello, and echoing what asked for it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use horde_proto::gate::GateConfig;
use horde_proto::{RunKey, RxMeta};
use horde_wire::datagram::{CONTROL_FLAGS, FLAG_ECHO_REPLY, FLAG_ECHO_REQUEST, FLAG_HELLO, FLAG_REVERSE, FLAG_REVERSE_DATA};
use horde_wire::log::FLAG_KERNEL_TS;
use horde_wire::{DatagramHeader, RecordKind};

use super::{add, Receiver, RecvReport, UdpFlow, UdpReverse, FAIRNESS_BATCHES, MAX_DATAGRAM, UDP_FLOW_IDLE_S};
use crate::clock::{mono_ns, real_ns};
use crate::early::Held;
use crate::net;

/// The flow of the datagrams just read (a GRO buffer's segments, a sender's run within one
/// batch): its admission is looked up once and its counts are added up, then written to the
/// report ([`settle`]) when another flow's datagram, any control message or the
/// batch's end comes. Within one batch the clock, and so the flow's consent, does not move.
struct Hot {
    key: (SocketAddr, u32),
    /// The id the flow is logged under.
    id: u32,
    tag: u32,
    /// The flow asked for echoes and its consent is fresh.
    echoes: bool,
    packets: u64,
    bytes: u64,
    first_ns: u64,
    last_ns: u64,
}

impl Hot {
    fn count(&mut self, len: usize, t: u64) {
        if self.packets == 0 {
            self.first_ns = t;
        }
        self.packets += 1;
        self.bytes += len as u64;
        self.last_ns = t;
    }
}

/// Writes the hot flow's counts to the report at once ([`add`], as `count` does per datagram)
/// and to its admitted flow's own.
fn settle(report: &mut RecvReport, flows: &mut HashMap<(SocketAddr, u32), UdpFlow>, hot: &mut Option<Hot>) {
    if let Some(x) = hot.take().filter(|x| x.packets > 0) {
        add(report, x.id, x.packets, x.bytes, x.first_ns, x.last_ns);
        if let Some(f) = flows.get_mut(&x.key) {
            f.packets += x.packets;
            f.bytes += x.bytes;
        }
    }
}

impl Receiver {
    /// Reads what waits on UDP socket `i`, at most [`FAIRNESS_BATCHES`] batches; a socket left
    /// with more is marked (`udp_more`) to be read again on the next turn, since readiness is
    /// edge-triggered and says nothing more until another datagram comes.
    pub(super) fn drain_udp(&mut self, i: usize) {
        let fd = self.udp[i].0.as_raw_fd();
        self.udp_more[i] = true;
        for _ in 0..FAIRNESS_BATCHES {
            let n = match self.batch.recv_queued(fd) {
                Ok(0) | Err(_) => {
                    self.udp_more[i] = false;
                    return;
                }
                Ok(n) => n,
            };
            self.last_arrival = mono_ns();
            let now = real_ns();
            let now_s = self.last_arrival / 1_000_000_000;
            let mut echo_bufs: Vec<(usize, SocketAddr)> = Vec::new();
            let mut replies: Vec<(Vec<u8>, SocketAddr)> = Vec::new();
            let mut hot: Option<Hot> = None;
            for k in 0..n {
                let info = self.batch.info(k);
                let data = self.batch.data(k);
                if horde_wire::signal::is_signal(data) {
                    if let Some(from) = info.from {
                        let data = data.to_vec();
                        settle(&mut self.report, &mut self.udp_flows, &mut hot);
                        self.on_signal(from, &data, now);
                    }
                    continue;
                }
                if horde_proto::consent::is_consent(data) {
                    settle(&mut self.report, &mut self.udp_flows, &mut hot);
                    if info.from.is_none_or(|from| !self.udp[i].1.on_consent(from, data)) {
                        self.report.refusals.consent_refused += 1;
                    }
                    continue;
                }
                let h = match DatagramHeader::parse(data) {
                    Ok(h) if h.flags & (FLAG_ECHO_REPLY | FLAG_REVERSE_DATA) == 0 && info.len < MAX_DATAGRAM => h,
                    _ => {
                        self.report.garbage_datagrams += 1;
                        continue;
                    }
                };
                let Some(from) = info.from else { continue };
                if h.flags & FLAG_HELLO != 0 {
                    settle(&mut self.report, &mut self.udp_flows, &mut hot);
                    let hello = data.to_vec();
                    if let Some(r) = self.hello(i, from, &hello, now_s) {
                        replies.push((r, from));
                    }
                    continue;
                }
                if h.flags & CONTROL_FLAGS != 0 {
                    self.report.garbage_datagrams += 1;
                    continue;
                }
                let key = (from, h.flow);
                if h.flags & FLAG_REVERSE != 0 || hot.as_ref().is_none_or(|x| x.key != key) {
                    settle(&mut self.report, &mut self.udp_flows, &mut hot);
                    let Some(f) = self.udp_flows.get_mut(&key) else {
                        // Perhaps it overtook its flow's admitting hello: held a moment (not a
                        // reverse keep-alive: those ask for traffic back).
                        let held = h.flags & FLAG_REVERSE == 0
                            && self.early.hold(Held {
                                from,
                                header: h,
                                meta: RxMeta { len: info.len, kernel_ns: info.kernel_ns, tos: info.tos, ttl: info.ttl },
                                now_real: now,
                                mono: self.last_arrival,
                                sock: i,
                                bytes: (h.flags & FLAG_ECHO_REQUEST != 0).then(|| data.to_vec()),
                            });
                        if !held {
                            self.report.refusals.unadmitted_datagrams += 1;
                        }
                        continue;
                    };
                    f.last_s = now_s;
                    // Anything sent back needs the flow's consent, fresh (a spoofer can send
                    // from an admitted address, but cannot answer its probes).
                    let consents = self.udp[i].1.may_send(self.last_arrival, from, h.flow);
                    if h.flags & FLAG_REVERSE != 0 {
                        // Bulk follows only keep-alives that prove they are the sender's (they
                        // carry our latest probe's nonce): a spoofed one from its address gets
                        // nothing.
                        if f.reverse && consents && self.udp[i].1.proves(from, h.flow, data) {
                            let r = self.reverse_udp.entry(key).or_insert(UdpReverse { sock: i, size: info.len, seq: 0, heard: 0 });
                            r.heard = self.last_arrival;
                        } else if !f.reverse {
                            self.report.refusals.reverse += 1;
                        }
                    }
                    hot = Some(Hot { key, id: f.id, tag: f.tag, echoes: f.echo && consents, packets: 0, bytes: 0, first_ns: 0, last_ns: 0 });
                }
                let x = hot.as_mut().expect("set above");
                let meta = RxMeta { len: info.len, kernel_ns: info.kernel_ns, tos: info.tos, ttl: info.ttl };
                let mut rec = horde_proto::conn::datagram_record(&h, &meta, now, x.tag, RecordKind::Received);
                rec.flow = x.id;
                self.report.kernel_timestamps += (rec.flags & FLAG_KERNEL_TS != 0) as u64;
                x.count(info.len, rec.t_b);
                self.sink.push(rec);
                if x.echoes && h.flags & FLAG_ECHO_REQUEST != 0 {
                    echo_bufs.push((k, from));
                }
            }
            settle(&mut self.report, &mut self.udp_flows, &mut hot);
            if !echo_bufs.is_empty() {
                self.echo_udp(fd, &echo_bufs);
            }
            for (r, to) in replies {
                // Never more bytes than the hello that asked (a challenge is 36 bytes, an answer
                // 21; a hello at least 64).
                let _ = net::send_batch_to(fd, &[&r], &[to]);
            }
            if n < net::BATCH {
                self.udp_more[i] = false;
                return;
            }
        }
    }

    /// A UDP hello: the gate decides; a validated flow is admitted (making room among flows
    /// idle for a minute when full). Returns what to send back.
    fn hello(&mut self, i: usize, from: SocketAddr, data: &[u8], now_s: u64) -> Option<Vec<u8>> {
        let gate = &mut self.udp[i].1;
        let before = gate.stats;
        // A full gate makes room among flows idle for a minute, at most once a second.
        if gate.admitted_count() >= GateConfig::receiver(RunKey::OPEN).max_flows && self.last_evict_s != now_s {
            self.last_evict_s = now_s;
            let idle: Vec<(SocketAddr, u32)> =
                self.udp_flows.iter().filter(|(_, f)| now_s.saturating_sub(f.last_s) >= UDP_FLOW_IDLE_S).map(|(k, _)| *k).collect();
            for k in idle {
                self.udp_flows.remove(&k);
                gate.forget(k.0, k.1);
            }
        }
        let allow_reverse = self.opts.reverse;
        let mut refused_reverse = false;
        let g = gate.greet(mono_ns(), from, data, |h| {
            let echo = h.header.flags & FLAG_ECHO_REQUEST != 0;
            let asked_reverse = h.header.flags & FLAG_REVERSE != 0;
            refused_reverse = asked_reverse && !allow_reverse;
            let reverse = asked_reverse && allow_reverse;
            Ok(((echo, reverse), echo || reverse))
        });
        if refused_reverse {
            self.report.refusals.reverse += 1;
        }
        if g.full {
            self.report.refusals.full += 1;
        }
        if let Some((h, (echo, reverse))) = g.admitted {
            // A repeated hello of the same run keeps what arrived; another run's starts afresh.
            let id = super::log_id(&mut self.ids, &mut self.sink, &mut self.report, from, h.header.flow);
            let f = self.udp_flows.entry((from, h.header.flow)).or_insert_with(|| UdpFlow::new(h.header.seq, id, echo, reverse, now_s, i));
            if f.tag != h.header.seq {
                *f = UdpFlow::new(h.header.seq, id, echo, reverse, now_s, i);
            }
            (f.echo, f.reverse, f.last_s, f.sock) = (echo, reverse, now_s, i);
            let local = self.udp[i].0.local_addr().ok().and_then(|a| a.as_socket());
            self.sink.endpoints(id, h.header.seq, Some(from), local, horde_wire::log::PROTO_UDP);
            self.admit_early(from, h.header.flow);
        }
        let reply = g.reply;
        let after = self.udp[i].1.stats;
        let r = &mut self.report.refusals;
        r.challenges += after.challenges - before.challenges;
        r.challenge_bytes += after.challenge_bytes - before.challenge_bytes;
        r.bad_mac += after.bad_mac - before.bad_mac;
        r.dropped_hellos += (after.malformed - before.malformed) + (after.over_budget - before.over_budget);
        self.report.discoveries += after.discoveries - before.discoveries;
        reply
    }

    /// A flow just admitted: the datagrams of it that came before its hello count, are logged
    /// (with their own arrival times) and, if it asked for echoes and its consent is fresh,
    /// echoed.
    fn admit_early(&mut self, from: SocketAddr, flow: u32) {
        let held = self.early.take(from, flow);
        let Some(f) = self.udp_flows.get_mut(&(from, flow)) else {
            self.report.refusals.unadmitted_datagrams += held.len() as u64;
            return;
        };
        for x in held {
            let mut rec = horde_proto::conn::datagram_record(&x.header, &x.meta, x.now_real, f.tag, RecordKind::Received);
            rec.flow = f.id;
            self.report.kernel_timestamps += (rec.flags & FLAG_KERNEL_TS != 0) as u64;
            self.report.admitted_late += 1;
            add(&mut self.report, f.id, 1, x.meta.len as u64, rec.t_b, rec.t_b);
            f.packets += 1;
            f.bytes += x.meta.len as u64;
            self.sink.push(rec);
            let Some(mut b) = x.bytes.filter(|_| f.echo) else { continue };
            let (sock, gate) = &self.udp[x.sock];
            if gate.may_send(self.last_arrival, from, flow) {
                b[3] = (b[3] & !FLAG_ECHO_REQUEST) | FLAG_ECHO_REPLY;
                if net::send_batch_to(sock.as_raw_fd(), &[&b], &[from]).is_ok_and(|k| k > 0) {
                    self.report.echoed += 1;
                }
            }
        }
    }

    fn echo_udp(&mut self, fd: i32, which: &[(usize, SocketAddr)]) {
        let mut bufs: Vec<Vec<u8>> = which.iter().map(|(k, _)| self.batch.data(*k).to_vec()).collect();
        for b in &mut bufs {
            b[3] = (b[3] & !FLAG_ECHO_REQUEST) | FLAG_ECHO_REPLY;
        }
        let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
        let to: Vec<SocketAddr> = which.iter().map(|(_, a)| *a).collect();
        if let Ok(k) = net::send_batch_to(fd, &slices, &to) {
            self.report.echoed += k as u64;
        }
    }
}
