//! What an agent with `--emu` refuses as root, before it would build anything.

use std::net::{IpAddr, Ipv4Addr};

use horde_agent::agent::emu::handle;
use horde_agent::msg::EmuRequest;

use crate::emu_requests::{failed, part, TWO};

/// As root (the checks that come after the agent would build): a part whose tunnel address is
/// not the one the controller reached the agent at, a topology that would take an interface
/// or read a file of the machine, an id a part cannot carry — each refused, nothing built.
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn as_root_an_agent_refuses_foreign_tunnels_machine_files_and_long_ids() {
    horde_testkit::need_root();
    let d = crate::common::tmp("emu");
    // an experiment id of the test's own: the agent has no part of it, and nothing may be built
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let log = |_: &str| {};
    let own = Some(IpAddr::V4(Ipv4Addr::new(10, 99, 0, 1)));
    let mut opts = crate::common::agent_options("127.0.0.1", &d, &d, "m1", "1.0");
    std::fs::create_dir_all(&opts.dir).unwrap();
    opts.emu = true;
    let up = |topology: &str, addr: Ipv4Addr| EmuRequest::Up {
        exp: exp.into(),
        topology: topology.into(),
        file: "t.toml".into(),
        part: part(addr),
        live_all: false,
    };
    // the tunnels' address must be the one the controller reached this agent at
    let m = failed(handle(up(TWO, Ipv4Addr::new(10, 99, 0, 9)), &opts, own, &log));
    assert!(m.contains("10.99.0.9") && m.contains("reached it at 10.99.0.1"), "{m}");
    // a topology that would take one of the machine's interfaces, or read one of its files
    let external = format!("{TWO}[[node]]\nname = \"x\"\nkind = \"external\"\ninterface = \"eth0\"\n[[link]]\na = \"x\"\nb = \"a\"\n");
    assert!(failed(handle(up(&external, Ipv4Addr::new(10, 99, 0, 1)), &opts, own, &log)).contains("external node"));
    let trace = TWO.replace("delay = \"5ms\"", "trace = \"/etc/shadow\"");
    assert!(failed(handle(up(&trace, Ipv4Addr::new(10, 99, 0, 1)), &opts, own, &log)).contains("capacity trace"));
    // an id an agent's part cannot carry
    let long = EmuRequest::Up { exp: "toolong".into(), topology: TWO.into(), file: "t.toml".into(), part: part(Ipv4Addr::new(10, 99, 0, 1)), live_all: false };
    let m = failed(handle(long, &opts, own, &log));
    assert!(m.contains("1..=5"), "{m}");
    assert!(!std::path::Path::new(&format!("/run/horde/emu/{exp}a")).exists(), "nothing was built");
}

/// An agent started with `--emu --no-exec` builds its part and takes it down, but refuses a
/// command in one of its nodes, in the reply, naming the flag (issue 65).
#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn an_agent_started_with_no_exec_refuses_node_commands_in_its_reply() {
    horde_testkit::need_root();
    let d = crate::common::tmp("emu-noexec");
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let log = |_: &str| {};
    let addr = Ipv4Addr::new(10, 99, 0, 1);
    let mut opts = crate::common::agent_options("127.0.0.1", &d, &d, "m1", "1.0");
    std::fs::create_dir_all(&opts.dir).unwrap();
    opts.emu = true;
    opts.no_exec = true;
    // both nodes on this machine: no tunnel; no impairment: no link emulator (our own binary,
    // which a test binary is not)
    let plain = TWO.replace("delay = \"5ms\"\n", "");
    let alone = horde_topo::partition::Part { machine_of: vec![0, 0], me: 0, names: vec!["m1".into()], addrs: vec![addr], vni_base: 7, port: 4789 };
    let up = EmuRequest::Up { exp: exp.into(), topology: plain, file: "t.toml".into(), part: alone, live_all: false };
    let built = handle(up, &opts, Some(IpAddr::V4(addr)), &log);
    assert!(matches!(built, horde_agent::msg::EmuReply::Up { nodes: 2, .. }), "{built:?}");
    let exec = EmuRequest::Exec { exp: exp.into(), node: "a".into(), argv: vec!["true".into()], timeout_ms: 2000, detach: false };
    let refused = failed(handle(exec, &opts, Some(IpAddr::V4(addr)), &log));
    let down = handle(EmuRequest::Down { exp: exp.into() }, &opts, Some(IpAddr::V4(addr)), &log);
    assert!(refused.contains("--no-exec") && refused.contains("runs no command"), "{refused}");
    assert!(matches!(down, horde_agent::msg::EmuReply::Down { .. }), "taken down as usual: {down:?}");
}
