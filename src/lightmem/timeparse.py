"""Timestamp parsing for the formats conversations arrive in."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

__all__ = ["format_date", "format_month", "parse_timestamp"]

_LOCOMO = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I
)
# LongMemEval style: "2023/05/20 (Sat) 00:44"
_SLASHED = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]{2,9}\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$"
)
#: Written as an ISO 8601 date ("2023-02-30", "12000-01-01"): one that fails is off the
#: calendar or out of range, and is told so rather than "unrecognised".
_ISO_SHAPE = re.compile(r"^(\d{4,})-\d{2}-\d{2}(?:$|[T ])")
_DAY_FIRST = ("%d %B %Y", "%d %b %Y", "%d %B, %Y", "%d %b, %Y")
_MONTH_FIRST = ("%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y")


def parse_timestamp(value: object) -> datetime:
    """Parse a timestamp into an aware UTC datetime; naive inputs are taken as UTC.

    Accepts datetime, epoch seconds, ISO 8601, "1:56 pm on 8 May, 2023" (LoCoMo),
    "2023/05/20 (Sat) 00:44" (LongMemEval), "8 May 2023" and "May 8, 2023".
    Raises ValueError with the offending value when nothing matches.
    """
    if isinstance(value, datetime):
        return _utc(value)
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"epoch seconds out of range: {value!r}") from exc
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"not a timestamp: {value!r}")
    text = value.strip()
    if m := _LOCOMO.match(text):
        hour, minute, ampm, day, month, year = m.groups()
        h = int(hour) % 12 + (12 if ampm.lower() == "p" else 0)
        base = _strptime_any(f"{day} {month} {year}", _DAY_FIRST)
        if base is not None and int(minute) < 60 and int(hour) <= 12:
            return base.replace(hour=h, minute=int(minute))
    if m := _SLASHED.match(text):
        y, mo, d, hh, mm = m.groups()
        try:
            return datetime(int(y), int(mo), int(d), int(hh or 0), int(mm or 0), tzinfo=UTC)
        except ValueError as exc:
            raise ValueError(f"invalid date: {value!r}") from exc
    try:
        return _utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError as exc:
        iso_error = exc
    parsed = _strptime_any(text, _DAY_FIRST + _MONTH_FIRST)
    if parsed is not None:
        return parsed
    if (m := _ISO_SHAPE.match(text)) and len(m.group(1)) > 4:
        raise ValueError(f"invalid date: {value!r} (a year has 4 digits: 0001-9999)")
    if m and not str(iso_error).startswith("Invalid isoformat"):  # a field out of range
        raise ValueError(f"invalid date: {value!r} ({iso_error})")
    raise ValueError(f"unrecognised timestamp format: {value!r}")


def _strptime_any(text: str, formats: tuple[str, ...]) -> datetime | None:
    for fmt in formats:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _utc(dt: datetime) -> datetime:
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    try:
        return dt.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00+01:00 is before year 1 in UTC
        raise ValueError(
            f"outside the years 1-9999 once converted to UTC: {dt.isoformat()}"
        ) from exc


def format_date(dt: date | None) -> str:
    """Human date used in prompt context, e.g. "8 June 2023": the month spelled out, as
    people write it and as an answer names it ("Jun" is not the word "June")."""
    return f"{dt.day} {format_month(dt)}" if dt else ""


def format_month(d: date) -> str:
    """A month as the context writes it: "June 2023"."""
    return f"{d:%B %Y}"
