"""``FluxMemAgent``: the FluxMem facade an agent developer plugs into their own loop."""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from lightmem import validate
from lightmem.embed.base import Embedder
from lightmem.errors import InvalidInputError, LightMemError
from lightmem.fluxmem.chunking import chunk
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.reasoner import OfflineReasoner, Reasoner
from lightmem.fluxmem.records import Crash, attempt_record, documents, repair_record
from lightmem.fluxmem.serialize import serialize
from lightmem.fluxmem.stage1 import Stage1
from lightmem.fluxmem.stage2 import Stage2, skill_text
from lightmem.fluxmem.stage3 import ConsolidationReport, ReplayFn, Stage3
from lightmem.fluxmem.types import (
    Edge,
    Node,
    Repair,
    ScoredNode,
    StepResult,
    Subgraph,
    TaskOutcome,
)
from lightmem.sanitize import check_value
from lightmem.store.base import MemoryStore
from lightmem.store.graph import GraphStore

ExecuteFn = Callable[[str], StepResult | Awaitable[StepResult]]


class TaskExecutionError(LightMemError):
    """``execute_fn`` raised or returned something other than a StepResult. The episode is
    recorded as failed before this is raised."""


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
    ) -> None:
        self.graph = graph
        self.embedder = embedder
        self.reasoner = reasoner or OfflineReasoner()
        self.config = config or FluxMemConfig()
        self.scope = validate.scope(user_id, agent_id, run_id)
        self._stage1 = Stage1(graph, embedder, self.reasoner, self.config)
        self._stage2 = Stage2(graph, embedder, self.reasoner, self.config)
        self._stage3 = Stage3(graph, embedder, self.reasoner, self.config)
        self._owned: MemoryStore | None = None

    def close(self) -> None:
        """Close the store this agent opened (:meth:`open`); a store passed to
        :meth:`on_store` stays open: its creator closes it. Safe to call twice."""
        owned, self._owned = self._owned, None
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
        )

    # -- knowledge --------------------------------------------------------------------------
    def add_knowledge(
        self, text_or_docs: str | Sequence[str] | Sequence[Mapping[str, str]], *, source: str = ""
    ) -> list[str]:
        """Chunk documents into semantic nodes; returns their ids. A document may be a
        string or ``{"text": ..., "source": ...}``."""
        check_value(text_or_docs, "text_or_docs", strict=False)
        check_value(source, "source", strict=False)
        docs = documents(text_or_docs, source)
        chunks = [(c, src) for text, src in docs for c in chunk(text, self.config.chunk_tokens)]
        if not chunks:
            raise InvalidInputError("text_or_docs: no text to add (empty knowledge)")
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
        if (
            isinstance(steps, str)
            or not steps
            or not all(isinstance(x, str) and x.strip() for x in steps)
        ):
            raise InvalidInputError("steps: expected a non-empty list of non-empty strings")
        found = self.graph.get_nodes(list(episodes))
        for i, ep in enumerate(episodes):
            if ep not in found or found[ep].kind != "episodic":
                raise InvalidInputError(f"episodes[{i}]: no episode {ep!r}")
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
        return self._stage1.build(validate.query(task), self.scope)

    def context(self, task: str) -> str:
        return serialize(self.subgraph(task))

    # -- tasks ------------------------------------------------------------------------------
    def run_task(
        self, task: str, execute_fn: Callable[[str], StepResult], *, max_rounds: int | None = None
    ) -> TaskOutcome:
        """Run ``execute_fn(context)`` until it succeeds or the refinement rounds run out."""
        flow = self._flow(validate.query(task), max_rounds)
        done, value = _advance(flow, None)
        while not done:
            assert isinstance(value, str)
            try:
                reply: StepResult | Crash = execute_fn(value)
            except Exception as exc:  # the user's code: record, then re-raise as ours
                reply = Crash(f"execute_fn raised {type(exc).__name__}: {exc}")
            done, value = _advance(flow, reply)
        assert isinstance(value, TaskOutcome)
        return _finish(value)

    async def arun_task(
        self, task: str, execute_fn: ExecuteFn, *, max_rounds: int | None = None
    ) -> TaskOutcome:
        """Async :meth:`run_task` (``execute_fn`` may be sync or async); graph work runs in a
        worker thread so the event loop stays free."""
        flow = self._flow(validate.query(task), max_rounds)
        done, value = await asyncio.to_thread(_advance, flow, None)
        while not done:
            assert isinstance(value, str)
            try:
                out = execute_fn(value)
                reply: StepResult | Crash = await out if inspect.isawaitable(out) else out
            except Exception as exc:
                reply = Crash(f"execute_fn raised {type(exc).__name__}: {exc}")
            done, value = await asyncio.to_thread(_advance, flow, reply)
        assert isinstance(value, TaskOutcome)
        return _finish(value)

    def start_task(self, task: str, *, max_rounds: int | None = None) -> TaskSession:
        """Drive a task from outside the process (REST or MCP clients): read
        ``session.context``, act, ``session.report(StepResult)``, until ``session.outcome``."""
        return TaskSession(self._flow(validate.query(task), max_rounds))

    def _flow(
        self, task: str, max_rounds: int | None
    ) -> Generator[str, StepResult | Crash, TaskOutcome]:
        """The task loop written once for both drivers: yields contexts, receives results."""
        rounds = self.config.max_refinement_rounds if max_rounds is None else max_rounds
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 0 <= rounds <= 100:
            raise InvalidInputError("max_rounds: expected an integer in [0, 100]")
        episode = self._new_episode(task)
        attempts: list[dict[str, Any]] = []
        repairs: list[Repair] = []
        reply: StepResult | Crash = Crash("not run")
        try:
            reply = yield from self._attempts(task, episode, rounds, attempts, repairs)
        except LightMemError as exc:  # a corrupted node, a failing backend: still recorded
            reply = Crash(f"{type(exc).__name__}: {exc}")
        return self._close_episode(task, episode, reply, attempts, repairs)

    def _attempts(
        self,
        task: str,
        episode: Node,
        rounds: int,
        attempts: list[dict[str, Any]],
        repairs: list[Repair],
    ) -> Generator[str, StepResult | Crash, StepResult | Crash]:
        reply: StepResult | Crash = Crash("not run")
        mature = self.mature_subgraph(task)
        if mature is not None:  # a graduated skill: its subgraph, no search, no repair
            reply = yield serialize(mature)
            if not isinstance(reply, StepResult | Crash):
                reply = Crash(f"execute_fn returned {type(reply).__name__}, expected StepResult")
            attempts.append({**attempt_record(0, mature, reply), "mature": True})
            self._mark_steps(mature, episode.id, 0)
            if isinstance(reply, Crash) or reply.success or rounds == 0:
                return reply
            rounds -= 1  # it failed: the usual loop, with the rounds left
        sub = self._stage1.build(task, self.scope, current_episode=episode.id)
        context = serialize(sub)
        first = len(attempts)
        for attempt in range(first, first + rounds + 1):
            reply = yield context
            if not isinstance(reply, StepResult | Crash):
                reply = Crash(f"execute_fn returned {type(reply).__name__}, expected StepResult")
            attempts.append(attempt_record(attempt, sub, reply))
            self._mark_steps(sub, episode.id, attempt)
            if isinstance(reply, Crash) or reply.success or attempt == first + rounds:
                break
            feedback = self.reasoner.attribute(task, reply.feedback)
            repairs += self._stage2.repair(task, self.scope, episode.id, sub, feedback)
            sub = self._stage1.build(task, self.scope, current_episode=episode.id)
            new_context = serialize(sub)
            if new_context == context:
                break  # nothing changed: running again would repeat the failure
            context = new_context
        if isinstance(reply, StepResult) and reply.success:
            for s in sub.semantic:
                self.graph.add_edge(Edge("ground", s.node.id, episode.id, 1.0), "served a success")
        return reply

    def _close_episode(
        self,
        task: str,
        episode: Node,
        reply: StepResult | Crash,
        attempts: list[dict[str, Any]],
        repairs: list[Repair],
    ) -> TaskOutcome:
        success = isinstance(reply, StepResult) and reply.success
        trajectory = list(reply.actions) if isinstance(reply, StepResult) else []
        observations = list(reply.observations) if isinstance(reply, StepResult) else []
        reads = list(reply.reads) if isinstance(reply, StepResult) else []
        data = {
            **dict(episode.data),
            "status": "done",
            "success": success,
            "attempts": attempts,
            "trajectory": trajectory,
            **({"observations": observations} if observations else {}),
            **({"reads": reads} if reads else {}),
            "repairs": [repair_record(r) for r in repairs],
        }
        vec = self.embedder.embed([task], op="fluxmem.episode")[0]
        self.graph.update_node(replace(episode, data=data), vec, reason="episode finished")
        return TaskOutcome(
            task=task,
            success=success,
            result=reply.result if isinstance(reply, StepResult) else None,
            episode_id=episode.id,
            attempts=len(attempts),
            repairs=tuple(repairs),
            error=reply.error if isinstance(reply, Crash) else "",
        )

    def mature_subgraph(self, task: str) -> Subgraph | None:
        """The graduated skill whose source tasks are most like ``task`` (at least
        ``mature_similarity``), as a subgraph of that skill alone; None if there is none."""
        if self.config.mature_similarity <= 0:
            return None
        grads = [
            n
            for n in self.graph.nodes("procedural", self.scope)
            if n.data.get("graduated") and isinstance(n.data.get("trigger"), list)
        ]
        if not grads:
            return None
        qv = self.embedder.embed([task], op="fluxmem.mature")[0]
        best = max(grads, key=lambda n: float(np.asarray(n.data["trigger"], np.float32) @ qv))
        sim = float(np.asarray(best.data["trigger"], np.float32) @ qv)
        if sim < self.config.mature_similarity:
            return None
        return Subgraph(
            task, (), (), (ScoredNode(best, sim, f"mature skill, similarity {sim:.2f}"),)
        )

    def _new_episode(self, task: str) -> Node:
        node = Node(
            uuid.uuid4().hex,
            "episodic",
            task,
            self.scope,
            {"task": task, "status": "running", "success": False, "trajectory": []},
        )
        vec = self.embedder.embed([task], op="fluxmem.episode")[0]
        return self.graph.add_node(node, vec, reason="episode started")

    def _mark_steps(self, sub: Subgraph, episode_id: str, attempt: int) -> None:
        existing = {e.src: e for e in self.graph.edges("step", dst=[episode_id], scope=self.scope)}
        for node_id in sorted(sub.node_ids()):
            steps = [*existing[node_id].data.get("steps", [])] if node_id in existing else []
            self.graph.add_edge(
                Edge("step", node_id, episode_id, 1.0, {"steps": [*steps, attempt]}),
                reason=f"active in step {attempt}",
            )

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

    def stats(self) -> dict[str, int]:
        return self.graph.graph_counts(self.scope)


class TaskSession:
    """One task run in progress; see :meth:`FluxMemAgent.start_task`."""

    def __init__(self, flow: Generator[str, StepResult | Crash, TaskOutcome]) -> None:
        self._flow = flow
        self._lock = threading.Lock()
        self.context: str | None = None
        self.outcome: TaskOutcome | None = None
        self._take(*_advance(flow, None))

    def report(self, result: StepResult) -> None:
        """Feed back the result of acting on :attr:`context`."""
        if not isinstance(result, StepResult):
            raise InvalidInputError(f"result: expected a StepResult, got {type(result).__name__}")
        check_value(result, "result", strict=False)
        self._send(result)

    def abandon(self, reason: str = "abandoned by the client") -> None:
        """Give up: the episode is recorded as failed with ``reason``."""
        self._send(Crash(reason))

    def _send(self, reply: StepResult | Crash) -> None:
        with self._lock:
            if self.outcome is not None:
                raise InvalidInputError("session: the task has already finished")
            self._take(*_advance(self._flow, reply))

    def _take(self, done: bool, value: str | TaskOutcome) -> None:
        if done:
            assert isinstance(value, TaskOutcome)
            self.outcome, self.context = value, None
        else:
            assert isinstance(value, str)
            self.context = value


def _advance(
    flow: Generator[str, StepResult | Crash, TaskOutcome], reply: StepResult | Crash | None
) -> tuple[bool, str | TaskOutcome]:
    """One step of the task loop: (False, next context) or (True, outcome)."""
    try:
        return False, next(flow) if reply is None else flow.send(reply)
    except StopIteration as stop:
        return True, stop.value


def _finish(outcome: TaskOutcome) -> TaskOutcome:
    if outcome.error:
        raise TaskExecutionError(
            f"execute_fn: {outcome.error} (episode {outcome.episode_id} recorded as failed)"
        )
    return outcome
