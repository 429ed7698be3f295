"""A scenario over a parameter grid: every combination, `repeats` times each, one after the
other on one console, collected into one DataFrame."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence

import pandas as pd

if TYPE_CHECKING:
    from .client import Client, Scenario
    from .results import Results

# What `start` takes as an override; any other grid key is a field of the scenario itself.
_OVERRIDES = ("players", "online", "duration", "seed")


def sweep(
    client: "Client",
    scenario: "Scenario",
    grid: Mapping[str, Sequence[Any]],
    *,
    repeats: int = 1,
    table: Optional[Callable[["Results"], pd.DataFrame]] = None,
    seed: Optional[int] = None,
    timeout: Optional[float] = None,
) -> pd.DataFrame:
    """Run `scenario` for every combination of `grid`'s values, `repeats` times each, and return
    one DataFrame: `table(results)` of each run (default: its per-category table) with the
    grid's values, `repeat` and the run's report directory as columns.

    Grid keys `players`, `online`, `duration` and `seed` are `horde run`'s overrides; any other
    key is a field of the scenario, which must then be given as data (a dict). Repeat r of a
    combination runs with seed `seed + r` when `seed` is given (else the scenario's own seed:
    identical schedules)."""
    if repeats < 1:
        raise ValueError("repeats: at least 1")
    keys = list(grid)
    fields = [k for k in keys if k not in _OVERRIDES]
    if fields and not isinstance(scenario, Mapping):
        raise TypeError(f"grid keys {fields} are scenario fields: give the scenario as a dict to vary them")
    frames: List[pd.DataFrame] = []
    for values in itertools.product(*(grid[k] for k in keys)):
        point = dict(zip(keys, values))
        for r in range(repeats):
            overrides: Dict[str, Any] = {k: v for k, v in point.items() if k in _OVERRIDES}
            if seed is not None and "seed" not in point:
                overrides["seed"] = seed + r
            sc: Any = scenario
            if fields:
                sc = {**dict(scenario), **{k: point[k] for k in fields}}  # type: ignore[arg-type]
            run = client.start(sc, **overrides)
            run.wait(timeout)
            res = run.results()
            df = (table or (lambda x: x.categories()))(res).copy()
            for k, v in point.items():
                df[k] = v
            df["repeat"] = r
            df["exit"] = run.info.get("exit")
            df["report"] = run.out
            frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
