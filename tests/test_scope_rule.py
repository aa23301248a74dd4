"""What a read without ``user_id`` means: refused on a store of several users unless
``all_scopes=True`` (never a silent mix), unchanged on a store of one; summaries per scope."""

from __future__ import annotations

from typing import Any

import pytest

from lightmem import InvalidInputError, LightMemory
from lightmem.types import Scope


def _two_users(mem: LightMemory) -> None:
    mem.add_memory(
        [{"id": "a", "content": "I ride my bicycle to the harbour every morning.",
          "speaker_name": "Maya", "timestamp": "2024-03-02T09:00"}],
        user_id="maya", force_extract=True,
    )  # fmt: skip
    mem.add_memory(
        [{"id": "b", "content": "My bicycle was stolen at the harbour yesterday.",
          "speaker_name": "Leo", "timestamp": "2024-03-03T10:00"}],
        user_id="leo", force_extract=True,
    )  # fmt: skip


def test_a_read_without_user_id_on_several_users_is_refused(memory: LightMemory) -> None:
    _two_users(memory)
    for call in (
        lambda: memory.retrieve("bicycle harbour"),
        lambda: memory.retrieve_context("bicycle harbour"),
        lambda: memory.list_entries(),
        lambda: memory.retrieve("bicycle", agent_id="assistant"),
    ):
        with pytest.raises(InvalidInputError, match=r"^user_id: .*several users.*all_scopes"):
            call()
    users = {r.entry.scope.user_id for r in memory.retrieve("bicycle harbour", all_scopes=True)}
    assert users == {"maya", "leo"}
    assert {e.scope.user_id for e in memory.list_entries(all_scopes=True)} == {"maya", "leo"}
    only = memory.retrieve("bicycle harbour", user_id="maya")
    assert only and {r.entry.scope.user_id for r in only} == {"maya"}


def test_memories_without_a_user_count_as_a_user(memory: LightMemory) -> None:
    memory.add_memory(
        {"id": "x", "content": "The office wifi password changed."}, force_extract=True
    )
    assert memory.retrieve("wifi password")  # one (unscoped) user: reads as before
    memory.add_memory(
        {"id": "y", "content": "My wifi at home is slow."}, user_id="leo", force_extract=True
    )
    with pytest.raises(InvalidInputError, match="without a user_id"):
        memory.retrieve("wifi password")


def test_all_scopes_is_checked(memory: LightMemory) -> None:
    _two_users(memory)
    with pytest.raises(InvalidInputError, match=r"^all_scopes: "):
        memory.retrieve("bicycle", user_id="maya", all_scopes=True)
    with pytest.raises(InvalidInputError, match=r"^all_scopes: expected a boolean"):
        memory.list_entries(all_scopes="yes")  # type: ignore[arg-type]


def test_a_store_of_one_user_reads_without_user_id(
    memory: LightMemory, conversation: list[dict[str, Any]]
) -> None:
    memory.add_memory(conversation, force_extract=True, user_id="maya")
    assert memory.retrieve("knee") and memory.list_entries()


def test_summaries_are_per_scope_never_across_users(memory: LightMemory) -> None:
    _two_users(memory)
    report = memory.summarize("30d")
    assert len(report.created) == 2
    summaries = memory.list_entries(filters={"kind": "summary"}, all_scopes=True)
    by_user = {s.scope.user_id: s for s in summaries if s.metadata.get("summary_of")}
    assert set(by_user) == {"maya", "leo"}
    assert by_user["maya"].source_ids == ("a",) and by_user["leo"].source_ids == ("b",)
    # a user's own summarise touches only that user's summary
    again = memory.summarize("30d", user_id="maya")
    assert again.created == () and again.windows == 1
    assert memory.list_entries(filters={"kind": "summary"}, user_id="leo")[0].scope == Scope("leo")
