//! Names and ports of one test: unique within the test binary (a counter) and not held by
//! anything else on the machine when handed out (checked), so that a test never acts on, or
//! asserts about, what another program made.

use std::collections::HashSet;
use std::net::{IpAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `PID-N`: a string no other test of this run, and no other run, has.
pub fn unique() -> String {
    format!("{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

const BASE36: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// A draw of the ids and names below: the process id and counter, mixed (splitmix64), so that
/// two test binaries, and two tests of one, start from different names.
fn draw() -> u64 {
    let mut x = ((std::process::id() as u64) << 32) ^ COUNTER.fetch_add(1, Ordering::Relaxed) ^ 0x9E37_79B9_7F4A_7C15;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn base36(mut v: u64, n: usize) -> String {
    (0..n)
        .map(|_| {
            let c = BASE36[(v % 36) as usize] as char;
            v /= 36;
            c
        })
        .collect()
}

static TAKEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Takes `name` for this binary if no test had it; false if one did.
fn take(name: &str) -> bool {
    let mut t = TAKEN.lock().unwrap_or_else(|p| p.into_inner());
    t.get_or_insert_with(HashSet::new).insert(name.to_string())
}

/// A fresh emulated-experiment id of 5 characters (`t` and 4 base-36; an experiment split
/// across agents takes at most 5): no test of this binary had it, and the machine has no
/// experiment state or namespace of that id.
pub fn exp_id() -> String {
    loop {
        let id = format!("t{}", base36(draw(), 4));
        let busy = Path::new("/run/horde/emu").join(&id).exists() || netns_of(&id);
        if !busy && take(&id) {
            return id;
        }
    }
}

fn netns_of(id: &str) -> bool {
    let own = format!("horde-{id}");
    std::fs::read_dir("/run/netns")
        .map(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).any(|n| n == own || n.starts_with(&format!("{own}-"))))
        .unwrap_or(false)
}

/// A fresh name of `len` characters (`prefix` and base-36) for interfaces or namespaces of
/// the machine's own namespace: no interface there and no named network namespace starts
/// with it, so that the test may add suffixes (`a`/`b` of a veth pair; the kernel allows 15
/// characters in all).
pub fn ifname(prefix: &str, len: usize) -> String {
    assert!(prefix.len() < len && len <= 15, "ifname({prefix:?}, {len}): a longer name than its prefix, at most 15 characters");
    let taken_here = |name: &str| {
        ["/sys/class/net", "/run/netns"]
            .iter()
            .any(|d| std::fs::read_dir(d).map(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).any(|n| n.starts_with(name))).unwrap_or(false))
    };
    loop {
        let name = format!("{prefix}{}", base36(draw(), len - prefix.len()));
        if !taken_here(&name) && take(&name) {
            return name;
        }
    }
}

/// A port on `ip` that is free for both UDP and TCP now (the kernel's choice, bound and let
/// go) and that no other test of this binary was given. For a test that must name a port
/// before the program that binds it starts (a receiver placed through agents, a flow file).
pub fn free_port(ip: &str) -> u16 {
    let ip: IpAddr = ip.parse().unwrap_or_else(|e| panic!("free_port({ip:?}): {e}"));
    for _ in 0..1_000 {
        let Ok(udp) = UdpSocket::bind((ip, 0)) else { continue };
        let Ok(port) = udp.local_addr().map(|a| a.port()) else { continue };
        if TcpListener::bind((ip, port)).is_ok() && take(&format!("port {ip} {port}")) {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP on {ip} in 1,000 tries");
}
