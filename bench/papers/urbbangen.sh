#!/usr/bin/env bash
# The UrBBaN-Gen + IMUNES papers' scalability tests (Vasić et al., journal version Tests 1-4,
# Figs. 4-10; SoftCOM 2012 Figs. 2-5), rerun with Horde on emulated hosts of this machine:
# every sender node an emulated host (its own network namespace) on one switch with the
# receiving host, as the papers' IMUNES testbed had all sender nodes in one emulated network.
# One command per point: `horde send --emu ID --flows F`.
#
#   sudo bash bench/papers/urbbangen.sh        (root: namespaces)
#   ONLY=test1|test2|test3|test4 SECS=10 sudo -E bash bench/papers/urbbangen.sh
#
# Time: test1 10 points × (SECS + ~4 s) ≈ 2.5 min, test2 6 points ≈ 1.5 min, test3 5 points ×
# (T3SECS + ~10 s) ≈ 4 min, test4 15 searches of ≤ 9 runs × (T4SECS + ~2 s) ≤ 8 min; ≤ 16 min in
# all. Each run is bounded by its duration.
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
T3SECS=${T3SECS:-30}
# Two pacing workers (one cannot pace 180,000 pkt/s through veth and a bridge here), sleeping to
# each departure (no busy-wait window): the CPU load is then the work, as in the papers.
THREADS=${THREADS:-2}
SPIN=${SPIN:-0}
DATA=bench/papers/data
mkdir -p "$DATA"
W=$(mktemp -d /tmp/horde-papers.XXXXXX)
ID=ubg$$
ID=${ID:0:6}
cleanup() { "$H" emu down "$ID" >/dev/null 2>&1 || true; rm -rf "$W"; }
trap cleanup EXIT

# 240 sender hosts (the journal's Test 3 testbed; Test 1 uses the first 10-180) and the
# receiving host on one switch.
cat > "$W/topo.toml" <<EOF
name = "urbbangen"
[[node]]
name = "h"
kind = "host"
count = 240
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

# run TEST LABEL STREAMS RATE_PER_STREAM SIZE SECS NODE [MODEL] → one JSON line in
# $DATA/urbbangen-TEST.jsonl. MODEL (TOML lines) replaces the constant rate and size.
run() {
  local test=$1 label=$2 n=$3 rate=$4 size=$5 secs=$6 node=$7 model=${8:-} out="$W/out-$1-$2"
  [ -n "$model" ] || model=$(printf 'rate = %s\nsize = %s' "$rate" "$size")
  cat > "$W/f.toml" <<EOF
[[flow]]
name = "s"
node = "$node"
repeat = $n
duration = "${secs}s"
dst = "rx:9000"
$model
EOF
  rm -rf "$out"
  "$H" send --emu "$ID" --flows "$W/f.toml" --out "$out" --floor 0s --threads "$THREADS" --spin-us "$SPIN" > "$W/log" 2>&1 || { cat "$W/log" >&2; echo "run $test $label failed" >&2; return 1; }
  python3 - "$out/summary.json" "$test" "$label" "$n" "$rate" "$size" "$secs" >> "$DATA/urbbangen-$test.jsonl" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
t, e = s["total"], s["emulated"]
num = lambda v: float(v) if v not in ("-", "") else None
print(json.dumps({
    "test": sys.argv[2], "label": sys.argv[3], "streams": int(sys.argv[4]), "rate_per_stream": num(sys.argv[5]),
    "size": num(sys.argv[6]), "secs": float(sys.argv[7]),
    "sent": t["loss"]["sent"], "lost": t["loss"]["lost"], "loss_pct": t["loss"]["loss_pct"],
    "pkt_rate": t["pkt_rate"], "delay_p50_ms": t["delay"]["p50_ms"] if t.get("delay") else None,
    "delay_p99_ms": t["delay"]["p99_ms"] if t.get("delay") else None,
    "lateness_p99_us": e["send"]["lateness"]["p99_us"], "unsent": e["send"]["unsent"],
    "host_busy_pct": e["host_busy_pct"], "process_cpu_pct": e["process_cpu_pct"], "cpus": e["cpus"],
    "threads": e["send"]["threads"],
}))
EOF
  tail -1 "$DATA/urbbangen-$test.jsonl"
  if [ "${KEEP:-}" = "$test-$label" ]; then cp -r "$out" "$W/kept"; fi
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
if want test3; then
  # Both ends of every TCP connection are in one process: 10,000 flows need ~20,300
  # descriptors. Where the hard limit is lower and cannot be raised (a container without
  # CAP_SYS_RESOURCE: 20,000 here), the last point is the largest that fits, and says so.
  ulimit -Hn 65536 2>/dev/null && ulimit -n 65536 2>/dev/null || true
  NMAX=$(( ( $(ulimit -Hn) - 400 ) / 2 / 100 * 100 ))
  [ "$NMAX" -gt 10000 ] && NMAX=10000
  # The Dungeons category's client-to-server model (crates/model/services/wow.toml, as in the
  # papers' source): Weibull/constant inter-departure mix, the traces' discrete APDU sizes. The
  # papers had to replace the sizes by a normal distribution (D-ITG 2.8's zero-window bug);
  # Horde sends the model as published.
  DUNGEONS='transport = "tcp"
idt = "mix(95.86*weibull(268.37, 0.58), 4.14*constant(500))"
size = "discrete(6:4.57, 10:8.00, 14:16.28, 19:4.04, 22:8.28, 35:55.70, 51:3.13)"'
  : > "$DATA/urbbangen-test3.jsonl"
  for n in 1000 2500 5000 7500 "$NMAX"; do KEEP=test3-$NMAX run test3 "$n" "$n" - - "$T3SECS" h "$DUNGEONS"; done
  echo "$NMAX $(ulimit -Hn)" > "$DATA/urbbangen-test3-limit.txt"
  # One flow drawn at random (seeded) from the 10,000, and all of them: APDU inter-arrival times
  # and sizes at the receiver, for the CDFs against the model (journal Figs. 7-8).
  "$H" decode "$W/kept/send.hlog" "$W/kept/recv.hlog" --packets-csv "$W/packets.csv" -q > /dev/null
  python3 bench/papers/urbbangen_cdf.py "$W/packets.csv" "$T3SECS" > "$DATA/urbbangen-test3-cdf.json"
fi
if want test4; then
  # The largest total rate one sender host reaches with zero loss, per size and stream count:
  # double from 20,000 pkt/s until a run fails, then halve the gap three times.
  : > "$DATA/urbbangen-test4.jsonl"
  # A run fails when a packet sent is lost, or the sender could not keep the rate: more
  # departures still due at the end than one per stream (each stream's last one can fall due in
  # the run's last instant) and 0.1 % of the asked ones.
  lost() { tail -1 "$DATA/urbbangen-test4.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(1 if d["lost"] > 0 or d["unsent"] > d["streams"] + 0.001 * d["streams"] * d["rate_per_stream"] * d["secs"] else 0)'; }
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
      echo "test4 size $size streams $s: largest rate with zero loss and the rate kept: $lo pkt/s (failed at $hi)"
    done
  done
fi
python3 bench/papers/urbbangen_report.py
