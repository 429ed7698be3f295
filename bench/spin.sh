#!/usr/bin/env bash
# What a sender that sleeps costs against one that spins: `horde send --spin-us N` (the
# busy-wait window before each departure; default 80 µs) at 0, 20, 80 and 1000 µs, one UDP flow
# of 64-byte packets to a `horde recv` on loopback at 1k, 10k, 50k and 100k packets/s, SECS s
# each. Per point: send-time lateness (p50, p99, p99.9 of actual − scheduled), the sender's CPU
# (user + system, as a share of one core, from getrusage), and the host's busy-wait floor
# measured just before the run. Writes bench/RESULTS-spin.md and raw outputs in bench/out/spin/.
# Every load is bounded (SECS s, timeout 60 s) and targets 127.0.0.1 only; ~2 minutes; no root.
#
#   bash bench/spin.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/spin
RESULTS=$ROOT/bench/RESULTS-spin.md
rm -rf "$OUT"
mkdir -p "$OUT"
cargo build --release -q -p horde
H=$ROOT/target/release/horde
SECS=${SECS:-3} RATES=${RATES:-"1000 10000 50000 100000"} SPINS=${SPINS:-"0 20 80 1000"} \
  H=$H OUT=$OUT RESULTS=$RESULTS python3 - <<'PY'
import json, os, resource, subprocess, time
H, OUT, RESULTS, SECS = os.environ["H"], os.environ["OUT"], os.environ["RESULTS"], int(os.environ["SECS"])
rates = [int(r) for r in os.environ["RATES"].split()]
spins = [int(s) for s in os.environ["SPINS"].split()]
recv = subprocess.Popen([H, "recv", "-p", "9320", "-t", f"{len(rates) * len(spins) * (SECS + 4) + 30}s"], stdout=subprocess.DEVNULL, stderr=open(f"{OUT}/recv.txt", "w"))
time.sleep(0.5)
rows = []
try:
    for rate in rates:
        for spin in spins:
            j = f"{OUT}/send-{rate}-{spin}.json"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([H, "send", "--dst", "127.0.0.1:9320", "-C", str(rate), "-c", "64", "-t", f"{SECS}s", "--spin-us", str(spin), "--json", j],
                           stdout=subprocess.DEVNULL, stderr=open(f"{OUT}/send-{rate}-{spin}.txt", "w"), timeout=60)  # exit 1: lateness above the host's allowance (shown)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            s = json.load(open(j))
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            floor = s["host"].get("floor") or {}
            # The floor's own busy-wait (before the run) is in the CPU time: take it out.
            floor_s = floor["samples"] / floor["rate_pps"] if floor.get("rate_pps") else 0.0
            late = s["lateness"]
            rows.append((rate, spin, s["packets"] / max(s["duration_s"], 1e-9), late["p50_us"], late["p99_us"], late["p999_us"],
                         100 * max(cpu - floor_s, 0) / max(s["duration_s"], 1e-9), floor.get("p99_us"), s["host"].get("steal_mean", 0) * 100))
finally:
    recv.terminate()
    recv.wait()
host = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": ")
rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
with open(RESULTS + ".partial", "w") as f:
    f.write("# Sleeping vs spinning: precision against CPU (`send --spin-us`)\n\n")
    f.write(f"`bash bench/spin.sh` — {time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} cores ({host}), {os.uname().release}; main {rev}. Loopback.\n\n")
    f.write(f"One UDP flow of 64-byte packets for {SECS} s to a `horde recv`; `--spin-us N`: the sender sleeps (nanosleep) until N µs before each departure, then busy-waits; 0 = sleep to the departure time; the default is 80 µs (a VM's nanosleep wakes tens of µs late). Lateness = actual − scheduled departure. CPU = the sender process's user + system time over the run's duration, as % of one core (the 200-ms floor measurement before the run taken out). Floor p99 = the host's own busy-wait pacer at the same rate, just before the run (what any sender could get here).\n\n")
    f.write("| pkt/s | --spin-us | sent pkt/s | lateness p50 µs | p99 µs | p99.9 µs | sender CPU % of a core | host floor p99 µs | steal % |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in rows:
        f.write(f"| {r[0]:,} | {r[1]} | {r[2]:,.0f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.0f} | {'' if r[7] is None else f'{r[7]:.2f}'} | {r[8]:.1f} |\n")
    f.write("\nRaw outputs: bench/out/spin/.\n")
os.replace(RESULTS + ".partial", RESULTS)
print(open(RESULTS).read())
PY
