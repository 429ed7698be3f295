#!/usr/bin/env bash
# The UrBBaN-Gen + IMUNES papers' scalability tests (Vasić et al., journal version Tests 1-4,
# Figs. 4-10; SoftCOM 2012 Figs. 2-5), rerun with Horde on emulated hosts of this machine:
# every sender node an emulated host (its own network namespace) on one switch with the
# receiving host, as the papers' IMUNES testbed had all sender nodes in one emulated network.
# One command per point: `horde send --emu ID --flows F`.
#
#   sudo bash bench/papers/urbbangen.sh        (root: namespaces)
#   ONLY=test1|test2|test4 SECS=10 sudo -E bash bench/papers/urbbangen.sh
#
# Time: test1 10 points × (SECS + ~4 s) ≈ 2.5 min, test2 6 points ≈ 1.5 min, test4 15 searches of
# ≤ 9 runs × (T4SECS + ~2 s) ≤ 8 min; ≤ 12 min in all. Each run is bounded by its duration.
# Writes bench/papers/data/urbbangen-*.jsonl (one line per run) and the UrBBaN-Gen section of
# bench/RESULTS-papers.md with its SVG figures (bench/papers/charts/).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces): sudo bash $0" >&2; exit 1; }
cargo build --release -q -p horde
H="$PWD/target/release/horde"
ONLY=${ONLY:-all}
SECS=${SECS:-10}
T4SECS=${T4SECS:-2}
DATA=bench/papers/data
mkdir -p "$DATA"
W=$(mktemp -d /tmp/horde-papers.XXXXXX)
ID=ubg$$
ID=${ID:0:6}
cleanup() { "$H" emu down "$ID" >/dev/null 2>&1 || true; rm -rf "$W"; }
trap cleanup EXIT

# 180 sender hosts and the receiving host on one switch (the papers' largest Test 1 point).
cat > "$W/topo.toml" <<EOF
name = "urbbangen"
[[node]]
name = "h"
kind = "host"
count = 180
[[node]]
name = "rx"
kind = "host"
[[node]]
name = "sw"
kind = "switch"
[[link]]
a = "h"
b = "sw"
subnet = "10.80.0.0/16"
[[link]]
a = "rx"
b = "sw"
EOF
"$H" emu up "$W/topo.toml" --id "$ID" >/dev/null

machine() {
  python3 - <<'EOF'
import os, platform
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"{os.cpu_count()} × {cpu}, {platform.release()}")
EOF
}

# run TEST LABEL STREAMS RATE_PER_STREAM SIZE SECS NODE → one JSON line in $DATA/urbbangen-TEST.jsonl
run() {
  local test=$1 label=$2 n=$3 rate=$4 size=$5 secs=$6 node=$7 out="$W/out-$1-$2"
  cat > "$W/f.toml" <<EOF
[[flow]]
name = "s"
node = "$node"
repeat = $n
rate = $rate
size = $size
duration = "${secs}s"
dst = "rx:9000"
EOF
  rm -rf "$out"
  "$H" send --emu "$ID" --flows "$W/f.toml" --out "$out" --floor 0s > "$W/log" 2>&1 || { cat "$W/log" >&2; echo "run $test $label failed" >&2; return 1; }
  python3 - "$out/summary.json" "$test" "$label" "$n" "$rate" "$size" "$secs" >> "$DATA/urbbangen-$test.jsonl" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
t, e = s["total"], s["emulated"]
print(json.dumps({
    "test": sys.argv[2], "label": sys.argv[3], "streams": int(sys.argv[4]), "rate_per_stream": float(sys.argv[5]),
    "size": int(sys.argv[6]), "secs": float(sys.argv[7]),
    "sent": t["loss"]["sent"], "lost": t["loss"]["lost"], "loss_pct": t["loss"]["loss_pct"],
    "pkt_rate": t["pkt_rate"], "delay_p50_ms": t["delay"]["p50_ms"] if t.get("delay") else None,
    "delay_p99_ms": t["delay"]["p99_ms"] if t.get("delay") else None,
    "lateness_p99_us": e["send"]["lateness"]["p99_us"], "unsent": e["send"]["unsent"],
    "host_busy_pct": e["host_busy_pct"], "process_cpu_pct": e["process_cpu_pct"], "cpus": e["cpus"],
}))
EOF
  tail -1 "$DATA/urbbangen-$test.jsonl"
  rm -rf "$out"
}

want() { [ "$ONLY" = all ] || [ "$ONLY" = "$1" ]; }

machine > "$DATA/urbbangen-machine.txt"
if want test1; then
  : > "$DATA/urbbangen-test1.jsonl"
  for n in 10 20 40 60 80 100 120 140 160 180; do run test1 "$n" "$n" 1000 64 "$SECS" h; done
fi
if want test2; then
  : > "$DATA/urbbangen-test2.jsonl"
  for size in 64 128 256 512 1024 1472; do run test2 "$size" 100 200 "$size" "$SECS" h; done
fi
if want test4; then
  # The largest total rate one sender host reaches with zero loss, per size and stream count:
  # double from 20,000 pkt/s until a run loses, then halve the gap three times.
  : > "$DATA/urbbangen-test4.jsonl"
  lost() { tail -1 "$DATA/urbbangen-test4.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(1 if d["lost"] > 0 or d["unsent"] > 0 else 0)'; }
  for size in 64 512 1472; do
    for s in 1 10 50 100 250; do
      lo=0 hi=0 r=20000
      while [ "$hi" = 0 ] && [ "$r" -le 1280000 ]; do
        run test4 "$size-$s-$r" "$s" "$(python3 -c "print($r / $s)")" "$size" "$T4SECS" h1 >/dev/null
        if [ "$(lost)" = 1 ]; then hi=$r; else lo=$r; r=$((r * 2)); fi
      done
      [ "$hi" = 0 ] && hi=$r
      for _ in 1 2 3; do
        r=$(( (lo + hi) / 2 ))
        run test4 "$size-$s-$r" "$s" "$(python3 -c "print($r / $s)")" "$size" "$T4SECS" h1 >/dev/null
        if [ "$(lost)" = 1 ]; then hi=$r; else lo=$r; fi
      done
      echo "test4 size $size streams $s: largest zero-loss rate $lo pkt/s (a loss at $hi)"
    done
  done
fi
python3 bench/papers/urbbangen_report.py
