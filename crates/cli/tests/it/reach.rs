//! What Horde can do, reached from the command line (issue 65): `horde fit` on a shipped
//! capture, shell completions that the shell parses, manual pages that `man` renders.

use crate::common::*;

const CAPTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fit/tests/data/horde-ground-truth.pcapng");
const TRUTH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fit/tests/data/ground-truth.toml");

#[test]
fn fit_writes_a_service_that_checks_and_matches_the_model_it_came_from() {
    let dir = Scratch::new("fit-cli");
    let (service, json) = (dir.path("fitted.toml"), dir.path("fit.json"));
    let o = run(horde().args(["fit", CAPTURE, "--name", "gt", "--out"]).arg(&service).arg("--json").arg(&json).args(["--against", TRUTH]));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // the fit table, then the capture against the service it was sent from: alike everywhere
    assert!(t.contains("play       up   idt ") && t.contains("play       down size"), "{t}");
    let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("compare ")).collect();
    assert_eq!(rows.len(), 4, "idt and size each way: {t}");
    assert!(rows.iter().all(|r| r.ends_with(" alike")), "{t}");
    let check = run(horde().args(["services", "check"]).arg(&service));
    assert!(check.status.success() && text(&check).contains("service `gt`"), "{}", text(&check));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["directions"].as_array().unwrap().len(), 2);
    // the loop closed without a second capture: the same service and seed run again, and its
    // report's logs compared with the capture, are the same sizes and gaps
    let port = horde_testkit::free_port("127.0.0.1");
    std::fs::copy(TRUTH, dir.path("ground-truth.toml")).unwrap();
    let scenario = dir.path("again.toml");
    std::fs::write(
        &scenario,
        format!("name = \"again\"\nservice = \"ground-truth.toml\"\nplayers = 12\nduration = \"5s\"\nseed = 1\nserver = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    let out = dir.path("again");
    let o = run(horde().arg("run").arg(&scenario).arg("-q").arg("--out").arg(&out));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(horde().args(["fit", CAPTURE, "--warm-up", "0", "--cool-down", "0", "--compare"]).arg(&out));
    let t = text(&o);
    let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("compare ")).collect();
    assert!(o.status.success() && rows.len() == 4 && rows.iter().all(|r| r.ends_with(" alike") || r.contains(" alike (")), "{t}");
    assert!(rows.iter().filter(|r| r.contains(" size KS 0.0000 ")).count() == 2, "the same sizes, drawn from the same seed: {t}");
    let o = run(horde().args(["fit", CAPTURE, "--compare"]).arg(dir.path("nothing-here")));
    assert!(o.status.code() == Some(2) && text(&o).contains("No such file"), "{}", text(&o));
    let o = run(horde().args(["fit", CAPTURE, "--compare"]).arg(&dir.0));
    assert!(o.status.code() == Some(2) && text(&o).contains("client.hlog"), "{}", text(&o));
    // what is not a capture is named, with exit code 2
    for (bad, says) in [("/dev/zero", "not a regular file"), (TRUTH, "not a pcap or pcapng file"), ("/no/such.pcap", "No such file")] {
        let o = run(horde().args(["fit", bad]));
        assert!(o.status.code() == Some(2) && text(&o).contains(says), "{bad}: {}", text(&o));
    }
}

#[test]
fn completions_parse_in_their_shell_and_manual_pages_render() {
    let o = run(horde().args(["completions", "bash"]));
    assert!(o.status.success() && o.stdout.len() > 1000, "{}", text(&o));
    let dir = Scratch::new("manual");
    let script = dir.path("horde.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    let n = run(std::process::Command::new("bash").arg("-n").arg(&script));
    assert!(n.status.success(), "bash -n: {}", text(&n));
    for shell in ["zsh", "fish"] {
        let o = run(horde().args(["completions", shell]));
        assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("fit"), "{shell}");
    }
    let pages = dir.path("man1");
    let o = run(horde().arg("man").arg("--out").arg(&pages));
    assert!(o.status.success(), "{}", text(&o));
    let page = std::fs::read_to_string(pages.join("horde-run.1")).unwrap();
    assert!(page.contains(".TH horde-run 1") && page.contains("\\-\\-players"), "{page}");
    assert!(pages.join("horde-emu-up.1").exists() && !pages.join("horde-child.1").exists(), "subcommands' pages, hidden ones left out");
    if std::process::Command::new("man").arg("--version").output().is_err() {
        horde_testkit::skip("rendering with man -l: no man here (apt-get install man-db)");
        return;
    }
    let r = run(std::process::Command::new("man").arg("-l").arg(pages.join("horde-run.1")).env("MANPAGER", "cat").env("MANWIDTH", "100"));
    let shown = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success() && shown.contains("horde-run") && shown.contains("--players"), "{}", text(&r));
    let o = run(horde().args(["man", "emu", "nope"]));
    assert!(o.status.code() == Some(2) && text(&o).contains("no subcommand `nope` of `horde emu`: pick one of up, down"), "{}", text(&o));
}
