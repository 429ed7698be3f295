//! Issue 47: silent or slow connections cannot lock anyone out of `horde logd` or `/ready`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use horde_agent::logd::{serve, LogdOptions};
use horde_agent::logstream::LogStream;

/// 64 connections that never start TLS, from 16 addresses (four each), held open against the
/// log server's 16 places before the run-key proof. The oldest silent one past its grace makes
/// room, its address penalised: 20 sources in a row prove the key and get in, each within 2 s
/// (before: 1 of 4).
#[test]
fn silent_connections_cannot_lock_log_sources_out() {
    let dir = std::env::temp_dir().join(format!("horde-logd-places-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let key = horde_proto::RunKey::from_bytes([7; 32]);
    let opts = LogdOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        dir: dir.clone(),
        key: key.clone(),
        max_sources: 64,
        max_bytes: 1 << 20,
        duration: Some(Duration::from_secs(60)),
    };
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let server = s.spawn(|| serve(&opts, &stop, move |a| tx.send(a).unwrap(), |_| {}));
        let addr: SocketAddr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let silent_from = |k: u8| {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
            s.bind(&SocketAddr::from(([127, 0, 1, 10 + k % 16], 0)).into()).ok()?;
            s.connect(&addr.into()).ok()?;
            Some(std::net::TcpStream::from(s))
        };
        let mut silent: Vec<std::net::TcpStream> = (0..64).filter_map(silent_from).collect();
        assert_eq!(silent.len(), 64);
        std::thread::sleep(Duration::from_millis(700));
        let mut admitted = 0;
        let mut streams = Vec::new();
        for k in 0..20u8 {
            let t = Instant::now();
            if let Ok(l) = LogStream::connect(addr, &key, horde_wire::Role::Sender, &format!("source{k}")) {
                if t.elapsed() < Duration::from_secs(2) {
                    admitted += 1;
                }
                streams.push(l);
            }
            silent.extend((0..4).filter_map(|j| silent_from(k * 4 + j)));
        }
        assert!(admitted >= 19, "{admitted} of 20 log sources got in within 2 s");
        drop((silent, streams));
        stop.store(true, Ordering::Relaxed);
        let report = server.join().unwrap().unwrap();
        assert!(report.unauthenticated > 0, "the returning silent connections were refused");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 47: 64 slow clients (half a request, then nothing) from 16 addresses against the
/// agent's `/metrics` and `/ready`. The oldest past its grace makes room: 20 readiness probes
/// in a row are answered, each within 2 s (before: 5 of 10 failed, and Kubernetes restarts a
/// healthy agent).
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
        let slow_from = |k: u8| {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
            s.bind(&SocketAddr::from(([127, 0, 1, 10 + k % 16], 0)).into()).ok()?;
            s.connect(&addr.into()).ok()?;
            let mut t = std::net::TcpStream::from(s);
            t.write_all(b"GET /metr").ok()?;
            Some(t)
        };
        let mut slow: Vec<std::net::TcpStream> = (0..64).filter_map(slow_from).collect();
        assert_eq!(slow.len(), 64);
        std::thread::sleep(Duration::from_millis(700));
        let mut ready = 0;
        for k in 0..20u8 {
            let t = Instant::now();
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let _ = c.write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n");
            let mut got = String::new();
            let _ = c.read_to_string(&mut got);
            if got.starts_with("HTTP/1.0 200") && t.elapsed() < Duration::from_secs(2) {
                ready += 1;
            }
            slow.extend((0..4).filter_map(|j| slow_from(k * 4 + j)));
        }
        assert!(ready >= 19, "{ready} of 20 readiness probes answered within 2 s");
        stop.store(true, Ordering::Relaxed);
        drop(slow);
    });
}

/// Issue 47: `horde logd` bounds its totals, not only each log: a source whose log could not
/// fit twice on the disk at its limit is turned away (told the server is busy), nothing written.
#[test]
fn a_log_server_keeps_room_on_its_disk() {
    let dir = std::env::temp_dir().join(format!("horde-logd-room-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let key = horde_proto::RunKey::from_bytes([9; 32]);
    // a log limit no disk here has twice over
    let opts = LogdOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        dir: dir.clone(),
        key: key.clone(),
        max_sources: 4,
        max_bytes: 1 << 60,
        duration: Some(Duration::from_secs(30)),
    };
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let server = s.spawn(|| serve(&opts, &stop, move |a| tx.send(a).unwrap(), |_| {}));
        let addr: SocketAddr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let r = LogStream::connect(addr, &key, horde_wire::Role::Sender, "big");
        let err = format!("{:#}", r.err().expect("turned away"));
        assert!(err.contains("takes no more sources now") && err.contains("room for two logs"), "{err}");
        stop.store(true, Ordering::Relaxed);
        let report = server.join().unwrap().unwrap();
        assert_eq!((report.busy, report.sources.len()), (1, 0));
    });
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing written");
    let _ = std::fs::remove_dir_all(&dir);
}
