//! Who may talk to the console, decided from a request's headers alone (I/O-free, fuzzed):
//! - the **Host** header names the console itself (its listening address, or `localhost` /
//!   `127.0.0.1` / `[::1]` with its port): a DNS-rebinding page's requests carry its own name;
//! - the **Origin** header, when a browser sends one, is the console's own, and
//!   `Sec-Fetch-Site` is not `cross-site`: another site's page cannot post commands (CSRF);
//! - the **token** of this start (random, printed once as a URL, as Jupyter does) on every
//!   request but the page and its assets (which hold no secret): `Authorization: Bearer TOKEN`.
//!   The page takes the token from the printed URL into the tab's session storage and out of
//!   the address bar, and sends it as that header. **No cookie**: a cookie is not scoped to a
//!   port (RFC 6265 §8.5), so every other web server on the same host would receive it;
//! - what a browser cannot send a header with (the event stream's `EventSource`, a report
//!   opened in a new tab) shows a **ticket** in its query instead: one-time, for one path,
//!   for 30 s, asked for with the token ([`Tickets`]).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no token, or a wrong one.
    Token,
    /// 403: the Host header names something else.
    Host,
    /// 403: another site's page.
    Origin,
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::Token => 401,
            Refusal::Host | Refusal::Origin => 403,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refusal::Token => "the console needs its token: open the URL `horde ui` printed (…/?token=…), or send Authorization: Bearer TOKEN",
            Refusal::Host => "the Host header does not name this console (DNS rebinding?): use the address `horde ui` printed",
            Refusal::Origin => "a request from another site's page: the console answers its own pages only",
        }
    }
}

/// The request headers the guard reads (lower-case names).
#[derive(Debug, Default, Clone, Copy)]
pub struct Headers<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub sec_fetch_site: Option<&'a str>,
    pub authorization: Option<&'a str>,
}

/// What a request is, for the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The page or an asset: no secret in it, no token needed (Host and Origin still checked).
    Public,
    /// Everything else: the token, or (where a browser cannot send a header) a ticket.
    Token,
}

pub struct Guard {
    token: String,
    /// Host header values that name the console.
    hosts: Vec<String>,
    tls: bool,
}

impl Guard {
    /// A guard for a console at `listen` (its port names it) with `token`.
    pub fn new(token: String, listen: std::net::SocketAddr, tls: bool) -> Guard {
        let port = listen.port();
        let mut hosts = vec![format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}"), listen.to_string()];
        hosts.dedup();
        Guard { token, hosts, tls }
    }

    /// Also accept `name:port` as the console's name (a name given with `--host-name`).
    pub fn also_named(&mut self, name: &str, port: u16) {
        self.hosts.push(format!("{name}:{port}"));
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether the request may go on: `Ok(true)` when it showed the token, `Ok(false)` for a
    /// public path without it. `ticket_ok` redeems a ticket of the query (the caller's
    /// [`Tickets`], for this path).
    pub fn check(&self, h: &Headers, access: Access, ticket_ok: impl FnOnce() -> bool) -> Result<bool, Refusal> {
        let host = h.host.ok_or(Refusal::Host)?;
        if !self.hosts.iter().any(|a| a.eq_ignore_ascii_case(host)) {
            return Err(Refusal::Host);
        }
        if h.sec_fetch_site.is_some_and(|s| s.eq_ignore_ascii_case("cross-site")) {
            return Err(Refusal::Origin);
        }
        if let Some(o) = h.origin {
            let scheme = if self.tls { "https://" } else { "http://" };
            let own = o.strip_prefix(scheme).is_some_and(|rest| self.hosts.iter().any(|a| a.eq_ignore_ascii_case(rest)));
            if !own {
                return Err(Refusal::Origin);
            }
        }
        let bearer = h.authorization.and_then(|a| a.strip_prefix("Bearer ")).map(str::trim);
        if bearer.is_some_and(|t| self.same(t)) {
            return Ok(true);
        }
        match access {
            Access::Public => Ok(false),
            Access::Token if ticket_ok() => Ok(true),
            Access::Token => Err(Refusal::Token),
        }
    }

    fn same(&self, t: &str) -> bool {
        same_secret(&self.token, t)
    }
}

/// Whether two secrets (a token, a ticket) are equal, in time independent of where the first
/// difference is.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Tickets kept at most (the oldest is forgotten first).
pub const MAX_TICKETS: usize = 256;
/// How long a ticket is good for.
pub const TICKET_NS: u64 = 30_000_000_000;

/// One-time tickets, each for one path, for what a browser cannot send a header with: asked
/// for with the token, shown once in a query (`?ticket=…`), then gone. Time in (ns on any
/// monotonic clock); the caller draws each ticket's secret.
#[derive(Debug, Default)]
pub struct Tickets {
    live: std::collections::VecDeque<(String, String, u64)>,
}

impl Tickets {
    /// Files `ticket` for `path` until `now_ns` + [`TICKET_NS`].
    pub fn issue(&mut self, ticket: String, path: &str, now_ns: u64) {
        self.live.retain(|t| t.2 > now_ns);
        if self.live.len() >= MAX_TICKETS {
            self.live.pop_front();
        }
        self.live.push_back((ticket, path.to_string(), now_ns + TICKET_NS));
    }

    /// Whether `ticket` is good for `path` now; a good one is used up.
    pub fn redeem(&mut self, ticket: &str, path: &str, now_ns: u64) -> bool {
        let Some(k) = self.live.iter().position(|t| same_secret(&t.0, ticket)) else { return false };
        let (_, p, until) = self.live.remove(k).expect("found");
        p == path && until > now_ns
    }
}

/// Which paths a ticket may be asked for: a run's event stream and a run's report files.
pub fn ticket_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/api/v1/runs/") else { return false };
    let Some((id, tail)) = rest.split_once('/') else { return false };
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && (tail == "events" || (tail.starts_with("report/") && tail.len() > 7))
}

/// A fresh token: 128 bits from the kernel, hex.
pub fn new_token() -> std::io::Result<String> {
    let s = horde_sys::random_secret()?;
    Ok(s[..16].iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard::new("abc123".into(), "127.0.0.1:7070".parse().unwrap(), false)
    }

    fn ok<'a>() -> Headers<'a> {
        Headers { host: Some("127.0.0.1:7070"), authorization: Some("Bearer abc123"), ..Default::default() }
    }

    #[test]
    fn the_token_the_host_and_the_origin_decide() {
        let g = guard();
        let t = Access::Token;
        let no = || false;
        assert_eq!(g.check(&ok(), t, no), Ok(true));
        assert_eq!(g.check(&Headers { authorization: None, ..ok() }, t, no), Err(Refusal::Token));
        assert_eq!(g.check(&Headers { authorization: None, ..ok() }, Access::Public, no), Ok(false), "the page needs no token");
        assert_eq!(g.check(&Headers { authorization: None, ..ok() }, t, || true), Ok(true), "a ticket");
        assert_eq!(g.check(&Headers { authorization: Some("Bearer abc124"), ..ok() }, t, no), Err(Refusal::Token));
        assert_eq!(g.check(&Headers { host: Some("localhost:7070"), ..ok() }, t, no), Ok(true));
        assert_eq!(g.check(&Headers { host: Some("evil.example:7070"), ..ok() }, Access::Public, no), Err(Refusal::Host), "DNS rebinding");
        assert_eq!(g.check(&Headers { host: None, ..ok() }, t, no), Err(Refusal::Host));
        assert_eq!(g.check(&Headers { origin: Some("http://127.0.0.1:7070"), ..ok() }, t, no), Ok(true));
        assert_eq!(g.check(&Headers { origin: Some("http://evil.example"), ..ok() }, t, no), Err(Refusal::Origin), "CSRF");
        assert_eq!(g.check(&Headers { origin: Some("https://127.0.0.1:7070"), ..ok() }, t, no), Err(Refusal::Origin), "another scheme is another origin");
        assert_eq!(g.check(&Headers { sec_fetch_site: Some("cross-site"), ..ok() }, t, no), Err(Refusal::Origin));
        assert_eq!(new_token().unwrap().len(), 32);
    }

    #[test]
    fn a_ticket_is_good_once_for_its_path_for_30_s() {
        let mut t = Tickets::default();
        let p = "/api/v1/runs/3/events";
        t.issue("aa".into(), p, 0);
        assert!(!t.redeem("aa", "/api/v1/runs/4/events", 1), "another path");
        assert!(!t.redeem("aa", p, 2), "a ticket tried on another path is gone");
        t.issue("bb".into(), p, 0);
        assert!(!t.redeem("bb", p, TICKET_NS), "expired");
        t.issue("cc".into(), p, 0);
        assert!(t.redeem("cc", p, 5));
        assert!(!t.redeem("cc", p, 6), "once");
        for k in 0..(MAX_TICKETS + 10) {
            t.issue(format!("{k}"), p, 10);
        }
        assert!(t.live.len() <= MAX_TICKETS);
        assert!(ticket_path(p) && ticket_path("/api/v1/runs/12/report/index.html"));
        assert!(
            !ticket_path("/api/v1/runs/12/commands")
                && !ticket_path("/api/v1/runs")
                && !ticket_path("/api/v1/runs/x/events")
                && !ticket_path("/api/v1/runs/1/report/")
        );
    }
}
