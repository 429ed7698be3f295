#!/usr/bin/env bash
# Virtual-world traffic regulation, measured on emulated links (issue 12). Writes
# bench/RESULTS-regulation.md (tables and SVG charts in bench/out/regulation/).
#
# Topology: four client/server host pairs, each pair joined by its own emulated link (Horde's
# userspace link emulator; this kernel has no netem): loss on the server → client direction,
# delay both ways, 10 Mbit/s with a 125 kB queue (a bandwidth-delay product at 100 ms). Pairs
# 1–4 run a regulated circuit (`horde circuit serve` with a saturating texture backlog, `horde
# circuit join` with the opensim, mongoose, tfrc, mongoose-paper throttle), pair 5 a bulk Linux
# TCP flow (`horde send --bulk -T tcp`, TCP Reno: see TCP_CC below) through the same link
# settings, all at once.
#   1. throughput vs loss (0, 0.1, 0.5, 1, 2, 3, 5, 10 %) at RTT 100 ms, vs loss (0.5–5 %) at RTT
#      150 ms, and vs RTT (10–500 ms) at 1 %;
#   2. convergence: loss 5 % and 0.1 % alternating every 60 s;
#   3. fairness: each circuit against one bulk TCP flow on a 2 Mbit/s bottleneck with 1 % loss;
#   4. channel protection: a teleport burst while walking, per-channel vs dual, 600 kbit/s.
#
#   sudo bash bench/regulation.sh            # about 40 minutes
#   QUICK=1 sudo bash bench/regulation.sh    # 20 s per point, fewer points (smoke test)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/regulation
RESULTS=$ROOT/bench/RESULTS-regulation.md
[ "$(id -u)" = 0 ] || { echo "bench/regulation.sh needs root (network namespaces): sudo bash bench/regulation.sh" >&2; exit 2; }
DUR=${DUR:-${QUICK:+20}}
DUR=${DUR:-90}
LOSSES=${LOSSES:-${QUICK:+0 1 5}}
LOSSES=${LOSSES:-0 0.1 0.5 1 2 3 5 10}
LOSSES150=${LOSSES150:-${QUICK:+1 5}}
LOSSES150=${LOSSES150:-0.5 1 3 5}
RTTS=${RTTS:-${QUICK:+10 100}}
RTTS=${RTTS:-10 50 100 150 200 500}
PERIOD=${PERIOD:-${QUICK:+20}}
PERIOD=${PERIOD:-60}
PROT=${PROT:-${QUICK:+30}}
PROT=${PROT:-60}
# ONLY=loss,loss150,rtt,conv,fair,prot runs those sections and keeps the others' earlier outputs.
ALL=loss,loss150,rtt,conv,fair,prot
ONLY=${ONLY:-$ALL}
on() { [[ ",$ONLY," == *",$1,"* ]]; }
if [ "$ONLY" = "$ALL" ]; then rm -rf "$OUT"; fi
mkdir -p "$OUT"
cargo build --release -q -p horde
H=$ROOT/target/release/horde
# shellcheck source=bench/regulation_common.sh
. "$ROOT/bench/regulation_common.sh"
ID=regul
"$H" emu down "$ID" --purge >/dev/null 2>&1 || true
pairs_topology "$OUT/pairs.toml" regulation 5
"$H" emu up "$OUT/pairs.toml" --id "$ID" >/dev/null
trap '"$H" emu down "$ID" --purge >/dev/null 2>&1 || true' EXIT
# TCP Reno in every host: the loss-based TCP that Padhye's equation models (the paper's yardstick).
# This machine's default is BBR, which does not back off on random loss; Cubic is not allowed in
# a network namespace on this kernel (net.ipv4.tcp_allowed_congestion_control = reno bbr).
TCP_CC=${TCP_CC:-reno}
for n in c1 c2 c3 c4 c5 s1 s2 s3 s4 s5; do "$H" emu exec "$ID" "$n" -- sysctl -qw "net.ipv4.tcp_congestion_control=$TCP_CC"; done
cip() { echo "10.0.$(($1 - 1)).1"; }
sip() { echo "10.0.$(($1 - 1)).2"; }
THROTTLES=(opensim mongoose tfrc mongoose-paper)
# The saturating demand of sections 1-3: a texture backlog in packets of the mean OpenSim packet
# size Mongoose measured (375 B, docs/models.md section 4), alone — the opensim service with its
# avatar demand and login bursts set to zero — so every packet has that size and the TCP-fair
# rates are the paper's (an avatar's 1100-byte texture packets would otherwise set the mix, more
# so at high loss where a login burst outlasts the run). Section 4 has the avatar's demand.
backlog_only "$OUT/backlog-only.toml"
BACKLOG="--service $OUT/backlog-only.toml --backlog texture --backlog-packet ${BACKLOG_PACKET:-375}"

# set_links LOSS_PCT ONE_WAY_MS [RATE] [QUEUE]: every pair's link.
set_links() {
  for k in 1 2 3 4 5; do
    "$H" emu link "$ID" "s$k" "c$k" --clear --delay "$2ms" --rate "${3:-10mbit}" --queue "${4:-125kB}" >/dev/null
    "$H" emu link "$ID" "s$k" "c$k" --dir ab --loss "$1%" >/dev/null
  done
}

# circuit PAIR THROTTLE TAG SECS [serve args...]: one circuit, both ends' CSV and JSON.
circuit() {
  local k=$1 thr=$2 tag=$3 secs=$4; shift 4
  "$H" emu exec "$ID" "s$k" -- "$H" circuit serve --listen "$(sip "$k"):9400" -t "$((secs + 5))s" "$@" \
    --csv "$OUT/$tag.server.csv" --json "$OUT/$tag.server.json" > "$OUT/$tag.server.txt" 2>&1 &
  sleep 0.3
  "$H" emu exec "$ID" "c$k" -- "$H" circuit join --server "$(sip "$k"):9400" --throttle "$thr" -t "${secs}s" \
    --csv "$OUT/$tag.client.csv" --json "$OUT/$tag.client.json" > "$OUT/$tag.client.txt" 2>&1 &
}

# tcp PAIR TAG SECS: a bulk TCP flow server → client; the receiver's report.
tcp() {
  local k=$1 tag=$2 secs=$3
  "$H" emu exec "$ID" "c$k" -- "$H" recv -b "$(cip "$k")" --tcp 9500 -t "$((secs + 3))s" --json "$OUT/$tag.recv.json" > "$OUT/$tag.recv.txt" 2>&1 &
  sleep 0.3
  "$H" emu exec "$ID" "s$k" -- "$H" send -a "$(cip "$k"):9500" -T tcp --bulk -t "${secs}s" --json "$OUT/$tag.send.json" > "$OUT/$tag.send.txt" 2>&1 &
}

# 1. throughput vs loss at RTT 100 ms and 150 ms, and vs RTT at 1 %.
point() { # TAG LOSS ONE_WAY_MS
  set_links "$2" "$3"
  for i in 0 1 2 3; do circuit "$((i + 1))" "${THROTTLES[$i]}" "$1-${THROTTLES[$i]}" "$DUR" $BACKLOG; done
  tcp 5 "$1-tcp" "$DUR"
  wait
}
if on loss; then for l in $LOSSES; do point "loss$l" "$l" 50; echo "loss $l % done"; done; fi
if on loss150; then for l in $LOSSES150; do point "loss150-$l" "$l" 75; echo "loss $l % at 150 ms done"; done; fi
if on rtt; then for r in $RTTS; do point "rtt$r" 1 "$((r / 2))"; echo "rtt $r ms done"; done; fi

# 2. convergence: 5 % for a period, then 0.1 %, 5 %, 0.1 %.
if on conv; then
set_links 5 50
for i in 0 1 2 3; do circuit "$((i + 1))" "${THROTTLES[$i]}" "conv-${THROTTLES[$i]}" "$((4 * PERIOD))" $BACKLOG; done
for l in 0.1 5 0.1; do
  sleep "$PERIOD"
  for k in 1 2 3 4; do "$H" emu link "$ID" "s$k" "c$k" --dir ab --loss "$l%" >/dev/null; done
done
wait
echo "convergence done"
fi

# 3. fairness: each circuit and one bulk TCP flow share a 2 Mbit/s bottleneck with 1 % loss.
# Both with the same packets: the circuit's 375-byte backlog, and TCP segments of 375 bytes (the
# pair's MTU set to 415 = 375 + 40 bytes of IP and TCP headers). Padhye's TCP-fair rate is
# proportional to the packet size, so with TCP's 1448-byte segments a perfectly TCP-fair
# small-packet flow would get a quarter of TCP's throughput, and Jain's index would measure
# the packet sizes, not the controller.
if on fair; then
set_links 1 50 2mbit 25kB
for k in 1 2 3; do for n in "c$k" "s$k"; do "$H" emu exec "$ID" "$n" -- ip link set eth0 mtu 415; done; done
for i in 0 1 2; do
  k=$((i + 1))
  circuit "$k" "${THROTTLES[$i]}" "fair-${THROTTLES[$i]}" "$DUR" $BACKLOG
  "$H" emu exec "$ID" "c$k" -- "$H" recv -b "$(cip "$k")" --tcp 9500 -t "$((DUR + 3))s" --json "$OUT/fair-${THROTTLES[$i]}.recv.json" > /dev/null 2>&1 &
  sleep 0.3
  "$H" emu exec "$ID" "s$k" -- "$H" send -a "$(cip "$k"):9500" -T tcp --bulk -t "${DUR}s" --json "$OUT/fair-${THROTTLES[$i]}.send.json" > /dev/null 2>&1 &
done
wait
for k in 1 2 3; do for n in "c$k" "s$k"; do "$H" emu exec "$ID" "$n" -- ip link set eth0 mtu 1500; done; done
echo "fairness done"
fi

# 4. channel protection: walking, a teleport burst at 20 s; 600 kbit/s allowance; clean link.
if on prot; then
set_links 0 50
circuit 1 fixed:600 prot-per-channel "$PROT" --regulator per-channel --script "0:standing,$((PROT / 3)):teleport:walking"
circuit 2 fixed:600 prot-dual "$PROT" --regulator dual --script "0:standing,$((PROT / 3)):teleport:walking"
wait
echo "protection done"
fi

python3 bench/regulation_report.py "$OUT" "$RESULTS" "$DUR" "$PERIOD" "$LOSSES" "$RTTS" "$PROT" "$LOSSES150"
echo "wrote $RESULTS"
