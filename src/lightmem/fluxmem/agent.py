"""``FluxMemAgent``: the FluxMem facade an agent developer plugs into their own loop."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lightmem import validate
from lightmem.embed.base import Embedder
from lightmem.errors import InvalidInputError, LightMemError
from lightmem.fluxmem.chunking import chunk
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.reasoner import OfflineReasoner, Reasoner
from lightmem.fluxmem.records import Crash, documents
from lightmem.fluxmem.serialize import serialize
from lightmem.fluxmem.session import TaskSession, TaskSessions
from lightmem.fluxmem.stage1 import Stage1
from lightmem.fluxmem.stage2 import Stage2, skill_text
from lightmem.fluxmem.stage3 import ConsolidationReport, ReplayFn, Stage3
from lightmem.fluxmem.task_flow import TaskFlow, TaskState, raise_failure
from lightmem.fluxmem.types import Edge, Node, StepResult, Subgraph, TaskOutcome
from lightmem.ledger import UsageRecord, ledgers_of
from lightmem.sanitize import check_value
from lightmem.store.base import MemoryStore
from lightmem.store.graph import GraphStore
from lightmem.store.purge import PurgeReport

__all__ = ["ExecuteFn", "FluxMemAgent", "TaskExecutionError", "TaskSession"]

ExecuteFn = Callable[[str], StepResult | Awaitable[StepResult]]


class TaskExecutionError(LightMemError):
    """``execute_fn`` raised (the exception is this one's ``__cause__``) or returned
    something other than a StepResult. The episode is recorded as failed before this is
    raised. lightmem's own errors during a task (a ``BackendError`` from the reasoner, a
    ``StoreError``) are raised as themselves, also after the episode is recorded."""


class FluxMemAgent:
    """Memory as one evolving graph of facts, episodes and skills (FluxMem).

    ``run_task`` gives ``execute_fn`` the Stage I context, repairs the graph after each
    failure (Stage II) and records the episode; ``consolidate`` induces skills (Stage III).
    Every surgery is in ``history()`` and can be reverted with ``undo(seq)``. ``arun_task``
    and ``aconsolidate`` are the async forms (``execute_fn`` may be a coroutine function).
    """

    def __init__(
        self,
        graph: GraphStore,
        embedder: Embedder,
        *,
        reasoner: Reasoner | None = None,
        config: FluxMemConfig | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        usage: Callable[[list[UsageRecord]], None] | None = None,
    ) -> None:
        """``usage``: where :meth:`save_usage` (and :meth:`close`) persist the model calls
        of the embedder and the reasoner (a store's ``record_usage``; :meth:`on_store` and
        :meth:`open` give their store's)."""
        self.graph = graph
        self._usage = usage
        self.embedder = embedder
        self.reasoner = reasoner or OfflineReasoner()
        self.config = config or FluxMemConfig()
        self.scope = validate.scope(user_id, agent_id, run_id)
        self._stage1 = Stage1(graph, embedder, self.reasoner, self.config)
        stage2 = Stage2(graph, embedder, self.reasoner, self.config)
        self._stage3 = Stage3(graph, embedder, self.reasoner, self.config)
        self._flow = TaskFlow(graph, embedder, self.reasoner, self.config, self._stage1, stage2)
        self._sessions = TaskSessions(self._flow, graph.task_sessions(), self.scope)
        self._owned: MemoryStore | None = None

    def save_usage(self) -> None:
        """Persist the model calls not yet saved (the embedder's and, for an LLM reasoner,
        its client's) where ``usage`` says; nothing without one."""
        if self._usage is not None:
            for ledger in ledgers_of(self.embedder, self.reasoner):
                ledger.save(self._usage)

    def close(self) -> None:
        """Save the usage (:meth:`save_usage`) and close the store this agent opened
        (:meth:`open`); a store passed to :meth:`on_store` stays open: its creator closes
        it. Safe to call twice."""
        owned, self._owned = self._owned, None
        try:
            self.save_usage()
        finally:
            if owned is not None:
                owned.close()

    def __enter__(self) -> FluxMemAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        config: FluxMemConfig | None = None,
        reasoner: Reasoner | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> FluxMemAgent:
        """An agent on a SQLite store file with the offline embedder; ``reasoner`` defaults
        to the offline rules (pass ``LLMReasoner(client)`` to use a model). The agent owns
        the store: ``close()`` it, or use it as a context manager."""
        from lightmem.store.sqlite import SQLiteStore

        store = SQLiteStore(path)
        try:
            agent = cls.on_store(
                store,
                config=config,
                reasoner=reasoner,
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
            )
        except BaseException:
            store.close()
            raise
        agent._owned = store
        return agent

    @classmethod
    def on_store(
        cls,
        store: MemoryStore,
        embedder: Embedder | None = None,
        *,
        config: FluxMemConfig | None = None,
        reasoner: Reasoner | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> FluxMemAgent:
        """An agent whose graph lives in ``store`` (SQLite or PostgreSQL), beside its
        memory entries; ``embedder`` defaults to the offline one."""
        if embedder is None:
            from lightmem.embed.wordllama import WordLlamaEmbedder

            embedder = WordLlamaEmbedder()
        store.bind_embedder(embedder.name, embedder.dim)
        return cls(
            store.graph(),
            embedder,
            reasoner=reasoner,
            config=config,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            usage=store.record_usage,
        )

    # -- knowledge --------------------------------------------------------------------------
    def add_knowledge(
        self, text_or_docs: str | Sequence[str] | Sequence[Mapping[str, str]], *, source: str = ""
    ) -> list[str]:
        """Chunk documents into semantic nodes; returns their ids. A document may be a
        string or ``{"text": ..., "source": ...}`` (``source`` a string, default
        ``source``; no other keys); an empty document is an InvalidInputError naming it."""
        check_value(text_or_docs, "text_or_docs", strict=False)
        check_value(source, "source", strict=False)
        docs = documents(text_or_docs, source)  # each has text: each gives a chunk at least
        self.graph.check_room()
        chunks = [(c, src) for text, src in docs for c in chunk(text, self.config.chunk_tokens)]
        vecs = self.embedder.embed([c for c, _ in chunks], op="fluxmem.knowledge")
        ids = []
        for (text, src), vec in zip(chunks, vecs, strict=True):
            node = Node(uuid.uuid4().hex, "semantic", text, self.scope, {"source": src})
            ids.append(self.graph.add_node(node, vec, reason="add_knowledge").id)
        return ids

    def add_skill(self, name: str, steps: Sequence[str], *, episodes: Sequence[str] = ()) -> str:
        """Add a hand-written skill (procedural node), distilled from ``episodes`` if given,
        so tasks similar to those episodes inherit it. Returns its id."""
        check_value(name, "name", strict=False)
        check_value(steps, "steps", strict=False)
        check_value(episodes, "episodes", strict=False)
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("name: expected a non-empty string")
        steps = validate.texts("steps", steps)
        episodes = validate.texts("episodes", episodes, empty=True)
        found = self.graph.get_nodes(episodes)
        for i, ep in enumerate(episodes):
            if ep not in found or found[ep].kind != "episodic":
                raise InvalidInputError(f"episodes[{i}]: no episode {ep!r}")
        self.graph.check_room()
        text = skill_text(list(steps))
        node = Node(
            uuid.uuid4().hex,
            "procedural",
            text,
            self.scope,
            {"name": name, "steps": list(steps), "versions": [], "source_episodes": list(episodes)},
        )
        vec = self.embedder.embed([text], op="fluxmem.skill")[0]
        self.graph.add_node(node, vec, reason=f"add_skill: {name}")
        for ep in episodes:
            self.graph.add_edge(Edge("distill", ep, node.id, 1.0), reason="add_skill")
        return node.id

    # -- Stage I ----------------------------------------------------------------------------
    def subgraph(self, task: str) -> Subgraph:
        """What Stage I would give ``execute_fn`` for ``task`` (for inspection)."""
        return self._stage1.build(validate.query(task, "task"), self.scope)

    def context(self, task: str) -> str:
        return serialize(self.subgraph(task))

    # -- tasks ------------------------------------------------------------------------------
    def run_task(
        self, task: str, execute_fn: Callable[[str], StepResult], *, max_rounds: int | None = None
    ) -> TaskOutcome:
        """Run ``execute_fn(context)`` until it succeeds or the refinement rounds run out."""
        state = self._flow.begin(validate.query(task, "task"), self.scope, max_rounds)
        while state.outcome is None:
            try:
                reply: object = execute_fn(state.context)
            except Exception as exc:  # the user's code: record, then raise ours from it
                reply = Crash(f"execute_fn raised {type(exc).__name__}: {exc}", exc)
            self._flow.advance(state, reply)
        return _finish(state, state.outcome)

    async def arun_task(
        self, task: str, execute_fn: ExecuteFn, *, max_rounds: int | None = None
    ) -> TaskOutcome:
        """Async :meth:`run_task` (``execute_fn`` may be sync or async); graph work runs in a
        worker thread so the event loop stays free."""
        state = await asyncio.to_thread(
            self._flow.begin, validate.query(task, "task"), self.scope, max_rounds
        )
        while state.outcome is None:
            try:
                out = execute_fn(state.context)
                reply: object = await out if inspect.isawaitable(out) else out
            except Exception as exc:
                reply = Crash(f"execute_fn raised {type(exc).__name__}: {exc}", exc)
            await asyncio.to_thread(self._flow.advance, state, reply)
        return _finish(state, state.outcome)

    def start_task(self, task: str, *, max_rounds: int | None = None) -> TaskSession:
        """Drive a task from outside the process (REST or MCP clients): read
        ``session.context``, act, ``session.report(StepResult)``, until ``session.outcome``.
        The session is kept in the store (see :mod:`lightmem.fluxmem.session`): at most
        ``MAX_OPEN_SESSIONS`` open per store, each expiring ``SESSION_TTL_S`` s after its
        last step."""
        return self._sessions.start(validate.query(task, "task"), max_rounds)

    def resume_task(self, session_id: str) -> TaskSession:
        """The task session ``session_id`` started by any agent on this store (in this
        agent's scope), to continue it; NotFoundError if it is unknown or expired."""
        return self._sessions.resume(session_id)

    def mature_subgraph(self, task: str) -> Subgraph | None:
        """The graduated skill whose source tasks are most like ``task`` (at least
        ``mature_similarity``), as a subgraph of that skill alone; None if there is none."""
        return self._flow.mature_subgraph(task, self.scope)

    # -- Stage III --------------------------------------------------------------------------
    def consolidate(self, replay_fn: ReplayFn | None = None) -> ConsolidationReport:
        """Cluster episodes and induce or refine one skill per cluster (Stage III)."""
        return self._stage3.consolidate(self.scope, replay_fn)

    async def aconsolidate(self, replay_fn: ReplayFn | None = None) -> ConsolidationReport:
        return await asyncio.to_thread(self.consolidate, replay_fn)

    # -- inspection -------------------------------------------------------------------------
    def history(self, limit: int = 100) -> list[dict[str, Any]]:
        return self.graph.graph_history(validate.positive_int("limit", limit), scope=self.scope)

    def undo(self, seq: int) -> None:
        """Revert one surgery (or any graph change) by its history sequence number."""
        self.graph.undo(
            validate.positive_int("seq", seq, 2**62),
            lambda text: self.embedder.embed([text], op="fluxmem.undo")[0],
            scope=self.scope,
        )

    def purge(self, node_id: str | None = None) -> PurgeReport:
        """Erase for good, leaving no copy in the database file.

        Without ``node_id``: this agent's graph, every node, edge, history event and task
        session of its scope (for an unscoped agent, such as a server tenant's, the whole
        graph of its store). With ``node_id``: that node of this agent's scope (another
        scope's is NotFoundError) with its vector and full-text row, its edges, its graph
        history and every history event holding its text, and the task sessions showing
        it (their episodes are first recorded as failed). Memory entries are not touched
        (:meth:`LightMemory.purge` erases a scope's entries and its graph)."""
        if node_id is None:
            return self.graph.purge(self.scope)
        node_id = _node_id(node_id)
        self._sessions.end_showing(node_id, f"node {node_id} of its context was purged")
        return self.graph.purge_node(self.scope, node_id)

    def stats(self) -> dict[str, int]:
        return self.graph.graph_counts(self.scope)


def _node_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > validate.MAX_ID_CHARS:
        raise InvalidInputError(
            f"node_id: expected a non-empty string of at most {validate.MAX_ID_CHARS} characters"
        )
    check_value(value, "node_id")
    return value


def _finish(state: TaskState, outcome: TaskOutcome) -> TaskOutcome:
    """``outcome`` of a finished ``state``, or the error that ended it: lightmem's own as
    itself, the user's ``execute_fn`` failure as TaskExecutionError (from what it raised)."""
    raise_failure(state)
    if outcome.error:
        raise TaskExecutionError(
            f"execute_fn: {outcome.error} (episode {outcome.episode_id} recorded as failed)"
        ) from state.cause
    return outcome
