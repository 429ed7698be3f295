#!/usr/bin/env bash
# "No behaviour lost" across a rework: the same measurements with the binary from before it
# (BEFORE) and with this checkout, one after the other in one session, on this machine. Loopback
# and namespaces this script creates only; every load is bounded in time.
#   ISSUE=22 (default): the run driver; BEFORE ba42ba8 (the last commit before its first change);
#            writes bench/RESULTS-driver.md and bench/out/driver/.
#   ISSUE=46: one unit of work; BEFORE db0eccf (the issue's own starting point); adds the demo
#            and a flows-through-agents summary check; writes bench/RESULTS-unit-of-work.md and
#            bench/out/unit-of-work/.
#
#   1. the engine: one 64-B UDP flow at 100,000 pkt/s for 5 s, logs at both ends: achieved
#      pkt/s, rate error, loss;
#   2. 10,000 WoW players for 30 s (bench/scenarios/wow-capacity.toml): connections, APDUs lost,
#      the worst per-category rate error and KS distances;
#   3. 64 bots against a real OpenArena server for 20 s: response time p50/p99;
#   4. a Mongoose circuit on an emulated link with 1 % loss and 100 ms RTT for 60 s: received
#      rate against Padhye's TCP-fair rate (needs root).
#
#   5. (ISSUE=46) `horde demo` (300 WoW players, 30 s): connections, APDUs lost, mismatched,
#      the worst rate error;
#   6. (ISSUE=46) 20 UDP flows for 10 s through two sending agents and a receiving agent with
#      `--collect summaries --check-summaries`: figures compared and beyond their bounds.
#
#   sudo bash bench/driver.sh                # ~12 minutes plus the BEFORE build (~6 minutes)
#   ISSUE=46 sudo bash bench/driver.sh       # ~15 minutes plus the BEFORE build
#   BEFORE_BIN=/path/to/horde sudo bash bench/driver.sh
#   ONLY=circuit sudo bash bench/driver.sh   # some of engine,wow,bots,circuit (the others' outputs stay)
# The circuit point is one 60 s run of a random-loss process: it runs CIRCUIT_RUNS times (3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ISSUE=${ISSUE:-22}
case $ISSUE in
  22) OUT=$ROOT/bench/out/driver; RESULTS=$ROOT/bench/RESULTS-driver.md; BEFORE=${BEFORE:-ba42ba8}
      TITLE="The run driver: before and after (issue 22)"; WHY="the last commit before issue 22's first change"; DEFAULT=engine,wow,bots,circuit ;;
  46) OUT=$ROOT/bench/out/unit-of-work; RESULTS=$ROOT/bench/RESULTS-unit-of-work.md; BEFORE=${BEFORE:-db0eccf}
      TITLE="One unit of work: before and after (issue 46)"; WHY="the commit issue 46 was measured at"; DEFAULT=engine,wow,bots,circuit,demo,flows ;;
  *) echo "ISSUE is 22 or 46" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
cargo build --release -q -p horde
AFTER_BIN=$ROOT/target/release/horde
if [ -z "${BEFORE_BIN:-}" ]; then
  rm -rf /tmp/horde-before
  git worktree add -f /tmp/horde-before "$BEFORE" -q
  (cd /tmp/horde-before && CARGO_TARGET_DIR=/tmp/horde-before-target cargo build --release -q -p horde)
  git worktree remove --force /tmp/horde-before
  BEFORE_BIN=/tmp/horde-before-target/release/horde
fi
[ -x /usr/games/openarena-server ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openarena-server >/dev/null; }

ONLY=${ONLY:-$DEFAULT}
on() { [[ ",$ONLY," == *",$1,"* ]]; }
CIRCUIT_RUNS=${CIRCUIT_RUNS:-3}

measure() { # NAME BIN
  local name=$1 H=$2 d=$OUT/$1
  mkdir -p "$d"
  # 1. engine
  if on engine; then
  "$H" recv --udp 9190 -t 12s --log "$d/recv.hlog" --json "$d/recv.json" >"$d/recv.txt" 2>&1 &
  local rp=$!
  sleep 0.5
  "$H" send -a 127.0.0.1:9190 --rate 100000 --size 64 -t 5s --log "$d/send.hlog" --json "$d/send.json" >"$d/send.txt" 2>&1
  kill -INT $rp 2>/dev/null || true
  wait $rp || true
  fi
  # 2. 10,000 WoW players
  on wow && rm -rf "$d/wow" && timeout 200 "$H" run bench/scenarios/wow-capacity.toml --players 10000 --duration 30s --out "$d/wow" --quiet >"$d/wow.txt" 2>&1 || true
  # 3. 64 bots
  on bots && timeout 120 "$H" bots --start-server -n 64 -t 20s --ramp 2s --warmup 3s -o "$d/bots" --json "$d/bots.json" >"$d/bots.txt" 2>&1 || true
  # 4. Mongoose vs Padhye at 1 % / 100 ms
  if on circuit && [ "$(id -u)" = 0 ]; then
    local id=drv${name:0:1}
    "$H" emu down "$id" --purge >/dev/null 2>&1 || true
    printf 'name = "pair"\n[[node]]\nname = "c"\nkind = "host"\n[[node]]\nname = "s"\nkind = "host"\n[[link]]\na = "c"\nb = "s"\nlive = true\n' >"$d/pair.toml"
    "$H" emu up "$d/pair.toml" --id "$id" >/dev/null
    "$H" emu link "$id" s c --clear --delay 50ms --rate 10mbit --queue 125kB >/dev/null
    "$H" emu link "$id" s c --dir ab --loss 1% >/dev/null
    sed -E '/^\[circuit\]/,$ { s/^((standing|walking|flying)_[a-z]+_kbps) = .*/\1 = 0/; s/^((login|teleport)_[a-z]+_kb) = .*/\1 = 0/ }' \
      crates/model/services/opensim.toml >"$d/backlog-only.toml"
    local sip
    sip=$("$H" emu exec "$id" s -- ip -4 -o addr show | awk '$2 != "lo" {print $4}' | cut -d/ -f1 | head -1)
    for r in $(seq 1 "$CIRCUIT_RUNS"); do
      "$H" emu exec "$id" s -- "$H" circuit serve --listen "$sip:9400" -t 65s --service "$d/backlog-only.toml" --backlog texture --backlog-packet 375 \
        --json "$d/circuit$r.server.json" >"$d/circuit$r.server.txt" 2>&1 &
      sleep 0.3
      "$H" emu exec "$id" c -- "$H" circuit join --server "$sip:9400" --throttle mongoose -t 60s --csv "$d/circuit$r.client.csv" --json "$d/circuit$r.client.json" >"$d/circuit$r.client.txt" 2>&1 || true
      wait || true
    done
    "$H" emu down "$id" --purge >/dev/null 2>&1 || true
  fi
  # 5. the demo
  on demo && rm -rf "$d/demo" && timeout 200 "$H" demo -q -o "$d/demo" >"$d/demo.txt" 2>&1 || true
  # 6. flows through agents, summaries checked against the logs
  if on flows; then
    rm -rf "$d/flows"; mkdir -p "$d/flows"
    "$H" agent keygen --out "$d/flows/creds" >/dev/null 2>&1
    local pids=() ip
    for ip in 41 42 43; do
      "$H" agent --listen "127.0.0.$ip:0" --credentials "$d/flows/creds" --dir "$d/flows/a$ip" --name "a$ip" 2>"$d/flows/a$ip.log" &
      pids+=($!)
    done
    local addrs=() a
    for ip in 41 42 43; do
      a=""
      for _ in $(seq 100); do a=$(grep -o ' listening on [0-9.:]*' "$d/flows/a$ip.log" | awk '{print $3}' || true); [ -n "$a" ] && break; sleep 0.1; done
      addrs+=("$a")
    done
    printf '[defaults]\nduration = "10s"\nsize = 200\ndst = "127.0.0.43:%s"\n[[flow]]\nrate = 100\nrepeat = 16\n[[flow]]\nidt = "exponential(10)"\nsize = "exponential(300)"\nrepeat = 4\n' \
      $((30000 + RANDOM % 20000)) >"$d/flows/flows.toml"
    timeout 120 "$H" send --flows "$d/flows/flows.toml" --agents "${addrs[0]},${addrs[1]}" --recv-agent "${addrs[2]}" --credentials "$d/flows/creds" \
      --out "$d/flows/out" --collect summaries --check-summaries >"$d/flows.txt" 2>&1 || true
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}

echo "before ($BEFORE): $BEFORE_BIN"
measure before "$BEFORE_BIN"
echo "after ($(git rev-parse --short HEAD)): $AFTER_BIN"
measure after "$AFTER_BIN"

python3 - "$OUT" "$BEFORE" "$(git rev-parse --short HEAD)" "$TITLE" "$WHY" "$ISSUE" >"$RESULTS" <<'PY'
import csv, json, math, os, sys, subprocess
out, before, after, title, why, issue = sys.argv[1:7]

def j(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None

def padhye_bps(s, rtt_s, p):
    x = s / (rtt_s * math.sqrt(2 * p / 3) + 4 * rtt_s * (3 * math.sqrt(3 * p / 8)) * p * (1 + 32 * p * p))
    return 8 * x

def figures(name):
    d, f = os.path.join(out, name), {}
    s, r = j(f"{d}/send.json"), j(f"{d}/recv.json")
    if s:
        rate = s["packets"] / s["duration_s"] if s["duration_s"] else 0
        f["engine pkt/s (64 B, logs both ends)"] = f"{rate:,.0f}"
        f["engine rate error"] = f"{abs(rate - 100000) / 1000:.3f} %"
        f["engine late > 1 ms"] = str(s["lateness"]["over_1ms"])
    if r:
        got = r.get("packets", r.get("received", 0))
        f["engine received / lost"] = f"{got:,} / {max(0, s['packets'] - got) if s else '-'}"
    w = j(f"{d}/wow/summary.json")
    if w:
        cats = w["analysis"]["categories"]
        errs = [abs(c[k]["rate_error_pct"]) for c in cats for k in ("up", "down") if c[k]["rate_error_pct"] is not None]
        f["10k WoW: connections"] = f'{w["server_connections"]:,}'
        f["10k WoW: APDUs lost"] = str(sum(c[k]["lost"] for c in cats for k in ("up", "down")))
        f["10k WoW: worst rate error"] = f"{max(errs):.2f} %"
        for m, label in (("ks_size", "size"), ("ks_iat", "inter-arrival")):
            ks = [c[k][m] for c in cats for k in ("up", "down") if c[k]["received"] >= 1000 and c[k].get(m) is not None]
            f[f"10k WoW: worst KS {label} (cells ≥ 1,000)"] = f"{max(ks):.4f}" if ks else "-"
        f["10k WoW: client p99 lateness"] = f'{w["client"]["lateness"]["p99_us"]:.0f} µs'
    b = j(f"{d}/bots.json")
    if b:
        f["64 bots: entered"] = str(b["entered"])
        f["64 bots: response p50 / p99"] = f'{b["response_ms"]["p50"]:.1f} / {b["response_ms"]["p99"]:.1f} ms'
    ratios, recvs = [], []
    for k in range(1, 10):
        p = f"{d}/circuit{k}.client.csv"
        rows = list(csv.DictReader(open(p))) if os.path.exists(p) else []
        if not rows:
            continue
        # The last third, as bench/regulation.sh does.
        tail = [r for r in rows if float(r["t_s"]) > float(rows[-1]["t_s"]) - 20]
        recv = sum(float(r["total_kbps"]) for r in tail) / len(tail)
        rtt = [float(r["rtt_ms"]) for r in tail if float(r["rtt_ms"]) > 0]
        rtt_s = (sum(rtt) / len(rtt) / 1000) if rtt else 0.1
        recvs.append(recv)
        ratios.append(recv / (padhye_bps(375, rtt_s, 0.01) / 1000))
    f["_ratios"] = ratios
    if ratios:
        mean = sum(ratios) / len(ratios)
        f[f"Mongoose at 1 %/100 ms: received ({len(recvs)} runs)"] = " / ".join(f"{r:.0f}" for r in recvs) + " kbit/s"
        f["Mongoose / Padhye: mean (min–max)"] = f"{mean:.2f} ({min(ratios):.2f}–{max(ratios):.2f})"
    dm = j(f"{d}/demo/summary.json")
    if dm:
        cats = dm["analysis"]["categories"]
        errs = [abs(c[k]["rate_error_pct"]) for c in cats for k in ("up", "down") if c[k]["rate_error_pct"] is not None]
        f["demo: connections"] = f'{dm["server_connections"]:,}'
        f["demo: APDUs lost / mismatched"] = f'{sum(c[k]["lost"] for c in cats for k in ("up", "down"))} / {dm["mismatched"]}'
        f["demo: worst rate error"] = f"{max(errs):.2f} %"
    fl = j(f"{d}/flows/out/summary.json")
    if fl:
        chk = (fl.get("distributed") or {}).get("check") or {}
        f["flows via agents: packets sent / lost"] = f'{fl["total"]["packets"]:,} / {fl["total"]["loss"]["lost"]}'
        f["flows via agents: summary figures compared / beyond bounds"] = f'{chk.get("figures", "-")} / {chk.get("beyond", "-")}'
    return f

a, b = figures("before"), figures("after")
cpu = subprocess.run("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2", shell=True, capture_output=True, text=True).stdout.strip()
print(f"# {title}\n")
cmd = "sudo bash bench/driver.sh" if issue == "22" else f"ISSUE={issue} sudo bash bench/driver.sh"
print(f"Generated by `{cmd}` on {subprocess.run(['date','-u','+%Y-%m-%d'],capture_output=True,text=True).stdout.strip()} — {os.cpu_count()} cores, {cpu}. "
      f"Before: `{before}` ({why}); after: `{after}`. Both binaries measured one after the other in this run; raw outputs in {os.path.relpath(out)}/.\n")
print("| measurement | before | after |\n|---|---:|---:|")
for k in [k for k in dict.fromkeys(list(a) + list(b)) if not k.startswith("_")]:
    print(f"| {k} | {a.get(k, '-')} | {b.get(k, '-')} |")
def betacf(a, b, x):
    # Continued fraction of the incomplete beta function (Numerical Recipes' betacf).
    qab, qap, qam, c, d = a + b, a + 1, a - 1, 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > 1e-30 else 1e-30)
    h = d
    for m in range(1, 200):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > 1e-30 else 1e-30)
            c = 1 + aa / c if abs(1 + aa / c) > 1e-30 else 1e-30
            h *= d * c
    return h

def t_two_sided_p(t, df):
    # P(|T| >= |t|) for Student's t with df degrees of freedom: I_x(df/2, 1/2), x = df/(df+t²).
    x = df / (df + t * t)
    a, b = df / 2, 0.5
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1 - x))
    return front * betacf(a, b, x) / a if x < (a + 1) / (a + b + 2) else 1 - front * betacf(b, a, 1 - x) / b

def welch(xs, ys):
    n, m = len(xs), len(ys)
    mx, my = sum(xs) / n, sum(ys) / m
    vx, vy = sum((v - mx) ** 2 for v in xs) / (n - 1), sum((v - my) ** 2 for v in ys) / (m - 1)
    se2 = vx / n + vy / m
    if se2 == 0:
        return 0.0, float(n + m - 2), (1.0 if mx == my else 0.0)
    t = (mx - my) / math.sqrt(se2)
    df = se2 ** 2 / ((vx / n) ** 2 / (n - 1) + (vy / m) ** 2 / (m - 1))
    return t, df, t_two_sided_p(t, df)

# Verdicts computed from the figures above (nothing here is a fixed sentence).
ALPHA = 0.05
def same(*keys):
    return all(a.get(k) == b.get(k) for k in keys)
lines = []
lines.append(f"- engine: rate, rate error and loss {'identical' if same('engine pkt/s (64 B, logs both ends)', 'engine rate error', 'engine received / lost') else 'DIFFER'} before and after.")
lines.append(f"- 10k WoW: connections, APDUs lost and worst rate error {'identical' if same('10k WoW: connections', '10k WoW: APDUs lost', '10k WoW: worst rate error') else 'DIFFER'} (the seed fixes every schedule: equal figures mean the same APDUs were sent, received and classified).")
if same("10k WoW: worst KS size (cells ≥ 1,000)"):
    lines.append("- 10k WoW: worst KS distance of sizes identical (sizes come from the seeded schedules alone).")
else:
    lines.append("- 10k WoW: worst KS distance of sizes DIFFERS although sizes come from the seeded schedules alone.")
kia, kib = a.get("10k WoW: worst KS inter-arrival (cells ≥ 1,000)"), b.get("10k WoW: worst KS inter-arrival (cells ≥ 1,000)")
if kia and kib and kia != "-" and kib != "-":
    lines.append(f"- 10k WoW: worst KS distance of inter-arrival times {kia} before, {kib} after: these carry the receivers' timestamps and so the machine's load in that run (client p99 lateness {a.get('10k WoW: client p99 lateness', '-')} before, {b.get('10k WoW: client p99 lateness', '-')} after); one run a side does not tell that difference from the load's.")
def p50(f):
    v = f.get("64 bots: response p50 / p99")
    return float(v.split(" / ")[0]) if v else None
if p50(a) is not None and p50(b) is not None:
    dd = abs(p50(a) - p50(b))
    lines.append(f"- 64 bots: response p50 differs by {dd:.1f} ms: {'within' if dd < 50 else 'MORE than'} one server frame (50 ms at sv_fps 20).")
ra, rb = a.get("_ratios", []), b.get("_ratios", [])
if len(ra) >= 2 and len(rb) >= 2:
    t, df, p = welch(ra, rb)
    verdict = "no difference detected" if p >= ALPHA else "the means DIFFER"
    lines.append(f"- Mongoose / Padhye: Welch's t-test on the {len(ra)} + {len(rb)} runs' ratios: t = {t:.2f}, df = {df:.1f}, p = {p:.2f} (threshold {ALPHA}): {verdict}. With {len(ra)} runs a side the test detects only large shifts (one 60 s run of a 1 % random-loss process varies by ±25 % on its own); raise CIRCUIT_RUNS for a sharper answer.")
if "demo: connections" in a or "demo: connections" in b:
    lines.append(f"- demo: connections, APDUs lost, mismatched and worst rate error {'identical' if same('demo: connections', 'demo: APDUs lost / mismatched', 'demo: worst rate error') else 'DIFFER'} (one seed: the same schedules).")
if "flows via agents: summary figures compared / beyond bounds" in b:
    fb = b["flows via agents: summary figures compared / beyond bounds"].split(" / ")
    fa = a.get("flows via agents: summary figures compared / beyond bounds", "- / -").split(" / ")
    lines.append(f"- flows through agents: figures beyond their bounds before {fa[1]}, after {fb[1]} (each side's summaries checked against its own logs).")
print("\nVerdicts:\n" + "\n".join(lines))
PY
cat "$RESULTS"
