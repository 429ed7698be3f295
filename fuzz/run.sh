#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 15), seeding corpora from the repository's
# own files. Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). All targets
# are built first in one build (one link job per core), then run JOBS at a time (default 1;
# CI runs 2, one per core).
# BUILD sets cargo-fuzz's build flags for both the build and the runs (default: its own,
# optimised with AddressSanitizer; CI gives "--dev -s none", which builds in a third of the time).
# Usage: [JOBS=N] [BUILD="..."] fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-15}
shift || true
targets=("$@")
all=0
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
  all=1
fi
mkdir -p corpus
for t in toml_flows toml_service toml_scenario toml_topology; do mkdir -p "corpus/$t"; done
cp -n ../examples/flows.toml corpus/toml_flows/ 2>/dev/null || true
cp -n ../crates/model/services/*.toml corpus/toml_service/ 2>/dev/null || true
cp -n ../examples/*.toml corpus/toml_scenario/ 2>/dev/null || true
cp -n ../examples/topologies/*.toml corpus/toml_topology/ 2>/dev/null || true
mkdir -p corpus/q3_actions
cp -n ../examples/actions/*.csv corpus/q3_actions/ 2>/dev/null || true
mkdir -p corpus/ditg_script
printf -- '-a 127.0.0.1 -rp 10001 -T TCP -C 3 -c 36 -t 8000\n-a 10.0.0.3 -rp 10001 VoIP -x G.711.2 -h RTP -VAD\n-rp 3 -E 200 -u 10 300 -B E 100 W 10 100 -s 0.3 -m rttm\n' > corpus/ditg_script/seed-mixed 2>/dev/null || true
mkdir -p corpus/icmp_echo
# An echo reply of 36 payload bytes in an IPv4 packet (10.0.0.2 -> 10.0.0.1).
printf '\x45\x00\x00\x40\x00\x01\x00\x00\x40\x01\x00\x00\x0a\x00\x00\x02\x0a\x00\x00\x01\x00\x00\x00\x00\x00\x07\x00\x01HD\x03\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' > corpus/icmp_echo/seed-reply 2>/dev/null || true
mkdir -p corpus/fit_capture
# the first frames of Horde's own traffic (pcapng: section, interface, packets)
head -c 4096 ../crates/fit/tests/data/horde-ground-truth.pcapng > corpus/fit_capture/seed-horde 2>/dev/null || true
mkdir -p corpus/udp_gso
# A virtio-net header (needs checksum, UDP_L4, 100-byte segments) and an IPv4 UDP super-frame.
printf '\x01\x05\x00\x00\x64\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00\x45\x00\x00\x00\x12\x34\x40\x00\x40\x11\x00\x00\x0a\x00\x00\x01\x0a\x00\x00\x02\x9c\x40\x23\x28\x00\x00\xab\xcd%0250d' 0 > corpus/udp_gso/seed-super 2>/dev/null || true
mkdir -p corpus/logstream
# A split byte, a log header frame (version 4, sender), an empty keep-alive and an end frame.
printf '\x00\x01\x00\x00\x00\x00\x00\x00\x20HORDELOG\x04\x00\x28\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x00' > corpus/logstream/seed-stream 2>/dev/null || true
mkdir -p corpus/flow_summaries
# A sending agent's flow summaries from a real run (crates/cli/tests/it/flow_summaries.rs).
cp -n seeds/flow-summaries.json corpus/flow_summaries/ 2>/dev/null || true
mkdir -p corpus/commands
printf '{"command":"stop"}\n' > corpus/commands/stop 2>/dev/null || true
printf '{"command":"players","online":600}\n{"command":"link","a":"r1","b":"r2","set":{"delay":"50ms","loss":{"p":"1%%","r":"25%%"}}}\n' > corpus/commands/players-link 2>/dev/null || true
# The agent control target: a split byte, then frames of valid messages to mutate from.
frame() { local n=$(( ${#1} + 1 )); printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00' $((n>>24&255)) $((n>>16&255)) $((n>>8&255)) $((n&255)))%s" "$1"; }
mkdir -p corpus/agent_control
if [ ! -s corpus/agent_control/seed-run ]; then
  { printf '\xff'
    frame '{"type":"hello","protocol":5,"version":"1.0"}'
    frame '{"type":"time","t1":5}'
    frame '{"type":"assign","run_id":"r-1","shape":{"duration_ns":1000000000,"seed":1,"key":"abababababababababababababababababababababababababababababababab"},"place":{"agent":{"deadman_ms":3000}},"work":{"scenario":{"scenario":{"name":"s","scenario":"service = \"wow\"","service":null,"players":10,"online":null,"max_players":100},"server":null,"players":{"start":0,"end":10},"server_addr":"127.0.0.1:9","emu":null}}}'
    frame '{"type":"start","at_ns":9}'
    frame '{"type":"players","online":80,"at_ns":1000000000,"start":{"start":50,"end":80},"owners":[[{"start":50,"end":80},12000]]}'
    frame '{"type":"ping"}'
    frame '{"type":"pong"}'
    frame '{"type":"stop"}'
    frame '{"type":"collect"}'
    frame '{"type":"progress","t_s":1.0,"sent_packets":1,"sent_bytes":2,"recv_packets":3,"recv_bytes":4,"connections":5}'
  } > corpus/agent_control/seed-run
fi
jobs=${JOBS:-1}
read -r -a build <<< "${BUILD:-}"
echo "== building ${#targets[@]} targets"
if [ "$all" = 1 ]; then
  cargo +nightly fuzz build "${build[@]}" 2> fuzz-build.log || { tail -40 fuzz-build.log; exit 1; }
else
  for t in "${targets[@]}"; do cargo +nightly fuzz build "${build[@]}" "$t" 2>> fuzz-build.log || { tail -40 fuzz-build.log; exit 1; }; done
fi
run_one() {
  local t=$1 dict=()
  case "$t" in toml_*) dict=(-dict=toml.dict) ;; esac
  mkdir -p "corpus/$t"
  if ! cargo +nightly fuzz run "${build[@]}" "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 "${dict[@]}" 2> "fuzz-$t.log"; then
    echo "== $t (${secs} s): FAILED"; tail -40 "fuzz-$t.log"; return 1
  fi
  echo "== $t (${secs} s): $(grep -E "^Done" "fuzz-$t.log" || echo done)"
}
status=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
