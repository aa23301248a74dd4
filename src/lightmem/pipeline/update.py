"""Offline update: find overlapping entries, then merge, update or delete them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder
from lightmem.errors import InvalidInputError
from lightmem.store.base import MemoryStore, ScoredId
from lightmem.text import content_terms
from lightmem.types import MemoryEntry, Scope


@dataclass(frozen=True, slots=True)
class UpdateAction:
    """``update``: replace ``target_id``'s text and/or add sources; ``delete``: remove it."""

    op: Literal["update", "delete"]
    target_id: str
    reason: str
    new_text: str | None = None
    add_source_ids: tuple[str, ...] = ()


class Updater(Protocol):
    """Decides what to do with earlier entries that overlap a newer one."""

    name: str

    def decide(
        self, newer: MemoryEntry, candidates: Sequence[tuple[MemoryEntry, float]]
    ) -> list[UpdateAction]: ...


def build_queue(
    ids: Sequence[str],
    matrix: npt.NDArray[np.float32],
    groups: Sequence[str],
    top_k: int,
    keep_top_n: int,
    block: int = 512,
) -> dict[str, list[ScoredId]]:
    """For each entry, its most similar *earlier* entries of the same group (scope).

    ``ids``/``matrix`` rows are in insertion order. Work is done in numpy blocks, so 10k
    entries take well under a second; memory is O(block x n).
    """
    n = len(ids)
    if n == 0:
        return {}
    keep = max(1, min(top_k, keep_top_n))
    g = np.asarray(groups, dtype=object)
    queue: dict[str, list[ScoredId]] = {}
    cols = np.arange(n)
    for start in range(0, n, block):
        stop = min(n, start + block)
        sims = matrix[start:stop] @ matrix.T
        rows = np.arange(start, stop)
        invalid = (cols[None, :] >= rows[:, None]) | (g[None, :] != g[start:stop, None])
        sims[invalid] = -np.inf
        kk = min(keep, n)
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        for r, i in enumerate(rows):
            cand = [(int(j), float(sims[r, j])) for j in top[r] if np.isfinite(sims[r, j])]
            cand.sort(key=lambda x: -x[1])
            if cand:
                queue[ids[int(i)]] = [(ids[j], s) for j, s in cand]
    return queue


class OfflineUpdater:
    """Model-free update: an earlier entry by the same speaker whose content words are all
    (or nearly all, ``containment``) repeated in a newer one is a duplicate; it is deleted and
    its source ids move to the newer entry so no citation is lost."""

    name = "offline"

    def __init__(self, containment: float = 0.8) -> None:
        self.containment = containment

    def decide(
        self, newer: MemoryEntry, candidates: Sequence[tuple[MemoryEntry, float]]
    ) -> list[UpdateAction]:
        new_terms = set(content_terms(newer.original_text))
        actions: list[UpdateAction] = []
        merged: list[str] = []
        for old, score in candidates:
            if old.speaker != newer.speaker or old.kind != "entry":
                continue
            old_terms = set(content_terms(old.original_text))
            if not old_terms:
                continue
            overlap = len(old_terms & new_terms) / len(old_terms)
            if overlap >= self.containment:
                actions.append(
                    UpdateAction(
                        "delete",
                        old.id,
                        f"duplicate of {newer.id} (cosine {score:.2f}, overlap {overlap:.2f})",
                    )
                )
                merged.extend(s for s in old.source_ids if s not in newer.source_ids)
        if merged:
            actions.append(
                UpdateAction(
                    "update",
                    newer.id,
                    "merged sources of duplicates",
                    add_source_ids=tuple(dict.fromkeys(merged)),
                )
            )
        return actions


@dataclass(frozen=True, slots=True)
class UpdateReport:
    """What an offline update pass changed."""

    examined: int
    updated: tuple[str, ...]
    deleted: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "examined": self.examined,
            "updated": list(self.updated),
            "deleted": list(self.deleted),
        }


def run_update(
    store: MemoryStore,
    embedder: Embedder,
    updater: Updater,
    scope: Scope,
    score_threshold: float,
    only: Sequence[str] | None = None,
) -> UpdateReport:
    """Apply ``updater`` to every queued entry (or to ``only``) and its candidates above
    ``score_threshold``. Actions may only touch the entry or its own candidates."""
    queue = store.load_update_queue(scope)
    targets = [t for t in (only if only is not None else list(queue)) if t in queue]
    updated: list[str] = []
    deleted: set[str] = set()
    examined = 0
    for target_id in reversed(targets):  # newest first: it absorbs its older duplicates
        if target_id in deleted:
            continue
        cand_ids = [c for c, s in queue[target_id] if s >= score_threshold and c not in deleted]
        if not cand_ids:
            continue
        found = store.get_entries([target_id, *cand_ids])
        newer = found.get(target_id)
        if newer is None:
            continue
        cands = [(found[c], s) for c, s in queue[target_id] if c in found and c != target_id]
        examined += 1
        allowed = {target_id, *(e.id for e, _ in cands)}
        for action in updater.decide(newer, cands):
            if action.target_id not in allowed:
                raise InvalidInputError(
                    f"update action targets {action.target_id!r}, which is not in the batch"
                )
            current = found[action.target_id]
            if action.op == "delete":
                store.delete_entry(current.id, current.scope, action.reason)
                deleted.add(current.id)
            else:
                text = action.new_text or current.text
                original = action.new_text or current.original_text
                new = replace(
                    current,
                    text=text,
                    original_text=original,
                    source_ids=tuple(dict.fromkeys((*current.source_ids, *action.add_source_ids))),
                )
                vec = embedder.embed([new.search_text], op="update")[0]
                found[current.id] = store.update_entry(new, vec, action.reason)
                updated.append(current.id)
    return UpdateReport(examined, tuple(dict.fromkeys(updated)), tuple(sorted(deleted)))
