"""The programmatic TextWorldExpress player (no LLM): it follows the best plan its memory
gives whose slots bind to the current game, and explores where no plan step applies.

Plans come from the FluxMem context: a skill's steps and slot rules, or, without a skill,
the slotted steps induced from the similar episodes shown (successful runs whole, failed
runs only their steps the game scored). Exploration takes an untried valid action (the
no-memory baseline), except those like the ones that ended similar runs in failure.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightmem.bench.twx_env import Game, TWXWorld
from lightmem.fluxmem.slots import abstract, bind, episode_run, induce
from lightmem.fluxmem.types import Node, StepResult

SCORED = ("Your score went up.", "The task is complete.")
FAILED = "The task failed."
LOWERED = "Your score went down."
_SKILL_ID = re.compile(r'<skill id="([0-9a-f]+)"')
_EPISODE_ID = re.compile(r'<episode id="([0-9a-f]+)"')


@dataclass(frozen=True)
class Plan:
    steps: tuple[str, ...]
    slots: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""


def plans_from(context: str, nodes: Mapping[str, Node]) -> tuple[list[Plan], set[str]]:
    """Plans in the order the context ranks them, and the abstracted actions that ended
    the similar failed runs (to avoid)."""
    plans = []
    for sid in _SKILL_ID.findall(context):
        node = nodes.get(sid)
        if node is not None and node.data.get("steps"):
            slots = node.data.get("slots", {})
            plans.append(Plan(tuple(node.data["steps"]), slots, f"skill:{sid}"))
    episodes = [nodes[i] for i in _EPISODE_ID.findall(context) if i in nodes]
    wins = [r for e in episodes if e.data.get("success") and (r := episode_run(e))]
    partial = [
        r
        for e in episodes
        if not e.data.get("success") and (r := episode_run(e, only_ending=SCORED))
    ]
    for runs, quorum, name in ((wins, 0.5, "episodes"), (partial, 0.0, "scored steps")):
        if runs:
            steps, slots = induce(runs, quorum)
            if steps:
                plans.append(Plan(tuple(steps), slots, name))
    avoid, scored = set(), set()
    for e in episodes:  # what ended a similar run in failure (and never scored), or lowered it
        run = episode_run(e)
        if run is None:
            continue
        obs = [str(o) for o in e.data.get("observations", [])]
        for k, text in enumerate(obs):
            shape = abstract(run.actions[k], run.reads[k], run.observations[k])[0]
            if text.endswith((FAILED, LOWERED)):
                avoid.add(shape)
            elif text.endswith(SCORED):
                scored.add(shape)
    return plans, avoid - scored


class Player:
    """Plays one game attempt; keeps, across attempts at the same game, which action came
    just before a failure (an agent's own short-term memory, not the graph)."""

    def __init__(self, world: TWXWorld, step_limit: int, seed: int) -> None:
        self.world = world
        self.step_limit = step_limit
        self.seed = seed
        self.tabu: set[str] = set()
        self.scored: list[str] = []  # actions the game scored in earlier attempts
        self.attempt = 0
        self.steps = 0  # every game step taken by this player, over all attempts

    def play(
        self,
        game_name: str,
        params: Mapping[str, int],
        seed: int,
        fold: str,
        plans: Sequence[Plan],
        avoid: set[str],
    ) -> StepResult:
        game = self.world.reset(game_name, params, seed, fold)
        if self.scored:  # the same game again: first redo what scored last time
            plans = [Plan(tuple(self.scored), {}, "earlier attempts"), *plans]
        rng = random.Random(f"{self.seed}:{seed}:{self.attempt}")
        self.attempt += 1
        actions: list[str] = []
        observations: list[str] = []
        docs: list[str] = []
        tried: set[str] = set()
        last = ""
        while not game.done and len(actions) < self.step_limit:
            # First look around, so what the room holds is in the run's observations.
            look = not actions and "look around" in game.valid
            action = (
                "look around" if look else self._choose(game, plans, avoid, tried, game.reads, rng)
            )
            if action is None:
                break
            tried.add(action)
            n_read = len(game.reads)
            turn = self.world.step(action)
            text = f"{turn.observation} {turn.feedback}".strip()
            actions.append(action)
            observations.append(text)
            docs.append(game.reads[-1] if len(game.reads) > n_read else "")
            last = action
            self.steps += 1
            if text.endswith(SCORED) and action not in self.scored:
                self.scored.append(action)
            elif text.endswith(LOWERED):
                self.tabu.add(action)
        if game.success:
            return StepResult(
                game.score, None, True, tuple(actions), tuple(observations), tuple(docs)
            )
        if observations and observations[-1].endswith(FAILED):
            self.tabu.add(last)
            verdict = f"The task failed after '{last}'."
        else:
            verdict = (
                f"The task was not completed in {len(actions)} steps (score {game.score:.2f})."
            )
        return StepResult(
            game.score, verdict, False, tuple(actions), tuple(observations), tuple(docs)
        )

    def _choose(
        self,
        game: Game,
        plans: Sequence[Plan],
        avoid: set[str],
        tried: set[str],
        reads: list[str],
        rng: random.Random,
    ) -> str | None:
        fresh = [a for a in game.valid if a not in tried and a not in self.tabu]
        for plan in plans:
            for step in plan.steps:
                for action in bind(step, plan.slots.get(step, {}), fresh, reads, game.observation):
                    return action
        ok = [
            a
            for a in fresh
            if abstract(a, reads, game.observation)[0] not in avoid
            and a.split()[0] not in ("examine", "inventory", "look")
        ]
        pool = ok or fresh
        return rng.choice(pool) if pool else None
