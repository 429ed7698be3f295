#!/usr/bin/env bash
# Issue 50, item 2, and the precision rows of its acceptance: paced 64-B UDP on loopback at
# 10k, 50k, 100k and 500k pkt/s for 5 s, per-packet logs at both ends, 3 runs per rate (rates
# interleaved, so a noisy minute touches every rate). Each run's send lateness (|actual −
# scheduled|, the sender's own histogram) is set beside the host's floor that `horde send`
# measures just before it (a pacer that only busy-waits at the run's rate, `--floor`), and
# judged against max(20 µs, 1.5 × floor p99) — the bound `send --json` reports as
# `host.allowed_p99_us`. Loss is the receiver's count against the sender's.
# Writes bench/RESULTS-precision.md and bench/out/precision/headline.json.
#   bash bench/precision.sh                 # ~2 minutes
#   RATES="500000" RUNS=1 bash bench/precision.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/precision
mkdir -p "$OUT"
RATES=${RATES:-"10000 50000 100000 500000"}
RUNS=${RUNS:-3}
cargo build --release -q -p horde
H=$ROOT/target/release/horde
PORT=${PORT:-9310}
: > "$OUT/runs.jsonl"
for run in $(seq "$RUNS"); do
  for rate in $RATES; do
    "$H" recv --udp "$PORT" --log "$OUT/r.hlog" --idle 1s --json "$OUT/r.json" >/dev/null 2>&1 &
    rp=$!
    sleep 0.3
    "$H" send --dst "127.0.0.1:$PORT" --rate "$rate" --size 64 --duration 5s --log "$OUT/s.hlog" --json "$OUT/s.json" >/dev/null 2>&1
    wait "$rp"
    python3 - "$OUT/s.json" "$OUT/r.json" "$run" "$rate" >> "$OUT/runs.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
h, l = s["host"], s["lateness"]
print(json.dumps({"run": int(sys.argv[3]), "rate": int(sys.argv[4]), "sent": s["packets"], "received": r["packets"],
                  "p50_us": l["p50_us"], "p99_us": l["p99_us"], "p999_us": l["p999_us"], "over_1ms": l["over_1ms"],
                  "floor_p99_us": h["floor"]["p99_us"], "allowed_p99_us": h["allowed_p99_us"], "within": h["within_floor"],
                  "steal_mean": h.get("steal_mean") or 0.0}))
PY
    tail -1 "$OUT/runs.jsonl"
  done
done
python3 - "$OUT/runs.jsonl" "$OUT/headline.json" > "$ROOT/bench/RESULTS-precision.md" <<'PY'
import datetime, json, os, subprocess, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
rates = sorted({r["rate"] for r in runs})
print("# Paced precision beside the host's floor (issue 50, item 2)\n")
print(f"Command: `bash bench/precision.sh` ({datetime.date.today()}, commit {commit}). Machine: {os.cpu_count()} cores ({cpu}), kernel {os.uname().release}.")
print("`horde send --rate R --size 64 --duration 5s` to `horde recv` on loopback, per-packet logs at both ends, runs interleaved over the rates. Lateness is |actual − scheduled| departure from the sender's own histogram; the floor is what `send` measures just before the run (a pacer that only busy-waits at the run's rate, 200 ms); the bound is max(20 µs, 1.5 × floor p99) (`host.allowed_p99_us`).\n")
print("| rate pkt/s | run | sent | lost | lateness p50 / p99 / p99.9 µs | > 1 ms | floor p99 µs | bound µs | within | steal |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
head = {}
for rate in rates:
    rs = [r for r in runs if r["rate"] == rate]
    for r in rs:
        print(f"| {rate:,} | {r['run']} | {r['sent']:,} | {r['sent'] - r['received']:,} | {r['p50_us']:.1f} / {r['p99_us']:.1f} / {r['p999_us']:.1f} | {r['over_1ms']:,} | {r['floor_p99_us']:.1f} | {r['allowed_p99_us']:.1f} | {'yes' if r['within'] else 'no'} | {100 * r['steal_mean']:.1f} % |")
    head[str(rate)] = {"runs": len(rs), "within": sum(r["within"] for r in rs), "zero_loss": sum(r["sent"] == r["received"] for r in rs),
                       "p99_us": sorted(r["p99_us"] for r in rs)}
print("\n| rate pkt/s | runs within the bound | runs with 0 loss | p99 µs (each run) |")
print("|---:|---:|---:|---|")
for rate in rates:
    h = head[str(rate)]
    print(f"| {rate:,} | {h['within']} of {h['runs']} | {h['zero_loss']} of {h['runs']} | {', '.join(f'{x:.1f}' for x in h['p99_us'])} |")
json.dump({"date": str(datetime.date.today()), "commit": commit, "rates": head}, open(sys.argv[2], "w"), indent=1)
PY
cat "$ROOT/bench/RESULTS-precision.md" | tail -8
