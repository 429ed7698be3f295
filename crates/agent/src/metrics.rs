//! The agent's optional `/metrics` endpoint: Prometheus text exposition format 0.0.4, on its own
//! address (never the control port). A minimal HTTP/1.0 responder: it reads at most one
//! request head (bounded in size and time), answers, and closes.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use horde_engine::sender::Progress;

/// The agent's counters, for `/metrics` and its log.
#[derive(Default)]
pub struct Metrics {
    pub progress: Mutex<Option<Arc<Progress>>>,
    pub players: AtomicU64,
    pub running: AtomicBool,
    pub runs: AtomicU64,
    pub refused: AtomicU64,
    pub errors: AtomicU64,
    /// Rates over the last second: sent pkt/s, sent bit/s, received pkt/s, received bit/s.
    pub rates: Mutex<[f64; 4]>,
}

const MAX_HEAD: usize = 8 << 10;

/// The metrics text now.
pub fn render(m: &Metrics) -> String {
    let p = m.progress.lock().ok().and_then(|p| p.clone());
    let get = |f: fn(&horde_engine::sender::Progress) -> u64| p.as_ref().map_or(0, |p| f(p));
    let rates = m.rates.lock().map(|r| *r).unwrap_or_default();
    let mut s = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, v: f64| {
        let _ = write!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n");
    };
    metric("horde_agent_running", "gauge", "1 while a run's traffic is on.", m.running.load(Ordering::Relaxed) as u8 as f64);
    metric("horde_agent_players", "gauge", "Players of the current or last run on this agent.", m.players.load(Ordering::Relaxed) as f64);
    metric("horde_agent_connections", "gauge", "Player connections established in the current run.", get(|p| p.connections.load(Ordering::Relaxed)) as f64);
    metric("horde_agent_sent_packets_total", "counter", "APDUs sent in the current run.", get(|p| p.sent_packets.load(Ordering::Relaxed)) as f64);
    metric("horde_agent_sent_bytes_total", "counter", "Bytes sent in the current run.", get(|p| p.sent_bytes.load(Ordering::Relaxed)) as f64);
    metric("horde_agent_received_packets_total", "counter", "APDUs received in the current run.", get(|p| p.recv_packets.load(Ordering::Relaxed)) as f64);
    metric("horde_agent_received_bytes_total", "counter", "Bytes received in the current run.", get(|p| p.recv_bytes.load(Ordering::Relaxed)) as f64);
    metric("horde_agent_sent_packets_per_second", "gauge", "APDUs sent over the last second.", rates[0]);
    metric("horde_agent_sent_bits_per_second", "gauge", "Bits sent over the last second.", rates[1]);
    metric("horde_agent_received_packets_per_second", "gauge", "APDUs received over the last second.", rates[2]);
    metric("horde_agent_received_bits_per_second", "gauge", "Bits received over the last second.", rates[3]);
    metric(
        "horde_agent_late_departures_total",
        "counter",
        "Departures more than 1 ms after their scheduled time in the current run (send lateness).",
        get(|p| p.late_1ms.load(Ordering::Relaxed)) as f64,
    );
    metric("horde_agent_runs_total", "counter", "Runs assigned to this agent.", m.runs.load(Ordering::Relaxed) as f64);
    metric(
        "horde_agent_refused_connections_total",
        "counter",
        "Control connections refused (failed authentication, busy, protocol errors).",
        m.refused.load(Ordering::Relaxed) as f64,
    );
    metric("horde_agent_errors_total", "counter", "Assignments that failed to prepare.", m.errors.load(Ordering::Relaxed) as f64);
    s
}

/// Updates the per-second rates once a second until `stop`.
pub fn sample(m: &Metrics, stop: &AtomicBool) {
    let mut last = [0u64; 4];
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_secs(1));
        let p = m.progress.lock().ok().and_then(|p| p.clone());
        let now = p.map_or([0; 4], |p| {
            [
                p.sent_packets.load(Ordering::Relaxed),
                p.sent_bytes.load(Ordering::Relaxed),
                p.recv_packets.load(Ordering::Relaxed),
                p.recv_bytes.load(Ordering::Relaxed),
            ]
        });
        let d = |i: usize| now[i].saturating_sub(last[i]) as f64;
        if let Ok(mut r) = m.rates.lock() {
            *r = [d(0), d(1) * 8.0, d(2), d(3) * 8.0];
        }
        last = now;
    }
}

/// Answers `GET /metrics` until `stop`; anything else gets 404, a malformed request 400.
pub fn serve(l: TcpListener, m: &Metrics, stop: &AtomicBool) {
    use horde_proto::admission::{Admission, AdmissionConfig, Offer, Outcome};
    let busy = std::sync::atomic::AtomicUsize::new(0);
    // A client holds a place until its request has come (a probe sends it at once): slow ones
    // from one address or many cannot hold every place, a newcomer sheds one. A source's share
    // is the whole budget: a probe must not depend on other clients of its address.
    let places = std::sync::Mutex::new((Admission::new(AdmissionConfig::new(MAX_CLIENTS, MAX_CLIENTS)), std::collections::HashMap::new()));
    let started = Instant::now();
    let now = || started.elapsed().as_nanos() as u64;
    std::thread::scope(|s| {
        while !stop.load(Ordering::Relaxed) {
            let (c, peer) = match horde_sys::listen::accept(&l, Duration::from_millis(200)) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            };
            // Many clients at once, each on its own thread with its own deadline: one slow
            // client cannot hold up the readiness probe. Past the cap, newcomers are closed.
            if busy.load(Ordering::Relaxed) >= 2 * MAX_CLIENTS {
                continue;
            }
            let id = {
                let mut p = places.lock().unwrap_or_else(|e| e.into_inner());
                match p.0.offer(peer.ip(), now()) {
                    Offer::Refuse(_) => continue,
                    Offer::Admit { id, evict } => {
                        if let Some(old) = evict.and_then(|old| p.1.remove(&old)) {
                            let _ = std::net::TcpStream::shutdown(&old, std::net::Shutdown::Both);
                        }
                        if let Ok(k) = c.try_clone() {
                            p.1.insert(id, k);
                        }
                        id
                    }
                }
            };
            busy.fetch_add(1, Ordering::Relaxed);
            let (busy, places, now) = (&busy, &places, &now);
            s.spawn(move || {
                let done = |outcome| {
                    let mut p = places.lock().unwrap_or_else(|e| e.into_inner());
                    p.1.remove(&id);
                    p.0.finished(id, outcome, now());
                };
                // on /metrics a complete request is the proof: its source is trusted a while
                let late = !answer(c, m, &|| done(Outcome::Authenticated));
                // gone or timed out before its request (a place already left is not counted again)
                done(if late { Outcome::TimedOut } else { Outcome::Closed });
                busy.fetch_sub(1, Ordering::Relaxed);
            });
        }
    });
}

/// Clients served at once at most.
const MAX_CLIENTS: usize = 64;
/// How long one client may take to send its request: 2 s.
const REQUEST_WITHIN: Duration = Duration::from_secs(2);

/// Reads one request within [`REQUEST_WITHIN`] and answers it; `came` is told when the request
/// head has come. False when the client did not send it in time.
fn answer(mut c: std::net::TcpStream, m: &Metrics, came: &dyn Fn()) -> bool {
    let _ = c.set_nonblocking(false);
    let _ = c.set_write_timeout(Some(Duration::from_secs(1)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + REQUEST_WITHIN;
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") && head.len() < MAX_HEAD {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let _ = c.set_read_timeout(Some(left));
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    if Instant::now() >= deadline {
        return false;
    }
    came();
    let _ = c.write_all(respond(&head, m).as_bytes());
    true
}

/// The response to a request head.
pub fn respond(head: &[u8], m: &Metrics) -> String {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let reply = |code: &str, ctype: &str, body: &str| {
        format!("HTTP/1.0 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    };
    match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics")) => reply("200 OK", "text/plain; version=0.0.4", &render(m)),
        // The readiness probe: the agent is up and serving (cheap: nothing rendered).
        (Some("GET"), Some("/ready")) => reply("200 OK", "text/plain", "ready\n"),
        (Some(_), Some(_)) => reply("404 Not Found", "text/plain", "only /metrics and /ready are served here\n"),
        _ => reply("400 Bad Request", "text/plain", "bad request\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_prometheus_text() {
        let m = Metrics::default();
        m.players.store(250, Ordering::Relaxed);
        let r = respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &m);
        assert!(r.starts_with("HTTP/1.0 200 OK\r\n"));
        assert!(r.contains("# TYPE horde_agent_players gauge\nhorde_agent_players 250\n"));
        assert!(r.contains("horde_agent_sent_packets_total 0\n"));
        assert!(r.contains("horde_agent_late_departures_total 0\n"));
        assert!(respond(b"GET /etc/passwd HTTP/1.1\r\n\r\n", &m).starts_with("HTTP/1.0 404"));
        assert!(respond(b"\x00\xff", &m).starts_with("HTTP/1.0 400"));
    }
}
