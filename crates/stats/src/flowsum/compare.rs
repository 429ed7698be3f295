//! Every figure of two analyses of one run side by side: the merged logs' decode and the
//! summaries' ([`super::analyse`]). What `--check-summaries` reports, and what the tests assert.

use serde::Serialize;
use serde_json::Value;

use crate::Analysis;

/// How two analyses of one run compare.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Comparison {
    /// Numbers and values compared.
    pub figures: u64,
    /// Figures beyond their bounds.
    pub beyond: u64,
    /// The first 100 of them: where, both values, the bound.
    pub differences: Vec<String>,
}

impl Comparison {
    fn differ(&mut self, what: String) {
        self.beyond += 1;
        if self.differences.len() < 100 {
            self.differences.push(what);
        }
    }
}

/// Compares `summaries` with `logs` figure by figure: every one must be equal, but the delay
/// and lateness percentiles, which may be one HDR bucket away (1 ns + 1/1,024 of the value), and
/// the lateness mean (summed in another order: 1e-12 of the value).
pub fn compare(logs: &Analysis, summaries: &Analysis) -> Comparison {
    let mut c = Comparison::default();
    match (serde_json::to_value(logs), serde_json::to_value(summaries)) {
        (Ok(a), Ok(b)) => walk(&a, &b, "analysis", &mut c),
        _ => c.differ("an analysis that is not JSON".into()),
    }
    c
}

fn walk(want: &Value, got: &Value, path: &str, c: &mut Comparison) {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                walk(a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null), &format!("{path}.{k}"), c);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(x, y, &format!("{path}[{i}]"), c);
            }
        }
        (Value::Number(a), Value::Number(b)) => {
            c.figures += 1;
            let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            let field = path.rsplit('.').next().unwrap_or("");
            // one ns in the field's unit: ms for delays, µs for lateness
            let ns = if path.contains("send_lateness") { 1e-3 } else { 1e-6 };
            let bound = match field {
                "p50_ms" | "p90_ms" | "p99_ms" | "p999_ms" | "p50_us" | "p99_us" | "p999_us" | "abs_p99_us" => ns + a.abs() / 1024.0 + 1e-12,
                "mean_us" => a.abs() * 1e-12 + 1e-12,
                _ => 0.0,
            };
            let within = (a - b).abs() <= bound;
            if !within {
                c.differ(format!("{path}: {a} from the logs, {b} from the summaries (bound {bound})"));
            }
        }
        (a, b) => {
            c.figures += 1;
            if a != b {
                c.differ(format!("{path}: {a} from the logs, {b} from the summaries"));
            }
        }
    }
}
