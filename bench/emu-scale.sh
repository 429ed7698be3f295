#!/usr/bin/env bash
# Large emulated topologies: N hosts on one switch (a tree of bridges past 1,000 ports) and a
# mixed topology of routers, switches and hosts, timed up and down, with a probe across each.
#
#   sudo bash bench/emu-scale.sh            (needs root; SIZES="1000 5000 10000" by default)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root (namespaces)" >&2; exit 1; }
cargo build --release -q -p horde
H="$PWD/target/release/horde"
W=$(mktemp -d /tmp/horde-bench-scale.XXXXXX)
trap 'rm -rf "$W"' EXIT
SIZES=${SIZES:-"1000 5000 10000"}

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

one() { # kind n src dst
  "$1" "$2" > "$W/t.toml"
  local t0 t1 t2 exp got
  t0=$(date +%s.%N)
  if ! exp=$("$H" emu up "$W/t.toml" 2>"$W/err" | tail -1); then
    echo "| $1 | $2 | failed: $(tail -1 "$W/err") | | |"
    return
  fi
  t1=$(date +%s.%N)
  got=$(probe "$exp" "$3" "$4")
  t2=$(date +%s.%N)
  "$H" emu down "$exp" --purge >/dev/null
  local t3
  t3=$(date +%s.%N)
  printf '| %s | %d | %.1f | %.1f | %s/100 |\n' "$1" "$2" "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)" "$got"
  sleep 5 # the kernel frees the namespaces in the background
}

echo "| topology | nodes | up (s) | down (s) | probe |"
echo "|---|---:|---:|---:|---:|"
for n in $SIZES; do
  one star "$n" h1 "h$n"
  one mixed "$n" h1_1 "h20_1"
done
