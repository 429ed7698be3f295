//! The control channel end to end, in one process: agents as threads on loopback addresses,
//! the controller's library, and hostile peers (no certificate, another authority's, a
//! replayed session, random bytes, another version, a controller that vanishes).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use horde_agent::agent;
use horde_agent::controller::{self, AgentSpec, ControllerOptions, Event, ServerPlace};
use horde_agent::msg::{self, Frame, Part, ToAgent, ToController, PROTOCOL};
use horde_model::scenario::Scenario;

use crate::common::tmp;

struct Agent {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<String>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Agent {
    fn start(ip: &str, creds: &Path, dir: &Path, name: &str, version: &str) -> Agent {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let opts = crate::common::agent_options(ip, creds, dir, name, version);
        let (s2, l2) = (stop.clone(), log.clone());
        let handle = std::thread::spawn(move || {
            let l3 = l2.clone();
            let r = agent::serve(&opts, &s2, &move |m: &str| l3.lock().unwrap().push(m.to_string()));
            if let Err(e) = r {
                l2.lock().unwrap().push(format!("serve failed: {e:#}"));
            }
        });
        let t = Instant::now();
        loop {
            let found =
                log.lock().unwrap().iter().find_map(|l| l.split(" listening on ").nth(1).and_then(|r| r.split(' ').next()).and_then(|a| a.parse().ok()));
            if let Some(a) = found {
                return Agent { addr: a, stop, log, handle: Some(handle) };
            }
            assert!(t.elapsed() < Duration::from_secs(10), "agent did not start: {:?}", log.lock().unwrap());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn logged(&self, needle: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(needle))
    }

    fn wait_for(&self, needle: &str, within: Duration) -> Duration {
        let t = Instant::now();
        while !self.logged(needle) {
            assert!(t.elapsed() < within, "agent never logged `{needle}` within {within:?}: {:#?}", self.log.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
        t.elapsed()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn scenario(dir: &Path, players: u32, secs: u32) -> (Scenario, PathBuf) {
    let text = format!("name = \"dist\"\nservice = \"wow\"\nplayers = {players}\nduration = \"{secs}s\"\nseed = 3\nspin_us = 0\n");
    let p = dir.join("dist.toml");
    std::fs::write(&p, &text).unwrap();
    (Scenario::load(&p).unwrap(), p)
}

fn run_on(agents: &[&Agent], creds: &Path, sc: &Scenario, out: &Path) -> (anyhow::Result<controller::Outcome>, Vec<String>) {
    let notes = crate::common::Notes::default();
    let events = |e: &Event| notes.event(e);
    let stop = AtomicBool::new(false);
    let opts = ControllerOptions {
        agents: agents.iter().map(|a| AgentSpec { addr: a.addr, weight: 1 }).collect(),
        server: ServerPlace::Agent(0),
        credentials: creds.to_path_buf(),
        out,
        scenario_dir: out.to_path_buf(),
        deadman: Duration::from_secs(3),
        lost_after: Duration::from_secs(3),
        events: &events,
        stop: &stop,
        commands: None,
        collect: Default::default(),
    };
    let r = controller::run(sc, &opts);
    (r, notes.take())
}

#[test]
fn a_run_over_agents_matches_the_same_run_on_one_machine() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("match");
    let creds = d.join("creds");
    horde_agent::tls::keygen(&creds, 1).unwrap();
    let v = env!("CARGO_PKG_VERSION");
    let a1 = Agent::start("127.0.0.2", &creds, &d, "a1", v);
    let a2 = Agent::start("127.0.0.3", &creds, &d, "a2", v);
    let a3 = Agent::start("127.0.0.4", &creds, &d, "a3", v);
    let (sc, _) = scenario(&d, 90, 6);
    let (r, notes) = run_on(&[&a1, &a2, &a3], &creds, &sc, &d.join("dist"));
    let r = r.unwrap_or_else(|e| panic!("{e:#}; notes {notes:#?}"));
    let s = &r.summary;
    let dist = s.distributed.as_ref().unwrap();
    assert_eq!(dist.agents.len(), 3);
    assert!(dist.agents.iter().all(|a| a.stats.status == "finished"), "{:?}", dist.agents);
    assert!(!dist.partial);
    assert_eq!(s.client.flows.len(), 90);
    assert!(s.client.flows.iter().all(|f| f.packets > 0 || f.received > 0), "every player connected");
    assert!(notes.iter().any(|n| n.contains("clock offset")), "{notes:?}");
    assert!(dist.log_bytes > 0 && dist.log_bytes_transferred < dist.log_bytes, "logs compressed: {} of {}", dist.log_bytes_transferred, dist.log_bytes);
    assert_eq!(s.analysis.up.lost + s.analysis.down.lost, 0);
    assert_eq!(s.mismatched, 0);
    // The agents cleaned their run directories (the logs are with the controller now).
    assert!(d.join("dist/agents/a1/server.hlog").exists() && d.join("dist/agents/a2/client.hlog").exists());
    for a in ["a1", "a2", "a3"] {
        assert_eq!(std::fs::read_dir(d.join(a)).unwrap().count(), 0, "{a} kept its run directory");
    }
    // The same scenario on one machine: the same players with the same schedules.
    let stop = AtomicBool::new(false);
    let out = d.join("local");
    let local = horde_scenario::execute(&sc, &horde_scenario::RunOptions::in_process(&out, &stop)).unwrap();
    let l = &local.summary.analysis;
    for (dc, lc) in s.analysis.categories.iter().zip(&l.categories) {
        assert_eq!(dc.category, lc.category);
        for (d, l, dir) in [(&dc.up, &lc.up, "up"), (&dc.down, &lc.down, "down")] {
            let (a, b) = (d.received as f64, l.received as f64);
            // Identical schedules; only the run's last moments (linger, start skew) differ.
            assert!((a - b).abs() <= (0.02 * b).max(5.0), "{} {dir}: {a} APDUs over agents, {b} on one machine", dc.category);
        }
    }
}

/// A TLS client with a chosen identity (or none), for the hostile cases.
fn tls_client(creds: &Path, identity: Option<&Path>) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(creds.join("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(provider).with_protocol_versions(&[&rustls::version::TLS13]).unwrap().with_root_certificates(roots);
    Arc::new(match identity {
        None => b.with_no_client_auth(),
        Some(dir) => {
            let certs = rustls::pki_types::CertificateDer::pem_file_iter(dir.join("controller.pem")).unwrap().map(|c| c.unwrap()).collect();
            let key = rustls::pki_types::PrivateKeyDer::from_pem_file(dir.join("controller.key")).unwrap();
            b.with_client_auth_cert(certs, key).unwrap()
        }
    })
}

/// Connects, says hello, and returns what the agent answered or the error.
fn hello(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>, version: &str) -> Result<ToController, String> {
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn = rustls::ClientConnection::new(cfg, horde_agent::tls::agent_server_name()).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(&msg::encode(&ToAgent::Hello { protocol: PROTOCOL, version: version.into() })).map_err(|e| horde_agent::tls::describe(&e))?;
    let mut dec = msg::Decoder::default();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(Frame::Msg(m)) = dec.frame::<ToController>().map_err(|e| e.to_string())? {
            return Ok(m);
        }
        match tls.read(&mut buf) {
            Ok(0) => return Err("closed".into()),
            Ok(n) => dec.push(&buf[..n]),
            Err(e) => return Err(horde_agent::tls::describe(&e)),
        }
    }
}

#[test]
fn strangers_replays_and_garbage_are_refused_and_the_agent_keeps_serving() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("hostile");
    let creds = d.join("creds");
    let other = d.join("other");
    horde_agent::tls::keygen(&creds, 1).unwrap();
    horde_agent::tls::keygen(&other, 1).unwrap();
    let v = env!("CARGO_PKG_VERSION");
    let a = Agent::start("127.0.0.5", &creds, &d, "h1", v);

    // No certificate.
    let e = hello(a.addr, tls_client(&creds, None), v).unwrap_err();
    assert!(e.contains("refused the handshake"), "controller side: {e}");
    a.wait_for("presented no certificate", Duration::from_secs(5));

    // A certificate of another authority (the "wrong key" of another cluster).
    let e = hello(a.addr, tls_client(&creds, Some(&other)), v).unwrap_err();
    assert!(e.contains("refused the handshake"), "controller side: {e}");
    a.wait_for("not from this Horde authority", Duration::from_secs(5));
    // And the controller refuses an agent of another authority.
    let b = Agent::start("127.0.0.5", &other, &d, "stranger", v);
    let sc = scenario(&d, 4, 1).0;
    let (r, _) = run_on(&[&b], &creds, &sc, &d.join("o1"));
    let e = format!("{:#}", r.err().expect("refused"));
    assert!(e.contains("not from this Horde authority"), "{e}");

    // A key that is not the certificate's.
    let mixed = d.join("mixed");
    std::fs::create_dir_all(&mixed).unwrap();
    for f in ["ca.pem", "controller.pem"] {
        std::fs::copy(creds.join(f), mixed.join(f)).unwrap();
    }
    std::fs::copy(other.join("controller.key"), mixed.join("controller.key")).unwrap();
    let Err(e) = horde_agent::tls::controller_config(&mixed) else { panic!("a key of another identity was accepted") };
    let e = format!("{e:#}");
    assert!(e.contains("does the key belong to the certificate"), "{e}");

    // An agent's own identity cannot drive another agent (it is for server authentication).
    let as_agent = d.join("as-agent");
    std::fs::create_dir_all(&as_agent).unwrap();
    std::fs::copy(creds.join("ca.pem"), as_agent.join("ca.pem")).unwrap();
    std::fs::copy(creds.join("agent.pem"), as_agent.join("controller.pem")).unwrap();
    std::fs::copy(creds.join("agent.key"), as_agent.join("controller.key")).unwrap();
    assert!(hello(a.addr, tls_client(&creds, Some(&as_agent)), v).is_err());

    // Random bytes.
    let mut s = TcpStream::connect(a.addr).unwrap();
    let junk: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let _ = s.write_all(&junk);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut b2 = [0u8; 64];
    let _ = s.read(&mut b2);
    drop(s);

    // Another version: refused by name, both ways.
    match hello(a.addr, tls_client(&creds, Some(&creds)), "0.0.1-other").unwrap() {
        ToController::Error { message } => assert!(message.contains("h1") && message.contains("0.0.1-other"), "{message}"),
        m => panic!("{m:?}"),
    }
    let old = Agent::start("127.0.0.5", &creds, &d, "old", "0.0.1-old");
    let (r, _) = run_on(&[&old], &creds, &sc, &d.join("o2"));
    let e = format!("{:#}", r.err().expect("refused"));
    assert!(e.contains("0.0.1-old") && e.contains("same version"), "{e}");

    // A recorded session replayed: record a real controller's bytes through a proxy.
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let paddr = proxy.local_addr().unwrap();
    let target = a.addr;
    let recorded = Arc::new(Mutex::new(Vec::<u8>::new()));
    let rec2 = recorded.clone();
    let pt = std::thread::spawn(move || {
        let (mut c, _) = proxy.accept().unwrap();
        let mut up = TcpStream::connect(target).unwrap();
        let (mut c2, mut up2) = (c.try_clone().unwrap(), up.try_clone().unwrap());
        let down = std::thread::spawn(move || {
            let _ = std::io::copy(&mut up2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Write);
        });
        let mut b = [0u8; 16384];
        loop {
            match c.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    rec2.lock().unwrap().extend_from_slice(&b[..n]);
                    if up.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = up.shutdown(std::net::Shutdown::Write);
        let _ = down.join();
    });
    let (r, notes) = run_on(&[&Agent { addr: paddr, stop: Arc::new(AtomicBool::new(false)), log: a.log.clone(), handle: None }], &creds, &sc, &d.join("rec"));
    r.unwrap_or_else(|e| panic!("the recorded run itself: {e:#} {notes:?}"));
    pt.join().unwrap();
    let runs_before = a.log.lock().unwrap().iter().filter(|l| l.contains(": prepared")).count();
    let mut s = TcpStream::connect(a.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let bytes = recorded.lock().unwrap().clone();
    assert!(bytes.len() > 1000, "recorded {} bytes", bytes.len());
    let _ = s.write_all(&bytes);
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
    std::thread::sleep(Duration::from_millis(300));
    let runs_after = a.log.lock().unwrap().iter().filter(|l| l.contains(": prepared")).count();
    assert_eq!(runs_before, runs_after, "a replayed session prepared a run");

    let refused = a.log.lock().unwrap().iter().filter(|l| l.contains("refused")).count();
    assert!(refused >= 5, "each stranger was logged as refused: {:#?}", a.log.lock().unwrap());

    // After all that, it serves a real controller.
    let (r, notes) = run_on(&[&a], &creds, &sc, &d.join("after"));
    let r = r.unwrap_or_else(|e| panic!("{e:#}; {notes:?}"));
    assert_eq!(r.summary.client.flows.len(), 4);
}

#[test]
fn a_controller_that_vanishes_stops_the_agents_traffic() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("deadman");
    let creds = d.join("creds");
    horde_agent::tls::keygen(&creds, 1).unwrap();
    let v = env!("CARGO_PKG_VERSION");
    let a = Agent::start("127.0.0.6", &creds, &d, "dm", v);
    let (sc, _) = scenario(&d, 20, 60);
    // Connect as the controller, assign players and the server side, start, then go silent
    // (the connection stays open: a partition, not a close).
    let cfg = horde_agent::tls::controller_config(&creds).unwrap();
    let tcp = TcpStream::connect(a.addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let conn = rustls::ClientConnection::new(cfg, horde_agent::tls::agent_server_name()).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut dec = msg::Decoder::default();
    let mut buf = [0u8; 65536];
    let mut expect = |tls: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>, f: &dyn Fn(&ToController) -> bool| loop {
        if let Some(Frame::Msg(m)) = dec.frame::<ToController>().unwrap() {
            if f(&m) {
                return m;
            }
            continue;
        }
        let n = tls.read(&mut buf).unwrap();
        assert!(n > 0);
        dec.push(&buf[..n]);
    };
    tls.write_all(&msg::encode(&ToAgent::Hello { protocol: PROTOCOL, version: v.into() })).unwrap();
    expect(&mut tls, &|m| matches!(m, ToController::Hello { .. }));
    let key = horde_proto::RunKey::from_bytes([7; 32]);
    let part = msg::ScenarioPart {
        scenario: horde_scenario::part::ScenarioWork {
            name: "dm".into(),
            scenario: sc.text.clone(),
            service: None,
            players: 20,
            online: None,
            max_players: None,
            gso: None,
        },
        server: Some("127.0.0.6:0".parse().unwrap()),
        players: Some(0..20),
        server_addr: None,
        emu: None,
    };
    tls.write_all(&msg::encode(&ToAgent::Assign(Box::new(Part {
        run_id: "deadman-1".into(),
        shape: horde_scenario::part::Shape { duration_ns: 60_000_000_000, seed: 3, key: key.to_hex() },
        place: horde_scenario::part::Place::Agent { deadman_ms: 3000 },
        work: msg::Work::Scenario(part),
    }))))
    .unwrap();
    expect(&mut tls, &|m| matches!(m, ToController::Ready { .. }));
    tls.write_all(&msg::encode(&ToAgent::Start { at_ns: horde_engine::clock::real_ns() })).unwrap();
    // The controller's last word.
    let silent = Instant::now();
    // Traffic flows: progress reports count sent APDUs.
    let m = expect(&mut tls, &|m| matches!(m, ToController::Progress(p) if p.sent_packets > 0));
    assert!(matches!(m, ToController::Progress(_)));
    a.wait_for("dead-man's switch", Duration::from_secs(6));
    let took = silent.elapsed();
    assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(5), "the switch fires after the 3 s dead-man interval, within 5 s ({took:?})");
    // The agent is free again once its run's threads have ended (nothing sends any more), and
    // serves the next controller.
    drop(tls);
    loop {
        match hello(a.addr, tls_client(&creds, Some(&creds)), v).unwrap() {
            ToController::Hello { .. } => break,
            ToController::Error { message } if message.contains("busy") => {
                assert!(silent.elapsed() < Duration::from_secs(5), "the run's traffic had not stopped {:?} after the controller went silent", silent.elapsed());
                std::thread::sleep(Duration::from_millis(50));
            }
            m => panic!("{m:?}"),
        }
    }
}

/// Issue 21: 16 silent TCP connections to an agent's control port locked every controller out.
/// One source address may hold only a few handshakes (its own oldest shed for its newest); a
/// controller elsewhere still gets in.
#[test]
fn silent_connections_from_one_host_cannot_lock_controllers_out() {
    // not beside the test that measures the process's peak memory
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("silent");
    let creds = d.join("creds");
    horde_agent::tls::keygen(&creds, 1).unwrap();
    let a = Agent::start("127.0.0.2", &creds, &d, "s1", env!("CARGO_PKG_VERSION"));
    // 40 connections from 127.0.0.9 that never start TLS (the agent's own cap is 16 here).
    let silent: Vec<std::net::TcpStream> = (0..40)
        .filter_map(|_| {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
            s.bind(&"127.0.0.9:0".parse::<SocketAddr>().unwrap().into()).ok()?;
            s.connect(&a.addr.into()).ok()?;
            Some(s.into())
        })
        .collect();
    assert_eq!(silent.len(), 40);
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let r = hello(a.addr, tls_client(&creds, Some(&creds)), env!("CARGO_PKG_VERSION"));
    assert!(matches!(r, Ok(ToController::Hello { .. })), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "the controller waited {:?}", t.elapsed());
    assert!(a.logged("shed: an unauthenticated connection made room"), "the flood's own oldest made room");
    drop(silent);
}

/// Issue 47: 64 silent connections from 16 addresses (four each, the most one address may
/// hold) against the agent's 16 places. A silent one is shed for a controller (issue 66: at
/// once, nothing has to age first): 20 controllers in a row get in, each within 2 s.
#[test]
fn silent_connections_from_many_addresses_cannot_lock_controllers_out() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp("silent16");
    let creds = d.join("creds");
    horde_agent::tls::keygen(&creds, 1).unwrap();
    let a = Agent::start("127.0.0.2", &creds, &d, "s16", env!("CARGO_PKG_VERSION"));
    let silent_from = |k: u8| horde_testkit::crowd(a.addr, k, b"");
    let mut silent: Vec<std::net::TcpStream> = (0..64).filter_map(silent_from).collect();
    assert_eq!(silent.len(), 64);
    std::thread::sleep(Duration::from_millis(700));
    let mut within = 0;
    for k in 0..20u8 {
        let t = Instant::now();
        let r = hello(a.addr, tls_client(&creds, Some(&creds)), env!("CARGO_PKG_VERSION"));
        if matches!(r, Ok(ToController::Hello { .. })) && t.elapsed() < Duration::from_secs(2) {
            within += 1;
        }
        // the attackers come back each time
        silent.extend((0..4).filter_map(|j| silent_from(k * 4 + j)));
    }
    assert!(within >= 19, "{within} of 20 controllers got in within 2 s");
    assert!(a.logged("shed: an unauthenticated connection made room"), "silent connections were shed for newcomers");
    drop(silent);
}
