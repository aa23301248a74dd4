"""``lightmem bench fluxmem``: FluxMem's stages ablated on a seeded family of table tasks.

Each configuration trains on the same tasks, then answers held-out tasks on the first
attempt from its memory alone (Stage I context, no repairs, nothing recorded), so the
figure measures what the memory learned, not retries:

- no memory: the analyst sees an empty context;
- Stage I: knowledge only; training runs without repairs;
- I+II: training runs with Stage II repairs;
- I+II+III: as I+II, then Stage III consolidation.

Also reports repairs, model calls per task (0 offline), the PEMS curves of consolidation,
and Stage I assembly latency on a large synthetic graph.
"""

from __future__ import annotations

import itertools
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lightmem.cli.fluxmem_tables import (
    ANALYSIS_DOC,
    DISTRACTORS,
    SPREADSHEET_DOC,
    SimulatedAnalyst,
    TableTask,
    make_task,
)
from lightmem.fluxmem.agent import FluxMemAgent
from lightmem.fluxmem.serialize import serialize
from lightmem.fluxmem.types import Node, StepResult, Subgraph
from lightmem.ledger import calls

__all__ = ["CONFIGS", "run", "run_seeds", "scale"]

CONFIGS = ("no_memory", "stage1", "stage1_2", "stage1_2_3")


def run(*, seed: int = 0, train: int = 40, test: int = 60) -> dict[str, Any]:
    rng = random.Random(seed)
    train_tasks = [make_task(rng) for _ in range(train)]
    test_tasks = [make_task(rng, held_out=True) for _ in range(test)]
    out: dict[str, Any] = {"seed": seed, "train_tasks": train, "test_tasks": test}
    with tempfile.TemporaryDirectory(prefix="lightmem-flux-") as tmp:
        for name in CONFIGS:
            out[name] = _one(name, Path(tmp) / f"{name}.db", train_tasks, test_tasks, seed)
    base = out["no_memory"]["held_out_success"]
    full = out["stage1_2_3"]["held_out_success"]
    out["ratio_full_vs_no_memory"] = round(full / base, 3) if base else None
    rates = [out[c]["held_out_success"] for c in CONFIGS]
    out["each_stage_adds"] = all(b > a for a, b in itertools.pairwise(rates))
    return out


def run_seeds(
    seeds: int = 5,
    *,
    first_seed: int = 0,
    train: int = 40,
    test: int = 60,
    plot: str | Path | None = None,
) -> dict[str, Any]:
    """:func:`run` over several seeds; success rates are reported as medians."""
    runs = [run(seed=s, train=train, test=test) for s in range(first_seed, first_seed + seeds)]
    medians = {c: statistics.median(r[c]["held_out_success"] for r in runs) for c in CONFIGS}
    curves = [
        c for r in runs for c in r["stage1_2_3"]["consolidation"]["pems_curves"].values() if c
    ]
    converged = [len(c) <= 5 and (len(c) < 2 or abs(c[-1] - c[-2]) < 0.01) for c in curves]
    if plot is not None and curves:
        from lightmem.bench.plot import line_chart

        line_chart(plot, curves[:5])
    return {
        "seeds": list(range(first_seed, first_seed + seeds)),
        "median_held_out_success": medians,
        "ratio_full_vs_no_memory": round(medians["stage1_2_3"] / medians["no_memory"], 3)
        if medians["no_memory"]
        else None,
        "each_stage_adds_on_medians": all(
            medians[b] > medians[a] for a, b in itertools.pairwise(CONFIGS)
        ),
        "seeds_where_each_stage_adds": sum(r["each_stage_adds"] for r in runs),
        "pems": {
            "skills": len(curves),
            "converged_within_5_rounds": sum(converged),
            "rounds_median": statistics.median(len(c) for c in curves) if curves else 0,
            "curves_first_seed": runs[0]["stage1_2_3"]["consolidation"]["pems_curves"],
        },
        "repairs_median": {
            op: statistics.median(r["stage1_2"]["repairs"].get(op, 0) for r in runs)
            for op in ("link_prune", "link_expand", "node_reshape")
        },
        "runs": runs,
    }


def _one(
    name: str, path: Path, train: list[TableTask], test: list[TableTask], seed: int
) -> dict[str, Any]:
    analyst = SimulatedAnalyst(seed, fair=True)
    if name == "no_memory":
        empty = serialize(Subgraph("", (), (), ()))
        wins = sum(analyst(t, empty).success for t in test)
        return {"held_out_success": round(wins / len(test), 4)}
    agent = FluxMemAgent.open(path)
    agent.add_knowledge([SPREADSHEET_DOC, ANALYSIS_DOC, *DISTRACTORS], source="handbook")
    rounds = 0 if name == "stage1" else agent.config.max_refinement_rounds
    repairs: dict[str, int] = {}
    train_wins = 0
    for t in train:
        outcome = agent.run_task(t.question, _bind(analyst, t), max_rounds=rounds)
        train_wins += outcome.success
        for r in outcome.repairs:
            repairs[r.op] = repairs.get(r.op, 0) + 1
    result: dict[str, Any] = {
        "train_success": round(train_wins / len(train), 4),
        "repairs": repairs,
    }
    if name == "stage1_2_3":
        report = agent.consolidate()
        result["consolidation"] = report.to_dict()
        again = agent.consolidate()
        result["second_consolidation_creates"] = len(again.created)
    wins = sum(analyst(t, agent.context(t.question)).success for t in test)
    result["held_out_success"] = round(wins / len(test), 4)
    usage = agent.embedder.ledger.totals()
    result["model_calls_per_task"] = {
        "llm": 0,
        "embed": round(calls(usage) / (len(train) + len(test)), 2),
    }
    result["graph"] = agent.stats()
    return result


def _bind(analyst: SimulatedAnalyst, task: TableTask) -> Callable[[str], StepResult]:
    return lambda context: analyst(task, context)


def scale(
    *, semantic: int = 10_000, episodes: int = 1_000, queries: int = 200, dsn: str | None = None
) -> dict[str, Any]:
    """Stage I assembly latency with a large graph (synthetic nodes, real vectors), on a
    SQLite file or, with ``dsn``, a throwaway PostgreSQL schema."""
    if dsn is None:
        with tempfile.TemporaryDirectory(prefix="lightmem-flux-scale-") as tmp:
            return _scale(FluxMemAgent.open(Path(tmp) / "scale.db"), semantic, episodes, queries)
    from lightmem.store.postgres import PostgresStore

    pg = PostgresStore(dsn, schema=f"flux_scale_{uuid.uuid4().hex[:8]}")
    try:
        return _scale(FluxMemAgent.on_store(pg), semantic, episodes, queries)
    finally:
        pg.drop()
        pg.close()


def _scale(agent: FluxMemAgent, semantic: int, episodes: int, queries: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(5000)]
    texts = [" ".join(rng.choice(words, 12)) for _ in range(semantic)]
    vecs = agent.embedder.embed(texts, op="bench")
    store = agent.graph
    t0 = time.perf_counter()
    for text, vec in zip(texts, vecs, strict=True):
        store.add_node(Node(uuid.uuid4().hex, "semantic", text), vec, "bench")
    ep_texts = [" ".join(rng.choice(words, 8)) for _ in range(episodes)]
    for text, vec in zip(ep_texts, agent.embedder.embed(ep_texts, op="bench"), strict=True):
        store.add_node(
            Node(uuid.uuid4().hex, "episodic", text, data={"task": text, "success": True}),
            vec,
            "bench",
        )
    load_s = time.perf_counter() - t0
    lat = []
    for i in range(queries):
        q = ep_texts[i % len(ep_texts)]
        t1 = time.perf_counter()
        agent.subgraph(q)
        lat.append(time.perf_counter() - t1)
    lat.sort()
    return {
        "semantic_nodes": semantic,
        "episodes": episodes,
        "load_s": round(load_s, 2),
        "stage1_ms_p50": round(1000 * statistics.median(lat), 2),
        "stage1_ms_p95": round(1000 * lat[int(0.95 * len(lat))], 2),
    }
