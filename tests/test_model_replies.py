"""What a model answers, held to the rules of what lightmem stores: duplicate event ids and
text the store would refuse are sent back for repair, ``messages_use`` and ``text_summary``
hold on the LLM path, prompt texts cut to fit are reported, summaries read every entry and
say who wrote them, and closing a memory loses neither the store nor its usage."""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import llm_config
from lightmem import LightMemory, SQLiteStore, StoreError, WordLlamaEmbedder
from lightmem.fluxmem.reasoner import LLMReasoner
from lightmem.ledger import Ledger, UsageRecord, calls
from lightmem.llm import OpenAIChatClient
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.summarize import KeywordSummarizer, LLMSummarizer, summarize_windows
from lightmem.pipeline.update import UpdateItem
from lightmem.pipeline.update_llm import LLMUpdater
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from lightmem.types import MemoryEntry, Scope

TURNS = [
    {"id": "t1", "content": "I like green tea."},
    {"id": "t2", "content": "I moved to Porto last year."},
]


def _event(key: str | None, summary: str, turn: str) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "summary": summary,
        "time": "",
        "participants": ["Ana"],
        "cause": "",
        "effect": "",
        "facts": [{"fact": summary, "source_ids": [turn], "time": ""}],
    }
    return ev if key is None else {"id": key, **ev}


def _events(*events: dict[str, Any], relations: list[dict[str, str]] | None = None) -> str:
    return json.dumps({"events": list(events), "relations": relations or []})


def _chat_bodies(stub: OpenAIStubServer) -> list[dict[str, Any]]:
    return [b for b in stub.counters.bodies if "messages" in b]


def _client(stub: OpenAIStubServer, **kw: Any) -> OpenAIChatClient:
    return OpenAIChatClient("stub", base_url=stub.base_url, api_key="k", ledger=Ledger(), **kw)


def _cuts(client: OpenAIChatClient) -> dict[str, int]:
    return {r.op: r.items for r in client.ledger.totals() if r.op.endswith(".cut")}


# -- finding 1: duplicate event ids ------------------------------------------------------------
def test_a_duplicate_event_id_is_sent_back_for_repair(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    llm.queue(_events(_event("e1", "Ana likes tea", "t1"), _event("e1", "Ana moved", "t2")))
    cfg = {**llm_config(stub, store_path), "extraction_mode": "event"}
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(TURNS, force_extract=True)
        events = mem.list_entries(filters={"kind": "event"})
    assert len(events) == 1  # the scripted repair: one event per day
    bodies = _chat_bodies(stub)
    assert len(bodies) == 2
    assert "events[1].id: duplicate event id 'e1'" in bodies[1]["messages"][-1]["content"]


def test_a_model_that_keeps_duplicating_ids_gets_distinct_events(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    # the id-less first event must not take "e2", which the third names
    reply = _events(
        _event(None, "Ana likes green tea", "t1"),
        _event("e2", "Ana moved to Porto", "t2"),
        _event("e2", "Ana lives in Porto", "t2"),
        relations=[{"from": "e2", "to": "e1", "type": "follows"}],
    )
    llm.queue(reply, reply, reply)  # never corrected: the last answer is kept
    cfg = {**llm_config(stub, store_path), "extraction_mode": "event"}
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(TURNS, force_extract=True)
        events = {e.text: e for e in mem.list_entries(filters={"kind": "event"})}
        facts = mem.list_entries(filters={"kind": "entry"})
    assert set(events) == {"Ana likes green tea", "Ana moved to Porto", "Ana lives in Porto"}
    assert len({e.id for e in events.values()}) == 3
    by_event = {f.text: f.metadata["event_id"] for f in facts}
    assert {by_event[t] for t in events} == {e.id for e in events.values()}
    moved = events["Ana moved to Porto"]  # a relation naming "e2" means its first event
    assert moved.metadata["relations"] == [
        {"type": "follows", "to": events["Ana likes green tea"].id}
    ]
    assert events["Ana lives in Porto"].metadata["relations"] == []


# -- finding 4: model text the store would refuse -------------------------------------------
_NUL, _SURROGATE = "\x00", "\ud800"  # json.dumps sends them as \u escapes


@pytest.mark.parametrize("bad", [_NUL, _SURROGATE], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("field", ["fact", "time", "source_ids"])
def test_flat_fact_text_the_store_refuses_is_repaired(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path, bad: str, field: str
) -> None:
    fact = {"fact": "Ana likes green tea", "source_ids": ["t1"], "time": ""}
    fact[field] = [f"t1{bad}"] if field == "source_ids" else f"Ana {bad} tea"
    llm.queue(json.dumps({"facts": [fact]}))
    with LightMemory.from_config(llm_config(stub, store_path)) as mem:
        mem.add_memory(TURNS[:1], force_extract=True)
        texts = [e.text for e in mem.list_entries(filters={"kind": "entry"})]
    assert texts == ["user: green tea"]  # the scripted repair (of the prompt's text), stored
    bodies = _chat_bodies(stub)
    assert len(bodies) == 2
    assert f"facts[0].{field}" in bodies[1]["messages"][-1]["content"]


@pytest.mark.parametrize("field", ["summary", "participants", "cause", "fact"])
def test_event_text_the_store_refuses_is_repaired(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path, field: str
) -> None:
    ev = _event("e1", "Ana likes tea", "t1")
    if field == "participants":
        ev["participants"] = [f"Ana{_NUL}"]
    elif field == "fact":
        ev["facts"][0]["fact"] = f"Ana{_SURROGATE}"
    else:
        ev[field] = f"Ana{_NUL}"
    llm.queue(_events(ev))
    cfg = {**llm_config(stub, store_path), "extraction_mode": "event"}
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(TURNS[:1], force_extract=True)
        stored = mem.list_entries(filters={"kind": "event"})
    assert len(stored) == 1 and "\x00" not in json.dumps(stored[0].to_dict())
    repair = _chat_bodies(stub)[1]["messages"][-1]["content"]
    assert "events[0]." in repair and ("NUL" in repair or "surrogate" in repair)


def test_update_and_summary_text_the_store_refuses_is_repaired(
    llm: ScriptedLLM, stub: OpenAIStubServer
) -> None:
    client = _client(stub)
    now = datetime(2024, 1, 1, tzinfo=UTC)
    newer, earlier = (
        MemoryEntry(id=i, text=t, original_text=t, scope=Scope(), created_at=now, updated_at=now)
        for i, t in (("n", "Ana still lives in Porto"), ("o", "Ana lives in Porto"))
    )
    merge = {"actions": [{"id": "o", "action": "merge", "text": f"Ana{_NUL}"}]}
    llm.queue(json.dumps(merge))
    actions = LLMUpdater(client).decide([UpdateItem(newer, ((earlier, 0.9),))])
    assert [(a.op, a.target_id) for a in actions] == [("delete", "o")]  # the scripted repair
    assert "actions[0].text" in _chat_bodies(stub)[1]["messages"][-1]["content"]
    llm.queue(json.dumps({"summary": f"Ana{_SURROGATE}"}))
    summary = LLMSummarizer(client).summarize([newer], "")
    assert summary.startswith("1 memories")
    assert "summary: not valid Unicode" in _chat_bodies(stub)[3]["messages"][-1]["content"]


def test_fluxmem_steps_and_attribution_the_store_refuses_are_repaired(
    llm: ScriptedLLM, stub: OpenAIStubServer
) -> None:
    reasoner = LLMReasoner(_client(stub))
    llm.queue(json.dumps({"steps": ["open the door", f"take{_NUL}"]}))
    assert reasoner.induce([["open the door", "take the key"]]) == ["open the door", "take the key"]
    assert "steps[1]: contains a NUL" in _chat_bodies(stub)[1]["messages"][-1]["content"]
    llm.queue(json.dumps({"kind": "missing", "detail": f"key{_SURROGATE}"}))
    assert reasoner.attribute("open the door", "I did not know where the key was").kind
    assert "detail: not valid Unicode" in _chat_bodies(stub)[3]["messages"][-1]["content"]


# -- finding 10: messages_use and text_summary with an LLM memory manager ---------------------
CHAT = [
    {"id": "u1", "role": "user", "content": "I adopted a grey kitten named Pixel."},
    {"id": "a1", "role": "assistant", "content": "Congratulations on adopting Pixel!"},
]


@pytest.mark.parametrize(("use", "kept"), [("user_only", "u1"), ("assistant_only", "a1")])
def test_messages_use_chooses_the_turns_the_model_sees(
    stub: OpenAIStubServer, store_path: Path, use: str, kept: str
) -> None:
    cfg = {**llm_config(stub, store_path), "messages_use": use}
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(CHAT, force_extract=True)
        entries = mem.list_entries(filters={"kind": "entry"})
    assert [e.source_ids for e in entries] == [(kept,)]
    prompt = _chat_bodies(stub)[0]["messages"][1]["content"]
    dropped = next(m for m in CHAT if m["id"] != kept)
    assert f"{dropped['id']} " not in prompt


def test_the_fallback_follows_text_summary_and_messages_use(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    llm.queue("not json", "not json", "not json")  # unusable: per-turn entries
    cfg = {**llm_config(stub, store_path), "messages_use": "user_only", "text_summary": False}
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(CHAT, force_extract=True)
        entries = mem.list_entries(filters={"kind": "entry"})
    assert [(e.text, e.metadata["extractor"]) for e in entries] == [
        (CHAT[0]["content"], "offline-fallback")
    ]


# -- finding 16: prompt texts cut to fit are reported -----------------------------------------
HUGE = " ".join(["Ana walked her dog along the river before breakfast."] * 400)


def test_update_summarize_and_fluxmem_cuts_are_logged_and_counted(
    stub: OpenAIStubServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = _client(stub, context_tokens=1024)
    now = datetime(2024, 1, 1, tzinfo=UTC)
    newer, earlier = (
        MemoryEntry(
            id=i, text=HUGE + t, original_text="", scope=Scope(), created_at=now, updated_at=now
        )
        for i, t in (("n", " now"), ("o", " then"))
    )
    with caplog.at_level(logging.WARNING, logger="lightmem.llm"):
        LLMUpdater(client).decide([UpdateItem(newer, ((earlier, 0.9),))])
        LLMSummarizer(client).summarize([newer], "")
        reasoner = LLMReasoner(client)
        reasoner.verify("walk the dog", [HUGE])
        reasoner.attribute(HUGE, HUGE)
        reasoner.reshape(["walk"], "too coarse", HUGE)
    # only the texts shortened count: not the short task of verify, nor reshape's short ones
    assert _cuts(client) == {
        "update.cut": 2,
        "summarize.cut": 1,
        "fluxmem.verify.cut": 1,
        "fluxmem.attribute.cut": 2,
        "fluxmem.reshape.cut": 1,
    }
    for op in ("update", "summarize", "fluxmem.verify", "fluxmem.attribute", "fluxmem.reshape"):
        assert f"LLM {op}: " in caplog.text


# -- finding 17: every entry summarised, and by whom ------------------------------------------
def _dated(n: int) -> list[dict[str, Any]]:
    start = datetime(2024, 3, 1, 9, tzinfo=UTC)
    return [
        {
            "id": f"d{i}",
            "content": f"Day {i}: Ana planted tomato number {i}.",
            "timestamp": (start + timedelta(days=i)).isoformat(),
        }
        for i in range(n)
    ]


def test_summaries_read_every_entry_page_by_page(
    store_path: Path, embedder: WordLlamaEmbedder
) -> None:
    with LightMemory.from_config({"store": {"path": str(store_path)}}, embedder=embedder) as mem:
        mem.add_memory(_dated(5), force_extract=True)
        summarizer = KeywordSummarizer(EntropyCompressor())
        report = summarize_windows(
            mem.store, mem.embedder, summarizer, Scope(), timedelta(days=30), "global", page=2
        )
        [summary] = [mem.get(i) for i in report.created]
    assert report.windows == 1
    assert set(summary.source_ids) == {f"d{i}" for i in range(5)}


def test_a_summary_names_the_summarizer_that_wrote_it(
    stub: OpenAIStubServer, tmp_path: Path, embedder: WordLlamaEmbedder
) -> None:
    offline = {"store": {"path": str(tmp_path / "offline.db")}}
    for cfg, expected in (
        (offline, {"summarizer": "offline"}),
        (llm_config(stub, tmp_path / "llm.db"), {"summarizer": "llm", "prompt": "summarize/1"}),
    ):
        with LightMemory.from_config(cfg, embedder=embedder) as mem:
            mem.add_memory(_dated(2), force_extract=True)
            created = mem.summarize("30d").created
            meta = mem.get(created[0]).metadata
        assert {k: meta.get(k) for k in ("summarizer", "prompt")} == {
            "prompt": None,
            **expected,
        }


# -- finding 18: close and usage --------------------------------------------------------------
def test_close_closes_the_store_and_keeps_usage_when_saving_it_fails(
    store_path: Path, embedder: WordLlamaEmbedder
) -> None:
    mem = LightMemory(SQLiteStore(store_path, busy_timeout_s=0.05), embedder.with_ledger(Ledger()))
    mem.add_memory(TURNS, force_extract=True)
    mem.retrieve("tea")  # usage not yet saved
    blocker = sqlite3.connect(store_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the database
    try:
        with pytest.raises(StoreError, match="locked"):
            mem.close()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with pytest.raises(StoreError, match="closed"):  # the store was closed all the same
        mem.store.usage()
    unsaved = {r.op: r for r in mem.ledger.drain()}
    assert unsaved["retrieve"].calls == 1  # kept for a later save, not lost


def test_ledger_save_keeps_what_a_failed_write_did_not_take() -> None:
    ledger = Ledger()
    ledger.record(UsageRecord("llm", "extract", calls=1, prompt_tokens=10))

    def broken(records: list[UsageRecord]) -> None:
        ledger.record(UsageRecord("llm", "extract", calls=1, prompt_tokens=5))  # meanwhile
        raise StoreError("store busy")

    with pytest.raises(StoreError):
        ledger.save(broken)
    saved: list[UsageRecord] = []
    ledger.save(saved.extend)
    assert [(r.op, r.calls, r.prompt_tokens) for r in saved] == [("extract", 2, 15)]
    assert ledger.drain() == []
    assert [r.calls for r in ledger.totals()] == [2]  # counted once


def test_calls_count_each_call_once_whatever_annotates_it() -> None:
    ledger = Ledger()
    with ledger.measure("llm", "twx.act") as call:
        call.estimated = True  # no usage from the server: also under twx.act.estimated
    ledger.record(UsageRecord("llm", "twx.act.unusable", items=1))
    with ledger.measure("embed", "search"):
        pass
    records = ledger.totals()
    assert {r.op for r in records} == {"twx.act", "twx.act.estimated", "twx.act.unusable", "search"}
    assert calls(records, "llm") == 1 and calls(records) == 2
