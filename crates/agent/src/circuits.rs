//! Regulated circuits through agents (`horde run` of a scenario with `[regulation]` and
//! `--agents`): the same placement as open-loop players ([`crate::controller::play`]) — the
//! circuits' server side on the server agent, the players sharded by weight, one common start —
//! then each side's circuits are collected as files bounded by our own plan, checked against
//! the players each agent was given, and summarised once over all of them.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;

use anyhow::{bail, Context as _};
use horde_model::scenario::Scenario;
use horde_scenario::circuit_report::{self, CircuitSummary};
use horde_scenario::circuits::{Config, JoinedCircuit, ServedCircuit, CLIENT_FILE, SERVER_FILE};

use crate::controller::{self, ControllerOptions};

/// The outcome of a regulated run through agents.
pub struct Outcome {
    pub summary: CircuitSummary,
    pub lost: Vec<String>,
}

/// The most bytes one circuit-second takes in a side's file (a row of 17 numbers in JSON, each
/// at most 24 characters, with its field names), and one circuit's own fields.
const ROW_BYTES: u64 = 1024;
const CIRCUIT_BYTES: u64 = 4096;
/// A server side keeps a circuit's seconds until it is stopped: the run, the overrun the fleet
/// allows, and the joins' time before.
const EXTRA_SECONDS: u64 = 60;

/// Runs a regulated scenario on the agents and writes one report into `opts.out`.
pub fn run(sc: &Scenario, cfg: &Config, opts: &ControllerOptions) -> anyhow::Result<Outcome> {
    let mut played = controller::play(sc, opts, |_| {})?;
    let seconds = sc.duration_s.ceil() as u64 + EXTRA_SECONDS;
    let bound = |circuits: u64| circuits * (CIRCUIT_BYTES + seconds * ROW_BYTES);
    let (n, ranges) = (sc.players, &played.ranges);
    let dirs = played.fleet.collect(opts.out, |i, m| {
        let client = ranges[i].as_ref().map_or(0, |r| bound((r.end - r.start) as u64));
        let server = if m.downstream { bound(n as u64) } else { 0 };
        vec![(CLIENT_FILE, client), (SERVER_FILE, server)]
    })?;
    played.fleet.close();
    let mut clients: Vec<JoinedCircuit> = Vec::new();
    let mut served: Vec<ServedCircuit> = Vec::new();
    let mut refused = Vec::new();
    // Each agent's circuit packets: a client side sends throttles and acknowledgements and
    // receives data; a server side sends data and receives throttles.
    let mut counts = vec![(0u64, 0u64); dirs.len()];
    for (i, m) in played.fleet.members.iter().enumerate() {
        if !(m.ok() && m.collected) {
            continue;
        }
        let mut check = || -> anyhow::Result<()> {
            if let Some(r) = &ranges[i] {
                let c: Vec<JoinedCircuit> = load(&dirs[i].join(CLIENT_FILE), r, seconds)?;
                counts[i].0 += c.iter().map(|c| c.stats.throttles_sent + c.stats.acks_sent).sum::<u64>();
                counts[i].1 += c.iter().map(|c| c.stats.packets).sum::<u64>();
                clients.extend(c);
            }
            if i == played.server_i {
                let s: Vec<ServedCircuit> = load(&dirs[i].join(SERVER_FILE), &(0..n), seconds)?;
                counts[i].0 += s.iter().flat_map(|c| &c.seconds).map(|r| r.packets).sum::<u64>();
                counts[i].1 += s.iter().map(|c| c.stats.throttles).sum::<u64>();
                served.extend(s);
            }
            Ok(())
        };
        if let Err(e) = check() {
            refused.push((m.c.name.clone(), format!("{e:#}")));
        }
    }
    // each client side's circuits against the server side's: the agent of one that breaks
    // them is refused (its circuits are left out)
    let mut clients_by_agent: Vec<Vec<&JoinedCircuit>> = vec![Vec::new(); ranges.len()];
    for c in &clients {
        if let Some(i) = ranges.iter().position(|r| r.as_ref().is_some_and(|r| r.contains(&c.player))) {
            clients_by_agent[i].push(c);
        }
    }
    for (i, mine) in clients_by_agent.into_iter().enumerate() {
        let name = &played.fleet.members[i].c.name;
        if mine.is_empty() || refused.iter().any(|(n, _)| n == name) {
            continue;
        }
        let mine: Vec<JoinedCircuit> = mine.into_iter().cloned().collect();
        if let Err((_, why)) = crate::schedule_check::check_circuits(&mine, &served) {
            refused.push((name.clone(), format!("its circuits break the server side's: {why}")));
        }
    }
    for (name, why) in &refused {
        played.fleet.refuse(name, why);
    }
    // A refused agent's circuits are left out as a lost one's are.
    let kept: BTreeSet<u32> = played.fleet.members.iter().zip(ranges).filter(|(m, _)| m.ok()).filter_map(|(_, r)| r.clone()).flatten().collect();
    clients.retain(|c| kept.contains(&c.player));
    clients.sort_by_key(|c| c.player);
    served.sort_by_key(|c| c.player);
    let server = &played.fleet.members[played.server_i];
    let interruption = match (server.ok(), played.signalled) {
        (false, _) => Some(format!("the server agent {} was lost", server.c.name)),
        (true, true) if played.fleet.stopped_by_command => Some("stopped by a command".into()),
        (true, true) => Some("interrupted".into()),
        _ => None,
    };
    let mut summary = circuit_report::summarise(sc, cfg, &clients, &served, interruption);
    let rows = controller::agent_rows(&played, |i, _| counts[i]);
    summary.distributed = Some(controller::distributed(&played, rows));
    // [emu] across the agents: every emulated link's counters as the run left them
    let links = played.emu.as_ref().and_then(|e| e.links()).map(|l| horde_emu::fwd::links_table(&l));
    circuit_report::write(sc, opts.out, &played.players.segments, &summary, links.as_deref(), &clients, &served)?;
    Ok(Outcome { summary, lost: played.fleet.lost() })
}

/// What every circuit of a side's file has: its player.
trait Circuit: serde::de::DeserializeOwned {
    fn player(&self) -> u32;
    fn seconds(&self) -> usize;
}

impl Circuit for JoinedCircuit {
    fn player(&self) -> u32 {
        self.player
    }
    fn seconds(&self) -> usize {
        self.seconds.len()
    }
}

impl Circuit for ServedCircuit {
    fn player(&self) -> u32 {
        self.player
    }
    fn seconds(&self) -> usize {
        self.seconds.len()
    }
}

/// A side's circuits as an agent handed them over (bounded in bytes at collection): each of a
/// player in `players`, none twice, none with more seconds than the run can have.
fn load<C: Circuit>(p: &Path, players: &Range<u32>, seconds: u64) -> anyhow::Result<Vec<C>> {
    let file = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let bytes = std::fs::read(p).with_context(|| format!("reading {file}"))?;
    let circuits: Vec<C> = serde_json::from_slice(&bytes).with_context(|| format!("{file} is not a list of circuits"))?;
    let mut seen = BTreeSet::new();
    for c in &circuits {
        if !players.contains(&c.player()) {
            bail!("{file} has a circuit of player {}, which it did not run (its players: {}..{})", c.player(), players.start, players.end);
        }
        if !seen.insert(c.player()) {
            bail!("{file} has player {}'s circuit twice", c.player());
        }
        if c.seconds() as u64 > seconds {
            bail!("{file} has {} seconds of player {}'s circuit; the run has at most {seconds}", c.seconds(), c.player());
        }
    }
    Ok(circuits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn circuit(player: u32, seconds: u64) -> serde_json::Value {
        let row = serde_json::json!({"t_s": 0, "circuit": "x", "rate_kbps": 1.0, "kbps": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "total_kbps": 0.0, "task_delay_ms": 0.0,
            "task_delay_max_ms": 0.0, "queued_kb": 0.0, "rtt_ms": 0.0, "loss_pct": 0.0, "packets": 1});
        serde_json::json!({"player": player, "client": "127.0.0.1:1", "seconds": vec![row; seconds as usize], "stats": {"resent": 0, "given_up": 0, "throttles": 0, "dropped_full_queue": 0, "bad_packets": 0, "task_delay_max_ms": 0.0}})
    }

    fn file(d: &Path, circuits: &[serde_json::Value]) -> std::path::PathBuf {
        let p = d.join(SERVER_FILE);
        std::fs::write(&p, serde_json::to_vec(circuits).unwrap()).unwrap();
        p
    }

    #[test]
    fn an_agents_circuits_are_refused_when_they_are_not_the_ones_it_ran() {
        let d = std::env::temp_dir().join(format!("horde-circuits-load-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let ok: Vec<ServedCircuit> = load(&file(&d, &[circuit(2, 3), circuit(3, 3)]), &(2..4), 3).expect("its own players");
        assert_eq!(ok.len(), 2);
        let e = load::<ServedCircuit>(&file(&d, &[circuit(4, 1)]), &(2..4), 3).unwrap_err().to_string();
        assert!(e.contains("player 4, which it did not run"), "{e}");
        let e = load::<ServedCircuit>(&file(&d, &[circuit(2, 1), circuit(2, 1)]), &(2..4), 3).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        let e = load::<ServedCircuit>(&file(&d, &[circuit(2, 4)]), &(2..4), 3).unwrap_err().to_string();
        assert!(e.contains("at most 3"), "{e}");
        std::fs::write(d.join(SERVER_FILE), b"{\"not\": \"a list\"}").unwrap();
        let e = format!("{:#}", load::<ServedCircuit>(&d.join(SERVER_FILE), &(2..4), 3).unwrap_err());
        assert!(e.contains("not a list of circuits"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
