//! Results as a tested contract: `summary.json` and `decode --json` against their JSON Schemas
//! (generated from the types, pinned in docs/schemas/), the CSV headers against their row
//! types, and the report's escaping of user-supplied strings.
//!
//! After a deliberate change to a result type: `HORDE_UPDATE_SCHEMAS=1 cargo test -p
//! horde-scenario --test contract`, then add a line to docs/schemas/CHANGELOG.md.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use horde_model::scenario::Scenario;
use horde_scenario::{execute, RunOptions, Summary};
use horde_stats::{Analysis, LoadedLog, Options};
use horde_wire::{Record, RecordKind, Role};

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas")
}

/// The schema generated from the type, checked against the committed file.
fn pinned(name: &str, schema: schemars::schema::RootSchema) -> serde_json::Value {
    let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path = schemas_dir().join(format!("{name}.schema.json"));
    if std::env::var_os("HORDE_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} differs from the result type: if the change is deliberate, run HORDE_UPDATE_SCHEMAS=1 cargo test -p horde-scenario --test contract and add a line to docs/schemas/CHANGELOG.md",
        path.display()
    );
    serde_json::from_str(&text).unwrap()
}

fn validate(schema: &serde_json::Value, instance: &serde_json::Value, what: &str) {
    let compiled = jsonschema::JSONSchema::compile(schema).expect("the schema compiles");
    let msgs: Vec<String> = match compiled.validate(instance) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.take(5).map(|e| format!("{} at {}", e, e.instance_path)).collect(),
    };
    assert!(msgs.is_empty(), "{what} does not follow its schema: {msgs:#?}");
}

fn run_scenario(name: &str, tag: &str) -> (PathBuf, horde_scenario::RunOutcome) {
    let text = format!("name = {}\nservice = \"quake3\"\nplayers = 3\nduration = \"2s\"\nseed = 5\nserver = \"127.0.0.1:0\"\n", toml_string(name));
    let sc = Scenario::parse(&text, "contract.toml", Path::new(".")).unwrap();
    let out = std::env::temp_dir().join(format!("horde-contract-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let stop = AtomicBool::new(false);
    let opts = RunOptions::in_process(&out, &stop);
    let r = execute(&sc, &opts).unwrap();
    (out, r)
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[test]
fn summary_json_follows_its_schema() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let schema = pinned("summary", schemars::schema_for!(Summary));
    let (out, r) = run_scenario("contract", "summary");
    let instance: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(instance["schema_version"], horde_scenario::SUMMARY_SCHEMA_VERSION);
    validate(&schema, &instance, "summary.json");
    assert!(r.summary.analysis.up.received > 0);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn progress_lines_follow_their_schema_on_one_machine_and_through_agents() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let schema = pinned("progress", schemars::schema_for!(horde_scenario::EventLine));
    let text = "name = \"progress\"\nservice = \"quake3\"\nplayers = 3\nduration = \"2s\"\nseed = 5\nserver = \"127.0.0.1:0\"\n";
    let sc = Scenario::parse(text, "contract.toml", Path::new(".")).unwrap();
    let out = std::env::temp_dir().join(format!("horde-contract-progress-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let stop = AtomicBool::new(false);
    let ticks = std::sync::Mutex::new(Vec::new());
    let events = |e: &horde_scenario::Event| {
        // Every kind of event is a line of the same stream, and follows the same schema.
        validate(&schema, &serde_json::to_value(horde_scenario::EventLine::of("progress", e)).unwrap(), "an event line");
        if let horde_scenario::Event::Tick(s) = e {
            ticks.lock().unwrap().push(s.clone());
        }
    };
    let opts = RunOptions { events: &events, ..RunOptions::in_process(&out, &stop) };
    execute(&sc, &opts).unwrap();
    let ticks = ticks.into_inner().unwrap();
    assert!(!ticks.is_empty(), "a 2-s run reports progress");
    for t in &ticks {
        let line = serde_json::to_value(horde_scenario::EventLine::Progress { scenario: "progress".into(), progress: t.clone() }).unwrap();
        validate(&schema, &line, "a progress line");
        assert_eq!(t.categories.iter().map(|c| c.1).sum::<u32>(), 3, "every player is in one category: {t:?}");
    }
    // Through agents: the same line with each agent's rates.
    let mut t = ticks[0].clone();
    t.agents.push(horde_scenario::AgentRates { agent: "a".into(), sent_pkt_s: 1, sent_bit_s: 8, received_pkt_s: 2, received_bit_s: 16 });
    validate(
        &schema,
        &serde_json::to_value(horde_scenario::EventLine::Progress { scenario: "progress".into(), progress: t }).unwrap(),
        "an agents' progress line",
    );
    let end = horde_scenario::EventLine::Finished { scenario: "progress".into(), exit: 0, report: out.display().to_string() };
    validate(&schema, &serde_json::to_value(end).unwrap(), "a finished line");
    std::fs::remove_dir_all(&out).unwrap();
}

/// Two flows, one-way with loss and one round trip, with windows: every optional part present.
fn analysis() -> Analysis {
    let rec = |flow, seq, t_a, t_b, kind| Record { flow, size: 100, seq, t_a, t_b, tag: 0, tos: 0, ttl: 64, kind, flags: 0 };
    let mut sent = Vec::new();
    let mut recv = Vec::new();
    for s in 0..50u64 {
        let t = 1_000_000_000 + s * 10_000_000;
        sent.push(rec(1, s, t, t + 3, RecordKind::Sent));
        if s % 10 != 3 {
            recv.push(rec(1, s, t, t + 2_000_000 + (s % 4) * 100_000, RecordKind::Received));
        }
        sent.push(rec(2, s, t, t + 3, RecordKind::Sent));
        sent.push(rec(2, s, t, t + 5_000_000, RecordKind::Echoed));
    }
    let logs = [LoadedLog { role: Role::Sender, records: sent, trailing_bytes: 0 }, LoadedLog { role: Role::Receiver, records: recv, trailing_bytes: 0 }];
    horde_stats::analyse(&logs, Options { window_ns: Some(100_000_000), anchor_ns: None })
}

#[test]
fn decode_json_follows_its_schema() {
    let schema = pinned("decode", schemars::schema_for!(Analysis));
    let a = analysis();
    assert!(a.total.loss.is_some() && !a.windows.is_empty());
    let instance: serde_json::Value = serde_json::from_str(&horde_stats::export::json(&a)).unwrap();
    validate(&schema, &instance, "decode --json");
}

#[test]
fn csv_headers_are_the_row_types_and_stay_stable() {
    let a = analysis();
    let flows = horde_stats::export::flows_csv(&a);
    // The published column order (README, docs/schemas/README.md): columns are only ever added.
    assert_eq!(
        flows.lines().next().unwrap(),
        "flow,packets,bytes,duration_s,bitrate_bps,pkt_rate,min_size,max_size,delay_kind,delay_min_ms,delay_mean_ms,delay_max_ms,delay_stddev_ms,delay_p50_ms,delay_p90_ms,delay_p99_ms,delay_p999_ms,jitter_ms,ipdv_mean_ms,sent,expected,lost,loss_pct,loss_bursts,loss_burst_max,duplicates,reordered,lateness_p50_us,lateness_p99_us,lateness_max_us,tos,ttl,name,direction,src,dst,protocol"
    );
    assert_eq!(flows.lines().count(), 1 + 2 + 1, "header, two flows, total");
    let mut r = csv::Reader::from_reader(flows.as_bytes());
    let n = r.headers().unwrap().len();
    assert!(r.records().all(|row| row.unwrap().len() == n), "every row has every column");
    let windows = horde_stats::export::windows_csv(&a.windows);
    assert_eq!(windows.lines().next().unwrap(), "start_s,flow,packets,bytes,bitrate_bps,pkt_rate,delay_mean_ms,delay_max_ms,jitter_ms,lost,reverse");
}

#[test]
fn the_report_escapes_user_supplied_strings() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let evil = "q\"<>&'x";
    let (out, _) = run_scenario(evil, "escape");
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(!page.contains(evil), "the raw name is nowhere in the page");
    assert!(page.contains("q&quot;&lt;&gt;&amp;&#39;x"), "the name is shown escaped");
    std::fs::remove_dir_all(&out).unwrap();
}

/// `decode`'s statistics and the run report's, over the same records, agree: one definition of
/// each statistic (nearest-rank percentiles, the same delay, the same counts).
#[test]
fn decode_and_the_report_give_the_same_numbers_for_the_same_records() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let (out, r) = run_scenario("same", "same");
    let load = |f: &str| horde_stats::load(&std::fs::read(out.join(f)).unwrap()).unwrap().records;
    let (client, server) = (load("client.hlog"), load("server.hlog"));
    // The up direction as decode sees a one-way flow: the client's departures, the server's
    // arrivals.
    let sent: Vec<Record> = client.iter().filter(|r| r.kind == RecordKind::Sent).copied().collect();
    let recv: Vec<Record> = server.iter().filter(|r| r.kind == RecordKind::Received).copied().collect();
    let logs = [LoadedLog { role: Role::Sender, records: sent, trailing_bytes: 0 }, LoadedLog { role: Role::Receiver, records: recv, trailing_bytes: 0 }];
    let a = horde_stats::analyse(&logs, Options { window_ns: None, anchor_ns: None });
    let up = &r.summary.analysis.up;
    let d = a.total.delay.as_ref().expect("delays");
    assert_eq!(a.total.packets, up.received);
    assert_eq!(a.total.loss.as_ref().unwrap().lost, up.lost);
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
    assert!(close(d.mean_ms, up.delay_mean_ms.unwrap()), "{} vs {:?}", d.mean_ms, up.delay_mean_ms);
    assert!(close(d.p50_ms, up.delay_p50_ms.unwrap()), "{} vs {:?}", d.p50_ms, up.delay_p50_ms);
    assert!(close(d.p99_ms, up.delay_p99_ms.unwrap()), "{} vs {:?}", d.p99_ms, up.delay_p99_ms);
    assert!(close(d.max_ms, up.delay_max_ms.unwrap()), "{} vs {:?}", d.max_ms, up.delay_max_ms);
    assert!(d.p999_ms <= d.max_ms);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_regulated_runs_summary_json_follows_its_schema() {
    use horde_scenario::circuit_report::{CircuitSummary, CIRCUITS_SCHEMA_VERSION};
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let schema = pinned("circuits-summary", schemars::schema_for!(CircuitSummary));
    let text = "name = \"regulated\"\nservice = \"opensim\"\nplayers = 3\nduration = \"3s\"\nseed = 5\n[regulation]\nthrottle = \"fixed:300\"\nregulator = \"per-channel\"\n";
    let sc = Scenario::parse(text, "contract.toml", Path::new(".")).unwrap();
    let cfg = horde_scenario::circuits::Config::of(&sc).unwrap().unwrap();
    let out = std::env::temp_dir().join(format!("horde-contract-circuits-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let stop = AtomicBool::new(false);
    let opts = RunOptions::in_process(&out, &stop);
    let r = horde_scenario::regulated::execute(&sc, &cfg, &opts).unwrap();
    let instance: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(instance["schema_version"], CIRCUITS_SCHEMA_VERSION);
    assert_eq!(instance["kind"], "circuits");
    validate(&schema, &instance, "a regulated run's summary.json");
    // Every player joined, was sent what its fixed throttle allowed at most, and the report has
    // every chart and the per-second CSV of both ends.
    assert_eq!(r.summary.totals.joined, 3, "{:?}", r.summary.circuits);
    assert!(r.summary.totals.received_kbps > 0.0);
    assert!(r.summary.circuits.iter().all(|c| c.allowance_kbps <= 300.01 && c.request_kbps > 299.0), "{:?}", r.summary.circuits);
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 5);
    let csv = std::fs::read_to_string(out.join("circuits.csv")).unwrap();
    assert!(csv.lines().any(|l| l.starts_with("client,")) && csv.lines().any(|l| l.starts_with("server,")));
    let mut rd = csv::Reader::from_reader(csv.as_bytes());
    let n = rd.headers().unwrap().len();
    assert!(rd.records().all(|row| row.unwrap().len() == n), "every row has every column");
    std::fs::remove_dir_all(&out).unwrap();
}

/// The run's command channel (`--commands`, docs/control.md): its schema is pinned, and every
/// command the docs show validates and parses.
#[test]
fn commands_follow_their_schema() {
    use horde_scenario::control::Command;
    let schema = pinned("command", horde_scenario::control::line_schema());
    for line in [
        r#"{"command":"stop"}"#,
        r#"{"command":"players","online":600}"#,
        r#"{"command":"players","online":150,"at_ns":9000000000}"#,
        r#"{"command":"stop","id":41}"#,
        r#"{"command":"link","a":"r1","b":"r2","set":{"delay":"250ms"}}"#,
        r#"{"command":"link","a":"r1","b":"r2","dir":"ab","set":{"rate":"5mbit","loss":{"p":"1%","r":"25%"}},"clear":true}"#,
    ] {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        validate(&schema, &v, line);
        let c = Command::parse_line(line).1.unwrap_or_else(|e| panic!("{line}: {e}"));
        validate(&schema, &serde_json::to_value(&c).unwrap(), "a command as Horde writes it");
    }
}
