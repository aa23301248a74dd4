"""Offline update: find overlapping entries, then merge, update or delete them."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder
from lightmem.errors import InvalidInputError, NotFoundError
from lightmem.ledger import UsageRecord
from lightmem.pipeline import statements
from lightmem.pipeline.provisional import extracted_vectors
from lightmem.pipeline.supersede import Detector, DetectorRules
from lightmem.pipeline.update_checks import DECIDE, REVIEW, checks_key, item_digest
from lightmem.pipeline.update_reach import earlier_mask, review_floors
from lightmem.store.base import MemoryStore, ScoredId
from lightmem.store.provisional import is_provisional
from lightmem.text import content_terms
from lightmem.types import Filters, MemoryEntry, Scope

__all__ = [
    "MAX_KEEP_TOP_N",
    "MAX_TOP_K",
    "ONLINE_QUEUE_N",
    "REVIEW_K",
    "STEP_CHARS",
    "OfflineUpdater",
    "Signed",
    "UpdateAction",
    "UpdateItem",
    "UpdateReport",
    "Updater",
    "build_queue",
    "chronological",
    "in_time_order",
    "nearest_earlier",
    "nearest_stored",
    "online_update",
    "restated",
    "run_update",
    "said_before",
    "scope_entries",
    "scope_queue",
    "scope_vectors",
    "updater_key",
]

log = logging.getLogger("lightmem.update")
_T = TypeVar("_T")

#: The memory text (stored, original and context) at which one step of a pass ends (a
#: batch of the update, a part of the review; the step's last item or group of newer
#: entries crosses it). A scope of everyday memories is one step; one of megabyte memories
#: is worked through a part at a time instead of read whole.
STEP_CHARS = 64_000_000
#: Entries read at a time where only when each was said is kept (the order of a pass), and
#: newer entries of the review read at a time (each with its candidates).
_TIMES_PAGE = 256
#: Queued entries whose recorded checks (:mod:`.update_checks`) are read at a time
_CHECKS_PAGE = 256
_REVIEW_GROUP = 8
#: Newer entries one review step holds at most: a pass with a deadline checks it between
#: steps, so a step is also short in time.
_REVIEW_STEP = 256


@dataclass(frozen=True, slots=True)
class UpdateAction:
    """``update``: replace ``target_id``'s text and/or add sources; ``delete``: remove it;
    ``supersede``: mark it replaced by entry ``by`` (kept, never deleted); ``defer``: the
    updater could not decide about the newer entry ``target_id`` this time (a model's
    answer it had to drop), so the next pass shows it again."""

    op: Literal["update", "delete", "supersede", "defer"]
    target_id: str
    reason: str
    new_text: str | None = None
    add_source_ids: tuple[str, ...] = ()
    by: str = ""


@dataclass(frozen=True, slots=True)
class UpdateItem:
    """A newer entry and the earlier entries (with similarity) that may overlap it;
    ``decided``: in a review item, the ids among them that this pass already gave
    :meth:`Updater.decide` with this newer entry."""

    newer: MemoryEntry
    candidates: tuple[tuple[MemoryEntry, float], ...]
    decided: frozenset[str] = frozenset()


class Updater(Protocol):
    """Decides what to do with earlier entries that overlap newer ones.

    ``pairs_per_call``: how many (newer, earlier) pairs one :meth:`decide` call takes, so a
    model-backed updater is called once per batch, not once per pair. An updater that is
    also :class:`Signed` is not shown again what it was shown before unchanged.
    """

    name: str
    pairs_per_call: int

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]: ...

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        """Supersessions among ``items`` (newer entries oldest first, each with its nearest
        earlier entries whatever their similarity, see :func:`nearest_earlier`)."""


@runtime_checkable
class Signed(Protocol):
    """An updater that says what its decisions depend on besides the items (its model,
    its settings): while that ``signature`` (and lightmem's code) stays the same, an item
    it was shown before, unchanged, is not shown again (see :mod:`.update_checks`)."""

    @property
    def signature(self) -> str: ...


def updater_key(updater: Updater) -> str | None:
    """What the checks of ``updater``'s decisions are recorded under
    (:func:`~lightmem.pipeline.update_checks.checks_key`); None for an updater without a
    ``signature``: it is shown every item, and nothing is recorded."""
    return checks_key(updater.signature) if isinstance(updater, Signed) else None


#: Caps of ``top_k`` / ``keep_top_n``: the queue holds at most this many candidates per entry,
#: so its size (and the update work it causes) grows linearly with the number of entries.
MAX_TOP_K = 100
MAX_KEEP_TOP_N = 100
#: Earlier entries the supersession review compares each newer entry with (its nearest by
#: cosine in the same scope): the review's work per entry is bounded by this, offline and
#: online alike, whatever the size of the scope.
REVIEW_K = 24
#: Candidates kept in the update queue for an entry the online update stores.
ONLINE_QUEUE_N = 10


def build_queue(
    ids: Sequence[str],
    matrix: npt.NDArray[np.float32],
    groups: Sequence[str],
    top_k: int,
    keep_top_n: int,
    block: int = 512,
    times: Sequence[float | None] | None = None,
    rows: Sequence[int] | None = None,
) -> dict[str, list[ScoredId]]:
    """For each entry (or each of ``rows``, by position), its most similar *earlier*
    entries of the same group (scope).

    ``ids``/``matrix`` rows are in insertion order; ``times`` (seconds, None for an entry
    without a timestamp) are when each was said (which is earlier: :func:`earlier_mask`).
    Work is done in numpy blocks, so 10k entries take well under a second; memory is
    O(block x n); the work grows with the entries asked for times all of them.
    """
    for name, value, cap in (
        ("top_k", top_k, MAX_TOP_K),
        ("keep_top_n", keep_top_n, MAX_KEEP_TOP_N),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
            raise InvalidInputError(f"{name}: expected an integer in [1, {cap}], got {value!r}")
    n = len(ids)
    if n == 0:
        return {}
    keep = min(top_k, keep_top_n)
    g = np.asarray(groups, dtype=object)
    t = np.array([np.nan if x is None else x for x in times or [None] * n], dtype=np.float64)
    if len(t) != n:
        raise InvalidInputError(f"times: expected {n} values (one per id), got {len(t)}")
    queue: dict[str, list[ScoredId]] = {}
    wanted = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64)
    for start in range(0, len(wanted), block):
        at = wanted[start : start + block]
        sims = matrix[at] @ matrix.T
        invalid = ~earlier_mask(at, t) | (g[None, :] != g[at, None])
        sims[invalid] = -np.inf
        kk = min(keep, n)
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        for r, i in enumerate(at):
            cand = [(int(j), float(sims[r, j])) for j in top[r] if np.isfinite(sims[r, j])]
            cand.sort(key=lambda x: -x[1])
            if cand:
                queue[ids[int(i)]] = [(ids[j], s) for j, s in cand]
    return queue


class OfflineUpdater:
    """Model-free update. An earlier entry by the same speaker whose content words are all
    (or nearly all, ``containment``) said again in a newer one, of the same subject and
    with the same polarity (see :func:`restated`), is a duplicate: it is deleted
    and its source ids move to the newer entry so no citation is lost. An earlier entry the
    newer one changes (see :class:`~lightmem.pipeline.supersede.Detector`) is superseded:
    kept, and marked replaced by it."""

    name = "offline"
    pairs_per_call = 10_000

    def __init__(
        self,
        embedder: Embedder | None = None,
        containment: float = 0.8,
        rules: DetectorRules | None = None,
    ) -> None:
        self.containment = containment
        #: the word likeness its detector uses (none: words alone)
        self.embedder_name = embedder.name if embedder else ""
        self.detector = Detector(
            (lambda texts: embedder.embed(texts, op="update.detect")) if embedder else None,
            rules,
        )

    @property
    def signature(self) -> str:
        return (
            f"offline containment={self.containment} rules={self.detector.rules} "
            f"embedder={self.embedder_name}"
        )

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        return [a for item in items for a in self._dedupe(item)]

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        found = self.detector.review(
            [it.newer for it in items], {it.newer.id: [e for e, _ in it.candidates] for it in items}
        ).found
        return [UpdateAction("supersede", f.old.id, f.reason, by=f.new.id) for f in found]

    def _dedupe(self, item: UpdateItem) -> list[UpdateAction]:
        newer = item.newer
        actions: list[UpdateAction] = []
        merged: list[str] = []
        for old, score in item.candidates:
            if old.speaker != newer.speaker or old.kind != "entry":
                continue
            overlap = restated(old, newer)
            if overlap >= self.containment:
                actions.append(
                    UpdateAction(
                        "delete",
                        old.id,
                        f"duplicate of {newer.id} (cosine {score:.2f}, overlap {overlap:.2f})",
                    )
                )
                merged.extend(s for s in old.source_ids if s not in newer.source_ids)
        if merged:
            actions.append(
                UpdateAction(
                    "update",
                    newer.id,
                    "merged sources of duplicates",
                    add_source_ids=tuple(dict.fromkeys(merged)),
                )
            )
        return actions


_Key = tuple[str, int, bool]


def _statements(entry: MemoryEntry, names: frozenset[str]) -> list[tuple[_Key, set[str]]]:
    """Each sentence of ``entry`` with its content words, keyed by what a restatement must
    keep: its subject, its number of negations and whether it asks."""
    out = []
    for sentence in statements.sentences(statements.opening(entry.original_text)):
        toks = statements.tokens(sentence.replace("\u2019", "'"))
        negations = sum(statements.is_negation(t) for t in toks)
        subject = statements.read(sentence, entry.speaker.lower(), names).subject
        out.append(((subject, negations, sentence.endswith("?")), set(content_terms(sentence))))
    return out


def restated(old: MemoryEntry, newer: MemoryEntry) -> float:
    """The share of ``old``'s content words that ``newer`` says again of the same subject
    with the same polarity (as many negations) and mood (asking or not), sentence by
    sentence: 1.0 for a true restatement, 0.0 for "My husband isn't vegetarian" after "I'm
    vegetarian" or "I don't eat meat anymore" after "I eat meat", however many words they
    share. Only a restatement may be deleted as a duplicate; any other overlap is left to
    the supersession review, which never deletes."""
    names = frozenset(n for n in (old.speaker.lower(), newer.speaker.lower()) if n)
    said: dict[_Key, set[str]] = {}
    for key, terms in _statements(newer, names):
        said.setdefault(key, set()).update(terms)
    total: set[str] = set()
    repeated: set[str] = set()
    for key, terms in _statements(old, names):
        total |= terms
        repeated |= terms & said.get(key, set())
    return len(repeated) / len(total) if total else 0.0


@dataclass(frozen=True, slots=True)
class UpdateReport:
    """What an offline update pass changed; ``rejected`` counts actions refused because
    they named an entry outside their batch."""

    examined: int
    updated: tuple[str, ...]
    deleted: tuple[str, ...]
    rejected: int = 0
    pairs: int = 0
    superseded: tuple[str, ...] = ()
    #: (newer, earlier) pairs the supersession review compared: at most ``REVIEW_K`` per
    #: newer entry reviewed
    reviewed: int = 0
    #: False when the pass stopped at its deadline: what it did stands, the rest was not
    #: looked at
    complete: bool = True
    #: items not given to the updater: shown to it before, unchanged (a decide item or a
    #: newer entry of the review; see :mod:`lightmem.pipeline.update_checks`)
    skipped: int = 0
    #: newer entries the updater could not decide about (``defer``): shown again next pass
    deferred: tuple[str, ...] = ()

    def then(self, later: UpdateReport) -> UpdateReport:
        """This report and that of a ``later`` pass as one (complete as the later one)."""
        return UpdateReport(
            self.examined + later.examined,
            tuple(dict.fromkeys((*self.updated, *later.updated))),
            tuple(sorted({*self.deleted, *later.deleted})),
            self.rejected + later.rejected,
            self.pairs + later.pairs,
            (*self.superseded, *later.superseded),
            self.reviewed + later.reviewed,
            complete=later.complete,
            skipped=self.skipped + later.skipped,
            deferred=tuple(sorted({*self.deferred, *later.deferred})),
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "complete": self.complete,
            "examined": self.examined,
            "skipped": self.skipped,
            "pairs": self.pairs,
            "reviewed": self.reviewed,
            "updated": list(self.updated),
            "deleted": list(self.deleted),
            "superseded": list(self.superseded),
            "deferred": list(self.deferred),
            "rejected": self.rejected,
        }


def run_update(
    store: MemoryStore,
    embedder: Embedder,
    updater: Updater,
    scope: Scope,
    score_threshold: float,
    only: Sequence[str] | None = None,
    nearest: Mapping[str, Sequence[ScoredId]] | None = None,
    step_chars: int = STEP_CHARS,
    deadline: float | None = None,
    recheck: bool = False,
    queue: Mapping[str, Sequence[ScoredId]] | None = None,
) -> UpdateReport:
    """Apply ``updater`` to every queued entry (or to ``only``) and its candidates above
    ``score_threshold``, newest first, in batches of ``updater.pairs_per_call`` pairs.
    An action may only touch an entry of its own batch; others are refused and counted.
    Then review supersessions of those entries against their ``nearest`` earlier entries
    (by id, oldest first; computed over the scope when not given). A step (a batch, a
    part of the review) ends once it holds ``step_chars`` of memory text. ``deadline``
    (``time.monotonic()``): past it no further step starts, and the report says
    ``complete=False``. An item the updater was shown before, unchanged, is skipped
    (see :mod:`.update_checks`), so a pass stopped at its deadline resumes where it
    stopped; ``recheck`` shows every item again. A pass that built the neighbours itself
    marks the entries each review step brought up to date (a caller that gives them marks
    its own: :mod:`.update_pending`). ``queue``: the rows to use instead of the scope's
    stored queue."""
    if queue is None:
        queue = store.load_update_queue(scope)
    targets = [t for t in (only if only is not None else list(queue)) if t in queue]
    state = _UpdateState(updater_key(updater), recheck, marks=nearest is None, queue=queue)
    batch: list[UpdateItem] = []
    pairs = held = 0
    order = targets[::-1]  # newest first: it absorbs its older duplicates
    for start in range(0, len(order), _CHECKS_PAGE):
        if state.past(deadline):
            break
        page = order[start : start + _CHECKS_PAGE]
        asked = state.asked(store, DECIDE, page)
        for target_id in page:
            if state.past(deadline):
                break
            item = _item(store, queue[target_id], target_id, score_threshold, state.deleted)
            if item is None:
                continue
            if state.known(item, asked):
                state.decided_with(item)  # as in the pass that decided it
                continue
            batch.append(item)
            pairs += len(item.candidates)
            held += item.newer.chars + sum(e.chars for e, _ in item.candidates)
            if pairs >= updater.pairs_per_call or held >= step_chars:
                _apply(store, embedder, updater, batch, state)
                batch, pairs, held = [], 0, 0
    if batch:
        _apply(store, embedder, updater, batch, state)
    if nearest is None and not state.past(deadline):
        state.view_at = datetime.now(UTC).timestamp()  # the vectors are read after it
        nearest = nearest_earlier(store, scope, only)
    if nearest is not None:
        _review(store, updater, nearest, state, step_chars, deadline)
    # the review's work in the usage ledger (items: pairs compared); calls=0: a model the
    # updater asks accounts its own calls
    embedder.ledger.record(UsageRecord("update", "review", calls=0, items=state.reviewed))
    return UpdateReport(
        state.examined,
        tuple(dict.fromkeys(state.updated)),
        tuple(sorted(state.deleted)),
        state.rejected,
        state.pairs,
        tuple(state.superseded),
        state.reviewed,
        complete=not state.stopped,
        skipped=state.skipped,
        deferred=tuple(sorted(state.deferred)),
    )


@dataclass
class _UpdateState:
    #: what the updater's decisions depend on besides the items (:func:`checks_key`);
    #: None: an updater that does not say (every item is shown, nothing is recorded)
    key: str | None
    #: show every item to the updater, even one it was shown before unchanged
    recheck: bool = False
    #: the review's neighbours are each entry's whole review (built over the scope here):
    #: mark the entries it brought up to date (see :meth:`mark`)
    marks: bool = False
    #: the pass's queue rows (what the decide stage shows each newer entry)
    queue: Mapping[str, Sequence[ScoredId]] = field(default_factory=dict)
    #: when the review's view of the store was taken (epoch seconds)
    view_at: float = 0.0
    examined: int = 0
    skipped: int = 0
    pairs: int = 0
    rejected: int = 0
    reviewed: int = 0
    updated: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    #: entries another writer deleted while this pass ran (acted on no more)
    vanished: set[str] = field(default_factory=set)
    superseded: list[str] = field(default_factory=list)
    deferred: set[str] = field(default_factory=set)
    #: newer id -> the earlier ids given to ``decide`` with it
    decided: dict[str, set[str]] = field(default_factory=dict)
    stopped: bool = False  # at the deadline

    def asked(self, store: MemoryStore, stage: str, ids: Sequence[str]) -> dict[str, str]:
        """The digests recorded at ``stage`` for ``ids`` (none when rechecking)."""
        return {} if self.recheck or self.key is None else store.load_update_checks(stage, ids)

    def known(self, item: UpdateItem, asked: Mapping[str, str]) -> bool:
        """True (and counted skipped) when ``item`` is what its newer entry's recorded
        digest says the updater was shown."""
        if self.key is None or asked.get(item.newer.id) != self.digest(item):
            return False
        self.skipped += 1
        return True

    def digest(self, item: UpdateItem) -> str:
        assert self.key is not None  # only items of a signed updater are recorded
        return item_digest(self.key, item.newer, (e for e, _ in item.candidates), item.decided)

    def decided_with(self, item: UpdateItem) -> None:
        """Note that ``item``'s pairs were given to ``decide`` (the review leaves them)."""
        self.decided.setdefault(item.newer.id, set()).update(e.id for e, _ in item.candidates)

    def record(
        self, store: MemoryStore, stage: str, items: Sequence[UpdateItem], deferred: set[str]
    ) -> None:
        """Record that the updater was shown ``items`` (their digests as shown), but those
        whose newer entry it deferred."""
        self.deferred |= deferred
        if self.key is None:
            return
        shown = {it.newer.id: self.digest(it) for it in items if it.newer.id not in deferred}
        store.save_update_checks(stage, shown)

    def mark(
        self, store: MemoryStore, newer: Sequence[str], nearest: Mapping[str, Sequence[ScoredId]]
    ) -> None:
        """Mark the ``newer`` entries a review step brought up to date (their review was
        their whole ``nearest``), with the floor of each one's review
        (:func:`~lightmem.pipeline.update_reach.review_floor`)."""
        if self.key is None or not self.marks:
            return
        gone = self.deleted | self.vanished | self.deferred
        # not one without a queue row but with earlier entries: a queue built before it was
        # stored, so its decide stage has not run (the bounded update runs both stages)
        kept = [i for i in newer if i not in gone and (i in self.queue or not nearest[i])]
        floors = review_floors(kept, nearest, REVIEW_K)
        # a queue row longer than the review: an earlier entry further than the review's
        # last may still join the decide stage, so any may
        floors.update((i, None) for i in kept if len(self.queue.get(i, ())) > REVIEW_K)
        store.mark_update_checked(REVIEW, self.key, floors, self.view_at)

    def past(self, deadline: float | None) -> bool:
        """True (and stopped) once ``deadline`` (``time.monotonic()``) has passed."""
        if deadline is not None and not self.stopped and time.monotonic() > deadline:
            self.stopped = True
        return self.stopped


def _item(
    store: MemoryStore,
    cands: Sequence[ScoredId],
    target_id: str,
    threshold: float,
    deleted: set[str],
) -> UpdateItem | None:
    if target_id in deleted:
        return None
    cand_ids = [c for c, s in cands if s >= threshold and c not in deleted and c != target_id]
    if not cand_ids:
        return None
    found = store.get_entries([target_id, *cand_ids])
    newer = found.get(target_id)
    if newer is None:
        return None
    scores = dict(cands)
    pairs = tuple((found[c], scores[c]) for c in cand_ids if c in found)
    return UpdateItem(newer, pairs) if pairs else None


def _apply(
    store: MemoryStore,
    embedder: Embedder,
    updater: Updater,
    batch: Sequence[UpdateItem],
    state: _UpdateState,
) -> None:
    state.examined += len(batch)
    state.pairs += sum(len(item.candidates) for item in batch)
    current: dict[str, MemoryEntry] = {}
    for item in batch:
        state.decided_with(item)
        current[item.newer.id] = item.newer
        current.update((e.id, e) for e, _ in item.candidates)
    deferred: set[str] = set()
    for action in updater.decide(batch):
        if action.op == "defer":
            deferred.add(action.target_id)
            continue
        entry = current.get(action.target_id)
        if entry is None:
            state.rejected += 1
            log.warning("update action on %r refused: not in its batch", action.target_id)
            continue
        if entry.id in state.deleted or entry.id in state.vanished:
            continue
        try:
            _act(store, embedder, entry, action, current, state)
        except NotFoundError:
            # Another writer (a pass of another process on the same store) deleted it
            # since this batch was read: there is nothing left to act on.
            log.info("update action on %r skipped: deleted by another writer", entry.id)
            state.vanished.add(entry.id)
    state.record(store, DECIDE, batch, deferred)


def _act(
    store: MemoryStore,
    embedder: Embedder,
    entry: MemoryEntry,
    action: UpdateAction,
    current: dict[str, MemoryEntry],
    state: _UpdateState,
) -> None:
    """Apply one of the updater's actions to ``entry`` (of the batch, not deleted)."""
    if action.op == "supersede":
        _supersede(store, entry, current.get(action.by), action, state, current)
        return
    if action.op == "delete":
        store.delete_entry(entry.id, entry.scope, action.reason)
        state.deleted.add(entry.id)
        # what it superseded is current again in the store: so in the batch's copies
        again = [i for i, e in current.items() if e.superseded_by == entry.id]
        current.update(store.get_entries(again))
        return
    new = replace(
        entry,
        text=action.new_text or entry.text,
        original_text=action.new_text or entry.original_text,
        source_ids=tuple(dict.fromkeys((*entry.source_ids, *action.add_source_ids))),
    )
    vec = embedder.embed([new.search_text], op="update")[0]
    current[entry.id] = store.update_entry(new, vec, action.reason)
    state.updated.append(entry.id)


def _review(
    store: MemoryStore,
    updater: Updater,
    nearest: Mapping[str, Sequence[ScoredId]],
    state: _UpdateState,
    step_chars: int,
    deadline: float | None = None,
) -> None:
    """The updater's supersessions of the ``nearest`` map's newer entries (oldest first)
    against their earlier candidates; entries deleted by this pass take no part. Reviewed
    in steps of about ``step_chars`` of text, each read after the step before it was
    applied, so an entry superseded there is no candidate here (as within one step), and
    of at most :data:`_REVIEW_STEP` newer entries; past ``deadline`` no step starts."""
    order = [i for i in nearest if i not in state.deleted]
    known: dict[str, MemoryEntry] = {}
    step: list[str] = []
    held = 0
    for start in range(0, len(order), _REVIEW_GROUP):
        if not step and state.past(deadline):
            return
        group = order[start : start + _REVIEW_GROUP]
        wanted = [j for i in group for j in (i, *(c for c, _ in nearest[i]))]
        new = [j for j in dict.fromkeys(wanted) if j not in known and j not in state.deleted]
        got = store.get_entries(new)
        known.update(got)
        held += sum(e.chars for e in got.values())
        step += group
        if held >= step_chars or len(step) >= _REVIEW_STEP:
            _review_step(store, updater, step, nearest, known, state)
            known, step, held = {}, [], 0
    if step:
        _review_step(store, updater, step, nearest, known, state)


def _review_step(
    store: MemoryStore,
    updater: Updater,
    newer: Sequence[str],
    nearest: Mapping[str, Sequence[ScoredId]],
    known: dict[str, MemoryEntry],
    state: _UpdateState,
) -> None:
    """:func:`_review` of the ``newer`` entries, read into ``known`` with their candidates."""
    items = []
    for eid in newer:
        entry = known.get(eid)
        pairs = tuple(
            (known[c], sc) for c, sc in nearest[eid] if c in known and c not in state.deleted
        )
        if entry is not None and pairs:
            items.append(UpdateItem(entry, pairs, frozenset(state.decided.get(eid, ()))))
    asked = state.asked(store, REVIEW, [it.newer.id for it in items])
    items = [it for it in items if not state.known(it, asked)]
    state.reviewed += sum(len(it.candidates) for it in items)
    deferred: set[str] = set()
    for action in updater.review(items):
        if action.op == "defer":
            deferred.add(action.target_id)
            continue
        old = known.get(action.target_id)
        if action.op != "supersede" or old is None:
            state.rejected += 1
            log.warning(
                "review action on %r refused: not a supersession in scope", action.target_id
            )
            continue
        try:
            _supersede(store, old, known.get(action.by), action, state, known)
        except NotFoundError:  # deleted by another writer since it was read (see _apply)
            log.info("review action on %r skipped: deleted by another writer", old.id)
            state.vanished.add(old.id)
    state.record(store, REVIEW, items, deferred)
    state.mark(store, newer, nearest)


def online_update(
    store: MemoryStore, embedder: Embedder, updater: Updater, scope: Scope, new_ids: Sequence[str]
) -> UpdateReport:
    """The update pass for the entries ``new_ids`` just extracted into ``scope`` only
    (``update: "online"``): each is compared with its nearest earlier entries (found by
    vector search, bounded), never the whole scope."""
    view_at = datetime.now(UTC).timestamp()  # the search below reads the store after it
    found = store.get_entries(list(new_ids))
    new = [found[i] for i in new_ids if i in found and found[i].kind == "entry"]
    if not new:
        return UpdateReport(0, (), ())
    vectors = embedder.embed([e.search_text for e in new], op="update.online")
    near = nearest_stored(store, new, vectors)
    fresh = set(new_ids)  # an earlier entry keyed by a turn said before it keeps its queue
    store.save_update_queue({i: c[:ONLINE_QUEUE_N] for i, c in near.items() if i in fresh})
    # new entries: nothing to skip (what is recorded spares the next offline pass)
    report = run_update(
        store, embedder, updater, scope, 0.8, only=new_ids, nearest=near, recheck=True
    )
    # The new entries' review was their nearest found by the search: they are up to date
    # (a stored entry shown one of them had no review of its own). But one said before a
    # stored entry was shown only to those the search found: left pending, the bounded
    # update offers it to every later entry it reaches.
    key = updater_key(updater)
    if key is not None:
        backlog = {c for newer, row in near.items() if newer not in fresh for c, _ in row}
        gone = {*report.deleted, *report.deferred, *backlog}
        kept = [e.id for e in new if e.id not in gone]
        store.mark_update_checked(REVIEW, key, review_floors(kept, near, REVIEW_K), view_at)
    return report


def scope_queue(
    store: MemoryStore, scope: Scope, top_k: int, keep_top_n: int
) -> tuple[dict[str, list[ScoredId]], dict[str, float | None]]:
    """:func:`build_queue` over the extracted entries of ``scope``, earlier by the time
    each was said, with those times (seconds, None where not known; by id, for the
    entries that exist). Only the times are kept of the entries read, a page at a time."""
    ids, matrix, groups, said = scope_vectors(store, scope)
    times = [said.get(i) for i in ids]
    return build_queue(ids, matrix, groups, top_k, keep_top_n, times=times), said


def scope_vectors(
    store: MemoryStore, scope: Scope
) -> tuple[list[str], npt.NDArray[np.float32], list[str], dict[str, float | None]]:
    """The extracted entries of ``scope``: ids, vectors and exact scopes in insertion
    order, and when each was said (by id; only that is kept of each entry read, a page
    at a time)."""
    ids, matrix, groups = extracted_vectors(store, scope)
    said: dict[str, float | None] = {}
    for start in range(0, len(ids), _TIMES_PAGE):
        got = store.get_entries(ids[start : start + _TIMES_PAGE])
        said.update((i, _seconds(e)) for i, e in got.items())
    return ids, matrix, groups, said


def nearest_earlier(
    store: MemoryStore, scope: Scope, only: Sequence[str] | None = None, k: int = REVIEW_K
) -> dict[str, list[ScoredId]]:
    """For each extracted entry of ``scope`` (or of ``only``), oldest first (see
    :func:`chronological`), its ``k`` most similar earlier entries of the same exact scope
    (the offline review; none for an entry with no earlier one)."""
    queue, said = scope_queue(store, scope, k, k)
    wanted = set(only) if only is not None else None
    order = in_time_order(list(said), said.__getitem__)
    return {i: queue.get(i, []) for i in order if wanted is None or i in wanted}


def nearest_stored(
    store: MemoryStore,
    entries: Sequence[MemoryEntry],
    vectors: npt.NDArray[np.float32],
    k: int = REVIEW_K,
) -> dict[str, list[ScoredId]]:
    """:func:`nearest_earlier` for just-stored ``entries`` (insertion order, with their
    ``vectors``), found by the store's vector search instead of a pass over the scope:
    the online update's work per insertion does not grow with the scope. Each stored
    entry's ``k`` nearest are paired with it whichever was stored first; a pair is keyed
    by its newer entry (:func:`said_before` orients it), so a turn said before what is
    stored already is reviewed as the earlier one."""
    order = {e.id: n for n, e in enumerate(entries)}
    pairs: dict[str, dict[str, float]] = {}
    known: dict[str, MemoryEntry] = {e.id: e for e in entries}
    for n, (entry, vec) in enumerate(zip(entries, vectors, strict=True)):
        found = store.vector_search(vec, entry.scope, Filters(kinds=("entry",)), 2 * k + 1)
        # provisional entries are replaced anyway: no candidates
        hits = [(i, sc) for i, sc in found if i != entry.id and not is_provisional(i)]
        known.update(store.get_entries([i for i, _ in hits if i not in known]))
        for i, score in [(i, sc) for i, sc in hits if i in known and known[i].scope == entry.scope][
            :k
        ]:
            if said_before(known[i], entry, order.get(i, -1) < n):
                pairs.setdefault(entry.id, {})[i] = score
            else:
                pairs.setdefault(i, {})[entry.id] = score
    stored = sorted(pairs, key=lambda i: order.get(i, -1))  # the order they were stored in
    return {
        e.id: sorted(pairs[e.id].items(), key=lambda x: -x[1])
        for e in chronological([known[i] for i in stored])
    }


def said_before(a: MemoryEntry, b: MemoryEntry, stored_before: bool) -> bool:
    """Whether ``a`` is earlier than ``b``: by the time each was said when both have one
    and they differ, else by which was stored first (``stored_before``)."""
    if a.timestamp is not None and b.timestamp is not None and a.timestamp != b.timestamp:
        return a.timestamp < b.timestamp
    return stored_before


def chronological(entries: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """``entries`` (in the order they were stored) oldest first by the time each was said
    when all have one (stably: the same time keeps the stored order); else as they are."""
    return in_time_order(entries, _seconds)


def in_time_order(items: Sequence[_T], said: Callable[[_T], float | None]) -> list[_T]:
    """:func:`chronological` of any ``items`` said at ``said(item)``."""
    times = [said(x) for x in items]
    if any(t is None for t in times):
        return list(items)
    return [x for _, x in sorted(zip(times, items, strict=True), key=lambda p: p[0] or 0.0)]


def _seconds(entry: MemoryEntry) -> float | None:
    return entry.timestamp.timestamp() if entry.timestamp is not None else None


def scope_entries(store: MemoryStore, scope: Scope, page: int = 1000) -> list[MemoryEntry]:
    """Every fact entry of ``scope``, oldest first (paged by key: a writer deleting one
    meanwhile makes no other slip past a page boundary; one rewritten meanwhile comes once)."""
    out: dict[str, MemoryEntry] = {}
    for entry in store.iter_entries(scope, Filters(kinds=("entry",)), page):
        out.setdefault(entry.id, entry)
    return list(out.values())


def _supersede(
    store: MemoryStore,
    old: MemoryEntry,
    new: MemoryEntry | None,
    action: UpdateAction,
    state: _UpdateState,
    seen: dict[str, MemoryEntry],
) -> None:
    """Mark ``old`` replaced by ``new`` from ``new``'s time; ``new`` must be of the batch,
    of the same scope, not deleted, and not ``old`` itself. ``seen`` (the step's copies)
    gets ``old`` as it is now: a second supersession of it in the same step (a model may
    name it for two newer entries) finds it replaced, and a later edit keeps the mark."""
    if new is None or new.id == old.id or new.scope != old.scope or new.id in state.deleted:
        state.rejected += 1
        log.warning("supersede of %r by %r refused: not in its batch", old.id, action.by)
        return
    if old.superseded_by:
        return  # already replaced: the chain is kept as first recorded
    seen[old.id] = store.set_validity(
        old.id, old.scope, new.id, new.timestamp or new.created_at, action.reason
    )
    state.superseded.append(old.id)
