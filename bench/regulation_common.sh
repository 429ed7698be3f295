# Shared by bench/regulation.sh and bench/regulation-share.sh (sourced, not run).

# pairs_topology FILE NAME COUNT: COUNT client/server host pairs (cK, sK), each joined by its own
# link whose impairments change while it runs (`live`).
pairs_topology() {
  cat > "$1" <<T
name = "$2"
[[node]]
name = "c"
kind = "host"
count = $3
[[node]]
name = "s"
kind = "host"
count = $3
[[link]]
a = "c"
b = "s"
live = true
T
}

# backlog_only FILE: the opensim service with its avatar demand and login bursts set to zero, so
# that a saturating backlog (`--backlog texture --backlog-packet 375`) is all a server sends and
# every packet has the mean OpenSim packet size Mongoose measured (375 B, docs/models.md §4).
backlog_only() {
  sed -E '/^\[circuit\]/,$ { s/^((standing|walking|flying)_[a-z]+_kbps) = .*/\1 = 0/; s/^((login|teleport)_[a-z]+_kb) = .*/\1 = 0/ }' \
    crates/model/services/opensim.toml > "$1"
}
