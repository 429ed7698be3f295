//! What a link's impairments are written as (rates, sizes, percentages, queues) and their
//! resolution into a [`LinkSpec`]. Pure.

use horde_impair::{LinkSpec, Loss};

use crate::{RawImpair, RawLoss};

/// "1.5%" → 0.015.
pub(crate) fn percent(s: &str, field: &'static str) -> Result<f64, (String, String)> {
    let v = s.trim().strip_suffix('%').and_then(|x| x.trim().parse::<f64>().ok()).filter(|v| (0.0..=100.0).contains(v));
    v.map(|v| v / 100.0).ok_or_else(|| (field.to_string(), format!("`{s}` must be a percentage 0%..=100%, e.g. 1% or 0.5%")))
}

/// "10mbit", "1.5gbit", "500kbit", "64000bit" → bit/s.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase().replace("/s", "").replace("bps", "bit");
    let (num, mul) = if let Some(n) = t.strip_suffix("gbit") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("mbit") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kbit") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("bit") {
        (n, 1.0)
    } else {
        return Err(format!("`{s}` needs a unit: bit, kbit, mbit or gbit (e.g. 10mbit)"));
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a rate like 10mbit"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{s}` must be more than 0"));
    }
    Ok((v * mul).round() as u64)
}

/// "100kB", "1MB", "1500B" → bytes.
/// A link's `queue`: a size (tail drop past it), `"unbounded"` (no limit, asked for) or
/// `"default"` (100 ms at the rate, as when none is given). Returns (the limit given, unbounded).
pub fn parse_queue(s: &str) -> Result<(Option<u64>, bool), String> {
    match s.trim() {
        "unbounded" => Ok((None, true)),
        "default" => Ok((None, false)),
        b => parse_bytes(b).map(|b| (Some(b), false)).map_err(|m| format!("{m}, or \"unbounded\" (no limit), or \"default\" (100 ms at the link's rate)")),
    }
}

pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = if let Some(n) = t.strip_suffix("MB") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kB").or_else(|| t.strip_suffix("KB")) {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('B') {
        (n, 1.0)
    } else {
        return Err(format!("`{s}` needs a unit: B, kB or MB (e.g. 100kB)"));
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a size like 100kB"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{s}` must be more than 0"));
    }
    Ok((v * mul).round() as u64)
}

/// A probability written as a number ("1e-6", "0.001") or a percentage ("0.1%").
pub(crate) fn probability(s: &str, field: &'static str) -> Result<f64, (String, String)> {
    if s.trim_end().ends_with('%') {
        return percent(s, field);
    }
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err((field.to_string(), format!("`{s}` is not a probability: write it as a number in 0..=1 (\"1e-6\") or a percentage (\"0.1%\")"))),
    }
}

pub fn impairment(r: &RawImpair) -> Result<LinkSpec, (String, String)> {
    let dur = |s: &Option<String>, f: &'static str| -> Result<u64, (String, String)> {
        s.as_deref().map(horde_model::units::parse_duration_ns).transpose().map(|v| v.unwrap_or(0)).map_err(|m| (f.to_string(), m))
    };
    let loss = match &r.loss {
        None => Loss::None,
        Some(RawLoss::Percent(p)) => Loss::Random(percent(p, "loss")?),
        Some(RawLoss::GilbertElliott { p, r, loss_bad, loss_good }) => Loss::GilbertElliott {
            p: percent(p, "loss.p")?,
            r: percent(r, "loss.r")?,
            loss_bad: loss_bad.as_deref().map(|s| percent(s, "loss.loss_bad")).transpose()?.unwrap_or(1.0),
            loss_good: loss_good.as_deref().map(|s| percent(s, "loss.loss_good")).transpose()?.unwrap_or(0.0),
        },
    };
    let queue = r.queue.as_deref().map(parse_queue).transpose().map_err(|m| ("queue".to_string(), m))?.unwrap_or((None, false));
    let spec = LinkSpec {
        rate_bps: r.rate.as_deref().map(parse_rate).transpose().map_err(|m| ("rate".to_string(), m))?,
        trace: None,
        delay_ns: dur(&r.delay, "delay")?,
        jitter_ns: dur(&r.jitter, "jitter")?,
        jitter: Default::default(),
        loss,
        duplicate: r.duplicate.as_deref().map(|s| percent(s, "duplicate")).transpose()?.unwrap_or(0.0),
        corrupt: r.corrupt.as_deref().map(|s| percent(s, "corrupt")).transpose()?.unwrap_or(0.0),
        queue_limit_bytes: queue.0,
        queue_unbounded: queue.1,
        reorder: r.reorder.unwrap_or(false),
        ber: r.ber.as_deref().map(|s| probability(s, "ber")).transpose()?.unwrap_or(0.0),
        reorder_prob: r.reorder_prob.as_deref().map(|s| percent(s, "reorder_prob")).transpose()?.unwrap_or(0.0),
        reorder_gap: r.reorder_gap.unwrap_or(0),
    };
    if r.reorder_gap.is_some() && spec.reorder_prob == 0.0 {
        return Err(("reorder_gap".into(), "goes with reorder_prob (which packets may be reordered)".into()));
    }
    if spec.rate_bps.is_some() && r.trace.is_some() {
        return Err(("rate".into(), "give either a rate or a trace, not both".into()));
    }
    spec.validate().map_err(|e| (e.field.to_string(), e.msg))?;
    Ok(spec)
}
