//! The machine's share of one test binary's tests.
//!
//! Tests run in parallel inside a binary (`RUST_TEST_THREADS`, `.cargo/config.toml`), and most
//! of Horde's end-to-end tests wait on real time: a run of a few seconds, a timeout that must
//! pass. Those overlap well. A test that loads a core, or measures timing that another test's
//! load would disturb, says so: it takes a [`Share`] of the machine for its whole body, and the
//! binary admits tests while their loads fit in the machine's capacity (six units per core:
//! six tests that mostly wait share a core). The oldest waiting test is never delayed: a later
//! one goes ahead of it only within what the oldest leaves free once it runs (backfilling, as
//! batch schedulers do), so a test that needs most of the machine is not passed over by a
//! stream of light ones, and light ones do not idle behind it. A test that takes no share must
//! be quick and light (parsing, a refusal, a file: under a second and a half).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

/// How much of the machine a test takes while it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// Real processes that mostly wait (timers, a few hundred players, a handshake, an emulated
    /// network being built): a sixth of a core on average.
    Light,
    /// About a core: a link emulator or a sender near its rate, a thousand players, a browser;
    /// or delays measured to a millisecond or two, which a saturated machine would disturb.
    /// Beside it: another heavy test and light ones.
    Heavy,
    /// The test measures timing against a model (rates, losses within a few per cent) while
    /// it loads a core or more itself: nothing runs beside it but light tests (a quarter of the
    /// machine).
    Quiet,
    /// The test measures timing that even light neighbours disturb (inter-arrival times at the
    /// model's millisecond, a busy-waiting pacer's ticks; the start-up of a run under Ctrl-C):
    /// it runs alone (among tests that take a share).
    Whole,
}

struct State {
    used: u32,
    /// Waiting tests in the order they asked: (ticket, units).
    waiting: VecDeque<(u64, u32)>,
    next: u64,
}

static STATE: Mutex<State> = Mutex::new(State { used: 0, waiting: VecDeque::new(), next: 0 });
static CHANGED: Condvar = Condvar::new();
/// When the binary's first share was asked for (the trace's zero).
static FIRST: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Units of the machine: six per core (a light test's sixth).
const PER_CORE: u32 = 6;

fn capacity() -> u32 {
    PER_CORE * std::thread::available_parallelism().map_or(2, |n| n.get() as u32)
}

fn units(load: Load) -> u32 {
    // Heavy: a third of the machine (two fit, with light ones beside); quiet: three quarters,
    // so that a heavy one does not fit beside it and light ones do.
    let c = capacity();
    match load {
        Load::Light => 1,
        Load::Heavy => c / 3,
        Load::Quiet => c - c / 4,
        Load::Whole => c,
    }
}

/// Whether the test holding `ticket` may start now: the oldest waiting test when it fits; a
/// later one when it fits beside what runs and what the oldest will need.
fn admissible(s: &State, ticket: u64, need: u32) -> bool {
    let head = s.waiting.front().copied().unwrap_or((ticket, 0));
    let reserved = if head.0 == ticket { 0 } else { head.1 };
    s.used + need + reserved <= capacity()
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
    s.waiting.push_back((ticket, need));
    while !admissible(&s, ticket, need) {
        s = CHANGED.wait(s).unwrap_or_else(|p| p.into_inner());
    }
    s.waiting.retain(|w| w.0 != ticket);
    s.used += need;
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

/// How a test that builds network namespaces uses the machine's kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// A few namespaces (an emulated network of tens or hundreds of hosts).
    Few,
    /// Hundreds to thousands built or torn down at once: the kernel's network locks and its
    /// namespace clean-up work then stall other experiments' traffic for seconds (seen: an
    /// ARP resolution failing beside a 1,500-host build). Runs with no other emulation test.
    Many,
}

/// The named lock of the machine's namespaces, held for the test's whole body: tests of `Few`
/// run together, a test of `Many` alone among them. Take it before the [`share`] (always in
/// that order: a test waiting for the lock then holds none of the machine's units).
pub fn namespaces(n: Namespaces) -> NamespacesGuard {
    static LOCK: std::sync::RwLock<()> = std::sync::RwLock::new(());
    match n {
        Namespaces::Few => NamespacesGuard::Few(LOCK.read().unwrap_or_else(|p| p.into_inner())),
        Namespaces::Many => NamespacesGuard::Many(LOCK.write().unwrap_or_else(|p| p.into_inner())),
    }
}

/// Held while a test uses the machine's namespaces ([`namespaces`]).
#[must_use = "the lock is the test's for as long as it is held: `let _ns = namespaces(…);`"]
pub enum NamespacesGuard {
    Few(#[allow(dead_code)] std::sync::RwLockReadGuard<'static, ()>),
    Many(#[allow(dead_code)] std::sync::RwLockWriteGuard<'static, ()>),
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
    use std::sync::Arc;
    use std::time::Duration;

    /// The oldest waiting test is never delayed; later ones backfill what it leaves free.
    #[test]
    fn later_tests_backfill_only_what_the_oldest_leaves_free() {
        let (light, heavy, quiet) = (units(Load::Light), units(Load::Heavy), units(Load::Quiet));
        // a heavy test runs; a quiet one waits for it; a light one asks after
        let s = State { used: heavy, waiting: VecDeque::from([(1, quiet), (2, light)]), next: 3 };
        assert!(!admissible(&s, 1, quiet), "the quiet one waits for the heavy one");
        assert_eq!(admissible(&s, 2, light), heavy + light + quiet <= capacity(), "the light one only if the quiet one still fits after it");
        // nothing runs: the oldest starts, and a light one beside what it leaves free
        let s = State { used: 0, waiting: VecDeque::from([(1, quiet), (2, light)]), next: 3 };
        assert!(admissible(&s, 1, quiet) && admissible(&s, 2, light));
        // a later heavy test may not take what the oldest quiet one needs
        let s = State { used: light, waiting: VecDeque::from([(1, quiet), (2, heavy)]), next: 3 };
        assert!(admissible(&s, 1, quiet) && !admissible(&s, 2, heavy));
    }

    /// Loads never exceed the capacity, and a quiet test runs beside light ones only.
    #[test]
    fn shares_fit_the_capacity_and_quiet_runs_beside_light_ones_only() {
        // (units in use, heavy tests running, quiet tests running, peak units, violations); a
        // whole test counts as units only: it must find none in use
        let book = Arc::new(std::sync::Mutex::new((0u32, 0u32, 0u32, 0u32, 0u32)));
        let loads =
            [Load::Light, Load::Heavy, Load::Quiet, Load::Light, Load::Whole, Load::Light, Load::Heavy, Load::Quiet, Load::Light, Load::Heavy, Load::Heavy];
        let threads: Vec<_> = loads
            .iter()
            .map(|&load| {
                let book = book.clone();
                std::thread::spawn(move || {
                    let _s = share(load);
                    {
                        let mut b = book.lock().unwrap();
                        if load == Load::Whole && b.0 > 0 {
                            b.4 += 1;
                        }
                        b.0 += units(load);
                        b.1 += (load == Load::Heavy) as u32;
                        b.2 += (load == Load::Quiet) as u32;
                        b.3 = b.3.max(b.0);
                        if b.2 > 1 || (b.2 == 1 && b.1 > 0) {
                            b.4 += 1;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    let mut b = book.lock().unwrap();
                    b.0 -= units(load);
                    b.1 -= (load == Load::Heavy) as u32;
                    b.2 -= (load == Load::Quiet) as u32;
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let b = book.lock().unwrap();
        assert!(b.3 <= capacity(), "peak {} > capacity {}", b.3, capacity());
        assert_eq!(b.4, 0, "a quiet test ran beside a heavy or another quiet one, or a whole one beside any");
        assert!(units(Load::Heavy) * 2 <= capacity() && units(Load::Quiet) + units(Load::Heavy) > capacity());
    }
}
