# Sourced by bench scripts. A process a script starts in the background is remembered by PID and
# start time (in a file, so a start inside a subshell — `x=$(f)`, `< <(f)` — counts too) and
# stopped by PID, never by name: a bench on a shared machine must not touch another user's
# ITGRecv, iperf3, mgen or horde. The start time guards against a PID the kernel gave again. A
# remembered process's own children go with it (`/usr/bin/time CMD`: CMD), found by parent PID.
#
#   source bench/own.sh
#   trap own_stop_all EXIT
#   (cd "$OUT" && exec ITGRecv >log 2>&1) & own $!   # exec: the remembered PID is ITGRecv's
#   own_stop $!                                       # stop one (and reap it, if it is a child)
OWN_FILE=$(mktemp "${TMPDIR:-/tmp}/horde-bench-own.XXXXXX")

# Start time of PID (field 22 of /proc/PID/stat, counted after the command name's parenthesis).
own_started() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'; }

own_kill() { pkill -TERM -P "$1" 2>/dev/null || true; kill "$1" 2>/dev/null || true; }

own() { # PID: remember a process this script started
  local st
  st=$(own_started "$1") && [ -n "$st" ] && echo "$1 $st" >>"$OWN_FILE"
  return 0
}

own_stop() { # PID: stop it if it is still the process remembered, and reap it if it is a child
  local pid st
  while read -r pid st; do
    [ "$pid" = "$1" ] && [ "$(own_started "$pid")" = "$st" ] && own_kill "$pid"
  done <"$OWN_FILE"
  wait "$1" 2>/dev/null || true
}

own_stop_all() { # every remembered process still running (the EXIT trap)
  local pid st
  while read -r pid st; do
    [ "$(own_started "$pid")" = "$st" ] && own_kill "$pid"
  done <"$OWN_FILE"
  rm -f "$OWN_FILE"
  return 0
}
