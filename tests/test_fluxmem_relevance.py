"""What a run teaches: skills induced from the steps that mattered only, pick tables keyed
by what the game said the action did, slots instead of one recipe's words, a memory of
harmful actions that depends on the state, and the TextWorldExpress player's reading of
its own runs (which steps mattered). No game engine needed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lightmem.bench.twx_env import Game, Turn, TWXWorld
from lightmem.bench.twx_policy import Plan, Player, _out_of_view, mattered, plans_from
from lightmem.fluxmem import FluxMemAgent, FluxMemConfig, StepResult
from lightmem.fluxmem.slots import Outcomes, Run, bind, induce
from lightmem.fluxmem.types import Node
from lightmem.types import Scope

TASK = "You are hungry! Cook a meal. Check the cookbook for the recipe. Enjoy your meal!"
_TOOL = {"roast": "oven", "grill": "toaster", "fry": "stove"}


def _recipe(item: str, cut: str, cook: str) -> str:
    return f"Ingredients:\n  {item}\nDirections:\n  {cut} the {item}\n  {cook} the {item}\n"


def _game(item: str, cut: str, cook: str) -> tuple[list[str], list[str]]:
    """A winning run with the explorer's detours: the dishwasher opened and closed, a
    distractor taken (every run has them, so only knowing which steps mattered drops them)."""
    acts = [
        "read cookbook",
        "open dishwasher",
        "close dishwasher",
        "take lemon",
        f"take {item}",
        "take knife",
        f"{cut} {item}",
        f"cook {item} in {_TOOL[cook]}",
        "prepare meal",
        "eat meal",
    ]
    obs = [
        _recipe(item, cut, cook),
        "You open the dishwasher.",
        "You close the dishwasher.",
        "You take the lemon.",
        f"You take the {item}. Your score went up.",
        "You take the knife.",
        f"You {cut} the {item}. Your score went up.",
        f"You {cook} the {item} with the {_TOOL[cook]}. Your score went up.",
        "Adding the meal to your inventory. Your score went up.",
        "You eat the meal. The task is complete.",
    ]
    return acts, obs


GAMES = [("carrot", "slice", "roast"), ("salmon", "dice", "grill"), ("potato", "chop", "fry")]
MATTERED = (0, 4, 5, 6, 7, 8, 9)  # the reading, the scored steps and the knife they needed


def _run(acts: list[str], obs: list[str]) -> Run:
    reads = [[TASK, *obs[:1]] if k else [TASK] for k in range(len(acts))]
    return Run(acts, reads, ["\n".join([TASK, *obs[:k]]) for k in range(len(acts))], obs)


def _agent(path: Path, relevant: tuple[int, ...]) -> FluxMemAgent:
    agent = FluxMemAgent.open(path, config=FluxMemConfig(num_clusters=1))
    for item, cut, cook in GAMES:
        acts, obs = _game(item, cut, cook)
        reads = tuple(obs[0] if k == 0 else "" for k in range(len(acts)))
        result = StepResult(1, None, True, tuple(acts), tuple(obs), reads, relevant)

        def play(context: str, r: StepResult = result) -> StepResult:
            return r

        agent.run_task(f"{TASK} ({item})", play)
    return agent


def test_skills_are_induced_from_the_steps_that_mattered(tmp_path: Path) -> None:
    with _agent(tmp_path / "kept.db", MATTERED) as agent:
        agent.consolidate()
        (skill,) = agent.graph.nodes("procedural", agent.scope)
    assert "take knife" in skill.steps and "eat meal" in skill.steps
    assert not {"open dishwasher", "close dishwasher", "take lemon"} & set(skill.steps)
    with _agent(tmp_path / "all.db", ()) as agent:  # nothing said what mattered
        agent.consolidate()
        (noisy,) = agent.graph.nodes("procedural", agent.scope)
    assert {"open dishwasher", "take lemon"} <= set(noisy.steps)


def test_pick_tables_are_keyed_by_what_the_reply_says_was_done() -> None:
    steps, slots = induce([_run(*_game(*g)) for g in GAMES])
    cook = next(s for s in steps if s.startswith("cook "))
    (rule,) = [r for r in slots[cook].values() if r["fill"] == "pick"]
    table = rule["table"]
    # "You roast the carrot" names roast, not the slice the recipe also asks for.
    assert table == {"roast": {"oven": 1}, "grill": {"toaster": 1}, "fry": {"stove": 1}}
    new = [TASK, _recipe("tuna", "slice", "grill")]
    valid = [f"cook tuna in {t}" for t in _TOOL.values()]
    assert bind(cook, slots[cook], valid, new, "") == ["cook tuna in toaster"]


def test_one_run_gives_slots_not_its_recipe() -> None:
    acts, obs = _game("carrot", "slice", "roast")
    steps, slots = induce([_run(acts, obs)])
    assert "take <read1>" in steps and "take carrot" not in steps
    assert "eat meal" in steps  # the task text names the meal: a constant
    other = [TASK, _recipe("tuna", "dice", "fry")]
    assert bind("take <read1>", slots["take <read1>"], ["take tuna", "take lemon"], other, "") == [
        "take tuna"
    ]


def test_harmful_actions_depend_on_the_state() -> None:
    grill, fry = _recipe("carrot", "slice", "grill"), _recipe("carrot", "slice", "fry")
    burnt = Run(["cook carrot in stove"], [[TASK, grill]], [""], ["The task failed."])
    fried = Run(["cook carrot in stove"], [[TASK, fry]], [""], ["Your score went up."])
    memory = Outcomes.of([(burnt, [False]), (fried, [True])])
    other = _recipe("beet", "dice", "grill")
    assert memory.harmful("cook beet in stove", [TASK, other], "")  # grilled: not the stove
    assert not memory.harmful("cook beet in stove", [TASK, _recipe("beet", "dice", "fry")], "")
    assert not memory.harmful("cook beet in toaster", [TASK, other], "")


KITCHEN = "You see an oven, a stove and a toaster."


def test_a_key_that_both_helped_and_harmed_with_the_same_tool_tells_nothing() -> None:
    def cooked(cook: str, tool: str, ok: bool) -> tuple[Run, list[bool | None]]:
        reads = [TASK, _recipe("carrot", "slice", cook)]
        return Run([f"cook carrot in {tool}"], [reads], [KITCHEN]), [ok]

    # The tools are in view (a slot), the verbs read (keys).
    # Every recipe also said "slice": it came with the oven scoring (roast) and ending
    # the game (grill), so only the cooking verb tells what the oven does.
    memory = Outcomes.of(
        [
            cooked("roast", "oven", True),
            cooked("grill", "oven", False),
            cooked("roast", "toaster", False),
        ]
    )
    grill = [TASK, _recipe("beet", "slice", "grill")]
    assert memory.harmful("cook beet in oven", grill, KITCHEN)
    assert not memory.harmful("cook beet in toaster", grill, KITCHEN)  # grilling there: not known
    assert memory.harmful(
        "cook beet in toaster", [TASK, _recipe("beet", "slice", "roast")], KITCHEN
    )
    assert memory.promise("cook beet in oven", grill, KITCHEN) == 1  # roasting helped, not this


def test_failed_attempts_of_an_episode_are_remembered_as_harmful() -> None:
    acts, obs = _game("carrot", "slice", "grill")
    data = {
        "task": TASK,
        "success": True,
        "trajectory": acts,
        "observations": obs,
        "reads": [obs[0], *[""] * (len(acts) - 1)],
        "attempts": [{"feedback": "The task failed after 'eat carrot'."}, {"feedback": None}],
    }
    node = Node("e1", "episodic", TASK, Scope(), data)
    _, memory = plans_from('<episode id="e1">', {"e1": node})
    reads = [TASK, _recipe("beet", "chop", "grill")]
    assert memory.harmful("eat beet", reads, "")
    assert not memory.harmful("eat meal", reads, "")


def test_the_player_keeps_what_scored_and_what_enabled_it() -> None:
    acts = ["open fridge", "take carrot", "put carrot in bin", "take carrot", "cook carrot"]
    obs = ["You open it.", "Your score went up.", "Done.", "You take it.", "Your score went up."]
    held = {"put carrot in bin", "cook carrot"}
    opened = [{"take carrot"}, held, {"take carrot"}, held, set()]
    a, b, c = frozenset({"open fridge"}), frozenset({"take carrot"}), frozenset(held)
    states = [(a, 0.0), (b, 0.0), (c, 1.0), (b, 1.0), (c, 1.0), (frozenset(), 2.0)]
    # The fridge opened for the carrot that scored; the put and the second take went round
    # in a circle: the cooking is owed to the first take.
    assert mattered(acts, obs, [""] * 5, opened, states) == (0, 1, 4)


class _Shelf(TWXWorld):
    """A one-object game without the engine: taking the thing scores once; putting it
    down scores only where ``scoring_put`` says (a shirt in its place), else nothing."""

    def __init__(self, scoring_put: bool) -> None:  # no engine: nothing to start
        self.scoring_put = scoring_put
        self.game = Game("shelf", 0, "Tidy up.", "", [])

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.held, self.took = False, False
        self.game = Game(name, seed, "Tidy up.", "You see a thing.", ["take thing"], ["Tidy up."])
        return self.game

    def step(self, action: str) -> Turn:
        g = self.game
        up = (action == "take thing" and not self.took) or (
            action == "put thing in box" and self.scoring_put
        )
        self.took = self.took or action == "take thing"
        self.held = action == "take thing"
        g.score += 1.0 if up else 0.0
        g.valid = ["put thing in box"] if self.held else ["take thing"]
        return Turn("Done.", g.valid, g.score, False, False, "Your score went up." if up else "")


def test_the_player_retakes_what_it_scored_only_when_nothing_was_gained_by_putting_it_down() -> (
    None
):
    # Put down for nothing (the carrot on the counter): taken again, once.
    player = Player(_Shelf(scoring_put=False), 10, 0, explorer="informed")
    assert player.play("shelf", {}, 0, "train", ()).actions == (
        "take thing",
        "put thing in box",
        "take thing",
    )
    # Put in its place, which scored (the shirt in the wardrobe): left there.
    player = Player(_Shelf(scoring_put=True), 10, 0, explorer="informed")
    assert player.play("shelf", {}, 0, "train", ()).actions == ("take thing", "put thing in box")


class _Kitchen(TWXWorld):
    """A kitchen without the engine that keeps the knife in a closed drawer; the task text
    names the cookbook, which can be taken (a detour that helps nothing)."""

    def __init__(self) -> None:  # no engine: nothing to start
        self.game = Game("kitchen", 0, TASK, "", [])

    def _valid(self) -> list[str]:
        acts = [f"open {c}" for c in ("fridge", "cutlery drawer") if c not in self.opened]
        acts += [] if "cookbook" in self.held else ["take cookbook"]
        acts += [f"take {t}" for t in self.inside() if t not in self.held]
        if {"carrot", "knife"} <= self.held:
            acts.append("slice carrot")
        return acts

    def inside(self) -> list[str]:
        where = {"fridge": "carrot", "cutlery drawer": "knife"}
        return [where[c] for c in self.opened]

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.opened: list[str] = []
        self.held: set[str] = set()
        self.game = Game(name, seed, TASK, "You are in a kitchen.", [], [TASK])
        self.game.valid = self._valid()
        return self.game

    def step(self, action: str) -> Turn:
        g = self.game
        verb, _, thing = action.partition(" ")
        if verb == "open":
            self.opened.append(thing)
        elif verb == "take":
            self.held.add(thing)
        g.done = g.success = action == "slice carrot"
        g.valid = self._valid()
        return Turn("Done.", g.valid, 1.0 if g.done else 0.0, g.done, False, "")


def test_a_plan_wanting_a_thing_out_of_view_looks_inside_what_is_closed() -> None:
    # The plan's kitchens kept the knife in view; this one's drawer holds it. The player
    # opens the drawer, not the detour the task text names (taking the cookbook).
    plan = Plan(("open fridge", "take carrot", "take knife", "slice carrot"))
    for seed in range(5):
        acts = (
            Player(_Kitchen(), 10, seed, explorer="informed")
            .play("kitchen", {}, 0, "test", [plan])
            .actions
        )
        assert acts == (
            "open fridge",
            "take carrot",
            "open cutlery drawer",
            "take knife",
            "slice carrot",
        )


def test_only_the_plan_followed_most_says_a_thing_is_out_of_view() -> None:
    followed = Plan(("open fridge", "take carrot", "dice carrot"))
    other = Plan(("open fridge", "take salmon", "fry salmon"))  # another game's thing
    taken = ["open fridge", "take carrot"]
    assert not _out_of_view([followed, other], taken, ["dice carrot"])
    assert _out_of_view([other], taken, ["dice carrot"])  # followed most when alone
    assert not _out_of_view([other], [], ["take salmon"])  # not followed at all
    # followed as closely (the fridge open): whichever is listed first, the carrot is in view
    for plans in ([other, followed], [followed, other]):
        assert not _out_of_view(plans, ["open fridge"], ["take carrot"])


class _Closet(TWXWorld):
    """One thing and four places; only the box is its place. Anywhere else lowers the
    score and leaves the thing free to be taken again."""

    PLACES = ("bed", "chair", "sink", "box")

    def __init__(self) -> None:  # no engine: nothing to start
        self.game = Game("closet", 0, "Tidy up.", "", [])

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.held = False
        self.game = Game(name, seed, "Tidy up.", "You see a shirt.", ["take shirt"], ["Tidy up."])
        return self.game

    def step(self, action: str) -> Turn:
        g = self.game
        feedback = ""
        if action == "take shirt":
            self.held, feedback = True, "Your score went up."
        elif action.startswith("put"):
            self.held = False
            g.done = g.success = action == "put shirt in box"
            feedback = "The task is complete." if g.done else "Your score went down."
        g.valid = [f"put shirt in {p}" for p in self.PLACES] if self.held else ["take shirt"]
        return Turn("Done.", g.valid, 1.0 if g.done else 0.0, g.done, False, feedback)


def test_a_thing_put_in_a_wrong_place_is_taken_back_until_its_place_is_found() -> None:
    for seed in range(10):
        result = Player(_Closet(), 20, seed, explorer="informed").play("closet", {}, 0, "test", ())
        assert result.success, result.actions
        wrong = [a for a in result.actions if a.startswith("put") and not a.endswith("box")]
        assert len(set(wrong)) == len(wrong)  # no wrong place tried twice
        assert result.actions.count("take shirt") == len(wrong) + 1


class _Corridor(TWXWorld):
    """Four rooms in a row, the coin in the last; the agent starts in the second."""

    def __init__(self) -> None:  # no engine: nothing to start
        self.game = Game("corridor", 0, "Find the coin.", "", [])

    def _valid(self) -> list[str]:
        acts = ["look around"]
        acts += ["move west"] if self.room > 0 else []
        acts += ["move east"] if self.room < 3 else ["take coin"]
        return acts

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.room = 1
        self.game = Game(name, seed, "Find the coin.", "", [], ["Find the coin."])
        self.game.valid = self._valid()
        return self.game

    def step(self, action: str) -> Turn:
        g = self.game
        self.room += {"move east": 1, "move west": -1}.get(action, 0)
        g.done = g.success = action == "take coin"
        g.valid = self._valid()
        text = f"This is room {self.room}. Exits lead on."
        return Turn(text, g.valid, 1.0 if g.done else 0.0, g.done, False, "")


def test_the_explorer_walks_on_when_nothing_here_is_untried() -> None:
    for seed in range(10):
        result = Player(_Corridor(), 40, seed, explorer="informed").play(
            "corridor", {}, 0, "test", ()
        )
        assert result.success, result.actions


class _Doorway(TWXWorld):
    """Two rooms and a door between them that the engine's way lists as always valid: "move
    east" is refused while it is closed, and opening it changes no valid action. The coin
    is in the second room. ``locked``: the door never opens."""

    def __init__(self, locked: bool = False) -> None:  # no engine: nothing to start
        self.locked = locked
        self.game = Game("doorway", 0, "Find the coin.", "", [])

    def _valid(self) -> list[str]:
        if self.room == 0:
            return ["look around", "move east", "open door to east"]
        return ["look around", "move west", "take coin"]

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.room, self.open = 0, False
        self.game = Game(name, seed, "Find the coin.", "", [], ["Find the coin."])
        self.game.valid = self._valid()
        return self.game

    def step(self, action: str) -> Turn:
        g = self.game
        text = f"You are in room {self.room}. There is a door."
        if action == "open door to east":
            self.open = not self.locked
            text = "You open the door." if self.open else "The door is locked."
        elif action == "move east":
            if self.open:
                self.room = 1
                text = "You are in room 1. There is a coin."
            else:
                text = "You can't move there, the door is closed."
        elif action == "move west":
            self.room = 0
        g.done = g.success = action == "take coin"
        g.valid = self._valid()
        return Turn(text, g.valid, 1.0 if g.done else 0.0, g.done, False, "")


def test_a_move_refused_at_a_closed_door_is_tried_again_once_the_door_is_opened() -> None:
    # Memory says to move east first: the door is still closed, so the move is refused;
    # opening the door (which changes no valid action) makes the move worth a new try.
    plan = Plan(("move east", "take coin"), {}, "memory")
    for seed in range(5):
        result = Player(_Doorway(), 10, seed, explorer="informed").play(
            "doorway", {}, 0, "test", [plan]
        )
        assert result.success, result.actions
        assert result.actions[:4] == ("look around", "move east", "open door to east", "move east")


def test_a_refused_move_at_a_locked_door_is_not_tried_for_ever() -> None:
    plan = Plan(("move east", "take coin"), {}, "memory")
    result = Player(_Doorway(locked=True), 30, 0, explorer="informed").play(
        "doorway", {}, 0, "test", [plan]
    )
    assert not result.success
    assert result.actions.count("move east") == 2 and result.actions.count("open door to east") <= 2
