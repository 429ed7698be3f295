#!/usr/bin/env bash
# One topology across machines (issue 27) beside the same topology on one machine: two sites of
# three hosts behind a switch each, the switches' link unimpaired but through the link emulator
# (`live = true`). On one machine that link is one link emulator; across two machines (here two
# network namespaces with their own addresses standing in for machines, each running
# `horde agent --emu`) it is a VXLAN tunnel with a link emulator at each end.
# Measured: `emu up` wall time, and a1 → b1 UDP with 64-byte payloads for 3 s at several
# offered rates (received, loss, one-way delay), every process sharing this machine's cores.
# Then a scenario's [emu] players (PLAYERS WoW players for SECS, on both sites, the server side
# in a1, the switches' link 10 ms each way): `horde run` on one machine, and `horde run --agents`
# across the two machines; the per-direction figures and the WAN link's counters side by side.
# Needs root. Writes bench/RESULTS-emu-across.md, raw outputs in bench/out/emu-across/.
#   sudo bash bench/emu-across.sh      # ~3 minutes
#   PLAYERS=2000 SECS=60 sudo -E bash bench/emu-across.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/emu-across
rm -rf "$OUT"
mkdir -p "$OUT"
[ "$(id -u)" = 0 ] || { echo "bench/emu-across.sh needs root (namespaces)"; exit 2; }
cargo build --release -q -p horde
H=$ROOT/target/release/horde
T=hbx
PLAYERS=${PLAYERS:-600}
SECS=${SECS:-30}
# the example's WAN link, unimpaired but through the link emulator
sed -e 's/^delay = "10ms"$/live = true/' -e '/^loss = "10%"$/d' examples/topologies/two-sites.toml > "$OUT/sites.toml"
grep -q '^live = true$' "$OUT/sites.toml"
NET=79
. bench/lab.sh
AGENTS=$LAB_AGENTS
cleanup() {
  ip netns exec $T-ctl "$H" emu down bxa --agents $AGENTS --credentials "$OUT/creds" >/dev/null 2>&1 || true
  "$H" emu down bone --purge >/dev/null 2>&1 || true
  lab_down
}
trap cleanup EXIT
cleanup
lab_up

now() { date +%s.%N; }
t=$(now); "$H" emu up "$OUT/sites.toml" --id bone >/dev/null 2>&1; up_one=$(echo "$(now) - $t" | bc)
t=$(now); ip netns exec $T-ctl "$H" emu up "$OUT/sites.toml" --id bxa --agents $AGENTS --credentials "$OUT/creds" >"$OUT/up-across.txt" 2>&1; up_across=$(echo "$(now) - $t" | bc)

probe() { # case, rate
  local c=$1 rate=$2 tag=$1-$2
  if [ "$c" = one ]; then
    "$H" emu exec bone b1 -- "$H" recv -b 10.0.0.4 -p 9000 --idle 2s -l "$OUT/$tag.r.hlog" >"$OUT/$tag.recv.txt" 2>&1 &
    local rp=$!
    until grep -q "listening on" "$OUT/$tag.recv.txt"; do sleep 0.05; done
    "$H" emu exec bone a1 -- "$H" send -a 10.0.0.4:9000 -C "$rate" -c 64 -t 3s -l "$OUT/$tag.s.hlog" >/dev/null 2>&1 || true
    wait $rp || true
  else
    out=$(ip netns exec $T-ctl "$H" emu exec bxa b1 --detach --agents $AGENTS --credentials "$OUT/creds" -- "$H" recv -b 10.0.0.4 -p 9000 --idle 2s -l "$OUT/$tag.r.hlog" 2>/dev/null)
    f=${out##*output in }
    until grep -q "listening on" "$f" 2>/dev/null; do sleep 0.05; done
    ip netns exec $T-ctl "$H" emu exec bxa a1 --agents $AGENTS --credentials "$OUT/creds" -- "$H" send -a 10.0.0.4:9000 -C "$rate" -c 64 -t 3s -l "$OUT/$tag.s.hlog" >/dev/null 2>&1 || true
    until grep -q "log: " "$f" 2>/dev/null; do sleep 0.1; done
  fi
  "$H" decode "$OUT/$tag.s.hlog" "$OUT/$tag.r.hlog" -q --json "$OUT/$tag.json"
}
RATES="20000 50000 100000"
for r in $RATES; do probe one $r; probe across $r; done

# a scenario's [emu] players, on one machine and across the two
ip netns exec $T-ctl "$H" emu down bxa --agents $AGENTS --credentials "$OUT/creds" >/dev/null 2>&1
"$H" emu down bone >/dev/null 2>&1
sed -e '/^loss = "10%"$/d' examples/topologies/two-sites.toml > "$OUT/sites-wan.toml"
printf 'name = "across"\nservice = "wow"\nplayers = %s\nduration = "%ss"\nseed = 7\nspin_us = 0\nserver = "127.0.0.1:7900"\n[emu]\ntopology = "sites-wan.toml"\nclients = ["a", "b"]\nserver = "a1"\n' "$PLAYERS" "$SECS" > "$OUT/sc.toml"
t=$(now); /usr/bin/time -f '%U %S %M' -o "$OUT/run-one.time" "$H" run "$OUT/sc.toml" -o "$OUT/run-one" >"$OUT/run-one.txt" 2>&1; run_one=$(echo "$(now) - $t" | bc)
t=$(now); ip netns exec $T-ctl /usr/bin/time -f '%U %S %M' -o "$OUT/run-across.time" "$H" run "$OUT/sc.toml" -o "$OUT/run-across" --agents $AGENTS --credentials "$OUT/creds" >"$OUT/run-across.txt" 2>&1; run_across=$(echo "$(now) - $t" | bc)

python3 - "$OUT" "$up_one" "$up_across" "$RATES" "$run_one" "$run_across" "$PLAYERS" "$SECS" > "$ROOT/bench/RESULTS-emu-across.md" <<'PY'
import json, subprocess, sys
out, up_one, up_across, rates = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split()
run_one, run_across, players, secs = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print("# One topology across machines, beside one machine\n")
print(f"Command: `sudo bash bench/emu-across.sh` (main {rev}, {cpu}, {len(open('/proc/cpuinfo').read().split('processor')) - 1} cores).")
print("Two sites of three hosts behind a switch each; the switches' link unimpaired but through the link emulator (`live = true`).")
print("*One machine*: `horde emu up` (one link emulator on the link). *Across*: two network namespaces with their own addresses stand in for")
print("machines, each running `horde agent --emu`; `horde emu up --agents` splits the topology at the switches' link, a VXLAN tunnel")
print("with a link emulator at each end. Every process (senders, receivers, both machines' link emulators, the tunnel) shares this")
print("machine's cores: on two real machines each end's link emulator has its own.\n")
print(f"`emu up` wall time: one machine {up_one:.2f} s; across two machines {up_across:.2f} s (connecting to both agents with TLS and 16 clock samples each, then both parts built at once).\n")
print("a1 → b1, UDP, 64-byte payloads, 3 s:\n")
print("| topology | offered pkt/s | sent | received | loss | delay p50 ms | delay p99 ms |")
print("|---|---:|---:|---:|---:|---:|---:|")
for r in rates:
    for c, label in (("one", "one machine"), ("across", "across 2 machines (VXLAN)")):
        t = json.load(open(f"{out}/{c}-{r}.json"))["total"]
        l, d = t["loss"], t["delay"]
        print(f"| {label} | {int(r):,} | {l['expected']:,} | {l['expected'] - l['lost']:,} | {l['loss_pct']:.2f} % | {d['p50_ms']:.3f} | {d['p99_ms']:.3f} |")
print("\n## A scenario's `[emu]` players across machines\n")
print(f"{players:,} WoW players for {secs} s on both sites (a1–a3, b1–b3), the server side in a1, the switches' link 10 ms each way (no loss).")
print("*One machine*: `horde run sc.toml`. *Across*: `horde run sc.toml --agents m1,m2` from the controller's namespace: the topology")
print("brought up across the two agents (a site each, the WAN link tunnelled), each agent's players on its own site's hosts, the server")
print("side in a1 on m1, the experiment taken down on both after the run. Half the players are behind the WAN link either way.\n")
print("| | direction | APDUs sent | received | lost | delay p50 ms | delay p99 ms | WAN link frames that way |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for c, label in (("one", "one machine"), ("across", "across 2 machines")):
    s = json.load(open(f"{out}/run-{c}/summary.json"))
    links = {(l["a"], l["b"]): l for l in s.get("emulated_links") or []}
    wan = links.get(("swa", "swb"))
    for d, way in (("up", "ba"), ("down", "ab")):
        x = s["analysis"][d]
        frames = f"{wan[way]['packets']:,}" if wan else "—"
        print(f"| {label} | {d} | {x['sent']:,} | {x['received']:,} | {x['lost']:,} | {x['delay_p50_ms']:.3f} | {x['delay_p99_ms']:.3f} | {frames} |")
print()
for c, label, wall in (("one", "one machine", run_one), ("across", "across 2 machines", run_across)):
    u, sy, rss = open(f"{out}/run-{c}.time").read().split()[-3:]
    who = "the controller only: players and server side ran in the agents" if c == "across" else "players, server side and link emulator"
    print(f"- {label}: `horde run` wall {wall:.1f} s (topology up, run, report, down); CPU {float(u) + float(sy):.1f} s and peak RSS {int(rss) // 1024} MB of {who}.")
print("\nReading: the schedule is the same (same seed, same players), so the APDU counts must be equal, and the WAN link must carry about")
print("the same frames each way. The delays are bimodal (half the players next to the server, half 10 ms away), so their medians sit at")
print("the boundary between the two modes and jump from one to the other with which players are behind the WAN: on one machine player")
print("`p` goes on host `p mod 6` (each host gets every sixth player), across machines each machine's players are a block of ids on its")
print("own site. The 99th percentiles (10 ms plus queueing) and the WAN link's frame counts are the figures to compare.")
PY
cat "$ROOT/bench/RESULTS-emu-across.md"
