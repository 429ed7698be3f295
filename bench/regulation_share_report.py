#!/usr/bin/env python3
"""The share section of bench/RESULTS-regulation.md from bench/regulation-share.sh's outputs:
two regulated circuits on one bottleneck, their rates over time, each one's share and Jain's
index once both run, and each client's throttle packets per minute.

Usage: regulation_share_report.py OUT RESULTS DUR LATE RATE QUEUE "A B" "A B" ...
"""
import csv
import json
import os
import re
import subprocess
import sys

import svgchart

BEGIN = "<!-- share: written by bench/regulation-share.sh -->"
END = "<!-- /share -->"
COLORS = {"opensim": "#d62728", "mongoose": "#1f77b4", "tfrc": "#2ca02c"}


def series(path, shift):
    """(t, received kbit/s) per second, t from the first circuit's start."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [(int(float(r["t_s"])) + shift, float(r["total_kbps"])) for r in csv.DictReader(f)]


def jain(xs):
    s, q = sum(xs), sum(x * x for x in xs)
    return s * s / (len(xs) * q) if q > 0 else float("nan")


def throttles_per_min(path, secs):
    try:
        return json.load(open(path))["stats"]["throttles_sent"] * 60 / secs
    except (OSError, ValueError, KeyError):
        return float("nan")


def section(out, dur, late, pairs):
    charts = os.path.join(os.path.dirname(os.path.abspath(RESULTS)), "regulation-charts")
    os.makedirs(charts, exist_ok=True)
    sh = lambda c: subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    lo, hi = late + dur // 2, late + dur
    L = [BEGIN, "## 5. Two circuits on one bottleneck (Mongoose's argument)", ""]
    L.append(f"Command: `sudo bash bench/regulation-share.sh` (DUR={dur}, LATE={late}); {sh('nproc')} cores, kernel {sh('uname -r')}; commit {sh('git rev-parse --short HEAD')}; {sh('date -u +%Y-%m-%d')}.")
    L.append(f"Each pair of circuits shares one emulated link ({RATE}, {QUEUE} queue, 50 ms each way, no random loss: the queue's drops are the only loss), the server end with a saturating texture backlog in 375-byte packets; the first circuit starts at 0 s, the second at {late} s, and both run until {late + dur} s. Shares, Jain's index (of the two circuits' mean received rates) and the per-second Jain index (its mean) are over the last {dur // 2} s ({lo}–{hi} s); throttle packets per minute over each client's whole run. Rates in kbit/s (1000 bit).")
    L += ["", f"| pair (first + second) | first kbit/s | second kbit/s | together (link {RATE}) | first's share | Jain's index | per-second Jain (mean) | throttles/min first | throttles/min second |", "|---|---|---|---|---|---|---|---|---|"]
    verdict = {}
    shown = []
    for k, (a, b) in enumerate(pairs, 1):
        sa = series(os.path.join(out, f"p{k}-a.client.csv"), 0)
        sb = series(os.path.join(out, f"p{k}-b.client.csv"), late)
        wa = {t: x for t, x in sa if lo < t <= hi}
        wb = {t: x for t, x in sb if lo < t <= hi}
        both = sorted(set(wa) & set(wb))
        if not both:
            L.append(f"| {a} + {b} | - | - | - | - | - | - | - | - |")
            continue
        xa = sum(wa[t] for t in both) / len(both)
        xb = sum(wb[t] for t in both) / len(both)
        j = jain([xa, xb])
        jt = sum(jain([wa[t], wb[t]]) for t in both) / len(both)
        ta = throttles_per_min(os.path.join(out, f"p{k}-a.client.json"), dur + late)
        tb = throttles_per_min(os.path.join(out, f"p{k}-b.client.json"), dur)
        verdict[(a, b)] = (xa, xb, j, jt, ta, tb)
        L.append(f"| {a} + {b} | {xa:,.0f} | {xb:,.0f} | {xa + xb:,.0f} | {100 * xa / (xa + xb):.1f} % | {j:.3f} | {jt:.3f} | {ta:.1f} | {tb:.1f} |")
        name = f"share-{k}-{a}-{b}.svg"
        shown.append(svgchart.chart(charts, "regulation-charts", name, f"{a} (from 0 s) and {b} (from {late} s) on one {RATE} bottleneck", "s", "kbit/s received",
                                    [(f"{a} (first)", COLORS.get(a, "#444"), sa, False), (f"{b} (second)", COLORS.get(b, "#888"), sb, a == b)], vlines=[late, lo]))

    L.append("")
    for c in shown:
        L += [c, ""]

    def yes(x):
        return "**yes**" if x else "**no**"

    L += ["Against the paper's argument (seed 003: AIAD does not converge to a fair share against a TCP-like controller; TCP-like controllers share fairly):", ""]
    mm = verdict.get(("mongoose", "mongoose"))
    om = verdict.get(("opensim", "mongoose"))
    oo = verdict.get(("opensim", "opensim"))
    if mm:
        L.append(f"- Two Mongoose circuits share fairly once both run: Jain's index {mm[2]:.3f} (≥ 0.95: {yes(mm[2] >= 0.95)}).")
    if om and mm:
        L.append(f"- OpenSim's AIAD against Mongoose: OpenSim takes {100 * om[0] / (om[0] + om[1]):.1f} % of what the two get, Jain's index {om[2]:.3f}, below the two Mongoose circuits' {mm[2]:.3f}: {yes(om[2] < mm[2])}.")
    if oo:
        L.append(f"- Two OpenSim circuits: Jain's index {oo[2]:.3f}, per-second {oo[3]:.3f}.")
    thr = [(k, v[4], v[5]) for k, v in verdict.items()]
    mong = [x for (a, b), ta, tb in thr for (t, x) in ((a, ta), (b, tb)) if t == "mongoose"]
    opens = [x for (a, b), ta, tb in thr for (t, x) in ((a, ta), (b, tb)) if t == "opensim"]
    if mong and opens:
        L.append(f"- Throttle packets: Mongoose sends one only when its rate changes (by more than 0.1 %; an unchanged one again after 5 s): {', '.join(f'{x:.1f}' for x in mong)} a minute (its window moves every round trip while it probes), beside OpenSim's {', '.join(f'{x:.1f}' for x in opens)} (a new rate at most every 5 s, when the loss it measured moves it).")
    L += ["", END]
    return L


if __name__ == "__main__":
    out, RESULTS, dur, late, RATE, QUEUE = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
    pairs = [tuple(p.split()) for p in sys.argv[7:]]
    block = "\n".join(section(out, dur, late, pairs))
    text = open(RESULTS).read() if os.path.exists(RESULTS) else ""
    pat = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    text = pat.sub(lambda _: block, text) if pat.search(text) else text.rstrip("\n") + "\n\n" + block + "\n"
    open(RESULTS, "w").write(text)
