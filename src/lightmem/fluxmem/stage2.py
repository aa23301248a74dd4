"""Stage II: after a failed step, attribute the cause and repair the graph."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lightmem.embed.base import Embedder
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.reasoner import Reasoner, terms
from lightmem.fluxmem.types import Edge, Feedback, Node, Repair, Subgraph
from lightmem.store.graph import GraphStore
from lightmem.text import content_terms
from lightmem.types import Scope

__all__ = ["Stage2", "skill_text"]


@dataclass(frozen=True, slots=True)
class Stage2:
    graph: GraphStore
    embedder: Embedder
    reasoner: Reasoner
    cfg: FluxMemConfig

    def repair(
        self, task: str, scope: Scope, episode_id: str, sub: Subgraph, fb: Feedback
    ) -> list[Repair]:
        """One surgery per failure: prune a misleading link, expand a missing one, or
        reshape a skill of the wrong granularity. Only the environment's feedback triggers
        a surgery; memory text never does."""
        if fb.kind == "noise":
            return self._prune(episode_id, sub, fb)
        if fb.kind == "granularity":
            done = self._reshape(task, scope, episode_id, sub, fb)
            return done or self._expand(task, scope, episode_id, sub, fb)
        return self._expand(task, scope, episode_id, sub, fb)

    def _prune(self, episode_id: str, sub: Subgraph, fb: Feedback) -> list[Repair]:
        facts = {s.node.id: s.node for s in sub.semantic}
        culprit = (
            fb.node_id if fb.node_id in facts else _best_match(fb.detail, list(facts.values()))
        )
        if culprit is None:
            return []
        self.graph.add_edge(
            Edge("ground", culprit, episode_id, -1.0, {"pruned": True, "why": fb.detail}),
            reason=f"link_prune: {fb.detail}"[:500],
        )
        return [Repair("link_prune", culprit, fb.detail or "misleading for this task")]

    def _expand(
        self, task: str, scope: Scope, episode_id: str, sub: Subgraph, fb: Feedback
    ) -> list[Repair]:
        query = fb.detail or task
        have = {s.node.id for s in sub.semantic}
        pruned = {e.src for e in self.graph.edges("ground", dst=[episode_id]) if e.weight < 0}
        qv = self.embedder.embed([query], op="fluxmem.stage2")[0]
        dense = dict(self.graph.vector_search("semantic", qv, scope, self.cfg.candidates))
        bm = dict(
            self.graph.text_search("semantic", content_terms(query), scope, self.cfg.candidates)
        )
        top_bm = max(bm.values(), default=0.0) or 1.0
        pool = [i for i in set(dense) | set(bm) if i not in have and i not in pruned]
        if not pool:
            return []
        pre = {
            i: self.cfg.dense_weight * max(0.0, dense.get(i, 0.0))
            + self.cfg.bm25_weight * bm.get(i, 0.0) / top_bm
            for i in pool
        }
        shortlist = sorted(pool, key=lambda i: -pre[i])[:5]
        nodes = self.graph.get_nodes(shortlist)
        checks = self.reasoner.verify(query, [nodes[i].text for i in shortlist])
        best = max(
            zip(shortlist, checks, strict=True),
            key=lambda iv: pre[iv[0]] + self.cfg.llm_weight * iv[1],
        )[0]
        self.graph.add_edge(
            Edge("ground", best, episode_id, 1.0, {"expanded": True, "why": query}),
            reason=f"link_expand: {query}"[:500],
        )
        return [Repair("link_expand", best, query)]

    def _reshape(
        self, task: str, scope: Scope, episode_id: str, sub: Subgraph, fb: Feedback
    ) -> list[Repair]:
        skills = {s.node.id: s.node for s in sub.procedural}
        if not skills:
            return []
        skill = skills.get(fb.node_id or "") or sub.procedural[0].node
        old_steps = skill.steps
        if fb.steps:
            new_steps = list(fb.steps)
        else:
            reference = _best_match(fb.detail or task, [s.node for s in sub.semantic])
            ref_text = next((s.node.text for s in sub.semantic if s.node.id == reference), "")
            new_steps = self.reasoner.reshape(old_steps, fb.detail, ref_text)
        if not new_steps or new_steps == old_steps:
            return []
        versions = [*skill.data.get("versions", []), {"version": skill.version, "steps": old_steps}]
        new = replace(
            skill,
            text=skill_text(new_steps),
            data={**dict(skill.data), "steps": new_steps, "versions": versions},
        )
        vec = self.embedder.embed([new.text], op="fluxmem.stage2")[0]
        self.graph.update_node(new, vec, reason=f"node_reshape: {fb.detail}"[:500])
        return [Repair("node_reshape", skill.id, " -> ".join(new_steps))]


def skill_text(steps: list[str]) -> str:
    return "skill: " + "; ".join(steps)


def _best_match(detail: str, nodes: list[Node]) -> str | None:
    if not nodes:
        return None
    want = terms(detail)
    scored = [(len(want & terms(n.text)), -k, n.id) for k, n in enumerate(nodes)]
    best = max(scored)
    return best[2] if best[0] > 0 or not want else None
