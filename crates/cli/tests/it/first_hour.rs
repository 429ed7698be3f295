//! The first hour of a new user (issue 13): each rough edge a new user hit, as a test.

use crate::common::*;

/// `--json -` / `--csv -` put only machine output on standard output, so `| jq` works.
#[test]
fn machine_output_is_alone_on_stdout() {
    let dir = Scratch::new("fh-stdout");
    let rx = Recv::start(&["--udp", "0", "--log", dir.path("r.hlog").to_str().unwrap()]);
    let dst = rx.addrs[0].to_string();
    let s = run(horde().args(["send", "--dst", &dst, "--rate", "200", "--size", "64", "--packets", "50", "--log", dir.path("s.hlog").to_str().unwrap()]));
    assert!(s.status.success(), "{}", text(&s));
    rx.stop();
    let logs = [dir.path("s.hlog"), dir.path("r.hlog")];
    let o = run(horde().arg("decode").args(&logs).args(["--json", "-"]));
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("standard output is exactly the JSON");
    assert_eq!(v["total"]["packets"], 50);
    assert!(String::from_utf8_lossy(&o.stderr).contains("flow"), "the table went to standard error");
    let o = run(horde().arg("decode").args(&logs).args(["--csv", "-"]));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.starts_with("flow,packets,") && out.lines().count() == 3, "header, the flow, the total: {out}");
    let o = run(horde().arg("decode").args(&logs).args(["--csv", "-", "--json", "-"]));
    assert_eq!(o.status.code(), Some(2), "two machine outputs cannot share standard output");
    // behave: stays on stdout, the summary on stderr.
    let o = run(horde().args(["behave", "-n", "20", "-t", "1h", "--out", "-"]));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.lines().all(|l| l.starts_with("player,") || l.split(',').count() == 7), "only CSV rows on stdout");
    assert!(String::from_utf8_lossy(&o.stderr).contains("model share"));
}

/// A 24-hour behaviour run is compared with the model over the hours it covered (it was the
/// start hour's alone: raiding "off" by +56 %).
#[test]
fn a_multi_hour_behave_summary_compares_with_the_hours_it_covered() {
    let o = run(horde().args(["behave", "-n", "1500", "-t", "24h", "--start-hour", "0", "--summary-json", "-"]));
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for s in v["states"].as_array().unwrap() {
        let (got, model) = (s["time_share"].as_f64().unwrap(), s["model_share"].as_f64().unwrap());
        assert!((got - model).abs() < 0.015, "{}: {got} vs {model}", s["state"]);
    }
}

/// One flag vocabulary: -t duration, -n players, -o out, -p port; old -d kept as an alias.
#[test]
fn flags_mean_the_same_everywhere() {
    for args in [["behave", "-n", "5", "-t", "10m"], ["behave", "-n", "5", "-d", "10m"]] {
        let o = run(horde().args(args));
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    for sub in ["demo", "run", "behave"] {
        let h = String::from_utf8(run(horde().args([sub, "--help"])).stdout).unwrap();
        assert!(h.contains("-n, --players"), "{sub}: {h}");
        assert!(h.contains("-t, --duration"), "{sub}: {h}");
    }
    for sub in ["send", "recv"] {
        let h = String::from_utf8(run(horde().args([sub, "--help"])).stdout).unwrap();
        assert!(h.contains("-t, --duration"), "{sub}");
    }
    let h = String::from_utf8(run(horde().args(["recv", "--help"])).stdout).unwrap();
    assert!(h.contains("-p, --port"));
}

/// Noise a new user saw: a doubled address, binary leftovers in presets, a citation of a file
/// that was not in the repository.
#[test]
fn output_without_noise() {
    let rx = Recv::start(&["--port", "0"]);
    let (_, err) = rx.stop();
    let _ = err;
    let o = run(horde().args(["recv", "--udp", "0", "--tcp", "0", "-t", "100ms"]));
    let banner = String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").to_string();
    assert!(banner.contains("listening on udp 127.0.0.1:") && banner.contains(", tcp 127.0.0.1:"), "{banner}");
    let p = String::from_utf8(run(horde().arg("presets")).stdout).unwrap();
    assert!(!p.contains("99999") && !p.contains("00000001"), "presets print as written");
    assert!(p.contains("docs/models.md"));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(root.join("docs/models.md").is_file(), "what presets and services cite is in the repository");
    let wow = String::from_utf8(run(horde().args(["services", "show", "wow"])).stdout).unwrap();
    assert!(!wow.contains("shared/reference"));
}

/// Two senders that both call their flow 0 (no `--id-base`) into one receiver are two flows,
/// keyed by (source address and port, flow id), in `recv`'s report, in `decode` of the
/// receiver's log alone, and with the senders' logs joined: no duplicates, each flow's own
/// packets; the second one's row says which id the receiver's log keys it by.
#[test]
fn recv_and_decode_key_flows_by_source_and_flow_id() {
    let dir = Scratch::new("fh-windows");
    let rlog = dir.path("r.hlog");
    let json = dir.path("r.json");
    let rx = Recv::start(&["--udp", "0", "--log", rlog.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    let dst = rx.addrs[0].to_string();
    let slogs: Vec<_> = (0..2).map(|k| dir.path(&format!("s{k}.hlog"))).collect();
    let senders: Vec<_> = slogs
        .iter()
        .enumerate()
        .map(|(k, log)| {
            let size = (64 + 16 * k).to_string();
            horde()
                .args(["send", "--dst", &dst, "--rate", "1000", "--size", &size, "--packets", "800", "--log", log.to_str().unwrap()])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut s in senders {
        assert!(s.wait().unwrap().success());
    }
    rx.stop();
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flows = report["flows"].as_object().unwrap();
    assert_eq!(flows.len(), 2, "{report}");
    let sources: std::collections::BTreeSet<&str> = flows.values().map(|f| f["source"].as_str().unwrap()).collect();
    assert_eq!(sources.len(), 2, "{report}");
    assert!(flows.values().all(|f| f["packets"] == 800), "{report}");
    assert_eq!(flows.values().filter(|f| f["flow_id"] == 0).count(), 1, "the second source's flow names its sender's id: {report}");
    let rl = rlog.to_str().unwrap();
    for logs in [vec![rl], vec![slogs[0].to_str().unwrap(), slogs[1].to_str().unwrap(), rl]] {
        let o = run(horde().arg("decode").args(&logs).args(["--json", "-"]));
        assert!(o.status.success(), "{}", text(&o));
        let a: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let rows = a["flows"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{a}");
        assert!(rows.iter().all(|f| f["flow"] == 0 && f["packets"] == 800 && f["loss"]["duplicates"] == 0 && f["shared_id"].is_null()), "{a}");
        assert_eq!(rows.iter().filter(|f| f["id_in_log"].is_u64()).count(), 1, "{a}");
        let sizes: std::collections::BTreeSet<u64> = rows.iter().map(|f| f["max_size"].as_u64().unwrap()).collect();
        assert_eq!(sizes.len(), 2, "each row holds its own sender's packets: {a}");
        if logs.len() == 3 {
            assert!(rows.iter().all(|f| f["send_lateness"]["packets"] == 800), "each sender's departures joined to its own flow: {a}");
        }
    }
    let o = run(horde().args(["decode", rl, "--window", "200ms"]));
    let out = text(&o);
    assert!(out.contains("per 0.2 s window, all flows") && !out.contains("shared id"), "{out}");
}

/// A machine-readable event stream for dashboards: one JSON object per second, and the run's
/// other events (planned, notes) as lines of the same stream.
#[test]
fn progress_as_json_lines() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("fh-progress");
    let f = dir.path("progress.jsonl");
    let o = run(horde().args(["demo", "-t", "3s", "-n", "20", "--out", dir.path("d").to_str().unwrap(), "--progress-file", f.to_str().unwrap()]));
    assert!(o.status.success(), "{}", text(&o));
    let lines = progress_lines(&f);
    assert!((2..=4).contains(&lines.len()), "{} lines", lines.len());
    let planned = std::fs::read_to_string(&f).unwrap().lines().filter(|l| l.contains(r#""event":"planned""#)).count();
    assert_eq!(planned, 1, "the plan is a line of the stream");
    let last = &lines[lines.len() - 1]["progress"];
    assert!(last["sent_packets"].as_u64().unwrap() > 0 && last["down_pkt_s"].as_u64().unwrap() > 0, "{last}");
    let players: u64 = last["categories"].as_array().unwrap().iter().map(|c| c[1].as_u64().unwrap()).sum();
    assert_eq!(players, 20);
    // per category so far, on one machine too: from both sides' logs as they are written, and
    // never more than the report counts in the end
    let live = last["category_live"].as_array().unwrap_or_else(|| panic!("{last}"));
    let sum = |dir: &str, what: &str| live.iter().map(|c| c[dir][what].as_u64().unwrap()).sum::<u64>();
    assert!(sum("up", "sent") > 0 && sum("down", "received") > 0, "{last}");
    assert!(live.iter().any(|c| c["down"]["delay_p50_ms"].as_f64().is_some_and(|d| d > 0.0) && c["down"]["delay_p99_ms"].is_f64()), "{last}");
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path("d").join("summary.json")).unwrap()).unwrap();
    let report_sent: u64 = summary["analysis"]["categories"].as_array().unwrap().iter().map(|c| c["up"]["sent"].as_u64().unwrap()).sum();
    assert!(sum("up", "sent") <= report_sent, "{} so far, {report_sent} in the report", sum("up", "sent"));
}

/// `send --meter rtt` says what the round trips were.
#[test]
fn send_meter_rtt_prints_round_trips() {
    let rx = Recv::start(&["--udp", "0"]);
    let dst = rx.addrs[0].to_string();
    let o = run(horde().args(["send", "--dst", &dst, "--rate", "500", "--size", "64", "--packets", "200", "--meter", "rtt", "--json", "-"]));
    rx.stop();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("round trip: 200 echoes of 200 sent; min "), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rtt = &v["flows"][0]["rtt"];
    assert!(
        rtt["min_us"].as_f64().unwrap() > 0.0 && rtt["min_us"].as_f64() <= rtt["mean_us"].as_f64() && rtt["mean_us"].as_f64() <= rtt["max_us"].as_f64(),
        "{rtt}"
    );
}

/// With many flows, `decode --sort` puts the interesting ones in the table's first rows.
#[test]
fn decode_sorts_the_table() {
    let dir = Scratch::new("fh-sort");
    let rlog = dir.path("r.hlog");
    let rx = Recv::start(&["--udp", "0", "--log", rlog.to_str().unwrap()]);
    let dst = rx.addrs[0].to_string();
    for (base, n) in [("1", "50"), ("2", "300")] {
        let o = run(horde().args(["send", "--dst", &dst, "--rate", "2000", "--size", "64", "--packets", n, "--id-base", base]));
        assert!(o.status.success(), "{}", text(&o));
    }
    rx.stop();
    let first_row = |sort: &str| {
        let o = run(horde().args(["decode", rlog.to_str().unwrap(), "--max-flows", "1", "--sort", sort]));
        String::from_utf8(o.stdout).unwrap().lines().nth(1).unwrap().split_whitespace().next().unwrap().to_string()
    };
    assert_eq!(first_row("id"), "1");
    assert_eq!(first_row("packets"), "2", "the busiest flow first");
}

/// `decode --flows FILE` shows the flows' names from the file they came from.
#[test]
fn decode_names_flows_from_their_file() {
    let dir = Scratch::new("fh-names");
    let rlog = dir.path("r.hlog");
    let rx = Recv::start(&["--udp", "0", "--log", rlog.to_str().unwrap()]);
    let flows = dir.path("f.toml");
    std::fs::write(&flows, format!("[defaults]\ndst = \"{}\"\nduration = \"300ms\"\n[[flow]]\nname = \"voice\"\nrate = 100\nsize = 64\n[[flow]]\nname = \"game\"\nrate = 50\nsize = 80\n", rx.addrs[0])).unwrap();
    let o = run(horde().args(["send", "--flows", flows.to_str().unwrap()]));
    assert!(o.status.success(), "{}", text(&o));
    rx.stop();
    let o = run(horde().args(["decode", rlog.to_str().unwrap(), "--flows", flows.to_str().unwrap()]));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("voice") && out.contains("game"), "{out}");
    let o = run(horde().args(["decode", rlog.to_str().unwrap(), "--flows", flows.to_str().unwrap(), "--csv", "-"]));
    let csv = String::from_utf8(o.stdout).unwrap();
    assert!(csv.lines().nth(1).unwrap().contains(",voice,forward,127.0.0.1:"), "{csv}");
}

/// Errors say things once (`Connection refused (os error 111): Connection refused (os error 111)`).
#[test]
fn a_refused_connection_is_said_once() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let o = run(horde().args(["send", "-T", "tcp", "--dst", &format!("127.0.0.1:{port}"), "--rate", "10", "--size", "64", "--packets", "1"]));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
    assert!(err.contains("is `horde recv"), "says what to do: {err}");
}

/// A UDP flow to a port where nothing listens says so (ICMP port unreachable), not "no answer".
#[test]
fn a_udp_flow_to_a_closed_port_says_nothing_listens() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = s.local_addr().unwrap().port();
    drop(s);
    let o = run(horde().args(["send", "--dst", &format!("127.0.0.1:{port}"), "--rate", "10", "--size", "64", "--packets", "1"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("nothing listens on UDP") && text(&o).contains(&format!("horde recv --udp {port}")), "{}", text(&o));
}

/// `send --bulk` over TCP and UDP, with -P parallel flows: as fast as the path allows, every
/// APDU or datagram logged on both sides, and the logs decode like any flow's.
#[test]
fn send_bulk_tcp_and_udp_with_parallel_flows() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // a bulk or catching-up sender: a core
    let dir = Scratch::new("fh-bulk");
    for transport in ["tcp", "udp"] {
        let (slog, rlog) = (dir.path(&format!("s-{transport}.hlog")), dir.path(&format!("r-{transport}.hlog")));
        let rx = Recv::start(&["--udp", "0", "--tcp", "0", "--log", rlog.to_str().unwrap()]);
        let dst = if transport == "udp" { rx.addrs[0] } else { rx.addrs[1] }.to_string();
        let o = run(horde().args(["send", "-a", &dst, "-T", transport, "--bulk", "-P", "3", "-t", "500ms", "-l", slog.to_str().unwrap(), "--json", "-"]));
        assert!(o.status.success(), "{}", text(&o));
        let (code, _) = rx.stop();
        assert_eq!(code, 130);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("bulk throughput:") && !err.contains("lateness"), "{err}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["flows"].as_array().unwrap().len(), 3);
        assert!(v["flows"].as_array().unwrap().iter().all(|f| f["bulk"] == true && f["packets"].as_u64().unwrap() > 100), "{v}");
        assert!(v["duration_s"].as_f64().unwrap() <= 0.55, "the duration holds: {}", v["duration_s"]);
        let sent = v["packets"].as_u64().unwrap();
        let size = if transport == "udp" { 1472 } else { 65535 };
        assert_eq!(v["bytes"].as_u64().unwrap(), sent * size, "default bulk size over {transport}");
        let a = decode(&[&slog, &rlog]);
        assert_eq!(a["total"]["loss"]["sent"].as_u64(), Some(sent), "every departure logged");
        if transport == "tcp" {
            assert_eq!(a["total"]["packets"].as_u64(), Some(sent), "TCP delivers every APDU");
        }
        assert!(a["total"]["bitrate_bps"].as_f64().unwrap() > 1e8, "{transport}: {}", a["total"]["bitrate_bps"]);
    }
}

/// `send --reverse` (-R): the receiver sends bulk back while the keep-alives come; the
/// sender's log decodes as the reverse direction; `recv --no-reverse` refuses.
#[test]
fn send_reverse_gets_bulk_back_and_can_be_refused() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // a bulk or catching-up sender: a core
    let dir = Scratch::new("fh-reverse");
    let rx = Recv::start(&["--udp", "0", "--tcp", "0"]);
    for (transport, dst) in [("tcp", rx.addrs[1]), ("udp", rx.addrs[0])] {
        let slog = dir.path(&format!("s-{transport}.hlog"));
        let o = run(horde().args([
            "send",
            "-a",
            &dst.to_string(),
            "-T",
            transport,
            "-R",
            "-c",
            "1000",
            "-t",
            "600ms",
            "-l",
            slog.to_str().unwrap(),
            "--json",
            "-",
        ]));
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let f = &v["flows"][0];
        assert!(f["reverse"] == true && f["received"].as_u64().unwrap() > 100, "{transport}: {f}");
        assert_eq!(f["received_bytes"].as_u64().unwrap(), f["received"].as_u64().unwrap() * 1000, "the keep-alive's size");
        assert!(f["packets"].as_u64().unwrap() <= 7, "keep-alives only, 10 per second: {f}");
        let o = run(horde().args(["decode", slog.to_str().unwrap()]));
        assert!(String::from_utf8_lossy(&o.stdout).contains("0 rev"), "{}", text(&o));
        let a = decode(&[&slog]);
        let back = a["flows"].as_array().unwrap().iter().find(|f| f["reverse"] == true).expect("a reverse row").clone();
        assert_eq!(back["delay"]["kind"], "owd");
        assert_eq!(back["packets"].as_u64(), f["received"].as_u64());
    }
    let (_, err) = rx.stop();
    assert!(err.contains("reverse: sent "), "{err}");
    let rx = Recv::start(&["--udp", "0", "--no-reverse"]);
    let o = run(horde().args(["send", "-a", &rx.addrs[0].to_string(), "-R", "-t", "300ms"]));
    let (_, err) = rx.stop();
    assert!(text(&o).contains("sent nothing back"), "{}", text(&o));
    assert!(err.contains("refused"), "{err}");
}
