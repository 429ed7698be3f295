//! Logs name their flows' ends (log version 2), and `decode --parquet` is read by pandas and
//! DuckDB with the same counts as `decode` (issue 26 items 3 and 4). Python with pyarrow,
//! pandas and duckdb is installed by `.ci/run`; elsewhere the test says what to install.

use crate::common::*;

/// The Python side: reads the packet table with pandas and with DuckDB and prints, per flow,
/// the packets that arrived and the ones lost, from each.
const READ: &str = r#"
import json, sys
import pandas, duckdb
path = sys.argv[1]
df = pandas.read_parquet(path)
by_pandas = {}
for flow, g in df.groupby("flow"):
    by_pandas[str(flow)] = {"packets": int((g["lost"] == False).sum()), "lost": int((g["lost"] == True).sum()),
                             "dst_port": int(g["dst_port"].iloc[0]), "protocol": str(g["protocol"].iloc[0])}
rows = duckdb.sql(f"select flow, count(*) filter (where not lost), count(*) filter (where lost), "
                  f"count(*) filter (where arrival_ns > sent_ns or arrival_ns is null) "
                  f"from read_parquet('{path}') group by flow order by flow").fetchall()
by_duckdb = {str(f): {"packets": p, "lost": l, "timed": t} for f, p, l, t in rows}
print(json.dumps({"pandas": by_pandas, "duckdb": by_duckdb, "columns": list(df.columns)}))
"#;

fn python_ready() -> bool {
    let ok = std::process::Command::new("python3").args(["-c", "import pyarrow, pandas, duckdb"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        horde_testkit::skip("python3 with pyarrow, pandas and duckdb is missing (python3 -m pip install pyarrow pandas duckdb)");
    }
    ok
}

/// Rewrites a receiver's log without every 7th arrival of flow 0 (a lossy path, made exactly).
fn drop_some(from: &std::path::Path, to: &std::path::Path) -> usize {
    let bytes = std::fs::read(from).unwrap();
    let mut out = bytes[..horde_wire::LOG_HEADER_LEN].to_vec();
    let mut dropped = 0;
    let mut k = 0;
    for chunk in bytes[horde_wire::LOG_HEADER_LEN..].chunks_exact(horde_wire::RECORD_LEN) {
        let r = horde_wire::Record::parse(chunk).unwrap();
        if r.kind == horde_wire::RecordKind::Received && r.flow == 0 {
            k += 1;
            if k % 7 == 0 {
                dropped += 1;
                continue;
            }
        }
        out.extend_from_slice(chunk);
    }
    std::fs::write(to, out).unwrap();
    dropped
}

#[test]
fn logs_carry_addresses_and_parquet_reads_in_pandas_and_duckdb_with_decodes_counts() {
    let _share = horde_testkit::share(horde_testkit::Load::Heavy); // a bulk or catching-up sender: a core
    let dir = Scratch::new("columnar");
    let rx = Recv::start(&["--udp", "0", "--tcp", "0", "--log", dir.path("r.hlog").to_str().unwrap()]);
    let (udp, tcp) = (rx.addrs[0], rx.addrs[1]);
    let s1 = dir.path("s1.hlog");
    let out =
        run(horde().args(["send", "--dst", &udp.to_string(), "--rate", "2000", "--size", "64", "--packets", "700", "-P", "2", "--log", s1.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    let s2 = dir.path("s2.hlog");
    let out = run(horde().args([
        "send",
        "-T",
        "tcp",
        "--dst",
        &tcp.to_string(),
        "--rate",
        "1000",
        "--size",
        "200",
        "--packets",
        "300",
        "--id-base",
        "10",
        "--log",
        s2.to_str().unwrap(),
    ]));
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(std::time::Duration::from_millis(300));
    rx.stop();

    // Both ends name every flow: the sender its own socket → the receiver, the receiver the
    // peer → the address it listened on, with the protocol.
    let ends = endpoints(&dir.path("r.hlog"));
    for (flow, proto, dst) in [(0, 17, udp), (1, 17, udp), (10, 6, tcp)] {
        let src = ends.iter().find(|e| e.flow == flow && e.end == horde_wire::RecordKind::Source).expect("a source record per flow");
        let d = ends.iter().find(|e| e.flow == flow && e.end == horde_wire::RecordKind::Destination).expect("a destination record per flow");
        assert_eq!((d.addr, d.protocol, src.protocol), (dst, proto, proto));
        assert!(src.addr.ip().is_loopback() && src.addr.port() != 0);
        let own = endpoints(if flow == 10 { &s2 } else { &s1 });
        let sent_from = own.iter().find(|e| e.flow == flow && e.end == horde_wire::RecordKind::Source).unwrap();
        assert_eq!(sent_from.addr, src.addr, "sender and receiver agree on where flow {flow} came from");
    }

    let lossy = dir.path("r-lossy.hlog");
    let dropped = drop_some(&dir.path("r.hlog"), &lossy);
    assert_eq!(dropped, 100);
    let (json, parquet, csv) = (dir.path("a.json"), dir.path("p.parquet"), dir.path("p.csv"));
    let out = run(horde()
        .args(["decode", "-q"])
        .arg(&s1)
        .arg(&s2)
        .arg(&lossy)
        .arg("--json")
        .arg(&json)
        .arg("--parquet")
        .arg(&parquet)
        .arg("--packets-csv")
        .arg(&csv));
    assert!(out.status.success(), "{}", text(&out));
    assert!(!dir.path("p.parquet.partial").exists());
    let a: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flows = a["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3);
    assert_eq!(flows[2]["src"].as_str().unwrap().split(':').next(), Some("127.0.0.1"));
    assert_eq!((flows[2]["dst"].as_str(), flows[2]["protocol"].as_str()), (Some(tcp.to_string().as_str()), Some("tcp")));
    assert_eq!(a["total"]["loss"]["lost"], 100);
    // The CSV has the same rows: one per packet sent (the lost ones flagged).
    let csv_rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(csv_rows, 700 * 2 + 300);

    if !python_ready() {
        return;
    }
    let py = std::process::Command::new("python3").args(["-c", READ]).arg(&parquet).output().unwrap();
    assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
    let got: serde_json::Value = serde_json::from_slice(&py.stdout).unwrap();
    for f in flows {
        let id = f["flow"].to_string();
        for reader in ["pandas", "duckdb"] {
            let g = &got[reader][&id];
            assert_eq!(g["packets"], f["packets"], "{reader}, flow {id}: {got}");
            assert_eq!(g["lost"], f["loss"]["lost"], "{reader}, flow {id}: {got}");
        }
        // Every arrival's delay is positive on one clock; lost rows have no arrival.
        assert_eq!(got["duckdb"][&id]["timed"], f["packets"].as_u64().unwrap() + f["loss"]["lost"].as_u64().unwrap());
        let port = f["dst"].as_str().unwrap().rsplit(':').next().unwrap().parse::<u64>().unwrap();
        assert_eq!(got["pandas"][&id]["dst_port"], port);
    }
    let cols: Vec<&str> = got["columns"].as_array().unwrap().iter().filter_map(|c| c.as_str()).collect();
    assert_eq!(cols[..3], ["flow", "direction", "protocol"]);
}

/// A log whose sequence numbers claim billions of lost packets is refused as bad input, naming
/// the flow, and leaves no table (not a disk filled with lost rows); `-` is refused for Parquet.
#[test]
fn a_table_of_billions_of_lost_rows_is_refused() {
    let dir = Scratch::new("columnar-hostile");
    let log = dir.path("r.hlog");
    let mut bytes = vec![0u8; horde_wire::LOG_HEADER_LEN];
    horde_wire::LogHeader { role: horde_wire::Role::Receiver, start_ns: 1 }.emit(&mut bytes);
    for seq in [0u64, 1 << 31, u32::MAX as u64] {
        let mut b = [0u8; horde_wire::RECORD_LEN];
        horde_wire::Record { flow: 4, size: 64, seq, t_a: 1, t_b: 2, kind: horde_wire::RecordKind::Received, ..Default::default() }.emit(&mut b);
        bytes.extend_from_slice(&b);
    }
    std::fs::write(&log, bytes).unwrap();
    let out = run(horde().arg("decode").arg(&log).arg("--parquet").arg(dir.path("p.parquet")));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("flow 4") && text(&out).contains("lost"), "{}", text(&out));
    assert!(!dir.path("p.parquet").exists() && !dir.path("p.parquet.partial").exists());
    let out = run(horde().arg("decode").arg(&log).args(["--packets-csv", dir.path("p.csv").to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!dir.path("p.csv").exists(), "no half table left");
    let out = run(horde().arg("decode").arg(&log).args(["--parquet", "-"]));
    assert!(out.status.code() == Some(2) && text(&out).contains("file name"), "{}", text(&out));
}
