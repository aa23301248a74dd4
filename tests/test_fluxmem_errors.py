"""How a FluxMem task fails (review finding 3): lightmem's own error during a task (a
failing LLM reasoner, the store) is raised as itself, with its traceback, once the episode
is recorded as failed; what the user's ``execute_fn`` raises becomes TaskExecutionError
*from* that exception. ``run_task``, ``arun_task`` and task sessions behave alike. And
``add_knowledge`` refuses, naming it, a document field it would drop or change (19); the
concurrency bench's reader reports the kind of each error it counts (23)."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lightmem import BackendError, InvalidInputError, WordLlamaEmbedder
from lightmem.cli.fluxmem_tables import ANALYSIS_DOC, DISTRACTORS, SPREADSHEET_DOC
from lightmem.fluxmem import FluxMemAgent, LLMReasoner, StepResult, TaskExecutionError
from lightmem.llm import OpenAIChatClient
from lightmem.store.sqlite import SQLiteStore
from lightmem.testing import OpenAIStubServer, ScriptedLLM

TASK = "Which team has the most goals per player?"


@pytest.fixture
def stub() -> Iterator[OpenAIStubServer]:
    with OpenAIStubServer(chat_handler=ScriptedLLM()) as server:
        yield server


@pytest.fixture
def agent(
    tmp_path: Path, stub: OpenAIStubServer, embedder: WordLlamaEmbedder
) -> Iterator[FluxMemAgent]:
    """An agent whose reasoner is a model behind ``stub`` (one attempt per call, so an
    injected fault is a BackendError at once)."""
    client = OpenAIChatClient("stub", base_url=stub.base_url, api_key="k", max_attempts=1)
    store = SQLiteStore(tmp_path / "flux.db")
    store.bind_embedder(embedder.name, embedder.dim)
    agent = FluxMemAgent.on_store(store, embedder, reasoner=LLMReasoner(client))
    agent.add_knowledge([SPREADSHEET_DOC, ANALYSIS_DOC, *DISTRACTORS])
    yield agent
    store.close()


def _failing_then_down(stub: OpenAIStubServer) -> Callable[[str], StepResult]:
    """A step that fails with free-text feedback, after which the model is unreachable:
    Stage II's attribution call gets HTTP 500."""

    def execute(ctx: str) -> StepResult:
        stub.fail_next(500, times=50)
        return StepResult("x", "the spreadsheet tool was misleading here", False)

    return execute


def _run(agent: FluxMemAgent, execute: Callable[[str], StepResult], how: str) -> None:
    if how == "sync":
        agent.run_task(TASK, execute)
    else:
        asyncio.run(agent.arun_task(TASK, execute))


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_failing_reasoner_is_raised_as_its_backend_error(
    agent: FluxMemAgent, stub: OpenAIStubServer, how: str
) -> None:
    with pytest.raises(BackendError) as err:
        _run(agent, _failing_then_down(stub), how)
    assert not isinstance(err.value, TaskExecutionError)
    assert "execute_fn" not in str(err.value)
    episode = agent.graph.nodes("episodic", agent.scope)[-1]
    assert episode.data["status"] == "done" and episode.data["success"] is False
    assert f"episode {episode.id} recorded as failed" in (err.value.__notes__ or [])
    # The traceback still reaches the reasoner's call that failed.
    frames = [f.name for f in traceback.extract_tb(err.value.__traceback__)]
    assert "attribute" in frames


@pytest.mark.parametrize("how", ["sync", "async"])
def test_the_users_exception_is_the_cause_of_task_execution_error(
    agent: FluxMemAgent, how: str
) -> None:
    raised = KeyError("no such column")

    def execute(ctx: str) -> StepResult:
        raise raised

    with pytest.raises(TaskExecutionError, match="execute_fn raised KeyError") as err:
        _run(agent, execute, how)
    assert err.value.__cause__ is raised
    assert agent.graph.nodes("episodic", agent.scope)[-1].data["success"] is False


def test_a_lightmem_error_raised_by_execute_fn_is_still_the_users(agent: FluxMemAgent) -> None:
    """Blame follows where it was raised, not its class: a BackendError out of the user's
    own code (their model call) is their step's failure."""
    theirs = BackendError("their own model is down")

    def execute(ctx: str) -> StepResult:
        raise theirs

    with pytest.raises(TaskExecutionError, match="execute_fn raised BackendError") as err:
        agent.run_task(TASK, execute)
    assert err.value.__cause__ is theirs


def test_a_session_step_raises_the_backend_error_and_keeps_the_outcome(
    agent: FluxMemAgent, stub: OpenAIStubServer
) -> None:
    session = agent.start_task(TASK)
    assert session.id is not None and session.context is not None
    step = _failing_then_down(stub)(session.context)
    with pytest.raises(BackendError) as err:
        session.report(step)
    assert not isinstance(err.value, TaskExecutionError)
    # The stored session holds the outcome with the error as text; the same step reported
    # again (its answer was lost) gets it, without raising.
    kept = agent.resume_task(session.id)
    assert kept.outcome is not None and not kept.outcome.success
    assert kept.outcome.error.startswith("BackendError: ")
    session.report(step)
    assert session.outcome == kept.outcome
    episode = agent.graph.get_node(kept.outcome.episode_id)
    assert episode is not None and episode.data["status"] == "done"


def test_a_session_whose_stage_i_fails_raises_at_start(
    agent: FluxMemAgent, stub: OpenAIStubServer
) -> None:
    stub.fail_next(500, times=50)  # Stage I's verification call fails
    with pytest.raises(BackendError):
        agent.start_task(TASK)
    episode = agent.graph.nodes("episodic", agent.scope)[-1]
    assert episode.data["status"] == "done" and episode.data["success"] is False
    with pytest.raises(BackendError):
        agent.run_task(TASK, lambda ctx: StepResult("ok", None, True))


# -- add_knowledge refuses what it would drop or change (review finding 19) -----------------
@pytest.mark.parametrize(
    ("docs", "field"),
    [
        ([{"text": "Ovens preheat to 200C.", "source": None}], "text_or_docs[0].source"),
        ([{"text": "Ovens preheat to 200C.", "source": 3}], "text_or_docs[0].source"),
        ([{"text": "Ovens.", "source": "s" * 2_001}], "text_or_docs[0].source: longer than"),
        (
            [{"text": "Ovens preheat to 200C.", "title": "Manual p.3"}],
            "text_or_docs[0].title: unknown field",
        ),
        (["Ovens preheat to 200C.", " \n\n "], "text_or_docs[1]: no text"),
        (["Ovens preheat to 200C.", {"text": "\t"}], "text_or_docs[1].text: no text"),
        ([{"source": "manual"}], "text_or_docs[0].text: expected a string, got None"),
    ],
)
def test_add_knowledge_refuses_a_document_it_would_drop_or_change(
    tmp_path: Path, docs: list[Any], field: str
) -> None:
    with FluxMemAgent.open(tmp_path / "k.db") as agent:
        with pytest.raises(InvalidInputError, match="^" + re.escape(field)):
            agent.add_knowledge(docs)
        assert agent.stats()["semantic_nodes"] == 0  # nothing half-added
        mixed: list[Any] = [
            "Bread needs yeast.",
            {"text": "Ovens preheat to 200C.", "source": "manual"},
        ]
        ids = agent.add_knowledge(mixed, source="notes")
        nodes = agent.graph.get_nodes(ids)
        assert [nodes[i].data["source"] for i in ids] == ["notes", "manual"]


@pytest.mark.parametrize(
    ("steps", "episodes", "field"),
    [
        (1, (), "steps"),  # was a raw TypeError
        ({"open the door": 1}, (), "steps"),  # was stored as its keys
        ("open the door", (), "steps"),
        (["open the door"], 1, "episodes"),
        (["open the door"], [["e1"]], "episodes"),  # was a StoreError from the database
    ],
)
def test_add_skill_refuses_steps_and_episodes_that_are_no_lists_of_text(
    tmp_path: Path, steps: Any, episodes: Any, field: str
) -> None:
    with FluxMemAgent.open(tmp_path / "k.db") as agent:
        with pytest.raises(InvalidInputError, match=f"^{field}: expected"):
            agent.add_skill("door", steps, episodes=episodes)
        assert agent.stats()["procedural_nodes"] == 0
        assert agent.add_skill("door", ("open the door", "go east"))


# -- the concurrency bench says which errors its readers met (review finding 23) ------------
def test_the_concurrency_reader_reports_the_kind_of_each_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store whose vector table went missing under the reader (another process's fault):
    every read fails with StoreError, counted under that kind with a sample message."""
    from lightmem.bench import concurrency
    from lightmem.memory import LightMemory

    path = tmp_path / "bench.db"
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        mem.add_memory([{"content": f"note {i} about tuna"} for i in range(3)], force_extract=True)
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE vectors RENAME TO vectors_gone")
    db.commit()
    db.close()
    concurrency.reader({"path": str(path)}, 0.3)
    out = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert out["errors"] > 0 and out["errors"] == out["error_types"]["StoreError"]
    assert "no such table: vectors" in out["error_samples"]["StoreError"]


def test_the_agents_model_calls_are_saved_in_its_store(tmp_path: Path) -> None:
    """FluxMem's embeddings (and an LLM reasoner's calls) reach the store's usage table on
    close, as LightMemory's do; they were kept in memory and lost."""
    from lightmem.store.sqlite import SQLiteStore

    with FluxMemAgent.open(tmp_path / "k.db") as agent:
        agent.add_knowledge("Ovens preheat to 200C.")
    store = SQLiteStore(tmp_path / "k.db")
    try:
        saved = {(r.kind, r.op): r.calls for r in store.usage()}
    finally:
        store.close()
    assert saved.get(("embed", "fluxmem.knowledge")) == 1
