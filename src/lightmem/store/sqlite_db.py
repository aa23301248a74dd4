"""The SQLite database object: one connection (WAL), its lock, transactions and migrations."""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from lightmem.errors import InvalidInputError, StoreError
from lightmem.store.db import Session, closed_error
from lightmem.store.sql import SQLITE
from lightmem.store.sqlite_schema import APP_ID, MIGRATIONS, SCHEMA_VERSION

__all__ = ["SQLiteDatabase"]

# Text that is not valid UTF-8 (written by another tool) reads with U+FFFD, never an error.
_TEXT = functools.partial(str, encoding="utf-8", errors="replace")


class SQLiteDatabase:
    """A :class:`~lightmem.store.db.Database` on one SQLite file.

    One connection serialised by a re-entrant lock, so an instance may be shared by threads;
    several processes may open the same file (WAL mode, busy timeout). A file the process
    cannot write (or ``read_only=True``) is opened read-only: reads work, writes raise
    :class:`StoreError`. A file that is not a lightmem store, or has a newer schema, is
    refused; an older one is migrated (unless read-only)."""

    dialect = SQLITE
    row_lock = ""  # BEGIN IMMEDIATE already holds the database

    def __init__(
        self, path: str | Path, *, busy_timeout_s: float = 30.0, read_only: bool = False
    ) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._closed = False
        self._commits = 0
        memory = self.path == ":memory:"
        if not memory:
            p = Path(self.path)
            if p.exists() and not p.is_file():
                raise StoreError(f"store.path: {self.path!r} is not a file")
            if not p.parent.exists():
                raise StoreError(f"store.path: folder {str(p.parent)!r} does not exist")
            read_only = read_only or (p.exists() and not os.access(p, os.W_OK))
        self.read_only = read_only
        self._conn = self._connect(busy_timeout_s)
        try:
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    @property
    def commits(self) -> int:
        return self._commits

    def _connect(self, busy_timeout_s: float) -> sqlite3.Connection:
        target, uri = self.path, False
        if self.read_only:
            target, uri = f"file:{quote(str(Path(self.path).resolve()))}?mode=ro", True
        try:
            conn = sqlite3.connect(
                target,
                timeout=busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
                uri=uri,
            )
            conn.text_factory = _TEXT
            conn.execute("PRAGMA foreign_keys = ON")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            # (A scribbled schema table makes sqlite3 fail decoding its own error message.)
            raise StoreError(
                f"store.path: {self.path!r} is not a readable SQLite file ({exc})"
            ) from exc
        if tables and (app_id != APP_ID or "meta" not in tables):
            conn.close()
            raise StoreError(
                f"store.path: {self.path!r} is a SQLite database of another application; "
                "lightmem will not touch it"
            )
        if not self.read_only:
            try:
                if self.path != ":memory:":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.Error as exc:
                conn.close()
                raise StoreError(f"store.path: cannot initialise {self.path!r}: {exc}") from exc
        return conn

    def _migrate(self) -> None:
        with self.read() as s:
            fresh = s.one("SELECT count(*) FROM sqlite_master")[0] == 0
            row = None if fresh else s.one("SELECT value FROM meta WHERE key = 'schema_version'")
        version = 0 if fresh else self._version(row)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store.path: {self.path!r} has schema version {version}; this lightmem reads "
                f"up to {SCHEMA_VERSION}: upgrade lightmem"
            )
        if version == SCHEMA_VERSION:
            return
        if self.read_only:
            raise StoreError(
                f"store.path: {self.path!r} is read-only and at schema version {version}; "
                f"open it writable once to migrate it to {SCHEMA_VERSION}"
            )
        with self.transaction() as s:
            if fresh:
                s.raw.execute(f"PRAGMA application_id = {APP_ID}")
            for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
                for stmt in step.statements():
                    s.execute(stmt)
                if number > 1:
                    s.execute(
                        "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                        (number, step.name, time.time()),
                    )
            s.execute(
                "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    def _version(self, row: Sequence[object] | None) -> int:
        """The schema version a store's meta table holds; a missing or non-numeric one
        (a file damaged by another tool) is refused rather than migrated over."""
        value = None if row is None else row[0]
        if isinstance(value, str | int) and str(value).strip().isdigit():
            return int(value)
        raise StoreError(
            f"store.path: {self.path!r} is damaged: its meta table holds "
            + ("no schema version" if row is None else f"the schema version {value!r}")
            + "; restore the file from a backup"
        )

    # -- transactions and reads ---------------------------------------------------------
    def _check_open(self) -> None:
        # Checked here, not left to sqlite3: PostgreSQL says "closed" alike (closed_error).
        if self._closed:
            raise closed_error(f"store {self.path!r}")

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        with self._lock:
            self._check_open()
            if self.read_only:
                raise StoreError(f"store {self.path!r} is read-only: cannot write")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot start a transaction on {self.path!r}: {exc}") from exc
            try:
                yield Session(self._conn, SQLITE)
            except BaseException as exc:
                self._rollback(exc)
                _reraise(exc, self.path)
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                err = StoreError(f"commit failed on {self.path!r}: {exc}")
                self._rollback(err)
                raise err from exc
            # PRAGMA data_version does not change for this connection's own commits.
            self._commits += 1

    def _rollback(self, cause: BaseException) -> None:
        # SQLite may already have rolled back (e.g. on SQLITE_FULL); a second ROLLBACK
        # would raise and hide the real error, so only roll back an open transaction.
        if not self._conn.in_transaction:
            return
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            cause.add_note(f"the rollback failed too: {exc}")

    @contextmanager
    def read(self) -> Iterator[Session]:
        """One snapshot (a deferred transaction unless already inside one)."""
        with self._lock:
            self._check_open()
            own = not self._conn.in_transaction
            try:
                if own:
                    self._conn.execute("BEGIN")
                yield Session(self._conn, SQLITE)
            except BaseException as exc:
                if own:
                    self._rollback(exc)
                _reraise(exc, self.path)
                raise
            if own:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    raise StoreError(f"read failed on {self.path!r}: {exc}") from exc

    # -- erasure (the SQLite tail of lightmem.store.purge) --------------------------------
    @contextmanager
    def erasing(self) -> Iterator[None]:
        """``secure_delete`` on for the block: freed pages are zeroed, not left readable."""
        with self._lock:
            self._check_open()
            try:
                before = int(self._conn.execute("PRAGMA secure_delete").fetchone()[0])
                self._conn.execute("PRAGMA secure_delete = ON")
            except sqlite3.Error as exc:
                raise StoreError(
                    f"store {self.path!r}: cannot enable secure_delete: {exc}"
                ) from exc
            try:
                yield
            finally:
                self._conn.execute(f"PRAGMA secure_delete = {before}")

    def compact(self, tables: Sequence[str]) -> bool:
        """Merge the node full-text index (its segments keep deleted terms until merged),
        VACUUM the file and truncate the WAL (it holds old page images); False when another
        connection kept the WAL from being checkpointed completely."""
        if not tables:
            return True
        with self._lock:
            self._check_open()
            try:
                if "graph_nodes" in tables:
                    self._conn.execute("INSERT INTO graph_fts (graph_fts) VALUES ('optimize')")
                self._conn.execute("VACUUM")
                busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            except sqlite3.Error as exc:
                raise StoreError(
                    f"store {self.path!r}: purge committed, compaction failed: {exc}"
                ) from exc
            self._commits += 1  # the file was rewritten: caches keyed on commits reload
            return int(busy) == 0

    def data_version(self) -> int:
        """Changes when another connection commits (see PRAGMA data_version)."""
        with self._lock:
            self._check_open()
            try:
                return int(self._conn.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error as exc:
                raise StoreError(f"read failed on {self.path!r}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._closed = True
            try:
                self._conn.close()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot close {self.path!r}: {exc}") from exc


def _reraise(exc: BaseException, path: str) -> None:
    """Raise driver errors as StoreError with the driver's message (others pass through)."""
    if isinstance(exc, sqlite3.Error | UnicodeDecodeError):
        # (sqlite3 raises UnicodeDecodeError for an error message naming scribbled bytes.)
        raise StoreError(f"store {path!r}: {exc}") from exc
    if isinstance(exc, UnicodeEncodeError):
        raise InvalidInputError(
            f"value: text with a lone surrogate cannot be stored ({exc})"
        ) from exc
