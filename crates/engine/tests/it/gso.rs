//! GSO and GRO (issue 50): UDP departures of one flow that are due together leave as GSO
//! super-datagrams and a receiver takes them whole (`UDP_GRO`) and cuts them apart; the records
//! must be exactly those of a plain run — the same sequence numbers and sizes on both sides,
//! every datagram its own record — and a receiver without GRO must read a GSO sender's traffic
//! as it reads anyone's.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use horde_engine::receiver::{self, RecvOptions};
use horde_engine::sender;
use horde_engine::SendOptions;
use horde_model::flow::RawFlow;
use horde_model::Flow;
use horde_testkit::Scratch;
use horde_wire::log::{read_all, Record, RecordKind};

/// Bulk UDP of `packets` datagrams of `size` bytes: as fast as the path takes them, so that
/// many are due at every turn.
fn flow(dst: SocketAddr, packets: u32, size: u32) -> Flow {
    let raw = RawFlow {
        dst: Some(dst.to_string()),
        size: Some(size.to_string().as_str().into()),
        packets: Some(packets.to_string().as_str().into()),
        bulk: Some(true),
        seed: Some(7),
        ..Default::default()
    };
    raw.resolve(0, 1, "gso").unwrap()
}

fn records(p: &std::path::Path, kind: RecordKind) -> Vec<Record> {
    let bytes = std::fs::read(p).unwrap();
    let (_, it) = read_all(&bytes).unwrap();
    it.map(Result::unwrap).filter(|r| r.kind == kind).collect()
}

/// One run: (the sender's records, the receiver's).
fn run(dir: &Scratch, name: &str, gso: horde_model::gso::Gso, gro: bool, packets: u32, size: u32) -> (Vec<Record>, Vec<Record>) {
    let (send_log, recv_log) = (dir.path(&format!("{name}-send.hlog")), dir.path(&format!("{name}-recv.hlog")));
    let stop = Arc::new(AtomicBool::new(false));
    let ropts = RecvOptions { udp: vec!["127.0.0.1:0".parse().unwrap()], log: Some(recv_log.clone()), gro, ..Default::default() };
    let (tx, ended) = mpsc::channel();
    let r = receiver::spawn(ropts, stop.clone(), None, format!("recv-{name}"), Duration::from_secs(10), move |x| drop(tx.send(x))).unwrap();
    let opts =
        SendOptions { log: Some(send_log.clone()), gso, end_messages: true, linger: Duration::from_millis(300), floor: Duration::ZERO, ..Default::default() };
    let sent = sender::run(vec![flow(r.bound[0], packets, size)], &opts, &AtomicBool::new(false)).unwrap();
    assert_eq!(sent.packets, packets as u64, "{name}: every datagram left");
    // what is on its way arrives within the linger; then the receiver stops
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    r.handle.join().unwrap();
    ended.recv().unwrap().unwrap();
    (records(&send_log, RecordKind::Sent), records(&recv_log, RecordKind::Received))
}

fn seq_sizes(rs: &[Record]) -> Vec<(u64, u32)> {
    let mut v: Vec<(u64, u32)> = rs.iter().map(|r| (r.seq, r.size)).collect();
    v.sort_unstable();
    v
}

/// Arrival instants shared by more than one datagram: a GRO buffer's datagrams share its one.
fn shared_arrivals(rs: &[Record]) -> usize {
    let distinct: BTreeSet<u64> = rs.iter().map(|r| r.t_b).collect();
    rs.len() - distinct.len()
}

#[test]
fn gso_and_gro_records_are_the_plain_runs_and_a_plain_receiver_reads_gso() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("gso");
    // 1,000 B: 64 segments fit one super-datagram; 20,000 datagrams (20 MB) in a 64-MiB buffer
    let (packets, size) = (20_000, 1_000);
    use horde_model::gso::Gso;
    let (plain_tx, plain_rx) = run(&dir, "plain", Gso::Off, false, packets, size);
    // a bulk flow: `auto` sends it as super-datagrams, as `on` does
    let (gso_tx, gso_rx) = run(&dir, "gso", Gso::Auto, true, packets, size);
    let (mixed_tx, mixed_rx) = run(&dir, "mixed", Gso::On, false, packets, size);
    let want: Vec<(u64, u32)> = (0..packets as u64).map(|s| (s, size)).collect();
    for (name, tx, rx) in [("plain", &plain_tx, &plain_rx), ("gso+gro", &gso_tx, &gso_rx), ("gso, no gro", &mixed_tx, &mixed_rx)] {
        assert_eq!(seq_sizes(tx), want, "{name}: the sender logs every datagram once, as a plain run does");
        assert_eq!(seq_sizes(rx), want, "{name}: every datagram arrives and is its own record");
    }
    // the super-datagrams really went (and arrived whole): their datagrams share an arrival
    let shared = shared_arrivals(&gso_rx);
    assert!(shared > packets as usize / 2, "with GSO and GRO most datagrams arrive in a buffer of several ({shared} of {packets})");
}

#[test]
fn sizes_that_differ_leave_plainly_and_are_all_received() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("gso-sizes");
    let stop = Arc::new(AtomicBool::new(false));
    let ropts = RecvOptions { udp: vec!["127.0.0.1:0".parse().unwrap()], log: Some(dir.path("recv.hlog")), ..Default::default() };
    let (tx, ended) = mpsc::channel();
    let r = receiver::spawn(ropts, stop.clone(), None, "recv-sizes".into(), Duration::from_secs(10), move |x| drop(tx.send(x))).unwrap();
    let raw = RawFlow {
        dst: Some(r.bound[0].to_string()),
        size: Some("uniform(100, 1400)".into()),
        packets: Some("5000".into()),
        bulk: Some(true),
        seed: Some(3),
        ..Default::default()
    };
    let opts = SendOptions { log: Some(dir.path("send.hlog")), linger: Duration::from_millis(300), floor: Duration::ZERO, ..Default::default() };
    sender::run(vec![raw.resolve(0, 1, "sizes").unwrap()], &opts, &AtomicBool::new(false)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    r.handle.join().unwrap();
    ended.recv().unwrap().unwrap();
    let (sent, got) = (records(&dir.path("send.hlog"), RecordKind::Sent), records(&dir.path("recv.hlog"), RecordKind::Received));
    assert_eq!(sent.len(), 5000);
    assert_eq!(seq_sizes(&got), seq_sizes(&sent), "every size arrives as it left");
}

/// `auto` (the default) sends a paced flow datagram by datagram even where its departures bunch
/// (a capture on the sending host then shows each as itself: issue 65), and `on` sends the same
/// bunches as super-datagrams; either way every datagram is its own record at both ends.
#[test]
fn auto_leaves_paced_flows_plain_and_on_bunches_them() {
    use horde_model::gso::Gso;
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("gso-paced");
    let paced = |dst: SocketAddr| {
        // 50,000 datagrams/s: many are due within one pacing tolerance of each other
        let raw = RawFlow {
            dst: Some(dst.to_string()),
            size: Some("200".into()),
            idt: Some("constant(0.02)".into()),
            packets: Some("20000".into()),
            seed: Some(5),
            ..Default::default()
        };
        raw.resolve(0, 1, "paced").unwrap()
    };
    let mut shared = Vec::new();
    for (name, gso) in [("auto", Gso::Auto), ("on", Gso::On)] {
        let recv_log = dir.path(&format!("{name}-recv.hlog"));
        let stop = Arc::new(AtomicBool::new(false));
        let ropts = RecvOptions { udp: vec!["127.0.0.1:0".parse().unwrap()], log: Some(recv_log.clone()), gro: true, ..Default::default() };
        let (tx, ended) = mpsc::channel();
        let r = receiver::spawn(ropts, stop.clone(), None, format!("recv-{name}"), Duration::from_secs(10), move |x| drop(tx.send(x))).unwrap();
        let opts = SendOptions { gso, spin_ns: 0, linger: Duration::from_millis(300), floor: Duration::ZERO, ..Default::default() };
        let sent = sender::run(vec![paced(r.bound[0])], &opts, &AtomicBool::new(false)).unwrap();
        assert_eq!(sent.packets, 20_000, "{name}");
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        r.handle.join().unwrap();
        ended.recv().unwrap().unwrap();
        let got = records(&recv_log, RecordKind::Received);
        assert_eq!(seq_sizes(&got), (0..20_000).map(|s| (s, 200)).collect::<Vec<_>>(), "{name}: every datagram is its own record");
        shared.push(shared_arrivals(&got));
    }
    assert_eq!(shared[0], 0, "auto: no super-datagram, so none arrives whole with others");
    assert!(shared[1] > 0, "on: the bunched departures left as super-datagrams ({} shared arrivals)", shared[1]);
}
