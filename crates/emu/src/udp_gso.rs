//! A UDP GSO super-frame cut into its datagrams, for the link emulator: a sender with GSO
//! (`UDP_SEGMENT`, Horde's own engine among them) hands a veth up to 64 datagrams as one frame,
//! which the link emulator's AF_PACKET socket reads whole. An impaired link must lose, delay,
//! rate-limit and count datagrams, not super-frames, so each becomes its own Ethernet frame
//! here, exactly as the kernel would have cut it: its IP length (IPv4: its own id and header
//! checksum), its UDP length and a complete UDP checksum. Pure: bytes in, frames out.

/// `virtio_net_hdr.gso_type` of a UDP super-frame cut by payload size (`VIRTIO_NET_HDR_GSO_UDP_L4`).
pub const GSO_UDP_L4: u8 = 5;
const ETH: usize = 14;
const UDP: usize = 8;

/// Whether a frame read with its `virtio_net_hdr` is a UDP GSO super-frame.
pub fn is_udp_gso(vnet: &[u8; 10]) -> bool {
    vnet[1] & 0x7f == GSO_UDP_L4
}

/// The datagrams of UDP GSO super-frame `frame` (Ethernet, IPv4 or IPv6 without extension
/// headers), `gso_size` payload bytes each but the last, pushed onto `out` as whole frames;
/// false (nothing pushed) when the frame is not such a super-frame.
pub fn split(vnet: &[u8; 10], frame: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
    let seg = u16::from_ne_bytes([vnet[4], vnet[5]]) as usize;
    if !is_udp_gso(vnet) || seg == 0 || frame.len() < ETH + 20 {
        return false;
    }
    let (v6, ip) = match (u16::from_be_bytes([frame[12], frame[13]]), frame[ETH] >> 4) {
        (0x0800, 4) => (false, ((frame[ETH] & 0x0f) as usize) * 4),
        (0x86dd, 6) => (true, 40),
        _ => return false,
    };
    let proto = if v6 { frame[ETH + 6] } else { frame[ETH + 9] };
    let hdr = ETH + ip + UDP;
    if proto != 17 || ip < 20 || frame.len() <= hdr {
        return false;
    }
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
