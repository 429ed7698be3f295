//! Human-friendly quantities: durations (`250us`, `10ms`, `3s`, `2m`, `1h`) and counts with
//! SI suffixes (`10k`, `1.5M`, `2G`). A duration needs a unit: a bare `50` is refused rather
//! than guessed (seconds to some users, milliseconds to D-ITG's).

/// The longest duration Horde accepts anywhere: ten years. Longer values are typos (and past
/// ~584 years nanoseconds no longer fit in 64 bits); specific settings have tighter limits.
pub const MAX_DURATION_NS: u64 = 10 * 365 * 86_400 * 1_000_000_000;

/// Parses a duration into nanoseconds. A unit is required (`50` could mean 50 s or, to a D-ITG
/// user, 50 ms): only `0` may stand alone.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic() || c == 'µ').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    // `1e3ms`: an exponent is part of the number, not a unit.
    let (num, unit) = match (num.parse::<f64>(), unit.strip_prefix(['e', 'E'])) {
        (Err(_), _) | (_, None) => (num, unit),
        (Ok(_), Some(rest)) => {
            let exp_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '-' || c == '+')).unwrap_or(rest.len());
            let n = num.len() + 1 + exp_end;
            (&t[..n], &t[n..])
        }
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a duration; write e.g. 500us, 10ms, 3s, 2m, 1h"))?;
    let mul = match unit.trim() {
        "" if v == 0.0 => 1.0,
        "" => return Err(format!("`{s}` has no unit; write e.g. {v}ms or {v}s")),
        "s" | "sec" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "d" => 86_400e9,
        u => return Err(format!("`{s}`: unknown time unit `{u}`; use ns, us, ms, s, m, h or d")),
    };
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("`{s}`: a duration must be >= 0"));
    }
    let ns = v * mul;
    if ns > MAX_DURATION_NS as f64 {
        return Err(format!("`{s}` is longer than the 10-year limit"));
    }
    Ok(ns.round() as u64)
}

/// Parses a count with an optional SI suffix (k, M, G; decimal).
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a count; write e.g. 1000, 10k, 1.5M"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("`{s}`: a count must be >= 0"));
    }
    if v * mul >= u64::MAX as f64 {
        return Err(format!("`{s}` is too large"));
    }
    Ok((v * mul).round() as u64)
}

/// Formats nanoseconds for people: `850ns`, `12.5us`, `3.20ms`, `1.500s`.
pub fn fmt_ns(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0}ns")
    } else if a < 1e6 {
        format!("{:.1}us", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.3}s", ns / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("3s").unwrap(), 3_000_000_000);
        assert_eq!(parse_duration_ns("2.5s").unwrap(), 2_500_000_000);
        assert_eq!(parse_duration_ns("0").unwrap(), 0);
        assert_eq!(parse_duration_ns("1e3ms").unwrap(), 1_000_000_000);
        assert!(parse_duration_ns("2.5").unwrap_err().contains("has no unit"));
        assert!(parse_duration_ns("50").unwrap_err().contains("50ms or 50s"));
        assert!(parse_duration_ns("99999999999999999h").unwrap_err().contains("10-year limit"));
        assert!(parse_duration_ns("1e400s").is_err());
        assert_eq!(parse_duration_ns("100ms").unwrap(), 100_000_000);
        assert_eq!(parse_duration_ns("250us").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("1m").unwrap(), 60_000_000_000);
        assert!(parse_duration_ns("3 parsecs").unwrap_err().contains("unknown time unit"));
        assert!(parse_duration_ns("-1s").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("10k").unwrap(), 10_000);
        assert_eq!(parse_count("1.5M").unwrap(), 1_500_000);
        assert!(parse_count("lots").is_err());
    }
}
