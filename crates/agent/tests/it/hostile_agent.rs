//! A fake agent that holds a valid agent certificate and lies (issue 21): it never gets ready,
//! or sends progress forever and never finishes, or claims a billion records, or hands over
//! records of players it was not given. The controller must keep its own deadlines, bound what
//! it accepts by its own plan, end within 5 s of Ctrl-C with a report, and keep the honest
//! agent's data in that report.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use horde_agent::agent;
use horde_agent::controller::{self, AgentSpec, ControllerOptions, Event, ServerPlace};
use horde_agent::msg::{self, Frame, ToAgent, ToController, PROTOCOL};
use horde_model::scenario::Scenario;

use crate::common::tmp;

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// An honest agent as a thread.
fn honest(ip: &str, creds: &Path, dir: &Path, name: &str) -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel::<SocketAddr>();
    let opts = crate::common::agent_options(ip, creds, dir, name, env!("CARGO_PKG_VERSION"));
    let s2 = stop.clone();
    let h = std::thread::spawn(move || {
        let tx = Mutex::new(tx);
        let log = move |m: &str| {
            if let Some(a) = m.split(" listening on ").nth(1).and_then(|r| r.split(' ').next()).and_then(|a| a.parse().ok()) {
                let _ = tx.lock().unwrap().send(a);
            }
        };
        agent::serve(&opts, &s2, &log).unwrap();
    });
    (rx.recv_timeout(Duration::from_secs(10)).unwrap(), stop, h)
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Lie {
    /// Answers Assign with progress forever, never Ready.
    NeverReady,
    /// Ready, then progress forever; ignores Stop, never Finished.
    NeverFinishes,
    /// Finishes claiming 10⁹ records, then offers a 40 GB log.
    HugeClaim,
    /// Finishes, then hands over a real log with records of a player it was not given.
    ForeignRecords,
    /// Finishes, then hands over a well-formed summary claiming 10¹² departures.
    LyingSummary,
    /// A flow run's sender that is done at once, then hands over a well-formed flow summary of
    /// a flow another agent sent.
    LyingFlowSummary,
    /// A flow run's sender whose summary of its own flow (100 departures by the plan) claims
    /// 9,000 more: a lie within the old bound (rate × 1.5 + 10,000).
    ForgedFlowSummary,
    /// A flow run's sender whose send log is its flow's exact schedule (regenerated as the
    /// controller does): a faithful log, though no packet was sent.
    FaithfulSendLog,
    /// The same with one departure added (issue 66: within the old "twice the plan" bound).
    AddedDeparture,
    /// The same with one departure renumbered.
    RenumberedDeparture,
    /// A scenario's client shard whose log is its players' exact departures up (regenerated
    /// as the controller does, from the run's seed): a faithful log, though nothing was sent.
    FaithfulPlayers,
    /// The same with one departure of one player logged twice (issue 66: within the player's
    /// planned count, a forged record passed).
    AddedPlayerDeparture,
    /// The same with one departure of one player renumbered.
    RenumberedPlayerDeparture,
    /// A client shard collecting summaries whose summary is built by Horde's own summariser
    /// from its players' exact departures: a faithful summary, though nothing was sent.
    FaithfulSummary,
    /// The same with one departure of one player left out (issue 66: a summary's sizes were
    /// checked only for departures added).
    RemovedSummaryDeparture,
}

impl Lie {
    fn players(self) -> bool {
        matches!(self, Lie::FaithfulPlayers | Lie::AddedPlayerDeparture | Lie::RenumberedPlayerDeparture | Lie::FaithfulSummary | Lie::RemovedSummaryDeparture)
    }

    fn summaries(self) -> bool {
        matches!(self, Lie::LyingSummary | Lie::FaithfulSummary | Lie::RemovedSummaryDeparture)
    }
}

/// The records of the players' exact departures up (regenerated as the controller does),
/// their schedules started at `start_at`.
fn exact_records(all: &horde_scenario::Players, players: Range<u32>, start_at: u64) -> Vec<horde_wire::Record> {
    let mut records = Vec::new();
    for p in players {
        let up = all.departures(p, horde_model::service::Direction::Up);
        records.extend(up.map(|d| sent(p, p << 8 | d.class as u32, &d, start_at)));
    }
    records
}

/// The flow file of the flow runs with a fake, and the fake's own flow (flow 1) as the
/// controller plans it.
fn flow_text(port: u16) -> String {
    format!("[defaults]\nrate = 50\nsize = 100\nduration = \"2s\"\ndst = \"127.0.0.2:{port}\"\n[[flow]]\nrepeat = 2\n")
}

/// The fake agent: a TLS server with a valid agent certificate.
/// The fake, with the flow it sends (`own`) for the send-log lies, or the run's players as the
/// controller plans them for the player-log lies.
fn fake_with(ip: &str, creds: &Path, lie: Lie, own: Option<horde_model::flow::Flow>, planned: Option<Arc<horde_scenario::Players>>) -> SocketAddr {
    let cfg = horde_agent::tls::agent_config(creds).unwrap();
    let l = TcpListener::bind(format!("{ip}:0")).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let Ok((tcp, _)) = l.accept() else { return };
        let conn = rustls::ServerConnection::new(cfg).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        tls.sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut dec = msg::Decoder::default();
        let mut buf = vec![0u8; 65536];
        let mut chatty = false;
        let mut last = Instant::now();
        let mut players = 0..0;
        let mut secs = 0.0;
        let mut start_at = 0u64;
        loop {
            let send = |tls: &mut rustls::StreamOwned<rustls::ServerConnection, std::net::TcpStream>, m: &ToController| {
                tls.write_all(&msg::encode(m)).and_then(|_| tls.flush())
            };
            if chatty && last.elapsed() > Duration::from_millis(100) {
                last = Instant::now();
                if send(&mut tls, &ToController::Progress(msg::Progress::default())).is_err() {
                    return;
                }
            }
            match tls.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => dec.push(&buf[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return,
            }
            while let Ok(Some(Frame::Msg(m))) = dec.frame::<ToAgent>() {
                let reply = match m {
                    ToAgent::Hello { .. } => {
                        vec![ToController::Hello { protocol: PROTOCOL, version: env!("CARGO_PKG_VERSION").into(), name: "fake".into(), cores: 1 }]
                    }
                    ToAgent::Time { t1 } => vec![ToController::Time { t1, t2: now_ns(), t3: now_ns() }],
                    ToAgent::Ping => vec![ToController::Pong],
                    ToAgent::Assign(a) => {
                        players = a.scenario_part().and_then(|p| p.players.clone()).unwrap_or(0..0);
                        secs = a.shape.duration_ns as f64 / 1e9;
                        chatty = true;
                        if lie == Lie::NeverReady {
                            vec![]
                        } else {
                            vec![ToController::Ready { server_addr: None }]
                        }
                    }
                    ToAgent::Start { at_ns } if matches!(lie, Lie::FaithfulSendLog | Lie::AddedDeparture | Lie::RenumberedDeparture) => {
                        chatty = false;
                        start_at = at_ns;
                        vec![ToController::Finished { role: "send".into(), report: Some(report(100)), error: None, cpu_s: 0.1, max_rss_kb: 1000 }]
                    }
                    ToAgent::Start { .. } if matches!(lie, Lie::LyingFlowSummary | Lie::ForgedFlowSummary) => {
                        chatty = false;
                        vec![ToController::Finished { role: "send".into(), report: Some(report(10)), error: None, cpu_s: 0.1, max_rss_kb: 1000 }]
                    }
                    ToAgent::Start { at_ns } if lie.players() => {
                        start_at = at_ns;
                        vec![]
                    }
                    ToAgent::Start { .. } | ToAgent::Players { .. } => vec![],
                    // a live piece that claims 10¹² departures at once
                    ToAgent::Live(req) if lie == Lie::LyingSummary => {
                        let g = horde_stats::digest::GameDigest::new(6, req.epoch_ns, secs);
                        let mut categories = g.categories.clone();
                        categories[0][0].sent = 1_000_000_000_000;
                        let d = horde_stats::digest::Delta {
                            epoch_ns: req.epoch_ns,
                            categories,
                            seconds: vec![],
                            lateness_us: g.lateness_us.clone(),
                            lateness_sum_us: 0.0,
                            late_over_1ms: 0,
                        };
                        vec![ToController::Summary(Box::new(d))]
                    }
                    ToAgent::Live(_) | ToAgent::Emu(_) => vec![],
                    ToAgent::Stop if lie == Lie::NeverFinishes => vec![],
                    ToAgent::Stop => {
                        chatty = false;
                        let claim = if lie == Lie::HugeClaim { 1_000_000_000u64 } else { 10 };
                        vec![ToController::Finished { role: "clients".into(), report: Some(report(claim)), error: None, cpu_s: 0.1, max_rss_kb: 1000 }]
                    }
                    ToAgent::Collect if own.is_some() => {
                        let f = own.as_ref().expect("checked");
                        let mut records: Vec<horde_wire::Record> = horde_model::schedule::Schedule::new(f).map(|d| sent(f.id, 0, &d, start_at)).collect();
                        match lie {
                            Lie::AddedDeparture => records.push(horde_wire::Record { seq: records.len() as u64, ..records[records.len() - 1] }),
                            Lie::RenumberedDeparture => records[40].seq = 41,
                            _ => {}
                        }
                        let _ = send_file(&mut tls, "send.hlog", &sender_log(start_at, &records));
                        vec![]
                    }
                    ToAgent::Summarise(req) if planned.is_some() && lie.summaries() => {
                        let all = planned.as_ref().expect("checked");
                        let mut records = exact_records(all, players.clone(), start_at);
                        if lie == Lie::RemovedSummaryDeparture {
                            // the fifth departure of the first player with 6 or more
                            let busy = players.clone().find(|&p| records.iter().filter(|r| r.flow == p).count() >= 6).expect("a player sends");
                            let first = records.iter().position(|r| r.flow == busy).expect("sends");
                            records.remove(first + 4);
                        }
                        let mut b = horde_stats::digest::Builder::new(6, req.epoch_ns, secs);
                        for r in &records {
                            b.sent(r, horde_model::service::Direction::Up, None);
                        }
                        let _ = send_file(&mut tls, "digest.json", &serde_json::to_vec(&b.finish()).unwrap());
                        vec![]
                    }
                    ToAgent::Collect if planned.is_some() => {
                        let all = planned.as_ref().expect("checked");
                        let mut records = exact_records(all, players.clone(), start_at);
                        // the first player with 6 departures or more
                        let busy = players.clone().find(|&p| records.iter().filter(|r| r.flow == p).count() >= 6).expect("a player sends");
                        let first = records.iter().position(|r| r.flow == busy).expect("sends");
                        match lie {
                            // within the player's planned count (past it, the count refuses)
                            Lie::AddedPlayerDeparture => records.push(records[first + 2]),
                            Lie::RenumberedPlayerDeparture => records[first + 5].seq += 1,
                            _ => {}
                        }
                        let _ = send_file(&mut tls, "client.hlog", &sender_log(start_at, &records));
                        vec![]
                    }
                    ToAgent::Collect => {
                        let _ = collect(&mut tls, lie, players.end + 5);
                        vec![]
                    }
                    ToAgent::Summarise(req) if matches!(lie, Lie::LyingFlowSummary | Lie::ForgedFlowSummary) => {
                        // flow 0 is the honest agent's: 100 departures of it, well formed; flow 1
                        // the fake's own, 9,100 where the plan has 100
                        let (flow, n) = if lie == Lie::LyingFlowSummary { (0, 100u64) } else { (1, 9_100) };
                        let records = (0..n)
                            .map(|k| horde_wire::Record {
                                flow,
                                size: 100,
                                seq: k,
                                t_a: req.epoch_ns + k,
                                t_b: req.epoch_ns + k,
                                kind: horde_wire::RecordKind::Sent,
                                ..Default::default()
                            })
                            .collect();
                        let log = horde_stats::LoadedLog { role: horde_wire::Role::Sender, records, trailing_bytes: 0 };
                        let s = horde_stats::flowsum::summarise(&log, req.epoch_ns, req.window_ns);
                        let _ = send_file(&mut tls, msg::FLOW_SUMMARIES, &serde_json::to_vec(&vec![s]).unwrap());
                        vec![]
                    }
                    ToAgent::Summarise(req) => {
                        // WoW's 6 categories, the run's start and seconds: only the counts lie
                        let mut d = horde_stats::digest::GameDigest::new(6, req.epoch_ns, secs);
                        d.categories[0][0].sent = 1_000_000_000_000;
                        let _ = send_file(&mut tls, "digest.json", &serde_json::to_vec(&d).unwrap());
                        vec![]
                    }
                };
                for m in reply {
                    if send(&mut tls, &m).is_err() {
                        return;
                    }
                }
            }
        }
    });
    addr
}

/// A sender's report claiming `claim` packets.
fn report(claim: u64) -> serde_json::Value {
    serde_json::json!({
        "flows": [], "packets": claim, "bytes": claim * 100, "errors": 0, "echoes": 0, "received": 0,
        "mismatched": 0, "duration_s": 1.0, "connect_s": 0.0,
        "lateness": {"count": 0, "mean_us": 0.0, "p50_us": 0.0, "p90_us": 0.0, "p99_us": 0.0, "p999_us": 0.0, "max_us": 0.0},
        "interrupted": false, "log": null, "log_records": claim, "threads": 1, "t0_real_ns": now_ns()
    })
}

/// The fake's logs: a 40 GB offer, or a real log whose one record is of `foreign`.
fn collect(tls: &mut impl Write, lie: Lie, foreign: u32) -> std::io::Result<()> {
    if lie == Lie::HugeClaim {
        tls.write_all(&msg::encode(&ToController::LogBegin { file: "client.hlog".into(), bytes: 40_000_000_000 }))?;
        // Then pour zeros as if the offer had been taken.
        let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&vec![0u8; 64 << 20])?;
        let z = enc.finish()?;
        for c in z.chunks(msg::LOG_PIECE) {
            tls.write_all(&msg::encode_log(c))?;
        }
        return tls.flush();
    }
    let r = horde_wire::Record {
        flow: foreign,
        size: 100,
        seq: 0,
        t_a: now_ns(),
        t_b: now_ns(),
        tag: foreign << 8,
        tos: 0,
        ttl: 0,
        kind: horde_wire::RecordKind::Sent,
        flags: 0,
    };
    send_file(tls, "client.hlog", &sender_log(now_ns(), &[r]))
}

/// The record of departure `d` of `flow` as a sender logs it, its schedule started at
/// `start_ns` (it left 1 µs late).
fn sent(flow: u32, tag: u32, d: &horde_model::schedule::Departure, start_ns: u64) -> horde_wire::Record {
    horde_wire::Record {
        flow,
        tag,
        size: d.size,
        seq: d.seq,
        t_a: start_ns + d.at_ns,
        t_b: start_ns + d.at_ns + 1_000,
        kind: horde_wire::RecordKind::Sent,
        ..Default::default()
    }
}

/// A sender's log of `records`, started at `start_ns`.
fn sender_log(start_ns: u64, records: &[horde_wire::Record]) -> Vec<u8> {
    let mut log = vec![0u8; horde_wire::LOG_HEADER_LEN];
    horde_wire::LogHeader { role: horde_wire::Role::Sender, start_ns }.emit(&mut log);
    for r in records {
        let at = log.len();
        log.resize(at + horde_wire::RECORD_LEN, 0);
        r.emit(&mut log[at..]);
    }
    log
}

/// Hands `bytes` over as the one file collected, as an agent does.
fn send_file(tls: &mut impl Write, file: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes)?;
    let z = enc.finish()?;
    tls.write_all(&msg::encode(&ToController::LogBegin { file: file.into(), bytes: bytes.len() as u64 }))?;
    for c in z.chunks(msg::LOG_PIECE) {
        tls.write_all(&msg::encode_log(c))?;
    }
    tls.write_all(&msg::encode(&ToController::LogEnd { file: file.into(), bytes: bytes.len() as u64, transferred: z.len() as u64 }))?;
    tls.write_all(&msg::encode(&ToController::Collected { files: 1 }))?;
    tls.flush()
}

/// Runs a 40-player, `secs`-second WoW run on an honest agent (server side and half the
/// players) and the fake (the other half); `ctrl_c_at`: set the stop flag then. Returns the
/// outcome, the notes, how long after the stop flag (or the start) the controller ended, and
/// the run's scratch directory (its report in `out/`; removed when dropped).
fn run(lie: Lie, secs: u32, ctrl_c_at: Option<Duration>) -> (anyhow::Result<controller::Outcome>, Vec<String>, Duration, horde_testkit::Scratch) {
    let collect = if lie.summaries() { controller::Collect::Summaries } else { controller::Collect::Logs };
    let d = tmp(&format!("{lie:?}"));
    let creds = d.join("creds");
    horde_agent::tls::keygen(&creds, 1).unwrap();
    let (a1, a1_stop, a1_h) = honest("127.0.0.2", &creds, &d, "a1");
    let text = format!("name = \"hostile\"\nservice = \"wow\"\nplayers = 40\nduration = \"{secs}s\"\nseed = 3\nspin_us = 0\n");
    std::fs::write(d.join("sc.toml"), &text).unwrap();
    let sc = Scenario::load(&d.join("sc.toml")).unwrap();
    let planned = lie.players().then(|| Arc::new(horde_scenario::plan(&sc, sc.players, &AtomicBool::new(false)).unwrap()));
    let f = fake_with("127.0.0.3", &creds, lie, None, planned);
    let out = d.join("out");
    let notes = crate::common::Notes::default();
    let events = |e: &Event| notes.event(e);
    let stop = AtomicBool::new(false);
    let opts = ControllerOptions {
        agents: vec![AgentSpec { addr: a1, weight: 1 }, AgentSpec { addr: f, weight: 1 }],
        server: ServerPlace::Agent(0),
        credentials: creds.clone(),
        out: &out,
        scenario_dir: d.to_path_buf(),
        deadman: Duration::from_secs(3),
        lost_after: Duration::from_secs(3),
        events: &events,
        stop: &stop,
        commands: None,
        collect,
    };
    let t = Instant::now();
    let (r, ended) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let r = controller::run(&sc, &opts);
            (r, Instant::now())
        });
        if let Some(at) = ctrl_c_at {
            while t.elapsed() < at && !h.is_finished() {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, Ordering::Relaxed);
        }
        h.join().unwrap()
    });
    let took = ended.saturating_duration_since(t + ctrl_c_at.unwrap_or_default());
    a1_stop.store(true, Ordering::Relaxed);
    let _ = a1_h.join();
    (r, notes.take(), took, d)
}

#[test]
fn an_agent_that_never_gets_ready_cannot_hold_the_controller_past_ctrl_c() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let (r, notes, took, _) = run(Lie::NeverReady, 5, Some(Duration::from_secs(4)));
    assert!(took < Duration::from_secs(5), "the controller took {took:?} after Ctrl-C: {notes:#?}");
    let e = format!("{:#}", r.err().expect("not started"));
    assert!(e.contains("interrupted"), "{e}");
}

#[test]
fn an_agent_that_never_finishes_is_cut_off_at_ctrl_c_and_the_honest_agents_data_is_reported() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let (r, notes, took, d) = run(Lie::NeverFinishes, 4, Some(Duration::from_secs(8)));
    let out = d.join("out");
    assert!(took < Duration::from_secs(5), "the controller took {took:?} after Ctrl-C: {notes:#?}");
    let r = r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}"));
    let d = r.summary.distributed.as_ref().unwrap();
    assert!(d.partial && d.agents[1].stats.status.contains("did not finish"), "{:?}", d.agents);
    assert_eq!(d.agents[0].stats.status, "finished", "the honest agent: {:?}", d.agents);
    assert!(r.summary.client.flows.len() == 20 && r.summary.client.packets > 0, "the honest agent's players are in the report");
    assert!(out.join("summary.json").exists() && out.join("index.html").exists());
}

#[test]
fn a_claim_of_a_billion_records_gets_no_more_than_the_plan_allows() {
    // Alone among the tests that take a share, with the process's peak RSS reset at its start
    // (`clear_refs` 5): the peak is this run's, not what a test before or beside it used.
    let _share = horde_testkit::share(horde_testkit::Load::Whole);
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let (r, notes, took, d) = run(Lie::HugeClaim, 3, None);
    let out = d.join("out");
    // The run's 3 s, the 15-s overrun before the fake is stopped, its logs refused at once.
    assert!(took < Duration::from_secs(30), "{took:?}");
    let r = r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}"));
    let d = r.summary.distributed.as_ref().unwrap();
    assert!(d.agents[1].stats.status.contains("bytes"), "the offer was refused, naming the bound: {:?}", d.agents[1]);
    let fake_dir = out.join("agents").join("fake");
    let written: u64 = std::fs::read_dir(&fake_dir).map(|r| r.flatten().map(|e| e.metadata().map_or(0, |m| m.len())).sum()).unwrap_or(0);
    assert!(written < 1 << 20, "{written} bytes of the fake's log on disk");
    assert_eq!(d.agents[0].stats.status, "finished");
    assert!(r.summary.analysis.up.lost + r.summary.analysis.down.lost == 0, "no fake losses in the report");
    // The whole test process (controller, honest agent, fake) stayed small.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss: u64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap();
    assert!(rss < 200 * 1024, "peak RSS {rss} kB");
}

#[test]
fn records_of_players_an_agent_was_not_given_are_refused_and_named() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let (r, notes, _, _) = run(Lie::ForeignRecords, 3, None);
    let r = r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}"));
    let d = r.summary.distributed.as_ref().unwrap();
    assert!(d.agents[1].stats.status.contains("log refused") && d.agents[1].stats.status.contains("player 45"), "{:?}", d.agents[1]);
    assert!(notes.iter().any(|n| n.contains("left out of the report")), "{notes:#?}");
    assert!(d.partial && d.missing_players.iter().any(|m| m.start == 20), "{:?}", d.missing_players);
    assert_eq!(r.summary.client.flows.len(), 20, "only the honest agent's players");
}

/// Issue 66: a scenario's client shard whose log forges one departure of one player (within the
/// player's planned count) fails the run with the agent named; its players' exact departures
/// (regenerated from the run's seed as the controller does) pass.
#[test]
fn a_players_log_is_checked_against_each_players_exact_departures() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let (r, notes, _, _) = run(Lie::FaithfulPlayers, 3, None);
    let r = r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}"));
    let d = r.summary.distributed.as_ref().unwrap();
    assert_eq!(d.agents[1].stats.status, "finished", "a faithful log passes: {:?} {notes:#?}", d.agents[1]);
    assert!(!d.partial, "{:?}", d.missing_players);
    assert_eq!(r.summary.client.flows.len(), 20, "the fake's report has no flows; its records are in");
    for (lie, says) in [(Lie::AddedPlayerDeparture, "up: departure 2 is logged twice"), (Lie::RenumberedPlayerDeparture, "up: departure 5 is missing")] {
        let (r, notes, _, _) = run(lie, 3, None);
        let r = r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}"));
        let d = r.summary.distributed.as_ref().unwrap();
        let status = &d.agents[1].stats.status;
        assert!(status.contains("log refused") && status.contains(says) && d.agents[1].name == "fake", "{lie:?}: {status}");
        assert!(d.partial && d.missing_players.iter().any(|m| m.start == 20), "{lie:?}: {:?}", d.missing_players);
        assert_eq!(d.agents[0].stats.status, "finished", "the honest agent's log passes");
    }
}

/// Issue 66: a client shard's summary (`--collect summaries`) counts each player's departures,
/// and the controller holds them against each player's regenerated schedule: Horde's own
/// summary of the players' exact departures passes; the same with one departure of one player
/// left out fails the run with the agent named.
#[test]
fn a_summary_is_checked_against_each_players_exact_departures() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let (r, notes, _, _) = run(Lie::FaithfulSummary, 3, None);
    let r = r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}"));
    let d = r.summary.distributed.as_ref().unwrap();
    assert_eq!(d.collected, "summaries");
    assert_eq!(d.agents[1].stats.status, "finished", "a faithful summary passes: {:?} {notes:#?}", d.agents[1]);
    assert!(!d.partial, "{:?}", d.missing_players);
    let (r, notes, _, _) = run(Lie::RemovedSummaryDeparture, 3, None);
    let r = r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}"));
    let d = r.summary.distributed.as_ref().unwrap();
    let status = &d.agents[1].stats.status;
    assert!(status.contains("its summary") && status.contains("is missing") && d.agents[1].name == "fake", "{status}");
    assert!(d.partial && d.missing_players.iter().any(|m| m.start == 20), "{:?}", d.missing_players);
    assert_eq!(d.agents[0].stats.status, "finished", "the honest agent's summary passes");
}

#[test]
fn a_summary_claiming_more_than_the_plan_allows_is_refused_and_named() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let (r, notes, _, _) = run(Lie::LyingSummary, 3, None);
    let r = r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}"));
    let d = r.summary.distributed.as_ref().unwrap();
    assert_eq!(d.collected, "summaries");
    assert!(d.agents[1].stats.status.contains("its summary") && d.agents[1].stats.status.contains("the plan allows"), "{:?}", d.agents[1]);
    assert!(d.partial && d.missing_players.iter().any(|m| m.start == 20), "{:?}", d.missing_players);
    assert_eq!(d.agents[0].stats.status, "finished");
    let sent: u64 = r.summary.analysis.categories.iter().map(|c| c.up.sent + c.down.sent).sum();
    assert!(sent < 1_000_000, "the lie is not in the report: {sent}");
    assert_eq!(r.summary.client.flows.len(), 20, "only the honest agent's players");
    // its live piece lied too: refused at once and said, the honest agent's live summary agrees
    assert!(notes.iter().any(|n| n.contains("fake") && n.contains("live summary no longer counts")), "{notes:#?}");
    let live = d.live.as_ref().expect("live summaries compared");
    assert_eq!((live.agents, live.agree), (1, 1), "{live:?}");
}

#[test]
fn directories_of_agents_whose_names_sanitise_alike_do_not_collide() {
    let names = ["a/1".to_string(), "a_1".to_string(), "a:1".to_string()];
    let d = controller::dir_names(&names);
    assert_eq!(d, vec!["a_1", "a_1-1", "a_1-2"]);
}

/// A flow run through an honest agent (sender of flow 0, receiver of both) and the fake (sender
/// of flow 1) collecting summaries: the fake's summary of flow 0, which it did not send, is
/// refused whole and named, and the honest agent's flow is reported.
#[test]
fn a_flow_summary_of_a_flow_the_agent_did_not_send_is_refused_and_named() {
    flow_run_with_a_fake(Lie::LyingFlowSummary, "did not send");
}

/// Issue 47: the fake's summary of its own flow claims 9,100 departures where the flow's
/// schedule, regenerated from its seed, has 100: refused whole and named (the bound was rate ×
/// 1.5 + 10,000, which let it through).
#[test]
fn a_flow_summary_with_more_departures_than_the_flows_schedule_is_refused_and_named() {
    flow_run_with_a_fake(Lie::ForgedFlowSummary, "9100 departures (the plan allows at most 328)");
}

/// Issue 66: a sender's log is checked against its flows' exact schedules, regenerated from
/// their seeds. A fake whose send log is its flow's schedule exactly passes (as the honest
/// agent's real log does); one departure added, or renumbered, and its log is refused whole,
/// naming the flow and the departure, and the run fails.
#[test]
fn a_send_log_is_checked_against_each_flows_exact_schedule() {
    let faithful = send_log_run(Lie::FaithfulSendLog);
    assert!(faithful.lost.is_empty(), "a faithful log passes: {:?}", faithful.agents);
    let added = send_log_run(Lie::AddedDeparture);
    let status = &added.agents.iter().find(|a| a.name == "fake").unwrap().stats.status;
    assert_eq!(added.lost, vec!["fake".to_string()], "{status}");
    assert!(status.contains("flow 1: departure 100, beyond the 100 its schedule has"), "{status}");
    let renumbered = send_log_run(Lie::RenumberedDeparture);
    let status = &renumbered.agents.iter().find(|a| a.name == "fake").unwrap().stats.status;
    assert!(renumbered.lost == vec!["fake".to_string()] && status.contains("flow 1: departure 40 is missing"), "{status}");
    for r in [&faithful, &added, &renumbered] {
        let honest = r.analysis.flows.iter().find(|x| x.flow == Some(0)).expect("the honest agent's flow is reported");
        assert!(honest.packets >= 90 && honest.loss.as_ref().is_some_and(|l| l.lost == 0), "{honest:?}");
    }
}

fn send_log_run(lie: Lie) -> horde_agent::flows::FlowsOutcome {
    flow_run(lie, controller::Collect::Logs).0
}

/// A flow run of two flows: the honest agent sends flow 0 and receives both, the fake "sends"
/// flow 1 (its lie). The outcome, the notes, and the scratch directory (the report in `out/`).
fn flow_run(lie: Lie, collect: controller::Collect) -> (horde_agent::flows::FlowsOutcome, Vec<String>, horde_testkit::Scratch) {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let d = tmp(&format!("flows-{lie:?}"));
    let creds = d.join("creds");
    horde_agent::tls::keygen(&creds, 1).unwrap();
    let (a1, a1_stop, a1_h) = honest("127.0.0.2", &creds, &d, "a1");
    let port = horde_testkit::free_port("127.0.0.2");
    let text = flow_text(port);
    let own = horde_model::flow::FlowFile::parse_and_resolve(&text, 1).unwrap().remove(1);
    let f = fake_with("127.0.0.3", &creds, lie, Some(own).filter(|_| collect == controller::Collect::Logs), None);
    let (notes, stop, out) = (crate::common::Notes::default(), AtomicBool::new(false), d.join("out"));
    let events = |e: &Event| notes.event(e);
    let opts = horde_agent::flows::FlowsOptions {
        senders: vec![AgentSpec { addr: a1, weight: 1 }, AgentSpec { addr: f, weight: 1 }],
        receivers: vec![a1],
        credentials: creds.clone(),
        out: &out,
        seed: 1,
        window_ns: 1_000_000_000,
        deadman: Duration::from_secs(3),
        events: &events,
        stop: &stop,
        log_server: None,
        collect,
        check_summaries: false,
    };
    let r = horde_agent::flows::run(&text, &opts);
    a1_stop.store(true, Ordering::Relaxed);
    let _ = a1_h.join();
    let notes = notes.take();
    (r.unwrap_or_else(|e| panic!("{e:#}: {notes:#?}")), notes, d)
}

fn flow_run_with_a_fake(lie: Lie, says: &str) {
    let (r, notes, d) = flow_run(lie, controller::Collect::Summaries);
    let out = d.join("out");
    assert_eq!(r.lost, vec!["fake".to_string()], "{:?}", r.agents);
    let fake_row = r.agents.iter().find(|a| a.name == "fake").unwrap();
    assert!(fake_row.stats.status.contains("its sender summary") && fake_row.stats.status.contains(says), "{:?}", fake_row.stats.status);
    let honest_row = r.analysis.flows.iter().find(|x| x.flow == Some(0)).expect("the honest agent's flow is reported");
    assert!(honest_row.packets >= 90 && honest_row.loss.as_ref().is_some_and(|l| l.lost == 0), "{honest_row:?}");
    assert!(r.analysis.flows.iter().all(|x| x.flow != Some(1) || x.packets == 0), "nothing of the fake's flow");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["distributed"]["partial"], true);
    assert!(notes.iter().any(|n| n.contains("fake") && n.contains("left out of the report")), "{notes:#?}");
}
