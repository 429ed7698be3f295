#!/usr/bin/env bash
# Fidelity against a real game server (issue 68): a real OpenArena server (Debian
# `openarena-server`, sv_fps 20) with Horde's protocol-true bots at several player counts,
# several sessions per count and two maps, captured with tshark on loopback. Each session's
# play time (after the bots' ramp and a warm-up) is cut into per-APDU tables — server → client
# snapshot sizes and per-client inter-arrival times, client → server sizes and times — kept as
# small histograms in bench/papers/data/fidelity/ (the test data of the size law). Then
# bench/fidelity.py measures the real server's own spread between sessions at each count (the
# yardstick), fits the snapshot size as a law of the player count on the training counts, and
# checks it — and the built-in `quake3` service — on the held-out counts. Writes
# bench/RESULTS-fidelity.md.
#
#   bash bench/fidelity.sh                 # 8 counts × 3 sessions × 2 maps, 12 s each (~18 min)
#   COUNTS="2 8" SESSIONS=2 MAPS=oa_dm1 SECS=5 bash bench/fidelity.sh   # a smoke run
#   REPORT_ONLY=1 bash bench/fidelity.sh   # the report again from the shipped tables
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DATA=$ROOT/bench/papers/data/fidelity
OUT=$ROOT/bench/out/fidelity
COUNTS=${COUNTS:-"2 8 12 16 24 32 48 64"}
SESSIONS=${SESSIONS:-3}
MAPS=${MAPS:-"oa_dm1 oa_dm4"}
SECS=${SECS:-12}
if [ -z "${REPORT_ONLY:-}" ]; then
  need() { command -v "$1" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }
  need tshark tshark
  [ -x /usr/games/openarena-server ] || need openarena-server openarena-server
  cargo build --release -q -p horde
  H=$ROOT/target/release/horde
  rm -rf "$OUT" "$DATA"
  mkdir -p "$OUT" "$DATA"
  git rev-parse --short HEAD >"$DATA/rev"
  echo "counts=$COUNTS sessions=$SESSIONS maps=$MAPS secs=$SECS" >"$DATA/plan"
  for map in $MAPS; do
    for n in $COUNTS; do
      for s in $(seq "$SESSIONS"); do
        tag="$map-$n-$s"
        pcap="$OUT/$tag.pcapng"
        # the server's port is free and not known before: capture the loopback's UDP, the
        # table keeps the port the bots' summary names
        tshark -q -i lo -f udp -s 96 -w "$pcap" -a "duration:$((SECS + 30))" >"$OUT/$tag.tshark.log" 2>&1 &
        tpid=$!
        for _ in $(seq 50); do grep -q "Capturing on" "$OUT/$tag.tshark.log" 2>/dev/null && break; sleep 0.1; done
        sleep 0.5
        "$H" bots --start-server --map "$map" -n "$n" -t "${SECS}s" --ramp 2s --warmup 3s --seed "$s" \
          -o "$OUT/$tag" --json "$OUT/$tag.json" >"$OUT/$tag.txt" 2>&1
        sleep 1
        kill -INT "$tpid" 2>/dev/null || true
        wait "$tpid" 2>/dev/null || true
        python3 bench/fidelity.py table "$pcap" "$OUT/$tag.json" "$map" "$n" "$s" "$SECS" >"$DATA/$tag.json"
        rm -f "$pcap"
        echo "$tag: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['down']['apdus'], 'snapshots,', d['clients'], 'clients')" "$DATA/$tag.json")"
      done
    done
  done
fi
python3 bench/fidelity.py report "$DATA" "$ROOT/bench/RESULTS-fidelity.md"
