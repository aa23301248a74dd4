"""Bad input gets a LightMemError subclass naming the field, and nothing stored changes."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from conftest import FIXTURES, backend_store_config, library_vars
from lightmem import (
    BackendError,
    ConfigError,
    InvalidInputError,
    LightMemError,
    LightMemory,
    NotFoundError,
    SQLiteStore,
    StoreError,
)
from lightmem.embed.base import Embedder


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def filled_once(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LightMemory]:
    """The ``filled`` store, made once per backend for the tests that only check what a
    call refuses: each of them asserts that its refused call left the store unchanged, so
    the next one still finds the store as ``filled`` makes it."""
    path = tmp_path_factory.mktemp("filled") / "mem.db"
    with pytest.MonkeyPatch.context() as mp:  # made before the per-test clearing applies
        for name in library_vars(os.environ):
            mp.delenv(name)
        with (
            backend_store_config(request.param, path) as config,
            LightMemory.from_config({"store": config}) as mem,
        ):
            conversation = json.loads((FIXTURES / "conversation.json").read_text())
            mem.add_memory(conversation, force_extract=True, user_id="maya")
            yield mem


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ({"role": "user"}, "messages[0].content"),
        ({"content": "   "}, "messages[0].content"),
        ({"content": 42}, "messages[0].content"),
        (
            [{"content": "ok"}, {"content": "x", "timestamp": "next tuesday-ish"}],
            "messages[1].timestamp",
        ),
        ({"content": "x", "speaker_name": 7}, "messages[0].speaker_name"),
        ({"content": "x", "metadata": {"f": object()}}, "messages[0].metadata"),
        ({"content": "x", "id": ""}, "messages[0].id"),
        ([{"content": "a", "id": "1"}, {"content": "b", "id": "1"}], "messages[1].id"),
        ({"content": "bad \ud800 surrogate"}, "messages[0].content"),
        ({"content": "nul \x00 byte"}, "messages[0].content"),
        ("just a string", "messages"),
        ([], "messages"),
        ([["not", "a", "dict"]], "messages[0]"),
    ],
)
def test_bad_messages_name_the_field(filled_once: LightMemory, messages: Any, field: str) -> None:
    filled = filled_once
    before = filled.stats()
    assert before["messages"] > 0 and before["entries"] > 0
    with pytest.raises(InvalidInputError) as err:
        filled.add_memory(messages)
    assert field in str(err.value)
    assert filled.stats()["entries"] == before["entries"]
    assert filled.stats()["messages"] == before["messages"]


def test_duplicate_message_id_in_scope_is_rejected_and_nothing_lost(filled: LightMemory) -> None:
    before = filled.stats(user_id="maya")
    with pytest.raises(InvalidInputError, match=r"messages\[1\]\.id"):
        filled.add_memory(
            [{"id": "new-1", "content": "x"}, {"id": "s1:1", "content": "y"}], user_id="maya"
        )
    after = filled.stats(user_id="maya")
    assert after["messages"] == before["messages"]  # the whole call rolled back


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": None}, "query"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": True}, "limit"),
        ({"query": "x", "mode": "magic"}, "mode"),
        ({"query": "x", "budget_tokens": -5}, "budget_tokens"),
        ({"query": "x", "filters": {"colour": "red"}}, "filters.colour"),
        ({"query": "x", "filters": {"time_from": "soonish"}}, "filters.time_from"),
        (
            {"query": "x", "filters": {"time_from": "2024-02-01", "time_to": "2024-01-01"}},
            "filters.time_from",
        ),
        ({"query": "x", "filters": {"kind": "everything"}}, "filters.kind"),
        ({"query": "x", "user_id": ""}, "user_id"),
        ({"query": "x", "agent_id": 5}, "agent_id"),
        # lone surrogates and NUL cannot be stored (or bound) on either backend
        ({"query": "\ud800"}, "query"),
        ({"query": "x", "user_id": "\udfff"}, "user_id"),
        ({"query": "x", "run_id": "a\x00b"}, "run_id"),
        ({"query": "x", "filters": {"speaker": "\ud800"}}, "filters.speaker"),
    ],
)
def test_bad_retrieve_arguments(
    filled_once: LightMemory, kwargs: dict[str, Any], field: str
) -> None:
    before = filled_once.stats()
    with pytest.raises(InvalidInputError) as err:
        filled_once.retrieve(**kwargs)
    assert str(err.value).startswith(field)
    after = filled_once.stats()
    assert (after["entries"], after["messages"]) == (before["entries"], before["messages"])


def test_fts_and_sql_metacharacters_are_plain_words(filled_once: LightMemory) -> None:
    for q in ['"', "NEAR(a b)", "knee* OR 1=1; DROP TABLE entries;--", "a:b -c ^d", "'); --", "()"]:
        filled_once.retrieve(q, mode="context", user_id="maya")
    assert filled_once.stats(user_id="maya")["entries"] == 19


def test_unknown_entry_ids(filled: LightMemory) -> None:
    for call in (filled.get, filled.delete, filled.history, filled.restore):
        with pytest.raises(NotFoundError, match="id"):
            call("nope")
    with pytest.raises(InvalidInputError, match="id"):
        filled.get("")
    for bad in ("\ud800", "a\x00"):  # found by the long fuzz campaign
        for lookup in (filled.get, filled.history, filled.sources):
            with pytest.raises(InvalidInputError, match=r"^id"):
                lookup(bad)
    with pytest.raises(InvalidInputError, match="text"):
        filled.update(filled.list_entries(limit=1)[0].id, "  ")


def test_bad_update_parameters(filled: LightMemory) -> None:
    with pytest.raises(InvalidInputError, match="top_k"):
        filled.construct_update_queue_all_entries(top_k=0)
    with pytest.raises(InvalidInputError, match="score_threshold"):
        filled.offline_update_all_entries(score_threshold=2)


def test_an_update_text_is_held_to_a_messages_length(filled: LightMemory) -> None:
    """A 6 MB text once held a server worker in one regex scan until it was killed."""
    entry = filled.list_entries({"kind": "entry"}, limit=1)[0]
    with pytest.raises(InvalidInputError, match=r"^text: longer than 1000000 characters"):
        filled.update(entry.id, "x " * 500_001)
    assert filled.get(entry.id).text == entry.text


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"nonsense": 1}, "nonsense"),
        ({"pre_compress": "yes"}, "pre_compress"),
        ({"pre_compressor": {"model_name": "gzip"}}, "pre_compressor.model_name"),
        ({"pre_compressor": {"configs": {"compress_config": {"rate": 3}}}}, "rate"),
        ({"pre_compressor": {"model_name": "llmlingua-2"}}, "llmlingua_config.model_name"),
        ({"retrieve_strategy": "telepathy"}, "retrieve_strategy"),
        ({"index_strategy": "embedding", "retrieve_strategy": "hybrid"}, "retrieve_strategy"),
        ({"text_embedder": {"model_name": "huggingface"}}, "text_embedder.configs.model"),
        ({"text_embedder": {"configs": {"embedding_dims": 300}}}, "embedding_dims"),
        ({"embedding_retriever": {"model_name": "milvus"}}, "embedding_retriever.model_name"),
        ({"memory_manager": {"model_name": "anthropic"}}, "memory_manager.model_name"),
        ({"memory_manager": {"model_name": "openai", "configs": {"modle": "x"}}}, "modle"),
        ({"topic_segmenter": {"configs": {"window": 0}}}, "topic_segmenter.configs.window"),
        ({"sensory_buffer": {"max_tokens": 1, "x": 2}}, "sensory_buffer"),
        ("not a dict", ""),
    ],
)
def test_bad_config_is_rejected(config: Any, field: str, tmp_path: Path) -> None:
    cfg = (
        {**config, "store": {"path": str(tmp_path / "x.db")}}
        if isinstance(config, dict)
        else config
    )
    with pytest.raises(ConfigError) as err:
        LightMemory.from_config(cfg)
    assert field in str(err.value)


def test_foreign_sqlite_file_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE invoices (n INTEGER)")
    con.execute("INSERT INTO invoices VALUES (7)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="another application"):
        LightMemory.from_config({"store": {"path": str(path)}})
    con = sqlite3.connect(path)
    assert con.execute("SELECT n FROM invoices").fetchall() == [(7,)]
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["invoices"]


def test_unreadable_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(StoreError, match=r"store\.path"):
        LightMemory.from_config({"store": {"path": str(path)}})
    assert path.read_bytes().startswith(b"this is not")


def test_newer_schema_is_refused(store_path: Path) -> None:
    LightMemory.from_config({"store": {"path": str(store_path)}}).close()
    con = sqlite3.connect(store_path)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema version 99"):
        LightMemory.from_config({"store": {"path": str(store_path)}})


def test_other_embedder_cannot_search_a_store(store_path: Path) -> None:
    LightMemory.from_config({"store": {"path": str(store_path)}}).close()
    with pytest.raises(StoreError, match="text_embedder"):
        LightMemory.from_config(
            {
                "store": {"path": str(store_path)},
                "text_embedder": {"configs": {"embedding_dims": 128}},
            }
        )


class _BrokenEmbedder(Embedder):
    """A backend that answers with the wrong number of dimensions."""

    name = "broken"
    dim = 8

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        return np.ones((len(texts), self.dim + 1))


def _foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE invoices (n INTEGER)")
    con.commit()
    con.close()
    LightMemory.from_config({"store": {"path": str(path)}})


def _broken_backend(tmp_path: Path) -> None:
    with LightMemory(SQLiteStore(str(tmp_path / "b.db")), _BrokenEmbedder()) as mem:
        mem.add_memory({"content": "Maya adopted a cat."}, force_extract=True)


def _unknown_entry(tmp_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(tmp_path / "n.db")}}) as mem:
        mem.get("no-such-id")


def _bad_message(tmp_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(tmp_path / "i.db")}}) as mem:
        mem.add_memory({"content": "x", "mood": float("nan")})


def _bad_config(tmp_path: Path) -> None:
    LightMemory.from_config({"store": {"path": str(tmp_path / "c.db"), "colour": "red"}})


@pytest.mark.parametrize(
    ("trigger", "expected", "field"),
    [
        (_bad_message, InvalidInputError, "messages[0].metadata.mood"),
        (_unknown_entry, NotFoundError, "no-such-id"),
        (_bad_config, ConfigError, "store.colour"),
        (_foreign_file, StoreError, "another application"),
        (_broken_backend, BackendError, "broken"),
    ],
)
def test_each_failure_raises_its_own_subclass(
    tmp_path: Path, trigger: Callable[[Path], None], expected: type[LightMemError], field: str
) -> None:
    """Each kind of failure, reached through a public entry point, raises exactly its
    subclass (so ``except NotFoundError`` never catches bad input), catchable as the root."""
    with pytest.raises(LightMemError) as err:
        trigger(tmp_path)
    assert type(err.value) is expected, repr(err.value)
    assert field in str(err.value)
    others = {InvalidInputError, NotFoundError, ConfigError, StoreError, BackendError} - {expected}
    assert not isinstance(err.value, tuple(others))
