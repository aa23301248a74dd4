"""FluxMem vocabulary: graph nodes and edges, step results, feedback, subgraphs."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

# The graph types live in the leaf module the store imports too; re-exported here.
from lightmem.types import Edge, EdgeKind, Node, NodeKind

__all__ = [
    "FAILURE_KINDS",
    "FEEDBACK_FIELDS",
    "Edge",
    "EdgeKind",
    "FailureKind",
    "Feedback",
    "Node",
    "NodeKind",
    "Repair",
    "ScoredNode",
    "StepResult",
    "Subgraph",
    "TaskOutcome",
]

#: Why a step failed: the one list of kinds (the REST/MCP schemas and their check take it
#: from here).
FailureKind = Literal["missing", "noise", "granularity"]
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)


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


#: The fields of structured feedback, as REST and MCP take it (see
#: :class:`lightmem.server.schemas.StepFeedback`).
FEEDBACK_FIELDS = tuple(f.name for f in fields(Feedback))


@dataclass(frozen=True, slots=True)
class StepResult:
    """What the user's ``execute_fn(context)`` returns for one attempt at the task.

    ``actions``: the steps the agent took (its trajectory), which Stage III aligns across
    successful episodes to induce skills. ``observations``: optionally, what the
    environment showed after each action (plain text, one per action); Stage III then
    turns what varies between runs into named slots filled from what the agent read.
    ``reads``: optionally, one per action, the document that action read (a recipe, a
    map) or ""; without it every earlier observation counts as read.
    ``relevant``: optionally, the positions of the actions that mattered (say, those that
    scored and those that made them possible); Stage III then induces skills from those
    alone, not from the agent's detours."""

    result: Any
    feedback: str | Feedback | None = None
    success: bool = False
    actions: tuple[str, ...] = ()
    observations: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    relevant: tuple[int, ...] = ()


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
