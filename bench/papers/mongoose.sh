#!/usr/bin/env bash
# Mongoose (Oliver, Miller, Allison, "Mongoose: Throughput Redistributing Virtual World"): the
# paper's figures that bench/regulation.sh does not already cover, each beside the paper's text.
#
# Simulated, as the paper's own were (`horde circuit sim`: the same throttle state machines in a
# closed loop in virtual time, no sockets):
#   fig3b  equal-throughput contours over RTT × loss for the OpenSim user settings 50, 500 and
#          1500 kbit/s (the paper's analysis: its 1 s period, its 50 kbit/s floor, deterministic
#          loss), against TCP's deterministic-loss rate (Mathis) and Padhye's equation;
#   fig6a  loss switching between 0.01 % and 5 % (deterministic), Mongoose vs TFRC;
#   fig6c  convergence time from 1 % loss to each of many loss levels (random loss, SEEDS runs).
# Measured, on emulated links (root; Horde's userspace link emulator, this kernel has no netem),
# one client/server host pair per point, all points of a figure at once, the opensim service's
# avatar demand (walking with teleports: application limited, bursty), per-second throughput at
# the client:
#   fig9   Mongoose client + Mongoose server (dual buckets), RTT 150 ms, loss 0–10 %: medians,
#          quartiles and means vs loss (9a) and CDFs at 0, 0.5, 3 and 10 % (9b);
#   fig9c  the four server × client combinations (OpenSim per-channel or Mongoose dual server;
#          SL/OpenSim viewer or Mongoose client) at 0 % loss: CDFs;
#   fig2   the OpenSim viewer (its 5 s period and floor) with the OpenSim server at user
#          settings 50–1500 kbit/s: the island download after login (2b) and box plots of
#          throughput per setting (2c).
#
#   sudo bash bench/papers/mongoose.sh              # ≈ 15 min (measured: 14.5 min on this machine)
#   ONLY=fig3b,fig6a,fig6c bash bench/papers/mongoose.sh   # the simulations alone: ≈ 2 min, no root
#   (fig9, fig9c, fig2: ≈ 4.2 min each at the default DUR=240)
#   ONLY=fig9 DUR=120 sudo -E bash bench/papers/mongoose.sh
#
# Every run is bounded by its duration; the topology is taken down on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
ALL=fig3b,fig6a,fig6c,fig9,fig9c,fig2
ONLY=${ONLY:-$ALL}
on() { [[ ",$ONLY," == *",$1,"* ]]; }
DUR=${DUR:-240}
SEEDS=${SEEDS:-5}
DATA=bench/papers/data
mkdir -p "$DATA"
cargo build --release -q -p horde
H="$PWD/target/release/horde"
W=$(mktemp -d /tmp/horde-mongoose.XXXXXX)
ID=mongo
UP=""
cleanup() {
  [ -n "$UP" ] && { "$H" emu down "$ID" --purge >/dev/null 2>&1 || true; }
  rm -rf "$W"
}
trap cleanup EXIT
python3 - > "$DATA/mongoose-machine.txt" <<'PY'
import os, platform
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"{os.cpu_count()} × {cpu}, {platform.release()}")
PY
echo "commit $(git rev-parse --short HEAD), $(date -u +%F)" >> "$DATA/mongoose-machine.txt"

# sim OUT ARGS…: one simulated run's summary (its seconds dropped unless KEEP=1) as a JSON line.
sim() {
  local out=$1; shift
  "$H" circuit sim "$@" --json "$W/s.json" >/dev/null 2>&1
  python3 - "$W/s.json" "${KEEP:-0}" "$*" >> "$out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
seconds = j.pop("seconds")
if sys.argv[2] == "1":
    # What was asked for in each second (t = 1, 2, …), kbit/s.
    j["requested_s"] = [round(s["requested_kbps"], 1) for s in seconds]
j["args"] = sys.argv[3]
print(json.dumps(j))
PY
}

if on fig3b; then
  : > "$DATA/mongoose-fig3b.jsonl"
  for s in 50 500 1500; do
    for p in 0.1 0.2 0.3 0.5 0.75 1 1.5 2 2.5 3 3.25 3.5 4 4.5 5; do
      # The paper's analysis: 1 s period, 50 kbit/s floor, deterministic loss. OpenSim's rate does
      # not depend on the RTT; TCP's is computed from the same loss at every RTT.
      sim "$DATA/mongoose-fig3b.jsonl" --throttle "opensim:$s" --throttle-period 1 --floor 50 --periodic --loss "$p%" -t 600s
      # The viewer's own (5 s, max(0.2 × setting, 50)), for comparison.
      sim "$DATA/mongoose-fig3b.jsonl" --throttle "opensim:$s" --periodic --loss "$p%" -t 600s
    done
  done
  echo "fig3b done"
fi

if on fig6a; then
  : > "$DATA/mongoose-fig6a.jsonl"
  for t in mongoose mongoose-paper tfrc; do
    KEEP=1 sim "$DATA/mongoose-fig6a.jsonl" --throttle "$t" --periodic --rtt 100ms --loss "0:0.01%,100:5%,200:0.01%,300:5%,400:0.01%" -t 500s
  done
  echo "fig6a done"
fi

if on fig6c; then
  : > "$DATA/mongoose-fig6c.jsonl"
  for t in mongoose tfrc mongoose-paper; do
    for p in 0.01 0.02 0.05 0.1 0.2 0.5 2 3 5 7 10; do
      for seed in $(seq 1 "$SEEDS"); do
        KEEP=1 sim "$DATA/mongoose-fig6c.jsonl" --throttle "$t" --rtt 100ms --loss "0:1%,120:$p%" -t 420s --seed "$seed"
      done
    done
  done
  echo "fig6c done"
fi

if on fig9 || on fig9c || on fig2; then
  [ "$(id -u)" = 0 ] || { echo "fig9, fig9c and fig2 need root (network namespaces): sudo bash $0, or ONLY=fig3b,fig6a,fig6c" >&2; exit 2; }
  cat > "$W/pairs.toml" <<'T'
name = "mongoose"
[[node]]
name = "c"
kind = "host"
count = 8
[[node]]
name = "s"
kind = "host"
count = 8
[[link]]
a = "c"
b = "s"
live = true
T
  "$H" emu down "$ID" --purge >/dev/null 2>&1 || true
  UP=1
  "$H" emu up "$W/pairs.toml" --id "$ID" >/dev/null
  sip() { echo "10.0.$(($1 - 1)).2"; }
  # The avatar's session: login on the island, walking, flying and two teleports (new islands to
  # download) — the paper's sessions walked a set path on one island for ten minutes.
  script() {
    local d=$1
    echo "0:login:walking,$((d / 6)):flying,$((d / 3)):teleport:walking,$((d / 2)):standing,$((2 * d / 3)):teleport:walking,$((5 * d / 6)):flying"
  }
  # link PAIR LOSS_PCT ONE_WAY_MS: loss server → client, delay both ways, a 10 Mbit/s access link.
  link() {
    "$H" emu link "$ID" "s$1" "c$1" --clear --delay "$3ms" --rate 10mbit --queue 125kB >/dev/null
    "$H" emu link "$ID" "s$1" "c$1" --dir ab --loss "$2%" >/dev/null
  }
  # circuit PAIR TAG REGULATOR THROTTLE [join args…]
  circuit() {
    local k=$1 tag=$2 reg=$3 thr=$4; shift 4
    "$H" emu exec "$ID" "s$k" -- "$H" circuit serve --listen "$(sip "$k"):9400" -t "$((DUR + 5))s" --regulator "$reg" \
      --script "$(script "$DUR")" --csv "$W/$tag.server.csv" --json "$W/$tag.server.json" > "$W/$tag.server.txt" 2>&1 &
    sleep 0.3
    "$H" emu exec "$ID" "c$k" -- "$H" circuit join --server "$(sip "$k"):9400" --throttle "$thr" "$@" -t "${DUR}s" \
      --csv "$W/$tag.client.csv" --json "$W/$tag.client.json" > "$W/$tag.client.txt" 2>&1 &
  }
  # collect OUT TAG KEY=VALUE…: the client's seconds (total and texture kbit/s, what it asked,
  # loss, RTT) and both ends' counters as one JSON line.
  collect() {
    local out=$1 tag=$2; shift 2
    python3 - "$W/$tag" "$@" >> "$out" <<'PY'
import csv, json, sys
base = sys.argv[1]
row = dict(a.split("=", 1) for a in sys.argv[2:])
for k in ("loss_pct", "rtt_ms", "setting_kbps"):
    if k in row:
        row[k] = float(row[k])
secs = list(csv.DictReader(open(base + ".client.csv")))
row["total_kbps"] = [float(r["total_kbps"]) for r in secs]
row["texture_kbps"] = [float(r["texture_kbps"]) for r in secs]
row["asked_kbps"] = [float(r["rate_kbps"]) for r in secs]
row["measured_loss_pct"] = [float(r["loss_pct"] or 0) for r in secs]
row["measured_rtt_ms"] = [float(r["rtt_ms"] or 0) for r in secs]
row["client_stats"] = json.load(open(base + ".client.json"))["stats"]
# The server's backlog per second (kB waiting in the channel queues): the island's download is
# complete when it empties.
row["queued_kb"] = [float(r["queued_kb"] or 0) for r in csv.DictReader(open(base + ".server.csv"))]
print(json.dumps(row))
PY
  }

  if on fig9; then
    LOSSES=(0 0.5 1 2 3 5 7 10)
    for k in 1 2 3 4 5 6 7 8; do link "$k" "${LOSSES[$((k - 1))]}" 75; done
    for k in 1 2 3 4 5 6 7 8; do circuit "$k" "fig9-$k" dual mongoose; done
    wait
    : > "$DATA/mongoose-fig9.jsonl"
    for k in 1 2 3 4 5 6 7 8; do collect "$DATA/mongoose-fig9.jsonl" "fig9-$k" "loss_pct=${LOSSES[$((k - 1))]}" rtt_ms=150 server=dual client=mongoose; done
    echo "fig9 done"
  fi

  if on fig9c; then
    for k in 1 2 3 4; do link "$k" 0 75; done
    circuit 1 fig9c-1 per-channel opensim:500
    circuit 2 fig9c-2 per-channel mongoose
    circuit 3 fig9c-3 dual opensim:500
    circuit 4 fig9c-4 dual mongoose
    wait
    : > "$DATA/mongoose-fig9c.jsonl"
    collect "$DATA/mongoose-fig9c.jsonl" fig9c-1 loss_pct=0 rtt_ms=150 server=opensim client=opensim
    collect "$DATA/mongoose-fig9c.jsonl" fig9c-2 loss_pct=0 rtt_ms=150 server=opensim client=mongoose
    collect "$DATA/mongoose-fig9c.jsonl" fig9c-3 loss_pct=0 rtt_ms=150 server=mongoose client=opensim
    collect "$DATA/mongoose-fig9c.jsonl" fig9c-4 loss_pct=0 rtt_ms=150 server=mongoose client=mongoose
    echo "fig9c done"
  fi

  if on fig2; then
    SETTINGS=(50 100 250 500 750 1000 1500)
    for k in 1 2 3 4 5 6 7; do link "$k" 0 50; done
    for k in 1 2 3 4 5 6 7; do circuit "$k" "fig2-$k" per-channel "opensim:${SETTINGS[$((k - 1))]}"; done
    wait
    : > "$DATA/mongoose-fig2.jsonl"
    for k in 1 2 3 4 5 6 7; do collect "$DATA/mongoose-fig2.jsonl" "fig2-$k" "setting_kbps=${SETTINGS[$((k - 1))]}" loss_pct=0 rtt_ms=100 server=opensim client=opensim; done
    echo "fig2 done"
  fi
fi

python3 bench/papers/mongoose_report.py
