#!/usr/bin/env bash
# D-ITG's own performance experiments (Avallone et al., "A Distributed Multiplatform
# Architecture for Traffic Generation": Table 4 parameters, Figs. 13-17), rerun in one session
# with Horde, D-ITG 2.8.1, MGEN 5 and iperf3 on this machine's loopback (the paper's "local"
# platform: sender and receiver on one Linux host): CBR UDP, 1,024-B payloads, packet rates up
# to the paper's 75,000 pkt/s; logging at the receiver (Figs. 13-15), and at both ends (Figs.
# 16-17). Achieved vs requested rate, loss, and the ratios between the tools.
#
#   bash bench/papers/ditg.sh              (installs d-itg, mgen, iperf3 from Debian if missing)
#   ONLY=receiver|both SECS=60 bash bench/papers/ditg.sh   (the paper ran 60 s per point)
#
# Time: 4 rates × 7 runs (Horde, D-ITG, MGEN in each logging mode; iperf3, which logs nothing,
# once) × (SECS + ~3 s): ≈ 6 min at the default SECS=10, ≈ 30 min at 60. Every run is bounded
# (timeout) and stops by itself. Writes bench/papers/data/ditg.jsonl and the D-ITG section of
# bench/RESULTS-papers.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
need() { command -v "$1" >/dev/null; }
if ! need ITGSend || ! need mgen || ! need iperf3; then
  echo "installing the peers (d-itg, mgen, iperf3) from Debian" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq d-itg mgen iperf3 >/dev/null
fi
cargo build --release -q -p horde
H="$PWD/target/release/horde"
ONLY=${ONLY:-all}
SECS=${SECS:-10}
RATES=${RATES:-"10000 30000 63000 75000"}
DATA=bench/papers/data
mkdir -p "$DATA"
W=$(mktemp -d /tmp/horde-ditg.XXXXXX)
source bench/own.sh # background processes stopped by PID, never by name
cleanup() { own_stop_all; rm -rf "$W"; }
trap cleanup EXIT
T=$((SECS + 30))

# point TOOL MODE RATE SENT RECEIVED  → one JSON line
point() {
  python3 -c 'import json,sys; t,m,r,s,g,secs=sys.argv[1:7]; r,s,g,secs=float(r),float(s),float(g),float(secs); print(json.dumps({"tool":t,"mode":m,"rate":r,"secs":secs,"sent":s,"received":g,"sent_pps":s/secs,"received_pps":g/secs,"received_mbps":g*1024*8/secs/1e6,"loss_vs_asked_pct":100*(1-g/(r*secs)),"loss_vs_sent_pct":(100*(1-g/s) if s>0 else None)}))' "$@" "$SECS" | tee -a "$DATA/ditg.jsonl"
}

horde() { # mode rate
  local mode=$1 rate=$2 slog=()
  [ "$mode" = both ] && slog=(--log "$W/s.hlog")
  "$H" recv --udp 5390 --log "$W/r.hlog" --idle 2s -t "${T}s" --json "$W/recv.json" 2>/dev/null &
  local rp=$!
  own $rp
  sleep 0.3
  timeout "$T" "$H" send --dst 127.0.0.1:5390 --rate "$rate" --size 1024 --duration "${SECS}s" "${slog[@]}" --json "$W/send.json" >/dev/null 2>&1 || true
  wait "$rp" || true
  local sent got
  sent=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(f["packets"] for f in r["flows"]) - len(r["flows"]))' "$W/send.json")
  got=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["packets"] - len(r["flows"]))' "$W/recv.json")
  point horde "$mode" "$rate" "$sent" "$got"
  rm -f "$W"/*.hlog
}

ditg() { # mode rate
  local mode=$1 rate=$2 slog=()
  [ "$mode" = both ] && slog=(-l "$W/dsnd.log")
  (cd "$W" && exec ITGRecv >"$W/itgrecv.txt" 2>&1) &
  local ip=$!
  own $ip
  sleep 0.5
  (cd "$W" && timeout "$T" ITGSend -a 127.0.0.1 -T UDP -C "$rate" -c 1024 -t $((SECS * 1000)) "${slog[@]}" -x "$W/drcv.log" >"$W/itgsend.txt" 2>&1) || true
  sleep 0.5
  own_stop $ip
  sleep 0.3
  local got sent
  (cd "$W" && ITGDec drcv.log > "$W/drcv.txt" 2>/dev/null) || true
  got=$(grep -E "Total packets" "$W/drcv.txt" | tail -1 | sed -E 's/.*= *//' || echo 0)
  if [ "$mode" = both ]; then
    sent=$( (cd "$W" && ITGDec dsnd.log 2>/dev/null) | grep -E "Total packets" | tail -1 | sed -E 's/.*= *//' || echo 0)
  else
    # Without a sender log (ITGSend prints no totals): received + the gaps in the sequence
    # numbers ITGDec counts as dropped.
    sent=$(( ${got:-0} + $(grep -E "Packets dropped" "$W/drcv.txt" | tail -1 | sed -E 's/.*= *([0-9]+).*/\1/' || echo 0) ))
  fi
  point d-itg "$mode" "$rate" "${sent:-0}" "${got:-0}"
  rm -f "$W"/*.log
}

mgen_run() { # mode rate
  local mode=$1 rate=$2 tx=()
  [ "$mode" = both ] && tx=(txlog)
  mgen ipv4 output "$W/mrx.log" event "LISTEN UDP 5390" >/dev/null 2>&1 &
  local rp=$!
  own $rp
  sleep 0.5
  timeout "$T" mgen ipv4 "${tx[@]}" output "$W/mtx.log" event "0.0 ON 1 UDP SRC 5392 DST 127.0.0.1/5390 PERIODIC [$rate 1024]" event "$SECS.0 OFF 1" >/dev/null 2>&1 || true
  sleep 1
  kill "$rp" 2>/dev/null || true
  wait "$rp" 2>/dev/null || true
  local got sent
  got=$(grep -c " RECV " "$W/mrx.log" || true)
  if [ "$mode" = both ]; then
    sent=$(grep -c " SEND " "$W/mtx.log" || true)
  else
    # No sender log: the highest sequence number received + 1 is what was sent (at least).
    sent=$(grep " RECV " "$W/mrx.log" | sed -E 's/.* seq>([0-9]+).*/\1/' | sort -n | tail -1 || echo -1)
    sent=$((sent + 1))
  fi
  point mgen "$mode" "$rate" "$sent" "$got"
  rm -f "$W"/m*.log
}

iperf() { # rate (iperf3 logs nothing: the receiver's count at the end)
  local rate=$1
  iperf3 -s -1 -p 5391 -B 127.0.0.1 >/dev/null 2>&1 &
  own $!
  sleep 0.5
  timeout "$T" iperf3 -c 127.0.0.1 -p 5391 -u -l 1024 -b $((rate * 1024 * 8)) -t "$SECS" -J >"$W/iperf3.json" 2>/dev/null || true
  wait || true
  read -r sent got < <(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]["sum"]; print(e["packets"], e["packets"]-e["lost_packets"])' "$W/iperf3.json")
  point iperf3 none "$rate" "$sent" "$got"
}

want() { [ "$ONLY" = all ] || [ "$ONLY" = "$1" ]; }
: > "$DATA/ditg.jsonl"
{
  echo "$(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
  echo "D-ITG $(dpkg-query -W -f='${Version}' d-itg 2>/dev/null), MGEN $(dpkg-query -W -f='${Version}' mgen 2>/dev/null), $(iperf3 --version | head -1)"
} > "$DATA/ditg-machine.txt"
for r in $RATES; do
  for mode in receiver both; do
    want "$mode" || continue
    horde "$mode" "$r"
    ditg "$mode" "$r"
    mgen_run "$mode" "$r"
  done
  want receiver && iperf "$r"
done
python3 bench/papers/ditg_report.py
