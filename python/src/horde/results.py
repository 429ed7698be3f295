"""A run's report as pandas DataFrames: `Results(report_dir)` reads the directory `horde run`
(or the console, or `horde demo`) wrote — summary.json (docs/schemas/summary.schema.json) and,
for the per-packet table, the run's logs through `horde decode --parquet`."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import pandas as pd

DIRECTIONS = ("up", "down")
#: The largest summary.json read (a 10,000-player run's is a few MB).
MAX_SUMMARY = 256 << 20


class Results:
    """One report directory.

    Every table comes from the report's one summary (the same figures as its index.html);
    `packets()` decodes the logs once more, with the same code as the report.
    """

    def __init__(self, report_dir: Union[str, "os.PathLike[str]"], horde: Optional[str] = None) -> None:
        self.dir = Path(report_dir)
        path = self.dir / "summary.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not a report directory (no summary.json); give the directory `horde run --out` wrote")
        size = path.stat().st_size
        if size > MAX_SUMMARY:
            raise ValueError(f"{path}: {size:,} bytes, more than a report's summary ({MAX_SUMMARY:,} at most); give the directory `horde run --out` wrote")
        try:
            summary = json.loads(path.read_bytes())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a report's summary (not JSON: {e}); give the directory `horde run --out` wrote") from None
        if not isinstance(summary, dict) or not isinstance(summary.get("analysis", {}), dict):
            raise ValueError(f"{path}: not a report's summary (no JSON object with an `analysis` object); give the directory `horde run --out` wrote")
        self.summary: Dict[str, Any] = summary
        self.horde = horde
        self._packets: Optional[pd.DataFrame] = None

    def __repr__(self) -> str:
        return f"Results({str(self.dir)!r}, scenario={self.summary.get('scenario')!r})"

    @property
    def kind(self) -> str:
        """Which kind of run wrote it: "scenario" (players), "circuits" (a regulated run) or
        "bots" (Quake 3 bots against a game server)."""
        if self.summary.get("kind") == "circuits" or "circuits" in self.summary:
            return "circuits"
        if "bots" in self.summary and "response_ms" in self.summary:
            return "bots"
        return "scenario"

    def _need(self, kind: str, table: str) -> None:
        if self.kind != kind:
            tables = {"scenario": "categories(), seconds(), throughput(), flows(), verdicts(), links(), packets()", "circuits": "circuits(), seconds()", "bots": "bots(), server_cpu()"}
            raise ValueError(f"{table}: a {kind} run's table, and {self.dir} is a {self.kind} run's report; its tables are {tables[self.kind]}")

    @property
    def analysis(self) -> Dict[str, Any]:
        self._need("scenario", "analysis")
        a = self.summary.get("analysis")
        if not isinstance(a, dict):
            raise ValueError(f"{self.dir}/summary.json has no analysis (a run interrupted before it began?)")
        return a

    def categories(self, total: bool = True) -> pd.DataFrame:
        """One row per behaviour category and direction (and the run's totals as category
        "total" when `total`): APDUs sent, received and lost, bytes, bit rate, rates and sizes
        against the model, one-way delay and jitter, the KS distances. The CDF lists are left
        out (they are in `summary`)."""
        self._need("scenario", "categories()")
        rows: List[Dict[str, Any]] = []
        for c in self.analysis.get("categories", []):
            for d in DIRECTIONS:
                rows.append({"category": c["category"], "direction": d, "player_seconds": c.get("player_seconds"), **_scalars(c.get(d, {}))})
        if total:
            for d in DIRECTIONS:
                if isinstance(self.analysis.get(d), dict):
                    rows.append({"category": "total", "direction": d, "player_seconds": None, **_scalars(self.analysis[d])})
        df = pd.DataFrame(rows)
        if not df.empty:
            df["loss_pct"] = (100.0 * df["lost"] / df["sent"].where(df["sent"] > 0)).astype(float)
        return df

    def cdf(self, category: str, direction: str, of: str) -> pd.DataFrame:
        """The distribution the report drew for one category ("total" for all of them) and
        direction, at the receiver: `of` is "size" (APDU bytes), "iat" (inter-arrival ms) or
        "delay" (one-way ms). Columns `x` and `F` (the share of samples ≤ x), at the report's
        200 quantile points, and `n`, the samples they summarise — what a figure plots."""
        self._need("scenario", "cdf()")
        if direction not in DIRECTIONS:
            raise ValueError(f"direction {direction!r}: give one of {', '.join(DIRECTIONS)}")
        samples = {"size": "size_samples", "iat": "iat_samples", "delay": "received"}
        if of not in samples:
            raise ValueError(f"of={of!r}: give one of {', '.join(samples)}")
        if category == "total":
            row = self.analysis.get(direction) or {}
        else:
            rows = {c["category"]: c for c in self.analysis.get("categories", [])}
            if category not in rows:
                raise KeyError(f"category {category!r} is not in this report; it has: {', '.join(rows) or 'none'}, and total")
            row = rows[category].get(direction) or {}
        points = row.get(f"{of}_cdf") or []
        df = pd.DataFrame(points, columns=["x", "F"], dtype=float)
        df["n"] = int(row.get(samples[of]) or 0)
        return df

    def seconds(self) -> pd.DataFrame:
        """One row per second of the run and direction: APDUs sent and lost, one-way delay p50
        and p99 (ms). For a regulated run, one row per second: circuits, the requested,
        allowed, sent and received rates, loss and task delay."""
        if self.kind == "circuits":
            return pd.DataFrame(self.summary.get("seconds", []))
        rows: List[Dict[str, Any]] = []
        for s in self.analysis.get("seconds", []):
            for i, d in enumerate(DIRECTIONS):
                rows.append(
                    {
                        "t_s": s["t_s"],
                        "direction": d,
                        "sent": _at(s.get("sent"), i),
                        "lost": _at(s.get("lost"), i),
                        "delay_p50_ms": _at(s.get("delay_p50_ms"), i),
                        "delay_p99_ms": _at(s.get("delay_p99_ms"), i),
                    }
                )
        return pd.DataFrame(rows, columns=["t_s", "direction", "sent", "lost", "delay_p50_ms", "delay_p99_ms"])

    def throughput(self) -> pd.DataFrame:
        """Bits per second each way, once a second."""
        self._need("scenario", "throughput()")
        return pd.DataFrame(self.analysis.get("throughput", []), columns=["t_s", "up_bps", "down_bps"])

    def flows(self) -> pd.DataFrame:
        """One row per flow of the players' side (one per player): packets and bytes sent and
        received, errors, first and last instants (ns)."""
        self._need("scenario", "flows()")
        client = self.summary.get("client") or {}
        return pd.DataFrame(client.get("flows", []))

    def verdicts(self) -> pd.DataFrame:
        """The report's verdict boxes: label, value, the limit it was judged against, whether
        it is what a good run shows, and which side it judges (generator or path)."""
        return pd.DataFrame(self.summary.get("verdicts", []), columns=["label", "value", "limit", "ok", "kind"])

    def links(self) -> pd.DataFrame:
        """One row per emulated link and direction (runs with `[emu]`): its counters over the
        run. Empty for runs without an emulated network."""
        self._need("scenario", "links()")
        rows: List[Dict[str, Any]] = []
        for link in self.summary.get("emulated_links") or []:
            for d, (src, dst) in (("ab", (link["a"], link["b"])), ("ba", (link["b"], link["a"]))):
                rows.append({"a": link["a"], "b": link["b"], "direction": d, "from": src, "to": dst, **_scalars(link.get(d) or {})})
        return pd.DataFrame(rows)

    def link_seconds(self) -> pd.DataFrame:
        """The emulated links' counters once a second (runs with `[emu]`)."""
        rows: List[Dict[str, Any]] = []
        for series in self.summary.get("emulated_link_series") or []:
            for t, ab, ba in series.get("points", []):
                for d, point in (("ab", ab), ("ba", ba)):
                    rows.append({"a": series["a"], "b": series["b"], "direction": d, "t_s": t, **point})
        return pd.DataFrame(rows)

    def circuits(self) -> pd.DataFrame:
        """A regulated run: one row per circuit (player): requested, allowed, sent and received
        kbit/s, loss, RTT, resent packets, throttles, task delay."""
        self._need("circuits", "circuits()")
        return pd.DataFrame(self.summary.get("circuits", []))

    def bots(self) -> pd.DataFrame:
        """A bots run: one row per bot: packets and bytes each way, request, response and
        snapshot rates, response time (`response_ms_p50`, `_p99`, …) and snapshot gaps."""
        self._need("bots", "bots()")
        return pd.json_normalize(self.summary.get("bots", []), sep="_")

    def server_cpu(self) -> pd.DataFrame:
        """A bots run: the game server's CPU once a second (user and system % of a core)."""
        self._need("bots", "server_cpu()")
        return pd.DataFrame(self.summary.get("server_cpu", []))

    def packets(self) -> pd.DataFrame:
        """One row per packet of the run's logs (flow, addresses, size, sequence number,
        scheduled / sent / arrival times, delay, lost and duplicate flags), from `horde decode
        --parquet` over the report's logs (needs the horde binary: `horde=`, HORDE_BIN or PATH)."""
        if self._packets is None:
            from .client import find_horde

            logs = sorted(str(p) for p in self.dir.glob("*.hlog"))
            if not logs:
                raise FileNotFoundError(f"{self.dir}: no logs (*.hlog) to decode; runs through agents keep them with --collect logs")
            with tempfile.TemporaryDirectory(prefix="horde-packets-") as tmp:
                out = Path(tmp) / "packets.parquet"
                done = subprocess.run(
                    [find_horde(self.horde), "decode", *logs, "--parquet", str(out)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    timeout=600,
                )
                if done.returncode != 0:
                    raise RuntimeError(f"horde decode failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")
                self._packets = pd.read_parquet(out)
        return self._packets


def _scalars(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if not isinstance(v, (list, dict))}


def _at(v: Any, i: int) -> Any:
    return v[i] if isinstance(v, list) and len(v) > i else None
