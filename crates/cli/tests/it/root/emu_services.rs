//! A topology's services (issue 69): started in their nodes at up, answering, ended at down.

use crate::emu_util::*;

/// Issue 69 (IMUNES's Host node starts its services): a host's `services` start at up — a real
/// HTTP server another node fetches a page from — with their output in the node's directory,
/// and end at down with nothing left; a service that ends at once fails the up, naming it and
/// quoting its output, and leaves nothing behind.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn services_start_at_up_answer_and_end_at_down() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let dir = tmp("services");
    std::fs::write(dir.join("index.html"), "served by a node\n").unwrap();
    let topo = format!(
        "name = \"svc\"\n[[node]]\nname = \"web\"\nkind = \"host\"\nservices = [\"python3 -m http.server 8080 --bind 10.7.0.1 --directory '{}'\", \"sh -c 'echo started; exec sleep 600'\"]\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"web\"\nb = \"b\"\nsubnet = \"10.7.0.0/30\"\n",
        dir.display()
    );
    let file = write(&dir, "svc.toml", &topo);
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    let out = horde(&["emu", "up", file.to_str().unwrap(), "--id", exp]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stderr).contains("2 service(s) started"), "{out:?}");
    let fetch = "import time, urllib.request\nfor _ in range(50):\n    try:\n        print(urllib.request.urlopen('http://10.7.0.1:8080/index.html', timeout=2).read().decode(), end='')\n        break\n    except OSError:\n        time.sleep(0.1)\n";
    assert_eq!(ok(&["emu", "exec", exp, "b", "--", "python3", "-c", fetch]), "served by a node\n");
    let node = format!("/run/horde/emu/{exp}/node/web");
    assert_eq!(std::fs::read_to_string(format!("{node}/service-2.out")).unwrap(), "started\n");
    assert!(std::fs::read_to_string(format!("{node}/service-1.out")).unwrap().contains("GET /index.html"), "the server's log");
    ok(&["emu", "down", exp, "--purge"]);
    assert!(namespaces(exp).is_empty());
    let gone = horde(&["emu", "exec", exp, "b", "--", "true"]);
    assert!(!gone.status.success(), "the experiment is gone");

    // a service that ends at once
    let bad = topo.replace("sh -c 'echo started; exec sleep 600'", "sh -c 'echo no config here >&2; exit 3'");
    let file = write(&dir, "bad.toml", &bad);
    let exp2 = horde_testkit::exp_id();
    let _down2 = Down(exp2.clone());
    let out = horde(&["emu", "up", file.to_str().unwrap(), "--id", &exp2]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("service `sh -c") && err.contains("ended at once") && err.contains("no config here"), "{err}");
    assert!(namespaces(&exp2).is_empty(), "a failed up leaves nothing");
    assert!(!std::path::Path::new(&format!("/run/horde/emu/{exp2}")).exists());
}

/// Issue 69 (IMUNES's nodes with a root of their own): with `root = "overlay"`, a file one node
/// writes over the machine's root is seen again by that node's next process, not by another
/// node and not by the machine; a service runs inside its node's root and answers; at down the
/// roots are unmounted and gone, and the machine's file is still not there.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_node_with_its_own_root_keeps_its_writes_to_itself() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let dir = tmp("own-root");
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    // a path under /etc the machine does not have, unique to this test
    let file = format!("/etc/horde-root-test-{exp}");
    assert!(!std::path::Path::new(&file).exists());
    let topo = "name = \"own-root\"\n[[node]]\nname = \"a\"\nkind = \"host\"\nroot = \"overlay\"\nservices = [\"python3 -m http.server 8081 --bind 10.8.0.1 --directory /etc\"]\n[[node]]\nname = \"b\"\nkind = \"host\"\nroot = \"overlay\"\n[[node]]\nname = \"c\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\nsubnet = \"10.8.0.0/29\"\n[[link]]\na = \"a\"\nb = \"c\"\nsubnet = \"10.8.1.0/29\"\n";
    let f = write(&dir, "own-root.toml", topo);
    ok(&["emu", "up", f.to_str().unwrap(), "--id", exp]);
    ok(&["emu", "exec", exp, "a", "--", "sh", "-c", &format!("echo written-in-a > {file}")]);
    assert_eq!(ok(&["emu", "exec", exp, "a", "--", "cat", &file]), "written-in-a\n", "the node's next process finds it");
    for other in ["b", "c"] {
        let o = horde(&["emu", "exec", exp, other, "--", "cat", &file]);
        assert!(!o.status.success(), "{other} does not see a's file: {o:?}");
    }
    assert!(!std::path::Path::new(&file).exists(), "the machine does not see it");
    // the service in a serves a's own /etc: the file written there
    let fetch = format!("import time, urllib.request\nfor _ in range(50):\n    try:\n        print(urllib.request.urlopen('http://10.8.0.1:8081/{}', timeout=2).read().decode(), end='')\n        break\n    except OSError:\n        time.sleep(0.1)\n", file.trim_start_matches("/etc/"));
    assert_eq!(ok(&["emu", "exec", exp, "b", "--", "python3", "-c", &fetch]), "written-in-a\n");
    let mounts = || std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().filter(|l| l.contains(&format!("/run/horde/emu/{exp}/"))).count();
    assert_eq!(mounts(), 4, "two roots: a tmpfs and an overlay each");
    ok(&["emu", "down", exp, "--purge"]);
    assert_eq!(mounts(), 0, "the roots are unmounted at down");
    assert!(!std::path::Path::new(&format!("/run/horde/emu/{exp}")).exists());
    assert!(!std::path::Path::new(&file).exists());
}

/// Issue 69 (services supervised): a service that ends after it started is started again
/// (after 1 s, then 2 s, … at most 30 s), its output appended to the same file with a line
/// saying so; `down` ends it for good.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn a_service_that_ends_is_started_again_until_down() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let dir = tmp("services-restart");
    let topo = "name = \"svc-restart\"\n[[node]]\nname = \"a\"\nkind = \"host\"\nservices = [\"sh -c 'echo run; sleep 1; exit 1'\"]\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\n";
    let f = write(&dir, "svc.toml", topo);
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let _down = Down(exp.to_string());
    ok(&["emu", "up", f.to_str().unwrap(), "--id", exp]);
    let out = format!("/run/horde/emu/{exp}/node/a/service-1.out");
    let t = std::time::Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if text.matches("run\n").count() >= 2 || t.elapsed() > std::time::Duration::from_secs(10) {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(text.matches("run\n").count() >= 2, "started again: {text:?}");
    assert!(text.contains("horde: the service ended; starting it again"), "{text:?}");
    ok(&["emu", "down", exp, "--purge"]);
    assert!(namespaces(exp).is_empty());
}
