#!/usr/bin/env python3
"""The UrBBaN-Gen section of bench/RESULTS-papers.md from bench/papers/data/urbbangen-*.jsonl
(written by bench/papers/urbbangen.sh), with its figures redrawn as SVG on the papers' axes.
The papers' numbers are quoted from their text; their figures' curves are not in the text, so
only the points the text states are drawn beside Horde's."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import svgchart  # noqa: E402

DATA = os.path.join(HERE, "data")
CHARTS = os.path.join(HERE, "charts")
RESULTS = os.path.join(os.path.dirname(HERE), "RESULTS-papers.md")
BEGIN, END = "<!-- urbbangen: begin (bench/papers/urbbangen.sh writes this) -->", "<!-- urbbangen: end -->"


def points(test):
    p = os.path.join(DATA, f"urbbangen-{test}.jsonl")
    if not os.path.exists(p):
        return []
    return [json.loads(l) for l in open(p) if l.strip()]


def chart(name, *a, **k):
    return svgchart.chart(CHARTS, "papers/charts", name, *a, **k)


def f(x, d=1):
    return "-" if x is None else f"{x:,.{d}f}"


machine = open(os.path.join(DATA, "urbbangen-machine.txt")).read().strip() if os.path.exists(os.path.join(DATA, "urbbangen-machine.txt")) else "?"
L = [BEGIN, "", "## UrBBaN-Gen + IMUNES (Vasić, Sužnjević, Mikuc, Matijašević)", "",
     "Papers: the journal version (*Scalable software architecture for distributed MMORPG traffic generation "
     "based on integration of UrBBaN-Gen and IMUNES*, Tests 1–4, Figs. 4–10) and SoftCOM 2012 (*Improving "
     "distributed traffic generation performance by using IMUNES network emulator*, Figs. 2–5). Their testbed: "
     "two PCs (Intel Core i3-2120, 3.3 GHz, 4 GB), D-ITG senders in IMUNES jails (FreeBSD 8.3) or LXC containers "
     "on one PC, the receivers on the other.", "",
     f"Horde here: every sender node an emulated host (own network namespace) on one switch with the receiving "
     f"host, **all on this one machine** ({machine}) — senders, receiver, the switch and both logs share its "
     "CPUs, where the papers had a second PC for the receivers. One command per point: "
     "`horde send --emu ID --flows F` (the flow file: `node = \"h\"`, `repeat = N`, `dst = \"rx:9000\"`). "
     "Logs at both ends. CPU load is the machine's (`/proc/stat`, not idle, % of all its CPUs) over the run, "
     "as the papers measured the testbed PC's.", "",
     "Rerun: `sudo bash bench/papers/urbbangen.sh` (≤ 12 min), or one test: `ONLY=test1 sudo -E bash bench/papers/urbbangen.sh` "
     "(test1 ≈ 2.5 min, test2 ≈ 1.5 min, test4 ≤ 8 min).", ""]

t1 = points("test1")
if t1:
    L += ["### Test 1: UDP, 1,000 pkt/s × 64 B per sender node, 10 → 180 nodes (journal Figs. 4–5; SoftCOM Figs. 2–3)", "",
          "The papers (text): *\"after increasing the number of nodes over 40 (i.e., increasing packet rate over 40,000 pps) "
          "loss values of Linux testbed increase rapidly. IMUNES had a much smaller packet loss which started to occur at "
          "around 120 nodes\"*; *\"at generation rate of 180 000 packets per second (180 nodes at a rate of 1000pps) IMUNES "
          "had only 10% loss while the Linux implementation reached 50%\"* and IMUNES's *\"CPU load successfully reached 100%\"* (SoftCOM).", "",
          "| sender nodes | asked pkt/s | sent | lost | loss % | machine CPU % | Horde process CPU % of a core | send lateness p99 µs | OWD p50 / p99 ms |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in t1:
        L.append(f"| {p['streams']} | {p['streams'] * p['rate_per_stream']:,.0f} | {p['sent']:,} | {p['lost']:,} | {p['loss_pct']:.3f} | "
                 f"{f(p['host_busy_pct'])} | {f(p['process_cpu_pct'])} | {f(p['lateness_p99_us'])} | {f(p['delay_p50_ms'], 3)} / {f(p['delay_p99_ms'], 3)} |")
    first_loss = next((p["streams"] for p in t1 if p["lost"] > 0), None)
    L += ["", f"Horde: first loss at **{first_loss} nodes**." if first_loss else "Horde: **no loss at any point up to 180 nodes (180,000 pkt/s)**.", ""]
    L += [chart("urbbangen-test1-loss.svg", "Test 1: packet loss vs sender nodes (1,000 pkt/s × 64 B each)", "sender nodes", "loss %",
                [("Horde (this machine)", "#1f77b4", [(p["streams"], p["loss_pct"]) for p in t1], False),
                 ("IMUNES (paper, stated points)", "#d62728", [(120, 0.0), (180, 10.0)], True),
                 ("LXC (paper, stated points)", "#2ca02c", [(40, 0.0), (180, 50.0)], True)], ymax=60), "",
          chart("urbbangen-test1-cpu.svg", "Test 1: CPU load vs sender nodes", "sender nodes", "CPU load % (machine)",
                [("Horde: machine", "#1f77b4", [(p["streams"], p["host_busy_pct"] or 0) for p in t1], False),
                 ("IMUNES (paper: reached 100 % at 180)", "#d62728", [(180, 100.0)], True)], ymax=105), ""]

t2 = points("test2")
if t2:
    L += ["### Test 2: UDP, 100 sender nodes × 200 pkt/s, payload 64 → 1,472 B (journal Fig. 6; SoftCOM Fig. 4)", "",
          "The papers (text): *\"the Linux implementation varies significantly in load while the IMUNES is much more stable … "
          "Since the CPU load is rather low it is probably directly connected to the base testbed load\"* (no figures in the text).", "",
          "| payload B | sent | lost | loss % | machine CPU % | Horde process CPU % of a core | send lateness p99 µs |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for p in t2:
        L.append(f"| {p['size']} | {p['sent']:,} | {p['lost']:,} | {p['loss_pct']:.3f} | {f(p['host_busy_pct'])} | {f(p['process_cpu_pct'])} | {f(p['lateness_p99_us'])} |")
    L += ["", chart("urbbangen-test2-cpu.svg", "Test 2: CPU load vs packet size (100 nodes × 200 pkt/s)", "payload bytes", "CPU load %",
                    [("Horde: machine", "#1f77b4", [(p["size"], p["host_busy_pct"] or 0) for p in t2], False),
                     ("Horde: its process (% of one core / 2)", "#ff7f0e", [(p["size"], p["process_cpu_pct"] / p["cpus"]) for p in t2], True)]), ""]

t4 = points("test4")
if t4:
    best = {}
    for p in t4:
        k = (p["size"], p["streams"])
        ok = p["lost"] == 0 and p["unsent"] == 0
        rate = p["streams"] * p["rate_per_stream"]
        b = best.setdefault(k, [0, None])
        if ok:
            b[0] = max(b[0], rate)
        elif b[1] is None or rate < b[1]:
            b[1] = rate
    sizes = sorted({k[0] for k in best})
    streams = sorted({k[1] for k in best})
    L += ["### Test 4: the largest zero-loss rate from one sender node to one receiver, by packet size and streams (journal Fig. 10; SoftCOM Fig. 5)", "",
          "The paper (text): *\"We used the packet size of 64, 512, and 1500 bytes for 1, 10, 50, 100, and 250 streams. It can be noted "
          "that the highest packet rate without loss has been achieved for the packet size of 64 bytes\"* (IMUNES on VMware; the values "
          "are only in the figure). Horde's \"1500\" is a 1,472-B payload (a 1,500-B IP packet: no fragments). Search: double from "
          "20,000 pkt/s until a run loses (or leaves departures unsent), then halve the gap three times; 2-s runs.", "",
          "| payload B | " + " | ".join(f"{s} stream(s)" for s in streams) + " |", "|---:|" + "---:|" * len(streams)]
    for z in sizes:
        L.append(f"| {z} | " + " | ".join(f"{best[(z, s)][0]:,.0f} (loss at {f(best[(z, s)][1], 0)})" if (z, s) in best else "-" for s in streams) + " |")
    L += ["", chart("urbbangen-test4.svg", "Test 4: largest zero-loss rate vs payload size", "payload bytes", "pkt/s",
                    [(f"{s} stream(s)", c, [(z, best[(z, s)][0]) for z in sizes if (z, s) in best], False)
                     for s, c in zip(streams, ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"])]), ""]

L += ["### Test 3: TCP, Dungeons client → server model, 240 nodes, 1,000 → 10,000 flows (journal Figs. 7–9)", "",
      "Not run yet (issue 25): the papers report about 20 % CPU at 10,000 flows on both testbeds, no loss, 2.3 APDU/s per flow, "
      "and IAT and size CDFs of one random flow matching the model.", "", END]

text = open(RESULTS).read() if os.path.exists(RESULTS) else ""
section = "\n".join(L) + "\n"
if BEGIN in text and END in text:
    text = text[:text.index(BEGIN)] + section.rstrip("\n") + text[text.index(END) + len(END):]
else:
    text = text.rstrip("\n") + ("\n\n" if text else "") + section
open(RESULTS, "w").write(text)
print(f"wrote {RESULTS}")
