#!/usr/bin/env bash
# The Quake server study's saturation knee (Abdelkhalik et al., seed 002: the server's knee
# moves with the CPU it gets, 0.5 vs 1.0 of a 2003 core) with `horde bots` alone: it starts
# OpenArena's server itself (--start-server), holds it to a share of one core with the
# kernel's CPU controller (--server-cpu), and runs every step several times on fresh servers
# (--repeat), so each figure has a 95 % interval over the runs and the knee is an interval
# over the series of steps. Writes bench/RESULTS-quake-knee.md.
#   sudo bash bench/papers/quake_knee.sh        (root: the CPU controller; ≈ 13 min)
# Environment: CAPS (shares of a core, default "0.1 0.2 0.5"), STEPS (8,16,32,48,64),
# REPEAT (3), T (each step's play time, 8s).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "needs root (the kernel's CPU controller): sudo bash $0" >&2; exit 1; }
[ -x /usr/games/openarena-server ] || { apt-get update -q && apt-get install -y -q openarena-server; }
cargo build --release -q -p horde
H=target/release/horde
CAPS=${CAPS:-"0.1 0.2 0.5"}
STEPS=${STEPS:-8,16,32,48,64}
REPEAT=${REPEAT:-3}
T=${T:-8s}
# the runs' JSON documents are kept beside the paper scripts' other data
W=bench/papers/data/quake-knee
mkdir -p "$W"
for c in $CAPS; do
  echo "server held to $c of a core: steps $STEPS, $REPEAT runs each, $T each" >&2
  "$H" bots --start-server --steps "$STEPS" --repeat "$REPEAT" --server-cpu "$c" -t "$T" --json "$W/knee-$c.json" -o "$(mktemp -d)" > "$W/knee-$c.txt" 2>&1
  tail -n "$(( $(echo "$STEPS" | tr ',' '\n' | wc -l) + 3 ))" "$W/knee-$c.txt" >&2
done
machine="$(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(dpkg-query -W -f='openarena-server ${Version}' openarena-server 2>/dev/null)"
python3 bench/papers/quake_knee_report.py "$W" "$machine" "$(git rev-parse --short HEAD)" "$STEPS" "$REPEAT" "$T" $CAPS > bench/RESULTS-quake-knee.md
echo "wrote bench/RESULTS-quake-knee.md" >&2
