#![no_main]
use horde_console::guard::{Guard, Headers};
use libfuzzer_sys::fuzz_target;

// What a request to the console brings: its headers (to the guard) and its body (a command or
// a start). Never panics; the guard lets a request through only with the token, and never
// with a Host other than the console's or a foreign Origin.
fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\n');
    let mut next = || parts.next();
    let h = Headers { host: next(), origin: next(), sec_fetch_site: next(), authorization: next(), cookie: next(), query: next() };
    let g = Guard::new("0123456789abcdef0123456789abcdef".into(), "127.0.0.1:7070".parse().unwrap(), false);
    if g.check(&h).is_ok() {
        let host = h.host.unwrap_or("");
        assert!(["localhost:7070", "127.0.0.1:7070", "[::1]:7070"].iter().any(|a| a.eq_ignore_ascii_case(host)), "host {host:?} passed");
        let token_seen = [h.authorization, h.cookie, h.query].iter().flatten().any(|v| v.contains("0123456789abcdef0123456789abcdef"));
        assert!(token_seen, "passed without the token: {h:?}");
        if let Some(o) = h.origin {
            assert!(o.starts_with("http://"), "foreign origin {o:?} passed");
        }
    }
    let _ = horde_scenario::control::Command::parse(&text);
    let _ = serde_json::from_str::<horde_console::runs::StartRun>(&text);
});
