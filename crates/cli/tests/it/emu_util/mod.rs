//! Helpers of the emulated-environment tests (`root::`): experiments of the test's own.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const HORDE: &str = env!("CARGO_BIN_EXE_horde");

/// Takes an experiment down when dropped, whatever happened in the test.
pub struct Down(pub String);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = horde(&["emu", "down", &self.0, "--purge"]);
    }
}

/// A scratch directory of the test's own, removed when dropped.
pub fn tmp(name: &str) -> horde_testkit::Scratch {
    horde_testkit::Scratch::new(&format!("emu-{name}"))
}

pub fn horde(args: &[&str]) -> Output {
    Command::new(HORDE).args(args).output().unwrap()
}

/// Runs horde and insists on success.
pub fn ok(args: &[&str]) -> String {
    let o = horde(args);
    assert!(o.status.success(), "horde {args:?} failed: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Horde's namespaces of one experiment.
pub fn namespaces(exp: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n == &format!("horde-{exp}") || n.starts_with(&format!("horde-{exp}-")))
                .collect()
        })
        .unwrap_or_default()
}

/// Starts `horde recv` (`cmd`, maybe inside a node) and returns once it says it listens (its
/// node's identity set up and its sockets bound: a fixed sleep was too short on a busy machine),
/// within 20 s.
pub fn recv_listening(mut cmd: Command) -> std::process::Child {
    use std::io::BufRead as _;
    let mut child = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut said = Vec::new();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("listening on") {
                let _ = tx.send(Ok(()));
            }
            said.push(line);
        }
        let _ = tx.send(Err(said.join("\n")));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(Ok(())) => child,
        Ok(Err(said)) => panic!("horde recv ended before it listened: {said}"),
        Err(_) => panic!("horde recv did not say it listens within 20 s"),
    }
}

/// One probe through the emulated network: `horde recv` on `dst_node`, `horde send` from
/// `src_node`; returns the decoder's JSON total.
pub fn probe(exp: &str, dir: &Path, src_node: &str, dst_node: &str, dst_ip: &str, send_args: &[&str], tag: &str) -> serde_json::Value {
    let rlog = dir.join(format!("{tag}-r.hlog"));
    let slog = dir.join(format!("{tag}-s.hlog"));
    let mut cmd = Command::new(HORDE);
    cmd.args(["emu", "exec", exp, dst_node, "--", HORDE, "recv", "-b", dst_ip, "-p", "9000", "--idle", "3s", "-l"]).arg(&rlog);
    let mut recv = recv_listening(cmd);
    resolve_neighbour(exp, src_node, dst_ip);
    let dst = format!("{dst_ip}:9000");
    let mut args = vec!["emu", "exec", exp, src_node, "--", HORDE, "send", "-a", &dst, "-l", slog.to_str().unwrap()];
    args.extend_from_slice(send_args);
    ok(&args);
    assert!(recv.wait().unwrap().success());
    let out = ok(&["decode", slog.to_str().unwrap(), rlog.to_str().unwrap(), "-q", "--json", "-"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["total"].clone()
}

/// Pings `dst_ip` from `src_node` until one answer comes (at most 20 tries), so the probe's
/// first packets do not wait on ARP: on a lossy link a lost request or answer holds them for a
/// second, and the kernel drops what does not fit its queue of unresolved packets meanwhile
/// (at 100 packets/s of 2,000 B, some 25 of them: 1.75 % "loss" on a 1 % link, CI, stop 73).
fn resolve_neighbour(exp: &str, src_node: &str, dst_ip: &str) {
    for _ in 0..20 {
        if horde(&["emu", "exec", exp, src_node, "--", "ping", "-c", "1", "-W", "1", "-q", dst_ip]).status.success() {
            return;
        }
    }
    panic!("{dst_ip} did not answer 20 pings from {src_node}");
}

/// A process that is not Horde's but whose command line reads `horde child link-emulator ID` (a C
/// program that sleeps a minute, started with argv[0] = "horde").
pub fn lookalike(dir: &Path, id: &str) -> Option<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let src = write(dir, "sleeper.c", "#include <unistd.h>\nint main(void) { sleep(60); return 0; }\n");
    let bin = dir.join("sleeper");
    let built = Command::new("cc").arg(&src).arg("-o").arg(&bin).status().is_ok_and(|s| s.success());
    if !built {
        horde_testkit::skip("the lookalike part: no C compiler (apt-get install gcc)");
        return None;
    }
    Some(Command::new(&bin).arg0("horde").args(["child", "link-emulator", id]).spawn().unwrap())
}
