"""Added turns are searchable on the next call, through every entry point, while extraction
keeps batching: provisional entries stand in for buffered turns until extraction replaces
them (on both backends, across instances sharing a store, after a crash)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from lightmem import InvalidInputError, LightMemory, NotFoundError
from lightmem.server.rest import create_app
from lightmem.server.tenancy import TenantPool
from lightmem.store.provisional import is_provisional, provisional_id
from lightmem.testing import OpenAIStubServer
from lightmem.testing.live_server import LiveServer
from lightmem.types import Message, Scope

KNEE = "s1:5"  # conversation.json: Maya's left knee hurt after her last 10k


def _knee_hits(mem: LightMemory, **scope: Any) -> list[str]:
    results = mem.retrieve("Which knee hurt after the 10k?", limit=5, **scope)
    return [r.entry.id for r in results if KNEE in r.source_ids]


def test_an_added_turn_is_found_at_once_then_replaced_by_extraction(
    memory: LightMemory, conversation: list[dict[str, Any]]
) -> None:
    r = memory.add_memory(conversation[:6], user_id="maya")
    assert r.entries_created == () and r.messages_buffered == 6  # extraction still waits
    assert len(r.entries_provisional) == 6
    hits = _knee_hits(memory, user_id="maya")
    assert hits == [provisional_id(Scope("maya"), KNEE)]
    entry = memory.get(hits[0], user_id="maya")
    assert entry.metadata["extractor"] == "provisional" and entry.speaker == "Maya"
    assert memory.history(hits[0], user_id="maya") == []  # never changed
    listed = {e.id for e in memory.list_entries(user_id="maya")}
    assert set(r.entries_provisional) == listed

    done = memory.flush(user_id="maya")
    assert done.entries_created
    hits_after = _knee_hits(memory, user_id="maya")
    assert len(hits_after) == 1 and not is_provisional(hits_after[0])
    assert not [e for e in memory.list_entries(user_id="maya") if is_provisional(e.id)]
    with pytest.raises(NotFoundError, match="provisional"):
        memory.get(hits[0], user_id="maya")
    assert memory.store.integrity_check() == []


def test_turns_stay_searchable_across_adds_until_the_buffer_extracts(
    store_config: dict[str, Any], conversation: list[dict[str, Any]]
) -> None:
    """Turn by turn, as a chat adds them, with buffers that fill every few turns: every
    turn is findable right after its add, and no turn is ever found twice (provisional and
    extracted at once)."""
    cfg = {
        "store": store_config,
        "sensory_buffer": {"max_tokens": 60},
        "short_term_memory": {"max_tokens": 100},
    }
    extracted = 0
    with LightMemory.from_config(cfg) as memory:
        for i, turn in enumerate(conversation):
            extracted += len(memory.add_memory(turn, user_id="maya").entries_created)
            seen = memory.list_entries(user_id="maya", filters={"kind": "entry"}, limit=500)
            sources = [s for e in seen for s in e.source_ids]
            assert turn["id"] in sources, i
            assert len(sources) == len(set(sources)), i
            assert memory.retrieve(turn["content"], limit=3, user_id="maya"), i
        left = [e for e in memory.list_entries(user_id="maya") if is_provisional(e.id)]
        assert extracted and 0 < len(left) < len(conversation)


def test_a_forced_add_writes_no_provisional_entries(
    memory: LightMemory, conversation: list[dict[str, Any]]
) -> None:
    r = memory.add_memory(conversation, force_extract=True, user_id="maya")
    assert r.entries_provisional == () and r.entries_created
    assert not [e for e in memory.list_entries(user_id="maya") if is_provisional(e.id)]


def test_provisional_entries_cannot_be_edited(
    memory: LightMemory, conversation: list[dict[str, Any]]
) -> None:
    pid = memory.add_memory(conversation[:2], user_id="maya").entries_provisional[0]
    edits: tuple[Callable[[], object], ...] = (
        lambda: memory.update(pid, "changed", user_id="maya"),
        lambda: memory.delete(pid, user_id="maya"),
        lambda: memory.restore(pid, user_id="maya"),
    )
    for call in edits:
        with pytest.raises(InvalidInputError, match="provisional"):
            call()
    # erasure still works, and takes the buffered turn with it
    memory.purge(pid, user_id="maya")
    assert [e.source_ids for e in memory.list_entries(user_id="maya")] == [("s1:2",)]
    memory.flush(user_id="maya")
    sources = {s for e in memory.list_entries(user_id="maya") for s in e.source_ids}
    assert sources == {"s1:2"}


def test_offline_update_leaves_provisional_entries_out(
    memory: LightMemory, conversation: list[dict[str, Any]]
) -> None:
    memory.add_memory(conversation[:8], force_extract=True, user_id="maya")
    memory.add_memory(conversation[8:12], user_id="maya")  # buffered: provisional
    memory.construct_update_queue_all_entries(user_id="maya")
    queued = memory.store.load_update_queue(Scope("maya"))
    assert queued and not [i for i in queued if is_provisional(i)]
    assert not [c for cands in queued.values() for c, _ in cands if is_provisional(c)]


def test_a_second_instance_sees_the_turns_and_its_extraction_replaces_them(
    store_path: Path, conversation: list[dict[str, Any]]
) -> None:
    """Two instances on one SQLite file (two processes' view): one adds, the other finds
    the turn at once, extracts it, and the first then sees only the extracted entry."""
    cfg = {"store": {"path": str(store_path)}}
    with LightMemory.from_config(cfg) as a, LightMemory.from_config(cfg) as b:
        a.add_memory(conversation[:6], user_id="maya")
        assert [is_provisional(i) for i in _knee_hits(b, user_id="maya")] == [True]
        buffered = a.store.buffered(Scope("maya"), "pending")
        b.flush(user_id="maya")
        hits = _knee_hits(a, user_id="maya")
        assert len(hits) == 1 and not is_provisional(hits[0])
        # a late provisional write (a's, racing b's extraction) is skipped: never a duplicate
        knee = next(x for x in buffered if x.message.id == KNEE)
        stale = replace(a.get(hits[0], user_id="maya"), id=provisional_id(Scope("maya"), KNEE))
        vec = a.embedder.embed([stale.search_text])[0]
        assert a.store.commit_provisional([(stale, vec)], [knee.seq]) == ()
        assert len(_knee_hits(a, user_id="maya")) == 1


def test_turns_persisted_before_a_crash_become_searchable_on_the_next_add(
    memory: LightMemory, conversation: list[dict[str, Any]]
) -> None:
    """A process killed after persisting messages but before their provisional entries:
    the next add in the scope writes the missing ones."""
    knee = next(m for m in conversation if m["id"] == KNEE)
    msg = Message(id=KNEE, role="user", content=knee["content"], speaker_name="Maya")
    memory.store.add_messages(Scope("maya"), [(msg, knee["content"])])  # the crash point
    assert _knee_hits(memory, user_id="maya") == []
    r = memory.add_memory({"id": "later", "content": "Anything new?"}, user_id="maya")
    assert provisional_id(Scope("maya"), KNEE) in r.entries_provisional
    assert _knee_hits(memory, user_id="maya") == [provisional_id(Scope("maya"), KNEE)]


def test_llm_extraction_still_batches(
    stub: OpenAIStubServer, store_path: Path, conversation: list[dict[str, Any]]
) -> None:
    """With an LLM: turns added one by one are searchable at once, and the model is called
    only when the buffers fill (here: once, at flush), not per add."""
    cfg = {
        "store": {"path": str(store_path)},
        "memory_manager": {
            "model_name": "openai",
            "configs": {"model": "stub-model", "openai_base_url": stub.base_url, "api_key": "k"},
        },
    }
    with LightMemory.from_config(cfg) as mem:
        for turn in conversation:
            mem.add_memory(turn, user_id="maya")
        assert stub.counters.requests.get("/v1/chat/completions", 0) == 0
        assert _knee_hits(mem, user_id="maya") == [provisional_id(Scope("maya"), KNEE)]
        mem.flush(user_id="maya")
        assert stub.counters.requests["/v1/chat/completions"] == 1
        hits = _knee_hits(mem, user_id="maya")
        assert len(hits) == 1 and not is_provisional(hits[0])


def test_rest_add_then_search_without_force_extract(tmp_path: Path) -> None:
    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    try:
        with LiveServer(create_app(pool, keys)) as url:
            c = httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {keys.create('acme')}"}
            )
            msgs = [
                {"content": f"Turn {i}: we talked about item {i}", "id": f"m{i}"} for i in range(29)
            ] + [{"content": "My sister Zelda moved to Reykjavik.", "id": "z"}]
            r = c.post("/v1/memories", json={"messages": msgs})
            assert r.status_code == 200, r.text
            assert r.json()["entries_created"] == [] and len(r.json()["entries_provisional"]) == 30
            found = c.post("/v1/memories/search", json={"query": "Where did Zelda move?"})
            assert found.status_code == 200, found.text
            assert "Reykjavik" in found.json()["context"]
    finally:
        keys.close()
        pool.close()


@pytest.mark.parametrize("update", ["offline", "online"])
def test_a_buffered_change_comes_before_what_it_changes(tmp_path: Path, update: str) -> None:
    """No update pass has seen a buffered turn yet: it is compared, when read, with what it
    would supersede, so the current value comes first; a question about the past and an
    earlier ``as_of`` keep the search's order, and nothing is written."""
    config = {"store": {"path": str(tmp_path / "m.db")}, "update": update}
    with LightMemory.from_config(config) as mem:
        turn = {"role": "user", "speaker_name": "Maya"}
        old = {**turn, "content": "I live in Boston.", "timestamp": "2024-01-05T10:00"}
        new = {**turn, "content": "We moved to Denver.", "timestamp": "2024-06-05T10:00"}
        mem.add_memory([old], user_id="maya", force_extract=True)
        mem.add_memory([new], user_id="maya")

        def said(question: str, **kw: Any) -> list[str]:
            found = mem.retrieve(question, limit=2, user_id="maya", **kw)
            return [r.entry.original_text for r in found]

        assert said("Where does Maya live?") == [new["content"], old["content"]]
        assert said("Where did Maya live before?")[0] == old["content"]
        assert said("Where does Maya live?", as_of="2024-02-01") == [old["content"]]
        boston = mem.list_entries({"kind": "entry"}, user_id="maya")[0]
        assert boston.original_text == old["content"] and not boston.superseded_by
        assert mem.stats(user_id="maya")["usage"]  # the word vectors were accounted
