#!/usr/bin/env bash
# Runs every example command of README.md, as written, with `horde` on PATH (the release
# build, as `cargo install --path crates/cli` would put it there), as root for the `sudo`
# ones. Each command is bounded in time; a receiver the examples expect runs in the background.
# Prints one line per command (exit code, seconds) and writes bench/out/readme/.
#   sudo bash bench/readme.sh
set -uo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root (README's emu examples use sudo)" >&2; exit 1; }
cargo build --release -q || exit 1
OUT=$PWD/bench/out/readme
rm -rf "$OUT"; mkdir -p "$OUT"
export PATH=$PWD/target/release:$PATH
cd "$OUT"
cp -r ../../../examples .
fails=0
ex() { # COMMAND [SECONDS] [bounded]: runs COMMAND with bash within SECONDS, records rc and time
  local cmd=$1 limit=${2:-120} t0 rc
  n=$((n + 1))
  t0=$(date +%s.%N)
  timeout --signal=INT "$limit" bash -c "$cmd" > "cmd-$n.log" 2>&1
  rc=$?
  # 124/130: stopped by the time bound (a receiver or emu exec that runs until Ctrl-C).
  local ok=ok
  if [ $rc -ne 0 ] && [ "${3:-}" != "bounded" ]; then ok=FAIL; fails=$((fails + 1)); fi
  printf '%-4s rc=%-3s %6.1fs  %s\n' "$ok" "$rc" "$(echo "$(date +%s.%N) - $t0" | bc)" "$cmd"
}
n=0
ex "horde services"
ex "horde services show wow"
ex "horde behave --service wow --players 1000 --duration 24h --start-hour 18 --out stays.csv"
ex "horde run examples/wow.toml"
ex "horde run examples/wow.toml --players 5000 --duration 60s --out my-report" 180
id=$(horde emu up examples/topologies/access.toml 2> up.err | tail -1)
printf '%-4s %s\n' "$([ -n "$id" ] && echo ok || echo FAIL)" "sudo horde emu up examples/topologies/access.toml   -> $id"
[ -n "$id" ] || fails=$((fails + 1))
ex "horde emu exec $id server -- horde recv -b 10.2.0.2" 3 bounded
ex "horde emu link $id r1 r2 --delay 50ms --loss 2%"
ex "horde emu ls $id"
if command -v dot >/dev/null; then ex "horde emu ls $id --dot | dot -Tsvg > topo.svg"; else ex "horde emu ls $id --dot > topo.dot"; fi
ex "horde emu down $id"
ex "horde emu cleanup --all --dry-run"
ex "horde run examples/wow-access.toml" 180
horde recv --port 9000 --log recv.hlog > recv.log 2>&1 &
rpid=$!
sleep 0.5
ex "horde send --dst 127.0.0.1:9000 --rate 10k --size 64 --duration 3s --log send.hlog"
ex "horde decode send.hlog recv.hlog --window 100ms --json out.json --csv flows.csv"
ex "horde send --dst 127.0.0.1:9000 --idt 'mix(0.6*exponential(4.29), 0.4*constant(10.75))' --size 'normal(64, 3)'"
ex "horde send --dst 127.0.0.1:9000 --preset 'voip(codec=g729.2, rtp=rtp, vad=on)' --dscp 46 --meter rtt"
ex "horde send -T tcp --dst 127.0.0.1:9000 --preset telnet --count 100"
ex "horde send --flows examples/flows.toml --threads 2"
ex "horde send --dst 127.0.0.1:9000 -T tcp --bulk --duration 5s"
ex "horde send --dst 127.0.0.1:9000 --bulk -P 4 --size 1200 --duration 5s"
ex "horde send --dst 127.0.0.1:9000 -T tcp -R --duration 5s --log back.hlog"
ex "horde decode back.hlog"
ex "horde presets"
ex "horde bots --start-server -n 16 -t 30s -o bots-run" 90
kill -INT $rpid; wait $rpid
ex "horde agent keygen --out creds"
horde agent --listen 127.0.0.2:7801 --credentials creds --dir /tmp/a1 > agent1.log 2>&1 &
a1=$!
horde agent --listen 127.0.0.3:7802 --credentials creds --dir /tmp/a2 > agent2.log 2>&1 &
a2=$!
sleep 0.5
ex "horde run examples/wow.toml -n 600 -t 20s --agents 127.0.0.2:7801,127.0.0.3:7802 --credentials creds -o dist-run" 90
kill -INT $a1 $a2; wait $a1 $a2
ex "horde key --out run.key"
horde recv --port 9000 --key-file run.key > recv-key.log 2>&1 &
rpid=$!
sleep 0.5
ex "horde send --dst 127.0.0.1:9000 --rate 1k --size 64 --key-file run.key"
kill -INT $rpid; wait $rpid
horde circuit serve --listen 127.0.0.1:9400 --regulator dual --backlog texture -t 40s > circuit-serve.log 2>&1 &
cpid=$!
sleep 0.5
ex "horde circuit join --server 127.0.0.1:9400 --throttle mongoose -t 30s --csv circuit.csv" 45
kill -INT $cpid; wait $cpid
ex "horde run examples/opensim-regulated.toml" 90
ex "horde run examples/opensim-regulated-access.toml" 150
echo "$n commands, $fails failed; logs in $OUT"
[ $fails = 0 ]
