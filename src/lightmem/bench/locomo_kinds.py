"""Knowledge-update scoring for ``bench locomo``: questions with a ``kind``.

``current``: the current evidence is retrieved in a memory that is not superseded, and no
memory citing only stale turns (``stale_evidence``) and not marked superseded comes before
it in retrieval's rank order. ``history``: the earlier value's evidence is retrieved.
``stable``: the evidence is retrieved and none of the memories citing it is marked
superseded. ``false_supersession_rate``: stable questions whose evidence memory is marked
superseded (anywhere in the store, retrieved or not), over all stable questions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lightmem.pipeline.update import scope_entries
from lightmem.types import MemoryEntry, RetrievalResult, Scope

if TYPE_CHECKING:
    from lightmem.memory import LightMemory

__all__ = ["KINDS", "memory_fields", "score", "stored_entries", "summary"]


KINDS = ("current", "history", "stable")


def memory_fields(r: RetrievalResult) -> dict[str, Any]:
    """What ``--out`` shows of each retrieved memory besides its text and score."""
    e = r.entry
    return {
        "id": e.id,
        "timestamp": e.timestamp.isoformat() if e.timestamp else None,
        "speaker": e.speaker,
        "superseded_by": e.superseded_by or None,
        "valid_to": e.valid_to.isoformat() if e.valid_to else None,
    }


def stored_entries(mem: LightMemory, sample: Mapping[str, Any]) -> list[MemoryEntry]:
    """Every fact entry of the conversation's store, when it has stable questions."""
    if not any(q.get("kind") == "stable" for q in sample.get("qa", [])):
        return []
    return scope_entries(mem.store, Scope())


def score(
    qa: Mapping[str, Any],
    evidence: set[str],
    results: Sequence[RetrievalResult],
    stored: Sequence[MemoryEntry],
    stale: set[str],
) -> dict[str, Any]:
    """The by-kind fields of one question (nothing for a question without a ``kind``)."""
    kind = qa.get("kind")
    if kind not in KINDS:
        return {}
    ranked = [e for r in results for e in (r.entry, *r.related) if e.kind == "entry"]
    got = {s for e in ranked for s in e.source_ids}
    out: dict[str, Any] = {"kind": kind, "kind_hit": False}
    if kind == "current":
        out["stale_evidence"] = sorted(stale)
        for e in ranked:
            cites = set(e.source_ids)
            if cites & evidence and not e.superseded_by:
                out["kind_hit"] = True
                break
            if cites and cites <= stale and not e.superseded_by:
                break  # a stale value, not marked, comes first
    elif kind == "history":
        out["kind_hit"] = evidence <= got
    else:
        marked = [e.id for e in stored if e.superseded_by and set(e.source_ids) & evidence]
        out["falsely_superseded"] = bool(marked)
        out["kind_hit"] = evidence <= got and not any(
            e.superseded_by for e in ranked if set(e.source_ids) & evidence
        )
    return out


def summary(questions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``by_kind`` (n and rate per kind) and ``false_supersession_rate``."""
    by_kind: dict[str, Any] = {}
    names = {"current": "current_first", "history": "past_retrieved", "stable": "stable_retrieved"}
    for kind in KINDS:
        qs = [q for q in questions if q.get("kind") == kind]
        rate = round(sum(bool(q["kind_hit"]) for q in qs) / len(qs), 4) if qs else 0.0
        by_kind[kind] = {"n": len(qs), names[kind]: rate}
    stable = [q for q in questions if q.get("kind") == "stable"]
    false = sum(bool(q.get("falsely_superseded")) for q in stable)
    return {
        "by_kind": by_kind,
        "false_supersession_rate": round(false / len(stable), 4) if stable else 0.0,
    }
