//! Issue 47: silent or slow connections cannot lock anyone out of `horde logd` or `/ready`, and
//! a log server bounds its totals.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use horde_agent::logd::{serve, LogdOptions, LogdReport};
use horde_agent::logstream::LogStream;
use horde_testkit::crowd;

/// A log server in a thread with `key` and `max_bytes` per log, `f` given its address; then
/// stopped, its report returned.
fn with_logd(name: &str, key: &horde_proto::RunKey, max_bytes: u64, f: impl FnOnce(SocketAddr)) -> (LogdReport, usize) {
    with_logd_capped(name, key, max_bytes, horde_agent::logd::MAX_LOGS, f)
}

/// [`with_logd`] writing at most `max_logs` logs.
fn with_logd_capped(name: &str, key: &horde_proto::RunKey, max_bytes: u64, max_logs: usize, f: impl FnOnce(SocketAddr)) -> (LogdReport, usize) {
    let dir = std::env::temp_dir().join(format!("horde-logd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = LogdOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        dir: dir.clone(),
        key: key.clone(),
        max_sources: 64,
        max_bytes,
        duration: Some(Duration::from_secs(60)),
        exempt: Vec::new(),
        max_logs,
    };
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    let report = std::thread::scope(|s| {
        let server = s.spawn(|| serve(&opts, &stop, move |a| tx.send(a).unwrap(), |_| {}));
        let stopper = StopOnDrop(&stop);
        f(rx.recv_timeout(Duration::from_secs(10)).unwrap());
        drop(stopper);
        server.join().unwrap().unwrap()
    });
    let files = std::fs::read_dir(&dir).map_or(0, |d| d.count());
    let _ = std::fs::remove_dir_all(&dir);
    (report, files)
}

/// Stops the server also when the test's closure panics (the scope would wait for it).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// 64 connections of the crowd (after `first`) held open against `addr`, then 20 tries of
/// `legit` while the crowd reconnects four at a time after each: how many got in within 2 s.
fn under_siege(addr: SocketAddr, first: &[u8], mut legit: impl FnMut(u8) -> bool) -> u32 {
    let mut held: Vec<std::net::TcpStream> = (0..64).filter_map(|k| crowd(addr, k, first)).collect();
    assert_eq!(held.len(), 64);
    std::thread::sleep(Duration::from_millis(700));
    let mut within = 0;
    for k in 0..20u8 {
        let t = Instant::now();
        if legit(k) && t.elapsed() < Duration::from_secs(2) {
            within += 1;
        }
        held.extend((0..4).filter_map(|j| crowd(addr, k * 4 + j, first)));
    }
    within
}

/// 64 connections that never start TLS, from 16 addresses (four each), held open against the
/// log server's 16 places before the run-key proof. The oldest silent one past its grace makes
/// room, its address penalised: 20 sources in a row prove the key and get in, each within 2 s
/// (before: 1 of 4).
#[test]
fn silent_connections_cannot_lock_log_sources_out() {
    let key = horde_proto::RunKey::from_bytes([7; 32]);
    let mut streams = Vec::new();
    let (report, _) = with_logd("places", &key, 1 << 20, |addr| {
        let within =
            under_siege(addr, b"", |k| LogStream::connect(addr, &key, horde_wire::Role::Sender, &format!("source{k}")).map(|l| streams.push(l)).is_ok());
        assert!(within >= 19, "{within} of 20 log sources got in within 2 s");
        streams.clear();
    });
    assert!(report.unauthenticated > 0, "the returning silent connections were refused");
}

/// 64 slow clients (half a request, then nothing) from 16 addresses against the agent's
/// `/metrics` and `/ready`. The oldest past its grace makes room: 20 readiness probes in a row
/// are answered, each within 2 s (before: 5 of 10 failed, and Kubernetes restarts a healthy
/// agent).
#[test]
fn slow_clients_cannot_fail_the_readiness_probe() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    let m = horde_agent::metrics::Metrics::default();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| horde_agent::metrics::serve(l, &m, &stop));
        let _stop = StopOnDrop(&stop);
        let ready = under_siege(addr, b"GET /metr", |_| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let _ = c.write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n");
            let mut got = String::new();
            let _ = c.read_to_string(&mut got);
            got.starts_with("HTTP/1.0 200")
        });
        assert!(ready >= 19, "{ready} of 20 readiness probes answered within 2 s");
    });
}

/// `horde logd` bounds its totals, not only each log: it does not start where its disk could
/// not hold two logs at their limit (the same check turns a source away at admission when the
/// disk fills during a run), and writes nothing.
#[test]
fn a_log_server_keeps_room_on_its_disk() {
    let key = horde_proto::RunKey::from_bytes([9; 32]);
    let dir = std::env::temp_dir().join(format!("horde-logd-room-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // a log limit no disk here has twice over
    let opts = LogdOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        dir: dir.clone(),
        key,
        max_sources: 64,
        max_bytes: 1 << 60,
        duration: Some(Duration::from_secs(60)),
        exempt: Vec::new(),
        max_logs: horde_agent::logd::MAX_LOGS,
    };
    let err = format!("{:#}", serve(&opts, &AtomicBool::new(false), |_| panic!("it must not listen"), |_| {}).expect_err("refused"));
    assert!(err.contains("less than room for two logs") && err.contains("lower --max-log-mib"), "{err}");
    let files = std::fs::read_dir(&dir).map_or(0, |d| d.count());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(files, 0, "nothing written");
}

/// Issue 66 (Low): the cap on a server run's logs counted every source admitted, so key holders
/// that wrote nothing used it up. With room for 2 logs, 4 sources that prove the key and leave
/// without writing a byte, one after the other, then a real one: it gets in and its log is the
/// only file (before: the third was turned away as full).
#[test]
fn sources_that_wrote_nothing_do_not_use_up_the_log_cap() {
    use horde_engine::logger::LogTap;
    let key = horde_proto::RunKey::from_bytes([5; 32]);
    let connect = |addr: SocketAddr, name: &str| {
        // the server ends the last one's thread a moment after it left
        let t = Instant::now();
        loop {
            match LogStream::connect(addr, &key, horde_wire::Role::Sender, name) {
                Ok(l) => return l,
                Err(e) if t.elapsed() > Duration::from_secs(3) => panic!("{name}: {e:#}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    };
    let (report, files) = with_logd_capped("cap", &key, 1 << 20, 2, |addr| {
        for k in 0..4 {
            drop(connect(addr, &format!("empty{k}")));
        }
        let mut real = Box::new(connect(addr, "real"));
        let mut header = [0u8; horde_wire::LOG_HEADER_LEN];
        horde_wire::LogHeader { role: horde_wire::Role::Sender, start_ns: 1 }.emit(&mut header);
        real.header(&header);
        real.records(&[0u8; horde_wire::RECORD_LEN]);
        let _ = real.finish();
    });
    assert_eq!(files, 1, "{report:?}");
    assert_eq!(report.full, 0, "nobody turned away as full: {report:?}");
}
