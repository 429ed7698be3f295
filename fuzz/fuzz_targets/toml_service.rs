#![no_main]
use horde_model::service::Service;
use libfuzzer_sys::fuzz_target;

// Any text as a service file: a service that loads binds, and its behaviour process runs for a
// few players without panicking.
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if s.contains("file(") {
        return;
    }
    if let Ok(svc) = Service::parse(s, "fuzz.toml") {
        let b = svc.bind(&Default::default()).expect("a loaded service binds with its defaults");
        let p = horde_model::behaviour::Params { players: 2, duration_s: 60.0, seed: 1, start_hour: 20.0 };
        for player in 0..2 {
            let segs = horde_model::behaviour::player(&svc, &p, player);
            let sched = horde_model::schedule::PlayerSchedule::new(segs, std::sync::Arc::new(b.clone()), horde_model::service::Direction::Up, 1, svc.transport, 60.0);
            for _ in sched.take(64) {}
        }
    }
});
