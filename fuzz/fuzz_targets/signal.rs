#![no_main]
use libfuzzer_sys::fuzz_target;

// Any bytes as a signalling datagram (a sender's end of flow, a receiver's error, a discovery
// reply): parsing never panics, what parses round-trips, only a message signed with the run key
// is valid, no bytes parse as two kinds, and a discovery greeter takes only a signed reply.
fuzz_target!(|data: &[u8]| {
    if let Ok(e) = horde_wire::signal::FlowEnd::parse(data) {
        assert_eq!(horde_wire::signal::FlowEnd::parse(&e.emit()), Ok(e));
        let key = horde_proto::RunKey::from_bytes([5; 32]);
        let signed = horde_proto::conn::signal::end_message(&key, e.flow, e.reason, e.packets, e.bytes, e.at_ns);
        let valid = horde_proto::conn::signal::end_is_valid(&key, e.flow, &e);
        assert!(!valid || horde_wire::signal::FlowEnd::parse(&signed) == Ok(e));
    }
    if let Ok(e) = horde_wire::signal::FlowError::parse(data) {
        assert_eq!(horde_wire::signal::FlowError::parse(&e.emit()), Ok(e));
        assert!(horde_wire::signal::FlowEnd::parse(data).is_err());
        let key = horde_proto::RunKey::from_bytes([5; 32]);
        let signed = horde_proto::conn::signal::error_message(&key, e.flow, e.code, e.packets, e.bytes, e.at_ns);
        let valid = key.verify_signal(&e.signed(), &e.mac);
        assert!(!valid || horde_wire::signal::FlowError::parse(&signed) == Ok(e));
    }
    if let Ok(d) = horde_wire::discover::Discovered::parse(data) {
        assert_eq!(horde_wire::discover::Discovered::parse(&d.emit()), Ok(d));
        assert!(horde_wire::signal::FlowEnd::parse(data).is_err() && horde_wire::signal::FlowError::parse(data).is_err());
        let key = horde_proto::RunKey::from_bytes([5; 32]);
        let mut g = horde_proto::Greeter::discover(key.clone(), d.flow, d.tag, 0);
        let _ = g.poll_transmit(0);
        // Only after a challenge is a reply expected; before, nothing is taken.
        assert_eq!(g.on_datagram(data), None);
        let valid = key.verify_signal(&d.signed(), &d.mac);
        assert!(!valid || d.emit()[..] == data[..horde_wire::discover::DISCOVERED_LEN]);
    }
});
