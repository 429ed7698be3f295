//! Live summaries at the controller (`ToAgent::Live`, `ToController::Summary`). Each agent's
//! pieces add up in its link thread, checked against the plan before they count
//! ([`GameDigest::apply_peer`]); once a second the fleet reads them together into the progress
//! line's per-category rates and figures, delays and loss ([`View::fill`]). The sum of an
//! agent's pieces is its final summary, and the controller checks that they agree
//! ([`Acc::agrees`]).

use std::sync::{Arc, Mutex};

use horde_scenario::{CategoryLive, CategoryRates, LiveDir, LiveLoss, Snapshot};
use horde_stats::digest::{Delta, DirDigest, GameDigest, Signed};

/// Most departures one agent's live pieces may claim: 10 million a second for the run and its
/// two seconds of margin (no agent sends more; the final summary is bounded by the plan).
pub(crate) const MAX_SENT_PER_S: u64 = 10_000_000;

/// One agent's pieces so far.
pub(crate) struct Acc {
    pub digest: GameDigest,
    pub max_sent: u64,
    pub pieces: u64,
    /// Why its pieces stopped counting (a refused piece), if they did, and whether that was
    /// said.
    pub refused: Option<String>,
    pub noted: bool,
}

pub(crate) type Shared = Arc<Mutex<Acc>>;

impl Acc {
    pub fn new(categories: usize, epoch_ns: u64, duration_s: f64) -> Shared {
        let max_sent = MAX_SENT_PER_S.saturating_mul(duration_s.max(0.0).ceil() as u64 + 2);
        Arc::new(Mutex::new(Acc { digest: GameDigest::new(categories, epoch_ns, duration_s), max_sent, pieces: 0, refused: None, noted: false }))
    }

    /// Adds the agent's next piece, or stops counting its pieces at the first one refused.
    pub fn apply(&mut self, d: &Delta) {
        if self.refused.is_some() {
            return;
        }
        match self.digest.apply_peer(d, self.max_sent) {
            Ok(()) => self.pieces += 1,
            Err(e) => self.refused = Some(format!("piece {} refused: {e}", self.pieces + 1)),
        }
    }

    /// Whether the pieces add up to the agent's final summary, exactly; why not if they do not.
    pub fn agrees(&self, fin: &GameDigest) -> Result<(), String> {
        if let Some(r) = &self.refused {
            return Err(r.clone());
        }
        if &self.digest == fin {
            return Ok(());
        }
        let (a, b) = (self.digest.counts(), fin.counts());
        Err(format!("{} pieces add up to {} departures and {} arrivals, the summary has {} and {}", self.pieces, a.0, a.1, b.0, b.1))
    }
}

pub(crate) fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Acc> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// The live view's memory between two progress lines.
#[derive(Default)]
pub(crate) struct View {
    /// Per category: the players' departures (up) and arrivals (down) at the last line.
    last: Vec<[u64; 2]>,
    last_t_s: f64,
}

impl View {
    /// Fills `snap` (at `snap.t_s`) from every agent's pieces: per category the APDU rates since
    /// the last line beside the model's (`model`), and the figures so far; the delays of the
    /// last closed second; the loss of the second that closed 3 s ago.
    pub fn fill(&mut self, snap: &mut Snapshot, accs: &[&Acc], names: &[String], model: &[[f64; 2]]) {
        let Some(first) = accs.first() else { return };
        let n = first.digest.categories.len();
        let mut cats: Vec<[DirDigest; 2]> = first.digest.categories.clone();
        for a in &accs[1..] {
            for (c, o) in cats.iter_mut().zip(&a.digest.categories) {
                // one plan, one bucket scheme: these cannot fail
                let _ = c[0].merge(&o[0]).and(c[1].merge(&o[1]));
            }
        }
        let now: Vec<[u64; 2]> = cats.iter().map(|c| [c[0].sent, c[1].received]).collect();
        let dt = (snap.t_s - self.last_t_s).max(1e-3);
        self.last.resize(n, [0, 0]);
        let per_s = |a: u64, b: u64| (a.saturating_sub(b) as f64 / dt).round() as u64;
        snap.category_rates = (0..n)
            .map(|k| CategoryRates {
                category: names.get(k).cloned().unwrap_or_default(),
                up_apdu_s: per_s(now[k][0], self.last[k][0]),
                down_apdu_s: per_s(now[k][1], self.last[k][1]),
                up_model: model.get(k).map_or(0.0, |m| m[0]),
                down_model: model.get(k).map_or(0.0, |m| m[1]),
            })
            .collect();
        snap.category_live = cats
            .iter()
            .enumerate()
            .map(|(k, c)| CategoryLive { category: names.get(k).cloned().unwrap_or_default(), up: dir(&c[0]), down: dir(&c[1]) })
            .collect();
        self.last = now;
        self.last_t_s = snap.t_s;
        let sec = |s: usize| -> Option<([u64; 2], [u64; 2], [Signed; 2])> {
            let mut secs = accs.iter().filter_map(|a| a.digest.seconds.get(s));
            let f = secs.next()?;
            let (mut sent, mut got, mut delay) = (f.sent, f.got, f.delay.clone());
            for o in secs {
                for d in 0..2 {
                    sent[d] += o.sent[d];
                    got[d] += o.got[d];
                    let _ = delay[d].merge(&o.delay[d]);
                }
            }
            Some((sent, got, delay))
        };
        let whole = snap.t_s.max(0.0).floor() as usize;
        if let Some((_, _, delay)) = whole.checked_sub(1).and_then(sec) {
            let ms = |s: &Signed| Some([s.quantile(0.5)? as f64 / 1e6, s.quantile(0.99)? as f64 / 1e6]);
            snap.up_delay_ms = ms(&delay[0]);
            snap.down_delay_ms = ms(&delay[1]);
        }
        if let Some(s) = whole.checked_sub(4) {
            if let Some((sent, got, _)) = sec(s) {
                let (up_lost, down_lost) = (sent[0].saturating_sub(got[0]), sent[1].saturating_sub(got[1]));
                snap.loss = Some(Box::new(LiveLoss { t_s: s as f64 + 1.0, up_sent: sent[0], up_lost, down_sent: sent[1], down_lost }));
            }
        }
    }
}

/// One direction's figures so far.
fn dir(d: &DirDigest) -> LiveDir {
    let ms = |p: f64| d.delay.quantile(p).map(|v| v as f64 / 1e6);
    LiveDir { sent: d.sent, received: d.received, delay_p50_ms: ms(0.5), delay_p99_ms: ms(0.99) }
}
