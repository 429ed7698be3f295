//! The live console in a real browser (issue 23's acceptance): Debian's chromium driven through
//! chromedriver (WebDriver). Draw a topology of 3 hosts, a router and a switch by clicks and
//! drags, set one link's delay, save — the TOML equals a fixture; reopen it; bring it up
//! (root), change the router link's delay from 10 ms to 60 ms in the panel while a round-trip flow
//! runs, and see +100 ms; start a 300-player WoW scenario, watch the charts advance, set the
//! target to 600 and see 600 online, stop, open the report. Screenshots of every step go to
//! target/tmp/ui-screenshots/ (CI keeps them).

use crate::common::console::*;
use crate::common::webdriver::{browser, Driver};
use crate::common::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const HORDE: &str = env!("CARGO_BIN_EXE_horde");

fn shots() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Canvas point (x, y) in the viewport (the graph is at zoom 1, no pan).
fn on_canvas(d: &Driver, x: f64, y: f64) -> (f64, f64) {
    let r = d.js("const r = document.querySelector('#cy').getBoundingClientRect(); return [Math.floor(r.left), Math.floor(r.top)];", json!([]));
    (r[0].as_f64().unwrap() + x, r[1].as_f64().unwrap() + y)
}

fn draw(d: &Driver) {
    d.js("hordeEditor.cy.zoom(1); hordeEditor.cy.pan({x: 0, y: 0});", json!([]));
    let place = |tool: &str, x: f64, y: f64| {
        d.click(&format!("#palette button[data-tool={tool}]"));
        d.click_at(on_canvas(d, x, y));
    };
    place("host", 100.0, 100.0);
    place("host", 100.0, 260.0);
    place("switch", 240.0, 180.0);
    place("router", 380.0, 180.0);
    place("host", 520.0, 180.0);
    d.click("#palette button[data-tool=link]");
    for (a, b) in [((100.0, 100.0), (240.0, 180.0)), ((100.0, 260.0), (240.0, 180.0)), ((240.0, 180.0), (380.0, 180.0)), ((380.0, 180.0), (520.0, 180.0))] {
        d.drag(on_canvas(d, a.0, a.1), on_canvas(d, b.0, b.1));
    }
    let counts = d.js("return [hordeEditor.model.node.length, hordeEditor.model.link.length];", json!([]));
    assert_eq!(counts, json!([5, 4]), "five nodes placed by clicks, four links drawn by drags");
    // select the router–h3 link and give it 10 ms each way
    d.click("#palette button[data-tool=select]");
    d.click_at(on_canvas(d, 450.0, 180.0));
    d.wait_for("the link's panel", "return !!document.querySelector('input[name=\"both-delay\"]');", Duration::from_secs(5));
    d.fill("input[name=\"both-delay\"]", "10ms");
    d.click("#link-apply");
}

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn the_console_in_a_real_browser() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    // a real browser with 10-s waits: beside the whole suite it once waited longer
    let _share = horde_testkit::share(horde_testkit::Load::Heavy);
    let Some((chromium, chromedriver)) = browser() else {
        horde_testkit::skip("no chromium/chromedriver here; .ci/run installs them");
        return;
    };
    let dir = Scratch::new("ui-browser");
    let runs = dir.path("runs");
    let c = console(&runs);
    let d = Driver::start(&chromium, &chromedriver, &dir.path("profile"));
    let shots = shots();
    d.go(&format!("http://{}/?token={}", c.addr, c.token));
    d.wait_for("the page", "return !!window.hordeEditor && !!document.querySelector('#tab-topo');", Duration::from_secs(10));
    // the token left the address bar for the tab's session storage, and no cookie holds it
    assert_eq!(d.js("return location.search;", json!([])), json!(""));
    assert_eq!(d.js("return document.cookie;", json!([])), json!(""));
    nothing_reaches_another_server(&d, &c.token);

    // 1. Draw, set a delay, save: the file equals the fixture.
    d.click("#tab-topo");
    draw(&d);
    d.fill("#topo-name", "lab");
    d.fill("#topo-save-name", "browser-lab");
    d.click("#topo-save");
    d.wait_for("the save", "return document.querySelector('#topo-status').textContent.startsWith('saved');", Duration::from_secs(10));
    d.screenshot(&shots.join("1-drawn.png"));
    let saved = runs.join("topologies/browser-lab.toml");
    let fixture = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ui-topology.toml")).unwrap();
    assert_eq!(std::fs::read_to_string(&saved).unwrap(), fixture, "the saved TOML is the fixture");

    // 2. Reopen it: the same model, the same file.
    d.click("#topo-new");
    d.wait_for("a new topology", "return hordeEditor.model.node.length === 0;", Duration::from_secs(5));
    d.js("const s = document.querySelector('#topo-files'); s.value = arguments[0];", json!([saved.display().to_string()]));
    d.click("#topo-open");
    d.wait_for("the reopened file", "return hordeEditor.model.node.length === 5 && hordeEditor.model.link.length === 4;", Duration::from_secs(10));
    let toml = d.js("return hordeEditor.checked.toml;", json!([]));
    assert_eq!(toml.as_str().unwrap(), fixture, "reopened, it renders to the same TOML");
    assert_eq!(d.js("return document.querySelector('#topo-error').textContent;", json!([])), "", "it plans");
    d.screenshot(&shots.join("2-reopened.png"));

    // 3. Up, a round-trip flow, a live change of the router link, down.
    live_change(&d, &dir, &shots);

    // 4. A 300-player WoW run: charts advance, the target goes to 600, stop, report.
    // started from the form made from the scenario file's schema
    d.click("#tab-runs");
    d.click("#form-start summary");
    for (field, v) in [
        ("name", "browser-wow"),
        ("service", "wow"),
        ("players", "600"),
        ("online", "300"),
        ("duration", "60s"),
        ("seed", "7"),
        ("join", "uniform(0, 2)"),
        ("spin_us", "0"),
    ] {
        d.fill(&format!("#start-form input[name={field}]"), v);
    }
    d.screenshot(&shots.join("4-form.png"));
    d.click("#form-go");
    d.wait_for(
        "300 players online",
        "return !!current && current.data.players.length > 0 && current.data.players[0].slice(-1)[0] === 300;",
        Duration::from_secs(30),
    );
    let n = d.js("return current.data.t.length;", json!([])).as_u64().unwrap();
    d.wait_for("the charts to advance", &format!("return current.data.t.length >= {};", n + 2), Duration::from_secs(10));
    let delays = d.js("return current.data.down50.filter(x => x !== null).length > 0 && current.data.up99.filter(x => x !== null).length > 0;", json!([]));
    assert_eq!(delays, json!(true), "the delay chart has both directions");
    let rows = d.js("return document.querySelectorAll('#categories tbody tr').length;", json!([]));
    assert_eq!(rows, json!(6), "a row per WoW category, measured against the model");
    // loss each way, a second of departures 3 s after it: none on loopback TCP
    d.wait_for(
        "the loss chart",
        "return !!current.charts.loss && current.data.loss.t.length > 0 && !document.querySelector('#loss-figure').hidden;",
        Duration::from_secs(10),
    );
    let lost = d.js("return current.data.loss.up.concat(current.data.loss.down).filter(x => x !== 0 && x !== null).length;", json!([]));
    assert_eq!(lost, json!(0), "nothing lost on loopback");
    d.fill("#online input[name=online]", "600");
    d.click("#online button");
    d.wait_for("600 players online", "return current.data.players[0].slice(-1)[0] === 600;", Duration::from_secs(15));
    // an applied command shows its instant on the run's clock, beside the form and in Notes,
    // and marks the live charts (from the run's reply on its event stream)
    d.wait_for("the command's mark", "return current.marks.length > 0 && current.marks[0].t > 0;", Duration::from_secs(10));
    // the delay chart on a log axis, and what a chart shows as CSV (issue 65)
    d.click("#delay-log");
    assert_eq!(d.js("return current.charts.delay.scales.y.distr;", json!([])), json!(3), "a logarithmic delay axis");
    let csv = d.js("return chartCsv(current.charts.delay).split('\\n');", json!([]));
    let lines: Vec<&str> = csv.as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(lines[0].contains("\"up p50\"") && lines.len() > 3, "the chart's seconds as CSV: {lines:?}");
    let ok = d.js("return document.querySelector('#cmd-ok').textContent;", json!([]));
    assert!(ok.as_str().unwrap().starts_with("applied at t = "), "the applied command's instant is shown: {ok}");
    // a refused one shows the run's reason, not the HTTP status text (issue 65)
    d.fill("#online input[name=online]", "50000");
    d.click("#online button");
    d.wait_for("the refusal", "return document.querySelector('#cmd-error').textContent.length > 0;", Duration::from_secs(15));
    let refused = d.js("return document.querySelector('#cmd-error').textContent;", json!([])).as_str().unwrap().to_string();
    assert!(refused.contains("50000") && refused.contains("limit") && !refused.contains("Conflict"), "the reason is shown: {refused}");
    let notes = d.js("return document.querySelector('#notes').textContent;", json!([])).as_str().unwrap().to_string();
    assert!(notes.contains("players → 600 applied at t = ") && notes.contains("players → 50000 refused: "), "both answers are in Notes: {notes}");
    d.screenshot(&shots.join("5-run.png"));
    d.js("document.querySelector('#run-title').scrollIntoView();", json!([]));
    d.screenshot(&shots.join("5b-refused.png"));
    d.click("#stop");
    d.wait_for("the run to finish", "return current.info.state === 'finished';", Duration::from_secs(60));
    // stopped on purpose: said so, not "finished (exit 130)" in red (issue 48)
    d.wait_for("the stop said as such", "return document.querySelector('#run-state').textContent.includes('stopped by a command');", Duration::from_secs(10));
    // the report opens in a new tab with a one-time ticket (a tab cannot send the header)
    let href = d.js("return document.querySelector('#run-state a').getAttribute('href');", json!([]));
    let ticket = d.js(
        "const x = new XMLHttpRequest(); x.open('POST', '/api/v1/tickets', false); x.setRequestHeader('Authorization', 'Bearer ' + sessionStorage.getItem('horde_token')); x.setRequestHeader('Content-Type', 'application/json'); x.send(JSON.stringify({ path: arguments[0] })); return JSON.parse(x.responseText).ticket;",
        json!([href]),
    );
    d.go(&format!("http://{}{}?ticket={}", c.addr, href.as_str().unwrap(), ticket.as_str().unwrap()));
    d.wait_for("the report", "return document.body.textContent.includes('stopped');", Duration::from_secs(10));
    d.screenshot(&shots.join("6-report.png"));
    // Bots against a game server the run starts: the response-time chart fills
    d.go(&format!("http://{}/", c.addr));
    d.wait_for("the page again", "return typeof current !== 'undefined' && !!document.querySelector('#start-bots');", Duration::from_secs(10));
    d.click("#bots-start summary");
    d.fill("#start-bots input[name=players]", "4");
    d.fill("#start-bots input[name=duration]", "4s");
    d.fill("#start-bots input[name=ramp]", "1s");
    d.click("#start-bots button");
    d.wait_for("the bots' chart", "return !!current && !!current.charts.bots && current.data.b50.some(x => x !== null);", Duration::from_secs(30));
    d.screenshot(&shots.join("7-bots.png"));
    d.wait_for("the bots run to finish", "return current.info.state === 'finished' && current.info.exit === 0;", Duration::from_secs(60));
    // A regulated run (circuits): the throttles' chart fills
    d.go(&format!("http://{}/", c.addr));
    d.wait_for("the page again", "return typeof current !== 'undefined' && !!document.querySelector('#start');", Duration::from_secs(10));
    let reg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/opensim-regulated.toml");
    d.fill("#start input[name=scenario]", reg.to_str().unwrap());
    d.fill("#start input[name=players]", "6");
    d.fill("#start input[name=duration]", "12s");
    d.click("#start button");
    d.wait_for(
        "the circuits' chart",
        "return !!current && !!current.charts.circuits && current.data.cmed.some(x => x !== null) && !document.querySelector('#circuits-figure').hidden;",
        Duration::from_secs(30),
    );
    d.screenshot(&shots.join("8-circuits.png"));
    d.click("#stop");
    d.wait_for("the regulated run to finish", "return current.info.state === 'finished';", Duration::from_secs(60));
    // the refusal asked for above is the browser's one logged failure (its 409)
    // (and the favicon the browser asked of the other server, gone after its one answer)
    let errors: Vec<String> = d.errors().into_iter().filter(|e| (!e.contains("/commands") || !e.contains("409")) && !e.contains("/favicon.ico")).collect();
    assert!(errors.is_empty(), "the page logged errors: {errors:?}");
    nothing_reaches_another_server(&d, &c.token);
    eprintln!("screenshots: {}", shots.display());
}

/// Issue 66: another web server on 127.0.0.1 (another port) that the browser visits after the
/// console receives no cookie and nothing of the token.
fn nothing_reaches_another_server(d: &Driver, token: &str) {
    use std::io::{Read as _, Write as _};
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = other.local_addr().unwrap().port();
    let served = std::thread::spawn(move || {
        let (mut s, _) = other.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut b).unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&b[..n]);
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 22\r\nConnection: close\r\n\r\n<p id=other>other</p>\n");
        String::from_utf8_lossy(&head).into_owned()
    });
    let back = d.js("return location.href;", json!([]));
    d.go(&format!("http://127.0.0.1:{port}/"));
    let head = served.join().unwrap();
    assert!(!head.to_ascii_lowercase().contains("\ncookie:"), "another server on 127.0.0.1 received a cookie: {head}");
    assert!(!head.contains(token), "another server received the token: {head}");
    d.go(back.as_str().unwrap());
}

fn live_change(d: &Driver, dir: &Scratch, shots: &Path) {
    d.click("#topo-up");
    d.wait_for("the experiment to come up", "return !!hordeEditor.exp && !!hordeEditor.detail;", Duration::from_secs(120));
    let exp = d.js("return hordeEditor.exp;", json!([])).as_str().unwrap().to_string();
    let h3 = d.js("return hordeEditor.detail.nodes.find(n => n.name === 'h3').addrs[0];", json!([])).as_str().unwrap().to_string();
    let _down = Down(exp.clone());
    // h3 echoes; h1 measures round trips at 50 packets/s for 12 s
    let mut recv = std::process::Command::new(HORDE)
        .args(["emu", "exec", &exp, "h3", "--", HORDE, "recv", "--udp", "9000", "--bind", "0.0.0.0", "-t", "20s"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let log = dir.path("rtt.hlog");
    let dst = format!("{h3}:9000");
    let mut send = std::process::Command::new(HORDE)
        .args(["emu", "exec", &exp, "h1", "--", HORDE, "send", "--dst", &dst, "--rate", "50", "--size", "64", "-t", "12s", "--meter", "rtt", "--log"])
        .arg(&log)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    // the router link in the panel: 10 ms → 60 ms each way
    d.click("#palette button[data-tool=select]");
    d.click_at(on_canvas(d, 450.0, 180.0));
    d.wait_for("the live panel", "return !!document.querySelector('input[name=\"live-delay\"]');", Duration::from_secs(5));
    d.fill("input[name=\"live-delay\"]", "60ms");
    let asked = unix_ns();
    d.click("#live-apply");
    d.wait_for("the change", "return document.querySelector('#live-out').textContent.startsWith('changed');", Duration::from_secs(10));
    let changed = unix_ns();
    d.wait_for(
        "live counters",
        "return Object.keys(hordeEditor.rates).length > 0 && document.querySelector('#live-counters') !== null;",
        Duration::from_secs(5),
    );
    std::thread::sleep(Duration::from_secs(2));
    d.screenshot(&shots.join("3-live.png"));
    assert!(send.wait().unwrap().success());
    let _ = recv.kill();
    let _ = recv.wait();
    // Round trips by send time: before the change, and from 3 s after it was asked for.
    let recs = records(&log);
    let rtt = |from: u64, to: u64| -> Vec<f64> {
        recs.iter().filter(|r| r.kind == horde_wire::RecordKind::Echoed && r.t_a >= from && r.t_a < to).map(|r| (r.t_b - r.t_a) as f64 / 1e6).collect()
    };
    let median = |mut v: Vec<f64>| {
        assert!(v.len() >= 20, "round trips measured: {}", v.len());
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let before = median(rtt(0, asked));
    let after = rtt(asked + 3_000_000_000, u64::MAX);
    let slowest_after = median(after.clone());
    let fastest_after = after.iter().copied().fold(f64::MAX, f64::min);
    eprintln!("rtt before {before:.1} ms, after {slowest_after:.1} ms (fastest {fastest_after:.1}); the change took {} ms", (changed - asked) / 1_000_000);
    assert!((19.0..30.0).contains(&before), "10 ms each way: {before} ms");
    assert!(fastest_after >= before + 95.0, "every round trip from 3 s after the change is +100 ms: {fastest_after} vs {before}");
    assert!(slowest_after < before + 110.0, "{slowest_after} vs {before}");
    d.click("#topo-down");
    d.wait_for("the experiment to go down", "return hordeEditor.exp === null;", Duration::from_secs(60));
}

/// Takes the experiment down even when the test fails.
struct Down(String);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = std::process::Command::new(HORDE).args(["emu", "down", &self.0, "--purge"]).output();
    }
}
