//! A `horde ui` child and a small HTTP client for its API (the console's tests).

use super::horde;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub struct Console {
    pub child: Child,
    pub addr: SocketAddr,
    pub token: String,
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn console(runs: &std::path::Path) -> Console {
    console_with(runs, &[])
}

/// `horde ui` with more flags (`--no-exec`, `--token-file F`, …).
pub fn console_with(runs: &std::path::Path, extra: &[&str]) -> Console {
    let mut child = horde()
        .args(["ui", "--listen", "127.0.0.1:0", "--runs", runs.to_str().unwrap()])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    // "horde ui: the console is at http://127.0.0.1:PORT/?token=TOKEN"
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    let rest = url.strip_prefix("http://").unwrap_or_else(|| panic!("no URL in {line:?}"));
    let (addr, token) = rest.split_once("/?token=").unwrap();
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    Console { child, addr: addr.parse().unwrap(), token: token.to_string() }
}

pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// One HTTP/1.1 request with `headers` (the Host header is the console's unless given).
pub fn http(c: &Console, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut s = TcpStream::connect(c.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {}\r\n", c.addr));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Reply { status, head: head.to_string(), body: body.to_string() }
}

pub fn authed(c: &Console, method: &str, path: &str, body: &str) -> Reply {
    let bearer = format!("Bearer {}", c.token);
    http(c, method, path, &[("Authorization", &bearer), ("Content-Type", "application/json")], body)
}

/// Reads server-sent events from `path` until `enough` says so (or `limit`): (id, data) pairs.
pub fn sse(
    c: &Console,
    path: &str,
    last_id: Option<u64>,
    limit: Duration,
    mut enough: impl FnMut(&[(u64, serde_json::Value)]) -> bool,
) -> Vec<(u64, serde_json::Value)> {
    let mut s = TcpStream::connect(c.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let last = last_id.map(|n| format!("Last-Event-ID: {n}\r\n")).unwrap_or_default();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n{last}\r\n", c.addr, c.token).unwrap();
    let mut r = BufReader::new(s);
    let (mut out, mut id, t) = (Vec::new(), None, Instant::now());
    let mut line = String::new();
    while t.elapsed() < limit && !enough(&out) {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => continue,
        }
        if let Some(v) = line.trim_end().strip_prefix("id: ").or_else(|| line.trim_end().strip_prefix("id:")) {
            id = v.trim().parse().ok();
        } else if let Some(d) = line.trim_end().strip_prefix("data: ").or_else(|| line.trim_end().strip_prefix("data:")) {
            out.push((id.expect("every event has its number"), serde_json::from_str(d.trim()).unwrap()));
        }
    }
    out
}
