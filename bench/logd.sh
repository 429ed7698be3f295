#!/usr/bin/env bash
# The live log server, Horde's `logd` beside D-ITG 2.8.1's ITGLog in the same session, on
# loopback: one UDP flow of 64-byte packets at 10k, 50k, 100k and 200k packets/s for SECS s,
# sender and receiver both streaming their per-packet logs to the log server (Horde over TLS with
# run-key proofs; D-ITG over its TCP log channel). For each: packets sent (achieved rate),
# records the log server wrote for each side, records dropped by the stream, loss. Writes
# bench/RESULTS-logd.md and raw outputs in bench/out/logd/. Every load is bounded (SECS s,
# timeout 60 s) and targets 127.0.0.1 only. ~2 minutes after the release build; no root.
#
#   bash bench/logd.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/logd
RESULTS=$ROOT/bench/RESULTS-logd.md
rm -rf "$OUT"
mkdir -p "$OUT"
SECS=${SECS:-5}
RATES=${RATES:-"10000 50000 100000 200000"}
if ! command -v ITGLog >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq d-itg >/dev/null
fi
cargo build --release -q -p horde
H=$ROOT/target/release/horde
source "$ROOT/bench/own.sh" # background processes stopped by PID, never by name
trap own_stop_all EXIT
"$H" key --out "$OUT/run.key" 2>/dev/null

horde_row() { # rate -> "sent_rate sender_logged receiver_logged dropped lost"
  local rate=$1 d=$OUT/horde-$1
  mkdir -p "$d"
  "$H" logd --key-file "$OUT/run.key" --dir "$d/logs" --listen 127.0.0.1:9721 -t $((SECS + 20))s --json "$d/logd.json" 2>"$d/logd.txt" &
  local lp=$!
  own $lp
  sleep 0.5
  "$H" recv -p 9310 --key-file "$OUT/run.key" --log-server 127.0.0.1:9721 --log-name rx --idle 2s --json "$d/recv.json" 2>"$d/recv.txt" &
  local rp=$!
  own $rp
  sleep 0.3
  timeout 60 "$H" send --dst 127.0.0.1:9310 -C "$rate" -c 64 -t "${SECS}s" --key-file "$OUT/run.key" --log-server 127.0.0.1:9721 --log-name tx --json "$d/send.json" 2>"$d/send.txt"
  wait $rp || true
  kill -INT $lp 2>/dev/null || true
  wait $lp || true
  python3 - "$d" <<'PY'
import json, os, sys
d = sys.argv[1]
s = json.load(open(f"{d}/send.json")); r = json.load(open(f"{d}/recv.json"))
size = lambda n: (os.path.getsize(f"{d}/logs/{n}.log") - 32) // 40
dropped = s["log_server"]["dropped"] + r["log_server"]["dropped"]
print(f'{s["packets"] / s["duration_s"]:.0f} {size("tx")} {size("rx")} {dropped} {s["packets"] - r["packets"]}')
PY
}

ditg_row() { # rate -> "sent_rate sender_logged receiver_logged dropped lost"
  local rate=$1 d=$OUT/ditg-$1
  mkdir -p "$d"
  (cd "$d" && exec timeout $((SECS + 25)) ITGLog >itglog.txt 2>&1) &
  local lp=$!
  own $lp
  (cd "$d" && exec timeout $((SECS + 25)) ITGRecv >itgrecv.txt 2>&1) &
  local rp=$!
  own $rp
  sleep 1
  (cd "$d" && timeout 60 ITGSend -a 127.0.0.1 -rp 9410 -C "$rate" -c 64 -t $((SECS * 1000)) -L 127.0.0.1 TCP -l sender.log -X 127.0.0.1 TCP -x receiver.log >itgsend.txt 2>&1) || true
  # ITGLog writes a log when its source's channel ends: wait for both (≤ 15 s).
  for _ in $(seq 30); do [ -s "$d/sender.log" ] && [ -s "$d/receiver.log" ] && break; sleep 0.5; done
  sleep 2
  kill $lp $rp 2>/dev/null || true
  wait $lp $rp 2>/dev/null || true
  local st rt
  st=$(cd "$d" && ITGDec sender.log 2>/dev/null | awk '/Total packets/ {print $4; exit}') || st=0
  rt=$(cd "$d" && ITGDec receiver.log 2>/dev/null | awk '/Total packets/ {print $4; exit}') || rt=0
  echo "$(python3 -c "print(f'{${st:-0} / $SECS:.0f}')") ${st:-0} ${rt:-0} - $(( ${st:-0} - ${rt:-0} ))"
}

{
  echo "# The live log server: Horde \`logd\` beside D-ITG's ITGLog"
  echo
  echo "\`bash bench/logd.sh\` — $(date -u +%Y-%m-%d), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(uname -r); main $(git rev-parse --short HEAD); D-ITG $(ITGSend -h 2>&1 | awk '/version/ {print $3; exit}'). Same session, loopback."
  echo
  echo "One UDP flow of 64-byte packets for ${SECS} s; the sender and the receiver stream their per-packet logs to the log server on the same machine as they run (Horde: \`send\`/\`recv --log-server\`, TLS 1.3 with run-key proofs, no local log; D-ITG: \`ITGSend -L 127.0.0.1 TCP -X 127.0.0.1 TCP\`). *Logged* = records the log server wrote for that side (Horde's include each side's two endpoint records and the receiver's end record); *dropped* = records a Horde stream could not send in time (D-ITG does not say); *lost* = packets sent but not received."
  echo
  echo "| requested pkt/s | tool | sent pkt/s | sender records at the log server | receiver records at the log server | dropped by the stream | lost |"
  echo "|---:|---|---:|---:|---:|---:|---:|"
  for rate in $RATES; do
    read -r hs hsl hrl hd hl < <(horde_row "$rate")
    echo "| $rate | Horde | $hs | $hsl | $hrl | $hd | $hl |"
    read -r ds dsl drl dd dl < <(ditg_row "$rate")
    echo "| $rate | D-ITG | $ds | $dsl | $drl | $dd | $dl |"
  done
  echo
  echo "The three processes (sender, receiver, log server) share this machine's cores. Raw outputs: bench/out/logd/."
} >"$RESULTS.partial"
mv "$RESULTS.partial" "$RESULTS"
cat "$RESULTS"
