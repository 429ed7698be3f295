#![no_main]
use libfuzzer_sys::fuzz_target;

// Any bytes as a packet read from a raw ICMP socket (`send -T icmp` reads replies, `recv
// --icmp` requests): parsing never panics, and a parsed echo's payload never refreshes the
// consent of a flow that did not make it (a forged reply cannot keep traffic going).
fuzz_target!(|data: &[u8]| {
    if let Ok(e) = horde_wire::icmp::parse_ipv4_echo(data) {
        assert!(e.payload.len() <= data.len());
        let mut c = horde_proto::EchoConsent::new([7; 32], std::net::IpAddr::V4(e.src), 1, e.id);
        let mut b = [0u8; horde_wire::icmp::MIN_PAYLOAD];
        horde_wire::DatagramHeader { flags: 0, flow: 1, seq: 0, send_ns: 0 }.emit(&mut b);
        c.prove(&mut b, 0, u64::MAX / 2);
        // Only our own proof (flow 1, sequence 0, sent at u64::MAX / 2) can be valid.
        let ours = |p: &[u8]| p.len() >= b.len() && p[4..12] == b[4..12] && p[20..36] == b[20..36];
        assert!(c.on_reply(std::net::IpAddr::V4(e.src), e.payload).is_none() || ours(e.payload));
        assert!(!c.granted(u64::MAX / 2) || ours(e.payload));
    }
});
