"""What the SQL backends share: WHERE clauses per dialect and row <-> object mapping.

JSON is written strictly (no NaN or Infinity, which SQLite's JSON functions refuse) and
read defensively: a row written before that rule with ``NaN`` reads back with the token as
a string, and lone surrogates in stored JSON read back as U+FFFD. JSON no decoder reads
(a row damaged by another tool) raises :class:`DamagedRowError` naming the table, row and
column: reading that one row fails, while lists, searches and histories skip it with a
warning (:func:`readable`), so one bad row can never make them fail; the SQLite store's
``integrity_check()`` lists such rows."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from lightmem.errors import InvalidInputError, StoreError
from lightmem.store.values import BufferedMessage, MessageStatus
from lightmem.timespan import span_from_epochs, span_to_epochs
from lightmem.types import Filters, HistoryEvent, MemoryEntry, Message, Scope

__all__ = [
    "ENTRY_COLS",
    "IN_CHUNK",
    "POSTGRES",
    "SQLITE",
    "DamagedRowError",
    "Dialect",
    "buffered_from_rows",
    "buffered_params",
    "buffered_sql",
    "check_vector",
    "counts_dict",
    "dumps",
    "entry_from_row",
    "entry_params",
    "filter_sql",
    "history_from_row",
    "json_value",
    "message_from_row",
    "placeholders",
    "readable",
    "scope_sql",
    "ts",
    "vector_from_blob",
]

log = logging.getLogger("lightmem.store")
_T = TypeVar("_T")

#: The entry columns both SQL backends read and write, in this order.
ENTRY_COLS = (
    "id, kind, user_id, agent_id, run_id, text, original_text, ts, speaker_id, speaker_name, "
    "topic_id, source_ids, context, version, created_at, updated_at, metadata"
    # the resolved time (migration step "entry_event_time")
    ", time_start, time_end, time_unit, time_phrase"
    # validity (migration step "entry_validity")
    ", superseded_by, valid_to"
)


@dataclass(frozen=True, slots=True)
class Dialect:
    placeholder: str
    true: str
    json_text: Callable[[str, str], str]  # (column, key) -> SQL expression for the text value


# json_valid first: json_extract raises on a malformed document (e.g. one holding NaN).
SQLITE = Dialect(
    "?",
    "1",
    lambda col, key: f"CASE WHEN json_valid({col}) THEN json_extract({col}, '$.{key}') END",
)
POSTGRES = Dialect("%s", "TRUE", lambda col, key: f"{col}->>'{key}'")


#: Ids (or other values) per ``IN (...)`` list: a long list is read in chunks of this many.
IN_CHUNK = 500


def placeholders(values: Sized) -> str:
    """``?,?,?``: one ``?`` placeholder per value, comma-separated (``?``-SQL, which
    :class:`~lightmem.store.db.Session` adapts to the backend)."""
    return ",".join("?" * len(values))


def scope_sql(d: Dialect, scope: Scope, prefix: str = "") -> tuple[str, list[Any]]:
    """Rows whose scope fields equal the scope's non-empty fields."""
    clauses = [d.true]
    params: list[Any] = []
    for col, value in scope.as_dict().items():
        if value:
            clauses.append(f"{prefix}{col} = {d.placeholder}")
            params.append(value)
    return " AND ".join(clauses), params


def filter_sql(d: Dialect, scope: Scope, f: Filters, prefix: str = "") -> tuple[str, list[Any]]:
    where, params = scope_sql(d, scope, prefix)
    clauses = [where]
    p = d.placeholder
    for column, op, value in (
        ("ts", ">=", f.time_from.timestamp() if f.time_from else None),
        ("ts", "<=", f.time_to.timestamp() if f.time_to else None),
        ("speaker_key", "=", f.speaker.lower() if f.speaker is not None else None),
        ("topic_id", "=", f.topic_id),
    ):
        if value is not None:
            clauses.append(f"{prefix}{column} {op} {p}")
            params.append(value)
    if f.kinds is not None:
        clauses.append(f"{prefix}kind IN ({','.join([p] * len(f.kinds))})")
        params.extend(f.kinds)
    if f.event_id is not None:
        clauses.append(f"{d.json_text(prefix + 'metadata', 'event_id')} = {p}")
        params.append(f.event_id)
    return " AND ".join(clauses), params


def check_vector(vec: npt.NDArray[Any], dim: int | None) -> None:
    """Refuse a vector the store cannot hold (not 1-d float32 of the bound dimension)."""
    if vec.dtype != np.float32 or vec.ndim != 1 or (dim and vec.shape[0] != dim):
        raise StoreError(
            f"vector of shape {vec.shape} ({vec.dtype}) does not match the store ({dim}-d float32)"
        )


def dumps(value: Any, field: str = "metadata") -> str:
    """Strict JSON text for a JSON column; NaN and Infinity are refused with the field."""
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)
    except ValueError as exc:
        raise InvalidInputError(
            f"{field}: NaN and Infinity are not valid JSON values ({exc})"
        ) from exc


def entry_params(e: MemoryEntry, as_json: Callable[[Any], Any] = dumps) -> tuple[Any, ...]:
    """Values for :data:`ENTRY_COLS`; JSON columns go through ``as_json`` (JSON text by
    default, or a driver's JSON wrapper for binary COPY)."""
    return (
        e.id,
        e.kind,
        e.scope.user_id,
        e.scope.agent_id,
        e.scope.run_id,
        e.text,
        e.original_text,
        e.timestamp.timestamp() if e.timestamp else None,
        e.speaker_id,
        e.speaker_name,
        e.topic_id,
        as_json(list(e.source_ids)),
        e.context,
        e.version,
        (e.created_at or datetime.now(UTC)).timestamp(),
        (e.updated_at or datetime.now(UTC)).timestamp(),
        as_json(dict(e.metadata)),
        *span_to_epochs(e.event_time),
        e.event_time.unit if e.event_time else "",
        e.event_time.phrase if e.event_time else "",
        e.superseded_by or None,
        e.valid_to.timestamp() if e.valid_to else None,
    )


#: One decoder for every read: ``json.loads`` with ``parse_constant`` builds a new one per
#: call, a measurable share of fetching entries (two JSON columns each).
_DECODER = json.JSONDecoder(parse_constant=str)


class DamagedRowError(StoreError):
    """A stored row lightmem cannot read (malformed JSON, a vector of the wrong size)."""

    def __init__(self, table: str, row_id: object, detail: str) -> None:
        what = f"{table} row {row_id!r}" if table else "a stored row"
        super().__init__(
            f"store: {what} is damaged ({detail}); "
            "delete or repair it (integrity_check() lists such rows)"
        )
        self.table, self.row_id = table, row_id


def json_value(value: Any, table: str = "", row_id: object = None, column: str = "") -> Any:
    """A JSON column as a value (never raises on NaN or a lone surrogate; see above).

    Malformed JSON raises :class:`DamagedRowError` naming ``table``, ``row_id`` and
    ``column``."""
    # SQLite hands JSON columns back as text, PostgreSQL (jsonb) as values.
    if not isinstance(value, str | bytes):
        return value
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    try:
        out = _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:  # (nested too deeply: RecursionError)
        raise DamagedRowError(
            table,
            row_id,
            f"{f'column {column}' if column else 'a column'} is not valid JSON: {exc}",
        ) from None
    return _no_lone_surrogates(out) if "\\" in text and "\\ud" in text.lower() else out


def readable(rows: Iterable[Sequence[Any]], build: Callable[[Sequence[Any]], _T]) -> list[_T]:
    """``build`` of each row, skipping (with a warning) the rows it finds damaged: one bad
    row never makes a list, search or history fail."""
    out: list[_T] = []
    for r in rows:
        try:
            out.append(build(r))
        except DamagedRowError as exc:
            log.warning("skipped a damaged row: %s", exc)
    return out


def vector_from_blob(blob: bytes, dim: int, table: str, row_id: object) -> npt.NDArray[Any]:
    """A stored float32 vector of ``dim`` values; another size raises DamagedRowError."""
    if len(blob) != 4 * dim:
        raise DamagedRowError(
            table, row_id, f"its vector has {len(blob)} bytes, not {dim} float32 values"
        )
    return np.frombuffer(blob, dtype=np.float32)


def _no_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_no_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_no_lone_surrogates(k): _no_lone_surrogates(v) for k, v in value.items()}
    return value


def ts(value: float | None) -> datetime | None:
    """A stored epoch as UTC; one past the calendar's ends reads as that end, not an error."""
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return (datetime.max if value > 0 else datetime.min).replace(tzinfo=UTC)


def entry_from_row(r: Sequence[Any]) -> MemoryEntry:
    """An entry from a row of :data:`ENTRY_COLS`."""
    return MemoryEntry(
        id=r[0],
        kind=r[1],
        scope=Scope(r[2], r[3], r[4]),
        text=r[5],
        original_text=r[6],
        timestamp=ts(r[7]),
        speaker_id=r[8],
        speaker_name=r[9],
        topic_id=r[10],
        source_ids=tuple(json_value(r[11], "entries", r[0], "source_ids")),
        context=r[12],
        version=r[13],
        created_at=ts(r[14]),
        updated_at=ts(r[15]),
        metadata=json_value(r[16], "entries", r[0], "metadata"),
        event_time=span_from_epochs(r[17], r[18], r[19], r[20]),
        superseded_by=r[21] or "",
        valid_to=ts(r[22]),
    )


def message_from_row(r: Sequence[Any]) -> Message:
    """A message from (msg_id, role, content, compressed, ts, time_text, speaker_id,
    speaker_name, metadata)."""
    msg_id, role, content, _compressed, when, time_text, speaker_id, speaker_name, meta = r
    return Message(
        id=msg_id,
        role=role,
        content=content,
        timestamp=ts(when),
        time_text=time_text,
        speaker_id=speaker_id,
        speaker_name=speaker_name,
        metadata=json_value(meta, "messages", msg_id, "metadata"),
    )


def buffered_sql(d: Dialect) -> str:
    """Messages of one exact scope in one buffer state, oldest first."""
    p = d.placeholder
    return (
        "SELECT seq, msg_id, role, content, compressed, ts, time_text, speaker_id, "
        f"speaker_name, metadata, status, topic_id FROM messages WHERE status = {p} AND "
        f"user_id = {p} AND agent_id = {p} AND run_id = {p} ORDER BY seq"
    )


def buffered_params(scope: Scope, status: MessageStatus) -> tuple[str, str, str, str]:
    return (status, scope.user_id, scope.agent_id, scope.run_id)


def buffered_from_rows(rows: Sequence[Sequence[Any]], scope: Scope) -> list[BufferedMessage]:
    return [
        BufferedMessage(
            seq=r[0],
            scope=scope,
            message=message_from_row(r[1:10]),
            compressed=r[4],
            status=r[10],
            topic_id=r[11],
        )
        for r in rows
    ]


def history_from_row(r: Sequence[Any]) -> HistoryEvent:
    """From (seq, entry_id, op, version, at, reason, before, after)."""
    return HistoryEvent(
        seq=r[0],
        entry_id=r[1],
        op=r[2],
        version=r[3],
        at=ts(r[4]) or datetime.min.replace(tzinfo=UTC),
        reason=r[5],
        before=json_value(r[6], "history", r[0], "before") if r[6] else None,
        after=json_value(r[7], "history", r[0], "after") if r[7] else None,
    )


def counts_dict(kinds: dict[str, int], status: dict[str, int], history: int) -> dict[str, int]:
    return {
        "entries": int(kinds.get("entry", 0)),
        "summaries": int(kinds.get("summary", 0)),
        "events": int(kinds.get("event", 0)),
        "messages": int(sum(status.values())),
        "messages_pending": int(status.get("pending", 0)),
        "messages_segmented": int(status.get("segmented", 0)),
        "history_events": int(history),
    }
