"""CPU time of one online insertion (``update: "online"``) into scopes of growing size.

Fills a store with N distinct one-sentence turns (offline), reopens it with the online
update and adds 5 single turns one by one; prints the median CPU milliseconds per
insertion for each N. Run it under two source trees (``PYTHONPATH=...``) to compare.

    python benchmarks/online_update_cost.py 250 1000 4000
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from typing import Any

from lightmem import LightMemory

TOPICS = "octopuses volcanoes bread chess jazz tomatoes trains comets bees tulips".split()
SAID = [
    "I watched a documentary about {} last night.",
    "The {} at the market looked great today.",
    "My neighbour keeps talking about {}.",
    "I read an article on {} yesterday.",
]


def _turn(k: int, text: str) -> dict[str, Any]:
    return {"id": f"t{k}", "speaker_name": "Sam", "content": text, "timestamp": "2023-01-01"}


def cost(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/s.db"
        with LightMemory.from_config({"store": {"path": path}}) as mem:
            filler = [
                _turn(k, SAID[k % 4].format(f"{TOPICS[k % 10]} {k} and room {k * 7 + 3}"))
                for k in range(n)
            ]
            mem.add_memory(filler, force_extract=True)
            entries = len(mem.list_entries({"kind": "entry"}, limit=10_000))
        with LightMemory.from_config({"store": {"path": path}, "update": "online"}) as mem:
            cpu = []
            for j in range(5):
                text = f"I moved to Lisbon {j} months ago, now I live by the sea {j}."
                t0 = time.process_time()
                mem.add_memory(_turn(n + 1 + j, text), force_extract=True)
                cpu.append(time.process_time() - t0)
    return {"entries": entries, "cpu_ms_median": round(statistics.median(cpu) * 1000, 1)}


if __name__ == "__main__":
    print(json.dumps({n: cost(int(n)) for n in sys.argv[1:]}))
