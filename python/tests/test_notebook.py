"""The example notebook (examples/python/urbbangen_test3.ipynb) runs start to end against a
real `horde ui`, with smaller parameters injected after its `parameters` cell (as papermill
does), and draws its three figures from tables that add up."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest

from conftest import REPO, missing

NOTEBOOK = REPO / "examples" / "python" / "urbbangen_test3.ipynb"


def test_the_notebook_is_clean_nbformat_4() -> None:
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4 and nb["metadata"]["kernelspec"]["language"] == "python"
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "one cell tagged `parameters`"
    for c in nb["cells"]:
        assert c["cell_type"] in ("markdown", "code") and isinstance(c["source"], list) and c["id"]
        if c["cell_type"] == "code":
            # committed without outputs: what it shows comes from running it
            assert c["outputs"] == [] and c["execution_count"] is None


def test_the_notebook_runs_and_draws_its_figures(horde_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        import matplotlib
    except ImportError:
        missing("needs matplotlib (pip install matplotlib) to run the example notebook")
    matplotlib.use("Agg")
    monkeypatch.setenv("HORDE_BIN", horde_bin)
    monkeypatch.chdir(tmp_path)
    nb = json.loads(NOTEBOOK.read_text())
    ns: Dict[str, Any] = {"__name__": "__main__"}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        exec(compile("".join(cell["source"]), f"{NOTEBOOK.name}:{cell['id']}", "exec"), ns)
        if "parameters" in cell["metadata"].get("tags", []):
            ns.update(LOADS=[20, 60], DURATION_S=4, OUT=str(tmp_path / "out"))
    table = ns["table"]
    assert list(table.index) == [20, 60]
    assert (table["received"] + table["lost"] == table["sent"]).all(), table
    assert (table["sent"] > 0).all() and (table["CPU % of a core"] > 0).all()
    for path in ns["figs"].values():
        svg = Path(path).read_text()
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg, path
    # every load's run ended well and left its report
    for r in ns["results"].values():
        assert (r.dir / "summary.json").is_file()
    assert os.path.isfile(tmp_path / "out" / "wow-dungeons.toml")
