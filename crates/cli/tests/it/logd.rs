//! The live log server (`horde logd`, `send`/`recv --log-server`) on loopback: logs arrive while
//! the run goes on and equal the local logs record for record; a SIGKILLed sender's records up
//! to its death are there, followed by the gap record `decode` reports; and a source or server
//! without the run key gets nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// A running `horde logd` on an ephemeral port.
struct Logd {
    child: Child,
    addr: SocketAddr,
}

impl Logd {
    fn start(dir: &Path, key: &Path, extra: &[&str]) -> Logd {
        let mut child = horde()
            .args(["logd", "--listen", "127.0.0.1:0", "--key-file"])
            .arg(key)
            .arg("--dir")
            .arg(dir)
            // The server keeps room for two logs at their limit: 64 MiB keeps the tests off
            // the machine's free disk (the default, 4 GiB a log, needs 8 GiB free).
            .args(["--max-log-mib", "64"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.as_mut().unwrap()).read_line(&mut line).unwrap();
        let addr = line.split("listening on ").nth(1).and_then(|r| r.split(',').next()).unwrap_or_else(|| panic!("logd banner: {line}")).parse().unwrap();
        Logd { child, addr }
    }

    /// SIGTERM, then everything it printed.
    fn stop(mut self) -> String {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut rest = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut rest).unwrap();
        let _ = self.child.wait();
        rest
    }
}

fn make_key(s: &Scratch, name: &str) -> std::path::PathBuf {
    let k = s.path(name);
    let o = horde().args(["key", "--out"]).arg(&k).output().unwrap();
    assert!(o.status.success());
    k
}

fn body(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()[32..].to_vec()
}

fn records_in(p: &Path) -> usize {
    std::fs::metadata(p).map(|m| (m.len() as usize).saturating_sub(32) / 40).unwrap_or(0)
}

#[test]
fn sender_and_receiver_stream_during_the_run_and_the_logs_equal_their_own() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // a 1,000 pkt/s sender spinning on a core, every departure counted
    let s = Scratch::new("logd-run");
    let key = make_key(&s, "run.key");
    let dir = s.path("logs");
    let logd = Logd::start(&dir, &key, &[]);
    let server = logd.addr.to_string();
    let k = key.to_str().unwrap();
    let rlog = s.path("r.log");
    let recv = Recv::start(&["--udp", "0", "--tcp", "0", "--key-file", k, "--log-server", &server, "--log-name", "rx", "-l", rlog.to_str().unwrap()]);
    let dst = recv.addrs[0].to_string();
    let slog = s.path("s.log");
    let mut send = horde()
        .args(["send", "--dst", &dst, "-C", "1000", "-c", "64", "-t", "4s", "--key-file", k, "--log-server", &server, "--log-name", "tx", "-l"])
        .arg(&slog)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // During the run: both logs are at the server and growing.
    std::thread::sleep(Duration::from_millis(2500));
    let (tx_mid, rx_mid) = (records_in(&dir.join("tx.log")), records_in(&dir.join("rx.log")));
    assert!(tx_mid >= 500 && rx_mid >= 500, "records at the log server 2.5 s into a 4-s run: sender {tx_mid}, receiver {rx_mid}");
    let mut err = String::new();
    send.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(send.wait().unwrap().success(), "{err}");
    // Every record of the sender's own log reached the server (4,000 packets and 2 endpoint
    // records, or one packet fewer when a loaded machine left the last departure due at the end).
    let own = err.split("log: ").nth(1).and_then(|l| l.split(" (").nth(1)).and_then(|l| l.split(' ').next()).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    assert!((4000..=4002).contains(&own), "{err}");
    assert!(err.contains(&format!("log server: {own} record(s) streamed to")) && err.contains(&format!("as tx.log, {own} written there")), "{err}");
    let (_, rerr) = recv.stop();
    assert!(rerr.contains("as rx.log"), "{rerr}");
    let out = logd.stop();
    assert!(out.contains("tx (sender from") && out.contains("ended by the source"), "{out}");
    // Byte for byte the local logs (after the 32-byte header).
    assert_eq!(body(&dir.join("tx.log")), body(&slog));
    assert_eq!(body(&dir.join("rx.log")), body(&rlog));
    assert!(records_in(&dir.join("tx.log")) > tx_mid);
    // The streamed pair decodes as the local pair does: every packet sent, 0 lost.
    let j = s.path("d.json");
    let o = horde().arg("decode").arg(dir.join("tx.log")).arg(dir.join("rx.log")).arg("--json").arg(&j).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(v["total"]["packets"], own - 2, "{v}");
    assert_eq!(v["total"]["loss"]["lost"], 0, "{v}");
    assert_eq!(v["gaps"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_killed_senders_records_up_to_its_death_are_at_the_server_and_the_gap_is_marked() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let s = Scratch::new("logd-kill");
    let key = make_key(&s, "run.key");
    let dir = s.path("logs");
    let logd = Logd::start(&dir, &key, &[]);
    let server = logd.addr.to_string();
    let k = key.to_str().unwrap();
    let recv = Recv::start(&["--udp", "0", "--tcp", "0", "--key-file", k]);
    let slog = s.path("s.log");
    let mut send = horde()
        .args([
            "send",
            "--dst",
            &recv.addrs[0].to_string(),
            "-C",
            "1000",
            "-c",
            "64",
            "-t",
            "20s",
            "--key-file",
            k,
            "--log-server",
            &server,
            "--log-name",
            "victim",
        ])
        .arg("-l")
        .arg(&slog)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3000));
    send.kill().unwrap();
    send.wait().unwrap();
    // The server notices the lost connection at once and writes its gap record.
    let log = dir.join("victim.log");
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) && !std::fs::read(&log).map(|b| b.len() > 40 && b[b.len() - 2] == 6).unwrap_or(false) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = recv.stop();
    let out = logd.stop();
    assert!(out.contains("victim (sender from") && out.contains("the source was lost"), "{out}");
    let local = body(&slog);
    let remote = body(&log);
    let (last, streamed) = remote.split_at(remote.len() - 40);
    let gap = horde_wire::Record::parse(streamed).unwrap();
    assert_eq!(horde_wire::log::Gap::of(&gap).map(|g| g.reason), Some(horde_wire::log::GapReason::Lost));
    // Everything the sender had written by its death, but what was in flight: the local log and
    // the stream are fed from the same batches, handed over at least every second.
    assert_eq!(last, &local[..last.len()], "the server's records are the sender's, in order");
    let (n_local, n_remote) = (local.len() / 40, last.len() / 40);
    assert!(n_remote >= 1500, "a 1000 pkt/s sender killed after 3 s: {n_remote} records at the server");
    assert!(n_local - n_remote <= 1100, "at most the last second's records missing: local {n_local}, server {n_remote}");
    let o = horde().arg("decode").arg(&log).output().unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("gap: log 1 is missing what followed") && text.contains("the source was lost"), "{text}");
}

#[test]
fn nothing_flows_without_the_run_key_either_way() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let s = Scratch::new("logd-keys");
    let key = make_key(&s, "run.key");
    let other = make_key(&s, "other.key");
    let dir = s.path("logs");
    // No key: the server will not start.
    let o = horde().args(["logd", "--listen", "127.0.0.1:0", "--dir"]).arg(&dir).env_remove("HORDE_KEY_FILE").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("horde key --out"), "{}", String::from_utf8_lossy(&o.stderr));
    // No disk holds two logs of 16 TiB: the server will not start, and says which flag to lower.
    let o = horde().args(["logd", "--listen", "127.0.0.1:0", "--max-log-mib", "16777216", "--dir"]).arg(&dir).arg("--key-file").arg(&key).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("less than room for two logs at --max-log-mib 16777216") && err.contains("lower --max-log-mib"), "{err}");
    let logd = Logd::start(&dir, &key, &["--max-sources", "1"]);
    let server = logd.addr.to_string();
    let recv = Recv::start(&["--udp", "0", "--tcp", "0", "--key-file", key.to_str().unwrap()]);
    let dst = recv.addrs[0].to_string();
    let send = |key: Option<&Path>, extra: &[&str]| {
        let mut c = horde();
        c.args(["send", "--dst", &dst, "-C", "10", "-c", "64", "-t", "1s", "--log-server", &server]).args(extra);
        if let Some(k) = key {
            c.arg("--key-file").arg(k);
        }
        c.env_remove("HORDE_KEY_FILE").output().unwrap()
    };
    // A source without a key, or with another one, is refused before its first packet.
    let o = send(None, &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--log-server needs the run key"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = send(Some(&other), &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("same run key"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = send(Some(&key), &["--log-name", "../escape"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--log-name"), "{}", String::from_utf8_lossy(&o.stderr));
    // Bytes that are not TLS, and a TLS-less silent connection: closed, the server goes on.
    let mut junk = TcpStream::connect(logd.addr).unwrap();
    junk.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let _idle = TcpStream::connect(logd.addr).unwrap();
    // A right key still gets in (the junk did not use up --max-sources 1).
    let o = send(Some(&key), &["--log-name", "ok"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("as ok.log"), "{}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(Duration::from_millis(5500));
    let out = logd.stop();
    assert!(out.contains("1 source(s)") && out.contains("closed without a valid proof of the run key"), "{out}");
    let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["ok.log".to_string()], "only the admitted source has a log");
    // A "log server" that does not hold the key gets nothing: the source checks its proof first.
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_addr = fake.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (mut c, _) = fake.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        got.len()
    });
    let o = horde().args(["send", "--dst", &dst, "-C", "10", "-c", "64", "-t", "1s", "--log-server", &fake_addr, "--key-file"]).arg(&key).output().unwrap();
    assert!(!o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("log server"), "{}", String::from_utf8_lossy(&o.stderr));
    // It saw a TLS ClientHello and nothing after it (no records, no proof it could use).
    assert!(t.join().unwrap() < 2048);
    let _ = recv.stop();
}
