"""A newcomer's access-link study: WoW players behind a 10/20 Mbit/s, 20 ms, 1 % loss access
link (examples/topologies/access.toml), three loads, the per-category delay table of each.

    pip install ./python
    sudo python3 examples/python/access_link.py      # needs root: emulated hosts
"""
import sys
from pathlib import Path

import horde

here = Path(__file__).resolve().parents[1]
runs = Path(sys.argv[1] if len(sys.argv) > 1 else "horde-out")
with horde.Console(runs) as console:  # `horde ui` on loopback, stopped at the end
    table = horde.sweep(console, here / "wow-access.toml", {"players": [50, 150, 300]}, table=lambda r: r.categories())
    cols = ["players", "category", "direction", "sent", "loss_pct", "delay_p50_ms", "delay_p99_ms"]
    busy = table[table.sent > 0][cols]
    print(busy.round(2).to_string(index=False))
