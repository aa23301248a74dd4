"""``lightmem demo fluxmem``: the FluxMem paper's worked case, offline.

A table of countries with athletes and medals; the task "which country has the most medals
per athlete". The agent first follows a coarse table-QA skill and the spreadsheet tool, which
ranks by total medals and fails; FluxMem prunes the link to the spreadsheet document, links
the data-analysis document, reshapes the skill into group -> derive -> normalise -> compare,
and the answer comes out right.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from lightmem.cli.fluxmem_tables import (
    ANALYSIS_DOC,
    DISTRACTORS,
    SPREADSHEET_DOC,
    SimulatedAnalyst,
    TableTask,
)
from lightmem.fluxmem.agent import FluxMemAgent
from lightmem.fluxmem.reasoner import step_key
from lightmem.fluxmem.types import StepResult, TaskOutcome

__all__ = ["RATE_TASK", "ROWS", "TOTAL_TASK", "run"]

ROWS = (
    ("Norway", 38, 95),
    ("Kenya", 11, 21),
    ("Japan", 58, 180),
    ("Brazil", 21, 70),
    ("Chile", 4, 30),
)
RATE_TASK = TableTask("rate", "most", "country", "countries", "medals", "athlete", "athletes", ROWS)
TOTAL_TASK = TableTask(
    "total", "most", "country", "countries", "medals", "athlete", "athletes", ROWS
)


def run(out: TextIO, store_path: str | None = None) -> TaskOutcome:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lightmem-fluxmem-") as tmp:
        agent = FluxMemAgent.open(store_path or Path(tmp) / "fluxmem.db", agent_id="analyst")
        agent.add_knowledge([SPREADSHEET_DOC, ANALYSIS_DOC, *DISTRACTORS], source="handbook")
        analyst = SimulatedAnalyst(seed=0)
        earlier = agent.run_task(TOTAL_TASK.question, lambda ctx: analyst(TOTAL_TASK, ctx))
        agent.add_skill(
            "table-QA",
            ["open the table in the spreadsheet tool", "read off the answer"],
            episodes=[earlier.episode_id],
        )
        out.write(
            f"Memory: {len(DISTRACTORS) + 2} documents, one earlier episode "
            f"({TOTAL_TASK.question!r}, success), and a coarse 'table-QA' skill.\n"
        )
        out.write(f"\nTask: {RATE_TASK.question}\n{RATE_TASK.csv()}\n")
        out.write(f"Right answer: {RATE_TASK.answer} (medals / athletes)\n\n")

        last_seq = agent.history(1)[-1]["seq"]
        attempt = 0

        def step(context: str) -> StepResult:
            nonlocal last_seq, attempt
            for event in agent.history(1000):
                if event["seq"] > last_seq and event["reason"].split(":")[0] in _SURGERIES:
                    out.write(f"  repair {_describe(agent, event)}\n")
            last_seq = agent.history(1)[-1]["seq"]
            attempt += 1
            result = analyst(RATE_TASK, context)
            verdict = "right" if result.success else "wrong"
            fb = result.feedback
            why = f"\n  feedback: {fb.kind}: {fb.detail}" if fb and not isinstance(fb, str) else ""
            out.write(
                f"Attempt {attempt}: {' -> '.join(result.actions)}; answer {result.result} "
                f"({verdict}){why}\n"
            )
            return result

        outcome = agent.run_task(RATE_TASK.question, step)
        out.write(
            f"\n{'Solved' if outcome.success else 'Not solved'} in {outcome.attempts} attempts "
            f"with {len(outcome.repairs)} repairs: "
            + ", ".join(r.op for r in outcome.repairs)
            + ".\n"
        )
        skill = next(n for n in agent.graph.nodes("procedural", agent.scope))
        out.write(f"Skill now (version {skill.version}): {' -> '.join(skill.steps)}\n")
        out.write(
            f"Graph: {agent.stats()}; every surgery is in the history and can be undone. "
            f"Done in {time.perf_counter() - start:.1f}s, no model server.\n"
        )
        return outcome


_SURGERIES = {"link_prune", "link_expand", "node_reshape"}


def _describe(agent: FluxMemAgent, event: dict[str, Any]) -> str:
    op = event["reason"].split(":")[0]
    if event["target"] == "edge":
        src = event["target_id"].split("|")[1]
        node = agent.graph.get_node(src)
        text = node.text if node else src
        return f"{op}: {text[:60]}..."
    steps = (event.get("after") or {}).get("data", {}).get("steps", [])
    return f"{op}: table-QA skill becomes " + " -> ".join(step_key(s) for s in steps)
