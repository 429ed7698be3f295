#!/usr/bin/env python3
"""The D-ITG section of bench/RESULTS-papers.md from bench/papers/data/ditg.jsonl (written by
bench/papers/ditg.sh), with the paper's Figs. 13-17 redrawn as SVG: received data rate vs
requested packet rate per tool, logging at the receiver and at both ends."""
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
BEGIN, END = "<!-- ditg: begin (bench/papers/ditg.sh writes this) -->", "<!-- ditg: end -->"
COLORS = {"horde": "#1f77b4", "d-itg": "#d62728", "mgen": "#2ca02c", "iperf3": "#9467bd"}

pts = [json.loads(l) for l in open(os.path.join(DATA, "ditg.jsonl")) if l.strip()] if os.path.exists(os.path.join(DATA, "ditg.jsonl")) else []
machine = open(os.path.join(DATA, "ditg-machine.txt")).read().strip().replace("\n", "; ") if os.path.exists(os.path.join(DATA, "ditg-machine.txt")) else "?"
L = [BEGIN, "", "## D-ITG (Avallone, Emma, Pescapè, Ventre)", ""]
if pts:
    secs = pts[0]["secs"]
    L += ["Paper: *A Distributed Multiplatform Architecture for Traffic Generation*, Table 4 (CBR UDP, payload c = 1,024 B, "
          "t = 60 s; sender and receiver on one Linux host, and on two) and Figs. 13–17. Its numbers (text): *\"In the case of "
          "C=75000 pkt/s, c=1024 byte, t=60 s D-ITG reaches a received data rate equal to 611 Mbit/s with a percentage loss rate "
          "equal to 0.4%\"*, Iperf *\"a percentage loss rate equal to 5,3%\"* there; logging at both ends, *\"C=63000 pkt/s … D-ITG "
          "reaches a received data rate equal to 511 Mbps\"*, *\"both D-ITG and Iperf can receive all sent packets. Other analyzed "
          "generators present a high rate of loss\"*; local maximum *\"511 Mbps both at sender and receiver side\"*.", "",
          f"Here: all four tools in one session on this machine's loopback ({machine}); {secs:.0f} s per point "
          f"(`SECS=60 bash bench/papers/ditg.sh` for the paper's 60 s). \"Received vs requested\" is the paper's percentage "
          "loss rate *between real and expected data rate*, signed (a tool that sends faster than asked shows +); \"lost of sent\" "
          "is against what the sender logged (D-ITG without a sender log: received + the sequence gaps ITGDec counts; MGEN without "
          "one: the highest sequence number received + 1). iperf3 keeps no per-packet log (its "
          "count at the end only), so it has one row per rate, as in the paper.", "",
          "Commands per point: Horde `horde recv --udp P --log r.hlog` + `horde send --dst 127.0.0.1:P --rate C --size 1024 -t S "
          "[--log s.hlog]`; D-ITG `ITGRecv` + `ITGSend -a 127.0.0.1 -T UDP -C C -c 1024 -t S·1000 [-l snd.log] -x rcv.log`; MGEN "
          "`mgen output rx.log event \"LISTEN UDP P\"` + `mgen [txlog] output tx.log event \"0.0 ON 1 UDP DST 127.0.0.1/P PERIODIC [C 1024]\" "
          "event \"S OFF 1\"`; iperf3 `-u -l 1024 -b C·8192`.", ""]
    def rng(vals, fmt):
        return fmt.format(min(vals)) if min(vals) == max(vals) else (fmt + " … " + fmt).format(min(vals), max(vals))
    summary = []
    for tool in COLORS:
        rows = [p for p in pts if p["tool"] == tool]
        if rows:
            err = [-p["loss_vs_asked_pct"] for p in rows]
            lost = [p["loss_vs_sent_pct"] for p in rows if p["loss_vs_sent_pct"] is not None]
            summary.append(f"**{tool}** delivered {rng(err, '{:+.3f}')} % off the requested rate and lost {rng(lost, '{:.3f}') if lost else '-'} % of what it sent")
    L += ["Over every rate and both logging modes: " + "; ".join(summary) + ".", ""]
    for mode, title, fig in [("receiver", "log at the receiver", "Figs. 13–15"), ("both", "logs at both ends", "Figs. 16–17")]:
        rows = [p for p in pts if p["mode"] in (mode, "none")] if mode == "receiver" else [p for p in pts if p["mode"] == mode]
        if not rows:
            continue
        L += [f"### CBR UDP 1,024 B, {title} (paper {fig})", "",
              "| requested pkt/s | tool | sent pkt/s | received pkt/s | received Mbit/s | received vs requested | lost of sent % |", "|---:|---|---:|---:|---:|---:|---:|"]
        for p in sorted(rows, key=lambda p: (p["rate"], list(COLORS).index(p["tool"]))):
            ls = "-" if p["loss_vs_sent_pct"] is None else f"{p['loss_vs_sent_pct']:.3f}"
            L.append(f"| {p['rate']:,.0f} | {p['tool']} | {p['sent_pps']:,.0f} | {p['received_pps']:,.0f} | {p['received_mbps']:.1f} | {-p['loss_vs_asked_pct']:+.2f} % | {ls} |")
        top = max(p["rate"] for p in rows)
        at = {p["tool"]: p for p in rows if p["rate"] == top}
        if "horde" in at:
            h = at["horde"]["received_pps"]
            ratios = ", ".join(f"{t} {h / max(at[t]['received_pps'], 1):.2f}×" for t in ("d-itg", "mgen", "iperf3") if t in at)
            L += ["", f"At {top:,.0f} pkt/s requested, Horde received / each peer received: {ratios}."]
        series = []
        for tool in COLORS:
            d = sorted((p["rate"], p["received_mbps"]) for p in rows if p["tool"] == tool)
            if d:
                series.append((tool, COLORS[tool], d, False))
        series.append(("requested", "#000000", sorted({(p["rate"], p["rate"] * 1024 * 8 / 1e6) for p in rows}), True))
        if mode == "receiver":
            series.append(("D-ITG in the paper (611 at 75k)", "#ff9896", [(75000, 611.0)], True))
        else:
            series.append(("D-ITG in the paper (511 at 63k)", "#ff9896", [(63000, 511.0)], True))
        L += ["", svgchart.chart(CHARTS, "papers/charts", f"ditg-{mode}.svg", f"Received data rate vs requested packet rate, {title}",
                                 "requested pkt/s", "received Mbit/s", series), ""]
L += [END]
results.write_section(BEGIN, END, L)
