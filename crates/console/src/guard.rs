//! Who may talk to the console, decided from a request's headers alone (I/O-free, fuzzed):
//! - the **token** of this start (random, printed once as a URL, as Jupyter does) on every
//!   request: `Authorization: Bearer TOKEN`, the `horde_ui` cookie the first page sets, or
//!   `?token=TOKEN` on the page `/` only (the printed URL; the page then drops it from the
//!   address bar);
//! - the **Host** header names the console itself (its listening address, or `localhost` /
//!   `127.0.0.1` / `[::1]` with its port): a DNS-rebinding page's requests carry its own name;
//! - the **Origin** header, when a browser sends one, is the console's own, and
//!   `Sec-Fetch-Site` is not `cross-site`: another site's page cannot post commands (CSRF).

/// The name of the cookie that carries the token.
pub const COOKIE: &str = "horde_ui";

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
    pub cookie: Option<&'a str>,
    /// The URI's query string — given by the caller for the page `/` only (the printed URL);
    /// elsewhere a token in the query is not looked at.
    pub query: Option<&'a str>,
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

    /// Whether the request may go on; `Ok(true)` when the token came in the query (the page
    /// then sets the cookie and drops the token from the address).
    pub fn check(&self, h: &Headers) -> Result<bool, Refusal> {
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
        let cookie = h.cookie.and_then(|c| c.split(';').filter_map(|kv| kv.trim().split_once('=')).find(|(k, _)| *k == COOKIE).map(|(_, v)| v));
        let query = h.query.and_then(|q| q.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == "token").map(|(_, v)| v));
        if bearer.is_some_and(|t| self.same(t)) || cookie.is_some_and(|t| self.same(t)) {
            return Ok(false);
        }
        if query.is_some_and(|t| self.same(t)) {
            return Ok(true);
        }
        Err(Refusal::Token)
    }

    /// Compares in time independent of where the first difference is.
    fn same(&self, t: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), t.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
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
        assert_eq!(g.check(&ok()), Ok(false));
        assert_eq!(g.check(&Headers { authorization: None, ..ok() }), Err(Refusal::Token));
        assert_eq!(g.check(&Headers { authorization: Some("Bearer abc124"), ..ok() }), Err(Refusal::Token));
        assert_eq!(g.check(&Headers { authorization: None, cookie: Some("a=b; horde_ui=abc123"), ..ok() }), Ok(false));
        assert_eq!(g.check(&Headers { authorization: None, query: Some("x=1&token=abc123"), ..ok() }), Ok(true));
        assert_eq!(g.check(&Headers { host: Some("localhost:7070"), ..ok() }), Ok(false));
        assert_eq!(g.check(&Headers { host: Some("evil.example:7070"), ..ok() }), Err(Refusal::Host), "DNS rebinding");
        assert_eq!(g.check(&Headers { host: None, ..ok() }), Err(Refusal::Host));
        assert_eq!(g.check(&Headers { origin: Some("http://127.0.0.1:7070"), ..ok() }), Ok(false));
        assert_eq!(g.check(&Headers { origin: Some("http://evil.example"), ..ok() }), Err(Refusal::Origin), "CSRF");
        assert_eq!(g.check(&Headers { origin: Some("https://127.0.0.1:7070"), ..ok() }), Err(Refusal::Origin), "another scheme is another origin");
        assert_eq!(g.check(&Headers { sec_fetch_site: Some("cross-site"), ..ok() }), Err(Refusal::Origin));
        assert_eq!(new_token().unwrap().len(), 32);
    }
}
