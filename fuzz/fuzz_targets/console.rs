#![no_main]
use horde_console::guard::{Access, Guard, Headers, Tickets};
use libfuzzer_sys::fuzz_target;

// What a request to the console brings: its headers (to the guard) and its body (a command, a
// start, a topology to open, check or save, an emulator action). Never panics; a topology body
// that parses renders to TOML the planner takes the same way; the guard lets a request through only with the token, and never
// with a Host other than the console's or a foreign Origin.
fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\n');
    let mut next = || parts.next();
    let h = Headers { host: next(), origin: next(), sec_fetch_site: next(), authorization: next() };
    let g = Guard::new("0123456789abcdef0123456789abcdef".into(), "127.0.0.1:7070".parse().unwrap(), false);
    let public = g.check(&h, Access::Public, || false);
    if let Ok(shown) = g.check(&h, Access::Token, || false) {
        assert!(shown && public == Ok(true), "a token path passed without the token, or the page judged otherwise: {h:?}");
        let host = h.host.unwrap_or("");
        assert!(["localhost:7070", "127.0.0.1:7070", "[::1]:7070"].iter().any(|a| a.eq_ignore_ascii_case(host)), "host {host:?} passed");
        let token_seen = h.authorization.is_some_and(|v| v.contains("0123456789abcdef0123456789abcdef"));
        assert!(token_seen, "passed without the token: {h:?}");
        if let Some(o) = h.origin {
            assert!(o.starts_with("http://"), "foreign origin {o:?} passed");
        }
    }
    // tickets: whatever is asked and shown, one is good once, for its path only
    let mut t = Tickets::default();
    let path = next().unwrap_or("");
    t.issue("t".into(), "/api/v1/runs/1/events", 0);
    let _ = horde_console::guard::ticket_path(path);
    if t.redeem(path, path, 1) {
        unreachable!("a ticket no one was given");
    }
    // `--exempt ADDR[/PREFIX]` (the console's and the agents' admission): an entry it takes is
    // an address with a prefix its family allows
    if let Ok((ip, prefix)) = horde_proto::admission::parse_exempt(&text) {
        assert!(prefix <= if ip.is_ipv4() { 32 } else { 128 }, "{text:?}");
    }
    let _ = horde_scenario::control::Command::parse(&text);
    let _ = serde_json::from_str::<horde_console::runs::StartRun>(&text);
    let _ = serde_json::from_str::<horde_console::emu::LinkSet>(&text);
    let _ = serde_json::from_str::<horde_console::emu::Exec>(&text);
    let _ = serde_json::from_str::<horde_console::emu::Up>(&text);
    let _ = serde_json::from_str::<horde_console::topo::Save>(&text);
    let _ = serde_json::from_str::<horde_console::topo::OpenTopology>(&text);
    if let Ok(raw) = serde_json::from_str::<horde_topo::RawTopology>(&text) {
        let c = horde_console::topo::check_raw(raw.clone());
        let again = horde_console::topo::check_text(c.toml.as_deref().unwrap_or(""));
        assert_eq!(again.topology.as_ref(), Some(&raw), "the rendered TOML reads back as the same form");
        assert_eq!(again.error.is_none(), c.error.is_none());
    }
    let _ = horde_console::topo::check_text(&text);
});
