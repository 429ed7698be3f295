#!/usr/bin/env bash
# One bench command (issue 50, item 5): runs the headline benchmarks one after the other on this
# machine, each waiting until the machine is quiet (1-minute load average below LOAD_GATE, at
# most 120 s; the load it started at is written down; each script reports the steal of its own
# runs where it matters: precision.sh per run), and writes the headline table of
# bench/RESULTS.md between its markers from what the scripts measured (their
# bench/out/NAME/headline.json) — no figure is copied by hand.
#
# Parts now: the engine against the C sendmmsg pair and the C GSO/GRO pair (bench/gso.sh),
# paced precision beside the host's floor (bench/precision.sh), the link emulator beside a
# plain veth (bench/emu-rate.sh, root). Ratios are of delivered packets.
#
#   sudo bash bench/run.sh            # 3 rounds each, ~15 minutes
#   sudo bash bench/run.sh --quick    # 1 round each, ~6 minutes: for the note of a performance change
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

python3 - "$ROOT" "${QUICK:+quick}" <<'PY'
import datetime, json, os, re, subprocess, sys
root, quick = sys.argv[1], sys.argv[2]
h = lambda name: json.load(open(f"{root}/bench/out/{name}/headline.json"))
gso, prec, emu = h("gso"), h("precision"), h("emu-rate")
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
for rate in ("10000", "50000", "100000", "500000"):
    p = prec["rates"].get(rate)
    if p:
        rows.append((f"paced {int(rate):,} pkt/s, p99 lateness beside the floor",
                     f"{p['within']} of {p['runs']} runs within max(20 µs, 1.5 × floor); 0 loss in {p['zero_loss']}; p99 {', '.join(f'{x:.1f}' for x in p['p99_us'])} µs",
                     f"every run: {ok(p['within'] == p['runs'] and p['zero_loss'] == p['runs'])}", "RESULTS-precision.md"))
rows.append(("one impaired link (1 ms) vs a plain veth, 64 B, 0-loss rate",
             f"{emu['ratio_median']:.2f}× (link {', '.join(f'{x/1e6:.2f}' for x in emu['link_pps'])} M vs veth {', '.join(f'{x/1e6:.2f}' for x in emu['veth_pps'])} M pkt/s)",
             f"≥ 0.9×: {ok(emu['ratio_median'] >= 0.9)}", "RESULTS-emu-rate.md"))
table = [f"Written by `sudo bash bench/run.sh{' --quick' if quick else ''}` on {datetime.date.today()} (commit {commit}); {os.cpu_count()} cores ({cpu}), kernel {os.uname().release}; gates: {gates}.", "",
         "| figure | measured | target | file |", "|---|---|---|---|"]
table += [f"| {a} | {b} | {c} | [{d}]({d}) |" for a, b, c, d in rows]
table += ["", "Not yet run by `bench/run.sh` (their own scripts, dated in their rows below): 10,000 hosts up (`emu-scale.sh`), 10,000 players (`players.sh`), bots per core (`gameserver.sh`), iperf3 / D-ITG / mgen beside the engine (`engine.sh`)."]
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
