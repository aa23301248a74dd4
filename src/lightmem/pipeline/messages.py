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
from lightmem.validate import whole_number

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_FIELD_CHARS",
    "MAX_MESSAGES",
    "assign_ids",
    "derived_id",
    "normalize_messages",
]

_ALIASES = {
    "time_stamp": "timestamp",
    "time": "timestamp",
    "dia_id": "id",
    "message_id": "id",
    "text": "content",
    "speaker": "speaker_name",
}
#: The scope's fields: given with the add call, never per message.
_SCOPE_KEYS = frozenset({"user_id", "agent_id", "run_id"})
_KNOWN = {
    "id",
    "role",
    "content",
    "timestamp",
    "speaker_id",
    "speaker_name",
    "metadata",
}
#: The roles ``messages_use`` selects by (memory/params.py), spelled exactly so.
_UNDERSTOOD_ROLES = ("user", "assistant")
MAX_CONTENT_CHARS = 1_000_000
#: Messages in one ``add_memory`` call: each costs far more memory in the pipeline than its
#: bytes (40,000 short ones in one REST request peaked at +490 MB); send more calls.
MAX_MESSAGES = 10_000
#: Ids, roles and speaker names are interpolated into every prompt line of their turn.
MAX_FIELD_CHARS = 1_000


def normalize_messages(
    messages: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    default_timestamp: object | None = None,
    limit: int | None = None,
) -> list[Message]:
    """Validate and normalise one message or a list of them (at most ``limit``: more is an
    :class:`InvalidInputError`, not a partial add).

    Keys: ``content`` (or ``text``), ``role`` (default "user"), ``timestamp`` (or
    ``time_stamp``), ``id`` (or ``dia_id``), ``speaker_id``, ``speaker_name`` (or ``speaker``),
    ``metadata`` (a dict). Unknown keys are kept in ``metadata`` rather than dropped; one that
    is also a key of ``metadata``, or a ``metadata.role``, is refused, and so is a scope
    field (``user_id``, ``agent_id``, ``run_id``: the call's, not a message's).

    ``role`` is compared exactly: ``messages_use`` reads "user" or "assistant" turns, so a
    differently cased spelling of those ("Assistant") is refused; other roles ("system",
    "tool") are kept as given and are read by extraction under ``messages_use: hybrid``.

    A message without ``id`` gets one derived from its content, role, speaker, timestamp,
    metadata and position in the call (:func:`derived_id`), so retrying an add whose outcome
    was lost stores nothing twice (ids are unique per scope in the store). The flip side: the
    same turn at the same position of two calls is one message. A conversation sent in
    several calls keeps its repeats apart with :func:`assign_ids` over the whole of it.
    """
    items = _items(messages)
    if limit is not None and len(items) > limit:
        raise InvalidInputError(
            f"messages: {len(items)} in one call, at most {limit}; send them in several calls"
        )
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


def assign_ids(
    messages: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    batch: int | None = None,
) -> list[dict[str, Any]]:
    """The messages as dicts, each one given without an id now carrying (as ``id``) the id
    derived at its position in the whole list. Send one conversation in several
    ``add_memory`` calls this way and a literal repeat in a later call is not taken for a
    retry, while re-sending the whole list still stores nothing twice.

    With ``batch`` (the calls will send ``batch`` messages each), an id-less message gets
    the id ``add_memory`` derives at its place in its call, the id a conversation sent in
    such batches without :func:`assign_ids` got, so re-sending one is still a no-op; only
    a message that would share that id with an earlier one of the list (the same "thanks"
    at the same place of two calls) gets the id of its place in the whole list instead."""
    if batch is not None:
        whole_number("batch", batch, 1)
    items = _items(messages)
    normalized = normalize_messages(items)
    given = [any(raw[k] is not None for k in _id_keys(raw)) for raw in items]
    taken = {m.id for m, has in zip(normalized, given, strict=True) if has}
    out: list[dict[str, Any]] = []
    for i, (raw, msg, has) in enumerate(zip(items, normalized, given, strict=True)):
        if has:
            out.append(dict(raw))
            continue
        mid = msg.id
        if batch is not None and (in_call := derived_id(msg, i % batch)) not in taken:
            mid = in_call
        taken.add(mid)
        ids = _id_keys(raw)
        out.append({**{k: v for k, v in raw.items() if k not in ids}, "id": mid})
    return out


def _id_keys(raw: Mapping[str, Any]) -> list[str]:
    """The keys of ``raw`` that give its id (``id`` or an alias)."""
    return [k for k in raw if _ALIASES.get(k, k) == "id"]


def _items(messages: object) -> Sequence[Any]:
    if isinstance(messages, Mapping):
        return [messages]
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise InvalidInputError(
            f"messages: expected a dict or a list of dicts, got {type(messages).__name__}"
        )
    if not messages:
        raise InvalidInputError("messages: the list is empty")
    return messages


def _one(raw: Any, where: str, default_timestamp: object | None) -> Message:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: expected a dict, got {type(raw).__name__}")
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"{where}: keys must be strings, got {key!r}")
        canon = _ALIASES.get(key, key)
        if canon in _SCOPE_KEYS:
            # kept as metadata it would look scoped while the turn is stored in the call's
            # scope (a message "of bob" readable by anyone reading unscoped)
            raise InvalidInputError(
                f"{where}.{key}: a message has no scope of its own; pass {key} to the add "
                "call (every message of a call is stored in its scope)"
            )
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

    role = _role(fields, where)
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

    metadata = fields.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        raise InvalidInputError(f"{where}.metadata: expected a dict, got {type(metadata).__name__}")
    if "role" in metadata:
        # Entries carry the turn's role as metadata.role (what messages_use selects by).
        raise InvalidInputError(f"{where}.metadata.role: reserved for the turn's role; use role")
    for key in extra:
        if key in metadata:
            raise InvalidInputError(f"{where}.{key}: also given in metadata; give it once")
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


def _role(fields: Mapping[str, Any], where: str) -> str:
    if fields.get("role") is None:
        return "user"
    role = _opt_str(fields, "role", where)
    if not role:
        raise InvalidInputError(f"{where}.role: must not be blank (omit it for 'user')")
    for known in _UNDERSTOOD_ROLES:
        if role != known and role.lower() == known:
            raise InvalidInputError(
                f"{where}.role: {role!r} is not a role lightmem reads; roles are "
                f"case-sensitive: write {known!r}"
            )
    return role


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
