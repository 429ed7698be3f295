#!/usr/bin/env bash
# Issue 50, item 3: the userspace link emulator beside a plain veth pair. Host a sends UDP with
# 64-byte payloads (106-byte frames) to host b for 3 s at each offered rate, logs at both ends;
# path "veth" is a bare veth pair, path "link" the same pair through the link emulator with a
# 1 ms delay (every frame read, impaired, held and written by the daemon). Rounds alternate the
# paths. A path's 0-loss rate in a round is the highest delivered rate of a run with every
# packet received and at least 99 % of the offered rate sent; the ratio is link / veth per
# round, and the headline its median. The link's own counters (frames read, overrun) are read
# after every link run and must account for every datagram sent.
# Needs root. Writes bench/RESULTS-emu-rate.md; raw outputs in bench/out/emu-rate/.
#   sudo bash bench/emu-rate.sh            # ~6 minutes
#   ROUNDS=1 RATES="1000000 2000000" sudo bash bench/emu-rate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/bench/out/emu-rate
mkdir -p "$OUT"
[ "$(id -u)" = 0 ] || { echo "bench/emu-rate.sh needs root (namespaces)"; exit 2; }
RATES=${RATES:-"500000 1000000 2000000 3000000 4000000 5000000 6000000 8000000"}
ROUNDS=${ROUNDS:-3}
cargo build --release -q -p horde
H=$ROOT/target/release/horde
ID=brate$$
trap '"$H" emu down $ID --purge >/dev/null 2>&1 || true' EXIT
pair() { # delay line or nothing
  printf 'name = "pair"\n[[node]]\nname = "a"\nkind = "host"\n[[node]]\nname = "b"\nkind = "host"\n[[link]]\na = "a"\nb = "b"\nsubnet = "10.9.0.0/30"\n%s\n' "$1"
}
pair "" > "$OUT/veth.toml"
pair 'delay = "1ms"' > "$OUT/link.toml"
: > "$OUT/runs.jsonl"
for round in $(seq "$ROUNDS"); do
  for path in veth link; do
    "$H" emu up "$OUT/$path.toml" --id "$ID" >/dev/null 2>&1
    for rate in $RATES; do
      "$H" emu exec "$ID" b -- "$H" recv -b 10.9.0.2 -p 9000 --idle 2s --json "$OUT/r.json" >/dev/null 2>&1 &
      sleep 0.3
      "$H" emu exec "$ID" a -- "$H" send -a 10.9.0.2:9000 -C "$rate" -c 64 -t 3s --json "$OUT/s.json" >/dev/null 2>&1
      wait
      link='{}'
      [ "$path" = link ] && link=$("$H" emu link "$ID" a b --json)
      python3 - "$OUT/s.json" "$OUT/r.json" "$round" "$path" "$rate" "$link" >> "$OUT/runs.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
link = json.loads(sys.argv[6])
ab = link[0]["ab"] if link else {}
print(json.dumps({"round": int(sys.argv[3]), "path": sys.argv[4], "rate": int(sys.argv[5]), "sent": s["packets"],
                  "received": r["packets"], "duration_s": 3.0, "link": ab}))
PY
      tail -1 "$OUT/runs.jsonl"
    done
    "$H" emu down "$ID" --purge >/dev/null
    sleep 2 # the kernel frees the namespaces in the background
  done
done
python3 - "$OUT/runs.jsonl" > "$ROOT/bench/RESULTS-emu-rate.md" <<'PY'
import json, statistics, subprocess, sys, datetime, os
runs = [json.loads(l) for l in open(sys.argv[1])]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
rounds = sorted({r["round"] for r in runs})
def zero_loss(rnd, path):
    ok = [r["received"] / r["duration_s"] for r in runs if r["round"] == rnd and r["path"] == path
          and r["received"] == r["sent"] and r["sent"] >= 0.99 * r["rate"] * r["duration_s"]]
    return max(ok, default=0.0)
# every datagram sent through the link is received or in the link's own drop counters
unaccounted = 0
prev = {}
for r in runs:
    if r["path"] != "link":
        continue
    key = r["round"]
    ab = r["link"]; p = prev.get(key, {})
    drops = sum(ab.get(k, 0) - p.get(k, 0) for k in ("lost", "queue_drops", "overflow_drops", "send_errors", "rx_overrun", "tx_overrun"))
    unaccounted += abs(r["sent"] - r["received"] - drops)
    prev[key] = ab
print("# The link emulator beside a plain veth pair (issue 50, item 3)\n")
print(f"Command: `sudo bash bench/emu-rate.sh` ({datetime.date.today()}, commit {commit}). Machine: {os.cpu_count()} cores ({cpu}), kernel {os.uname().release}; load average before the run {open('/proc/loadavg').read().split()[0]}.")
print("Host a sends UDP with 64-byte payloads (106-byte frames, GSO where departures are due together) to host b for 3 s per offered rate, per-packet logs at both ends; sender, link emulator and receiver share the cores. **veth**: a bare veth pair. **link**: the same pair through the userspace link emulator with a 1 ms delay. A path's 0-loss rate in a round is the highest delivered rate of a run with every packet received and ≥ 99 % of the offered rate sent.\n")
print("| round | veth 0-loss pkt/s | link 0-loss pkt/s | link / veth |")
print("|---:|---:|---:|---:|")
ratios = []
for rnd in rounds:
    v, l = zero_loss(rnd, "veth"), zero_loss(rnd, "link")
    ratio = l / v if v else 0.0
    ratios.append(ratio)
    print(f"| {rnd} | {v:,.0f} | {l:,.0f} | {ratio:.2f}× |")
print(f"\n**Median link / veth: {statistics.median(ratios):.2f}×** (target ≥ 0.9×). Datagrams sent through the link and neither received nor in the link's drop counters, over every link run: {unaccounted:,}.\n")
print("Every run (delivered pkt/s, loss):\n")
print("| round | path | offered | sent | received | lost | link overrun |")
print("|---:|---|---:|---:|---:|---:|---:|")
prev = {}
for r in runs:
    ab = r["link"]; p = prev.get(r["round"], {}) if r["path"] == "link" else {}
    over = (ab.get("rx_overrun", 0) + ab.get("tx_overrun", 0) + ab.get("overflow_drops", 0) + ab.get("send_errors", 0)
            - p.get("rx_overrun", 0) - p.get("tx_overrun", 0) - p.get("overflow_drops", 0) - p.get("send_errors", 0)) if ab else None
    if r["path"] == "link":
        prev[r["round"]] = ab
    print(f"| {r['round']} | {r['path']} | {r['rate']:,} | {r['sent']:,} | {r['received']:,} | {r['sent'] - r['received']:,} | {'–' if over is None else f'{over:,}'} |")
PY
cat "$ROOT/bench/RESULTS-emu-rate.md" | head -12
