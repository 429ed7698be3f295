//! The builder: records in, as they are written, a [`GameDigest`] out — at the end, and in
//! pieces while the run goes on ([`Delta`], what was added since the last piece). Pieces add
//! up to the end's summary exactly: the builder itself is the sum of the pieces it handed out
//! ([`GameDigest::apply`]), so a controller that applies an agent's pieces in order holds the
//! agent's final summary, float for float.

use std::collections::HashMap;

use horde_model::behaviour::Segment;
use horde_model::service::Direction;
use horde_wire::Record;
use serde::{Deserialize, Serialize};

use super::{Bins, DigestError, DirDigest, GameDigest, SecDigest, NS_PER_US, SIG, SIG_SECOND, WINDOW};
use crate::metrics::Jitter;

/// Per (player, direction): the last stays' last arrival and transit time, and which recent
/// sequence numbers have arrived.
#[derive(Default)]
pub(super) struct PlayerState {
    stays: [Option<(usize, u64, i64)>; 2],
    /// The last departure's stay and time.
    departed: Option<(usize, u64)>,
    top: Option<u64>,
    seen: [u64; (WINDOW / 64) as usize],
}

impl PlayerState {
    /// Marks `seq` as arrived; false when it had already.
    pub(super) fn first_arrival(&mut self, seq: u64) -> bool {
        let bit = |s: u64| ((s % WINDOW) / 64, s % 64);
        match self.top {
            Some(top) if seq <= top => {
                if top - seq >= WINDOW {
                    return true;
                }
                let (w, b) = bit(seq);
                let was = self.seen[w as usize] >> b & 1 == 1;
                self.seen[w as usize] |= 1 << b;
                !was
            }
            _ => {
                let from = self.top.map_or(seq, |t| t + 1);
                if seq - from >= WINDOW {
                    self.seen = Default::default();
                } else {
                    for s in from..=seq {
                        let (w, b) = bit(s);
                        self.seen[w as usize] &= !(1 << b);
                    }
                }
                self.top = Some(seq);
                let (w, b) = bit(seq);
                self.seen[w as usize] |= 1 << b;
                true
            }
        }
    }

    /// The previous departure's time if it was in the same stay, and records this one.
    fn last_departure(&mut self, stay: usize, t_b: u64) -> Option<u64> {
        let prev = self.departed.filter(|d| d.0 == stay).map(|d| d.1);
        self.departed = Some((stay, t_b));
        prev
    }

    /// The previous arrival (time, transit) of the same stay, and records this one.
    fn last_in_stay(&mut self, stay: usize, t_b: u64, transit: i64) -> Option<(u64, i64)> {
        let slot = self.stays.iter().position(|s| s.is_some_and(|s| s.0 == stay));
        let prev = slot.and_then(|i| self.stays[i]).map(|s| (s.1, s.2));
        let i = slot.unwrap_or_else(|| {
            // a new stay replaces the older of the two kept
            match self.stays {
                [None, _] => 0,
                [_, None] => 1,
                [Some(a), Some(b)] => usize::from(b.0 < a.0),
            }
        });
        self.stays[i] = Some((stay, t_b, transit));
        prev
    }
}

/// Reduces one agent's records into a [`GameDigest`] as they are written.
pub struct Builder {
    /// What was handed out so far (the sum of every [`Delta`]).
    d: GameDigest,
    /// Since the last [`Builder::take`]: the same shape, and which seconds it touched.
    pending: GameDigest,
    touched: Vec<u32>,
    marked: Vec<bool>,
    players: HashMap<(u32, u8), PlayerState>,
    jitter: Vec<[Jitter; 2]>,
    /// The run's length (s): a stay's room ends there at the latest.
    end_s: f64,
    /// Per player, its departures up and down (the final summary's `departures`).
    departed: std::collections::BTreeMap<u32, [u64; 2]>,
}

/// What a builder added since its last piece: counts and histograms to add, the running jitter
/// estimates as they are now (with the updates added), and only the seconds it touched.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Delta {
    pub epoch_ns: u64,
    pub categories: Vec<[DirDigest; 2]>,
    /// `(second, what it gained)`, seconds increasing.
    pub seconds: Vec<(u32, SecDigest)>,
    pub lateness_us: Bins,
    pub lateness_sum_us: f64,
    pub late_over_1ms: u64,
}

impl Delta {
    /// Departures and arrivals in this piece.
    pub fn counts(&self) -> (u64, u64) {
        let all = self.categories.iter().flat_map(|c| c.iter());
        all.fold((0u64, 0u64), |(s, r), c| (s.saturating_add(c.sent), r.saturating_add(c.received)))
    }
}

impl Builder {
    pub fn new(categories: usize, epoch_ns: u64, duration_s: f64) -> Self {
        let d = GameDigest::new(categories, epoch_ns, duration_s);
        let jitter = vec![[Jitter::default(); 2]; d.categories.len()];
        let marked = vec![false; d.seconds.len()];
        Builder { pending: d.clone(), d, touched: Vec::new(), marked, players: HashMap::new(), jitter, end_s: duration_s, departed: Default::default() }
    }

    fn second_of(&self, ns: u64) -> usize {
        (ns.saturating_sub(self.d.epoch_ns) as f64 / 1e9) as usize
    }

    fn touch(&mut self, sec: usize) -> &mut SecDigest {
        if !self.marked[sec] {
            self.marked[sec] = true;
            self.touched.push(sec as u32);
        }
        &mut self.pending.seconds[sec]
    }

    /// An APDU this agent sent in direction `dir` (a `Sent` record: `t_b` is when it left, the
    /// send time its packet carried); `segs` are its player's stays (the one that holds `t_b`
    /// is the stay its arrival is counted in).
    pub fn sent(&mut self, r: &Record, dir: Direction, segs: Option<&[Segment]>) {
        let secs = self.d.seconds.len();
        let sec = self.second_of(r.t_b).min(secs - 1);
        let n = self.d.categories.len();
        let s = self.touch(sec);
        s.sent[dir as usize] += 1;
        s.count(n, (r.tag & 0xFF) as usize, dir as usize);
        let p = &mut self.pending;
        if dir == Direction::Up {
            // a client's departure: how late it left (`t_a` is when it was due)
            let late_ns = r.t_b.saturating_sub(r.t_a);
            p.lateness_us.record((late_ns / 1_000).max(1));
            p.lateness_sum_us += late_ns as f64 / 1e3;
            p.late_over_1ms += u64::from(late_ns > 1_000_000);
        }
        if let Some(c) = p.categories.get_mut((r.tag & 0xFF) as usize) {
            self.departed.entry(r.flow).or_default()[dir as usize] += 1;
            let c = &mut c[dir as usize];
            c.sent += 1;
            c.sent_size.record(r.size as u64);
            let t_s = (r.t_b as i64).saturating_sub(p.epoch_ns as i64) as f64 / 1e9;
            let Some((stay, segs)) = segs.and_then(|segs| crate::game::segment_index(segs, t_s).map(|i| (i, segs))) else {
                return;
            };
            crate::game::record_room(&mut c.sent_room_ms, &segs[stay], self.end_s, t_s);
            let st = self.players.entry((r.tag >> 8, dir as u8)).or_default();
            if let Some(t) = st.last_departure(stay, r.t_b) {
                c.sent_iat_ms.record(((r.t_b as f64 - t as f64) / 1e6).round().max(0.0) as u64);
            }
        }
    }

    /// An APDU this agent received in direction `dir` (a `Received` record), sent during the
    /// player's stay `stay` (see [`super::stay_of`]).
    pub fn received(&mut self, r: &Record, dir: Direction, stay: Option<usize>) {
        let c = (r.tag & 0xFF) as usize;
        if c >= self.d.categories.len() {
            return;
        }
        let player = r.tag >> 8;
        let secs = self.d.seconds.len();
        // as the raw path computes it, without overflow on times no real record has
        let transit = (r.t_b as i64).saturating_sub(r.t_a as i64);
        let sent_sec = self.second_of(r.t_a).min(secs - 1);
        let arr_sec = self.second_of(r.t_b);
        let st = self.players.entry((player, dir as u8)).or_default();
        let first = st.first_arrival(r.seq);
        let prev = stay.and_then(|s| st.last_in_stay(s, r.t_b, transit));
        if first {
            self.touch(sent_sec).got[dir as usize] += 1;
        }
        if arr_sec < secs {
            let n = self.d.categories.len();
            let s = self.touch(arr_sec);
            s.delay[dir as usize].record(transit);
            s.bits[dir as usize] += r.size as u64 * 8;
            s.count(n, c, 2 + dir as usize);
        }
        let a = &mut self.pending.categories[c][dir as usize];
        a.received += 1;
        a.bytes += r.size as u64;
        a.size.record(r.size as u64);
        a.delay.record(transit);
        if let Some((t, pt)) = prev {
            let iat_ns = r.t_b as f64 - t as f64;
            a.iat_us.record((iat_ns / 1e3).max(0.0) as u64);
            a.iat_ms.record((iat_ns / 1e6).round().max(0.0) as u64);
            let j = &mut self.jitter[c][dir as usize];
            j.update(transit.saturating_sub(pt));
            a.jitter_n += 1;
            a.jitter_ns = j.ns();
        }
    }

    /// What was added since the last piece (none if nothing was); the builder's summary then
    /// includes it.
    pub fn take(&mut self) -> Option<Delta> {
        let empty = self.touched.is_empty()
            && self.pending.lateness_us.count() == 0
            && self.pending.categories.iter().flat_map(|c| c.iter()).all(|c| c.sent == 0 && c.received == 0);
        if empty {
            return None;
        }
        let cats = self.pending.categories.len();
        let categories = std::mem::replace(&mut self.pending.categories, (0..cats).map(|_| [DirDigest::new(), DirDigest::new()]).collect());
        self.touched.sort_unstable();
        let seconds = std::mem::take(&mut self.touched)
            .into_iter()
            .map(|s| {
                self.marked[s as usize] = false;
                (s, std::mem::replace(&mut self.pending.seconds[s as usize], SecDigest::new()))
            })
            .collect();
        let p = &mut self.pending;
        let delta = Delta {
            epoch_ns: p.epoch_ns,
            categories,
            seconds,
            lateness_us: std::mem::replace(&mut p.lateness_us, Bins::new(SIG)),
            lateness_sum_us: std::mem::take(&mut p.lateness_sum_us),
            late_over_1ms: std::mem::take(&mut p.late_over_1ms),
        };
        // one shape, one bucket scheme: applying our own piece cannot fail
        let _ = self.d.apply(&delta);
        Some(delta)
    }

    /// Everything so far (what the pieces handed out add up to; see [`Builder::take`]).
    pub fn digest(&self) -> &GameDigest {
        &self.d
    }

    /// The summary: every piece, the last one included, and each player's departures (by its
    /// records' flow, the player's id).
    pub fn finish(mut self) -> GameDigest {
        self.take();
        self.d.departures = std::mem::take(&mut self.departed).into_iter().collect();
        self.d
    }
}

impl GameDigest {
    /// Adds one agent's next piece: counts and histograms add, its jitter estimates replace
    /// the ones before (they run on over the agent's arrivals).
    pub fn apply(&mut self, p: &Delta) -> Result<(), DigestError> {
        let add = |a: &mut u64, b: u64| -> Result<(), DigestError> {
            *a = a.checked_add(b).ok_or(DigestError::Overflow)?;
            Ok(())
        };
        if p.epoch_ns != self.epoch_ns || p.categories.len() != self.categories.len() {
            return Err(DigestError::Mismatch("a piece of another run (start or categories differ)".into()));
        }
        for (a, b) in self.categories.iter_mut().flat_map(|c| c.iter_mut()).zip(p.categories.iter().flat_map(|c| c.iter())) {
            add(&mut a.sent, b.sent)?;
            add(&mut a.received, b.received)?;
            add(&mut a.bytes, b.bytes)?;
            a.size.merge(&b.size)?;
            a.iat_us.merge(&b.iat_us)?;
            a.iat_ms.merge(&b.iat_ms)?;
            a.delay.merge(&b.delay)?;
            a.sent_size.merge(&b.sent_size)?;
            a.sent_iat_ms.merge(&b.sent_iat_ms)?;
            a.merge_room(&b.sent_room_ms)?;
            if b.jitter_n > 0 {
                a.jitter_ns = b.jitter_ns;
                add(&mut a.jitter_n, b.jitter_n)?;
            }
        }
        for (s, b) in &p.seconds {
            let n = self.seconds.len();
            let a = self.seconds.get_mut(*s as usize).ok_or_else(|| DigestError::Mismatch(format!("second {s} of a run of {n}")))?;
            a.add_from(b)?;
        }
        self.lateness_us.merge(&p.lateness_us)?;
        self.lateness_sum_us += p.lateness_sum_us;
        add(&mut self.late_over_1ms, p.late_over_1ms)
    }

    /// A peer's next piece, checked against our own plan before it counts: its run, seconds in
    /// order and within the run, valid histograms whose counts agree with the piece's own
    /// arrivals, and — with what it sent before — no more departures than `max_sent`. A
    /// refused piece adds nothing.
    pub fn apply_peer(&mut self, p: &Delta, max_sent: u64) -> Result<(), DigestError> {
        if p.epoch_ns != self.epoch_ns || p.categories.len() != self.categories.len() {
            return Err(DigestError::Mismatch("a piece of another run (start or categories differ)".into()));
        }
        if p.seconds.windows(2).any(|w| w[0].0 >= w[1].0) || p.seconds.last().is_some_and(|s| s.0 as usize >= self.seconds.len()) {
            return Err(DigestError::Invalid("seconds out of order or beyond the run".into()));
        }
        if p.seconds.iter().any(|s| !s.1.by_category.is_empty() && s.1.by_category.len() != self.categories.len()) {
            return Err(DigestError::Invalid("a second whose categories are not the run's".into()));
        }
        let delays = p.categories.iter().flat_map(|c| c.iter().map(|x| &x.delay)).chain(p.seconds.iter().flat_map(|s| s.1.delay.iter()));
        for s in delays {
            s.check()?;
            if s.unit != NS_PER_US {
                return Err(DigestError::Mismatch(format!("delays in units of {} ns (the plan's are {NS_PER_US})", s.unit)));
            }
        }
        for c in p.categories.iter().flat_map(|c| c.iter()) {
            if !c.counts_agree() {
                return Err(DigestError::Invalid("histogram counts that disagree with the piece's own departures and arrivals".into()));
            }
            if !c.jitter_ns.is_finite() {
                return Err(DigestError::Invalid("a jitter that is not a number".into()));
            }
        }
        if !p.lateness_sum_us.is_finite() {
            return Err(DigestError::Invalid("a sum that is not a number".into()));
        }
        let (sent, got) = p.counts();
        let (had_sent, had_got) = self.counts();
        let (sent, got) = (sent.saturating_add(had_sent), got.saturating_add(had_got));
        if sent > max_sent || got > max_sent.saturating_mul(2) {
            return Err(DigestError::Invalid(format!("{sent} departures and {got} arrivals so far where the plan allows at most {max_sent}")));
        }
        // the bucket schemes must be the plan's: then adding cannot fail half-way
        let dir_ok = |c: &DirDigest| [&c.size, &c.iat_us, &c.iat_ms, &c.delay.pos, &c.delay.neg, &c.sent_size, &c.sent_iat_ms].iter().all(|b| b.sig() == SIG);
        let sec_ok = |s: &SecDigest| s.delay.iter().all(|d| d.pos.sig() == SIG_SECOND && d.neg.sig() == SIG_SECOND);
        if !p.categories.iter().flat_map(|c| c.iter()).all(dir_ok) || !p.seconds.iter().all(|s| sec_ok(&s.1)) || p.lateness_us.sig() != SIG {
            return Err(DigestError::Mismatch("histograms of another precision than the plan's".into()));
        }
        self.apply(p)
    }

    /// Departures and arrivals over every category and direction.
    pub fn counts(&self) -> (u64, u64) {
        let all = self.categories.iter().flat_map(|c| c.iter());
        all.fold((0u64, 0u64), |(s, r), c| (s.saturating_add(c.sent), r.saturating_add(c.received)))
    }
}
