#!/usr/bin/env bash
# The container image built and run for real, with Debian's podman (and runc): a `horde` binary
# into deploy/Dockerfile's empty image (no registry is pulled), then a controller and 3 agents,
# each its own container on a podman network of its own, run a WoW scenario and write one
# merged report. Bounded: the run is 20 s, every wait has a timeout, and the containers, the
# network and the image are removed on exit.
#
# Which binary (HORDE_IMAGE):
#   musl     (default) the static musl build: the binary alone in the image, no C library;
#            ≈ 10 min cold (a release build of its own), ≈ 1.5 min warm.
#   release  the release build as `cargo build --release` makes it (CI: the one its demo just
#            ran), with the C library files it links (from ldd) beside it: no build of its own.
#
#   sudo bash deploy/podman.sh
#   HORDE_IMAGE=release PLAYERS=3000 SECS=20 sudo -E bash deploy/podman.sh
#
# Without podman it says so and exits 0, except under CI=true, where it fails (CI installs it).
# On this project's machines podman runs containers with runc (`--runtime runc`; crun refuses
# their hybrid cgroups) and explicit --ulimit values within the host's hard limits.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v podman >/dev/null 2>&1; then
  if [ "${CI:-}" = true ]; then echo "deploy/podman.sh: podman is missing (apt-get install podman runc)" >&2; exit 1; fi
  echo "deploy/podman.sh: skipped (podman is missing: apt-get install podman runc)"; exit 0
fi
[ "$(id -u)" = 0 ] || { echo "deploy/podman.sh needs root (rootful podman networks): sudo bash $0" >&2; exit 2; }
PLAYERS=${PLAYERS:-3000}
SECS=${SECS:-20}
TAG=localhost/horde:podman-$$
NET=horde-$$
W=$(mktemp -d /tmp/horde-podman.XXXXXX)
P=(podman --runtime runc)
# Within this machine's hard limits (nofile 20,000 here); the agents need a socket per player.
LIMITS=(--ulimit "nofile=16384:16384" --ulimit "nproc=4096:4096")
cleanup() {
  for k in 0 1 2; do podman rm -f -t 2 "horde-agent-$k-$$" >/dev/null 2>&1 || true; done
  podman rm -f -t 2 "horde-controller-$$" >/dev/null 2>&1 || true
  podman network rm -f "$NET" >/dev/null 2>&1 || true
  podman rmi -f "$TAG" >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT

ROOTFS="$W/rootfs"
mkdir -p "$ROOTFS"
case "${HORDE_IMAGE:-musl}" in
musl)
  echo "== the static binary (x86_64-unknown-linux-musl)"
  command -v musl-gcc >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null; }
  rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1 || true
  cargo build --release --locked -q --target x86_64-unknown-linux-musl -p horde
  BIN=target/x86_64-unknown-linux-musl/release/horde
  # static: no program interpreter (binutils' readelf, which the Rust toolchain's linker needs anyway)
  if readelf -lW "$BIN" | grep -q "INTERP"; then echo "deploy/podman.sh: $BIN is not statically linked" >&2; exit 1; fi
  ;;
release)
  echo "== the release binary and the C library it links"
  cargo build --release --locked -q -p horde
  BIN=target/release/horde
  # Every shared object ldd resolves, at the path the binary will look for it.
  for lib in $(ldd "$BIN" | grep -oE '/[^ ]+'); do
    mkdir -p "$ROOTFS$(dirname "$lib")"
    cp -L "$lib" "$ROOTFS$lib"
  done
  ;;
*) echo "deploy/podman.sh: HORDE_IMAGE must be musl or release (got ${HORDE_IMAGE})" >&2; exit 2 ;;
esac
# The image carries a stripped copy (the release profile keeps debug info for backtraces).
strip -o "$ROOTFS/horde" "$BIN"
echo "$(du -h "$BIN" | cut -f1) → $(du -sh "$ROOTFS" | cut -f1) in the image ($(find "$ROOTFS" -type f | wc -l) files)"

echo "== the image (FROM scratch, nothing pulled)"
# The build context is the work directory: its rootfs/ becomes the image's /.
timeout 300 "${P[@]}" build -q -f deploy/Dockerfile -t "$TAG" "$W" >/dev/null
"${P[@]}" image inspect "$TAG" --format 'image {{.Id}}: {{.Size}} bytes, user {{.Config.User}}, layers {{len .RootFS.Layers}}'

echo "== credentials, scenario, network"
"$BIN" agent keygen --out "$W/creds" --agents 3 >/dev/null
# The containers run as 10001: their credentials are theirs (keys 0400, as Horde requires).
chown -R 10001:10001 "$W/creds"
mkdir -p "$W/out" "$W/scenario" && chown 10001:10001 "$W/out"
cat > "$W/scenario/scenario.toml" <<T
name = "wow-podman"
service = "wow"
players = $PLAYERS
duration = "${SECS}s"
seed = 1
start_hour = 20
server = "127.0.0.1:7900"
spin_us = 0
threads = 1
T
podman network create --subnet 10.201.0.0/24 "$NET" >/dev/null

echo "== 3 agents"
AGENTS=""
for k in 0 1 2; do
  ip=10.201.0.$((11 + k))
  "${P[@]}" run -d --name "horde-agent-$k-$$" --network "$NET" --ip "$ip" "${LIMITS[@]}" \
    --read-only --tmpfs /var/lib/horde:rw,size=512m,mode=1777 --cap-drop ALL --security-opt no-new-privileges \
    -v "$W/creds:/credentials:ro" "$TAG" \
    agent --listen "$ip:7800" --credentials /credentials --dir /var/lib/horde/runs --name "horde-agent-$k" >/dev/null
  AGENTS="${AGENTS:+$AGENTS,}$ip:7800"
done

echo "== the controller: $PLAYERS WoW players for $SECS s over $AGENTS"
set +e
timeout $((SECS + 120)) "${P[@]}" run --name "horde-controller-$$" --network "$NET" --ip 10.201.0.10 "${LIMITS[@]}" \
  --read-only --tmpfs /var/lib/horde:rw,size=64m,mode=1777 --cap-drop ALL --security-opt no-new-privileges \
  -v "$W/creds:/credentials:ro" -v "$W/scenario:/scenario:ro" -v "$W/out:/out" "$TAG" \
  run /scenario/scenario.toml --agents "$AGENTS" --credentials /credentials --out /out/run
rc=$?
set -e
if [ $rc != 0 ]; then
  echo "deploy/podman.sh: the controller exited with $rc; the agents said:" >&2
  for k in 0 1 2; do podman logs --tail 20 "horde-agent-$k-$$" >&2 || true; done
  exit 1
fi

echo "== the merged report"
python3 - "$W/out/run/summary.json" "$PLAYERS" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
players = int(sys.argv[2])
d = s["distributed"]
for a in d["agents"]:
    r = a.get("players") or {"start": 0, "end": 0}
    print(f"  {a['name']} ({a['address']}, {a['role']}): players {r['start']}..{r['end']}, APDUs sent {a['apdus_sent']:,} received {a['apdus_received']:,}, "
          f"CPU {a['cpu_s']:.1f} s, RSS {a['max_rss_kb'] / 1024:.0f} MB, {a['status']}")
ran = sum((a["players"] or {"start": 0, "end": 0})["end"] - (a["players"] or {"start": 0, "end": 0})["start"] for a in d["agents"])
assert len(d["agents"]) == 3 and ran == players and not d["partial"], f"3 agents, {players} players, none lost: {d}"
assert all(a["status"] == "finished" for a in d["agents"]), [a["status"] for a in d["agents"]]
print(f"one merged report: {s['players']} players, {s['duration_s']:.0f} s, server side on {d['server_agent']}, logs {d['log_bytes'] / 1e6:.1f} MB "
      f"({d['log_bytes_transferred'] / 1e6:.1f} MB transferred)")
PY
ls -la "$W/out/run"
echo "deploy/podman.sh: ok"
