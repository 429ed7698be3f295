//! What the host takes from a run, measured so that lateness can be blamed on the right party:
//! the hypervisor's **steal time** (`/proc/stat`: time a vCPU was ready but another guest ran),
//! sampled once a second, and the **floor**, cyclictest-style: how late a pacer that does
//! nothing but busy-wait for its departure times at the run's rate is. A departure later than
//! the floor is Horde's doing; one within it is what this host allows anyone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock::mono_ns;

/// Steal and total CPU time of all CPUs (the `cpu` line of `/proc/stat`), in USER_HZ ticks.
pub fn cpu_times() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(text.lines().next()?)
}

/// `cpu  user nice system idle iowait irq softirq steal guest guest_nice` → (steal, total of
/// the first eight: guest time is already counted in user).
pub fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut it = line.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = it.take(8).map(|x| x.parse().ok()).collect::<Option<Vec<u64>>>()?;
    if v.len() < 8 {
        return None;
    }
    let total = v.iter().fold(0u64, |a, x| a.saturating_add(*x));
    Some((v[7], total))
}

/// The machine's CPU load between two samples, in the papers' sense (the whole testbed's, not
/// one process's): a sample is (time spent idle by all CPUs, µs; monotonic ns; CPUs). Idle time
/// comes from cpuidle (`/sys/devices/system/cpu/cpu*/cpuidle/state*/time`), which the idle
/// loop measures exactly; `/proc/stat`'s tick-sampled idle misses most of the work of a pacer
/// that sleeps between departures (measured on this VM: 7 % where the process alone used 43 %
/// of a core). `None` where cpuidle is absent.
pub fn idle_sample() -> Option<(u64, u64, usize)> {
    let mut idle = 0u64;
    let mut cpus = 0usize;
    for cpu in std::fs::read_dir("/sys/devices/system/cpu").ok()?.flatten() {
        let name = cpu.file_name();
        let n = name.to_string_lossy();
        if !n.strip_prefix("cpu").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        let Ok(states) = std::fs::read_dir(cpu.path().join("cpuidle")) else { continue };
        cpus += 1;
        for st in states.flatten() {
            idle = idle.saturating_add(std::fs::read_to_string(st.path().join("time")).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0));
        }
    }
    (cpus > 0).then(|| (idle, mono_ns(), cpus))
}

/// Busy share of all CPUs between two [`idle_sample`]s, % (0..=100).
pub fn busy_pct(a: (u64, u64, usize), b: (u64, u64, usize)) -> Option<f64> {
    let wall_us = b.1.saturating_sub(a.1) as f64 / 1e3 * a.2 as f64;
    (wall_us > 0.0).then(|| ((1.0 - b.0.saturating_sub(a.0) as f64 / wall_us) * 100.0).clamp(0.0, 100.0))
}

/// The share of CPU time stolen between two samples, 0..=1 (0 when nothing advanced).
pub fn steal_share(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        return 0.0;
    }
    (after.0.saturating_sub(before.0) as f64 / total as f64).clamp(0.0, 1.0)
}

/// Samples steal once a second on its own thread until dropped or [`StealMonitor::finish`].
pub struct StealMonitor {
    stop: Arc<AtomicBool>,
    seconds: Arc<Mutex<Vec<f64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StealMonitor {
    /// Starts sampling; `None` where `/proc/stat` cannot be read (not Linux, no procfs).
    pub fn start() -> Option<StealMonitor> {
        let mut prev = cpu_times()?;
        let stop = Arc::new(AtomicBool::new(false));
        let seconds = Arc::new(Mutex::new(Vec::new()));
        let (s, out) = (stop.clone(), seconds.clone());
        let thread = std::thread::Builder::new()
            .name("horde-steal".into())
            .spawn(move || {
                let mut next = mono_ns() + 1_000_000_000;
                while !s.load(Ordering::Relaxed) {
                    let now = mono_ns();
                    if now < next {
                        std::thread::sleep(std::time::Duration::from_nanos((next - now).min(50_000_000)));
                        continue;
                    }
                    next += 1_000_000_000;
                    if let Some(t) = cpu_times() {
                        if let Ok(mut v) = out.lock() {
                            // One value a second: bounded by the run's length (a day is 86,400).
                            if v.len() < 1_000_000 {
                                v.push(steal_share(prev, t));
                            }
                        }
                        prev = t;
                    }
                }
            })
            .ok()?;
        Some(StealMonitor { stop, seconds, thread: Some(thread) })
    }

    /// Stops sampling; the steal share of every whole second since the start.
    pub fn finish(mut self) -> Vec<f64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.seconds.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Drop for StealMonitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How late a busy-waiting pacer was, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Floor {
    /// The pacer's rate, departures per second, and how many it timed.
    pub rate_pps: f64,
    pub samples: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// The steal share while it ran, 0..=1 (None without `/proc/stat`).
    pub steal: Option<f64>,
}

/// Runs the pacer for `dur_ns` at `rate_pps` (clamped to 1,000..=1,000,000 /s, at most 1 M
/// samples) on the calling thread, spinning between departures: it measures preemption and
/// steal, not timer slack (a spinner has none).
pub fn spin_floor(rate_pps: f64, dur_ns: u64) -> Floor {
    let rate = if rate_pps.is_finite() { rate_pps.clamp(1_000.0, 1_000_000.0) } else { 1_000.0 };
    let period = 1e9 / rate;
    let n = ((dur_ns as f64 / period) as usize).clamp(1, 1_000_000);
    let before = cpu_times();
    let mut late = Vec::with_capacity(n);
    let t0 = mono_ns();
    for k in 1..=n {
        let due = t0 + (k as f64 * period) as u64;
        let mut now = mono_ns();
        while now < due {
            std::hint::spin_loop();
            now = mono_ns();
        }
        late.push(now - due);
    }
    let steal = match (before, cpu_times()) {
        (Some(a), Some(b)) => Some(steal_share(a, b)),
        _ => None,
    };
    floor_of(rate, late, steal)
}

/// The floor's percentiles (nearest rank) of lateness samples in ns.
pub fn floor_of(rate_pps: f64, mut late_ns: Vec<u64>, steal: Option<f64>) -> Floor {
    late_ns.sort_unstable();
    let q = |p: f64| {
        if late_ns.is_empty() {
            return 0.0;
        }
        let i = ((p * late_ns.len() as f64).ceil() as usize).clamp(1, late_ns.len()) - 1;
        late_ns[i] as f64 / 1e3
    };
    Floor {
        rate_pps,
        samples: late_ns.len() as u64,
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: late_ns.last().map_or(0.0, |&x| x as f64 / 1e3),
        steal,
    }
}

/// The lateness a run may show and still be as good as the host allows: p99 within
/// max(20 µs, 1.5 × the floor's p99) (issue 26's bound).
pub fn allowed_p99_us(floor: &Floor) -> f64 {
    (1.5 * floor.p99_us).max(20.0)
}

/// A process's own CPU seconds (user + system) and peak resident memory (kB).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu_s: f64,
    pub max_rss_kb: u64,
}

impl Usage {
    pub(crate) fn of(ru: &libc::rusage) -> Usage {
        let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        Usage { cpu_s: seconds(ru.ru_utime) + seconds(ru.ru_stime), max_rss_kb: ru.ru_maxrss as u64 }
    }
}

/// This process's own usage so far.
pub fn own_usage() -> Usage {
    // SAFETY: getrusage fills a plain struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    Usage::of(&u)
}

/// This process's resident memory now, KiB (`VmRSS` of `/proc/self/status`).
pub fn own_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User and system CPU seconds of process `pid` so far (from `/proc/PID/stat`).
pub fn process_cpu(pid: u32) -> Option<(f64, f64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf only reads a constant.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((f.get(11)?.parse::<f64>().ok()? / tick, f.get(12)?.parse::<f64>().ok()? / tick))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_reads_and_steal_is_a_share() {
        let a = parse_cpu_line("cpu  100 0 50 800 10 0 0 40 0 0").unwrap();
        assert_eq!(a, (40, 1000));
        let b = parse_cpu_line("cpu  200 0 100 1500 10 0 0 140 0 0").unwrap();
        assert!((steal_share(a, b) - 100.0 / 950.0).abs() < 1e-12);
        assert_eq!(steal_share(b, b), 0.0);
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4 5 6 7 8"), None);
        assert_eq!(parse_cpu_line("cpu 1 2 x"), None);
        assert_eq!(parse_cpu_line("cpu 1 2 3"), None);
        assert_eq!(busy_pct((1_000_000, 0, 2), (1_500_000, 1_000_000_000, 2)), Some(75.0), "0.5 s idle of 2 CPU-seconds");
        assert_eq!(busy_pct((0, 5, 2), (0, 5, 2)), None);
    }

    #[test]
    fn the_floor_is_percentiles_of_what_it_timed() {
        let f = floor_of(1000.0, (1..=1000).map(|x| x * 1000).collect(), Some(0.0));
        assert_eq!((f.samples, f.p50_us, f.p99_us, f.max_us), (1000, 500.0, 990.0, 1000.0));
        assert_eq!(allowed_p99_us(&f), 1485.0);
        assert_eq!(allowed_p99_us(&Floor::default()), 20.0);
        let real = spin_floor(50_000.0, 20_000_000);
        assert_eq!(real.samples, 1000);
        assert!(real.p50_us <= real.p99_us && real.p99_us <= real.max_us);
    }
}
