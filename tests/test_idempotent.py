"""Retry-safe adds: an add whose outcome the client never saw can be sent again without
storing anything twice, with or without message ids, on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from lightmem import InvalidInputError, LightMemory
from lightmem.pipeline.messages import normalize_messages

TURNS = [
    {"role": "user", "content": "I moved to Porto last spring.", "timestamp": "2024-05-01"},
    {"role": "assistant", "content": "Porto is lovely in May.", "timestamp": "2024-05-01"},
]


def _stored(mem: LightMemory, user: str) -> int:
    return int(mem.stats(user_id=user)["messages"])


def test_same_id_same_content_is_a_no_op(memory: LightMemory) -> None:
    turns = [{**t, "id": f"t{i}"} for i, t in enumerate(TURNS)]
    first = memory.add_memory(turns, user_id="maya")
    again = memory.add_memory(turns, user_id="maya")
    assert (first.messages_added, again.messages_added) == (2, 0)
    assert _stored(memory, "maya") == 2
    # part new, part retried: only the new one is stored
    more = memory.add_memory([*turns, {"id": "t2", "content": "And I got a cat."}], user_id="maya")
    assert more.messages_added == 1
    assert _stored(memory, "maya") == 3


def test_same_id_different_content_is_refused(memory: LightMemory) -> None:
    memory.add_memory({"id": "t0", "content": "I live in Porto."}, user_id="maya")
    with pytest.raises(InvalidInputError, match=r"messages\[0\]\.id: 't0' already exists"):
        memory.add_memory({"id": "t0", "content": "I live in Lisbon."}, user_id="maya")
    assert _stored(memory, "maya") == 1


def test_id_less_retry_is_a_no_op(memory: LightMemory) -> None:
    first = memory.add_memory(TURNS, user_id="maya")
    again = memory.add_memory([dict(t) for t in TURNS], user_id="maya")
    assert (first.messages_added, again.messages_added) == (2, 0)
    assert _stored(memory, "maya") == 2
    # the same text at another time, or by another scope, is a new message
    later = {**TURNS[0], "timestamp": "2024-06-01"}
    assert memory.add_memory(later, user_id="maya").messages_added == 1
    assert memory.add_memory(TURNS, user_id="leo").messages_added == 2


def test_derived_ids_depend_on_content_time_and_position() -> None:
    base: dict[str, Any] = {"content": "hi", "timestamp": "2024-01-01"}
    a = normalize_messages([base, {**base, "content": "ho"}])
    b = normalize_messages([{**base, "content": "ho"}, base])
    c = normalize_messages([{**base, "timestamp": "2024-01-02"}])
    assert a[0].id != b[1].id  # same message, other position
    assert a[0].id != c[0].id  # same text, other time
    assert a[0].id == normalize_messages([base])[0].id  # deterministic
    with pytest.raises(InvalidInputError, match=r"messages\[1\]\.id: duplicate"):
        normalize_messages([base, {**base, "id": a[0].id}])
