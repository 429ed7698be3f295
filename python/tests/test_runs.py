"""Runs through a real `horde ui` on loopback: start (a scenario as data and a file), stream
the events, commands applied and refused in their reply, results as DataFrames that add up."""

from __future__ import annotations

from pathlib import Path

import pytest

import horde

from conftest import REPO, missing, small_wow


def test_a_scenario_as_data_streams_takes_commands_and_gives_tables_that_add_up(console: horde.Client) -> None:
    run = console.start(small_wow(players=20, duration="5s"), online=10)
    kinds: list = []
    seconds: list = []
    replies: dict = {}
    for ev in run.events(timeout=60):
        kinds.append(ev.kind)
        if ev.kind == "progress":
            seconds.append(ev.t_s)
            if len(seconds) == 1:
                # answered at once, in the reply: applied with its instant, or refused with why
                replies["players"] = run.set_players(20)
                replies["link"] = run.link("r1", "r2", delay="50ms")
                replies["over"] = run.command({"command": "players", "online": 1 << 24})
                with pytest.raises(horde.HordeError) as bad:  # not a value at all: 400, named
                    run.command({"command": "players", "online": 10**9})
                assert bad.value.status == 400 and "online" in bad.value.message
    assert kinds[0] == "planned" and kinds[-1] == "finished", kinds
    assert seconds and all(b > a for a, b in zip(seconds, seconds[1:])), seconds
    assert replies["players"].applied and replies["players"].at_s is not None and replies["players"].at_s >= 0, replies
    assert not replies["link"].applied and "emu" in replies["link"].text, replies["link"]
    assert not replies["over"].applied and replies["over"].text, replies["over"]
    with pytest.raises(horde.HordeError) as late:
        run.stop()  # the run has finished: nothing to stop
    assert late.value.status == 409
    info = run.wait(timeout=30)
    assert info["exit"] == 0, info

    res = run.results()
    c = res.categories()
    per = c[c.category != "total"].groupby("direction")[["sent", "received", "lost", "bytes"]].sum().sort_index()
    tot = c[c.category == "total"].set_index("direction")[["sent", "received", "lost", "bytes"]].sort_index()
    assert per.equals(tot), (per, tot)  # every table adds up
    assert (tot["sent"] > 0).all()
    assert len(res.flows()) == 20  # raised to 20 online: every player connected
    s = res.seconds()
    assert s.groupby("direction")["sent"].sum().sort_index().equals(tot["sent"]), s
    p = res.packets()
    assert len(p) > 0 and {"size", "seq", "lost"} <= set(p.columns), p.columns


def test_a_scenario_file_with_overrides_and_a_bad_one_named(console: horde.Client) -> None:
    run = console.start(REPO / "examples" / "wow.toml", players=10, duration="2s", seed=3)
    assert run.wait(timeout=60)["exit"] == 0, run.info
    assert run.results().summary["seed"] == 3
    with pytest.raises(horde.HordeError) as bad:
        console.start(small_wow(players=0, service="no-such-service"))
    assert bad.value.status == 400 and "no-such-service" in bad.value.message, bad.value.message
    assert any(r.id == run.id for r in console.runs())


def test_a_wrong_token_is_refused_with_what_to_do(console: horde.Client) -> None:
    other = horde.Client(console.endpoint.base, token="0" * 32)
    with pytest.raises(horde.HordeError) as refused:
        other.runs()
    assert refused.value.status == 401 and "token" in refused.value.message, refused.value


def test_a_stop_ends_the_run_with_a_report_that_says_so(console: horde.Client) -> None:
    run = console.start(small_wow(players=10, duration="60s"))
    for ev in run.events(timeout=60):
        if ev.kind == "progress":
            assert run.stop().applied
            break
    info = run.wait(timeout=60)
    assert info.get("stopped") is True and info["exit"] == 130, info
    summary = run.results().summary
    assert summary.get("interruption"), "the report says it was stopped"
    assert summary["client"]["duration_s"] < 30, summary["client"]["duration_s"]


def test_a_sweep_is_one_table(console: horde.Client) -> None:
    df = horde.sweep(console, small_wow(duration="2s"), {"players": [5, 10]}, repeats=2, seed=1)
    assert sorted(set(df["players"])) == [5, 10] and sorted(set(df["repeat"])) == [0, 1]
    assert (df["exit"] == 0).all()
    totals = df[(df.category == "total") & (df.direction == "up")]
    assert len(totals) == 4 and (totals["sent"] > 0).all()


def test_bots_start_from_the_api_and_report_their_response_times(console: horde.Client) -> None:
    if not Path("/usr/games/openarena-server").exists():
        missing("needs openarena-server (apt-get install openarena-server)")
    run = console.bots(4, "3s", ramp="1s")
    assert run.wait(timeout=90)["exit"] == 0, run.info
    res = run.results()
    s = res.summary
    assert res.kind == "bots" and s["entered"] == 4 and s["response_ms"]["n"] > 0 and s["response_ms"]["p50"] > 0, s
    bots = res.bots()
    assert len(bots) == 4 and (bots["response_ms_n"] > 0).all() and len(res.server_cpu()) > 0, bots


def test_a_regulated_run_gives_its_circuits_and_seconds(console: horde.Client) -> None:
    scenario = {"name": "py-circuits", "service": "opensim", "players": 4, "duration": "4s", "seed": 1, "join": "uniform(0, 1)", "regulation": {"throttle": "mongoose", "regulator": "dual"}}
    run = console.start(scenario)
    assert run.wait(timeout=90)["exit"] == 0, run.info
    res = run.results()
    assert res.kind == "circuits"
    circuits = res.circuits()
    assert len(circuits) == 4 and (circuits["received_kbps"] > 0).all(), circuits
    assert len(res.seconds()) >= 3 and "allowance_kbps" in res.seconds().columns
    with pytest.raises(ValueError, match="circuits run's report"):
        res.categories()
