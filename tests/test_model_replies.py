"""What a model answers, held to the rules of what lightmem stores: duplicate event ids and
text the store would refuse are sent back for repair, ``messages_use`` and ``text_summary``
hold on the LLM path, prompt texts cut to fit are reported, summaries read every entry and
say who wrote them, and closing a memory loses neither the store nor its usage."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import llm_config
from lightmem import LightMemory, SQLiteStore, StoreError, WordLlamaEmbedder
from lightmem.ledger import Ledger, UsageRecord
from lightmem.llm import OpenAIChatClient
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.summarize import KeywordSummarizer, summarize_windows
from lightmem.testing import OpenAIStubServer
from lightmem.types import Scope

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
    # (a closed SQLite store raises the driver's error, not StoreError: not this test's topic)
    with pytest.raises((StoreError, sqlite3.ProgrammingError), match="closed"):
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
