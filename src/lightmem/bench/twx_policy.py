"""The programmatic TextWorldExpress player (no LLM): it follows the best plan its memory
gives whose slots bind to the current game, and explores where no plan step applies.

Plans come from the FluxMem context: a skill's steps and slot rules, or, without a skill,
the slotted steps induced from the similar episodes shown (from each run, the steps the
game scored and the ones that made those possible). Every arm explores the same way (the
no-memory baseline is the explorer alone), by one of two explorers (:data:`EXPLORERS`):

- ``informed`` (:class:`InformedExplorer`): it reads what can be read, takes what the
  texts it read name, and otherwise takes an untried valid action (never one that only
  inspects or closes something), retakes what a wrong place gave back, and walks on
  toward the scene seen least;
- ``plain`` (:class:`PlainExplorer`): issue 17's baseline, a uniformly random valid
  action not yet taken in this room (never one that only inspects or closes something),
  any valid action once none is left untried.

With memory the player follows its plans first and skips the actions that ended similar
runs in a like state (:class:`Outcomes`), whichever the explorer; the plain explorer then
also tries first what helped in like states and last what was done often to no effect,
and lets a plan take back what a wrong place gave back (a put that lowered the score).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lightmem.bench.twx_env import READ_VERBS, Game, Turn, TWXWorld
from lightmem.errors import InvalidInputError
from lightmem.fluxmem.meaning import Meaning
from lightmem.fluxmem.slots import (
    Outcomes,
    Run,
    abstract,
    bind,
    bind_ranked,
    episode_run,
    induce,
    lines,
    pooled,
    sought,
)
from lightmem.fluxmem.types import Node, StepResult

__all__ = [
    "EXPLORERS",
    "FAILED",
    "LOWERED",
    "PASSIVE",
    "SCORED",
    "Explorer",
    "InformedExplorer",
    "Moment",
    "PlainExplorer",
    "Plan",
    "Player",
    "mattered",
    "plans_from",
    "verdict",
]

SCORED = ("Your score went up.", "The task is complete.")
FAILED = "The task failed."
LOWERED = "Your score went down."
_SKILL_ID = re.compile(r'<skill id="([0-9a-f]+)"')
_EPISODE_ID = re.compile(r'<episode id="([0-9a-f]+)"')
_FAILED_AFTER = re.compile(r"^The task failed after '(.+)'\.$")


@dataclass(frozen=True)
class Plan:
    steps: tuple[str, ...]
    slots: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""


def plans_from(context: str, nodes: Mapping[str, Node]) -> tuple[list[Plan], Outcomes]:
    """Plans in the order the context ranks them, and what the actions of the similar
    runs led to (to skip the harmful ones)."""
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
    judged: list[tuple[Run, list[bool | None]]] = []
    for e in episodes:
        run = episode_run(e, whole=True)
        if run is None:
            continue
        relevant = set(e.data.get("relevant", []))
        judged.append((run, [verdict(o, k in relevant) for k, o in enumerate(run.results)]))
        # Earlier attempts at the same game (same texts to read) that the game ended.
        fatal = [
            m.group(1)
            for a in e.data.get("attempts", [])
            if isinstance(a, dict) and (m := _FAILED_AFTER.search(str(a.get("feedback"))))
        ]
        reads, seen = run.reads[-1], "\n".join([run.observations[-1], *run.results])
        judged += [(Run([act], [reads], [seen]), [False]) for act in fatal]
    return plans, Outcomes.of(judged)


def verdict(reply: str, relevant: bool = False) -> bool | None:
    """What the game's reply says of the action: it helped (it scored, or it was needed
    for something that did), it harmed (it ended the game), or neither (a lowered score
    can be made good again: the thing put in the wrong place is taken back)."""
    if reply.endswith(FAILED):
        return False
    if relevant or reply.endswith(SCORED):
        return True
    return None


@dataclass(frozen=True)
class Moment:
    """Where an attempt stands when its explorer picks an action: the game, memory's plans
    and what the similar runs' actions led to, the text seen so far, the attempt's rng, the
    actions taken and the states (valid actions, score) from the start on. ``taken`` and
    ``states`` are the attempt's own lists: by :meth:`Explorer.record` they hold the step."""

    game: Game
    plans: Sequence[Plan]
    outcomes: Outcomes | None
    seen: str
    rng: random.Random
    taken: Sequence[str]
    states: Sequence[tuple[frozenset[str], float]]


class Explorer(Protocol):
    """How a player explores one attempt where no plan step of memory applies: it picks
    each action (None: stop) and sees what each action led to."""

    def choose(self, now: Moment) -> str | None: ...

    def record(self, now: Moment, action: str, turn: Turn, opened: set[str]) -> None: ...


class Player:
    """Plays one game attempt; keeps, across attempts at the same game, which action came
    just before a failure (an agent's own short-term memory, not the graph)."""

    #: Times an action that takes the agent elsewhere may be taken in one attempt.
    MAX_USES = 3

    def __init__(
        self,
        world: TWXWorld,
        step_limit: int,
        seed: int,
        meaning: Meaning | None = None,
        *,
        explorer: str,
    ) -> None:
        if explorer not in EXPLORERS:
            raise InvalidInputError(
                f"explorer: expected one of {', '.join(EXPLORERS)}, got {explorer!r}"
            )
        self.world = world
        self.meaning = meaning  # how plans guess by likeness of names, if at all
        self.step_limit = step_limit
        self.seed = seed
        self.explorer = explorer
        self.tabu: set[str] = set()
        self.scored: list[str] = []  # actions the game scored in earlier attempts
        # Shapes of actions that undid a scored one in this attempt (the carrot put down
        # made "take carrot" available again): giving up what was gained comes last.
        self.undoing: set[str] = set()
        self.attempt = 0
        self.steps = 0  # every game step taken by this player, over all attempts

    def play(
        self,
        game_name: str,
        params: Mapping[str, int],
        seed: int,
        fold: str,
        plans: Sequence[Plan],
        outcomes: Outcomes | None = None,
    ) -> StepResult:
        game = self.world.reset(game_name, params, seed, fold)
        if self.scored:  # the same game again: first redo what scored last time
            plans = [Plan(tuple(self.scored), {}, "earlier attempts"), *plans]
        rng = random.Random(f"{self.seed}:{seed}:{self.attempt}")
        self.attempt += 1
        self.undoing = set()
        explorer = EXPLORERS[self.explorer](self, game)
        actions: list[str] = []
        observations: list[str] = []
        docs: list[str] = []
        opened: list[set[str]] = []  # per action, the valid actions it made available
        states: list[tuple[frozenset[str], float]] = [(frozenset(game.valid), game.score)]
        last = ""
        while not game.done and len(actions) < self.step_limit:
            seen = "\n".join([game.task, *observations])
            now = Moment(game, plans, outcomes, seen, rng, actions, states)
            # Whatever the explorer, first look around, so what the room holds is in the
            # run's observations (what memory's plans bind to and episodes record).
            if not actions and "look around" in game.valid:
                action: str | None = "look around"
            else:
                action = explorer.choose(now)
            if action is None:
                break
            n_read, before = len(game.reads), set(game.valid)
            turn = self.world.step(action)
            text = turn.reply
            actions.append(action)
            observations.append(text)
            docs.append(game.reads[-1] if len(game.reads) > n_read else "")
            opened.append(set(turn.valid) - before)
            states.append((frozenset(turn.valid), turn.score))
            explorer.record(now, action, turn, opened[-1])
            last = action
            self.steps += 1
            if text.endswith(SCORED) and action not in self.scored:
                self.scored.append(action)
            elif text.endswith(LOWERED):
                self.tabu.add(action)
        relevant = mattered(actions, observations, docs, opened, states)
        result = (tuple(actions), tuple(observations), tuple(docs), relevant)
        if game.success:
            return StepResult(game.score, None, True, *result)
        if observations and observations[-1].endswith(FAILED):
            self.tabu.add(last)
            verdict = f"The task failed after '{last}'."
        else:
            verdict = (
                f"The task was not completed in {len(actions)} steps (score {game.score:.2f})."
            )
        return StepResult(game.score, verdict, False, *result)

    def _choose(
        self,
        game: Game,
        plans: Sequence[Plan],
        outcomes: Outcomes | None,
        tried: set[str],
        seen: str,
        rng: random.Random,
        taken: Sequence[str] = (),
    ) -> str | None:
        """The informed explorer's choice among the valid actions not in ``tried``: what
        can be read, else a plan's step, else what the texts read name, else the most
        promising untried action."""
        reads = game.reads
        fresh = [a for a in game.valid if a not in tried and a not in self.tabu]
        safe = [a for a in fresh if outcomes is None or not outcomes.harmful(a, reads, seen)]
        # Read what can be read before acting: the texts read give the plans their slots.
        for a in safe:
            if a.split()[0] == "read":
                return a
        action, safe = self._planned(game, plans, outcomes, safe, seen, rng, taken)
        if action is not None:
            return action
        # Take what the texts read name (the task's object, the recipe's ingredients).
        read_text = "\n".join(lines(reads))
        for a in safe:
            verb, _, thing = a.partition(" ")
            if verb == "take" and thing and _named(read_text, thing):
                return a
        # Then what helped in like states; then act on what they name, else open what is
        # closed, else anything untried; what was often done to no effect comes last.
        pool = [a for a in safe if a.split()[0] not in PASSIVE] or safe or fresh
        if not pool:
            return None
        # "Named" by the documents read, if any (the task text names the cookbook and the
        # kitchen, not what to do with them); else by the task text.
        docs = reads[1:] or reads
        rank = {
            a: -1
            if abstract(a, reads, seen)[0] in self.undoing
            else self._rank(a, outcomes, reads, docs, seen)
            for a in pool
        }
        best = max(rank.values())
        return rng.choice([a for a in pool if rank[a] == best])

    def _planned(
        self,
        game: Game,
        plans: Sequence[Plan],
        outcomes: Outcomes | None,
        safe: list[str],
        seen: str,
        rng: random.Random,
        taken: Sequence[str],
    ) -> tuple[str | None, list[str]]:
        """What memory's plans take among ``safe`` (the valid actions the explorer has not
        tried, none that memory says harms here), if a step of theirs applies; and
        ``safe`` without the actions memory says not to try at random."""
        reads = game.reads
        # Plan steps that say which action (a constant, or slots filled by a rule) come
        # before those whose slots take anything in view ("move <seen1>": any exit), which
        # only say what kind of action to explore with. A step that can only guess (its
        # pick table lacks the thing here) waits for the plan's exploring steps before
        # it: what the skill opens first may hold the place a better guess names.
        guess: tuple[list[str], str, Plan, int, dict[str, Any]] | None = None
        for plan in plans:
            for i, step in enumerate(plan.steps):
                rules = plan.slots.get(step, {})
                if _wildcard(step, rules):
                    continue
                bound, how = bind_ranked(step, rules, safe, reads, seen, self.meaning)
                if bound and how == "fits":  # the step allows these equally
                    return rng.choice(bound), safe
                if bound and guess is None:
                    # What every plan knows of where things go, before guessing.
                    others = [p.slots.get(step, {}) for p in plans if p is not plan]
                    rules = pooled([rules, *others])
                    wider, wider_how = bind_ranked(step, rules, safe, reads, seen, self.meaning)
                    if wider:
                        bound, how = wider, wider_how
                    if how in ("fits", "unclaimed") or not _where_things_go(rules):
                        # A recipe verb's tool: opening things shows no other tool.
                        return rng.choice(bound), safe
                    guess = (bound, how, plan, i, rules)
        if guess is not None:
            return _ahead_of_guess(*guess, plans, safe, reads, seen, rng, self.meaning), safe
        for plan in plans:
            for step in plan.steps:
                rules = plan.slots.get(step, {})
                if _wildcard(step, rules) and (bound := bind(step, rules, safe, reads, seen)):
                    return rng.choice(bound), safe
        safe = _not_at_random(safe, plans, outcomes, reads, seen)
        # A plan being followed wants to take a thing that is not in view (this kitchen
        # keeps the knife in another drawer): look inside what is closed first.
        if _out_of_view(plans, taken, game.valid):
            opening = [a for a in safe if _opens(a)]
            if opening:
                docs = reads[1:] or reads
                rank = {a: self._rank(a, outcomes, reads, docs, seen) for a in opening}
                best = max(rank.values())
                return rng.choice([a for a in opening if rank[a] == best]), safe
        return None, safe

    @staticmethod
    def _rank(
        action: str, outcomes: Outcomes | None, reads: list[str], docs: list[str], seen: str
    ) -> int:
        promise = 1 if outcomes is None else outcomes.promise(action, reads, seen)
        if "<read" in abstract(action, docs, "")[0]:
            tier = 2
        elif _opens(action):
            tier = 1
        else:
            tier = 0
        return 3 * promise + tier


class InformedExplorer:
    """The project's explorer: reads what can be read, takes what the texts read name,
    opens what is closed, never inspects or closes at random, retakes what it had scored
    once an action that gained nothing gave it back (or a put lowered the score: a wrong
    place), takes a move again from another scene (up to :attr:`Player.MAX_USES` times),
    and with nothing untried where it stands walks on toward the scene entered least."""

    def __init__(self, player: Player, game: Game) -> None:
        self.player = player
        self.tried: set[str] = set()
        # Actions that took the agent elsewhere (most valid actions changed: a move) are
        # "tried" per state: "move south" from another room is another move.
        self.moving: dict[str, set[tuple[frozenset[str], float, str]]] = {}
        self.uses: Counter[str] = Counter()
        # Actions that changed nothing (same valid actions, same score: "You can't move
        # there, the door is closed"): untried again once another action on the same
        # thing is taken ("open door to east" after "move east").
        self.refused: set[str] = set()
        self.visits: Counter[str] = Counter()  # times each scene was entered
        self.leads: dict[tuple[str, str], str] = {}  # (scene, move) -> the scene it led to
        self.gained: set[str] = set()  # actions the game scored in this attempt
        self.scene = ""  # the first sentence of the latest scene description

    def choose(self, now: Moment) -> str | None:
        player, game, outcomes, seen = self.player, now.game, now.outcomes, now.seen
        here = (*now.states[-1], self.scene)  # the valid actions, the score, the scene
        done_here = self.tried - {
            a for a, at in self.moving.items() if here not in at and self.uses[a] < player.MAX_USES
        }
        action = player._choose(game, now.plans, outcomes, done_here, seen, now.rng, now.taken)
        if action is not None:
            return action
        # Nothing untried here: walk on rather than stop with steps left (the rooms
        # beyond may hold what is sought), toward the scene seen least (one never
        # reached from here counts as unseen), never by a move memory says harms.
        ways = sorted(
            a
            for a in game.valid
            if a in self.moving
            and a not in player.tabu
            and (outcomes is None or not outcomes.harmful(a, game.reads, seen))
        )
        if not ways:
            return None  # no move known from here: nothing left to try
        seen_by = {
            a: self.visits[self.leads[(self.scene, a)]] if (self.scene, a) in self.leads else 0
            for a in ways
        }
        least = min(seen_by.values())
        return now.rng.choice([a for a in ways if seen_by[a] == least])

    def record(self, now: Moment, action: str, turn: Turn, opened: set[str]) -> None:
        tried, uses, refused, states = self.tried, self.uses, self.refused, now.states
        look = len(states) == 2 and action == "look around"  # the opening look
        here = (*states[-2], self.scene)
        if action.split()[0] not in (*READ_VERBS, *PASSIVE):  # those change nothing
            # Once each: a door's opening changes no valid action, so "open door to
            # east" looks refused too, and must not wake "move east" for ever.
            unblocked = {
                a for a in refused if a != action and uses[a] < 2 and _objects(a) & _objects(action)
            }
            refused -= unblocked
            tried -= unblocked
            if states[-1] == states[-2]:
                refused.add(action)
            else:
                refused.discard(action)
        # Never the same action twice, unless it scored and a later action that scored
        # nothing made it available again (the carrot put down can be taken again; the
        # shirt put in its place is not taken out), then once more; as often as a later
        # action that lowered the score made it available (put in a wrong place).
        uses[action] += 1
        tried.add(action)
        # A reply that reads like the opening "look around" (its first words) but
        # describes another scene took the agent elsewhere.
        first = turn.observation.split(". ")[0]
        scene = self.scene
        if scene and first.split()[:3] == scene.split()[:3] and first != scene:
            self.moving.setdefault(action, set()).add(here)
        if look or action in self.moving:
            if action in self.moving:
                self.leads[(scene, action)] = first
            self.scene = first
            self.visits[first] += 1
        text = turn.reply
        if text.endswith(SCORED):
            self.gained.add(action)
        elif text.endswith(LOWERED):
            # A wrong place (the shirt in the sink): take it back to try another place
            # as often as it takes; the wrong put is not tried again (the player's tabu).
            tried -= {a for a in opened if a in self.gained}
        else:
            tried -= {a for a in opened if a in self.gained and uses[a] < 2}
        if opened & self.gained:
            self.player.undoing.add(abstract(action, now.game.reads, now.seen)[0])


class PlainExplorer:
    """Issue 17's no-memory policy: a uniformly random valid action not yet taken in this
    room (the scene: the first sentence of the latest reply that reads like the opening
    description), never one that only inspects or closes something unless nothing else
    is valid; once every such action has been taken here, any of them. No reading first,
    no taking back, no walking by a plan of its own, and nothing learnt within the attempt
    but what it took where: the player's tabu counts as of the attempt's start (what
    lowered the score or ended an earlier attempt at this game). It stops only at the
    step limit or where no valid action is left (the tabu and harmful actions aside).

    Given memory, it is the same explorer told what memory knows: plans first (and a
    plan may take again what a put that lowered the score gave back, to bind its put
    anew), no action that ended similar runs in a like state, and among the untried
    actions those that helped in like states first, those often idle last."""

    def __init__(self, player: Player, game: Game) -> None:
        self.player = player
        self.scene = game.observation.split(". ")[0]
        self.tried: set[tuple[str, str]] = set()  # (scene, action)
        self.tabu = frozenset(player.tabu)
        self.gained: set[str] = set()  # actions the game scored in this attempt
        # Scored actions that a later one which lowered the score made available again
        # (the thing put in a wrong place can be taken back): memory's plans may take
        # them again to bind their next step anew; the random explorer never does.
        self.given_back: set[str] = set()

    def choose(self, now: Moment) -> str | None:
        game, plans, outcomes, seen, rng = now.game, now.plans, now.outcomes, now.seen, now.rng
        reads = game.reads
        allowed = [a for a in game.valid if a not in self.tabu]

        def safe(actions: Sequence[str]) -> list[str]:
            return [a for a in actions if outcomes is None or not outcomes.harmful(a, reads, seen)]

        # Memory's judgements are of the untried actions first (they cost time on long
        # runs); of the others only once nothing active is left untried.
        untried = safe([a for a in allowed if (self.scene, a) not in self.tried])
        back = safe([a for a in allowed if a in self.given_back and a not in untried])
        action, left = self.player._planned(
            game, plans, outcomes, untried + back, seen, rng, now.taken
        )
        if action is not None:
            return action
        untried = [a for a in left if a not in back]
        pool = [a for a in untried if a.split()[0] not in PASSIVE]
        if pool and outcomes is not None:
            # Memory's word on the untried: what helped in like states first, what was
            # done often to no effect last (without memory all are alike).
            promise = {a: outcomes.promise(a, reads, seen) for a in pool}
            best = max(promise.values())
            pool = [a for a in pool if promise[a] == best]
        if pool:
            return rng.choice(pool)
        # Where only what memory warns against is left: that, rather than stop.
        pool = _active(_not_at_random(safe(allowed), plans, outcomes, reads, seen))
        pool = pool or _active(allowed)
        if not pool:
            return None
        return rng.choice([a for a in pool if (self.scene, a) not in self.tried] or pool)

    def record(self, now: Moment, action: str, turn: Turn, opened: set[str]) -> None:
        self.tried.add((self.scene, action))
        self.given_back.discard(action)
        text = turn.reply
        if text.endswith(SCORED):
            self.gained.add(action)
        elif text.endswith(LOWERED):
            self.given_back |= opened & self.gained
        first = turn.observation.split(". ")[0]
        if first.split()[:3] == self.scene.split()[:3]:  # "You are in the pantry"
            self.scene = first


#: The explorers a :class:`Player` may use (``lightmem bench fluxmem --explorer``), each
#: made afresh for every attempt; the bench's default is ``plain`` (the issue's baseline).
EXPLORERS: dict[str, Callable[[Player, Game], Explorer]] = {
    "informed": InformedExplorer,
    "plain": PlainExplorer,
}


def _active(actions: Sequence[str]) -> list[str]:
    """The actions that do more than inspect or close something; all of them if none do."""
    return [a for a in actions if a.split()[0] not in PASSIVE] or list(actions)


def _not_at_random(
    actions: Sequence[str],
    plans: Sequence[Plan],
    outcomes: Outcomes | None,
    reads: Sequence[str],
    seen: str,
) -> list[str]:
    """``actions`` without those memory says not to try at random: an action of a shape
    some plan has a slotted step for, which that step did not bind, is one memory says
    does not apply here (cook what the recipe does not say to cook, or with another
    tool); it is left out where that shape has ended a game (a put that only lowered the
    score can still be tried)."""
    shaped = {step for plan in plans for step in plan.steps if "<" in step}
    if not shaped or outcomes is None:
        return list(actions)
    risky = shaped & set(outcomes.bad)
    return [a for a in actions if abstract(a, reads, seen)[0] not in risky]


def _ahead_of_guess(
    bound: list[str],
    how: str,
    plan: Plan,
    i: int,
    rules: Mapping[str, Any],
    plans: Sequence[Plan],
    safe: Sequence[str],
    reads: Sequence[str],
    seen: str,
    rng: random.Random,
    meaning: Meaning | None = None,
) -> str:
    """What to do where ``plan``'s step ``i`` can only guess where a thing goes (``bound``,
    guessed ``how`` by ``rules`` pooled from every plan): act first on where memory says
    it goes if that is in view but not yet open to it (the dishwasher, closed); else take
    the exploring steps any plan takes before this step; else, where the guess is by
    ``meaning`` or only where most things went, open what is closed, so it is made among
    every place there is; else the guess."""
    step = plan.steps[i]
    want = sought(step, rules, safe, reads, seen, meaning)
    for a in safe:
        verb, _, thing = a.partition(" ")
        if verb not in PASSIVE and thing.lower() in want:
            return a
    for p in [plan, *(q for q in plans if q is not plan)]:
        at = i if p is plan else (p.steps.index(step) if step in p.steps else 0)
        for earlier in p.steps[:at]:
            its = p.slots.get(earlier, {})
            if _wildcard(earlier, its) and (first := bind(earlier, its, safe, reads, seen)):
                return rng.choice(first)
    closed = [a for a in safe if _opens(a)] if how in ("meaning", "usual") else []
    return rng.choice(closed or bound)


def _out_of_view(plans: Sequence[Plan], taken: Sequence[str], valid: Sequence[str]) -> bool:
    """True if the plan followed most closely (the most of its constant steps taken in this
    attempt, at least one) has a constant ``take`` step not taken yet that no valid action
    is: its thing is not in view. Only that plan: another game's constant take (a thing
    this game has not) would keep the player opening things all attempt."""
    done = set(taken)
    fixed = [[s for s in plan.steps if "<" not in s] for plan in plans]
    count = {i: sum(s in done for s in steps) for i, steps in enumerate(fixed)}
    most = max(count.values(), default=0)
    if most == 0:
        return False
    # Plans followed as closely as each other must all want a thing out of view.
    return all(
        any(s.split()[0] == "take" and s not in done and s not in valid for s in fixed[i])
        for i, n in count.items()
        if n == most
    )


def _objects(action: str) -> set[str]:
    """The words an action names besides its verb and linking words ("door", "east" of
    "open door to east")."""
    return set(action.lower().split()[1:]) - _LINKS


_LINKS = frozenset({"to", "in", "on", "from", "with", "the", "a", "an", "into", "onto", "of"})


def _opens(action: str) -> bool:
    """True for an action that opens something (what is inside may be what is looked for)."""
    return action.split()[0] == "open"


def _where_things_go(rules: Mapping[str, Any]) -> bool:
    """True if a ``pick`` slot of the step is keyed by a thing in view (where each thing
    goes), not by what was read (a recipe verb's tool)."""
    return any(
        r.get("fill") == "pick" and str(r.get("of", "")).startswith("seen") for r in rules.values()
    )


#: Verbs of actions that only inspect or close something: the explorer never picks them
#: at random (they change nothing a task needs).
PASSIVE = ("examine", "inventory", "look", "close")


def _wildcard(step: str, rules: Mapping[str, Any]) -> bool:
    """True if every slot of ``step`` takes whatever is in view."""
    names = re.findall(r"<(\w+)>", step)
    return bool(names) and all(rules.get(n, {}).get("fill", "seen") == "seen" for n in names)


def _named(text: str, thing: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(thing.lower())}(?![\w-])", text) is not None


def mattered(
    actions: Sequence[str],
    observations: Sequence[str],
    docs: Sequence[str],
    opened: Sequence[set[str]],
    states: Sequence[tuple[frozenset[str], float]],
) -> tuple[int, ...]:
    """The positions of the actions that mattered: those the game scored, those that read
    a document, and, going back from each, the latest earlier action that made it
    available (opening the fridge for the carrot, taking the knife for the slicing).
    Detours that came back to where they started (same valid actions, same score: the
    meal put down and taken again) are left out."""
    looped: set[int] = set()
    for m in range(len(actions)):
        for j in range(m + 1):
            if states[m + 1] == states[j]:
                looped.update(range(j, m + 1))
                break
    need = {k for k, o in enumerate(observations) if o.endswith(SCORED) and k not in looped}
    todo = sorted(need)
    while todo:
        k = todo.pop()
        by = next(
            (i for i in range(k - 1, -1, -1) if actions[k] in opened[i] and i not in looped),
            None,
        )
        if by is not None and by not in need:
            need.add(by)
            todo.append(by)
    need |= {k for k, d in enumerate(docs) if d}
    return tuple(sorted(need))
