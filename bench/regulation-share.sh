#!/usr/bin/env bash
# Two regulated circuits sharing one bottleneck (issue 69; Mongoose, seed 003): the paper argues
# that OpenSim's AIAD throttle does not converge to a fair share against a Mongoose circuit, and
# that two Mongoose circuits do. Writes its section of bench/RESULTS-regulation.md (between the
# `share` markers; bench/regulation.sh keeps it) and charts in bench/regulation-charts/.
#
# Topology: four client/server host pairs, each joined by its own emulated link (Horde's
# userspace link emulator; this kernel has no netem): 1 Mbit/s, a 12.5 kB queue, 50 ms each way,
# no random loss (the queue's drops are the only loss). On each pair one `horde circuit serve`
# (a saturating texture backlog in 375-byte packets, as bench/regulation.sh sections 1-3) and
# two `horde circuit join` from the same client host through the same link: the first at 0 s,
# the second LATE s later; both then run DUR s together. Pairs: opensim + mongoose,
# mongoose + mongoose, opensim + opensim, tfrc + mongoose.
#
#   sudo bash bench/regulation-share.sh          # about 2.6 minutes (DUR=120, LATE=30)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/regulation-share
RESULTS=$ROOT/bench/RESULTS-regulation.md
[ "$(id -u)" = 0 ] || { echo "bench/regulation-share.sh needs root (network namespaces): sudo bash bench/regulation-share.sh" >&2; exit 2; }
DUR=${DUR:-120}
LATE=${LATE:-30}
# 1 Mbit/s: less than two OpenSim circuits ask for at the viewer's default setting (768 kbit/s
# each), so every pair competes; a 12.5 kB queue is 100 ms at that rate
RATE=${RATE:-1mbit}
QUEUE=${QUEUE:-12.5kB}
rm -rf "$OUT"
mkdir -p "$OUT"
cargo build --release -q -p horde
H=$ROOT/target/release/horde
# shellcheck source=bench/regulation_common.sh
. "$ROOT/bench/regulation_common.sh"
ID=rshare
"$H" emu down "$ID" --purge >/dev/null 2>&1 || true
pairs_topology "$OUT/pairs.toml" regulation-share 4
"$H" emu up "$OUT/pairs.toml" --id "$ID" >/dev/null
trap '"$H" emu down "$ID" --purge >/dev/null 2>&1 || true' EXIT
sip() { echo "10.0.$(($1 - 1)).2"; }
# the saturating demand of bench/regulation.sh sections 1-3: the texture backlog alone
backlog_only "$OUT/backlog-only.toml"
PAIRS=("opensim mongoose" "mongoose mongoose" "opensim opensim" "tfrc mongoose")
for k in 1 2 3 4; do
  "$H" emu link "$ID" "s$k" "c$k" --clear --delay 50ms --rate "$RATE" --queue "$QUEUE" >/dev/null
done
# join PAIR SIDE THROTTLE SECS: one circuit's client end.
join() {
  "$H" emu exec "$ID" "c$1" -- "$H" circuit join --server "$(sip "$1"):9400" --throttle "$3" -t "$4s" \
    --csv "$OUT/p$1-$2.client.csv" --json "$OUT/p$1-$2.client.json" > "$OUT/p$1-$2.client.txt" 2>&1
}
for k in 1 2 3 4; do
  read -r a b <<< "${PAIRS[$((k - 1))]}"
  "$H" emu exec "$ID" "s$k" -- "$H" circuit serve --listen "$(sip "$k"):9400" -t "$((DUR + LATE + 5))s" \
    --service "$OUT/backlog-only.toml" --backlog texture --backlog-packet 375 \
    --csv "$OUT/p$k.server.csv" --json "$OUT/p$k.server.json" > "$OUT/p$k.server.txt" 2>&1 &
  sleep 0.3
  join "$k" a "$a" "$((DUR + LATE))" &
  (sleep "$LATE"; join "$k" b "$b" "$DUR") &
done
wait
echo "circuits done"
python3 bench/regulation_share_report.py "$OUT" "$RESULTS" "$DUR" "$LATE" "$RATE" "$QUEUE" "${PAIRS[@]}"
echo "wrote the share section of $RESULTS"
