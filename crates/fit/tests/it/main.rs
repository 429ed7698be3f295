//! `horde-fit` end to end: captures written here, with known models, fitted back.

mod contract;
mod fuzzed;
mod synthetic;

use std::time::Duration;

use etherparse::PacketBuilder;
use horde_model::dist::Dist;
use pcap_file::pcap::{PcapPacket, PcapWriter};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A pcap being written in memory.
pub struct Pcap {
    w: PcapWriter<Vec<u8>>,
}

pub const SERVER: [u8; 4] = [10, 0, 0, 1];

impl Default for Pcap {
    fn default() -> Pcap {
        Pcap { w: PcapWriter::new(Vec::new()).unwrap() }
    }
}

impl Pcap {
    pub fn new() -> Pcap {
        Pcap::default()
    }

    fn frame(&mut self, t_ns: u64, bytes: &[u8]) {
        let ts = Duration::from_nanos(t_ns);
        self.w.write_packet(&PcapPacket::new(ts, bytes.len() as u32, bytes)).unwrap();
    }

    /// A UDP datagram between client `c` and the server's port 27960.
    pub fn udp(&mut self, t_ns: u64, c: u8, up: bool, payload: usize) {
        let (client, server) = ([10, 0, 1, c], SERVER);
        let b = if up {
            PacketBuilder::ethernet2([2; 6], [4; 6]).ipv4(client, server, 64).udp(40000 + u16::from(c), 27960)
        } else {
            PacketBuilder::ethernet2([4; 6], [2; 6]).ipv4(server, client, 64).udp(27960, 40000 + u16::from(c))
        };
        let mut v = Vec::new();
        b.write(&mut v, &vec![0u8; payload]).unwrap();
        self.frame(t_ns, &v);
    }

    /// A TCP segment between client `c` and the server's port 4000.
    pub fn tcp(&mut self, t_ns: u64, c: u8, up: bool, seq: u32, payload: usize, psh: bool) {
        let (client, server) = ([10, 0, 1, c], SERVER);
        let b = if up {
            PacketBuilder::ethernet2([2; 6], [4; 6]).ipv4(client, server, 64).tcp(50000 + u16::from(c), 4000, seq, 65535)
        } else {
            PacketBuilder::ethernet2([4; 6], [2; 6]).ipv4(server, client, 64).tcp(4000, 50000 + u16::from(c), seq, 65535)
        };
        let b = if psh { b.psh() } else { b };
        let mut v = Vec::new();
        b.write(&mut v, &vec![0u8; payload]).unwrap();
        self.frame(t_ns, &v);
    }

    /// A frame of anything (ARP, garbage).
    pub fn raw(&mut self, t_ns: u64, bytes: &[u8]) {
        self.frame(t_ns, bytes);
    }

    pub fn bytes(self) -> Vec<u8> {
        self.w.into_writer()
    }
}

/// Departure times and sizes of one client and direction over `[0, secs)`, from the model.
pub fn departures(idt: &str, size: &str, secs: f64, seed: u64) -> Vec<(u64, usize)> {
    let (idt, size): (Dist, Dist) = (idt.parse().unwrap(), size.parse().unwrap());
    let (mut si, mut ss) = (idt.sampler(), size.sampler());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = si.sample(&mut rng);
    let mut out = Vec::new();
    while t < secs * 1000.0 {
        out.push(((t * 1e6) as u64, ss.sample(&mut rng).max(0.0) as usize));
        t += si.sample(&mut rng);
    }
    out
}
