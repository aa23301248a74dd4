"""Normalisation of user-supplied messages into :class:`~lightmem.types.Message`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from lightmem.errors import InvalidInputError
from lightmem.sanitize import check_text, check_value
from lightmem.timeparse import parse_timestamp
from lightmem.types import Message

_ALIASES = {
    "time_stamp": "timestamp",
    "time": "timestamp",
    "dia_id": "id",
    "message_id": "id",
    "text": "content",
    "speaker": "speaker_name",
}
_KNOWN = {
    "id",
    "role",
    "content",
    "timestamp",
    "speaker_id",
    "speaker_name",
    "metadata",
}
MAX_CONTENT_CHARS = 1_000_000
#: Ids, roles and speaker names are interpolated into every prompt line of their turn.
MAX_FIELD_CHARS = 1_000


def normalize_messages(
    messages: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    default_timestamp: object | None = None,
) -> list[Message]:
    """Validate and normalise one message or a list of them.

    Keys: ``content`` (or ``text``), ``role`` (default "user"), ``timestamp`` (or
    ``time_stamp``), ``id`` (or ``dia_id``), ``speaker_id``, ``speaker_name`` (or ``speaker``),
    ``metadata``. Unknown keys are kept in ``metadata`` rather than dropped.

    A message without ``id`` gets one derived from its content, role, speaker, timestamp,
    metadata and position in the call (:func:`derived_id`), so retrying an add whose outcome
    was lost stores nothing twice (ids are unique per scope in the store).
    """
    if isinstance(messages, Mapping):
        items: Sequence[Any] = [messages]
    elif isinstance(messages, Sequence) and not isinstance(messages, str | bytes):
        items = messages
    else:
        raise InvalidInputError(
            f"messages: expected a dict or a list of dicts, got {type(messages).__name__}"
        )
    if not items:
        raise InvalidInputError("messages: the list is empty")
    out: list[Message] = []
    seen: set[str] = set()
    for i, raw in enumerate(items):
        msg = _one(raw, f"messages[{i}]", default_timestamp)
        if not msg.id:
            msg = replace(msg, id=derived_id(msg, i))
        if msg.id in seen:
            raise InvalidInputError(f"messages[{i}].id: duplicate id {msg.id!r} in this call")
        seen.add(msg.id)
        out.append(msg)
    return out


def _one(raw: Any, where: str, default_timestamp: object | None) -> Message:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: expected a dict, got {type(raw).__name__}")
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"{where}: keys must be strings, got {key!r}")
        canon = _ALIASES.get(key, key)
        if canon in _KNOWN:
            if canon in fields:
                raise InvalidInputError(f"{where}.{key}: given twice (also as an alias)")
            fields[canon] = value
        else:
            extra[key] = value

    content = fields.get("content")
    if not isinstance(content, str):
        raise InvalidInputError(f"{where}.content: required string, got {type(content).__name__}")
    if not content.strip():
        raise InvalidInputError(f"{where}.content: must not be empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInputError(f"{where}.content: longer than {MAX_CONTENT_CHARS} characters")
    check_text(content, f"{where}.content")

    role = _opt_str(fields, "role", where) or "user"
    msg_id = fields.get("id")
    if msg_id is None:
        msg_id = ""  # derived from the finished message by the caller
    elif isinstance(msg_id, int) and not isinstance(msg_id, bool):
        msg_id = str(msg_id)
    elif not isinstance(msg_id, str) or not msg_id.strip():
        raise InvalidInputError(f"{where}.id: must be a non-empty string")
    if msg_id:
        _bounded(msg_id, f"{where}.id")

    ts_raw = fields.get("timestamp", default_timestamp)
    timestamp = None
    time_text = ""
    if ts_raw is not None:
        try:
            timestamp = parse_timestamp(ts_raw)
        except ValueError as exc:
            raise InvalidInputError(f"{where}.timestamp: {exc}") from exc
        time_text = ts_raw if isinstance(ts_raw, str) else timestamp.isoformat()

    metadata = fields.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"{where}.metadata: expected a dict")
    metadata = {**dict(metadata), **extra}
    check_value(metadata, f"{where}.metadata")

    return Message(
        id=msg_id,
        role=role,
        content=content,
        timestamp=timestamp,
        time_text=time_text,
        speaker_id=_opt_str(fields, "speaker_id", where),
        speaker_name=_opt_str(fields, "speaker_name", where),
        metadata=metadata,
    )


def _opt_str(fields: Mapping[str, Any], key: str, where: str) -> str:
    value = fields.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInputError(f"{where}.{key}: expected a string, got {type(value).__name__}")
    _bounded(value, f"{where}.{key}")
    return value.strip()


def _bounded(value: str, where: str) -> None:
    if len(value) > MAX_FIELD_CHARS:
        raise InvalidInputError(f"{where}: longer than {MAX_FIELD_CHARS} characters")
    check_text(value, where)


def derived_id(msg: Message, position: int) -> str:
    """The id of a message given without one: a hash of what it says, when, by whom, and
    its position in the call. The same id-less add retried gives the same ids."""
    key = [
        position,
        msg.role,
        msg.content,
        msg.timestamp.isoformat() if msg.timestamp else None,
        msg.time_text,
        msg.speaker_id,
        msg.speaker_name,
        msg.metadata,
    ]
    blob = json.dumps(key, sort_keys=True, ensure_ascii=True, default=repr)
    return "d-" + hashlib.sha256(blob.encode()).hexdigest()[:32]
