//! Reading a capture: pcap or pcapng, packet by packet, into UDP datagrams and TCP segments.
//!
//! Streamed: `pcap-file` parses from a fixed 8 MB buffer, so memory stays bounded whatever the
//! file's size, and a record that claims to be larger than the buffer is an error, not an
//! allocation. Every frame that is not IPv4/IPv6 carrying UDP or TCP is counted in [`Skipped`]
//! under the reason it was left out; a file cut short or corrupted part-way ends the packets
//! with the reason kept in [`Skipped::ended`], so a fit of what came before says what it lost.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};

use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket, TcpHeaderSlice, UdpHeaderSlice};
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, PcapError};
use serde::Serialize;

/// One UDP datagram or TCP segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Capture time, nanoseconds since the Unix epoch.
    pub t_ns: u64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub l4: L4,
    /// Application bytes carried, from the headers' length fields (a short snap length does
    /// not shrink it).
    pub payload: u32,
    /// The first bytes of the application payload as captured (zeros past what was kept):
    /// enough to tell Horde's own stream hello and end-of-flow signal from a game's bytes.
    pub head: [u8; 4],
    /// A UDP GSO super-datagram of Horde's, captured before the cut (on the sending host, on
    /// loopback): the size of its segments, each its own APDU ([`gso_segment`]).
    pub segment: Option<u32>,
}

/// Where `part` (a slice of `whole`) starts in `whole`.
fn offset(whole: &[u8], part: &[u8]) -> usize {
    (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize).min(whole.len())
}

fn head(bytes: &[u8]) -> [u8; 4] {
    let mut h = [0u8; 4];
    let n = bytes.len().min(4);
    h[..n].copy_from_slice(&bytes[..n]);
    h
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    Udp,
    Tcp { seq: u32, syn: bool, fin: bool, rst: bool, psh: bool },
}

/// Frames left out, by reason, and why the packets ended early (if they did).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Skipped {
    /// Frames that are not IPv4/IPv6 (ARP, LLDP, other link types).
    pub not_ip: u64,
    /// IP fragments (a fragmented datagram's size cannot be read from its first piece alone).
    pub fragments: u64,
    /// IP packets carrying neither UDP nor TCP (ICMP, IGMP, …).
    pub other_protocol: u64,
    /// Frames whose headers are cut or inconsistent.
    pub malformed: u64,
    /// Horde's own control datagrams (hellos, challenges, answers, consent probes and echo
    /// replies): how Horde's flows start and stay consented, not the game's traffic.
    pub horde_control: u64,
    /// pcapng simple or obsolete packet blocks (they carry no time, or an ambiguous one).
    pub untimed: u64,
    /// Link types this reader does not decode (the number is the pcap LINKTYPE).
    pub link_types: Vec<u32>,
    /// Frames of those link types.
    pub unknown_link: u64,
    /// Why the file ended before its last byte, when it did ("cut short after …").
    pub ended: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("not a pcap or pcapng file (it starts with {0:02x?}); write one with `tshark -w FILE.pcapng` or `tcpdump -w FILE.pcap`")]
    NotACapture([u8; 4]),
    #[error("the capture's header is unreadable ({0}); is the file complete?")]
    Header(String),
    #[error("reading the capture: {0}")]
    Io(#[from] std::io::Error),
}

enum Format<R: Read> {
    Pcap(PcapReader<R>, DataLink),
    Ng(Box<PcapNgReader<R>>, Vec<Interface>),
}

#[derive(Clone, Copy)]
struct Interface {
    link: DataLink,
    /// Nanoseconds per timestamp unit as a ratio (numerator, denominator).
    unit: (u64, u64),
}

/// A reader with the magic number it started with put back in front.
pub type Opened<R> = std::io::Chain<std::io::Cursor<[u8; 4]>, R>;

/// (time in ns, link type, bytes) of one frame.
type Frame = (u64, DataLink, Vec<u8>);

/// Packets of a capture, in file order.
pub struct Capture<R: Read> {
    format: Format<R>,
    pub skipped: Skipped,
    frames: u64,
    done: bool,
}

impl<R: Read> Capture<R> {
    /// Opens a capture from its first byte, pcap (micro- or nanosecond, either byte order) or
    /// pcapng, told apart by the magic number.
    pub fn new(mut reader: R) -> Result<Capture<Opened<R>>, CaptureError> {
        let mut magic = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match reader.read(&mut magic[got..])? {
                0 => return Err(CaptureError::NotACapture(magic)),
                n => got += n,
            }
        }
        let chained = std::io::Cursor::new(magic).chain(reader);
        let format = match magic {
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                let ng = PcapNgReader::new(chained).map_err(|e| CaptureError::Header(e.to_string()))?;
                Format::Ng(Box::new(ng), Vec::new())
            }
            [0xa1, 0xb2, 0xc3, 0xd4] | [0xd4, 0xc3, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d] | [0x4d, 0x3c, 0xb2, 0xa1] => {
                let pcap = PcapReader::new(chained).map_err(|e| CaptureError::Header(e.to_string()))?;
                let link = pcap.header().datalink;
                Format::Pcap(pcap, link)
            }
            other => return Err(CaptureError::NotACapture(other)),
        };
        Ok(Capture { format, skipped: Skipped::default(), frames: 0, done: false })
    }
}

impl<R: Read> Capture<R> {
    /// Frames read so far, decoded or skipped.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The next UDP datagram or TCP segment; None at the end of the file, or where it is cut
    /// short or corrupted (then [`Skipped::ended`] says which).
    pub fn next_packet(&mut self) -> Option<Packet> {
        self.next_decoded().map(|(p, _, _)| p)
    }

    /// The next UDP datagram with its payload as captured (shorter than [`Packet::payload`]
    /// where the capture's snap length cut it); TCP segments are passed over.
    pub fn next_datagram(&mut self) -> Option<(Packet, Vec<u8>)> {
        loop {
            let (p, at, data) = self.next_decoded()?;
            if p.l4 == L4::Udp {
                let end = (at + p.payload as usize).min(data.len());
                return Some((p, data[at.min(end)..end].to_vec()));
            }
        }
    }

    /// The next decoded packet, where its payload starts in its frame, and the frame.
    fn next_decoded(&mut self) -> Option<(Packet, usize, Vec<u8>)> {
        while !self.done {
            let (t_ns, link, data) = match self.next_frame()? {
                Ok(frame) => frame,
                Err(e) => {
                    self.end(e);
                    return None;
                }
            };
            self.frames += 1;
            if let Some((p, at)) = decode_at(link, &data, t_ns, &mut self.skipped) {
                return Some((p, at, data));
            }
        }
        None
    }

    fn end(&mut self, e: PcapError) {
        self.done = true;
        let why = match e {
            PcapError::IncompleteBuffer => "cut short".to_string(),
            PcapError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => "cut short".to_string(),
            other => format!("corrupted ({other})"),
        };
        self.skipped.ended = Some(format!("{why} after frame {}; the fit uses the frames before it", self.frames));
    }

    /// The next frame as (time, link type, bytes), or the error that ends the file.
    fn next_frame(&mut self) -> Option<Result<Frame, PcapError>> {
        match &mut self.format {
            Format::Pcap(reader, link) => {
                let p = match reader.next_packet()? {
                    Ok(p) => p,
                    Err(e) => return Some(Err(e)),
                };
                let t = p.timestamp.as_nanos().min(u64::MAX as u128) as u64;
                Some(Ok((t, *link, p.data.into_owned())))
            }
            Format::Ng(reader, interfaces) => loop {
                let block = match reader.next_block()? {
                    Ok(b) => b,
                    Err(e) => return Some(Err(e)),
                };
                match block {
                    Block::SectionHeader(_) => interfaces.clear(),
                    Block::InterfaceDescription(idb) => interfaces.push(Interface::of(&idb)),
                    Block::EnhancedPacket(epb) => {
                        let Some(ifc) = interfaces.get(epb.interface_id as usize).copied() else {
                            return Some(Err(PcapError::InvalidField("a packet names an interface the file never described")));
                        };
                        // pcap-file hands the raw timestamp units over as nanoseconds
                        let raw = epb.timestamp.as_nanos();
                        let t = (raw.saturating_mul(ifc.unit.0 as u128) / ifc.unit.1 as u128).min(u64::MAX as u128) as u64;
                        return Some(Ok((t, ifc.link, epb.data.into_owned())));
                    }
                    // a simple packet block carries no time: of no use to a fit
                    Block::SimplePacket(_) | Block::Packet(_) => self.skipped.untimed += 1,
                    _ => {}
                }
            },
        }
    }
}

impl Interface {
    fn of(idb: &pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock) -> Interface {
        let mut unit = (1000, 1); // microseconds by default
        for opt in &idb.options {
            if let InterfaceDescriptionOption::IfTsResol(r) = opt {
                unit = resolution(*r);
            }
        }
        Interface { link: idb.linktype, unit }
    }
}

/// Nanoseconds per unit of `if_tsresol` as (numerator, denominator): 10^-r s, or 2^-r s with
/// the top bit set. Absurd values clamp to 1 ns or 1 s.
fn resolution(r: u8) -> (u64, u64) {
    if r & 0x80 == 0 {
        let r = r.min(18) as u32;
        if r <= 9 {
            (10u64.pow(9 - r), 1)
        } else {
            (1, 10u64.pow(r - 9))
        }
    } else {
        let r = (r & 0x7f).min(62) as u32;
        (1_000_000_000, 1u64 << r)
    }
}

/// Decodes one frame into a packet, or counts why it is left out.
pub fn decode(link: DataLink, data: &[u8], t_ns: u64, skipped: &mut Skipped) -> Option<Packet> {
    decode_at(link, data, t_ns, skipped).map(|(p, _)| p)
}

/// [`decode`], with the offset in `data` where the application payload starts.
fn decode_at(link: DataLink, data: &[u8], t_ns: u64, skipped: &mut Skipped) -> Option<(Packet, usize)> {
    let sliced = match link {
        DataLink::ETHERNET => LaxSlicedPacket::from_ethernet(data).ok(),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => LaxSlicedPacket::from_ip(data).ok(),
        DataLink::NULL | DataLink::LOOP => data.get(4..).and_then(|d| LaxSlicedPacket::from_ip(d).ok()),
        DataLink::LINUX_SLL => match (data.get(14..16), data.get(16..)) {
            (Some(proto), Some(rest)) => Some(LaxSlicedPacket::from_ether_type(EtherType(u16::from_be_bytes([proto[0], proto[1]])), rest)),
            _ => None,
        },
        other => {
            let code = u32::from(other);
            if !skipped.link_types.contains(&code) && skipped.link_types.len() < 16 {
                skipped.link_types.push(code);
            }
            skipped.unknown_link += 1;
            return None;
        }
    };
    let Some(sliced) = sliced else {
        skipped.malformed += 1;
        return None;
    };
    let (src, dst, declared, payload) = match &sliced.net {
        Some(LaxNetSlice::Ipv4(ip)) => {
            let h = ip.header();
            let declared = usize::from(h.total_len()).saturating_sub(h.slice().len() + ip.extensions().auth.map_or(0, |a| a.slice().len()));
            (IpAddr::V4(h.source_addr()), IpAddr::V4(h.destination_addr()), declared, ip.payload())
        }
        Some(LaxNetSlice::Ipv6(ip)) => {
            let h = ip.header();
            let declared = usize::from(h.payload_length()).saturating_sub(ip.extensions().slice().len());
            (IpAddr::V6(h.source_addr()), IpAddr::V6(h.destination_addr()), declared, ip.payload())
        }
        Some(LaxNetSlice::Arp(_)) | None => {
            skipped.not_ip += 1;
            return None;
        }
    };
    if payload.fragmented {
        skipped.fragments += 1;
        return None;
    }
    let bytes = payload.payload;
    match payload.ip_number {
        etherparse::IpNumber::UDP => {
            let Ok(udp) = UdpHeaderSlice::from_slice(bytes) else {
                skipped.malformed += 1;
                return None;
            };
            let len = usize::from(udp.length());
            if len < 8 || len > declared.max(8) {
                skipped.malformed += 1;
                return None;
            }
            if is_horde_control(&bytes[8.min(bytes.len())..]) {
                skipped.horde_control += 1;
                return None;
            }
            let l4 = L4::Udp;
            let at = offset(data, bytes) + 8;
            Some((
                Packet {
                    t_ns,
                    src: SocketAddr::new(src, udp.source_port()),
                    dst: SocketAddr::new(dst, udp.destination_port()),
                    l4,
                    payload: (len - 8) as u32,
                    head: head(bytes.get(8..).unwrap_or(&[])),
                    segment: gso_segment(bytes.get(8..len.min(bytes.len())).unwrap_or(&[]), len - 8),
                },
                at,
            ))
        }
        etherparse::IpNumber::TCP => {
            let Ok(tcp) = TcpHeaderSlice::from_slice(bytes) else {
                skipped.malformed += 1;
                return None;
            };
            let header = usize::from(tcp.data_offset()) * 4;
            if header > declared {
                skipped.malformed += 1;
                return None;
            }
            let l4 = L4::Tcp { seq: tcp.sequence_number(), syn: tcp.syn(), fin: tcp.fin(), rst: tcp.rst(), psh: tcp.psh() };
            let at = offset(data, bytes) + header;
            Some((
                Packet {
                    t_ns,
                    src: SocketAddr::new(src, tcp.source_port()),
                    dst: SocketAddr::new(dst, tcp.destination_port()),
                    l4,
                    payload: (declared - header) as u32,
                    head: head(bytes.get(header..).unwrap_or(&[])),
                    segment: None,
                },
                at,
            ))
        }
        _ => {
            skipped.other_protocol += 1;
            None
        }
    }
}

/// Where a UDP payload, captured whole, is several of Horde's datagrams sent as one GSO
/// super-datagram (a sender's departures of one size that were due together; the kernel or
/// the interface cuts it into datagrams after the capture point on the sending host): the
/// segment size `g`, when a Horde header of the same flow with the next sequence number sits
/// at every multiple of `g` (the last segment may be shorter). None for anything else, or a
/// payload the capture cut short (its segments cannot be seen; docs/fit.md).
pub fn gso_segment(payload: &[u8], len: usize) -> Option<u32> {
    use horde_wire::datagram::{DatagramHeader, DATAGRAM_HEADER_LEN};
    if payload.len() < len || len < 2 * DATAGRAM_HEADER_LEN {
        return None;
    }
    let first = DatagramHeader::parse(payload).ok()?;
    let at = |off: usize, k: u32| DatagramHeader::parse(&payload[off..]).is_ok_and(|h| h.flow == first.flow && h.seq == first.seq.wrapping_add(k));
    (DATAGRAM_HEADER_LEN..=len - DATAGRAM_HEADER_LEN)
        .find(|&g| at(g, 1) && (2..).map(|k| k as usize * g).take_while(|&o| o < len).all(|o| len - o >= DATAGRAM_HEADER_LEN && at(o, (o / g) as u32)))
        .map(|g| g as u32)
}

/// A UDP payload that starts with Horde's datagram header and carries a control flag.
fn is_horde_control(payload: &[u8]) -> bool {
    use horde_wire::datagram::{DatagramHeader, CONTROL_FLAGS, FLAG_ECHO_REPLY};
    DatagramHeader::parse(payload).is_ok_and(|h| h.flags & (CONTROL_FLAGS | FLAG_ECHO_REPLY) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_resolutions_scale_to_nanoseconds() {
        assert_eq!(resolution(6), (1000, 1));
        assert_eq!(resolution(9), (1, 1));
        assert_eq!(resolution(12), (1, 1000));
        assert_eq!(resolution(0x80 | 10), (1_000_000_000, 1024));
        // absurd values clamp instead of overflowing
        assert_eq!(resolution(200), (1_000_000_000, 1 << 62));
        assert_eq!(resolution(120), (1, 10u64.pow(9)));
    }

    #[test]
    fn what_is_not_a_capture_is_named() {
        let e = Capture::new(&b"hello world"[..]).err().unwrap();
        assert!(e.to_string().contains("not a pcap or pcapng file"), "{e}");
        assert!(matches!(Capture::new(&b"ab"[..]), Err(CaptureError::NotACapture(_))));
    }
}
