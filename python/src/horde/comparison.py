"""Two or more reports side by side: `compare(a, b, …)` sets every run against the first (the
baseline) per category and direction, per emulated link, and by its verdicts, and says of each
difference whether it is beyond the runs' own noise — with the statistics the report's
verdicts use, at the sample sizes, the limit shown.

There is one implementation: `horde compare A B [C …] --json -` (crates/scenario/src/compare.rs
says how each figure is judged). This module runs it and reads its JSON into DataFrames, so a
comparison in Python and on the command line are the same table.

- **Schedule figures** (departures, departure gaps, the sizes drawn against the model): equal
  or not, never a test (`same_schedules`).
- **Rates** (generator): the relative difference against z·√(CV_a²/n_a + CV_b²/n_b).
- **APDU sizes and inter-arrival times**: the two-sample KS distance, known within an interval
  from the reports' quantile points, against its critical value (never below 0.02).
- **Loss share** (path): the two-proportion z test. One-way delay is shown, not tested.

Each pair of runs is one family of tests: α (default 0.05) is split over it (Bonferroni).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import pandas as pd

from .results import Results

#: The reports' significance level for a family of tests.
ALPHA = 0.05
#: What a figure is: fixed by the schedule, the generator's doing, what arrived (the generator
#: and the network), the network's doing, or shown without a test.
SCHEDULE, GENERATOR, ARRIVALS, PATH, SHOWN = "schedule", "generator", "arrivals", "path", "shown"

Report = Union[Results, str, "os.PathLike[str]"]
#: The columns of `Comparison.figures`.
FIGURE_COLUMNS = ["run", "scope", "direction", "figure", "kind", "a", "b", "difference", "limit", "test", "beyond_noise"]
#: The largest answer read from `horde compare` (its JSON of a few runs is kilobytes).
MAX_ANSWER = 64 << 20


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
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    #: The report directories and the binary, for `to_html`.
    dirs: List[str] = field(default_factory=list, repr=False)
    horde: Optional[str] = field(default=None, repr=False)

    def beyond_noise(self) -> pd.DataFrame:
        """The figures whose difference is beyond the runs' own noise."""
        return self.figures[self.figures["beyond_noise"] == True]  # noqa: E712 (a column of True/False/None)

    def same_schedules(self, run: int) -> bool:
        """Whether run `run` (1 = the second report) has the baseline's schedules: every
        schedule figure equal."""
        row = self.runs[self.runs["run"] == run]
        return bool(len(row)) and row["same_schedules"].iloc[0] is True

    def to_dict(self) -> Dict[str, Any]:
        """`horde compare --json`'s document."""
        return self.raw

    def to_json(self, path: Union[str, "os.PathLike[str]"]) -> None:
        Path(path).write_text(json.dumps(self.raw, indent=1) + "\n")

    def to_html(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """The self-contained page `horde compare --html` writes."""
        run_compare(self.dirs, ["--alpha", repr(self.alpha), "--html", os.fspath(path)], self.horde)


def compare(*reports: Report, alpha: float = ALPHA, horde: Optional[str] = None) -> Comparison:
    """Every report against the first. Each is a `Results` or a report directory; `horde` is the
    binary (default: `HORDE_BIN`, else `horde` on PATH)."""
    if len(reports) < 2:
        raise ValueError("compare: give two or more reports (the first is the baseline)")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha = {alpha}: a significance level strictly between 0 and 1")
    dirs = [str(r.dir) if isinstance(r, Results) else os.fspath(r) for r in reports]
    answer = run_compare(dirs, ["--alpha", repr(alpha), "--json", "-"], horde)
    try:
        doc = json.loads(answer)
    except ValueError as e:
        raise ValueError(f"horde compare answered something that is not its JSON ({e})") from None
    c = of_document(doc)
    c.dirs, c.horde = dirs, horde
    return c


def run_compare(dirs: Sequence[str], flags: Sequence[str], horde: Optional[str] = None) -> str:
    """Runs `horde compare DIRS FLAGS`; its standard output, or ValueError with its message."""
    from .client import find_horde

    binary = find_horde(horde)
    try:
        p = subprocess.run([binary, "compare", *dirs, *flags], capture_output=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        raise ValueError("horde compare did not answer within 600 s") from None
    if p.returncode != 0:
        message = p.stderr.decode("utf-8", "replace").strip().removeprefix("horde: error: ")
        raise ValueError(message or f"horde compare exited with {p.returncode}")
    if len(p.stdout) > MAX_ANSWER:
        raise ValueError(f"horde compare answered {len(p.stdout):,} bytes, more than a comparison's")
    return p.stdout.decode("utf-8", "replace")


def of_document(doc: Dict[str, Any]) -> Comparison:
    """A comparison from `horde compare --json`'s document."""
    runs = pd.DataFrame(doc["runs"])
    runs["beyond_noise"] = pd.array(runs["beyond_noise"].tolist(), dtype="Int64")  # <NA> for the baseline
    runs["same_schedules"] = [None if v is None or v != v else bool(v) for v in runs["same_schedules"].tolist()]
    figures = pd.DataFrame(doc["figures"], columns=FIGURE_COLUMNS)
    figures["beyond_noise"] = [None if v is None or v != v else bool(v) for v in figures["beyond_noise"].tolist()]
    verdicts = pd.DataFrame(doc["verdicts"], columns=["run", "label", "value", "limit", "ok", "kind"])
    return Comparison(runs=runs, figures=figures, verdicts=verdicts, alpha=float(doc["alpha"]), notes=list(doc.get("notes", [])), raw=doc)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m horde compare`: `horde compare` itself, for those who start from Python."""
    p = argparse.ArgumentParser(prog="python -m horde compare", description="Two or more Horde reports side by side, against the first (runs `horde compare`).")
    p.add_argument("reports", nargs="+", help="report directories (horde run --out); the first is the baseline")
    p.add_argument("--alpha", type=float, default=ALPHA, help="significance level of each pair's family of tests (default 0.05)")
    p.add_argument("--json", help="write the comparison as JSON to this file")
    p.add_argument("--html", help="write the comparison as an HTML page to this file")
    p.add_argument("--all", action="store_true", help="print every figure, not only those beyond noise")
    args = p.parse_args(argv)
    flags = ["--alpha", repr(args.alpha)]
    for name in ("json", "html"):
        if getattr(args, name):
            flags += [f"--{name}", getattr(args, name)]
    if args.all:
        flags.append("--all")
    try:
        print(run_compare(args.reports, flags), end="")
    except (FileNotFoundError, ValueError) as e:
        print(f"horde compare: {e}", file=sys.stderr)
        return 2
    return 0
