//! Live changes to a running link, typed from the edge on.

use horde_impair::{LinkSpec, Loss};

use crate::{impairment, parse_queue, parse_rate, percent, probability, RawImpair};

/// A change to one direction of a running link (`horde emu link`): every field given replaces
/// the current value, the others stay. Typed, so settings never go back through text (no
/// rounding: a delay keeps its nanoseconds).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkChange {
    pub rate_bps: Option<u64>,
    pub delay_ns: Option<u64>,
    pub jitter_ns: Option<u64>,
    pub loss: Option<Loss>,
    pub duplicate: Option<f64>,
    pub corrupt: Option<f64>,
    pub queue_limit_bytes: Option<u64>,
    /// The queue given at all: `Some(true)` unbounded, `Some(false)` the limit in
    /// `queue_limit_bytes` or, without one, the default (100 ms at the rate).
    #[serde(default)]
    pub queue_unbounded: Option<bool>,
    pub reorder: Option<bool>,
    #[serde(default)]
    pub ber: Option<f64>,
    #[serde(default)]
    pub reorder_prob: Option<f64>,
    #[serde(default)]
    pub reorder_gap: Option<u32>,
    /// A Mahimahi trace file replacing the rate (read by the emulator).
    pub trace: Option<String>,
}

impl LinkChange {
    /// Parses the fields a user gave, with the same rules (and error messages) as a topology
    /// file's link fields.
    pub fn parse(r: &RawImpair) -> Result<LinkChange, (String, String)> {
        if r.rate.is_some() && r.trace.is_some() {
            return Err(("rate".into(), "give either a rate or a trace, not both".into()));
        }
        let dur = |s: &Option<String>, f: &'static str| s.as_deref().map(horde_model::units::parse_duration_ns).transpose().map_err(|m| (f.to_string(), m));
        let loss = match &r.loss {
            None => None,
            Some(l) => Some(impairment(&RawImpair { loss: Some(l.clone()), ..Default::default() })?.loss),
        };
        let queue = r.queue.as_deref().map(parse_queue).transpose().map_err(|m| ("queue".to_string(), m))?;
        Ok(LinkChange {
            rate_bps: r.rate.as_deref().map(parse_rate).transpose().map_err(|m| ("rate".to_string(), m))?,
            delay_ns: dur(&r.delay, "delay")?,
            jitter_ns: dur(&r.jitter, "jitter")?,
            loss,
            duplicate: r.duplicate.as_deref().map(|s| percent(s, "duplicate")).transpose()?,
            corrupt: r.corrupt.as_deref().map(|s| percent(s, "corrupt")).transpose()?,
            queue_limit_bytes: queue.and_then(|q| q.0),
            queue_unbounded: queue.map(|q| q.1),
            reorder: r.reorder,
            ber: r.ber.as_deref().map(|s| probability(s, "ber")).transpose()?,
            reorder_prob: r.reorder_prob.as_deref().map(|s| percent(s, "reorder_prob")).transpose()?,
            reorder_gap: r.reorder_gap,
            trace: r.trace.clone(),
        })
    }

    /// Whether nothing is changed.
    pub fn is_empty(&self) -> bool {
        *self == LinkChange::default()
    }

    /// The new settings: `base` (or no impairment at all, with `clear`) with the given fields
    /// replaced. A rate replaces a trace; a trace (loaded by the caller) replaces the rate.
    pub fn apply(&self, base: &LinkSpec, clear: bool) -> Result<LinkSpec, (String, String)> {
        let mut s = if clear { LinkSpec::default() } else { base.clone() };
        if let Some(r) = self.rate_bps {
            s.rate_bps = Some(r);
            s.trace = None;
        }
        if self.trace.is_some() {
            s.rate_bps = None;
        }
        s.delay_ns = self.delay_ns.unwrap_or(s.delay_ns);
        s.jitter_ns = self.jitter_ns.unwrap_or(s.jitter_ns);
        s.loss = self.loss.unwrap_or(s.loss);
        s.duplicate = self.duplicate.unwrap_or(s.duplicate);
        s.corrupt = self.corrupt.unwrap_or(s.corrupt);
        if let Some(unbounded) = self.queue_unbounded {
            (s.queue_limit_bytes, s.queue_unbounded) = (self.queue_limit_bytes, unbounded);
        } else if self.queue_limit_bytes.is_some() {
            // from a peer that does not send `queue_unbounded`
            (s.queue_limit_bytes, s.queue_unbounded) = (self.queue_limit_bytes, false);
        }
        s.reorder = self.reorder.unwrap_or(s.reorder);
        s.ber = self.ber.unwrap_or(s.ber);
        s.reorder_prob = self.reorder_prob.unwrap_or(s.reorder_prob);
        s.reorder_gap = self.reorder_gap.unwrap_or(s.reorder_gap);
        s.validate().map_err(|e| (e.field.to_string(), e.msg))?;
        Ok(s)
    }
}
