//! The seven channels of an LLUDP circuit (OpenSim / Second Life) and how a circuit's rate is
//! split over them.

use serde::{Deserialize, Serialize};

/// A throttle channel, in the order the viewer's throttle packet carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Resend,
    Land,
    Wind,
    Cloud,
    Task,
    Texture,
    Asset,
}

impl Channel {
    pub const ALL: [Channel; 7] = [Channel::Resend, Channel::Land, Channel::Wind, Channel::Cloud, Channel::Task, Channel::Texture, Channel::Asset];

    pub fn name(self) -> &'static str {
        ["resend", "land", "wind", "cloud", "task", "texture", "asset"][self as usize]
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// One kilobit as the viewer counts it (its settings are ×1024 bits, `setMaxBandwidth`).
pub const KBIT: f64 = 1024.0;

/// The viewer's bandwidth presets, kbit/s per channel (resend, land, wind, cloud, task,
/// texture, asset), totals 50 / 300 / 500 / 1000 (Second Life viewer, llviewerthrottle.cpp).
const PRESETS: [[f64; 7]; 4] = [
    [5.0, 10.0, 3.0, 3.0, 10.0, 10.0, 9.0],
    [30.0, 40.0, 9.0, 9.0, 86.0, 86.0, 40.0],
    [50.0, 70.0, 14.0, 14.0, 136.0, 136.0, 80.0],
    [100.0, 100.0, 20.0, 20.0, 310.0, 310.0, 140.0],
];

/// Splits a circuit's rate (bit/s) over the channels as the viewer does: between two presets,
/// interpolated; above the last, extrapolated along the last two (so resend, wind and cloud
/// grow slowly and task and texture most); below the first, the first scaled down (the viewer
/// sends the 50 kbit/s preset whatever is asked below it; scaling keeps the sum equal to the
/// rate). The shares always sum to `bps`.
pub fn split(bps: f64) -> [f64; 7] {
    let total = |p: &[f64; 7]| p.iter().sum::<f64>();
    let kbps = (bps / KBIT).max(0.0);
    let mut out = [0.0; 7];
    let lerp = |a: &[f64; 7], b: &[f64; 7], f: f64, out: &mut [f64; 7]| {
        for i in 0..7 {
            out[i] = (a[i] + (b[i] - a[i]) * f) * KBIT;
        }
    };
    if kbps <= total(&PRESETS[0]) {
        let f = kbps / total(&PRESETS[0]);
        for i in 0..7 {
            out[i] = PRESETS[0][i] * f * KBIT;
        }
        return out;
    }
    let i = PRESETS.iter().position(|p| total(p) > kbps).unwrap_or(PRESETS.len());
    let (a, b) = if i == PRESETS.len() { (&PRESETS[i - 2], &PRESETS[i - 1]) } else { (&PRESETS[i - 1], &PRESETS[i]) };
    let base = if i == PRESETS.len() { b } else { a };
    let f = (kbps - total(base)) / (total(b) - total(a));
    if i == PRESETS.len() {
        // Extrapolate from the last preset by the last step's per-channel differences.
        for j in 0..7 {
            out[j] = (b[j] + (b[j] - a[j]) * f) * KBIT;
        }
    } else {
        lerp(a, b, f, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_come_back_exactly_and_every_split_sums_to_the_rate() {
        for (k, p) in PRESETS.iter().enumerate() {
            let total: f64 = p.iter().sum();
            let s = split(total * KBIT);
            for i in 0..7 {
                assert!((s[i] - p[i] * KBIT).abs() < 1e-6, "preset {k} channel {i}");
            }
        }
        for kbps in [1.0, 20.0, 50.0, 77.0, 400.0, 750.0, 999.0, 1000.0, 1500.0, 4000.0] {
            let s = split(kbps * KBIT);
            let sum: f64 = s.iter().sum();
            assert!((sum / (kbps * KBIT) - 1.0).abs() < 1e-9, "{kbps}: {sum}");
            assert!(s.iter().all(|&x| x > 0.0), "{kbps}: {s:?}");
        }
        // 750 kbit/s lies halfway between the 500 and 1000 presets: task = (136 + 310) / 2.
        assert!((split(750.0 * KBIT)[Channel::Task.index()] / KBIT - 223.0).abs() < 1e-9);
        // Above 1000 the texture share grows by (310 − 136) / 500 per kbit/s.
        assert!((split(1500.0 * KBIT)[Channel::Texture.index()] / KBIT - (310.0 + 174.0)).abs() < 1e-9);
    }
}
