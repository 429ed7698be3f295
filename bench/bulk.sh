#!/usr/bin/env bash
# Bulk throughput: `horde send --bulk` (and --reverse, -P) against iperf3 on loopback, TCP and
# UDP, in the same run. Throughput is measured at the receiving side (bytes that arrived over
# the time they took); CPU is user+system seconds of each process from /usr/bin/time, the same
# way for both tools. Writes bench/RESULTS-bulk.md and raw outputs in bench/out/bulk/. Every
# load is bounded in time and only targets 127.0.0.1.
#
#   bash bench/bulk.sh            # full run: 10 s per point, 3 repetitions, ~8 minutes
#   QUICK=1 bash bench/bulk.sh    # 2 s per point, 1 repetition (smoke test)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/bulk
RESULTS=$ROOT/bench/RESULTS-bulk.md
mkdir -p "$OUT"
SECS=${QUICK:+2}
SECS=${SECS:-10}
REPS=${QUICK:+1}
REPS=${REPS:-3}

need() { command -v "$1" >/dev/null 2>&1; }
if ! need iperf3 || [ ! -x /usr/bin/time ]; then
  echo "installing iperf3 and time from Debian"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 time >/dev/null
fi
cargo build --release -q -p horde
H=$ROOT/target/release/horde
PORT=9470

source "$ROOT/bench/own.sh" # background processes stopped by PID, never by name
trap own_stop_all EXIT

TIME() { /usr/bin/time -f "%U %S %M" -o "$1" "${@:2}"; }
cpu() { awk '{printf "%.2f", $1 + $2}' "$1"; }
rss_mb() { awk '{printf "%.0f", $3 / 1024}' "$1"; }

# horde TAG "send flags..." -> "recv_gbps sent_gbps loss_pct send_cpu recv_cpu send_rss recv_rss"
horde_point() {
  local tag=$1 flags=$2 logs=${3:-yes}
  local rlog=() slog=()
  if [ "$logs" = yes ]; then rlog=(--log "$OUT/$tag.r.hlog"); slog=(--log "$OUT/$tag.s.hlog"); fi
  TIME "$OUT/$tag.recv.time" "$H" recv --tcp $PORT --udp $PORT "${rlog[@]}" --idle 2s --json "$OUT/$tag.recv.json" 2>"$OUT/$tag.recv.txt" &
  local rp=$!
  own $rp
  sleep 0.3
  # shellcheck disable=SC2086
  TIME "$OUT/$tag.send.time" timeout $((SECS + 30)) "$H" send -a 127.0.0.1:$PORT $flags -t "${SECS}s" "${slog[@]}" --json "$OUT/$tag.send.json" 2>"$OUT/$tag.send.txt"
  wait $rp || true
  python3 - "$OUT/$tag" <<'PY'
import json, sys
t = sys.argv[1]
s, r = json.load(open(t + ".send.json")), json.load(open(t + ".recv.json"))
fl = s["flows"]
if any(f.get("reverse") for f in fl):
    # Reverse: the sender is the receiving side.
    got = sum(f["received_bytes"] for f in fl)
    first = min(f["received_first_ns"] for f in fl if f["received"])
    last = max(f["received_last_ns"] for f in fl)
    sent = r["reverse_bytes"]
    secs = (last - first) / 1e9
    loss = 100.0 * (1 - sum(f["received"] for f in fl) / max(r["reverse_packets"], 1)) if fl[0]["transport"] == "udp" else 0.0
    sent_gbps = sent * 8 / secs / 1e9
else:
    got = r["bytes"]
    first = min(f["first_ns"] for f in r["flows"].values())
    last = max(f["last_ns"] for f in r["flows"].values())
    secs = (last - first) / 1e9
    loss = 100.0 * (1 - r["packets"] / max(s["packets"], 1))
    sent_gbps = s["bytes"] * 8 / s["duration_s"] / 1e9
print(f"{got * 8 / secs / 1e9:.2f} {sent_gbps:.2f} {loss:.2f}")
PY
}

# iperf3 TAG "client flags..." -> same fields (iperf3's own summary; CPU from /usr/bin/time)
iperf_point() {
  local tag=$1 flags=$2
  TIME "$OUT/$tag.recv.time" iperf3 -s -1 -p $PORT -B 127.0.0.1 >"$OUT/$tag.server.txt" 2>&1 &
  local sp=$!
  own $sp
  sleep 0.3
  # shellcheck disable=SC2086
  TIME "$OUT/$tag.send.time" timeout $((SECS + 30)) iperf3 -c 127.0.0.1 -p $PORT $flags -t "$SECS" -J >"$OUT/$tag.json" 2>"$OUT/$tag.err" || true
  wait $sp || true
  python3 - "$OUT/$tag.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
e = j["end"]
if j["start"]["test_start"]["protocol"] == "TCP":
    print(f'{e["sum_received"]["bits_per_second"] / 1e9:.2f} {e["sum_sent"]["bits_per_second"] / 1e9:.2f} 0.00')
else:  # UDP: sum_received is the receiving side's report (its rate and loss)
    rec, sent = e["sum_received"], e["sum_sent"]
    print(f'{rec["bits_per_second"] * (1 - rec["lost_percent"] / 100) / 1e9:.2f} {sent["bits_per_second"] / 1e9:.2f} {rec["lost_percent"]:.2f}')
PY
}

ROWS=()
run_point() { # label tool tag flags [logs]
  local label=$1 tool=$2 tag=$3 flags=$4 logs=${5:-yes}
  for rep in $(seq 1 "$REPS"); do
    local t="$tag-$rep" res
    if [ "$tool" = horde ]; then res=$(horde_point "$t" "$flags" "$logs"); else res=$(iperf_point "$t" "$flags"); fi
    local sc rc sr rr
    sc=$(cpu "$OUT/$t.send.time"); rc=$(cpu "$OUT/$t.recv.time"); sr=$(rss_mb "$OUT/$t.send.time"); rr=$(rss_mb "$OUT/$t.recv.time")
    read -r got sent loss <<<"$res"
    echo "$label rep $rep: received $got Gbit/s, sent $sent Gbit/s, loss $loss %, CPU s sender $sc / receiver $rc"
    ROWS+=("| $label | $rep | $got | $sent | $loss | $sc | $rc | $sr / $rr |")
  done
}

run_point "TCP, 1 stream: horde --bulk (logs both sides)" horde tcp1-h "-T tcp --bulk"
run_point "TCP, 1 stream: horde --bulk (no logs)" horde tcp1-hn "-T tcp --bulk" no
run_point "TCP, 1 stream: iperf3" iperf tcp1-i ""
run_point "TCP, 4 streams: horde --bulk -P 4 (logs)" horde tcp4-h "-T tcp --bulk -P 4"
run_point "TCP, 4 streams: iperf3 -P 4" iperf tcp4-i "-P 4"
run_point "TCP reverse: horde -R (logs)" horde tcpR-h "-T tcp -R"
run_point "TCP reverse: iperf3 -R" iperf tcpR-i "-R"
run_point "UDP 1472 B: horde --bulk (logs both sides)" horde udp-h "--bulk -c 1472"
run_point "UDP 1472 B: horde --bulk (no logs)" horde udp-hn "--bulk -c 1472" no
run_point "UDP 1472 B: iperf3 -u -b 0 -l 1472" iperf udp-i "-u -b 0 -l 1472"
run_point "UDP 1472 B reverse: horde -R (logs)" horde udpR-h "-R -c 1472"
run_point "UDP 1472 B reverse: iperf3 -u -b 0 -l 1472 -R" iperf udpR-i "-u -b 0 -l 1472 -R"

{
  echo "# Bulk throughput: horde send --bulk vs iperf3 (loopback)"
  echo
  echo "Generated by \`bash bench/bulk.sh\` on $(date -u +%Y-%m-%d). Machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r); $(iperf3 --version | head -1); horde $(git rev-parse --short HEAD)."
  echo "${SECS} s per point, ${REPS} repetition(s), one after the other on 127.0.0.1 (port $PORT), in the same run."
  echo
  echo "- **received**: bytes that arrived at the receiving side over the time they took (horde: its receiver's report, or the sender's for reverse; iperf3: its \`sum_received\`, or for UDP the receiver's rate less its loss)."
  echo "- **sent**: the sending side's rate. **loss**: UDP datagrams sent and not received (TCP: 0)."
  echo "- **CPU s**: user + system seconds of the sending and the receiving process (\`/usr/bin/time\`, for both tools alike), over the ${SECS} s test plus start-up and wind-down; RSS in MB."
  echo "- horde \"logs\": every APDU or datagram written to a per-packet log on both sides (what \`horde decode\` reads); iperf3 keeps no per-packet record."
  echo
  echo "| test | rep | received Gbit/s | sent Gbit/s | loss % | CPU s sender | CPU s receiver | RSS MB sender / receiver |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "## Commands"
  echo
  echo '```'
  echo "horde recv --tcp $PORT --udp $PORT --log r.hlog --idle 2s --json recv.json"
  echo "horde send -a 127.0.0.1:$PORT -T tcp --bulk [-P 4] -t ${SECS}s --log s.hlog --json send.json     # TCP"
  echo "horde send -a 127.0.0.1:$PORT -T tcp -R -t ${SECS}s --log s.hlog --json send.json                # TCP reverse"
  echo "horde send -a 127.0.0.1:$PORT --bulk -c 1472 -t ${SECS}s --log s.hlog --json send.json          # UDP (-R: reverse)"
  echo "iperf3 -s -1 -p $PORT -B 127.0.0.1"
  echo "iperf3 -c 127.0.0.1 -p $PORT -t $SECS -J [-P 4] [-R] [-u -b 0 -l 1472]"
  echo '```'
  echo
  echo "Each process runs under \`/usr/bin/time -f '%U %S %M'\`. Raw outputs: \`bench/out/bulk/\`."
} >"$RESULTS.new"
if [ -f "$RESULTS" ] && grep -q '^## Reading' "$RESULTS"; then
  sed -n '/^## Reading/,$p' "$RESULTS" >>"$RESULTS.new"
fi
mv "$RESULTS.new" "$RESULTS"
echo "wrote $RESULTS"
