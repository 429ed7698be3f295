//! The machine's share of one test binary's tests.
//!
//! Tests run in parallel inside a binary (`RUST_TEST_THREADS`, `.cargo/config.toml`), and most
//! of Horde's end-to-end tests wait on real time: a run of a few seconds, a timeout that must
//! pass. Those overlap well. A test that loads a core, or measures timing that another test's
//! load would disturb, says so: it takes a [`Share`] of the machine for its whole body, and the
//! binary admits tests in the order they asked while their loads fit in the machine's
//! capacity (six units per core: six tests that mostly wait share a core). A test that takes
//! no share must be quick and light (parsing, a refusal, a file: under a second and a half).

use std::sync::{Condvar, Mutex};

/// How much of the machine a test takes while it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// Real processes that mostly wait (timers, a few hundred players, a handshake, an emulated
    /// network being built): a sixth of a core on average.
    Light,
    /// About one core: a link emulator or a sender near its rate, a thousand players, a browser;
    /// or timing that a busy core would disturb, with tolerances a quiet one meets.
    Heavy,
    /// The whole machine: the test measures timing (lateness, delays, rates against a model,
    /// failover times) that any other load would disturb, or loads every core. Runs alone.
    Whole,
}

struct State {
    used: u32,
    /// Tickets handed out, and the next ticket to be admitted (first come, first served: a
    /// test that needs the whole machine is not passed over by a stream of light ones).
    next: u64,
    serving: u64,
}

static STATE: Mutex<State> = Mutex::new(State { used: 0, next: 0, serving: 0 });
static CHANGED: Condvar = Condvar::new();
/// When the binary's first share was asked for (the trace's zero).
static FIRST: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Units of the machine: six per core (a light test's sixth).
const PER_CORE: u32 = 6;

fn capacity() -> u32 {
    PER_CORE * std::thread::available_parallelism().map_or(2, |n| n.get() as u32)
}

fn units(load: Load) -> u32 {
    match load {
        Load::Light => 1,
        Load::Heavy => PER_CORE,
        Load::Whole => capacity(),
    }
}

/// A test's share of the machine, held until dropped (the end of the test, or its panic).
#[must_use = "the share is the test's for as long as it is held: `let _share = share(…);`"]
pub struct Share {
    units: u32,
    load: Load,
    asked: std::time::Instant,
    got: std::time::Instant,
}

/// Waits until `load` fits beside the tests running now, in the order tests asked.
pub fn share(load: Load) -> Share {
    let asked = std::time::Instant::now();
    FIRST.get_or_init(|| asked);
    let need = units(load);
    let mut s = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let ticket = s.next;
    s.next += 1;
    while s.serving != ticket || s.used + need > capacity() {
        s = CHANGED.wait(s).unwrap_or_else(|p| p.into_inner());
    }
    s.used += need;
    s.serving += 1;
    CHANGED.notify_all();
    Share { units: need, load, asked, got: std::time::Instant::now() }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut s = STATE.lock().unwrap_or_else(|p| p.into_inner());
        s.used -= self.units;
        CHANGED.notify_all();
        drop(s);
        trace(self);
    }
}

/// With `HORDE_TEST_TRACE=FILE`, one line per share: the test (its thread's name), its load,
/// seconds it waited for the share and held it, and when it got it (seconds since the first
/// share of the binary) — what runs beside what, and which tests the suite waits on.
fn trace(sh: &Share) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os("HORDE_TEST_TRACE") else { return };
    let first = *FIRST.get_or_init(|| sh.asked);
    let line = format!(
        "{} {:?} waited {:.1} held {:.1} at {:.1}\n",
        std::thread::current().name().unwrap_or("?"),
        sh.load,
        (sh.got - sh.asked).as_secs_f64(),
        sh.got.elapsed().as_secs_f64(),
        sh.got.saturating_duration_since(first).as_secs_f64()
    );
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// Loads never exceed the capacity, and a whole-machine test runs alone.
    #[test]
    fn shares_fit_the_capacity_and_whole_runs_alone() {
        let (used, peak, whole_with_others) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let loads = [Load::Light, Load::Heavy, Load::Whole, Load::Light, Load::Light, Load::Heavy, Load::Whole, Load::Light];
        let threads: Vec<_> = loads
            .iter()
            .map(|&load| {
                let (used, peak, whole) = (used.clone(), peak.clone(), whole_with_others.clone());
                std::thread::spawn(move || {
                    let _s = share(load);
                    let now = used.fetch_add(units(load), Ordering::SeqCst) + units(load);
                    peak.fetch_max(now, Ordering::SeqCst);
                    if load == Load::Whole && now != units(load) {
                        whole.fetch_add(1, Ordering::SeqCst);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    used.fetch_sub(units(load), Ordering::SeqCst);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= capacity(), "peak {} > capacity {}", peak.load(Ordering::SeqCst), capacity());
        assert_eq!(whole_with_others.load(Ordering::SeqCst), 0, "a whole-machine test ran beside another");
    }
}
