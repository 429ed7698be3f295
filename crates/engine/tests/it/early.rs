//! Datagrams that overtook their flow's admitting hello (issue 48): a UDP sender sends its
//! admitting hello and its first departures back to back, so on a reordering path a departure
//! can arrive first. The receiver holds it a moment and counts, logs and echoes it once the
//! hello admits the flow; a datagram whose hello never comes is refused as before. The same
//! for a run's server side and its players.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use horde_proto::greeter::{GreetState, Greeter};
use horde_proto::RunKey;
use horde_wire::datagram::{FLAG_ECHO_REPLY, FLAG_ECHO_REQUEST};
use horde_wire::DatagramHeader;

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn datagram(flags: u8, flow: u32, seq: u32) -> Vec<u8> {
    let mut b = vec![0u8; 200];
    DatagramHeader { flags, flow, seq, send_ns: now_ns() }.emit(&mut b);
    b
}

/// Until `g` reaches `want`: its hellos out, answers in. Returns the sequence numbers of
/// echo replies that came meanwhile.
fn greet(s: &UdpSocket, g: &mut Greeter, want: GreetState) -> Vec<u32> {
    let t0 = Instant::now();
    let mut buf = [0u8; 2048];
    let mut echoes = Vec::new();
    while g.state() != want {
        assert!(t0.elapsed() < Duration::from_secs(5), "stuck in {:?}", g.state());
        if let Some(h) = g.poll_transmit(t0.elapsed().as_nanos() as u64) {
            s.send(&h).unwrap();
        }
        if let Ok(n) = s.recv(&mut buf) {
            if g.on_datagram(&buf[..n]).is_none() {
                echoes.extend(DatagramHeader::parse(&buf[..n]).ok().filter(|h| h.flags & FLAG_ECHO_REPLY != 0).map(|h| h.seq));
            }
        }
    }
    echoes
}

#[test]
fn datagrams_that_overtook_the_admitting_hello_count_once_it_comes() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let mut echoes = Vec::new();
    let r = crate::consent::receiving(|addr| {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        // Validated (the address proved itself), the run's start not yet known.
        let mut g = Greeter::new(RunKey::OPEN, FLAG_ECHO_REQUEST, 5, 77, None);
        greet(&s, &mut g, GreetState::Validated);
        // Three departures overtake the admitting hello (one asks for an echo).
        for (seq, flags) in [(0, 0), (1, FLAG_ECHO_REQUEST), (2, 0)] {
            s.send(&datagram(flags, 5, seq)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(30));
        g.set_base(now_ns());
        echoes = greet(&s, &mut g, GreetState::Accepted);
        for seq in 3..8 {
            s.send(&datagram(0, 5, seq)).unwrap();
        }
        // The early echo request was echoed once the flow was admitted.
        let mut buf = [0u8; 2048];
        let t0 = Instant::now();
        while !echoes.contains(&1) && t0.elapsed() < Duration::from_secs(2) {
            if let Ok(n) = s.recv(&mut buf) {
                echoes.extend(DatagramHeader::parse(&buf[..n]).ok().filter(|h| h.flags & FLAG_ECHO_REPLY != 0).map(|h| h.seq));
            }
        }
        // Another flow from the same address whose hello never comes: refused, after its wait.
        s.send(&datagram(0, 6, 0)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    });
    assert_eq!(echoes, [1], "the early echo request was echoed after admission, once");
    assert_eq!(r.packets, 8, "three early and five after the hello: {r:?}");
    assert_eq!(r.admitted_late, 3, "{r:?}");
    assert_eq!(r.flows[&5].packets, 8);
    assert_eq!(r.refusals.unadmitted_datagrams, 1, "flow 6 never said hello: {:?}", r.refusals);
}

/// A run's server side over UDP: a player's datagrams that came before its admitting hello
/// count once it came; another address's, whose hello never comes, are refused.
#[test]
fn a_server_side_counts_a_players_datagrams_that_overtook_its_hello() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let r = crate::consent::serving_udp(crate::consent::flow("10", 30), |listen| {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(listen).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        let mut g = Greeter::new(RunKey::OPEN, 0, 3, 0, None);
        greet(&s, &mut g, GreetState::Validated);
        for seq in 0..2 {
            s.send(&datagram(0, 3, seq)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(30));
        g.set_base(now_ns());
        greet(&s, &mut g, GreetState::Accepted);
        for seq in 2..5 {
            s.send(&datagram(0, 3, seq)).unwrap();
        }
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        other.send_to(&datagram(0, 4, 0), listen).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    });
    assert_eq!(r.received, 5, "two early and three after the hello: {r:?}");
    assert_eq!(r.refusals.admitted_late, 2, "{:?}", r.refusals);
    assert_eq!(r.refusals.unadmitted, 1, "{:?}", r.refusals);
}
