#!/usr/bin/env bash
# Past the syscall ceiling (issue 50): Horde's UDP engine with GSO/GRO against the same engine
# without them (the binary of BEFORE, the commit before they came) and against the plainest C
# pair (bench/c/udp_pair.c: sendmmsg → recvmmsg, and the same with UDP_SEGMENT → UDP_GRO, no
# logs), and against iperf3, D-ITG and mgen at 64 B (each as fast as it goes; D-ITG and mgen
# with their per-packet logs at both ends), one after the other in one session, ROUNDS rounds,
# every variant once per round.
# Horde runs `send --bulk` (as fast as the path takes) with a per-packet log at both ends.
# "delivered" is what the receiving side counted over the sender's seconds; loss is what left
# and did not arrive. Loopback only, port 9472; every run lasts SECS seconds and stops by itself.
# Writes bench/RESULTS-gso.md (the script writes every figure) and raw outputs in bench/out/gso/.
# Every tool's per-packet logs (Horde's, D-ITG's, mgen's: about 3 GB per round at 8 M pkt/s) go
# to a directory of their own under LOGS, a tmpfs (/dev/shm) by default, and are deleted after each point: on a VM's disk the
# dirty-page limit holds the log writers back, and a receiver held up by its writer drops what
# its socket cannot hold, which measures the disk, not the generator.
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
# Our own directory under LOGS (a tmpfs by default), removed on exit, however the script ends.
LOGS=$(mktemp -d "${LOGS:-/dev/shm}/horde-bench-gso.XXXXXX")
trap 'rm -rf "$LOGS"' EXIT
mkdir -p "$OUT"
rm -f "$OUT"/*.hlog

if ! command -v iperf3 >/dev/null || ! command -v ITGSend >/dev/null || ! command -v mgen >/dev/null; then
  echo "installing the peers (iperf3, d-itg, mgen) from Debian"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 d-itg mgen >/dev/null
fi
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

# Datagrams the kernel dropped at a CPU's input backlog (netdev_max_backlog; loopback's
# packets wait there before the receiving socket), all CPUs: /proc/net/softnet_stat column 2.
backlog_drops() { python3 -c "print(sum(int(l.split()[1], 16) for l in open('/proc/net/softnet_stat')))"; }

# horde TAG BIN SIZE -> "delivered_pps loss_pct records_both_ends backlog_drops socket_drops"
h_point() {
  local tag=$1 bin=$2 size=$3 b0
  b0=$(backlog_drops)
  "$bin" recv --udp $PORT --bind 127.0.0.1 --log "$LOGS/$tag.r.hlog" --idle 2s --json "$OUT/$tag.recv.json" 2>"$OUT/$tag.recv.txt" &
  local rp=$!
  sleep 0.3
  timeout $((SECS + 30)) "$bin" send -a 127.0.0.1:$PORT --bulk -c "$size" -t "${SECS}s" --floor 0s --log "$LOGS/$tag.s.hlog" --json "$OUT/$tag.send.json" 2>"$OUT/$tag.send.txt"
  wait $rp || true
  rm -f "$LOGS/$tag.r.hlog" "$LOGS/$tag.s.hlog"
  python3 - "$OUT/$tag" "$(( $(backlog_drops) - b0 ))" <<'PY'
import json, sys
t = sys.argv[1]
s, r = json.load(open(t + ".send.json")), json.load(open(t + ".recv.json"))
sent, got = s["packets"], r["packets"]
end = "" if r.get("ended") else " no-end-message"
print(f"{got / s['duration_s']:.0f} {100 * (sent - got) / max(sent, 1):.2f} {s['log_records']}+{r['log_records']} backlog:{sys.argv[2]} socket:{r.get('socket_drops', '-')}{end}")
PY
}

# p TAG TOOL -> "delivered_pps loss_pct": the peers at 64 B, as fast as each goes. iperf3 keeps
# no per-packet record; D-ITG and mgen keep one at both ends, as Horde does.
p_point() {
  local tag=$1 tool=$2 d="$LOGS/$1.d"
  rm -rf "$d"; mkdir -p "$d"
  case $tool in
    iperf3)
      iperf3 -s -1 -p $PORT -B 127.0.0.1 >/dev/null 2>&1 &
      local sp=$!
      sleep 0.5
      timeout $((SECS + 20)) iperf3 -c 127.0.0.1 -p $PORT -u -l 64 -b 0 -t "$SECS" -J >"$d/iperf3.json" 2>/dev/null || true
      wait "$sp" || true
      python3 - "$d/iperf3.json" "$SECS" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["end"]["sum"]
print(f'{(e["packets"] - e["lost_packets"]) / float(sys.argv[2]):.0f} {100 * e["lost_packets"] / max(e["packets"], 1):.2f}')
PY
      ;;
    ditg)
      (cd "$d" && exec ITGRecv >/dev/null 2>&1) &
      local rp=$!
      sleep 0.5
      (cd "$d" && timeout $((SECS + 20)) ITGSend -a 127.0.0.1 -rp $PORT -T UDP -C 1000000 -c 64 -t $((SECS * 1000)) -l snd.log -x rcv.log >send.txt 2>&1) || true
      sleep 0.5
      kill "$rp" 2>/dev/null || true
      wait "$rp" 2>/dev/null || true
      (cd "$d" && ITGDec snd.log >snd.txt 2>&1; ITGDec rcv.log >rcv.txt 2>&1) || true
      python3 - "$d" "$SECS" <<'PY'
import re, sys
d, secs = sys.argv[1], float(sys.argv[2])
n = lambda f: int((re.findall(r"Total packets\s*=\s*(\d+)", open(f"{d}/{f}", errors="replace").read()) or ["0"])[-1])
sent, got = n("snd.txt"), n("rcv.txt")
print(f"{got / secs:.0f} {100 * (sent - got) / max(sent, 1):.2f}")
PY
      ;;
    mgen)
      timeout $((SECS + 20)) mgen event "LISTEN UDP $PORT" output "$d/recv.log" >/dev/null 2>&1 &
      local rp=$!
      sleep 0.5
      printf 'TXLOG\n0.0 ON 1 UDP DST 127.0.0.1/%d PERIODIC [1000000 64]\n%d.0 OFF 1\n' $PORT "$SECS" >"$d/send.mgn"
      timeout $((SECS + 20)) mgen input "$d/send.mgn" output "$d/send.log" >/dev/null 2>&1 || true
      sleep 1
      kill "$rp" 2>/dev/null || true
      wait "$rp" 2>/dev/null || true
      local sent got
      sent=$(grep -c ' SEND ' "$d/send.log" || true); got=$(grep -c ' RECV ' "$d/recv.log" || true)
      python3 -c "import sys; s, g, t = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]); print(f'{g / t:.0f} {100 * (s - g) / max(s, 1):.2f}')" "${sent:-0}" "${got:-0}" "$SECS"
      ;;
  esac
  rm -rf "$d"
}

VARIANTS=(
  "c-plain-64|C sendmmsg → recvmmsg, 64 B (no logs)|c 64 - -"
  "c-gso-64|C GSO → GRO, 64 B (no logs)|c 64 -g -g"
  "c-gso-nogro-64|C GSO → recvmmsg without GRO, 64 B (no logs)|c 64 -g -"
  "h-before-64|horde before GSO ($BEFORE), 64 B, logs both ends|h before 64"
  "h-gso-64|horde with GSO/GRO, 64 B, logs both ends|h now 64"
  "p-iperf3-64|iperf3 3 \`-u -l 64 -b 0\`, 64 B (no per-packet logs)|p iperf3"
  "p-ditg-64|D-ITG \`ITGSend -C 1000000 -c 64\`, logs both ends|p ditg"
  "p-mgen-64|mgen \`PERIODIC [1000000 64]\` with TXLOG, logs both ends|p mgen"
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
      p) r=$(p_point "$tag-$round" "$a") ;;
      h) bin=$H; [ "$a" = before ] && bin=$BEFORE_BIN; [ -z "$bin" ] && continue; r=$(h_point "$tag-$round" "$bin" "$b") ;;
    esac
    echo "round $round: $label: $r"
    rows+=("$tag|$label|$round|$r")
  done
done

python3 - "$RESULTS" "$ROUNDS" "$SECS" "${BEFORE_BIN:+$BEFORE}" "$(git rev-parse --short HEAD)" "$(nproc)" "$(uname -r)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" "$LOGS" "${rows[@]}" <<'PY'
import sys, statistics, datetime
out, rounds, secs, before, head, cores, kernel, cpu, logs = sys.argv[1:10]
logs = f"`{logs}` ({'tmpfs' if logs.startswith('/dev/shm') else 'not tmpfs'})"
rows = [r.split("|") for r in sys.argv[10:]]
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
     "- Where a Horde run lost datagrams, the cell names where: the CPUs' input backlog (`/proc/net/softnet_stat`, loopback's queue before the socket: the host's) and the receiving socket (`SO_MEMINFO` drops), and says when the receiver stopped without the sender's end message.",
     f"- Every tool's per-packet logs (Horde's, D-ITG's, mgen's) are written to {logs} and deleted after each point, so a disk's write-back does not stand in for the tool.",
     "- With GSO a datagram of a super-datagram is still its own record; its departure instant is the super-datagram's, and with GRO datagrams of one buffer share its kernel arrival timestamp.", "",
     "| variant | rounds: delivered pkt/s (loss %) | median pkt/s |", "|---|---|---|"]
for (tag, label), v in by.items():
    cells = ", ".join(f"{float(x[0]):,.0f} ({x[1]} %" + (f"; input backlog dropped {x[3].split(':')[1]}, socket {x[4].split(':')[1]}" + ("; the receiver saw no end message" if len(x) > 5 else "") if len(x) > 4 and float(x[1]) > 0 else "") + ")" for x in v)
    L.append(f"| {label} | {cells} | {statistics.median(float(x[0]) for x in v):,.0f} |")
L += ["", "Ratios of medians (delivered):", ""]
for a, b, what in [("h-gso-64", "c-plain-64", "horde GSO/GRO vs the C sendmmsg pair, 64 B"),
                   ("h-gso-64", "c-gso-64", "horde GSO/GRO vs the C GSO/GRO pair, 64 B"),
                   ("h-gso-64", "h-before-64", "horde GSO/GRO vs horde before, 64 B"),
                   ("h-gso-64", "p-iperf3-64", "horde GSO/GRO vs iperf3 (delivered), 64 B"),
                   ("h-gso-64", "p-ditg-64", "horde GSO/GRO vs D-ITG, 64 B"),
                   ("h-gso-64", "p-mgen-64", "horde GSO/GRO vs mgen, 64 B"),
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
