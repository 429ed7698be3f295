#![no_main]
use horde_regulate::bucket::{Mode, BURST_NS};
use horde_regulate::circuit::demand::{parse_script, Demand, DemandModel};
use horde_regulate::circuit::wire::Packet;
use horde_regulate::circuit::{Client, Server};
use horde_regulate::sim::Loss;
use horde_regulate::{Limits, ThrottleKind, Tuning};
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
            // Any period and floor: tuned within bounds or refused.
            let num = |i: usize| data.get(i..i + 8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")));
            if let Ok(t) = k.tuned(Tuning { period_s: num(0), floor_kbps: num(8) }) {
                let mut th = t.build(Limits::default(), 0);
                let r = th.poll(10_000_000_000).unwrap_or(th.rate_bps());
                assert!(r.is_finite() && r > 0.0, "{t:?}: {r}");
            }
        }
        // A loss schedule as `circuit sim --loss` takes it: parsed (probabilities in 0..=1, times
        // increasing) or refused.
        if let Ok(l) = Loss::parse(text, false) {
            assert!(l.steps.iter().all(|s| (0.0..=1.0).contains(&s.1)) && l.steps.windows(2).all(|w| w[0].0 < w[1].0) && l.steps.len() <= 1000);
        }
    }
    static MODEL: std::sync::OnceLock<DemandModel> = std::sync::OnceLock::new();
    let model = MODEL.get_or_init(|| DemandModel::from_table(&horde_model::service::Service::builtin("opensim").expect("built in").circuit).expect("valid")).clone();
    let d = Demand::new(model, parse_script("0:login:walking,1:teleport:flying").expect("valid"), 1);
    let mut srv = Server::new(if data.first().is_some_and(|b| b & 1 == 1) { Mode::Dual } else { Mode::PerChannel }, 100_000.0, BURST_NS, d, 0);
    let opensim = ThrottleKind::parse("opensim:500").expect("valid");
    let paper = opensim.tuned(Tuning { period_s: Some(1.0), floor_kbps: Some(50.0) }).expect("valid");
    let kinds = [ThrottleKind::Mongoose, ThrottleKind::Tfrc, opensim, ThrottleKind::Fixed { bps: 300_000.0 }, ThrottleKind::MongoosePaper, paper];
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
