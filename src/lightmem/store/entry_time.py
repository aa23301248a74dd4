"""The stored form of an entry's resolved time (see :mod:`lightmem.timeresolve`): four
columns both SQL backends add to ``entries`` in the migration step named
:data:`STEP`. Rows written before that step read back with no resolved time."""

from __future__ import annotations

__all__ = ["COLUMNS", "COPY_TYPES", "STEP", "add_columns"]

#: the name of the migration step that adds the columns
STEP = "entry_event_time"

#: the columns, in the order :data:`~lightmem.store.sql.ENTRY_COLS` ends with them
COLUMNS = ("time_start", "time_end", "time_unit", "time_phrase")

#: their binary COPY types (PostgreSQL bulk load)
COPY_TYPES = ("float8", "float8", "text", "text")


def add_columns(real: str) -> str:
    """The step's SQL: epoch seconds of the span's first midnight and of the midnight after
    its last day (NULL: none resolved), its unit and the phrase it was read from; and an
    index for time filters."""
    return f"""
ALTER TABLE entries ADD COLUMN time_start {real};
ALTER TABLE entries ADD COLUMN time_end {real};
ALTER TABLE entries ADD COLUMN time_unit TEXT NOT NULL DEFAULT '';
ALTER TABLE entries ADD COLUMN time_phrase TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS entries_time ON entries (time_start, time_end)
"""
