//! From APDUs to samples: per state and direction, sizes and inter-departure times, kept in a
//! seeded reservoir so memory stays bounded whatever the capture's length.
//!
//! States come from a labels file (`start_s,end_s,state` rows, seconds after the capture's
//! first packet, time ranges that do not overlap): an APDU belongs to the range its first byte
//! falls in, and an inter-departure time is counted only between two APDUs of one client and
//! direction inside the same range (a gap across a change of activity belongs to neither).
//! Without labels the whole capture is one state, `play`.

use std::collections::{BTreeMap, HashMap};

use crate::apdu::{Apdu, Direction};
use crate::players::{reservoirs, ByPlayers, Online};
use crate::reservoir::Reservoir;

/// At most this many label rows.
pub const MAX_LABELS: usize = 1_000_000;

/// At most this many player counts are followed per state.
const MAX_COUNTS: usize = 1024;

/// One labelled time range.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub start_s: f64,
    pub end_s: f64,
    pub state: usize,
}

/// Time ranges → activity names.
#[derive(Clone, Debug, PartialEq)]
pub struct Labels {
    pub names: Vec<String>,
    pub segments: Vec<Segment>,
}

impl Labels {
    /// One state over the whole capture.
    pub fn whole() -> Labels {
        Labels { names: vec!["play".into()], segments: vec![Segment { start_s: 0.0, end_s: f64::INFINITY, state: 0 }] }
    }

    /// Reads `start_s,end_s,state` rows (a header row is optional). Names are the service's
    /// state names: letters, digits, `-` and `_`.
    pub fn parse(text: &str) -> Result<Labels, String> {
        let mut rdr = csv::ReaderBuilder::new().has_headers(false).trim(csv::Trim::All).flexible(true).from_reader(text.as_bytes());
        let mut names: Vec<String> = Vec::new();
        let mut segments: Vec<Segment> = Vec::new();
        for (i, row) in rdr.records().enumerate() {
            let line = i + 1;
            let row = row.map_err(|e| format!("labels line {line}: {e}"))?;
            if row.len() != 3 {
                return Err(format!("labels line {line}: {} fields; write start_s,end_s,state (e.g. 0,120.5,raiding)", row.len()));
            }
            let (a, b) = (row[0].parse::<f64>(), row[1].parse::<f64>());
            let (Ok(start_s), Ok(end_s)) = (a, b) else {
                if line == 1 {
                    continue; // a header
                }
                return Err(format!("labels line {line}: {:?} and {:?} must be seconds after the capture's first packet", &row[0], &row[1]));
            };
            if !(start_s.is_finite() && end_s.is_finite() && 0.0 <= start_s && start_s < end_s) {
                return Err(format!("labels line {line}: the range {start_s}..{end_s} must be finite, start ≥ 0 and end after start"));
            }
            if segments.last().is_some_and(|s| start_s < s.end_s) {
                return Err(format!("labels line {line}: starts at {start_s} s, before the previous range ends; sort the rows by time without overlaps"));
            }
            let name = &row[2];
            if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(format!("labels line {line}: state {name:?} must be 1–64 letters, digits, '-' or '_'"));
            }
            let state = match names.iter().position(|n| n == name) {
                Some(i) => i,
                None if names.len() >= 255 => return Err(format!("labels line {line}: more than 255 states")),
                None => {
                    names.push(name.to_string());
                    names.len() - 1
                }
            };
            if segments.len() >= MAX_LABELS {
                return Err(format!("labels: more than {MAX_LABELS} rows"));
            }
            segments.push(Segment { start_s, end_s, state });
        }
        if segments.is_empty() {
            return Err("labels: no rows; write start_s,end_s,state rows".into());
        }
        Ok(Labels { names, segments })
    }

    /// The range holding `t_s`, by index.
    fn at(&self, t_s: f64) -> Option<usize> {
        let i = self.segments.partition_point(|s| s.end_s <= t_s);
        self.segments.get(i).filter(|s| s.start_s <= t_s).map(|_| i)
    }
}

/// A client with fewer APDUs than this (both ways, the whole capture) is a query, not a player
/// (a bot's or a browser's `getstatus` socket): its APDUs are left out and it is not counted.
pub const MIN_PLAYER_APDUS: u64 = 20;

/// What a client's steady state is: each client's first and last APDU and its APDUs (a first
/// pass over the capture), and how much of its start and end is left out.
#[derive(Clone, Debug, Default)]
pub struct Steady {
    /// Per client index: (first APDU ns, last APDU ns, APDUs both ways).
    pub spans: Vec<(u64, u64, u64)>,
    pub warmup_ns: u64,
    pub cooldown_ns: u64,
}

impl Steady {
    /// Every APDU is steady and every client a player (no first pass).
    pub fn all() -> Steady {
        Steady::default()
    }

    pub fn see(&mut self, a: &Apdu) {
        let i = a.client as usize;
        if self.spans.len() <= i {
            self.spans.resize(i + 1, (u64::MAX, 0, 0));
        }
        let s = &mut self.spans[i];
        (s.0, s.1, s.2) = (s.0.min(a.t_ns), s.1.max(a.t_ns), s.2 + 1);
    }

    /// Whether client `c` is a query, not a player.
    pub fn query_only(&self, c: u32) -> bool {
        self.spans.get(c as usize).is_some_and(|s| s.2 < MIN_PLAYER_APDUS)
    }

    /// Whether an APDU of client `c` at `t_ns` falls in its warm-up or cool-down.
    pub fn transient(&self, c: u32, t_ns: u64) -> bool {
        self.spans.get(c as usize).is_some_and(|s| t_ns < s.0.saturating_add(self.warmup_ns) || t_ns > s.1.saturating_sub(self.cooldown_ns))
    }

    /// Clients that are players.
    pub fn players(&self) -> usize {
        self.spans.iter().filter(|s| s.2 >= MIN_PLAYER_APDUS).count()
    }
}

/// Per state and direction, sizes and inter-departure times.
pub struct Collector {
    pub labels: Labels,
    origin_ns: Option<u64>,
    last: HashMap<(u32, bool), (u64, usize)>,
    /// `[state][up=0/down=1]`: (sizes in bytes, inter-departure times in ms).
    pub samples: Vec<[(Reservoir, Reservoir); 2]>,
    /// APDUs outside every labelled range.
    pub unlabelled: u64,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    online: Online,
    /// `[state]`: the server's APDUs by how many clients were online when each left.
    pub by_players: Vec<ByPlayers>,
    /// Per second after the first packet: APDUs either way and the most clients online.
    pub per_second: Vec<(u64, u32)>,
    pub steady: Steady,
    /// APDUs left out: of query-only clients, and in a player's warm-up or cool-down.
    pub query_apdus: u64,
    pub transient_apdus: u64,
    /// Per player count, the longest time (s) the count held without a change.
    pub held_s: BTreeMap<u32, f64>,
    stretch: Option<(u32, u64)>,
}

/// Seconds [`Collector::per_second`] follows.
const MAX_SECONDS: usize = 1_000_000;

impl Collector {
    pub fn new(labels: Labels, steady: Steady) -> Collector {
        let seed = |s: usize, d: usize, k: usize| (s * 4 + d * 2 + k) as u64;
        let samples = (0..labels.names.len()).map(|s| [0, 1].map(|d| (Reservoir::new(seed(s, d, 0)), Reservoir::new(seed(s, d, 1))))).collect();
        let by_players = (0..labels.names.len()).map(|_| ByPlayers::new()).collect();
        Collector {
            labels,
            origin_ns: None,
            last: HashMap::new(),
            samples,
            unlabelled: 0,
            first_ns: None,
            last_ns: 0,
            online: Online::default(),
            by_players,
            per_second: Vec::new(),
            steady,
            query_apdus: 0,
            transient_apdus: 0,
            held_s: BTreeMap::new(),
            stretch: None,
        }
    }

    /// Closes the last stretch of one player count (call after the last APDU).
    pub fn finish(&mut self) {
        if let Some((n, since)) = self.stretch.take() {
            let held = self.last_ns.saturating_sub(since) as f64 / 1e9;
            let e = self.held_s.entry(n).or_insert(0.0);
            *e = e.max(held);
        }
    }

    /// Notes the online count `n` at `t_ns`: the stretch of the previous count ends.
    fn hold(&mut self, n: u32, t_ns: u64) {
        match self.stretch {
            Some((m, _)) if m == n => {}
            Some((m, since)) => {
                let e = self.held_s.entry(m).or_insert(0.0);
                *e = e.max(t_ns.saturating_sub(since) as f64 / 1e9);
                self.stretch = Some((n, t_ns));
            }
            None => self.stretch = Some((n, t_ns)),
        }
    }

    /// The capture's first packet: labels count from it.
    pub fn origin(&mut self, t_ns: u64) {
        self.origin_ns.get_or_insert(t_ns);
    }

    pub fn push(&mut self, a: &Apdu) {
        let origin = *self.origin_ns.get_or_insert(a.t_ns);
        self.first_ns = Some(self.first_ns.map_or(a.t_ns, |f| f.min(a.t_ns)));
        self.last_ns = self.last_ns.max(a.t_ns);
        let up = a.direction == Direction::Up;
        let key = (a.client, up);
        if self.steady.query_only(a.client) {
            self.query_apdus += 1;
            return;
        }
        let online = self.online.see(a.client, a.t_ns);
        self.hold(online, a.t_ns);
        let t_s = a.t_ns.saturating_sub(origin) as f64 / 1e9;
        let sec = t_s as usize;
        if sec < MAX_SECONDS {
            if self.per_second.len() <= sec {
                self.per_second.resize(sec + 1, (0, 0));
            }
            let slot = &mut self.per_second[sec];
            (slot.0, slot.1) = (slot.0 + 1, slot.1.max(online));
        }
        if self.steady.transient(a.client, a.t_ns) {
            self.transient_apdus += 1;
            self.last.remove(&key);
            return;
        }
        let Some(seg) = self.labels.at(t_s) else {
            self.unlabelled += 1;
            self.last.remove(&key);
            return;
        };
        let state = self.labels.segments[seg].state;
        let (sizes, idts) = &mut self.samples[state][usize::from(!up)];
        sizes.push(a.size as f64);
        let mut idt = None;
        if let Some((prev, prev_seg)) = self.last.get(&key) {
            if *prev_seg == seg && a.t_ns >= *prev {
                idt = Some((a.t_ns - prev) as f64 / 1e6);
                idts.push((a.t_ns - prev) as f64 / 1e6);
            }
        }
        let by = &mut self.by_players[state];
        if !up && (by.len() < MAX_COUNTS || by.contains_key(&online)) {
            let r = by.entry(online).or_insert_with(|| reservoirs(u64::from(online) * 2));
            r.0.push(a.size as f64);
            if let Some(idt) = idt {
                r.1.push(idt);
            }
        }
        self.last.insert(key, (a.t_ns, seg));
    }

    /// Each state's share of the labelled time (the first-state weights of a player who joins
    /// at a random instant), its stays' lengths in seconds, and the transition counts between
    /// consecutive ranges. The last range is cut at the capture's end.
    pub fn behaviour(&self) -> (Vec<f64>, Vec<Vec<f64>>, Vec<Vec<u64>>) {
        let n = self.labels.names.len();
        let end_s = self.last_ns.saturating_sub(self.origin_ns.unwrap_or(0)) as f64 / 1e9;
        let mut share = vec![0.0; n];
        let mut stays = vec![Vec::new(); n];
        let mut moves = vec![vec![0u64; n]; n];
        let mut prev: Option<usize> = None;
        for s in &self.labels.segments {
            let len = s.end_s.min(end_s) - s.start_s;
            if len <= 0.0 {
                continue;
            }
            share[s.state] += len;
            stays[s.state].push(len);
            if let Some(p) = prev {
                moves[p][s.state] += 1;
            }
            prev = Some(s.state);
        }
        (share, stays, moves)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_row_at_fault() {
        let l = Labels::parse("start_s,end_s,state\n0,10,lobby\n10,40.5,match\n41,50,lobby\n").unwrap();
        assert_eq!(l.names, vec!["lobby", "match"]);
        assert_eq!(l.at(10.0), Some(1));
        assert_eq!(l.at(40.7), None);
        assert_eq!(l.at(45.0), Some(2));
        for (bad, says) in [
            ("0,10,a\n5,20,b\n", "line 2: starts at 5 s, before the previous range ends"),
            ("0,10\n", "line 1: 2 fields"),
            ("0,x,a\n1,2,b\n3,y,c\n", "line 3"),
            ("0,10,bad name\n", "letters, digits"),
            ("10,5,a\n", "end after start"),
            ("", "no rows"),
        ] {
            let e = Labels::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn inter_departures_stay_inside_one_range_and_one_client() {
        let l = Labels::parse("0,1,a\n1,2,b\n").unwrap();
        let mut c = Collector::new(l, Steady::all());
        c.origin(0);
        let apdu = |client, ms: u64| Apdu { direction: Direction::Up, client, t_ns: ms * 1_000_000, size: 10 };
        for a in [apdu(0, 0), apdu(1, 100), apdu(0, 500), apdu(0, 1200), apdu(0, 1300), apdu(0, 2500)] {
            c.push(&a);
        }
        assert_eq!(c.samples[0][0].1.values, vec![500.0]); // 0 → 500 in a; not 500 → 1200 across
        assert_eq!(c.samples[1][0].1.values, vec![100.0]);
        assert_eq!((c.samples[0][0].0.seen, c.unlabelled), (3, 1));
        let (share, stays, moves) = c.behaviour();
        assert_eq!(share, vec![1.0, 1.0]);
        assert_eq!(stays[1], vec![1.0]);
        assert_eq!(moves, vec![vec![0, 1], vec![0, 0]]);
    }
}
