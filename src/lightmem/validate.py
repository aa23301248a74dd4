"""Validation of the arguments of public methods (scope, filters, queries, ids, counts).

Every count a caller can pass has a cap here (``MAX_*``), so one call's work is bounded;
past it the call fails with an :class:`InvalidInputError` naming the argument (REST: 422).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from lightmem.errors import InvalidInputError, LightMemError
from lightmem.sanitize import check_text
from lightmem.timeparse import parse_timestamp
from lightmem.types import Filters, Scope

__all__ = [
    "MAX_BUDGET_TOKENS",
    "MAX_ID_CHARS",
    "MAX_LIMIT",
    "MAX_LIST_LIMIT",
    "MAX_OFFSET",
    "MAX_QUERY_CHARS",
    "MAX_VERSION",
    "bounded_int",
    "entry_id",
    "filters",
    "flag",
    "offset",
    "positive_int",
    "query",
    "scope",
    "texts",
    "time_window",
    "whole_number",
]

MAX_QUERY_CHARS = 100_000
#: Results of one retrieve.
MAX_LIMIT = 10_000
#: Entries of one page of a listing (REST pages are capped lower, at 1,000).
MAX_LIST_LIMIT = 1_000_000
#: Where a listing may start (a page further than this holds nothing anyone pages to).
MAX_OFFSET = 1_000_000_000
MAX_BUDGET_TOKENS = 10_000_000
#: History versions and FluxMem history sequence numbers.
MAX_VERSION = 1_000_000_000
#: Scope ids and entry ids.
MAX_ID_CHARS = 1_000
_FILTER_KEYS = ("time_from", "time_to", "speaker", "topic_id", "event_id", "kind")
_KINDS = ("entry", "summary", "event")


def scope(user_id: object, agent_id: object, run_id: object) -> Scope:
    values = {}
    for name, value in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)):
        if value is None:
            values[name] = ""
        elif not isinstance(value, str) or not value.strip():
            raise InvalidInputError(f"{name}: expected a non-empty string or None")
        else:
            if len(value) > MAX_ID_CHARS:
                raise InvalidInputError(f"{name}: longer than {MAX_ID_CHARS} characters")
            check_text(value, name)
            values[name] = value
    return Scope(**values)


def filters(raw: Mapping[str, Any] | None) -> Filters:
    if raw is None:
        return Filters()
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"filters: expected a dict, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(_FILTER_KEYS), key=str)
    if unknown:
        raise InvalidInputError(
            f"filters.{unknown[0]}: unknown filter (supported: {', '.join(_FILTER_KEYS)})"
        )
    out: dict[str, Any] = {}
    for key in ("time_from", "time_to"):
        if raw.get(key) is not None:
            try:
                out[key] = parse_timestamp(raw[key])
            except ValueError as exc:
                raise InvalidInputError(f"filters.{key}: {exc}") from exc
    for key in ("speaker", "topic_id", "event_id"):
        if raw.get(key) is not None:
            if not isinstance(raw[key], str) or not raw[key]:
                raise InvalidInputError(f"filters.{key}: expected a non-empty string")
            if len(raw[key]) > MAX_QUERY_CHARS:
                raise InvalidInputError(f"filters.{key}: longer than {MAX_QUERY_CHARS} characters")
            check_text(raw[key], f"filters.{key}")
            out[key] = raw[key]
    if raw.get("kind") is not None:
        kind = raw["kind"]
        kinds = (kind,) if isinstance(kind, str) else kind
        if (
            not isinstance(kinds, list | tuple)
            or not kinds
            or not all(isinstance(k, str) and k in _KINDS for k in kinds)
        ):
            raise InvalidInputError(
                "filters.kind: must be 'entry', 'summary', 'event' or a list of them"
            )
        out["kinds"] = tuple(dict.fromkeys(kinds))
    f = Filters(**out)
    if f.time_from and f.time_to and f.time_from > f.time_to:
        raise InvalidInputError("filters.time_from: is after filters.time_to")
    return f


def query(value: object, name: str = "query") -> str:
    """A search text (a query, a FluxMem task): a non-blank string of at most
    :data:`MAX_QUERY_CHARS`, errors naming ``name``."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name}: expected a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{name}: must not be empty")
    if len(value) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"{name}: longer than {MAX_QUERY_CHARS} characters")
    check_text(value, name)
    return value


def entry_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("id: expected a non-empty string")
    if len(value) > MAX_ID_CHARS:
        raise InvalidInputError(f"id: longer than {MAX_ID_CHARS} characters")
    check_text(value, "id")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def time_window(value: object) -> timedelta:
    """A window length: timedelta, seconds, or text like "30m", "12h", "7d", "2w"."""
    seconds: float | None = None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and len(value) >= 2 and value[-1] in _UNITS:
        try:
            seconds = float(value[:-1]) * _UNITS[value[-1]]
        except ValueError:
            seconds = None
    if seconds is None or not 60 <= seconds <= 100 * 365 * 86400:
        raise InvalidInputError(
            f"time_window: expected a duration of at least a minute (e.g. '7d', '12h', "
            f"seconds or a timedelta), got {value!r}"
        )
    return timedelta(seconds=seconds)


def texts(name: str, value: object, *, empty: bool = False) -> list[str]:
    """``value`` as a list of non-empty strings: a list or tuple of them (``empty``: it may
    have none); a string, a mapping or anything else is refused naming ``name``."""
    if (
        not isinstance(value, list | tuple)
        or (not value and not empty)
        or not all(isinstance(x, str) and x.strip() for x in value)
    ):
        what = "a list" if empty else "a non-empty list"
        raise InvalidInputError(f"{name}: expected {what} of non-empty strings, got {value!r:.80}")
    return list(value)


def flag(name: str, value: object) -> bool:
    """``value`` if it is True or False (not a truthy stand-in such as 1 or "yes")."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name}: expected a boolean (True or False), got {value!r:.80}")
    return value


def positive_int(name: str, value: object, maximum: int = 1_000_000) -> int:
    return bounded_int(name, value, 1, maximum)


def bounded_int(name: str, value: object, minimum: int, maximum: int) -> int:
    """An integer in [minimum, maximum] (bool is not an integer here)."""
    return whole_number(name, value, minimum, maximum)


def whole_number(
    name: str,
    value: object,
    least: int | None = None,
    most: int | None = None,
    *,
    error: type[LightMemError] = InvalidInputError,
) -> int:
    """``value`` if it is an integer (bool is not one here) within the bounds given, else
    ``error`` naming ``name`` (``retries: expected an integer of at least 1, got 0``): a
    count the caller gave is used as given, never clamped or rounded. The one check of
    integers for user input (InvalidInputError) and configuration (ConfigError) alike."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (least is not None and value < least)
        or (most is not None and value > most)
    ):
        if least is not None and most is not None:
            expected = f"an integer in [{least}, {most}]"
        elif least is not None:
            expected = f"an integer of at least {least}"
        elif most is not None:
            expected = f"an integer of at most {most}"
        else:
            expected = "an integer"
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise error(f"{name}: expected {expected}, got {shown}")
    return value


def offset(value: object) -> int:
    return bounded_int("offset", value, 0, MAX_OFFSET)
