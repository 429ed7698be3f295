//! The sender: drives any number of flows from a fixed set of worker threads, and serves the
//! server side of two-way scenarios with the same workers.
//!
//! Each worker owns a share of the flows and a min-heap of their next departures. It sleeps
//! until shortly before the earliest departure, spins for the last stretch, then sends every
//! packet that is due: UDP packets of one flow leave in one `sendmmsg`, TCP APDUs are written
//! to the stream. A worker that falls behind sends what is overdue at once (never drops it)
//! until the flow's duration ends; the lateness of every packet is measured.
//!
//! What a flow sends, how its bytes are framed and what arriving bytes mean is decided by its
//! [`horde_proto::Conn`] (I/O-free); the worker ([`crate::worker`]) is the I/O shell around it.
//! Set-up (sockets, connects, address validation of UDP flows, the common start) is in
//! [`crate::setup`].

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

use hdrhistogram::Histogram;
use horde_model::{Flow, Transport};

pub use horde_proto::conn::{Accepted, Responder};
pub use horde_proto::Source;

use crate::clock::{self, real_ns};
use crate::logger::{LogSink, LogWriter};
use crate::setup::{self, StartGate};
use crate::slot::Share;
use crate::worker::{Worker, WorkerResult};
use crate::EngineError;

pub(crate) mod types;
pub use types::*;

/// Time given to workers between the start gate and the first departure, plus a share per TCP
/// flow for writing its hello (measured: 10,000 hellos take ~60 ms on this 2-core VM).
const START_LEAD_NS: u64 = 20_000_000;
const START_LEAD_PER_TCP_NS: u64 = 20_000;

/// Opens the sockets of every flow, connects TCP flows and validates UDP ones, then runs all
/// flows to their end (or until `stop` is set) and reports.
pub fn run(flows: Vec<Flow>, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, EngineError> {
    run_jobs(flows.into_iter().map(|flow| Job { flow, source: None, mirror: None, connect_at_ns: None, netns: None, presence: None }).collect(), opts, stop)
}

/// [`run`] with explicit sources (e.g. players' behaviour-driven schedules).
pub fn run_jobs(jobs: Vec<Job>, opts: &SendOptions, stop: &AtomicBool) -> Result<SendReport, EngineError> {
    if jobs.is_empty() {
        return Err(EngineError::Config("no flows to send".into()));
    }
    setup::check_fd_limit(jobs.len())?;
    // The run's departures per second, by its flows' models: the floor's pacer runs at it.
    let rate: f64 = jobs
        .iter()
        .filter(|j| !j.flow.bulk)
        .filter_map(|j| j.flow.idt.mean().or_else(|| j.flow.idt.mean_estimate()))
        .filter(|m| *m > 0.0)
        .map(|m| 1000.0 / m)
        .sum();
    let mut slots = setup::open_all(jobs, opts)?;
    let connect_started = clock::mono_ns();
    setup::connect_all(&mut slots, opts.connect_timeout, stop)?;
    setup::validate_all(&mut slots, opts.connect_timeout, stop)?;
    crate::icmp::admit_all(&mut slots, opts.connect_timeout, stop)?;
    let tcp_flows = slots.iter().filter(|s| s.conn.transport() == Transport::Tcp).count() as u64;
    let greeted = slots.iter().any(|s| s.conn.greeter().is_some());
    let connect_s = if tcp_flows > 0 || greeted { (clock::mono_ns() - connect_started) as f64 / 1e9 } else { 0.0 };
    let threads = opts.threads.clamp(1, slots.len());
    let mut shares: Vec<Share> = (0..threads).map(|_| Share::default()).collect();
    for (i, s) in slots.into_iter().enumerate() {
        shares[i % threads].slots.push(s);
    }
    let lead = START_LEAD_NS + START_LEAD_PER_TCP_NS * tcp_flows / threads as u64;
    let floor = (!opts.floor.is_zero()).then(|| horde_sys::host::spin_floor(if rate > 0.0 { rate } else { 10_000.0 }, opts.floor.as_nanos() as u64));
    run_workers(shares, opts, stop, lead, connect_s, floor)
}

/// The server side of a two-way scenario: listens on `listen`, and for every connection (or UDP
/// peer) whose hello passes validation and the responder, sends that player's departures and
/// logs what arrives. Runs until `stop` is set. `ready` gets the bound addresses first.
pub fn serve(
    listen: &[SocketAddr],
    transport: Transport,
    opts: &SendOptions,
    stop: &AtomicBool,
    ready: impl FnOnce(&[SocketAddr]),
) -> Result<SendReport, EngineError> {
    if opts.responder.is_none() {
        return Err(EngineError::Config("serving needs a responder".into()));
    }
    clock::raise_fd_limit();
    let threads = opts.threads.max(1);
    let (shares, bound) = setup::listen_all(listen, transport, threads, opts)?;
    ready(&bound);
    run_workers(shares, opts, stop, START_LEAD_NS, 0.0, None)
}

fn run_workers(
    shares: Vec<Share>,
    opts: &SendOptions,
    stop: &AtomicBool,
    lead_ns: u64,
    connect_s: f64,
    floor: Option<horde_sys::host::Floor>,
) -> Result<SendReport, EngineError> {
    let threads = shares.len();
    let steal = horde_sys::host::StealMonitor::start();
    let tap = opts.log_tap.take();
    let (writer, sink) = if opts.log.is_some() || tap.is_some() {
        let p = opts.log.as_deref();
        let (w, s) = LogWriter::create(p, horde_wire::Role::Sender, real_ns(), tap)
            .map_err(|e| EngineError::Io { what: format!("creating log {}", p.map(|p| p.display().to_string()).unwrap_or_default()), err: e })?;
        (Some(w), s)
    } else {
        (None, LogSink::disabled())
    };
    // Workers register their sockets first; the clock starts when all are ready, so set-up
    // time (10,000 sockets take ~100 ms) never shows as lateness.
    let start = StartGate::new(threads, lead_ns).not_before(opts.start_at_real_ns);
    let results = std::thread::scope(|scope| -> Result<Vec<io_result::WorkerOutcome>, EngineError> {
        let mut handles = Vec::with_capacity(threads);
        for (i, share) in shares.into_iter().enumerate() {
            let sink = sink.clone();
            let opts = opts.clone();
            let start = &start;
            let spawned = std::thread::Builder::new().name(format!("horde-send-{i}")).spawn_scoped(scope, move || {
                let progress = opts.progress.clone();
                let w = Worker::new(share, sink, opts);
                // Arrive even when set-up failed, so the others are not left waiting.
                let Some((t0_mono, t0_real)) = start.arrive(w.is_ok()) else {
                    return w.map(|_| None);
                };
                if let Some(p) = &progress {
                    p.t0_real_ns.store(t0_real, std::sync::atomic::Ordering::Relaxed);
                }
                w?.run(t0_mono, t0_real, stop).map(Some)
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The workers already started must not wait at the gate for this one.
                    start.abort();
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(EngineError::Io { what: format!("starting sender thread {i}"), err: e });
                }
            }
        }
        Ok(handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(std::io::Error::other("sender worker panicked")))).collect())
    });
    drop(sink);
    let done = match writer {
        Some(w) => w.finish().map_err(|e| EngineError::Io { what: "writing the send log".into(), err: e })?,
        None => Default::default(),
    };
    let log_records = if opts.log.is_some() { done.records } else { 0 };
    let results = results?;
    let mut flows = Vec::new();
    let mut hist = new_hist();
    let mut interrupted = false;
    let mut refusals = Refusals::default();
    let mut end_real_ns = 0;
    let mut late_by_second: Vec<u64> = Vec::new();
    let mut sent_by_second: Vec<u64> = Vec::new();
    let mut late_over_1ms = 0u64;
    let mut not_opened = 0u64;
    let mut tcp_queue: Vec<[u64; 2]> = Vec::new();
    for r in results {
        let r = r.map_err(|e| EngineError::Io { what: "sending".into(), err: e })?;
        let Some(r) = r else {
            return Err(EngineError::Config("a sender worker could not start (see the error above)".into()));
        };
        hist.add(&r.lateness).ok();
        late_over_1ms += r.late_over_1ms;
        if late_by_second.len() < r.late_by_second.len() {
            late_by_second.resize(r.late_by_second.len(), 0);
        }
        late_by_second.iter_mut().zip(&r.late_by_second).for_each(|(a, b)| *a += b);
        if sent_by_second.len() < r.sent_by_second.len() {
            sent_by_second.resize(r.sent_by_second.len(), 0);
        }
        sent_by_second.iter_mut().zip(&r.sent_by_second).for_each(|(a, b)| *a += b);
        if tcp_queue.len() < r.tcp_queue_by_second.len() {
            tcp_queue.resize(r.tcp_queue_by_second.len(), [0, 0]);
        }
        tcp_queue.iter_mut().zip(&r.tcp_queue_by_second).for_each(|(a, b)| *a = [a[0] + b[0], a[1] + b[1]]);
        interrupted |= r.interrupted;
        refusals.add(&r.refusals);
        end_real_ns = end_real_ns.max(r.end_real_ns);
        not_opened += r.not_opened;
        flows.extend(r.flows);
    }
    flows.sort_by_key(|f| f.id);
    let t0 = start.t0().map_or(0, |t| t.1);
    let mut report = summarise(flows, &hist, connect_s, interrupted, opts, log_records, threads, t0);
    report.end_real_ns = end_real_ns;
    report.errors += not_opened;
    report.refusals = refusals;
    report.log_server = done.tap;
    // One count of late departures for the summary and the host's part (the histogram's own
    // count is bucketed near 1 ms); the per-second counts add up to it for runs up to a day.
    report.lateness.over_1ms = late_over_1ms;
    report.host = host_report(steal.map(|m| m.finish()).unwrap_or_default(), floor, late_by_second, sent_by_second, report.lateness.p99_us);
    report.host.late_total = late_over_1ms;
    report.tcp_send_queue = tcp_queue;
    Ok(report)
}

/// What the host took, beside what the run's lateness was.
fn host_report(steal_seconds: Vec<f64>, floor: Option<horde_sys::host::Floor>, late_by_second: Vec<u64>, sent_by_second: Vec<u64>, p99_us: f64) -> HostReport {
    let n = steal_seconds.len();
    let late_in_steal = late_by_second.iter().enumerate().filter(|(k, _)| steal_seconds.get(*k).is_some_and(|s| *s >= STEAL_SECOND)).map(|(_, l)| l).sum();
    let allowed = floor.as_ref().map(horde_sys::host::allowed_p99_us);
    HostReport {
        steal_mean: (n > 0).then(|| steal_seconds.iter().sum::<f64>() / n as f64),
        steal_max: steal_seconds.iter().copied().reduce(f64::max),
        steal_seconds,
        floor,
        allowed_p99_us: allowed,
        within_floor: allowed.map(|a| p99_us <= a),
        late_in_steal,
        late_total: late_by_second.iter().sum(),
        late_seconds: late_by_second,
        sent_seconds: sent_by_second,
    }
}

/// Results of the worker threads.
mod io_result {
    pub type WorkerOutcome = std::io::Result<Option<super::WorkerResult>>;
}

#[allow(clippy::too_many_arguments)]
fn summarise(
    flows: Vec<FlowSent>,
    hist: &Histogram<u64>,
    connect_s: f64,
    interrupted: bool,
    opts: &SendOptions,
    log_records: u64,
    threads: usize,
    t0_real_ns: u64,
) -> SendReport {
    let first = flows.iter().filter(|f| f.packets > 0).map(|f| f.first_ns).min().unwrap_or(0);
    let last = flows.iter().map(|f| f.last_ns).max().unwrap_or(0);
    let us = |q: f64| hist.value_at_quantile(q).min(hist.max()) as f64 / 1e3;
    let lateness = Lateness {
        mean_us: hist.mean() / 1e3,
        p50_us: us(0.5),
        p90_us: us(0.9),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: hist.max() as f64 / 1e3,
        over_1ms: hist.count_between(1_000_000, u64::MAX),
    };
    SendReport {
        packets: flows.iter().map(|f| f.packets).sum(),
        bytes: flows.iter().map(|f| f.bytes).sum(),
        errors: flows.iter().map(|f| f.errors).sum(),
        echoes: flows.iter().map(|f| f.echoes).sum(),
        received: flows.iter().map(|f| f.received).sum(),
        mismatched: flows.iter().map(|f| f.mismatched).sum(),
        unsent: flows.iter().map(|f| f.unsent).sum(),
        duration_s: last.saturating_sub(first) as f64 / 1e9,
        connect_s,
        lateness,
        interrupted,
        log: opts.log.clone(),
        log_records,
        log_server: None,
        threads,
        t0_real_ns,
        end_real_ns: 0,
        refusals: Refusals::default(),
        host: HostReport::default(),
        flows,
        tcp_send_queue: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_departures_are_set_beside_the_seconds_the_host_stole() {
        let floor = horde_sys::host::floor_of(1000.0, vec![10_000; 100], Some(0.0));
        let h = host_report(vec![0.0, 0.2, 0.005], Some(floor), vec![3, 4, 5, 6], vec![10; 4], 14.0);
        assert_eq!((h.late_in_steal, h.late_total), (4, 18), "only the second with 20 % steal");
        assert_eq!((h.allowed_p99_us, h.within_floor), (Some(20.0), Some(true)));
        assert!((h.steal_mean.unwrap() - 0.205 / 3.0).abs() < 1e-12 && h.steal_max == Some(0.2));
        let h = host_report(Vec::new(), None, Vec::new(), Vec::new(), 500.0);
        assert_eq!((h.steal_mean, h.within_floor, h.late_total), (None, None, 0));
    }
}
