//! Who is online during a run: a scenario's players are a pool (`players`), and a target says
//! how many of them — the first N by id — are online (`online`, default all). The run's command
//! channel changes the target while it runs (Locust's "number of users"): players above a
//! lowered target leave at once; players a raised target admits join over the scenario's own
//! join ramp, counted from the change. A target above the pool first grows the pool
//! ([`Roster::grow`]: the new players planned on demand, each with its own join offset).
//!
//! Both sides of every connection decide with the same [`Roster`] whether a departure leaves,
//! from its *schedule* time, so they agree on which APDUs exist without a message per player:
//! a change is stamped with the schedule time it takes effect at (the driver picks one far
//! enough ahead for every side to hear of it first), and a departure is decided only when it is
//! due. [`Presence`] numbers the departures that leave consecutively, so the k-th APDU that
//! arrives is still the peer's k-th (see `horde_proto::mirror`).

use std::sync::{Arc, RwLock};

use crate::Departure;

/// Changes a run keeps at most (each a few bytes; past it a change is refused).
pub const MAX_CHANGES: usize = 10_000;

/// The online target over a run's schedule time.
#[derive(Debug)]
pub struct Roster {
    inner: RwLock<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Each player's join offset within the ramp, ns (the scenario's `join` draw).
    join_ns: Vec<u64>,
    /// (schedule time ns, online target), times increasing; the first at 0.
    changes: Vec<(u64, u32)>,
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RosterError {
    #[error("online = {online} is more than the scenario's {pool} players; plan more with `players` in the scenario (or --players) and start fewer with `online` (or --online)")]
    OverPool { online: u32, pool: u32 },
    #[error("a change at {at_ns} ns comes before the last one at {last_ns} ns: changes are applied in time order")]
    OutOfOrder { at_ns: u64, last_ns: u64 },
    #[error("{MAX_CHANGES} changes of the online target already: no more in this run")]
    TooMany,
    #[error("{:.2} s of schedule time is too soon (now {:.2} s): a change must reach every side before it is due", *at_ns as f64 / 1e9, *now_ns as f64 / 1e9)]
    TooSoon { at_ns: u64, now_ns: u64 },
}

impl Roster {
    /// `online` of the `join_ns.len()` players online from the start.
    pub fn new(online: u32, join_ns: Vec<u64>) -> Result<Roster, RosterError> {
        let pool = join_ns.len() as u32;
        if online > pool {
            return Err(RosterError::OverPool { online, pool });
        }
        Ok(Roster { inner: RwLock::new(Inner { join_ns, changes: vec![(0, online)] }) })
    }

    /// Every player online for the whole run.
    pub fn everyone(join_ns: Vec<u64>) -> Roster {
        let n = join_ns.len() as u32;
        Roster { inner: RwLock::new(Inner { join_ns, changes: vec![(0, n)] }) }
    }

    pub fn pool(&self) -> u32 {
        self.read().join_ns.len() as u32
    }

    /// Adds players to the pool (offline until a target admits them), with their join offsets.
    pub fn grow(&self, join_ns: impl IntoIterator<Item = u64>) {
        self.inner.write().unwrap_or_else(|p| p.into_inner()).join_ns.extend(join_ns);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the target to `online` from schedule time `at_ns` on. A change at the same time as
    /// the last one replaces it.
    pub fn set(&self, at_ns: u64, online: u32) -> Result<(), RosterError> {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let pool = inner.join_ns.len() as u32;
        if online > pool {
            return Err(RosterError::OverPool { online, pool });
        }
        let ch = &mut inner.changes;
        let last = *ch.last().expect("a roster starts with a target");
        if at_ns < last.0 {
            return Err(RosterError::OutOfOrder { at_ns, last_ns: last.0 });
        }
        if at_ns == last.0 {
            ch.last_mut().expect("checked").1 = online;
        } else if ch.len() >= MAX_CHANGES {
            return Err(RosterError::TooMany);
        } else {
            ch.push((at_ns, online));
        }
        Ok(())
    }

    /// A change asked at schedule time `now_ns`, stamped so that every side hears of it before it
    /// is due: at `at_ns` if given (else `margin_ns` from now), never before the last change,
    /// refused when less than half the margin away. Returns the time it takes effect.
    pub fn set_ahead(&self, now_ns: u64, margin_ns: u64, at_ns: Option<u64>, online: u32) -> Result<u64, RosterError> {
        let last = self.read().changes.last().map_or(0, |c| c.0);
        let at = at_ns.unwrap_or(now_ns + margin_ns).max(last);
        if at < now_ns + margin_ns / 2 {
            return Err(RosterError::TooSoon { at_ns: at, now_ns });
        }
        self.set(at, online)?;
        Ok(at)
    }

    /// The target in force at `t_ns`.
    pub fn target_at(&self, t_ns: u64) -> u32 {
        let inner = self.read();
        let ch = &inner.changes;
        ch[ch.partition_point(|c| c.0 <= t_ns).saturating_sub(1)].1
    }

    /// How many changes so far (the start's counts): a cheap mark of whether it changed.
    pub fn version(&self) -> usize {
        self.read().changes.len()
    }

    /// The changes so far: (schedule time ns, online target), the start's first.
    pub fn changes(&self) -> Vec<(u64, u32)> {
        self.read().changes.clone()
    }

    /// Whether every player is online throughout (no change ever took one offline).
    pub fn everyone_throughout(&self) -> bool {
        let inner = self.read();
        inner.changes.iter().all(|c| c.1 == inner.join_ns.len() as u32)
    }

    /// The schedule times player `p` is online, as `[from, to)` spans up to `end_ns`.
    pub fn spans(&self, p: u32, end_ns: u64) -> Vec<(u64, u64)> {
        let inner = self.read();
        let (ch, join_ns) = (&inner.changes, &inner.join_ns);
        let mut out = Vec::new();
        let mut i = 0;
        while i < ch.len() {
            if ch[i].1 <= p {
                i += 1;
                continue;
            }
            let mut j = i;
            while j + 1 < ch.len() && ch[j + 1].1 > p {
                j += 1;
            }
            let from = if i == 0 { 0 } else { ch[i].0.saturating_add(join_ns.get(p as usize).copied().unwrap_or(0)) };
            let to = ch.get(j + 1).map_or(end_ns, |c| c.0).min(end_ns);
            if from < to {
                out.push((from, to));
            }
            i = j + 1;
        }
        out
    }

    /// Whether player `p` is online at schedule time `t_ns`: under the target then, and — if
    /// a raise admitted it during the run — past its join offset since that raise. (Players
    /// online from the start join as their planned behaviour says.)
    pub fn admitted(&self, p: u32, t_ns: u64) -> bool {
        let inner = self.read();
        let (ch, join_ns) = (&inner.changes, &inner.join_ns);
        let i = ch.partition_point(|c| c.0 <= t_ns).saturating_sub(1);
        if ch[i].1 <= p {
            return false;
        }
        let mut since = i;
        while since > 0 && ch[since - 1].1 > p {
            since -= 1;
        }
        since == 0 || t_ns >= ch[since].0.saturating_add(join_ns.get(p as usize).copied().unwrap_or(0))
    }
}

/// One player's departures in one direction, filtered by the roster: those due while the
/// player is online leave, numbered consecutively; the others never exist.
#[derive(Debug, Clone)]
pub struct Presence {
    roster: Arc<Roster>,
    player: u32,
    next_seq: u64,
}

impl Presence {
    pub fn new(roster: Arc<Roster>, player: u32) -> Presence {
        Presence { roster, player, next_seq: 0 }
    }

    pub fn roster(&self) -> &Arc<Roster> {
        &self.roster
    }

    pub fn player(&self) -> u32 {
        self.player
    }

    /// The number the next departure that leaves gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// `d` renumbered if the player is online at its schedule time `sched_ns`, else `None`.
    /// Call only once `d` is due: the roster must already hold every change up to its time.
    pub fn admit(&mut self, mut d: Departure, sched_ns: u64) -> Option<Departure> {
        if !self.roster.admitted(self.player, sched_ns) {
            return None;
        }
        d.seq = self.next_seq;
        self.next_seq += 1;
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_raise_admits_over_the_ramp_and_a_cut_removes_at_once() {
        // 6 players, 2 online; join offsets 0, 1, 2, 3, 4, 5 s.
        let r = Roster::new(2, (0..6).map(|p| p * S).collect()).unwrap();
        assert!(r.admitted(1, 0) && !r.admitted(2, 0));
        r.set(10 * S, 5).unwrap();
        assert!(!r.admitted(2, 10 * S + S), "player 2 joins 2 s after the raise");
        assert!(r.admitted(2, 12 * S) && r.admitted(4, 14 * S) && !r.admitted(5, 100 * S));
        assert!(r.admitted(1, 10 * S), "players online before a raise stay");
        r.set(20 * S, 1).unwrap();
        assert!(r.admitted(0, 20 * S) && !r.admitted(1, 20 * S) && !r.admitted(4, 20 * S));
        assert!(r.admitted(4, 20 * S - 1), "the cut is at its time, not before");
        r.set(30 * S, 3).unwrap();
        assert!(!r.admitted(1, 30 * S + S / 2) && r.admitted(1, 31 * S), "a rejoin follows the ramp again");
        assert_eq!(r.target_at(25 * S), 1);
        assert_eq!(r.spans(1, 40 * S), vec![(0, 20 * S), (31 * S, 40 * S)]);
        assert_eq!(r.spans(4, 40 * S), vec![(14 * S, 20 * S)]);
        assert_eq!(r.spans(5, 40 * S), vec![]);
        assert!(!r.everyone_throughout());
        assert_eq!(r.changes(), vec![(0, 2), (10 * S, 5), (20 * S, 1), (30 * S, 3)]);
    }

    #[test]
    fn a_grown_pool_admits_its_new_players_over_their_ramp() {
        let r = Roster::new(2, vec![0, 0]).unwrap();
        assert_eq!(r.set(S, 4), Err(RosterError::OverPool { online: 4, pool: 2 }));
        r.grow([S, 2 * S]);
        assert_eq!(r.pool(), 4);
        assert!(!r.admitted(2, 0) && !r.admitted(3, 5 * S), "offline until a target admits them");
        r.set(10 * S, 4).unwrap();
        assert!(!r.admitted(2, 10 * S) && r.admitted(2, 11 * S) && !r.admitted(3, 11 * S) && r.admitted(3, 12 * S));
        assert!(r.admitted(1, 10 * S));
    }

    #[test]
    fn bad_changes_are_refused_and_change_nothing() {
        let r = Roster::new(2, vec![0; 4]).unwrap();
        assert_eq!(r.set(S, 5), Err(RosterError::OverPool { online: 5, pool: 4 }));
        r.set(2 * S, 3).unwrap();
        assert_eq!(r.set(S, 1), Err(RosterError::OutOfOrder { at_ns: S, last_ns: 2 * S }));
        r.set(2 * S, 4).unwrap();
        assert_eq!(r.changes(), vec![(0, 2), (2 * S, 4)], "the same time replaces");
        assert!(Roster::new(5, vec![0; 4]).is_err());
    }

    #[test]
    fn presence_numbers_only_what_leaves() {
        let r = Arc::new(Roster::new(1, vec![0; 2]).unwrap());
        r.set(5, 2).unwrap();
        let mut p = Presence::new(r, 1);
        let dep = |seq: u64| Departure { seq, at_ns: seq, size: 10, clamped: false, class: 0 };
        let left: Vec<u64> = (0..10).filter_map(|t| p.admit(dep(t), t)).map(|d| d.seq).collect();
        assert_eq!(left, vec![0, 1, 2, 3, 4], "departures at 5..9 leave, numbered from 0");
    }

    #[test]
    fn a_change_is_stamped_ahead_of_every_side() {
        let r = Roster::new(2, vec![0; 4]).unwrap();
        assert_eq!(r.set_ahead(10 * S, S, None, 3), Ok(11 * S), "a margin from now");
        assert_eq!(r.set_ahead(10 * S, S, Some(10 * S), 4), Ok(11 * S), "never before the last change: it replaces it");
        assert_eq!(r.set_ahead(20 * S, S, Some(20 * S + S / 4), 1), Err(RosterError::TooSoon { at_ns: 20 * S + S / 4, now_ns: 20 * S }));
        assert_eq!(r.changes(), vec![(0, 2), (11 * S, 4)]);
    }
}
