//! A run's live summary ([`Live`]): both sides' log records as they are written, on the run's
//! clock, summarised per category and second (`horde_stats::digest`). An agent feeds it from
//! its logs' taps and hands out pieces once a second (the summary `--collect summaries` sends
//! is their sum; docs/distributed.md); a run on one machine feeds it by following its two log
//! files as they grow ([`Follower`]), so the progress line's per-category figures
//! (`category_live`) are the same figures, from the same records, on both placements.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use horde_engine::logger::{LogTap, TapReport, TapSlot};
use horde_model::behaviour::Segment;
use horde_model::scenario::Scenario;
use horde_model::service::Direction;
use horde_stats::digest::{stay_of, Builder, Delta, DirDigest, GameDigest};
use horde_stats::offsets::correct;
use horde_wire::{Record, RecordKind, RECORD_LEN};

use crate::{CategoryLive, LiveDir};

/// The run's clock: its start, and each log's offset from it (0 on one machine).
#[derive(Debug, Clone, Default)]
pub struct Clocks {
    /// The run's start (ns, on the controller's clock): the summary's seconds count from it.
    pub epoch_ns: u64,
    /// This side's clock minus the controller's (ns).
    pub own_offset_ns: i64,
    /// The server side's offset, and each player range's: a received APDU carries its
    /// sender's send time.
    pub server_offset_ns: i64,
    pub owners: Vec<(Range<u32>, i64)>,
}

/// Records a log writer hands over before the controller's offsets arrive (the server side
/// listens from the assignment on; nothing real arrives before the start).
const EARLY_MAX: usize = 1 << 16;

/// The most owner ranges a live summary keeps (each record's sender is looked up in them).
const MAX_OWNERS: usize = 4096;

/// An agent's live summary of its scenario part: both logs' records as they are written (the
/// logs' taps), on the controller's clock once `ToAgent::Live` gave the offsets. The builder
/// hands out what it gained once a second, and the final summary is the sum of those pieces.
#[derive(Clone)]
pub struct Live(Arc<Mutex<LiveState>>);

struct LiveState {
    categories: usize,
    duration_s: f64,
    sc: Scenario,
    players: Arc<crate::Players>,
    /// Each player's stays as the report counts them, with the roster's version they were
    /// taken at (taken again when the online target changed: see `analysed_stays`).
    stays: HashMap<u32, (usize, Vec<Segment>)>,
    req: Option<Clocks>,
    builder: Option<Builder>,
    early: Vec<(Record, Direction)>,
    /// Records that could not be summarised (before the offsets, beyond `EARLY_MAX`).
    missed: u64,
}

impl Live {
    pub fn new(sc: &Scenario, players: &Arc<crate::Players>) -> Live {
        let st = LiveState {
            categories: sc.service.states.len(),
            duration_s: sc.duration_s,
            sc: sc.clone(),
            players: players.clone(),
            stays: HashMap::new(),
            req: None,
            builder: None,
            early: Vec::new(),
            missed: 0,
        };
        Live(Arc::new(Mutex::new(st)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tap of the log whose `Sent` records go in direction `out` (the clients' log: up;
    /// the server side's: down).
    pub fn tap(&self, out: Direction) -> TapSlot {
        TapSlot::new(Box::new(SideTap { live: self.clone(), out }))
    }

    /// The controller's offsets and the run's start: summarising begins (with what came early).
    pub fn begin(&self, req: Clocks) {
        let mut st = self.lock();
        if st.req.is_some() {
            return;
        }
        st.builder = Some(Builder::new(st.categories, req.epoch_ns, st.duration_s));
        st.req = Some(req);
        for (r, out) in std::mem::take(&mut st.early) {
            st.feed(r, out);
        }
    }

    /// Players a raised target started during the run, with the offsets of the agents that
    /// run them (their received APDUs' send times are those agents').
    pub fn owners(&self, owners: &[(Range<u32>, i64)]) {
        let mut st = self.lock();
        let Some(req) = st.req.as_mut() else { return };
        // bounded: past this many, the summary is not whole (read back from the logs instead)
        if req.owners.len() + owners.len() > MAX_OWNERS {
            st.missed += 1;
            return;
        }
        req.owners.extend(owners.iter().cloned());
    }

    /// What the summary gained since the last piece.
    pub fn take(&self) -> Option<Delta> {
        self.lock().builder.as_mut().and_then(Builder::take)
    }

    /// Per category so far, each way: what was sent and received and the delay's median and
    /// 99th percentile (`names`: the service's states). What came since the last call counts
    /// (a piece taken and kept: a summary nobody sends pieces of).
    pub fn category_live(&self, names: &[String]) -> Vec<CategoryLive> {
        let mut st = self.lock();
        let Some(b) = st.builder.as_mut() else { return Vec::new() };
        b.take();
        category_live(&b.digest().categories, names)
    }

    /// The final summary (after the last piece was taken), if it is whole: summarising began
    /// for the run `epoch_ns` asks about and no record was missed.
    pub fn finish(&self, epoch_ns: u64) -> Result<GameDigest, String> {
        let mut st = self.lock();
        if st.missed > 0 {
            return Err(format!("{} records came before the controller's offsets", st.missed));
        }
        match (st.req.as_ref().map(|r| r.epoch_ns), st.builder.take()) {
            (Some(e), Some(b)) if e == epoch_ns => Ok(b.finish()),
            _ => Err("the run was not summarised live (no offsets, or another start)".into()),
        }
    }
}

impl LiveState {
    fn feed(&mut self, mut rec: Record, out: Direction) {
        let (Some(req), Some(b)) = (self.req.as_ref(), self.builder.as_mut()) else {
            if self.early.len() < EARLY_MAX {
                self.early.push((rec, out));
            } else {
                self.missed += 1;
            }
            return;
        };
        // a received APDU's send time is its sender's: the server's, or its player's agent's
        let peer = if out == Direction::Up { req.server_offset_ns } else { req.owners.iter().find(|(range, _)| range.contains(&rec.flow)).map_or(0, |o| o.1) };
        correct(&mut rec, req.own_offset_ns, peer);
        if !matches!(rec.kind, RecordKind::Sent | RecordKind::Received) {
            return;
        }
        let (epoch, version) = (req.epoch_ns, self.players.roster.version());
        let stays = match self.stays.get(&rec.flow) {
            Some((v, s)) if *v == version => Some(s),
            _ => crate::report::analysed_stays(&self.sc, &self.players, rec.flow).map(|s| &self.stays.entry(rec.flow).insert_entry((version, s)).into_mut().1),
        };
        // a departure's stay is its send time's, as its arrival's is
        if rec.kind == RecordKind::Sent {
            b.sent(&rec, out, stays.map(Vec::as_slice));
        } else {
            b.received(&rec, if out == Direction::Up { Direction::Down } else { Direction::Up }, stays.and_then(|s| stay_of(s, epoch, rec.t_a)));
        }
    }
}

/// One log's tap into the live summary (called on the log's writer thread, never blocking it
/// for longer than the summary's lock).
struct SideTap {
    live: Live,
    out: Direction,
}

impl LogTap for SideTap {
    fn header(&mut self, _: &[u8]) {}

    fn records(&mut self, bytes: &[u8]) {
        let mut st = self.live.lock();
        for chunk in bytes.chunks_exact(RECORD_LEN) {
            match Record::parse(chunk) {
                Ok(r) => st.feed(r, self.out),
                Err(_) => st.missed += 1,
            }
        }
    }

    fn finish(self: Box<Self>) -> Option<TapReport> {
        None
    }
}

/// Per category, each way, the figures so far of `cats` (a digest's categories).
pub fn category_live(cats: &[[DirDigest; 2]], names: &[String]) -> Vec<CategoryLive> {
    let dir = |d: &DirDigest| {
        let ms = |p: f64| d.delay.quantile(p).map(|v| v as f64 / 1e6);
        LiveDir { sent: d.sent, received: d.received, delay_p50_ms: ms(0.5), delay_p99_ms: ms(0.99) }
    };
    cats.iter().enumerate().map(|(k, c)| CategoryLive { category: names.get(k).cloned().unwrap_or_default(), up: dir(&c[0]), down: dir(&c[1]) }).collect()
}

/// Bytes a [`Follower`] reads at most per call (what the log grew by in a busy second is far
/// less; the rest waits for the next call).
const FOLLOW_MAX: usize = 64 << 20;

/// A log file followed as it grows (a run on one machine: each side's log writer hands its
/// records to the file in batches; the server side may be another process): every whole
/// record appended since the last call goes into the live summary.
pub struct Follower {
    path: std::path::PathBuf,
    out: Direction,
    file: Option<std::fs::File>,
    read: u64,
    buf: Vec<u8>,
}

impl Follower {
    /// Follows `path`, whose `Sent` records go in direction `out` (the players' log: up).
    pub fn new(path: std::path::PathBuf, out: Direction) -> Follower {
        Follower { path, out, file: None, read: 0, buf: Vec::new() }
    }

    /// Reads what the log grew by into `live`.
    pub fn poll(&mut self, live: &Live) {
        use std::io::{Read, Seek, SeekFrom};
        if self.file.is_none() {
            // not there yet: the side has not started writing
            let Ok(f) = horde_sys::fs::open_for_reading(&self.path) else { return };
            self.file = Some(f);
        }
        let Some(f) = self.file.as_mut() else { return };
        let Ok(len) = f.metadata().map(|m| m.len()) else { return };
        let start = self.read.max(horde_wire::LOG_HEADER_LEN as u64);
        if len <= start || f.seek(SeekFrom::Start(start)).is_err() {
            return;
        }
        let want = ((len - start) as usize).min(FOLLOW_MAX);
        self.buf.resize(want, 0);
        let Ok(n) = f.read(&mut self.buf) else { return };
        let whole = n / RECORD_LEN * RECORD_LEN;
        let mut st = live.lock();
        for chunk in self.buf[..whole].chunks_exact(RECORD_LEN) {
            match Record::parse(chunk) {
                Ok(r) => st.feed(r, self.out),
                Err(_) => st.missed += 1,
            }
        }
        self.read = start + whole as u64;
    }
}
