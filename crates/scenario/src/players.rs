//! The players of a scenario as both sides see them: every player's behaviour stays, the bound
//! traffic model, and (server side) which players a connection has taken already. Players past
//! the scenario's `players` are planned on demand ([`Players::grow`], a raised online target),
//! each from the same seed as at the start (player k's stays do not depend on when it is
//! planned), up to the limit the run states at its start ([`Players::limit`]).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use std::path::PathBuf;
use std::time::Duration;

use horde_engine::sender::{self, Accepted, Job, Progress, Responder, Source};
use horde_engine::SendReport;
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
    /// The stays of the players planned at the start (`players`).
    pub segments: Arc<Vec<Vec<Segment>>>,
    pub traffic: Arc<BoundTraffic>,
    pub seed: u64,
    pub duration_s: f64,
    /// Who is online (the run's command channel changes it on every side alike).
    pub roster: Arc<Roster>,
    /// The most players this run may have (stated at its start: descriptors and memory).
    pub limit: u32,
    /// The stays of players planned on demand, from `segments.len()` on, in id order.
    more: RwLock<Vec<Arc<Vec<Segment>>>>,
    /// What planning another player needs (the scenario as run).
    planner: Arc<Scenario>,
    /// Server side: players granted to a connection already (each once per run).
    claimed: RwLock<Vec<AtomicBool>>,
}

impl Players {
    /// Refuses a change of the online target that would take effect at or past the run's end
    /// (at `at_ns`, or `margin_ns` after `now_ns` when none is given): it would be "applied" and
    /// never happen, and every later change would have to come after it (changes are kept in
    /// time order). The one check of every driver of this run's commands.
    pub fn check_change_at(&self, online: u32, now_ns: u64, margin_ns: u64, at_ns: Option<u64>) -> Result<(), String> {
        let end_ns = (self.duration_s * 1e9) as u64;
        match at_ns {
            Some(at) if at >= end_ns => {
                Err(format!("players online = {online} at {:.2} s: the run ends at {:.2} s; give an instant before its end", at as f64 / 1e9, self.duration_s))
            }
            None if now_ns.saturating_add(margin_ns) >= end_ns => {
                Err(format!("players online = {online}: the run ends at {:.2} s, too soon for a change to reach every side", self.duration_s))
            }
            _ => Ok(()),
        }
    }

    /// One direction of one player's traffic, as a schedule.
    pub fn schedule(&self, player: u32, dir: Direction) -> Source {
        Box::new(PlayerSchedule::new(self.stays(player).unwrap_or_default(), self.traffic.clone(), dir, self.seed, self.transport, self.duration_s))
    }

    /// One direction of one player's departures as they leave, regenerated: its schedule,
    /// those due while the roster has it online, numbered consecutively (what [`Presence`] lets
    /// out on both sides). A controller checks an agent's log against it.
    pub fn departures(&self, player: u32, dir: Direction) -> impl Iterator<Item = horde_model::schedule::Departure> {
        let roster = self.roster.clone();
        let mut next = 0u64;
        let stays = self.stays(player).unwrap_or_default();
        PlayerSchedule::new(stays, self.traffic.clone(), dir, self.seed, self.transport, self.duration_s).filter_map(move |mut d| {
            if !roster.admitted(player, d.at_ns) {
                return None;
            }
            d.seq = next;
            next += 1;
            Some(d)
        })
    }

    /// Player `p`'s stays, if it is planned.
    pub fn stays(&self, p: u32) -> Option<Vec<Segment>> {
        let first = self.segments.len();
        match (p as usize).checked_sub(first) {
            None => self.segments.get(p as usize).cloned(),
            Some(k) => self.more.read().unwrap_or_else(|e| e.into_inner()).get(k).map(|s| s.to_vec()),
        }
    }

    /// Every planned player's stays, in id order (those planned at the start, then the others).
    pub fn all_segments(&self) -> std::borrow::Cow<'_, [Vec<Segment>]> {
        let more = self.more.read().unwrap_or_else(|e| e.into_inner());
        if more.is_empty() {
            return std::borrow::Cow::Borrowed(&self.segments[..]);
        }
        std::borrow::Cow::Owned(self.segments.iter().cloned().chain(more.iter().map(|s| s.to_vec())).collect())
    }

    /// Calls `f` with every planned player's id and stays, in id order, without copying them.
    pub fn each_stays(&self, mut f: impl FnMut(u32, &[Segment])) {
        for (p, s) in self.segments.iter().enumerate() {
            f(p as u32, s);
        }
        let more = self.more.read().unwrap_or_else(|e| e.into_inner());
        for (k, s) in more.iter().enumerate() {
            f((self.segments.len() + k) as u32, s);
        }
    }

    /// Player `player`'s departures under the roster (one per direction and side).
    pub fn presence(&self, player: u32) -> Presence {
        Presence::new(self.roster.clone(), player)
    }

    /// Players planned so far.
    pub fn len(&self) -> u32 {
        (self.segments.len() + self.more.read().unwrap_or_else(|e| e.into_inner()).len()) as u32
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Plans players up to `upto` (exclusive) if they are not yet: each one's stays from the same
    /// seed as at the start, its join offset in the roster, its claim on the server side.
    /// Returns the players it planned; refuses past [`Players::limit`].
    pub fn grow(&self, upto: u32) -> Result<Range<u32>, String> {
        if upto > self.limit {
            return Err(format!(
                "{upto} players is above this run's limit of {} (stated at its start: what this machine's descriptors and memory hold; more players go through agents)",
                self.limit
            ));
        }
        let mut more = self.more.write().unwrap_or_else(|e| e.into_inner());
        let from = (self.segments.len() + more.len()) as u32;
        if upto <= from {
            return Ok(from..from);
        }
        let sc = &*self.planner;
        let params = sc.behaviour_params();
        let joins: Vec<u64> = (from..upto).map(|p| (sc.join_time(p) * 1e9) as u64).collect();
        more.extend((from..upto).map(|p| Arc::new(horde_model::behaviour::player_joining(&sc.service, &params, p, sc.join_time(p)))));
        self.claimed.write().unwrap_or_else(|e| e.into_inner()).extend((from..upto).map(|_| AtomicBool::new(false)));
        self.roster.grow(joins);
        Ok(from..upto)
    }
}

impl Players {
    /// How many APDUs each player sends in each direction ([up, down]) over the whole run,
    /// counted on its regenerated schedules: exactly what an honest side can log, so a
    /// controller bounds what an agent hands over by its own plan.
    pub fn planned_apdus(&self) -> Vec<[u64; 2]> {
        self.planned_apdus_from(0)
    }

    /// The model's mean load over the run (bit/s of APDUs, headers not counted; [up, down]) of
    /// the players on each of `hosts` hosts (player `p` on host `p % hosts`), from each stay's
    /// length and its traffic's mean rate and size: the expectation, without drawing a packet.
    pub fn mean_bps_by_host(&self, hosts: usize) -> Vec<[f64; 2]> {
        let mut out = vec![[0.0f64; 2]; hosts.max(1)];
        let n = out.len();
        for (p, segs) in self.segments.iter().enumerate() {
            for s in segs {
                let secs = (s.end_s.min(self.duration_s) - s.start_s).max(0.0);
                for dir in [Direction::Up, Direction::Down] {
                    let t = self.traffic.by_state.get(s.state as usize).and_then(|x| x.get(s.sub as usize)).and_then(|x| x[dir as usize].as_ref());
                    if let Some((idt, size)) = t.and_then(|t| Some((t.idt.mean_estimate()?, t.size.mean_estimate()?))).filter(|(m, _)| *m > 0.0) {
                        out[p % n][dir as usize] += secs * 1e3 / idt * size * 8.0;
                    }
                }
            }
        }
        let secs = self.duration_s.max(1e-9);
        out.iter_mut().for_each(|h| h.iter_mut().for_each(|x| *x /= secs));
        out
    }

    /// [`Players::planned_apdus`] of the players from `from` on (those planned later).
    pub fn planned_apdus_from(&self, from: u32) -> Vec<[u64; 2]> {
        (from..self.len()).map(|p| [self.schedule(p, Direction::Up).count() as u64, self.schedule(p, Direction::Down).count() as u64]).collect()
    }
}

impl Responder for Players {
    /// Grants player `tag >> 8` to the connection whose flow is that player, once per run: a
    /// replayed hello cannot take a second stream of the same player.
    fn on_hello(&self, flow: u32, tag: u32) -> Result<Accepted, Status> {
        let player = tag >> 8;
        {
            let claimed = self.claimed.read().unwrap_or_else(|e| e.into_inner());
            let claim = claimed.get(player as usize).filter(|_| flow == player && tag & 0xFF == 0).ok_or(Status::UnknownPlayer)?;
            if claim.swap(true, Ordering::AcqRel) {
                return Err(Status::Taken);
            }
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
/// variables. `limit`: the most players the run may have (see [`stated_limit`]; a server side
/// takes the one its run stated). `stop` interrupts planning.
pub fn plan(sc: &Scenario, limit: u32, stop: &AtomicBool) -> Result<Players, Error> {
    check_memory(sc.players, available_memory())?;
    let segments =
        sc.segments_unless(&|| stop.load(Ordering::Relaxed)).ok_or_else(|| Error::Interrupted("interrupted while planning the players' behaviour".into()))?;
    let traffic = sc.service.bind(&sc.bound_variables()).map_err(|(f, m)| Error::BadInput(anyhow::anyhow!("{}: {f}: {m}", sc.name)))?;
    Ok(Players {
        transport: sc.service.transport,
        segments: Arc::new(segments),
        traffic: Arc::new(traffic),
        seed: sc.seed,
        duration_s: sc.duration_s,
        roster: Arc::new(sc.roster()),
        limit: limit.max(sc.players),
        more: RwLock::new(Vec::new()),
        planner: Arc::new(sc.clone()),
        claimed: RwLock::new((0..sc.players).map(|_| AtomicBool::new(false)).collect()),
    })
}

/// Memory a player takes while a run goes beyond its plan (its connection, buffers and log
/// share), a generous figure: 10,000 WoW players' client side peaks near 100 MB.
pub const RUN_BYTES_PER_PLAYER: u64 = 32 * 1024;

/// Descriptors a process keeps for itself beside its players' sockets.
const FD_SLACK: u64 = 64;

/// The most players a run on this machine may have online, stated at its start: one socket
/// each within the descriptors this process may open, and their plan and connections within
/// half the memory available; never above `MAX_PLAYERS`, never below the scenario's `players`.
pub fn stated_limit(players: u32, descriptors: u64, available: Option<u64>) -> u32 {
    let by_fds = descriptors.saturating_sub(FD_SLACK);
    let by_memory = available.map_or(u64::MAX, |m| m / 2 / (PLAN_BYTES_PER_PLAYER + RUN_BYTES_PER_PLAYER));
    by_fds.min(by_memory).min(horde_model::scenario::MAX_PLAYERS as u64).max(players as u64) as u32
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
mod grow_tests {
    use super::*;

    fn scenario(players: u32) -> Scenario {
        let text = format!("service = 'wow'\nplayers = {players}\nduration = '60s'\nseed = 11\njoin = 'uniform(0, 5)'\n");
        Scenario::parse(&text, "t.toml", std::path::Path::new(".")).unwrap()
    }

    #[test]
    fn players_planned_on_demand_are_those_planned_at_the_start() {
        let stop = AtomicBool::new(false);
        let big = plan(&scenario(80), 80, &stop).unwrap();
        let small = plan(&scenario(50), 100, &stop).unwrap();
        assert_eq!((small.len(), small.roster.pool(), small.limit), (50, 50, 100));
        assert_eq!(small.grow(80).unwrap(), 50..80);
        assert_eq!(small.grow(70).unwrap(), 80..80, "already planned");
        assert_eq!((small.len(), small.roster.pool()), (80, 80));
        for p in 0..80 {
            assert_eq!(small.stays(p), big.stays(p), "player {p}");
        }
        assert_eq!(small.all_segments().len(), 80);
        let mut seen = 0;
        small.each_stays(|p, s| {
            assert_eq!(Some(s.to_vec()), big.stays(p));
            seen += 1;
        });
        assert_eq!(seen, 80);
        // the new players' claims exist on a server side, once each
        assert!(small.on_hello(79, 79 << 8).is_ok() && small.on_hello(79, 79 << 8).is_err() && small.on_hello(80, 80 << 8).is_err());
        let e = small.grow(101).unwrap_err();
        assert!(e.contains("above this run's limit of 100"), "{e}");
        assert_eq!(small.len(), 80, "a refused growth plans nothing");
    }

    #[test]
    fn the_stated_limit_is_what_descriptors_and_memory_hold() {
        assert_eq!(stated_limit(50, 1024, None), 1024 - 64);
        assert_eq!(stated_limit(50, 1 << 20, Some(33 * 1024 * 1000)), 500, "half of 33 MB at 33 KiB a player");
        assert_eq!(stated_limit(5000, 1024, None), 5000, "never below the plan");
        assert_eq!(stated_limit(50, u64::MAX, None), horde_model::scenario::MAX_PLAYERS);
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

/// A run's client side: which players, against which server side, logging where.
pub struct Clients<'p> {
    pub players: &'p Players,
    /// The players this side runs (all, or a shard).
    pub shard: Range<u32>,
    /// The server side's address.
    pub server: std::net::SocketAddr,
    pub key: horde_proto::RunKey,
    /// The per-packet log (both directions of every player of the shard), and where its
    /// records also go as they are written (an agent's live summary; none: nowhere).
    pub log: PathBuf,
    pub log_tap: horde_engine::logger::TapSlot,
    pub progress: Arc<Progress>,
    /// Network namespaces the players are dealt to in turn (none: this one).
    pub netns: Vec<Arc<std::fs::File>>,
    /// Players started while the run goes (a raised target beyond the plan), if this side may.
    pub joining: Option<Arc<horde_engine::sender::Joining>>,
    /// The run's common start on this machine's real clock, ns (an agent's part: the
    /// controller's start; none: when set-up is done).
    pub start_at_real_ns: Option<u64>,
}

impl Clients<'_> {
    /// Player `p`'s job: its flow to the server side, its two schedules, its presence, its host;
    /// connecting at `connect_at_ns` (none: at the start).
    fn job(&self, sc: &Scenario, p: u32, connect_at_ns: Option<u64>) -> Job {
        Job {
            netns: (!self.netns.is_empty()).then(|| self.netns[p as usize % self.netns.len()].clone()),
            flow: player_flow(p, self.server, sc.service.transport),
            source: Some(self.players.schedule(p, Direction::Up)),
            mirror: Some(self.players.schedule(p, Direction::Down)),
            connect_at_ns,
            presence: Some(self.players.presence(p)),
        }
    }

    /// Starts players `range` (planned on demand) while the run goes: each connects when the
    /// change that admits it (at `at_ns`) and its own join offset have come.
    pub fn start_more(&self, sc: &Scenario, range: Range<u32>, at_ns: u64) {
        if let Some(j) = &self.joining {
            j.add(range.map(|p| self.job(sc, p, Some(at_ns + (sc.join_time(p) * 1e9) as u64))));
        }
    }
}

/// When player `p` first needs its connection: its join time, or its first stay's start when a
/// session model keeps it offline until later (a player with no stay in the run joins as usual).
fn first_session(sc: &Scenario, c: &Clients, p: u32) -> f64 {
    let join = sc.join_time(p);
    c.players.stays(p).and_then(|s| s.first().copied()).map_or(join, |s| s.start_s.max(join))
}

/// Runs the client side of a scenario's players `c.shard` until the scenario's end or `stop`:
/// each player connects (at its join time) and plays its two-way schedule. The building block
/// of [`execute`] and of an agent's shard (`horde agent`).
pub fn run_clients(sc: &Scenario, c: &Clients, stop: &AtomicBool) -> anyhow::Result<SendReport> {
    // A player who joins later, or whose first session begins later, connects then.
    let jobs: Vec<Job> = c.shard.clone().map(|p| c.job(sc, p, Some((first_session(sc, c, p) * 1e9) as u64).filter(|t| *t > 0))).collect();
    let copts = horde_engine::SendOptions {
        threads: sc.threads,
        spin_ns: sc.spin_us * 1000,
        log: Some(c.log.clone()),
        log_tap: c.log_tap.clone(),
        progress: Some(c.progress.clone()),
        linger: Duration::from_millis(1000),
        run_for: Some(Duration::from_secs_f64(sc.duration_s)),
        connect_timeout: Duration::from_secs(30),
        key: c.key.clone(),
        joining: c.joining.clone(),
        start_at_real_ns: c.start_at_real_ns,
        gso: sc.gso,
        ..Default::default()
    };
    Ok(sender::run_jobs(jobs, &copts, stop)?)
}
