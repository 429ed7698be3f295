#!/usr/bin/env bash
# Lockout on every TCP listener (issues 47 and 66): each attack (bench/lockout_attacks.py) against
# the agent's control port, its /ready, `horde ui` and `horde logd`; 20
# legitimate peers try meanwhile. This build, and HORDE_OLD's beside it.
# Writes bench/out/lockout/rows.jsonl and section D of bench/RESULTS-hostile.md (~5 min a build).
#
#   bash bench/lockout.sh
#   HORDE_OLD=/path/to/old/horde OLD_LABEL="before (90c9a96)" bash bench/lockout.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
OUT=bench/out/lockout
mkdir -p "$OUT"
: > "$OUT/rows.jsonl"
if [ -n "${HORDE_OLD:-}" ]; then
  python3 bench/lockout.py "$HORDE_OLD" "${OLD_LABEL:-old}" >> "$OUT/rows.jsonl"
fi
python3 bench/lockout.py "$PWD/target/release/horde" "new ($(git rev-parse --short HEAD))" >> "$OUT/rows.jsonl"
python3 bench/lockout.py --report "$OUT/rows.jsonl" bench/RESULTS-hostile.md
cat "$OUT/rows.jsonl"
