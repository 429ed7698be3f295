//! Just enough of the W3C WebDriver protocol to drive Debian's chromium through its
//! `chromedriver` from a test: sessions, navigation, elements, clicks, typing, pointer actions
//! (drags), scripts and screenshots. Plain HTTP/1.1 to the driver on loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The chromium and chromedriver binaries, if both are installed.
pub fn browser() -> Option<(String, String)> {
    let found = |names: &[&str]| names.iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success())).map(|s| s.to_string());
    let chromium = found(&["chromium", "chromium-browser", "google-chrome"])?;
    let driver = found(&["chromedriver"])?;
    let bin = Command::new("sh").args(["-c", &format!("command -v {chromium}")]).output().ok()?;
    Some((String::from_utf8_lossy(&bin.stdout).trim().to_string(), driver))
}

pub struct Driver {
    child: Child,
    addr: SocketAddr,
    session: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = call(self.addr, "DELETE", &format!("/session/{}", self.session), None);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    // Read the head, then exactly Content-Length bytes (the driver may keep the connection).
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the driver closed the connection".into());
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let len = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case("content-length")).and_then(|(_, v)| v.trim().parse::<usize>().ok()))
        .ok_or("no Content-Length")?;
    while raw.len() < head_end + 4 + len {
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let rest = String::from_utf8_lossy(&raw[head_end + 4..]).into_owned();
    let rest = rest.as_str();
    let v: Value = serde_json::from_str(rest).map_err(|e| format!("{e}: {rest}"))?;
    let status = head.split(' ').nth(1).unwrap_or("0");
    if status != "200" {
        return Err(format!("{method} {path}: {status} {}", v["value"]["message"]));
    }
    Ok(v["value"].clone())
}

impl Driver {
    /// Starts chromedriver and a headless chromium session.
    pub fn start(chromium: &str, chromedriver: &str, profile: &std::path::Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(chromedriver).arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let t = Instant::now();
        while !call(addr, "GET", "/status", None).is_ok_and(|v| v["ready"] == true) {
            assert!(t.elapsed() < Duration::from_secs(20), "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({ "capabilities": { "alwaysMatch": { "browserName": "chrome", "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1600,1000", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     format!("--user-data-dir={}", profile.display())] },
            "goog:loggingPrefs": { "browser": "ALL" } } } });
        let v = call(addr, "POST", "/session", Some(&caps)).unwrap();
        let session = v["sessionId"].as_str().unwrap().to_string();
        let mut d = Driver { child, addr, session: String::new() };
        d.session = session;
        d
    }

    fn post(&self, path: &str, body: Value) -> Result<Value, String> {
        call(self.addr, "POST", &format!("/session/{}{path}", self.session), Some(&body))
    }

    pub fn go(&self, url: &str) {
        self.post("/url", json!({ "url": url })).unwrap();
    }

    /// The element `css` selects, waiting up to 10 s for it.
    pub fn find(&self, css: &str) -> String {
        let t = Instant::now();
        loop {
            match self.post("/element", json!({ "using": "css selector", "value": css })) {
                Ok(v) => return v[ELEMENT].as_str().unwrap().to_string(),
                Err(e) if t.elapsed() > Duration::from_secs(10) => panic!("{css}: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    pub fn click(&self, css: &str) {
        let e = self.find(css);
        self.post(&format!("/element/{e}/click"), json!({})).unwrap_or_else(|m| panic!("click {css}: {m}"));
    }

    /// Replaces the text of the input `css` selects.
    pub fn fill(&self, css: &str, text: &str) {
        let e = self.find(css);
        self.post(&format!("/element/{e}/clear"), json!({})).unwrap();
        self.post(&format!("/element/{e}/value"), json!({ "text": text })).unwrap();
    }

    /// Runs `script` (a function body; `arguments` are `args`) and returns its value.
    pub fn js(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({ "script": script, "args": args })).unwrap_or_else(|m| panic!("{script}: {m}"))
    }

    /// Waits up to `limit` for `script` to return true.
    pub fn wait_for(&self, what: &str, script: &str, limit: Duration) {
        let t = Instant::now();
        while self.js(script, json!([])) != json!(true) {
            if t.elapsed() > limit {
                let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("webdriver-failure.png");
                self.screenshot(&shot);
                let text = self.js("return document.body.innerText.slice(0, 4000);", json!([]));
                panic!(
                    "waited {limit:?} for {what}; the page ({}) says:\n{}\nconsole errors: {:?}",
                    shot.display(),
                    text.as_str().unwrap_or(""),
                    self.errors()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Presses the mouse at viewport point `from`, moves to `to` in steps, releases.
    pub fn drag(&self, from: (f64, f64), to: (f64, f64)) {
        let mv =
            |p: (f64, f64), ms: u64| json!({ "type": "pointerMove", "duration": ms, "x": p.0.round() as i64, "y": p.1.round() as i64, "origin": "viewport" });
        let mid = ((from.0 + to.0) / 2.0, (from.1 + to.1) / 2.0);
        let actions = json!({ "actions": [{ "type": "pointer", "id": "mouse", "parameters": { "pointerType": "mouse" }, "actions": [
            mv(from, 0), { "type": "pointerDown", "button": 0 }, { "type": "pause", "duration": 50 }, mv(mid, 100), mv(to, 100), { "type": "pause", "duration": 50 }, { "type": "pointerUp", "button": 0 }
        ] }] });
        self.post("/actions", actions).unwrap();
        let _ = call(self.addr, "DELETE", &format!("/session/{}/actions", self.session), None);
    }

    /// Clicks viewport point `at`.
    pub fn click_at(&self, at: (f64, f64)) {
        let actions = json!({ "actions": [{ "type": "pointer", "id": "mouse", "parameters": { "pointerType": "mouse" }, "actions": [
            { "type": "pointerMove", "duration": 0, "x": at.0.round() as i64, "y": at.1.round() as i64, "origin": "viewport" },
            { "type": "pointerDown", "button": 0 }, { "type": "pointerUp", "button": 0 }
        ] }] });
        self.post("/actions", actions).unwrap();
        let _ = call(self.addr, "DELETE", &format!("/session/{}/actions", self.session), None);
    }

    /// The page's console messages of level SEVERE (errors) since the last call.
    pub fn errors(&self) -> Vec<String> {
        let v = self.post("/se/log", json!({ "type": "browser" })).unwrap_or(Value::Null);
        v.as_array().map(|a| a.iter().filter(|e| e["level"] == "SEVERE").map(|e| e["message"].to_string()).collect()).unwrap_or_default()
    }

    /// A PNG of the window, written to `path`.
    pub fn screenshot(&self, path: &std::path::Path) {
        let v = call(self.addr, "GET", &format!("/session/{}/screenshot", self.session), None).unwrap();
        std::fs::write(path, base64_decode(v.as_str().unwrap())).unwrap();
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let v: Vec<u32> = chunk.iter().map(|c| val(*c) as u32).collect();
        let n = v.iter().enumerate().fold(0u32, |acc, (i, x)| acc | (x << (18 - 6 * i)));
        for k in 0..chunk.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * k)) as u8);
        }
    }
    out
}
