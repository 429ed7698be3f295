//! Consent after admission (issue 21): a peer that was admitted once and then went away gets
//! nothing more within 2 s, whatever a spoofer sends from its address. The "peer" here is a
//! plain socket that does the handshake by hand, answers consent probes while it is "alive",
//! then stops answering and keeps sending from the same address as a spoofer would (an
//! off-path spoofer cannot see the probes, so it cannot answer them) — while counting what
//! still arrives.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use horde_engine::receiver::{self, RecvOptions};
use horde_engine::sender::{self, Accepted, Responder, Source};
use horde_engine::SendOptions;
use horde_model::flow::RawFlow;
use horde_model::{Flow, Schedule, Transport};
use horde_proto::greeter::{GreetState, Greeter};
use horde_proto::RunKey;
use horde_wire::control::{ConsentProbe, KeepAliveProof, Status};
use horde_wire::datagram::{FLAG_ECHO_REQUEST, FLAG_REVERSE};
use horde_wire::DatagramHeader;

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

pub(crate) fn flow(rate: &str, secs: u32) -> Flow {
    let raw = RawFlow {
        dst: Some("127.0.0.1:9".into()),
        rate: Some(rate.into()),
        size: Some("200".into()),
        duration: Some(horde_model::flow::Quantity::Text(format!("{secs}s"))),
        ..Default::default()
    };
    raw.resolve(0, 1, "test").unwrap()
}

/// A peer by hand: validated with `flags` in its hello, then alive (answering probes) until
/// `alive_for`, then a spoofer on the same address sending `spoof` every 100 ms, until `total`.
/// Returns (bytes received while alive, last arrival of anything but a probe after it died, in
/// seconds after its death, bytes other than probes received after its death + 2 s). Probes
/// after its death are bounded here: at most 16 (4 s of them), 36 bytes each.
fn peer(server: SocketAddr, flow_id: u32, flags: u8, alive_for: Duration, total: Duration, spoof: &[u8]) -> (u64, f64, u64) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    let mut g = Greeter::new(RunKey::OPEN, flags, flow_id, 0, Some(now_ns()));
    let mut buf = [0u8; 65536];
    let t0 = Instant::now();
    while g.state() != GreetState::Accepted {
        assert!(t0.elapsed() < Duration::from_secs(5), "not admitted: {:?}", g.state());
        if let Some(h) = g.poll_transmit(t0.elapsed().as_nanos() as u64) {
            s.send(&h).unwrap();
        }
        if let Ok(n) = s.recv(&mut buf) {
            g.on_datagram(&buf[..n]);
        }
    }
    let start = Instant::now();
    let (mut alive_bytes, mut last_after, mut late_bytes, mut probes_after) = (0u64, 0f64, 0u64, 0u64);
    let mut next_spoof = start;
    let mut proof: Option<KeepAliveProof> = None;
    while start.elapsed() < total {
        let alive = start.elapsed() < alive_for;
        if Instant::now() >= next_spoof {
            // While alive this is the flow's own traffic (keep-alives carrying the latest probe,
            // echo requests); after, a spoofer's, which has seen no probe.
            let mut d = spoof.to_vec();
            if let Some(p) = proof.filter(|_| alive) {
                p.emit(&mut d);
            }
            let _ = s.send(&d);
            next_spoof += Duration::from_millis(100);
        }
        let Ok(n) = s.recv(&mut buf) else { continue };
        let probe = horde_proto::consent::is_consent(&buf[..n]);
        if alive {
            alive_bytes += n as u64;
            if let Some(r) = horde_proto::consent::answer(&buf[..n], flow_id) {
                let p = ConsentProbe::parse(&r).unwrap();
                proof = Some(KeepAliveProof { number: p.number, nonce: p.nonce });
                s.send(&r).unwrap();
            }
        } else {
            let after = (start.elapsed() - alive_for).as_secs_f64();
            if probe {
                assert_eq!(n, 36);
                probes_after += 1;
            } else {
                last_after = after;
                if after > 2.0 {
                    late_bytes += n as u64;
                }
            }
        }
    }
    assert!(probes_after <= 16, "{probes_after} probes after the peer died");
    (alive_bytes, last_after, late_bytes)
}

/// Sets the stop flag when dropped, so that a failed assertion ends the server thread too
/// (a scoped thread is joined before the panic leaves the scope).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn datagram(flags: u8, flow: u32, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    DatagramHeader { flags, flow, seq: 1, send_ns: now_ns() }.emit(&mut b);
    b
}

/// `horde recv`'s reverse bulk and echoes: both stop within 2 s of the peer's last answer,
/// whatever keeps arriving from its address; reverse bulk goes only to a hello that asked.
#[test]
fn recv_stops_reverse_bulk_and_echoes_when_consent_stops() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let report = receiving(|addr| {
        // Four peers at once, each its own flow from its own address (the receiver keeps them
        // apart; run one after another they took 16 s, together the longest one's 7).
        let keep = datagram(FLAG_REVERSE, 1, 1400);
        let (spoofed, unasked, req) = (datagram(FLAG_REVERSE, 4, 1400), datagram(FLAG_REVERSE, 2, 1400), datagram(FLAG_ECHO_REQUEST, 3, 1000));
        let (reverse, spoofer, not_asked, echoes) = std::thread::scope(|p| {
            // Reverse: 1,400-byte keep-alives, as the reproduction.
            let reverse = p.spawn(|| peer(addr, 1, FLAG_REVERSE, Duration::from_secs(2), Duration::from_secs(7), &keep));
            // A flow that asked, whose keep-alives carry no proof (a spoofer's, say).
            let spoofer = p.spawn(|| peer(addr, 4, FLAG_REVERSE, Duration::from_secs(0), Duration::from_secs(2), &spoofed));
            // A flow whose signed hello did not ask for reverse, keep-alives or not.
            let not_asked = p.spawn(|| peer(addr, 2, 0, Duration::from_secs(1), Duration::from_secs(1), &unasked));
            // Echoes: 1:1 while alive, none after the lapse.
            let echoes = p.spawn(|| peer(addr, 3, FLAG_ECHO_REQUEST, Duration::from_secs(1), Duration::from_secs(6), &req));
            (reverse.join().unwrap(), spoofer.join().unwrap(), not_asked.join().unwrap(), echoes.join().unwrap())
        });
        let (alive, last, late) = reverse;
        assert!(alive > 1_000_000, "bulk came back while the peer consented: {alive} B");
        assert!(last <= 2.0, "bulk went on {last:.2} s after the peer stopped answering");
        assert_eq!(late, 0, "no bulk after 2 s: the flow is paused, then forgotten");
        assert_eq!(spoofer.0, 0, "a flow whose keep-alives carry no proof gets no bulk");
        assert_eq!(not_asked.0, 0, "no probes, no bulk: nothing beyond the handshake is sent to it");
        let (alive, last, late) = echoes;
        assert!(alive >= 9 * 1000, "echoes while alive: {alive}");
        assert!(last <= 2.0 && late == 0, "echoes went on {last:.2} s after, {late} B after 2 s");
    });
    assert!(report.refusals.consent_expired >= 2, "{:?}", report.refusals);
    assert!(report.refusals.reverse >= 1, "flow 2's keep-alives refused: {:?}", report.refusals);
    assert!(report.consent_probes > 0 && report.consent_probe_bytes == 36 * report.consent_probes);
}

/// `horde recv` on a free loopback UDP port while `body` runs with its address; stopped after
/// (or when `body` panics), its report.
pub(crate) fn receiving(body: impl FnOnce(SocketAddr)) -> horde_engine::receiver::RecvReport {
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|sc| {
        let stop = &stop;
        let h = sc.spawn(move || {
            let opts = RecvOptions { udp: vec!["127.0.0.1:0".parse().unwrap()], ..Default::default() };
            receiver::run(&opts, stop, |a| tx.send(a[0]).unwrap()).unwrap()
        });
        let addr = rx.recv().unwrap();
        let guard = StopOnDrop(stop);
        body(addr);
        drop(guard);
        h.join().unwrap()
    })
}

struct Streams {
    down: Flow,
}

impl Responder for Streams {
    fn on_hello(&self, _flow: u32, tag: u32) -> Result<Accepted, Status> {
        let source: Source = Box::new(Schedule::new(&self.down));
        Ok(Accepted { source, mirror: None, tag, presence: None })
    }
}

/// A UDP server side on a free loopback port answering every player's hello with `down`'s
/// stream, while `body` runs with its address; stopped after (or when `body` panics), its report.
pub(crate) fn serving_udp(down: Flow, body: impl FnOnce(SocketAddr)) -> horde_engine::sender::SendReport {
    let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let responder: Arc<dyn Responder> = Arc::new(Streams { down });
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, responder) = (&stop, &responder);
        let h = sc.spawn(move || {
            let opts = SendOptions { responder: Some(responder.clone()), spin_ns: 0, ..Default::default() };
            sender::serve(&[listen], Transport::Udp, &opts, stop, |_| tx.send(()).unwrap()).unwrap()
        });
        rx.recv().unwrap();
        let guard = StopOnDrop(stop);
        body(listen);
        drop(guard);
        h.join().unwrap()
    })
}

/// A UDP server side (a scenario's players' streams): a player that stops answering consent
/// probes gets nothing more within 2 s, though its address keeps sending.
#[test]
fn a_udp_server_side_stops_a_dead_players_stream_within_2_s() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let report = serving_udp(flow("400", 30), |listen| {
        let (alive, last, late) = peer(listen, 0, 0, Duration::from_secs(2), Duration::from_secs(7), &datagram(0, 0, 200));
        assert!(alive > 100 * 200, "the player's stream while it consented: {alive} B");
        assert!(last <= 2.0, "the stream went on {last:.2} s after the player stopped answering");
        assert_eq!(late, 0);
    });
    assert_eq!(report.refusals.consent_expired, 1, "{:?}", report.refusals);
}
