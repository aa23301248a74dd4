"""Property tests over every public entry point: whatever comes in, only LightMemError
subclasses come out, and nothing stored is changed by a rejected call."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lightmem import LightMemError, LightMemory
from lightmem.config import parse_config
from lightmem.fluxmem import FluxMemAgent

# Every code point, lone surrogates and right-to-left scripts included.
ANY_TEXT = st.text(alphabet=st.characters(blacklist_categories=()), max_size=200)
META = st.sampled_from(
    [
        '"',
        "NEAR(a b)",
        "*",
        " OR ",
        "AND NOT",
        "^x",
        "col:val",
        "-x",
        "'",
        ";--",
        "/*",
        "\\",
        "%",
        "_",
        "()",
        "\u202e\u05e9\u05dc\u05d5\u05dd",
        "\x00",
        "</data>",
        "{{",
        "'); DROP TABLE x;--",
    ]
)
QUERY = st.lists(st.one_of(ANY_TEXT, META), min_size=1, max_size=5).map("".join)
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), ANY_TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(ANY_TEXT, inner, max_size=4)
    ),
    max_leaves=12,
)


@functools.cache
def _memory() -> LightMemory:
    tmp = tempfile.mkdtemp(prefix="lightmem-fuzz-")
    mem = LightMemory.from_config({"store": {"path": str(Path(tmp) / "fuzz.db")}})
    mem.add_memory(
        [{"id": f"s{i}", "content": f"seed fact {i} about tuna and Porto"} for i in range(20)],
        force_extract=True,
    )
    return mem


@functools.cache
def _agent() -> FluxMemAgent:
    mem = _memory()
    return FluxMemAgent(mem.store.graph(), mem.embedder)


def _only_ours(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except LightMemError:
        return None


@given(JSONISH)
def test_add_memory(messages: Any) -> None:
    mem = _memory()
    before = mem.stats()["messages"]
    result = _only_ours(mem.add_memory, messages)
    after = mem.stats()["messages"]
    assert after >= before if result is not None else after == before


@given(
    QUERY,
    st.one_of(st.none(), st.integers(-5, 50)),
    st.sampled_from([None, "embedding", "context", "hybrid", "hierarchical", "x"]),
)
def test_retrieve(query: str, limit: int | None, mode: str | None) -> None:
    out = _only_ours(_memory().retrieve, query, limit, mode=mode)
    assert out is None or isinstance(out, list)


@given(
    st.one_of(
        st.dictionaries(
            st.sampled_from(
                ["time_from", "time_to", "speaker", "topic_id", "kind", "event_id", "other"]
            ),
            JSONISH,
        ),
        JSONISH,
    )
)
def test_filters(filters: Any) -> None:
    _only_ours(_memory().retrieve, "tuna", 5, filters)


@given(JSONISH, JSONISH, JSONISH)
def test_scope_arguments(user: Any, agent: Any, run: Any) -> None:
    _only_ours(_memory().retrieve, "tuna", user_id=user, agent_id=agent, run_id=run)
    _only_ours(_memory().stats, user_id=user, agent_id=agent, run_id=run)


@given(JSONISH)
def test_entry_methods(entry_id: Any) -> None:
    mem = _memory()
    entries = mem.stats()["entries"]
    for method in (mem.get, mem.history, mem.sources):
        _only_ours(method, entry_id)
    _only_ours(mem.restore, entry_id, 1)
    assert mem.stats()["entries"] == entries  # lookups change nothing


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "pre_compress",
                "pre_compressor",
                "topic_segmenter",
                "text_embedder",
                "retrieval",
                "update",
                "store",
                "memory_manager",
                "messages_use",
                "junk",
            ]
        ),
        JSONISH,
        max_size=4,
    )
)
def test_config(raw: dict[str, Any]) -> None:
    _only_ours(parse_config, raw)


@given(JSONISH, ANY_TEXT)
def test_fluxmem_knowledge_and_subgraph(docs: Any, task: str) -> None:
    agent = _agent()
    _only_ours(agent.add_knowledge, docs)
    sub = _only_ours(agent.context, task)
    assert sub is None or sub.count("<semantic_memory>") == 1


def test_ten_megabyte_message_is_refused_cleanly() -> None:
    mem = _memory()
    before = mem.stats()["messages"]
    try:
        mem.add_memory({"content": "x" * 10_000_000})
    except LightMemError as exc:
        assert "messages[0].content" in str(exc)
    assert mem.stats()["messages"] == before
