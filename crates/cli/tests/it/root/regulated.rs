//! `horde circuit` and regulated runs on emulated links (root): a lossy link, an access network.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::circuit::{examples, json, mean_after};
use crate::emu_util::{ok, tmp, write, HORDE};

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn on_a_lossy_emulated_link_opensim_holds_where_mongoose_backs_off() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("circuit-emu");
    let topo = write(&d, "t.toml", "name = \"circuit\"\n[[node]]\nname = \"c\"\nkind = \"host\"\ncount = 2\n[[node]]\nname = \"s\"\nkind = \"host\"\ncount = 2\n[[link]]\na = \"c\"\nb = \"s\"\ndelay = \"50ms\"\nlive = true\n");
    let id = horde_testkit::exp_id();
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", &id]);
    struct Down(String);
    impl Drop for Down {
        fn drop(&mut self) {
            let _ = Command::new(HORDE).args(["emu", "down", &self.0, "--purge"]).output();
        }
    }
    let _down = Down(id.clone());
    // 2 % loss toward the clients, RTT 100 ms: OpenSim's throttle stays at its cap (no change
    // between 0.5 % and 3 %); Mongoose settles near the TCP-fair rate (~0.4 Mbit/s for
    // 1100-byte packets), far below the cap.
    for k in ["1", "2"] {
        ok(&["emu", "link", &id, &format!("s{k}"), &format!("c{k}"), "--dir", "ab", "--loss", "2%"]);
    }
    let mut servers = Vec::new();
    for (k, thr) in [("1", "opensim"), ("2", "mongoose")] {
        let listen = format!("10.0.{}.2:9400", k.parse::<u32>().unwrap() - 1);
        let mut c = Command::new(HORDE);
        c.args(["emu", "exec", &id, &format!("s{k}"), "--", HORDE, "circuit", "serve", "--listen", &listen, "--backlog", "texture", "-t", "45s"]);
        servers.push(c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
        let _ = thr;
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut clients = Vec::new();
    for (k, thr) in [("1", "opensim"), ("2", "mongoose")] {
        let j = d.join(format!("{thr}.json"));
        let server = format!("10.0.{}.2:9400", k.parse::<u32>().unwrap() - 1);
        let mut c = Command::new(HORDE);
        c.args([
            "emu",
            "exec",
            &id,
            &format!("c{k}"),
            "--",
            HORDE,
            "circuit",
            "join",
            "--server",
            &server,
            "--throttle",
            thr,
            "-t",
            "40s",
            "--json",
            j.to_str().unwrap(),
        ]);
        clients.push((thr, j, c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()));
    }
    let mut got = Vec::new();
    for (thr, j, c) in clients {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{thr}: {}", String::from_utf8_lossy(&o.stderr));
        let v = json(&j);
        got.push((thr, mean_after(&v, "rate_kbps", 12), mean_after(&v, "rtt_ms", 2)));
    }
    for mut s in servers {
        let _ = s.wait();
    }
    eprintln!("(throttle, kbit/s, rtt ms): {got:?}");
    let (os, mg) = (got[0].1, got[1].1);
    // Both are random processes (the link's 2 % loss is seeded by the experiment id, which
    // follows the test's pid), so the bounds are set from their distributions: the closed loop
    // of `horde_regulate::sim` over 2,000 seeds, means over seconds 12–40 of a 40-s run (the
    // window used here). OpenSim holds between 0.5 % and 3 % loss, but its 5-s windows of a 2 %
    // process read above 3 % now and then, each taking one step of 0.1 × setting (51.2 kbit/s)
    // off: the lowest mean of 2,000 was 620 kbit/s (1,100-byte packets; 671 at 375 bytes), three
    // steps below its cap. The bound allows four.
    assert!(
        (768.0 - 4.0 * 51.2 - 1.0..=768.0 + 1.0).contains(&os),
        "opensim at 2 % loss stays at (or a few steps below) 1.5 × 500 kbit/s (768 kbit/s): {got:?}"
    );
    // The TCP-fair rate here is 193 kbit/s (Padhye, 375-byte packets, 2 %, 100 ms). Mongoose's
    // 28-s means spread 119–320 kbit/s over 2,000 simulated seeds, and wider over the emulated
    // link: 111–342 kbit/s in 7 runs of this test (2026-11-25); an 8-s window, which this test
    // used before, once read 71 — below the half of the fair rate it then asserted. What must
    // hold whatever the draw: it backs off well below OpenSim, and does not collapse onto its
    // floor (51.2 kbit/s, where a stream of timeouts would pin it): its mean is above 1.1 × it.
    assert!(mg < 0.8 * os && mg > 1.1 * 51.2, "mongoose backs off below OpenSim without collapsing onto its floor: {got:?}");
    assert!((got[1].2 - 100.0).abs() < 10.0, "the client measured the link's round trip: {got:?}");
}

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_regulated_run_on_an_emulated_access_network_shares_the_bottleneck() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("circuit-run-emu");
    let out = d.join("out");
    let ex = examples().join("opensim-regulated-access.toml");
    let o = ok(&["run", ex.to_str().unwrap(), "-t", "25s", "--quiet", "-o", out.to_str().unwrap()]);
    assert!(o.contains("20 joined"), "{o}");
    let s = json(&out.join("summary.json"));
    let t = &s["totals"];
    // The bottleneck's 0.5 % random loss (and its queue's drops) reach the circuits, whose
    // clients measure the round trip of 80 ms and more; the throttles stay below their cap, the
    // circuits together under the bottleneck's 10 Mbit/s, and reliable packets are resent.
    assert!(t["loss_pct"].as_f64().unwrap() > 0.2, "{t}");
    assert!(t["rtt_ms_mean"].as_f64().unwrap() > 79.0, "{t}");
    assert!(t["request_kbps_mean"].as_f64().unwrap() < 0.9 * 1536.0, "{t}");
    assert!(t["received_kbps"].as_f64().unwrap() < 10_000.0, "{t}");
    assert!(t["resent"].as_u64().unwrap() > 0, "{t}");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("emulated links"), "the links' counters are in the report");
}
