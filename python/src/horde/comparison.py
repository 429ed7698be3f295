"""Two or more reports side by side: `compare(a, b, …)` sets every run against the first (the
baseline) per category and direction, per emulated link, and by its verdicts, and says of each
difference whether it is beyond the runs' own noise — with the statistics the report's
verdicts use, at the sample sizes, the limit shown.

- **Schedule figures** (departures, departure gaps, the sizes drawn against the model): equal
  or not, never a test. Two runs of one scenario with one seed have the same schedules, so
  these are identical (`same_schedules`).
- **Rate per player** (generator): the relative difference of the departure rates against
  z·√(CV_a²/n_a + CV_b²/n_b), each run's rate being a renewal count over its n departures with
  the model's inter-departure CV — the report's own rate limit, for two runs.
- **APDU sizes and inter-arrival times** at the receiver: the two-sample Kolmogorov–Smirnov
  distance against √(−ln(α/2)/2 · (n+m)/(nm)), never below 0.02 (the report's path test). The
  reports keep each CDF at 200 quantile points, so the distance is known within an interval;
  a difference is beyond noise when all of the interval is, within when all of it is under,
  and undecided otherwise (shown as such).
- **Loss share** (path): the two-proportion z test. One-way delay is shown (p50, p99) without a
  test: delays in a run are not independent samples.
- **Totals**: the aggregate APDU rate each way (sent over the run's duration), with the largest
  model CV of the direction's categories.

Each pair of runs is one family of tests: α (default 0.05) is split over its tests
(Bonferroni), as the report splits its own. A whole comparison is a table (`figures`) and
renders as JSON or a self-contained HTML page; `python -m horde compare A B [C …]` prints it.
"""

from __future__ import annotations

import argparse
import bisect
import html
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pandas as pd

from .results import DIRECTIONS, Results

#: The reports' own floor under a KS limit (crates/scenario/src/report.rs, KS_FLOOR).
KS_FLOOR = 0.02
#: The reports' significance level for a family of tests (VERDICT_ALPHA).
ALPHA = 0.05
#: What a figure is: fixed by the schedule, the generator's doing, what arrived (the generator
#: and the network), the network's doing, or shown without a test.
SCHEDULE, GENERATOR, ARRIVALS, PATH, SHOWN = "schedule", "generator", "arrivals", "path", "shown"

Report = Union[Results, str, "os.PathLike[str]"]
#: The columns of `Comparison.figures`.
FIGURE_COLUMNS = ["run", "scope", "direction", "figure", "kind", "a", "b", "difference", "limit", "test", "beyond_noise"]
#: What a summary.json with a field missing or of another type raises on the way.
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError)


def normal_quantile(p: float) -> float:
    """The standard normal quantile (by bisection on erfc: exact to 1e-12, no SciPy)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p = {p}: a probability strictly between 0 and 1")
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def ks_two_sample_critical(n: int, m: int, alpha: float) -> float:
    """The two-sample KS distance beyond chance at `alpha` for samples of n and m, never below
    the reports' floor (the same formula as the report's path figures)."""
    n, m = max(n, 1), max(m, 1)
    return max(math.sqrt(-math.log(alpha / 2) / 2 * (n + m) / (n * m)), KS_FLOOR)


def ks_between(a: Sequence[Sequence[float]], n_a: int, b: Sequence[Sequence[float]], n_b: int) -> Tuple[float, float]:
    """The two-sample KS distance between two empirical CDFs of n_a and n_b samples, each known
    at the report's quantile points ((x, F(x)) pairs, F the share of samples ≤ x: point k of P
    is the sample of rank ⌈k·n/P⌉, as crates/stats/src/game.rs draws them), as the interval it
    must lie in. Below a point's value lie at most its rank's samples, so between two points a
    CDF is known within the earlier point's F and the later point's rank share."""

    def bounds(points: Sequence[Sequence[float]], n: int, x: float, left: bool) -> Tuple[float, float]:
        xs = [p[0] for p in points]
        if not left:
            i = bisect.bisect_left(xs, x)
            if i < len(xs) and xs[i] == x:
                return points[i][1], points[i][1]
        # j: the first point above x (at or above, for the share strictly below x)
        j = (bisect.bisect_left if left else bisect.bisect_right)(xs, x)
        low = points[j - 1][1] if j > 0 else 0.0
        if j == len(points):
            return low, 1.0
        rank = min(math.ceil(((j + 1) / len(points)) * n) - 1, n - 1)  # samples of lower rank: rank
        return low, max(low, min(points[j][1], rank / n))

    if not a or not b or n_a < 1 or n_b < 1:
        return (math.nan, math.nan)
    lo = hi = 0.0
    for x in sorted({p[0] for p in a} | {p[0] for p in b}):
        for left in (True, False):
            la, ua = bounds(a, n_a, x, left)
            lb, ub = bounds(b, n_b, x, left)
            lo = max(lo, la - ub, lb - ua)
            hi = max(hi, ua - lb, ub - la)
    return lo, hi


@dataclass
class _Test:
    """One row of the comparison before its family's α is known."""

    scope: str
    direction: str
    figure: str
    kind: str
    a: Any
    b: Any
    diff: Any = None
    n: Tuple[int, int] = (0, 0)
    # what the limit needs: ("rate", cv_a, cv_b) | ("ks", lo, hi) | ("prop", lost_a, lost_b)
    test: Optional[Tuple[Any, ...]] = None


@dataclass
class Comparison:
    """Runs against the first of them. `runs`: one row per report; `figures`: one row per run
    (after the first), scope (category, `total` or a link), direction and figure, with both
    values, the difference, the limit and `beyond_noise` (True, False, or None when the test
    cannot decide or a figure has none); `verdicts`: each run's verdict boxes."""

    runs: pd.DataFrame
    figures: pd.DataFrame
    verdicts: pd.DataFrame
    alpha: float = ALPHA
    notes: List[str] = field(default_factory=list)

    def beyond_noise(self) -> pd.DataFrame:
        """The figures whose difference is beyond the runs' own noise."""
        return self.figures[self.figures["beyond_noise"] == True]  # noqa: E712 (a column of True/False/None)

    def same_schedules(self, run: int) -> bool:
        """Whether run `run` (1 = the second report) has the baseline's schedules: every
        schedule figure equal."""
        return _same_schedules(self.figures[self.figures["run"] == run])

    def to_dict(self) -> Dict[str, Any]:
        def rows(df: pd.DataFrame) -> List[Dict[str, Any]]:
            return [{str(k): _plain(v) for k, v in r.items()} for r in df.to_dict(orient="records")]

        return {"alpha": self.alpha, "runs": rows(self.runs), "figures": rows(self.figures), "verdicts": rows(self.verdicts), "notes": self.notes}

    def to_json(self, path: Union[str, "os.PathLike[str]"]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    def to_html(self, path: Union[str, "os.PathLike[str]"]) -> None:
        Path(path).write_text(_html(self))


def compare(*reports: Report, alpha: float = ALPHA) -> Comparison:
    """Every report against the first. Each is a `Results` or a report directory."""
    if len(reports) < 2:
        raise ValueError("compare: give two or more reports (the first is the baseline)")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha = {alpha}: a significance level strictly between 0 and 1")
    res = [r if isinstance(r, Results) else Results(r) for r in reports]
    for r in res:
        if r.kind != "scenario":
            raise ValueError(f"{r.dir}: a {r.kind} report; compare takes players' runs (horde run, the console, horde demo)")
    frames: List[pd.DataFrame] = []
    notes: List[str] = []
    # the baseline's own row has neither count: None there, not NaN
    same: List[Optional[bool]] = [None]
    beyond: List[Optional[int]] = [None]
    for i, r in enumerate(res[1:], start=1):
        try:
            f = _judge(_tests(res[0], r), i, alpha)
        except _MALFORMED as e:
            raise ValueError(f"{res[0].dir} against {r.dir}: a summary.json field is missing or of another type ({type(e).__name__}: {e}); are both reports from this version of horde?") from None
        frames.append(f)
        same.append(_same_schedules(f))
        beyond.append(sum(1 for b in f["beyond_noise"].tolist() if b is True))
        if res[0].summary.get("service") != r.summary.get("service"):
            notes.append(f"run {i} plays another service ({r.summary.get('service')}) than the baseline ({res[0].summary.get('service')})")
    rows: List[Dict[str, Any]] = []
    for i, r in enumerate(res):
        s = r.summary
        rows.append({"run": i, "report": str(r.dir), "scenario": s.get("scenario"), "service": s.get("service"), "seed": s.get("seed"), "players": s.get("players"), "duration_s": s.get("duration_s")})
    runs = pd.DataFrame(rows)
    runs["same_schedules"] = same
    runs["beyond_noise"] = pd.array(beyond, dtype="Int64")  # nullable: <NA> for the baseline
    figures = pd.concat(frames, ignore_index=True)
    try:
        verdicts = pd.concat([r.verdicts().assign(run=i) for i, r in enumerate(res)], ignore_index=True)
    except _MALFORMED as e:
        raise ValueError(f"the verdicts of {', '.join(str(r.dir) for r in res)}: not a list of verdict objects in every summary.json ({type(e).__name__}: {e})") from None
    cmp = Comparison(runs=runs, figures=figures, verdicts=verdicts[["run", "label", "value", "limit", "ok", "kind"]], alpha=alpha, notes=notes)
    return cmp


def _same_schedules(f: pd.DataFrame) -> bool:
    """Whether a pair's figures have every schedule figure equal (and at least one)."""
    pairs = [(a, b) for a, b, k in zip(f["a"].tolist(), f["b"].tolist(), f["kind"].tolist()) if k == SCHEDULE]
    return bool(pairs) and all(a == b for a, b in pairs)


def _tests(a: Results, b: Results) -> List[_Test]:
    out: List[_Test] = []
    ca = {c["category"]: c for c in a.analysis.get("categories", [])}
    cb = {c["category"]: c for c in b.analysis.get("categories", [])}
    for cat in [c for c in ca if c in cb]:
        for d in DIRECTIONS:
            x, y = ca[cat].get(d) or {}, cb[cat].get(d) or {}
            out += _direction(cat, d, x, y)
    for d in DIRECTIONS:
        x, y = a.analysis.get(d) or {}, b.analysis.get(d) or {}
        if not x or not y:
            continue
        ra, rb = x.get("sent", 0) / a.summary["duration_s"], y.get("sent", 0) / b.summary["duration_s"]
        out.append(_Test("total", d, "APDUs sent", SCHEDULE, x.get("sent"), y.get("sent")))
        if x.get("sent") and y.get("sent"):
            out.append(_Test("total", d, "APDU/s", GENERATOR, ra, rb, 100 * (rb - ra) / ra, (x["sent"], y["sent"]), ("rate", _largest_cv(a, d), _largest_cv(b, d))))
        out.append(_Test("total", d, "kbit/s", SHOWN, x.get("bitrate_bps", 0) / 1e3, y.get("bitrate_bps", 0) / 1e3))
        out += _loss("total", d, x, y)
    for la, lb in _links(a, b):
        for d in ("ab", "ba"):
            x, y = la.get(d) or {}, lb.get(d) or {}
            scope = f"link {la['a']}–{la['b']}"
            out.append(_Test(scope, d, "packets", SHOWN, x.get("packets"), y.get("packets")))
            if x.get("packets") and y.get("packets"):
                pa, pb = x.get("lost", 0) / x["packets"], y.get("lost", 0) / y["packets"]
                out.append(_Test(scope, d, "loss %", PATH, 100 * pa, 100 * pb, 100 * (pb - pa), (x["packets"], y["packets"]), ("prop", x.get("lost", 0), y.get("lost", 0))))
    return out


def _largest_cv(r: Results, d: str) -> float:
    """The largest model inter-departure CV of a direction's categories (1 when none has one)."""
    cvs = [float(c[d]["model_idt_cv"]) for c in r.analysis.get("categories", []) if (c.get(d) or {}).get("model_idt_cv")]
    return max(cvs or [1.0])


def _direction(cat: str, d: str, x: Dict[str, Any], y: Dict[str, Any]) -> List[_Test]:
    out: List[_Test] = []
    if not x.get("sent") and not y.get("sent"):
        return out
    for key, name in (("sent", "departures"), ("departure_iat_samples", "departure gaps"), ("ks_departure_size", "KS of sizes drawn vs model")):
        out.append(_Test(cat, d, name, SCHEDULE, x.get(key), y.get(key)))
    ra, rb = x.get("departure_rate_per_player"), y.get("departure_rate_per_player")
    if ra and rb and x.get("model_idt_cv") and y.get("model_idt_cv"):
        out.append(_Test(cat, d, "APDU/s per player", GENERATOR, ra, rb, 100 * (rb - ra) / ra, (x["sent"], y["sent"]), ("rate", x["model_idt_cv"], y["model_idt_cv"])))
    for of, name, nkey in (("size", "APDU sizes (KS)", "size_samples"), ("iat", "inter-arrival times (KS)", "iat_samples")):
        pa, pb = x.get(f"{of}_cdf") or [], y.get(f"{of}_cdf") or []
        if pa and pb:
            na, nb = int(x.get(nkey) or 0), int(y.get(nkey) or 0)
            lo, hi = ks_between(pa, na, pb, nb)
            out.append(_Test(cat, d, name, ARRIVALS, None, None, (lo + hi) / 2, (na, nb), ("ks", lo, hi)))
    out += _loss(cat, d, x, y)
    for key in ("delay_p50_ms", "delay_p99_ms"):
        if x.get(key) is not None or y.get(key) is not None:
            out.append(_Test(cat, d, key.replace("delay_", "one-way delay ").replace("_ms", " ms"), SHOWN, x.get(key), y.get(key)))
    return out


def _loss(scope: str, d: str, x: Dict[str, Any], y: Dict[str, Any]) -> List[_Test]:
    if not x.get("sent") or not y.get("sent"):
        return []
    pa, pb = x.get("lost", 0) / x["sent"], y.get("lost", 0) / y["sent"]
    return [_Test(scope, d, "loss %", PATH, 100 * pa, 100 * pb, 100 * (pb - pa), (x["sent"], y["sent"]), ("prop", x.get("lost", 0), y.get("lost", 0)))]


def _links(a: Results, b: Results) -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
    lb = {(link["a"], link["b"]): link for link in b.summary.get("emulated_links") or []}
    return [(link, lb[(link["a"], link["b"])]) for link in a.summary.get("emulated_links") or [] if (link["a"], link["b"]) in lb]


def _judge(tests: List[_Test], run: int, alpha: float) -> pd.DataFrame:
    family = sum(1 for t in tests if t.test is not None)
    each = alpha / max(family, 1)
    z = normal_quantile(1 - each / 2)
    rows = []
    for t in tests:
        limit: Optional[float] = None
        beyond: Optional[bool] = None
        text = ""
        (na, nb) = t.n
        if t.kind == SCHEDULE:
            text = "same schedule" if t.a == t.b else "another schedule"
        elif t.test is None:
            text = "shown, not tested"
        elif t.test[0] == "rate":
            cva, cvb = float(t.test[1]), float(t.test[2])
            limit = 100 * z * math.sqrt(cva**2 / na + cvb**2 / nb)
            beyond = abs(t.diff) > limit
            text = f"limit ±{limit:.2f} % at n = {na}, {nb}, CV {cva:.2f}, {cvb:.2f}"
        elif t.test[0] == "ks":
            lo, hi = float(t.test[1]), float(t.test[2])
            limit = ks_two_sample_critical(na, nb, each)
            beyond = True if lo > limit else False if hi <= limit else None
            text = f"KS {lo:.4f}–{hi:.4f}; beyond chance above {limit:.4f} at n = {na}, {nb}"
        elif t.test[0] == "prop":
            xa, xb = int(t.test[1]), int(t.test[2])
            pool = (xa + xb) / (na + nb)
            se = math.sqrt(pool * (1 - pool) * (1 / na + 1 / nb))
            limit = 100 * z * se
            beyond = abs(t.diff) > limit if se > 0 else False
            text = f"limit ±{limit:.3f} points at n = {na}, {nb}"
        if limit is not None:
            text += f" ({family} tests, α = {alpha})"
        rows.append(
            {
                "run": run,
                "scope": t.scope,
                "direction": t.direction,
                "figure": t.figure,
                "kind": t.kind,
                "a": t.a,
                "b": t.b,
                "difference": t.diff if t.diff is not None else _minus(t.b, t.a),
                "limit": limit,
                "test": text,
                "beyond_noise": beyond,
            }
        )
    return pd.DataFrame(rows, columns=FIGURE_COLUMNS)


def _minus(b: Any, a: Any) -> Optional[float]:
    try:
        return float(b) - float(a)
    except (TypeError, ValueError):
        return None


def _plain(v: Any) -> Any:
    if v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    return v


def _fmt(v: Any) -> str:
    v = _plain(v)
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}"
    return html.escape(str(v))


def _html(c: Comparison) -> str:
    def table(df: pd.DataFrame, cols: Sequence[str], mark: Optional[str] = None) -> str:
        head = "".join(f"<th>{html.escape(k)}</th>" for k in cols)
        body = []
        for r in df.to_dict(orient="records"):
            cls = ' class="beyond"' if mark and r.get(mark) is True else ""
            body.append(f"<tr{cls}>" + "".join(f"<td>{_fmt(r.get(k))}</td>" for k in cols) + "</tr>")
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>horde compare</title><style>",
        "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}",
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:right}th{background:#eee}",
        "td:nth-child(-n+5){text-align:left}tr.beyond{background:#fde2e2}",
        "</style></head><body><h1>Runs compared</h1>",
        f"<p>Every run against run 0. Each pair of runs is one family of tests at α = {c.alpha}, split over its tests (Bonferroni); ",
        "rows beyond the runs' own noise are marked. Schedule figures are equal when two runs have the same schedules. ",
        "One-way delay is shown, not tested: the delays of one run are not independent samples.</p>",
        table(c.runs, list(c.runs.columns)),
    ]
    for n in c.notes:
        parts.append(f"<p><b>Note:</b> {html.escape(n)}</p>")
    for run in sorted(set(c.figures["run"])):
        parts.append(f"<h2>Run {run} against run 0</h2>")
        parts.append(table(c.figures[c.figures["run"] == run], ["scope", "direction", "figure", "kind", "test", "a", "b", "difference", "beyond_noise"], mark="beyond_noise"))
    parts.append("<h2>Verdicts</h2>")
    parts.append(table(c.verdicts, list(c.verdicts.columns)))
    parts.append("</body></html>\n")
    return "".join(parts)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m horde compare", description="Two or more Horde reports side by side, against the first.")
    p.add_argument("reports", nargs="+", help="report directories (horde run --out); the first is the baseline")
    p.add_argument("--alpha", type=float, default=ALPHA, help="significance level of each pair's family of tests (default 0.05)")
    p.add_argument("--json", help="write the comparison as JSON to this file")
    p.add_argument("--html", help="write the comparison as an HTML page to this file")
    p.add_argument("--all", action="store_true", help="print every figure, not only those beyond noise and the schedules")
    args = p.parse_args(argv)
    try:
        c = compare(*args.reports, alpha=args.alpha)
    except (FileNotFoundError, ValueError) as e:
        print(f"horde compare: {e}", file=sys.stderr)
        return 2
    if args.json:
        c.to_json(args.json)
    if args.html:
        c.to_html(args.html)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 80):
        print(c.runs.to_string(index=False))
        shown = c.figures if args.all else c.beyond_noise()
        print(f"\n{'every figure' if args.all else 'beyond noise'}: {len(shown)} row(s)")
        if len(shown):
            print(shown[["run", "scope", "direction", "figure", "a", "b", "difference", "test"]].to_string(index=False))
    for n in c.notes:
        print(f"note: {n}")
    return 0

