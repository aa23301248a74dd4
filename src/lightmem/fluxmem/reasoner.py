"""The judgement calls FluxMem makes, behind one interface: offline rules or an LLM.

Offline: verification by lexical overlap, attribution from structured feedback (or keywords
in text feedback; a bare verdict blames the top-ranked fact), skill induction by aligning
successful trajectories, refinement by dropping steps that failing episodes share,
reshaping from the procedure a fact describes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from lightmem.fluxmem.prompts import attribute as attribute_prompt
from lightmem.fluxmem.prompts import attribute_schema, steps_schema, verify_schema
from lightmem.fluxmem.prompts import steps as steps_prompt
from lightmem.fluxmem.prompts import verify as verify_prompt
from lightmem.fluxmem.types import FailureKind, Feedback
from lightmem.ledger import Ledger
from lightmem.llm.base import LLMClient
from lightmem.llm.packing import cut_reported, pack
from lightmem.pipeline.prompts.reply import stored
from lightmem.text import content_terms

__all__ = ["LLMReasoner", "OfflineReasoner", "Reasoner", "step_key", "terms"]

_KEYWORDS: tuple[tuple[FailureKind, tuple[str, ...]], ...] = (
    ("granularity", ("coarse", "granular", "too vague", "too general", "finer", "too detailed")),
    ("noise", ("irrelevant", "misled", "misleading", "noise", "wrong tool", "distract")),
    ("missing", ("missing", "lack", "not enough", "unknown", "need", "did not know")),
)
_CLAUSE = re.compile(r",\s*(?:then\s+|and\s+then\s+|and\s+)?|;\s*|\.\s+|\s+then\s+", re.I)


class Reasoner(Protocol):
    name: str

    def verify(self, task: str, texts: Sequence[str]) -> list[float]: ...
    def attribute(self, task: str, feedback: str | Feedback | None) -> Feedback: ...
    def induce(self, trajectories: Sequence[Sequence[str]]) -> list[str]: ...
    def refine(
        self,
        steps: Sequence[str],
        successful: Sequence[Sequence[str]],
        failing: Sequence[Sequence[str]],
    ) -> list[str]: ...
    def reshape(self, steps: Sequence[str], detail: str, reference: str) -> list[str]: ...


def terms(text: str) -> set[str]:
    """Content words with a light plural fold, for overlap scores."""
    return {t[:-1] if len(t) > 3 and t.endswith("s") else t for t in content_terms(text)}


def step_key(step: str) -> str:
    """Steps are aligned on their leading verb ("derive medals per athlete" -> "derive")."""
    words = content_terms(step)
    return words[0] if words else step.strip().lower()


class OfflineReasoner:
    name = "offline"

    def verify(self, task: str, texts: Sequence[str]) -> list[float]:
        want = terms(task)
        if not want:
            return [0.0] * len(texts)
        return [len(want & terms(t)) / len(want) for t in texts]

    def attribute(self, task: str, feedback: str | Feedback | None) -> Feedback:
        if isinstance(feedback, Feedback):
            return feedback
        if not feedback:
            return Feedback("missing", detail=task)
        low = feedback.lower()
        for kind, words in _KEYWORDS:
            if any(w in low for w in words):
                return Feedback(kind, detail=feedback)
        # A bare verdict ("wrong answer") names no cause: the best guess is that what the
        # context ranked first misled the agent, so Stage II demotes it for this task.
        return Feedback("noise", detail="")

    def induce(self, trajectories: Sequence[Sequence[str]]) -> list[str]:
        if not trajectories:
            return []
        positions: dict[str, list[float]] = defaultdict(list)
        phrasing: dict[str, Counter[str]] = defaultdict(Counter)
        for traj in trajectories:
            seen: set[str] = set()
            for i, step in enumerate(traj):
                key = step_key(step)
                if key in seen:
                    continue
                seen.add(key)
                positions[key].append(i / max(1, len(traj) - 1))
                phrasing[key][step.strip()] += 1
        quorum = len(trajectories) / 2
        kept = [k for k, pos in positions.items() if len(pos) >= quorum]
        kept.sort(key=lambda k: sum(positions[k]) / len(positions[k]))
        return [_generalise(phrasing[k]) for k in kept]

    def refine(
        self,
        steps: Sequence[str],
        successful: Sequence[Sequence[str]],
        failing: Sequence[Sequence[str]],
    ) -> list[str]:
        if not failing:
            return list(steps)

        def share(trajs: Sequence[Sequence[str]], key: str) -> float:
            return sum(key in {step_key(s) for s in t} for t in trajs) / max(1, len(trajs))

        return [
            s
            for s in steps
            if not (share(failing, step_key(s)) >= 0.5 and share(successful, step_key(s)) < 0.5)
        ]

    def reshape(self, steps: Sequence[str], detail: str, reference: str) -> list[str]:
        procedure = [c.strip(" .") for c in _CLAUSE.split(reference) if len(c.split()) >= 2]
        if len(procedure) >= 2:
            return procedure
        return [*steps, detail] if detail else list(steps)


def _generalise(variants: Counter[str]) -> str:
    """One phrasing for a step seen in several episodes: words that differ between the
    episodes (their task's nouns) become "X", so the skill reads as a procedure."""
    top = variants.most_common(1)[0][0].split()
    same_len = [v.split() for v in variants if len(v.split()) == len(top)]
    if len(same_len) < 2:
        return " ".join(top)
    return " ".join(
        w if all(v[i].lower() == w.lower() for v in same_len) else "X" for i, w in enumerate(top)
    )


class LLMReasoner:
    """The LLM versions of FluxMem's judgements (same ledger as every other model call).

    Structured feedback from the environment is used as given; only free-text feedback is
    attributed by the model. Every call sends a bounded schema; with the client's
    ``context_tokens``, verification is split over several calls where the facts do not fit
    one, and texts too long for any request are cut in the prompt."""

    name = "llm"

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    @property
    def ledger(self) -> Ledger:
        """Its client's ledger: where its model calls are accounted."""
        return self.client.ledger

    def verify(self, task: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []

        def fits(group: list[str], about: str = task) -> bool:
            return self.client.fits(
                verify_prompt.build(about, group), verify_schema.output(len(group))
            )

        # the task leaves room for at least one short fact; each fact fits beside the task
        op = "fluxmem.verify"
        task = cut_reported(self.client, op, [task], lambda t: fits(["x" * 64], t[0]))[0]
        short = [cut_reported(self.client, op, [t], fits)[0] for t in texts]
        scores: list[float] = []
        for group in pack(short, fits):
            scores += self._verify(task, group)
        return scores

    def _verify(self, task: str, texts: list[str]) -> list[float]:
        return self.client.complete_json(
            verify_prompt.build(task, texts),
            lambda obj: verify_prompt.parse(obj, len(texts)),
            op="fluxmem.verify",
            output=verify_schema.output(len(texts)),
        )

    def attribute(self, task: str, feedback: str | Feedback | None) -> Feedback:
        if isinstance(feedback, Feedback):
            return feedback
        output = attribute_schema.output(self.client.answer_limit())
        task, text = cut_reported(
            self.client,
            "fluxmem.attribute",
            [task, feedback or "the step failed without feedback"],
            lambda t: self.client.fits(attribute_prompt.build(t[0], t[1]), output),
        )
        return self.client.complete_json(
            attribute_prompt.build(task, text),
            _attribution,
            op="fluxmem.attribute",
            output=output,
        )

    def induce(self, trajectories: Sequence[Sequence[str]]) -> list[str]:
        if not trajectories:
            return []
        payload = {"trajectories": steps_prompt.trajectories(trajectories)}
        return self._steps(steps_prompt.INDUCE, payload, "fluxmem.induce")

    def refine(
        self,
        steps: Sequence[str],
        successful: Sequence[Sequence[str]],
        failing: Sequence[Sequence[str]],
    ) -> list[str]:
        if not failing:
            return list(steps)
        payload = {
            "skill": list(steps),
            "successful": steps_prompt.trajectories(successful),
            "failing": steps_prompt.trajectories(failing),
        }
        return self._steps(steps_prompt.REFINE, payload, "fluxmem.refine")

    def reshape(self, steps: Sequence[str], detail: str, reference: str) -> list[str]:
        payload = {"skill": list(steps), "problem": detail, "reference": reference}
        return self._steps(steps_prompt.RESHAPE, payload, "fluxmem.reshape")

    def _steps(self, system: str, payload: dict[str, Any], op: str) -> list[str]:
        output = steps_schema.output(self.client.answer_limit())
        flat = _strings(payload)
        short = cut_reported(
            self.client,
            op,
            flat,
            lambda t: self.client.fits(steps_prompt.build(system, _refill(payload, t)), output),
        )
        return self.client.complete_json(
            steps_prompt.build(system, _refill(payload, short)),
            lambda obj: stored(steps_prompt.parse(obj), "steps"),
            op=op,
            output=output,
        )


def _attribution(obj: Any) -> Feedback:
    """The model's attribution, its detail held to the check of stored text."""
    feedback = attribute_prompt.parse(obj)
    stored(feedback.detail, "detail")
    return feedback


def _strings(value: Any) -> list[str]:
    """Every string in a JSON-like payload, depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _refill(value: Any, texts: Sequence[str]) -> Any:
    """``value`` with its strings replaced, in :func:`_strings` order, by ``texts``."""
    it = iter(texts)

    def go(v: Any) -> Any:
        if isinstance(v, str):
            return next(it)
        if isinstance(v, dict):
            return {k: go(x) for k, x in v.items()}
        if isinstance(v, list):
            return [go(x) for x in v]
        return v

    return go(value)
