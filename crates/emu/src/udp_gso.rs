//! A UDP GSO super-frame cut into its datagrams, for the link emulator: a sender with GSO
//! (`UDP_SEGMENT`, Horde's own engine among them) hands a veth up to 64 datagrams as one frame,
//! which the link emulator's AF_PACKET socket reads whole. An impaired link must lose, delay,
//! rate-limit and count datagrams, not super-frames, so each becomes its own Ethernet frame
//! here, exactly as the kernel would have cut it: its IP length (IPv4: its own id and header
//! checksum), its UDP length and a complete UDP checksum.
//!
//! On the way out it does the reverse ([`join`]): datagrams of one flow that leave the link at
//! the same instant go to the far host as one super-frame, so the far side's kernel handles one
//! buffer instead of up to 64 (it cuts them again where the receiving socket does not ask for
//! GRO, or where the frame is forwarded). Only datagrams whose checksums hold are joined, so a
//! datagram an earlier link damaged is never passed off as whole. Pure: bytes in, frames out.

/// `virtio_net_hdr.gso_type` of a UDP super-frame cut by payload size (`VIRTIO_NET_HDR_GSO_UDP_L4`).
pub const GSO_UDP_L4: u8 = 5;
const ETH: usize = 14;
const UDP: usize = 8;

/// Whether a frame read with its `virtio_net_hdr` is a UDP GSO super-frame.
pub fn is_udp_gso(vnet: &[u8; 10]) -> bool {
    vnet[1] & 0x7f == GSO_UDP_L4
}

/// Where a UDP GSO super-frame's parts lie: IP version and header length, all headers' length,
/// and the payload bytes of each datagram but the last.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub v6: bool,
    pub ip: usize,
    pub hdr: usize,
    pub seg: usize,
}

impl Shape {
    /// The whole frame length of each datagram [`split`] cuts from a super-frame of `len` bytes.
    pub fn datagram_lens(&self, len: usize) -> impl Iterator<Item = usize> + '_ {
        let payload = len - self.hdr;
        (0..payload.div_ceil(self.seg)).map(move |k| self.hdr + self.seg.min(payload - k * self.seg))
    }
}

/// The shape of a UDP GSO super-frame [`split`] would cut (Ethernet, IPv4 or IPv6 without
/// extension headers); `None` for any other frame.
pub fn shape(vnet: &[u8; 10], frame: &[u8]) -> Option<Shape> {
    let seg = u16::from_ne_bytes([vnet[4], vnet[5]]) as usize;
    if !is_udp_gso(vnet) || seg == 0 || frame.len() < ETH + 20 {
        return None;
    }
    let (v6, ip) = match (u16::from_be_bytes([frame[12], frame[13]]), frame[ETH] >> 4) {
        (0x0800, 4) => (false, ((frame[ETH] & 0x0f) as usize) * 4),
        (0x86dd, 6) => (true, 40),
        _ => return None,
    };
    let proto = if v6 { frame[ETH + 6] } else { frame[ETH + 9] };
    let hdr = ETH + ip + UDP;
    if proto != 17 || ip < 20 || frame.len() <= hdr {
        return None;
    }
    Some(Shape { v6, ip, hdr, seg })
}

/// The datagrams of UDP GSO super-frame `frame` (Ethernet, IPv4 or IPv6 without extension
/// headers), `gso_size` payload bytes each but the last, pushed onto `out` as whole frames;
/// false (nothing pushed) when the frame is not such a super-frame.
pub fn split(vnet: &[u8; 10], frame: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
    let Some(Shape { v6, ip, hdr, seg }) = shape(vnet, frame) else { return false };
    let checksummed = v6 || u16::from_be_bytes([frame[ETH + ip + 6], frame[ETH + ip + 7]]) != 0 || vnet[0] & 1 != 0;
    let id = u16::from_be_bytes([frame[ETH + 4], frame[ETH + 5]]);
    for (k, chunk) in frame[hdr..].chunks(seg).enumerate() {
        let mut f = Vec::with_capacity(hdr + chunk.len());
        f.extend_from_slice(&frame[..hdr]);
        f.extend_from_slice(chunk);
        let udp_len = (UDP + chunk.len()) as u16;
        if v6 {
            f[ETH + 4..ETH + 6].copy_from_slice(&udp_len.to_be_bytes());
        } else {
            f[ETH + 2..ETH + 4].copy_from_slice(&((ip as u16) + udp_len).to_be_bytes());
            f[ETH + 4..ETH + 6].copy_from_slice(&id.wrapping_add(k as u16).to_be_bytes());
            f[ETH + 10..ETH + 12].fill(0);
            let c = fold(sum(&f[ETH..ETH + ip]));
            f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
        }
        let u = ETH + ip;
        f[u + 4..u + 6].copy_from_slice(&udp_len.to_be_bytes());
        f[u + 6..u + 8].fill(0);
        if checksummed {
            // the pseudo-header: source and destination addresses, protocol, UDP length
            let addrs = if v6 { &f[ETH + 8..ETH + 40] } else { &f[ETH + 12..ETH + 20] };
            let c = fold(sum(addrs) + 17 + udp_len as u64 + sum(&f[u..]));
            let c = if c == 0 { 0xffff } else { c };
            f[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
        }
        out.push(f);
    }
    true
}

/// The most datagrams one super-frame carries (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;

/// Whether `f` is one whole UDP datagram in an Ethernet frame (IPv4 without fragments or IPv6
/// without extension headers), its lengths exact and its checksums holding: `(v6, IP header
/// length)`.
fn datagram(f: &[u8]) -> Option<(bool, usize)> {
    if f.len() < ETH + 20 + UDP {
        return None;
    }
    let (v6, ip) = match (u16::from_be_bytes([f[12], f[13]]), f[ETH] >> 4) {
        (0x0800, 4) => (false, ((f[ETH] & 0x0f) as usize) * 4),
        (0x86dd, 6) => (true, 40),
        _ => return None,
    };
    if ip < 20 || f.len() < ETH + ip + UDP {
        return None;
    }
    let u = ETH + ip;
    let udp_len = u16::from_be_bytes([f[u + 4], f[u + 5]]) as usize;
    if udp_len != f.len() - u {
        return None;
    }
    let udp_sum = u16::from_be_bytes([f[u + 6], f[u + 7]]);
    if v6 {
        if f[ETH + 6] != 17 || u16::from_be_bytes([f[ETH + 4], f[ETH + 5]]) as usize != udp_len || udp_sum == 0 {
            return None;
        }
    } else {
        let whole = u16::from_be_bytes([f[ETH + 2], f[ETH + 3]]) as usize == f.len() - ETH;
        let unfragmented = u16::from_be_bytes([f[ETH + 6], f[ETH + 7]]) & 0x3fff == 0;
        if f[ETH + 9] != 17 || !whole || !unfragmented || fold(sum(&f[ETH..u])) != 0 {
            return None;
        }
    }
    let addrs = if v6 { &f[ETH + 8..ETH + 40] } else { &f[ETH + 12..ETH + 20] };
    if udp_sum != 0 && fold(sum(addrs) + 17 + udp_len as u64 + sum(&f[u..])) != 0 {
        return None;
    }
    Some((v6, ip))
}

/// Whether datagram `b` belongs to the flow of datagram `a` (both checked by [`datagram`] with
/// the same result): every header byte equal but the lengths, the IPv4 id and checksums.
fn same_flow(a: &[u8], b: &[u8], v6: bool, ip: usize) -> bool {
    let u = ETH + ip;
    let ip_same = if v6 {
        a[ETH..ETH + 4] == b[ETH..ETH + 4] && a[ETH + 6..u] == b[ETH + 6..u]
    } else {
        a[ETH..ETH + 2] == b[ETH..ETH + 2] && a[ETH + 6..ETH + 10] == b[ETH + 6..ETH + 10] && a[ETH + 12..u] == b[ETH + 12..u]
    };
    a[..ETH] == b[..ETH] && ip_same && a[u..u + 4] == b[u..u + 4]
}

/// Joins the longest run at the start of `frames` (at most [`MAX_SEGMENTS`]) that can leave as
/// one UDP GSO super-frame: whole UDP datagrams of one flow with valid checksums, every payload
/// the first one's size but the last (which may be shorter), at most 64 KiB in all. Writes the
/// super-frame to `out` and returns how many datagrams it carries and the `virtio_net_hdr` to
/// write it with; `None` (and `out` untouched) when fewer than two can be joined. What it
/// writes is what a GSO sender hands its interface: headers for the whole, the UDP checksum
/// left to be finished (the pseudo-header's sum in place) — [`split`] cuts it back into the
/// same datagrams.
pub fn join(frames: &[&[u8]], out: &mut Vec<u8>) -> Option<(usize, [u8; 10])> {
    let first = *frames.first()?;
    let (v6, ip) = datagram(first)?;
    let hdr = ETH + ip + UDP;
    let seg = first.len() - hdr;
    let room = 65535 - if v6 { 0 } else { ip };
    let (mut n, mut udp_len) = (1, UDP + seg);
    for f in &frames[1..frames.len().min(MAX_SEGMENTS)] {
        let payload = f.len().saturating_sub(hdr);
        if seg == 0 || payload == 0 || payload > seg || udp_len + payload > room || datagram(f) != Some((v6, ip)) || !same_flow(first, f, v6, ip) {
            break;
        }
        n += 1;
        udp_len += payload;
        if payload < seg {
            break; // a shorter datagram can only be the last
        }
    }
    if n < 2 {
        return None;
    }
    out.clear();
    out.extend_from_slice(&first[..hdr]);
    for f in &frames[..n] {
        out.extend_from_slice(&f[hdr..]);
    }
    let u = ETH + ip;
    let len16 = (udp_len as u16).to_be_bytes();
    if v6 {
        out[ETH + 4..ETH + 6].copy_from_slice(&len16);
    } else {
        out[ETH + 2..ETH + 4].copy_from_slice(&((ip + udp_len) as u16).to_be_bytes());
        out[ETH + 10..ETH + 12].fill(0);
        let c = fold(sum(&out[ETH..u]));
        out[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
    }
    out[u + 4..u + 6].copy_from_slice(&len16);
    let addrs = if v6 { &out[ETH + 8..ETH + 40] } else { &out[ETH + 12..ETH + 20] };
    let pseudo = !fold(sum(addrs) + 17 + udp_len as u64);
    out[u + 6..u + 8].copy_from_slice(&pseudo.to_be_bytes());
    let mut vnet = [0u8; 10];
    vnet[0] = 1; // VIRTIO_NET_HDR_F_NEEDS_CSUM
    vnet[1] = GSO_UDP_L4;
    vnet[2..4].copy_from_slice(&(hdr as u16).to_ne_bytes());
    vnet[4..6].copy_from_slice(&(seg as u16).to_ne_bytes());
    vnet[6..8].copy_from_slice(&(u as u16).to_ne_bytes());
    vnet[8..10].copy_from_slice(&6u16.to_ne_bytes());
    Some((n, vnet))
}

fn sum(b: &[u8]) -> u64 {
    b.chunks(2).map(|c| u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]) as u64).sum()
}

/// The one's complement of the one's-complement sum.
fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A super-frame as a GSO sender's veth hands it over: headers for the whole, the
    /// checksum left to be filled in.
    fn super_frame(v6: bool, payload: &[u8], seg: u16) -> ([u8; 10], Vec<u8>) {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        if v6 {
            let mut ip = [0u8; 40];
            ip[0] = 0x60;
            ip[6] = 17;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            ip[24..40].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            f.extend_from_slice(&ip);
        } else {
            f.extend_from_slice(&[0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        }
        f.extend_from_slice(&[0x9c, 0x40, 0x23, 0x28, 0, 0, 0xab, 0xcd]);
        f.extend_from_slice(payload);
        let mut vnet = [0u8; 10];
        vnet[0] = 1;
        vnet[1] = GSO_UDP_L4;
        vnet[4..6].copy_from_slice(&seg.to_ne_bytes());
        (vnet, f)
    }

    /// Whether a datagram's checksums hold, as a receiver checks them.
    fn valid(f: &[u8], v6: bool) -> bool {
        let ip = if v6 { 40 } else { 20 };
        let ip_ok = v6 || fold(sum(&f[ETH..ETH + ip])) == 0;
        let addrs = if v6 { &f[ETH + 8..ETH + 40] } else { &f[ETH + 12..ETH + 20] };
        let udp_len = (f.len() - ETH - ip) as u64;
        ip_ok && fold(sum(addrs) + 17 + udp_len + sum(&f[ETH + ip..])) == 0
    }

    #[test]
    fn a_super_frame_becomes_the_datagrams_the_kernel_would_cut() {
        for v6 in [false, true] {
            let payload: Vec<u8> = (0..340u32).map(|i| (i * 7) as u8).collect();
            let (vnet, f) = super_frame(v6, &payload, 100);
            let mut out = Vec::new();
            assert!(split(&vnet, &f, &mut out));
            let ip = if v6 { 40 } else { 20 };
            let sizes: Vec<usize> = out.iter().map(|d| d.len() - ETH - ip - UDP).collect();
            assert_eq!(sizes, [100, 100, 100, 40], "v6 {v6}");
            let joined: Vec<u8> = out.iter().flat_map(|d| d[ETH + ip + UDP..].to_vec()).collect();
            assert_eq!(joined, payload, "every byte once, in order");
            for (k, d) in out.iter().enumerate() {
                assert!(valid(d, v6), "datagram {k} (v6 {v6}) checks");
                let udp_len = u16::from_be_bytes([d[ETH + ip + 4], d[ETH + ip + 5]]) as usize;
                assert_eq!(udp_len, d.len() - ETH - ip);
                if !v6 {
                    assert_eq!(u16::from_be_bytes([d[ETH + 2], d[ETH + 3]]) as usize, d.len() - ETH);
                    assert_eq!(u16::from_be_bytes([d[ETH + 4], d[ETH + 5]]), 0x1234 + k as u16, "each its own id");
                }
            }
        }
    }

    /// The datagrams of a super-frame, as a sender without GSO would have sent them.
    fn datagrams(v6: bool, payload: &[u8], seg: u16) -> Vec<Vec<u8>> {
        let (vnet, f) = super_frame(v6, payload, seg);
        let mut out = Vec::new();
        assert!(split(&vnet, &f, &mut out));
        out
    }

    #[test]
    fn datagrams_of_one_flow_join_into_the_super_frame_that_splits_back_into_them() {
        for v6 in [false, true] {
            let payload: Vec<u8> = (0..340u32).map(|i| (i * 13) as u8).collect();
            let d = datagrams(v6, &payload, 100);
            let refs: Vec<&[u8]> = d.iter().map(|x| x.as_slice()).collect();
            let mut sup = Vec::new();
            let (n, vnet) = join(&refs, &mut sup).expect("joined");
            assert_eq!(n, 4, "v6 {v6}");
            let mut again = Vec::new();
            assert!(split(&vnet, &sup, &mut again));
            assert_eq!(again, d, "v6 {v6}: the same datagrams, byte for byte");
        }
    }

    #[test]
    fn only_whole_datagrams_of_one_flow_with_valid_checksums_join() {
        let d = datagrams(false, &[7; 250], 100);
        let mut sup = Vec::new();
        let refs = |v: &[Vec<u8>]| v.to_vec();
        let try_join = |v: &[Vec<u8>], sup: &mut Vec<u8>| join(&v.iter().map(|x| x.as_slice()).collect::<Vec<_>>(), sup).map(|j| j.0);
        assert_eq!(try_join(&d[..1], &mut sup), None, "one datagram is left as it is");
        let mut bad = refs(&d);
        bad[1][ETH + 8 + 20 + 5] ^= 1; // a payload bit an earlier link flipped
        assert_eq!(try_join(&bad, &mut sup), None, "a damaged datagram is never joined");
        let mut other = refs(&d);
        other[2][ETH + 20 + 1] ^= 1; // another source port
        assert_eq!(try_join(&other, &mut sup), Some(2), "another flow ends the run");
        let mut short = refs(&d);
        short.swap(0, 2);
        assert_eq!(try_join(&short, &mut sup), None, "a shorter datagram first: nothing to join");
        let mut frag = refs(&d);
        frag[0][ETH + 6] |= 0x20; // more fragments
        assert_eq!(try_join(&frag, &mut sup), None, "a fragment is not a whole datagram");
        let many: Vec<Vec<u8>> = (0..70).map(|_| d[0].clone()).collect();
        assert_eq!(try_join(&many, &mut sup), Some(MAX_SEGMENTS));
        let big = datagrams(false, &vec![1u8; 1472 * 50], 1472);
        assert_eq!(try_join(&big, &mut sup), Some(44), "at most 64 KiB in one super-frame");
    }

    #[test]
    fn other_frames_are_left_alone() {
        let (mut vnet, f) = super_frame(false, &[1; 300], 100);
        let mut out = Vec::new();
        vnet[1] = 1; // TCP
        assert!(!split(&vnet, &f, &mut out));
        vnet[1] = GSO_UDP_L4;
        assert!(!split(&vnet, &f[..30], &mut out), "cut short");
        let mut tcp = f.clone();
        tcp[ETH + 9] = 6;
        assert!(!split(&vnet, &tcp, &mut out), "not UDP");
        assert!(out.is_empty());
    }
}
