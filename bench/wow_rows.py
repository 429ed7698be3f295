"""Rows of bench/RESULTS-engine.md section 6 from the runs bench/engine.sh left in OUT: both sides'
departures of each 10,000-player run, the players' side beside the host's floor and steal, and the
share within 1 ms counted only in seconds the host took under 1 % of (where the floor allows).

Usage: python3 bench/wow_rows.py OUT REPEATS"""
import json
import re
import sys

out, rep = sys.argv[1], int(sys.argv[2])
for spin in (0, 80):
    for k in range(1, rep + 1):
        d = f"{out}/wow-spin{spin}-{k}"
        s = json.load(open(f"{d}/summary.json"))
        srv = json.load(open(f"{d}/server.json"))
        c = s["client"]
        l, h, sl = c["lateness"], c["host"], srv["lateness"]
        within = 100 * (1 - l["over_1ms"] / max(c["packets"], 1))
        swithin = 100 * (1 - sl["over_1ms"] / max(srv["packets"], 1))
        # Seconds of the run the host stole under 1 % of: what Horde did where the floor allows.
        quiet = [i for i, x in enumerate(h["steal_seconds"]) if x < 0.01 and i < len(h["sent_seconds"])]
        sent = sum(h["sent_seconds"][i] for i in quiet)
        late = sum(h["late_seconds"][i] if i < len(h["late_seconds"]) else 0 for i in quiet)
        qwithin = 100 * (1 - late / max(sent, 1))
        # Arrivals wait in their sockets while a side is busy: the worst category's mean delay
        # each way, and its KS of inter-arrival times against the model.
        cats = s["analysis"]["categories"]
        worst = {d: max((x[d].get("delay_mean_ms") or 0.0, x[d].get("ks_iat") or 0.0) for x in cats) for d in ("up", "down")}
        worst_ks = {d: max(x[d].get("ks_iat") or 0.0 for x in cats) for d in ("up", "down")}
        cpu = re.search(r"Percent of CPU this job got: (\d+)%", open(f"{d}.time.txt").read())
        name = "sleeps (`spin_us = 0`)" if spin == 0 else "spins (`spin_us = 80`)"
        print(
            f'| {name} #{k} | {c["packets"]} | {l["p50_us"]:.0f} / {l["p99_us"]:.0f} µs | {within:.2f} % | '
            f'{qwithin:.2f} % ({len(quiet)} of {len(h["steal_seconds"])} s) | {h["floor"]["p99_us"]:.1f} µs | '
            f'{100 * (h["steal_mean"] or 0):.1f} % | {h["late_in_steal"]} / {h["late_total"]} | '
            f'{"yes" if h["within_floor"] else "no"} | {srv["packets"]} | {sl["p50_us"]:.0f} / {sl["p99_us"]:.0f} µs | '
            f'{swithin:.2f} % | {worst["up"][0]:.1f} / {worst["down"][0]:.1f} ms | {worst_ks["up"]:.3f} / {worst_ks["down"]:.3f} | '
            f'{srv["threads"]} | {cpu.group(1) if cpu else "?"} % |'
        )
