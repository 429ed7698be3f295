#![no_main]
use horde_regulate::bucket::{Mode, BURST_NS};
use horde_regulate::circuit::demand::{parse_script, Demand, DemandModel};
use horde_regulate::circuit::wire::Packet;
use horde_regulate::circuit::{Client, Server};
use horde_regulate::{Limits, ThrottleKind};
use libfuzzer_sys::fuzz_target;

// The regulated circuit's packets and both ends' state machines: any datagrams at any times,
// interleaved with the ends' own exchange. Parsing never panics and what parses emits back to
// the same packet; the server and the client take anything (counting what they refuse), never
// panic, and keep finite, non-negative rates.
fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        let mut b = Vec::new();
        p.emit(&mut b);
        assert_eq!(Packet::parse(&b).as_ref(), Ok(&p));
    }
    // A throttle as a scenario or a flag names it: parsed or refused, never a panic.
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(k) = ThrottleKind::parse(text) {
            assert!(k.build(Limits::default(), 0).rate_bps().is_finite());
        }
    }
    static MODEL: std::sync::OnceLock<DemandModel> = std::sync::OnceLock::new();
    let model = MODEL.get_or_init(|| DemandModel::from_table(&horde_model::service::Service::builtin("opensim").expect("built in").circuit).expect("valid")).clone();
    let d = Demand::new(model, parse_script("0:login:walking,1:teleport:flying").expect("valid"), 1);
    let mut srv = Server::new(if data.first().is_some_and(|b| b & 1 == 1) { Mode::Dual } else { Mode::PerChannel }, 100_000.0, BURST_NS, d, 0);
    let kinds = [ThrottleKind::Mongoose, ThrottleKind::Tfrc, ThrottleKind::Opensim { setting_kbps: 500.0 }, ThrottleKind::Fixed { bps: 300_000.0 }, ThrottleKind::MongoosePaper];
    let kind = kinds[data.get(1).map_or(0, |b| *b as usize % kinds.len())];
    let mut cli = Client::new(kind.build(Limits::default(), 0), 0);
    let (mut now, mut buf) = (0u64, Vec::new());
    for chunk in data.chunks(40) {
        let Some((&head, body)) = chunk.split_first() else { continue };
        now += head as u64 * 1_000_000;
        if head & 1 == 0 {
            srv.on_datagram(now, body);
        } else {
            cli.on_datagram(now, body);
        }
        let mut n = 0;
        while srv.poll_transmit(now, &mut buf) && n < 10_000 {
            cli.on_datagram(now, &buf);
            n += 1;
        }
        while cli.poll_transmit(now, &mut buf) && n < 20_000 {
            srv.on_datagram(now, &buf);
            n += 1;
        }
        assert!(srv.rate_bps().is_finite() && srv.rate_bps() >= 0.0);
        assert!(cli.requested_bps.is_finite());
    }
});
