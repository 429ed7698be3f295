//! The link emulator's batched socket I/O and the kernel's own drop counters.
//!
//! Frames are read with `recvmmsg(2)` and written with `sendmmsg(2)`, up to [`BATCH`] per call,
//! so a busy link costs two system calls per batch rather than two per frame.
//!
//! A frame can be lost before the daemon ever reads it, and after it hands the frame on; the
//! link's own counters cannot see either, so the kernel's are read and added to them:
//! - the AF_PACKET socket's receive buffer overflows (`PACKET_STATISTICS`' `tp_drops`, which the
//!   kernel resets on every read: accumulated here);
//! - the fabric end's input backlog overflows before the socket sees the frame (the interface's
//!   `rx_dropped`);
//! - after the daemon sends a frame, the far host's backlog overflows (`tx_dropped` of the
//!   fabric end it left by: veth counts a frame its peer refused there).

use std::os::fd::RawFd;

use crate::EmuError;

/// CLOCK_MONOTONIC in nanoseconds: the link emulator's one clock.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The last system error, saying what was being done.
pub fn os_err(what: &str) -> EmuError {
    EmuError::io(what, std::io::Error::last_os_error())
}

/// Frames per system call.
pub const BATCH: usize = 64;
/// The largest frame read (a GSO frame from a veth can be 64 KiB).
pub const FRAME: usize = 65536;
const PACKET_STATISTICS: libc::c_int = 6;
/// Every frame read or written carries a `virtio_net_hdr` (`PACKET_VNET_HDR`): the kernel says
/// when a frame's checksum is still to be filled in (a sender with checksum offload, such as a
/// veth of the machine) and when it is a GSO super-frame, which the kernel segments again when
/// the frame is written.
pub const VNET: usize = 10;
pub const PACKET_VNET_HDR: libc::c_int = 15;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;

/// Completes a frame whose checksum the sender left to the hardware: the header says where the
/// checksummed part starts and where in it the checksum goes. A GSO frame keeps its header (the
/// kernel fills each segment's checksum when it splits the frame on the way out); any other
/// frame is completed here — before impairments flip its bits, so the receiver finds them —
/// and its header cleared. Returns the header to write the frame with.
pub fn settle(vnet: [u8; VNET], frame: &mut [u8]) -> [u8; VNET] {
    let gso = vnet[1] != 0;
    if gso || vnet[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM == 0 {
        return if gso { vnet } else { [0; VNET] };
    }
    let start = u16::from_ne_bytes([vnet[6], vnet[7]]) as usize;
    let offset = u16::from_ne_bytes([vnet[8], vnet[9]]) as usize;
    if start + offset + 2 <= frame.len() {
        complete_checksum(frame, start, offset);
    }
    [0; VNET]
}

/// The Internet checksum over `frame[start..]`, whose field at `start + offset` holds the
/// pseudo-header's sum (as the kernel leaves it), written into that field (0 sent as 0xffff,
/// as the kernel does).
pub fn complete_checksum(frame: &mut [u8], start: usize, offset: usize) {
    let mut sum: u64 = 0;
    for c in frame[start..].chunks(2) {
        sum += u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]) as u64;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let c = !(sum as u16);
    let c = if c == 0 { 0xffff } else { c };
    frame[start + offset..start + offset + 2].copy_from_slice(&c.to_be_bytes());
}

/// Receive buffers for [`BATCH`] frames (each after its [`VNET`]-byte header) and the
/// `mmsghdr`s that point into them.
pub struct RxBatch {
    data: Vec<u8>,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
}

const SLOT: usize = VNET + FRAME;

impl RxBatch {
    pub fn new() -> RxBatch {
        let mut data = vec![0u8; BATCH * SLOT];
        let base = data.as_mut_ptr();
        // SAFETY: every offset is inside `data`, whose heap block never moves (never resized).
        let mut iov: Vec<libc::iovec> =
            (0..BATCH).map(|i| libc::iovec { iov_base: unsafe { base.add(i * SLOT) } as *mut libc::c_void, iov_len: SLOT }).collect();
        let iov_base = iov.as_mut_ptr();
        let hdr = (0..BATCH)
            .map(|i| {
                // SAFETY: a zeroed msghdr is valid; the pointer fields are set below.
                let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
                // SAFETY: i < BATCH = iov.len(); `iov` is never resized either.
                m.msg_iov = unsafe { iov_base.add(i) };
                m.msg_iovlen = 1;
                libc::mmsghdr { msg_hdr: m, msg_len: 0 }
            })
            .collect();
        RxBatch { data, iov, hdr }
    }

    /// Reads what is waiting on `fd`, up to [`BATCH`] frames, without blocking. Returns how many.
    pub fn read(&mut self, fd: RawFd) -> usize {
        debug_assert_eq!(self.iov.len(), BATCH);
        // SAFETY: `hdr` holds BATCH valid headers pointing into `data`.
        let n = unsafe { libc::recvmmsg(fd, self.hdr.as_mut_ptr(), BATCH as libc::c_uint, libc::MSG_DONTWAIT as _, std::ptr::null_mut()) };
        n.max(0) as usize
    }

    /// Frame `i` of the last read, with its header (truncated to [`FRAME`] bytes).
    pub fn frame(&self, i: usize) -> ([u8; VNET], &[u8]) {
        let len = (self.hdr[i].msg_len as usize).clamp(VNET, SLOT);
        let at = i * SLOT;
        (self.data[at..at + VNET].try_into().expect("VNET bytes"), &self.data[at + VNET..at + len])
    }
}

/// Writes `frames` (each a header and a frame) to `fd`, as few system calls as possible;
/// returns the datagrams (frame `k` carries `weights[k]`) (sent, failed). A frame the kernel
/// refuses (a full send buffer: the socket does not block) is dropped and counted.
pub fn send_all(fd: RawFd, frames: &[(&[u8; VNET], &[u8])], weights: &[u64]) -> (u64, u64) {
    let (mut sent, mut failed) = (0u64, 0u64);
    for (chunk, w) in frames.chunks(BATCH).zip(weights.chunks(BATCH)) {
        let mut iov: Vec<libc::iovec> = chunk
            .iter()
            .flat_map(|(h, f)| {
                [
                    libc::iovec { iov_base: h.as_ptr() as *mut libc::c_void, iov_len: VNET },
                    libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() },
                ]
            })
            .collect();
        let iov_base = iov.as_mut_ptr();
        let mut hdr: Vec<libc::mmsghdr> = (0..chunk.len())
            .map(|i| {
                // SAFETY: a zeroed msghdr is valid; the iovec pointer is set below.
                let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
                // SAFETY: 2i + 1 < iov.len().
                m.msg_iov = unsafe { iov_base.add(2 * i) };
                m.msg_iovlen = 2;
                libc::mmsghdr { msg_hdr: m, msg_len: 0 }
            })
            .collect();
        let mut i = 0;
        while i < hdr.len() {
            // SAFETY: hdr[i..] are valid headers whose buffers outlive the call.
            let r = unsafe { libc::sendmmsg(fd, hdr[i..].as_mut_ptr(), (hdr.len() - i) as libc::c_uint, libc::MSG_DONTWAIT as _) };
            if r <= 0 {
                failed += w[i]; // the first message failed: drop it and go on
                i += 1;
            } else {
                sent += w[i..i + r as usize].iter().sum::<u64>();
                i += r as usize;
            }
        }
        drop(iov);
    }
    (sent, failed)
}

/// Frames the socket's receive buffer dropped since the last call (the kernel resets it).
pub fn socket_drops(fd: RawFd) -> u64 {
    let mut st = [0u32; 2]; // struct tpacket_stats { tp_packets, tp_drops }
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: st is large enough for tpacket_stats; len says so.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_PACKET, PACKET_STATISTICS, st.as_mut_ptr() as *mut libc::c_void, &mut len) };
    if r == 0 {
        st[1] as u64
    } else {
        0
    }
}

/// `(rx_dropped, tx_dropped)` of every interface of the calling thread's network namespace.
pub fn interface_drops() -> std::collections::HashMap<String, (u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap_or_default();
    parse_net_dev(&text)
}

/// Parses `/proc/net/dev`: after the name, receive has 8 columns (bytes packets errs drop …)
/// and transmit 8 (bytes packets errs drop …).
pub fn parse_net_dev(text: &str) -> std::collections::HashMap<String, (u64, u64)> {
    let mut out = std::collections::HashMap::new();
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else { continue };
        let v: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        if v.len() >= 16 {
            out.insert(name.trim().to_string(), (v[3], v[11]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_dev_columns() {
        let t = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo: 100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0\nhdabi0a: 5000 50 0 7 0 0 0 0 600 6 0 9 0 0 0 0\nbroken: 1 2\n";
        let m = parse_net_dev(t);
        assert_eq!(m["hdabi0a"], (7, 9));
        assert_eq!(m["lo"], (0, 0));
        assert!(!m.contains_key("broken"));
    }

    /// A UDP/IPv4 frame whose checksum field holds the pseudo-header sum (as a sender with
    /// offload leaves it) comes out with the checksum a full computation gives.
    #[test]
    fn partial_checksums_are_completed() {
        // Ethernet (14) + IPv4 (20) + UDP (8) + 5 bytes of payload
        let (src, dst) = ([10u8, 0, 0, 1], [10u8, 0, 0, 2]);
        let payload = b"hello";
        let udp_len = 8 + payload.len() as u16;
        let mut f = vec![0u8; 14];
        f.extend_from_slice(&[0x45, 0, 0, 33, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&[0x12, 0x34, 0x23, 0x28]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        // the full checksum: pseudo-header + UDP header + payload
        let fold = |mut s: u64| {
            while s >> 16 != 0 {
                s = (s & 0xffff) + (s >> 16);
            }
            s as u16
        };
        let words = |b: &[u8]| b.chunks(2).map(|c| u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]) as u64).sum::<u64>();
        let pseudo = words(&src) + words(&dst) + 17 + udp_len as u64;
        let full = !fold(pseudo + words(&f[34..]));
        // what the kernel leaves: the folded pseudo-header sum in the field
        f[40..42].copy_from_slice(&fold(pseudo).to_be_bytes());
        let mut vnet = [0u8; VNET];
        vnet[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        vnet[6..8].copy_from_slice(&34u16.to_ne_bytes());
        vnet[8..10].copy_from_slice(&6u16.to_ne_bytes());
        assert_eq!(settle(vnet, &mut f), [0; VNET]);
        assert_eq!(u16::from_be_bytes([f[40], f[41]]), full);
        // a frame with nothing to do is left alone; a GSO frame keeps its header
        let before = f.clone();
        assert_eq!(settle([0; VNET], &mut f), [0; VNET]);
        assert_eq!(f, before);
        let gso = [1, 1, 0, 0, 0, 0, 34, 0, 16, 0];
        assert_eq!(settle(gso, &mut f), gso);
        assert_eq!(f, before);
    }
}
