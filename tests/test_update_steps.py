"""The offline update holds a bounded part of a scope at once: the queue keeps only when
each entry was said, and the batches and the review go in steps of at most
``step_chars`` of memory text, each read after the step before it was applied, so a pass
in many steps decides exactly what one step decides (a value changed twice stays a chain)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory
from lightmem.errors import InvalidInputError
from lightmem.pipeline import update
from lightmem.pipeline.update import REVIEW_K, UpdateAction, UpdateItem, Updater, run_update
from lightmem.store.base import MemoryStore
from lightmem.types import MemoryEntry, Scope

_FILLER = [
    "My sister Ines visited from Porto for the weekend.",
    "The bakery on our street finally sells rye bread.",
    "I finished a long mystery novel about a lighthouse.",
    "Our running club meets in the park on Thursdays.",
    "The neighbours adopted a grey kitten called Pixel.",
    "I planted tomatoes and basil on the balcony.",
    "Work sent me to a conference about databases.",
    "I learned to make dumplings from my grandmother.",
    "The heating broke again, the landlord is slow.",
    "I signed up for a pottery class at the museum.",
    "We watched a documentary about octopuses last night.",
    "My knee hurts after the hike up the ridge.",
    "The library has a new section of graphic novels.",
    "I painted the hallway a pale shade of green.",
    "Our choir is rehearsing an old Welsh hymn.",
    "I lost my umbrella on the tram this morning.",
    "The farmers market had wonderful strawberries.",
    "My nephew started playing the drums, loudly.",
    "I repaired my grandfather's wooden chess board.",
    "The dentist says I should floss more often.",
    "We booked a cabin by the lake for August.",
    "I tried bouldering for the first time today.",
    "The cafe near the office closed for renovation.",
    "I am knitting a scarf for my brother's birthday.",
]


def _turns() -> list[dict[str, Any]]:
    said = [
        "I live in Boston, near the harbour.",
        *_FILLER[:12],
        "We moved to Denver last month, I love the mountains.",
        *_FILLER[12:],
        "We moved to Austin now, the heat is a shock.",
    ]
    return [
        {
            "id": f"t{i}",
            "speaker_name": "Lena",
            "content": text,
            "timestamp": f"2023-{1 + i // 28:02d}-{1 + i % 28:02d}T10:00:00",
        }
        for i, text in enumerate(said)
    ]


class _Spy:
    """An updater that counts its calls and the items each was given."""

    def __init__(self, inner: Updater) -> None:
        self.inner = inner
        self.name = inner.name
        self.pairs_per_call = inner.pairs_per_call
        self.signature = "spy"
        self.reviews: list[int] = []
        self.decides: list[int] = []

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        self.decides.append(len(items))
        return self.inner.decide(items)

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        self.reviews.append(len(items))
        return self.inner.review(items)


class _OldestLive:
    """A review that replaces, for each newer entry, its oldest earlier candidate not yet
    replaced (remembering its own choices within a call, as the offline detector keeps to
    live candidates): an entry replaced in an earlier step and read as still holding would
    be chosen again, and the newer entry would replace nothing."""

    name = "oldest-live"
    pairs_per_call = 10_000
    signature = "oldest-live"

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        return []

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        replaced: set[str] = set()
        out = []
        for it in items:
            live = [e for e, _ in it.candidates if not e.superseded_by and e.id not in replaced]
            if live:
                oldest = min(live, key=lambda e: (e.timestamp, e.id))
                replaced.add(oldest.id)
                out.append(UpdateAction("supersede", oldest.id, "test", by=it.newer.id))
        return out


class _EveryEarlier(_OldestLive):
    """A review that replaces every earlier candidate not marked replaced, with no memory
    of its own choices (a model's review may name one earlier memory for two newer ones):
    the first supersession must stand, whether the second comes in the same call or not."""

    name = "every-earlier"

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        return [
            UpdateAction("supersede", e.id, "test", by=it.newer.id)
            for it in items
            for e, _ in it.candidates
            if not e.superseded_by
        ]


class _Reads:
    """A store that records how many entries each ``get_entries`` asked for."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.asked: list[int] = []

    def get_entries(self, ids: Sequence[str]) -> dict[str, MemoryEntry]:
        self.asked.append(len(ids))
        return self.store.get_entries(ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _pass(
    tmp_path: Path, name: str, step_chars: int | None, updater: Updater | None = None
) -> tuple[dict[str, str], _Spy, _Reads]:
    """Superseded by which turn, per turn; the review calls; the store's reads."""
    with LightMemory.from_config({"store": {"path": str(tmp_path / f"{name}.db")}}) as mem:
        mem.add_memory(_turns(), force_extract=True)
        mem.construct_update_queue_all_entries()
        spy, reads = _Spy(updater or mem.updater), _Reads(mem.store)
        kw = {} if step_chars is None else {"step_chars": step_chars}
        # every queued pair is given to decide (threshold -1): its batches are stepped too
        run_update(reads, mem.embedder, spy, Scope(), -1.0, **kw)  # type: ignore[arg-type]
        entries = mem.list_entries({"kind": "entry"}, limit=1000)
        turn = {e.id: e.source_ids[0] for e in entries}
        return {turn[e.id]: turn.get(e.superseded_by, "") for e in entries}, spy, reads


def test_a_pass_in_steps_decides_what_one_step_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, one, _ = _pass(tmp_path, "whole", None)
    # the times read 5 at a time, the review a newer entry (and its candidates) at a time
    monkeypatch.setattr(update, "_TIMES_PAGE", 5)
    monkeypatch.setattr(update, "_REVIEW_GROUP", 1)
    stepped, many, reads = _pass(tmp_path, "steps", 1)
    assert len(one.reviews) == len(one.decides) == 1  # everyday memories: one step
    assert len(many.reviews) > 2 and max(many.reviews) == 1  # a step per newer entry
    assert len(many.decides) > 2 and max(many.decides) == 1  # a batch per item
    assert stepped == whole
    # the chain: Boston replaced by Denver, Denver by Austin
    assert (stepped["t0"], stepped["t13"], stepped["t26"]) == ("t13", "t26", "")
    # no read asks for more than a newer entry and its candidates (the scope holds more)
    assert len(whole) > 1 + REVIEW_K and max(reads.asked) <= 1 + REVIEW_K


@pytest.mark.parametrize("updater", [_OldestLive, _EveryEarlier])
def test_each_step_reads_what_the_steps_before_it_replaced(
    tmp_path: Path, updater: type[_OldestLive]
) -> None:
    whole, _, _ = _pass(tmp_path, "whole", None, updater())
    stepped, many, _ = _pass(tmp_path, "steps", 1, updater())
    assert len(many.reviews) > 2
    assert sum(bool(v) for v in whole.values()) > 20  # nearly every turn was replaced once
    assert stepped == whole  # each by the first newer turn to replace it, never again


class _Scripted:
    """An updater answering what it is told (a model's answers, written down)."""

    name = "scripted"
    pairs_per_call = 10_000
    signature = "scripted"

    def __init__(self, decide: list[UpdateAction], review: list[UpdateAction]) -> None:
        self.decided, self.reviewed = decide, review

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        return self.decided

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        return self.reviewed


def _three(tmp_path: Path, decide: list[str], review: bool) -> dict[str, MemoryEntry]:
    """Turns x, n, m; the updater supersedes x by n, then does ``decide`` (``delete n``,
    ``update x``) and, with ``review``, its review supersedes x by m."""
    turns = [
        {"id": t, "speaker_name": "Lena", "content": c, "timestamp": f"2023-0{k + 1}-01"}
        for k, (t, c) in enumerate(
            [("x", "I live in Boston."), ("n", "We moved to Denver."), ("m", "Austin now.")]
        )
    ]
    with LightMemory.from_config({"store": {"path": str(tmp_path / "three.db")}}) as mem:
        mem.add_memory(turns, force_extract=True)
        ids = {e.source_ids[0]: e.id for e in mem.list_entries({"kind": "entry"})}
        x, n, m = ids["x"], ids["n"], ids["m"]
        mem.store.save_update_queue({n: [(x, 0.9)]})
        steps = [UpdateAction("supersede", x, "moved", by=n)]
        if "delete n" in decide:
            steps.append(UpdateAction("delete", n, "wrong"))
        if "update x" in decide:
            steps.append(UpdateAction("update", x, "typo", new_text="I live in Boston!"))
        later = [UpdateAction("supersede", x, "moved again", by=m)] if review else []
        run_update(
            mem.store, mem.embedder, _Scripted(steps, later), Scope(), 0.0, nearest={m: [(x, 0.9)]}
        )
        got = mem.store.get_entries([x, n, m])
        return {t: got[i] for t, i in ids.items() if i in got}


def test_a_memory_whose_replacement_is_deleted_can_be_replaced_again(tmp_path: Path) -> None:
    after = _three(tmp_path, ["delete n"], review=True)
    assert "n" not in after and after["x"].superseded_by == after["m"].id


def test_an_edit_after_a_supersession_keeps_it(tmp_path: Path) -> None:
    after = _three(tmp_path, ["update x"], review=False)
    assert after["x"].superseded_by == after["n"].id and after["x"].text == "I live in Boston!"


def test_an_edit_after_the_replacement_was_deleted_leaves_the_memory_current(
    tmp_path: Path,
) -> None:
    after = _three(tmp_path, ["delete n", "update x"], review=False)
    assert after["x"].superseded_by == "" and after["x"].text == "I live in Boston!"


class _Slow(_Spy):
    """A review that takes ``seconds`` per call."""

    def __init__(self, inner: Updater, seconds: float) -> None:
        super().__init__(inner)
        self.seconds = seconds

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        time.sleep(self.seconds)
        return super().review(items)


def test_past_its_deadline_a_pass_starts_no_further_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(update, "_REVIEW_STEP", 4)  # newer entries a review step holds
    monkeypatch.setattr(update, "_REVIEW_GROUP", 2)  # newer entries read at a time
    with LightMemory.from_config({"store": {"path": str(tmp_path / "d.db")}}) as mem:
        mem.add_memory(_turns(), force_extract=True)
        mem.construct_update_queue_all_entries()
        slow = _Slow(mem.updater, 0.3)
        deadline = time.monotonic() + 0.1  # passed while the first step is reviewed
        report = run_update(mem.store, mem.embedder, slow, Scope(), 0.8, deadline=deadline)
        assert not report.complete and len(slow.reviews) == 1 and slow.reviews[0] <= 4
        assert report.to_dict()["complete"] is False
        whole = run_update(mem.store, mem.embedder, _Slow(mem.updater, 0.0), Scope(), 0.8)
        assert whole.complete and whole.reviewed > report.reviewed


def test_max_seconds_bounds_the_pass_and_is_checked(tmp_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        mem.add_memory(_turns(), force_extract=True)
        mem.construct_update_queue_all_entries()
        # every queued pair to decide (threshold -1): the deadline stops that part too
        stopped = mem.offline_update_all_entries(-1.0, max_seconds=1e-9)
        assert not stopped.complete and stopped.examined == 0 and stopped.superseded == ()
        done = mem.offline_update_all_entries(-1.0, max_seconds=3600)
        assert done.complete and done.examined > 0 and done.superseded  # Boston, Denver
        for bad in (0, -1, float("inf"), float("nan"), True, "60"):
            with pytest.raises(InvalidInputError, match="max_seconds"):
                mem.offline_update_all_entries(max_seconds=bad)  # type: ignore[arg-type]


def test_the_server_holds_an_update_request_to_update_seconds(tmp_path: Path) -> None:
    from lightmem.server import service
    from lightmem.server.tenancy import open_tenant

    tenant = open_tenant("acme", {"store": {"path": str(tmp_path / "t.db")}})
    try:
        tenant.memory.add_memory(_turns(), force_extract=True)
        assert service.offline_update(tenant, max_seconds=1e-9)["complete"] is False
        assert service.offline_update(tenant)["complete"] is True  # UPDATE_SECONDS: 60
        assert service.UPDATE_SECONDS == 60.0
    finally:
        tenant.memory.close()
