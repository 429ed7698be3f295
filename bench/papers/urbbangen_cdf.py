#!/usr/bin/env python3
"""Test 3's distributions (journal Figs. 7-8): APDU inter-arrival times and sizes at the
receiver, of one flow drawn at random (seed 25) and of all flows pooled, against the Dungeons
client-to-server model; Kolmogorov-Smirnov distances with the 5 % critical value at the sample
size (1.358/sqrt(n): conservative for a model with atoms, as this one has).

A run of T seconds cannot show a gap longer than what is left of it, and this model's Weibull
(shape 0.58) has a long tail: the pooled inter-arrival times of a 30-s run are shorter than the
model's. So the verdict is a two-sample KS test against an ideal generator under the same
censoring: the model drawn for the same flows over the same T seconds (seed 25), with the 5 %
critical value 1.358·sqrt((n+m)/(n·m)).

usage: urbbangen_cdf.py PACKETS.csv T_SECONDS  (from `horde decode S R --packets-csv`) > cdf.json"""
import bisect
import csv
import json
import math
import random
import sys

W_SHARE, W_SCALE, W_SHAPE, C_SHARE, C_AT = 0.9586, 268.37, 0.58, 0.0414, 500.0
SIZES = {6: 4.57, 10: 8.00, 14: 16.28, 19: 4.04, 22: 8.28, 35: 55.70, 51: 3.13}
TOTAL = sum(SIZES.values())


def iat_cdf(x, left=False):
    """The model's CDF at x (left: just below x)."""
    if x <= 0:
        return 0.0
    f = W_SHARE * (1 - math.exp(-((x / W_SCALE) ** W_SHAPE)))
    if x > C_AT or (x == C_AT and not left):
        f += C_SHARE
    return f


def size_cdf(x, left=False):
    return sum(p for s, p in SIZES.items() if s < x or (s == x and not left)) / TOTAL


def ks(samples, cdf):
    xs = sorted(samples)
    n = len(xs)
    d = 0.0
    i = 0
    while i < n:
        x = xs[i]
        j = bisect.bisect_right(xs, x, i)
        lo, hi = i / n, j / n
        d = max(d, abs(hi - cdf(x)), abs(lo - cdf(x, left=True)))
        i = j
    return d


def ks2(a, b):
    """Two-sample Kolmogorov-Smirnov distance, exact (at every distinct value)."""
    a, b = sorted(a), sorted(b)
    return max(abs(bisect.bisect_right(a, x) / len(a) - bisect.bisect_right(b, x) / len(b)) for x in set(a) | set(b))


def ms(xs):
    """To the model's resolution, 1 ms: a constant 500-ms gap measured as 499.997 or 500.004
    is the model's 500 (a test at µs resolution would count the pacing's µs as a different
    distribution at every atom)."""
    return [round(x) for x in xs]


def ideal_iats(flows, secs, rng):
    """What a perfect generator of the model would show over the same run: per flow, gaps drawn
    from the model until the run ends; the first departure at 0, as Horde's."""
    out = []
    for _ in range(flows):
        t = 0.0
        while True:
            g = C_AT if rng.random() < C_SHARE / (W_SHARE + C_SHARE) else rng.weibullvariate(W_SCALE, W_SHAPE)
            if t + g > secs * 1e3:
                break
            t += g
            out.append(g)
    return out


def ecdf_points(samples, k=200):
    xs = sorted(samples)
    n = len(xs)
    step = max(1, n // k)
    pts = [(xs[i], (i + 1) / n) for i in range(0, n, step)]
    if pts[-1][0] != xs[-1]:
        pts.append((xs[-1], 1.0))
    return pts


flows = {}
for r in csv.DictReader(open(sys.argv[1])):
    if r["direction"] != "forward" or r["lost"] == "true" or not r["arrival_ns"]:
        continue
    flows.setdefault(int(r["flow"]), []).append((int(r["seq"]), int(r["arrival_ns"]), int(r["size"]), int(r["sent_ns"]), int(r["scheduled_ns"])))
iat_all, size_all, dep_all, sched_all = [], [], [], []
per_flow = {}
for f, rows in flows.items():
    rows.sort()
    rows = [x for x in rows if x[0] > 0]  # seq 0 carries the connection's hello
    iats = [(b[1] - a[1]) / 1e6 for a, b in zip(rows, rows[1:])]
    sizes = [x[2] for x in rows]
    dep_all += [(b[3] - a[3]) / 1e6 for a, b in zip(rows, rows[1:])]
    sched_all += [(b[4] - a[4]) / 1e6 for a, b in zip(rows, rows[1:])]
    per_flow[f] = (iats, sizes)
    iat_all += iats
    size_all += sizes
rng = random.Random(25)
secs = float(sys.argv[2])
ideal = ideal_iats(len(per_flow), secs, random.Random(25))
pick = rng.choice(sorted(f for f, v in per_flow.items() if len(v[0]) >= 20))
iats, sizes = per_flow[pick]
crit = lambda n: 1.358 / math.sqrt(n)
grid = [10 ** (i / 40) for i in range(0, 161)]  # 1 ms … 10 s
out = {
    "flows": len(per_flow),
    "one_flow": {"flow": pick, "iat_n": len(iats), "iat_ks": ks(iats, iat_cdf), "iat_crit": crit(len(iats)),
                 "size_n": len(sizes), "size_ks": ks(sizes, size_cdf), "size_crit": crit(len(sizes)),
                 "iat_mean_ms": sum(iats) / len(iats), "iat_ecdf": ecdf_points(iats), "size_ecdf": ecdf_points(sizes)},
    "censored": {"secs": secs, "ideal_n": len(ideal), "ideal_mean_ms": sum(ideal) / len(ideal), "ideal_ecdf": ecdf_points(ideal),
                 "crit2": 1.358 * math.sqrt((len(iat_all) + len(ideal)) / (len(iat_all) * len(ideal))),
                 "arrival_ks2": ks2(ms(iat_all), ms(ideal)), "departure_ks2": ks2(ms(dep_all), ms(ideal)),
                 "scheduled_ks2": ks2(ms(sched_all), ms(ideal)), "n": len(iat_all)},
    "all": {"iat_n": len(iat_all), "iat_ks": ks(iat_all, iat_cdf), "iat_crit": crit(len(iat_all)),
            "size_n": len(size_all), "size_ks": ks(size_all, size_cdf), "size_crit": crit(len(size_all)),
            "iat_mean_ms": sum(iat_all) / len(iat_all), "iat_ecdf": ecdf_points(iat_all), "size_ecdf": ecdf_points(size_all)},
    "model": {"iat_mean_ms": W_SHARE * W_SCALE * math.gamma(1 + 1 / W_SHAPE) + C_SHARE * C_AT,
              "iat_cdf": [(x, iat_cdf(x)) for x in grid], "size_cdf": [(s, size_cdf(s)) for s in range(0, 60)]},
}
print(json.dumps(out))
