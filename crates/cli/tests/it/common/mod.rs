//! Helpers for end-to-end tests: run the real `horde` binary on loopback with ephemeral ports.
#![allow(dead_code)]

pub mod console;
pub mod webdriver;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn horde() -> Command {
    Command::new(env!("CARGO_BIN_EXE_horde"))
}

pub use horde_testkit::Scratch;

/// A running `horde recv` and the addresses it bound (UDP ones first, then TCP).
pub struct Recv {
    pub child: Child,
    pub addrs: Vec<SocketAddr>,
    stderr: BufReader<std::process::ChildStderr>,
}

impl Recv {
    /// Starts `horde recv` with `args` (use `--udp 0 --tcp 0` for ephemeral ports).
    pub fn start(args: &[&str]) -> Recv {
        let mut child = horde().arg("recv").args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn horde recv");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let list = line.split("listening on ").nth(1).unwrap_or_else(|| panic!("unexpected recv banner: {line}"));
        // "udp 127.0.0.1:9000, tcp 127.0.0.1:9001 (Ctrl-C stops)"
        let addrs = list.split(" (").next().unwrap().split(", ").map(|a| a.split_whitespace().nth(1).unwrap().parse().unwrap()).collect();
        Recv { child, addrs, stderr }
    }

    /// Sends SIGTERM and waits; returns the exit code and the rest of stderr.
    pub fn stop(self) -> (i32, String) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.wait()
    }

    pub fn wait(mut self) -> (i32, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("horde recv did not stop");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.stderr, &mut rest);
        (status.code().unwrap_or(-1), rest)
    }
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run horde")
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Decodes logs through the real binary and returns the JSON analysis.
pub fn decode(logs: &[&Path]) -> serde_json::Value {
    let out = run(horde().arg("decode").args(logs).args(["--quiet", "--json", "-"]));
    assert!(out.status.success(), "decode failed: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// All records of a log, parsed with the wire crate (independently of the decoder).
/// A log's packet records (its endpoint records left out: see [`endpoints`]).
pub fn records(p: &Path) -> Vec<horde_wire::Record> {
    horde_stats::load(&std::fs::read(p).unwrap()).unwrap().records.into_iter().filter(|r| r.kind.is_packet()).collect()
}

/// A log's endpoint records (version 2): which flow went from where to where.
#[allow(dead_code)]
pub fn endpoints(p: &Path) -> Vec<horde_wire::Endpoint> {
    horde_stats::load(&std::fs::read(p).unwrap()).unwrap().records.iter().filter_map(horde_wire::Endpoint::of).collect()
}

/// The progress lines of a `--progress-file` (the stream's other events left out).
#[allow(dead_code)]
pub fn progress_lines(p: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).filter(|l| l["event"] == "progress").collect()
}
