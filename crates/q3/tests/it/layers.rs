//! Each layer of the protocol core on its own: the Huffman codes, the bit stream, usercmd
//! deltas, server-message parsing of damaged input.

use horde_q3::huffman::{compress, decompress, Static};
use horde_q3::msg::{Reader, Writer};
use horde_q3::server;
use horde_q3::usercmd::{write_delta, UserCmd};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The message code is a complete prefix code over the 256 bytes plus the unused NYT leaf:
/// Kraft's sum of the byte codes is 1 − 2^-len(NYT) and no code is a prefix of another.
#[test]
fn the_static_code_is_a_prefix_code_shaped_by_the_frequency_table() {
    let s = Static::get();
    let codes: Vec<(u64, u8)> = (0..=255u8).map(|b| s.code(b)).collect();
    let kraft: f64 = codes.iter().map(|c| 0.5f64.powi(c.1 as i32)).sum();
    assert!(kraft < 1.0 && kraft > 0.999, "{kraft}");
    for (i, a) in codes.iter().enumerate() {
        for (j, b) in codes.iter().enumerate() {
            if i != j && a.1 <= b.1 {
                assert_ne!(b.0 & ((1u64 << a.1) - 1), a.0, "code of {i} is a prefix of {j}'s");
            }
        }
    }
    // The most frequent byte (0, a quarter of the table's weight) has the shortest code, and
    // frequent bytes are never longer than rare ones by more than the tie-breaking allows.
    let min = codes.iter().map(|c| c.1).min().unwrap();
    assert_eq!(codes[0].1, min);
    assert!(codes[0].1 <= 3 && codes.iter().map(|c| c.1).max().unwrap() <= 16, "{:?}", codes[0]);
}

#[test]
fn adaptive_compression_round_trips_any_bytes() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for len in [0usize, 1, 2, 17, 300, 1000] {
        let data: Vec<u8> = (0..len).map(|_| if rng.random_bool(0.7) { rng.random_range(b'a'..=b'z') } else { rng.random() }).collect();
        let c = compress(&data);
        assert_eq!(decompress(&c, 4096).unwrap(), data, "len {len}");
    }
    let text = b"\"\\name\\horde000\\rate\\25000\\snaps\\20\\protocol\\71\\qport\\1000\\challenge\\-12345\"";
    let c = compress(text);
    assert!(c.len() < text.len(), "text compresses ({} of {} bytes)", c.len(), text.len());
    assert!(decompress(&c, 10).is_err(), "the length limit holds");
    assert!(decompress(&c[..c.len() / 2], 4096).is_err(), "a truncated block is an error");
}

#[test]
fn the_bit_stream_round_trips_every_width() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut w = Writer::new();
    let mut vals = Vec::new();
    for _ in 0..2000 {
        let bits = rng.random_range(1..=32u32);
        let v: u32 = rng.random::<u32>() & if bits == 32 { u32::MAX } else { (1 << bits) - 1 };
        w.bits(v, bits);
        vals.push((v, bits));
    }
    w.string("hello % world");
    let buf = w.finish();
    let mut r = Reader::new(&buf, 0);
    for (v, bits) in vals {
        assert_eq!(r.bits(bits).unwrap(), v);
    }
    assert_eq!(r.string().unwrap(), "hello . world", "the engine reads % as .");
}

#[test]
fn usercmd_deltas_send_only_what_changed() {
    let size = |from: &UserCmd, to: &UserCmd| {
        let mut w = Writer::new();
        write_delta(&mut w, 12345, from, to);
        w.finish().len()
    };
    let a = UserCmd { server_time: 1000, forward: 127, ..Default::default() };
    let same = UserCmd { server_time: 1016, ..a };
    let turned = UserCmd { server_time: 1016, angles: [0, 9000, 0], buttons: 1, ..a };
    assert!(size(&a, &same) <= 3, "time delta and a 'no change' bit");
    assert!(size(&a, &turned) > size(&a, &same));
}

/// Garbage, truncation and flipped bits are errors or partial results, never panics.
#[test]
fn damaged_server_messages_are_errors_not_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    // A valid message: ack, a command, EOF.
    let mut w = Writer::new();
    w.long(3);
    w.byte(server::SVC_SERVER_COMMAND);
    w.long(7);
    w.string("print \"hi\"");
    w.byte(server::SVC_EOF);
    let good = w.finish();
    let m = server::parse(&good).unwrap();
    assert_eq!(m.reliable_ack, 3);
    assert_eq!(m.ops, vec![server::Op::Command { seq: 7, text: "print \"hi\"".into() }]);
    for cut in 0..good.len() {
        let _ = server::parse(&good[..cut]);
    }
    for _ in 0..5000 {
        let len = rng.random_range(0..200);
        let junk: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let _ = server::parse(&junk);
        let mut flipped = good.clone();
        let i = rng.random_range(0..flipped.len());
        flipped[i] ^= 1 << rng.random_range(0..8);
        let _ = server::parse(&flipped);
    }
}
