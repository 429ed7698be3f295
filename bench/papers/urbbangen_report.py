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
sys.path.insert(0, HERE)
import svgchart  # noqa: E402
import results  # noqa: E402

DATA = os.path.join(HERE, "data")
CHARTS = os.path.join(HERE, "charts")
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
     "Logs at both ends. CPU load is the machine's (cpuidle residency: busy % of all its CPUs; `/proc/stat`'s tick-sampled idle misses most of a sleeping pacer's work on this VM) over the run, "
     "as the papers measured the testbed PC's.", "",
     "Rerun: `sudo bash bench/papers/urbbangen.sh` (≤ 16 min), or one test: `ONLY=test1 sudo -E bash bench/papers/urbbangen.sh` "
     "(test1 ≈ 2.5 min, test2 ≈ 1.5 min, test3 ≈ 4 min, test4 ≤ 8 min).", ""]

t1 = points("test1")
if t1:
    L += ["### Test 1: UDP, 1,000 pkt/s × 64 B per sender node, 10 → 180 nodes (journal Figs. 4–5; SoftCOM Figs. 2–3)", "",
          "The papers (text): *\"after increasing the number of nodes over 40 (i.e., increasing packet rate over 40,000 pps) "
          "loss values of Linux testbed increase rapidly. IMUNES had a much smaller packet loss which started to occur at "
          "around 120 nodes\"*; *\"at generation rate of 180 000 packets per second (180 nodes at a rate of 1000pps) IMUNES "
          "had only 10% loss while the Linux implementation reached 50%\"* and IMUNES's *\"CPU load successfully reached 100%\"* (SoftCOM).", "",
          "| sender nodes | asked pkt/s | sent pkt/s | departures not sent (sender behind) | received / sent | lost | loss % | machine CPU % | Horde process CPU % of a core | send lateness p99 µs | OWD p50 / p99 ms |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in t1:
        L.append(f"| {p['streams']} | {p['streams'] * p['rate_per_stream']:,.0f} | {p['pkt_rate']:,.0f} | {p['unsent']:,} | {p['sent'] - p['lost']:,} / {p['sent']:,} | {p['lost']:,} | {p['loss_pct']:.3f} | "
                 f"{f(p['host_busy_pct'])} | {f(p['process_cpu_pct'])} | {f(p['lateness_p99_us'])} | {f(p['delay_p50_ms'], 3)} / {f(p['delay_p99_ms'], 3)} |")
    first_loss = next((p["streams"] for p in t1 if p["lost"] > 0), None)
    first_short = next((p for p in t1 if p["unsent"] > 0.001 * p["streams"] * p["rate_per_stream"] * p["secs"]), None)
    L += ["", (f"Horde: first loss at **{first_loss} nodes**. " if first_loss else "Horde: **no packet sent was lost at any point up to 180 nodes**. ")
          + (f"From {first_short['streams']} nodes the sender could not keep the asked rate on this machine (more than 0.1 % of departures still due at "
             f"the end): {first_short['pkt_rate']:,.0f} of {first_short['streams'] * first_short['rate_per_stream']:,.0f} pkt/s; the largest rate sent was "
             f"{max(p['pkt_rate'] for p in t1):,.0f} pkt/s, with the machine's CPUs {max(p['host_busy_pct'] or 0 for p in t1):.0f} % busy (senders, "
             "the bridge, the receiver and both logs on 2 cores; the papers' receivers had a PC of their own)." if first_short else "The sender kept every asked rate."), ""]
    L += [chart("urbbangen-test1-loss.svg", "Test 1: packet loss vs sender nodes (1,000 pkt/s × 64 B each)", "sender nodes", "loss %",
                [("Horde: lost of sent", "#1f77b4", [(p["streams"], p["loss_pct"]) for p in t1], False),
                 ("Horde: short of the asked rate", "#9467bd", [(p["streams"], max(0.0, 100 * (1 - p["pkt_rate"] / (p["streams"] * p["rate_per_stream"])))) for p in t1], True),
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
        L.append(f"| {p['size']:.0f} | {p['sent']:,} | {p['lost']:,} | {p['loss_pct']:.3f} | {f(p['host_busy_pct'])} | {f(p['process_cpu_pct'])} | {f(p['lateness_p99_us'])} |")
    L += ["", chart("urbbangen-test2-cpu.svg", "Test 2: CPU load vs packet size (100 nodes × 200 pkt/s)", "payload bytes", "CPU load %",
                    [("Horde: machine", "#1f77b4", [(p["size"], p["host_busy_pct"] or 0) for p in t2], False),
                     ("Horde: its process (% of one core / 2)", "#ff7f0e", [(p["size"], p["process_cpu_pct"] / p["cpus"]) for p in t2], True)]), ""]

t3 = points("test3")
cdf_path = os.path.join(DATA, "urbbangen-test3-cdf.json")
cdf = json.load(open(cdf_path)) if os.path.exists(cdf_path) else None
if t3:
    L += ["### Test 3: TCP, the Dungeons client → server model, 240 sender nodes, 1,000 → 10,000 flows (journal Figs. 7–9)", "",
          "The paper (text): *\"At 10,000 flows both systems had similar CPU load at around 20%. There was no packet loss on the TCP "
          "flows as each generated TCP flow had on average 2.3 packets per second\"*; CPU *\"at below 25%\"* (Fig. 9); the IAT and size "
          "CDFs of one flow *\"do not deteriorate when the load is increasing\"* (Figs. 7–8). The papers replaced the model's APDU "
          "sizes by a normal distribution (a D-ITG 2.8 receiver bug); Horde sends the published model (Weibull/constant "
          "inter-departure mix, the traces' discrete sizes: `crates/model/services/wow.toml`, `[state.dungeons]` up).", "",
          "| flows | APDUs | lost | APDU/s per flow | machine CPU % | Horde process CPU % of a core | OWD p50 / p99 ms |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for p in t3:
        L.append(f"| {p['streams']:,} | {p['sent']:,} | {p['lost']:,} | {p['pkt_rate'] / p['streams']:.2f} | {f(p['host_busy_pct'])} | "
                 f"{f(p['process_cpu_pct'])} | {f(p['delay_p50_ms'], 3)} / {f(p['delay_p99_ms'], 3)} |")
    lim = os.path.join(DATA, "urbbangen-test3-limit.txt")
    if os.path.exists(lim):
        nmax, hard = open(lim).read().split()[:2]
        if int(nmax) < 10000:
            L += ["", f"The largest point is {int(nmax):,} flows, not 10,000: both ends of every TCP connection are in one process here "
                  f"(`send --emu` runs the receivers as threads), 10,000 flows need ~20,300 descriptors, and this container's hard limit is "
                  f"{int(hard):,} and cannot be raised (no CAP_SYS_RESOURCE). `send --emu` refuses such a run up front with that explanation."]
    L += ["", chart("urbbangen-test3-cpu.svg", "Test 3: CPU load vs TCP flows (Dungeons model)", "TCP flows", "CPU load % (machine)",
                    [("Horde: machine", "#1f77b4", [(p["streams"], p["host_busy_pct"] or 0) for p in t3], False),
                     ("papers: ~20 % at 10,000 (both testbeds)", "#d62728", [(10000, 20.0)], True)], ymax=100), ""]
if cdf:
    o, a, c = cdf["one_flow"], cdf["all"], cdf["censored"]
    verdict = lambda d, k: "consistent" if d <= k else "differs"
    L += [f"Distributions at {cdf['flows']:,} flows (the largest point), at the receiver:", "",
          "| sample | n | KS vs the model | 5 % critical value | verdict |", "|---|---:|---:|---:|---|",
          f"| one flow (#{o['flow']}, drawn with seed 25): inter-arrival | {o['iat_n']} | {o['iat_ks']:.4f} | {o['iat_crit']:.4f} | {verdict(o['iat_ks'], o['iat_crit'])} |",
          f"| one flow: APDU size | {o['size_n']} | {o['size_ks']:.4f} | {o['size_crit']:.4f} | {verdict(o['size_ks'], o['size_crit'])} |",
          f"| all flows: APDU size | {a['size_n']:,} | {a['size_ks']:.4f} | {a['size_crit']:.4f} | {verdict(a['size_ks'], a['size_crit'])} |",
          f"| all flows: inter-arrival, against the model itself | {a['iat_n']:,} | {a['iat_ks']:.4f} | {a['iat_crit']:.4f} | {verdict(a['iat_ks'], a['iat_crit'])} (censored: see below) |",
          f"| all flows: inter-arrival (at the receiver), against an ideal generator over the same {c['secs']:.0f} s (two-sample, 1-ms resolution) | {c['n']:,} / {c['ideal_n']:,} | {c['arrival_ks2']:.4f} | {c['crit2']:.4f} | {verdict(c['arrival_ks2'], c['crit2'])} |",
          f"| all flows: inter-departure (actual send times), same test | {c['n']:,} / {c['ideal_n']:,} | {c['departure_ks2']:.4f} | {c['crit2']:.4f} | {verdict(c['departure_ks2'], c['crit2'])} |",
          f"| all flows: inter-departure (the schedule Horde drew), same test | {c['n']:,} / {c['ideal_n']:,} | {c['scheduled_ks2']:.4f} | {c['crit2']:.4f} | {verdict(c['scheduled_ks2'], c['crit2'])} |", "",
          f"A {c['secs']:.0f}-s run cannot show a gap longer than what is left of it, and this model's Weibull (shape 0.58) has a long tail: "
          f"the model's mean gap is {cdf['model']['iat_mean_ms']:.0f} ms, the pooled arrivals' {a['iat_mean_ms']:.0f} ms, and a perfect generator of "
          f"the model over the same {c['secs']:.0f} s ({c['ideal_n']:,} gaps drawn, seed 25) shows {c['ideal_mean_ms']:.0f} ms. The inter-arrival verdict is therefore "
          "the two-sample test against that ideal; the one-sample test against the model is shown for what it is. The schedule Horde "
          "drew passes it; the actual departures and the arrivals differ from it by a little more than the critical value at this "
          "sample size: the two sleeping pacers' lateness (ms-scale at 131 % of a core for 9,800 sockets) moves gaps across the 1-ms "
          "grid, most visibly at the model's 500-ms atom.", "",
          chart("urbbangen-test3-iat.svg", f"Test 3: CDF of APDU inter-arrival time, {cdf['flows']:,} flows", "inter-arrival time ms (log; gaps under 1 ms not drawn)", "CDF",
                [("model", "#000000", [(x, y) for x, y in cdf["model"]["iat_cdf"] if x >= 1], True),
                 (f"ideal over {c['secs']:.0f} s", "#7f7f7f", [tuple(p) for p in c["ideal_ecdf"] if p[0] >= 1], True),
                 ("Horde: all flows", "#1f77b4", [tuple(p) for p in a["iat_ecdf"] if p[0] >= 1], False),
                 (f"Horde: flow {o['flow']}", "#ff7f0e", [tuple(p) for p in o["iat_ecdf"] if p[0] >= 1], False)], logx=True, ymax=1.0), "",
          chart("urbbangen-test3-size.svg", f"Test 3: CDF of APDU size, {cdf['flows']:,} flows", "APDU size bytes", "CDF",
                [("model", "#000000", [tuple(p) for p in cdf["model"]["size_cdf"]], True),
                 ("Horde: all flows", "#1f77b4", [tuple(p) for p in a["size_ecdf"]], False),
                 (f"Horde: flow {o['flow']}", "#ff7f0e", [tuple(p) for p in o["size_ecdf"]], False)], ymax=1.0), ""]
t4 = points("test4")
if t4:
    best = {}
    for p in t4:
        k = (p["size"], p["streams"])
        ok = p["lost"] == 0 and p["unsent"] <= p["streams"] + 0.001 * p["streams"] * p["rate_per_stream"] * p["secs"]
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
          "20,000 pkt/s until a run fails — a packet lost, or more departures still due at its end than one per stream and 0.1 % "
          "of the asked ones (the sender could not keep the rate) — then halve the gap three times; 2-s runs. Cells: the largest rate that passed (the "
          "lowest that failed).", "",
          "| payload B | " + " | ".join(f"{s} stream(s)" for s in streams) + " |", "|---:|" + "---:|" * len(streams)]
    for z in sizes:
        L.append(f"| {z:.0f} | " + " | ".join(f"{best[(z, s)][0]:,.0f} ({f(best[(z, s)][1], 0)})" if (z, s) in best else "-" for s in streams) + " |")
    lossy = sum(1 for p in t4 if p["lost"] > 0)
    top = max(best.items(), key=lambda kv: kv[1][0])
    L += ["", f"Highest: {top[1][0]:,.0f} pkt/s at {top[0][0]:.0f} B with {top[0][1]} stream(s)"
          + (" — at the smallest size, as in the paper." if top[0][0] == min(sizes) else f" (the paper's highest was at 64 B; here 64 B reaches {max(best[(min(sizes), s)][0] for s in streams if (min(sizes), s) in best):,.0f}).")
          + f" Of {len(t4)} runs, {'none' if lossy == 0 else lossy} lost a packet; every {'' if lossy == 0 else 'other '}failure was the sender not keeping the rate (one sender host's sockets, "
          "the bridge and the receiver on 2 cores), so these are the sender's limits here, not the emulated network's."]
    L += ["", chart("urbbangen-test4.svg", "Test 4: largest zero-loss rate vs payload size", "payload bytes", "pkt/s",
                    [(f"{s} stream(s)", c, [(z, best[(z, s)][0]) for z in sizes if (z, s) in best], False)
                     for s, c in zip(streams, ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"])]), ""]

L += [END]

results.write_section(BEGIN, END, L)
