//! The fuzz targets' properties, run on stable over deterministic pseudo-random inputs, so CI
//! checks them on every change (the coverage-guided versions live in `fuzz/`).

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use horde_wire::{log, ApduHeader, DatagramHeader, Record, StreamDecoder, StreamEvent, StreamHello, HELLO_LEN};

#[test]
fn datagram_parse_never_panics_and_round_trips() {
    let mut r = ChaCha8Rng::seed_from_u64(7);
    for i in 0..200_000 {
        let n = (r.next_u64() % 64) as usize;
        let mut b = vec![0u8; n];
        r.fill_bytes(&mut b);
        if i % 2 == 0 && n >= 3 {
            b[0] = b'H';
            b[1] = b'D';
            b[2] = 1;
        }
        if let Ok(h) = DatagramHeader::parse(&b) {
            let mut out = [0u8; 20];
            h.emit(&mut out);
            assert_eq!(&out[..], &b[..20]);
        }
    }
}

#[test]
fn stream_decoder_survives_random_and_mutated_streams() {
    let mut r = ChaCha8Rng::seed_from_u64(11);
    for round in 0..2_000 {
        // A valid stream, then (every other round) random bytes flipped in it, cut into random reads.
        let mut s = vec![0u8; HELLO_LEN];
        StreamHello { flags: 0, flow: 1, base_ns: 5, tag: 0, mac: [0; 16] }.emit(&mut s);
        let apdus = r.next_u64() % 20;
        for _ in 0..apdus {
            let len = 6 + (r.next_u64() % 200) as u16;
            let mut a = vec![0u8; len as usize];
            ApduHeader { len, offset_us: r.next_u64() as u32 }.emit(&mut a);
            s.extend(a);
        }
        let mutated = round % 2 == 1;
        if mutated {
            for _ in 0..3 {
                let i = (r.next_u64() as usize) % s.len();
                s[i] = r.next_u64() as u8;
            }
        }
        let mut d = StreamDecoder::new();
        let mut seq = 0;
        let mut failed = false;
        let mut pos = 0;
        while pos < s.len() {
            let k = 1 + (r.next_u64() as usize) % 64;
            let end = (pos + k).min(s.len());
            let res = d.feed(&s[pos..end], |ev| {
                if let StreamEvent::Apdu { seq: q, len, .. } = ev {
                    assert_eq!(q, seq);
                    assert!(len >= 6);
                    seq += 1;
                }
            });
            if failed {
                assert!(res.is_err(), "a failed decoder stays failed");
            }
            failed |= res.is_err();
            pos = end;
        }
        if !mutated {
            assert!(!failed);
            assert_eq!(seq, apdus, "an intact stream yields every APDU");
        }
    }
}

#[test]
fn log_reader_never_panics() {
    let mut r = ChaCha8Rng::seed_from_u64(3);
    for _ in 0..20_000 {
        let n = (r.next_u64() % 200) as usize;
        let mut b = vec![0u8; n];
        r.fill_bytes(&mut b);
        if n >= 32 && r.next_u64().is_multiple_of(2) {
            log::LogHeader { role: log::Role::Receiver, start_ns: 1 }.emit(&mut b);
        }
        if let Ok((_, recs)) = log::read_all(&b) {
            for rec in recs.flatten() {
                let mut out = [0u8; 40];
                rec.emit(&mut out);
                assert_eq!(Record::parse(&out).unwrap(), rec);
            }
        };
    }
}

#[test]
fn control_datagrams_never_panic_and_round_trip() {
    use horde_wire::control::{Answer, Challenge, Hello};
    let mut r = ChaCha8Rng::seed_from_u64(23);
    for i in 0..200_000 {
        let n = (r.next_u64() % 80) as usize;
        let mut b = vec![0u8; n];
        r.fill_bytes(&mut b);
        if i % 2 == 0 && n >= 4 {
            b[0] = b'H';
            b[1] = b'D';
            b[2] = horde_wire::VERSION;
            b[3] = [0x04, 0x08, 0x10, 0x1c][i / 2 % 4];
        }
        if let Ok(h) = Hello::parse(&b) {
            assert_eq!(&h.emit()[..52], &b[..52].iter().enumerate().map(|(k, x)| if k == 3 { *x | 0x04 } else { *x }).collect::<Vec<_>>()[..]);
        }
        if let Ok(c) = Challenge::parse(&b) {
            assert_eq!(Challenge::parse(&c.emit()).unwrap(), c);
        }
        if let Ok(a) = Answer::parse(&b) {
            assert_eq!(Answer::parse(&a.emit()).unwrap(), a);
        }
    }
}

/// Random datagrams of up to 80 bytes; every other one of at least 24 bytes looks like a
/// signalling message of type `kind` (header, version, type, and a reason byte that varies).
fn signal_like(r: &mut ChaCha8Rng, i: u64, kind: u8) -> Vec<u8> {
    use horde_wire::signal::{FLAG_SIGNAL, SIGNAL_VERSION};
    let n = (r.next_u64() % 80) as usize;
    let mut b = vec![0u8; n];
    r.fill_bytes(&mut b);
    if i.is_multiple_of(2) && n >= 24 {
        b[..4].copy_from_slice(&[b'H', b'D', horde_wire::VERSION, FLAG_SIGNAL]);
        (b[20], b[21], b[22]) = (SIGNAL_VERSION, kind, (i % 4) as u8);
    }
    b
}

#[test]
fn end_messages_never_panic_and_round_trip() {
    use horde_wire::signal::{FlowEnd, TYPE_END};
    let mut r = ChaCha8Rng::seed_from_u64(29);
    let mut parsed = 0;
    for i in 0..200_000 {
        let mut b = signal_like(&mut r, i, TYPE_END);
        if let Ok(e) = FlowEnd::parse(&b) {
            parsed += 1;
            assert_eq!(FlowEnd::parse(&e.emit()).unwrap(), e);
            assert_eq!(FlowEnd::of(&e.record(e.at_ns, 0)).map(|x| (x.flow, x.packets, x.bytes, x.reason)), Some((e.flow, e.packets, e.bytes, e.reason)));
        }
        // The receiver's error messages: same layout, never taken for an end.
        if let Some(t) = b.get_mut(21) {
            *t = horde_wire::signal::TYPE_ERROR;
        }
        if let Ok(e) = horde_wire::signal::FlowError::parse(&b) {
            parsed += 1;
            assert_eq!(horde_wire::signal::FlowError::parse(&e.emit()).unwrap(), e);
            assert!(FlowEnd::parse(&b).is_err());
        }
    }
    assert!(parsed > 1_000, "the generator reaches valid messages: {parsed}");
}

#[test]
fn discovery_replies_never_panic_and_round_trip() {
    use horde_wire::discover::{Discovered, TYPE_DISCOVERED};
    use horde_wire::signal::{FlowEnd, FlowError};
    let mut r = ChaCha8Rng::seed_from_u64(31);
    let mut parsed = 0;
    for i in 0..200_000 {
        let b = signal_like(&mut r, i, TYPE_DISCOVERED);
        if let Ok(d) = Discovered::parse(&b) {
            parsed += 1;
            assert_eq!(Discovered::parse(&d.emit()).unwrap(), d);
            assert!(FlowEnd::parse(&b).is_err() && FlowError::parse(&b).is_err(), "never taken for an end or an error");
        }
    }
    assert!(parsed > 1_000, "the generator reaches valid replies: {parsed}");
}

#[test]
fn log_stream_parsers_never_panic_and_round_trip() {
    use horde_wire::logstream::{emit_frame, Frame, FrameDecoder, LogAnswer, LogHello};
    let mut r = ChaCha8Rng::seed_from_u64(26);
    let hello = LogHello { role: horde_wire::Role::Sender, proof: [9; 16], name: "send-host-1".into() }.emit();
    let mut stream = Vec::new();
    emit_frame(&Frame::Header(&[1; 32]), &mut stream);
    emit_frame(&Frame::Records(&[2; 80]), &mut stream);
    emit_frame(&Frame::Gap { records: 3, since_ns: 4 }, &mut stream);
    emit_frame(&Frame::End { records: 2 }, &mut stream);
    for _ in 0..100_000 {
        let mut h = hello.clone();
        let mut s = stream.clone();
        for _ in 0..1 + r.next_u64() % 4 {
            let i = (r.next_u64() as usize) % h.len();
            h[i] = r.next_u64() as u8;
            let j = (r.next_u64() as usize) % s.len();
            s[j] = r.next_u64() as u8;
        }
        if let Ok(x) = LogHello::parse(&h) {
            assert_eq!(LogHello::parse(&x.emit()), Ok(x));
        }
        if let Ok(a) = LogAnswer::parse(&h) {
            assert_eq!(LogAnswer::parse(&a.emit()), Ok(a));
        }
        let mut d = FrameDecoder::new();
        let cut = (r.next_u64() as usize) % s.len();
        for part in [&s[..cut], &s[cut..]] {
            d.feed(part);
            while let Ok(Some(_)) = d.next_frame() {}
        }
        assert!(d.pending() <= s.len());
    }
}
