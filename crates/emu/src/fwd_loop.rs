//! The link emulator's forwarding loop: one thread, epoll over every link socket, each wait
//! timed (nanoseconds) to end when the earliest pending frame is due.
//!
//! A frame read goes through its direction's [`horde_impair::Link`] datagram by datagram: a UDP
//! GSO super-frame (up to 64 datagrams in one buffer) is decided datagram by datagram, and when
//! every datagram has the same fate — delivered once, undamaged, at the same instant — it stays
//! one buffer all the way; otherwise it is cut ([`udp_gso::split`]) and each datagram goes its
//! own way. On the way out, datagrams of one flow leaving together are joined again
//! ([`udp_gso::join`]), so the far host's kernel handles one buffer instead of up to 64.

use std::collections::BinaryHeap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

use horde_impair::{Link, Verdict};
use horde_sys::epoll::Epoll;

use crate::fwd_io::{self, mono_ns, RxBatch, VNET};
use crate::{udp_gso, EmuError};

/// Bytes one direction may hold in its delay line before frames are dropped (and counted):
/// 64 MiB is 0.5 s of a 1 Gbit/s link. netem bounds its delay line likewise (`limit`, 1000
/// packets by default); without a bound a long delay and a flood would take all memory.
pub(crate) const MAX_PENDING_BYTES: u64 = 64 << 20;

/// One direction of one link: its impairments and counters.
pub(crate) struct Dir {
    pub(crate) link: Link,
    /// Socket frames of this direction leave by.
    pub(crate) out: usize,
    pub(crate) sent: u64,
    pub(crate) send_errors: u64,
    pub(crate) pending_bytes: u64,
    /// Datagrams in the delay line (queued for the rate or being delayed), copies included.
    pub(crate) pending_frames: u64,
    pub(crate) overflow_drops: u64,
    pub(crate) rx_overrun: u64,
    pub(crate) tx_overrun: u64,
}

/// What the forwarding loop and the control thread share.
pub(crate) struct Shared {
    pub(crate) dirs: Vec<Dir>,
    pub(crate) names: Vec<(String, String)>,
    /// Socket `i` (its fd, its interface): direction `i` reads it; direction `i ^ 1` writes it.
    pub(crate) socks: Vec<(std::os::fd::RawFd, String)>,
    /// The interfaces' `(rx_dropped, tx_dropped)` when the daemon started.
    pub(crate) if_base: Vec<(u64, u64)>,
    /// Socket `i`'s count of datagrams offered to it ([`crate::offered`]; `None` without eBPF).
    pub(crate) offered: Vec<Option<crate::offered::Offered>>,
    /// Buffers socket `i`'s receive buffer dropped, and frames its interface's backlog dropped.
    pub(crate) sock_bufs: Vec<u64>,
    pub(crate) if_rx: Vec<u64>,
}

struct Pending {
    at: u64,
    seq: u64,
    out: usize,
    vnet: [u8; VNET],
    buf: Vec<u8>,
    /// Datagrams the buffer carries (a super-frame kept whole carries several).
    count: u64,
    /// Corrupted or bit-flipped here: left alone on the way out (never joined).
    mangled: bool,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq)) // min-heap
    }
}

/// What the loop keeps between frames: the delay line and reusable buffers.
struct Line {
    heap: BinaryHeap<Pending>,
    pool: Vec<Vec<u8>>,
    seq: u64,
    flip: u64,
}

impl Line {
    /// Queues `count` datagrams in one buffer (`frame` with its header) as the link decided.
    fn admit(&mut self, d: &mut Dir, vnet: [u8; VNET], frame: &[u8], verdict: Verdict, count: u64) {
        let Verdict::Deliver { at_ns, copies, corrupt, bit_errors } = verdict else { return };
        let len = frame.len();
        for c in 0..copies {
            if d.pending_bytes + len as u64 > MAX_PENDING_BYTES {
                d.overflow_drops += count;
                continue;
            }
            d.pending_bytes += len as u64;
            d.pending_frames += count;
            let mut buf = self.pool.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(frame);
            let vnet = fwd_io::settle(vnet, &mut buf);
            if corrupt && c == 0 && len > 14 {
                self.flip ^= self.flip << 13;
                self.flip ^= self.flip >> 7;
                self.flip ^= self.flip << 17;
                let bit = 14 * 8 + (self.flip % ((len as u64 - 14) * 8)) as usize;
                buf[bit / 8] ^= 1 << (bit % 8);
            }
            // bit errors land after the Ethernet header (the frame still reaches its host,
            // whose checksums then find them, as on a wire without FCS)
            if bit_errors > 0 && c == 0 && len > 14 {
                d.link.flip_bits(&mut buf[14..], bit_errors);
            }
            self.seq += 1;
            let mangled = c == 0 && (corrupt || bit_errors > 0);
            self.heap.push(Pending { at: at_ns, seq: self.seq, out: d.out, vnet, buf, count, mangled });
        }
    }

    /// Impairs one frame as read (a super-frame datagram by datagram) and queues what is left.
    fn frame(&mut self, d: &mut Dir, now: u64, vnet: [u8; VNET], whole: &[u8], verdicts: &mut Vec<Verdict>, segs: &mut Vec<Vec<u8>>) {
        let Some(shape) = udp_gso::shape(&vnet, whole) else {
            let v = d.link.on_packet(now, whole.len() as u32);
            return self.admit(d, vnet, whole, v, 1);
        };
        verdicts.clear();
        verdicts.extend(shape.datagram_lens(whole.len()).map(|len| d.link.on_packet(now, len as u32)));
        let at = match verdicts.first() {
            Some(Verdict::Deliver { at_ns, .. }) => Some(*at_ns),
            _ => None,
        };
        let one_fate =
            at.is_some() && verdicts.iter().all(|v| matches!(*v, Verdict::Deliver { at_ns, copies: 1, corrupt: false, bit_errors: 0 } if Some(at_ns) == at));
        if one_fate {
            return self.admit(d, vnet, whole, verdicts[0], verdicts.len() as u64);
        }
        segs.clear();
        udp_gso::split(&vnet, whole, segs);
        for (seg, v) in segs.iter().zip(verdicts.iter()) {
            self.admit(d, [0; VNET], seg, *v, 1);
        }
    }
}

/// Sends the frames due on one socket (`due`, in order): joined where they can be.
fn deliver(sock: i32, d: &mut Dir, due: &[Pending], joined: &mut Vec<([u8; VNET], Vec<u8>)>, spare: &mut Vec<Vec<u8>>) {
    let mut plan: Vec<(Option<usize>, usize, u64)> = Vec::new(); // (super-frame, first frame, datagrams)
    let mut k = 0;
    while k < due.len() {
        let plain: Vec<&[u8]> =
            due[k..].iter().take(udp_gso::MAX_SEGMENTS).take_while(|p| !p.mangled && p.vnet == [0; VNET]).map(|p| p.buf.as_slice()).collect();
        let mut sup = spare.pop().unwrap_or_default();
        match udp_gso::join(&plain, &mut sup) {
            Some((n, vnet)) => {
                plan.push((Some(joined.len()), k, n as u64));
                joined.push((vnet, sup));
                k += n;
            }
            None => {
                spare.push(sup);
                plan.push((None, k, due[k].count));
                k += 1;
            }
        }
    }
    let frames: Vec<(&[u8; VNET], &[u8])> = plan
        .iter()
        .map(|&(j, k, _)| match j {
            Some(j) => (&joined[j].0, joined[j].1.as_slice()),
            None => (&due[k].vnet, due[k].buf.as_slice()),
        })
        .collect();
    let weights: Vec<u64> = plan.iter().map(|p| p.2).collect();
    let (sent, failed) = fwd_io::send_all(sock, &frames, &weights);
    d.pending_bytes -= due.iter().map(|p| p.buf.len() as u64).sum::<u64>();
    d.pending_frames -= due.iter().map(|p| p.count).sum::<u64>();
    d.sent += sent;
    d.send_errors += failed;
    spare.extend(joined.drain(..).map(|(_, b)| b));
}

pub(crate) fn forward(socks: &[OwnedFd], shared: &Mutex<Shared>) -> Result<(), EmuError> {
    // The wait ends when a socket is readable or the earliest pending frame is due: one
    // `epoll_pwait2` with a nanosecond timeout, so a busy link arms no timer at all.
    let mut set = Epoll::new(64).map_err(|e| EmuError::io("creating an epoll set", e))?;
    for (i, s) in socks.iter().enumerate() {
        set.add(s.as_raw_fd(), i as u64).map_err(|e| EmuError::io("watching a link socket", e))?;
    }
    let mut line = Line { heap: BinaryHeap::new(), pool: Vec::new(), seq: 0, flip: 0x9E37_79B9_7F4A_7C15 };
    let (mut segs, mut verdicts) = (Vec::new(), Vec::new());
    let mut rx = RxBatch::new();
    let mut due: Vec<Pending> = Vec::new();
    let (mut joined, mut spare) = (Vec::new(), Vec::new());
    let mut ready = Vec::with_capacity(64);
    loop {
        // nothing pending: wake once a second anyway (a turn that finds nothing costs nothing)
        let wait = line.heap.peek().map_or(1_000_000_000, |p| p.at.saturating_sub(mono_ns()));
        ready.clear();
        ready.extend(set.wait(wait));
        let mut sh = shared.lock().expect("forwarder state");
        for &id in &ready {
            let s = id as usize;
            // A few batches per wake-up (epoll is level-triggered: the rest comes next turn), so
            // one busy link neither starves the others nor holds back what is due.
            for _ in 0..4 {
                let got = rx.read(socks[s].as_raw_fd());
                let now = mono_ns();
                // frames read on end a (even) travel a→b: direction 2k; on end b: 2k+1
                let d = &mut sh.dirs[s];
                for f in 0..got {
                    let (vnet, whole) = rx.frame(f);
                    line.frame(d, now, vnet, whole, &mut verdicts, &mut segs);
                }
                if got < fwd_io::BATCH {
                    break;
                }
            }
        }
        // Deliver what is due, in order, one sendmmsg per run of frames to the same socket.
        let now = mono_ns();
        while line.heap.peek().is_some_and(|p| p.at <= now) {
            due.push(line.heap.pop().expect("peeked"));
        }
        let mut i = 0;
        while i < due.len() {
            let out = due[i].out;
            let run = due[i..].iter().take_while(|p| p.out == out).count();
            // direction whose frames leave by socket `out`: the opposite end's reading direction
            deliver(socks[out].as_raw_fd(), &mut sh.dirs[out ^ 1], &due[i..i + run], &mut joined, &mut spare);
            i += run;
        }
        line.pool.extend(due.drain(..).map(|p| p.buf));
        drop(sh);
    }
}
