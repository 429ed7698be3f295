//! The emulated environment end to end, as root: a topology goes up, Horde's own probes cross
//! switches, routers and an impaired link, files go in and out of a node, a link changes while
//! it runs, and everything goes down again. Then the issue's link setting is measured with the
//! decoder over ≥ 10,000 packets.

use std::time::Duration;

use crate::emu_util::*;

const ROUTED: &str = r#"
name = "routed"
[[node]]
name = "c"
kind = "host"
count = 2
[[node]]
name = "sw"
kind = "switch"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "r2"
kind = "router"
[[node]]
name = "srv"
kind = "host"
[[link]]
a = "c"
b = "sw"
subnet = "10.1.0.0/24"
[[link]]
a = "r1"
b = "sw"
[[link]]
a = "r1"
b = "r2"
subnet = "10.255.0.0/30"
delay = "10ms"
[[link]]
a = "r2"
b = "srv"
subnet = "10.2.0.0/24"
"#;

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn up_probe_copy_change_down() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("routed");
    let topo = write(&dir, "routed.toml", ROUTED);
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    assert_eq!(ok(&["emu", "up", topo.to_str().unwrap(), "--id", exp]).trim(), exp);
    assert_eq!(namespaces(exp).len(), 6, "fabric + 2 clients + 2 routers + server");
    assert!(ok(&["emu", "ls"]).contains(exp));
    let nodes = ok(&["emu", "ls", exp]);
    assert!(nodes.contains("10.2.0.2") && nodes.contains("r1 → r2"), "{nodes}");
    // The picture of what was built (Graphviz).
    let dot = ok(&["emu", "ls", exp, "--dot"]);
    assert!(dot.starts_with("graph ") && dot.contains("\"r1\" -- \"r2\"") && dot.contains("shape=box") && dot.trim_end().ends_with('}'), "{dot}");
    // A second experiment with the same id is refused, naming the way out.
    let again = horde(&["emu", "up", topo.to_str().unwrap(), "--id", exp]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("horde emu down"));

    // Through the switch, both routers and the 10 ms link.
    let t = probe(exp, &dir, "c2", "srv", "10.2.0.2", &["-C", "200", "-c", "200", "-z", "200"], "p1");
    assert_eq!(t["loss"]["lost"], 0, "{t}");
    // the median: a moment of the whole suite's load delays a few of 200 packets, not the link
    let d = t["delay"]["p50_ms"].as_f64().unwrap();
    assert!((10.0..12.0).contains(&d), "median one-way delay {d} ms over a 10 ms link: {}", t["delay"]);

    // Change the link while it runs: 30 ms more each way.
    let out = ok(&["emu", "link", exp, "r1", "r2", "--delay", "40ms"]);
    assert!(out.contains("delay 40.000 ms"), "{out}");
    let t = probe(exp, &dir, "c1", "srv", "10.2.0.2", &["-C", "200", "-c", "200", "-z", "200"], "p2");
    let d = t["delay"]["p50_ms"].as_f64().unwrap();
    assert!((40.0..42.0).contains(&d), "median one-way delay {d} ms after the change to 40 ms: {}", t["delay"]);
    let bad = horde(&["emu", "link", exp, "c1", "srv", "--delay", "1ms"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no emulated link between c1 and srv"), "{bad:?}");

    // Every addressed interface is patient for its neighbours (10 probes), loopback untouched.
    for (node, ifs) in [("srv", "eth0"), ("r1", "eth0")] {
        let p =
            ok(&["emu", "exec", exp, node, "--", "cat", &format!("/proc/sys/net/ipv4/neigh/{ifs}/mcast_solicit"), "/proc/sys/net/ipv4/neigh/lo/mcast_solicit"]);
        assert_eq!(p, "10\n3\n", "{node}'s neighbour probes on {ifs}, then lo");
    }

    // exec: exit codes come back; the working directory is the node's own.
    assert_eq!(horde(&["emu", "exec", exp, "srv", "--", "sh", "-c", "exit 7"]).status.code(), Some(7));
    let pwd = ok(&["emu", "exec", exp, "srv", "--", "pwd"]);
    assert!(pwd.trim().ends_with(&format!("{exp}/node/srv")), "{pwd}");
    let bad = horde(&["emu", "exec", exp, "nosuch", "--", "true"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no node `nosuch`"));

    // cp in and out of a node's directory.
    let src = write(&dir, "in.txt", "hello node\n");
    ok(&["emu", "cp", exp, src.to_str().unwrap(), "srv:in.txt"]);
    assert_eq!(ok(&["emu", "exec", exp, "srv", "--", "cat", "in.txt"]), "hello node\n");
    let back = dir.join("back.txt");
    ok(&["emu", "cp", exp, "srv:in.txt", back.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&back).unwrap(), "hello node\n");
    assert!(!horde(&["emu", "cp", exp, "srv:../../x", back.to_str().unwrap()]).status.success());

    let out = ok(&["emu", "down", exp, "--purge"]);
    assert!(out.contains("down"));
    assert!(namespaces(exp).is_empty());
    assert!(!std::path::Path::new(&format!("/run/horde/emu/{exp}")).exists());
    assert!(!horde(&["emu", "down", exp, "--purge"]).status.success(), "a second down says there is nothing");
}

const PAIR: &str = r#"
name = "pair"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "b"
kind = "host"
[[link]]
a = "a"
b = "b"
subnet = "10.9.0.0/30"
delay = "20ms"
jitter = "5ms"
loss = "1%"
rate = "10mbit"
"#;

/// The issue's setting, measured by Horde's decoder on this machine (userspace path): the delay
/// from 2,000 light-load packets (Poisson, 100/s: sparse enough that the link's in-order jitter
/// seldom holds one packet behind another), the loss from 10,000 (2,000/s of 100 B, 2.3 Mbit/s:
/// 4.5 standard errors of the loss are ±0.45 %, telling 1 % from none and from 2 %, and an
/// honest link fails it once in 100,000 runs), the rate from an overload. The neighbour is
/// resolved before each probe (a lost ARP request once cost 15 packets: CI, stop 73). (The
/// ≥ 10,000-packet measurement of every setting is bench/emu-link.sh.)
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn impaired_link_matches_its_setting() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    // delay within 1 ms of the link's (in-order delivery adds 0.56 ms of it here): a link
    // emulator scheduled late adds to it, so this runs nearly alone (a heavy share beside the
    // suite measured 21.004 ms once)
    let _share = horde_testkit::share(horde_testkit::Load::Quiet);
    let dir = tmp("pair");
    let topo = write(&dir, "pair.toml", PAIR);
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", exp]);
    let t = probe(exp, &dir, "a", "b", "10.9.0.2", &["--idt", "exponential(10)", "-c", "100", "-z", "2000", "--seed", "3"], "light");
    let delay = t["delay"]["mean_ms"].as_f64().unwrap();
    eprintln!("light load: {} packets, mean one-way delay {delay:.3} ms", t["loss"]["expected"]);
    assert!((19.0..=21.0).contains(&delay), "mean delay {delay} ms not within 5 % of 20 ms");

    let t = probe(exp, &dir, "a", "b", "10.9.0.2", &["-C", "2000", "-c", "100", "-z", "10000", "--seed", "4"], "loss");
    let sent = t["loss"]["expected"].as_u64().unwrap();
    let lost = t["loss"]["lost"].as_u64().unwrap();
    let loss = lost as f64 / sent as f64;
    let counters = ok(&["emu", "link", exp, "a", "b"]);
    eprintln!("loss probe: {sent} packets, {lost} lost ({:.3} %); the link's counters:\n{counters}", loss * 100.0);
    assert!(sent >= 10_000);
    let se = (0.01f64 * 0.99 / sent as f64).sqrt();
    assert!((loss - 0.01).abs() <= 4.5 * se, "loss {loss} vs 1 % (4.5 s.e. = {}); the link's counters:\n{counters}", 4.5 * se);

    // Overload at 15 Mbit/s: the link delivers 10 Mbit/s of frames (payload + 42 B of headers).
    let t = probe(exp, &dir, "a", "b", "10.9.0.2", &["-C", "1875", "-c", "1000", "-t", "5s"], "over");
    let pkts = t["packets"].as_f64().unwrap();
    let secs = t["duration_s"].as_f64().unwrap();
    let rate = pkts * (1000.0 + 42.0) * 8.0 / secs;
    eprintln!("overload: {pkts} frames in {secs:.3} s = {:.3} Mbit/s on the wire", rate / 1e6);
    assert!((rate / 10e6 - 1.0).abs() <= 0.05, "delivered {rate} bit/s, set 10 Mbit/s");
    ok(&["emu", "down", exp, "--purge"]);
}

/// The kernel path: where netem exists, the link gets a netem qdisc and the probe sees its
/// delay; where it does not (this project's CI kernel), forcing it fails with an error that
/// names netem and the way out, and nothing is left behind.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn netem_path_where_the_kernel_has_it() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let dir = tmp("netem");
    let topo = write(&dir, "n.toml", "name = \"n\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"10.8.0.0/30\"\ndelay = \"10ms\"\n");
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    let out = std::process::Command::new(HORDE).args(["emu", "up", topo.to_str().unwrap(), "--id", exp]).env("HORDE_EMU_NETEM", "force").output().unwrap();
    if horde_emu::kernel_has_netem() {
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("1 by kernel netem"), "{out:?}");
        let t = probe(exp, &dir, "a", "b", "10.8.0.2", &["-C", "100", "-c", "100", "-z", "100"], "n");
        let d = t["delay"]["mean_ms"].as_f64().unwrap();
        assert!((10.0..11.0).contains(&d), "netem delay {d} ms");
        ok(&["emu", "down", exp, "--purge"]);
    } else {
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("netem qdisc") && err.contains("--userspace"), "{err}");
        assert!(namespaces(exp).is_empty(), "a failed up leaves nothing");
        assert!(!std::path::Path::new(&format!("/run/horde/emu/{exp}")).exists());
    }
}

/// Issue 66: a command's tree ends with it, `setsid` included, with a cgroup hierarchy and
/// without one (a private mount namespace with /sys/fs/cgroup unmounted, as an agent started by
/// `ip netns exec` sees it): each command runs under an init in a PID namespace of its own.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_commands_tree_ends_with_it_even_without_cgroups() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("pidns");
    let topo = write(&dir, "routed.toml", ROUTED);
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", exp]);
    let node = horde_emu::node_dir(exp, "c1");
    std::fs::create_dir_all(&node).unwrap();
    // a daemon that leaves its session and its parent: its own pid (as this machine sees it)
    // is in escaped.pid
    std::fs::write(node.join("escape.sh"), "setsid sh -c 'cut -d\" \" -f4 /proc/self/stat > escaped.pid; exec sleep 470' &\nsleep 0.5\n").unwrap();
    for without_cgroups in [false, true] {
        let _ = std::fs::remove_file(node.join("escaped.pid"));
        let t = std::time::Instant::now();
        let o = if without_cgroups {
            let script = format!("umount -l /sys/fs/cgroup && test ! -e /sys/fs/cgroup/pids/cgroup.procs && exec {HORDE} emu exec {exp} c1 -- sh escape.sh");
            std::process::Command::new("unshare").args(["-m", "--propagation", "private", "sh", "-c", &script]).output().unwrap()
        } else {
            std::process::Command::new(HORDE).args(["emu", "exec", exp, "c1", "--", "sh", "escape.sh"]).output().unwrap()
        };
        assert!(o.status.success(), "without cgroups {without_cgroups}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(t.elapsed() < Duration::from_secs(4), "answered after {:?}", t.elapsed());
        let pid: i32 = std::fs::read_to_string(node.join("escaped.pid")).unwrap().trim().parse().unwrap();
        let gone = std::time::Instant::now();
        while std::path::Path::new(&format!("/proc/{pid}")).exists() && gone.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(!cmdline.contains("470"), "without cgroups {without_cgroups}: the setsid daemon {pid} outlived its command");
    }
    // In the background (--detach), what it starts runs on, until `down` ends it.
    let _ = std::fs::remove_file(node.join("escaped.pid"));
    let out = ok(&["emu", "exec", "--detach", exp, "c1", "--", "sh", "escape.sh"]);
    assert!(out.contains("started `sh` in c1"), "{out}");
    let t = std::time::Instant::now();
    while !node.join("escaped.pid").exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(800));
    let pid: i32 = std::fs::read_to_string(node.join("escaped.pid")).unwrap().trim().parse().unwrap();
    assert!(std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default().contains("470"), "a detached command's daemon runs on");
    ok(&["emu", "down", exp, "--purge"]);
    let gone = std::time::Instant::now();
    while std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default().contains("470") && gone.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default().contains("470"), "down ended the detached command's daemon");
}

/// `horde run` with `[emu]`: WoW players on 200 client hosts behind the access network's 20 ms
/// bottleneck; the report shows the bottleneck and the topology is gone afterwards.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn run_places_players_on_emulated_hosts() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    // nearly alone: 120 players on 200 emulated hosts connect at once; beside the whole suite a
    // neighbour lookup once timed out (EHOSTUNREACH) and failed the run
    let _share = horde_testkit::share(horde_testkit::Load::Quiet);
    let dir = tmp("run");
    write(&dir, "access.toml", &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topologies/access.toml")).unwrap());
    let sc = write(
        &dir,
        "sc.toml",
        "service = \"wow\"\nplayers = 120\nduration = \"8s\"\nseed = 5\n[emu]\ntopology = \"access.toml\"\nclients = [\"client\"]\nserver = \"server\"\n",
    );
    let out = dir.join("out");
    let o = std::process::Command::new(HORDE).args(["run", sc.to_str().unwrap(), "-q", "--out", out.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let exp = err.split("as experiment ").nth(1).and_then(|s| s.split_whitespace().next()).expect("experiment id in the output");
    assert!(namespaces(exp).is_empty(), "the run takes its topology down");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["server_connections"], 120, "every player connected through the routers");
    assert_eq!(s["mismatched"], 0);
    for c in s["analysis"]["categories"].as_array().unwrap() {
        let up = &c["up"];
        if up["received"].as_u64().unwrap_or(0) >= 20 {
            let p50 = up["delay_p50_ms"].as_f64().unwrap();
            assert!((20.0..60.0).contains(&p50), "{}: upstream delay p50 {p50} ms behind the 20 ms bottleneck", c["category"]);
        }
    }
    let links = &s["emulated_links"];
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("Emulated network") && html.contains("r1 → r2"), "the report shows the emulated links");
    assert!(links[0]["ab"]["packets"].as_u64().unwrap() > 100, "{links}");
    assert!(links[0]["ab"]["lost"].as_u64().unwrap() > 0, "1 % loss on the bottleneck: {links}");
    // Every link table adds up (issue 48): offered + copies = drops + still inside + delivered.
    for l in links.as_array().unwrap() {
        for d in [&l["ab"], &l["ba"]] {
            let n = |k: &str| d[k].as_u64().unwrap();
            let dropped = n("lost") + n("queue_drops") + n("overflow_drops") + n("send_errors") + n("rx_overrun") + n("tx_overrun");
            assert_eq!(n("packets") + n("rx_overrun") + n("duplicated"), dropped + n("in_flight") + n("sent") - n("tx_overrun"), "{d}");
        }
    }
    assert!(html.contains("in link") && html.contains("offered + dup = lost"), "the report's link table has the column that makes it add up");
    // Two kinds of box (issue 48): the generator judged on its departures, the path described.
    let kinds =
        |k: &str| s["verdicts"].as_array().unwrap().iter().filter(|v| v["kind"] == k).map(|v| v["label"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (generator, path) = (kinds("generator"), kinds("path"));
    assert!(generator.iter().any(|l| l.starts_with("worst departure rate")) && generator.iter().any(|l| l.starts_with("worst departure fit")), "{generator:?}");
    assert!(
        path.iter().any(|l| l.starts_with("APDUs undelivered at the end (TCP)")) && path.iter().any(|l| l.starts_with("largest change by the path")),
        "{path:?}"
    );
    assert!(html.contains("The generator: what Horde controls") && html.contains("The path: what the network did"));
    // A picture of the topology, and the bottleneck's queue and drops over time.
    let topo = std::fs::read_to_string(out.join("charts/topology.svg")).unwrap();
    assert!(topo.contains("r1") && topo.contains("r2") && topo.contains("class=\"series\""), "{topo}");
    assert!(out.join("charts/link-r1-r2-queue.svg").is_file() && out.join("charts/link-r1-r2-drops.svg").is_file());
    assert!(s["emulated_link_series"][0]["points"].as_array().unwrap().len() >= 3, "sampled once a second");
}

/// Acceptance (issue 65): a report directory holds every input — the scenario as it ran (the
/// command line's overrides written in), its service file with the `file(...)` values it
/// read, the topology — and, copied alone to another folder (the originals gone), `horde run
/// DIR` runs the experiment again: every scheduled departure (flow, sequence, size, time from
/// the start) is the same.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_report_directory_runs_its_experiment_again() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let dir = tmp("rerun");
    for d in ["net", "svc"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    write(&dir, "net/routed.toml", ROUTED);
    write(&dir, "sizes.txt", "60 80 100 120 140");
    let quake = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../model/services/quake3-ditg.toml")).unwrap();
    let sizes = format!("\"file({})\"", dir.join("sizes.txt").display());
    let svc = quake.replacen("\"normal(130, 30, round=nearest, min=20)\"", &sizes, 1);
    assert_ne!(svc, quake, "the service's down.size reads a value file");
    write(&dir, "svc/game.toml", &svc);
    let sc = write(
        &dir,
        "sc.toml",
        "service = \"svc/game.toml\"\nplayers = 2\nduration = \"9s\"\nseed = 3\njoin = \"uniform(0, 1)\"\n[emu]\ntopology = \"net/routed.toml\"\nclients = [\"c\"]\nserver = \"srv\"\n",
    );
    let run = |scenario: &std::path::Path, out: &std::path::Path, extra: &[&str]| {
        let o = std::process::Command::new(HORDE).args(["run", scenario.to_str().unwrap(), "-q", "--out", out.to_str().unwrap()]).args(extra).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let first = dir.join("first");
    // overrides on the command line are part of what ran
    run(&sc, &first, &["--players", "6", "--seed", "11", "-t", "4s"]);
    for f in ["scenario.toml", "service.toml", "topology.toml", "run.json"] {
        assert!(first.join(f).is_file(), "the report keeps {f}");
    }
    let kept = std::fs::read_to_string(first.join("scenario.toml")).unwrap();
    assert!(kept.contains("players = 6") && kept.contains("seed = 11") && kept.contains("duration = \"4s\""), "{kept}");
    let run_json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(first.join("run.json")).unwrap()).unwrap();
    assert!(run_json["command_line"].as_array().unwrap().iter().any(|a| a == "--players"), "{run_json}");
    assert!(!std::fs::read_to_string(first.join("service.toml")).unwrap().contains("file("), "value files inlined");
    // copied alone, the originals gone
    let elsewhere = tmp("rerun-copy");
    let copy = elsewhere.join("kept");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(&first).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
        }
    }
    std::fs::remove_dir_all(dir.join("svc")).unwrap();
    std::fs::remove_dir_all(dir.join("net")).unwrap();
    std::fs::remove_file(dir.join("sizes.txt")).unwrap();
    let again = dir.join("again");
    run(&copy, &again, &[]);
    let departures = |out: &std::path::Path| {
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        let t0 = s["client"]["t0_real_ns"].as_u64().unwrap();
        let mut d: Vec<(u32, u64, u32, u64)> = horde_stats::records_of(&out.join("client.hlog"))
            .unwrap()
            .into_iter()
            .filter(|r| r.kind == horde_wire::RecordKind::Sent)
            .map(|r| (r.flow, r.seq, r.size, r.t_a - t0))
            .collect();
        d.sort_unstable();
        (s["players"].as_u64().unwrap(), d)
    };
    let (a, b) = (departures(&first), departures(&again));
    assert_eq!(a.0, 6);
    assert!(a.1.len() > 100, "{} departures", a.1.len());
    assert_eq!(a, b, "the same departures, at the same instants from the start");
}

/// Acceptance (issue 22): a link of a running emulated scenario changes through the command
/// channel — the r1–r2 bottleneck's delay goes from 20 ms to 250 ms at 4 s, and the players'
/// APDUs that cross it after the change take that long; a link that is not there is refused
/// and the run goes on.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_link_of_a_running_emulated_scenario_changes_through_the_channel() {
    use std::io::Write as _;
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    // nearly alone: 40 players connect through the link emulator at once, and the test times
    // the change within 100 ms (beside the whole suite its run once ended before its commands)
    let _share = horde_testkit::share(horde_testkit::Load::Quiet);
    let dir = tmp("run-link");
    write(&dir, "access.toml", &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topologies/access.toml")).unwrap());
    let sc = write(
        &dir,
        "sc.toml",
        "service = \"wow\"\nplayers = 40\nduration = \"10s\"\nseed = 5\n[emu]\ntopology = \"access.toml\"\nclients = [\"client\"]\nserver = \"server\"\n",
    );
    let out = dir.join("out");
    let mut child = std::process::Command::new(HORDE)
        .args(["run", sc.to_str().unwrap(), "-q", "--out", out.to_str().unwrap(), "--commands", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The topology takes a moment to come up; the players' clock starts after it.
    let mut err = child.stderr.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("as experiment ") {
        let n = std::io::Read::read(&mut err, &mut buf).unwrap();
        assert!(n > 0, "{seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    std::thread::sleep(std::time::Duration::from_secs(4));
    if writeln!(stdin, r#"{{"command":"link","a":"r1","b":"nope","set":{{"delay":"1ms"}}}}"#).is_err() {
        // the run ended before its commands: say how
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        panic!("the run ended early ({:?}): {seen}{rest}", child.wait());
    }
    writeln!(stdin, r#"{{"command":"link","a":"r1","b":"r2","set":{{"delay":"250ms"}}}}"#).unwrap();
    stdin.flush().unwrap();
    let changed_at = std::time::Instant::now();
    // a player's access link fails for a second and comes back (issue 24); `state` goes alone
    std::thread::sleep(std::time::Duration::from_millis(1500));
    writeln!(stdin, r#"{{"command":"link","a":"client1","b":"sw1","state":"down","set":{{"delay":"1ms"}}}}"#).unwrap();
    writeln!(stdin, r#"{{"command":"link","a":"client1","b":"sw1","state":"down"}}"#).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    writeln!(stdin, r#"{{"command":"link","a":"client1","b":"sw1","state":"up"}}"#).unwrap();
    stdin.flush().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    seen.push_str(&rest);
    assert!(child.wait().unwrap().success(), "{seen}");
    assert!(seen.contains("command refused (#") && seen.contains("link r1–nope"), "{seen}");
    assert!(seen.contains("link r1–r2 (both) changed:") && seen.contains("delay 250.000 ms"), "{seen}");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["mismatched"], 0);
    assert!(s["emulated_links"][0]["ab"]["spec"].as_str().unwrap().contains("delay 250.000 ms"), "{}", s["emulated_links"]);
    assert!(seen.contains("`state` goes alone") && seen.contains("link client1 – sw1: down") && seen.contains("link client1 – sw1: up"), "{seen}");
    let events: Vec<String> = s["network_events"].as_array().unwrap().iter().map(|e| e["what"].as_str().unwrap().to_string()).collect();
    assert_eq!(events, ["r1–r2 changed", "client1 – sw1: down", "client1 – sw1: up"], "{}", s["network_events"]);
    let chart = std::fs::read_to_string(out.join("charts/link-r1-r2-queue.svg")).unwrap();
    assert!(chart.contains("client1 – sw1: down") && chart.contains("r1–r2 changed"), "the events are marked on the time charts");
    // The topology picture shows the bottleneck as built and as the run left it (issue 48).
    let topo = std::fs::read_to_string(out.join("charts/topology.svg")).unwrap();
    assert!(topo.contains("as built: ") && topo.contains("at the end: ") && topo.contains("250.000 ms") && topo.contains("down at the end"), "{topo}");
    // Upstream APDUs at the server: the link's 20 ± 5 ms (its jitter: a median just under 20 is
    // the link, not a fault) up to 100 ms before the change, ≥ 250 ms a second after it.
    let recs = horde_stats::load(&std::fs::read(out.join("server.hlog")).unwrap()).unwrap().records;
    let now_real = horde_sys::clock::real_ns();
    let change_real = now_real - changed_at.elapsed().as_nanos() as u64;
    let received: Vec<_> = recs.iter().filter(|r| r.kind == horde_wire::RecordKind::Received).collect();
    let delay_ms = |r: &&horde_wire::Record| r.t_b.saturating_sub(r.t_a) as f64 / 1e6;
    let before: Vec<f64> = received.iter().filter(|r| r.t_b + 500_000_000 < change_real).map(delay_ms).collect();
    let after: Vec<f64> = received.iter().filter(|r| r.t_a > change_real + 1_000_000_000).map(delay_ms).collect();
    assert!(before.len() > 50 && after.len() > 50, "{} before, {} after", before.len(), after.len());
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (b, a) = (median(before), median(after));
    assert!((15.0..100.0).contains(&b) && (250.0..400.0).contains(&a), "upstream delay median {b:.1} ms before, {a:.1} ms after the change");
    // One clock: the command's answer, the report's mark and the measured effect (the first
    // APDU that left after the change and took ≥ 250 ms, on the players' clock) agree within
    // 100 ms.
    let answered_at: f64 = seen
        .lines()
        .find(|l| l.contains("link r1–r2 (both) changed"))
        .and_then(|l| l.split(" at ").nth(1))
        .and_then(|t| t.split(" s:").next())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no answer with its time: {seen}"));
    let marked_at = s["network_events"][0]["at_s"].as_f64().unwrap();
    let t0 = s["client"]["t0_real_ns"].as_u64().unwrap();
    // the change point: the first departure from which the next 20 all took ≥ 200 ms (the new
    // 250 ms less its jitter; 20–100 ms before it; a connection's first APDUs may wait longer
    // at the start, whatever the link)
    let mut by_departure: Vec<(f64, f64)> = received.iter().map(|r| (r.t_a.saturating_sub(t0) as f64 / 1e9, delay_ms(r))).collect();
    by_departure.sort_by(|a, b| a.0.total_cmp(&b.0));
    let effect_at =
        (0..by_departure.len().saturating_sub(20)).find(|&k| by_departure[k..k + 20].iter().all(|x| x.1 >= 200.0)).map_or(f64::INFINITY, |k| by_departure[k].0);
    assert!((answered_at - marked_at).abs() < 0.1, "answered at {answered_at} s, marked at {marked_at} s");
    assert!((effect_at - marked_at).abs() < 0.1, "the first delayed APDU left at {effect_at:.3} s, the mark says {marked_at:.3} s");
    let series = &s["emulated_link_series"][0]["points"];
    let first_t = series[0][0].as_f64().unwrap();
    assert!((0.0..1.2).contains(&first_t), "the link series is on the run's clock from its start: first sample at {first_t} s");
}

/// Live loss (issue 23): Quake 3 players (UDP) behind a link that drops 5 % each way; each
/// progress line's second of departures, counted 3 s later, shows that loss — by second of
/// departure, so it needs no sequence numbers — and it agrees with the report's.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn live_loss_each_way_follows_a_lossy_link() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("live-loss");
    write(
        &dir,
        "lossy.toml",
        "name = \"lossy\"\n[[node]]\nname = \"c\"\nkind = \"host\"\ncount = 4\n[[node]]\nname = \"sw\"\nkind = \"switch\"\n\
         [[node]]\nname = \"r1\"\nkind = \"router\"\n[[node]]\nname = \"srv\"\nkind = \"host\"\n\
         [[link]]\na = \"c\"\nb = \"sw\"\nsubnet = \"10.1.0.0/24\"\n[[link]]\na = \"r1\"\nb = \"sw\"\n\
         [[link]]\na = \"r1\"\nb = \"srv\"\nsubnet = \"10.2.0.0/24\"\ndelay = \"5ms\"\nloss = \"5%\"\n",
    );
    let sc = write(
        &dir,
        "sc.toml",
        "service = \"quake3\"\nplayers = 20\nduration = \"10s\"\nseed = 5\n[emu]\ntopology = \"lossy.toml\"\nclients = [\"c\"]\nserver = \"srv\"\n",
    );
    let (out, prog) = (dir.join("out"), dir.join("progress.jsonl"));
    ok(&["run", sc.to_str().unwrap(), "-q", "--out", out.to_str().unwrap(), "--progress", "json", "--progress-file", prog.to_str().unwrap()]);
    let losses: Vec<serde_json::Value> = std::fs::read_to_string(&prog)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["progress"].get("loss").cloned())
        .collect();
    assert!(losses.len() >= 5, "a second's loss on most ticks: {losses:?}");
    let sum = |k: &str| losses.iter().map(|l| l[k].as_u64().unwrap()).sum::<u64>();
    for (dir, sent, lost) in [("up", sum("up_sent"), sum("up_lost")), ("down", sum("down_sent"), sum("down_lost"))] {
        let f = lost as f64 / sent as f64;
        let se = (0.05f64 * 0.95 / sent as f64).sqrt();
        eprintln!("live {dir}: {lost} of {sent} lost = {:.2} % (4 s.e. = {:.2} %)", f * 100.0, 4.0 * se * 100.0);
        assert!(sent >= 1_000 && (f - 0.05).abs() <= 4.0 * se, "{dir}: live loss {f} vs the link's 5 % ({losses:?})");
    }
    // the report (from the logs) says the same within the sampling error of both
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let (mut up, mut down) = ((0u64, 0u64), (0u64, 0u64)); // (sent, lost)
    for c in s["analysis"]["categories"].as_array().unwrap() {
        for (d, acc) in [("up", &mut up), ("down", &mut down)] {
            acc.0 += c[d]["sent"].as_u64().unwrap_or(0);
            acc.1 += c[d]["lost"].as_u64().unwrap_or(0);
        }
    }
    for (dir, (sent, lost), live) in
        [("up", up, sum("up_lost") as f64 / sum("up_sent") as f64), ("down", down, sum("down_lost") as f64 / sum("down_sent") as f64)]
    {
        let f = lost as f64 / sent as f64;
        eprintln!("report {dir}: {lost} of {sent} lost = {:.2} %", f * 100.0);
        assert!(sent > 0 && (f - live).abs() <= 0.02, "{dir}: report {f} vs live {live}");
    }
}

/// A switch with more links than a Linux bridge holds ports (1,024) is built as a tree of
/// bridges (issue 24), spread over more than one fabric namespace (600 ports each): 1,500 hosts
/// on one switch come up, hosts on different bridges and shards reach each other, a host on an
/// impaired link to the last bridge (its end in a shard, the link emulator's in the fabric)
/// gets its delay, and a port in a shard goes down and comes back up.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_switch_past_a_bridges_port_limit_is_a_tree_of_bridges() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Many); // 1,500 hosts built at once
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("big-switch");
    let topo = write(
        &dir,
        "star.toml",
        "name = \"star\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = 1500\n[[node]]\nname = \"x\"\nkind = \"host\"\n[[node]]\nname = \"sw\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"sw\"\nsubnet = \"10.50.0.0/16\"\n[[link]]\na = \"x\"\nb = \"sw\"\ndelay = \"2ms\"\n",
    );
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", exp]);
    // listed and drawn grouped (a row and a vertex for the 1,500 hosts), every node on request
    let grouped = ok(&["emu", "ls", exp]);
    assert!(grouped.lines().count() < 11 && grouped.contains("h1 … h1500") && grouped.contains("×1500"), "{grouped}");
    let dot = ok(&["emu", "ls", exp, "--dot"]);
    assert!(dot.lines().count() < 12 && dot.contains("×1500"), "{dot}");
    let ls = ok(&["emu", "ls", exp, "--all"]);
    assert_eq!(ls.lines().filter(|l| l.starts_with('h')).count(), 1500, "{ls}");
    let addr = |n: &str| ls.lines().find(|l| l.split_whitespace().next() == Some(n)).and_then(|l| l.split_whitespace().last()).unwrap().to_string();
    for far in ["h1500", "h777"] {
        let t = probe(exp, &dir, "h1", far, &addr(far), &["-C", "50", "-c", "50", "-z", "100"], far); // 100 packets
        assert_eq!((t["packets"].as_u64(), t["loss"]["lost"].as_u64()), (Some(100), Some(0)), "h1 → {far}: {t}");
    }
    assert!(namespaces(exp).iter().filter(|n| n.contains("-.f")).count() >= 2, "shards: {:?}", namespaces(exp));
    let t = probe(exp, &dir, "h1", "x", &addr("x"), &["-C", "50", "-c", "50", "-z", "100"], "x");
    assert_eq!((t["packets"].as_u64(), t["loss"]["lost"].as_u64()), (Some(100), Some(0)), "h1 → x: {t}");
    let min = t["delay"]["min_ms"].as_f64().unwrap_or_else(|| panic!("owd: {t}"));
    assert!(min >= 1.9, "the impaired link's 2 ms: {t}");
    ok(&["emu", "link", exp, "h1500", "sw", "--down"]);
    ok(&["emu", "link", exp, "h1500", "sw", "--up"]);
    let t = probe(exp, &dir, "h1", "h1500", &addr("h1500"), &["-C", "50", "-c", "50", "-z", "100"], "again");
    assert_eq!((t["packets"].as_u64(), t["loss"]["lost"].as_u64()), (Some(100), Some(0)), "h1 → h1500 after down/up: {t}");
    ok(&["emu", "down", exp, "--purge"]);
    assert!(namespaces(exp).is_empty());
}

/// An impaired link that cannot keep up loses frames before its daemon reads them (its socket's
/// buffer overflows); those frames are the link's, and its counters say so (issue 24). The
/// forwarder is held still (SIGSTOP) for 6 s of a 60,000 pkt/s flow of 1,400-byte datagrams —
/// ~360,000 frames, where the 256 MiB its socket may hold took ~234,000 — then let go: every frame
/// sent is received, or counted lost by the link, or by the receiving host's own UDP buffer (the
/// link's count may also hold the few ARP/ND frames held up with them).
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn an_overloaded_link_counts_the_frames_it_lost() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Quiet); // a 60,000 pkt/s sender must keep its rate
    let dir = tmp("overrun");
    let topo = write(
        &dir,
        "pair.toml",
        "name = \"over\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"10.9.0.0/30\"\ndelay = \"1ms\"\n",
    );
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", exp]);
    let daemon: i32 = std::fs::read_to_string(format!("/run/horde/emu/{exp}/ready")).unwrap().trim().parse().unwrap();
    let rjson = dir.join("r.json");
    let sjson = dir.join("s.json");
    let mut recv = std::process::Command::new(HORDE)
        .args(["emu", "exec", exp, "b", "--", HORDE, "recv", "-b", "10.9.0.2", "-p", "9000", "--idle", "10s", "--json"])
        .arg(&rjson)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let pause = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: signalling the experiment's own daemon.
        unsafe { libc::kill(daemon, libc::SIGSTOP) };
        std::thread::sleep(std::time::Duration::from_secs(6));
        // SAFETY: as above.
        unsafe { libc::kill(daemon, libc::SIGCONT) };
    });
    ok(&["emu", "exec", exp, "a", "--", HORDE, "send", "-a", "10.9.0.2:9000", "-C", "60000", "-c", "1400", "-t", "7s", "--json", sjson.to_str().unwrap()]);
    pause.join().unwrap();
    assert!(recv.wait().unwrap().success());
    let read = |p: &std::path::Path| -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let sent = read(&sjson)["packets"].as_u64().unwrap();
    let got = read(&rjson)["packets"].as_u64().unwrap();
    let links: serde_json::Value = serde_json::from_str(&ok(&["emu", "link", exp, "a", "b", "--json"])).unwrap();
    let ab = &links[0]["ab"];
    let n = |k: &str| ab[k].as_u64().unwrap();
    let link_lost = n("lost") + n("queue_drops") + n("overflow_drops") + n("send_errors") + n("rx_overrun") + n("tx_overrun");
    // the receiving host's own UDP buffer (not the link's doing)
    let snmp = ok(&["emu", "exec", exp, "b", "--", "cat", "/proc/net/snmp"]);
    let udp: Vec<Vec<&str>> = snmp.lines().filter(|l| l.starts_with("Udp:")).map(|l| l.split_whitespace().collect()).collect();
    let col = udp[0].iter().position(|h| *h == "RcvbufErrors").unwrap();
    let host_lost: u64 = udp[1][col].parse().unwrap();
    eprintln!("sent {sent}, received {got}, lost by the link {link_lost} (overrun {}), by b's UDP buffer {host_lost}; {ab}", n("rx_overrun"));
    assert!(sent > 300_000, "the sender kept its rate: {sent}");
    assert!(n("rx_overrun") > 10_000, "6 s of 60,000 pkt/s of 1,400 B cannot fit the link's socket: {ab}");
    // frames read + frames overrun = frames offered: the flow, and the few ARP/ND frames of its
    // hosts (while the link is held still, a's neighbour entry for b goes unconfirmed and the
    // kernel probes it: up to 3 unicast then 3 broadcast probes, each way, on top of the usual
    // handful); a's own datagrams are never more than `sent`
    let offered = n("packets") + n("rx_overrun");
    assert!(offered >= sent && offered - sent <= 40, "{sent} sent, {offered} offered to the link: {ab}");
    // Every datagram is received or counted lost somewhere. The link counts frames, not
    // datagrams: an ARP/ND probe that arrived while it was held still is lost with the flow's
    // frames, so the losses may pass the flow's own by at most the frames that were not the
    // flow's (offered − sent), and never fall short of it.
    let accounted = got + link_lost + host_lost;
    assert!(
        accounted >= sent && accounted - sent <= offered - sent,
        "every datagram is received or counted lost: {sent} sent, {got} received + {link_lost} lost by the link + {host_lost} by b's buffer = {accounted}; {} frames offered were not the flow's",
        offered - sent
    );
    ok(&["emu", "down", exp, "--purge"]);
}

/// Issue 48: a link with a rate and no `queue` gets a finite one (100 ms at its rate), and its
/// counters add up exactly while frames are still inside it: offered + copies = dropped + in
/// the link + delivered, read mid-run and after. 4 Mbit/s into 2 Mbit/s for 3 s: before, the
/// queue grew for the whole run (1.5 s of delay by its end) and nothing was dropped.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_rate_limited_link_has_a_finite_queue_by_default_and_its_counters_add_up() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let dir = tmp("queue-default");
    let topo = write(
        &dir,
        "pair.toml",
        "name = \"q\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"10.9.4.0/30\"\nrate = \"2mbit\"\ndelay = \"20ms\"\n",
    );
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", exp]);
    let mut recv = std::process::Command::new(HORDE)
        .args(["emu", "exec", exp, "b", "--", HORDE, "recv", "-b", "10.9.4.2", "-p", "9000", "--idle", "2s"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut send = std::process::Command::new(HORDE)
        .args(["emu", "exec", exp, "a", "--", HORDE, "send", "-a", "10.9.4.2:9000", "-C", "500", "-c", "1000", "-t", "3s"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let counters = || -> serde_json::Value { serde_json::from_str(&ok(&["emu", "link", exp, "a", "b", "--json"])).unwrap() };
    let adds_up = |d: &serde_json::Value| {
        let n = |k: &str| d[k].as_u64().unwrap();
        let dropped = n("lost") + n("queue_drops") + n("overflow_drops") + n("send_errors") + n("rx_overrun") + n("tx_overrun");
        let (offered, delivered) = (n("packets") + n("rx_overrun"), n("sent") - n("tx_overrun"));
        assert_eq!(offered + n("duplicated"), dropped + n("in_flight") + delivered, "every frame is dropped, in the link or delivered: {d}");
    };
    let mid = counters();
    let ab = &mid[0]["ab"];
    adds_up(ab);
    adds_up(&mid[0]["ba"]);
    assert!(ab["in_flight"].as_u64().unwrap() > 0, "frames queued and being delayed mid-run: {ab}");
    assert!(ab["queue_bytes"].as_u64().unwrap() <= 25_000, "100 ms at 2 Mbit/s: {ab}");
    assert!(ab["spec"].as_str().unwrap().contains("queue 25000 B (default"), "{ab}");
    assert!(send.wait().unwrap().success());
    assert!(recv.wait().unwrap().success());
    let end = counters();
    let ab = &end[0]["ab"];
    adds_up(ab);
    assert_eq!(ab["in_flight"].as_u64(), Some(0), "{ab}");
    let (offered, drops) = (ab["packets"].as_u64().unwrap(), ab["queue_drops"].as_u64().unwrap());
    assert!(drops * 10 > offered * 3, "about half of 4 Mbit/s does not fit 2 Mbit/s: {drops} of {offered} dropped at the queue");
    let table = ok(&["emu", "link", exp, "a", "b"]);
    assert!(table.contains("in link") && table.contains("offered + dup = lost + q-drops + overrun + in link + delivered"), "{table}");
    // Unbounded is an explicit choice, and said so.
    ok(&["emu", "link", exp, "a", "b", "--queue", "unbounded"]);
    assert!(counters()[0]["ab"]["spec"].as_str().unwrap().contains("queue unbounded"));
    ok(&["emu", "down", exp, "--purge"]);
}
