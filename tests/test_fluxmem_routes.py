"""Routes and slots that reach past what was seen: a move is a slot bound to the exit that
leads, on the map read in this game, toward the place the task names (never another
game's exits); the explorer takes a move again from another room; plan steps that say
which action come before those that take anything in view; a pick for a key never seen
takes a value no known key claimed, or the value of the most alike keys; Stage III drops
a step that only costs a turn. No game engine needed."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from lightmem.bench.twx_env import Game, Turn, TWXWorld
from lightmem.bench.twx_policy import Plan, Player
from lightmem.fluxmem.slots import Run, bind, induce
from lightmem.fluxmem.stage3 import SkillDraft, _drop_unneeded
from lightmem.fluxmem.types import StepResult

#: A corridor of three rooms: (room names west to east, the word for "onward").
Corridor = tuple[tuple[str, str, str], str, str]
EAST: Corridor = (("hall", "study", "attic"), "east", "west")
NORTH: Corridor = (("porch", "kitchen", "cellar"), "north", "south")
SOUTH: Corridor = (("garden", "shed", "barn"), "south", "north")


class _Corridor(TWXWorld):
    """Three rooms in a row; the coin in the last, the box in the first (where the agent
    starts). Taking the coin scores; putting it in the box wins."""

    def __init__(self, corridor: Corridor, one_way: bool = False) -> None:  # no engine
        (self.rooms, self.on, self.back) = corridor
        self.one_way = one_way  # onward only until the coin is held, then back only
        a, b, c = self.rooms
        self.task = (
            f"Your task is to take the coin that is located in the {c}, and put it into "
            f"the box found in the {a}. A map is provided, that you may find helpful."
        )
        self.map = (
            f"The map reads: The {a} connects to the {b}. The {b} connects to the {a} and "
            f"{c}. The {c} connects to the {b}."
        )
        self.game = Game("corridor", 0, self.task, "", [])

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.at, self.held = 0, False
        self.game = Game(name, seed, self.task, self._look(), self._valid(), [self.task])
        return self.game

    def _look(self) -> str:
        room = self.rooms[self.at]
        parts = [f"You are in the {room}."]
        if self.at == 2 and not self.held:
            parts.append("In one part of the room you see a coin.")
        if self.at == 0:
            parts.append("You also see a box.")
        if self.at > 0:
            parts.append(f"To the {self.back.title()} you see the {self.rooms[self.at - 1]}.")
        if self.at < 2:
            parts.append(f"To the {self.on.title()} you see the {self.rooms[self.at + 1]}.")
        return " ".join(parts)

    def _valid(self) -> list[str]:
        out = ["look around", "read map", "task"]
        out += [f"move {self.back}"] if self.at > 0 and not (self.one_way and not self.held) else []
        out += [f"move {self.on}"] if self.at < 2 and not (self.one_way and self.held) else []
        out += ["take coin"] if self.at == 2 and not self.held else []
        out += ["put coin in box"] if self.at == 0 and self.held else []
        return sorted(out)

    def step(self, action: str) -> Turn:
        g, feedback = self.game, ""
        if action == "read map":
            obs = self.map
            g.reads.append(obs)
        elif action == "task":
            obs = self.task
            g.reads.append(obs)
        elif action == f"move {self.on}":
            self.at += 1
            obs = self._look()
        elif action == f"move {self.back}":
            self.at -= 1
            obs = self._look()
        elif action == "take coin":
            self.held, g.score, obs = True, 1.0, "You take the coin."
            feedback = "Your score went up."
        elif action == "put coin in box":
            g.success = g.done = True
            obs, feedback = "You put the coin in the box.", "The task is complete."
        else:
            obs = self._look()
        g.observation, g.valid = obs, self._valid()
        return Turn(obs, g.valid, g.score, g.success, False, feedback)


def _won(corridor: Corridor) -> Run:
    """The shortest winning run in ``corridor``, as a skill is induced from it."""
    world = _Corridor(corridor)
    game = world.reset("corridor", {}, 0, "train")
    on, back = f"move {world.on}", f"move {world.back}"
    acts = ["look around", "read map", on, on, "take coin", back, back, "put coin in box"]
    results = []
    for a in acts:
        t = world.step(a)
        results.append(f"{t.observation} {t.feedback}".strip())
    reads = [
        [game.task, *[r for a, r in zip(acts[:k], results[:k], strict=True) if a == "read map"]]
        for k in range(len(acts))
    ]
    before = ["\n".join([game.task, *results[:k]]) for k in range(len(acts))]
    return Run(acts, reads, before, results)


def test_explorer_takes_a_move_again_from_another_room() -> None:
    # Out and back along a corridor needs each move twice: "move east" from the hall and
    # again from the study (one way at a time here, so the walk is forced). No memory, so
    # only the explorer is tested.
    result = Player(_Corridor(EAST, one_way=True), 30, 0, explorer="informed").play(
        "corridor", {}, 0, "test", ()
    )
    assert result.success
    assert result.actions.count("move east") >= 2 and result.actions.count("move west") >= 2


def test_moves_become_a_route_slot_bound_on_the_map_read_in_this_game() -> None:
    steps, slots = induce([_won(EAST), _won(NORTH)])
    # Not the exits of the runs learned from ("move east" twice in one, "move north" in
    # the other), but one slotted step headed for the task's places.
    assert not any(s.startswith("move ") and "<" not in s for s in steps)
    assert slots["move <seen1>"]["seen1"]["fill"] == "toward"
    # A new map, other names, the other way round: out toward the coin's room, back
    # toward the box once the score went up.
    world = _Corridor(SOUTH)
    game = world.reset("corridor", {}, 0, "test")
    look = world.step("look around").observation
    world.step("read map")
    rule = slots["move <seen1>"]
    seen = "\n".join([game.task, look, world.map])
    assert bind("move <seen1>", rule, game.valid, game.reads, seen) == ["move south"]
    world.step("move south")
    world.step("move south")
    took = world.step("take coin")
    seen += f"\n{world._look()}\nYou take the coin. {took.feedback}"
    assert bind("move <seen1>", rule, world.game.valid, game.reads, seen) == ["move north"]


def test_a_skill_with_a_route_wins_a_new_map_in_the_fewest_steps() -> None:
    steps, slots = induce([_won(EAST), _won(NORTH)])
    plan = Plan(tuple(steps), slots, "skill")
    result = Player(_Corridor(SOUTH), 30, 0, explorer="informed").play(
        "corridor", {}, 0, "test", [plan]
    )
    assert result.success
    assert [a for a in result.actions if a.startswith("move")] == ["move south"] * 2 + [
        "move north"
    ] * 2


def test_steps_that_say_which_action_come_before_ones_that_take_anything_in_view() -> None:
    # "move <seen1>" (any exit) is first in the plan: in the coin's room the coin is
    # taken before walking on.
    wild = {"move <seen1>": {"seen1": {"fill": "seen"}}}
    plan = Plan(("move <seen1>", "take coin", "put coin in box"), wild, "episodes")
    world = _Corridor(EAST)
    game = world.reset("corridor", {}, 0, "test")
    world.step("move east")
    world.step("move east")
    assert {"move west", "take coin"} <= set(game.valid)
    player = Player(world, 30, 0, explorer="informed")
    done = {"look around", "read map", "task"}
    choice = player._choose(game, [plan], None, done, world._look(), random.Random(0))
    assert choice == "take coin"


COOK = "cook <read1> in <pick1>"


def _cook_rule(table: dict[str, dict[str, int]]) -> dict[str, object]:
    return {"read1": {"fill": "read"}, "pick1": {"fill": "pick", "of": "read1", "table": table}}


def test_a_verb_never_seen_takes_a_tool_no_known_verb_claimed() -> None:
    reads = ["Cook a meal.", "Ingredients: carrot Directions: fry the carrot prepare meal"]
    valid = ["cook carrot in oven", "cook carrot in stove"]
    rule = _cook_rule({"roast": {"oven": 2}})
    assert bind(COOK, rule, valid, reads, "") == ["cook carrot in stove"]
    # A table where one tool serves two verbs pairs nothing: no guess.
    shared = _cook_rule({"roast": {"oven": 2}, "bake": {"oven": 1}})
    assert bind(COOK, shared, valid, reads, "") == []


def test_a_thing_never_seen_goes_where_the_most_alike_things_went() -> None:
    rule = {
        "seen1": {"fill": "seen"},
        "seen2": {
            "fill": "pick",
            "of": "seen1",
            "table": {"dirty saucepan": {"dishwasher": 1}, "clean shirt": {"wardrobe": 1}},
        },
    }
    valid = ["put dirty mug in dishwasher", "put dirty mug in wardrobe"]
    assert bind("put <seen1> in <seen2>", rule, valid, [], "") == ["put dirty mug in dishwasher"]


def test_stage3_drops_a_constant_step_that_only_costs_a_turn() -> None:
    def replay(skill: SkillDraft, task: str) -> StepResult:
        """Wins only with "take coin"; takes one turn per step."""
        acts: Sequence[str] = skill.steps
        return StepResult(1 if "take coin" in acts else 0, None, "take coin" in acts, tuple(acts))

    steps = ["read map", "task", "take coin"]
    slots: dict[str, object] = {"move <seen1>": {}}
    first = [(True, replay(SkillDraft(steps, slots), t)) for t in ("a", "b")]
    kept: set[str] = set()
    once, _ = _drop_unneeded(steps, slots, first, ["a", "b"], replay, kept)
    assert once == ["task", "take coin"]
    again = [(True, replay(SkillDraft(once, slots), t)) for t in ("a", "b")]
    twice, _ = _drop_unneeded(once, slots, again, ["a", "b"], replay, kept)
    assert twice == ["take coin"]
    last = [(True, replay(SkillDraft(twice, slots), t)) for t in ("a", "b")]
    assert _drop_unneeded(twice, slots, last, ["a", "b"], replay, kept)[0] == ["take coin"]


def test_a_read_slot_whose_values_all_came_after_the_task_never_takes_what_the_task_names() -> None:
    task = "Cook a meal. Check the cookbook for the recipe."

    def won(item: str) -> Run:
        recipe = f"Ingredients: {item} Directions: roast the {item} prepare meal"
        acts = ["read cookbook", f"take {item}"]
        reads = [[task], [task, recipe]]
        return Run(acts, reads, [task, f"{task}\n{recipe}"], [recipe, f"You take the {item}."])

    _, slots = induce([won("carrot"), won("red apple")])
    assert slots["take <read1>"]["read1"].get("beyond_task") is True
    reads = [task, "Ingredients: salmon Directions: grill the salmon prepare meal"]
    valid = ["take cookbook", "take salmon"]
    assert bind("take <read1>", slots["take <read1>"], valid, reads, "") == ["take salmon"]
