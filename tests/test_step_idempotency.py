"""A FluxMem task step the store applied but whose answer the client never got is not
applied again when the client reports it again with its step number: library, REST and
MCP, both backends, and from another process. The same number with another result, or a
number that is not the next step, is an error naming ``step``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import acme_rest, drop_schema, require_postgres
from lightmem import InvalidInputError, WordLlamaEmbedder
from lightmem.cli.fluxmem_tables import ANALYSIS_DOC, DISTRACTORS, SPREADSHEET_DOC
from lightmem.fluxmem import Feedback, FluxMemAgent, StepResult
from lightmem.server.tenancy import TenantPool
from lightmem.store.base import MemoryStore
from lightmem.store.postgres import PostgresStore
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import Scope

TASK = "Which team has the most goals per player?"
DOCS = [SPREADSHEET_DOC, ANALYSIS_DOC, *DISTRACTORS]
MISLED = StepResult("x", Feedback("noise", "the spreadsheet tool misled me"), False)
SOLVED = StepResult("Kenya", None, True, ("group rows by team", "divide goals by players"))


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], MemoryStore]]:
    """Opens a new store object on one database each call (as another worker would)."""
    opened: list[MemoryStore] = []
    schema = f"test_steps_{uuid.uuid4().hex[:10]}"

    def make() -> MemoryStore:
        if request.param == "sqlite":
            store: MemoryStore = SQLiteStore(tmp_path / "steps.db")
        else:
            store = PostgresStore(require_postgres(), schema=schema, pool_size=2)
        opened.append(store)
        return store

    yield make
    for s in opened:
        s.close()
    if request.param == "postgres" and opened:  # a skip (no PostgreSQL) opened none
        drop_schema(schema)


def _recorded(agent: FluxMemAgent, session_id: str) -> int:
    row = agent.graph.task_sessions().get(session_id, Scope())
    assert row is not None
    return row.attempt


def test_a_step_reported_again_after_its_answer_was_lost_is_applied_once(
    open_store: Callable[[], MemoryStore], embedder: WordLlamaEmbedder
) -> None:
    first = FluxMemAgent.on_store(open_store(), embedder)
    first.add_knowledge(DOCS, source="handbook")
    started = first.start_task(TASK)
    assert started.id is not None and started.step == 0
    sid = started.id
    applied = first.resume_task(sid)
    applied.report(MISLED, step=0)
    assert applied.step == 1 and applied.context != started.context
    events = len(first.history(1000))
    # The answer never reached the client: another worker gets the same report again.
    retry = FluxMemAgent.on_store(open_store(), embedder).resume_task(sid)
    retry.report(MISLED, step=0)
    assert (retry.context, retry.outcome, retry.step) == (applied.context, None, 1)
    assert _recorded(first, sid) == 1 and len(first.history(1000)) == events
    # The same object retrying its own report (it does not know the first one landed).
    stale = first.resume_task(sid)
    stale.step = 0
    stale.report(MISLED)
    assert stale.step == 1 and _recorded(first, sid) == 1
    # The last step: applied once, and its outcome is answered again after a lost reply.
    applied.report(SOLVED, step=1)
    outcome = applied.outcome
    assert outcome is not None and outcome.success and outcome.attempts == 2
    events = len(first.history(1000))
    again = FluxMemAgent.on_store(open_store(), embedder).resume_task(sid)
    again.report(SOLVED, step=1)
    assert again.outcome == outcome and again.context is None and again.step == 2
    assert len(first.history(1000)) == events
    episode = first.graph.get_node(outcome.episode_id)
    assert episode is not None and [a["attempt"] for a in episode.data["attempts"]] == [0, 1]


def test_conflicting_step_numbers_are_refused_naming_the_field(
    open_store: Callable[[], MemoryStore], embedder: WordLlamaEmbedder
) -> None:
    agent = FluxMemAgent.on_store(open_store(), embedder)
    agent.add_knowledge(DOCS, source="handbook")
    s = agent.start_task(TASK)
    assert s.id is not None
    s.report(MISLED, step=0)
    other = agent.resume_task(s.id)
    with pytest.raises(InvalidInputError, match=r"^step: step 0 .* different result; next is 1"):
        other.report(SOLVED, step=0)
    with pytest.raises(InvalidInputError, match=r"^step: step 0 .* different result; next is 1"):
        other.report(replace(MISLED, relevant=(0,)), step=0)  # every reported field counts
    with pytest.raises(InvalidInputError, match=r"^step: .* the next is step 1, not 4"):
        other.report(SOLVED, step=4)
    for bad in (-1, True, 10**9, "1"):
        with pytest.raises(InvalidInputError, match=r"^step: expected an integer"):
            other.report(SOLVED, step=bad)  # type: ignore[arg-type]
    assert _recorded(agent, s.id) == 1  # none of them was applied
    other.report(SOLVED, step=1)
    assert other.outcome is not None and other.outcome.attempts == 2
    with pytest.raises(InvalidInputError, match=r"^step: step 1 .* different result; the task"):
        agent.resume_task(s.id).report(MISLED, step=1)
    with pytest.raises(InvalidInputError, match=r"^step: .* finished after 2 steps"):
        agent.resume_task(s.id).report(SOLVED, step=0)


def test_a_step_retried_from_another_process(tmp_path: Path, embedder: WordLlamaEmbedder) -> None:
    path = tmp_path / "proc.db"
    with FluxMemAgent.open(path) as agent:
        agent.add_knowledge(DOCS, source="handbook")
        sid = agent.start_task(TASK).id
    assert sid is not None
    # A client process reports step 0 and dies before reading the answer.
    code = textwrap.dedent(
        f"""
        from lightmem.fluxmem import Feedback, FluxMemAgent, StepResult
        with FluxMemAgent.open({str(path)!r}) as a:
            a.resume_task({sid!r}).report(
                StepResult("x", Feedback("noise", "the spreadsheet tool misled me"), False),
                step=0,
            )
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with FluxMemAgent.open(path) as agent:
        s = agent.resume_task(sid)
        seen = s.context
        s.step = 0  # the client's view: its report of step 0 got no answer
        s.report(MISLED)
        assert s.step == 1 and s.context == seen and _recorded(agent, sid) == 1


@pytest.fixture
def rest(tmp_path: Path) -> Iterator[tuple[httpx.Client, TenantPool]]:
    with acme_rest(tmp_path) as pair:
        yield pair


def test_rest_steps_are_idempotent_with_their_number(
    rest: tuple[httpx.Client, TenantPool],
) -> None:
    c, _pool = rest
    assert c.post("/v1/fluxmem/knowledge", json={"docs": DOCS}).status_code == 200
    start = c.post("/v1/fluxmem/tasks", json={"task": TASK}).json()
    assert start["step"] == 0
    url = f"/v1/fluxmem/tasks/{start['session_id']}/steps"
    fail: dict[str, Any] = {
        "success": False,
        "feedback": {"kind": "noise", "detail": "the spreadsheet tool misled me"},
        "step": 0,
    }
    first = c.post(url, json=fail)
    assert first.status_code == 200, first.text
    events = len(c.get("/v1/fluxmem/history", params={"limit": 1000}).json()["events"])
    retry = c.post(url, json=fail)
    assert retry.status_code == 200 and retry.json() == first.json()
    assert first.json()["step"] == 1
    assert len(c.get("/v1/fluxmem/history", params={"limit": 1000}).json()["events"]) == events
    conflict = c.post(url, json={**fail, "success": True})
    assert conflict.status_code == 422
    assert conflict.json()["error"]["message"].startswith("step: step 0")
    assert c.post(url, json={**fail, "step": -1}).status_code == 422
    win = {"success": True, "result": "Kenya", "actions": ["divide goals by players"], "step": 1}
    done = c.post(url, json=win)
    assert done.status_code == 200 and done.json()["outcome"]["attempts"] == 2
    again = c.post(url, json=win)
    assert again.status_code == 200 and again.json() == done.json()


def test_mcp_record_step_is_idempotent_with_its_number(tmp_path: Path) -> None:
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    from lightmem.server.mcp import create_mcp

    pool = TenantPool(tmp_path / "data")
    tenant = pool.get("local")

    async def main() -> str:
        async with Client(create_mcp(lambda: tenant)) as m:
            await m.call_tool("add_knowledge", {"docs": DOCS})
            start = (await m.call_tool("start_task", {"task": TASK})).structured_content
            assert start is not None and start["step"] == 0
            step = {
                "session_id": start["session_id"],
                "success": False,
                "feedback": "the spreadsheet tool misled me",
                "step": 0,
            }
            first = (await m.call_tool("record_step", step)).structured_content
            retry = (await m.call_tool("record_step", step)).structured_content
            assert first == retry and first is not None and first["step"] == 1
            with pytest.raises(ToolError, match="step: step 0"):
                await m.call_tool("record_step", {**step, "success": True})
            return str(start["session_id"])

    try:
        sid = asyncio.run(main())
        assert _recorded(tenant.agent, sid) == 1
    finally:
        pool.close()
