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
