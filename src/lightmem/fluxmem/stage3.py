"""Stage III: cluster episodes, induce a skill per cluster, refine it until PEMS settles."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from lightmem.embed.base import Embedder
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.kmeans import default_clusters, kmeans
from lightmem.fluxmem.pems import pems
from lightmem.fluxmem.reasoner import Reasoner, step_key
from lightmem.fluxmem.stage2 import skill_text
from lightmem.fluxmem.types import Edge, Node
from lightmem.store.graph import GraphStore
from lightmem.types import Scope

ReplayFn = Callable[[str, str], bool]


@dataclass
class ConsolidationReport:
    """``curves``: PEMS per refinement round, one list per skill touched."""

    clusters: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    curves: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "clusters": self.clusters,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "pems_curves": self.curves,
        }


@dataclass(frozen=True, slots=True)
class Stage3:
    graph: GraphStore
    embedder: Embedder
    reasoner: Reasoner
    cfg: FluxMemConfig

    PROCEDURE_WEIGHT = 2.0
    #: Least share of step verbs an episode must have in common with a skill to hand it on.
    MIN_ALIGNMENT = 0.5

    def consolidate(self, scope: Scope, replay_fn: ReplayFn | None = None) -> ConsolidationReport:
        """Incremental: a cluster whose episodes already distil into a skill updates that
        skill (a new version only if its steps change); it never creates a duplicate."""
        report = ConsolidationReport()
        nodes = self.graph.nodes("episodic", scope)
        if not nodes:
            return report
        # Episodes are clustered on what they did as much as on what they were asked: a
        # skill distils a procedure, so its episodes should share one. The procedure is the
        # sequence of step verbs, so task nouns inside steps do not split it.
        asked = self.embedder.embed(
            [str(n.data.get("task", n.text)) for n in nodes], op="fluxmem.stage3"
        )
        did = self.embedder.embed([_procedure(n) for n in nodes], op="fluxmem.stage3")
        matrix = np.hstack([asked, self.PROCEDURE_WEIGHT * did]).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        ids = [n.id for n in nodes]
        episodes = {n.id: n for n in nodes}
        k = self.cfg.num_clusters or default_clusters(len(ids))
        labels = kmeans(matrix, k, seed=self.cfg.seed)
        report.clusters = int(labels.max()) + 1
        n_proc = len(self.graph.nodes("procedural", scope))
        for j in range(report.clusters):
            members = [episodes[ids[i]] for i in np.flatnonzero(labels == j) if ids[i] in episodes]
            wins = [e for e in members if e.data.get("success")]
            if not wins:
                continue
            existing = self._existing_skill(members)
            n_total = n_proc + (0 if existing else 1)
            steps, curve, vec, eta = self._refine(members, wins, existing, n_total, replay_fn)
            if not steps:
                continue
            score = curve[-1] if curve else 0.0
            skill_id = self._write(scope, steps, vec, members, existing, score, eta, report)
            if existing is None:
                n_proc += 1
            report.curves[skill_id] = curve
        return report

    def _existing_skill(self, members: Sequence[Node]) -> Node | None:
        votes = Counter(e.dst for e in self.graph.edges("distill", src=[m.id for m in members]))
        if not votes:
            return None
        return self.graph.get_node(votes.most_common(1)[0][0])

    def _refine(
        self,
        members: Sequence[Node],
        wins: Sequence[Node],
        existing: Node | None,
        n_procedural: int,
        replay_fn: ReplayFn | None,
    ) -> tuple[list[str], list[float], np.ndarray, float]:
        """Refine until PEMS settles; returns the steps, the PEMS curve, the vector and the
        eta of the last round (the replay success rate when ``replay_fn`` is given)."""
        good = [list(e.data.get("trajectory", [])) for e in wins]
        bad = [list(e.data.get("trajectory", [])) for e in members if not e.data.get("success")]
        steps = self.reasoner.induce(good)
        prev_vec = None
        if existing is not None:
            prev_vec = self.embedder.embed([existing.text], op="fluxmem.stage3")[0]
        curve: list[float] = []
        eta = len(wins) / len(members)
        vec = prev_vec if prev_vec is not None else np.zeros(self.embedder.dim, np.float32)
        for rnd in range(max(1, self.cfg.max_consolidation_rounds)):
            if rnd:
                steps = self.reasoner.refine(steps, good, bad)
            if not steps:
                break
            text = skill_text(steps)
            vec = self.embedder.embed([text], op="fluxmem.stage3")[0]
            if replay_fn is not None:
                eta = float(
                    np.mean([bool(replay_fn(text, str(m.data.get("task", "")))) for m in members])
                )
            else:
                eta = len(wins) / len(members)
            curve.append(pems(eta, n_procedural, text, prev_vec, vec))
            prev_vec = vec
            if len(curve) >= 2 and abs(curve[-1] - curve[-2]) < self.cfg.pems_threshold:
                break
        return steps, curve, vec, eta

    def _write(
        self,
        scope: Scope,
        steps: list[str],
        vec: np.ndarray,
        members: Sequence[Node],
        existing: Node | None,
        score: float,
        eta: float,
        report: ConsolidationReport,
    ) -> str:
        sources = sorted(m.id for m in members)
        if existing is None:
            node = Node(
                id=uuid.uuid4().hex,
                kind="procedural",
                text=skill_text(steps),
                scope=scope,
                data={
                    "steps": steps,
                    "versions": [],
                    "source_episodes": sources,
                    "pems": score,
                    "eta": eta,
                },
            )
            self.graph.add_node(node, vec, reason="stage3: induced skill")
            report.created.append(node.id)
            skill_id = node.id
        elif existing.steps != steps:
            versions = [
                *existing.data.get("versions", []),
                {"version": existing.version, "steps": existing.data.get("steps", [])},
            ]
            new = replace(
                existing,
                text=skill_text(steps),
                data={
                    **dict(existing.data),
                    "steps": steps,
                    "versions": versions,
                    "source_episodes": sources,
                    "pems": score,
                    "eta": eta,
                },
            )
            self.graph.update_node(new, vec, reason="stage3: refined skill")
            report.updated.append(existing.id)
            skill_id = existing.id
        else:
            report.unchanged.append(existing.id)
            skill_id = existing.id
            if existing.data.get("eta") != eta or existing.data.get("pems") != score:
                # Same steps, new evidence (say, a replay): the stored track record that
                # Stage I ranks skills by must follow it.
                rescored = {**dict(existing.data), "pems": score, "eta": eta}
                self.graph.update_node(
                    replace(existing, data=rescored), vec, reason="stage3: re-scored skill"
                )
        # An episode distils into the skill as far as it succeeded by the skill's procedure:
        # a cluster can hold episodes of another procedure, and those must not hand the
        # skill on to tasks like theirs.
        keys = {step_key(x) for x in steps}
        have = {e.src: e for e in self.graph.edges("distill", dst=[skill_id])}
        for m in members:
            did = {step_key(str(x)) for x in m.data.get("trajectory", [])}
            weight = 0.0
            if m.data.get("success") and did:
                weight = round(len(keys & did) / len(keys | did), 3)
                weight = weight if weight >= self.MIN_ALIGNMENT else 0.0
            if weight > 0 and (m.id not in have or have[m.id].weight != weight):
                self.graph.add_edge(Edge("distill", m.id, skill_id, weight), "stage3: distill")
            elif weight == 0 and m.id in have:
                self.graph.remove_edge("distill", m.id, skill_id, "stage3: no longer follows")
        return skill_id


def _procedure(node: Node) -> str:
    keys = [step_key(str(s)) for s in node.data.get("trajectory", [])]
    return " then ".join(keys) if keys else "no steps"
