"""Several processes writing and reading one store at once: nothing lost, nothing doubled.

``lightmem bench concurrency --writers 4 --readers 4 --seconds 60 [--dsn ...]`` runs it at
length; the test suite runs a few seconds of it on each backend. Writers acknowledge each
returned ``add_memory`` on stdout; afterwards every acknowledged message must be stored
exactly once (count and checksum), with its entry, and readers must have seen no error
(the result counts each kind, with a sample message; an exception that is not lightmem's
fails the reader process instead of being counted).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from collections import Counter
from typing import Any

from lightmem.errors import LightMemError
from lightmem.memory import LightMemory
from lightmem.types import Scope

__all__ = ["main", "reader", "run", "writer"]


def _config(store: dict[str, Any]) -> dict[str, Any]:
    return {"store": store, "sensory_buffer": {"max_tokens": 64}}


def writer(store: dict[str, Any], name: str, seconds: float, size: int) -> None:
    with LightMemory.from_config(_config(store)) as mem:
        deadline = time.monotonic() + seconds
        b = 0
        while time.monotonic() < deadline:
            msgs = [
                {"id": f"{name}-{b}-{i}", "content": f"{name} batch {b} note {i} about tuna"}
                for i in range(size)
            ]
            mem.add_memory(msgs, force_extract=True)
            print(f"ack {name}-{b}", flush=True)
            b += 1


def reader(store: dict[str, Any], seconds: float) -> None:
    """Read while the writers write; prints ``{"reads", "errors", "error_types",
    "error_samples"}``. Only lightmem's errors are counted (by kind, with a sample
    message each): anything else is a bug, not a concurrency failure, and ends the
    process with its traceback (a failed process in :func:`run`)."""
    reads = 0
    kinds: Counter[str] = Counter()
    samples: dict[str, str] = {}

    def failed(kind: str, detail: str) -> None:
        kinds[kind] += 1
        samples.setdefault(kind, detail[:300])

    with LightMemory.from_config(_config(store)) as mem:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                for r in mem.retrieve("tuna note", 20):
                    if not r.source_ids or not r.entry.version:
                        failed("half-written entry", r.entry.id)
                page = mem.list_entries(limit=50)
                for e in page[:5]:
                    try:
                        mem.get(e.id)
                    except LightMemError as exc:
                        failed(type(exc).__name__, str(exc))
                reads += 1
            except LightMemError as exc:
                failed(type(exc).__name__, str(exc))
    print(
        json.dumps(
            {
                "reads": reads,
                "errors": kinds.total(),
                "error_types": dict(kinds),
                "error_samples": samples,
            }
        ),
        flush=True,
    )


def run(
    store: dict[str, Any],
    *,
    writers: int = 4,
    readers: int = 4,
    seconds: float = 60.0,
    size: int = 5,
) -> dict[str, Any]:
    LightMemory.from_config(_config(store)).close()  # create the schema once, up front
    base = [sys.executable, "-m", "lightmem.bench.concurrency", json.dumps(store)]
    procs = [
        subprocess.Popen(
            [*base, "writer", f"w{i}", str(seconds), str(size)], stdout=subprocess.PIPE, text=True
        )
        for i in range(writers)
    ] + [
        subprocess.Popen(
            [*base, "reader", "r", str(seconds), "0"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(readers)
    ]
    outs = [p.communicate(timeout=seconds + 300)[0] for p in procs]
    failed = sum(p.returncode != 0 for p in procs)
    acked = [
        line.split()[1]
        for out in outs[:writers]
        for line in out.splitlines()
        if line.startswith("ack ")
    ]
    expected = sorted(f"{a}-{i}" for a in acked for i in range(size))
    reader_stats = [json.loads(out.splitlines()[-1]) for out in outs[writers:] if out.strip()]
    error_types: Counter[str] = Counter()
    samples: dict[str, str] = {}
    for r in reader_stats:
        error_types.update(r["error_types"])
        for kind, sample in r["error_samples"].items():
            samples.setdefault(kind, sample)
    with LightMemory.from_config(_config(store)) as mem:
        found = sorted(m.id for m in mem.store.get_messages(Scope(), expected))
        entries = mem.list_entries(filters={"kind": "entry"}, limit=1_000_000)
        cited = sorted(s for e in entries for s in e.source_ids)
        problems = mem.store.integrity_check()
        stats = mem.stats()
    return {
        "backend": store.get("provider", "sqlite"),
        "writers": writers,
        "readers": readers,
        "seconds": seconds,
        "acked_messages": len(expected),
        "stored_messages": stats["messages"],
        "lost": len(set(expected) - set(found)),
        "duplicated_entries": len(cited) - len(set(cited)),
        "entries_match_messages": cited == expected,
        "checksum_match": _digest(found) == _digest(expected),
        "reads": sum(r["reads"] for r in reader_stats),
        "reader_errors": sum(r["errors"] for r in reader_stats),
        "reader_error_types": dict(error_types),
        "reader_error_samples": samples,
        "failed_processes": failed,
        "integrity_problems": problems,
    }


def _digest(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def main() -> None:
    p = argparse.ArgumentParser(description="concurrency worker (used by lightmem bench)")
    p.add_argument("store")
    p.add_argument("role", choices=["writer", "reader"])
    p.add_argument("name")
    p.add_argument("seconds", type=float)
    p.add_argument("size", type=int)
    a = p.parse_args()
    store = json.loads(a.store)
    if a.role == "writer":
        writer(store, a.name, a.seconds, a.size)
    else:
        reader(store, a.seconds)


if __name__ == "__main__":
    main()
