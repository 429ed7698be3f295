//! Helpers of the distributed tests: `horde` processes whose standard error is collected line
//! by line, agents on loopback addresses, credentials.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const HORDE: &str = env!("CARGO_BIN_EXE_horde");

/// A scratch directory of the test's own, removed when dropped.
pub fn tmp(name: &str) -> horde_testkit::Scratch {
    horde_testkit::Scratch::new(&format!("dist-{name}"))
}

/// A child whose standard error is collected line by line, with each line's arrival time.
pub struct Proc {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<(Instant, String)>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Proc {
    /// Writes one line to the child's standard input (its `--commands -`).
    pub fn say(&mut self, line: &str) {
        use std::io::Write as _;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    pub fn spawn(args: &[&str]) -> Proc {
        let mut child = Command::new(HORDE).args(args).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (l2, err) = (lines.clone(), child.stderr.take().unwrap());
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                l2.lock().unwrap().push((Instant::now(), line));
            }
        });
        Proc { child, lines, reader }
    }

    pub fn wait_line(&self, needle: &str, within: Duration) -> (Instant, String) {
        let t = Instant::now();
        loop {
            if let Some(l) = self.lines.lock().unwrap().iter().find(|l| l.1.contains(needle)) {
                return l.clone();
            }
            assert!(t.elapsed() < within, "no `{needle}` within {within:?}: {:#?}", self.lines.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn text(&self) -> String {
        self.lines.lock().unwrap().iter().map(|l| l.1.clone() + "\n").collect()
    }

    pub fn wait(&mut self, within: Duration) -> i32 {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                // what it wrote last is read before anyone asks for its text (bounded: a
                // process it left behind may hold the pipe)
                let read_by = Instant::now() + Duration::from_secs(2);
                while !self.reader.is_finished() && Instant::now() < read_by {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return s.code().unwrap_or(-1);
            }
            assert!(t.elapsed() < within, "did not exit within {within:?}: {}", self.text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn agent(d: &Path, creds: &Path, ip: &str, name: &str, metrics: bool) -> (Proc, SocketAddr, Option<SocketAddr>) {
    let dir = d.join(name);
    let listen = format!("{ip}:0");
    let m = format!("{ip}:0");
    let mut args = vec!["agent", "--listen", &listen, "--credentials", creds.to_str().unwrap(), "--dir", dir.to_str().unwrap(), "--name", name];
    if metrics {
        args.extend(["--metrics", &m]);
    }
    let p = Proc::spawn(&args);
    let (_, line) = p.wait_line(" listening on ", Duration::from_secs(10));
    let addr = line.split(" listening on ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let maddr = metrics.then(|| {
        let (_, l) = p.wait_line("metrics on http://", Duration::from_secs(5));
        l.split("http://").nth(1).unwrap().split('/').next().unwrap().parse().unwrap()
    });
    (p, addr, maddr)
}

pub fn keygen(d: &Path) -> PathBuf {
    let creds = d.join("creds");
    let s = Command::new(HORDE).args(["agent", "keygen", "--out", creds.to_str().unwrap()]).output().unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    creds
}
