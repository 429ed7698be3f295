//! The per-connection state machine driven with no socket: a client and a server side talk
//! through byte buffers and a virtual clock.

use horde_model::{Departure, Flow, Meter, Transport};
use horde_proto::gate::{Decision, Gate, GateConfig};
use horde_proto::{Accepted, Close, Conn, Ctx, Event, GreetState, RunKey, RxMeta, Source};
use horde_wire::control::Status;
use horde_wire::{Record, RecordKind};

const T0: u64 = 1_700_000_000_000_000_000;

fn deps(n: u64, every_ns: u64, size: u32, class: u8) -> Vec<Departure> {
    (0..n).map(|k| Departure { seq: k, at_ns: k * every_ns, size, clamped: false, class }).collect()
}

fn source(v: Vec<Departure>) -> Source {
    Box::new(v.into_iter())
}

fn flow(transport: Transport, meter: Meter, tag: u32) -> Flow {
    let mut f = Flow::connection(7, "player 3".into(), "127.0.0.1:9".parse().unwrap(), tag);
    f.transport = transport;
    f.meter = meter;
    f
}

/// A server side's context: grants player 3 with the given schedules, once.
struct ServerCtx {
    down: Option<Vec<Departure>>,
    up: Vec<Departure>,
    records: Vec<Record>,
    roster: Option<std::sync::Arc<horde_model::roster::Roster>>,
}

impl Ctx for ServerCtx {
    fn t0_real(&self) -> u64 {
        T0 + 5_000
    }
    fn record(&mut self, r: Record) {
        self.records.push(r);
    }
    fn respond(&mut self, _flow: u32, tag: u32) -> Result<Accepted, Status> {
        if tag >> 8 != 3 {
            return Err(Status::UnknownPlayer);
        }
        let down = self.down.take().ok_or(Status::Taken)?;
        Ok(Accepted {
            source: source(down),
            mirror: Some(source(self.up.clone())),
            tag,
            presence: self.roster.clone().map(|r| horde_model::roster::Presence::new(r, 3)),
        })
    }
}

/// A client's context.
#[derive(Default)]
struct ClientCtx {
    records: Vec<Record>,
}

impl Ctx for ClientCtx {
    fn t0_real(&self) -> u64 {
        T0
    }
    fn record(&mut self, r: Record) {
        self.records.push(r);
    }
    fn respond(&mut self, _: u32, _: u32) -> Result<Accepted, Status> {
        unreachable!("clients are never asked")
    }
}

/// Sends every due departure of `c` up to `until` (ns after the start) as stream bytes.
fn send_until(c: &mut Conn, until: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [Departure { seq: 0, at_ns: 0, size: 0, clamped: false, class: 0 }; 64];
    loop {
        let n = c.take_due(until, &mut buf);
        if n == 0 {
            break;
        }
        assert!(c.queue_apdus(&buf[..n], T0 + until));
        for d in &buf[..n] {
            c.sent(d, T0 + d.at_ns, T0 + until);
        }
    }
    out.extend_from_slice(c.out());
    let k = c.out().len();
    c.wrote(k);
    out
}

#[test]
fn tcp_two_way_client_and_server_through_buffers() {
    let key = RunKey::from_bytes([4; 32]);
    let up = deps(20, 50_000_000, 40, 2);
    let down = deps(30, 30_000_000, 300, 5);
    let mut client = Conn::client(&flow(Transport::Tcp, Meter::Owd, 3 << 8), source(up.clone()), Some(source(down.clone())), key.clone(), true);
    let mut server = Conn::server_tcp("from test".into(), key.clone());
    let mut sctx = ServerCtx { down: Some(down), up: up.clone(), records: Vec::new(), roster: None };
    let mut cctx = ClientCtx::default();

    // Nothing goes to the client before its hello arrived and was granted.
    assert!(server.out().is_empty() && server.awaiting_hello());
    client.start(T0);
    let bytes = send_until(&mut client, 1_000_000_000);
    assert_eq!(server.on_stream(T0 + 1, &bytes[..10], &mut sctx), Ok(None), "a partial hello");
    assert_eq!(server.on_stream(T0 + 2, &bytes[10..], &mut sctx), Ok(Some(Event::Granted)));
    assert_eq!((server.flow, server.tag, server.name.as_str()), (7, 3 << 8, "player 3"));
    // The client's APDUs arrived and carry their category (class 2) from the mirror.
    assert_eq!(sctx.records.len(), 20);
    assert!(sctx.records.iter().all(|r| r.kind == RecordKind::Received && r.tag == (3 << 8 | 2) && r.size == 40));
    assert_eq!(server.mismatched(), 0);

    // The server's departures are shifted onto its clock: client start T0, server start T0+5µs.
    assert_eq!(server.next_at(), Some(0), "departure 0 of the client's clock is 5 µs before the server's start");
    let down_bytes = send_until(&mut server, 1_000_000_000);
    assert_eq!(client.on_stream(T0 + 3, &down_bytes, &mut cctx), Ok(None));
    assert_eq!(cctx.records.len(), 30);
    assert!(cctx.records.iter().all(|r| r.tag == (3 << 8 | 5) && r.size == 300));
    assert_eq!(client.mismatched(), 0);
}

/// Issue 22: a player steered by a roster goes offline and comes back; both sides decide from
/// the same roster which APDUs exist, so the server's mirror still names every arrival exactly.
#[test]
fn a_steered_player_leaves_and_returns_and_both_sides_agree() {
    use horde_model::roster::{Presence, Roster};
    let key = RunKey::from_bytes([4; 32]);
    // 4 players online of 4; at 1 s player 3 is cut (online 3), at 2 s all return (join 0).
    let roster = std::sync::Arc::new(Roster::new(4, vec![0; 4]).unwrap());
    roster.set(1_000_000_000, 3).unwrap();
    roster.set(2_000_000_000, 4).unwrap();
    let up: Vec<Departure> =
        (0..30).map(|k| Departure { seq: k, at_ns: k * 100_000_000, size: 40 + k as u32, clamped: false, class: (k / 10) as u8 }).collect();
    let down = deps(30, 100_000_000, 300, 5);
    let mut client = Conn::client(&flow(Transport::Tcp, Meter::Owd, 3 << 8), source(up.clone()), Some(source(down.clone())), key.clone(), true);
    client.steer_by(Some(Presence::new(roster.clone(), 3)));
    let mut server = Conn::server_tcp("s".into(), key);
    let mut sctx = ServerCtx { down: Some(down), up, records: Vec::new(), roster: Some(roster) };
    client.start(T0);
    let bytes = send_until(&mut client, 3_000_000_000);
    assert_eq!(server.on_stream(T0, &bytes, &mut sctx), Ok(Some(Event::Granted)));
    // Departures at 1.0..1.9 s never left: 20 arrived, each with its own size and class.
    assert_eq!(sctx.records.len(), 20);
    let classes: Vec<u32> = sctx.records.iter().map(|r| r.tag & 0xFF).collect();
    assert_eq!(classes, [vec![0; 10], vec![2; 10]].concat());
    assert_eq!(server.mismatched(), 0, "sizes 40..49 then 60..69 match the mirror");
    let down_bytes = send_until(&mut server, 3_000_000_000);
    let mut cctx = ClientCtx::default();
    assert_eq!(client.on_stream(T0 + 3, &down_bytes, &mut cctx), Ok(None));
    assert_eq!(cctx.records.len(), 20, "the server's stream skipped the same second");
    assert_eq!(client.mismatched(), 0);
}

#[test]
fn a_mirror_mismatch_is_counted() {
    let key = RunKey::OPEN;
    let up = deps(10, 1_000_000, 40, 1);
    let mut wrong = up.clone();
    wrong[4].size = 41;
    let mut client = Conn::client(&flow(Transport::Tcp, Meter::Owd, 3 << 8), source(up), None, key.clone(), true);
    let mut server = Conn::server_tcp("s".into(), key);
    let mut sctx = ServerCtx { down: Some(Vec::new()), up: wrong, records: Vec::new(), roster: None };
    client.start(T0);
    let bytes = send_until(&mut client, 1_000_000_000);
    assert_eq!(server.on_stream(T0, &bytes, &mut sctx), Ok(Some(Event::Granted)));
    assert_eq!(server.mismatched(), 1);
}

#[test]
fn the_server_refuses_other_keys_unknown_and_taken_players() {
    let mut sctx = ServerCtx { down: Some(Vec::new()), up: Vec::new(), records: Vec::new(), roster: None };
    let hello = |key: &RunKey, tag: u32| {
        let mut c = Conn::client(&flow(Transport::Tcp, Meter::Owd, tag), source(Vec::new()), None, key.clone(), true);
        c.start(T0);
        c.out().to_vec()
    };
    let run_key = RunKey::from_bytes([1; 32]);
    let mut s = Conn::server_tcp("s".into(), run_key.clone());
    assert_eq!(s.on_stream(T0, &hello(&RunKey::from_bytes([2; 32]), 3 << 8), &mut sctx), Err(Close::BadMac));
    assert!(s.out().is_empty(), "nothing is sent to a peer that failed its hello");
    let mut s = Conn::server_tcp("s".into(), run_key.clone());
    assert_eq!(s.on_stream(T0, &hello(&run_key, 9 << 8), &mut sctx), Err(Close::Refused(Status::UnknownPlayer)));
    let mut s = Conn::server_tcp("s".into(), run_key.clone());
    assert_eq!(s.on_stream(T0, &hello(&run_key, 3 << 8), &mut sctx), Ok(Some(Event::Granted)));
    let mut s = Conn::server_tcp("s".into(), run_key.clone());
    assert_eq!(s.on_stream(T0, &hello(&run_key, 3 << 8), &mut sctx), Err(Close::Refused(Status::Taken)), "a replayed hello");
    let mut s = Conn::server_tcp("s".into(), run_key);
    assert!(matches!(s.on_stream(T0, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789", &mut sctx), Err(Close::NotHorde(_))));
}

#[test]
fn a_sink_echoes_byte_for_byte_even_when_the_hello_is_split() {
    let key = RunKey::OPEN;
    let mut client = Conn::client(&flow(Transport::Tcp, Meter::Rtt, 0), source(deps(50, 1_000, 100, 0)), None, key.clone(), true);
    client.start(T0);
    let bytes = send_until(&mut client, 1_000_000);
    let mut sink = Conn::sink_tcp("sink".into(), key);
    let mut ctx = ClientCtx::default();
    let mut echoed = Vec::new();
    for chunk in [&bytes[..7], &bytes[7..30], &bytes[30..]] {
        sink.on_stream(T0, chunk, &mut ctx).unwrap();
        echoed.extend_from_slice(sink.out());
        let k = sink.out().len();
        sink.wrote(k);
    }
    assert_eq!(echoed, bytes);
    assert_eq!(ctx.records.len(), 50);
    // The echoes come back to the client as round-trip records.
    let mut cctx = ClientCtx::default();
    client.on_stream(T0 + 9, &echoed, &mut cctx).unwrap();
    assert_eq!(cctx.records.len(), 50);
    assert!(cctx.records.iter().all(|r| r.kind == RecordKind::Echoed));
    assert_eq!(client.stats.echoes, 50);
}

#[test]
fn udp_hello_is_retried_until_a_late_server_answers() {
    let key = RunKey::from_bytes([6; 32]);
    let from = "127.0.0.1:40000".parse().unwrap();
    let mut gate = Gate::new(GateConfig::receiver(key.clone()), [2; 32]);
    let mut c = Conn::client(&flow(Transport::Udp, Meter::Owd, 3 << 8), source(deps(5, 1_000, 64, 0)), Some(source(Vec::new())), key, true);
    assert!(!c.admitted(), "a greeting client sends nothing before it is admitted");
    let mut now = 0;
    let mut sent = 0;
    // The server is not there for the first second: hellos vanish.
    while now < 1_000_000_000 {
        sent += c.poll_hello(now).is_some() as u32;
        now += 10_000_000;
    }
    assert_eq!(sent, 10, "one hello per 100 ms");
    // Then it answers: challenge, then (once the run's start is known) admission.
    loop {
        if let Some(h) = c.poll_hello(now) {
            match gate.on_hello(now, from, &h) {
                Decision::Challenge(ch) => assert_eq!(c.on_datagram(T0, &ch, &RxMeta::default()), Ok(None)),
                Decision::Validated(h) => {
                    let a = gate.admit(0, from, &h, false).unwrap();
                    assert_eq!(c.on_datagram(T0, &a, &RxMeta::default()), Ok(None));
                }
                other => panic!("{other:?}"),
            }
        }
        if c.greeter().unwrap().state() == GreetState::Validated {
            c.start(T0);
        }
        if c.admitted() {
            break;
        }
        now += 10_000_000;
        assert!(now < 3_000_000_000, "admitted within a few retries");
    }
    assert_eq!(gate.admitted(from, 7).unwrap().base_ns, T0);
}

#[test]
fn the_deadline_holds_and_counts_what_was_left() {
    let mut c = Conn::client(&flow(Transport::Udp, Meter::Owd, 0), source(deps(1000, 1_000_000, 64, 0)), None, RunKey::OPEN, false);
    c.set_deadline(Some(500_000_000));
    let mut buf = [Departure { seq: 0, at_ns: 0, size: 0, clamped: false, class: 0 }; 64];
    assert_eq!(c.take_due(100_000, &mut buf), 1);
    // The sender fell behind: at the deadline 499 departures were still due; none leaves.
    assert_eq!(c.take_due(600_000_000, &mut buf), 0);
    assert_eq!(c.stats.unsent, 499);
    assert_eq!(c.next_at(), None, "the flow is over");
}

/// A bulk flow's departures leave when taken, stamped with that time (never late); the
/// deadline ends it without counting anything as unsent, and its start is scheduled once.
#[test]
fn bulk_departures_are_stamped_when_taken_and_end_at_the_deadline() {
    let mut f = flow(Transport::Udp, Meter::Owd, 0);
    f.bulk = true;
    // An endless source due at 2 ms (its start delay), as a bulk flow's schedule is.
    let endless: Source = Box::new((0..).map(|k| Departure { seq: k, at_ns: 2_000_000, size: 1472, clamped: false, class: 0 }));
    let mut c = Conn::client(&f, endless, None, RunKey::OPEN, false);
    assert!(c.bulk());
    assert_eq!(c.next_at(), Some(2_000_000), "scheduled once, at its start");
    c.begin_bulk();
    assert_eq!(c.next_at(), None, "then pumped, not scheduled");
    c.set_deadline(Some(1_000_000_000));
    let mut buf = [Departure { seq: 0, at_ns: 0, size: 0, clamped: false, class: 0 }; 8];
    assert_eq!(c.take_bulk(5_000_000, &mut buf), 8);
    assert!(buf.iter().enumerate().all(|(k, d)| d.at_ns == 5_000_000 && d.seq == k as u64));
    // What the socket did not take goes back first in line and leaves with the next stamp.
    c.requeue(&buf[6..]);
    assert_eq!(c.take_bulk(7_000_000, &mut buf[..3]), 3);
    assert_eq!((buf[0].seq, buf[0].at_ns, buf[2].seq), (6, 7_000_000, 8));
    assert!(!c.bulk_done());
    assert_eq!(c.take_bulk(1_000_000_000, &mut buf), 0, "the deadline");
    assert!(c.bulk_done());
    assert_eq!(c.stats.unsent, 0, "nothing in bulk is ever due, so nothing is unsent");
}

/// A reverse flow: the client asks in its hello; the sink answers with its own signed hello,
/// then APDUs of the first APDU's size while keep-alives come, and stops a second after the
/// last one. The client logs them as arrivals with their one-way delay.
#[test]
fn a_sink_sends_bulk_back_to_a_reverse_flow_while_consent_lasts() {
    let key = RunKey::from_bytes([9; 32]);
    let mut f = flow(Transport::Tcp, Meter::Owd, 0);
    f.bulk = true;
    f.reverse = true;
    let keepalives: Vec<Departure> = deps(3, 100_000_000, 1000, 0).into_iter().map(|d| Departure { at_ns: d.at_ns + 100_000_000, ..d }).collect();
    let mut client = Conn::client(&f, source(keepalives), None, key.clone(), true);
    assert!(client.reverse() && !client.bulk(), "a reverse flow's own departures are scheduled keep-alives");
    let mut sink = Conn::sink_tcp("k".into(), key);
    let mut sctx = ClientCtx::default();
    let mut cctx = ClientCtx::default();
    client.start(T0);
    let bytes = send_until(&mut client, 0);
    assert_eq!(sink.on_stream(T0 + 10, &bytes, &mut sctx), Ok(Some(horde_proto::Event::ReverseRequested)));
    assert!(sink.reverse_requested() && !sink.echoing());
    assert_eq!(sink.fill_reverse(T0 + 20, 10_000), (0, 0), "the size comes with the first APDU");
    let hello_back = sink.out().to_vec();
    assert_eq!(hello_back.len(), horde_wire::HELLO_LEN, "its own hello first");
    // The first keep-alive carries the size (1000 B); the next ones are 6-byte APDUs.
    let bytes = send_until(&mut client, 300_000_000);
    assert_eq!(bytes.len(), 1000 + 6 + 6, "later keep-alives are header-only");
    assert_eq!(sink.on_stream(T0 + 10, &bytes, &mut sctx), Ok(None));
    let (n, b) = sink.fill_reverse(T0 + 30, 10_000);
    assert!(n >= 10 && b == n * 1000, "{n} APDUs of {b} B");
    let out = sink.out().to_vec();
    assert_eq!(client.on_stream(T0 + 40, &out, &mut cctx), Ok(None));
    assert_eq!(client.stats.received, n);
    assert_eq!(client.stats.received_bytes, b);
    assert!(cctx.records.iter().all(|r| r.kind == RecordKind::Received && r.size == 1000 && r.t_b - r.t_a < 1_000_000));
    // Consent: a second after the last keep-alive (T0 + 10 here), nothing more is queued.
    let k = sink.out().len();
    sink.wrote(k);
    assert!(sink.reverse_wanted(T0 + 900_000_000));
    assert!(!sink.reverse_wanted(T0 + 10 + 1_000_000_000));
    assert_eq!(sink.fill_reverse(T0 + 10 + 1_000_000_000, 10_000), (0, 0));
}

/// A UDP reverse flow marks its keep-alives; the receiver's bulk back is logged as arrivals.
#[test]
fn a_udp_reverse_flow_logs_what_comes_back() {
    let mut f = flow(Transport::Udp, Meter::Owd, 0);
    f.bulk = true;
    f.reverse = true;
    let mut c = Conn::client(&f, source(deps(1, 0, 100, 0)), None, RunKey::OPEN, false);
    assert!(c.reads());
    assert_eq!(c.datagram_flags(), horde_wire::datagram::FLAG_REVERSE);
    let mut d = [0u8; 100];
    let h = horde_wire::DatagramHeader { flags: horde_wire::datagram::FLAG_REVERSE_DATA, flow: 7, seq: 3, send_ns: T0 };
    h.emit(&mut d);
    let rec = c.on_datagram(T0 + 50_000, &d, &RxMeta { len: 100, ..Default::default() }).unwrap().expect("logged");
    assert_eq!((rec.kind, rec.seq, rec.t_b - rec.t_a), (RecordKind::Received, 3, 50_000));
    // A flow that did not ask ignores such datagrams.
    let mut plain = Conn::client(&flow(Transport::Udp, Meter::Owd, 0), source(Vec::new()), None, RunKey::OPEN, false);
    assert_eq!(plain.on_datagram(T0, &d, &RxMeta { len: 100, ..Default::default() }), Ok(None));
}

/// Issue 27: a stream's APDU carries its send time in µs from the stream's base; the sender
/// logs that same time (`Conn::carried_ns`), so a summary places the departure and its arrival
/// in the same second (before, one APDU in millions left in one second and arrived "sent" in
/// the one before).
#[test]
fn a_streams_carried_send_time_is_the_time_the_sender_logs() {
    let key = RunKey::OPEN;
    let up = deps(3, 1_000_000, 40, 1);
    let mut client = Conn::client(&flow(Transport::Tcp, Meter::Owd, 3 << 8), source(up.clone()), None, key.clone(), true);
    let mut server = Conn::server_tcp("s".into(), key);
    let mut sctx = ServerCtx { down: Some(Vec::new()), up, records: Vec::new(), roster: None };
    client.start(T0);
    let real = T0 + 999_999_999; // 1 ns before a second boundary of the client's start … and not on a µs
    let carried = client.carried_ns(real);
    assert!(carried <= real && real - carried < 1_000 && (carried - T0).is_multiple_of(1_000), "{carried} for {real}");
    let mut buf = [Departure { seq: 0, at_ns: 0, size: 0, clamped: false, class: 0 }; 8];
    let n = client.take_due(1_000_000_000, &mut buf);
    assert!(client.queue_apdus(&buf[..n], carried));
    let sent: Vec<Record> = buf[..n].iter().map(|d| client.sent(d, T0 + d.at_ns, carried)).collect();
    let bytes = client.out().to_vec();
    assert_eq!(server.on_stream(T0, &bytes, &mut sctx), Ok(Some(Event::Granted)));
    assert_eq!(sctx.records.len(), n);
    for (s, r) in sent.iter().zip(&sctx.records) {
        assert_eq!(r.t_a, s.t_b, "the arrival's carried send time is the departure's logged one");
    }
    // a datagram carries the time itself
    let udp = Conn::client(&flow(Transport::Udp, Meter::Owd, 3 << 8), source(deps(1, 1, 40, 1)), None, RunKey::OPEN, true);
    assert_eq!(udp.carried_ns(real), real);
}
