//! Two or more reports side by side (`horde compare`, and Python's `horde.compare`, which reads
//! this one's JSON): every run against the first (the baseline) per category and direction,
//! per emulated link, and by its verdicts, and whether each difference is beyond the runs' own
//! noise — with the statistics the report's verdicts use, at the sample sizes, the limit shown.
//!
//! - **Schedule figures** (departures, departure gaps, the sizes drawn against the model):
//!   equal or not, never a test. Two runs of one scenario with one seed have the same
//!   schedules, so these are identical ([`RunRow::same_schedules`]).
//! - **Rate per player** (generator): the relative difference of the departure rates against
//!   z·√(CV_a²/n_a + CV_b²/n_b), each run's rate a renewal count over its n departures with the
//!   model's inter-departure CV — the report's own rate limit, for two runs.
//! - **APDU sizes and inter-arrival times** at the receiver: the two-sample KS distance against
//!   √(−ln(α/2)/2 · (n+m)/(nm)), never below [`KS_FLOOR`] (the report's path test). Reports keep
//!   each CDF at 200 quantile points, so the distance is known within an interval
//!   ([`ks_between`]); beyond noise when all of it is, within when all of it is under,
//!   undecided otherwise.
//! - **Loss share** (path): the two-proportion z test. One-way delay (p50, p99) is shown
//!   without a test: the delays of one run are not independent samples.
//! - **Totals**: the aggregate APDU rate each way, with the largest model CV of the
//!   direction's categories.
//!
//! Each pair of runs is one family of tests: α is split over it (Bonferroni), as a report
//! splits its own. Pure but for [`load`], the one reader of a report's summary that the CLI and
//! the console share.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::report::{normal_quantile, KS_FLOOR, VERDICT_ALPHA};

/// A figure's kind: fixed by the schedule, the generator's doing, what arrived (generator and
/// network), the network's doing, or shown without a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Schedule,
    Generator,
    Arrivals,
    Path,
    Shown,
}

/// The part of a report's summary.json a comparison reads (fields it does not know are left
/// alone; a field of another type refuses the report).
#[derive(Debug, Deserialize)]
pub struct Report {
    #[serde(default)]
    pub scenario: Option<String>,
    #[serde(default)]
    pub service: Option<String>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub players: Option<u64>,
    pub duration_s: f64,
    pub analysis: Analysis,
    #[serde(default)]
    pub emulated_links: Option<Vec<Link>>,
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
    /// A regulated run's or a bots run's report: not comparable here.
    #[serde(default)]
    circuits: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    response_ms: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Deserialize, Default)]
pub struct Analysis {
    #[serde(default)]
    pub categories: Vec<Category>,
    #[serde(default)]
    pub up: Option<Dir>,
    #[serde(default)]
    pub down: Option<Dir>,
}

#[derive(Debug, Deserialize)]
pub struct Category {
    pub category: String,
    #[serde(default)]
    pub up: Option<Dir>,
    #[serde(default)]
    pub down: Option<Dir>,
}

/// One direction's figures, as the report's analysis has them.
#[derive(Debug, Deserialize, Default)]
pub struct Dir {
    pub sent: Option<u64>,
    pub lost: Option<u64>,
    pub bitrate_bps: Option<f64>,
    pub departure_rate_per_player: Option<f64>,
    pub model_idt_cv: Option<f64>,
    pub departure_iat_samples: Option<u64>,
    pub ks_departure_size: Option<f64>,
    pub size_samples: Option<u64>,
    #[serde(default)]
    pub size_cdf: Vec<(f64, f64)>,
    pub iat_samples: Option<u64>,
    #[serde(default)]
    pub iat_cdf: Vec<(f64, f64)>,
    pub delay_p50_ms: Option<f64>,
    pub delay_p99_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct Link {
    pub a: String,
    pub b: String,
    #[serde(default)]
    pub ab: Option<LinkDir>,
    #[serde(default)]
    pub ba: Option<LinkDir>,
}

#[derive(Debug, Deserialize, Default)]
pub struct LinkDir {
    pub packets: Option<u64>,
    pub lost: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct Verdict {
    pub label: String,
    pub value: String,
    pub limit: String,
    pub ok: bool,
    #[serde(default)]
    pub kind: Option<String>,
}

/// The largest summary.json read (a 10,000-player run's is a few MB).
pub const MAX_SUMMARY: u64 = 256 << 20;

/// `rel` (`summary.json`, or `NAME/summary.json` under a runs directory) inside `dir`, opened
/// without following a link anywhere on the way, bounded, read as a players' run's report;
/// `name` names it in errors.
pub fn load(dir: &std::path::Path, rel: &str, name: &str) -> Result<Report, String> {
    use std::io::Read as _;
    let f = horde_sys::fs::open_beneath(dir, rel)
        .map_err(|e| format!("{name}: no summary.json to read ({e}); give a report directory `horde run --out` wrote (not a link)"))?;
    let meta = f.metadata().map_err(|e| format!("{name}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{name}: summary.json is not a regular file"));
    }
    if meta.len() > MAX_SUMMARY {
        return Err(format!("{name}: summary.json is {} bytes, more than a report's ({MAX_SUMMARY} at most)", meta.len()));
    }
    let mut text = String::new();
    f.take(MAX_SUMMARY).read_to_string(&mut text).map_err(|e| format!("{name}: summary.json: {e} (not UTF-8 text?)"))?;
    Report::parse(name, &text)
}

impl Report {
    /// A summary.json's text, read as a players' run's report; `name` names it in errors.
    pub fn parse(name: &str, text: &str) -> Result<Report, String> {
        let r: Report = serde_json::from_str(text).map_err(|e| {
            let what = if e.is_syntax() || e.is_eof() { "not JSON" } else { "a field is missing or of another type" };
            format!("{name}: not a players' run's summary ({what}: {e}); give a directory `horde run`, `horde demo` or the console wrote, from this version of horde")
        })?;
        if r.circuits.is_some() || r.response_ms.is_some() {
            let kind = if r.circuits.is_some() { "regulated run's (circuits)" } else { "bots run's" };
            return Err(format!("{name}: a {kind} report; compare takes players' runs (horde run, horde demo, the console)"));
        }
        if !(r.duration_s.is_finite() && r.duration_s > 0.0) {
            return Err(format!("{name}: duration_s is {}, not a run's length", r.duration_s));
        }
        Ok(r)
    }
}

/// One row of the comparison: a run against the baseline, one scope (category, `total` or a
/// link), direction and figure.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Figure {
    /// The run (1 = the second report given).
    pub run: usize,
    pub scope: String,
    pub direction: String,
    pub figure: String,
    pub kind: Kind,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b − a (in % of a for rates; the KS interval's middle for distributions).
    pub difference: Option<f64>,
    pub limit: Option<f64>,
    /// The test, its figures and its sample sizes, as words.
    pub test: String,
    /// True or false where the test decides; None where it cannot or the figure has none.
    pub beyond_noise: Option<bool>,
}

/// One report given.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunRow {
    pub run: usize,
    pub report: String,
    pub scenario: Option<String>,
    pub service: Option<String>,
    pub seed: Option<u64>,
    pub players: Option<u64>,
    pub duration_s: f64,
    /// Every schedule figure equal to the baseline's (None for the baseline).
    pub same_schedules: Option<bool>,
    /// Figures beyond the runs' own noise (None for the baseline).
    pub beyond_noise: Option<usize>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VerdictRow {
    pub run: usize,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// The comparison (`horde compare --json`'s document).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Comparison {
    pub schema_version: u32,
    pub alpha: f64,
    pub runs: Vec<RunRow>,
    pub figures: Vec<Figure>,
    pub verdicts: Vec<VerdictRow>,
    pub notes: Vec<String>,
}

/// Every report against the first, at significance `alpha` per pair of runs. `reports` are
/// (name, report) pairs.
pub fn compare(reports: &[(String, Report)], alpha: f64) -> Result<Comparison, String> {
    if reports.len() < 2 {
        return Err("give two or more reports (the first is the baseline)".into());
    }
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(format!("--alpha {alpha}: a significance level strictly between 0 and 1"));
    }
    let (base_name, base) = &reports[0];
    let mut figures = Vec::new();
    let mut notes = Vec::new();
    let mut runs = vec![row(0, base_name, base, None, None)];
    for (i, (name, r)) in reports.iter().enumerate().skip(1) {
        let f = judge(tests(base, r), i, alpha);
        let same = same_schedules(&f);
        let beyond = f.iter().filter(|x| x.beyond_noise == Some(true)).count();
        if base.service != r.service {
            notes.push(format!(
                "run {i} plays another service ({}) than the baseline ({})",
                r.service.as_deref().unwrap_or("?"),
                base.service.as_deref().unwrap_or("?")
            ));
        }
        runs.push(row(i, name, r, Some(same), Some(beyond)));
        figures.extend(f);
    }
    let verdicts = reports.iter().enumerate().flat_map(|(i, (_, r))| r.verdicts.iter().map(move |v| VerdictRow { run: i, verdict: v.clone() })).collect();
    Ok(Comparison { schema_version: 1, alpha, runs, figures, verdicts, notes })
}

/// The reports' own significance level, the default of a comparison.
pub const ALPHA: f64 = VERDICT_ALPHA;

fn row(run: usize, name: &str, r: &Report, same: Option<bool>, beyond: Option<usize>) -> RunRow {
    RunRow {
        run,
        report: name.to_string(),
        scenario: r.scenario.clone(),
        service: r.service.clone(),
        seed: r.seed,
        players: r.players,
        duration_s: r.duration_s,
        same_schedules: same,
        beyond_noise: beyond,
    }
}

/// Whether a pair's figures have every schedule figure equal (and at least one).
fn same_schedules(f: &[Figure]) -> bool {
    let mut sched = f.iter().filter(|x| x.kind == Kind::Schedule).peekable();
    sched.peek().is_some() && sched.all(|x| x.a == x.b)
}

/// A row before its family's α is known.
struct Test {
    scope: String,
    direction: &'static str,
    figure: &'static str,
    kind: Kind,
    a: Option<f64>,
    b: Option<f64>,
    diff: Option<f64>,
    n: (u64, u64),
    how: How,
}

enum How {
    None,
    /// A rate difference in %, the two runs' inter-departure CVs.
    Rate(f64, f64),
    /// A KS interval.
    Ks(f64, f64),
    /// Two loss counts.
    Prop(u64, u64),
}

impl Test {
    fn shown(scope: &str, direction: &'static str, figure: &'static str, kind: Kind, a: Option<f64>, b: Option<f64>) -> Test {
        Test { scope: scope.to_string(), direction, figure, kind, a, b, diff: None, n: (0, 0), how: How::None }
    }
}

const DIRECTIONS: [&str; 2] = ["up", "down"];

fn pick<'a>(up: &'a Option<Dir>, down: &'a Option<Dir>, d: &str) -> Option<&'a Dir> {
    if d == "up" {
        up.as_ref()
    } else {
        down.as_ref()
    }
}

fn f(x: Option<u64>) -> Option<f64> {
    x.map(|v| v as f64)
}

fn tests(a: &Report, b: &Report) -> Vec<Test> {
    let mut out = Vec::new();
    for ca in &a.analysis.categories {
        let Some(cb) = b.analysis.categories.iter().find(|c| c.category == ca.category) else {
            continue;
        };
        for d in DIRECTIONS {
            let empty = Dir::default();
            let (x, y) = (pick(&ca.up, &ca.down, d).unwrap_or(&empty), pick(&cb.up, &cb.down, d).unwrap_or(&empty));
            direction(&mut out, &ca.category, d, x, y);
        }
    }
    for d in DIRECTIONS {
        let (Some(x), Some(y)) = (pick(&a.analysis.up, &a.analysis.down, d), pick(&b.analysis.up, &b.analysis.down, d)) else {
            continue;
        };
        out.push(Test::shown("total", d, "APDUs sent", Kind::Schedule, f(x.sent), f(y.sent)));
        if let (Some(sa), Some(sb)) = (x.sent.filter(|&s| s > 0), y.sent.filter(|&s| s > 0)) {
            let (ra, rb) = (sa as f64 / a.duration_s, sb as f64 / b.duration_s);
            let how = How::Rate(largest_cv(a, d), largest_cv(b, d));
            out.push(Test { diff: Some(100.0 * (rb - ra) / ra), n: (sa, sb), how, ..Test::shown("total", d, "APDU/s", Kind::Generator, Some(ra), Some(rb)) });
        }
        out.push(Test::shown("total", d, "kbit/s", Kind::Shown, Some(x.bitrate_bps.unwrap_or(0.0) / 1e3), Some(y.bitrate_bps.unwrap_or(0.0) / 1e3)));
        out.extend(loss("total", d, x.sent, x.lost, y.sent, y.lost));
    }
    for la in a.emulated_links.iter().flatten() {
        let Some(lb) = b.emulated_links.iter().flatten().find(|l| l.a == la.a && l.b == la.b) else {
            continue;
        };
        let scope = format!("link {}–{}", la.a, la.b);
        for (d, x, y) in [("ab", &la.ab, &lb.ab), ("ba", &la.ba, &lb.ba)] {
            let empty = LinkDir::default();
            let (x, y) = (x.as_ref().unwrap_or(&empty), y.as_ref().unwrap_or(&empty));
            out.push(Test::shown(&scope, d, "packets", Kind::Shown, f(x.packets), f(y.packets)));
            out.extend(loss(&scope, d, x.packets, x.lost, y.packets, y.lost));
        }
    }
    out
}

/// The largest model inter-departure CV of a direction's categories (1 when none has one).
fn largest_cv(r: &Report, d: &str) -> f64 {
    r.analysis
        .categories
        .iter()
        .filter_map(|c| pick(&c.up, &c.down, d)?.model_idt_cv)
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        .unwrap_or(1.0)
}

fn direction(out: &mut Vec<Test>, cat: &str, d: &'static str, x: &Dir, y: &Dir) {
    if x.sent.unwrap_or(0) == 0 && y.sent.unwrap_or(0) == 0 {
        return;
    }
    out.push(Test::shown(cat, d, "departures", Kind::Schedule, f(x.sent), f(y.sent)));
    out.push(Test::shown(cat, d, "departure gaps", Kind::Schedule, f(x.departure_iat_samples), f(y.departure_iat_samples)));
    out.push(Test::shown(cat, d, "KS of sizes drawn vs model", Kind::Schedule, x.ks_departure_size, y.ks_departure_size));
    let rate = (x.departure_rate_per_player.filter(|v| *v > 0.0), y.departure_rate_per_player.filter(|v| *v > 0.0));
    let cv = (x.model_idt_cv.filter(|v| *v > 0.0), y.model_idt_cv.filter(|v| *v > 0.0));
    if let ((Some(ra), Some(rb)), (Some(cva), Some(cvb)), Some(sa), Some(sb)) = (rate, cv, x.sent.filter(|&s| s > 0), y.sent.filter(|&s| s > 0)) {
        let t = Test::shown(cat, d, "APDU/s per player", Kind::Generator, Some(ra), Some(rb));
        out.push(Test { diff: Some(100.0 * (rb - ra) / ra), n: (sa, sb), how: How::Rate(cva, cvb), ..t });
    }
    for (name, pa, na, pb, nb) in [
        ("APDU sizes (KS)", &x.size_cdf, x.size_samples, &y.size_cdf, y.size_samples),
        ("inter-arrival times (KS)", &x.iat_cdf, x.iat_samples, &y.iat_cdf, y.iat_samples),
    ] {
        if pa.is_empty() || pb.is_empty() {
            continue;
        }
        let (na, nb) = (na.unwrap_or(0), nb.unwrap_or(0));
        if let Some((lo, hi)) = ks_between(pa, na, pb, nb) {
            out.push(Test { diff: Some((lo + hi) / 2.0), n: (na, nb), how: How::Ks(lo, hi), ..Test::shown(cat, d, name, Kind::Arrivals, None, None) });
        }
    }
    out.extend(loss(cat, d, x.sent, x.lost, y.sent, y.lost));
    for (name, va, vb) in [("one-way delay p50 ms", x.delay_p50_ms, y.delay_p50_ms), ("one-way delay p99 ms", x.delay_p99_ms, y.delay_p99_ms)] {
        if va.is_some() || vb.is_some() {
            out.push(Test::shown(cat, d, name, Kind::Shown, va, vb));
        }
    }
}

fn loss(scope: &str, d: &'static str, sa: Option<u64>, la: Option<u64>, sb: Option<u64>, lb: Option<u64>) -> Option<Test> {
    let (sa, sb) = (sa.filter(|&s| s > 0)?, sb.filter(|&s| s > 0)?);
    let (la, lb) = (la.unwrap_or(0).min(sa), lb.unwrap_or(0).min(sb));
    let (pa, pb) = (la as f64 / sa as f64, lb as f64 / sb as f64);
    let t = Test::shown(scope, d, "loss %", Kind::Path, Some(100.0 * pa), Some(100.0 * pb));
    Some(Test { diff: Some(100.0 * (pb - pa)), n: (sa, sb), how: How::Prop(la, lb), ..t })
}

/// The two-sample KS distance beyond chance at `alpha` for samples of n and m, never below the
/// reports' floor (the report's path figures' formula).
pub fn ks_two_sample_critical(n: u64, m: u64, alpha: f64) -> f64 {
    horde_model::fit::ks_two_sample_critical(n, m, alpha).max(KS_FLOOR)
}

fn judge(tests: Vec<Test>, run: usize, alpha: f64) -> Vec<Figure> {
    let family = tests.iter().filter(|t| !matches!(t.how, How::None)).count();
    let each = alpha / family.max(1) as f64;
    let z = normal_quantile(1.0 - each / 2.0);
    tests
        .into_iter()
        .map(|t| {
            let (na, nb) = t.n;
            let (limit, beyond, mut text) = match t.how {
                How::None if t.kind == Kind::Schedule => (None, None, if t.a == t.b { "same schedule" } else { "another schedule" }.to_string()),
                How::None => (None, None, "shown, not tested".to_string()),
                How::Rate(cva, cvb) => {
                    let limit = 100.0 * z * (cva * cva / na as f64 + cvb * cvb / nb as f64).sqrt();
                    (Some(limit), t.diff.map(|d| d.abs() > limit), format!("limit ±{limit:.2} % at n = {na}, {nb}, CV {cva:.2}, {cvb:.2}"))
                }
                How::Ks(lo, hi) => {
                    let limit = ks_two_sample_critical(na, nb, each);
                    let beyond = if lo > limit {
                        Some(true)
                    } else if hi <= limit {
                        Some(false)
                    } else {
                        None
                    };
                    (Some(limit), beyond, format!("KS {lo:.4}–{hi:.4}; beyond chance above {limit:.4} at n = {na}, {nb}"))
                }
                How::Prop(xa, xb) => {
                    let pool = (xa + xb) as f64 / (na + nb) as f64;
                    let se = (pool * (1.0 - pool) * (1.0 / na as f64 + 1.0 / nb as f64)).sqrt();
                    let limit = 100.0 * z * se;
                    let beyond = t.diff.map(|d| se > 0.0 && d.abs() > limit);
                    (Some(limit), beyond, format!("limit ±{limit:.3} points at n = {na}, {nb}"))
                }
            };
            if limit.is_some() {
                let _ = write!(text, " ({family} tests, α = {alpha})");
            }
            let difference = t.diff.or_else(|| Some(t.b? - t.a?));
            Figure {
                run,
                scope: t.scope,
                direction: t.direction.into(),
                figure: t.figure.into(),
                kind: t.kind,
                a: t.a,
                b: t.b,
                difference,
                limit,
                test: text,
                beyond_noise: beyond,
            }
        })
        .collect()
}

/// The two-sample KS distance between two empirical CDFs of `n_a` and `n_b` samples, each known
/// at a report's quantile points ((x, F(x)) pairs, F the share of samples ≤ x; point k of P is
/// the sample of rank ⌈k·n/P⌉, as `horde_stats::game` draws them), as the interval it must lie
/// in: below a point's value lie at most its rank's samples, so between two points a CDF is
/// known within the earlier point's F and the later point's rank share. None without points.
pub fn ks_between(a: &[(f64, f64)], n_a: u64, b: &[(f64, f64)], n_b: u64) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() || n_a == 0 || n_b == 0 || a.iter().chain(b).any(|p| !p.0.is_finite() || !p.1.is_finite()) {
        return None;
    }
    let mut xs: Vec<f64> = a.iter().chain(b).map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for x in xs {
        for left in [true, false] {
            let (la, ua) = bounds(a, n_a, x, left);
            let (lb, ub) = bounds(b, n_b, x, left);
            lo = lo.max(la - ub).max(lb - ua);
            hi = hi.max(ua - lb).max(ub - la);
        }
    }
    Some((lo, hi))
}

/// Where a CDF known at `points` lies at `x` (`left`: the share strictly below x).
fn bounds(points: &[(f64, f64)], n: u64, x: f64, left: bool) -> (f64, f64) {
    if !left {
        let i = points.partition_point(|p| p.0 < x);
        if i < points.len() && points[i].0 == x {
            return (points[i].1, points[i].1);
        }
    }
    // j: the first point above x (at or above, for the share strictly below x)
    let j = if left { points.partition_point(|p| p.0 < x) } else { points.partition_point(|p| p.0 <= x) };
    let low = if j > 0 { points[j - 1].1 } else { 0.0 };
    if j == points.len() {
        return (low, 1.0);
    }
    let n_f = n as f64;
    // samples of lower rank than point j's
    let rank = ((((j + 1) as f64 / points.len() as f64) * n_f).ceil() - 1.0).min(n_f - 1.0);
    (low, low.max(points[j].1.min(rank / n_f)))
}

/// The comparison for people: the runs, then the figures beyond noise (or every figure).
pub fn text(c: &Comparison, all: bool) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "{:>3}  {:<40} {:<10} {:>6} {:>8} {:>8}  {:<14} beyond noise", "run", "report", "service", "seed", "players", "secs", "same schedules");
    for r in &c.runs {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "–".into());
        let _ = writeln!(
            t,
            "{:>3}  {:<40} {:<10} {:>6} {:>8} {:>8.1}  {:<14} {}",
            r.run,
            r.report,
            opt(r.service.clone()),
            opt(r.seed.map(|s| s.to_string())),
            opt(r.players.map(|s| s.to_string())),
            r.duration_s,
            opt(r.same_schedules.map(|s| if s { "yes" } else { "no" }.to_string())),
            opt(r.beyond_noise.map(|s| s.to_string()))
        );
    }
    let shown: Vec<&Figure> = c.figures.iter().filter(|f| all || f.beyond_noise == Some(true)).collect();
    let _ = writeln!(t, "\n{}: {} row(s)", if all { "every figure" } else { "beyond noise" }, shown.len());
    for f in shown {
        let num = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.4}"));
        let _ = writeln!(
            t,
            "{:>3}  {:<14} {:<4} {:<28} a {:>12} b {:>12} diff {:>10}  {}",
            f.run,
            f.scope,
            f.direction,
            f.figure,
            num(f.a),
            num(f.b),
            num(f.difference),
            f.test
        );
    }
    for n in &c.notes {
        let _ = writeln!(t, "note: {n}");
    }
    t
}

/// The comparison as a self-contained page.
pub fn html(c: &Comparison) -> String {
    let esc = horde_stats::table::esc;
    let num = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.4}"));
    let mut s = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>horde compare</title><style>\
         body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:right}th{background:#eee}\
         td.t{text-align:left}tr.beyond{background:#fde2e2}</style></head><body><h1>Runs compared</h1>",
    );
    let _ = write!(
        s,
        "<p>Every run against run 0. Each pair of runs is one family of tests at α = {}, split over its tests (Bonferroni); rows beyond the runs' own noise are marked. \
         Schedule figures are equal when two runs have the same schedules. One-way delay is shown, not tested: the delays of one run are not independent samples.</p>",
        c.alpha
    );
    s.push_str("<table><tr><th>run</th><th>report</th><th>scenario</th><th>service</th><th>seed</th><th>players</th><th>duration s</th><th>same schedules</th><th>beyond noise</th></tr>");
    for r in &c.runs {
        let o = |v: Option<String>| esc(&v.unwrap_or_else(|| "–".into()));
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.run,
            esc(&r.report),
            o(r.scenario.clone()),
            o(r.service.clone()),
            o(r.seed.map(|v| v.to_string())),
            o(r.players.map(|v| v.to_string())),
            r.duration_s,
            o(r.same_schedules.map(|v| if v { "yes" } else { "no" }.to_string())),
            o(r.beyond_noise.map(|v| v.to_string()))
        );
    }
    s.push_str("</table>");
    for n in &c.notes {
        let _ = write!(s, "<p><b>Note:</b> {}</p>", esc(n));
    }
    for run in c.runs.iter().skip(1).map(|r| r.run) {
        let _ = write!(s, "<h2>Run {run} against run 0</h2><table><tr><th>scope</th><th>direction</th><th>figure</th><th>kind</th><th>test</th><th>a</th><th>b</th><th>difference</th><th>beyond noise</th></tr>");
        for f in c.figures.iter().filter(|f| f.run == run) {
            let cls = if f.beyond_noise == Some(true) { " class=\"beyond\"" } else { "" };
            let beyond = f.beyond_noise.map_or("–", |b| if b { "yes" } else { "no" });
            let kind = serde_json::to_value(f.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
            let _ = write!(
                s,
                "<tr{cls}><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{kind}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{beyond}</td></tr>",
                esc(&f.scope),
                esc(&f.direction),
                esc(&f.figure),
                esc(&f.test),
                num(f.a),
                num(f.b),
                num(f.difference)
            );
        }
        s.push_str("</table>");
    }
    s.push_str("<h2>Verdicts</h2><table><tr><th>run</th><th>label</th><th>value</th><th>limit</th><th>ok</th><th>kind</th></tr>");
    for v in &c.verdicts {
        let w = &v.verdict;
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            v.run,
            esc(&w.label),
            esc(&w.value),
            esc(&w.limit),
            if w.ok { "yes" } else { "no" },
            esc(w.kind.as_deref().unwrap_or("–"))
        );
    }
    s.push_str("</table></body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// As `horde_stats::game` draws a report's CDF at 200 quantile points.
    fn quantile_points(samples: &[f64]) -> Vec<(f64, f64)> {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        (1..=200)
            .map(|k| {
                let i = ((((k as f64) / 200.0) * n as f64).ceil() as usize).saturating_sub(1).min(n - 1);
                let v = s[i];
                (v, s.iter().filter(|&&x| x <= v).count() as f64 / n as f64)
            })
            .collect()
    }

    fn true_ks(a: &[f64], b: &[f64]) -> f64 {
        let mut xs: Vec<f64> = a.iter().chain(b).copied().collect();
        xs.sort_by(f64::total_cmp);
        let share = |s: &[f64], x: f64| s.iter().filter(|&&v| v <= x).count() as f64 / s.len() as f64;
        xs.iter().map(|&x| (share(a, x) - share(b, x)).abs()).fold(0.0, f64::max)
    }

    /// The interval always holds the true distance: continuous, tied and discrete samples of 5
    /// to 1,500, 150 cases (a seeded draw, so the test is the same every time).
    #[test]
    fn the_ks_interval_from_quantile_points_always_holds_the_true_distance() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut widths = Vec::new();
        for trial in 0..150 {
            let n = [5, 50, 199, 200, 201, 900][rng.random_range(0..6)];
            let m = [7, 120, 400, 1500][rng.random_range(0..4)];
            let shift = [0.0, 0.0, 0.3][rng.random_range(0..3)];
            let (ka, kb) = (rng.random_range(0..3), rng.random_range(0..3));
            let mut draw = |k: usize| -> f64 {
                let u: f64 = rng.random_range(1e-9..1.0);
                match k {
                    0 => -u.ln(),
                    // ties, as inter-arrivals in whole ms (a Weibull of shape 0.58, scale 268)
                    1 => (268.0 * (-u.ln()).powf(1.0 / 0.58)).round(),
                    _ => [6.0, 10.0, 14.0, 19.0, 22.0, 35.0, 35.0, 35.0, 51.0][(u * 9.0) as usize % 9],
                }
            };
            let a: Vec<f64> = (0..n).map(|_| draw(ka)).collect();
            let b: Vec<f64> = (0..m).map(|_| draw(kb) + shift).collect();
            let (lo, hi) = ks_between(&quantile_points(&a), n, &quantile_points(&b), m).unwrap();
            let d = true_ks(&a, &b);
            assert!(lo - 1e-12 <= d && d <= hi + 1e-12, "trial {trial}: n {n} m {m}: {lo} ≤ {d} ≤ {hi}");
            widths.push(hi - lo);
        }
        widths.sort_by(f64::total_cmp);
        assert!(widths[widths.len() / 2] <= 0.01, "narrow: {}", widths[widths.len() / 2]);
        let same = quantile_points(&(0..150).map(f64::from).collect::<Vec<_>>());
        assert_eq!(ks_between(&same, 150, &same, 150), Some((0.0, 0.0)));
    }

    #[test]
    fn the_limits_are_the_reports_formulas() {
        assert!((normal_quantile(0.975) - 1.959964).abs() < 1e-6);
        assert!((ks_two_sample_critical(5_000, 5_000, 0.05) - 1.358 * (2.0f64 / 5_000.0).sqrt()).abs() < 1e-4);
        assert_eq!(ks_two_sample_critical(1_000_000_000, 1_000_000_000, 0.05), KS_FLOOR);
    }

    fn summary(players: u64, seed: u64, rate: f64, lost: u64) -> String {
        let sent = (rate * players as f64 * 10.0) as u64;
        let d = serde_json::json!({
            "sent": sent, "received": sent - lost, "lost": lost, "bitrate_bps": 24.0 * sent as f64,
            "departure_rate_per_player": sent as f64 / players as f64 / 10.0, "model_idt_cv": 1.5,
            "departure_iat_samples": sent - players, "ks_departure_size": 0.01,
            "size_samples": sent - lost, "size_cdf": [[6, 0.2], [35, 1.0]],
            "iat_samples": sent - players, "iat_cdf": [[0.0, 0.1], [250.0, 0.7], [1800.0, 1.0]],
            "delay_p50_ms": 0.05, "delay_p99_ms": 1.5
        });
        serde_json::json!({
            "scenario": "s", "service": "wow", "players": players, "seed": seed, "duration_s": 10.0,
            "analysis": {"categories": [{"category": "trading", "up": d, "down": d}], "up": d, "down": d},
            "emulated_links": [{"a": "r1", "b": "r2", "ab": {"packets": 1000, "lost": 10}, "ba": {"packets": 900, "lost": 0}}],
            "verdicts": [{"label": "players connected", "value": "all", "limit": "all", "ok": true, "kind": "generator"}]
        })
        .to_string()
    }

    #[test]
    fn one_seed_twice_is_the_same_another_is_within_noise_ten_times_the_players_and_loss_are_beyond() {
        let texts = [summary(100, 1, 2.0, 0), summary(100, 1, 2.0, 0), summary(100, 2, 2.02, 0), summary(1000, 1, 2.0, 0), summary(100, 1, 2.0, 60)];
        let reports: Vec<(String, Report)> = texts.iter().enumerate().map(|(i, t)| (format!("r{i}"), Report::parse(&format!("r{i}"), t).unwrap())).collect();
        let c = compare(&reports, ALPHA).unwrap();
        assert_eq!(c.runs[1].same_schedules, Some(true));
        assert_eq!(c.runs[2].same_schedules, Some(false));
        assert_eq!((c.runs[1].beyond_noise, c.runs[2].beyond_noise), (Some(0), Some(0)));
        let beyond = |run: usize| -> Vec<&Figure> { c.figures.iter().filter(|f| f.run == run && f.beyond_noise == Some(true)).collect() };
        assert!(beyond(3).iter().all(|f| f.figure == "APDU/s") && !beyond(3).is_empty(), "ten times the players: the totals");
        assert!(beyond(4).iter().all(|f| f.figure == "loss %" && f.b == Some(3.0)) && !beyond(4).is_empty());
        assert_eq!(c.verdicts.len(), 5);
        let page = html(&c);
        assert!(page.contains("class=\"beyond\"") && page.contains("<table>"));
        assert!(text(&c, false).contains("beyond noise: "));
    }

    #[test]
    fn what_is_not_a_players_summary_is_named() {
        for (t, says) in [
            ("{nope", "not JSON"),
            ("[1, 2]", "another type"),
            (r#"{"analysis": 3, "duration_s": 1}"#, "another type"),
            (r#"{"analysis": {"up": {"sent": "many"}}, "duration_s": 1}"#, "another type"),
            (r#"{"analysis": {}, "duration_s": 0}"#, "not a run's length"),
            (r#"{"analysis": {}, "duration_s": 5, "circuits": []}"#, "regulated"),
        ] {
            let e = Report::parse("X", t).unwrap_err();
            assert!(e.starts_with("X: ") && e.contains(says), "{t}: {e}");
        }
        assert!(compare(&[], ALPHA).is_err());
    }
}
