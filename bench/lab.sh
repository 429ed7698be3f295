# Sourced by bench scripts that need machines: network namespaces with their own addresses on
# one LAN bridge stand in for a controller's machine ($T-ctl, 10.$NET.0.10) and two agents'
# ($T-m1 and $T-m2, 10.$NET.0.1 and .2), each agent running `horde agent --emu` with the
# credentials in $OUT/creds. Set T (a short prefix), NET, OUT and H (the horde binary) first.
#   lab_up      builds the namespaces, starts both agents and waits until they listen
#   lab_down    stops the agents this lab started (their PIDs) and deletes its namespaces
#   LAB_AGENTS  the agents' list for --agents
LAB_AGENTS=10.$NET.0.1:7801,10.$NET.0.2:7801
lab_up() {
  for n in lan ctl m1 m2; do ip netns add "$T-$n"; done
  ip -n "$T-lan" link add br0 type bridge && ip -n "$T-lan" link set br0 up
  for pair in ctl:10 m1:1 m2:2; do
    local n=${pair%%:*} a=${pair##*:}
    ip link add "$T$n" type veth peer name "${T}p$n"
    ip link set "$T$n" netns "$T-$n"; ip link set "${T}p$n" netns "$T-lan"
    ip -n "$T-lan" link set "${T}p$n" master br0 up
    ip -n "$T-$n" addr add "10.$NET.0.$a/24" dev "$T$n"
    ip -n "$T-$n" link set "$T$n" up; ip -n "$T-$n" link set lo up
  done
  "$H" agent keygen --out "$OUT/creds" >/dev/null 2>&1
  for k in 1 2; do
    ip netns exec "$T-m$k" "$H" agent --listen "10.$NET.0.$k:7801" --credentials "$OUT/creds" --dir "$OUT/agent$k" --name "m$k" --emu >"$OUT/agent$k.log" 2>&1 &
    echo $! > "$OUT/agent$k.pid"
  done
  for k in 1 2; do until grep -q "listening on" "$OUT/agent$k.log"; do sleep 0.1; done; done
}
lab_down() {
  for k in 1 2; do [ -f "$OUT/agent$k.pid" ] && kill "$(cat "$OUT/agent$k.pid")" 2>/dev/null || true; done
  sleep 0.5
  for n in ctl m1 m2 lan; do ip netns del "$T-$n" 2>/dev/null || true; done
}
