#!/usr/bin/env bash
# Large emulated topologies: N hosts on one switch (a tree of bridges past 1,000 ports) and a
# mixed topology of routers, switches and hosts, timed up and down, with a probe across each,
# and Mininet (Debian's) building the same star in the same session, as far as it gets.
#
#   sudo bash bench/emu-scale.sh     (needs root; SIZES="1000 5000 10000" by default; MININET=0
#                                     skips the peer; each Mininet size is bounded by 900 s and
#                                     a 14 GiB memory cgroup; ~25 min in all with Mininet)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root (namespaces)" >&2; exit 1; }
cargo build --release -q -p horde
H="$PWD/target/release/horde"
W=$(mktemp -d /tmp/horde-bench-scale.XXXXXX)
trap 'rm -rf "$W"; rmdir /sys/fs/cgroup/memory/horde-bench-mn 2>/dev/null || true' EXIT
SIZES=${SIZES:-"1000 5000 10000"}
MININET=${MININET:-1}
if [ "$MININET" = 1 ] && { ! command -v mn >/dev/null || ! command -v brctl >/dev/null || ! command -v ping >/dev/null; }; then
  echo "installing the peer (mininet, bridge-utils, iputils-ping for its probe) from Debian" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mininet bridge-utils iputils-ping >/dev/null
fi

star() { # hosts
  printf 'name = "star"\n[[node]]\nname = "h"\nkind = "host"\ncount = %d\n[[node]]\nname = "sw"\nkind = "switch"\n[[link]]\na = "h"\nb = "sw"\nsubnet = "10.0.0.0/16"\n' "$1"
}

mixed() { # total nodes: R routers in a line, each with a switch and (N/R - 2) hosts
  local n=$1 r=20 per
  per=$(( n / r - 2 ))
  echo 'name = "mixed"'
  for i in $(seq 1 $r); do
    printf '[[node]]\nname = "r%d"\nkind = "router"\n[[node]]\nname = "s%d"\nkind = "switch"\n[[node]]\nname = "h%d_"\nkind = "host"\ncount = %d\n' "$i" "$i" "$i" "$per"
    printf '[[link]]\na = "r%d"\nb = "s%d"\nsubnet = "10.%d.0.0/16"\n[[link]]\na = "h%d_"\nb = "s%d"\n' "$i" "$i" "$i" "$i" "$i"
    if [ "$i" -gt 1 ]; then printf '[[link]]\na = "r%d"\nb = "r%d"\n' "$((i - 1))" "$i"; fi
  done
}

probe() { # exp src dst-node
  local dst
  dst=$("$H" emu ls "$1" --all | awk -v n="$3" '$1 == n { print $NF }')
  "$H" emu exec "$1" "$3" -- "$H" recv -b "$dst" -p 9000 --idle 3s -t 10s -l "$W/r.hlog" >/dev/null 2>&1 &
  local p=$!
  sleep 0.5
  "$H" emu exec "$1" "$2" -- "$H" send -a "$dst:9000" --rate 100 --size 64 -t 1s -l "$W/s.hlog" >/dev/null 2>&1 || true
  wait "$p" || true
  "$H" decode "$W/s.hlog" "$W/r.hlog" -q --json - 2>/dev/null | python3 -c 'import json,sys; t=json.load(sys.stdin)["total"]; print(t["packets"])' 2>/dev/null || echo 0
}

avail() { awk '/MemAvailable/ { print $2 }' /proc/meminfo; }

one() { # kind n src dst
  "$1" "$2" > "$W/t.toml"
  local t0 t1 t2 exp got m0 m1
  m0=$(avail)
  t0=$(date +%s.%N)
  if ! exp=$("$H" emu up "$W/t.toml" 2>"$W/err" | tail -1); then
    printf '| %s | %s | failed: %s | | | |' "$1" "$2" "$(tail -1 "$W/err")"
    return
  fi
  t1=$(date +%s.%N)
  m1=$(avail)
  got=$(probe "$exp" "$3" "$4")
  t2=$(date +%s.%N)
  "$H" emu down "$exp" --purge >/dev/null
  local t3
  t3=$(date +%s.%N)
  printf '| %s | %d | %.1f | %.1f | %s/100 | %d |' "$1" "$2" "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)" "$got" "$(( (m0 - m1) / 1024 ))"
  sleep 30 # the kernel frees the namespaces in the background
}

# Mininet: the same star (a core bridge and leaf bridges of at most 200 hosts: one Linux bridge
# holds 1,024 ports), LinuxBridge switches, no controller, timed around start() and stop(), a
# ping from the first host to the last between them. Bounded: 900 s and a 14 GiB memory cgroup.
mininet() { # n
  local cg=/sys/fs/cgroup/memory/horde-bench-mn out
  mkdir -p "$cg" && echo $((14 << 30)) > "$cg/memory.limit_in_bytes"
  cat > "$W/mn.py" <<'PY'
import sys, time
from mininet.net import Mininet
from mininet.topo import Topo
from mininet.nodelib import LinuxBridge
from mininet.log import setLogLevel

class Star(Topo):
    def build(self, n=1000):
        core = self.addSwitch('s1')
        leaf = None
        for i in range(n):
            if i % 200 == 0:
                leaf = self.addSwitch('s%d' % (i // 200 + 2))
                self.addLink(leaf, core)
            self.addLink(self.addHost('h%d' % (i + 1)), leaf)

setLogLevel('error')
n = int(sys.argv[1])
t0 = time.time()
net = Mininet(topo=Star(n=n), switch=LinuxBridge, controller=None, ipBase='10.0.0.0/8')
net.start()
t1 = time.time()
loss = net.ping([net.hosts[0], net.hosts[-1]], timeout=2)
print(f"up {t1 - t0:.1f} ping {100 - loss:.0f}%", flush=True)
t2 = time.time()
net.stop()
t3 = time.time()
print(f"down {t3 - t2:.1f}", flush=True)
PY
  (echo "$BASHPID" > "$cg/cgroup.procs"; timeout 900 /usr/bin/python3 "$W/mn.py" "$1" > "$W/mn.out" 2>&1) || true
  mn -c >/dev/null 2>&1 || true
  local up down ping
  up=$(awk '$1 == "up" { print $2 }' "$W/mn.out"); ping=$(awk '$1 == "up" { print $4 }' "$W/mn.out")
  down=$(awk '$1 == "down" { print $2 }' "$W/mn.out")
  if [ -z "$up" ]; then
    printf ' not up (%s) | | |' "$( (grep -v '^\*\*\*' "$W/mn.out" | tail -1; echo 'within 900 s') | head -1 | cut -c1-60)"
  else
    printf ' %s | %s | %s |' "$up" "${down:-not down (900 s in all)}" "$ping"
  fi
  sleep 30
}

echo "| topology | nodes | up (s) | down (s) | probe | memory (MiB) | Mininet up (s) | Mininet down (s) | Mininet ping |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $SIZES; do
  one star "$n" h1 "h$n"
  if [ "$MININET" = 1 ]; then mininet "$n"; else printf ' | | |'; fi
  echo
  one mixed "$n" h1_1 "h20_1"
  echo ' | | |'
done
