"""Buffered turns that change what is stored, placed first when read.

A turn still in the buffers is searchable at once as a provisional entry
(:mod:`lightmem.pipeline.provisional`), but no update pass has compared it with what it may
replace: that happens when it is extracted (``update: "online"``) or at the next offline
update. Until then "We moved to Denver" ranked under "I live in Boston" for "Where do I
live?". So, for a question about the present, each provisional entry among the first
:data:`~lightmem.pipeline.candidates.RERANK_WINDOW` hits is compared, by the model-free
detector the update pass uses (:class:`~lightmem.pipeline.supersede.Detector`), with the
earlier current entries among those hits, and placed right before the highest one it would
supersede. Nothing is written: extraction and its update pass decide for good.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lightmem.pipeline.candidates import RERANK_WINDOW, Fetch
from lightmem.pipeline.supersede import Detector, said_at
from lightmem.pipeline.validity import about_past
from lightmem.store.base import ScoredId
from lightmem.store.provisional import is_provisional
from lightmem.types import MemoryEntry

__all__ = ["buffered_first"]


def buffered_first(
    ranked: Sequence[ScoredId],
    fetch: Fetch,
    question: str,
    detector: Detector,
    as_of: datetime | None = None,
) -> list[ScoredId]:
    """``ranked`` (best first) with each buffered turn that changes an earlier memory ranked
    above it moved right before it (with its score, so scores stay in order); unchanged for
    a question about the past or an earlier time (``as_of``), and when no provisional entry
    is among the first hits."""
    window = [i for i, _ in ranked[:RERANK_WINDOW]]
    if as_of is not None or not any(is_provisional(i) for i in window) or about_past(question):
        return list(ranked)
    found = fetch(window)
    entries = [found[i] for i in window if i in found and found[i].kind == "entry"]
    pending = sorted((e for e in entries if is_provisional(e.id)), key=said_at)
    if not pending:
        return list(ranked)
    current = [e for e in entries if e.current_at()]
    candidates = {
        p.id: sorted((e for e in current if e.scope == p.scope and _said_before(e, p)), key=said_at)
        for p in pending
    }
    out = list(ranked)
    for change in detector.review(pending, candidates).found:
        ids = [i for i, _ in out]
        new, old = ids.index(change.new.id), ids.index(change.old.id)
        if new > old:
            out.insert(old, (out.pop(new)[0], out[old][1]))
    return out


def _said_before(e: MemoryEntry, p: MemoryEntry) -> bool:
    """Was ``e`` said before the buffered turn ``p`` (an entry without a time: no)?"""
    return (
        e.id != p.id
        and e.timestamp is not None
        and p.timestamp is not None
        and (e.timestamp < p.timestamp)
    )
