#!/usr/bin/env bash
# One bench command (issue 50, item 5): runs the headline benchmarks one after the other on this
# machine, each waiting until the machine is quiet (1-minute load average below LOAD_GATE, at
# most 120 s; the load it started at is written down; each script reports the steal of its own
# runs where it matters: precision.sh per run), and writes the headline table of
# bench/RESULTS.md between its markers from what the scripts measured (their
# bench/out/NAME/headline.json) — no figure is copied by hand.
#
# Parts: the engine against the C sendmmsg pair, the C GSO/GRO pair, iperf3, D-ITG and mgen
# (bench/gso.sh); paced precision beside the host's floor (bench/precision.sh); the link
# emulator beside a plain veth (bench/emu-rate.sh); 1,000 and 10,000 hosts up and down beside
# Mininet (bench/emu-scale.sh); 10,000 WoW players, both sides on this machine
# (bench/players.sh); OpenArena bots per core (bench/gameserver.sh). Ratios are of delivered
# packets. Needs root (namespaces) and installs the peers from Debian where they are missing.
#
#   sudo bash bench/run.sh            # 3 rounds each, ~45 minutes
#   sudo bash bench/run.sh --quick    # 1 round each, shorter runs, ~12 minutes: for the note of a
#                                     # performance change (its table says --quick)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=""
[ "${1:-}" = "--quick" ] && QUICK=1
LOAD_GATE=${LOAD_GATE:-0.5}
[ "$(id -u)" = 0 ] || { echo "bench/run.sh needs root (the link emulator's part builds namespaces)"; exit 2; }
mkdir -p bench/out
cargo build --release -q -p horde
: > bench/out/run-gates.txt

gate() { # part -> waits for a quiet machine, notes load and steal
  local t=0
  while awk -v g="$LOAD_GATE" '{exit !($1 >= g)}' /proc/loadavg && [ $t -lt 120 ]; do sleep 5; t=$((t + 5)); done
  echo "$1 started at load $(cut -d' ' -f1 /proc/loadavg) after waiting ${t} s" >> bench/out/run-gates.txt
}

gate gso
if [ -n "$QUICK" ]; then QUICK=1 NO_BEFORE=1 bash bench/gso.sh; else NO_BEFORE=1 bash bench/gso.sh; fi
gate precision
if [ -n "$QUICK" ]; then RUNS=1 bash bench/precision.sh; else bash bench/precision.sh; fi
gate emu-rate
if [ -n "$QUICK" ]; then ROUNDS=1 bash bench/emu-rate.sh; else bash bench/emu-rate.sh; fi
gate emu-scale
if [ -n "$QUICK" ]; then SIZES=10000 ROUNDS=1 MININET=0 bash bench/emu-scale.sh; else SIZES="1000 10000" ROUNDS=3 MN_SIZES=1000 bash bench/emu-scale.sh; fi
gate players
if [ -n "$QUICK" ]; then MAIN_ROUNDS=1 MAIN_SECS=15 SEARCH=0 bash bench/players.sh; else MAIN_ROUNDS=3 MAIN_SECS=30 SEARCH=0 bash bench/players.sh; fi
gate gameserver
if [ -n "$QUICK" ]; then QUICK=1 bash bench/gameserver.sh; else bash bench/gameserver.sh; fi

python3 - "$ROOT" "${QUICK:+quick}" <<'PY'
import datetime, json, os, re, subprocess, sys
root, quick = sys.argv[1], sys.argv[2]
h = lambda name: json.load(open(f"{root}/bench/out/{name}/headline.json"))
gso, prec, emu = h("gso"), h("precision"), h("emu-rate")
scale, players, bots = h("emu-scale"), h("players"), h("gameserver")
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
gates = open(f"{root}/bench/out/run-gates.txt").read().strip().replace("\n", "; ")
m = gso["median_pps"]
def ok(b): return "met" if b else "**not met**"
rows = []
r = m["h-gso-64"] / m["c-plain-64"]
rows.append(("engine vs the C `sendmmsg` pair, 64 B bulk, logs at both ends (GSO/GRO)",
             f"{m['h-gso-64']:,.0f} vs {m['c-plain-64']:,.0f} pkt/s delivered: {r:.1f}×; the C GSO/GRO pair (no logs) {m['c-gso-64']:,.0f}; Horde's worst loss {gso['max_loss_pct']['h-gso-64']:.2f} %",
             f"≥ 1.5×, 0 loss: {ok(r >= 1.5 and gso['max_loss_pct']['h-gso-64'] == 0)}", "RESULTS-gso.md"))
peers = [(n, m.get(t)) for n, t in (("iperf3", "p-iperf3-64"), ("D-ITG", "p-ditg-64"), ("mgen", "p-mgen-64"))]
rows.append(("the engine vs iperf3, D-ITG and mgen, 64 B, each as fast as it goes",
             "; ".join(f"{n} {v:,.0f} pkt/s delivered (Horde {m['h-gso-64'] / v:.1f}×, worst loss {gso['max_loss_pct'][t]:.2f} %)" for (n, v), t in zip(peers, ("p-iperf3-64", "p-ditg-64", "p-mgen-64")) if v),
             "beside the C pair (no target)", "RESULTS-gso.md"))
for rate in ("10000", "50000", "100000", "500000"):
    p = prec["rates"].get(rate)
    if p:
        rows.append((f"paced {int(rate):,} pkt/s, p99 lateness beside the floor",
                     f"{p['within']} of {p['runs']} runs within max(20 µs, 1.5 × floor); 0 loss in {p['zero_loss']}; p99 {', '.join(f'{x:.1f}' for x in p['p99_us'])} µs",
                     f"every run: {ok(p['within'] == p['runs'] and p['zero_loss'] == p['runs'])}", "RESULTS-precision.md"))
rows.append(("one impaired link (1 ms) vs a plain veth, 64 B, 0-loss rate",
             f"{emu['ratio_median']:.2f}× (link {', '.join(f'{x/1e6:.2f}' for x in emu['link_pps'])} M vs veth {', '.join(f'{x/1e6:.2f}' for x in emu['veth_pps'])} M pkt/s)",
             f"≥ 0.9×: {ok(emu['ratio_median'] >= 0.9)}", "RESULTS-emu-rate.md"))
fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
for n, target in (("10000", "up ≤ 10 s and down ≤ 3 s in every round"), ("1000", "beside Mininet")):
    st = [r for r in scale["star"].get(n, []) if r["up_s"] is not None]
    if not st:
        continue
    ups, downs = [r["up_s"] for r in st], [r["down_s"] for r in st]
    probes = all(r["probe"] == "100" for r in st)
    mn = scale["mininet"].get(n)
    mtext = f"; Mininet up {mn['up_s']} s, down {mn['down_s']} s ({mn['ping']} ping)" if mn else ""
    verdict = ok(max(ups) <= 10 and max(downs) <= 3 and probes) if n == "10000" else ("measured" if probes else "**probe failed**")
    rows.append((f"{int(n):,} hosts on one switch, up and down", f"up {fmt(ups)} s, down {fmt(downs)} s, probe across {'100/100 in every round' if probes else 'failed'}{mtext}",
                 f"{target}: {verdict}", "RESULTS-emu-scale.md"))
pr = [r for r in players["runs"] if r]
if pr:
    good = len(players["runs"]) == len(pr) and all(r["players_within_1ms_pct"] >= 99.5 and r["server_within_1ms_pct"] >= 99.5 and r["worst_ks_iat"] <= 0.02 and r["lost"] == 0 for r in pr)
    rows.append(("10,000 WoW players, both sides on this machine: departures within 1 ms",
                 "players' " + fmt(r["players_within_1ms_pct"] for r in pr) + " %; server's " + fmt(r["server_within_1ms_pct"] for r in pr)
                 + " %; worst KS " + ", ".join(f"{r['worst_ks_iat']:.3f}" for r in pr) + f"; lost {sum(r['lost'] for r in pr)}",
                 f"≥ 99.5 % both sides, KS ≤ 0.02, every run: {ok(good)}", "RESULTS-players.md"))
bs = {b["players"]: b for b in bots["steps"]}
if bs:
    sel = [bs[k] for k in (64, 256) if k in bs]
    rows.append(("OpenArena bots against real servers: bots per core of the load generator",
                 "; ".join(f"{b['players']} bots on {b['servers']} server(s): {b['entered']} in the game, {b['bots_per_core']:,.0f} per core, p99 response {b['response_ms_p99']:.0f} ms, {b['lost']} lost" for b in sel),
                 "measured (saturation " + (f"at {bots['saturation_players']} players" if bots["saturation_players"] else "not reached") + ")", "RESULTS-gameserver.md"))
table = [f"Written by `sudo bash bench/run.sh{' --quick' if quick else ''}` on {datetime.date.today()} (commit {commit}); {os.cpu_count()} cores ({cpu}), kernel {os.uname().release}; gates: {gates}.", "",
         "| figure | measured | target | file |", "|---|---|---|---|"]
table += [f"| {a} | {b} | {c} | [{d}]({d}) |" for a, b, c, d in rows]
table += ["", "Every figure above is from this one run; the rows below are each script's own, dated."]
path = f"{root}/bench/RESULTS.md"
text = open(path).read()
start, end = "<!-- bench/run.sh: start -->", "<!-- bench/run.sh: end -->"
block = start + "\n" + "\n".join(table) + "\n" + end
if start in text:
    text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
else:
    text = text.replace("\n| benchmark |", "\n## Headline, from one run\n\n" + block + "\n\n## Every benchmark\n\n| benchmark |", 1)
open(path, "w").write(text)
print("\n".join(table))
PY
