"""What a repeated offline update costs with a model updater: the model calls and seconds of
the pass run after new sessions arrive, as shown (the default: an item the updater was shown
before, unchanged, is not shown again) against ``recheck=True`` (everything shown again, as
every pass did before), per LoCoMo conversation.

    python benchmarks/update_repeat_cost.py ../shared/data/locomo/locomo_dev.json [--first 0.8]

Each conversation: its first sessions (``--first``, a share of its turns) are added and
updated once; the rest is added; the store is copied and the second pass is run on one copy
as shown, on the other with ``recheck``; then a third pass with nothing new. The updater is
``LLMUpdater`` against the stub server on loopback answering with ``ScriptedLLM`` (it deletes
an earlier memory whose words a newer one repeats), so the calls are counted by the client's
ledger as a real endpoint would be paid for them. Memories are extracted offline (one per
turn). Prints JSON: per conversation and the medians, the ratio of calls, and whether the
two copies ended with the same memories (texts, supersessions, versions).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from lightmem import LightMemory, OpenAIChatClient, SQLiteStore
from lightmem.bench import locomo
from lightmem.ledger import calls
from lightmem.pipeline.update_llm import LLMUpdater
from lightmem.testing.replies import ScriptedLLM
from lightmem.testing.stub_server import OpenAIStubServer


def _pass(path: Path, url: str, recheck: bool) -> dict[str, Any]:
    client = OpenAIChatClient(model="stub", base_url=url, api_key="unused")
    updater = LLMUpdater(client)
    with LightMemory.from_config({"store": {"path": str(path)}}) as built:
        embedder = built.embedder
    with LightMemory(SQLiteStore(path), embedder, updater=updater) as mem:
        t0 = time.perf_counter()
        mem.construct_update_queue_all_entries()
        report = mem.offline_update_all_entries(recheck=recheck)
        seconds = time.perf_counter() - t0
    return {
        "llm_calls": calls(client.ledger.totals(), "llm"),
        "seconds": round(seconds, 3),
        "examined": report.examined,
        "reviewed_pairs": report.reviewed,
        "skipped": report.skipped,
        "changed": len(report.updated) + len(report.deleted) + len(report.superseded),
    }


def conversation(sample: dict[str, Any], first: float, url: str, tmp: Path) -> dict[str, Any]:
    sessions = locomo.sessions(sample)
    total = sum(len(s) for s in sessions)
    path = tmp / f"{sample.get('sample_id', 'c')}.db"
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        said = 0
        late: list[list[dict[str, Any]]] = []
        for msgs in sessions:
            if said >= first * total:
                late.append(msgs)
                continue
            mem.add_memory(msgs, force_extract=True)
            said += len(msgs)
    initial = _pass(path, url, recheck=False)
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        for msgs in late:
            mem.add_memory(msgs, force_extract=True)
    baseline = tmp / "recheck.db"
    shutil.copy(path, baseline)
    shown = _pass(path, url, recheck=False)
    everything = _pass(baseline, url, recheck=True)
    same = _outcome(path) == _outcome(baseline)
    again = _pass(path, url, recheck=False)
    baseline.unlink()
    return {
        "turns": total,
        "turns_added_later": total - said,
        "first_pass": initial,
        "after_new_sessions": shown,
        "after_new_sessions_recheck": everything,
        "nothing_new": again,
        "same_outcome_as_recheck": same,
    }


def _outcome(path: Path) -> list[tuple[str, str, str]]:
    """Each memory's text, what replaced it and its version (ids differ by run)."""
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        entries = mem.list_entries(limit=100_000)
    text = {e.id: e.text for e in entries}
    return sorted((e.text, text.get(e.superseded_by, ""), str(e.version)) for e in entries)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("locomo", help="a LoCoMo file (locomo10.json format)")
    ap.add_argument("--first", type=float, default=0.8, help="share of turns added first")
    args = ap.parse_args()
    runs: dict[str, Any] = {}
    with OpenAIStubServer(chat_handler=ScriptedLLM()) as stub, tempfile.TemporaryDirectory() as d:
        for sample in locomo.load(args.locomo):
            name = str(sample.get("sample_id", len(runs)))
            runs[name] = conversation(sample, args.first, stub.base_url, Path(d))

    def med(key: str, field: str) -> float:
        return statistics.median(float(r[key][field]) for r in runs.values())

    shown, every = (
        med("after_new_sessions", "llm_calls"),
        med("after_new_sessions_recheck", "llm_calls"),
    )
    print(
        json.dumps(
            {
                "first_share": args.first,
                "conversations": runs,
                "median": {
                    "calls_first_pass": med("first_pass", "llm_calls"),
                    "calls_after_new_sessions": shown,
                    "calls_after_new_sessions_recheck": every,
                    "calls_ratio": round(shown / every, 3) if every else None,
                    "seconds_after_new_sessions": med("after_new_sessions", "seconds"),
                    "seconds_after_new_sessions_recheck": med(
                        "after_new_sessions_recheck", "seconds"
                    ),
                    "calls_nothing_new": med("nothing_new", "llm_calls"),
                    "same_outcome_as_recheck": all(
                        r["same_outcome_as_recheck"] for r in runs.values()
                    ),
                },
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
