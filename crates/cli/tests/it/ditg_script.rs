//! `horde send --ditg-script FILE` (issue 26 item 6): D-ITG's multi-flow scripts as they are.

use crate::common::*;

use horde_wire::{Record, RecordKind};
use std::collections::BTreeMap;

/// Per flow: (sizes, scheduled departures relative to the flow's first) of a sender's log.
fn schedule(p: &std::path::Path, id_base: u32) -> BTreeMap<u32, (Vec<u32>, Vec<u64>)> {
    let mut m: BTreeMap<u32, (Vec<u32>, Vec<u64>)> = BTreeMap::new();
    let recs: Vec<Record> = records(p).into_iter().filter(|r| r.kind == RecordKind::Sent).collect();
    for r in &recs {
        let e = m.entry(r.flow - id_base).or_default();
        e.0.push(r.size);
        e.1.push(r.t_a);
    }
    for v in m.values_mut() {
        let t0 = v.1[0];
        v.1.iter_mut().for_each(|t| *t -= t0);
    }
    m
}

/// Ten mixed D-ITG lines and the same flows written as a Horde flow file: the same packets
/// leave, of the same sizes, on the same schedule (same seeds: flows are numbered alike).
#[test]
fn a_ditg_script_of_ten_mixed_flows_sends_what_the_same_flow_file_sends() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("ditg10");
    let rx = Recv::start(&["--udp", "0", "--tcp", "0", "--log", dir.path("r.hlog").to_str().unwrap()]);
    let (u, t) = (rx.addrs[0].port(), rx.addrs[1].port());
    let script = format!(
        "# ten flows, D-ITG 2.8.1 syntax\n\
         -a 127.0.0.1 -rp {u} -T UDP -C 200 -c 64 -z 100\n\
         -a 127.0.0.1 -rp {t} -T TCP -C 100 -c 512 -z 60 -D\n\
         -a 127.0.0.1 -rp {u} -E 300 -u 100 300 -z 120\n\
         -a 127.0.0.1 -rp {u} -U 100 400 -e 200 -z 90\n\
         -a 127.0.0.1 -rp {u} -O 250 -n 300 20 -z 80 -b 184 -f 33\n\
         -a 127.0.0.1 -rp {u} -V 1.5 2 -c 100 -z 70\n\
         -a 127.0.0.1 -rp {u} -W 2 4 -w 2 300 -z 60 -d 100\n\
         -a 127.0.0.1 -rp {u} -z 50 Quake3\n\
         -a 127.0.0.1 -rp {u} -z 40 VoIP -x G.729.2 -h CRTP -VAD\n\
         -a 127.0.0.1 -rp {t} -T TCP -G 2 2 -g 3 50 -k 8\n"
    );
    let flows = format!(
        "[defaults]\ndst = \"127.0.0.1:{u}\"\n\
         [[flow]]\nrate = 200\nsize = 64\npackets = 100\n\
         [[flow]]\ndst = \"127.0.0.1:{t}\"\ntransport = \"tcp\"\nrate = 100\nsize = 512\npackets = 60\n\
         [[flow]]\nidt = \"exponential(3.3333333333333335)\"\nsize = \"uniform(100, 300)\"\npackets = 120\n\
         [[flow]]\nidt = \"uniform(2.5, 10)\"\nsize = \"exponential(200)\"\npackets = 90\n\
         [[flow]]\nidt = \"poisson(4)\"\nsize = \"normal(300, 20)\"\npackets = 80\ntos = 184\nttl = 33\n\
         [[flow]]\nidt = \"pareto(1.5, 2)\"\nsize = 100\npackets = 70\n\
         [[flow]]\nidt = \"weibull(4, 2)\"\nsize = \"weibull(300, 2)\"\npackets = 60\nstart_delay = 100\n\
         [[flow]]\npreset = \"quake3\"\npackets = 50\n\
         [[flow]]\npreset = \"voip(codec=g729.2, rtp=crtp, vad=on)\"\npackets = 40\n\
         [[flow]]\ndst = \"127.0.0.1:{t}\"\ntransport = \"tcp\"\nidt = \"gamma(2, 2)\"\nsize = \"gamma(3, 50)\"\nbytes = 8192\nnodelay = false\n"
    );
    std::fs::write(dir.path("script.txt"), &script).unwrap();
    std::fs::write(dir.path("flows.toml"), &flows).unwrap();
    let (a, b) = (dir.path("a.hlog"), dir.path("b.hlog"));
    let out = run(horde().args(["send", "--ditg-script", dir.path("script.txt").to_str().unwrap(), "--log", a.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    let out = run(horde().args(["send", "--flows", dir.path("flows.toml").to_str().unwrap(), "--id-base", "100", "--log", b.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(std::time::Duration::from_millis(300));
    rx.stop();
    let (sa, sb) = (schedule(&a, 0), schedule(&b, 100));
    assert_eq!(sa.len(), 10);
    for (id, (sizes, times)) in &sa {
        let (sizes_b, times_b) = &sb[id];
        assert_eq!(sizes, sizes_b, "flow {id}: the same sizes");
        assert_eq!(times, times_b, "flow {id}: the same departure schedule");
    }
    assert_eq!(sa[&0].0.len(), 100);
    assert_eq!(sa[&9].0.iter().map(|&s| s as u64).sum::<u64>(), 8192, "-k 8 is 8 KBytes of 1,024 bytes");
    // Everything the script sent arrived (the receiver's log holds both runs' flows).
    let got = records(&dir.path("r.hlog")).into_iter().filter(|r| r.flow < 10).count();
    assert_eq!(got, sa.values().map(|v| v.0.len()).sum::<usize>());
    // A line with an option Horde does not take is refused before anything is sent.
    std::fs::write(dir.path("bad.txt"), format!("-a 127.0.0.1 -rp {u} -C 10\n-a 127.0.0.1 -rp {u} -Ft idts.txt\n")).unwrap();
    let out = run(horde().args(["send", "--ditg-script", dir.path("bad.txt").to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("line 2") && text(&out).contains("-Ft"), "{}", text(&out));
}

/// The 500-TCP-flow script D-ITG 2.8.1 crashes on (bench/RESULTS-engine.md): every flow
/// connects, sends its packets, and nothing is lost.
#[test]
fn a_500_tcp_flow_ditg_script_runs_with_nothing_lost() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = Scratch::new("ditg500");
    let rx = Recv::start(&["--tcp", "0", "--log", dir.path("r.hlog").to_str().unwrap()]);
    let port = rx.addrs[0].port();
    let script: String = (0..500).map(|_| format!("-a 127.0.0.1 -rp {port} -T TCP -C 3 -c 36 -t 3000\n")).collect();
    std::fs::write(dir.path("script.txt"), script).unwrap();
    let s = dir.path("s.hlog");
    let out = run(horde().args(["send", "--ditg-script", dir.path("script.txt").to_str().unwrap(), "--log", s.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(std::time::Duration::from_millis(500));
    rx.stop();
    let json = dir.path("a.json");
    let out = run(horde().arg("decode").arg(&s).arg(dir.path("r.hlog")).arg("-q").arg("--json").arg(&json));
    assert!(out.status.success(), "{}", text(&out));
    let a: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(a["flows"].as_array().unwrap().len(), 500);
    assert_eq!(a["total"]["loss"]["lost"], 0);
    assert_eq!(a["total"]["loss"]["sent"], 500 * 9, "3 pkt/s for 3 s: 9 each");
    assert_eq!(a["total"]["packets"], 500 * 9);
    assert!(a["flows"].as_array().unwrap().iter().all(|f| f["protocol"] == "tcp"));
}
