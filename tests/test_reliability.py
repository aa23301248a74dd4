"""Reliability: model faults during ingestion, crashes (SIGKILL) mid-ingestion."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lightmem import BackendError, LightMemory, SQLiteStore, WordLlamaEmbedder
from lightmem.testing import OpenAIStubServer, ScriptedLLM


class FaultyLLM(ScriptedLLM):
    """Scripted answers, spoiled at random while ``faulty`` is on."""

    def __init__(self, rng: random.Random, rate: float) -> None:
        super().__init__()
        self.rng, self.rate, self.faulty, self.spoiled = rng, rate, True, 0

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        good = super().__call__(messages)
        if not self.faulty or self.rng.random() >= self.rate:
            return good
        self.spoiled += 1
        kind = self.rng.choice(["malformed", "truncated", "unknown_ids", "wrong_shape"])
        if kind == "malformed":
            return "Sure! Here are the facts: {"
        if kind == "truncated":
            return good[: len(good) // 2]
        if kind == "unknown_ids":
            return json.dumps({"facts": [{"fact": "made up", "source_ids": ["nope"]}]})
        return json.dumps({"facts": "none"})


def _facts(mem: LightMemory) -> set[tuple[str, tuple[str, ...]]]:
    return {(e.text, e.source_ids) for e in mem.list_entries(filters={"kind": "entry"}, limit=1000)}


def _cfg(stub: OpenAIStubServer, path: Path) -> dict[str, Any]:
    return {
        "store": {"path": str(path)},
        "sensory_buffer": {"max_tokens": 48},
        "short_term_memory": {"max_tokens": 48},
        "memory_manager": {
            "model_name": "openai",
            "configs": {
                "model": "m",
                "openai_base_url": stub.base_url,
                "api_key": "k",
                "max_attempts": 3,
                "timeout_s": 0.5,
                "backoff_s": 0.01,  # what is retried counts here, not how long it waits
            },
        },
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_llm_faults_end_in_the_fault_free_state(
    tmp_path: Path, conversation: list[dict[str, Any]], seed: int
) -> None:
    with (
        OpenAIStubServer(chat_handler=ScriptedLLM()) as stub,
        LightMemory.from_config(_cfg(stub, tmp_path / "clean.db")) as mem,
    ):
        for msg in conversation:
            mem.add_memory(msg)
        mem.flush()
        clean = _facts(mem)
    rng = random.Random(seed)
    llm = FaultyLLM(rng, rate=0.25)
    with (
        OpenAIStubServer(chat_handler=llm) as stub,
        LightMemory.from_config(_cfg(stub, tmp_path / "faulty.db")) as mem,
    ):
        for msg in conversation:
            if rng.random() < 0.3:
                n = rng.randint(1, 3)  # 3 in a row exhausts the retries: a failed call
                stub.fail_next(rng.choice([429, 500, 502, 503]), times=n)
            if rng.random() < 0.1:
                stub.delay_next(1.5)  # longer than the client's timeout
            # on failure the message is stored; extraction waits for the next flush
            with contextlib.suppress(BackendError):
                mem.add_memory(msg)
        llm.faulty = False  # the faults stop
        for _ in range(3):
            try:
                mem.flush()
                break
            except BackendError:
                continue
        stats = mem.stats()
        assert stats["messages"] == len(conversation)
        assert stats["messages_pending"] == stats["messages_segmented"] == 0
        assert _facts(mem) == clean
        assert not mem.store.integrity_check()
        usage = {(r["kind"], r["op"]): r for r in stats["usage"]["by_operation"]}
        llm_calls = usage[("llm", "extract")]["calls"]
        assert llm_calls == stub.counters.requests["/v1/chat/completions"]
        assert usage[("llm", "extract")]["errors"] == stub.counters.injected > 0


@pytest.mark.parametrize("llm", [False, True])
def test_sigkill_mid_ingestion_loses_no_acknowledged_write(tmp_path: Path, llm: bool) -> None:
    from lightmem.bench import crash

    # a few kills per pipeline (each starts an interpreter); `lightmem bench crash --kills 200`
    # is the long run
    kills = 2 if llm else 3
    result = crash.run(kills, llm=llm, seed=7, path=tmp_path / "crash.db")
    assert result["kills_mid_ingestion"] == kills  # after >= 1 acknowledged call, before "done"
    assert result["acked_calls"] >= kills
    assert result["lost_acked_messages"] == 0
    assert result["acked_not_extracted_after_flush"] == 0
    assert result["left_buffered_after_flush"] == 0
    assert result["integrity_failures"] == 0


def test_embedder_faults_keep_messages_and_recover(
    tmp_path: Path, conversation: list[dict[str, Any]]
) -> None:
    def cfg(stub: OpenAIStubServer, name: str) -> dict[str, Any]:
        return {
            "store": {"path": str(tmp_path / name)},
            "text_embedder": {
                "model_name": "openai",
                "configs": {
                    "model": "e",
                    "embedding_dims": 64,
                    "openai_base_url": stub.base_url,
                    "api_key": "k",
                    "backoff_s": 0.01,
                },
            },
        }

    with OpenAIStubServer() as stub, LightMemory.from_config(cfg(stub, "clean.db")) as mem:
        mem.add_memory(conversation, force_extract=True)
        clean = {(e.text, e.source_ids) for e in mem.list_entries(filters={"kind": "entry"})}
    with OpenAIStubServer() as stub, LightMemory.from_config(cfg(stub, "faulty.db")) as mem:
        stub.fail_next(503, times=10)  # outlasts the SDK's retries
        with pytest.raises(BackendError, match="embedding endpoint failed"):
            mem.add_memory(conversation, force_extract=True)
        assert mem.stats()["messages"] == len(conversation) and mem.stats()["entries"] == 0
        stub.fail_next(503, times=0)
        while stub.counters.injected < 10:  # let the queued faults drain, as an outage ends
            with contextlib.suppress(BackendError):
                mem.flush()
        mem.flush()
        assert {
            (e.text, e.source_ids) for e in mem.list_entries(filters={"kind": "entry"})
        } == clean
        assert not mem.store.integrity_check()


def test_concurrent_processes_lose_and_double_nothing(store_config: dict[str, Any]) -> None:
    from lightmem.bench import concurrency

    result = concurrency.run(store_config, writers=2, readers=2, seconds=3)
    assert result["acked_messages"] > 0 and result["failed_processes"] == 0
    assert result["lost"] == 0 and result["duplicated_entries"] == 0
    assert result["entries_match_messages"] and result["checksum_match"]
    assert result["reader_errors"] == 0 and result["integrity_problems"] == []


class _RacedStore(SQLiteStore):
    """Another writer claims the first pending message just before each of this writer's
    first ``races`` buffer transitions, so those are refused as a whole."""

    races = 2

    def mark_segmented(self, assignments: Sequence[tuple[int, str]]) -> bool:
        if self.races:
            self.races -= 1
            assert super().mark_segmented([(assignments[0][0], "other-writer")])
        return super().mark_segmented(assignments)


def test_a_forced_add_that_loses_a_race_still_extracts_its_messages(
    tmp_path: Path, embedder: WordLlamaEmbedder
) -> None:
    store = _RacedStore(tmp_path / "raced.db")
    store.bind_embedder(embedder.name, embedder.dim)
    mem = LightMemory(store, embedder)
    mem.add_memory([{"id": "a", "content": "I water the ferns on Sundays."}])
    done = mem.add_memory([{"id": "b", "content": "My sister visits in June."}], force_extract=True)
    assert store.races == 0 and done.entries_created
    assert mem.stats()["messages_pending"] == mem.stats()["messages_segmented"] == 0
    cited = {s for e in mem.list_entries(filters={"kind": "entry"}) for s in e.source_ids}
    assert cited == {"a", "b"}
    mem.close()
