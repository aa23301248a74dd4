"""Building, catching up, saving and loading the embedded store's search columns.

The SQLite file is the source of truth. The columns reflect it up to a *stamp*: the last
``index_log`` sequence number they applied (the log lists the row id of every entry row
written or removed, in the same transaction). Catching up from a stamp reads the logged
rows, so an edit in any process is applied in place, never by a rebuild.

A large store's columns are saved to ``<store>.index`` (:mod:`lightmem.store.index_file`)
with their stamp and the store's ``index_epoch`` (random, made with the store). On open
the file is read, caught up and checked against the store (epoch, dimension, stamp not
ahead of the store, live row count, a sample of ids); anything that does not match is
logged and the columns are rebuilt from the store, which is then saved again. A crash
after a SQLite commit and before a save leaves an older file: it is caught up from the log.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lightmem.store import index_file
from lightmem.store.ann_index import IndexPolicy
from lightmem.store.db import Session
from lightmem.store.sqlite_db import SQLiteDatabase
from lightmem.store.text_index import Stemmer
from lightmem.store.vector_cache import VectorRows
from lightmem.types import entry_search_text

__all__ = ["FORMAT", "GROWN", "ROW_SQL", "SavedIndex", "Stamp", "renew_epoch", "store_epoch"]

log = logging.getLogger("lightmem.store")

#: What the saved sections hold; a file of another format is rebuilt (2: postings of at most
#: text_index.MAX_DOCUMENT_TERMS terms a row).
FORMAT = 2
ROW_SQL = (
    "SELECT e.id, e.user_id, e.agent_id, e.run_id, e.ts, e.speaker_key, "
    "e.topic_id, e.kind, v.vec, "
    "CASE WHEN json_valid(e.metadata) THEN json_extract(e.metadata, '$.event_id') END, "
    "CASE WHEN e.speaker_name != '' THEN e.speaker_name ELSE e.speaker_id END, "
    "e.original_text, e.context, e.rid "
    "FROM entries e JOIN vectors v ON v.rid = e.rid WHERE {where} ORDER BY e.rid"
)
_CHUNK = 20_000  # rows read and indexed at a time (bounds the memory of a rebuild)
GROWN = ("matrix", "rids", "ts", "alive")  # sections saved with room to append
_SAMPLE = 8  # ids checked against the store when a saved file is read


def store_epoch(s: Session) -> str:
    row = s.one("SELECT value FROM meta WHERE key = 'index_epoch'")
    return str(row[0]) if row else ""


def renew_epoch(s: Session, epoch: str | None = None) -> str:
    """Give the store a new index epoch (``epoch``, or a random one): every process's
    columns and any saved file of the old epoch are then read again or rebuilt."""
    epoch = epoch or secrets.token_hex(16)
    s.execute("UPDATE meta SET value = ? WHERE key = 'index_epoch'", (epoch,))
    return epoch


@dataclass(slots=True)
class Stamp:
    """What the columns reflect: the store's epoch, last row id, last log sequence."""

    epoch: str = ""
    log_seq: int = 0
    changes: int = 0  # rows added or removed since the saved (or loaded) file


class SavedIndex:
    """The columns' stamp and their file beside the store (none for ``:memory:``)."""

    def __init__(self, db: SQLiteDatabase, policy: IndexPolicy) -> None:
        self.db = db
        self.policy = policy
        self.state = Stamp()
        self.path: Path | None = None if db.path == ":memory:" else Path(db.path + ".index")

    # -- from the store ---------------------------------------------------------------
    def build(self, s: Session, dim: int | None, stemmer: Stemmer) -> VectorRows:
        """All columns from the store (in snapshot ``s``)."""
        self.state = Stamp(store_epoch(s), _log_max(s))
        rows = VectorRows(dim or _stored_dim(s))
        cur = s.execute(ROW_SQL.format(where="1"))
        while batch := cur.fetchmany(_CHUNK):
            self._append(rows, batch, stemmer)
        self.state.changes = rows.n_alive
        return rows

    def catch_up(self, s: Session, rows: VectorRows, stemmer: Stemmer) -> None:
        """Apply what the store committed since the stamp, in log order: removed row ids
        are tombstoned, added ones read (SQLite may hand out a removed row's id again)."""
        st = self.state
        logged = s.all(
            "SELECT seq, rid, added FROM index_log WHERE seq > ? ORDER BY seq", (st.log_seq,)
        )
        if not logged:
            return
        pending: dict[int, None] = {}  # added since the stamp and still there, in order
        gone: list[int] = []
        for _, rid, added in logged:
            if added:
                pending[int(rid)] = None
            elif int(rid) in pending:
                del pending[int(rid)]
            else:
                gone.append(int(rid))
        st.changes += rows.remove(gone)
        added_rids = list(pending)
        for i in range(0, len(added_rids), 500):
            part = added_rids[i : i + 500]
            found = s.all(ROW_SQL.format(where=f"e.rid IN ({','.join('?' * len(part))})"), part)
            self._append(rows, found, stemmer)
        st.log_seq = int(logged[-1][0])

    def _append(self, rows: VectorRows, found: list[Any], stemmer: Stemmer) -> None:
        texts = [entry_search_text(r[10], r[11], r[12]) for r in found]
        rows.append(found, texts, stemmer)
        self.state.changes += len(found)

    # -- the file -----------------------------------------------------------------------
    def load(self, s: Session, dim: int | None, stemmer: Stemmer) -> VectorRows | None:
        """The saved columns caught up with the store, or None (no file, or one that does
        not match: logged, and left for the caller to rebuild and overwrite)."""
        if self.path is None or not self.path.exists():
            return None
        try:
            return self._load(s, dim, stemmer)
        except index_file.DamagedIndexFile as exc:
            log.warning("search index %s not used, rebuilding it: %s", self.path, exc)
            return None

    def _load(self, s: Session, dim: int | None, stemmer: Stemmer) -> VectorRows:
        assert self.path is not None
        meta, arrays = index_file.read(self.path)
        if meta.get("format") != FORMAT:
            raise index_file.DamagedIndexFile(f"format {meta.get('format')!r}, not {FORMAT}")
        epoch = store_epoch(s)
        if meta.get("epoch") != epoch or not epoch:
            raise index_file.DamagedIndexFile("it belongs to another store")
        want = dim or _stored_dim(s)
        if meta.get("dim") != want:
            raise index_file.DamagedIndexFile(f"{meta.get('dim')}-d, the store is {want}-d")
        try:  # its sections, checksummed, still decode as what this version writes
            st = Stamp(epoch, int(meta["log_seq"]))
            rows = VectorRows.from_arrays(want, int(meta["n"]), arrays)
        except (ValueError, KeyError, IndexError, TypeError, RuntimeError) as exc:
            raise index_file.DamagedIndexFile(f"its sections do not decode: {exc}") from exc
        if st.log_seq > _log_max(s):
            raise index_file.DamagedIndexFile("it is ahead of the store (a restored file?)")
        # From here on an error is a bug of the catch-up, not a damaged file: it is raised.
        self.state = st
        self.catch_up(s, rows, stemmer)
        live = int(s.one("SELECT count(*) FROM entries")[0])  # (its id index is small)
        if rows.n_alive != live:
            raise index_file.DamagedIndexFile(f"{rows.n_alive} live rows, the store has {live}")
        alive = np.flatnonzero(rows.alive)
        picks = alive[np.linspace(0, alive.size - 1, min(_SAMPLE, alive.size)).astype(int)]
        for p in picks.tolist():
            found = s.one("SELECT id FROM entries WHERE rid = ?", (int(rows.rids[p]),))
            if found is None or found[0] != rows.ids[p]:
                raise index_file.DamagedIndexFile(f"row {p} does not match the store")
        return rows

    def save(self, rows: VectorRows, *, force: bool) -> None:
        """Write the columns to the file (``force``: after a build; else only once
        ``policy.save_after`` rows changed since the last save)."""
        st = self.state
        if self.path is None or self.db.read_only or rows.n_alive < self.policy.persist_min_rows:
            return
        if not force and st.changes < self.policy.save_after:
            return
        meta = {
            "format": FORMAT,
            "epoch": st.epoch,
            "dim": rows.dim,
            "n": rows.n,
            "log_seq": st.log_seq,
        }
        try:
            index_file.write(self.path, meta, rows.to_arrays(), GROWN)
        except OSError as exc:
            # Derived data: searches go on from memory, the next open rebuilds or catches up.
            log.warning("search index %s not saved: %s", self.path, exc)
            return
        st.changes = 0

    def rewrite(self, rows: VectorRows) -> bool:
        """Replace an existing file now (after a purge): removed, saved again if the store
        is still of the size that is saved, under a new epoch then given to the store.

        The new epoch makes every process drop columns mapped from the old file (see
        :mod:`lightmem.store.index_file`) and read the new one: a mapping would keep the
        removed file's blocks, purged vectors included, on disk until that process
        closed. False when there was no file to replace."""
        if self.path is None or self.db.read_only or not self.path.exists():
            return False
        self.path.unlink()  # first: should the save fail, no purged row stays on disk
        epoch = secrets.token_hex(16)
        self.state.epoch = epoch
        self.save(rows, force=True)
        # After the file: a process that sees the new epoch finds the file that has it
        # (a crash in between leaves a file of an unknown epoch, which is rebuilt).
        with self.db.transaction() as t:
            renew_epoch(t, epoch)
        return True


def _log_max(s: Session) -> int:
    return int(s.one("SELECT coalesce(max(seq), 0) FROM index_log")[0])


def _stored_dim(s: Session) -> int:
    row = s.one("SELECT length(vec) FROM vectors LIMIT 1")
    return int(row[0]) // 4 if row else 0
