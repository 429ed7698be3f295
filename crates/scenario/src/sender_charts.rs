//! The report's charts of the sending side itself, beside the network's: the host's steal
//! and late departures (the generator's own share in lateness), and each side's TCP send
//! queues (where a backlog the path does not take waits, before the network).

use horde_engine::sender::SendReport;
use serde::Serialize;

/// Each side's TCP send queues together, once a second of the run, bytes [not yet acknowledged,
/// of them not yet sent]: what the path does not take waits here, before the network, and an
/// APDU's one-way delay counts that wait too (a server sending more than its link carries).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TcpSendQueues {
    /// The players' sockets (up).
    pub up: Vec<[u64; 2]>,
    /// The server side's sockets (down).
    pub down: Vec<[u64; 2]>,
    /// The largest not-yet-acknowledged total each way, bytes.
    pub up_max: u64,
    pub down_max: u64,
}

impl TcpSendQueues {
    pub(crate) fn of(client: &SendReport, server: &SendReport) -> Option<TcpSendQueues> {
        if client.tcp_send_queue.is_empty() && server.tcp_send_queue.is_empty() {
            return None;
        }
        let max = |v: &[[u64; 2]]| v.iter().map(|q| q[0]).max().unwrap_or(0);
        let (up, down) = (client.tcp_send_queue.clone(), server.tcp_send_queue.clone());
        Some(TcpSendQueues { up_max: max(&up), down_max: max(&down), up, down })
    }

    pub(crate) fn chart(&self, marks: &[(f64, String)]) -> String {
        let kb = |v: &[[u64; 2]], k: usize| -> Vec<(f64, f64)> { v.iter().enumerate().map(|(s, q)| (s as f64 + 1.0, q[k] as f64 / 1e3)).collect() };
        let series = vec![
            ("server side → players: not yet acknowledged".to_string(), kb(&self.down, 0)),
            ("server side → players: not yet sent".to_string(), kb(&self.down, 1)),
            ("players → server side: not yet acknowledged".to_string(), kb(&self.up, 0)),
            ("players → server side: not yet sent".to_string(), kb(&self.up, 1)),
        ];
        horde_stats::charts::Chart::new("TCP send queues, all sockets of each side (where a backlog waits before the network)", "time (s)", "kB", &series)
            .marks(marks)
            .svg()
    }
}

/// The host beside the run, per second: the hypervisor's steal and the share of departures
/// more than 1 ms late (None with fewer than two seconds of steal samples: nothing to draw).
pub(crate) fn host_chart(h: &horde_engine::sender::HostReport) -> Option<String> {
    if h.steal_seconds.len() < 2 {
        return None;
    }
    let steal: Vec<(f64, f64)> = h.steal_seconds.iter().enumerate().map(|(k, s)| (k as f64 + 1.0, s * 100.0)).collect();
    let late: Vec<(f64, f64)> = h
        .sent_seconds
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (k as f64 + 1.0, h.late_seconds.get(k).copied().unwrap_or(0) as f64 * 100.0 / *n as f64))
        .collect();
    let series =
        vec![("steal (% of CPU time)".to_string(), horde_stats::charts::steps(&steal)), ("departures > 1 ms late (% of the second's)".to_string(), late)];
    let title = match &h.floor {
        Some(f) => format!("Host: steal and late departures per second (busy-wait floor before the run: p99 {:.0} µs)", f.p99_us),
        None => "Host: steal and late departures per second".to_string(),
    };
    Some(horde_stats::charts::Chart::new(&title, "time (s)", "%", &series).svg())
}
