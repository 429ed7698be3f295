//! `--idle` counts a TCP connection accepted as an arrival: a sender whose connects wait for
//! their SYN to be retried (10,000 connects at once overflow a listener's queue of 4,096, and
//! a dropped SYN is retried after a second) must not find the receiver gone before its first
//! packet. Found by bench/engine.sh's 10,000 TCP flows: the receiver stopped after 3 s without a
//! packet while 459 connects were still being retried, which then met a closed port.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use horde_engine::receiver::{self, RecvOptions};

#[test]
fn connections_arriving_keep_an_idle_receiver_running() {
    let stop = Arc::new(AtomicBool::new(false));
    let idle = Duration::from_secs(1);
    let opts = RecvOptions { tcp: vec!["127.0.0.1:0".parse().unwrap()], idle: Some(idle), ..Default::default() };
    let (tx, ended) = mpsc::channel();
    let r = receiver::spawn(opts, stop.clone(), None, "recv-idle".into(), Duration::from_secs(10), move |x| drop(tx.send(x))).unwrap();
    let to = r.bound[0];
    // a connection every 200 ms for 1.6 s, longer than the idle time, none sending a byte
    let mut held = Vec::new();
    let start = Instant::now();
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(200));
        assert!(!r.handle.is_finished(), "the receiver stopped {:?} after its start while connections kept arriving", start.elapsed());
        held.push(TcpStream::connect(to).expect("the receiver still listens"));
    }
    // nothing more arrives: it stops by itself, an idle time after the last connection
    let last = Instant::now();
    while !r.handle.is_finished() {
        assert!(last.elapsed() < Duration::from_secs(10), "the receiver did not stop 10 s after the last arrival");
        std::thread::sleep(Duration::from_millis(20));
    }
    // (the receiver may have taken the connection a moment before `last`)
    assert!(last.elapsed() >= idle / 2, "stopped {:?} after the last connection, well before its idle time", last.elapsed());
    stop.store(true, Ordering::Relaxed);
    r.handle.join().unwrap();
    let report = ended.recv().unwrap().unwrap();
    assert_eq!(report.tcp_connections, 8);
    drop(held);
}
