"""The update pass after the updates review: the dedupe deletes only true restatements,
the LLM updater reviews supersession over the nearest earlier entries (not only those
above the merge threshold), a backlog imported newest first is updated by time, and the
entropy compressor neither empties a turn nor drops what a negation negates."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import llm_config
from lightmem import LightMemory
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.update import build_queue
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from lightmem.types import MemoryEntry

JAN, JUN = "2023-01-10T10:00:00", "2023-06-10T10:00:00"


def _turn(i: str, text: str, when: str, who: str = "Maya") -> dict[str, Any]:
    return {"id": i, "speaker_name": who, "content": text, "timestamp": when}


def _own(mem: LightMemory, turn: str, **scope: Any) -> MemoryEntry | None:
    """The entry extracted from ``turn`` (its first source), if it is still stored."""
    entries = mem.list_entries({"kind": "entry"}, limit=1000, **scope)
    return next((e for e in entries if e.source_ids[:1] == (turn,)), None)


# -- 1. the dedupe deletes only a restatement (same subject, same polarity) ----------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I'm vegetarian.", "My husband isn't vegetarian."),  # another subject, negated
        ("I have a cat.", "My neighbour has a cat."),  # another subject
        ("I eat meat.", "I don't eat meat anymore."),  # negated: a change, not a repeat
        ("I work at Spotify.", "I don’t work at Spotify anymore."),  # curly apostrophe
    ],
)
def test_a_negated_or_other_subject_sentence_deletes_nothing(
    store_path: Path, old: str, new: str
) -> None:
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as mem:
        mem.add_memory([_turn("old", old, JAN), _turn("new", new, JUN)], force_extract=True)
        mem.construct_update_queue_all_entries()
        report = mem.offline_update_all_entries()
        assert report.deleted == ()
        kept = _own(mem, "old")
        assert kept is not None and kept.original_text == old


def test_a_restatement_is_still_deleted_and_its_sources_kept(store_path: Path) -> None:
    """A guard (passes with or without the fix): the dedupe still works."""
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as mem:
        mem.add_memory(
            [_turn("old", "I don't eat meat.", JAN), _turn("new", "I don't eat meat at all.", JUN)],
            force_extract=True,
        )
        mem.construct_update_queue_all_entries()
        assert len(mem.offline_update_all_entries().deleted) == 1
        assert _own(mem, "old") is None
        newer = _own(mem, "new")
        assert newer is not None and "old" in newer.source_ids


# -- 2. the LLM updater reviews supersession over the nearest, with no cosine gate --------

OLD, NEW = "I live in Leeds.", "We finally got the keys to our flat in Bristol."


def test_llm_review_asks_about_a_change_below_the_merge_threshold(store_path: Path) -> None:
    seen: list[tuple[str, str, str]] = []  # (earlier id, newer id, system prompt)
    scripted = ScriptedLLM()

    def handler(messages: list[dict[str, Any]]) -> str:
        body = str(messages[1].get("content", ""))
        data = body.split("<data>", 1)[-1].rsplit("</data>", 1)[0].strip()
        if not data.startswith("["):
            return scripted(messages)
        actions = []
        for item in json.loads(data):
            newer = item["newer"]
            for e in item["earlier"]:
                seen.append((e["id"], newer["id"], str(messages[0]["content"])))
                change = "Leeds" in e["text"] and "Bristol" in newer["text"]
                # a merge the review did not ask for must not be applied
                act = {"action": "supersede", "by": newer["id"]} if change else {"action": "merge"}
                actions.append({"id": e["id"], **act})
        return json.dumps({"actions": actions})

    turns = [
        _turn("old", OLD, JAN),
        _turn("tea", "My favourite tea is a smoky lapsang.", JAN),
        _turn("new", NEW, JUN),
    ]
    with (
        OpenAIStubServer(chat_handler=handler) as stub,
        LightMemory.from_config(llm_config(stub, store_path)) as mem,
    ):
        mem.add_memory(turns, force_extract=True)
        old, new = _own(mem, "old"), _own(mem, "new")
        assert old is not None and new is not None
        mem.construct_update_queue_all_entries()
        queued = dict(mem.store.load_update_queue(old.scope).get(new.id, []))
        assert queued.get(old.id, 0.0) < 0.8  # below the default threshold
        report = mem.offline_update_all_entries()
        assert report.superseded == (old.id,) and report.deleted == ()
        stale = _own(mem, "old")
        assert stale is not None and stale.superseded_by == new.id
        # each pair asked once, with the keep/supersede prompt; the calls are accounted
        pairs = [(a, b) for a, b, _ in seen]
        assert (old.id, new.id) in pairs and len(pairs) == len(set(pairs))
        assert all('"merge"' not in system for _, _, system in seen)
        usage = {(r["kind"], r["op"]): r for r in mem.stats()["usage"]["by_operation"]}
        assert usage[("llm", "update.review")]["calls"] >= 1
        assert mem.retrieve("Where does Maya live?", limit=1)[0].entry.id == new.id


# -- 3. a backlog imported newest first is updated by the time each turn was said ---------


def test_build_queue_orients_pairs_by_time_not_insertion() -> None:
    m = np.eye(3, dtype=np.float32)[[0, 0, 0]]  # all alike
    # stored a (June), b (January), c (no time)
    q = build_queue(["a", "b", "c"], m, ["g"] * 3, 5, 5, times=[2.0e9, 1.0e9, None])
    assert [i for i, _ in q["a"]] == ["b"]
    assert "b" not in q  # said first: no earlier candidate, though stored after a
    assert sorted(i for i, _ in q["c"]) == ["a", "b"]  # no time: the stored order decides


@pytest.mark.parametrize("mode", ["offline", "online"])
def test_sessions_imported_newest_first_are_superseded(store_path: Path, mode: str) -> None:
    with LightMemory.from_config({"store": {"path": str(store_path)}, "update": mode}) as mem:
        mem.add_memory(_turn("new", "I moved to Ghent last month.", JUN), force_extract=True)
        mem.add_memory(_turn("old", "I live in Leuven.", JAN), force_extract=True)
        if mode == "offline":
            mem.construct_update_queue_all_entries()
            mem.offline_update_all_entries()
        old, new = _own(mem, "old"), _own(mem, "new")
        assert old is not None and new is not None and old.superseded_by == new.id
        assert new.superseded_by == ""
        assert mem.retrieve("Where does Maya live?", limit=1)[0].entry.id == new.id


def test_a_restatement_imported_newest_first_keeps_the_later_said(store_path: Path) -> None:
    """The merge queue is ordered by time too: the restatement said later absorbs the one
    said earlier, whichever was stored first."""
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as mem:
        mem.add_memory(_turn("late", "I don't eat meat at all.", JUN), force_extract=True)
        mem.add_memory(_turn("early", "I don't eat meat.", JAN), force_extract=True)
        mem.construct_update_queue_all_entries()
        assert len(mem.offline_update_all_entries().deleted) == 1
        assert _own(mem, "early") is None
        kept = _own(mem, "late")
        assert kept is not None and "early" in kept.source_ids


# -- 4. the entropy compressor ---------------------------------------------------------------


@pytest.mark.parametrize("turn", ["OK", "Why?", "I am.", "Me too", "Who was there?", "Not now"])
def test_a_turn_of_common_words_is_kept_whole(turn: str) -> None:
    assert EntropyCompressor().compress(turn) == turn


def test_the_default_pipeline_stores_no_empty_memory(store_path: Path) -> None:
    turns = ["OK", "I am.", "Who was there?"]
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as mem:
        mem.add_memory([_turn(f"m{i}", t, JAN) for i, t in enumerate(turns)], force_extract=True)
        texts = [e.text for e in mem.list_entries({"kind": "entry"})]
        assert sorted(texts) == sorted(turns)


@pytest.mark.parametrize(
    ("turn", "kept"),
    [
        ("I don't drink coffee anymore, herbal tea only.", "don't drink coffee anymore, herbal"),
        ("Three months vegan and I honestly don't miss steak.", "don't miss steak"),
        ("My husband isn't vegetarian.", "isn't vegetarian"),
        ("No more trains for me, I bought a bike.", "No trains,"),
    ],
)
def test_a_kept_negation_keeps_what_it_negates(turn: str, kept: str) -> None:
    assert kept in EntropyCompressor().compress(turn)


def test_an_entry_another_writer_deleted_meanwhile_is_skipped(store_path: Path) -> None:
    """Two processes updating one store: what one deletes between the other's reading a
    batch and acting on it is skipped, not a NotFoundError ending the whole pass (a
    server with two workers answered 404 to an update)."""
    from lightmem.embed.wordllama import WordLlamaEmbedder
    from lightmem.pipeline.update import OfflineUpdater, UpdateAction, UpdateItem
    from lightmem.store.sqlite import SQLiteStore

    class DeletedMeanwhile:
        """The offline updater, but the other writer deletes each target first."""

        name = "offline"
        pairs_per_call = 10_000
        signature = "deleted-meanwhile"

        def __init__(self, inner: OfflineUpdater, other: LightMemory) -> None:
            self.inner, self.other = inner, other

        def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
            actions = self.inner.decide(items)
            for a in actions:
                if a.op == "delete":
                    self.other.delete(a.target_id)
            return actions

        def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
            return self.inner.review(items)

    turns = [_turn("old", "I don't eat meat.", JAN), _turn("new", "I don't eat meat at all.", JUN)]
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as other:
        other.add_memory(turns, force_extract=True)
        embedder = WordLlamaEmbedder()
        updater = DeletedMeanwhile(OfflineUpdater(embedder), other)
        with LightMemory(SQLiteStore(store_path), embedder, updater=updater) as mem:
            mem.construct_update_queue_all_entries()
            report = mem.offline_update_all_entries()  # raised NotFoundError
        assert report.deleted == () and _own(other, "old") is None
        assert _own(other, "new") is not None
