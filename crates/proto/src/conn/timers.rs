//! A connection's own deadlines: its hello must come in time, a full echo backlog may not stay
//! full for long, an idle connection may be closed. The shells ask ([`Conn::poll_timeout`],
//! [`Conn::handle_timeout`]) and close what expired; they never keep these times themselves.

#[cfg(doc)]
use super::Conn;
use super::ECHO_STALL_NS;

/// A connection's deadlines ([`Conn::timers`]); [`Conn::poll_timeout`] and
/// [`Conn::handle_timeout`] read them with whether it still awaits its hello.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timers {
    /// A connection awaiting its hello is closed at this time.
    hello_by: Option<u64>,
    /// Closed after this long without I/O.
    idle_ns: Option<u64>,
    last_io: u64,
    /// Its echo backlog has been full since then (the shell stopped reading it).
    stalled_since: Option<u64>,
}

/// Why a connection's time is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No hello by its deadline.
    NoHello,
    /// Its echo backlog stayed full for [`ECHO_STALL_NS`]: the peer does not read.
    Stalled,
    /// No I/O for its idle timeout.
    Idle,
}

impl Timers {
    /// Arms the deadlines at `now`: the hello must come within `hello_within` ns (if given), and
    /// the connection may stay `idle` ns without I/O (if given).
    pub fn arm(&mut self, now: u64, hello_within: Option<u64>, idle: Option<u64>) {
        *self = Timers { hello_by: hello_within.map(|w| now + w), idle_ns: idle, last_io: now, stalled_since: None };
    }

    /// I/O happened at `now` (for the idle timeout).
    pub fn touch(&mut self, now: u64) {
        self.last_io = now;
    }

    /// The shell stopped reading (`full`: the echo backlog is full) or resumed at `now`.
    pub fn set_stalled(&mut self, now: u64, full: bool) {
        self.stalled_since = if full { Some(self.stalled_since.unwrap_or(now)) } else { None };
    }

    /// Whether the shell stopped reading it (echo backlog full).
    pub fn stalled(&self) -> bool {
        self.stalled_since.is_some()
    }

    /// When [`Timers::expired`] may next find something (`awaiting_hello`: the hello's deadline
    /// still counts).
    pub(super) fn next(&self, awaiting_hello: bool) -> Option<u64> {
        let hello = self.hello_by.filter(|_| awaiting_hello);
        [hello, self.stalled_since.map(|s| s + ECHO_STALL_NS), self.idle_ns.map(|d| self.last_io + d)].into_iter().flatten().min()
    }

    /// What expired by `now`, if anything.
    pub(super) fn expired(&self, now: u64, awaiting_hello: bool) -> Option<Expiry> {
        if awaiting_hello && self.hello_by.is_some_and(|d| now >= d) {
            Some(Expiry::NoHello)
        } else if self.stalled_since.is_some_and(|s| now - s >= ECHO_STALL_NS) {
            Some(Expiry::Stalled)
        } else if self.idle_ns.is_some_and(|d| now - self.last_io >= d) {
            Some(Expiry::Idle)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Conn;
    use crate::RunKey;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_connection_keeps_its_own_deadlines() {
        let mut c = Conn::sink_tcp("t".into(), RunKey::OPEN);
        c.timers.arm(0, Some(5 * S), Some(30 * S));
        assert_eq!(c.poll_timeout(), Some(5 * S), "the hello's deadline first");
        assert_eq!(c.handle_timeout(5 * S - 1), None);
        assert_eq!(c.handle_timeout(5 * S), Some(Expiry::NoHello));
        // Without a hello deadline: a full echo backlog, then idleness.
        let mut c = Conn::sink_tcp("t".into(), RunKey::OPEN);
        c.timers.arm(0, None, Some(30 * S));
        c.timers.set_stalled(S, true);
        c.timers.set_stalled(2 * S, true);
        assert!(c.timers.stalled());
        assert_eq!(c.poll_timeout(), Some(S + ECHO_STALL_NS), "stalled since the first time it filled");
        assert_eq!(c.handle_timeout(S + ECHO_STALL_NS), Some(Expiry::Stalled));
        c.timers.set_stalled(3 * S, false);
        assert_eq!(c.handle_timeout(S + ECHO_STALL_NS), None, "resumed");
        c.timers.touch(10 * S);
        assert_eq!(c.handle_timeout(39 * S), None);
        assert_eq!(c.handle_timeout(40 * S), Some(Expiry::Idle));
    }
}
