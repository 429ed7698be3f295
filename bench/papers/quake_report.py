#!/usr/bin/env python3
"""The Quake server study's section of bench/RESULTS-papers.md from bench/papers/data/quake.jsonl
(written by bench/papers/quake.sh): the knee per CPU cap and map, response rate and response
time vs players (the paper's Figs. 9, 11, 14, 19), the server's frame time split into game and
the rest (Figs. 7, 17, 21), requests per server frame."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import svgchart  # noqa: E402
import results  # noqa: E402

DATA = os.path.join(HERE, "data")
CHARTS = os.path.join(HERE, "charts")
BEGIN, END = "<!-- quake: begin (bench/papers/quake.sh writes this) -->", "<!-- quake: end -->"
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]


def share(p):
    return p.get("server_kernel_share") or 0.0


def f(x, d=1):
    return "-" if x is None else f"{x:,.{d}f}"


p = os.path.join(DATA, "quake.jsonl")
pts = [json.loads(l) for l in open(p) if l.strip()] if os.path.exists(p) else []
machine = open(os.path.join(DATA, "quake-machine.txt")).read().strip().replace("\n", "; ") if os.path.exists(os.path.join(DATA, "quake-machine.txt")) else "?"
L = [BEGIN, "", "## The Quake server study (Abdelkhalik, Bilas, Moshovos)", ""]
if pts:
    L += ["Paper: *Behavior and Performance of Interactive Multi-player Game Servers* (Quake on a 400 MHz Pentium II). Its findings "
          "(text): *\"Current, sequential game servers can support at most up to a few tens of users (60–100)\"*; *\"after 64 players the "
          "server is saturated. The server is not able to keep up with player requests and … server replies start dropping\"* (Fig. 14, small "
          "map; Fig. 19, large map: *\"the server response rate drops after 64 players\"*); *\"the server spends about an equal fraction of its "
          "time in network and in game-related processing\"* (Figs. 7, 17, 21); *\"the maximum response time increases linearly with the number "
          "of players\"*; *\"a surprisingly low IPC of 0.416\"* (Table II). The paper proposes *\"the total server response rate and the "
          "average response time as measured in all clients\"* as the measures.", "",
          f"Here ({machine}): one OpenArena server (ioquake3 engine, `sv_fps 20`, 64-client cap) on loopback with its CPU capped by a "
          "cgroup at a fraction of one core, so that it saturates below the cap as the paper's 400 MHz server did below ~64; Horde's "
          "protocol-true bots step the players up, one `horde bots --server 127.0.0.1:P -n N` per step on the same server. "
          "**Knee**: the first step where the response rate per bot falls under 95 % of `sv_fps` or the p99 response time passes "
          "150 ms (the bots' own saturation test). Server CPU is the cgroup's own accounting (`cpuacct.usage`), split into kernel "
          "(`usage_sys`: the sockets, i.e. the network stack) and user space (the game, parsing commands, building snapshots) — "
          "the nearest this engine offers to the paper's network vs game split (the paper counts request parsing and reply "
          "building as network time; here they are user time, so the kernel share is a lower bound of its network share). "
          "Frame timing: the engine's `com_speeds 1` lines, integer milliseconds per frame averaged over the step: `gm` is the "
          "game module's frame, `sv` the rest of the server frame (snapshots built and sent); client commands run while packets "
          "are handled between frames, which the engine counts with its idle wait (`ev`), so `ev` is not shown. Sub-millisecond "
          "frames read as 0 at this resolution. Requests per frame: the bots' request rate / `sv_fps`.", "",
          "Rerun: `sudo bash bench/papers/quake.sh` (≈ 14 min), one map: `ONLY=oa_dm1 sudo -E bash bench/papers/quake.sh`.", ""]
    maps = sorted({p["map"] for p in pts})
    for m in maps:
        caps = sorted({p["cap_pct"] for p in pts if p["map"] == m})
        L += [f"### Map {m}", "",
              "| CPU cap % of a core | players | in game | responses/s per bot | response ms mean / p50 / p99 | server CPU % of a core | of it kernel | requests per frame | frame ms: game (gm) / rest of server (sv) | saturated |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        knees = {}
        for c in caps:
            rows = sorted((p for p in pts if p["map"] == m and p["cap_pct"] == c), key=lambda p: p["players"])
            knees[c] = next((p["players"] for p in rows if p["saturated"]), None)
            for p in rows:
                ks = p.get("server_kernel_share")
                L.append(f"| {c} | {p['players']} | {p['entered']} | {p['response_rate_per_bot']:.1f} | {f(p['response_ms_mean'])} / {f(p['response_ms_p50'])} / {f(p['response_ms_p99'])} | "
                         f"{f(p['server_cpu_pct'])} | {'-' if ks is None else f'{100 * ks:.0f} %'} | {p['requests_per_frame']:.1f} | {p['frame_gm_ms']:.2f} / {p['frame_sv_ms']:.2f} | {'**yes**' if p['saturated'] else 'no'} |")
        past = [p["response_ms_p99"] for p in pts if p["map"] == m and knees.get(p["cap_pct"]) and p["players"] >= knees[p["cap_pct"]] and p["response_ms_p99"]]
        top = [p for p in pts if p["map"] == m and p["players"] == max(q["players"] for q in pts if q["map"] == m) and p.get("server_kernel_share") is not None]
        L += ["", "Knee (first saturated step): " + "; ".join(f"cap {c} %: {'**' + str(k) + ' players**' if k else 'not reached up to 64'}" for c, k in knees.items()) + "."
              + (f" Past the knees the p99 response time was {min(past):.0f}–{max(past):.0f} ms (bound 150 ms)." if past else "")
              + (f" The kernel's share of the server's CPU at {top[0]['players']} players: {min(100 * p['server_kernel_share'] for p in top):.0f}–{max(100 * p['server_kernel_share'] for p in top):.0f} % (the paper: about half network, which there includes parsing requests and building replies)." if top else ""), ""]
        rate = [(f"cap {c} %", COLORS[i % 5], [(p["players"], p["response_rate_per_bot"]) for p in sorted((q for q in pts if q["map"] == m and q["cap_pct"] == c), key=lambda q: q["players"])], False) for i, c in enumerate(caps)]
        rate.append(("95 % of sv_fps", "#000000", [(4, 19.0), (64, 19.0)], True))
        L += [svgchart.chart(CHARTS, "papers/charts", f"quake-{m}-rate.svg", f"Server responses per bot per second vs players ({m}); knees: "
                             + ", ".join(f"{c} %→{k or '-'}" for c, k in knees.items()), "players", "responses/s per bot", rate, ymax=22), "",
              svgchart.chart(CHARTS, "papers/charts", f"quake-{m}-time.svg", f"Response time p99 vs players ({m})", "players", "ms",
                             [(f"cap {c} %", COLORS[i % 5], [(p["players"], p["response_ms_p99"] or 0) for p in sorted((q for q in pts if q["map"] == m and q["cap_pct"] == c), key=lambda q: q["players"])], False) for i, c in enumerate(caps)]
                             + [("bound 150 ms", "#000000", [(4, 150.0), (64, 150.0)], True)]), "",
              svgchart.chart(CHARTS, "papers/charts", f"quake-{m}-split.svg", f"Server CPU: kernel (network stack) vs user (game), % of a core ({m}, cap {caps[-1]} %)", "players", "% of a core",
                             [(lbl, col, [(p["players"], (p["server_cpu_pct"] or 0) * (share(p) if key == "k" else 1 - share(p))) for p in sorted((q for q in pts if q["map"] == m and q["cap_pct"] == caps[-1]), key=lambda q: q["players"]) if p.get("server_kernel_share") is not None], False)
                              for lbl, col, key in [("kernel", "#1f77b4", "k"), ("user", "#2ca02c", "u")]]), ""]
    L += ["IPC: " + ("not measured — " + machine.split("perf: ")[1] if "perf: " in machine else "see the machine line") + ".", ""]
L += [END]
results.write_section(BEGIN, END, L)
