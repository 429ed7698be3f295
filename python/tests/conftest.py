"""The client against a real `horde ui` on loopback: the binary is HORDE_BIN (CI gives the
release build) or `horde` on PATH. Without one, or without root for the emulation tests, the
tests are skipped — and fail under CI=true, where everything they need is installed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

import horde

CI = os.environ.get("CI") == "true"
REPO = Path(__file__).resolve().parents[2]


def missing(why: str) -> None:
    if CI:
        pytest.fail(f"{why} (CI=true: nothing may be skipped)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def horde_bin() -> str:
    try:
        return horde.find_horde()
    except FileNotFoundError as e:
        missing(str(e))
        raise


@pytest.fixture(scope="session")
def console(horde_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[horde.Client]:
    runs = tmp_path_factory.mktemp("runs")
    c = horde.Console(runs, horde=horde_bin)
    client = c.start()
    try:
        yield client
    finally:
        code = c.stop()
        assert code == 0, f"horde ui ended with {code}: {list(c.log)[-5:]}"


@pytest.fixture
def root() -> None:
    if os.geteuid() != 0:
        missing("needs root: network namespaces (sudo -E python3 -m pytest)")
    if not Path("/usr/lib/frr/ospfd").exists():
        missing("needs FRR (apt-get install frr) for the OSPF routers")


def small_wow(**fields: object) -> dict:
    """A short WoW scenario as data (the fields of a scenario file)."""
    sc: dict = {"name": "py-wow", "service": "wow", "players": 20, "duration": "4s", "seed": 1, "start_hour": 20, "server": "127.0.0.1:0"}
    sc.update(fields)
    return sc
