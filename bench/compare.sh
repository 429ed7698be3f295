#!/usr/bin/env bash
# A regression check of send-time precision against an older commit, in the same session:
# builds REV in a git worktree (its own target directory), then runs this tree's `horde send`
# and REV's, alternately (so host noise falls on both alike), RUNS times each at 10k, 50k, 100k
# and 200k 64-byte packets/s for SECS s to their own `horde recv` on loopback, logs at both ends
# (as issue 26 asks). Per rate and build: the median over the runs of the lateness p50, p99 and
# p99.9 (actual − scheduled), packets received, and this tree's host floor (REV may not measure
# it). Writes bench/RESULTS-compare.md and raw outputs in bench/out/compare/. Bounded: every run
# SECS s (timeout 60 s), loopback only; ~4 minutes after both builds (REV's build: ~15 min on 2
# cores).
#
#   bash bench/compare.sh f1b9199
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REV=${1:?usage: bash bench/compare.sh REV}
OUT=$ROOT/bench/out/compare
RESULTS=$ROOT/bench/RESULTS-compare.md
WT=${WORKTREE:-/tmp/horde-compare-$REV}
rm -rf "$OUT"
mkdir -p "$OUT"
cargo build --release -q -p horde
if [ ! -x "$WT/target/release/horde" ]; then
  git worktree add -f "$WT" "$REV" >/dev/null 2>&1 || true
  (cd "$WT" && cargo build --release -q -p horde)
fi
NEW=$ROOT/target/release/horde OLD=$WT/target/release/horde REV=$REV OUT=$OUT RESULTS=$RESULTS \
  SECS=${SECS:-3} RUNS=${RUNS:-3} RATES=${RATES:-"10000 50000 100000 200000"} python3 - <<'PY'
import json, os, statistics, subprocess, time
NEW, OLD, REV, OUT, RESULTS = (os.environ[k] for k in ("NEW", "OLD", "REV", "OUT", "RESULTS"))
SECS, RUNS = int(os.environ["SECS"]), int(os.environ["RUNS"])
rates = [int(r) for r in os.environ["RATES"].split()]
builds = [("this tree", NEW, 9330), (REV, OLD, 9340)]
res = {}
for rate in rates:
    for k in range(RUNS):
        for name, exe, port in builds:
            tag = f"{name.replace(' ', '_')}-{rate}-{k}"
            rj, sj = f"{OUT}/{tag}.recv.json", f"{OUT}/{tag}.send.json"
            recv = subprocess.Popen([exe, "recv", "-p", str(port), "--idle", "2s", "-l", f"{OUT}/{tag}.r.hlog", "--json", rj],
                                    stdout=subprocess.DEVNULL, stderr=open(f"{OUT}/{tag}.recv.txt", "w"))
            time.sleep(0.4)
            subprocess.run([exe, "send", "--dst", f"127.0.0.1:{port}", "-C", str(rate), "-c", "64", "-t", f"{SECS}s", "-l", f"{OUT}/{tag}.s.hlog", "--json", sj],
                           stdout=subprocess.DEVNULL, stderr=open(f"{OUT}/{tag}.send.txt", "w"), timeout=60)
            recv.wait(timeout=60)
            for p in (f"{OUT}/{tag}.r.hlog", f"{OUT}/{tag}.s.hlog"):
                os.remove(p)
            s, r = json.load(open(sj)), json.load(open(rj))
            l = s["lateness"]
            floor = ((s.get("host") or {}).get("floor") or {}).get("p99_us")
            res.setdefault((rate, name), []).append((l["p50_us"], l["p99_us"], l["p999_us"], r["packets"], s["packets"], floor))
host = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": ")
rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
med = lambda xs: statistics.median(xs)
with open(RESULTS + ".partial", "w") as f:
    f.write(f"# Send-time precision: this tree ({rev}) against {REV}, same session\n\n")
    f.write(f"`bash bench/compare.sh {REV}` — {time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} cores ({host}), {os.uname().release}. Loopback.\n\n")
    f.write(f"One UDP flow of 64-byte packets for {SECS} s, per-packet logs at both ends, each build with its own receiver; the two builds alternate, {RUNS} runs each per rate. Figures are medians over the runs (range in brackets). Lateness = actual − scheduled departure, µs. The floor is this tree's busy-wait pacer at the same rate just before its run ({REV} does not measure it).\n\n")
    f.write("| pkt/s | build | lateness p50 µs | p99 µs | p99.9 µs | received / sent | host floor p99 µs |\n|---:|---|---:|---:|---:|---:|---:|\n")
    for rate in rates:
        for name, _, _ in builds:
            xs = res[(rate, name)]
            rng = lambda i: f"{med([x[i] for x in xs]):.1f} [{min(x[i] for x in xs):.1f}–{max(x[i] for x in xs):.1f}]"
            fl = [x[5] for x in xs if x[5] is not None]
            f.write(f"| {rate:,} | {name} | {rng(0)} | {rng(1)} | {rng(2)} | {sum(x[3] for x in xs):,} / {sum(x[4] for x in xs):,} | {f'{med(fl):.2f}' if fl else '—'} |\n")
    f.write("\nRaw outputs: bench/out/compare/ (JSON; the logs are removed after each run).\n")
os.replace(RESULTS + ".partial", RESULTS)
print(open(RESULTS).read())
PY
