"""Evidence from several places: re-rankings applied between fusion and budget packing.

A question about a person ("What books has Melanie read?") is answered by many turns of that
person spread over many sessions, while the nearest turns cluster in one conversation and
are often the *other* speaker saying the name. Two general re-rankings address that:

- **speaker focus**: when the query names a speaker of the candidate memories, the same
  query is searched again among that speaker's memories only, and that ranking is fused with
  the first one, so the person's own turns rise;
- **topic diversity**: each further memory from a topic (a segment of one session) already
  chosen counts for less, so the packed set covers more sessions within the same budget.

Both only re-order candidates the indexes returned: nothing is invented, nothing dropped.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence

from lightmem.lang import WORD_RE
from lightmem.store.base import ScoredId
from lightmem.types import MemoryEntry


def named_speakers(query: str, entries: Iterable[MemoryEntry]) -> list[str]:
    """Speakers of ``entries`` that ``query`` names, by full name or first name, with or
    without a possessive ("Melanie's"); in the order the entries rank them."""
    said = [without_possessive(w) for w in WORD_RE.findall(query.lower())]
    said_set, said_text = set(said), f" {' '.join(said)} "
    found: list[str] = []
    for e in entries:
        name = e.speaker
        parts = WORD_RE.findall(name.lower())
        if not parts or name in found:
            continue
        full = " ".join(parts)
        if (len(parts) > 1 and f" {full} " in said_text) or (
            len(parts[0]) > 1 and parts[0] in said_set
        ):
            found.append(name)
    return found


def without_possessive(word: str) -> str:
    """A word without its possessive ending ("melanie's" -> "melanie")."""
    for tail in ("'s", "’s"):
        if word.endswith(tail):
            return word[: -len(tail)]
    return word


def diversify(
    ranked: Sequence[ScoredId], group_of: Mapping[str, str], penalty: float
) -> list[ScoredId]:
    """``ranked`` re-ordered greedily so that each memory's score is divided by ``1 +
    penalty * n``, n being how many memories of its group were placed before it. Scores
    returned are the divided ones; ids without a group are never penalised."""
    if penalty <= 0 or len(ranked) < 2:
        return list(ranked)
    placed: dict[str, int] = {}
    # (-score, position, id, count of its group when the score was computed)
    heap = [(-s, i, eid, 0) for i, (eid, s) in enumerate(ranked)]
    heapq.heapify(heap)
    base = dict(ranked)
    out: list[ScoredId] = []
    while heap:
        neg, pos, eid, seen = heapq.heappop(heap)
        group = group_of.get(eid)
        now = placed.get(group, 0) if group is not None else 0
        if now != seen:  # its group gained members since: rescore and put back
            heapq.heappush(heap, (-base[eid] / (1 + penalty * now), pos, eid, now))
            continue
        out.append((eid, -neg))
        if group is not None:
            placed[group] = now + 1
    return out
