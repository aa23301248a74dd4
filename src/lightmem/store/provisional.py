"""Provisional entries: buffered turns made searchable before extraction (the SQL part).

A turn waits in the sensory and short-term buffers until enough text has arrived to
segment and extract it in one batch (one LLM call per batch). Meanwhile it is searchable
through a *provisional* entry: the offline per-turn entry for that turn, stored like any
other entry (so every index, backend and process sees it) under an id derived from the
turn's scope and id. Extraction removes it in the same transaction that stores the turn's
real entries, so a reader sees either the provisional entry or the extracted ones, never
both and never neither.

Provisional entries have no history (nothing about them was ever changed; erasing the
turn leaves no snapshot of it behind) and cannot be edited: they are a view of a buffered
turn, not a memory of their own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from lightmem.store.db import Session
from lightmem.store.sql import IN_CHUNK, placeholders
from lightmem.store.values import Vector
from lightmem.types import MemoryEntry, Scope

__all__ = ["PREFIX", "is_provisional", "provisional_id", "stored_ids", "writable"]

#: Every provisional entry's id starts with this (extracted entries' ids never do).
PREFIX = "p-"


def provisional_id(scope: Scope, message_id: str) -> str:
    """The id of the provisional entry of message ``message_id`` stored in ``scope``."""
    key = json.dumps([scope.user_id, scope.agent_id, scope.run_id, message_id])
    return PREFIX + hashlib.sha256(key.encode()).hexdigest()[:32]


def is_provisional(entry_id: str) -> bool:
    return entry_id.startswith(PREFIX)


def stored_ids(s: Session, entry_ids: Sequence[str]) -> list[str]:
    """Those of ``entry_ids`` present in the entries table."""
    found: list[str] = []
    for start in range(0, len(entry_ids), IN_CHUNK):
        chunk = list(entry_ids[start : start + IN_CHUNK])
        marks = placeholders(chunk)
        found += [r[0] for r in s.all(f"SELECT id FROM entries WHERE id IN ({marks})", chunk)]
    return found


def writable(
    s: Session, rows: Sequence[tuple[MemoryEntry, Vector]], message_seqs: Sequence[int]
) -> list[tuple[MemoryEntry, Vector]]:
    """The rows still to write: their message (``message_seqs``, aligned) is still buffered
    and no entry holds their id yet. The caller holds the messages' row locks, so an
    extraction committing meanwhile cannot be missed."""
    buffered: set[int] = set()
    for start in range(0, len(message_seqs), IN_CHUNK):
        chunk = list(message_seqs[start : start + IN_CHUNK])
        marks = placeholders(chunk)
        buffered |= {
            int(r[0])
            for r in s.all(
                f"SELECT seq FROM messages WHERE seq IN ({marks}) AND status != 'extracted'",
                chunk,
            )
        }
    present = set(stored_ids(s, [e.id for e, _ in rows]))
    return [
        (e, vec)
        for (e, vec), seq in zip(rows, message_seqs, strict=True)
        if seq in buffered and e.id not in present
    ]
