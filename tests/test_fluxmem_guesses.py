"""Pick slots for things memory has not seen: guessing from alike and usual keys and by
meaning (the agent's embedder: a place is known by its name and by what went there),
pooling what every plan knows, and opening where memory says a thing goes before
guessing."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from lightmem import ConfigError, WordLlamaEmbedder
from lightmem.bench.twx_env import Game, Turn
from lightmem.bench.twx_policy import Plan, Player
from lightmem.fluxmem.meaning import Meaning
from lightmem.fluxmem.slots import abstract, bind_ranked, meant, pooled, sought, usual
from lightmem.ledger import Ledger

PUT = "put <seen1> in <seen2>"


def _rule(table: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {"seen1": {"fill": "seen"}, "seen2": {"fill": "pick", "of": "seen1", "table": table}}


WARDROBE = _rule(
    {
        "clean shirt": {"wardrobe": 1},
        "long coat": {"wardrobe": 1},
        "dirty sock": {"laundry basket": 1},
    }
)


def _puts(thing: str, *places: str) -> list[str]:
    return [f"put {thing} in {p}" for p in places]


def test_a_known_thing_binds_exactly_and_an_alike_one_is_a_guess() -> None:
    valid = _puts("dirty sock", "bed", "laundry basket")
    assert bind_ranked(PUT, WARDROBE, valid, [], "") == (
        ["put dirty sock in laundry basket"],
        "fits",
    )
    # "dirty jeans" shares "dirty" with the sock: the basket, as a guess.
    valid = _puts("dirty jeans", "bed", "laundry basket", "wardrobe")
    assert bind_ranked(PUT, WARDROBE, valid, [], "") == (
        ["put dirty jeans in laundry basket"],
        "alike",
    )


def test_an_unlike_thing_goes_where_most_things_went() -> None:
    valid = _puts("black hat", "bed", "laundry basket", "wardrobe")
    assert bind_ranked(PUT, WARDROBE, valid, [], "") == (["put black hat in wardrobe"], "usual")
    rule = WARDROBE["seen2"]
    assert usual(rule, ["black hat"], "wardrobe") == 2
    assert usual(rule, ["black hat"], "laundry basket") == 1
    assert usual(rule, ["long coat"], "wardrobe") == 0  # a known key is not guessed
    # One thing per place (a tool per cooking verb): no place is usual.
    one_to_one = {"fill": "pick", "of": "seen1", "table": {"pan": {"oven": 1}, "pot": {"stove": 1}}}
    assert usual(one_to_one, ["wok"], "oven") == 0
    # Keyed by a recipe's verb, a tool that served two verbs is no guess for a third.
    verbs = {"fill": "pick", "of": "read1", "table": {"roast": {"oven": 1}, "bake": {"oven": 1}}}
    assert usual(verbs, ["fry"], "oven") == 0


def test_pooled_tables_add_up_what_each_plan_saw() -> None:
    other = _rule({"dirty sock": {"laundry basket": 2}, "towel": {"towel rack": 1}})
    rules = pooled([WARDROBE, other, {"seen1": {"fill": "seen"}}])
    table = rules["seen2"]["table"]
    assert table["dirty sock"] == {"laundry basket": 3}
    assert table["towel"] == {"towel rack": 1} and table["long coat"] == {"wardrobe": 1}
    assert WARDROBE["seen2"]["table"]["dirty sock"] == {"laundry basket": 1}  # not changed
    assert rules["seen1"] == {"fill": "seen"}


def test_sought_names_the_place_in_view_that_no_put_offers_yet() -> None:
    valid = [*_puts("dirty jeans", "bed", "wardrobe"), "open laundry basket", "open drawer"]
    assert sought(PUT, WARDROBE, valid, [], "") == ["laundry basket"]
    # Offered already, or not in view at all: nothing to seek.
    assert sought(PUT, WARDROBE, _puts("dirty jeans", "laundry basket"), [], "") == []
    assert sought(PUT, WARDROBE, _puts("dirty jeans", "bed"), [], "") == []


def test_a_name_does_not_end_in_the_actions_own_stop_word() -> None:
    seen = "You put the white coat in the wardrobe. You see a coat hanger."
    assert abstract("put white coat in coat hanger", [], seen) == (
        PUT,
        ["white coat", "coat hanger"],
    )


class _Room:
    """A scripted room: one thing to put away, a bed, closed places (the laundry basket is
    the thing's place: a lowered score anywhere else) and other actions that change
    nothing but are valid until taken."""

    def __init__(
        self,
        thing: str,
        closed: tuple[str, ...],
        others: tuple[str, ...] = (),
        open_: tuple[str, ...] = (),
    ) -> None:
        self.thing, self.closed, self.others = thing, list(closed), list(others)
        self.opened: list[str] = list(open_)
        self.held = False
        self.put = ""
        self.game = Game("room", 0, "Put things where they belong.", "", [])

    def _valid(self) -> list[str]:
        acts = [f"open {c}" for c in self.closed if c not in self.opened] + self.others
        if self.held:
            acts += _puts(self.thing, "bed", *self.opened)
        elif not self.put:
            acts.append(f"take {self.thing}")
        return sorted(acts)

    def reset(self, name: str, params: Mapping[str, int], seed: int, fold: str) -> Game:
        self.game.valid = self._valid()
        return self.game

    def step(self, action: str) -> Turn:
        verdict = ""
        if action.startswith("open "):
            self.opened.append(action[5:])
        elif action in self.others:
            self.others.remove(action)
        elif action.startswith("take"):
            self.held = True
        elif action.startswith("put"):
            self.held, self.put = False, action
            verdict = "The task is complete." if action.endswith("basket") else "Score down."
        g = self.game
        g.valid, g.done = self._valid(), verdict == "The task is complete."
        g.success = g.done
        return Turn(f"You {action}.", g.valid, 1.0 if g.done else 0.0, g.done, False, verdict)


def _play(room: _Room, plans: list[Plan], seed: int = 0) -> list[str]:
    result = Player(room, 12, seed, explorer="informed").play("room", {}, 0, "test", plans)  # type: ignore[arg-type]
    assert result.success
    return list(result.actions)


TAKE = {"take <seen1>": {"seen1": {"fill": "seen"}}}
#: Most things went on the bed; the basket is where the alike dirty sock went.
BED = _rule({"dirty sock": {"laundry basket": 1}, "pillow": {"bed": 1}, "quilt": {"bed": 1}})


def test_the_player_opens_where_memory_says_before_guessing() -> None:
    plan = Plan(("take <seen1>", PUT), {**TAKE, PUT: BED})
    for seed in range(5):  # the cupboard, opened first at random, would hold nothing
        room = _Room("dirty jeans", ("cupboard", "laundry basket"))
        assert _play(room, [plan], seed) == [
            "take dirty jeans",
            "open laundry basket",
            "put dirty jeans in laundry basket",
        ]


def test_a_guess_uses_what_every_plan_knows_of_where_things_go() -> None:
    # The first plan only knows that things go on the bed; the second saw the dirty sock
    # go in the basket: pooled, the jeans go in the basket (opened first), not on the bed.
    first = Plan(
        ("take <seen1>", PUT), {**TAKE, PUT: _rule({"pillow": {"bed": 1}, "quilt": {"bed": 1}})}
    )
    second = Plan((PUT,), {PUT: _rule({"dirty sock": {"laundry basket": 1}})})
    room = _Room("dirty jeans", ("laundry basket",))
    assert _play(room, [first, second])[-1] == "put dirty jeans in laundry basket"
    assert "put dirty jeans in bed" not in _play(
        _Room("dirty jeans", ("laundry basket",)), [first, second]
    )


def test_a_guess_waits_for_what_another_plan_does_before_that_step() -> None:
    # Only the second plan says the lamp is switched on before putting things away.
    first = Plan(("take <seen1>", PUT), {**TAKE, PUT: BED})
    wild = {"switch on <seen1>": {"seen1": {"fill": "seen"}}}
    second = Plan(("switch on <seen1>", PUT), {**wild, PUT: BED})
    room = _Room("dirty jeans", (), ("switch on lamp",), open_=("laundry basket",))
    acts = _play(room, [first, second])
    assert acts == ["take dirty jeans", "switch on lamp", "put dirty jeans in laundry basket"]


def test_a_recipe_verbs_tool_is_guessed_at_once() -> None:
    # "fry", never seen, takes the tool no known verb claimed at once.
    cook = "cook <read1> in <pick1>"
    rules = {
        "read1": {"fill": "read"},
        "pick1": {
            "fill": "pick",
            "of": "read1",
            "table": {"roast": {"oven": 1}, "grill": {"toaster": 1}},
        },
    }
    reads = ["Cook.", "Directions: fry the carrot"]
    valid = ["cook carrot in oven", "cook carrot in stove", "open drawer"]
    game = Game("kitchen", 0, reads[0], "", valid, reads)
    player = Player(None, 5, 0, explorer="informed")  # type: ignore[arg-type]
    # The plan opens things before cooking, but opening shows no other tool.
    plan = Plan(("open <seen1>", cook), {"open <seen1>": {"seen1": {"fill": "seen"}}, cook: rules})
    choice = player._choose(game, [plan], None, set(), "", random.Random(0))
    assert choice == "cook carrot in stove"


#: Two things went on the hat rack (the usual place), one in the shoe cabinet.
HALL = _rule(
    {"beret": {"hat rack": 1}, "black cap": {"hat rack": 1}, "moccasins": {"shoe cabinet": 1}}
)


def test_a_place_is_meant_by_what_went_there_or_by_its_own_name(
    embedder: WordLlamaEmbedder,
) -> None:
    meaning = Meaning(embedder)
    rule = HALL["seen2"]
    # "golf shoes" is like the moccasins that went in the shoe cabinet.
    shoes = {p: meant(rule, ["golf shoes"], p, meaning) for p in ("hat rack", "shoe cabinet")}
    assert max(shoes, key=lambda p: shoes[p] or 0.0) == "shoe cabinet"
    # No thing went in the umbrella stand yet: its name alone says the umbrella goes there.
    umbrella = meant(rule, ["umbrella"], "umbrella stand", meaning) or 0.0
    assert umbrella > (meant(rule, ["umbrella"], "hat rack", meaning) or 0.0)
    # By name the hat rack is likelier for dirty socks than a crate, but a dirty shirt
    # went in the crate.
    crate = _rule({"dirty shirt": {"crate": 1}, "beret": {"hat rack": 1}})["seen2"]
    socks = {p: meant(crate, ["dirty socks"], p, meaning) or 0.0 for p in ("crate", "hat rack")}
    assert socks["crate"] > socks["hat rack"] > max(meaning.likeness("dirty socks", ["crate"]))
    assert meant(rule, ["beret"], "hat rack", meaning) is None  # known: no guess
    # Keyed by a recipe's verb, no guess by meaning (a verb names no thing).
    verbs = {"fill": "pick", "of": "read1", "table": {"roast": {"oven": 1}}}
    assert meant(verbs, ["bake"], "oven", meaning) is None


def test_bind_guesses_by_meaning_before_the_usual_place(embedder: WordLlamaEmbedder) -> None:
    valid = _puts("umbrella", "hat rack", "shoe cabinet", "umbrella stand")
    assert bind_ranked(PUT, HALL, valid, [], "") == (["put umbrella in hat rack"], "usual")
    assert bind_ranked(PUT, HALL, valid, [], "", Meaning(embedder)) == (
        ["put umbrella in umbrella stand"],
        "meaning",
    )


def test_the_player_opens_what_is_closed_before_guessing_by_meaning(
    embedder: WordLlamaEmbedder,
) -> None:
    # Pillows and quilts went on the bed; the laundry basket, closed, is known only by
    # its name, which is what the dirty laundry is like.
    plan = Plan(
        ("take <seen1>", PUT), {**TAKE, PUT: _rule({"pillow": {"bed": 1}, "quilt": {"bed": 1}})}
    )
    meaning = Meaning(embedder)
    for seed in range(3):
        room = _Room("dirty laundry", ("laundry basket",))
        player = Player(room, 12, seed, meaning, explorer="informed")  # type: ignore[arg-type]
        result = player.play("room", {}, 0, "test", [plan])
        assert result.success and "put dirty laundry in bed" not in result.actions


def test_each_name_is_embedded_once(embedder: WordLlamaEmbedder) -> None:
    meaning = Meaning(embedder.with_ledger(Ledger()))
    first = meaning.likeness("umbrella", ["umbrella stand", "hat rack"])
    assert meaning.likeness("Umbrella", ["hat rack", "umbrella stand"]) == first[::-1]
    calls = [r.calls for r in meaning.embedder.ledger.totals() if r.op == "fluxmem.meaning"]
    assert calls == [1]
    assert first[0] > first[1]


def test_remembered_names_are_bounded(embedder: WordLlamaEmbedder) -> None:
    meaning = Meaning(embedder.with_ledger(Ledger()), keep=3)
    meaning.likeness("umbrella", ["umbrella stand", "hat rack"])
    assert len(meaning.vectors) == 3
    like = meaning.likeness("sock", ["laundry basket"])  # past the bound: forgets first
    assert set(meaning.vectors) == {"sock", "laundry basket"} and len(like) == 1


def test_a_bound_of_no_names_is_refused(embedder: WordLlamaEmbedder) -> None:
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match=r"^keep: "):
            Meaning(embedder, keep=bad)  # type: ignore[arg-type]
