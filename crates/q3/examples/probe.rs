//! One bot against a server, for protocol work: `cargo run -p horde-q3 --example probe -- 127.0.0.1:27961 10`
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use horde_q3::{Bot, Config};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).map_or("127.0.0.1:27961", |s| s.as_str());
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(addr).unwrap();
    let t0 = Instant::now();
    let now = || t0.elapsed().as_nanos() as u64;
    let mut bot = Bot::new(Config::new("probe".into(), 4242, 1), now());
    let mut buf = [0u8; 65536];
    let mut last = String::new();
    let mut out = Vec::new();
    while now() < secs * 1_000_000_000 {
        bot.handle_timeout(now());
        while bot.poll_transmit(now(), &mut out) {
            sock.send(&out).unwrap();
        }
        let wait = bot.poll_timeout().map_or(10_000_000, |d| d.saturating_sub(now())).clamp(100_000, 10_000_000);
        sock.set_read_timeout(Some(Duration::from_nanos(wait))).unwrap();
        if let Ok(n) = sock.recv(&mut buf) {
            bot.handle(now(), &buf[..n]);
        }
        let ph = format!("{:?}", bot.phase());
        if ph != last {
            eprintln!("{:.3}s {ph}", now() as f64 / 1e9);
            last = ph;
        }
    }
    bot.disconnect();
    for _ in 0..3 {
        while bot.poll_transmit(now() + 1_000_000_000, &mut out) {
            sock.send(&out).unwrap();
        }
    }
    let s = &bot.stats;
    let mut r = s.response_ns.clone();
    r.sort();
    eprintln!(
        "sent {} pkts, recv {} pkts, snapshots {}, corrupt {}, delta misses {}, dropped {}, responses {} (p50 {:.1} ms)",
        s.packets_sent,
        s.packets_received,
        s.snapshots,
        s.corrupt,
        s.delta_misses,
        s.dropped,
        r.len(),
        r.get(r.len() / 2).copied().unwrap_or(0) as f64 / 1e6
    );
}
