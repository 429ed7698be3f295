#!/usr/bin/env bash
# Issue 24, items 6 and 8, on this machine:
#   1. One link's forwarding rate: host a sends UDP with 64-byte payloads (106-byte frames) to
#      host b for 5 s at each offered rate, over a plain veth pair and through the userspace link
#      emulator (`live = true`, no impairment); sent (sender's count), received (receiver's), and
#      the link's own count of frames it lost (`overrun`: socket or backlog overflow).
#   2. `emu up --live` (every link through the link emulator) against the plain build, 1,000
#      hosts on one switch, 3 runs each, alternating; then every host is probed from h1 (one
#      ICMP echo each, 10 ms apart, from a raw socket in h1) to show every host is reachable.
# Needs root. Prints markdown tables (bench/RESULTS-emu.md keeps them).
#   sudo bash bench/emu-live.sh          # ~3 minutes
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/emu-live.sh needs root (namespaces)"; exit 2; }
cargo build --release -q -p horde
H=$PWD/target/release/horde
W=$(mktemp -d)
trap 'rm -rf "$W"; "$H" emu down blive --purge >/dev/null 2>&1 || true; "$H" emu down bfwd --purge >/dev/null 2>&1 || true' EXIT
RATES=${RATES-"100000 150000 200000 225000 250000 300000"}  # RATES="" skips part 1
# DELAY=1ms impairs the emulated link (the plain path stays a plain veth); SCALE=0 skips part 2

pair() { # live: true|false
  cat <<T
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
live = $1
T
  if [ "$1" = true ] && [ -n "${DELAY:-}" ]; then echo "delay = \"$DELAY\""; fi
}

if [ -n "$RATES" ]; then
echo "| path | offered pkt/s | sent | received | loss | received pkt/s | link's overrun count |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for live in false true; do
  pair $live > "$W/pair.toml"
  "$H" emu up "$W/pair.toml" --id bfwd >/dev/null 2>&1
  prev=0
  for rate in $RATES; do
    "$H" emu exec bfwd b -- "$H" recv -b 10.9.0.2 -p 9000 --idle 2s --json "$W/r.json" >/dev/null 2>&1 &
    sleep 0.3
    "$H" emu exec bfwd a -- "$H" send -a 10.9.0.2:9000 -C "$rate" -c 64 -t 5s --json "$W/s.json" >/dev/null 2>&1
    wait
    over=0
    if [ "$live" = true ]; then
      over=$("$H" emu link bfwd a b --json | python3 -c 'import json,sys; d=json.load(sys.stdin)[0]["ab"]; print(d["rx_overrun"]+d["tx_overrun"]+d["overflow_drops"]+d["send_errors"])')
    fi
    python3 - "$W/s.json" "$W/r.json" "$rate" "$live" "$((over - prev))" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
rate, live, over = int(sys.argv[3]), sys.argv[4] == "true", int(sys.argv[5])
sent, got = s["packets"], r["packets"]
path = "link emulator" if live else "plain veth"
print(f"| {path} | {rate:,} | {sent:,} | {got:,} | {100*(sent-got)/sent:.2f} % | {got/5:,.0f} | {over:,} |" if live else f"| {path} | {rate:,} | {sent:,} | {got:,} | {100*(sent-got)/sent:.2f} % | {got/5:,.0f} | – |")
PY
    prev=$over
  done
  "$H" emu down bfwd --purge >/dev/null
  sleep 2
done
fi

[ "${SCALE:-1}" = 0 ] && exit 0
cat > "$W/star.toml" <<'T'
name = "star"
[[node]]
name = "h"
kind = "host"
count = 1000
[[node]]
name = "sw"
kind = "switch"
[[link]]
a = "h"
b = "sw"
subnet = "10.0.0.0/16"
T
cat > "$W/sweep.py" <<'PY'
# One ICMP echo to each of 10.0.0.2 .. 10.0.3.232 (h2 .. h1000), replies counted.
import socket, struct, sys, time
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
sock.setblocking(False)
targets = ["10.0.%d.%d" % (i // 256, i % 256) for i in range(2, 1001)]
seen = set()
def drain():
    while True:
        try:
            data, (src, _) = sock.recvfrom(2048)
            if data[20] == 0: seen.add(src)
        except BlockingIOError:
            return
for i, t in enumerate(targets):
    drain()
    hdr = struct.pack("!BBHHH", 8, 0, 0, 4242, i); pkt = struct.pack("!BBHHH", 8, 0, csum(hdr + b"horde!"), 4242, i) + b"horde!"
    # 10 ms apart: each first packet to a host is an ARP broadcast the switch floods to all
    # 1,000 ports (through the link emulator with --live: 100,000 frames/s)
    while True:
        try:
            sock.sendto(pkt, (t, 0)); break
        except (BlockingIOError, OSError):
            time.sleep(0.01)
    time.sleep(0.01)
end = time.time() + 3
while time.time() < end:
    drain(); time.sleep(0.01)
print(len(seen & set(targets)))
PY
echo
echo "| build | run | up (s) | down (s) | hosts answering (of 999) |"
echo "|---|---:|---:|---:|---:|"
for run in 1 2 3; do
  for mode in plain live; do
    extra=""; [ $mode = live ] && extra="--live"
    sleep 8 # the kernel frees the last run's namespaces in the background
    t0=$(date +%s.%N); "$H" emu up "$W/star.toml" --id blive $extra >/dev/null 2>&1; t1=$(date +%s.%N)
    got=$("$H" emu exec blive h1 -- python3 "$W/sweep.py")
    t2=$(date +%s.%N); "$H" emu down blive --purge >/dev/null; t3=$(date +%s.%N)
    printf '| %s | %d | %.2f | %.2f | %s |\n' "$mode" "$run" "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)" "$got"
  done
done
