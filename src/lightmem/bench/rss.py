"""Peak memory of one REST request with huge messages (issue 11, item 1).

Each case runs in a child process of its own, guarded by ``prlimit --as`` (an address-space
limit), that serves the REST API on loopback and sends itself one request; the child reports
its peak RSS and whether every message of the request is retrievable afterwards. Cases:

- ``baseline``: one short message (what the server costs at all);
- ``huge``: 7 messages of 1,000,000 characters in one request (7 MB);
- ``mixed``: a 50,000-character message and 63 short ones (~60 KB);
- ``reopen``: a store holding the ``huge`` messages mid-pipeline (segmented, never
  extracted: written by another process whose extraction failed, standing in for one
  killed mid-extraction) is opened by a fresh server whose next add extracts them.

``lightmem bench rss`` prints the JSON: peak RSS per case, its ratio to the baseline, the
time taken and the share of messages retrievable; it exits 1 when a case's child failed.
"""

from __future__ import annotations

import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["CASES", "child", "main", "messages", "run"]

CASES = ("baseline", "huge", "mixed", "reopen")
_WORDS = (
    "garden piano Porto marathon sourdough chess tuna cello river lamp ferry violin "
    "orchard lantern harbour quilt"
).split()


def _text(rng: random.Random, marker: str, chars: int) -> str:
    words = [marker]
    size = len(marker)
    while size < chars:
        w = rng.choice(_WORDS)
        words.append(w)
        size += len(w) + 1
    return " ".join(words)[:chars]


def messages(case: str) -> list[dict[str, Any]]:
    """The request's messages; each starts with a marker word found only in it."""
    rng = random.Random(case)
    if case == "baseline":
        sizes = [60]
    elif case in ("huge", "reopen"):
        sizes = [1_000_000] * 7
    elif case == "mixed":
        sizes = [50_000] + [150] * 63
    else:
        raise ValueError(f"case: unknown case {case!r} (one of {', '.join(CASES)})")
    return [
        {"id": f"{case}-{i}", "content": _text(rng, f"zq{i}mark{case}", n), "speaker_name": "Ana"}
        for i, n in enumerate(sizes)
    ]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _FailingManager:
    """Extraction that fails the way an OOM-killed one did: after segmentation committed."""

    name = "offline"

    def extract(self, segments: Sequence[Any], new_id: Any) -> list[Any]:
        from lightmem.errors import BackendError

        raise BackendError("extraction interrupted (simulated crash)")


def _leave_mid_pipeline(data_dir: Path) -> dict[str, Any]:
    """Write the ``reopen`` messages into the tenant's store, segmented and not extracted."""
    from lightmem.embed.wordllama import WordLlamaEmbedder
    from lightmem.errors import BackendError
    from lightmem.memory import LightMemory
    from lightmem.server.tenancy import TenantPool
    from lightmem.store.sqlite import SQLiteStore

    pool = TenantPool(data_dir)
    path = pool.get("bench").memory.store.path
    pool.close()
    with LightMemory(
        SQLiteStore(path), WordLlamaEmbedder(), memory_manager=_FailingManager()
    ) as mem:
        try:
            mem.add_memory(messages("reopen"), force_segment=True, force_extract=True)
        except BackendError as exc:  # expected: the crash being simulated
            failure = str(exc)
        else:
            raise RuntimeError("reopen: the simulated extraction failure did not happen")
        stats = mem.stats()
    return {"left": int(stats["messages_segmented"] + stats["messages_pending"]), "by": failure}


def child(case: str, data_dir: str) -> dict[str, Any]:
    """Serve the REST API here, send one request, report peak RSS and retrievability."""
    import httpx

    from lightmem.server.rest import create_app
    from lightmem.server.tenancy import TenantPool, single_threaded_blas
    from lightmem.testing.live_server import LiveServer

    single_threaded_blas()  # as the server entry points do: this process is the server
    root = Path(data_dir)
    pool = TenantPool(root)
    keys = pool.keys()
    key = keys.create("bench")
    sent = messages(case)
    left_mid_pipeline = None
    if case == "reopen":
        pool.close()  # keys stay open: the key registry is its own file
        # The crashed writer is another process, so this one's peak is the recovery's alone.
        prep = subprocess.run(
            [sys.executable, "-m", "lightmem.bench.rss", "prepare-reopen", str(root)],
            capture_output=True,
            text=True,
            timeout=3600,
            check=True,
        )
        left_mid_pipeline = json.loads(prep.stdout.strip().splitlines()[-1])
        pool = TenantPool(root)
        body: dict[str, Any] = {"messages": [{"content": "Ben likes tea."}], "force_extract": True}
    else:
        body = {"messages": sent, "force_extract": True}
    started_mb = _peak_mb()
    t0 = time.perf_counter()
    with (
        LiveServer(create_app(pool, keys)) as url,
        httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=3600) as client,
    ):
        reply = client.post("/v1/memories", json=body)
        seconds = time.perf_counter() - t0
        found = 0
        for m in sent:
            marker = str(m["content"]).split(" ", 1)[0]
            hits = client.post("/v1/memories/search", json={"query": marker, "limit": 10})
            results = hits.json()["results"] if hits.status_code == 200 else []
            found += any(m["id"] in r["source_ids"] for r in results)
    keys.close()
    pool.close()
    return {
        "case": case,
        "status": reply.status_code,
        "request_mb": round(len(json.dumps(body)) / 1e6, 3),
        "rss_before_request_mb": round(started_mb, 1),
        "peak_rss_mb": round(_peak_mb(), 1),
        "add_seconds": round(seconds, 2),
        "messages": len(sent),
        "retrievable": found,
        "left_mid_pipeline_before": left_mid_pipeline,
    }


def _limited(cmd: list[str], limit_bytes: int) -> list[str]:
    prlimit = shutil.which("prlimit")
    return [prlimit, f"--as={limit_bytes}", *cmd] if prlimit else cmd


def run(cases: Sequence[str] = CASES, *, limit_gb: float = 4.0) -> dict[str, Any]:
    """Each case in a guarded child; a child that dies (e.g. at the limit) is reported."""
    limit = int(limit_gb * 1024**3)
    out: dict[str, Any] = {"as_limit_gb": limit_gb, "guard": bool(shutil.which("prlimit"))}
    rows: list[dict[str, Any]] = []
    for case in cases:
        messages(case)  # unknown cases fail here, before any child starts
        with tempfile.TemporaryDirectory(prefix="lightmem-rss-") as tmp:
            cmd = _limited([sys.executable, "-m", "lightmem.bench.rss", case, tmp], limit)
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or [""]
            rows.append({"case": case, "failed": proc.returncode, "error": tail[0]})
            continue
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    base = next(
        (r["peak_rss_mb"] for r in rows if r["case"] == "baseline" and "failed" not in r), None
    )
    for r in rows:
        if base and "peak_rss_mb" in r:
            r["peak_vs_baseline"] = round(r["peak_rss_mb"] / base, 2)
    out["cases"] = rows
    # A case whose child failed measured nothing: it counts against both verdicts.
    out["failed"] = sum("failed" in r for r in rows)
    out["all_under_1gb"] = all("peak_rss_mb" in r and r["peak_rss_mb"] < 1024 for r in rows)
    out["all_retrievable"] = all(
        "failed" not in r and r["retrievable"] == r["messages"] for r in rows
    )
    return out


def main() -> None:
    case, data_dir = sys.argv[1], sys.argv[2]
    if case == "prepare-reopen":
        print(json.dumps({**_leave_mid_pipeline(Path(data_dir)), "peak_rss_mb": _peak_mb()}))
        return
    print(json.dumps(child(case, data_dir)), flush=True)


if __name__ == "__main__":
    main()
