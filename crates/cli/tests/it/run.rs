//! Scenarios end to end: behaviour-driven two-way traffic, its fidelity to the model, the
//! report in a real browser, and the service/behaviour commands.

use crate::common::*;
use std::path::Path;

// Tests that judge timing (inter-arrival times against the model) take the whole machine
// (`Load::Quiet`): two traffic runs side by side on a 2-core machine share the CPUs, and
// receiver timestamps then carry the other run's scheduling delays, which is not what these
// tests measure.

/// Runs scenario `sc` into `out` and returns its summary.json.
fn run_scenario(sc: &Path, out: &Path) -> serde_json::Value {
    let o = run(horde().args(["run", sc.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]));
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// The cells whose size or inter-arrival KS distance exceeds `max`, with what the host took
/// from the run (steal, late departures) beside them.
fn misfits(s: &serde_json::Value, out: &Path, max: f64) -> Vec<String> {
    let mut bad = Vec::new();
    for c in s["analysis"]["categories"].as_array().unwrap() {
        for d in ["up", "down"] {
            let x = &c[d];
            for k in ["ks_size", "ks_iat"] {
                if x[k].as_f64().unwrap() > max {
                    bad.push(format!("{} {d}: {k} {} > {max} (n = {})", c["category"].as_str().unwrap(), x[k], x["iat_samples"]));
                }
            }
        }
    }
    if !bad.is_empty() {
        let host = |f: &str| -> String {
            let v: serde_json::Value = std::fs::read_to_string(out.join(f)).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
            format!("{f}: steal max {} late>1ms {}", v["host"]["steal_max"], v["host"]["late_total"])
        };
        bad.push(host("server.json"));
        bad.push(format!("client: lateness {}", s["client"]["lateness"]));
    }
    bad
}

/// The model fit of a timing-sensitive run, judged once more on a second run when the first
/// misses it: a stall of this shared 2-core VM during the run (seen in CI as one cell's IAT KS
/// 10× its usual value, every count exact) moves inter-arrival times, not the traffic. Every
/// other check holds on the first run; a fit missed twice fails.
fn fits_the_model(sc: &Path, dir: &Scratch, first: &serde_json::Value, max: f64) -> serde_json::Value {
    let bad = misfits(first, &dir.path("out"), max);
    if bad.is_empty() {
        return first.clone();
    }
    eprintln!("the model fit missed on the first run, running again:\n{}", bad.join("\n"));
    let again = run_scenario(sc, &dir.path("out2"));
    let bad2 = misfits(&again, &dir.path("out2"), max);
    assert!(bad2.is_empty(), "the model fit missed twice:\nfirst run:\n{}\nsecond run:\n{}", bad.join("\n"), bad2.join("\n"));
    again
}

/// The WoW service with every category equally likely first and a fixed hour, so a short run
/// has thousands of APDUs in every category and direction.
fn balanced_wow(dir: &Path) -> std::path::PathBuf {
    let out = run(horde().args(["services", "show", "wow"]));
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let start = text.find("[first_by_hour]").unwrap();
    let end = start + text[start..].find("\n\n").unwrap();
    let mut t = format!("{}{}", &text[..start], &text[end..]);
    t = t.replace("hour_advances = true", "hour_advances = false\nfirst = [1, 1, 1, 1, 1, 1]");
    let p = dir.join("wow-balanced.toml");
    std::fs::write(&p, t).unwrap();
    p
}

/// Fidelity (acceptance): for each WoW category and direction, the KS distance between the APDU
/// sizes / inter-arrival times measured from the receiver's logs and the model is at most 0.03
/// with at least 1,000 samples. 900 players for 30 s give 2,500–60,000 samples per cell, so KS noise alone
/// is below 0.02; the tag, timestamp or framing bugs this test exists for move KS far more.
/// (Not shorter: a run of T seconds sees a gap of x with odds (T − x)/T, and uncategorized up's
/// multi-second gaps then pull its IAT KS past 0.03 — 0.035 at 1,800 players for 15 s.)
/// Inter-arrival times are compared at the model's 1 ms resolution (see horde_stats::game).
#[test]
fn wow_traffic_matches_the_model_in_every_category_and_direction() {
    let _share = horde_testkit::share(horde_testkit::Load::Whole); // KS of inter-arrival times at the model's millisecond
    let dir = Scratch::new("fidelity");
    let svc = balanced_wow(&dir.0);
    let sc = dir.path("sc.toml");
    std::fs::write(&sc, format!("service = '{}'\nplayers = 900\nduration = '30s'\nseed = 3\nstart_hour = 20\n", svc.display())).unwrap();
    let first = run_scenario(&sc, &dir.path("out"));
    let s = fits_the_model(&sc, &dir, &first, 0.03);
    let cats = first["analysis"]["categories"].as_array().unwrap();
    assert_eq!(cats.len(), 6);
    let mut report = String::new();
    for c in cats {
        for d in ["up", "down"] {
            let x = &c[d];
            let name = format!("{} {d}", c["category"].as_str().unwrap());
            report.push_str(&format!("{name}: n={} ks_size={} ks_iat={} lost={}\n", x["received"], x["ks_size"], x["ks_iat"], x["lost"]));
            assert!(x["size_samples"].as_u64().unwrap() >= 1000, "{name}: too few samples\n{report}");
            assert!(x["iat_samples"].as_u64().unwrap() >= 1000, "{name}: too few intervals\n{report}");
            assert_eq!(x["lost"], 0, "{name}: every APDU sent was received\n{report}");
            assert_eq!(x["sent"], x["received"], "{name}\n{report}");
        }
    }
    eprintln!("{report}");
    for r in [&first, &s] {
        assert_eq!(r["server_connections"], 900, "every player connected");
        assert_eq!(r["mismatched"], 0, "every APDU matched the sender's regenerated schedule");
    }
}

#[test]
fn the_report_renders_in_a_real_browser() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // a browser
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| std::process::Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()));
    let Some(chromium) = chromium else {
        horde_testkit::skip("no chromium here; .ci/run installs it");
        return;
    };
    let dir = Scratch::new("browser");
    let out = run(horde().args(["demo", "-t", "5s", "--players", "150", "--quiet", "--out", dir.path("demo").to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    let page = format!("file://{}", dir.path("demo/index.html").display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ];
    let profile = format!("--user-data-dir={}", dir.path("profile").display());
    let dom = std::process::Command::new(chromium).args(common).arg(&profile).args(["--dump-dom", &page]).output().unwrap();
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    let log = String::from_utf8_lossy(&dom.stderr);
    let charts = std::fs::read_dir(dir.path("demo/charts")).unwrap().count();
    assert!(charts >= 30, "occupancy, throughput, delay and loss over time, two delay CDFs, 24 distribution charts: {charts}");
    assert!(
        dom_text.contains(&format!("[charts drawn: {charts}/{charts}]")),
        "the page's own check did not pass: {}",
        dom_text.lines().find(|l| l.contains("<title>")).unwrap_or("")
    );
    for id in ["delay-over-time.svg", "loss-over-time.svg", "delay-cdf-up.svg", "delay-cdf-down.svg"] {
        assert!(dom_text.contains(&format!("id=\"{id}\"")), "the report has the {id} chart");
    }
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    let shot = dir.path("shot.png");
    let s = std::process::Command::new(chromium)
        .args(common)
        .arg(&profile)
        .args(["--window-size=1400,2000", &format!("--screenshot={}", shot.display()), &page])
        .output()
        .unwrap();
    assert!(s.status.success());
    // The screenshot is kept as an artefact of the test run: target/tmp/report-screenshot.png.
    let artefact = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    std::fs::copy(&shot, &artefact).unwrap();
    eprintln!("report screenshot: {}", artefact.display());
    let decoder = png::Decoder::new(std::fs::File::open(&shot).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    let non_white = pixels.iter().filter(|p| p[..3].iter().any(|c| *c < 240)).count();
    let colours: std::collections::HashSet<&[u8]> = pixels.iter().map(|p| &p[..3]).collect();
    assert!(non_white as f64 / pixels.len() as f64 > 0.02, "screenshot nearly blank: {non_white} non-white pixels");
    // The chart lines' colours (blue measured, red model) are on the page.
    let has = |r: u8, g: u8, b: u8| pixels.iter().any(|p| p[0].abs_diff(r) < 30 && p[1].abs_diff(g) < 30 && p[2].abs_diff(b) < 30);
    assert!(has(0x1f, 0x77, 0xb4) && has(0xd6, 0x27, 0x28), "chart lines not visible ({} colours)", colours.len());
}

#[test]
fn bad_scenarios_name_the_field() {
    let dir = Scratch::new("badsc");
    let cases = [
        ("service = 'doom'\nplayers = 1\nduration = '1s'\n", "service: "),
        ("service = 'wow'\nplayers = 1\nduration = '1s'\njoin = 'weibul(1, 2)'\n", "join: unknown distribution `weibul`"),
        ("service = 'wow'\nplayers = 0\nduration = '1s'\n", "players: must be 1.."),
        ("service = 'wow'\nplayers = 5\nduration = 'soon'\n", "duration: "),
        ("service = 'wow'\nplayers = 5\nduration = '1s'\n[variables]\nM = 3\n", "variables.M: service `wow` has no variable `M`"),
        ("service = 'wow'\nplayers = 5\nduration = '1s'\nplayerz = 3\n", "unknown field `playerz`"),
        ("service = 'wow'\nplayers = 5\nduration = '1s'\nstart_hour = 24\n", "start_hour: must be in 0..24"),
    ];
    for (body, needle) in cases {
        let f = dir.path("s.toml");
        std::fs::write(&f, body).unwrap();
        let out = run(horde().args(["run", f.to_str().unwrap(), "--quiet"]));
        assert_eq!(out.status.code(), Some(2), "{body}: {}", text(&out));
        assert!(text(&out).contains(needle), "{body}: expected `{needle}` in {}", text(&out));
    }
    let out = run(horde().args(["run", "/nonexistent/scenario.toml"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("cannot read"));
}

#[test]
fn behave_writes_segments_and_a_checkable_summary() {
    let dir = Scratch::new("behave");
    let csv = dir.path("seg.csv");
    let out = run(horde().args([
        "behave",
        "--players",
        "200",
        "--duration",
        "2h",
        "--seed",
        "4",
        "--out",
        csv.to_str().unwrap(),
        "--summary-json",
        dir.path("sum.json").to_str().unwrap(),
    ]));
    assert!(out.status.success(), "{}", text(&out));
    let seg = std::fs::read_to_string(&csv).unwrap();
    let mut lines = seg.lines();
    assert_eq!(lines.next(), Some("player,category,sub_activity,start_s,end_s,complete,hour"));
    let rows: Vec<&str> = lines.collect();
    assert!(rows.len() > 200);
    assert!(rows.iter().any(|r| r.contains(",pvp,")
        && (r.contains("arena") || r.contains("gulch") || r.contains("basin") || r.contains("valley") || r.contains("storm") || r.contains("strand"))));
    let sum: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path("sum.json")).unwrap()).unwrap();
    let share: f64 = sum["states"].as_array().unwrap().iter().map(|s| s["time_share"].as_f64().unwrap()).sum();
    assert!((share - 1.0).abs() < 1e-9);
    // same seed, same output
    let again = dir.path("seg2.csv");
    assert!(run(horde().args(["behave", "--players", "200", "--duration", "2h", "--seed", "4", "--out", again.to_str().unwrap()])).status.success());
    assert_eq!(seg, std::fs::read_to_string(&again).unwrap());
    let out = run(horde().args(["behave", "--service", "nope"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("no built-in service `nope`"));
}

#[test]
fn services_lists_shows_and_checks() {
    let out = run(horde().args(["services"]));
    let t = text(&out);
    for name in ["wow", "wow-sessions", "quake3", "quake3-ditg", "counter-strike", "ngmn-gaming", "rta-mobile-gaming", "voip", "opensim"] {
        assert!(t.contains(name), "{name} missing from: {t}");
    }
    let out = run(horde().args(["services", "show", "wow"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("[transitions_by_hour.23]"));
    let dir = Scratch::new("svccheck");
    let f = dir.path("bad.toml");
    std::fs::write(&f, String::from_utf8_lossy(&run(horde().args(["services", "show", "voip"])).stdout).replace("constant(92)", "constant(nan)")).unwrap();
    let out = run(horde().args(["services", "check", f.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("state.call.up.size"), "{}", text(&out));
}

/// Players who come and go: `behave` shows a day of logins and logouts against the diurnal
/// model, and the example scenario runs with only part of its subscribers online.
#[test]
fn wow_sessions_log_in_and_out_by_the_hour() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let out = run(horde().args(["behave", "-s", "wow-sessions", "-n", "3000", "-t", "24h", "--start-hour", "0", "--summary-json", "-"]));
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("logins per hour vs the model: chi-square"), "{}", text(&out));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ss = &s["sessions"];
    assert_eq!(ss["model"], "diurnal");
    assert_eq!(ss["observed"]["logins"].as_array().unwrap().len(), 24);
    assert_eq!(ss["logins_test"]["fits"], true, "{ss}");
    assert_eq!(ss["logins_test"]["alpha"], 0.001);
    let logins: f64 = ss["observed"]["logins"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).sum();
    assert!(logins > 1000.0, "{logins} logins in a day of 3,000 subscribers");
    // `wow` keeps every player for the whole run: no sessions table.
    let out = run(horde().args(["behave", "-n", "10", "-t", "10m", "--summary-json", "-"]));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(s.get("sessions").is_none());

    let dir = Scratch::new("diurnal");
    let ex = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/wow-diurnal.toml");
    let out = run(horde().args(["run", ex, "--duration", "8s", "--players", "1500", "--quiet", "--out", dir.path("out").to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path("out/summary.json")).unwrap()).unwrap();
    // Only the subscribers with a session in the run connect: about 12 % are online at 19:00.
    let conns = s["server_connections"].as_u64().unwrap();
    assert!((60..400).contains(&conns), "{conns} of 1,500 connected");
    assert_eq!(s["mismatched"], 0);
    let cats = s["analysis"]["categories"].as_array().unwrap();
    assert_eq!(cats.iter().map(|c| c["up"]["lost"].as_u64().unwrap() + c["down"]["lost"].as_u64().unwrap()).sum::<u64>(), 0);
    let online = cats.iter().map(|c| c["player_seconds"].as_f64().unwrap()).sum::<f64>() / 8.0;
    assert!((60.0..400.0).contains(&online), "{online:.0} of 1,500 online on average");
}

/// A ramp: players join over the first seconds (connecting only then), and every one of them is
/// served in full.
#[test]
fn players_can_join_over_time() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("ramp");
    let sc = dir.path("ramp.toml");
    std::fs::write(&sc, "service = 'wow'\nplayers = 200\nduration = '8s'\nseed = 2\njoin = 'uniform(0, 5)'\n").unwrap();
    let out = run(horde().args(["run", sc.to_str().unwrap(), "--quiet", "--out", dir.path("out").to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path("out/summary.json")).unwrap()).unwrap();
    assert_eq!(s["server_connections"], 200);
    assert_eq!(s["mismatched"], 0);
    let cats = s["analysis"]["categories"].as_array().unwrap();
    assert_eq!(cats.iter().map(|c| c["up"]["lost"].as_u64().unwrap() + c["down"]["lost"].as_u64().unwrap()).sum::<u64>(), 0);
    // The population grows: few players at the start, all of them after the ramp.
    let occ = s["analysis"]["occupancy"].as_array().unwrap();
    let total = |i: usize| occ[i][1].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).sum::<u64>();
    assert!(total(0) < 20, "{} players at t=0", total(0));
    assert_eq!(total(occ.len() - 1), 200);
    // No player sent anything before it joined: its first APDU comes after the ramp's share.
    let recs = records(&dir.path("out/client.hlog"));
    let t0 = s["client"]["t0_real_ns"].as_u64().unwrap();
    let early = recs
        .iter()
        .filter(|r| r.kind == horde_wire::RecordKind::Sent && r.t_b < t0 + 1_000_000_000)
        .map(|r| r.tag >> 8)
        .collect::<std::collections::HashSet<_>>();
    assert!(early.len() < 60, "{} players sent in the first second of a 5 s ramp", early.len());
    std::fs::write(&sc, "service = 'wow'\nplayers = 5\nduration = '1s'\njoin = 'uniform(5, 1)'\n").unwrap();
    let out = run(horde().args(["run", sc.to_str().unwrap(), "--quiet"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("join: uniform: max must be > min"), "{}", text(&out));
}

/// UDP services run two-way too: a hello datagram per player, server datagrams back to the
/// player's address, every datagram accounted for and matching the regenerated schedules.
#[test]
fn udp_services_run_both_ways() {
    let _share = horde_testkit::share(horde_testkit::Load::Whole); // a busy-waiting pacer's ticks, rates within 3 % of the model
    let dir = Scratch::new("udprun");
    let sc = dir.path("cs.toml");
    // A busy-waiting pacer (spin_us): Counter-Strike's client ticks put most inter-arrival
    // times on a few 1-ms bins, so a sleeping pacer's wake-up lateness on a noisy 2-core host
    // moved enough of them across a bin edge to fail the fit (KS 0.03–0.06 in 2 of 5 runs here,
    // 2026-11-26) with no fault in the traffic.
    std::fs::write(&sc, "service = 'counter-strike'\nplayers = 200\nduration = '6s'\nseed = 4\nspin_us = 300\n").unwrap();
    let first = run_scenario(&sc, &dir.path("out"));
    assert_eq!(first["server_connections"], 200);
    assert_eq!(first["mismatched"], 0);
    for c in first["analysis"]["categories"].as_array().unwrap() {
        for d in ["up", "down"] {
            let x = &c[d];
            let name = format!("{} {d}", c["category"].as_str().unwrap());
            assert!(x["received"].as_u64().unwrap() > 1000, "{name}: {x}");
            assert_eq!(x["lost"], 0, "{name}");
        }
    }
    let s = fits_the_model(&sc, &dir, &first, 0.03);
    // Idle players' client IDT is a Student-t clamped at 0: the model's rate is finite (ν > 1).
    let idle = &s["analysis"]["categories"][1]["up"];
    assert!(idle["rate_error_pct"].as_f64().unwrap().abs() < 3.0, "{idle}");
}

/// Issue 21: Ctrl-C from a terminal reaches the whole process group (the run and its server
/// side child) at any moment; with `--progress json` the report was lost in 6 of 19 tries.
/// Every interruption must leave a report and exit 130.
#[test]
fn ctrl_c_to_the_process_group_at_any_point_leaves_a_report() {
    use std::os::unix::process::CommandExt as _;
    // Alone: the interruptions land at fixed instants of the start-up, whose phases stretch on
    // a loaded machine — and a run started beside others landed where the server child had not
    // yet said where it listens, and ended with exit 1 and no report (the child's start-up
    // under Ctrl-C, in issue 46's hands: text between our own processes).
    let _share = horde_testkit::share(horde_testkit::Load::Whole);
    let dir = Scratch::new("ctrl-c");
    let sc = dir.path("sc.toml");
    std::fs::write(&sc, "name = \"ctrlc\"\nservice = \"wow\"\nplayers = 60\nduration = \"20s\"\nseed = 2\nspin_us = 0\n").unwrap();
    for (k, after_ms) in [150u64, 900, 2_500].into_iter().enumerate() {
        let out = dir.path(&format!("out{k}"));
        let child = horde()
            .args(["run", sc.to_str().unwrap(), "--progress", "json", "-o", out.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        // SAFETY: signalling the group we just made.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "after {after_ms} ms: {}", String::from_utf8_lossy(&o.stderr));
        assert!(out.join("summary.json").exists() && out.join("index.html").exists(), "no report after Ctrl-C at {after_ms} ms");
    }
}

/// A run started with part of its players online on purpose is not a failure (issue 48): the
/// "players connected" verdict counts those the online target asked for.
#[test]
fn a_run_started_below_its_pool_expects_only_those_online() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("online-part");
    let ex = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/wow.toml");
    let out = run(horde().args(["run", ex, "-n", "20", "--online", "10", "-t", "4s", "--quiet", "--out", dir.path("out").to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path("out/summary.json")).unwrap()).unwrap();
    assert_eq!(s["asked_online"], 10);
    let v = s["verdicts"].as_array().unwrap().iter().find(|v| v["label"] == "players connected").unwrap();
    assert!(v["ok"] == true && v["value"] == "10 of 10" && v["limit"].as_str().unwrap().contains("of the 20 planned"), "{v}");
}
