//! The players of a scenario as both sides see them: every player's behaviour stays, the bound
//! traffic model, and (server side) which players a connection has taken already.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use horde_engine::sender::{Accepted, Responder, Source};
use horde_model::behaviour::Segment;
use horde_model::flow::Transport;
use horde_model::roster::{Presence, Roster};
use horde_model::scenario::Scenario;
use horde_model::schedule::PlayerSchedule;
use horde_model::service::{BoundTraffic, Direction};
use horde_model::Flow;
use horde_wire::control::Status;

use crate::Error;

/// Both sides' view of the players: segments and the bound model.
pub struct Players {
    pub transport: Transport,
    pub segments: Arc<Vec<Vec<Segment>>>,
    pub traffic: Arc<BoundTraffic>,
    pub seed: u64,
    pub duration_s: f64,
    /// Who is online (the run's command channel changes it on every side alike).
    pub roster: Arc<Roster>,
    /// Server side: players granted to a connection already (each once per run).
    claimed: Vec<AtomicBool>,
}

impl Players {
    /// One direction of one player's traffic, as a schedule.
    pub fn schedule(&self, player: u32, dir: Direction) -> Source {
        Box::new(PlayerSchedule::new(self.segments[player as usize].clone(), self.traffic.clone(), dir, self.seed, self.transport, self.duration_s))
    }

    /// Player `player`'s departures under the roster (one per direction and side).
    pub fn presence(&self, player: u32) -> Presence {
        Presence::new(self.roster.clone(), player)
    }

    pub fn len(&self) -> u32 {
        self.segments.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }
}

impl Players {
    /// How many APDUs each player sends in each direction ([up, down]) over the whole run,
    /// counted on its regenerated schedules: exactly what an honest side can log, so a
    /// controller bounds what an agent hands over by its own plan.
    pub fn planned_apdus(&self) -> Vec<[u64; 2]> {
        (0..self.len()).map(|p| [self.schedule(p, Direction::Up).count() as u64, self.schedule(p, Direction::Down).count() as u64]).collect()
    }
}

impl Responder for Players {
    /// Grants player `tag >> 8` to the connection whose flow is that player, once per run: a
    /// replayed hello cannot take a second stream of the same player.
    fn on_hello(&self, flow: u32, tag: u32) -> Result<Accepted, Status> {
        let player = tag >> 8;
        let claim = self.claimed.get(player as usize).filter(|_| flow == player && tag & 0xFF == 0).ok_or(Status::UnknownPlayer)?;
        if claim.swap(true, Ordering::AcqRel) {
            return Err(Status::Taken);
        }
        Ok(Accepted {
            source: self.schedule(player, Direction::Down),
            mirror: Some(self.schedule(player, Direction::Up)),
            tag,
            presence: Some(self.presence(player)),
        })
    }
}

/// Plans a scenario's players: the behaviour process for every player (seeded per player, so
/// both sides and every shard compute the same stays) and the service bound to the scenario's
/// variables. `stop` interrupts planning.
pub fn plan(sc: &Scenario, stop: &AtomicBool) -> Result<Players, Error> {
    check_memory(sc.players, available_memory())?;
    let segments =
        sc.segments_unless(&|| stop.load(Ordering::Relaxed)).ok_or_else(|| Error::Interrupted("interrupted while planning the players' behaviour".into()))?;
    let traffic = sc.service.bind(&sc.variables).map_err(|(f, m)| Error::BadInput(anyhow::anyhow!("{}: {f}: {m}", sc.name)))?;
    Ok(Players {
        transport: sc.service.transport,
        segments: Arc::new(segments),
        traffic: Arc::new(traffic),
        seed: sc.seed,
        duration_s: sc.duration_s,
        roster: Arc::new(sc.roster()),
        claimed: (0..sc.players).map(|_| AtomicBool::new(false)).collect(),
    })
}

/// Memory the plan takes per player: 1 KiB (measured: 13 GB for 16,777,216 WoW players, 0.78
/// kB each, planning a minute).
pub const PLAN_BYTES_PER_PLAYER: u64 = 1024;

/// Bytes of memory available now (`MemAvailable` of /proc/meminfo), if known.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Refuses a player count whose plan would take more than half the memory available, with a
/// message that says how many fit (rather than aborting on a failed allocation).
pub fn check_memory(players: u32, available: Option<u64>) -> Result<(), Error> {
    let Some(avail) = available else { return Ok(()) };
    let need = players as u64 * PLAN_BYTES_PER_PLAYER;
    if need > avail / 2 {
        return Err(Error::BadInput(anyhow::anyhow!(
            "players = {players} needs about {:.1} GB to plan; this machine has {:.1} GB available (at most {} players fit in half of it): run fewer players, or spread them over agents (--agents)",
            need as f64 / 1e9,
            avail as f64 / 1e9,
            avail / 2 / PLAN_BYTES_PER_PLAYER
        )));
    }
    Ok(())
}

/// The flow that carries player `p`: flow id `p`, tag `p << 8` (the category goes in the low
/// byte of each record's tag).
pub fn player_flow(p: u32, server: std::net::SocketAddr, transport: Transport) -> Flow {
    let mut f = Flow::connection(p, format!("player {p}"), server, p << 8);
    f.transport = transport;
    f
}

/// Splits players `0..players` into contiguous shards by player id, one per weight, each as
/// close to its share as whole players allow (largest remainders). Every player is in exactly
/// one shard; a shard of weight 0 is empty. Errors if no weight is positive.
pub fn shards(players: u32, weights: &[u32]) -> Result<Vec<Range<u32>>, Error> {
    let total: u64 = weights.iter().map(|&w| w as u64).sum();
    if total == 0 {
        return Err(Error::BadInput(anyhow::anyhow!("shard weights must not all be 0")));
    }
    let mut counts: Vec<u64> = weights.iter().map(|&w| players as u64 * w as u64 / total).collect();
    let mut rest = players as u64 - counts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; ties to the earlier shard.
    order.sort_by_key(|&i| (std::cmp::Reverse(players as u64 * weights[i] as u64 % total), i));
    for &i in &order {
        if rest == 0 {
            break;
        }
        if weights[i] > 0 {
            counts[i] += 1;
            rest -= 1;
        }
    }
    let mut start = 0u32;
    Ok(counts
        .into_iter()
        .map(|c| {
            let r = start..start + c as u32;
            start = r.end;
            r
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_player_once_in_proportion() {
        let s = shards(10, &[1, 1, 1]).unwrap();
        assert_eq!(s, [0..4, 4..7, 7..10]);
        let s = shards(1000, &[3, 0, 1]).unwrap();
        assert_eq!(s, [0..750, 750..750, 750..1000]);
        let s = shards(2, &[1, 1, 1, 1]).unwrap();
        assert_eq!(s.iter().map(|r| r.len()).sum::<usize>(), 2);
        assert!(shards(5, &[0, 0]).is_err());
        assert!(shards(5, &[]).is_err());
    }
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    #[test]
    fn a_player_count_beyond_memory_is_refused_with_how_many_fit() {
        let e = check_memory(16_777_216, Some(24 << 30)).unwrap_err().to_string();
        assert!(e.contains("players = 16777216") && e.contains("at most 12582912 players"), "{e}");
        assert!(check_memory(10_000, Some(24 << 30)).is_ok() && check_memory(u32::MAX, None).is_ok());
    }
}
