"""FluxMem vocabulary: graph nodes and edges, step results, feedback, subgraphs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from lightmem.errors import StoreError
from lightmem.types import Scope

NodeKind = Literal["semantic", "episodic", "procedural"]
EdgeKind = Literal["ground", "distill", "step"]
FailureKind = Literal["missing", "noise", "granularity"]


@dataclass(frozen=True, slots=True)
class Node:
    """A graph node. ``data`` holds the kind's structure: a semantic node's ``source``; an
    episode's ``task``, ``steps`` and ``success``; a skill's ``steps``, ``versions``,
    ``source_episodes`` and ``pems``."""

    id: str
    kind: NodeKind
    text: str
    scope: Scope = field(default_factory=Scope)
    data: Mapping[str, Any] = field(default_factory=dict)
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def steps(self) -> list[str]:
        """A skill's steps; a node whose stored steps are malformed raises StoreError."""
        raw = self.data.get("steps", [])
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise StoreError(
                f"graph node {self.id}: corrupted skill version {self.version} "
                "(steps must be a list of strings); undo the change that wrote it"
            )
        return list(raw)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            **self.scope.as_dict(),
            "data": dict(self.data),
            "version": self.version,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


@dataclass(frozen=True, slots=True)
class Edge:
    """``ground``: semantic -> episodic (this fact served this episode); ``distill``:
    episodic -> procedural (this episode taught this skill); ``step``: a node active in a
    step of an episode (src = node, dst = episode, ``data["step"]`` = index)."""

    kind: EdgeKind
    src: str
    dst: str
    weight: float = 1.0
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "src": self.src,
            "dst": self.dst,
            "weight": self.weight,
            "data": dict(self.data),
        }


@dataclass(frozen=True, slots=True)
class Feedback:
    """Structured feedback an environment can give about a failed step.

    ``kind``: "missing" (information the agent lacked; ``detail`` says what), "noise" (a
    memory misled it; ``node_id`` may name it), "granularity" (a skill was too coarse or
    too fine; ``node_id`` may name it, ``steps`` may give the finer procedure)."""

    kind: FailureKind
    detail: str = ""
    node_id: str | None = None
    steps: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StepResult:
    """What the user's ``execute_fn(context)`` returns for one attempt at the task.

    ``actions``: the steps the agent took (its trajectory), which Stage III aligns across
    successful episodes to induce skills. ``observations``: optionally, what the
    environment showed after each action (plain text, one per action); Stage III then
    turns what varies between runs into named slots filled from what the agent read.
    ``reads``: optionally, one per action, the document that action read (a recipe, a
    map) or ""; without it every earlier observation counts as read."""

    result: Any
    feedback: str | Feedback | None = None
    success: bool = False
    actions: tuple[str, ...] = ()
    observations: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoredNode:
    node: Node
    score: float
    why: str = ""


@dataclass(frozen=True, slots=True)
class Subgraph:
    """Stage I's working memory for one step."""

    task: str
    semantic: tuple[ScoredNode, ...]
    episodic: tuple[ScoredNode, ...]
    procedural: tuple[ScoredNode, ...]

    def node_ids(self) -> frozenset[str]:
        return frozenset(s.node.id for s in (*self.semantic, *self.episodic, *self.procedural))


@dataclass(frozen=True, slots=True)
class Repair:
    """One Stage II surgery, as recorded in the graph history."""

    op: Literal["link_expand", "link_prune", "node_reshape"]
    node_id: str
    detail: str


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """What :meth:`FluxMemAgent.run_task` did."""

    task: str
    success: bool
    result: Any
    episode_id: str
    attempts: int
    repairs: tuple[Repair, ...]
    error: str = ""
