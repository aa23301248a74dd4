"""The LLM request contract, against the stub server: bounded schemas, the structured-output
step-down, reported vs estimated usage, context packing, unusable answers and the per-turn
fallback that keeps every turn remembered."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import llm_config
from lightmem import LightMemory
from lightmem.ledger import Ledger, token_sources
from lightmem.llm import OpenAIChatClient
from lightmem.llm.schema import max_chars, messages_tokens_bound
from lightmem.pipeline.prompts import extract_flat_schema
from lightmem.pipeline.summarize import LLMSummarizer
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from lightmem.types import MemoryEntry, Scope

TURNS = [
    {"id": "a", "content": "I adopted a cat named Tom.", "speaker_name": "Maya"},
    {"id": "b", "content": "My pottery class starts on Monday.", "speaker_name": "Leo"},
    {"id": "c", "content": "Tom hates the vacuum cleaner.", "speaker_name": "Maya"},
]


def _usage(mem: LightMemory) -> dict[str, dict[str, Any]]:
    return {r["op"]: r for r in mem.stats()["usage"]["by_operation"] if r["kind"] == "llm"}


def _chat_bodies(stub: OpenAIStubServer) -> list[dict[str, Any]]:
    return [b for b in stub.counters.bodies if "messages" in b]


def test_answers_that_always_cite_unknown_turns_fall_back_to_per_turn_entries(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    """Issue 11 item 6: every repair round cites unknown ids; before the fix the turns were
    marked extracted with no entry and never retried."""
    bad = json.dumps({"facts": [{"fact": "Invented", "source_ids": ["nope"]}]})
    llm.queue(*[bad] * 10)
    with LightMemory.from_config(
        llm_config(stub, store_path, max_attempts=2, json_repairs=2)
    ) as mem:
        mem.add_memory(TURNS, force_extract=True, user_id="maya")
        entries = mem.list_entries(filters={"kind": "entry"}, user_id="maya")
        usage = _usage(mem)
    assert {s for e in entries for s in e.source_ids} == {"a", "b", "c"}
    assert all(e.metadata["extractor"] == "offline-fallback" for e in entries)
    assert "Invented" not in {e.text for e in entries}
    assert usage["extract"]["calls"] == 3
    assert usage["extract.rejected"]["items"] == 1
    assert usage["extract.fallback"]["items"] == 3


def test_unusable_answers_are_counted_and_lose_no_turn(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    llm.queue(*['{"facts": [{"fact": "never closed'] * 10)
    with LightMemory.from_config(
        llm_config(stub, store_path, max_attempts=2, json_repairs=1)
    ) as mem:
        result = mem.add_memory(TURNS, force_extract=True, user_id="maya")
        entries = mem.list_entries(filters={"kind": "entry"}, user_id="maya")
        usage = _usage(mem)
    assert result.messages_buffered == 0
    assert {s for e in entries for s in e.source_ids} == {"a", "b", "c"}
    assert usage["extract.unusable"]["items"] == 1
    assert usage["extract"]["calls"] == 2


def test_turns_a_usable_answer_skips_keep_their_per_turn_entry(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    llm.queue(json.dumps({"facts": [{"fact": "Maya has a cat, Tom.", "source_ids": ["a"]}]}))
    with LightMemory.from_config(llm_config(stub, store_path, max_attempts=2)) as mem:
        mem.add_memory(TURNS, force_extract=True, user_id="maya")
        entries = mem.list_entries(filters={"kind": "entry"}, user_id="maya")
        usage = _usage(mem)
    by_source = {e.source_ids: e.metadata["extractor"] for e in entries}
    assert by_source[("a",)] != "offline-fallback"
    assert by_source[("b",)] == by_source[("c",)] == "offline-fallback"
    assert usage["extract.fallback"]["items"] == 2


def test_extraction_sends_a_bounded_schema_citing_only_batch_ids(
    stub: OpenAIStubServer, store_path: Path
) -> None:
    with LightMemory.from_config(
        llm_config(stub, store_path, max_attempts=2, max_tokens=4000)
    ) as mem:
        mem.add_memory(TURNS, force_extract=True)
    body = _chat_bodies(stub)[0]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    facts = fmt["json_schema"]["schema"]["properties"]["facts"]
    assert facts["maxItems"] == 3
    assert facts["items"]["properties"]["source_ids"]["items"]["enum"] == ["a", "b", "c"]
    assert body["max_tokens"] == extract_flat_schema.output(["a", "b", "c"], 3, 4000).max_tokens


@pytest.mark.parametrize("mode", ["json_object", "none"])
def test_declared_structured_mode_is_sent(
    stub: OpenAIStubServer, store_path: Path, mode: str
) -> None:
    with LightMemory.from_config(
        llm_config(stub, store_path, max_attempts=2, structured_output=mode)
    ) as mem:
        mem.add_memory(TURNS, force_extract=True)
    body = _chat_bodies(stub)[0]
    if mode == "none":
        assert "response_format" not in body
    else:
        assert body["response_format"] == {"type": "json_object"}


def test_auto_steps_down_once_when_the_endpoint_refuses_schemas(
    llm: ScriptedLLM, store_path: Path
) -> None:
    with OpenAIStubServer(chat_handler=llm, refuse_formats=("json_schema",)) as stub:
        with LightMemory.from_config(llm_config(stub, store_path, max_attempts=2)) as mem:
            mem.add_memory(TURNS[:1], force_extract=True)
            mem.add_memory(TURNS[1:], force_extract=True)
            entries = mem.list_entries(filters={"kind": "entry"})
        kinds = [(b.get("response_format") or {}).get("type") for b in _chat_bodies(stub)]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert len(entries) == 3


def test_a_declared_schema_mode_that_is_refused_is_an_error(
    llm: ScriptedLLM, store_path: Path
) -> None:
    from lightmem import BackendError

    with OpenAIStubServer(chat_handler=llm, refuse_formats=("json_schema",)) as stub:
        cfg = llm_config(stub, store_path, max_attempts=2, structured_output="json_schema")
        with LightMemory.from_config(cfg) as mem, pytest.raises(BackendError, match="400"):
            mem.add_memory(TURNS, force_extract=True)


def test_reported_usage_is_recorded_and_estimates_are_marked(
    llm: ScriptedLLM, store_path: Path, tmp_path: Path
) -> None:
    with OpenAIStubServer(chat_handler=llm) as stub:
        with LightMemory.from_config(llm_config(stub, store_path, max_attempts=2)) as mem:
            mem.add_memory(TURNS, force_extract=True)
            split = token_sources(mem.ledger.totals())
        assert split["estimated"]["calls"] == 0
        assert split["reported"]["prompt_tokens"] == stub.counters.prompt_tokens
    with (
        OpenAIStubServer(chat_handler=ScriptedLLM(), report_usage=False) as quiet,
        LightMemory.from_config(llm_config(quiet, tmp_path / "q.db", max_attempts=2)) as mem,
    ):
        mem.add_memory(TURNS, force_extract=True)
        split = token_sources(mem.ledger.totals())
        persisted = _usage(mem)
    assert split["reported"] == {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    assert split["estimated"]["calls"] == 1 and split["estimated"]["prompt_tokens"] > 0
    assert persisted["extract.estimated"]["calls"] == 1  # the store keeps the distinction


def test_no_request_exceeds_the_context_and_a_huge_turn_is_cut(
    stub: OpenAIStubServer, store_path: Path
) -> None:
    huge = {"id": "h", "content": " ".join(["Tom chased the red ball."] * 800)}
    msgs = [*TURNS, huge, {"id": "z", "content": "Leo bought clay.", "speaker_name": "Leo"}]
    cfg = llm_config(stub, store_path, max_attempts=2, context_tokens=1024)
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(msgs, force_extract=True)
        entries = mem.list_entries(filters={"kind": "entry"}, limit=1000)
        usage = _usage(mem)
        stored = mem.sources(next(e.id for e in entries if e.source_ids == ("h",)))
    bodies = _chat_bodies(stub)
    assert len(bodies) >= 2
    for b in bodies:
        assert messages_tokens_bound(b["messages"]) + b["max_tokens"] <= 1024
    assert usage["extract.cut"]["items"] == 1
    assert {s for e in entries for s in e.source_ids} == {"a", "b", "c", "h", "z"}
    assert stored[0].content == huge["content"]  # cut in the prompt only


def test_a_long_window_is_summarised_in_parts_that_fit(stub: OpenAIStubServer) -> None:
    client = OpenAIChatClient(
        "stub", base_url=stub.base_url, api_key="k", context_tokens=2048, ledger=Ledger()
    )
    now = datetime(2024, 1, 1, tzinfo=UTC)
    entries = [
        MemoryEntry(
            id=f"e{i}",
            text=f"Memory number {i}: Maya talked about her cat Tom and the garden.",
            original_text="",
            scope=Scope(user_id="u"),
            timestamp=now,
            created_at=now,
            updated_at=now,
        )
        for i in range(150)
    ]
    summary = LLMSummarizer(client).summarize(entries, "")
    bodies = _chat_bodies(stub)
    assert len(bodies) >= 2 and summary
    for b in bodies:
        assert messages_tokens_bound(b["messages"]) + b["max_tokens"] <= 2048
    # each part after the first sees the summary so far
    assert "PREVIOUS: " in bodies[1]["messages"][1]["content"]
    seen = "".join(b["messages"][1]["content"] for b in bodies)
    assert all(f"Memory number {i}:" in seen for i in range(150))


_leaf = st.one_of(
    st.integers(0, 40).map(lambda n: {"type": "string", "maxLength": n}),
    st.just({"type": "number"}),
    st.just({"type": "boolean"}),
    st.lists(st.text(max_size=6), min_size=1, max_size=4).map(
        lambda v: {"type": "string", "enum": v}
    ),
)
_schemas = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.tuples(inner, st.integers(0, 4)).map(
            lambda t: {"type": "array", "items": t[0], "maxItems": t[1]}
        ),
        st.dictionaries(st.text("abcdef", min_size=1, max_size=5), inner, max_size=4).map(
            lambda p: {"type": "object", "properties": p}
        ),
    ),
    max_leaves=8,
)


def _longest(schema: dict[str, Any]) -> Any:
    """The largest value a bounded schema admits (ASCII text, long numbers)."""
    if "enum" in schema:
        return max(schema["enum"], key=lambda v: len(json.dumps(v)))
    kind = schema["type"]
    if kind == "string":
        return "x" * schema["maxLength"]
    if kind == "number":
        return -1.2345678901234567e-300
    if kind == "boolean":
        return False
    if kind == "array":
        return [_longest(schema["items"])] * schema["maxItems"]
    return {k: _longest(v) for k, v in schema["properties"].items()}


@given(_schemas)
def test_max_chars_bounds_the_longest_answer(schema: dict[str, Any]) -> None:
    compact = json.dumps(_longest(schema), separators=(", ", ": "), ensure_ascii=False)
    assert len(compact) <= max_chars(schema)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "facts",
                    "fact",
                    "source_ids",
                    "events",
                    "relations",
                    "summary",
                    "id",
                    "from",
                    "to",
                    "type",
                    "actions",
                    "action",
                    "text",
                    "scores",
                    "kind",
                    "detail",
                    "steps",
                    "participants",
                    "time",
                    "cause",
                    "effect",
                ]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=20,
)


@given(_json)
def test_reply_parsers_refuse_any_bad_answer_with_invalid_reply_only(obj: Any) -> None:
    """Whatever a bad model answers, parsers either accept it or raise ``ValueError``
    (``InvalidReply``), which the client turns into a repair round or an unusable count."""
    from lightmem.fluxmem.prompts import attribute, steps, verify
    from lightmem.pipeline.prompts import extract_event, extract_flat, summarize, update

    parsers = [
        lambda o: extract_flat.parse(o, {"a", "b"}, strict=True),
        lambda o: extract_event.parse(o, {"a", "b"}),
        update.parse,
        summarize.parse,
        lambda o: verify.parse(o, 2),
        attribute.parse,
        steps.parse,
    ]
    for parse in parsers:
        with contextlib.suppress(ValueError):  # exactly the refusal; anything else fails
            parse(obj)
