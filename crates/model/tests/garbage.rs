//! The TOML fuzz targets' properties on stable, over deterministic mutations of the repository's
//! own files (flipped, deleted and duplicated bytes, spliced lines): parsing and validation never
//! panic, and what loads runs (the coverage-guided versions live in `fuzz/`).

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use horde_model::scenario::Scenario;
use horde_model::service::{Service, BUILTINS};
use horde_model::FlowFile;

/// `n` mutants of `text`, each a few byte-level edits away.
fn mutants(text: &str, n: usize, seed: u64) -> Vec<String> {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let bytes = text.as_bytes();
    let alphabet = b"=[]{}\"',.-+*/()0123456789eE_ \nabcxyz%";
    (0..n)
        .map(|_| {
            let mut b = bytes.to_vec();
            for _ in 0..1 + r.next_u64() % 4 {
                if b.is_empty() {
                    break;
                }
                let i = (r.next_u64() % b.len() as u64) as usize;
                match r.next_u64() % 4 {
                    0 => b[i] = alphabet[(r.next_u64() % alphabet.len() as u64) as usize],
                    1 => {
                        b.remove(i);
                    }
                    2 => {
                        let j = (r.next_u64() % b.len() as u64) as usize;
                        let (lo, hi) = (i.min(j), i.max(j).min(lo_plus(i.min(j), 40, b.len())));
                        let piece = b[lo..hi].to_vec();
                        b.splice(i..i, piece);
                    }
                    _ => b.insert(i, alphabet[(r.next_u64() % alphabet.len() as u64) as usize]),
                }
            }
            String::from_utf8_lossy(&b).into_owned()
        })
        .collect()
}

fn lo_plus(lo: usize, k: usize, len: usize) -> usize {
    (lo + k).min(len)
}

#[test]
fn mutated_service_files_never_panic() {
    let mut loaded = 0;
    for (i, (_, text)) in BUILTINS.iter().enumerate() {
        for m in mutants(text, 300, 17 + i as u64) {
            if let Ok(svc) = Service::parse(&m, "mutant.toml") {
                loaded += 1;
                let p = horde_model::behaviour::Params { players: 2, duration_s: 30.0, seed: 1, start_hour: 20.0 };
                let _ = horde_model::behaviour::player(&svc, &p, 0);
            }
        }
    }
    assert!(loaded > 50, "the mutants should include valid services too ({loaded})");
}

#[test]
fn mutated_flow_and_scenario_files_never_panic() {
    let flows = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/flows.toml")).unwrap();
    for m in mutants(&flows, 2000, 5) {
        if m.contains("file(") {
            continue;
        }
        if let Ok(fs) = FlowFile::parse_and_resolve(&m, 1) {
            for f in fs.iter().take(2) {
                for _ in horde_model::Schedule::new(f).take(16) {}
            }
        }
    }
    let sc = "name = 'x'\nservice = 'wow'\nplayers = 3\nduration = '30s'\nseed = 2\nstart_hour = 20\njoin = 'uniform(0, 10)'\n";
    for m in mutants(sc, 2000, 9) {
        if m.contains('/') || m.contains(".toml") {
            continue;
        }
        if let Ok(s) = Scenario::parse(&m, "m.toml", std::path::Path::new("/nonexistent")) {
            if s.players <= 8 && s.duration_s <= 600.0 {
                let _ = s.segments();
            }
        }
    }
}
