//! Live summaries at the controller (`ToAgent::Live`, `ToController::Summary`). Each agent's
//! pieces add up in its link thread, checked against the plan before they count
//! ([`GameDigest::apply_peer`]); once a second the fleet reads them together into the progress
//! line's per-category rates and figures, delays and loss ([`View::fill`]). The sum of an
//! agent's pieces is its final summary, and the controller checks that they agree
//! ([`Acc::agrees`]).

use std::sync::{Arc, Mutex};

use horde_scenario::{CategoryRates, LiveLoss, Snapshot};
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
        // the pieces carry no per-player departures: the final summary alone has them
        if self.digest == fin.without_departures() {
            return Ok(());
        }
        let (a, b) = (self.digest.counts(), fin.counts());
        Err(format!("{} pieces add up to {} departures and {} arrivals, the summary has {} and {}", self.pieces, a.0, a.1, b.0, b.1))
    }
}

pub(crate) fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Acc> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// How many seconds the live per-second figures stay behind the run: a second's records reach
/// the log writer within 1 s, the agent's next piece within 1 s more, and the controller's next
/// line within another. So the second that closed 3 s ago is complete at the controller.
pub(crate) const SETTLE_S: usize = 3;

/// The progress line's figures from the agents' live summaries.
pub(crate) struct View;

impl View {
    /// Fills `snap` (at `snap.t_s`) from every agent's pieces: per category the figures so far
    /// (`category_live`, as of the last pieces); and for the second that closed [`SETTLE_S`]
    /// seconds ago (`loss.t_s` is its end) the per-category APDU rates beside the model's rates
    /// then (`model`, a time of the run → rates per category), the delays each way and the
    /// loss.
    pub fn fill(snap: &mut Snapshot, accs: &[&Acc], names: &[String], model: &dyn Fn(f64) -> Vec<[f64; 2]>) {
        let Some(first) = accs.first() else { return };
        let mut cats: Vec<[DirDigest; 2]> = first.digest.categories.clone();
        for a in &accs[1..] {
            for (c, o) in cats.iter_mut().zip(&a.digest.categories) {
                // one plan, one bucket scheme: these cannot fail
                let _ = c[0].merge(&o[0]).and(c[1].merge(&o[1]));
            }
        }
        let name = |k: usize| names.get(k).cloned().unwrap_or_default();
        snap.category_live = horde_scenario::live_digest::category_live(&cats, names);
        let Some(s) = (snap.t_s.max(0.0).floor() as usize).checked_sub(SETTLE_S + 1) else { return };
        let mut secs = accs.iter().filter_map(|a| a.digest.seconds.get(s));
        let Some(f) = secs.next() else { return };
        let mut sec = f.clone();
        for o in secs {
            // the same plan's seconds: this cannot fail
            let _ = sec.add_from(o);
        }
        let ms = |s: &Signed| Some([s.quantile(0.5)? as f64 / 1e6, s.quantile(0.99)? as f64 / 1e6]);
        snap.up_delay_ms = ms(&sec.delay[0]);
        snap.down_delay_ms = ms(&sec.delay[1]);
        let (up_lost, down_lost) = (sec.sent[0].saturating_sub(sec.got[0]), sec.sent[1].saturating_sub(sec.got[1]));
        snap.loss = Some(Box::new(LiveLoss { t_s: s as f64 + 1.0, up_sent: sec.sent[0], up_lost, down_sent: sec.sent[1], down_lost }));
        let m = model(s as f64 + 0.5);
        snap.category_rates = (0..cats.len())
            .map(|k| {
                let c = sec.by_category.get(k).copied().unwrap_or_default();
                let [up_model, down_model] = m.get(k).copied().unwrap_or_default();
                // what the players sent, and what they received
                CategoryRates { category: name(k), up_apdu_s: c[0], down_apdu_s: c[3], up_model, down_model }
            })
            .collect();
    }
}
