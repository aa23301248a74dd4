"""Every supersession the offline detector makes on real conversations, for judging by hand.

Ingests each conversation of a LoCoMo file with the offline defaults and runs the update
(``--path offline``: the pipeline's pass after ingestion, as ``bench locomo`` does;
``--path online``: ``update: "online"``, one session per ``add_memory`` call), then prints
one JSON object with every (superseded, superseding) pair: the two entries' source dia_ids,
texts, speakers, dates and the detector's reason. With ``--labels`` (a file written by
hand: ``{"pairs": [{"conversation", "old", "new", "verdict": "right"|"wrong"}]}``) it also
reports precision against those verdicts and lists the pairs not yet judged.

The texts are printed, never written into the repository: LoCoMo is CC BY-NC, so the
labels file keeps only dia_ids and verdicts.

    python benchmarks/supersession_pairs.py locomo_dev.json [--path online] \
        [--labels benchmarks/data/locomo_supersession_labels.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lightmem import LightMemory
from lightmem.bench.locomo import load, sessions
from lightmem.pipeline.update import scope_entries
from lightmem.types import Scope


def pairs_of(sample: dict[str, Any], path: str, tmp: Path) -> tuple[list[dict[str, Any]], int]:
    """The conversation's supersession pairs and its number of fact entries."""
    sid = str(sample["sample_id"])
    cfg: dict[str, Any] = {"store": {"path": str(tmp / f"{sid}-{path}.db")}}
    if path == "online":
        cfg["update"] = "online"
    with LightMemory.from_config(cfg) as mem:
        for msgs in sessions(sample):
            mem.add_memory(msgs, force_segment=True)
        mem.flush()
        if path == "offline":
            mem.construct_update_queue_all_entries()
            mem.offline_update_all_entries()
        entries = scope_entries(mem.store, Scope())
        reasons = {e.id: mem.history(e.id)[-1].reason for e in entries if e.superseded_by}
    by_id = {e.id: e for e in entries}
    out = []
    for old in entries:
        new = by_id.get(old.superseded_by) if old.superseded_by else None
        if new is None:
            continue
        out.append(
            {
                "conversation": sid,
                "old": list(old.source_ids),
                "new": list(new.source_ids),
                "old_speaker": old.speaker,
                "new_speaker": new.speaker,
                "old_time": old.timestamp.isoformat() if old.timestamp else None,
                "new_time": new.timestamp.isoformat() if new.timestamp else None,
                "old_text": old.original_text,
                "new_text": new.original_text,
                "reason": reasons[old.id],
            }
        )
    return out, len(entries)


def precision(pairs: list[dict[str, Any]], labels: list[dict[str, Any]]) -> dict[str, Any]:
    """Right pairs over judged pairs, and the pairs without a verdict."""
    verdict = {(x["conversation"], tuple(x["old"]), tuple(x["new"])): x["verdict"] for x in labels}
    keys = [(p["conversation"], tuple(p["old"]), tuple(p["new"])) for p in pairs]
    judged = [verdict[k] for k in keys if k in verdict]
    right = sum(v == "right" for v in judged)
    return {
        "pairs": len(pairs),
        "judged": len(judged),
        "right": right,
        "precision": round(right / len(judged), 3) if judged else None,
        "unjudged": [p for p, k in zip(pairs, keys, strict=True) if k not in verdict],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--path", choices=("offline", "online"), default="offline")
    ap.add_argument("--labels", type=Path)
    ap.add_argument("--samples", type=int)
    args = ap.parse_args()
    data = load(args.file)[: args.samples] if args.samples else load(args.file)
    pairs: list[dict[str, Any]] = []
    per_conv: dict[str, dict[str, int]] = {}
    t0 = time.process_time()
    with tempfile.TemporaryDirectory(prefix="lightmem-pairs-") as tmp:
        for sample in data:
            found, n = pairs_of(sample, args.path, Path(tmp))
            pairs += found
            per_conv[str(sample["sample_id"])] = {"entries": n, "superseded": len(found)}
    out: dict[str, Any] = {
        "path": args.path,
        "per_conversation": per_conv,
        "cpu_s": round(time.process_time() - t0, 1),
    }
    if args.labels:
        labels = json.loads(args.labels.read_text(encoding="utf-8"))["pairs"]
        out["labels"] = precision(pairs, labels)
    out["pairs"] = pairs
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
