"""The SQLite database object: one connection (WAL), its lock, transactions and migrations.

A store's file by default; :class:`SQLiteFile` describes another kind of file (the server's
API keys) run on the same object."""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from lightmem.errors import InvalidInputError, StoreError
from lightmem.store.db import Migration, Session, closed_error
from lightmem.store.sql import SQLITE
from lightmem.store.sqlite_schema import APP_ID, MIGRATIONS

__all__ = ["STORE_FILE", "SQLiteDatabase", "SQLiteFile"]

# Text that is not valid UTF-8 (written by another tool) reads with U+FFFD, never an error.
_TEXT = functools.partial(str, encoding="utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class SQLiteFile:
    """A kind of SQLite file lightmem keeps: how it is recognised, created and migrated,
    and how its errors name it. A file records the steps applied in ``meta.schema_version``
    and, from the second step on, by name in ``schema_migrations`` (the steps create both)."""

    #: ``PRAGMA application_id``: a file with tables and another id is not touched.
    app_id: int
    migrations: tuple[Migration, ...]
    #: What errors while opening the file begin with (the setting that named it).
    setting: str
    #: What errors of the open file begin with; ``{path!r}`` is replaced by its path.
    label: str
    #: A table marking a file of this kind written before it had a ``meta`` table: such a
    #: file is taken as at step 0 and all steps (which must be idempotent) run over it.
    adopts: str | None = None
    #: ``PRAGMA synchronous``: NORMAL may lose the last commits on a power cut (never the
    #: file); FULL keeps every commit.
    synchronous: str = "NORMAL"


#: A memory store's file.
STORE_FILE = SQLiteFile(APP_ID, MIGRATIONS, setting="store.path", label="store {path!r}")


class SQLiteDatabase:
    """A :class:`~lightmem.store.db.Database` on one SQLite file.

    One connection serialised by a re-entrant lock, so an instance may be shared by threads;
    several processes may open the same file (WAL mode, busy timeout). A file the process
    cannot write (or ``read_only=True``) is opened read-only: reads work, writes raise
    :class:`StoreError`. A file that is not of its ``kind`` (a store unless said), or has a
    newer schema, is refused; an older one is migrated (unless read-only)."""

    dialect = SQLITE
    row_lock = ""  # BEGIN IMMEDIATE already holds the database

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_s: float = 30.0,
        read_only: bool = False,
        kind: SQLiteFile = STORE_FILE,
    ) -> None:
        self.path = str(path)
        self.kind = kind
        self.label = kind.label.format(path=self.path)
        self._lock = threading.RLock()
        self._closed = False
        self._commits = 0
        memory = self.path == ":memory:"
        if not memory:
            p = Path(self.path)
            if p.exists() and not p.is_file():
                raise StoreError(f"{kind.setting}: {self.path!r} is not a file")
            if not p.parent.exists():
                raise StoreError(f"{kind.setting}: folder {str(p.parent)!r} does not exist")
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
                f"{self.kind.setting}: {self.path!r} is not a readable SQLite file ({exc})"
            ) from exc
        marked = "meta" in tables or (self.kind.adopts is not None and self.kind.adopts in tables)
        if tables and (app_id != self.kind.app_id or not marked):
            conn.close()
            raise StoreError(
                f"{self.kind.setting}: {self.path!r} is a SQLite database of another "
                "application; lightmem will not touch it"
            )
        if not self.read_only:
            try:
                if self.path != ":memory:":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {self.kind.synchronous}")
            except sqlite3.Error as exc:
                conn.close()
                raise StoreError(
                    f"{self.kind.setting}: cannot initialise {self.path!r}: {exc}"
                ) from exc
        return conn

    def _migrate(self) -> None:
        latest = len(self.kind.migrations)
        with self.read() as s:
            tables = {r[0] for r in s.all("SELECT name FROM sqlite_master")}
            # No meta table: a new file, or an old one of a kind that adopts it (_connect).
            row = (
                s.one("SELECT value FROM meta WHERE key = 'schema_version'")
                if "meta" in tables
                else None
            )
        version = self._version(row) if "meta" in tables else 0
        if version > latest:
            raise StoreError(
                f"{self.kind.setting}: {self.path!r} has schema version {version}; this "
                f"lightmem reads up to {latest}: upgrade lightmem"
            )
        if version == latest:
            return
        if self.read_only and version == 0 and self.kind.adopts in tables:
            return  # written before it recorded its steps: read as it is (they add no data)
        if self.read_only:
            raise StoreError(
                f"{self.kind.setting}: {self.path!r} is read-only and at schema version "
                f"{version}; open it writable once to migrate it to {latest}"
            )
        with self.transaction() as s:
            if not tables:
                s.raw.execute(f"PRAGMA application_id = {self.kind.app_id}")
            for number, step in enumerate(self.kind.migrations[version:], start=version + 1):
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
                (str(latest),),
            )

    def _version(self, row: Sequence[object] | None) -> int:
        """The schema version a store's meta table holds; a missing or non-numeric one
        (a file damaged by another tool) is refused rather than migrated over."""
        value = None if row is None else row[0]
        if isinstance(value, str | int) and str(value).strip().isdigit():
            return int(value)
        raise StoreError(
            f"{self.kind.setting}: {self.path!r} is damaged: its meta table holds "
            + ("no schema version" if row is None else f"the schema version {value!r}")
            + "; restore the file from a backup"
        )

    # -- transactions and reads ---------------------------------------------------------
    def _check_open(self) -> None:
        # Checked here, not left to sqlite3: PostgreSQL says "closed" alike (closed_error).
        if self._closed:
            raise closed_error(self.label)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        with self._lock:
            self._check_open()
            if self.read_only:
                raise StoreError(f"{self.label} is read-only: cannot write")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot start a transaction on {self.path!r}: {exc}") from exc
            try:
                yield Session(self._conn, SQLITE)
            except BaseException as exc:
                self._rollback(exc)
                _reraise(exc, self.label)
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
                _reraise(exc, self.label)
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
                raise StoreError(f"{self.label}: cannot enable secure_delete: {exc}") from exc
            try:
                yield
            finally:
                self._conn.execute(f"PRAGMA secure_delete = {before}")

    def compact(self, tables: Sequence[str], reclaim: bool = False) -> bool:
        """Merge the node full-text index (its segments keep deleted terms until merged),
        VACUUM the file (which gives its free pages back: ``reclaim`` changes nothing) and
        truncate the WAL (it holds old page images); False when another connection kept
        the WAL from being checkpointed completely."""
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
                    f"{self.label}: purge committed, compaction failed: {exc}"
                ) from exc
            self._commits += 1  # the file was rewritten: caches keyed on commits reload
            return int(busy) == 0

    def size_bytes(self) -> int:
        """The file's pages in use (its free pages left out)."""
        with self.read() as s:
            pages = int(s.one("PRAGMA page_count")[0]) - int(s.one("PRAGMA freelist_count")[0])
            return pages * int(s.one("PRAGMA page_size")[0])

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


def _reraise(exc: BaseException, label: str) -> None:
    """Raise driver errors as StoreError with the driver's message (others pass through)."""
    if isinstance(exc, sqlite3.Error | UnicodeDecodeError):
        # (sqlite3 raises UnicodeDecodeError for an error message naming scribbled bytes.)
        raise StoreError(f"{label}: {exc}") from exc
    if isinstance(exc, UnicodeEncodeError):
        raise InvalidInputError(
            f"value: text with a lone surrogate cannot be stored ({exc})"
        ) from exc
