#!/usr/bin/env bash
# Large emulated topologies: N hosts on one switch (a tree of bridges past 1,000 ports) and a
# mixed topology of routers, switches and hosts, timed up and down, with a probe across each,
# and Mininet (Debian's) building the same star in the same session, as far as it gets.
#
#   sudo bash bench/emu-scale.sh     (needs root; SIZES="1000 5000 10000" by default; ROUNDS=3
#                                     runs each star 3 times; MN_SIZES="1000" gives Mininet only
#                                     those sizes, MININET=0 none; each Mininet size is bounded by
#                                     900 s and a 14 GiB memory cgroup; ~25 min in all with Mininet)
# Writes bench/RESULTS-emu-scale.md and bench/out/emu-scale/headline.json (bench/run.sh's table).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ "$(id -u)" = 0 ] || { echo "needs root (namespaces)" >&2; exit 1; }
cargo build --release -q -p horde
H="$PWD/target/release/horde"
W=$(mktemp -d /tmp/horde-bench-scale.XXXXXX)
trap 'rm -rf "$W"; rmdir /sys/fs/cgroup/memory/horde-bench-mn 2>/dev/null || true' EXIT
SIZES=${SIZES:-"1000 5000 10000"}
ROUNDS=${ROUNDS:-1}      # star runs per size
MN_SIZES=${MN_SIZES:-$SIZES}
MININET=${MININET:-1}
mkdir -p bench/out/emu-scale
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

one() { # kind n src dst round
  "$1" "$2" > "$W/t.toml"
  local t0 t1 t2 exp got m0 m1
  m0=$(avail)
  t0=$(date +%s.%N)
  if ! exp=$("$H" emu up "$W/t.toml" 2>"$W/err" | tail -1); then
    printf '| %s | %s | %s | failed: %s | | | |' "$1" "$2" "$5" "$(tail -1 "$W/err")"
    return
  fi
  t1=$(date +%s.%N)
  m1=$(avail)
  got=$(probe "$exp" "$3" "$4")
  t2=$(date +%s.%N)
  "$H" emu down "$exp" --purge >/dev/null
  local t3
  t3=$(date +%s.%N)
  local up down
  up=$(echo "$t1 - $t0" | bc); down=$(echo "$t3 - $t2" | bc)
  echo "$1 $2 $up $down $got $(( (m0 - m1) / 1024 ))" >> "$W/rows.txt"
  printf '| %s | %d | %d | %.2f | %.2f | %s/100 | %d |' "$1" "$2" "$5" "$up" "$down" "$got" "$(( (m0 - m1) / 1024 ))"
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
  local before
  before=$(ip -o link show | awk -F': ' '{ print $2 }' | cut -d@ -f1 | sort)
  (echo "$BASHPID" > "$cg/cgroup.procs"; timeout 900 /usr/bin/python3 "$W/mn.py" "$1" > "$W/mn.out" 2>&1) || true
  # What a Mininet that did not stop leaves: its processes (all in our cgroup) and the switches'
  # bridges and ports it made in this namespace (named sN, sN-ethM, new since it started) — not
  # `mn -c`, which removes every switch, namespace and /tmp/*.log or *.out on the machine.
  while read -r p; do kill -9 "$p" 2>/dev/null || true; done < "$cg/cgroup.procs"
  comm -13 <(echo "$before") <(ip -o link show | awk -F': ' '{ print $2 }' | cut -d@ -f1 | sort) | grep -E '^s[0-9]+(-eth[0-9]+)?$' | while read -r l; do ip link del "$l" 2>/dev/null || true; done || true
  local up down ping
  up=$(awk '$1 == "up" { print $2 }' "$W/mn.out"); ping=$(awk '$1 == "up" { print $4 }' "$W/mn.out")
  down=$(awk '$1 == "down" { print $2 }' "$W/mn.out")
  if [ -z "$up" ]; then
    printf ' not up (%s) | | |' "$( (grep -v '^\*\*\*' "$W/mn.out" | tail -1; echo 'within 900 s') | head -1 | cut -c1-60)"
  else
    echo "mininet $1 $up ${down:-none} $ping" >> "$W/rows.txt"
    printf ' %s | %s | %s |' "$up" "${down:-not down (900 s in all)}" "$ping"
  fi
  sleep 30
}

# rows.txt: "star|mixed N up down probe memory" per Horde run, "mininet N up down ping" per peer run
: > "$W/rows.txt"
{
echo "| topology | nodes | round | up (s) | down (s) | probe | memory (MiB) | Mininet up (s) | Mininet down (s) | Mininet ping |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $SIZES; do
  for k in $(seq 1 "$ROUNDS"); do
    one star "$n" h1 "h$n" "$k"
    if [ "$k" = 1 ] && [ "$MININET" = 1 ] && [[ " $MN_SIZES " == *" $n "* ]]; then mininet "$n"; else printf ' | | |'; fi
    echo
  done
  one mixed "$n" h1_1 "h20_1" 1
  echo ' | | |'
done
} | tee "$W/table.md"

python3 - "$W/rows.txt" "$W/table.md" "$ROOT" "$ROUNDS" <<'PY'
import datetime, json, os, subprocess, sys
rows_file, table, root, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = [l.split() for l in open(rows_file) if l.strip()]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
def num(x):
    try:
        return float(x)
    except ValueError:
        return None
star = {}
mn = {}
for r in rows:
    if r[0] == "star" and num(r[2]) is not None:
        star.setdefault(int(r[1]), []).append({"up_s": num(r[2]), "down_s": num(r[3]), "probe": r[4], "memory_mib": num(r[5])})
    elif r[0] == "mininet":
        mn[int(r[1])] = {"up_s": num(r[2]), "down_s": num(r[3]), "ping": r[4]}
json.dump({"date": str(datetime.date.today()), "commit": commit, "rounds": rounds,
           "star": {str(k): v for k, v in star.items()}, "mininet": {str(k): v for k, v in mn.items()}},
          open(f"{root}/bench/out/emu-scale/headline.json", "w"), indent=1)
L = ["# Emulated environments at scale: hosts up and down, beside Mininet", "",
     f"Generated by `sudo bash bench/emu-scale.sh` on {datetime.date.today()} (commit {commit}); {os.cpu_count()} cores ({cpu}), kernel {os.uname().release}.", "",
     "- **star**: N hosts on one switch (a tree of bridges past 1,000 ports); **mixed**: 20 routers in a line, each with a switch and N/20 − 2 hosts.",
     "- **up**: `horde emu up FILE` from start to the experiment's id; **down**: `horde emu down ID --purge` (the kernel frees the namespaces in the background after it; each run waits 30 s for that before the next).",
     "- **probe**: 100 datagrams from the first host to the last (`horde send` → `horde recv` inside the hosts), received of 100. **memory**: MemAvailable before minus after `up`.",
     "- Mininet 2.3 (Debian's) builds the same star with LinuxBridge switches (a core bridge and leaves of 200 hosts), no controller, timed around `start()` and `stop()`, in a 900 s and 14 GiB bound.", ""]
L += open(table).read().rstrip().split("\n")
open(f"{root}/bench/RESULTS-emu-scale.md", "w").write("\n".join(L) + "\n")
print("wrote bench/RESULTS-emu-scale.md and bench/out/emu-scale/headline.json")
PY
