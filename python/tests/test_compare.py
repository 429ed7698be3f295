"""`horde.compare`: `horde compare`'s table as DataFrames (the statistics and their own tests
live in crates/scenario/src/compare.rs); on real runs one seed twice has the same schedules,
two seeds differ within noise, and ten times the players is beyond it."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any, Dict, List

import pytest

import horde
from horde.comparison import compare, main

from conftest import small_wow


def summary(players: int, seed: int, rate: float, lost: int = 0) -> Dict[str, Any]:
    def d(sent: int) -> Dict[str, Any]:
        return {
            "sent": sent,
            "received": sent - lost,
            "lost": lost,
            "bytes": 30 * sent,
            "bitrate_bps": 240.0 * sent / 10,
            "departure_rate_per_player": sent / players / 10,
            "model_idt_cv": 1.5,
            "departure_iat_samples": sent - players,
            "ks_departure_size": 0.01,
            "size_samples": sent - lost,
            "size_cdf": [[6, 0.2], [35, 1.0]],
            "iat_samples": sent - players,
            "iat_cdf": [[0.0, 0.1], [250.0, 0.7], [1800.0, 1.0]],
            "delay_p50_ms": 0.05,
            "delay_p99_ms": 1.5,
        }

    sent = int(rate * players * 10)
    return {
        "scenario": "s",
        "service": "wow",
        "players": players,
        "seed": seed,
        "duration_s": 10.0,
        "analysis": {"categories": [{"category": "trading", "up": d(sent), "down": d(sent)}], "up": d(sent), "down": d(sent)},
        "emulated_links": [{"a": "r1", "b": "r2", "ab": {"packets": 1000, "lost": 10}, "ba": {"packets": 900, "lost": 0}}],
        "verdicts": [{"label": "players connected", "value": f"{players} of {players}", "limit": "all", "ok": True, "kind": "generator"}],
    }


def test_a_comparison_of_reports_on_disk(horde_bin: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    dirs = []
    for i, s in enumerate([summary(100, 1, 2.0), summary(100, 1, 2.0), summary(100, 2, 2.02), summary(1000, 1, 2.0), summary(100, 1, 2.0, lost=60)]):
        p = tmp_path / f"r{i}"
        p.mkdir()
        (p / "summary.json").write_text(json.dumps(s))
        dirs.append(p)
    c = compare(*dirs)
    assert c.same_schedules(1) and not c.same_schedules(2)
    assert list(c.runs["beyond_noise"])[1:3] == [0, 0]
    beyond = c.beyond_noise()
    assert set(beyond[beyond.run == 3]["figure"]) == {"APDU/s"}, beyond  # ten times the players: the totals
    lossy = beyond[beyond.run == 4]
    assert set(lossy["figure"]) == {"loss %"} and (lossy["b"] == 3.0).all(), lossy
    assert len(c.verdicts) == 5 and set(c.verdicts["run"]) == {0, 1, 2, 3, 4}
    # the command line: the same, as text, JSON and HTML
    out, page = tmp_path / "c.json", tmp_path / "c.html"
    assert main([str(d) for d in dirs[:4]] + ["--json", str(out), "--html", str(page)]) == 0
    j = json.loads(out.read_text())
    assert j["alpha"] == 0.05 and len(j["runs"]) == 4 and any(f["beyond_noise"] for f in j["figures"])
    assert "<table>" in page.read_text() and 'class="beyond"' in page.read_text()
    assert "beyond noise: 2 row(s)" in capfd.readouterr().out
    from horde.__main__ import main as horde_main

    assert horde_main(["compare", str(dirs[0]), str(tmp_path / "nope")]) == 2
    assert "no summary.json" in capfd.readouterr().err
    with pytest.raises(ValueError, match="two or more"):
        compare(dirs[0])
    # hostile summaries: each named, with what it is not
    bad = tmp_path / "bad"
    bad.mkdir()
    for text, says in (("{nope", "not JSON"), ("[1, 2]", "another type"), ('{"analysis": 3}', "another type"), (b"\xff\xfe", "not UTF-8")):
        (bad / "summary.json").write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(ValueError, match=says):
            compare(dirs[0], bad)
    wrong = summary(100, 1, 2.0)
    wrong["analysis"]["up"]["sent"] = "many"
    (bad / "summary.json").write_text(json.dumps(wrong))
    with pytest.raises(ValueError, match="a field is missing or of another type"):
        compare(dirs[0], bad)
    assert horde_main(["compare", str(dirs[0]), str(bad)]) == 2
    assert "another type" in capfd.readouterr().err


def test_runs_compared_one_seed_twice_two_seeds_and_ten_times_the_players(console: horde.Client) -> None:
    def run(players: int, seed: int) -> horde.Results:
        r = console.start(small_wow(players=players, duration="4s"), seed=seed)
        assert r.wait(timeout=90)["exit"] == 0, r.info
        return r.results()

    c = compare(run(30, 1), run(30, 1), run(30, 2), run(300, 1))
    differ = c.figures[(c.figures.run == 1) & (c.figures.kind == "schedule") & (c.figures.a != c.figures.b)]
    assert c.same_schedules(1), differ[["scope", "direction", "figure", "a", "b"]].to_string()
    assert not c.same_schedules(2)
    beyond = c.beyond_noise()
    assert beyond[beyond.run.isin([1, 2])].empty, beyond
    assert {("total", "up"), ("total", "down")} <= set(zip(beyond[beyond.run == 3]["scope"], beyond[beyond.run == 3]["direction"])), beyond


def test_mutated_summaries_are_compared_or_named_never_a_crash(horde_bin: str, tmp_path: Path) -> None:
    """A fuzz pass over compare's input through the binary: 150 summaries with a value replaced by junk or a key
    removed, each either compared or refused with a ValueError that names the report."""
    rng = random.Random(11)
    junk: List[Any] = [None, "x", -1, 0, [], {}, 1e308, float("nan"), [[1]], True, {"sent": 1}]
    base = tmp_path / "base"
    base.mkdir()
    (base / "summary.json").write_text(json.dumps(summary(100, 1, 2.0)))
    other = tmp_path / "other"
    other.mkdir()

    def leaves(node: Any, path: tuple = ()) -> List[tuple]:
        out = [path] if path else []
        if isinstance(node, dict):
            for k, v in node.items():
                out += leaves(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                out += leaves(v, path + (i,))
        return out

    outcomes = {"compared": 0, "refused": 0}
    for _ in range(150):
        s = summary(100, 1, 2.0)
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(leaves(s))
            parent = s
            for k in path[:-1]:
                parent = parent[k]
            if isinstance(parent, dict) and rng.random() < 0.3:
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(rng.choice(junk))
        (other / "summary.json").write_text(json.dumps(s))
        try:
            c = compare(base, other)
            c.to_dict()
            c.to_html(tmp_path / "c.html")
            outcomes["compared"] += 1
        except ValueError as e:
            assert str(other) in str(e) or "summary" in str(e), e
            outcomes["refused"] += 1
    assert outcomes["compared"] > 0 and outcomes["refused"] > 0, outcomes
