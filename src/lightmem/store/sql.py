"""WHERE clauses for scopes and filters, shared by the SQL backends (one per dialect)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightmem.types import Filters, Scope


@dataclass(frozen=True, slots=True)
class Dialect:
    placeholder: str
    true: str
    json_text: Callable[[str, str], str]  # (column, key) -> SQL expression for the text value


SQLITE = Dialect("?", "1", lambda col, key: f"json_extract({col}, '$.{key}')")
POSTGRES = Dialect("%s", "TRUE", lambda col, key: f"{col}->>'{key}'")


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
