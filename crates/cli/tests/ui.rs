//! The live console's API without a browser (issue 23): the token, Host and Origin guard every
//! request; a scenario starts from the API with `horde run`'s checks and messages; its event
//! stream is the `--progress json` type, numbered, and resumes after a reconnect without a gap;
//! commands reach the run (bad ones refused as the CLI refuses them); a stop gives a partial
//! report that the console serves and lists with its verdicts.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

struct Console {
    child: Child,
    addr: SocketAddr,
    token: String,
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn console(runs: &std::path::Path) -> Console {
    let mut child =
        horde().args(["ui", "--listen", "127.0.0.1:0", "--runs", runs.to_str().unwrap()]).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
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

struct Reply {
    status: u16,
    head: String,
    body: String,
}

/// One HTTP/1.1 request with `headers` (the Host header is the console's unless given).
fn http(c: &Console, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
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

fn authed(c: &Console, method: &str, path: &str, body: &str) -> Reply {
    let bearer = format!("Bearer {}", c.token);
    http(c, method, path, &[("Authorization", &bearer), ("Content-Type", "application/json")], body)
}

/// Reads server-sent events from `path` until `enough` says so (or `limit`): (id, data) pairs.
fn sse(
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

#[test]
fn requests_without_the_token_or_from_elsewhere_are_refused() {
    let dir = Scratch::new("ui-guard");
    let c = console(&dir.path("runs"));
    assert_eq!(http(&c, "GET", "/api/v1/runs", &[], "").status, 401, "no token");
    assert_eq!(http(&c, "GET", "/api/v1/runs", &[("Authorization", "Bearer 0000")], "").status, 401, "a wrong token");
    assert_eq!(http(&c, "GET", "/api/v1/runs/1/events", &[], "").status, 401, "the event stream too");
    let bearer = format!("Bearer {}", c.token);
    let r = http(&c, "GET", "/api/v1/runs", &[("Authorization", &bearer), ("Host", "attacker.example:7070")], "");
    assert_eq!(r.status, 403, "DNS rebinding: {}", r.body);
    let r = http(&c, "POST", "/api/v1/runs/1/commands", &[("Authorization", &bearer), ("Origin", "http://attacker.example")], r#"{"command":"stop"}"#);
    assert_eq!(r.status, 403, "another site's page: {}", r.body);
    assert!(r.body.contains("another site"), "{}", r.body);
    // The printed URL sets the cookie and drops the token from the address; the cookie opens the page.
    let r = http(&c, "GET", &format!("/?token={}", c.token), &[], "");
    assert_eq!(r.status, 303);
    assert!(r.head.contains("HttpOnly") && r.head.contains("SameSite=Strict"), "{}", r.head);
    let cookie = format!("horde_ui={}", c.token);
    let r = http(&c, "GET", "/", &[("Cookie", &cookie)], "");
    assert!(r.status == 200 && r.body.contains("Horde console") && r.head.contains("frame-ancestors 'none'"), "{} {}", r.status, r.head);
    assert_eq!(http(&c, "GET", "/assets/uplot.js", &[("Cookie", &cookie)], "").status, 200, "the libraries are inside the binary");
    let big = "x".repeat(200 * 1024);
    assert_eq!(authed(&c, "POST", "/api/v1/runs", &big).status, 413, "bounded bodies");
    let doc: serde_json::Value = serde_json::from_str(&authed(&c, "GET", "/api/v1/openapi.json", "").body).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
}

/// Acceptance (API): start, watch, resume, steer, stop, report, past runs.
#[test]
fn a_scenario_started_from_the_api_streams_takes_commands_and_reports() {
    let dir = Scratch::new("ui-run");
    let runs = dir.path("runs");
    let c = console(&runs);
    let sc = dir.path("wow.toml");
    std::fs::write(&sc, "service = 'wow'\nplayers = 200\nonline = 100\nduration = '20s'\nseed = 5\njoin = 'uniform(0, 1)'\nspin_us = 0\n").unwrap();
    let start = |body: String| authed(&c, "POST", "/api/v1/runs", &body);
    let r = start(r#"{"scenario": "/nonexistent/x.toml"}"#.into());
    assert!(r.status == 400 && r.body.contains("/nonexistent/x.toml"), "{} {}", r.status, r.body);
    let r = start(format!(r#"{{"scenario": "{}", "online": 500}}"#, sc.display()));
    assert!(r.status == 400 && r.body.contains("more than the run's 200 players"), "the CLI's message: {}", r.body);
    let r = start(format!(r#"{{"scenario": "{}", "colour": 1}}"#, sc.display()));
    assert!(r.status == 400 && r.body.contains("colour"), "an unknown field is named: {}", r.body);
    let r = start(format!(r#"{{"scenario": "{}"}}"#, sc.display()));
    assert_eq!(r.status, 201, "{}", r.body);
    let info: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let id = info["id"].as_u64().unwrap();
    let events = format!("/api/v1/runs/{id}/events");
    // Watch until 3 progress lines, then drop the stream.
    let progress = |v: &[(u64, serde_json::Value)]| v.iter().filter(|e| e.1["event"] == "progress").count();
    let first = sse(&c, &events, None, Duration::from_secs(30), |v| progress(v) >= 3);
    assert!(progress(&first) >= 3, "{first:?}");
    assert!(first.iter().any(|e| e.1["event"] == "planned"), "the plan is a line of the stream");
    for w in first.windows(2) {
        assert_eq!(w[1].0, w[0].0 + 1, "numbered without gaps");
    }
    // Commands: refused as the CLI refuses them, or passed on.
    let cmd = |body: &str| authed(&c, "POST", &format!("/api/v1/runs/{id}/commands"), body);
    let r = cmd(r#"{"command":"dance"}"#);
    assert!(r.status == 400 && r.body.contains("a command is one JSON object per line"), "{}", r.body);
    let r = cmd(r#"{"command":"players","online":0}"#);
    assert!(r.status == 400 && r.body.contains("online must be"), "{}", r.body);
    assert_eq!(cmd(r#"{"command":"players","online":200}"#).status, 202);
    assert_eq!(authed(&c, "POST", "/api/v1/runs/99/commands", r#"{"command":"stop"}"#).status, 404);
    // Reconnect after a gap: every line after the last one seen, none lost.
    std::thread::sleep(Duration::from_secs(3));
    let last = first.last().unwrap().0;
    let online = |e: &serde_json::Value| e["progress"]["categories"].as_array().map(|a| a.iter().map(|c| c[1].as_u64().unwrap()).sum::<u64>());
    let second = sse(&c, &events, Some(last), Duration::from_secs(20), |v| v.iter().any(|e| online(&e.1) == Some(200)));
    assert_eq!(second[0].0, last + 1, "resumes right after the last line seen");
    assert!(
        second.iter().any(|e| online(&e.1) == Some(200)),
        "the players online follow the command: {:?}",
        second.iter().filter_map(|e| online(&e.1)).collect::<Vec<_>>()
    );
    assert!(second.iter().any(|e| e.1["event"] == "note" && e.1["text"].as_str().unwrap_or("").contains("200")), "the change is a note");
    assert_eq!(cmd(r#"{"command":"stop"}"#).status, 202);
    let end = sse(&c, &events, Some(second.last().unwrap().0), Duration::from_secs(60), |v| v.iter().any(|e| e.1["event"] == "finished"));
    let fin = end.iter().find(|e| e.1["event"] == "finished").expect("a finished line");
    assert_eq!(fin.1["exit"], 130, "stopped: {fin:?}");
    assert_eq!(cmd(r#"{"command":"stop"}"#).status, 409, "a finished run takes no commands");
    let r = authed(&c, "GET", &format!("/api/v1/runs/{id}/report/index.html"), "");
    assert!(r.status == 200 && r.body.contains("stopped"), "the partial report says so: {}", r.status);
    assert_eq!(authed(&c, "GET", &format!("/api/v1/runs/{id}/report/../../etc/passwd"), "").status, 404);
    let past: serde_json::Value = serde_json::from_str(&authed(&c, "GET", "/api/v1/past", "").body).unwrap();
    let row = past.as_array().unwrap().iter().find(|p| p["dir"].as_str().unwrap().contains("wow-")).expect("the run is a past run");
    assert!(row["interrupted"] == true && !row["verdicts"].as_array().unwrap().is_empty(), "{row}");
}
