#!/usr/bin/env bash
# Convergence on an emulated OSPF ring (FRR): how long a flow across the ring loses packets when
# the link it uses fails, with FRR's default timers, with fast timers, and with BFD; the failure
# either a pulled cable (`horde emu link … --down`: both ends lose their carrier) or a silent
# one (100 % loss on a link whose carrier stays up: only hellos or BFD can tell).
#
#   sudo bash bench/emu-routing.sh        (needs root and Debian's frr; ~5 minutes)
#
# The ring: r1 – r2 – r3 – r4 – r1, h1 on r1, h3 on r3; the r4–r1 link costs 100, so the flow
# h1 → h3 (1,000 pkt/s, 64 B, logged both ends) goes through r2 until r1–r2 fails at 5 s. The
# outage is the flow's longest loss burst (packets in a row sent and never received) in ms.
# Prints a markdown table (bench/RESULTS-emu.md keeps it).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root (namespaces)" >&2; exit 1; }
[ -x /usr/lib/frr/zebra ] || { echo "needs FRR: apt-get install frr" >&2; exit 1; }
cargo build --release -q -p horde
H="$PWD/target/release/horde"
W=$(mktemp -d /tmp/horde-bench-routing.XXXXXX)
trap 'rm -rf "$W"' EXIT

ring() { # timers bfd
  cat <<EOF
name = "ring"
[[node]]
name = "r"
kind = "router"
count = 4
routing = "ospf"
timers = "$1"
bfd = $2
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h3"
kind = "host"
[[link]]
a = "r1"
b = "r2"
live = true
[[link]]
a = "r2"
b = "r3"
[[link]]
a = "r3"
b = "r4"
[[link]]
a = "r4"
b = "r1"
cost = 100
[[link]]
a = "h1"
b = "r1"
subnet = "10.1.0.0/24"
[[link]]
a = "h3"
b = "r3"
subnet = "10.3.0.0/24"
EOF
}

one() { # timers bfd failure seconds
  local timers=$1 bfd=$2 failure=$3 secs=$4
  ring "$timers" "$bfd" > "$W/ring.toml"
  local t0 exp conv
  t0=$(date +%s.%N)
  exp=$("$H" emu up "$W/ring.toml" 2>/dev/null | tail -1)
  # converged: r1 and r3 each have an OSPF route to the other side
  for _ in $(seq 1 600); do
    if "$H" emu exec "$exp" r1 -- ip route show 10.3.0.0/24 | grep -q "proto ospf" &&
       "$H" emu exec "$exp" r3 -- ip route show 10.1.0.0/24 | grep -q "proto ospf"; then break; fi
    sleep 0.1
  done
  conv=$(echo "$(date +%s.%N) - $t0" | bc)
  local h3
  h3=$("$H" emu ls "$exp" | awk '$1 == "h3" { print $NF }')
  rm -f "$W"/s.hlog "$W"/r.hlog
  "$H" emu exec "$exp" h3 -- "$H" recv -b "$h3" -p 9000 --idle 90s -t "$((secs + 5))s" -l "$W/r.hlog" >/dev/null 2>&1 &
  local rpid=$!
  sleep 0.5
  "$H" emu exec "$exp" h1 -- "$H" send -a "$h3:9000" --rate 1000 --size 64 -t "${secs}s" -l "$W/s.hlog" >/dev/null 2>&1 &
  local spid=$!
  sleep 5
  if [ "$failure" = cable ]; then
    "$H" emu link "$exp" r1 r2 --down >/dev/null
  else
    "$H" emu link "$exp" r1 r2 --loss 100% >/dev/null
  fi
  wait "$spid"
  wait "$rpid" || true
  "$H" decode "$W/s.hlog" "$W/r.hlog" -q --json "$W/d.json" >/dev/null
  "$H" emu down "$exp" --purge >/dev/null 2>&1 || "$H" emu down "$exp" >/dev/null
  python3 - "$W/d.json" "$timers" "$bfd" "$failure" "$conv" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
loss = d["total"].get("loss") or {}
print(f"| {sys.argv[2]} | {'yes' if sys.argv[3] == 'true' else 'no'} | {sys.argv[4]} | {float(sys.argv[5]):.1f} | {loss.get('sent', 0):,} | {loss.get('lost', 0):,} | {loss.get('burst_max', 0):,} |")
PY
}

echo "| timers | BFD | failure | converged after up (s) | sent | lost | outage (ms) |"
echo "|---|---|---|---:|---:|---:|---:|"
one default false cable 15
one fast false cable 15
one fast true cable 15
one default false silent 60
one fast false silent 15
one fast true silent 15
