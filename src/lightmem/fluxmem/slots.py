"""Skills with slots: the shared structure of successful runs, with what varies as named
slots and a rule saying how to fill each one from what the agent sees.

An action is abstracted against what the agent had read (task text, a recipe, a map) and
the observation it acted on. Its parts become slots:

- ``read``: a phrase of the texts read ("take <read1>" takes what the recipe lists);
- ``seen``: a phrase of the observation ("open <seen1>");
- ``head``: the first word of a read line that mentions another slot's value ("<head1>
  <read1>": "slice the red apple" -> "slice red apple");
- ``pick``: a word looked up in a table learned from the successful runs, keyed by the
  heads of the read lines that mention another slot's value, or by that value itself
  ("cook <read1> in <pick1>": "roast ..." -> oven, "grill ..." -> toaster).

An action repeated word for word by most runs stays a constant step. Steps are ordered by
where they happen in the runs; a skill is followed by taking, at each point, the earliest
step that binds to an available action not taken yet.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightmem.fluxmem.meaning import Meaning
from lightmem.fluxmem.routes import STOP, fits_toward, toward_rule
from lightmem.fluxmem.types import Node

__all__ = [
    "GUESSES",
    "MAX_SPAN",
    "PURITY",
    "Outcomes",
    "Run",
    "abstract",
    "bind",
    "bind_ranked",
    "episode_run",
    "guess",
    "induce",
    "lines",
    "meant",
    "pick",
    "pooled",
    "signature",
    "sought",
    "unclaimed",
    "usual",
]

_SLOT = re.compile(r"<(read|seen|head|pick)(\d+)>")
_SPLIT = re.compile(r"\n+|\s{2,}|(?<=[.:;!?])\s+")
MAX_SPAN = 4
#: Least share of a key's examples that must agree on one value for ``pick`` to use it.
PURITY = 0.75


@dataclass(frozen=True, slots=True)
class Run:
    """One run: its actions and, for each, the texts read so far, the observation the
    action was taken on and (optionally) what the action got back."""

    actions: Sequence[str]
    reads: Sequence[Sequence[str]]
    observations: Sequence[str]
    results: Sequence[str] = ()

    def result(self, k: int) -> str:
        return self.results[k] if len(self.results) == len(self.actions) else ""


def lines(texts: Iterable[str]) -> list[str]:
    """Read texts split into lines (a recipe's directions, a map's sentences)."""
    out = []
    for t in texts:
        out += [x.strip().lower() for x in _SPLIT.split(t) if x.strip()]
    return out


def _has(text: str, phrase: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(phrase.lower())}(?![\w-])", text) is not None


def _heads(read_lines: Sequence[str], value: str) -> list[str]:
    """First words of the read lines that mention ``value`` after their first word."""
    v = value.lower()
    return [
        ln.split()[0] for ln in read_lines if ln.split() and _has(ln, v) and not ln.startswith(v)
    ]


def abstract(action: str, reads: Sequence[str], observation: str) -> tuple[str, list[str]]:
    """``("slice red apple", reads) -> ("<head1> <read1>", ["slice", "red apple"])``."""
    words = action.split()
    read_lines = lines(reads)
    read_text = "\n".join(read_lines)
    obs = observation.lower()
    parts: list[tuple[str, str]] = []  # (kind or "", text)
    i = 1 if words else 0
    if words:
        parts.append(("", words[0]))
    while i < len(words):
        # The longest phrase read here, else the longest seen ("chicken wing" read beats
        # "chicken wing in" seen in "You put the chicken wing in the fridge").
        found = _span(words, i, read_text, "read") or _span(words, i, obs, "seen")
        if found is None:
            parts.append(("", words[i]))
            i += 1
        else:
            parts.append(found[:2])
            i = found[2]
    read_vals = [t for k, t in parts if k == "read"]
    if parts and any(parts[0][1].lower() in _heads(read_lines, v) for v in read_vals):
        parts[0] = ("head", parts[0][1])
    counts: Counter[str] = Counter()
    tokens, values = [], []
    for kind, text in parts:
        if kind:
            counts[kind] += 1
            tokens.append(f"<{kind}{counts[kind]}>")
            values.append(text)
        else:
            tokens.append(text)
    return " ".join(tokens), values


#: One use of a step: its slot values, the read lines then, what the action got back, the
#: run's task text and what the agent had seen before the action.
_Instance = tuple[list[str], list[str], str, str, str]


def _span(words: Sequence[str], i: int, text: str, kind: str) -> tuple[str, str, int] | None:
    """The longest phrase of ``words`` from ``i`` (not only stop words) found in ``text``:
    ``(kind, phrase, end)``."""
    for j in range(min(len(words), i + MAX_SPAN), i, -1):
        phrase = " ".join(words[i:j])
        # A name does not end in a stop word: "white coat in" seen in "You put the white
        # coat in the hanger" is "white coat" followed by the action's own "in".
        if words[j - 1].lower() in STOP:
            continue
        if _has(text, phrase):
            return kind, phrase, j
    return None


@dataclass
class _Seen:
    episodes: set[int]
    positions: list[float]
    instances: list[_Instance]


def induce(runs: Sequence[Run], quorum: float = 0.5) -> tuple[list[str], dict[str, Any]]:
    """Steps and slot rules shared by at least ``quorum`` of the runs (at least one).

    Returns ``(steps, slots)`` where ``slots[step]`` maps each slot of a templated step to
    its rule (``{"fill": "pick", "of": "read1", "table": {key: {value: n}}}``)."""
    if not runs:
        return [], {}
    need = max(1.0, quorum * len(runs))
    exact: dict[str, _Seen] = {}
    local: set[str] = set()  # actions naming something read beyond the task text
    skel_of: dict[str, str] = {}
    for e, run in enumerate(runs):
        n = max(1, len(run.actions) - 1)
        for k, act in enumerate(run.actions):
            _note(exact, act.strip(), e, k / n, [], [], "", "", "")
            skel, values = abstract(act, run.reads[k], run.observations[k])
            skel_of[act.strip()] = skel
            if not _task_bound(skel, values, _task(run.reads[k])):
                local.add(act.strip())
    # A constant step is one most runs repeat word for word (and more than one run, if
    # there are several: a value seen once is not yet a constant), naming nothing read
    # beyond the task text ("eat meal" can be one; "take carrot" after recipes naming
    # carrots is not: the next recipe differs).
    need_const = max(need, len(runs) / 2, min(2, len(runs)))
    constant = {a for a, s in exact.items() if len(s.episodes) >= need_const and a not in local}
    # A shape whose uses all headed for the task's places on the map read (a route: "move
    # <seen1>" toward the room the task names) is a slotted step even where one exit
    # happened to repeat: the next map differs.
    routes = _routes(runs)
    constant -= {a for a in constant if skel_of[a] in routes}
    shapes: dict[str, _Seen] = {}  # what varies: the actions that are not constant steps
    for e, run in enumerate(runs):
        n = max(1, len(run.actions) - 1)
        for k, act in enumerate(run.actions):
            if act.strip() not in constant:
                skel, values = abstract(act, run.reads[k], run.observations[k])
                rl, task = lines(run.reads[k]), _task(run.reads[k])
                obs = run.observations[k]
                _note(shapes, skel, e, k / n, values, rl, run.result(k), task, obs)
    steps: list[tuple[float, str]] = [(_mean(exact[a].positions), a) for a in constant]
    slots: dict[str, Any] = {}
    merged = _merge_picks(shapes, need)
    for skel, seen in merged.items():
        instances = seen.instances
        if len(seen.episodes) < need or "<" not in skel or not instances:
            continue
        rules = {"seen1": routes[skel]} if skel in routes else _rules(skel, instances)
        if rules is None:
            continue
        step, rules = _collapse(skel, rules, instances)
        if step in constant or step in slots:
            continue
        slots[step] = rules
        steps.append((_mean(seen.positions), step))
    steps.sort()
    return [s for _, s in steps], {s: slots[s] for _, s in steps if s in slots}


def _note(
    into: dict[str, _Seen],
    key: str,
    e: int,
    pos: float,
    values: list[str],
    rl: list[str],
    result: str,
    task: str,
    obs: str,
) -> None:
    seen = into.setdefault(key, _Seen(set(), [], []))
    if e not in seen.episodes:
        seen.positions.append(pos)
    seen.episodes.add(e)
    seen.instances.append((values, rl, result, task, obs))


def _routes(runs: Sequence[Run]) -> dict[str, dict[str, Any]]:
    """Shapes of one ``seen`` slot ("move <seen1>") whose uses headed for the task's
    places on the map read: shape -> its ``toward`` rule."""
    uses: dict[str, list[tuple[str, list[str], str, str]]] = defaultdict(list)
    for run in runs:
        for k, act in enumerate(run.actions):
            skel, values = abstract(act, run.reads[k], run.observations[k])
            if len(values) == 1 and skel.endswith("<seen1>") and skel.count("<") == 1:
                rl, task = lines(run.reads[k]), _task(run.reads[k])
                uses[skel].append((values[0], rl, task, run.observations[k]))
    return {s: r for s, u in uses.items() if (r := toward_rule(u)) is not None}


def _task(reads: Sequence[str]) -> str:
    """The task text: the first thing a run had read."""
    return reads[0].lower() if reads else ""


def _task_bound(skel: str, values: Sequence[str], task: str) -> bool:
    """True if every read slot of an abstracted action took a value the task text names."""
    kinds = [m.group(1) for m in _SLOT.finditer(skel)]
    return all(_has(task, v) for k, v in zip(kinds, values, strict=True) if k == "read")


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _merge_picks(shapes: dict[str, _Seen], need: float) -> dict[str, _Seen]:
    """Skeletons that differ in one constant word ("cook <read1> in oven" / "... toaster")
    and are too rare alone become one step with a ``pick`` slot there."""
    out = {k: v for k, v in shapes.items() if len(v.episodes) >= need}
    groups: dict[tuple[str, int], list[str]] = defaultdict(list)
    for skel in shapes:
        toks = skel.split()
        if not any(_SLOT.fullmatch(t) for t in toks):
            continue
        for p in range(1, len(toks)):
            if not _SLOT.fullmatch(toks[p]):
                groups[(" ".join([*toks[:p], "*", *toks[p + 1 :]]), p)].append(skel)
    for (wild, p), members in groups.items():
        if len(members) < 2:
            continue
        eps = set().union(*(shapes[m].episodes for m in members))
        if len(eps) < need:
            continue
        merged = _Seen(eps, [], [])
        for m in members:
            word = m.split()[p]
            merged.positions += shapes[m].positions
            merged.instances += [
                (_insert(wild, v, word), r, res, t, o) for v, r, res, t, o in shapes[m].instances
            ]
            out.pop(m, None)
        out[wild.replace("*", "<pick1>")] = merged
    return out


def _insert(wild: str, values: list[str], word: str) -> list[str]:
    """Values in token order with the picked word placed where the wildcard is."""
    out, it = [], iter(values)
    for t in wild.split():
        if t == "*":
            out.append(word)
        elif _SLOT.fullmatch(t):
            out.append(next(it))
    return out


def _rules(skel: str, instances: list[_Instance]) -> dict[str, Any] | None:
    names = [m.group(0)[1:-1] for m in _SLOT.finditer(skel)]
    rules: dict[str, Any] = {}
    read = next((n for n in names if n.startswith("read")), None)
    seen = next((n for n in names if n.startswith("seen")), None)
    for n in names:
        if n.startswith(("read", "seen")):
            rules[n] = {"fill": n.rstrip("0123456789")}
            k = names.index(n)
            if n.startswith("read") and not any(_has(t, vals[k]) for vals, _, _, t, _ in instances):
                # Every value came from a text read after the task (the recipe's
                # ingredients, never the cookbook the task names): so must the next one.
                rules[n]["beyond_task"] = True
        elif n.startswith("head"):
            if read is None:
                return None
            rules[n] = {"fill": "head", "of": read}
        else:
            of = read or seen
            if of is None:
                return None
            table: dict[str, Counter[str]] = defaultdict(Counter)
            for values, rl, result, _, _ in instances:
                v = dict(zip(names, values, strict=True))
                for key in _keys(of, v[of], rl, result):
                    table[key][v[n]] += 1
            rules[n] = {"fill": "pick", "of": of, "table": {k: dict(c) for k, c in table.items()}}
    _depend(names, rules, instances)
    return rules


def _depend(names: list[str], rules: dict[str, Any], instances: list[_Instance]) -> None:
    """A later ``seen`` slot whose value follows from another slot ("put <seen1> in
    <seen2>": each thing has its place; "cook <read1> in <seen1>": the recipe's verb picks
    the tool) becomes a ``pick`` keyed by that slot, whichever key predicts it best. A
    value seen alone (one tool so far) is kept as a pick too: the step then applies only
    where the key it was seen with comes back, not to everything in view."""
    for j, n in enumerate(names):
        if not n.startswith("seen") or j == 0:
            continue
        best: tuple[float, str, dict[str, Counter[str]]] | None = None
        for k, of in enumerate(names[:j]):
            if not of.startswith(("read", "seen")):
                continue
            table: dict[str, Counter[str]] = defaultdict(Counter)
            for values, rl, result, _, _ in instances:
                for key in _keys(of, values[k], rl, result):
                    table[key][values[j].lower()] += 1
            total = sum(sum(c.values()) for c in table.values())
            if not total:
                continue
            agree = sum(max(c.values()) for c in table.values()) / total
            if agree >= PURITY and (best is None or agree > best[0]):
                best = (agree, of, table)
        if best is not None:
            rules[n] = {
                "fill": "pick",
                "of": best[1],
                "table": {x: dict(c) for x, c in best[2].items()},
            }


def _keys(of: str, value: str, read_lines: Sequence[str], result: str = "") -> list[str]:
    """What a slot's value is looked up by: for a read value, the heads of the lines that
    mention it (narrowed, when the action's reply names some of them, to those: "You roast
    the red apple" says which of "slice"/"roast" the action carried out); for a seen value,
    the value itself."""
    if not of.startswith("read"):
        return [value.lower()]
    heads = _heads(read_lines, value)
    said = [h for h in heads if _has(result.lower(), h)]
    return said or heads


def _collapse(
    skel: str, rules: dict[str, Any], instances: list[_Instance]
) -> tuple[str, dict[str, Any]]:
    """A read/seen slot that always took the same value is a constant word again; for a
    read slot, only if the task text names it (recipes naming carrots say nothing of the
    next recipe)."""
    names = [m.group(0)[1:-1] for m in _SLOT.finditer(skel)]
    for idx, n in enumerate(names):
        vals = {v[idx].lower() for v, _, _, _, _ in instances}
        used_by = [r for r in rules.values() if r.get("of") == n]
        fixed = all(_has(t, v[idx].lower()) for v, _, _, t, _ in instances)
        if rules[n]["fill"] == "read" and not fixed:
            continue
        if len(vals) == 1 and rules[n]["fill"] in ("read", "seen") and not used_by:
            skel = skel.replace(f"<{n}>", instances[0][0][idx], 1)
            del rules[n]
    return skel, rules


def bind(
    step: str,
    rules: Mapping[str, Any],
    valid: Sequence[str],
    reads: Sequence[str],
    observation: str,
) -> list[str]:
    """The valid actions this step allows now, in the order given."""
    return bind_ranked(step, rules, valid, reads, observation)[0]


#: How a pick slot guesses a value for a key its table lacks, best first (see :func:`guess`).
GUESSES = ("alike", "unclaimed", "meaning", "usual")


def bind_ranked(
    step: str,
    rules: Mapping[str, Any],
    valid: Sequence[str],
    reads: Sequence[str],
    observation: str,
    meaning: Meaning | None = None,
) -> tuple[list[str], str]:
    """As :func:`bind`, and how: ``"fits"`` (every slot rule holds), else the way a ``pick``
    slot guessed for a key its table lacks (one of :data:`GUESSES`; by ``meaning`` only if
    given), else ``""``."""
    if "<" not in step:
        exact = [a for a in valid if a == step]
        return exact, "fits" if exact else ""
    names = [m.group(0)[1:-1] for m in _SLOT.finditer(step)]
    pattern = _pattern(step)
    read_lines = lines(reads)
    read_text = "\n".join(read_lines)
    obs, task = observation.lower(), _task(reads)
    out: list[str] = []
    guessed: list[tuple[int, float, str]] = []  # (way, score, action)
    for action in valid:
        m = pattern.fullmatch(action)
        if m is None:
            continue
        v = dict(zip(names, m.groups(), strict=True))
        miss = [
            n for n in names if not _fits(n, v, rules.get(n, {}), read_lines, read_text, obs, task)
        ]
        if not miss:
            out.append(action)
        elif len(miss) == 1 and (how := _guess_here(miss[0], rules, v, read_lines, meaning)):
            guessed.append((*how, action))
    if out:
        return out, "fits"
    if not guessed:
        return [], ""
    # The best way any action was guessed by, then its best score: the value the most
    # alike keys took ("dirty mug" near "dirty saucepan": the dishwasher), else a value no
    # known key claimed, else the value most alike in meaning, else the value most keys took.
    way = min(w for w, _, _ in guessed)
    top = max(score for w, score, _ in guessed if w == way)
    return [a for w, score, a in guessed if w == way and score == top], GUESSES[way]


def _guess_here(
    n: str,
    rules: Mapping[str, Any],
    v: Mapping[str, str],
    read_lines: Sequence[str],
    meaning: Meaning | None,
) -> tuple[int, float] | None:
    rule = rules.get(n, {})
    of = str(rule.get("of", ""))
    return guess(rule, _keys(of, v.get(of, ""), read_lines), v[n], meaning)


def guess(
    rule: Mapping[str, Any], keys: Sequence[str], value: str, meaning: Meaning | None = None
) -> tuple[int, float] | None:
    """How a ``pick`` whose table has none of ``keys`` would guess ``value``: ``(way,
    score)``, ``way`` indexing :data:`GUESSES`: 0, the votes of alike keys (shared
    words); 1, a value no known key claimed where each value has a key of its own (see
    :func:`unclaimed`); 2, likeness in ``meaning`` (see :func:`meant`); 3, how many known
    things took it (see :func:`usual`). None if no way guesses it, or the table has a key."""
    if rule.get("fill") != "pick":
        return None
    if (vote := _votes(rule, keys).get(value.lower(), 0.0)) > 0:
        return 0, vote
    if unclaimed(rule, keys, value):
        return 1, 1.0
    if meaning is not None and (like := meant(rule, keys, value, meaning)) is not None:
        return 2, like
    if takers := usual(rule, keys, value):
        return 3, float(takers)
    return None


def meant(
    rule: Mapping[str, Any], keys: Sequence[str], value: str, meaning: Meaning
) -> float | None:
    """For a thing the table has never seen (a pick keyed by a seen value): how alike in
    meaning it is to ``value`` itself or to the nearest thing that took it ("golf shoes"
    is like "shoe cabinet", "dirty socks" like "dirty shirt" that went in the washing
    machine): a place is known by its name and by what went there, so one no thing took
    yet can be guessed too. None if the table has the thing, or for a pick keyed by what
    was read (a recipe's verb is no name of a thing: its likeness to a tool's name says
    little, and the wrong tool can ruin the dish)."""
    table: Mapping[str, Mapping[str, int]] = rule.get("table", {})
    if not str(rule.get("of", "")).startswith("seen"):
        return None
    if not keys or any(k in table for k in keys):
        return None
    went = [k for k, counts in table.items() if value.lower() in {v.lower() for v in counts}]
    return max(max(meaning.likeness(key, [value, *went])) for key in keys)


def _votes(rule: Mapping[str, Any], keys: Sequence[str]) -> dict[str, float]:
    """Per value, how much the table's keys that share words with ``keys`` vote for it
    (nothing if the table has one of ``keys``)."""
    table: Mapping[str, Mapping[str, int]] = rule.get("table", {})
    if not keys or any(k in table for k in keys):
        return {}
    mine = {w for k in keys for w in k.split() if w not in STOP}
    votes: dict[str, float] = defaultdict(float)
    for key, counts in table.items():
        theirs = {w for w in key.split() if w not in STOP}
        shared = len(mine & theirs) / len(mine | theirs) if mine | theirs else 0.0
        if shared:
            total = sum(counts.values())
            for value, c in counts.items():
                votes[value.lower()] += shared * c / total
    return dict(votes)


def sought(
    step: str,
    rules: Mapping[str, Any],
    valid: Sequence[str],
    reads: Sequence[str],
    observation: str,
    meaning: Meaning | None = None,
) -> list[str]:
    """Values a ``pick`` slot of ``step`` wants for the things here that no valid action
    of the step offers yet, though some other valid action names them whole ("open
    dishwasher": where the table says the plate goes is still closed): for each thing,
    its value by the table, or its best guess (see :func:`guess`) among those in view."""
    names = [m.group(0)[1:-1] for m in _SLOT.finditer(step)]
    if not names:
        return []
    pattern = _pattern(step)
    read_lines = lines(reads)
    offered: dict[tuple[str, str], set[str]] = defaultdict(set)
    for action in valid:
        m = pattern.fullmatch(action)
        if m is None:
            continue
        v = dict(zip(names, m.groups(), strict=True))
        for n in names:
            rule = rules.get(n, {})
            if rule.get("fill") == "pick" and rule.get("of") in v:
                offered[(n, v[str(rule["of"])])].add(v[n].lower())
    # What other actions act on as a whole ("open dishwasher" -> "dishwasher").
    named = {a.split(" ", 1)[1].lower() for a in valid if " " in a and not pattern.fullmatch(a)}
    in_view = named.union(*offered.values())
    out = []
    for (n, key_value), values in offered.items():
        rule = rules[n]
        keys = _keys(str(rule["of"]), key_value, read_lines)
        here = _values(rule) & in_view
        best = pick(rule, keys)
        if best is None:
            ranked = {v: how for v in here if (how := guess(rule, keys, v, meaning)) is not None}
            if ranked:
                top = min(ranked.values(), key=lambda how: (how[0], -how[1]))
                wanted = sorted(v for v, how in ranked.items() if how == top)
                if not values.intersection(wanted):  # else the guess can take it now
                    out += [v for v in wanted if v in named and v not in out]
        elif best in named and best not in values and best not in out:
            out.append(best)
    return out


def _pattern(step: str) -> re.Pattern[str]:
    """A regex matching the actions of a templated step, one group per slot."""
    parts = re.split(r"(<\w+>)", step)
    return re.compile("".join("(.+?)" if _SLOT.fullmatch(t) else re.escape(t) for t in parts), re.I)


def _values(rule: Mapping[str, Any]) -> set[str]:
    return {v.lower() for counts in rule.get("table", {}).values() for v in counts}


def _fits(
    n: str,
    v: Mapping[str, str],
    rule: Mapping[str, Any],
    read_lines: Sequence[str],
    read_text: str,
    obs: str,
    task: str,
) -> bool:
    fill, value = rule.get("fill"), v[n]
    if fill == "read":
        return _has(read_text, value) and not (rule.get("beyond_task") and _has(task, value))
    if fill == "seen":
        return True  # a valid action only names what the agent can see or holds
    if fill == "toward":
        return fits_toward(rule, value, read_lines, task, obs)
    of = str(rule.get("of", ""))
    if fill == "head":
        return value.lower() in _heads(read_lines, v.get(of, ""))
    if fill == "pick":
        keys = _keys(of, v.get(of, ""), read_lines)
        got = pick(rule, keys)
        return got == value.lower()
    return False


def unclaimed(rule: Mapping[str, Any], keys: Sequence[str], value: str) -> bool:
    """For keys the table has never seen: True if the table pairs each value with one
    key of its own (one tool per cooking verb) and no key has claimed ``value`` yet, so a
    new key most likely takes a value not yet taken ("fry", never seen, is the stove when
    roast is the oven and grill the toaster)."""
    table: Mapping[str, Mapping[str, int]] = rule.get("table", {})
    if not keys or any(k in table for k in keys) or not table:
        return False
    owner: dict[str, str] = {}
    for key, counts in table.items():
        for val in counts:
            if owner.setdefault(val.lower(), key) != key:
                return False  # a value shared by keys: no one-to-one pairing
    return value.lower() not in owner


def pooled(rule_sets: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One step's slot rules from several plans, each ``pick`` table the sum of theirs
    for the same key slot (what every skill and episode saw of where things go); the
    first plan's rule for anything else."""
    out: dict[str, Any] = {}
    for rules in rule_sets:
        for name, rule in rules.items():
            mine = out.get(name)
            if mine is None:
                out[name] = dict(rule)
                continue
            if rule.get("fill") != "pick" or mine.get("fill") != "pick":
                continue
            if mine.get("of") != rule.get("of"):
                continue
            table = {k: dict(c) for k, c in mine.get("table", {}).items()}
            for key, counts in rule.get("table", {}).items():
                for value, n in counts.items():
                    table.setdefault(key, {})
                    table[key][value] = table[key].get(value, 0) + n
            out[name] = {**mine, "table": table}
    return out


def usual(rule: Mapping[str, Any], keys: Sequence[str], value: str) -> int:
    """For a thing the table has never seen (a pick keyed by a seen value, the thing
    itself): how many known things took ``value``, where the table shares values among
    keys (many things go in the wardrobe), so a new thing most likely goes where many
    went; 0 for a one-to-one table (see :func:`unclaimed`), a value no key took, or a
    pick keyed by what was read (a recipe's verb: a tool that serves two verbs says
    nothing of a third, and the wrong tool can ruin the dish)."""
    table: Mapping[str, Mapping[str, int]] = rule.get("table", {})
    if not str(rule.get("of", "")).startswith("seen"):
        return 0
    if not keys or any(k in table for k in keys) or not table:
        return 0
    takers: Counter[str] = Counter(val.lower() for counts in table.values() for val in counts)
    if max(takers.values(), default=0) < 2:
        return 0  # one key per value: no value is usual
    return takers[value.lower()]


def pick(rule: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The value the learned table gives for the most decisive of ``keys``."""
    table: Mapping[str, Mapping[str, int]] = rule.get("table", {})
    best: tuple[float, int, str] | None = None
    for key in keys:
        counts = table.get(key)
        if not counts:
            continue
        value, n = max(counts.items(), key=lambda kv: kv[1])
        share = n / sum(counts.values())
        if share >= PURITY and (best is None or (share, n) > best[:2]):
            best = (share, n, value.lower())
    return best[2] if best else None


def episode_run(
    node: Node, *, only_ending: tuple[str, ...] = (), whole: bool = False
) -> Run | None:
    """An episode's trajectory with what the agent had read before each action (the task
    and the documents read earlier, or every earlier observation if it named none), the
    observation it acted on and what each action got back, if it recorded them.

    An episode that recorded which of its actions mattered (``relevant``: the ones that
    scored and the ones that made those possible) gives only those, unless ``whole``;
    otherwise ``only_ending`` keeps only the actions whose reply ends with one of those
    texts (and the actions that read a document)."""
    acts = [str(a) for a in node.data.get("trajectory", [])]
    obs = [str(o) for o in node.data.get("observations", [])]
    if not acts or len(obs) != len(acts):
        return None
    task = str(node.data.get("task", node.text))
    docs = [str(r) for r in node.data.get("reads", [])]
    docs = docs if len(docs) == len(acts) else obs  # no documents named: all it saw
    reads = [[task, *filter(None, docs[:k])] for k in range(len(acts))]
    # What the agent had seen before each action: the task and every earlier observation.
    before = ["\n".join([task, *obs[:k]]) for k in range(len(acts))]
    relevant = node.data.get("relevant")
    if isinstance(relevant, list) and not whole:
        keep = sorted({int(k) for k in relevant if isinstance(k, int) and 0 <= k < len(acts)})
    else:
        keep = [
            k
            for k in range(len(acts))
            if whole
            or not only_ending
            or obs[k].endswith(only_ending)
            or (docs is not obs and docs[k])
        ]
    if not keep:
        return None
    return Run(
        [acts[k] for k in keep],
        [reads[k] for k in keep],
        [before[k] for k in keep],
        [obs[k] for k in keep],
    )


def signature(action: str, reads: Sequence[str], observation: str) -> tuple[str, list[set[str]]]:
    """An action's shape and, per slot, what it is keyed by (see :func:`_keys`): "cook
    carrot in stove" after a recipe saying "fry the carrot" -> ("cook <read1> in <seen1>",
    [{"fry"}, {"stove"}]). A read value no read line verbs on keys by itself."""
    skel, values = abstract(action, reads, observation)
    names = [m.group(1) for m in _SLOT.finditer(skel)]
    read_lines = lines(reads)
    keys = []
    for kind, value in zip(names, values, strict=True):
        found = _keys(kind, value, read_lines) if kind == "read" else []
        keys.append(set(found) or {value.lower()})
    return skel, keys


@dataclass
class Outcomes:
    """What actions of a given shape led to, keyed by what their slots were keyed by: a
    memory of what helps and what harms that depends on the state ("cook <read1> in
    stove" ended the game where the recipe said "grill", and scored where it said "fry"),
    and of what was done often to no effect."""

    bad: dict[str, list[list[set[str]]]]
    good: dict[str, list[list[set[str]]]]
    idle: Counter[str]
    # Per shape, worked out once (an Outcomes is built whole, by :meth:`of`): the keys
    # that tell nothing per slot, and the harming and helping entries without them.
    _told: dict[str, _Told] = field(default_factory=dict, repr=False)

    #: Times a shape must have been taken to no effect (and never helped) to count as idle.
    IDLE = 3

    @classmethod
    def of(cls, runs: Iterable[tuple[Run, Sequence[bool | None]]]) -> Outcomes:
        """From runs with, per action, True (it helped), False (it harmed) or None."""
        out = cls({}, {}, Counter())
        for run, verdicts in runs:
            for k, verdict in enumerate(verdicts):
                skel, keys = signature(run.actions[k], run.reads[k], run.observations[k])
                if verdict is None:
                    out.idle[skel] += 1
                else:
                    (out.good if verdict else out.bad).setdefault(skel, []).append(keys)
        return out

    def harmful(self, action: str, reads: Sequence[str], observation: str) -> bool:
        """True if an action of this shape harmed in a state like this one (each slot's
        telling keys overlap, see :meth:`telling`) and never helped in such a state."""
        skel, keys = signature(action, reads, observation)
        told = self._told_of(skel)
        keys = _without(keys, told.mute)
        return any(_like(b, keys) for b in told.bad) and not any(_like(g, keys) for g in told.good)

    def promise(self, action: str, reads: Sequence[str], observation: str) -> int:
        """2 if the shape helped in a like state, 0 if it was taken often to no effect and
        never helped, else 1 (not known)."""
        skel, keys = signature(action, reads, observation)
        told = self._told_of(skel)
        keys = _without(keys, told.mute)
        if any(_like(g, keys) for g in told.good):
            return 2
        if self.idle[skel] >= self.IDLE and skel not in self.good:
            return 0
        return 1

    def telling(self, skel: str, keys: list[set[str]]) -> list[set[str]]:
        """``keys`` without, per slot, those that say nothing of what this shape leads to,
        unless nothing else is left there: a key that both helped and harmed alongside the
        same keys of the other slots. A recipe saying "slice" is said of what was then
        roasted in the oven (it scored) and grilled in the oven (the game ended): "slice"
        does not tell the oven's outcome, "roast" and "grill" do."""
        return _without(keys, self._told_of(skel).mute)

    def _told_of(self, skel: str) -> _Told:
        told = self._told.get(skel)
        if told is None:
            good, bad = self.good.get(skel, []), self.bad.get(skel, [])
            mute = _mute(good, bad)
            told = _Told(mute, [_without(b, mute) for b in bad], [_without(g, mute) for g in good])
            self._told[skel] = told
        return told


@dataclass(frozen=True)
class _Told:
    mute: list[set[str]]
    bad: list[list[set[str]]]
    good: list[list[set[str]]]


def _without(keys: list[set[str]], mute: list[set[str]]) -> list[set[str]]:
    """``keys`` less the ``mute`` ones per slot, unless nothing else is left there."""
    if len(mute) != len(keys):
        return keys
    return [(k - m) or k for k, m in zip(keys, mute, strict=True)]


def _mute(good: list[list[set[str]]], bad: list[list[set[str]]]) -> list[set[str]]:
    """Per slot, the keys seen in a helping and a harming entry whose other slots had the
    same keys (see :meth:`Outcomes.telling`); none where entries differ in width."""
    width = {len(e) for e in (*good, *bad)}
    if len(width) != 1:
        return []
    (n,) = width

    def contexts(
        entries: list[list[set[str]]], i: int, key: str
    ) -> set[tuple[frozenset[str], ...]]:
        return {tuple(frozenset(e[j]) for j in range(n) if j != i) for e in entries if key in e[i]}

    out: list[set[str]] = []
    for i in range(n):
        both = {k for e in good for k in e[i]} & {k for e in bad for k in e[i]}
        out.append({k for k in both if contexts(good, i, k) & contexts(bad, i, k)})
    return out


def _like(seen: list[set[str]], keys: list[set[str]]) -> bool:
    return len(seen) == len(keys) and all(a & b for a, b in zip(seen, keys, strict=True))
