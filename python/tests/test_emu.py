"""An emulated network scripted from Python (as root, with FRR): three OSPF routers in a line
and a host at each end, brought up through the console, commands in its nodes, a link changed
and failed, always taken down."""

from __future__ import annotations

import time

import pytest

import horde


def ospf_line() -> horde.Topology:
    t = horde.Topology("py-ospf-line")
    for r in ("r1", "r2", "r3"):
        t.add_router(r, routing="ospf", timers="fast")
    t.add_host("h1")
    t.add_host("h3")
    t.add_link("r1", "r2", live=True)
    t.add_link("r2", "r3")
    t.add_link("h1", "r1", subnet="10.61.1.0/24")
    t.add_link("h3", "r3", subnet="10.61.3.0/24")
    return t


def test_three_ospf_routers_come_up_answer_commands_and_go_down(console: horde.Client, root: None) -> None:
    emu = console.emu(ospf_line())
    try:
        emu.up()
        assert emu.id and emu.file and emu.file.endswith("py-ospf-line.toml")
        assert sorted(n.name for n in emu.nodes()) == ["h1", "h3", "r1", "r2", "r3"]
        h3 = emu.addrs("h3")[0]
        deadline = time.monotonic() + 60  # fast timers: neighbours in seconds
        while True:
            ping = emu["h1"].cmd(["ping", "-c", "1", "-W", "1", h3])
            if ping.ok or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert ping.ok, f"h1 cannot reach h3 ({h3}) through OSPF in 60 s: {ping}"
        neighbours = emu["r2"].cmd("vtysh -c 'show ip ospf neighbor'")
        assert neighbours.ok and neighbours.stdout.count("Full") == 2, neighbours
        failed = emu["r2"].cmd(["false"])
        assert failed.exit == 1 and not failed.ok and not failed.timed_out, failed
        with pytest.raises(horde.HordeError) as missing:
            emu["r2"].cmd(["no-such-command-here"])
        assert missing.value.status == 400 and "no such program" in missing.value.message, missing.value
        now = emu.link("r1", "r2", delay="40ms")
        assert now, now
        rtt = emu["h1"].cmd(["ping", "-c", "3", "-i", "0.2", h3])
        assert rtt.ok and "time=" in rtt.stdout
        times = [float(x.split("time=")[1].split()[0]) for x in rtt.stdout.splitlines() if "time=" in x]
        assert min(times) >= 80.0, f"40 ms each way on r1–r2: {times}"
        emu.link_down("r1", "r2")
        assert not emu["h1"].cmd(["ping", "-c", "1", "-W", "1", h3]).ok, "a pulled cable carries nothing"
        emu.link_up("r1", "r2")
    finally:
        gone = emu.down()
    assert gone.get("namespaces", 0) >= 5, gone
    assert all(e["id"] != emu.id for e in console.endpoint.request("GET", "/api/v1/emu")["experiments"])
