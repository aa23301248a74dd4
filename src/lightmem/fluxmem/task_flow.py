"""The task loop as a resumable state machine, written once for every driver.

:meth:`TaskFlow.begin` opens an episode and gives the first context; each
:meth:`TaskFlow.advance` takes the result of acting on the last context and gives the next
context (after Stage II repairs) or the outcome. Everything the loop needs between two
steps is in :class:`TaskState`, which :func:`to_row` / :meth:`TaskFlow.from_row` turn into
a stored session row and back, so ``run_task`` / ``arun_task`` (state in memory) and remote
task sessions (state in the store, see :mod:`lightmem.fluxmem.session`) run the same code.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from lightmem.embed.base import Embedder
from lightmem.errors import InvalidInputError, LightMemError, NotFoundError
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.reasoner import Reasoner
from lightmem.fluxmem.records import Crash, attempt_record, repair_record
from lightmem.fluxmem.serialize import serialize
from lightmem.fluxmem.stage1 import Stage1
from lightmem.fluxmem.stage2 import Stage2
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
from lightmem.store.graph import GraphStore
from lightmem.store.sessions import SessionRow
from lightmem.types import Scope

__all__ = [
    "Phase",
    "TaskFlow",
    "TaskState",
    "outcome_from_record",
    "outcome_record",
    "raise_failure",
    "step_key",
    "to_row",
]

Phase = Literal["mature", "search"]
_KINDS = ("semantic", "episodic", "procedural")


@dataclass
class TaskState:
    """Where one task run stands: the context it showed last (or its outcome).

    ``phase`` is "mature" while a graduated skill's subgraph is being tried, then
    "search" (Stage I). ``rounds_left``: refinement rounds still allowed after the
    current attempt; the current attempt's number is ``len(attempts)``."""

    task: str
    scope: Scope
    episode_id: str
    phase: Phase
    rounds_left: int
    subgraph: Subgraph
    context: str = ""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    repairs: list[Repair] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    outcome: TaskOutcome | None = None
    #: Why the task ended in a crash, kept in memory only (a stored session holds the text,
    #: ``outcome.error``): ``failure`` is lightmem's own error (Stage I/II, a backend, the
    #: store), which the driver raises as itself once the episode is recorded; ``cause``
    #: is what ``execute_fn`` raised.
    failure: LightMemError | None = None
    cause: BaseException | None = None

    @property
    def attempt(self) -> int:
        return len(self.attempts)


class TaskFlow:
    """Stage I/II around the user's steps for one agent's graph, embedder and reasoner."""

    def __init__(
        self,
        graph: GraphStore,
        embedder: Embedder,
        reasoner: Reasoner,
        config: FluxMemConfig,
        stage1: Stage1,
        stage2: Stage2,
    ) -> None:
        self.graph = graph
        self.embedder = embedder
        self.reasoner = reasoner
        self.config = config
        self._stage1 = stage1
        self._stage2 = stage2

    def begin(self, task: str, scope: Scope, max_rounds: int | None) -> TaskState:
        """Open the episode and compute the first context (or, if Stage I already fails,
        the outcome)."""
        rounds = self.config.max_refinement_rounds if max_rounds is None else max_rounds
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 0 <= rounds <= 100:
            raise InvalidInputError("max_rounds: expected an integer in [0, 100]")
        self.graph.check_room()  # a task adds its episode (and later its trajectory)
        episode = self._new_episode(task, scope)
        state = TaskState(task, scope, episode.id, "search", rounds, Subgraph(task, (), (), ()))
        try:
            mature = self.mature_subgraph(task, scope)
            if mature is None:
                self._search(state)
            else:  # a graduated skill: its subgraph, no search, no repair
                state.phase, state.subgraph, state.context = "mature", mature, serialize(mature)
        except LightMemError as exc:  # a corrupted node, a failing backend: still recorded
            state.failure = exc
            self._close(state, Crash(f"{type(exc).__name__}: {exc}"))
        return state

    def advance(self, state: TaskState, reply: object) -> TaskState:
        """Record the result of acting on ``state.context`` and move on (in place)."""
        if state.outcome is not None:
            raise InvalidInputError("session: the task has already finished")
        step: StepResult | Crash = _checked(reply)
        try:
            done = self._take(state, step)
        except LightMemError as exc:  # recorded like a crashed step, raised by the driver
            state.failure = exc
            step, done = Crash(f"{type(exc).__name__}: {exc}"), True
        if done:
            self._close(state, step)
        return state

    def _take(self, state: TaskState, reply: StepResult | Crash) -> bool:
        """True when the task is over; otherwise ``state`` holds the next context."""
        sub, attempt = state.subgraph, state.attempt
        record = attempt_record(attempt, sub, reply)
        state.attempts.append({**record, "mature": True} if state.phase == "mature" else record)
        self._mark_steps(sub, state.episode_id, attempt)
        if isinstance(reply, Crash):
            return True
        if reply.success:
            # A mature skill's facts are its own episodes' (no search chose them for this
            # task): grounding them again would only reinforce what it showed.
            for s in sub.semantic if state.phase != "mature" else ():
                self.graph.add_edge(
                    Edge("ground", s.node.id, state.episode_id, 1.0), "served a success"
                )
            return True
        if state.rounds_left == 0:
            return True
        state.rounds_left -= 1
        if state.phase == "mature":  # it failed: the usual loop, with the rounds left
            state.phase = "search"
            self._search(state)
            return False
        feedback = self.reasoner.attribute(state.task, reply.feedback)
        state.repairs += self._stage2.repair(
            state.task, state.scope, state.episode_id, sub, feedback
        )
        before = state.context
        self._search(state)
        return state.context == before  # nothing changed: running again would repeat it

    def _search(self, state: TaskState) -> None:
        state.subgraph = self._stage1.build(
            state.task, state.scope, current_episode=state.episode_id
        )
        state.context = serialize(state.subgraph)

    def _close(self, state: TaskState, reply: StepResult | Crash) -> None:
        success = isinstance(reply, StepResult) and reply.success
        observations = list(reply.observations) if isinstance(reply, StepResult) else []
        reads = list(reply.reads) if isinstance(reply, StepResult) else []
        relevant = list(reply.relevant) if isinstance(reply, StepResult) else []
        data = {
            "task": state.task,
            "status": "done",
            "success": success,
            "attempts": state.attempts,
            "trajectory": list(reply.actions) if isinstance(reply, StepResult) else [],
            **({"observations": observations} if observations else {}),
            **({"reads": reads} if reads else {}),
            **({"relevant": relevant} if relevant else {}),
            "repairs": [repair_record(r) for r in state.repairs],
        }
        error = reply.error if isinstance(reply, Crash) else ""
        vec = self.embedder.embed([state.task], op="fluxmem.episode")[0]
        node = Node(state.episode_id, "episodic", state.task, state.scope, data)
        try:
            self.graph.update_node(node, vec, reason="episode finished")
        except NotFoundError:  # purged or undone while the task ran: nothing to record
            error = error or f"episode {state.episode_id} was removed while the task ran"
        state.context = ""
        state.cause = reply.cause if isinstance(reply, Crash) else None
        state.outcome = TaskOutcome(
            task=state.task,
            success=success,
            result=reply.result if isinstance(reply, StepResult) else None,
            episode_id=state.episode_id,
            attempts=len(state.attempts),
            repairs=tuple(state.repairs),
            error=error,
        )

    def mature_subgraph(self, task: str, scope: Scope) -> Subgraph | None:
        """The graduated skills whose source tasks are like ``task`` (similarity at least
        ``mature_similarity``), best replay record (eta) first, then the most similar, with
        their own subgraph (:meth:`skills_subgraph`); None if there is none. Not only the
        best is shown: tasks alike in wording can need different procedures (one recipe
        slices, another fries), and a skill alone lacks the others' steps. As many are
        shown as there are episodes to show (``top_k_episodic``): each with one of its
        own."""
        if self.config.mature_similarity <= 0:
            return None
        grads = [
            n
            for n in self.graph.nodes("procedural", scope)
            if n.data.get("graduated") and isinstance(n.data.get("trigger"), list)
        ]
        if not grads:
            return None
        qv = self.embedder.embed([task], op="fluxmem.mature")[0]
        sims = {n.id: float(np.asarray(n.data["trigger"], np.float32) @ qv) for n in grads}
        near = [n for n in grads if sims[n.id] >= self.config.mature_similarity]
        if not near:
            return None

        # The skill whose replays succeeded most first (its stored eta over its source
        # episodes, Laplace-smoothed: 7 of 7 is stronger evidence than 3 of 3), then the
        # most similar.
        def record(n: Node) -> tuple[float, float]:
            runs = len(n.data.get("source_episodes", []))
            wins = float(n.data.get("eta", 0.0)) * runs
            return (wins + 1) / (runs + 2), sims[n.id]

        ranked = sorted(near, key=record, reverse=True)
        semantic, episodic, dealt = self.skills_subgraph(ranked, scope)
        if not dealt:
            return None
        return Subgraph(
            task,
            semantic,
            episodic,
            tuple(
                ScoredNode(n, sims[n.id], f"mature skill, similarity {sims[n.id]:.2f}")
                for n in dealt
            ),
        )

    def skills_subgraph(
        self, skills: Sequence[Node], scope: Scope
    ) -> tuple[tuple[ScoredNode, ...], tuple[ScoredNode, ...], tuple[Node, ...]]:
        """The skills' own subgraph, read along their edges with no search: the episodes
        they were distilled from and the facts those grounded (by total ground weight,
        ``top_k_semantic``). The ``top_k_episodic`` episodes are dealt in turn, skill by
        skill in the order given, each skill's closest follower first: the first skill's
        many episodes do not crowd out the others'. Returns the facts, the episodes and the
        skills dealt one (in the order given). Activating mature skills shows what their
        episodes met (where things were), not the steps alone."""
        cfg = self.config
        own: dict[str, list[tuple[float, str]]] = {s.id: [] for s in skills}
        for e in self.graph.edges("distill", dst=list(own), scope=scope):
            own[e.dst].append((e.weight, e.src))  # how closely the episode followed it
        episodes = self.graph.get_nodes([i for pairs in own.values() for _, i in pairs])
        queues = [
            (s.id, sorted((p for p in own[s.id] if p[1] in episodes), reverse=True)) for s in skills
        ]
        dealt: dict[str, tuple[str, float]] = {}  # episode -> the skill it was dealt for
        while len(dealt) < cfg.top_k_episodic and any(q for _, q in queues):
            for skill_id, q in queues:
                while q and q[0][1] in dealt:  # an episode distilled into two skills
                    q.pop(0)
                if q and len(dealt) < cfg.top_k_episodic:
                    weight, episode = q.pop(0)
                    dealt[episode] = (skill_id, weight)
        shown = list(dealt)
        grounded: dict[str, float] = {}
        for e in self.graph.edges("ground", dst=shown, scope=scope):
            grounded[e.src] = grounded.get(e.src, 0.0) + e.weight
        ranked = sorted((i for i in grounded if grounded[i] > 0), key=lambda i: -grounded[i])
        facts = self.graph.get_nodes(ranked)
        # Scores on Stage I's scales: an episode's is how closely it followed the skill
        # (the distill weight, 0-1), a fact's the share of those episodes that grounded it.
        n = len(shown) or 1
        episodic = tuple(
            ScoredNode(episodes[i], dealt[i][1], "distilled into a mature skill") for i in shown
        )
        semantic = tuple(
            ScoredNode(facts[i], min(1.0, grounded[i] / n), "grounded by its episodes")
            for i in ranked
            if i in facts
        )[: cfg.top_k_semantic]
        served = {skill_id for skill_id, _ in dealt.values()}
        return semantic, episodic, tuple(s for s in skills if s.id in served)

    def _new_episode(self, task: str, scope: Scope) -> Node:
        node = Node(
            uuid.uuid4().hex,
            "episodic",
            task,
            scope,
            {"task": task, "status": "running", "success": False, "trajectory": []},
        )
        vec = self.embedder.embed([task], op="fluxmem.episode")[0]
        return self.graph.add_node(node, vec, reason="episode started")

    def _mark_steps(self, sub: Subgraph, episode_id: str, attempt: int) -> None:
        """Step edges from every node of ``sub`` to the episode, listing the attempts it
        was active in (a step replayed after a lost claim is not listed twice)."""
        existing = {e.src: e for e in self.graph.edges("step", dst=[episode_id])}
        for node_id in sorted(sub.node_ids()):
            steps = [*existing[node_id].data.get("steps", [])] if node_id in existing else []
            if attempt in steps:
                continue
            self.graph.add_edge(
                Edge("step", node_id, episode_id, 1.0, {"steps": [*steps, attempt]}),
                reason=f"active in step {attempt}",
            )

    # -- stored sessions --------------------------------------------------------------------
    def from_row(self, row: SessionRow) -> TaskState:
        """The state of a stored session; its subgraph's nodes are read again (a node
        removed since is left out, one changed since is seen as it is now)."""
        refs = {k: [r for r in row.subgraph.get(k, []) if len(r) == 3] for k in _KINDS}
        nodes = self.graph.get_nodes([str(r[0]) for k in _KINDS for r in refs[k]])

        def scored(kind: str) -> tuple[ScoredNode, ...]:
            return tuple(
                ScoredNode(nodes[str(i)], float(score), str(why))
                for i, score, why in refs[kind]
                if str(i) in nodes
            )

        return TaskState(
            task=row.task,
            scope=row.scope,
            episode_id=row.episode_id,
            phase="mature" if row.phase == "mature" else "search",
            rounds_left=row.rounds_left,
            subgraph=Subgraph(
                row.task, scored("semantic"), scored("episodic"), scored("procedural")
            ),
            context=row.context,
            attempts=list(row.attempts),
            repairs=[Repair(r["op"], r["node_id"], r["detail"]) for r in row.repairs],  # type: ignore[arg-type]
            started_at=row.created_at,
        )


def raise_failure(state: TaskState) -> None:
    """Raise lightmem's own error that ended the task (``state.failure``), as itself with
    its traceback, now that the episode is recorded; nothing if there is none."""
    exc = state.failure
    if exc is not None:
        state.failure = None  # raised once: the note is not added twice
        exc.add_note(f"episode {state.episode_id} recorded as failed")
        raise exc


def to_row(
    session_id: str, state: TaskState, now: float, ttl_s: float, step_key: str = ""
) -> SessionRow:
    """``state`` as the stored row of session ``session_id`` (used ``now``), after the
    step whose digest is ``step_key`` (:func:`step_key`)."""
    sub = state.subgraph
    return SessionRow(
        id=session_id,
        scope=state.scope,
        episode_id=state.episode_id,
        task=state.task,
        phase=state.phase,
        attempt=state.attempt,
        rounds_left=state.rounds_left,
        attempts=list(state.attempts),
        repairs=[repair_record(r) for r in state.repairs],
        subgraph={
            kind: [[s.node.id, s.score, s.why] for s in getattr(sub, kind)] for kind in _KINDS
        },
        context=state.context,
        created_at=state.started_at,
        updated_at=now,
        expires_at=now + ttl_s,
        step_key=step_key,
        outcome=None if state.outcome is None else outcome_record(state.outcome),
    )


def step_key(reply: StepResult | Crash) -> str:
    """A digest of what a step reported, so the same report sent again is recognised."""
    if isinstance(reply, Crash):
        fields: dict[str, Any] = {"error": reply.error}
    else:
        fb = reply.feedback
        fields = {
            "result": reply.result,
            "success": bool(reply.success),
            "feedback": fb if isinstance(fb, str | None) else asdict(fb),
            "actions": list(reply.actions),
            "observations": list(reply.observations),
            "reads": list(reply.reads),
            "relevant": list(reply.relevant),
        }
    text = json.dumps(fields, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def outcome_record(o: TaskOutcome) -> dict[str, Any]:
    """``o`` as stored with its finished session; ``result`` in its JSON form (its
    ``repr`` when JSON cannot hold it)."""
    try:
        result = json.loads(json.dumps(o.result, allow_nan=False))
    except (TypeError, ValueError):
        result = repr(o.result)
    return {
        "task": o.task,
        "success": o.success,
        "result": result,
        "episode_id": o.episode_id,
        "attempts": o.attempts,
        "repairs": [repair_record(r) for r in o.repairs],
        "error": o.error,
    }


def outcome_from_record(d: dict[str, Any]) -> TaskOutcome:
    return TaskOutcome(
        task=str(d["task"]),
        success=bool(d["success"]),
        result=d.get("result"),
        episode_id=str(d["episode_id"]),
        attempts=int(d["attempts"]),
        repairs=tuple(Repair(r["op"], r["node_id"], r["detail"]) for r in d["repairs"]),
        error=str(d.get("error", "")),
    )


def _checked(reply: object) -> StepResult | Crash:
    """What the user's code returned, as something safe to store: a StepResult whose
    fields could not be stored (NUL, lone surrogate, NaN) becomes a crashed step, so a bad
    reply cannot poison the graph."""
    if isinstance(reply, Crash):
        return Crash.of(reply.error, reply.cause)
    if not isinstance(reply, StepResult):
        return Crash(f"execute_fn returned {type(reply).__name__}, expected StepResult")
    try:
        check_value(reply, "result", strict=False)
    except InvalidInputError as exc:
        return Crash(f"execute_fn returned an unstorable value: {exc}")
    return reply
