"""The LLM policy of ``bench fluxmem --env twx --llm``: at each step the model reads the
task, the memory FluxMem gave (the Stage I context, a mature skill's subgraph, or a skill
being replayed), the latest steps and the valid actions, and names one by its number.

Every call goes through the client's ledger (op ``twx.act``). The answer is constrained to
the numbers of the valid actions (a bounded schema); a request too long for the model's
context is fitted by cutting the memory, then the steps shown, never the valid actions (a
context too small for the task and those is a :class:`~lightmem.errors.ConfigError`). A step
whose every answer was unusable is spent without acting: the game goes on, the step counts
against the limit, and the ledger counts it (``twx.act.unusable``). After
``give_up_after`` such steps in a row the attempt ends (a model or endpoint that answers
nothing usable would otherwise be asked at every step left), saying so in its verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lightmem.bench.twx_env import TWXWorld
from lightmem.bench.twx_policy import FAILED, SCORED, mattered
from lightmem.errors import ConfigError
from lightmem.fluxmem.types import StepResult
from lightmem.llm.base import ChatMessage, InvalidReply, LLMClient, UnusableOutputError
from lightmem.llm.packing import cut_reported, report_cut
from lightmem.llm.schema import OutputSchema, bounded
from lightmem.sanitize import DATA_RULE, fence
from lightmem.validate import whole_number

__all__ = ["LLMPlayer", "action_schema", "build", "parse_action", "scored"]

VERSION = "twx_act/1"

SYSTEM = f"""You play a text game to complete its task. {DATA_RULE}
Input: {{"task": ..., "memory": ..., "steps": [{{"action": ..., "reply": ...}}, ...],
"valid": ["0: <action>", ...]}}. "memory" is what your memory recalls of similar games
(facts, past runs, skills); "steps" are your latest actions in this game and what the game
replied. Choose the next action from "valid".
Answer with only a JSON object: {{"action": <the number of one valid action>}}"""

#: Latest steps shown to the model (older ones are in its memory's episodes, not here).
STEPS_SHOWN = 12
#: Unusable steps in a row after which an attempt ends.
GIVE_UP_AFTER = 3


class LLMPlayer:
    """Plays one game attempt with a model choosing every action."""

    def __init__(
        self,
        world: TWXWorld,
        step_limit: int,
        client: LLMClient,
        steps_shown: int = STEPS_SHOWN,
        give_up_after: int = GIVE_UP_AFTER,
    ) -> None:
        for field, n in (("steps_shown", steps_shown), ("give_up_after", give_up_after)):
            whole_number(field, n, 1, error=ConfigError)
        self.world = world
        self.step_limit = step_limit
        self.client = client
        self.steps_shown = steps_shown
        self.give_up_after = give_up_after

    def play(
        self, game_name: str, params: Mapping[str, int], seed: int, fold: str, memory: str
    ) -> StepResult:
        """One attempt at the game, ``memory`` shown at every step ("" for none)."""
        game = self.world.reset(game_name, params, seed, fold)
        actions: list[str] = []
        observations: list[str] = []
        docs: list[str] = []
        opened: list[set[str]] = []
        states: list[tuple[frozenset[str], float]] = [(frozenset(game.valid), game.score)]
        spent = 0  # steps whose every answer was unusable: lost turns, not actions
        in_a_row = 0  # of those, the latest in a row
        while (
            not game.done
            and len(actions) + spent < self.step_limit
            and game.valid
            and in_a_row < self.give_up_after
        ):
            steps = [{"action": a, "reply": o} for a, o in zip(actions, observations, strict=True)]
            valid = list(game.valid)
            try:
                choice = self._choose(game.task, memory, steps[-self.steps_shown :], valid)
            except UnusableOutputError:
                spent += 1
                in_a_row += 1
                continue
            in_a_row = 0
            action = valid[choice]
            n_read, before = len(game.reads), set(game.valid)
            turn = self.world.step(action)
            actions.append(action)
            observations.append(turn.reply)
            docs.append(game.reads[-1] if len(game.reads) > n_read else "")
            opened.append(set(turn.valid) - before)
            states.append((frozenset(turn.valid), turn.score))
        relevant = mattered(actions, observations, docs, opened, states)
        result = (tuple(actions), tuple(observations), tuple(docs), relevant)
        if game.success:
            return StepResult(game.score, None, True, *result)
        if observations and observations[-1].endswith(FAILED):
            verdict = f"The task failed after '{actions[-1]}'."
        elif in_a_row == self.give_up_after:
            verdict = (
                f"The attempt ended after {len(actions) + spent} steps: the model gave no "
                f"usable answer for {in_a_row} steps in a row (score {game.score:.2f})."
            )
        else:
            taken = len(actions) + spent
            verdict = f"The task was not completed in {taken} steps (score {game.score:.2f})."
        return StepResult(game.score, verdict, False, *result)

    def _choose(self, task: str, memory: str, steps: list[dict[str, str]], valid: list[str]) -> int:
        output = action_schema(len(valid))
        messages = self._fitted(task, memory, steps, valid, output)

        def parse(obj: Any) -> int:
            return parse_action(obj, len(valid))

        return self.client.complete_json(messages, parse, op="twx.act", output=output)

    def _fitted(
        self,
        task: str,
        memory: str,
        steps: list[dict[str, str]],
        valid: list[str],
        output: OutputSchema,
    ) -> list[ChatMessage]:
        """The prompt, with the memory cut (then the oldest steps left out) until it fits;
        both are counted as ``("llm", "twx.act.cut")``."""

        def fits(shown_memory: str, shown_steps: list[dict[str, str]]) -> bool:
            return self.client.fits(build(task, shown_memory, shown_steps, valid), output)

        if not fits("", []):
            # Cutting the valid actions would hide moves from the model (or break the data).
            raise ConfigError(
                f"context_tokens: {self.client.context_tokens} is too small for the game's "
                f"task, its {len(valid)} valid actions and an answer of up to "
                f"{self.client.answer_tokens(output)} tokens"
            )
        memory = cut_reported(self.client, "twx.act", [memory], lambda t: fits(t[0], steps))[0]
        dropped = next(n for n in range(len(steps) + 1) if fits(memory, steps[n:]))
        report_cut(self.client, "twx.act", dropped)
        return build(task, memory, steps[dropped:], valid)


def build(
    task: str, memory: str, steps: Sequence[Mapping[str, str]], valid: Sequence[str]
) -> list[ChatMessage]:
    data = {
        "task": task,
        "memory": memory,
        "steps": [dict(s) for s in steps],
        "valid": [f"{i}: {a}" for i, a in enumerate(valid)],
    }
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": fence(data)}]


def action_schema(n: int) -> OutputSchema:
    """The answer: one of the ``n`` valid actions' numbers."""
    schema = {
        "type": "object",
        "properties": {"action": {"enum": list(range(n))}},
        "required": ["action"],
        "additionalProperties": False,
    }
    return bounded("twx_action", schema)


def parse_action(obj: Any, n: int) -> int:
    action = obj.get("action") if isinstance(obj, dict) else None
    if isinstance(action, bool) or not isinstance(action, int) or not 0 <= action < n:
        raise InvalidReply(f'expected "action", the number of a valid action (0 to {n - 1})')
    return action


def scored(result: StepResult) -> list[str]:
    """The actions of an attempt that the game scored (for the verdict the agent reads)."""
    pairs = zip(result.actions, result.observations, strict=True)
    return [a for a, o in pairs if o.endswith(SCORED)]
