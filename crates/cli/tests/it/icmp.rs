//! ICMP without root: both ends say what to do (the ICMP traffic itself is `root::icmp`).

use std::process::Command;

use crate::emu_util::HORDE;

/// Run as `nobody` (no CAP_NET_RAW), both ends say that ICMP needs root and how to grant it.
#[test]
fn without_root_icmp_is_refused_with_the_way_out() {
    // SAFETY: no arguments.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI runs as root: this test drops to nobody with setpriv");
    }
    let dir = horde_testkit::Scratch::new("icmp-noroot");
    let bin = dir.join("horde");
    std::fs::copy(HORDE, &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| {
        let mut c = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]).arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        c.args(args).current_dir(&dir).output().unwrap()
    };
    let o = as_nobody(&["send", "-T", "icmp", "--dst", "127.0.0.1", "-C", "10", "-c", "64", "-t", "1s", "--floor", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("run as root") && err.contains("CAP_NET_RAW"), "{o:?}");
    let o = as_nobody(&["recv", "--icmp", "--idle", "1s"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("run as root") && err.contains("CAP_NET_RAW"), "{o:?}");
}
