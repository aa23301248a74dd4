"""TextWorldExpress as a FluxMem environment (the optional ``lightmem[bench-twx]`` extra).

The agent sees only what the game shows a player: the task text, each observation, the
valid actions, and the game's own verdicts (score changes, ``tasksuccess``,
``taskfailure``), turned into plain text. Nothing here reads hidden game state.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lightmem.errors import ConfigError, InvalidInputError

__all__ = [
    "EASY",
    "GAMES",
    "READ_VERBS",
    "Game",
    "TWXWorld",
    "Turn",
    "params_text",
    "parse_games",
    "world",
]

#: The easy settings the benchmark defaults to (issue 17), per game type.
EASY: dict[str, dict[str, int]] = {
    "cookingworld": {
        "numLocations": 1,
        "numIngredients": 2,
        "numDistractorItems": 3,
        "includeDoors": 0,
        "limitInventorySize": 0,
    },
    "twc": {"numLocations": 1, "numItemsToPutAway": 2, "includeDoors": 0},
    "coin": {"numLocations": 4, "numDistractorItems": 0, "includeDoors": 0},
    "mapreader": {"numLocations": 5, "maxDistanceApart": 2, "includeDoors": 0},
}
GAMES = (
    "cookingworld",
    "twc",
    "coin",
    "mapreader",
    "arithmetic",
    "sorting",
    "simonsays",
    "peckingorder",
)
#: Actions whose reply is something the game lets the agent read and keep as a fact.
READ_VERBS = ("read", "task")


def parse_games(games: str, overrides: Sequence[str] = ()) -> dict[str, dict[str, int]]:
    """``("cookingworld,twc", ["twc:numItemsToPutAway=3"])`` -> per-game parameters: the
    easy defaults of each named game, overridden by ``game:key=value`` items."""
    if not isinstance(games, str) or not games.strip():
        raise InvalidInputError("--games: expected game names, e.g. 'cookingworld,twc'")
    out: dict[str, dict[str, int]] = {}
    for raw in games.split(","):
        name = raw.strip()
        if name not in GAMES:
            raise InvalidInputError(f"--games: unknown game {name!r} (one of {', '.join(GAMES)})")
        out[name] = dict(EASY.get(name, {}))
    for item in overrides:
        name, _, kv = item.partition(":")
        key, eq, value = kv.partition("=")
        if name not in out:
            raise InvalidInputError(f"--param: {item!r}: game {name!r} is not in --games")
        if not eq or not key.strip() or not value.strip().lstrip("-").isdigit():
            raise InvalidInputError(f"--param: expected game:key=integer, got {item!r}")
        out[name][key.strip()] = int(value)
    return out


def params_text(params: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items())


@dataclass
class Turn:
    """What the player sees after one action."""

    observation: str
    valid: list[str]
    score: float
    success: bool
    failure: bool
    feedback: str  # the plain-text verdict: score change, unknown action, failure

    @property
    def reply(self) -> str:
        """What the player reads back: the observation, then the game's verdict."""
        return f"{self.observation} {self.feedback}".strip()


@dataclass
class Game:
    """One game in progress: the task text, what the agent has read, and its turns."""

    name: str
    seed: int
    task: str
    observation: str
    valid: list[str]
    reads: list[str] = field(default_factory=list)
    score: float = 0.0
    done: bool = False
    success: bool = False


class TWXWorld:
    """One Java engine shared by every game of a run (it starts in well under a second)."""

    def __init__(self, step_limit: int = 50) -> None:
        if shutil.which("java") is None:
            raise ConfigError("bench fluxmem --env twx: needs a Java runtime (openjdk-17-jre)")
        try:
            from textworld_express import TextWorldExpressEnv  # type: ignore[import-untyped, import-not-found, unused-ignore]
        except ImportError as exc:
            raise ConfigError(
                "bench fluxmem --env twx: needs the engine: pip install 'lightmem[bench-twx]'"
            ) from exc
        self.step_limit = step_limit
        self._env: Any = TextWorldExpressEnv(envStepLimit=step_limit + 10)
        self._loaded: tuple[str, str] | None = None
        self._game: Game | None = None

    def close(self) -> None:
        self._env.close()

    def seeds(self, fold: str) -> list[int]:
        get = {"train": self._env.getValidSeedsTrain, "test": self._env.getValidSeedsTest}
        return [int(s) for s in get[fold]()]

    def _load(self, name: str, params: Mapping[str, int]) -> None:
        key = (name, params_text(params))
        if self._loaded != key:
            self._env.load(name, key[1])
            self._loaded = key

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self._load(name, params)
        obs, info = self._env.reset(seed=seed, gameFold=fold, generateGoldPath=False)
        task = str(info["taskDescription"])
        self._game = Game(name, seed, task, str(obs), sorted(info["validActions"]), [task])
        return self._game

    def gold_steps(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> int:
        """The length of the engine's reference solution of a game: a yardstick for the
        report only (the player never sees it); not a lower bound, and for some games
        (coin) a random search whose length varies between calls."""
        self._load(name, params)
        self._env.reset(seed=seed, gameFold=fold, generateGoldPath=True)
        self._game = None
        return len(self._env.getGoldActionSequence())

    def step(self, action: str) -> Turn:
        game = self._game
        if game is None or game.done:
            raise InvalidInputError("game: no game in progress")
        raw, _, _, info = self._env.step(action)
        obs = " ".join(str(raw).split())
        score = float(info["score"])
        success, failure = bool(info["tasksuccess"]), bool(info["taskfailure"])
        if failure:
            verdict = "The task failed."
        elif success:
            verdict = "The task is complete."
        elif score > game.score:
            verdict = "Your score went up."
        elif score < game.score:
            verdict = "Your score went down."
        elif obs.startswith("Unknown action"):
            verdict = "That action was not understood."
        else:
            verdict = ""
        if action.split()[0] in READ_VERBS:
            game.reads.append(str(raw))  # kept with its line breaks: lines matter
        game.score, game.observation = score, obs
        game.valid = sorted(info["validActions"])
        game.done = success or failure
        game.success = success
        return Turn(obs, game.valid, score, success, failure, verdict)


@contextmanager
def world(step_limit: int = 50) -> Iterator[TWXWorld]:
    w = TWXWorld(step_limit)
    try:
        yield w
    finally:
        w.close()
