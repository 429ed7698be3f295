//! Issue 27: a flow run through agents collected as summaries (`horde send --agents …
//! --collect summaries`): each agent summarises its own logs per flow on the controller's clock,
//! and the report built from them is, figure for figure, the merged logs' decode (exact, or
//! within the stated bound for percentiles) — checked on the same run by `--check-summaries`,
//! which collects both — for a fraction of the bytes.

use std::time::Duration;

use crate::dist_util::*;

fn summary(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn flow_summaries_give_the_merged_logs_figures_on_the_same_run() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("flowsum");
    let creds = keygen(&d);
    let (_a1, x1, _) = agent(&d, &creds, "127.0.0.21", "s1", false);
    let (_a2, x2, _) = agent(&d, &creds, "127.0.0.22", "s2", false);
    let (_a3, x3, _) = agent(&d, &creds, "127.0.0.23", "r1", false);
    let (port, p1) = (horde_testkit::free_port("127.0.0.23"), horde_testkit::free_port("127.0.0.23"));
    let flows = d.join("flows.toml");
    // one-way flows from both senders (one with a heavy-tailed size and gaps), a TCP flow, and
    // round trips (the sender's log holds the echoes)
    std::fs::write(
        &flows,
        format!(
            "[defaults]\nduration = \"4s\"\nsize = 200\n\
             [[flow]]\nname = \"owd\"\ndst = \"127.0.0.23:{port}\"\nrate = 400\nrepeat = 3\n\
             [[flow]]\nname = \"pareto\"\nsrc = \"127.0.0.22\"\ndst = \"127.0.0.23:{port}\"\nidt = \"pareto(1.5, 1)\"\nsize = \"uniform(40, 1200)\"\non = \"exponential(500)\"\noff = \"exponential(300)\"\n\
             [[flow]]\nname = \"tcp\"\ntransport = \"tcp\"\ndst = \"127.0.0.23:{p1}\"\nrate = 200\n\
             [[flow]]\nname = \"rtt\"\nmeter = \"rtt\"\ndst = \"127.0.0.23:{port}\"\nrate = 100\n",
        ),
    )
    .unwrap();
    let (senders, recv) = (format!("{x1},{x2}"), x3.to_string());
    let run = |out: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["send", "--flows", flows.to_str().unwrap(), "--agents", &senders, "--recv-agent", &recv];
        args.extend(["--credentials", creds.to_str().unwrap(), "--out", out.to_str().unwrap(), "--window", "500ms"]);
        args.extend(extra);
        let mut ctl = Proc::spawn(&args);
        let code = ctl.wait(Duration::from_secs(60));
        (code, ctl.text())
    };

    // the same run, both ways: the report from the summaries, checked against the logs
    let out = d.join("checked");
    let (code, text) = run(&out, &["--collect", "summaries", "--check-summaries"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("summaries checked against the logs") && text.contains(" 0 beyond their bounds"), "{text}");
    let s = summary(&out);
    let check = &s["distributed"]["check"];
    assert_eq!(s["distributed"]["collect"], "summaries");
    assert_eq!(check["beyond"], 0, "{check}");
    assert!(check["figures"].as_u64().unwrap() > 500, "{check}");
    assert!(s["distributed"]["bound"].as_str().unwrap().contains("1/1,024"));
    let rows = s["flows"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert!(rows.iter().all(|f| f["packets"].as_u64().unwrap() > 0 && f["loss"]["lost"] == 0), "{rows:?}");
    assert!(s["windows"].as_array().unwrap().len() >= 8 * 5, "windows of 500 ms for every flow");
    assert!(out.join("send.hlog").exists() && out.join("recv.hlog").exists(), "the logs it was checked against");

    // summaries alone: no raw record travels, and far fewer bytes do
    let lean = d.join("lean");
    let (code, text) = run(&lean, &["--collect", "summaries"]);
    assert_eq!(code, 0, "{text}");
    assert!(!lean.join("send.hlog").exists() && !lean.join("recv.hlog").exists(), "no merged logs from summaries");
    let t = summary(&lean);
    assert!(t["distributed"]["check"].is_null());
    let bytes =
        |v: &serde_json::Value| v["distributed"]["agents"].as_array().unwrap().iter().map(|a| a["log_bytes_transferred"].as_u64().unwrap()).sum::<u64>();
    let (both, alone) = (bytes(&s), bytes(&t));
    assert!(alone > 0 && alone * 3 < both, "summaries {alone} B against summaries and logs {both} B");
    assert_eq!(t["flows"].as_array().unwrap().len(), 6);
    for a in t["distributed"]["agents"].as_array().unwrap() {
        assert_eq!(a["status"], "finished", "{a}");
    }
    // what travelled: each agent's summaries of the logs it kept; the round trips' echoes in
    // the sender's
    let mut echoes = 0;
    for e in std::fs::read_dir(lean.join("agents")).unwrap() {
        let f = e.unwrap().path().join("flow-summaries.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        for part in v.as_array().unwrap() {
            assert!(["sender", "receiver"].contains(&part["role"].as_str().unwrap()), "{part}");
            echoes += part["flows"].as_array().unwrap().iter().filter(|f| f["echo"].is_object()).count();
        }
    }
    assert_eq!(echoes, 1, "the rtt flow's echoes, summarised by its sender");
    // a check without summaries is refused before anything runs
    let (code, text) = run(&d.join("refused"), &["--check-summaries"]);
    assert_ne!(code, 0);
    assert!(text.contains("give it with --collect summaries"), "{text}");
}
