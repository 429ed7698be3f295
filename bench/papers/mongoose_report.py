#!/usr/bin/env python3
"""The Mongoose section of bench/RESULTS-papers.md from bench/papers/data/mongoose-*.jsonl
(written by bench/papers/mongoose.sh): Figs. 3b, 6a, 6c (simulated, as the paper's were), 9a,
9b, 9c, 2b and 2c (measured on emulated links), each redrawn as SVG beside the paper's text."""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import svgchart  # noqa: E402
import results  # noqa: E402
from svgchart import quantile  # noqa: E402

DATA = os.path.join(HERE, "data")
CHARTS = os.path.join(HERE, "charts")
BEGIN, END = "<!-- mongoose: begin (bench/papers/mongoose.sh writes this) -->", "<!-- mongoose: end -->"
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
TC = {"mongoose": "#1f77b4", "mongoose-paper": "#2ca02c", "tfrc": "#d62728"}
PKT, RTT150 = 375.0, 0.150


def load(name):
    p = os.path.join(DATA, f"mongoose-{name}.jsonl")
    rows = [json.loads(l) for l in open(p) if l.strip()] if os.path.exists(p) else []
    # Lines from before the client's counters had their own key (they overwrote the label):
    # the figures' clients in the order mongoose.sh runs them.
    order = {"fig9": ["mongoose"] * 8, "fig9c": ["opensim", "mongoose", "opensim", "mongoose"], "fig2": ["opensim"] * 7}
    for i, r in enumerate(rows):
        if isinstance(r.get("client"), dict):
            r["client_stats"] = r.pop("client")
            r["client"] = order[name][i]
    return rows


def padhye(s, r, p):
    """RFC 5348 §3.1 (b = 1, t_RTO = 4R), bytes/s."""
    if p <= 0:
        return math.inf
    return s / (r * math.sqrt(2 * p / 3) + 4 * r * (3 * math.sqrt(3 * p / 8)) * p * (1 + 32 * p * p))


def mathis(s, r, p):
    return math.inf if p <= 0 else s * math.sqrt(1.5) / (r * math.sqrt(p))


def eq1(s, r, p):
    """The paper's equation (1): X = S / (RTT √p)."""
    return math.inf if p <= 0 else s / (r * math.sqrt(p))


def f(x, d=0):
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return "-"
    return f"{x:,.{d}f}"


def settle(asked, switch_s, until_s, tail_s=60, within=0.10, trail=5):
    """Seconds after switch_s until the trailing `trail`-s mean of the request (asked[t - 1] in
    second t) is first within 10 % of its mean over the phase's last `tail_s` seconds (the phase
    ends at until_s)."""
    req = {t + 1: v for t, v in enumerate(asked)}
    tail = [req[t] for t in range(until_s - tail_s + 1, until_s + 1) if t in req]
    if not tail:
        return None
    target = sum(tail) / len(tail)
    for t in range(switch_s + 1, until_s + 1):
        win = [req[u] for u in range(t - trail + 1, t + 1) if u in req and u > switch_s]
        if win and abs(sum(win) / len(win) / target - 1) <= within:
            return t - switch_s
    return None


machine = open(os.path.join(DATA, "mongoose-machine.txt")).read().strip().replace("\n", "; ") if os.path.exists(os.path.join(DATA, "mongoose-machine.txt")) else "?"
L = [BEGIN, "", "## Mongoose (Oliver, Miller, Allison)", "",
     "Paper: *Mongoose: Throughput Redistributing Virtual World* — the OpenSim viewer's throttle against TCP (Fig. 3, analysis), the "
     "Mongoose client's window tracking against TFRC (Figs. 5, 6), the Mongoose server's dual token buckets (Figs. 8, 9) and the "
     "OpenSim traffic measurements (Fig. 2). bench/RESULTS-regulation.md already has the measured loss and RTT sweeps (Figs. 3a, 3c, "
     "5), the measured switching trace (Fig. 6b), fairness against real TCP and channel protection; this section adds the rest.", "",
     f"Machine: {machine}. Rerun: `sudo bash bench/papers/mongoose.sh` (≈ 15 min); the simulations alone, no root: "
     "`ONLY=fig3b,fig6a,fig6c bash bench/papers/mongoose.sh` (≈ 2 min); one measured figure: `ONLY=fig9|fig9c|fig2 sudo -E bash "
     "bench/papers/mongoose.sh` (≈ 4.2 min each at the default `DUR=240`).", "",
     "**The paper's throttle period and floor.** The viewer's source (llviewerthrottle.cpp) acts every 5 s and never goes below "
     "max(0.2 × setting, 50) kbit/s; the paper's analysis says *\"in each one second interval\"* and *\"if the packet loss rate is 4% "
     "OpenSim would reduce its sending rate to 50 kbps\"*. Both are now options: `horde circuit join|sim --throttle-period 1 --floor 50` "
     "and `[regulation] throttle_period_s = 1`, `floor_kbps = 50` (defaults unchanged: the viewer's). Fig. 3b uses the paper's values "
     "and shows the viewer's beside them.", "",
     "Simulated figures: `horde circuit sim` — the same throttle state machines as `circuit join` and `run [regulation]`, in a closed "
     "loop in virtual time (a server that always has data sends at the last rate asked for; loss random or deterministic, every "
     "1/p-th packet). Measured figures: `horde circuit serve`/`join` on a pair of emulated hosts per point (Horde's userspace link "
     "emulator: delay both ways, loss server → client, 10 Mbit/s, 125 kB queue), all points of a figure at once; the server sends "
     "the opensim service's avatar demand (a session: login, walking, flying, standing and two teleports, i.e. two more islands to "
     "download, application limited and bursty, as the paper's walking sessions on Cathedral Island); throughput is what reached "
     "the client, per second. Rates in kbit/s of 1000 bit; the viewer's limits are 50–1500 × 1024 bit/s (51.2–1536).", ""]

# ---------------------------------------------------------------- Fig. 3b
f3 = load("fig3b")
if f3:
    L += ["### Fig. 3b: where OpenSim and TCP have the same throughput, over RTT × loss, for the user settings 50, 500 and 1500", "",
          "The paper (text): *\"Three lines are shown: the leftmost is for the maximum OpenSim user throughput setting of 1500 Kbps, the "
          "middle is for the default setting of 500 Kbps and the line on the right is for the minimum user setting of 50 Kbps. Each line "
          "shows where TCP and OpenSim have the same throughput, in the area to the left TCP uses more bandwidth and to the right OpenSim "
          "is more aggressive than TCP.\"* Its assumptions: not application limited, deterministic loss, long-lived connections; TCP from a "
          "simulator of the average steady-state window under deterministic loss, RTT 1–500 ms, loss 0.1–10 %. Stated points: at RTT 100 "
          "ms, *\"when congestion is between 0.3% and below 3% the OpenSim algorithm is more aggressive than TCP. When congestion is less "
          "than 0.3% it prevents TCP Fair throughput being reached\"* (Fig. 3a); at 1 % loss *\"OpenSim is more aggressive than TCP at RTTs "
          "greater than 53ms\"* (Fig. 3c); at 3 % and 100 ms *\"TCP would allow 150 Kbits more to be sent every second than SL\"*; at 4 % "
          "*\"OpenSim would reduce its sending rate to 50 kbps\"*.", "",
          "Here: OpenSim's steady rate (mean over the last 200 s of 600 s, `horde circuit sim --throttle opensim:S --throttle-period 1 "
          "--floor 50 --periodic --loss P%`; it does not depend on the RTT) against TCP under the same deterministic loss: Mathis' "
          "s·√(3/2)/(R·√p), the exact steady state of TCP's AIMD under periodic loss (what the paper's simulator computes), and "
          "Padhye's equation (with timeouts; dashed) for comparison. TCP's rate is ∝ 1/RTT, so the equal-throughput RTT at loss p is "
          "TCP(p, 1 s) / OpenSim(p). 375-byte packets (the paper's measured mean).", ""]
    paper = [r for r in f3 if "period 1s" in r["throttle"]]
    viewer = [r for r in f3 if "period" not in r["throttle"]]
    settings = sorted({float(r["throttle"].split(":")[1].split()[0]) for r in f3})

    def rate(rows, s, p):
        for r in rows:
            if float(r["throttle"].split(":")[1].split()[0]) == s and abs(r["final_loss_pct"] - p) < 1e-9:
                return r["requested_kbps"]
        return None

    losses = sorted({r["final_loss_pct"] for r in f3})
    hdr = "| loss % | " + " | ".join(f"opensim:{s:g} kbit/s (viewer's) | equal RTT ms: Mathis / Padhye" for s in settings) + " |"
    L += [hdr, "|---:|" + "---:|---:|" * len(settings)]
    lines = []
    for i, s in enumerate(settings):
        ms, pd, vw = [], [], []
        for p in losses:
            x = rate(paper, s, p)
            xv = rate(viewer, s, p)
            if x:
                rm = mathis(PKT * 8 / 1000, 1.0, p / 100) / x * 1000
                rp = padhye(PKT * 8 / 1000, 1.0, p / 100) / x * 1000
                ms.append((rm, p))
                pd.append((rp, p))
            if xv:
                vw.append((mathis(PKT * 8 / 1000, 1.0, p / 100) / xv * 1000, p))
        clip = lambda pts: [q for q in pts if q[0] <= 520]
        lines += [(f"{s:g} kbit/s (TCP: Mathis)", COLORS[i], clip(ms), False), (f"{s:g} (TCP: Padhye)", COLORS[i], clip(pd), True)]
    for p in losses:
        cells = []
        for s in settings:
            x, xv = rate(paper, s, p), rate(viewer, s, p)
            cells.append(f"{f(x)} ({f(xv)}) | {f(mathis(PKT * 8, 1.0, p / 100) / 1000 / x * 1000 if x else None)} / {f(padhye(PKT * 8, 1.0, p / 100) / 1000 / x * 1000 if x else None)}")
        L.append(f"| {p:g} | " + " | ".join(cells) + " |")
    # The paper's stated points, ours beside them.
    x1 = rate(paper, 500.0, 1.0)
    at100 = [(p, rate(paper, 500.0, p), mathis(PKT * 8, 0.1, p / 100) / 1000) for p in losses]
    more = [p for p, x, t in at100 if x and x > t]
    x3 = rate(paper, 500.0, 3.0)
    x4 = rate(paper, 500.0, 4.0)
    L += ["", "| the paper's point (setting 500) | paper | here (paper's period and floor) |", "|---|---|---|",
          f"| OpenSim more aggressive than TCP at RTT 100 ms | loss 0.3 % to below 3 % | loss {min(more):g} % to {max(more):g} % (of the points run) |" if more else "| OpenSim more aggressive at 100 ms | 0.3–3 % | none |",
          f"| equal throughput at 1 % loss | RTT 53 ms | RTT {f(mathis(PKT * 8, 1.0, 0.01) / x1, 0)} ms (Mathis), {f(padhye(PKT * 8, 1.0, 0.01) / x1, 0)} ms (Padhye): OpenSim at {f(x1)} kbit/s |" if x1 else "",
          f"| TCP's extra at 3 % and 100 ms | 150 kbit/s | {f(mathis(PKT * 8, 0.1, 0.03) / 1000 - x3)} kbit/s (Mathis {f(mathis(PKT * 8, 0.1, 0.03) / 1000)} − OpenSim {f(x3)}) |" if x3 else "",
          f"| OpenSim at 4 % | 50 kbit/s | {f(x4, 1)} kbit/s: at the floor (51.2, 17 packets a second) a 1-s window holds one loss (5.9 %, down) or none (0 %, up a step), so it alternates between 51.2 and 102.4 |" if x4 else "",
          "", "Where the viewer's own 5 s period and 0.2 × setting floor differ (the parenthesised column): above 3 % it holds "
          "0.2 × setting (100 kbit/s for 500, 300 for 1500) rather than 50, so its lines lie further left at high loss. At low "
          "rates the 1-s window itself matters: 75 kbit/s (setting 50) is 25 packets a second, so 2.5 % deterministic loss reads "
          "as 4 % in the seconds holding one loss per 25 packets, and the throttle backs off below the 3 % threshold.", "",
          svgchart.chart(CHARTS, "papers/charts", "mongoose-fig3b.svg", "Fig. 3b: equal TCP and OpenSim throughput (left: TCP uses more)",
                         "RTT (ms)", "loss (%)", lines, w=820, h=380), ""]

# ---------------------------------------------------------------- Fig. 6a
f6a = load("fig6a")
if f6a:
    L += ["### Fig. 6a: loss switching between 0.01 % and 5 % (deterministic simulation)", "",
          "The paper (text): *\"A simulation of the scenario where the congestion level periodically switches between 0.01% and 5% is "
          "shown in Fig. 6(a). In this scenario there is little difference in convergence when there is an increase in congestion, both "
          "Mongoose and TFRC adjust quickly. When there is a reduction in congestion, TFRC takes a long time to utilise the increase in "
          "fair bandwidth that is available. The Window Tracking algorithm is able to adjust significantly faster.\"*", "",
          "Here: `horde circuit sim --throttle T --periodic --rtt 100ms --loss 0:0.01%,100:5%,200:0.01%,300:5%,400:0.01% -t 500s`. "
          "Settling time: seconds after a switch until the request's trailing 5-s mean is first within 10 % of its mean over the "
          "phase's last 60 s (the method of bench/RESULTS-regulation.md §2). At 0.01 % the TCP-fair rate (3,670 kbit/s) is above "
          "the viewer's 1,536 limit, so both settle at the limit.", "",
          "| controller | →5 % at 100 s (s) | →0.01 % at 200 s (s) | →5 % at 300 s (s) | →0.01 % at 400 s (s) | steady at 5 % kbit/s | steady at 0.01 % kbit/s |",
          "|---|---:|---:|---:|---:|---:|---:|"]
    series = []
    for r in f6a:
        sec = r["requested_s"]
        st = [settle(sec, a, a + 100) for a in (100, 200, 300, 400)]
        tail = lambda a: sum(sec[a + 40:a + 100]) / 60
        L.append(f"| {r['throttle']} | " + " | ".join(f(x) if x is not None else "not within 100" for x in st) + f" | {f(tail(300))} | {f(tail(400))} |")
        series.append((r["throttle"], TC.get(r["throttle"], "#333"), [(t + 1, v) for t, v in enumerate(sec)], False))
    L += ["", "At 5 % deterministic loss `mongoose` (with TCP's timeouts) settles below Padhye's 111 kbit/s: every 20th packet lost "
          "leaves a window of under four packets to signal it, so each loss is a timeout (one packet, 4 RTT at the floor), as it "
          "would be for TCP; `mongoose-paper` (halving only, the paper's rule) holds 171, above it. Random loss (Fig. 6c, "
          "the unit tests in crates/regulate/src/sim.rs) spaces losses unevenly and gives 0.92–1.15 × Padhye from 0.5 to 5 %."]
    L += ["", svgchart.chart(CHARTS, "papers/charts", "mongoose-fig6a.svg", "Fig. 6a: requested rate, loss 0.01 % / 5 % every 100 s (RTT 100 ms)",
                             "time (s)", "requested kbit/s", series, vlines=(100, 200, 300, 400), w=820), ""]

# ---------------------------------------------------------------- Fig. 6c
f6c = load("fig6c")
if f6c:
    seeds = len({r["seed"] for r in f6c})
    L += ["### Fig. 6c: time to converge from 1 % loss to each new loss level", "",
          "The paper (text): *\"Each point represents the time it takes to converge from 1% packet loss to a new congestion level. Lines "
          "for Window Tracking and TFRC algorithms are shown. This further demonstrates that TFRC is slow to adjust to decreases in "
          "loss.\"*", "",
          f"Here: `horde circuit sim --throttle T --rtt 100ms --loss 0:1%,120:P% -t 420s --seed N`, random loss, {seeds} seeds per point; "
          "convergence as for Fig. 6a against the mean of the last 100 s. Median over the seeds (min–max).", "",
          "| new loss % | " + " | ".join(f"{t} s" for t in ("mongoose", "tfrc", "mongoose-paper")) + " | TFRC / Mongoose |", "|---:|---:|---:|---:|---:|"]
    levels = sorted({r["final_loss_pct"] for r in f6c})
    series = {t: [] for t in ("mongoose", "tfrc", "mongoose-paper")}
    for p in levels:
        cells, med = [], {}
        for t in series:
            ts = [settle(r["requested_s"], 120, 420, tail_s=100) for r in f6c if r["throttle"] == t and r["final_loss_pct"] == p]
            ts = [x if x is not None else 300 for x in ts]
            if ts:
                m = quantile(ts, 0.5)
                med[t] = m
                series[t].append((p, m))
                cells.append(f"{f(m)} ({min(ts)}–{max(ts)})")
            else:
                cells.append("-")
        ratio = med["tfrc"] / max(med["mongoose"], 1) if "tfrc" in med and "mongoose" in med else None
        L.append(f"| {p:g} | " + " | ".join(cells) + f" | {f(ratio, 1)} |")
    dec = [p for p in levels if p < 1]
    if dec:
        m_dec = [x for p, x in series["mongoose"] if p < 1]
        t_dec = [x for p, x in series["tfrc"] if p < 1]
        L += ["", f"Decreases in loss (to below 1 %): Mongoose converges in a median {f(quantile(m_dec, 0.5))} s, TFRC in "
              f"{f(quantile(t_dec, 0.5))} s — the paper's finding. Increases: both within a few seconds except where the "
              "new rate is the 51.2 kbit/s floor. (300 s = not converged within the run.)"]
    L += ["", svgchart.chart(CHARTS, "papers/charts", "mongoose-fig6c.svg", "Fig. 6c: convergence time from 1 % loss (median of seeds)",
                             "new loss (%)", "seconds to converge", [(t, TC[t], pts, t == "mongoose-paper") for t, pts in series.items()], logx=True), ""]


# ---------------------------------------------------------------- Fig. 9a / 9b
def secs_of(r):
    # Every whole second of the run (the first, partial one too: the login burst starts there).
    return r["total_kbps"]


def cdf_series(rows, label_of):
    out = []
    for i, r in enumerate(rows):
        xs = sorted(secs_of(r))
        n = len(xs)
        pts = [(x, (j + 1) / n) for j, x in enumerate(xs)]
        out.append((label_of(r), COLORS[i % len(COLORS)], pts, False))
    return out


f9 = sorted(load("fig9"), key=lambda r: r["loss_pct"])
if f9:
    dur = len(f9[0]["total_kbps"])
    L += ["### Fig. 9a: Mongoose client and server, throughput vs loss at RTT 150 ms (medians, quartiles, means)", "",
          "The paper (text): *\"The guide line shows the TCP Fair equation for a RTT of 150 ms and a packet size of 375 bytes … The mean "
          "bandwidth usage does not change significantly between 0% loss and 3% loss, the median bandwidth is however much smaller at 0% "
          "loss. The low loss level traces have lower median bandwidth and higher bursts in traffic … The usage at medium to high loss "
          "levels is TCP Fair. The usage at low loss levels is below the TCP Fair value as it is application limited.\"*", "",
          f"Here: one avatar session of {dur} s per loss level (`circuit serve --regulator dual` + `circuit join --throttle mongoose`), "
          "all levels at once on their own links. Per-second throughput at the client; the guide lines are the paper's equation (1) "
          "and Padhye's, for 375 B and 150 ms.", "",
          "| loss % | measured loss % | mean kbit/s | p25 | median | p75 | p95 | requested (mean) | eq. (1), 375 B | Padhye, 375 B | mean packet B | Padhye at that size | mean / Padhye at that size |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in f9:
        xs = secs_of(r)
        p = r["loss_pct"] / 100
        mean = sum(xs) / len(xs)
        cl = r["client_stats"]
        ml = 100 * (1 - cl["fresh"] / cl["seq_span"]) if cl.get("seq_span") else None
        pad = padhye(PKT * 8, RTT150, p) / 1000
        size = sum(c["bytes"] for c in cl["channels"]) / max(sum(c["packets"] for c in cl["channels"]), 1)
        pad_m = padhye(size * 8, RTT150, p) / 1000
        L.append(f"| {r['loss_pct']:g} | {f(ml, 2)} | {f(mean)} | {f(quantile(xs, .25))} | {f(quantile(xs, .5))} | {f(quantile(xs, .75))} | "
                 f"{f(quantile(xs, .95))} | {f(sum(r['asked_kbps']) / len(r['asked_kbps']))} | {f(eq1(PKT * 8, RTT150, p) / 1000)} | {f(pad)} | "
                 f"{f(size)} | {f(pad_m)} | {f(mean / pad_m, 2) if p > 0 else '-'} |")
    L += ["", "Reading it beside the paper: the median sits well under the mean at low loss (bursts: the islands' downloads) and the "
          "spread closes as loss rises, as the paper found; from 1 % to 5 % the mean is 0.8–1.3 × the TCP-fair rate at the packets' "
          "own mean size (which falls from ~500 B to 250 B as the throttle leaves room for little but the task channel's small "
          "packets), and at 7–10 % the viewer's 51.2 kbit/s floor is above TCP-fair. Unlike the paper, the mean falls between 0 % and "
          "3 %: this session asks for ~370 kbit/s on average, above the TCP-fair rate from 1 % on, where the paper's walk on Cathedral "
          "Island averaged 218 kbit/s at 0 % (its Fig. 7a, text), under TCP-fair up to ~3 %."]
    L += ["", svgchart.boxplot(CHARTS, "papers/charts", "mongoose-fig9a.svg", "Fig. 9a: throughput per second vs loss (Mongoose client and server, RTT 150 ms)",
                               "loss (%)", "kbit/s", [(f"{r['loss_pct']:g}", secs_of(r)) for r in f9],
                               guides=[("TCP-fair, eq. (1)", "#2ca02c", [eq1(PKT * 8, RTT150, r["loss_pct"] / 100) / 1000 if r["loss_pct"] > 0 else None for r in f9]),
                                       ("TCP-fair, Padhye", "#ff7f0e", [padhye(PKT * 8, RTT150, r["loss_pct"] / 100) / 1000 if r["loss_pct"] > 0 else None for r in f9])]), ""]
    pick = [r for r in f9 if r["loss_pct"] in (0, 0.5, 3, 10)]
    L += ["### Fig. 9b: CDFs of throughput at 0, 0.5, 3 and 10 % loss", "",
          "The paper (text): *\"At low loss levels the bandwidth level is mainly low but there are a small proportion of high bandwidth "
          "bursts. At medium and high loss levels there are more samples in the middle, due to server imposed rate limitation, and the "
          "bandwidth is more stable.\"*", "",
          "| loss % | seconds under 300 kbit/s | seconds over 1,000 kbit/s | p90 − p10 kbit/s |", "|---:|---:|---:|---:|"]
    for r in pick:
        xs = secs_of(r)
        L.append(f"| {r['loss_pct']:g} | {100 * sum(x < 300 for x in xs) / len(xs):.0f} % | {100 * sum(x > 1000 for x in xs) / len(xs):.0f} % | "
                 f"{f(quantile(xs, .9) - quantile(xs, .1))} |")
    L += ["", svgchart.chart(CHARTS, "papers/charts", "mongoose-fig9b.svg", "Fig. 9b: CDF of throughput per second (Mongoose client and server, RTT 150 ms)",
                             "kbit/s", "fraction of seconds", cdf_series(pick, lambda r: f"{r['loss_pct']:g} % loss"), ymax=1.0), ""]

# ---------------------------------------------------------------- Fig. 9c
f9c = load("fig9c")
if f9c:
    name = {("opensim", "opensim"): "OpenSim server, SL client", ("opensim", "mongoose"): "OpenSim server, Mongoose client",
            ("mongoose", "opensim"): "Mongoose server, SL client", ("mongoose", "mongoose"): "Mongoose server and client"}
    L += ["### Fig. 9c: the four server × client combinations at 0 % loss", "",
          "The paper (text): *\"A comparison of the four combinations possible of OpenSim server, Mongoose server (OpenSim TR), Mongoose "
          "client and SL client is shown in Fig. 9(c) with 0% packet loss. This demonstrates that the Mongoose Server and Client "
          "combination makes more efficient use of network resource. Throughput levels are low for 80% of the time, and there are short "
          "bursts of high throughput.\"*", "",
          "Here: the same session on four links at once, RTT 150 ms, no loss. OpenSim server = `--regulator per-channel` (a token "
          "bucket per channel at the client's split), Mongoose server = `dual` (a circuit bucket over the channel buckets); SL client "
          "= `--throttle opensim:500` (the viewer: 768 kbit/s at no loss), Mongoose client = `mongoose`. Backlog drained: seconds "
          "with nothing queued at the server (the islands downloaded).", "",
          "| server, client | mean kbit/s | median | p80 | p95 | max | seconds with a backlog at the server | bytes received MB |",
          "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in f9c:
        xs = secs_of(r)
        q = r.get("queued_kb", [])
        L.append(f"| {name[(r['server'], r['client'])]} | {f(sum(xs) / len(xs))} | {f(quantile(xs, .5))} | {f(quantile(xs, .8))} | {f(quantile(xs, .95))} | "
                 f"{f(max(xs))} | {sum(v > 1 for v in q)} of {len(q)} | {sum(c['bytes'] for c in r['client_stats']['channels']) / 1e6:.1f} |")
    L += ["", svgchart.chart(CHARTS, "papers/charts", "mongoose-fig9c.svg", "Fig. 9c: CDF of throughput per second, four server × client combinations (0 % loss)",
                             "kbit/s", "fraction of seconds", cdf_series(f9c, lambda r: name[(r["server"], r["client"])]), ymax=1.0), ""]

# ---------------------------------------------------------------- Fig. 2b / 2c
f2 = sorted(load("fig2"), key=lambda r: r["setting_kbps"])
if f2:
    L += ["### Figs. 2b and 2c: the OpenSim viewer and server at user settings from 50 to 1,500 kbit/s", "",
          "The paper (text): Fig. 2(b) *\"represents traces from an OpenSim island downloading at a range of throughput allocations, it "
          "shows that increasing a client's bandwidth limit can reduce download times\"*; *\"Box plots of throughput against user "
          "settings in Fig. 2(c) demonstrate that increasing the throttle setting increases throughput.\"*", "",
          "Here: the same session per setting (`--throttle opensim:S`, the viewer's own period and floor; `--regulator per-channel`), no "
          "loss, RTT 100 ms, seven links at once. Island downloaded: the first second after login with nothing queued at the server "
          "(the login's texture and asset burst sent; the first teleport comes at a third of the run).", "",
          "| setting kbit/s | asked (1.5 × setting, ≤ 1,536) | mean kbit/s | median | p75 | p95 | island downloaded after (s) | received in the run MB |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    cum = []
    for i, r in enumerate(f2):
        xs = secs_of(r)
        q = r.get("queued_kb", [])
        first_tp = len(q) // 3
        done = next((t + 1 for t, v in enumerate(q[:first_tp]) if v <= 1), None)
        L.append(f"| {r['setting_kbps']:g} | {f(max(r['asked_kbps']))} | {f(sum(xs) / len(xs))} | {f(quantile(xs, .5))} | {f(quantile(xs, .75))} | "
                 f"{f(quantile(xs, .95))} | {done if done else f'not before the teleport at {first_tp}'} | {sum(xs) / 8 / 1000:.1f} |")
        acc, pts = 0.0, []
        for t, x in enumerate(xs):
            acc += x / 8
            pts.append((t + 1, acc / 1000))
        cum.append((f"{r['setting_kbps']:g} kbit/s", COLORS[i % len(COLORS)], pts, False))
    L += ["", svgchart.chart(CHARTS, "papers/charts", "mongoose-fig2b.svg", "Fig. 2b: data received over the session per user setting (OpenSim viewer and server)",
                             "time (s)", "MB received", cum, w=820),
          "", svgchart.boxplot(CHARTS, "papers/charts", "mongoose-fig2c.svg", "Fig. 2c: throughput per second vs user setting (OpenSim viewer and server)",
                               "user setting (kbit/s)", "kbit/s", [(f"{r['setting_kbps']:g}", secs_of(r)) for r in f2]), ""]

if len(L) <= 8:
    L += ["Not run yet: `sudo bash bench/papers/mongoose.sh`.", ""]
results.write_section(BEGIN, END, L)
