#!/usr/bin/env python3
"""Tables of bench/hostile.sh's results (Markdown), from bench/out/hostile/."""

import csv
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "bench/out/hostile"


def load(p):
    try:
        with open(p) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


CASES = [
    ("udp1", "UDP server side (quake3), 1 spoofed hello, whole 30 s schedule"),
    ("udp10k", "UDP server side, 10,000 spoofed hellos (10,000 victim ports), 10 s"),
    ("udp1-key", "UDP server side, 1 spoofed hello made with the run key, 30 s"),
    ("udp10k-key", "UDP server side, 10,000 spoofed hellos made with the run key, 10 s"),
    ("echo1", "`horde recv`, 1 spoofed echo request (64 B)"),
    ("echo10k", "`horde recv`, 10,000 spoofed echo requests"),
    ("tcp1", "TCP server side (wow), 1 connection with an unvalidated hello, 5 s"),
    ("tcp10k", "TCP server side, 10,000 connections with unvalidated hellos"),
]

print("### A. Bytes sent to a spoofed source per byte it sent\n")
print("| case | build | packets/conns | bytes in | bytes out | out / in |")
print("|---|---|---:|---:|---:|---:|")
for key, what in CASES:
    for label in ("old", "new"):
        r = load(os.path.join(out, label, key + ".json"))
        if not r:
            continue
        n = r.get("packets", r.get("connections"))
        got = r.get("victim_bytes", r.get("received_bytes"))
        print(f"| {what} | {label} | {n:,} | {r['sent_bytes']:,} | {got:,} | {r['ratio']:.3f} |")

soak = os.path.join(out, "soak")
summary = None
try:
    summary = json.load(open(os.path.join(soak, "run", "summary.json")))
except OSError:
    pass
if summary:
    a = summary["analysis"]
    print(f"\n### B. Soak: {summary['players']} WoW players for {summary['duration_s']:.0f} s beside hostile load\n")
    print(f"server connections {summary['server_connections']}, mismatched {summary['mismatched']}, "
          f"client lateness p99 {summary['client']['lateness']['p99_us']:.1f} µs\n")
    print("| category | dir | APDUs | lost | rate / player | model | error % | KS size | KS IAT |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for c in a["categories"]:
        for d in ("up", "down"):
            x = c[d]
            err = x.get("rate_error_pct") or 0.0
            worst = max(worst, abs(err))
            print(f"| {c['category']} | {d} | {x['received']:,} | {x['lost']} | {x['apdu_rate_per_player']:.3f} | "
                  f"{(x.get('model_apdu_rate_per_player') or 0):.3f} | {err:+.2f} | {(x.get('ks_size') or 0):.4f} | {(x.get('ks_iat') or 0):.4f} |")
    print(f"\nworst rate error: {worst:.2f} %\n")
    srv = summary["client"].get("refusals", {})
attack = load(os.path.join(soak, "attack.json"))
if attack:
    print("hostile load sent: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in sorted(attack.items())) + "\n")
try:
    server = json.load(open(os.path.join(soak, "run", "server.json")))
    print("server side turned away: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in server.get("refusals", {}).items()) + "\n")
except OSError:
    pass
try:
    recv = json.load(open(os.path.join(soak, "recv.json")))
    print("`horde recv` turned away: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in recv.get("refusals", {}).items())
          + f"; garbage datagrams {recv.get('garbage_datagrams', 0):,}, garbage streams {recv.get('garbage_streams', 0):,}; logged packets {recv.get('packets', 0):,}\n")
except OSError:
    pass
probe = load(os.path.join(soak, "probe.json"))
if probe:
    print(f"legitimate round-trip probe to the attacked receiver afterwards: {probe['packets']} sent, {probe['echoes']} echoed\n")
rows = []
try:
    rows = list(csv.DictReader(open(os.path.join(soak, "resources.csv"))))
except OSError:
    pass
if rows:
    print("| process | samples | RSS first → last (max), MB | descriptors first → last (max) |")
    print("|---|---:|---|---|")
    by = {}
    for r in rows:
        by.setdefault((r["pid"], r["name"]), []).append(r)
    for (pid, name), rs in by.items():
        rss = [int(r["rss_kb"]) / 1024 for r in rs]
        fds = [int(r["fds"]) for r in rs]
        label = {"client": "`horde run` (client side)", "server": "server side", "recv": "`horde recv` (attacked)"}.get(name, name)
        print(f"| {label} (pid {pid}) | {len(rs)} | {rss[0]:.1f} → {rss[-1]:.1f} ({max(rss):.1f}) | {fds[0]} → {fds[-1]} ({max(fds)}) |")
