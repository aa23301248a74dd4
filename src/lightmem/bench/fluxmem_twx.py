"""``lightmem bench fluxmem --env twx``: FluxMem's stages on TextWorldExpress games.

Per game type and sample, each arm trains on games from the engine's train seed list and
is scored on games from its test seed list (held out):

- ``no_memory``: the explorer alone (``explorer``: ``plain`` by default, issue 17's
  random untried valid action, or the player's ``informed`` one; every arm explores the
  same way);
- ``stage1``: facts (what the game let the agent read) and episodes, no repairs;
- ``stage1_2``: training with Stage II retries (plain-text game feedback);
- ``stage1_2_3``: as I+II, then Stage III: slotted skills, refined by replaying them on
  the training games (eta = replay success), graduating when PEMS converges;
- ``stage1_2_3_mature``: a copy of the I+II+III memory as consolidated (before that arm's
  test retries), with graduated skills activated directly. Its ``llm_calls`` include the
  training's, which it shares with ``stage1_2_3``.

Every memory arm's player guesses where a thing memory has not met goes by meaning,
through the agent's own embedder (:mod:`lightmem.fluxmem.meaning`).

First-attempt success reads the memory without changing it; "with retries" then runs the
test games through ``run_task`` with Stage II (recording them, as a deployed agent would).
"""

from __future__ import annotations

import re
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

from lightmem.bench.twx_env import READ_VERBS, TWXWorld, world
from lightmem.bench.twx_llm import LLMPlayer, scored
from lightmem.bench.twx_policy import EXPLORERS, Plan, Player, plans_from
from lightmem.errors import InvalidInputError
from lightmem.fluxmem.agent import FluxMemAgent
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.meaning import Meaning
from lightmem.fluxmem.reasoner import Reasoner
from lightmem.fluxmem.serialize import serialize
from lightmem.fluxmem.slots import Outcomes
from lightmem.fluxmem.stage3 import SkillDraft
from lightmem.fluxmem.types import Node, StepResult
from lightmem.ledger import Ledger, calls
from lightmem.llm.base import LLMClient

__all__ = ["ARMS", "DEFAULT_EXPLORER", "EPISODES_SHOWN", "MATURE_SIMILARITY", "run"]

ARMS = ("no_memory", "stage1", "stage1_2", "stage1_2_3", "stage1_2_3_mature")
#: How every arm explores unless told: the issue's no-memory policy, so that the no-memory
#: arm is the baseline its targets are set against.
DEFAULT_EXPLORER = "plain"
MATURE_SIMILARITY = 0.8
#: Similar episodes Stage I shows (FluxMem's ``top_k_episodic``): the player learns from
#: them which actions harmed, helped or did nothing in like states, and where things went
#: (twc's places for things never met come from them), so it wants more than the default
#: three (when chosen, at ce145f8: twc first attempt 0.5 / 0.4 on samples 0-4 / 5-9 with 8,
#: 0.5 / 0.5 with 12, the same with 20).
EPISODES_SHOWN = 12


def run(
    games: Mapping[str, Mapping[str, int]],
    *,
    seeds: int = 5,
    first_seed: int = 0,
    train: int = 20,
    test: int = 20,
    rounds: int = 5,
    step_limit: int = 50,
    reasoner: Reasoner | None = None,
    episodes: int = EPISODES_SHOWN,
    policy: LLMClient | None = None,
    explorer: str | None = None,
) -> dict[str, Any]:
    """Every game type x sample x arm; medians over the samples. With ``policy`` a model
    chooses every action (:class:`~lightmem.bench.twx_llm.LLMPlayer`), else the
    programmatic player does, exploring by ``explorer`` in every arm (one of
    :data:`~lightmem.bench.twx_policy.EXPLORERS`; :data:`DEFAULT_EXPLORER` if None)."""
    if not games:
        raise InvalidInputError("games: name at least one game type")
    if policy is not None and explorer is not None:
        raise InvalidInputError("explorer: the model explores by itself (no --explorer with --llm)")
    explorer = explorer or DEFAULT_EXPLORER
    if explorer not in EXPLORERS:
        raise InvalidInputError(
            f"explorer: expected one of {', '.join(EXPLORERS)}, got {explorer!r}"
        )
    counts = (("seeds", seeds, 1), ("train", train, 1), ("test", test, 1))
    limits = (("step_limit", step_limit, 1), ("rounds", rounds, 0), ("episodes", episodes, 0))
    for field, n, least in (*counts, *limits):
        if n < least:
            raise InvalidInputError(f"{field}: must be at least {least}, got {n}")
    out: dict[str, Any] = {
        "env": "twx",
        "train": train,
        "test": test,
        "seeds": list(range(first_seed, first_seed + seeds)),
        "rounds": rounds,
        "step_limit": step_limit,
        "episodes_shown": episodes,
        "policy": "programmatic" if policy is None else f"llm:{policy.name}",
        "explorer": explorer if policy is None else None,
        "games": {},
    }
    started = time.perf_counter()
    with world(step_limit) as w:
        train_ids, test_ids = w.seeds("train"), w.seeds("test")
        for name, params in games.items():
            samples = []
            for s in range(first_seed, first_seed + seeds):
                tr = [train_ids[(s * train + i) % len(train_ids)] for i in range(train)]
                te = [test_ids[(s * test + i) % len(test_ids)] for i in range(test)]
                samples.append(
                    _sample(
                        w,
                        name,
                        params,
                        s,
                        tr,
                        te,
                        rounds,
                        step_limit,
                        reasoner,
                        episodes,
                        policy,
                        explorer,
                    )
                )
            out["games"][name] = {"params": dict(params), **_medians(samples), "samples": samples}
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def _medians(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    def med(key: str, arm: str) -> float | None:
        vals = [s[arm][key] for s in samples if s[arm][key] is not None]
        return round(statistics.median(vals), 4) if vals else None

    out: dict[str, Any] = {
        "median_held_out_success": {a: med("success", a) for a in ARMS},
        "median_held_out_success_with_retries": {a: med("success_with_retries", a) for a in ARMS},
        "median_steps_per_success": {a: med("steps_per_success", a) for a in ARMS},
        "llm_calls": {a: sum(s[a]["llm_calls"] for s in samples) for a in ARMS},
    }
    # The engine's reference solutions of the held-out games (mean length per sample): a
    # yardstick, not a lower bound (they include "look around"; coin's is a random search).
    out["median_gold_steps"] = round(statistics.median(s["gold_steps"] for s in samples), 2)
    full = out["median_steps_per_success"]["stage1_2_3"]
    mature = out["median_steps_per_success"]["stage1_2_3_mature"]
    out["mature_step_saving"] = round(1 - mature / full, 4) if full and mature else None
    curves = [c for s in samples for c in s["stage1_2_3"].get("pems_curves", {}).values()]
    out["pems"] = {
        "skills": len(curves),
        "moved": sum(1 for c in curves if len(c) > 1 and max(c) - min(c) > 1e-6),
        "graduated": sum(s["stage1_2_3"].get("graduated", 0) for s in samples),
        "refined": sum(s["stage1_2_3"].get("refined", 0) for s in samples),
        "replaying_below_1": sum(
            1 for s in samples for eta in s["stage1_2_3"].get("etas", {}).values() if eta < 1
        ),
        "curves_first_sample": samples[0]["stage1_2_3"].get("pems_curves", {}),
    }
    return out


def _sample(
    w: TWXWorld,
    name: str,
    params: Mapping[str, int],
    sample: int,
    train: list[int],
    test: list[int],
    rounds: int,
    step_limit: int,
    reasoner: Reasoner | None,
    episodes: int,
    policy: LLMClient | None,
    explorer: str,
) -> dict[str, Any]:
    res: dict[str, Any] = {"sample": sample}
    res["gold_steps"] = round(
        statistics.mean(w.gold_steps(name, params, s, "test") for s in test), 2
    )
    config = FluxMemConfig(top_k_episodic=episodes)
    # A fresh player per game: a player's short-term memory (what scored, what failed) is
    # of one game's attempts, and carried to the next game it would be memory by the back door.
    start = _calls(policy)
    if policy is None:
        firsts = [
            Player(w, step_limit, sample, explorer=explorer).play(name, params, s, "test", ())
            for s in test
        ]
    else:
        model = LLMPlayer(w, step_limit, policy)
        firsts = [model.play(name, params, s, "test", "") for s in test]
    res["no_memory"] = _score(firsts, firsts, _calls(policy) - start)
    with tempfile.TemporaryDirectory(prefix="lightmem-twx-") as tmp:
        for arm in ("stage1", "stage1_2", "stage1_2_3"):
            path = Path(tmp) / f"{arm}.db"
            with FluxMemAgent.open(path, reasoner=reasoner, config=config) as agent:
                start = _llm_calls(agent, policy)
                bench = _Bench(agent, w, name, params, step_limit, sample, policy, explorer)
                for s in train:
                    bench.task(s, "train", 0 if arm == "stage1" else rounds)
                extra: dict[str, Any] = {}
                if arm == "stage1_2_3":
                    extra = _consolidated(agent, bench)
                trained = _llm_calls(agent, policy) - start
            arms = [(arm, path, config)]
            if arm == "stage1_2_3":
                # The mature arm plays on its own copy of the consolidated graph: the I+II+III
                # arm's retries record the test games, which the twin must not have met.
                twin = Path(tmp) / "stage1_2_3_mature.db"
                _copy_db(path, twin)
                mature = replace(config, mature_similarity=MATURE_SIMILARITY)
                arms.append(("stage1_2_3_mature", twin, mature))
            for arm_name, db, cfg in arms:
                with FluxMemAgent.open(db, reasoner=reasoner, config=cfg) as a:
                    start = _llm_calls(a, policy)
                    tb = _Bench(a, w, name, params, step_limit, sample, policy, explorer)
                    first = [tb.first(s) for s in test]
                    retry = [tb.task(s, "test", 0 if arm == "stage1" else rounds) for s in test]
                    llm = trained + _llm_calls(a, policy) - start
                res[arm_name] = {**_score(first, retry, llm), **extra}
                # The median: the first context after opening the store also loads it.
                res[arm_name]["stage1_ms_per_task"] = round(statistics.median(tb.context_ms), 2)
    return res


def _consolidated(agent: FluxMemAgent, bench: _Bench) -> dict[str, Any]:
    """Stage III with replays on the training games, and what it left."""
    report = agent.consolidate(replay_fn=bench.replay)
    skills = agent.graph.nodes("procedural", agent.scope)
    return {
        "pems_curves": report.curves,
        "graduated": len(report.graduated),
        "refined": sum(1 for c in report.curves.values() if len(c) > 1 and c[0] != c[-1]),
        "skills": len(skills),
        # Each skill's replay success on its training games (its stored eta).
        "etas": {n.id: round(float(n.data.get("eta", 0.0)), 4) for n in skills},
    }


def _copy_db(src: Path, dst: Path) -> None:
    """A consistent copy of a closed store file (its saved search index is rebuilt)."""
    with closing(sqlite3.connect(src)) as a, closing(sqlite3.connect(dst)) as b:
        a.backup(b)


def _score(first: list[StepResult], retry: list[StepResult], llm: int) -> dict[str, Any]:
    wins = [r for r in first if r.success]
    return {
        "success": round(len(wins) / len(first), 4),
        "success_with_retries": round(sum(r.success for r in retry) / len(retry), 4),
        "steps_per_success": round(statistics.mean(len(r.actions) for r in wins), 2)
        if wins
        else None,
        "llm_calls": llm,
    }


class _Bench:
    """One agent playing one game type: tasks, first attempts and replays."""

    def __init__(
        self,
        agent: FluxMemAgent,
        w: TWXWorld,
        name: str,
        params: Mapping[str, int],
        step_limit: int,
        sample: int,
        policy: LLMClient | None = None,
        explorer: str = DEFAULT_EXPLORER,
    ) -> None:
        self.agent, self.w, self.name, self.params = agent, w, name, params
        self.step_limit, self.sample, self.explorer = step_limit, sample, explorer
        self.llm = None if policy is None else LLMPlayer(w, step_limit, policy)
        self.seed_of: dict[str, tuple[int, str]] = {}
        self.context_ms: list[float] = []  # per first attempt: what memory took to answer
        self.meaning = Meaning(agent.embedder)

    def _task_text(self, seed: int, fold: str) -> str:
        game = self.w.reset(self.name, self.params, seed, fold)
        text = f"{game.task} [{fold} game {seed}]"
        self.seed_of[text] = (seed, fold)
        return text

    def _player(self) -> Player:
        """A player guessing by meaning through the agent's own embedder, exploring as the
        no-memory arm does."""
        return Player(self.w, self.step_limit, self.sample, self.meaning, explorer=self.explorer)

    def _plans(self, context: str) -> tuple[list[Plan], Outcomes]:
        nodes: dict[str, Node] = self.agent.graph.get_nodes(_ids(context))
        return plans_from(context, nodes)

    def task(self, seed: int, fold: str, rounds: int) -> StepResult:
        """One game through ``run_task``: Stage II retries up to ``rounds``; what the
        agent read becomes facts."""
        text = self._task_text(seed, fold)
        player = self._player()
        last: list[StepResult] = []

        def execute(context: str) -> StepResult:
            if self.llm is None:
                plans, outcomes = self._plans(context)
                result = player.play(self.name, self.params, seed, fold, plans, outcomes)
                gained = player.scored
            else:
                result = self.llm.play(self.name, self.params, seed, fold, context)
                gained = scored(result)
            last.append(result)
            if not result.success and isinstance(result.feedback, str):
                # The game's verdict is something the agent read: a fact Stage II can link.
                scored_ = ", ".join(gained) or "nothing"
                note = f"{self.name} game {fold} {seed}: {result.feedback} It scored: {scored_}."
                self.agent.add_knowledge(note, source=f"twx:{self.name}:{fold}:{seed}")
            return result

        self.agent.run_task(text, execute, max_rounds=rounds)
        done = last[-1]
        reads = [
            o
            for a, o in zip(done.actions, done.observations, strict=True)
            if a.split()[0] in READ_VERBS
        ]
        if reads:
            self.agent.add_knowledge(reads, source=f"twx:{self.name}:{fold}:{seed}")
        return last[-1]

    def first(self, seed: int) -> StepResult:
        """A first attempt from memory alone (nothing recorded): the mature subgraph when
        one matches, else the Stage I context."""
        text = self._task_text(seed, "test")
        t0 = time.perf_counter()
        mature = self.agent.mature_subgraph(text)
        context = self.agent.context(text) if mature is None else serialize(mature)
        self.context_ms.append(1000 * (time.perf_counter() - t0))
        if self.llm is not None:
            return self.llm.play(self.name, self.params, seed, "test", context)
        plans, outcomes = self._plans(context)
        return self._player().play(self.name, self.params, seed, "test", plans, outcomes)

    def replay(self, skill: SkillDraft, task: str) -> StepResult:
        """Stage III's replay: play the training game of ``task`` following ``skill``."""
        seed, fold = self.seed_of.get(task, (-1, "train"))
        if seed < 0:
            return StepResult(None, "unknown task", False)
        if self.llm is not None:  # the model, shown the skill alone
            return self.llm.play(self.name, self.params, seed, fold, f"A skill: {skill}")
        plan = Plan(tuple(skill.steps), skill.slots, "replay")
        return self._player().play(self.name, self.params, seed, fold, [plan])


def _ids(context: str) -> list[str]:
    return re.findall(r'<(?:skill|episode) id="([0-9a-f]+)"', context)


def _llm_calls(agent: FluxMemAgent, policy: LLMClient | None = None) -> int:
    """Model calls so far in the ledgers of the agent's embedder, its reasoner's client and
    the policy (arms share the last two: callers take differences)."""
    clients = [getattr(agent.reasoner, "client", None), policy]
    ledgers = [agent.embedder.ledger]
    for c in clients:
        if isinstance(c, LLMClient) and all(c.ledger is not x for x in ledgers):
            ledgers.append(c.ledger)
    return sum(_ledger_calls(x) for x in ledgers)


def _calls(policy: LLMClient | None) -> int:
    return 0 if policy is None else _ledger_calls(policy.ledger)


def _ledger_calls(ledger: Ledger) -> int:
    return calls(ledger.totals(), "llm")
