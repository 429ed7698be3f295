//! Lines about refusals, at a bounded rate: under attack a listener refuses hundreds of
//! connections a second, and a line for each would fill its log (and its disk) for the
//! attacker. Per kind of refusal (its reason, without the peer's address), the first of an
//! interval is told in full; the others are counted and told as one summary line when the
//! interval is over ([`Quiet::due`]) or the next one's first comes. At most [`KINDS`] kinds are
//! kept apart; the rest share one. I/O-free: time is passed in (ns on any monotonic clock).

/// One line per kind per this many ns at most (plus the summary of the ones held back).
pub const INTERVAL_NS: u64 = 10_000_000_000;
/// Kinds of refusal kept apart; more share the last one.
pub const KINDS: usize = 32;

#[derive(Debug, Default)]
pub struct Quiet {
    /// Per kind: its reason, when its interval began, refusals held back in it.
    kinds: Vec<(String, u64, u64)>,
}

impl Quiet {
    /// A refusal of kind `reason` at `now_ns`, told as `line`: the lines to write now (none,
    /// the line, or a summary of the ones held back and then the line).
    pub fn refused(&mut self, now_ns: u64, reason: &str, line: impl FnOnce() -> String) -> Vec<String> {
        let k = match self.kinds.iter().position(|x| x.0 == reason) {
            Some(k) => k,
            None if self.kinds.len() < KINDS => {
                self.kinds.push((reason.to_string(), 0, 0));
                self.kinds.len() - 1
            }
            None => KINDS - 1,
        };
        let mut out = Vec::new();
        if self.kinds[k].2 > 0 || self.kinds[k].1 > 0 {
            if now_ns.saturating_sub(self.kinds[k].1) < INTERVAL_NS {
                self.kinds[k].2 += 1;
                return out;
            }
            out.extend(summary(&mut self.kinds[k]));
        }
        self.kinds[k].1 = now_ns.max(1);
        out.push(line());
        out
    }

    /// Summaries of the refusals held back whose interval is over at `now_ns`.
    pub fn due(&mut self, now_ns: u64) -> Vec<String> {
        let mut out = Vec::new();
        for x in &mut self.kinds {
            if x.1 > 0 && now_ns.saturating_sub(x.1) >= INTERVAL_NS {
                out.extend(summary(x));
                x.1 = 0;
            }
        }
        out
    }
}

fn summary(x: &mut (String, u64, u64)) -> Option<String> {
    let n = std::mem::take(&mut x.2);
    let s = INTERVAL_NS / 1_000_000_000;
    (n > 0).then(|| format!("refused {n} more connection(s) in {s} s: {} (one line per {s} s)", x.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_refusals_is_one_line_per_interval_and_a_count() {
        let s = 1_000_000_000;
        let mut q = Quiet::default();
        let mut lines = Vec::new();
        // 230 refusals a second for 30 s (what an agent under attack wrote, a line each)
        for k in 0..6_900u64 {
            lines.extend(q.refused(k * s / 230, "silent", || format!("refused #{k}")));
        }
        lines.extend(q.due(40 * s));
        assert_eq!(lines.len(), 6, "{lines:?}");
        assert_eq!(lines[0], "refused #0");
        assert!(lines[1].starts_with("refused 2300 more connection(s) in 10 s: silent"), "{lines:?}");
        assert!(q.due(80 * s).is_empty());
        // kinds apart: another reason is told at once
        let mut q = Quiet::default();
        assert_eq!(q.refused(1, "no certificate", || "a".into()), ["a"]);
        assert_eq!(q.refused(2, "another authority", || "b".into()), ["b"]);
        assert!(q.refused(3, "no certificate", || "c".into()).is_empty());
        // held back ones are told once their interval is over, without waiting for another
        assert!(q.due(5 * s).is_empty());
        assert_eq!(q.due(10 * s + 1).len(), 1);
        assert_eq!(q.refused(10 * s + 2, "no certificate", || "d".into()), ["d"]);
        // bounded: kinds beyond the limit share one
        let mut q = Quiet::default();
        for k in 0..1000 {
            q.refused(1, &format!("reason {k}"), String::new);
        }
        assert_eq!(q.kinds.len(), KINDS);
    }
}
