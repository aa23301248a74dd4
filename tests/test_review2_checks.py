"""Checks for the second review's findings: the last allowed answer keeps its storable part,
MCP's empty shortcuts, one check each for Unicode, whole numbers and step feedback, and the
twx bench's reported prompt cuts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from conftest import llm_config
from lightmem import ConfigError, InvalidInputError, LightMemory, WordLlamaEmbedder
from lightmem.ledger import Ledger
from lightmem.llm import OpenAIChatClient
from lightmem.pipeline.update import UpdateItem
from lightmem.pipeline.update_llm import LLMUpdater
from lightmem.sanitize import check_text
from lightmem.server.mcp import create_mcp
from lightmem.server.tenancy import TenantPool
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from lightmem.types import MemoryEntry, Scope

TURNS = [
    {"id": "t1", "content": "I like green tea."},
    {"id": "t2", "content": "I moved to Porto last year."},
]
_NUL = "\x00"


def _usage(mem: LightMemory) -> dict[str, int]:
    return {r["op"]: r["items"] for r in mem.stats()["usage"]["by_operation"]}


def _chat_requests(stub: OpenAIStubServer) -> int:
    return len([b for b in stub.counters.bodies if "messages" in b])


# -- finding 3: one unstorable field on the last answer drops only its item -------------------
def test_the_last_answer_keeps_its_facts_the_store_can_hold(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    reply = json.dumps(
        {
            "facts": [
                {"fact": "Ana likes green tea", "source_ids": ["t1"], "time": ""},
                {"fact": f"Ana moved to Porto{_NUL}", "source_ids": ["t2"], "time": ""},
            ]
        }
    )
    llm.queue(reply, reply, reply)  # never repaired
    with LightMemory.from_config(llm_config(stub, store_path)) as mem:
        mem.add_memory(TURNS, force_extract=True)
        entries = mem.list_entries(filters={"kind": "entry"})
        usage = _usage(mem)
    assert _chat_requests(stub) == 3  # the earlier answers were still sent back for repair
    texts = {e.source_ids: (e.text, e.metadata["extractor"]) for e in entries}
    assert texts[("t1",)] == ("Ana likes green tea", "extract_flat/3")
    assert texts[("t2",)][1] == "offline-fallback"  # only the dropped fact's turn
    assert usage["extract.rejected"] == 1 and "extract.unusable" not in usage


def _event(key: str, summary: str, turn: str) -> dict[str, Any]:
    fact = {"fact": summary, "source_ids": [turn], "time": ""}
    return {"id": key, "summary": summary, "time": "", "participants": ["Ana"], "facts": [fact]}


def test_the_last_answer_drops_an_unstorable_event_and_its_relations_only(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    bad_fact = _event("e3", "Ana drinks tea daily", "t1")
    bad_fact["facts"].append({"fact": f"Ana{_NUL}", "source_ids": ["t1"], "time": ""})
    reply = json.dumps(
        {
            "events": [
                _event("e1", "Ana likes green tea", "t1"),
                {**_event("e2", "Ana moved to Porto", "t2"), "cause": f"work{_NUL}"},
                bad_fact,
            ],
            "relations": [
                {"from": "e2", "to": "e1", "type": "follows"},
                {"from": "e3", "to": "e1", "type": "related"},
            ],
        }
    )
    llm.queue(reply, reply, reply)
    cfg = {**llm_config(stub, store_path), "extraction_mode": "event"}
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(TURNS, force_extract=True)
        events = {e.text: e for e in mem.list_entries(filters={"kind": "event"})}
        facts = mem.list_entries(filters={"kind": "entry"})
        usage = _usage(mem)
    assert set(events) == {"Ana likes green tea", "Ana drinks tea daily"}
    assert events["Ana likes green tea"].metadata["relations"] == []
    assert events["Ana drinks tea daily"].metadata["relations"] == [
        {"type": "related", "to": events["Ana likes green tea"].id}
    ]
    fallback = [f.source_ids for f in facts if f.metadata["extractor"] == "offline-fallback"]
    assert fallback == [("t2",)]
    assert usage["extract.rejected"] == 2  # the event e2 and one fact of e3


def test_the_last_update_answer_drops_only_its_unstorable_action(
    llm: ScriptedLLM, stub: OpenAIStubServer
) -> None:
    client = OpenAIChatClient("stub", base_url=stub.base_url, api_key="k", ledger=Ledger())
    now = datetime(2024, 1, 1, tzinfo=UTC)
    newer, old1, old2 = (
        MemoryEntry(id=i, text=t, original_text=t, scope=Scope(), created_at=now, updated_at=now)
        for i, t in (("n", "Ana lives in Porto"), ("o1", "Ana lives in Lisbon"), ("o2", "Ana"))
    )
    reply = json.dumps(
        {
            "actions": [
                {"id": "o1", "action": "supersede", "by": "n"},
                {"id": "o2", "action": "merge", "text": f"Ana{_NUL}"},
            ]
        }
    )
    llm.queue(reply, reply, reply)
    actions = LLMUpdater(client).decide([UpdateItem(newer, ((old1, 0.9), (old2, 0.8)))])
    # the refused merge is dropped; its newer memory is deferred: shown again next pass
    assert [(a.op, a.target_id, a.by) for a in actions] == [
        ("supersede", "o1", "n"),
        ("defer", "n", ""),
    ]
    assert _chat_requests(stub) == 3
    rejected = [r for r in client.ledger.totals() if r.op == "update.rejected"]
    assert [r.items for r in rejected] == [1]


def test_a_refused_review_answer_defers_its_newer_memory(
    llm: ScriptedLLM, stub: OpenAIStubServer
) -> None:
    client = OpenAIChatClient("stub", base_url=stub.base_url, api_key="k", ledger=Ledger())
    now = datetime(2024, 1, 1, tzinfo=UTC)
    newer, old = (
        MemoryEntry(id=i, text=t, original_text=t, scope=Scope(), created_at=now, updated_at=now)
        for i, t in (("n", "Ana lives in Porto"), ("o1", "Ana lives in Lisbon"))
    )
    bad = json.dumps({"actions": [{"id": "o1", "action": "supersede", "by": f"n{_NUL}"}]})
    llm.queue(bad, bad, bad)
    actions = LLMUpdater(client).review([UpdateItem(newer, ((old, 0.9),))])
    # no decision was had: the pass must show it again, not record it as seen
    assert [(a.op, a.target_id) for a in actions] == [("defer", "n")]


# -- finding 4: MCP add_memory, "" (or []) is an unused parameter in both paths ----------------
def _add_memory(pool: TenantPool, args: dict[str, Any]) -> dict[str, Any]:
    tenant = pool.get("acme")

    async def main() -> dict[str, Any]:
        async with Client(create_mcp(lambda: tenant)) as c:
            out: dict[str, Any] = (await c.call_tool("add_memory", args)).structured_content or {}
            return out

    return asyncio.run(main())


_UNUSED = {"user_message": "", "assistant_message": "", "timestamp": ""}


def test_mcp_add_memory_takes_messages_beside_empty_shortcuts(pool: TenantPool) -> None:
    out = _add_memory(pool, {"messages": [{"content": "I like tea."}], **_UNUSED})
    assert out["messages_added"] == 1


def test_mcp_add_memory_takes_a_shortcut_beside_empty_messages(pool: TenantPool) -> None:
    args = {**_UNUSED, "messages": [], "user_message": "I like coffee."}
    assert _add_memory(pool, args)["messages_added"] == 1


# -- finding 6: one check of Unicode for the embedder and stored text -------------------------
def test_the_embedder_and_stored_text_refuse_a_lone_surrogate_alike(
    embedder: WordLlamaEmbedder,
) -> None:
    text = "Ana likes \ud800 tea"
    with pytest.raises(InvalidInputError) as by_embedder:
        embedder.embed([text])
    with pytest.raises(InvalidInputError) as by_store_check:
        check_text(text, "texts[0]")
    assert str(by_store_check.value) == str(by_embedder.value)
    assert "'\\ud800' at character 10" in str(by_store_check.value)
    embedder.embed(["Ana\x00 likes tea"])  # a NUL is refused where text is stored, not here


# -- finding 7: one check of "an integer of at least N" ---------------------------------------
def test_counts_are_refused_alike_and_a_client_names_its_own_parameter(
    stub: OpenAIStubServer,
) -> None:
    from lightmem.bench.twx_llm import LLMPlayer
    from lightmem.fluxmem import FluxMemConfig

    client = OpenAIChatClient("stub", base_url=stub.base_url, api_key="k")
    refusals: dict[str, Callable[[], object]] = {
        "steps_shown": lambda: LLMPlayer(None, 10, client, steps_shown=0),  # type: ignore[arg-type]
        "fluxmem.top_k_semantic": lambda: FluxMemConfig(top_k_semantic=0),
        "max_attempts": lambda: OpenAIChatClient("stub", base_url=stub.base_url, max_attempts=0),
    }
    for name, build in refusals.items():
        with pytest.raises(ConfigError) as refused:
            build()
        assert str(refused.value) == f"{name}: expected an integer of at least 1, got 0"


# -- finding 8: step feedback's fields and kinds, defined once --------------------------------
def test_step_feedback_schema_and_check_follow_the_fluxmem_definition(pool: TenantPool) -> None:
    from dataclasses import fields

    from lightmem.fluxmem.types import FAILURE_KINDS, FEEDBACK_FIELDS, Feedback
    from lightmem.server.schemas import StepFeedback
    from lightmem.server.service import record_step, start_task

    assert tuple(f.name for f in fields(Feedback)) == FEEDBACK_FIELDS
    assert tuple(StepFeedback.model_fields) == FEEDBACK_FIELDS
    assert StepFeedback.model_json_schema()["properties"]["kind"]["enum"] == list(FAILURE_KINDS)
    tenant = pool.get("acme")
    sid = start_task(tenant, "print a report")["session_id"]
    with pytest.raises(InvalidInputError) as refused:
        record_step(tenant, sid, result=None, success=False, feedback={"kind": "lost"})
    assert str(refused.value) == "feedback.kind: must be one of " + ", ".join(
        repr(k) for k in FAILURE_KINDS
    )


def test_a_relation_naming_events_by_a_list_is_dropped_not_a_crash() -> None:
    from lightmem.pipeline.prompts import extract_event

    reply = {
        "events": [_event("e1", "Ana likes tea", "t1"), _event("e2", "Ana moved", "t2")],
        "relations": [{"from": ["e1"], "to": "e2", "type": "causes"}],
    }
    assert extract_event.parse(reply, {"t1", "t2"}).relations == []
