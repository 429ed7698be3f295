//! Human-friendly quantities: durations (`250us`, `10ms`, `3s`, `2m`, `1h`) and counts with
//! SI suffixes (`10k`, `1.5M`, `2G`).

/// Parses a duration into nanoseconds. A bare number is in seconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic() || c == 'µ').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a duration; write e.g. 500us, 10ms, 3s, 2m, 1h"))?;
    let mul = match unit.trim() {
        "" | "s" | "sec" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        u => return Err(format!("`{s}`: unknown time unit `{u}`; use ns, us, ms, s, m or h")),
    };
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("`{s}`: a duration must be >= 0"));
    }
    Ok((v * mul).round() as u64)
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
        assert_eq!(parse_duration_ns("2.5").unwrap(), 2_500_000_000);
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
