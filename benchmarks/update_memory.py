"""Peak memory of one offline update pass (queue and update) over a scope of long memories.

Builds a store of N memories of about K characters each (random words, so nothing is a
duplicate), then runs ``construct_update_queue_all_entries`` and
``offline_update_all_entries`` in a fresh process per repeat and reports how far the
process's peak resident memory rose during the pass (VmHWM after the pass minus VmRSS
before it, both counted once the store's search columns are built and the memory freed
meanwhile is given back with glibc's ``malloc_trim``; Linux), and what building those
columns (vectors, filters, the BM25 index) by the first search added (``columns_mb``).
With ``--baseline-src`` the same store is updated by another source tree's ``lightmem``
beside it (say a checkout of the commit before), and the ratio is printed.

    python benchmarks/update_memory.py --entries 400 --chars 400000 [--baseline-src /tmp/old/src]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import ctypes, json, sys
from lightmem import LightMemory

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

with LightMemory.from_config({"store": {"path": sys.argv[1]}, "pre_compress": False}) as mem:
    opened = status("VmRSS")
    mem.retrieve("warm up the store's columns", limit=1)
    columns = status("VmRSS") - opened
    # Give the columns' build's freed memory back to the system (glibc keeps it resident,
    # and the pass would reuse it unseen), then count the peak from here.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    queued = mem.construct_update_queue_all_entries()
    report = mem.offline_update_all_entries()
    print(json.dumps({"rise_mb": (status("VmHWM") - before) / 2**20, "queued": queued,
                      "reviewed": report.reviewed, "columns_mb": columns / 2**20}))
"""


def build(path: Path, entries: int, chars: int, seed: int = 7) -> None:
    """N entries of ``chars`` random words each, imported with vectors of their first words
    (the pass's memory is the point, not what it decides)."""
    from datetime import UTC, datetime, timedelta

    from lightmem import LightMemory
    from lightmem.types import MemoryEntry, Scope

    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    start = datetime(2023, 1, 1, tzinfo=UTC)
    with LightMemory.from_config({"store": {"path": str(path)}, "pre_compress": False}) as mem:
        for first in range(0, entries, 50):
            rows = []
            for k in range(first, min(entries, first + 50)):
                words: list[str] = []
                size = 0
                while size < chars:
                    words.append("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
                    size += len(words[-1]) + 1
                text = f"Note {k}: " + " ".join(words)
                when = start + timedelta(minutes=k)
                rows.append(
                    MemoryEntry(
                        id=f"e{k}",
                        text=text[:200],
                        original_text=text,
                        scope=Scope(),
                        timestamp=when,
                        speaker_name="Sam",
                        source_ids=(f"t{k}",),
                        created_at=when,
                        updated_at=when,
                    )
                )
            vectors = mem.embedder.embed([e.text for e in rows], op="bench")
            mem.store.import_entries(zip(rows, vectors, strict=True))


def run(src: str, store: Path, repeats: int) -> dict[str, object]:
    rises: list[float] = []
    last: dict[str, object] = {}
    for _ in range(repeats):
        copy = store.with_name(f"run-{os.getpid()}-{len(rises)}.db")
        shutil.copy(store, copy)
        env = {**os.environ, "PYTHONPATH": src}
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(copy)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        last = json.loads(out.stdout.strip().splitlines()[-1])
        rises.append(float(last["rise_mb"]))  # type: ignore[arg-type]
        copy.unlink()
    return {"src": src, "median_rise_mb": statistics.median(rises), "rises_mb": rises, **last}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=300)
    ap.add_argument("--chars", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline-src", default=None)
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "store.db"
        build(store, args.entries, args.chars)
        this = run(here, store, args.repeats)
        out: dict[str, object] = {"entries": args.entries, "chars_per_turn": args.chars}
        out["this"] = this
        if args.baseline_src:
            base = run(args.baseline_src, store, args.repeats)
            out["baseline"] = base
            ratio = float(this["median_rise_mb"]) / float(base["median_rise_mb"])  # type: ignore[arg-type]
            out["ratio"] = round(ratio, 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
