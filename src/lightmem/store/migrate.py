"""``lightmem migrate --from sqlite:PATH --to postgres:DSN``: copy a store, then prove it.

Every SQLite table is either copied (:data:`COPIED`) or named in :data:`NOT_COPIED` with
the reason (a test requires each table of the schema to be in one of them). A copied table
is copied with *every* column the SQLite table has (read from the file, so a column added
by a later migration step is copied without a change here), its row ids and event numbers
kept (the target's sequences continue after them, so undo still finds graph events), in
one PostgreSQL transaction; then row counts and content checksums are compared table by
table over those same columns, vectors included.

FluxMem task sessions are copied with their claims released: a claim names a step running
in a process on the *source* store, which saves its result there, so on the target it would
only block the session for up to its lease. A client whose step was running during the
migration reports it again on the target (with its ``step`` number it is applied once).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from lightmem.errors import InvalidInputError, StoreError
from lightmem.store.postgres import PostgresStore
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import entry_search_text

__all__ = ["COPIED", "NOT_COPIED", "TableCopy", "migrate", "source_columns"]

_BATCH = 5_000  # rows per executemany


def _entry_extra(row: Mapping[str, Any]) -> dict[str, Any]:
    speaker = row["speaker_name"] or row["speaker_id"]
    return {"search_text": entry_search_text(speaker, row["original_text"], row["context"])}


@dataclass(frozen=True, slots=True)
class TableCopy:
    """How one SQLite table is copied: all its columns, in ``order``."""

    table: str
    order: str
    #: the SQLite table holding this table's vectors by ``rid`` (target column ``embedding``)
    vectors: str = ""
    #: columns written with these values instead of the source's (see the module docstring)
    released: Mapping[str, Any] = field(default_factory=dict)
    #: target-only columns computed from a source row (by column name)
    extra: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    #: part of the FluxMem graph (left out by ``skip_graph``)
    graph: bool = False


#: The tables copied, in order (a table after those its rows refer to).
COPIED: tuple[TableCopy, ...] = (
    TableCopy("messages", "seq"),
    TableCopy("entries", "rid", vectors="vectors", extra=_entry_extra),
    TableCopy("history", "seq"),
    TableCopy("update_queue", "entry_id"),
    TableCopy("update_checks", "entry_id, stage"),
    TableCopy("usage", "kind, op"),
    TableCopy("graph_nodes", "rid", vectors="graph_vectors", graph=True),
    TableCopy("graph_edges", "kind, src, dst", graph=True),
    TableCopy("graph_history", "seq", graph=True),
    TableCopy("task_sessions", "id", released={"claim": "", "claimed_until": 0.0}, graph=True),
)

#: The SQLite tables not copied, and why.
NOT_COPIED: Mapping[str, str] = MappingProxyType(
    {
        "meta": "the target's own (schema version, locks); the embedder binding is carried over "
        "by binding the target to the same embedder",
        "schema_migrations": "the target's own record of its migration steps",
        "sqlite_sequence": (
            "SQLite's counters; the target's sequences continue after the copied ids"
        ),
        "vectors": "copied as entries.embedding",
        "graph_vectors": "copied as graph_nodes.embedding",
        "graph_fts": "derived: the target computes its own full-text terms (search_terms)",
        "index_log": "derived: the change log of the SQLite search index",
        "reembed_vectors": "derived: vectors an interrupted re-embed staged; run again on the "
        "target, it embeds them again",
    }
)


def source_columns(s: sqlite3.Connection, table: str) -> list[str]:
    """The columns of SQLite table ``table``, in schema order."""
    return [str(r[1]) for r in s.execute(f"PRAGMA table_info({table})")]


def migrate(
    src: str,
    dst: str,
    *,
    schema: str = "lightmem",
    skip_graph: bool = False,
    bulk_reindex_min: int = 20_000,
) -> dict[str, Any]:
    if not src.startswith("sqlite:") or not dst.startswith("postgres"):
        raise InvalidInputError("--from: expected sqlite:PATH; --to: expected postgres:DSN")
    path = src.removeprefix("sqlite:")
    dsn = dst.removeprefix("postgres:") if dst.startswith("postgres:postgres") else dst
    source = SQLiteStore(path)  # refuses foreign or newer files, migrates older ones
    try:
        with source.db.read() as snapshot:
            return _migrate(snapshot.raw, schema, dsn, skip_graph, bulk_reindex_min)
    finally:
        source.close()


def _migrate(
    s: sqlite3.Connection,
    schema: str,
    dsn: str,
    skip_graph: bool,
    bulk_reindex_min: int,
) -> dict[str, Any]:
    graph_nodes = s.execute("SELECT count(*) FROM graph_nodes").fetchone()[0]
    bound = s.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    copies = [t for t in COPIED if not (skip_graph and t.graph)]
    target = PostgresStore(dsn, schema=schema, bulk_reindex_min=bulk_reindex_min)
    try:
        if bound:
            meta = json.loads(bound[0])
            target.bind_embedder(meta["name"], meta["dim"])
        with target.db.transaction() as tx:
            c = tx.raw
            if c.execute("SELECT count(*) FROM entries").fetchone()[0]:
                raise StoreError(f"--to: schema {schema!r} already holds entries")
            n_entries = s.execute("SELECT count(*) FROM entries").fetchone()[0]
            bulk = n_entries >= target.bulk_reindex_min
            if bulk:
                target.entry_index.drop_search_indexes(c)
            for spec in copies:
                _copy(s, c, spec)
                _continue_sequences(c, spec.table)
            target.fill_search_terms(c)  # the full-text terms, computed in Python
            if bulk:
                target.entry_index.build_search_indexes(c, n_entries)
            c.execute(f"ANALYZE {', '.join(t.table for t in copies)}")
        tables: dict[str, dict[str, Any]] = {}
        with target.db.transaction() as tx:
            for spec in copies:
                json_cols = _json_columns(tx.raw, spec.table)
                a = _digest(_rows(s, spec, released=True), json_cols)
                b = _digest(_target_rows(s, tx.raw, spec), frozenset())
                tables[spec.table] = {
                    "rows": a[0],
                    "copied": b[0],
                    "checksum_match": a[1] == b[1],
                }
        return {
            "schema": schema,
            "graph_nodes_skipped": graph_nodes if skip_graph else 0,
            **tables,
            "verified": all(
                t["rows"] == t["copied"] and t["checksum_match"] for t in tables.values()
            ),
        }
    finally:
        target.close()


def _select(s: sqlite3.Connection, spec: TableCopy) -> tuple[list[str], str]:
    """The source columns of ``spec`` and the SELECT reading them (with the vector)."""
    cols = source_columns(s, spec.table)
    sel = ", ".join(f"t.{c}" for c in cols)
    if spec.vectors:
        sel += f", v.vec FROM {spec.table} t JOIN {spec.vectors} v ON v.rid = t.rid"
    else:
        sel += f" FROM {spec.table} t"
    return (
        cols,
        f"SELECT {sel} ORDER BY {', '.join('t.' + o.strip() for o in spec.order.split(','))}",
    )


def _rows(s: sqlite3.Connection, spec: TableCopy, *, released: bool) -> Iterator[dict[str, Any]]:
    """The source rows of ``spec`` by column name (``embedding`` as float32 values)."""
    import numpy as np

    cols, sql = _select(s, spec)
    for r in s.execute(sql):
        row = dict(zip(cols, r, strict=False))
        if spec.vectors:
            row["embedding"] = np.frombuffer(r[len(cols)], dtype=np.float32)
        if released:
            row.update(spec.released)
        yield row


def _copy(s: sqlite3.Connection, c: Any, spec: TableCopy) -> None:
    names: list[str] = []
    batch: list[tuple[Any, ...]] = []
    with c.cursor() as cur:
        for row in _rows(s, spec, released=True):
            if spec.extra is not None:
                row.update(spec.extra(row))
            if not names:
                names = list(row)
            batch.append(tuple(row[n] for n in names))
            if len(batch) >= _BATCH:
                _insert(cur, spec.table, names, batch)
                batch = []
        if batch:
            _insert(cur, spec.table, names, batch)


def _insert(cur: Any, table: str, names: list[str], rows: list[tuple[Any, ...]]) -> None:
    marks = ",".join(["%s"] * len(names))
    cur.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", rows)


def _continue_sequences(c: Any, table: str) -> None:
    """New rows of ``table`` on the target get ids after the copied ones."""
    serial = c.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = %s AND column_default LIKE 'nextval%%'",
        (table,),
    ).fetchall()
    for (col,) in serial:
        c.execute(
            f"SELECT setval(pg_get_serial_sequence(%s, %s), coalesce(max({col}), 0) + 1, "
            f"false) FROM {table}",
            (table, col),
        )


def _target_rows(s: sqlite3.Connection, c: Any, spec: TableCopy) -> Iterator[dict[str, Any]]:
    """The target's rows of ``spec``, over the source's columns (and the vector)."""
    cols = source_columns(s, spec.table) + (["embedding"] if spec.vectors else [])
    cur = c.execute(f"SELECT {', '.join(cols)} FROM {spec.table}")
    for r in cur:
        yield dict(zip(cols, r, strict=True))


def _json_columns(c: Any, table: str) -> frozenset[str]:
    """The target's JSON columns of ``table`` (the source holds them as JSON text)."""
    rows = c.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = %s AND data_type = 'jsonb'",
        (table,),
    ).fetchall()
    return frozenset(str(r[0]) for r in rows)


def _digest(rows: Iterator[dict[str, Any]], decode: frozenset[str]) -> tuple[int, str]:
    """Row count and an order-independent checksum; the columns in ``decode`` are JSON
    text compared as values, vectors are compared as their float32 values."""
    canon = []
    for r in rows:
        values = []
        for name, v in r.items():
            if name in decode and isinstance(v, str):
                v = json.loads(v)
            if hasattr(v, "to_list"):  # a pgvector Vector
                v = v.to_list()
            if hasattr(v, "tolist"):  # a numpy vector
                v = v.tolist()
            if name == "embedding":
                v = [float(x) for x in v]
            values.append(json.dumps(v, sort_keys=True, ensure_ascii=False))
        canon.append("\x1f".join(values))
    h = hashlib.sha256("\n".join(sorted(canon)).encode()).hexdigest()
    return len(canon), h
