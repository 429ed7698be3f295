#!/usr/bin/env bash
# Past the syscall ceiling (issue 50): Horde's UDP engine with GSO/GRO against the same engine
# without them (the binary of BEFORE, the commit before they came) and against the plainest C
# pair (bench/c/udp_pair.c: sendmmsg → recvmmsg, and the same with UDP_SEGMENT → UDP_GRO, no
# logs), one after the other in one session, ROUNDS rounds, every variant once per round.
# Horde runs `send --bulk` (as fast as the path takes) with a per-packet log at both ends.
# "delivered" is what the receiving side counted over the sender's seconds; loss is what left
# and did not arrive. Loopback only, port 9472; every run lasts SECS seconds and stops by itself.
# Writes bench/RESULTS-gso.md (the script writes every figure) and raw outputs in bench/out/gso/.
#
#   bash bench/gso.sh                  # 5 s per point, 3 rounds, ~6 minutes plus the BEFORE build
#   BEFORE_BIN=/path/to/horde bash bench/gso.sh
#   QUICK=1 bash bench/gso.sh          # 2 s per point, 1 round
#   NO_BEFORE=1 bash bench/gso.sh      # without the engine before GSO (bench/run.sh)
# Also writes bench/out/gso/headline.json (bench/run.sh's table).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/gso
RESULTS=$ROOT/bench/RESULTS-gso.md
BEFORE=${BEFORE:-73146aa}
SECS=${QUICK:+2}
SECS=${SECS:-5}
ROUNDS=${QUICK:+1}
ROUNDS=${ROUNDS:-3}
PORT=9472
mkdir -p "$OUT"
rm -f "$OUT"/*.hlog

cargo build --release -q -p horde
H=$ROOT/target/release/horde
if [ -n "${NO_BEFORE:-}" ]; then
  BEFORE_BIN=""
elif [ -z "${BEFORE_BIN:-}" ]; then
  echo "building the engine before GSO ($BEFORE) into /tmp/horde-gso-before-target"
  git worktree add -f /tmp/horde-gso-before "$BEFORE" -q
  (cd /tmp/horde-gso-before && CARGO_TARGET_DIR=/tmp/horde-gso-before-target cargo build --release -q -p horde)
  git worktree remove --force /tmp/horde-gso-before
  BEFORE_BIN=/tmp/horde-gso-before-target/release/horde
fi
cc -O2 -Wall -o "$OUT/udp_pair" bench/c/udp_pair.c
C=$OUT/udp_pair

# c TAG SIZE SEND_FLAG RECV_FLAG -> "delivered_pps loss_pct"
c_point() {
  local tag=$1 size=$2 sflag=$3 rflag=$4
  # shellcheck disable=SC2086
  "$C" recv $PORT $rflag >"$OUT/$tag.recv" &
  local rp=$!
  sleep 0.2
  # shellcheck disable=SC2086
  timeout $((SECS + 10)) "$C" send $PORT "$size" "$SECS" $sflag >"$OUT/$tag.send"
  wait $rp
  python3 - "$OUT/$tag" <<'PY'
import sys
t = sys.argv[1]
_, sent, secs = open(t + ".send").read().split()
_, got, _ = open(t + ".recv").read().split()
sent, got, secs = int(sent), int(got), float(secs)
print(f"{got / secs:.0f} {100 * (sent - got) / max(sent, 1):.2f}")
PY
}

# horde TAG BIN SIZE -> "delivered_pps loss_pct records_both_ends"
h_point() {
  local tag=$1 bin=$2 size=$3
  "$bin" recv --udp $PORT --bind 127.0.0.1 --log "$OUT/$tag.r.hlog" --idle 2s --json "$OUT/$tag.recv.json" 2>"$OUT/$tag.recv.txt" &
  local rp=$!
  sleep 0.3
  timeout $((SECS + 30)) "$bin" send -a 127.0.0.1:$PORT --bulk -c "$size" -t "${SECS}s" --floor 0s --log "$OUT/$tag.s.hlog" --json "$OUT/$tag.send.json" 2>"$OUT/$tag.send.txt"
  wait $rp || true
  rm -f "$OUT/$tag.r.hlog" "$OUT/$tag.s.hlog"
  python3 - "$OUT/$tag" <<'PY'
import json, sys
t = sys.argv[1]
s, r = json.load(open(t + ".send.json")), json.load(open(t + ".recv.json"))
sent, got = s["packets"], r["packets"]
print(f"{got / s['duration_s']:.0f} {100 * (sent - got) / max(sent, 1):.2f} {s['log_records']}+{r['log_records']}")
PY
}

VARIANTS=(
  "c-plain-64|C sendmmsg → recvmmsg, 64 B (no logs)|c 64 - -"
  "c-gso-64|C GSO → GRO, 64 B (no logs)|c 64 -g -g"
  "c-gso-nogro-64|C GSO → recvmmsg without GRO, 64 B (no logs)|c 64 -g -"
  "h-before-64|horde before GSO ($BEFORE), 64 B, logs both ends|h before 64"
  "h-gso-64|horde with GSO/GRO, 64 B, logs both ends|h now 64"
  "c-plain-1472|C sendmmsg → recvmmsg, 1472 B (no logs)|c 1472 - -"
  "c-gso-1472|C GSO → GRO, 1472 B (no logs)|c 1472 -g -g"
  "h-before-1472|horde before GSO ($BEFORE), 1472 B, logs both ends|h before 1472"
  "h-gso-1472|horde with GSO/GRO, 1472 B, logs both ends|h now 1472"
)
rows=()
for round in $(seq 1 "$ROUNDS"); do
  for v in "${VARIANTS[@]}"; do
    IFS='|' read -r tag label how <<<"$v"
    read -r kind a b c <<<"$how"
    case $kind in
      c) [ "$b" = - ] && b=""; [ "$c" = - ] && c=""; r=$(c_point "$tag-$round" "$a" "$b" "$c") ;;
      h) bin=$H; [ "$a" = before ] && bin=$BEFORE_BIN; [ -z "$bin" ] && continue; r=$(h_point "$tag-$round" "$bin" "$b") ;;
    esac
    echo "round $round: $label: $r"
    rows+=("$tag|$label|$round|$r")
  done
done

python3 - "$RESULTS" "$ROUNDS" "$SECS" "${BEFORE_BIN:+$BEFORE}" "$(git rev-parse --short HEAD)" "$(nproc)" "$(uname -r)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" "${rows[@]}" <<'PY'
import sys, statistics, datetime
out, rounds, secs, before, head, cores, kernel, cpu = sys.argv[1:9]
rows = [r.split("|") for r in sys.argv[9:]]
by = {}
for tag, label, rnd, res in rows:
    by.setdefault((tag, label), []).append(res.split())
def med(tag):
    for (t, _), v in by.items():
        if t == tag:
            return statistics.median(float(x[0]) for x in v)
L = [f"# Past the syscall ceiling: GSO/GRO (issue 50)", "",
     f"Generated by `bash bench/gso.sh` on {datetime.date.today()}. Machine: {cores} cores ({cpu}), kernel {kernel}; horde {head}, before GSO {before}.",
     f"{secs} s per point, {rounds} round(s), every variant once per round, one after the other on 127.0.0.1 (port 9472).", "",
     "- **delivered**: datagrams the receiving side counted, over the sender's seconds (pkt/s); **loss**: sent and not received.",
     "- Horde: `send --bulk -c SIZE` → `recv`, with a per-packet log at both ends (every datagram a 40-byte record on each side; the records column gives sender+receiver). The C pair keeps no record.",
     "- With GSO a datagram of a super-datagram is still its own record; its departure instant is the super-datagram's, and with GRO datagrams of one buffer share its kernel arrival timestamp.", "",
     "| variant | rounds: delivered pkt/s (loss %) | median pkt/s |", "|---|---|---|"]
for (tag, label), v in by.items():
    cells = ", ".join(f"{float(x[0]):,.0f} ({x[1]} %)" for x in v)
    L.append(f"| {label} | {cells} | {statistics.median(float(x[0]) for x in v):,.0f} |")
L += ["", "Ratios of medians (delivered):", ""]
for a, b, what in [("h-gso-64", "c-plain-64", "horde GSO/GRO vs the C sendmmsg pair, 64 B"),
                   ("h-gso-64", "c-gso-64", "horde GSO/GRO vs the C GSO/GRO pair, 64 B"),
                   ("h-gso-64", "h-before-64", "horde GSO/GRO vs horde before, 64 B"),
                   ("h-gso-1472", "c-plain-1472", "horde GSO/GRO vs the C sendmmsg pair, 1472 B"),
                   ("h-gso-1472", "h-before-1472", "horde GSO/GRO vs horde before, 1472 B")]:
    x, y = med(a), med(b)
    if x and y:
        L.append(f"- {what}: **{x / y:.2f}×**")
open(out, "w").write("\n".join(L) + "\n")
import json, os
loss = {tag: max(float(x[1]) for x in v) for (tag, _), v in by.items()}
json.dump({"date": str(datetime.date.today()), "commit": head, "rounds": int(rounds),
           "median_pps": {t: med(t) for (t, _) in by}, "max_loss_pct": loss},
          open(os.path.join(os.path.dirname(out), "out", "gso", "headline.json"), "w"), indent=1)
print("\n".join(L))
PY
