#!/usr/bin/env bash
# Horde under hostile load, as root, on loopback: (A) what a spoofed source gets back from a
# server side and from an echoing receiver, per byte it sent; (B) a soak: a legitimate
# 1,000-player run beside garbage, spoofed hellos, idle connects at the caps and echo peers that
# never read, with the RSS and descriptors of every Horde process sampled every 10 s.
# Writes bench/out/hostile/ and prints the tables of bench/RESULTS-hostile.md.
#
#   sudo bash bench/hostile.sh                 # both parts (A: ~4 min, B: SOAK_SECONDS, 600)
#   HORDE_OLD=/path/to/old/horde sudo -E bash bench/hostile.sh   # part A for an older build too
#   PART=A sudo bash bench/hostile.sh          # one part
#   PART=C sudo bash bench/hostile.sh          # (C) reflection after admission (~3 min):
#                                              # bench/after_admission.py; HORDE_OLD_V2=/path
#                                              # to a wire-v2 build (cab4673) for its rows too
#   HORDE_NEW=/path/to/horde sudo -E bash bench/hostile.sh       # this build instead of building
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "hostile.sh spoofs source addresses: run it as root" >&2; exit 1; }
if [ -n "${HORDE_NEW:-}" ]; then NEW=$HORDE_NEW; else cargo build --release -q; NEW=$PWD/target/release/horde; fi
OUT=$PWD/bench/out/hostile
mkdir -p "$OUT"
PART=${PART:-ABC}
SOAK_SECONDS=${SOAK_SECONDS:-600}
PY="python3 $PWD/bench/hostile.py"
KEY=5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7

# A scenario's server side alone, as `horde run` starts it (its part as the first line of
# `horde child part ID`'s standard input); prints its address.
serve() { # BIN SERVICE DIR [KEY]
  local bin=$1 svc=$2 dir=$3 key=${4:-}
  mkdir -p "$dir"
  python3 - "$svc" "$dir" "$key" > "$dir/part.json" <<'PY'
import json, secrets, sys
svc, d, key = sys.argv[1], sys.argv[2], sys.argv[3] or secrets.token_hex(32)
text = f"service = '{svc}'\nplayers = 100\nduration = '30s'\nseed = 1\n"
part = {"run_id": "bench", "shape": {"duration_ns": 30 * 10**9, "seed": 1, "key": key},
        "work": {"players": {"name": "sc.toml", "scenario": text, "service": None, "players": 100, "online": None}},
        "role": {"server": {"listen": "127.0.0.1:0", "out": d + "/srv"}}}
print(json.dumps({"version": 1, "kind": "part", "id": "bench", "task": part}))
PY
  if "$bin" child --help > /dev/null 2>&1; then
    "$bin" child part bench < "$dir/part.json" > "$dir/banner" 2>/dev/null &
  else # a build from before parts (HORDE_OLD): its server side took argv and the key from the environment
    printf "service = '%s'\nplayers = 100\nduration = '30s'\nseed = 1\n" "$svc" > "$dir/sc.toml"
    if [ -n "$key" ]; then export HORDE_RUN_KEY=$key; else unset HORDE_RUN_KEY; fi
    "$bin" run "$dir/sc.toml" --serve-only --out "$dir/srv" > "$dir/banner" 2>/dev/null &
  fi
  echo $! > "$dir/pid"
  for _ in $(seq 100); do [ -s "$dir/banner" ] && break; sleep 0.05; done
  head -1 "$dir/banner" | python3 -c 'import json, sys
l = sys.stdin.read().strip()
print(json.loads(l)["listening"]["addr"] if l.startswith("{") else l.split()[-1])'
}
stop() { kill "$(cat "$1/pid")" 2>/dev/null || true; wait "$(cat "$1/pid")" 2>/dev/null || true; }
recv_at() { # BIN DIR -> udp address
  local bin=$1 dir=$2
  mkdir -p "$dir"
  "$bin" recv --udp 0 > "$dir/out" 2> "$dir/err" &
  echo $! > "$dir/pid"
  for _ in $(seq 100); do grep -q listening "$dir/err" 2>/dev/null && break; sleep 0.05; done
  sed -E 's/.*listening on udp ([^ ,]+).*/\1/' "$dir/err" | head -1
}

part_a() { # BIN LABEL VERSION
  local bin=$1 label=$2 v=$3 d a
  echo "== A: $label"
  d=$OUT/$label/udp1; a=$(serve "$bin" quake3 "$d")
  $PY amplify --addr "$a" --version "$v" --hellos 1 --window 32 | tee "$d.json"; stop "$d"
  d=$OUT/$label/udp10k; a=$(serve "$bin" quake3 "$d")
  $PY amplify --addr "$a" --version "$v" --hellos 10000 --window 10 | tee "$d.json"; stop "$d"
  if [ "$v" = 2 ]; then
    # an attacker who holds the run key (on path) and spoofs the victim
    d=$OUT/$label/udp10k-key; a=$(serve "$bin" quake3 "$d" "$KEY")
    $PY amplify --addr "$a" --version 2 --key "$KEY" --hellos 10000 --window 10 | tee "$d.json"; stop "$d"
    d=$OUT/$label/udp1-key; a=$(serve "$bin" quake3 "$d" "$KEY")
    $PY amplify --addr "$a" --version 2 --key "$KEY" --hellos 1 --window 32 | tee "$d.json"; stop "$d"
  fi
  d=$OUT/$label/echo1; a=$(recv_at "$bin" "$d")
  $PY amplify --addr "$a" --mode echo --version "$v" --hellos 1 --window 2 | tee "$d.json"; stop "$d"
  d=$OUT/$label/echo10k; a=$(recv_at "$bin" "$d")
  $PY amplify --addr "$a" --mode echo --version "$v" --hellos 10000 --window 3 | tee "$d.json"; stop "$d"
  d=$OUT/$label/tcp1; a=$(serve "$bin" wow "$d")
  $PY tcp --addr "$a" --version "$v" --hellos 1 --window 5 | tee "$d.json"; stop "$d"
  d=$OUT/$label/tcp10k; a=$(serve "$bin" wow "$d")
  $PY tcp --addr "$a" --version "$v" --hellos 10000 --window 0.05 | tee "$d.json"; stop "$d"
}

# Samples RSS (kB) and open descriptors every 10 s: "t,pid,name,rss_kb,fds", for NAME:PID pairs.
sample() { # OUTFILE NAME:PID...
  local f=$1; shift
  echo "t,pid,name,rss_kb,fds" > "$f"
  local t0=$SECONDS
  while true; do
    local alive=0
    for np in "$@"; do
      local name=${np%%:*} p=${np##*:}
      [ -n "$p" ] && [ -d /proc/$p ] || continue
      alive=1
      local rss fds
      rss=$(awk '/^VmRSS/ {print $2}' /proc/$p/status 2>/dev/null || echo 0)
      fds=$(ls /proc/$p/fd 2>/dev/null | wc -l)
      echo "$((SECONDS - t0)),$p,$name,$rss,$fds" >> "$f"
    done
    [ $alive = 1 ] || break
    sleep 10
  done
}

part_b() {
  echo "== B: soak, ${SOAK_SECONDS} s"
  local d=$OUT/soak port
  rm -rf "$d"; mkdir -p "$d"
  # The legitimate run: 1,000 WoW players (every category equally likely first, fixed hour,
  # as in the fidelity test, so each category has enough players to judge its rate).
  "$NEW" services show wow > "$d/wow.toml"
  python3 - "$d/wow.toml" <<'EOF'
import sys, re
p = sys.argv[1]
t = open(p).read()
s = t.index("[first_by_hour]")
e = s + t[s:].index("\n\n")
t = t[:s] + t[e:]
t = t.replace("hour_advances = true", "hour_advances = false\nfirst = [1, 1, 1, 1, 1, 1]")
open(p, "w").write(t)
EOF
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf "name = 'soak'\nservice = 'wow.toml'\nplayers = 1000\nduration = '%ss'\nseed = 7\nstart_hour = 20\nserver = '127.0.0.1:%s'\n" "$SOAK_SECONDS" "$port" > "$d/sc.toml"
  "$NEW" recv --udp 0 --tcp 0 --max-conns 1000 -l "$d/recv.hlog" --json "$d/recv.json" 2> "$d/recv.err" &
  local rpid=$!
  for _ in $(seq 100); do grep -q listening "$d/recv.err" 2>/dev/null && break; sleep 0.05; done
  local rudp rtcp
  rudp=$(sed -E 's/.*listening on udp ([^ ,]+).*/\1/' "$d/recv.err" | head -1)
  rtcp=$(sed -E 's/.*, tcp ([^ ,]+).*/\1/' "$d/recv.err" | head -1)
  "$NEW" run "$d/sc.toml" --quiet --out "$d/run" > "$d/run.out" 2> "$d/run.err" &
  local run=$!
  local srv=""
  for _ in $(seq 200); do srv=$(pgrep -f -- "--serve-only --out $d/run" | head -1 || true); [ -n "$srv" ] && break; sleep 0.05; done
  sleep 3
  sample "$d/resources.csv" "client:$run" "server:$srv" "recv:$rpid" &
  local sampler=$!
  $PY soak --seconds "$((SOAK_SECONDS - 10))" --recv-udp "$rudp" --recv-tcp "$rtcp" --serve-tcp "127.0.0.1:$port" --hold 1100 > "$d/attack.json" 2> "$d/attack.err" || true
  wait $run || echo "run exited $?" >> "$d/run.err"
  # A legitimate round-trip flow to the receiver that was under attack the whole time.
  "$NEW" send --dst "$rudp" --rate 1000 --size 64 --packets 2000 --meter rtt --json "$d/probe.json" 2> "$d/probe.err" || true
  kill -INT $rpid; wait $rpid 2>/dev/null || true
  wait $sampler 2>/dev/null || true
  grep -q panicked "$d"/*.err && echo "PANIC in $(grep -l panicked "$d"/*.err)" || echo "no panic"
}

case "$PART" in *A*) part_a "$NEW" new 3; [ -n "${HORDE_OLD:-}" ] && part_a "$HORDE_OLD" old 1 ;; esac
case "$PART" in *C*)
  python3 bench/after_admission.py --horde "$NEW" --version 3 | tee "$OUT/after-new.json"
  [ -n "${HORDE_OLD_V2:-}" ] && python3 bench/after_admission.py --horde "$HORDE_OLD_V2" --version 2 | tee "$OUT/after-old.json"
  ;;
esac
case "$PART" in *B*) part_b ;; esac
python3 bench/hostile_report.py "$OUT"
