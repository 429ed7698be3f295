#!/usr/bin/env bash
# The Quake game-server study (Abdelkhalik, Bilas, Moshovos, "Behavior and Performance of
# Interactive Multi-player Game Servers"): the saturation knee. One OpenArena server (Debian's
# openarena-server, an ioquake3 engine) has its CPU capped by a cgroup (v1 cpu.cfs_quota_us;
# v2 cpu.max where that is what the machine has) at several fractions of a core, so that it
# saturates below the engine's 64-client cap; Horde's protocol-true bots step the players up.
# Per step: response rate and response time (the paper's two measures), the server's CPU from
# the cgroup's own accounting, requests per server frame, and the server's time per frame split
# into game and the rest from the engine's own frame timing (`com_speeds 1`: gm = the game
# module, sv = the rest of the server frame, ev = waiting for and handling packets: idle time
# included), and its CPU time split into kernel (the network stack) and user space.
#
#   sudo bash bench/papers/quake.sh            (root: cgroups; installs openarena-server if missing)
#   ONLY=oa_dm1|oa_dm4 CAPS="10 25" STEP_SECS=12 sudo -E bash bench/papers/quake.sh
#
# Time: 2 maps × 3 caps × 9 steps × (STEP_SECS + ~3 s) ≈ 14 min at STEP_SECS=12. Every bots run is
# bounded by its duration; the servers are stopped at the end of each cap (and on exit).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "needs root (cgroups): sudo bash $0" >&2; exit 1; }
OA=/usr/games/openarena-server
if [ ! -x "$OA" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openarena-server >/dev/null
fi
cargo build --release -q -p horde
H="$PWD/target/release/horde"
MAPS=${ONLY:-"oa_dm1 oa_dm4"}
[ "$MAPS" = all ] && MAPS="oa_dm1 oa_dm4"
CAPS=${CAPS:-"10 20 40"}
STEPS=${STEPS:-"4 8 16 24 32 40 48 56 64"}
STEP_SECS=${STEP_SECS:-12}
SV_FPS=20
P99_MS=150
DATA=bench/papers/data
mkdir -p "$DATA"
W=$(mktemp -d /tmp/horde-quake.XXXXXX)
CG=horde-knee-$$
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  sleep 0.5
  for d in /sys/fs/cgroup/cpu/$CG /sys/fs/cgroup/cpuacct/$CG /sys/fs/cgroup/$CG; do [ -d "$d" ] && rmdir "$d" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

# The cgroup: v1 (cpu + cpuacct, as on this machine) or v2.
if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
  CGV=1
  mkdir -p /sys/fs/cgroup/cpu/$CG /sys/fs/cgroup/cpuacct/$CG
  usage() { echo $(( $(cat /sys/fs/cgroup/cpuacct/$CG/cpuacct.usage) / 1000 )); }  # µs
  usage_sys() { echo $(( $(cat /sys/fs/cgroup/cpuacct/$CG/cpuacct.usage_sys) / 1000 )); }
  cap() { echo 100000 > /sys/fs/cgroup/cpu/$CG/cpu.cfs_period_us; echo $(( $1 * 1000 )) > /sys/fs/cgroup/cpu/$CG/cpu.cfs_quota_us; }
  join() { echo "$1" > /sys/fs/cgroup/cpu/$CG/cgroup.procs; echo "$1" > /sys/fs/cgroup/cpuacct/$CG/cgroup.procs; }
else
  CGV=2
  echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  mkdir -p /sys/fs/cgroup/$CG
  usage() { awk '/^usage_usec/ { print $2 }' /sys/fs/cgroup/$CG/cpu.stat; }
  usage_sys() { awk '/^system_usec/ { print $2 }' /sys/fs/cgroup/$CG/cpu.stat; }
  cap() { echo "$(( $1 * 1000 )) 100000" > /sys/fs/cgroup/$CG/cpu.max; }
  join() { echo "$1" > /sys/fs/cgroup/$CG/cgroup.procs; }
fi
echo "cgroup v$CGV; $(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r); $(dpkg-query -W -f='openarena-server ${Version}' openarena-server 2>/dev/null)" > "$DATA/quake-machine.txt"
if perf stat -e instructions -- true 2>&1 | grep -q "not supported"; then
  echo "perf: hardware counters not exposed by this VM (instructions/cycles <not supported>): no IPC" >> "$DATA/quake-machine.txt"
fi

: > "$DATA/quake.jsonl"
port=27990
for map in $MAPS; do
  for c in $CAPS; do
    port=$((port + 1))
    cap "$c"
    # The server joins the cgroup before it execs: every thread it starts is capped.
    "$OA" +set dedicated 1 +set net_ip 127.0.0.1 +set net_port $port +set sv_maxclients 64 +set sv_pure 0 +set sv_fps $SV_FPS +set g_inactivity 0 +set sv_timeout 30 +set com_speeds 1 +map "$map" > "$W/server-$map-$c.log" 2>&1 &
    SERVER=$!
    sleep 0.2
    join "$SERVER"
    sleep 4
    for n in $STEPS; do
      u0=$(usage); s0=$(usage_sys); l0=$(wc -l < "$W/server-$map-$c.log"); t0=$(date +%s.%N)
      timeout $((STEP_SECS + 60)) "$H" bots --server "127.0.0.1:$port" -n "$n" -t "${STEP_SECS}s" --ramp 2s --warmup 3s --sv-fps "$SV_FPS" -o "$W/bots" --json "$W/step.json" > "$W/bots.txt" 2>&1 || true
      u1=$(usage); s1=$(usage_sys); t1=$(date +%s.%N)
      sed -n "$((l0 + 1)),\$p" "$W/server-$map-$c.log" > "$W/speeds.txt"
      python3 - "$W/step.json" "$W/speeds.txt" "$map" "$c" "$n" "$u0" "$u1" "$t0" "$t1" "$SV_FPS" "$P99_MS" "$s0" "$s1" >> "$DATA/quake.jsonl" <<'EOF'
import json, re, sys
step, speeds, m, cap, n, u0, u1, t0, t1, fps, bound, s0, s1 = sys.argv[1:14]
try:
    r = json.load(open(step))
except (OSError, ValueError):
    r = {"entered": 0, "response_rate": 0, "request_rate": 0, "response_ms": {"p50": None, "p99": None, "mean": None}, "window_s": 0}
n, fps, bound = int(n), int(fps), float(bound)
# com_speeds: "frame:N all:A sv:S ev:E cl:C gm:G rf:R bk:B" (ms; sv excludes gm).
fr = [tuple(int(x) for x in g) for g in re.findall(r"frame:\s*\d+\s+all:\s*(\d+)\s+sv:\s*(\d+)\s+ev:\s*(\d+)\s+cl:\s*\d+\s+gm:\s*(\d+)", open(speeds, errors="replace").read())]
k = len(fr) or 1
all_, sv, ev, gm = (sum(f[i] for f in fr) / k for i in range(4))
wall = float(t1) - float(t0)
per_bot = r["response_rate"] / n if n else 0
q = r["response_ms"]
print(json.dumps({
    "map": m, "cap_pct": int(cap), "players": n, "entered": r["entered"],
    "response_rate_per_bot": per_bot, "request_rate": r["request_rate"], "requests_per_frame": r["request_rate"] / fps,
    "response_ms_mean": q.get("mean"), "response_ms_p50": q.get("p50"), "response_ms_p99": q.get("p99"),
    "server_cpu_pct": (int(u1) - int(u0)) / 1e4 / wall if wall > 0 else None,
    # The kernel's share of the server's CPU time (its sockets: the network stack), the rest
    # user space (the game, parsing commands, building snapshots).
    "server_kernel_share": (int(s1) - int(s0)) / (int(u1) - int(u0)) if int(u1) > int(u0) else None,
    "frames": len(fr), "frame_all_ms": all_, "frame_sv_ms": sv, "frame_ev_ms": ev, "frame_gm_ms": gm,
    "saturated": per_bot < 0.95 * fps or (q.get("p99") or 0) > bound or r["entered"] < n,
}))
EOF
      tail -1 "$DATA/quake.jsonl"
    done
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    SERVER=""
    sleep 1
  done
done
python3 bench/papers/quake_report.py
