//! Issue 46's matrix: every kind of run (players, regulated players, flows, bots) × every
//! placement (this machine, through agents, on emulated hosts, emulated across agents), one short
//! run each — a table, one row per cell: it runs (exit 0 and a report), or it is refused and
//! says why (docs/control.md lists the refused cells). The cells across agents on emulated
//! hosts need two machines' worth of namespaces: the players' and regulated players' cells are
//! `root::emu_across::a_scenarios_emulated_players_run_on_two_machines` and
//! `…::a_regulated_scenarios_emulated_circuits_run_on_two_machines`, the others refuse before
//! anything is built, which this table checks.

use std::path::Path;

use crate::dist_util::{agent, keygen, Proc};
use crate::emu_util::*;

use super::gameserver_emu::TOPO;

/// What a cell must do.
enum Expect {
    /// Exit 0 with `summary.json` in its report directory.
    Runs,
    /// Refused, saying this.
    Refused(&'static str),
}

#[test]
#[cfg_attr(not(horde_root), ignore = "needs root: network namespaces (sudo -E cargo test)")]
fn every_kind_runs_in_every_placement_or_says_why_not() {
    horde_testkit::need_root();
    let _ns = horde_testkit::namespaces(horde_testkit::Namespaces::Few);
    let _share = horde_testkit::share(horde_testkit::Load::Heavy);
    let oa = horde_testkit::tool("/usr/games/openarena-server", "apt-get install openarena-server");
    let dir = tmp("matrix");
    let d: &Path = dir.as_ref();
    let creds = keygen(d);
    let (_a1, x1, _) = agent(d, &creds, "127.0.0.41", "m1", false);
    let (_a2, x2, _) = agent(d, &creds, "127.0.0.42", "m2", false);
    let agents = format!("{x1},{x2}");
    let creds = creds.to_str().unwrap().to_string();
    let topo = write(d, "topo.toml", TOPO);
    let players = write(d, "players.toml", "service = 'wow'\nplayers = 12\nduration = '2s'\nseed = 1\nspin_us = 0\n");
    let regulated = write(d, "regulated.toml", "service = 'opensim'\nplayers = 2\nduration = '3s'\nseed = 1\n[regulation]\nthrottle = 'mongoose'\n");
    let emu = "[emu]\ntopology = 'topo.toml'\nclients = ['client']\nserver = 'server'\n";
    let players_emu = write(d, "players-emu.toml", &(std::fs::read_to_string(&players).unwrap() + emu));
    let regulated_emu = write(d, "regulated-emu.toml", &(std::fs::read_to_string(&regulated).unwrap() + emu));
    let exp = horde_testkit::exp_id();
    let _down = Down(exp.to_string());
    ok(&["emu", "up", topo.to_str().unwrap(), "--id", &exp]);
    let recv_port = horde_testkit::free_port("127.0.0.43");
    let agent_port = horde_testkit::free_port("127.0.0.42");
    let flow = |dst: &str| format!("[[flow]]\ndst = '{dst}'\nrate = 100\nsize = 64\nduration = '2s'\n");
    let flows = write(d, "flows.toml", &flow(&format!("127.0.0.43:{recv_port}")));
    let flows_ag = write(d, "flows-agents.toml", &flow(&format!("127.0.0.42:{agent_port}")));
    let flows_emu = write(d, "flows-emu.toml", &("[[flow]]\nnode = 'client'\n".to_string() + &flow("server:9450")[8..]));
    let out = |name: &str| d.join(format!("out-{name}")).display().to_string();
    let (p, pe, r, re) = (players.to_str().unwrap(), players_emu.to_str().unwrap(), regulated.to_str().unwrap(), regulated_emu.to_str().unwrap());
    let (f, fa, fe) = (flows.to_str().unwrap(), flows_ag.to_str().unwrap(), flows_emu.to_str().unwrap());
    let s = |v: &[&str]| -> Vec<String> { v.iter().map(|x| x.to_string()).collect() };
    let through = |mut v: Vec<String>, list: &str| {
        v.extend(["--agents".into(), list.to_string(), "--credentials".into(), creds.clone()]);
        v
    };
    let bots = ["bots", "--start-server", "-n", "2", "-t", "2s", "--ramp", "1s", "--warmup", "1s"];
    let mut bots_emu = bots.to_vec();
    bots_emu.extend(["--emu", exp.as_str()]);
    // (kind, placement, its command with its report's place, where its summary.json is, what it must do)
    let flows_here_out = out("flows-here");
    std::fs::create_dir_all(&flows_here_out).unwrap();
    let cells: Vec<(&str, &str, Vec<String>, String, Expect)> = vec![
        ("players", "here", s(&["run", p, "-q", "-o", &out("p-here")]), out("p-here"), Expect::Runs),
        ("players", "agents", through(s(&["run", p, "-q", "-o", &out("p-ag")]), &agents), out("p-ag"), Expect::Runs),
        ("players", "emu", s(&["run", pe, "-q", "-o", &out("p-emu")]), out("p-emu"), Expect::Runs),
        ("regulated", "here", s(&["run", r, "-q", "-o", &out("r-here")]), out("r-here"), Expect::Runs),
        ("regulated", "agents", through(s(&["run", r, "-q", "-o", &out("r-ag")]), &agents), out("r-ag"), Expect::Runs),
        ("regulated", "emu", s(&["run", re, "-q", "-o", &out("r-emu")]), out("r-emu"), Expect::Runs),
        ("flows", "here", s(&["send", "--flows", f, "--json", &format!("{flows_here_out}/summary.json")]), flows_here_out.clone(), Expect::Runs),
        (
            "flows",
            "agents",
            through(s(&["send", "--flows", fa, "--recv-agent", &x2.to_string(), "--out", &out("f-ag")]), &x1.to_string()),
            out("f-ag"),
            Expect::Runs,
        ),
        ("flows", "emu", s(&["send", "--emu", &exp, "--flows", fe, "--out", &out("f-emu")]), out("f-emu"), Expect::Runs),
        (
            "flows",
            "emu across agents",
            through(s(&["send", "--emu", &exp, "--flows", fe, "--recv-agent", &x2.to_string(), "--out", &out("f-across")]), &x1.to_string()),
            out("f-across"),
            Expect::Refused("--emu"),
        ),
        ("bots", "here", [s(&bots), s(&["-o", &out("b-here")])].concat(), out("b-here"), Expect::Runs),
        ("bots", "agents", through([s(&bots), s(&["-o", &out("b-ag")])].concat(), &agents), out("b-ag"), Expect::Runs),
        ("bots", "emu", [s(&bots_emu), s(&["-o", &out("b-emu")])].concat(), out("b-emu"), Expect::Runs),
        (
            "bots",
            "emu across agents",
            through([s(&bots_emu), s(&["-o", &out("b-across")])].concat(), &agents),
            out("b-across"),
            Expect::Refused("--emu cannot be used with --agents"),
        ),
    ];
    let mut wrong = Vec::new();
    for (kind, place, args, report, expect) in cells {
        if kind == "bots" && !oa {
            continue;
        }
        // a flow run here needs a receiver at its destination
        let _rx = (kind == "flows" && place == "here").then(|| Proc::spawn(&["recv", "-b", "127.0.0.43", "-p", &recv_port.to_string(), "--idle", "3s"]));
        if _rx.is_some() {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        let full: Vec<&str> = args.iter().map(String::as_str).collect();
        let t = std::time::Instant::now();
        let o = horde(&full);
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        let ran = o.status.success() && Path::new(&report).join("summary.json").exists();
        let verdict = match expect {
            Expect::Runs if ran => "runs",
            Expect::Refused(why) if !o.status.success() && text.contains(why) => "refused, saying why",
            Expect::Runs => {
                wrong.push(format!("{kind} × {place}: expected to run ({full:?}): {text}"));
                "WRONG"
            }
            Expect::Refused(why) => {
                wrong.push(format!("{kind} × {place}: expected a refusal saying `{why}` ({full:?}): {text}"));
                "WRONG"
            }
        };
        eprintln!("{kind:>9} × {place:<18} {verdict} ({:.1} s)", t.elapsed().as_secs_f64());
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
