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

/// D-ITG scripts (`send --ditg-script`): mutants of a mixed script never panic, and what reads
/// resolves or is refused with a reason.
#[test]
fn mutated_ditg_scripts_never_panic() {
    let script = "-a 127.0.0.1 -rp 10001 -T TCP -C 3 -c 36 -t 8000 -D\n\
                  -a 10.0.0.3 -rp 10002 VoIP -x G.711.2 -h RTP -VAD\n\
                  -a ::1 -rp 3 -sp 4000 -E 200 -u 10 300 -B E 100 W 10 100 -s 0.3 -m rttm -d 5 -z 10 -k 2\n\
                  -rp 4 -U 10 20 -n 50 1\n-rp 5 -Y 0 1 -g 2 2\n-rp 9 -N 5 1\n-rp 6 -G 2 2 -w 2 3\n-rp 7 -W 2 3 -v 1.5 2 -f 9 -b 0x10\n\
                  -rp 8 -O 100 -o 60\n-z 5 -T TCP Quake3\n";
    horde_model::ditg::parse_script(script).expect("the base script reads");
    let mut read = 0;
    for m in mutants(script, 3000, 26) {
        if let Ok(lines) = horde_model::ditg::parse_script(&m) {
            read += 1;
            for (i, l) in lines.iter().enumerate() {
                let _ = l.flow.resolve(i as u32, 1, "line");
            }
        }
    }
    assert!(read > 100, "only {read} mutants read");
}
