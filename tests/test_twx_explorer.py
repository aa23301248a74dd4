"""The TextWorldExpress player's explorers (``lightmem bench fluxmem --explorer``): the
``plain`` one is issue 17's no-memory policy (a random valid action not yet taken here), the
``informed`` one the project's; the bench explores the chosen way in every arm. No game
engine needed: the games are small fakes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from inprocess_cli import run
from lightmem.bench import fluxmem_twx, twx_policy
from lightmem.bench.twx_env import Game, Turn, TWXWorld
from lightmem.bench.twx_policy import EXPLORERS, PASSIVE, Moment, PlainExplorer, Plan, Player
from lightmem.errors import InvalidInputError
from lightmem.fluxmem.slots import Outcomes, Run
from lightmem.testing import ScriptedLLM

TASK = "Find what the note names and take it."
ROOM = "You are in the study. There is a note, a key, a pen and a cup."


class _Study(TWXWorld):
    """One room: the note names the key; taking the key completes the task (unless
    ``winnable`` is false); every other action changes nothing."""

    ACTIVE = ("move north", "open drawer", "read note", "take cup", "take key", "take pen")
    IDLE = ("examine note", "inventory", "look around")

    def __init__(self, winnable: bool = True) -> None:  # no engine: nothing to start
        self.winnable = winnable
        self.game = Game("study", 0, TASK, ROOM, [])

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.game = Game(name, seed, TASK, ROOM, sorted([*self.ACTIVE, *self.IDLE]), [TASK])
        return self.game

    def step(self, action: str) -> Turn:
        g, feedback = self.game, ""
        if action == "read note":
            obs = "The note says: take the key."
            g.reads.append(obs)
        elif action == "look around":
            obs = ROOM
        elif action == "take key" and self.winnable:
            g.done = g.success = True
            g.score, obs, feedback = 1.0, "You take the key.", "The task is complete."
        else:
            obs = "Nothing happens."
        g.observation = obs
        return Turn(obs, g.valid, g.score, g.success, False, feedback)

    def seeds(self, fold: str) -> list[int]:
        return list(range(100))

    def gold_steps(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> int:
        return 3

    def close(self) -> None:
        pass


class _Corridor(TWXWorld):
    """Three rooms west to east, the coin in the last; "move east" is needed twice."""

    def __init__(self) -> None:  # no engine: nothing to start
        self.at = 0
        self.game = Game("corridor", 0, "Take the coin.", "", [])

    def _room(self) -> str:
        return f"You are in room {self.at}. There are exits."

    def _valid(self) -> list[str]:
        out = ["look around", *(["move east"] if self.at < 2 else [])]
        return out + (["move west"] if self.at else []) + (["take coin"] if self.at == 2 else [])

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.at = 0
        self.game = Game(name, seed, "Take the coin.", self._room(), self._valid(), [])
        return self.game

    def step(self, action: str) -> Turn:
        g, feedback = self.game, ""
        if action == "take coin":
            g.done = g.success = True
            g.score, obs, feedback = 1.0, "You take the coin.", "The task is complete."
        else:
            self.at += {"move east": 1, "move west": -1}.get(action, 0)
            obs = self._room()
        g.observation, g.valid = obs, self._valid()
        return Turn(obs, g.valid, g.score, g.success, False, feedback)


def test_the_plain_explorer_takes_an_untried_valid_action_at_random() -> None:
    firsts: Counter[str] = Counter()
    for seed in range(60):
        acts = Player(_Study(), 30, seed, explorer="plain").play("study", {}, 0, "test", ()).actions
        assert acts[0] == "look around"  # every explorer looks first (what the room holds)
        assert acts[-1] == "take key"  # the game ends there, whenever it is reached
        firsts[acts[1]] += 1
        assert not any(a.split()[0] in PASSIVE for a in acts[1:])  # nothing idle at random
        assert len(set(acts)) == len(acts)  # nothing twice while something is untried
    # No reading first, no taking what the note names: any action may come first.
    assert set(firsts) == set(_Study.ACTIVE)
    # The informed explorer reads the note, then takes the key it names, every time.
    for seed in range(5):
        acts = (
            Player(_Study(), 30, seed, explorer="informed").play("study", {}, 0, "test", ()).actions
        )
        assert acts == ("look around", "read note", "take key")


def test_the_plain_explorer_plays_on_to_the_step_limit_once_all_is_tried() -> None:
    # Nothing wins: once every action was taken it takes any of them again rather than
    # stop; the informed explorer stops (no move from here it knows of).
    plain = Player(_Study(winnable=False), 20, 0, explorer="plain")
    acts = plain.play("study", {}, 0, "test", ()).actions
    assert len(acts) == 20 and set(acts[1:7]) == set(_Study.ACTIVE)
    assert not any(a.split()[0] in PASSIVE for a in acts[1:])
    informed = Player(_Study(winnable=False), 20, 0, explorer="informed").play(
        "study", {}, 0, "test", ()
    )
    assert len(informed.actions) < 20


def test_the_plain_explorer_tries_an_action_again_in_another_room() -> None:
    # "move east" from the next room is untried there (taken in this attempt, but from the
    # first room): some walks go straight to the coin.
    walks = [
        Player(_Corridor(), 30, s, explorer="plain").play("c", {}, 0, "t", ()) for s in range(20)
    ]
    assert all(w.success for w in walks)
    assert any(w.actions[:3] == ("look around", "move east", "move east") for w in walks)


def test_memory_s_plan_comes_before_the_plain_explorer() -> None:
    # A plan whose step applies is followed first, whatever the explorer.
    plan = Plan(("take pen",))
    for seed in range(5):
        acts = Player(_Study(), 30, seed, explorer="plain").play("s", {}, 0, "t", [plan]).actions
        assert acts[:2] == ("look around", "take pen")


def test_an_unknown_explorer_is_refused_naming_the_choices() -> None:
    with pytest.raises(InvalidInputError, match=r"^explorer: expected one of informed, plain"):
        Player(_Study(), 10, 0, explorer="greedy")
    with pytest.raises(InvalidInputError, match=r"^explorer: "):
        fluxmem_twx.run({"coin": {}}, explorer="greedy")
    with pytest.raises(InvalidInputError, match=r"^explorer: the model explores by itself"):
        fluxmem_twx.run({"coin": {}}, explorer="plain", policy=ScriptedLLM())  # type: ignore[arg-type]
    assert run("bench", "fluxmem", "--env", "twx", "--explorer", "greedy").returncode == 2


def test_every_arm_explores_the_plain_way_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--explorer plain``: the no-memory arm and every memory arm (training, replays,
    first attempts, retries) explore the plain way; the JSON says which explorer it was."""
    played: list[bool] = []  # per choice: were memory's plans given

    class Spy(PlainExplorer):
        def choose(self, now: Moment) -> str | None:
            played.append(bool(now.plans))
            return super().choose(now)

    def informed(player: Player, game: Game) -> twx_policy.Explorer:
        raise AssertionError("an arm explored the informed way")

    @contextmanager
    def study(step_limit: int = 50) -> Iterator[TWXWorld]:
        yield _Study()

    monkeypatch.setitem(EXPLORERS, "plain", Spy)
    monkeypatch.setitem(EXPLORERS, "informed", informed)
    monkeypatch.setattr(fluxmem_twx, "world", study)
    out = tmp_path / "twx.json"
    proc = run(
        *("bench", "fluxmem", "--env", "twx", "--explorer", "plain", "--games", "coin"),
        *("--seeds", "1", "--train", "3", "--test", "2", "--rounds", "1", "--out", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["explorer"] == "plain"
    coin = result["games"]["coin"]
    assert set(coin["median_held_out_success"]) == set(fluxmem_twx.ARMS)
    # The no-memory arm explored without plans, the memory arms with them.
    assert False in played and True in played
    # Memory arms follow their plans first: "take key" scored in training, so they win.
    sample = coin["samples"][0]
    assert all(sample[arm]["success"] == 1.0 for arm in fluxmem_twx.ARMS[1:])


def test_the_command_offers_every_explorer_and_defaults_to_the_issue_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(EXPLORERS) == {"informed", "plain"}
    text = run("bench", "fluxmem", "--help").stdout
    assert "--explorer {informed,plain}" in text and "default plain" in text
    with pytest.raises(TypeError):  # a player is always told how to explore
        Player(_Study(), 10, 0)  # type: ignore[call-arg]

    @contextmanager
    def study(step_limit: int = 50) -> Iterator[TWXWorld]:
        yield _Study()

    monkeypatch.setattr(fluxmem_twx, "world", study)
    out = tmp_path / "twx.json"
    args = ("--seeds", "1", "--train", "2", "--test", "1", "--rounds", "1", "--out", str(out))
    proc = run("bench", "fluxmem", "--env", "twx", "--games", "coin", *args)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["explorer"] == fluxmem_twx.DEFAULT_EXPLORER == "plain"


class _Tidy(_Study):
    """One room and a cup that goes in the sink: taking the cup scores, putting it
    anywhere else lowers the score and leaves it there to be taken back (as in twc)."""

    PLACES = ("box", "shelf", "sink", "stool")

    def __init__(self) -> None:
        super().__init__()
        self.cup = "floor"

    def _valid(self) -> list[str]:
        held = self.cup == "held"
        take = [] if held else ["take cup"]
        puts = [f"put cup in {p}" for p in self.PLACES] if held else []
        return sorted(["look around", "move north", "open drawer", *take, *puts])

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.cup = "floor"
        room = "You are in the kitchen. There is a cup, a box, a shelf, a sink and a stool."
        self.game = Game(name, seed, "Put the cup away.", room, self._valid(), [TASK])
        return self.game

    def step(self, action: str) -> Turn:
        g, obs, feedback = self.game, "Nothing happens.", ""
        if action == "take cup":
            self.cup, obs, g.score = "held", "You take the cup.", g.score + 1
            feedback = "Your score went up."
        elif action.startswith("put cup in "):
            self.cup = action.removeprefix("put cup in ")
            obs = f"You put the cup in the {self.cup}."
            if self.cup == "sink":
                g.done = g.success = True
                feedback = "The task is complete."
            else:
                g.score, feedback = g.score - 1, "Your score went down."
        g.observation, g.valid = obs, self._valid()
        return Turn(obs, g.valid, g.score, g.success, False, feedback)


def _after_lowering(actions: tuple[str, ...], observations: tuple[str, ...]) -> list[str]:
    return [
        actions[k + 1] for k, o in enumerate(observations[:-1]) if o.endswith(twx_policy.LOWERED)
    ]


def test_with_the_plain_explorer_a_plan_takes_back_what_a_wrong_place_was_given() -> None:
    # A put that lowered the score gave the cup back: memory's plan takes it again and
    # binds its put anew (another place), though "take cup" was taken in this room.
    plan = Plan(("take cup", "put cup in <seen1>"))
    for seed in range(20):
        r = Player(_Tidy(), 30, seed, explorer="plain").play("t", {}, 0, "t", [plan])
        assert r.success
        assert set(_after_lowering(r.actions, r.observations)) <= {"take cup"}
        puts = [a for a in r.actions if a.startswith("put")]
        assert len(puts) == len(set(puts))  # each place once
    # Without memory the plain explorer does no such thing: what else is untried here
    # comes first as often as not.
    nexts: list[str] = []
    for seed in range(20):
        r = Player(_Tidy(), 30, seed, explorer="plain").play("t", {}, 0, "t", ())
        nexts += _after_lowering(r.actions, r.observations)
    assert set(nexts) - {"take cup"}


def test_with_the_plain_explorer_memory_orders_the_untried_actions() -> None:
    # Similar runs: taking the key helped where the room held one; opening the drawer was
    # done three times to no effect. The plain explorer, given that, takes the key first.
    room = [[TASK]]
    helped = Run(["take key"], room, [ROOM])
    idle = Run(["open drawer"] * 3, room * 3, [ROOM] * 3)
    outcomes = Outcomes.of([(helped, [True]), (idle, [None, None, None])])
    for seed in range(10):
        player = Player(_Study(), 30, seed, explorer="plain")
        assert player.play("s", {}, 0, "t", (), outcomes).actions == ("look around", "take key")
    # Without memory the first action after looking is any of them (see above); with it,
    # what was idle comes after everything else untried.
    never = Player(_Study(winnable=False), 30, 0, explorer="plain")
    acts = never.play("s", {}, 0, "t", (), outcomes).actions
    active = [a for a in acts[1:] if a.split()[0] not in PASSIVE]
    assert active[: len(_Study.ACTIVE)][-1] == "open drawer"
