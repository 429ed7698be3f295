//! The topology fuzz target's property on stable: mutated example topologies never panic the
//! planner (the coverage-guided version is `fuzz/fuzz_targets/toml_topology.rs`).

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn mutated_topologies_never_panic() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topologies");
    let mut r = ChaCha8Rng::seed_from_u64(31);
    let alphabet = b"=[]{}\"'.-/0123456789 \nabhsw%";
    let mut planned = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read(e.unwrap().path()).unwrap();
        for _ in 0..400 {
            let mut b = text.clone();
            for _ in 0..1 + r.next_u64() % 3 {
                let i = (r.next_u64() % b.len() as u64) as usize;
                if r.next_u64().is_multiple_of(2) {
                    b[i] = alphabet[(r.next_u64() % alphabet.len() as u64) as usize];
                } else {
                    b.remove(i);
                }
            }
            if let Ok(p) = horde_topo::plan(&String::from_utf8_lossy(&b), "m.toml", "g1") {
                planned += 1;
                assert!(p.links.iter().all(|l| l.a.ifname.len() <= 15 && l.b.ifname.len() <= 15));
            }
        }
    }
    assert!(planned > 20, "{planned}");
}

/// Live link changes (`horde emu link` fields, as the link emulator's control socket receives
/// them): mutated values never panic, and what applies validates.
#[test]
fn mutated_link_changes_never_panic() {
    let mut r = ChaCha8Rng::seed_from_u64(57);
    let text =
        "rate = \"10mbit\"\ndelay = \"20ms\"\njitter = \"5ms\"\nloss = \"1%\"\nduplicate = \"0.5%\"\ncorrupt = \"0.1%\"\nqueue = \"64kB\"\nreorder = true\n";
    let alphabet = b"0123456789.-%emkgbitsuBn \"";
    let base = horde_impair::LinkSpec { rate_bps: Some(1_000_000), delay_ns: 1, ..Default::default() };
    let mut applied = 0;
    for _ in 0..3000 {
        let mut b = text.as_bytes().to_vec();
        for _ in 0..1 + r.next_u64() % 3 {
            let i = (r.next_u64() % b.len() as u64) as usize;
            b[i] = alphabet[(r.next_u64() % alphabet.len() as u64) as usize];
        }
        let Ok(raw) = toml::from_str::<horde_topo::RawImpair>(&String::from_utf8_lossy(&b)) else { continue };
        if let Ok(c) = horde_topo::LinkChange::parse(&raw) {
            for clear in [false, true] {
                if let Ok(s) = c.apply(&base, clear) {
                    applied += 1;
                    assert!(s.validate().is_ok());
                }
            }
        }
    }
    assert!(applied > 100, "{applied}");
}
