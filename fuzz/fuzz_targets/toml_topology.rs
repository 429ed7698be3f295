#![no_main]
use libfuzzer_sys::fuzz_target;

// Any text as a topology file: planning never panics, a plan's names fit the kernel's 15-byte
// interface names, and its Graphviz picture draws. The same text as a live link change (`horde
// emu link` fields): parsing and applying never panic, and what applies validates. The editor's
// form (horde_topo::parse/render, what the console opens and saves): what parses renders to TOML
// that parses back to the same form, renders to the same text again, and plans the same.
fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(p) = horde_topo::plan(s, "fuzz.toml", "fz1") {
        for l in &p.links {
            assert!(l.a.ifname.len() <= 15 && l.b.ifname.len() <= 15);
        }
        let _ = horde_topo::dot(&p, |spec| format!("{}", spec.delay_ns), None);
        let _ = horde_topo::dot(&p, |spec| format!("{}", spec.delay_ns), Some(2));
        // placed on 1..=4 machines and split into each machine's part: a tunnel exactly on the
        // links between this machine and another, nothing built here for a node elsewhere
        let machines = 1 + data.len() % 4;
        if let Ok(pl) = horde_topo::partition::place(&p, machines, &[]) {
            assert_eq!(pl.load.iter().sum::<usize>(), p.nodes.len());
            for me in 0..machines {
                let part = horde_topo::partition::Part {
                    machine_of: pl.machine_of.clone(),
                    me,
                    names: (0..machines).map(|m| format!("m{m}")).collect(),
                    addrs: (0..machines).map(|m| std::net::Ipv4Addr::new(10, 0, 0, m as u8 + 1)).collect(),
                    vni_base: 1,
                    port: 4789,
                };
                let mut q = p.clone();
                let tunnels = horde_topo::partition::split(&mut q, &part).expect("a placement of this plan splits");
                let (on, m) = (|n: usize| pl.machine_of[n], me);
                let expect = p.links.iter().filter(|l| (on(l.a.node) == m) != (on(l.b.node) == m)).count();
                assert_eq!(tunnels, expect);
                for (li, l) in q.links.iter().enumerate() {
                    assert_eq!(l.tunnel.is_some(), (on(l.a.node) == m) != (on(l.b.node) == m));
                    assert!(!q.built_here(li) || on(l.a.node) == m || on(l.b.node) == m);
                }
            }
        }
    }
    if let Ok(raw) = horde_topo::parse(s, "fuzz.toml") {
        let text = horde_topo::render(&raw);
        let again = horde_topo::parse(&text, "rendered").expect("rendered TOML parses");
        assert_eq!(again, raw);
        assert_eq!(horde_topo::render(&again), text);
        assert_eq!(horde_topo::plan(&text, "fuzz.toml", "fz1").ok(), horde_topo::plan(s, "fuzz.toml", "fz1").ok());
    }
    if let Ok(raw) = toml::from_str::<horde_topo::RawImpair>(s) {
        if let Ok(change) = horde_topo::LinkChange::parse(&raw) {
            let base = horde_impair::LinkSpec { rate_bps: Some(1_000_000), delay_ns: 5_000_000, ..Default::default() };
            for clear in [false, true] {
                if let Ok(spec) = change.apply(&base, clear) {
                    assert!(spec.validate().is_ok());
                }
            }
        }
    }
});
