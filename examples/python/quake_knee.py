"""Where does an OpenArena server's response time bend? Protocol-true Quake 3 bots against a
real `openarena-server` (started and stopped by each run), 8 to 64 of them, 20 s each.

    apt-get install openarena-server && pip install ./python
    python3 examples/python/quake_knee.py
"""
import sys
from pathlib import Path

import pandas as pd

import horde

runs = Path(sys.argv[1] if len(sys.argv) > 1 else "horde-out")
rows = []
with horde.Console(runs) as console:
    for bots in (8, 16, 32, 64):
        run = console.bots(bots, "20s", ramp="4s")
        s = run.results().summary
        rows.append({"bots": bots, "entered": s["entered"], "requests/s": s["request_rate"], **{f"response {k} ms": v for k, v in s["response_ms"].items() if k in ("p50", "p99")}})
print(pd.DataFrame(rows).round(1).to_string(index=False))
