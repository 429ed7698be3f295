#!/usr/bin/env bash
# The emulated environment against Mininet 2.3 (Debian, Linux-bridge switch), same machine,
# same run: create + tear down N hosts on one switch (N = 200 and 1,000), plus the userspace
# link emulator's forwarding rate through one emulated link at 64-byte payloads.
# Needs root. Writes bench/RESULTS-emu.md and raw outputs in bench/out/emu/. (Note: `mn -c`,
# which the script runs, deletes /tmp/*.log and /tmp/*.out, as Mininet always does.)
#
#   sudo bash bench/emu.sh            # ~5 minutes (Mininet at 1,000 hosts dominates)
#   SIZES="200" sudo bash bench/emu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/emu
RESULTS=$ROOT/bench/RESULTS-emu.md
SIZES=${SIZES:-"200 1000"}
REPS=${REPS:-3}
mkdir -p "$OUT"
[ "$(id -u)" = 0 ] || { echo "bench/emu.sh needs root (namespaces)"; exit 2; }
if ! command -v mn >/dev/null || ! command -v brctl >/dev/null; then
  echo "installing the peer (mininet, bridge-utils) from Debian"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mininet bridge-utils >/dev/null
fi
cargo build --release -q -p horde
H=$ROOT/target/release/horde
"$H" emu cleanup >/dev/null
mn -c >/dev/null 2>&1 || true

now() { date +%s.%N; }
star() { # n -> topology file
  cat > "$OUT/star$1.toml" <<T
name = "star$1"
[[node]]
name = "h"
kind = "host"
count = $1
[[node]]
name = "s1"
kind = "switch"
[[link]]
a = "h"
b = "s1"
subnet = "10.0.0.0/16"
T
  echo "$OUT/star$1.toml"
}

median() { python3 -c "import statistics,sys; print('%.2f' % statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

declare -A HU HD MU MD
for n in $SIZES; do
  f=$(star "$n")
  ups=(); downs=()
  for r in $(seq "$REPS"); do
    t0=$(now); "$H" emu up "$f" --id "b$n" >/dev/null 2>"$OUT/horde-up-$n.txt"; t1=$(now)
    # every host answers: one probe from the last host to the first, through the switch
    "$H" emu exec "b$n" h1 -- "$H" recv -b 10.0.0.1 -p 9000 --packets 10 --idle 5s >/dev/null 2>&1 &
    sleep 0.3
    "$H" emu exec "b$n" "h$n" -- "$H" send -a 10.0.0.1:9000 -C 100 -c 64 -z 10 >/dev/null 2>&1
    wait
    t2=$(now); "$H" emu down "b$n" --purge >/dev/null; t3=$(now)
    ups+=("$(python3 -c "print($t1-$t0)")"); downs+=("$(python3 -c "print($t3-$t2)")")
    sleep 2 # the kernel frees namespaces in the background
  done
  HU[$n]=$(median "${ups[@]}"); HD[$n]=$(median "${downs[@]}")
  echo "horde   $n hosts: up ${HU[$n]} s, down ${HD[$n]} s (median of $REPS: up ${ups[*]}; down ${downs[*]})"
  /usr/bin/python3 - "$n" > "$OUT/mininet-$n.txt" 2>&1 <<'PY' || true
import sys, time
from mininet.net import Mininet
from mininet.topo import SingleSwitchTopo
from mininet.nodelib import LinuxBridge
from mininet.log import setLogLevel
setLogLevel('error')
n = int(sys.argv[1])
t0 = time.time()
net = Mininet(topo=SingleSwitchTopo(k=n), switch=LinuxBridge, controller=None)
net.start()
t1 = time.time()
net.stop()
t2 = time.time()
print(f"up {t1 - t0:.2f} down {t2 - t1:.2f}")
PY
  mn -c >/dev/null 2>&1 || true
  MU[$n]=$(awk '/^up/{print $2}' "$OUT/mininet-$n.txt"); MD[$n]=$(awk '/^up/{print $4}' "$OUT/mininet-$n.txt")
  echo "mininet $n hosts: up ${MU[$n]:-failed} s, down ${MD[$n]:-failed} s"
  sleep 2
done

# Forwarding rate through one emulated link (no impairment: `live = true`), 64-byte payloads.
cat > "$OUT/pair.toml" <<'T'
name = "pair"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "b"
kind = "host"
[[link]]
a = "a"
b = "b"
subnet = "10.9.0.0/30"
live = true
T
"$H" emu up "$OUT/pair.toml" --id bfwd >/dev/null 2>&1
FWD=""
for rate in 100000 150000 200000; do
  "$H" emu exec bfwd b -- "$H" recv -b 10.9.0.2 -p 9000 --idle 2s --json "$OUT/fwd-$rate.json" >/dev/null 2>&1 &
  sleep 0.3
  "$H" emu exec bfwd a -- "$H" send -a 10.9.0.2:9000 -C $rate -c 64 -t 5s --json "$OUT/fwd-$rate.send.json" >/dev/null 2>&1
  wait
  row=$(python3 - "$OUT/fwd-$rate.json" "$OUT/fwd-$rate.send.json" "$rate" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2])); rate = int(sys.argv[3])
sent = s["packets"]; got = r["packets"]; secs = s.get("duration_s") or 5.0
print(f"| {rate:,} | {sent:,} | {got:,} | {100*(sent-got)/sent:.2f} % | {got/5.0:,.0f} |")
PY
)
  FWD+="$row"$'\n'
  echo "forwarding $rate pkt/s offered: $row"
done
"$H" emu link bfwd a b > "$OUT/fwd-link.txt" || true
"$H" emu down bfwd --purge >/dev/null

{
  echo "# Emulated environment: Horde against Mininet"
  echo
  echo "Command: \`sudo bash bench/emu.sh\` ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD))."
  echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem/{print $2}') GiB, kernel $(uname -r) (no netem: Horde's userspace link path)."
  echo "Peer: Mininet $(/usr/bin/python3 -c 'import mininet.net as m; print(m.VERSION)' 2>/dev/null) from Debian, \`Mininet(topo=SingleSwitchTopo(k=N), switch=LinuxBridge, controller=None)\`, timed around \`start()\` and \`stop()\`."
  echo
  echo "## Create and tear down N hosts on one switch (seconds, Horde: median of $REPS)"
  echo
  echo "Horde's time covers namespaces, veth pairs, the bridge, addresses and lo, as root, then a probe from the last host to the first proves the segment works (not timed). Mininet's \`start()\` likewise configures every host."
  echo
  echo "| hosts | Horde up | Horde down | Mininet up | Mininet down | up speed-up |"
  echo "|---:|---:|---:|---:|---:|---:|"
  for n in $SIZES; do
    sp=$(python3 -c "print('%.1f×' % (float('${MU[$n]:-0}' or 0)/float('${HU[$n]}'))) " 2>/dev/null || echo "-")
    echo "| $n | ${HU[$n]} | ${HD[$n]} | ${MU[$n]:-failed} | ${MD[$n]:-failed} | $sp |"
  done
  echo
  echo "Targets (issue 4): at 1,000 hosts Horde up ≤ 10 s and down ≤ 5 s. Horde's down returns once every process of the experiment is gone and every namespace is unpinned; the kernel then frees the namespaces and their interfaces in the background (the script waits 2 s between repetitions). Mininet's stop() deletes interfaces one by one."
  echo
  echo "## Userspace link emulator: forwarding through one emulated link"
  echo
  echo "Host a sends UDP with 64-byte payloads (106-byte frames) to host b through the forwarder (AF_PACKET, one thread), for 5 s; sender, forwarder and receiver share the 2 cores."
  echo
  echo "| offered pkt/s | sent | received | loss | delivered pkt/s |"
  echo "|---:|---:|---:|---:|---:|"
  printf "%s" "$FWD"
  echo
  echo "Target: ≥ 100,000 pkt/s. Forwarder counters of the last run:"
  echo
  echo '```'
  cat "$OUT/fwd-link.txt"
  echo '```'
} > "$RESULTS"
echo "wrote $RESULTS"
