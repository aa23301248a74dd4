"""Routes: ``toward`` slots, whose value is the way to a place the task names, found on the
map the agent read in this game (never a room or exit of another game).

A map is a group of read lines sharing a linking word ("the chamber connects to the study,
parlor and cupboard"): the place before that word is linked to each place listed after it.
An exit is a phrase of an action ("west" in "move west") that a sentence of the latest
scene description pairs with a place of the map ("to the west you see the playroom").
A ``toward`` rule says which of the task's places (by order of mention) the successful runs
headed for at each point of progress (how often the game had said the score went up);
it binds the exits whose place is nearer to that target than the place the agent is in.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "PROGRESS",
    "PURITY",
    "STOP",
    "fits_toward",
    "heads_for",
    "places",
    "progress",
    "targets",
    "toward_rule",
]

#: Words a step or a direction shares with anything: no match on them.
STOP = frozenset("a an the in on to of with from into at and or for is it".split())
_SENT = re.compile(r"(?<=[.:;!?])\s+")
_LIST = re.compile(r",\s*|\s+and\s+")
#: The plain-text verdict that marks progress in a run's observations.
PROGRESS = "your score went up"
#: Least share of a progress point's moves that must head for one target.
PURITY = 0.75


def places(read_lines: Sequence[str]) -> dict[str, set[str]]:
    """The map in ``read_lines``: place -> linked places (both ways)."""
    df: Counter[str] = Counter()
    for ln in read_lines:
        df.update({w for w in re.findall(r"[a-z-]+", ln) if w not in STOP})
    for pivot, n in sorted(df.items(), key=lambda kv: (-kv[1], kv[0])):
        if n < 3:
            break
        links: dict[str, set[str]] = defaultdict(set)
        parsed = 0
        for ln in read_lines:
            head, sep, tail = ln.partition(f" {pivot} ")
            if not sep:
                continue
            a = _phrase(head)
            listed = [_phrase(x) for x in _LIST.split(tail.rstrip(" .;!?"))]
            if not a or not listed or not all(listed):
                break
            parsed += 1
            for b in listed:
                if b != a:
                    links[a].add(b)
                    links[b].add(a)
        else:
            if parsed >= 3:
                return dict(links)
    return {}


def _phrase(text: str) -> str:
    words = [w for w in text.strip(" .,;:").split()]
    while words and words[0] in STOP:
        words = words[1:]
    while words and words[-1] in STOP:
        words = words[:-1]
    return " ".join(words) if 0 < len(words) <= 3 else ""


def _in(sentence: str, place: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(place)}(?![\w-])", sentence) is not None


def _scene(observation: str, value: str, graph: Mapping[str, set[str]]) -> tuple[str, str] | None:
    """(the place the agent is in, the place ``value`` leads to), from the latest scene
    description in ``observation``: a line whose sentences name one place each (a map
    names several in one)."""
    v = value.lower()
    for line in reversed(observation.lower().split("\n")):
        named = [(s, [p for p in graph if _in(s, p)]) for s in _SENT.split(line)]
        named = [(s, ps) for s, ps in named if ps]
        if not named or any(len(ps) > 1 for _, ps in named):
            continue
        to = [ps[0] for s, ps in named if _in(s, v)]
        here = [ps[0] for s, ps in named if not _in(s, v)]
        return (here[0], to[0]) if to and here else None
    return None


def _distances(graph: Mapping[str, set[str]], start: str) -> dict[str, int]:
    out, todo = {start: 0}, deque([start])
    while todo:
        p = todo.popleft()
        for q in graph.get(p, ()):
            if q not in out:
                out[q] = out[p] + 1
                todo.append(q)
    return out


def targets(task: str, graph: Mapping[str, set[str]]) -> list[str]:
    """The map's places the task names, in the order it names them."""
    t = task.lower()
    found = [(m.start(), p) for p in graph if (m := re.search(rf"\b{re.escape(p)}\b", t))]
    return [p for _, p in sorted(found)]


def progress(observation: str) -> int:
    return observation.lower().count(PROGRESS)


def heads_for(value: str, read_lines: Sequence[str], task: str, observation: str) -> list[int]:
    """Indices (into :func:`targets`) of the task's places the exit ``value`` brings the
    agent nearer to."""
    graph = places(read_lines)
    scene = _scene(observation, value, graph) if graph else None
    if scene is None:
        return []
    here, to = scene
    out = []
    for i, target in enumerate(targets(task, graph)):
        dist = _distances(graph, target)
        if to in dist and here in dist and dist[to] < dist[here]:
            out.append(i)
    return out


def toward_rule(instances: Sequence[tuple[str, Sequence[str], str, str]]) -> dict[str, Any] | None:
    """A ``toward`` rule from ``(value, read lines, task, observation)`` instances of one
    slot, if at each point of progress most of them headed for one task place."""
    table: dict[str, Counter[str]] = defaultdict(Counter)
    uses: Counter[str] = Counter()
    for value, rl, task, obs in instances:
        key = str(progress(obs))
        uses[key] += 1
        table[key].update(str(i) for i in heads_for(value, rl, task, obs))
    if not table or sum(uses.values()) < 2:
        return None
    for key, n in uses.items():
        counts = table.get(key)
        if not counts or max(counts.values()) < PURITY * n:
            return None
    return {"fill": "toward", "table": {k: dict(c) for k, c in table.items()}}


def fits_toward(
    rule: Mapping[str, Any], value: str, read_lines: Sequence[str], task: str, observation: str
) -> bool:
    """True if the exit ``value`` heads for the place the rule's table gives now."""
    counts: Mapping[str, int] = rule.get("table", {}).get(str(progress(observation)), {})
    if not counts:
        return False
    want = max(counts.items(), key=lambda kv: kv[1])[0]
    return int(want) in heads_for(value, read_lines, task, observation)
