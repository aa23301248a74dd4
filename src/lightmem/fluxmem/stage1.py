"""Stage I: assemble the working subgraph for one step of a task."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from lightmem.embed.base import Embedder
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.reasoner import Reasoner
from lightmem.fluxmem.types import ScoredNode, Subgraph
from lightmem.store.graph import GraphStore
from lightmem.text import content_terms
from lightmem.types import Scope

__all__ = ["SKILL_SUPPORT", "Stage1"]

#: Least similarity-weighted share of the similar episodes that must endorse a skill
#: (about one of the three nearest).
SKILL_SUPPORT = 0.3


@dataclass(frozen=True, slots=True)
class Stage1:
    graph: GraphStore
    embedder: Embedder
    reasoner: Reasoner
    cfg: FluxMemConfig

    def build(self, task: str, scope: Scope, current_episode: str | None = None) -> Subgraph:
        """Facts by dense + BM25 + verify fusion plus what similar episodes grounded (or
        pruned); similar episodes; skills inherited along their distill edges."""
        cfg = self.cfg
        qv = self.embedder.embed([task], op="fluxmem.stage1")[0]
        similar = [
            (i, s)
            for i, s in self.graph.vector_search("episodic", qv, scope, cfg.top_k_episodic + 1)
            if i != current_episode
        ][: cfg.top_k_episodic]
        sources = dict(similar)
        if current_episode is not None:
            sources[current_episode] = 1.0  # this task's own repairs apply fully

        ground: dict[str, float] = defaultdict(float)
        blocked: set[str] = set()
        for e in self.graph.edges("ground", dst=list(sources)):
            ground[e.src] += max(0.0, sources[e.dst]) * e.weight
            if e.dst == current_episode and e.weight < 0:
                blocked.add(e.src)  # pruned for this very task: never offered again

        dense = {
            i: max(0.0, s)
            for i, s in self.graph.vector_search("semantic", qv, scope, cfg.candidates)
        }
        bm = self.graph.text_search("semantic", content_terms(task), scope, cfg.candidates)
        top_bm = max((s for _, s in bm), default=0.0)
        lexical = {i: s / top_bm for i, s in bm} if top_bm > 0 else {}
        pool = (set(dense) | set(lexical) | set(ground)) - blocked

        pre = {
            i: cfg.dense_weight * dense.get(i, 0.0)
            + cfg.bm25_weight * lexical.get(i, 0.0)
            + cfg.ground_weight * ground.get(i, 0.0)
            for i in pool
        }
        # The verifier (an LLM call when configured) only sees the best few candidates.
        shortlist = sorted(pre, key=lambda i: -pre[i])[: 2 * cfg.top_k_semantic]
        nodes = self.graph.get_nodes(shortlist)
        shortlist = [i for i in shortlist if i in nodes]
        checks = self.reasoner.verify(task, [nodes[i].text for i in shortlist]) if shortlist else []
        scored = sorted(
            (
                ScoredNode(
                    nodes[i], pre[i] + cfg.llm_weight * v, _why(dense, lexical, ground, i, v)
                )
                for i, v in zip(shortlist, checks, strict=True)
            ),
            key=lambda s: -s.score,
        )
        semantic = tuple(s for s in scored if s.score > 0)[: cfg.top_k_semantic]

        ep_nodes = self.graph.get_nodes([i for i, _ in similar])
        episodic = tuple(ScoredNode(ep_nodes[i], s) for i, s in similar if i in ep_nodes)

        # A skill is inherited along distill edges when the similar episodes endorse it:
        # its support is the similarity-weighted share of those episodes that distilled
        # into it (edge weight = how closely they followed it). A skill backed only by a
        # minority of the neighbours (say, by episodes of another procedure) is left out.
        # Among the endorsed, its track record (eta) and its own fit to the task rank it.
        total_sim = sum(max(0.0, s) for _, s in similar) or 1.0
        support: dict[str, float] = {}
        for e in self.graph.edges("distill", src=[i for i, _ in similar]):
            support[e.dst] = support.get(e.dst, 0.0) + max(0.0, sources[e.src]) * e.weight
        # Fit is scored like facts are: dense plus normalised BM25 on the skill's text.
        skill_dense = dict(self.graph.vector_search("procedural", qv, scope, cfg.candidates))
        skill_bm = self.graph.text_search("procedural", content_terms(task), scope, cfg.candidates)
        top_skill_bm = max((s for _, s in skill_bm), default=0.0) or 1.0
        skill_fit = {
            i: cfg.dense_weight * max(0.0, skill_dense.get(i, 0.0))
            + cfg.bm25_weight * dict(skill_bm).get(i, 0.0) / top_skill_bm
            for i in set(skill_dense) | {i for i, _ in skill_bm}
        }
        skills = self.graph.get_nodes(list(support))
        ranked = []
        for i, sup in support.items():
            share = sup / total_sim
            if i not in skills or share < SKILL_SUPPORT:
                continue
            eta = float(skills[i].data.get("eta", 1.0))
            fit = skill_fit.get(i, 0.0)
            ranked.append(
                ScoredNode(
                    skills[i],
                    share * eta + fit,
                    f"support={share:.2f} eta={eta:.2f} fit={fit:.2f}",
                )
            )
        procedural = tuple(sorted(ranked, key=lambda s: -s.score)[: cfg.top_k_episodic])
        return Subgraph(task, semantic, episodic, procedural)


def _why(
    dense: dict[str, float], lexical: dict[str, float], ground: dict[str, float], i: str, v: float
) -> str:
    return (
        f"dense={dense.get(i, 0.0):.2f} bm25={lexical.get(i, 0.0):.2f} "
        f"ground={ground.get(i, 0.0):+.2f} verify={v:.2f}"
    )
