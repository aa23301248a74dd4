"""Re-embedding a store: every stored vector recomputed by another embedder and switched to
it in one transaction, written once for every SQL backend.

What holds vectors: every entry row (current, superseded and provisional ones; a deleted
entry and a history version keep no vector, a restore embeds again), every FluxMem graph
node, and the ``trigger`` of a graduated skill (the mean vector of its source episodes'
tasks, kept in the node's data and in the graph history's snapshots of the node). An
entry's vector is its ``search_text``'s, except a topic summary of the offline memory
manager, whose vector is the centroid of its turns' (as :mod:`lightmem.pipeline.extract`
makes it).

Two phases:

1. *Staging*, ``batch`` rows at a time (memory stays bounded): the texts the vectors are
   made of are embedded and kept in ``reembed_vectors`` under (new embedder, text digest),
   one transaction per batch. Nothing else changes: the store keeps its old embedder and
   answers with it. An error (or a crash) leaves what was staged, and running again
   resumes from it.
2. *Switch*, one transaction: each vector is replaced by its staged one (texts written
   since the staging are embedded now), the triggers are rewritten, the recorded embedder
   identity changes, the update queue (scores of the old vectors) and the staged vectors
   are cleared, and the backend rebuilds its vector index (PostgreSQL: the column retyped
   to the new dimension, HNSW built again; SQLite: a new index epoch, so every process
   rebuilds its search columns and the saved ``.index`` file). Until the commit the store
   is as it was; after it only the new embedder opens it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from lightmem.errors import InvalidInputError, StoreError
from lightmem.store.db import Database, Session
from lightmem.store.sql import IN_CHUNK, dumps, json_value, message_from_row, placeholders
from lightmem.store.values import Vector
from lightmem.types import entry_search_text

__all__ = [
    "EntryVectors",
    "NodeVectors",
    "ReembedReport",
    "TextEmbedder",
    "recorded_embedder",
    "reembed",
]

_OP = "reembed"


class TextEmbedder(Protocol):
    """What a re-embed needs of an embedder (:class:`lightmem.embed.base.Embedder` is one)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str], *, op: str = "embed") -> Vector: ...


class EntryVectors(Protocol):
    """The backend's entry vectors, as the switch rewrites them."""

    def begin_reembed(self, s: Session, dim: int) -> None:
        """In the switch transaction, before any vector is written (lock, retype)."""

    def set_vectors(self, s: Session, rows: Sequence[tuple[int, Vector]]) -> None:
        """Replace the vectors of entry rows (rid, vector)."""

    def end_reembed(self, s: Session, dim: int, rows: int) -> None:
        """Last in the switch transaction: rebuild what is derived from the vectors."""

    def after_reembed(self, dim: int) -> None:
        """After the commit: this process's caches follow the new vectors."""


class NodeVectors(Protocol):
    def set_node_vectors(self, s: Session, rows: Sequence[tuple[int, Vector]]) -> None:
        """Replace the vectors of graph node rows (rid, vector)."""


@dataclass(slots=True)
class ReembedReport:
    """What a re-embed rewrote."""

    embedder_from: str  # "name (dim-d)", "" for a store that had none
    embedder_to: str
    entries: int = 0
    nodes: int = 0
    triggers: int = 0  # skill triggers rewritten, in nodes and graph history snapshots
    triggers_dropped: int = 0  # triggers none of whose source episodes exist any more
    texts_embedded: int = 0
    texts_resumed: int = 0  # vectors staged by an earlier, interrupted run
    update_queue_cleared: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Item:
    """One vector to rewrite: where it goes, and the texts whose mean it is (none: the
    texts are gone, the vector is dropped)."""

    key: int
    where: Any
    texts: tuple[str, ...]


#: (session, last key, page size) -> the next items and the last key read (None: done).
_Page = Callable[[Session, int, int], tuple[list[_Item], int | None]]


def reembed(
    db: Database,
    entries: EntryVectors,
    nodes: NodeVectors,
    embedder: TextEmbedder,
    *,
    batch: int = 256,
) -> ReembedReport:
    """Recompute every vector of the store in ``db`` with ``embedder`` and switch the store
    to it (see the module docstring). Raises :class:`StoreError` on a read-only store or
    when another re-embed switched the store meanwhile; any error before the switch's
    commit leaves the store as it was, with the vectors staged so far kept for a rerun."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InvalidInputError(f"batch: expected a positive integer, got {batch!r}")
    if db.read_only:
        raise StoreError(f"store {db.path!r} is open read-only; re-embedding writes to it")
    with db.read() as s:
        before = recorded_embedder(s)
        resumed = s.one("SELECT count(*) FROM reembed_vectors WHERE embedder = ?", (embedder.name,))
    report = ReembedReport(_label(before), f"{embedder.name} ({embedder.dim}-d)")
    report.texts_resumed = int(resumed[0])
    pages: list[_Page] = [_entry_page, _node_page, _trigger_page, _history_page]
    for page in pages:  # phase 1: staging, one transaction per batch
        for items in _pages(db, page, batch):
            _stage(db, embedder, [t for item in items for t in item.texts], report)
    with db.transaction() as s:  # phase 2: the switch
        if recorded_embedder(s, lock=db.row_lock) != before:
            raise StoreError(
                f"store {db.path!r}: its embedder changed while re-embedding; run it again"
            )
        entries.begin_reembed(s, embedder.dim)
        for items in _session_pages(s, _entry_page, batch):
            vecs = _vectors(s, embedder, items)
            entries.set_vectors(
                s, [(i.key, v) for i, v in zip(items, vecs, strict=True) if v is not None]
            )
            report.entries += len(items)
        for items in _session_pages(s, _node_page, batch):
            vecs = _vectors(s, embedder, items)
            nodes.set_node_vectors(
                s, [(i.key, v) for i, v in zip(items, vecs, strict=True) if v is not None]
            )
            report.nodes += len(items)
        for items in _session_pages(s, _trigger_page, batch):
            _write_triggers(
                s, "UPDATE graph_nodes SET data = ? WHERE rid = ?", items, embedder, report
            )
        for items in _session_pages(s, _history_page, batch):
            for column in ("before", "after"):
                mine = [i for i in items if i.where[0] == column]
                sql = f"UPDATE graph_history SET {column} = ? WHERE seq = ?"
                _write_triggers(s, sql, mine, embedder, report)
        s.execute(
            "INSERT INTO meta VALUES ('embedder', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (json.dumps({"name": embedder.name, "dim": embedder.dim}),),
        )
        report.update_queue_cleared = int(s.one("SELECT count(*) FROM update_queue")[0])
        s.execute("DELETE FROM update_queue")
        s.execute("DELETE FROM reembed_vectors")
        entries.end_reembed(s, embedder.dim, report.entries)
    entries.after_reembed(embedder.dim)
    return report


# -- the rows that hold vectors, and the texts each vector is made of ----------------------
def _entry_page(s: Session, after: int, n: int) -> tuple[list[_Item], int | None]:
    rows = s.all(
        "SELECT rid, kind, speaker_name, speaker_id, original_text, context, source_ids, "
        "user_id, agent_id, run_id FROM entries WHERE rid > ? ORDER BY rid LIMIT ?",
        (after, n),
    )
    items = []
    for r in rows:
        texts: tuple[str, ...] = (entry_search_text(r[2] or r[3], r[4], r[5]),)
        if r[1] == "summary" and not r[5]:
            turns = _turn_texts(s, (r[7], r[8], r[9]), [str(x) for x in json_value(r[6])])
            if turns and "\n".join(turns) == r[4]:  # an offline topic summary: its centroid
                texts = tuple(turns)
        items.append(_Item(int(r[0]), None, texts))
    return items, _last(rows, n)


def _turn_texts(s: Session, scope: tuple[str, str, str], ids: list[str]) -> list[str]:
    """The indexed texts of messages ``ids`` of ``scope`` in that order ([] if any is gone)."""
    found: dict[str, str] = {}
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        for r in s.all(
            "SELECT seq, msg_id, role, content, compressed, ts, time_text, speaker_id, "
            f"speaker_name, metadata FROM messages WHERE msg_id IN ({placeholders(chunk)}) "
            "AND user_id = ? AND agent_id = ? AND run_id = ?",
            (*chunk, *scope),
        ):
            found[r[1]] = message_from_row(r[1:]).search_text
    return [found[i] for i in ids] if all(i in found for i in ids) else []


def _node_page(s: Session, after: int, n: int) -> tuple[list[_Item], int | None]:
    rows = s.all("SELECT rid, text FROM graph_nodes WHERE rid > ? ORDER BY rid LIMIT ?", (after, n))
    return [_Item(int(r[0]), None, (r[1],)) for r in rows], _last(rows, n)


def _trigger_page(s: Session, after: int, n: int) -> tuple[list[_Item], int | None]:
    """Graduated skills' triggers: the mean vector of their source episodes' tasks."""
    rows = s.all(
        "SELECT rid, data FROM graph_nodes WHERE kind = 'procedural' AND rid > ? "
        "ORDER BY rid LIMIT ?",
        (after, n),
    )
    items = []
    for r in rows:
        data = json_value(r[1])
        if _has_trigger(data):
            items.append(_Item(int(r[0]), data, _episode_tasks(s, data)))
    return items, _last(rows, n)


def _history_page(s: Session, after: int, n: int) -> tuple[list[_Item], int | None]:
    """The same triggers in the graph history's node snapshots (undo restores them)."""
    rows = s.all(
        "SELECT seq, before, after FROM graph_history WHERE target = 'node' AND seq > ? "
        "ORDER BY seq LIMIT ?",
        (after, n),
    )
    items = []
    for r in rows:
        for column, raw in (("before", r[1]), ("after", r[2])):
            snap = json_value(raw) if raw is not None else None
            if isinstance(snap, dict) and _has_trigger(snap.get("data")):
                items.append(_Item(int(r[0]), (column, snap), _episode_tasks(s, snap["data"])))
    return items, _last(rows, n)


def _has_trigger(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("trigger"), list)


def _episode_tasks(s: Session, data: dict[str, Any]) -> tuple[str, ...]:
    """The tasks of a skill's source episodes that still exist (as Stage III reads them)."""
    ids = [str(x) for x in data.get("source_episodes", []) if isinstance(x, str)]
    tasks: dict[str, str] = {}
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        for r in s.all(
            f"SELECT id, text, data FROM graph_nodes WHERE id IN ({placeholders(chunk)})", chunk
        ):
            node_data = json_value(r[2])
            task = node_data.get("task", r[1]) if isinstance(node_data, dict) else r[1]
            tasks[r[0]] = str(task)
    return tuple(tasks[i] for i in ids if i in tasks)


def _last(rows: Sequence[Any], n: int) -> int | None:
    return int(rows[-1][0]) if len(rows) == n else None


def _pages(db: Database, page: _Page, n: int) -> Iterator[list[_Item]]:
    """Pages of items, each read in its own snapshot (staging: no long transaction)."""
    after: int | None = 0
    while after is not None:
        with db.read() as s:
            items, after = page(s, after, n)
        yield items


def _session_pages(s: Session, page: _Page, n: int) -> Iterator[list[_Item]]:
    after: int | None = 0
    while after is not None:
        items, after = page(s, after, n)
        yield items


# -- staged vectors ------------------------------------------------------------------------
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _staged(s: Session, name: str, digests: Sequence[str]) -> dict[str, Vector]:
    out: dict[str, Vector] = {}
    for start in range(0, len(digests), IN_CHUNK):
        chunk = list(digests[start : start + IN_CHUNK])
        for r in s.all(
            f"SELECT digest, vec FROM reembed_vectors WHERE embedder = ? "
            f"AND digest IN ({placeholders(chunk)})",
            (name, *chunk),
        ):
            out[r[0]] = np.frombuffer(bytes(r[1]), dtype=np.float32).copy()
    return out


def _stage(db: Database, embedder: TextEmbedder, texts: list[str], report: ReembedReport) -> None:
    """Embed and keep those of ``texts`` not staged yet (one transaction)."""
    digests = {t: _digest(t) for t in texts}
    if not digests:
        return
    with db.read() as s:
        have = _staged(s, embedder.name, list(digests.values()))
    todo = [t for t, d in digests.items() if d not in have]
    if not todo:
        return
    vecs = embedder.embed(todo, op=_OP)
    with db.transaction() as s:
        s.many(
            "INSERT INTO reembed_vectors VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [(embedder.name, digests[t], v.tobytes()) for t, v in zip(todo, vecs, strict=True)],
        )
    report.texts_embedded += len(todo)


def _vectors(s: Session, embedder: TextEmbedder, items: Sequence[_Item]) -> list[Vector | None]:
    """Each item's vector: the normalised mean of its texts' (staged, or embedded now if
    written after the staging); None for an item without texts."""
    texts = list(dict.fromkeys(t for item in items for t in item.texts))
    digests = [_digest(t) for t in texts]
    found = _staged(s, embedder.name, digests)
    missing = [t for t, d in zip(texts, digests, strict=True) if d not in found]
    if missing:
        for t, v in zip(missing, embedder.embed(missing, op=_OP), strict=True):
            found[_digest(t)] = v
    out: list[Vector | None] = []
    for item in items:
        if not item.texts:
            out.append(None)
            continue
        rows = np.stack([found[_digest(t)] for t in item.texts])
        mean = rows.mean(axis=0).astype(np.float32) if len(rows) > 1 else rows[0]
        norm = float(np.linalg.norm(mean))
        out.append(np.ascontiguousarray(mean / norm if norm > 0 else mean, dtype=np.float32))
    return out


def _write_triggers(
    s: Session, sql: str, items: Sequence[_Item], embedder: TextEmbedder, report: ReembedReport
) -> None:
    """Rewrite the triggers of ``items`` (node data, or history snapshots) with ``sql``."""
    if not items:
        return
    rows = []
    for item, vec in zip(items, _vectors(s, embedder, items), strict=True):
        snap = item.where[1] if isinstance(item.where, tuple) else item.where
        data = dict(snap["data"]) if isinstance(item.where, tuple) else dict(snap)
        if vec is None:
            del data["trigger"]  # no source episode left to embed: the skill stops maturing
            report.triggers_dropped += 1
        else:
            data["trigger"] = [round(float(x), 5) for x in vec]  # as Stage III writes it
            report.triggers += 1
        value = {**snap, "data": data} if isinstance(item.where, tuple) else data
        rows.append((dumps(value, "data"), item.key))
    s.many(sql, rows)


# -- the recorded identity -------------------------------------------------------------------
def recorded_embedder(s: Session, lock: str = "") -> tuple[str, int] | None:
    """The (name, dimensions) of the embedder the store's vectors were built with (None
    before the first open binds one); ``lock``: the database's row-lock clause."""
    row = s.one("SELECT value FROM meta WHERE key = 'embedder'" + lock)
    if row is None:
        return None
    bound = json.loads(row[0])
    return str(bound["name"]), int(bound["dim"])


def _label(identity: tuple[str, int] | None) -> str:
    return "" if identity is None else f"{identity[0]} ({identity[1]}-d)"
