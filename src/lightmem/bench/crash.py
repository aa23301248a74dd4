"""Crash safety: ingestion in a child process killed with SIGKILL at random moments.

Each kill is placed by progress, not by the clock: after a random number of acknowledged
``add_memory`` calls (1 to ``MAX_ACKS_BEFORE_KILL``) plus a random delay, so every kill lands
mid-ingestion however fast or loaded the machine is. After every kill the store is reopened
and checked: SQLite's integrity check and lightmem's own (vectors match entries, every entry
has its history), every
``add_memory`` call that had returned is present, and the next flush extracts every
buffered message. ``lightmem bench crash --kills N`` runs it at length; the test suite
runs a few kills of each pipeline.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from lightmem.memory import LightMemory
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import Scope

__all__ = [
    "MAX_ACKS_BEFORE_KILL",
    "MAX_KILL_DELAY_S",
    "STALL_TIMEOUT_S",
    "child",
    "kill_once",
    "main",
    "run",
]

_WORDS = ("garden", "piano", "Porto", "marathon", "sourdough", "chess", "tuna", "cello")


def _config(path: str, llm_url: str | None) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "store": {"path": path},
        "sensory_buffer": {"max_tokens": 64},
        "short_term_memory": {"max_tokens": 64},
    }
    if llm_url:
        cfg["memory_manager"] = {
            "model_name": "openai",
            "configs": {"model": "stub", "openai_base_url": llm_url, "api_key": "k"},
        }
    return cfg


def child(path: str, run: str, batches: int, size: int, llm_url: str | None) -> None:
    """The victim: ingests and acknowledges each returned ``add_memory`` on stdout."""
    rng = random.Random(run)
    mem = LightMemory.from_config(_config(path, llm_url))
    print("ready", flush=True)
    for b in range(batches):
        msgs = [
            {
                "id": f"{run}-{b}-{i}",
                "speaker_name": rng.choice(("Ana", "Ben")),
                "content": f"{run} batch {b} item {i}: the {rng.choice(_WORDS)} story",
            }
            for i in range(size)
        ]
        mem.add_memory(msgs)
        print(f"ack {run}-{b}", flush=True)
    mem.flush()
    print("done", flush=True)


#: A kill comes after 1 to this many acknowledged calls ...
MAX_ACKS_BEFORE_KILL = 20
#: ... plus a random delay of up to this many seconds (mid-call, most of the time).
MAX_KILL_DELAY_S = 0.3
#: A child that acknowledges nothing for this long is killed and reported as stalled.
STALL_TIMEOUT_S = 120.0


def kill_once(
    path: Path, run: str, rng: random.Random, *, llm_url: str | None = None, size: int = 5
) -> dict[str, Any]:
    """Start a child, SIGKILL it after a random number of acknowledged calls plus a random
    delay, then check and recover the store."""
    cmd = [sys.executable, "-m", "lightmem.bench.crash", str(path), run, "--size", str(size)]
    if llm_url:
        cmd += ["--llm-url", llm_url]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    watchdog = threading.Timer(STALL_TIMEOUT_S, proc.kill)
    watchdog.start()
    try:
        ready = proc.stdout.readline().strip()
        if ready != "ready":
            proc.kill()
            raise RuntimeError(f"crash child did not start: {ready!r}")
        target = rng.randint(1, MAX_ACKS_BEFORE_KILL)
        acked: list[str] = []
        while len(acked) < target:
            line = proc.stdout.readline()
            if not line:  # the child died (or stalled and the watchdog killed it)
                break
            if line.startswith("ack "):
                acked.append(line.split()[1])
        time.sleep(rng.uniform(0.0, MAX_KILL_DELAY_S))
        proc.kill()
        rest, _ = proc.communicate(timeout=30)
    finally:
        watchdog.cancel()
    acked += [line.split()[1] for line in rest.splitlines() if line.startswith("ack ")]
    finished = "done" in rest.splitlines()
    ids = [f"{a}-{i}" for a in acked for i in range(size)]

    store = SQLiteStore(path)
    problems = store.integrity_check()
    present = {m.id for m in store.get_messages(Scope(), ids)}
    store.close()
    with LightMemory.from_config(_config(str(path), llm_url)) as mem:
        mem.flush()
        stats = mem.stats()
        cited = {
            s
            for e in mem.list_entries(filters={"kind": "entry"}, limit=1_000_000)
            for s in e.source_ids
        }
        problems += mem.store.integrity_check()
    return {
        "mid_ingestion": bool(acked) and not finished,
        "acked_calls": len(acked),
        "lost_acked_messages": len(set(ids) - present),
        "acked_not_extracted": len(set(ids) - cited),
        "left_buffered": stats["messages_pending"] + stats["messages_segmented"],
        "integrity_problems": problems,
    }


def run(
    kills: int,
    *,
    llm: bool = False,
    seed: int = 0,
    path: Path | None = None,
    progress: TextIO | None = None,
) -> dict[str, Any]:
    import tempfile

    from lightmem.testing import OpenAIStubServer, ScriptedLLM

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="lightmem-crash-") as tmp:
        db = path or Path(tmp) / "crash.db"
        stub = OpenAIStubServer(chat_handler=ScriptedLLM()).start() if llm else None
        try:
            results = []
            for k in range(kills):
                results.append(kill_once(db, f"r{k}", rng, llm_url=stub.base_url if stub else None))
                if progress is not None:  # one line per kill: a long run stopped early still says
                    print(json.dumps({"kill": k + 1, **results[-1]}), file=progress, flush=True)
        finally:
            if stub is not None:
                stub.stop()
    return {
        "pipeline": "llm (stub)" if llm else "offline",
        "kills": kills,
        "kills_mid_ingestion": sum(r["mid_ingestion"] for r in results),
        "acked_calls": sum(r["acked_calls"] for r in results),
        "lost_acked_messages": sum(r["lost_acked_messages"] for r in results),
        "acked_not_extracted_after_flush": sum(r["acked_not_extracted"] for r in results),
        "left_buffered_after_flush": sum(r["left_buffered"] for r in results),
        "integrity_failures": sum(bool(r["integrity_problems"]) for r in results),
    }


def main() -> None:
    p = argparse.ArgumentParser(description="crash-test child (used by lightmem bench crash)")
    p.add_argument("path")
    p.add_argument("run")
    p.add_argument("--batches", type=int, default=1000)
    p.add_argument("--size", type=int, default=5)
    p.add_argument("--llm-url")
    a = p.parse_args()
    child(a.path, a.run, a.batches, a.size, a.llm_url)


if __name__ == "__main__":
    main()
