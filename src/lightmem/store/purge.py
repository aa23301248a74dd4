"""Erasure: remove an entry or a whole scope for good, written once for every SQL backend.

Unlike :meth:`~lightmem.store.entries.SQLStore.delete_entry` (restorable, kept in the
history), a purge removes the rows themselves: entries with their vectors and search-index
rows, their history, the messages they came from, update-queue and update-check rows (for
a scope, also those of its entries deleted before, found by their history) and, for a scope, the
FluxMem nodes, edges and graph history of that scope (with other scopes' edges to its nodes
and their events). One FluxMem node goes with its
vector and full-text row, its edges, its graph history and the history of its edges, every
graph history event of its own scope whose snapshot quotes one of its texts, and the task
sessions that show it (see :func:`purge_node`). The usage ledger holds only counters per
(kind, op), never text, so nothing in it names a purged scope.

The rows are removed in one transaction inside the database's ``erasing()`` block (SQLite:
``secure_delete``, so freed pages are zeroed); after the commit its ``compact()`` rewrites
what still holds freed space (SQLite: FTS5 merge, VACUUM, WAL checkpoint with truncation;
PostgreSQL: VACUUM of the touched tables and the entries' keyword postings; VACUUM FULL for
a store near its size limit, so its measure goes down). Only that tail is written per
backend.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lightmem.errors import NotFoundError
from lightmem.store.db import Database, Session
from lightmem.store.sessions import session_shows
from lightmem.store.sql import IN_CHUNK, json_value, placeholders, scope_sql
from lightmem.types import Scope

__all__ = ["TABLES", "PurgeReport", "purge", "purge_graph", "purge_node"]


#: The tables a purge removes rows from, in the order of the report.
TABLES = (
    "entries",
    "history",
    "messages",
    "update_queue",
    "update_checks",
    "graph_nodes",
    "graph_edges",
    "graph_history",
    "task_sessions",
)


class _Deleting(Protocol):
    derived_tables: tuple[str, ...]

    def before_delete(self, s: Session, rid: int) -> None: ...


class _NodeRows(Protocol):
    def delete(self, s: Session, node_id: str) -> None:
        """Remove a graph node row with its vector and full text."""


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What a purge removed: rows per table (vectors and index rows go with their rows)."""

    target: str  # "entry <id>" or the scope's label
    removed: dict[str, int] = field(default_factory=dict)
    #: False when the backend could not yet rewrite the freed space (see ``Database.compact``).
    compacted: bool = True

    @property
    def total(self) -> int:
        return sum(self.removed.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "removed": dict(self.removed),
            "total": self.total,
            "compacted": self.compacted,
        }


_PAGE = 500  # graph history events read at a time


def purge(
    db: Database,
    entries: _Deleting,
    nodes: _NodeRows,
    scope: Scope,
    entry_id: str | None = None,
    *,
    reclaim: bool = False,
) -> PurgeReport:
    """Remove ``entry_id`` (in ``scope``) or, without an id, everything in ``scope``;
    ``reclaim``: give the freed space back (see ``Database.compact``).

    An entry goes with its source turns and every entry that repeats them (other facts
    extracted from those turns, summaries citing them or the entry, entries quoting them
    as their context).

    The caller checks that the scope is not empty when no id is given. Raises
    :class:`~lightmem.errors.NotFoundError` when the id is neither stored nor in the
    history of this scope."""
    with db.erasing(), db.transaction() as s:
        if entry_id is not None:
            removed = _purge_entry(s, db, entries, scope, entry_id)
        else:
            removed = _purge_scope(s, db, entries, nodes, scope)
        _drop_staged(s)
    target = f"entry {entry_id}" if entry_id is not None else scope.label()
    # rows derived from the entries (their terms) are erased from the disk with them
    derived = entries.derived_tables if removed.get("entries") else ()
    return _report(db, target, removed, reclaim, derived)


def purge_graph(
    db: Database, nodes: _NodeRows, scope: Scope, *, reclaim: bool = False
) -> PurgeReport:
    """Remove the FluxMem graph of ``scope`` (nodes, edges, graph history, task sessions)
    and nothing else. Rows match the scope's non-empty fields, so the default scope, the
    one of an unscoped agent such as a server tenant's, erases the whole graph."""
    with db.erasing(), db.transaction() as s:
        where, params = scope_sql(db.dialect, scope)
        removed = _purge_graph_rows(s, nodes, where, params)
        _drop_staged(s)
    return _report(db, f"graph of {scope.label()}", removed, reclaim)


def purge_node(
    db: Database, nodes: _NodeRows, scope: Scope, node_id: str, *, reclaim: bool = False
) -> PurgeReport:
    """Remove FluxMem node ``node_id`` (in ``scope``) for good: its row with its vector and
    full text, its edges (of any scope), its graph history and that of its edges, every
    other graph history event of the node's own scope whose snapshot quotes one of the
    texts it ever had as a whole (not inside a longer word; other scopes' events are left
    alone; the events themselves go: they cannot be undone after), and the task sessions
    that show it
    (its episode's, those whose subgraph holds it; finished ones too). A node
    already removed (undone) is found by its history. Raises
    :class:`~lightmem.errors.NotFoundError` when neither is in this scope."""
    with db.erasing(), db.transaction() as s:
        removed = _purge_node(s, db, nodes, scope, node_id)
        _drop_staged(s)
    return _report(db, f"node {node_id}", removed, reclaim)


def _purge_node(
    s: Session, db: Database, nodes: _NodeRows, scope: Scope, node_id: str
) -> dict[str, int]:
    where, params = scope_sql(db.dialect, scope)
    row = s.one(
        f"SELECT text, user_id, agent_id, run_id FROM graph_nodes WHERE id = ? AND {where}"
        + db.row_lock,
        (node_id, *params),
    )
    own = s.all(
        "SELECT seq, before, after, user_id, agent_id, run_id FROM graph_history "
        f"WHERE target = 'node' AND target_id = ? AND {where}",
        (node_id, *params),
    )
    if row is None and not own:
        raise NotFoundError(f"node_id: no graph node {node_id!r} in this scope")
    texts = {str(row[0])} if row is not None else set()
    # The node's own scope (a node keeps its scope, so this is one scope in practice).
    scopes = {tuple(map(str, row[1:4]))} if row is not None else set()
    for r in own:
        texts |= {str(snap.get("text") or "") for snap in map(_snapshot, r[1:3])}
        scopes.add(tuple(map(str, r[3:6])))
    texts.discard("")  # (an empty text is in every string)
    nodes.delete(s, node_id)
    out = {"graph_nodes": 0 if row is None else 1}
    out["graph_edges"] = _count(
        s.execute("DELETE FROM graph_edges WHERE src = ? OR dst = ?", (node_id, node_id))
    )
    edge_events = _edge_events_naming(s, {node_id})
    quoting = [seq for owner in sorted(scopes) for seq in _events_quoting(s, owner, texts)]
    seqs = sorted({int(r[0]) for r in own} | set(edge_events) | set(quoting))
    out["graph_history"] = _delete_in(s, "graph_history", "seq", seqs)
    # (A session whose task merely quotes the text keeps it in its own episode node too.)
    sessions = [
        str(r[0])
        for r in s.all("SELECT id, episode_id, subgraph FROM task_sessions")
        if session_shows(str(r[1]), json_value(r[2]), node_id)
    ]
    out["task_sessions"] = _delete_in(s, "task_sessions", "id", sessions)
    return out


def _edge_events_naming(s: Session, node_ids: set[str]) -> list[int]:
    """The graph history events of edges from or to one of ``node_ids`` (an edge event's
    target id is "kind|src|dst"), read a page at a time."""
    found: list[int] = []
    last = -1
    while node_ids:
        page = s.all(
            "SELECT seq, target_id FROM graph_history WHERE target = 'edge' AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (last, _PAGE),
        )
        found += [int(r[0]) for r in page if node_ids & set(str(r[1]).split("|")[1:])]
        if len(page) < _PAGE:
            break
        last = int(page[-1][0])
    return found


def _events_quoting(s: Session, owner: tuple[str, ...], texts: set[str]) -> list[int]:
    """The graph history events of scope ``owner`` (user, agent, run) whose snapshots hold
    one of ``texts`` (see :func:`_quoting`). Other scopes' events are never touched: a
    short text such as "is" would otherwise erase other users' history. JSON strings are
    escaped differently per backend, so snapshots are decoded and searched here, a page of
    events at a time."""
    found: list[int] = []
    quotes = _quoting(texts)
    if quotes is None:
        return found
    last = -1
    while True:
        page = s.all(
            "SELECT seq, before, after FROM graph_history "
            "WHERE user_id = ? AND agent_id = ? AND run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (*owner, last, _PAGE),
        )
        found += [int(r[0]) for r in page if any(_holds(_snapshot(x), quotes) for x in r[1:])]
        if len(page) < _PAGE:
            return found
        last = int(page[-1][0])


#: A letter, digit or "_" of a script written with spaces between words: a text is quoted
#: only where it does not start or end next to one of these. (Chinese, Japanese, Thai,
#: Lao, Burmese and Khmer run words together, so there any occurrence is a copy.)
_SPACED_WORD = (
    "[^\\W\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003ffff]"
)
_IS_SPACED_WORD = re.compile(_SPACED_WORD)


def _quoting(texts: set[str]) -> re.Pattern[str] | None:
    """A pattern finding any of ``texts`` as a whole: the whole string, or a part of one
    that does not start or end inside a word (so the text "is" is found in "it is", where
    it is a copy, but not in "this"). None when there is no text."""
    parts = [
        (f"(?<!{_SPACED_WORD})" if _IS_SPACED_WORD.match(t[0]) else "")
        + re.escape(t)
        + (f"(?!{_SPACED_WORD})" if _IS_SPACED_WORD.match(t[-1]) else "")
        for t in sorted(texts, key=len, reverse=True)
        if t
    ]
    return re.compile("|".join(parts)) if parts else None


def _snapshot(raw: Any) -> dict[str, Any]:
    value = json_value(raw) if raw else None
    return value if isinstance(value, dict) else {}


def _holds(value: Any, quotes: re.Pattern[str]) -> bool:
    """True when a string inside ``value`` (a JSON value) quotes a text (see _quoting)."""
    if isinstance(value, str):
        return quotes.search(value) is not None
    if isinstance(value, dict):
        return any(_holds(v, quotes) for v in value.values())
    if isinstance(value, list):
        return any(_holds(v, quotes) for v in value)
    return False


def _drop_staged(s: Session) -> None:
    """Vectors staged by an interrupted re-embed may be of the purged texts: dropped (a
    rerun embeds again what it still needs)."""
    s.execute("DELETE FROM reembed_vectors")


def _report(
    db: Database,
    target: str,
    removed: dict[str, int],
    reclaim: bool,
    derived: Sequence[str] = (),
) -> PurgeReport:
    compacted = db.compact([*(t for t in TABLES if removed.get(t)), *derived], reclaim)
    return PurgeReport(target, {t: removed.get(t, 0) for t in TABLES}, compacted)


def _purge_entry(
    s: Session, db: Database, entries: _Deleting, scope: Scope, entry_id: str
) -> dict[str, int]:
    where, params = scope_sql(db.dialect, scope)
    row = s.one(
        f"SELECT rid, user_id, agent_id, run_id, source_ids FROM entries WHERE id = ? AND {where}"
        + db.row_lock,
        (entry_id, *params),
    )
    if row is not None:
        owner, sources = Scope(row[1], row[2], row[3]), [str(x) for x in json_value(row[4])]
    else:  # deleted already: only its history holds it
        events = s.all(
            "SELECT user_id, agent_id, run_id, coalesce(after, before) FROM history "
            f"WHERE entry_id = ? AND {where} ORDER BY seq DESC",
            (entry_id, *params),
        )
        if not events:
            raise NotFoundError(f"id: no memory entry {entry_id!r} in this scope")
        owner = Scope(events[0][0], events[0][1], events[0][2])
        snap = json_value(events[0][3]) or {}
        sources = [str(x) for x in snap.get("source_ids", [])]
    # Everything that repeats the erased turns goes too: the other facts extracted from
    # them, summaries citing them or the entry, and entries quoting them as context.
    own = "user_id = ? AND agent_id = ? AND run_id = ?"
    own_params = [owner.user_id, owner.agent_id, owner.run_id]
    cited = set(sources) | {entry_id}
    quoted = [f"\n{c}\n" for c in _contents(s, sources, own, own_params) if c]
    derived = [
        (int(r[0]), str(r[1]))
        for r in s.all(
            f"SELECT rid, id, source_ids, context FROM entries WHERE {own} ORDER BY rid"
            + db.row_lock,
            own_params,
        )
        if r[1] == entry_id
        or cited & {str(x) for x in json_value(r[2])}
        or any(q in f"\n{r[3]}\n" for q in quoted)
    ]
    for rid, _ in derived:
        entries.before_delete(s, rid)
    ids = [i for _, i in derived]
    gone = sorted(set(ids) | {entry_id})
    out = {"entries": _delete_in(s, "entries", "id", ids)}
    out["history"] = _delete_in(s, "history", "entry_id", gone, own, own_params)
    out["messages"] = _delete_in(s, "messages", "msg_id", sources, own, own_params)
    out["update_queue"] = _delete_queue(s, set(gone), owner)
    out["update_checks"] = _delete_in(s, "update_checks", "entry_id", gone)
    return out


def _purge_scope(
    s: Session, db: Database, entries: _Deleting, nodes: _NodeRows, scope: Scope
) -> dict[str, int]:
    where, params = scope_sql(db.dialect, scope)
    rows = s.all(f"SELECT rid, id FROM entries WHERE {where} ORDER BY rid" + db.row_lock, params)
    ids = [str(r[1]) for r in rows]
    for r in rows:
        entries.before_delete(s, int(r[0]))
    out = {"entries": _delete_in(s, "entries", "id", ids)}
    # and the rows kept by id of the scope's entries deleted before (their history says)
    known = sorted(
        set(ids)
        | {str(r[0]) for r in s.all(f"SELECT DISTINCT entry_id FROM history WHERE {where}", params)}
    )
    out["update_queue"] = _delete_in(s, "update_queue", "entry_id", known)
    out["update_checks"] = _delete_in(s, "update_checks", "entry_id", known)
    for table in ("history", "messages"):
        out[table] = _count(s.execute(f"DELETE FROM {table} WHERE {where}", params))
    return {**out, **_purge_graph_rows(s, nodes, where, params)}


def _purge_graph_rows(
    s: Session, nodes: _NodeRows, where: str, params: Sequence[Any]
) -> dict[str, int]:
    out: dict[str, int] = {}
    node_ids = [
        str(r[0]) for r in s.all(f"SELECT id FROM graph_nodes WHERE {where} ORDER BY rid", params)
    ]
    for node_id in node_ids:
        nodes.delete(s, node_id)
    out["graph_nodes"] = len(node_ids)
    out["graph_edges"] = _count(s.execute(f"DELETE FROM graph_edges WHERE {where}", params))
    # Edges of other scopes that point at a purged node go too (they would dangle).
    out["graph_edges"] += _delete_in(s, "graph_edges", "dst", node_ids)
    out["graph_edges"] += _delete_in(s, "graph_edges", "src", node_ids)
    out["graph_history"] = _count(s.execute(f"DELETE FROM graph_history WHERE {where}", params))
    out["graph_history"] += _delete_in(s, "graph_history", "target_id", node_ids)
    # And the events of those edges (undoing one would draw an edge to a purged node).
    out["graph_history"] += _delete_in(
        s, "graph_history", "seq", _edge_events_naming(s, set(node_ids))
    )
    # A session in progress holds its task, attempts and context: it goes with its scope.
    out["task_sessions"] = _count(s.execute(f"DELETE FROM task_sessions WHERE {where}", params))
    return out


def _contents(s: Session, msg_ids: Sequence[str], own: str, params: list[str]) -> list[str]:
    out: list[str] = []
    for start in range(0, len(msg_ids), IN_CHUNK):
        chunk = list(msg_ids[start : start + IN_CHUNK])
        marks = placeholders(chunk)
        out += [
            str(r[0])
            for r in s.all(
                f"SELECT content FROM messages WHERE msg_id IN ({marks}) AND {own}",
                (*chunk, *params),
            )
        ]
    return out


def _delete_queue(s: Session, gone: set[str], owner: Scope) -> int:
    """The purged entries' queue rows, and those of their scope that list one as a
    candidate (the next update rebuilds them)."""
    rows = s.all(
        "SELECT q.entry_id, q.candidates FROM update_queue q JOIN entries e ON e.id = q.entry_id "
        "WHERE e.user_id = ? AND e.agent_id = ? AND e.run_id = ?",
        (owner.user_id, owner.agent_id, owner.run_id),
    )
    stale = [str(r[0]) for r in rows if any(str(c[0]) in gone for c in json_value(r[1]))]
    return _delete_in(s, "update_queue", "entry_id", sorted(gone | set(stale)))


def _delete_in(
    s: Session,
    table: str,
    column: str,
    values: Sequence[str] | Sequence[int],
    extra: str = "",
    extra_params: Sequence[Any] = (),
) -> int:
    n = 0
    tail = f" AND {extra}" if extra else ""
    for start in range(0, len(values), IN_CHUNK):
        chunk = list(values[start : start + IN_CHUNK])
        marks = placeholders(chunk)
        n += _count(
            s.execute(
                f"DELETE FROM {table} WHERE {column} IN ({marks}){tail}",
                (*chunk, *extra_params),
            )
        )
    return n


def _count(cursor: Any) -> int:
    return max(int(cursor.rowcount), 0)
