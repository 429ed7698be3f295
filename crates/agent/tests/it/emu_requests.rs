//! What an agent does with a controller's emulator requests (`horde emu … --agents`) that it
//! must not follow: an agent without `--emu` refuses them all; with it, a part whose tunnel
//! address is not the one the agent was reached at, a topology that would take an interface or
//! read a file of the machine, an oversized command, a link setting outside the list, and
//! anything about an experiment it did not build are refused, with nothing built or removed.

use std::net::{IpAddr, Ipv4Addr};

use horde_agent::agent::emu::{handle, host_namespaces, refuse_machine_files};
use horde_agent::msg::{EmuReply, EmuRequest};
use horde_topo::partition::Part;

pub(crate) const TWO: &str = r#"
name = "two"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "b"
kind = "host"
[[link]]
a = "a"
b = "b"
delay = "5ms"
"#;

pub(crate) fn failed(r: EmuReply) -> String {
    match r {
        EmuReply::Failed { message } => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub(crate) fn part(addr: Ipv4Addr) -> Part {
    Part { machine_of: vec![0, 1], me: 0, names: vec!["m1".into(), "m2".into()], addrs: vec![addr, Ipv4Addr::new(10, 99, 0, 2)], vni_base: 7, port: 4789 }
}

#[test]
fn an_agent_refuses_emulator_requests_it_must_not_follow() {
    let d = crate::common::tmp("emu");
    // an experiment id of the test's own: the agent has no part of it, and nothing may be built
    let exp = horde_testkit::exp_id();
    let exp = exp.as_str();
    let log = |_: &str| {};
    let own = Some(IpAddr::V4(Ipv4Addr::new(10, 99, 0, 1)));
    let mut opts = crate::common::agent_options("127.0.0.1", &d, &d, "m1", "1.0");
    std::fs::create_dir_all(&opts.dir).unwrap();

    // without --emu: every request, and a scenario's part placed in emulated hosts
    for req in [EmuRequest::Ls, EmuRequest::Down { exp: exp.into() }] {
        assert!(failed(handle(req, &opts, own, &log)).contains("started without --emu"));
    }
    let hosts = ["a".to_string()];
    assert!(host_namespaces(&opts, exp, &hosts).unwrap_err().contains("started without --emu"));
    opts.emu = true;
    // hosts of an experiment it did not build
    assert!(host_namespaces(&opts, exp, &hosts).unwrap_err().contains(&format!("has no part of experiment {exp}")));
    assert!(host_namespaces(&opts, "../x", &hosts).unwrap_err().contains("experiment id"));
    assert!(refuse_machine_files(TWO, "t.toml", &format!("{exp}a")).is_ok());
    // nothing about an experiment it did not build
    assert!(failed(handle(EmuRequest::Down { exp: exp.into() }, &opts, own, &log)).contains(&format!("has no part of experiment {exp}")));
    let exec = |argv: Vec<String>, timeout_ms| EmuRequest::Exec { exp: exp.into(), node: "a".into(), argv, timeout_ms, detach: false };
    assert!(failed(handle(exec(vec!["true".into()], 1000), &opts, own, &log)).contains("has no part"));
    // bounded commands, whatever the experiment
    assert!(failed(handle(exec(vec!["x".into(); 300], 1000), &opts, own, &log)).contains("256 arguments"));
    assert!(failed(handle(exec(vec!["a\0b".into()], 1000), &opts, own, &log)).contains("NUL"));
    assert!(failed(handle(exec(vec!["true".into()], 0), &opts, own, &log)).contains("time limit"));
    // a trace is a file of the controller's machine; a link of an experiment it did not build
    let link = |change: horde_topo::LinkChange| EmuRequest::Link {
        exp: exp.into(),
        a: "a".into(),
        b: "b".into(),
        op: horde_emu::links::LinkOp::Set { dir: horde_emu::links::LinkDir::Both, change: Box::new(change), clear: false },
    };
    let trace = horde_topo::LinkChange { trace: Some("/etc/shadow".into()), ..Default::default() };
    assert!(failed(handle(link(trace), &opts, own, &log)).contains("capacity trace"));
    let delay = horde_topo::LinkChange { delay_ns: Some(5_000_000), ..Default::default() };
    assert!(failed(handle(link(delay), &opts, own, &log)).contains("has no part"));
    assert!(failed(handle(EmuRequest::Link { exp: exp.into(), a: "a".into(), b: "b".into(), op: horde_emu::links::LinkOp::Down }, &opts, own, &log))
        .contains("has no part"));
    assert_eq!(handle(EmuRequest::Ls, &opts, own, &log), EmuReply::Ls { parts: vec![] });
    // nothing was built
    assert!(!std::path::Path::new(&format!("/run/horde/emu/{exp}a")).exists());
}
