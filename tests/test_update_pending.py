"""A server's update request brings up to date only what is new or changed, a part at a time
to its deadline: the next call goes on where it stopped, and the parts decide what the
whole-scope pass decides."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from lightmem import InvalidInputError, LightMemory
from lightmem.pipeline import update, update_pending
from lightmem.pipeline.update import UpdateAction, UpdateItem, Updater
from lightmem.store.base import ScoredId
from lightmem.types import MemoryEntry, Scope
from test_update_checks import USER, _Asked, _Deferring, _turns

Outcome = list[tuple[str, str]]


def _outcome(mem: LightMemory) -> Outcome:
    entries = mem.list_entries({"kind": "entry"}, limit=1000, user_id=USER)
    text = {e.id: e.text for e in entries}
    return sorted((e.text, text.get(e.superseded_by, "")) for e in entries)


def _memory(path: Path) -> LightMemory:
    mem = LightMemory.from_config({"store": {"path": str(path)}})
    mem.add_memory(_turns(), force_extract=True, user_id=USER)
    return mem


@pytest.fixture
def whole(tmp_path: Path) -> Outcome:
    """The whole-scope pass's outcome (the CLI's)."""
    with _memory(tmp_path / "whole.db") as mem:
        mem.construct_update_queue_all_entries(user_id=USER)
        mem.offline_update_all_entries(-1.0, user_id=USER)  # every pair to decide
        return _outcome(mem)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _Rows:
    """``build_queue`` that counts the entries it is asked for."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def __call__(
        self,
        ids: Sequence[str],
        matrix: npt.NDArray[np.float32],
        groups: Sequence[str],
        top_k: int,
        keep_top_n: int,
        *,
        times: Sequence[float | None],
        rows: Sequence[int],
    ) -> dict[str, list[ScoredId]]:
        self.asked.append(len(rows))
        return update.build_queue(ids, matrix, groups, top_k, keep_top_n, times=times, rows=rows)


@pytest.fixture
def clocked(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_Clock, _Rows]]:
    clock, rows = _Clock(), _Rows()
    monkeypatch.setattr(update, "time", clock)
    monkeypatch.setattr(update_pending, "time", clock)
    monkeypatch.setattr(update_pending, "build_queue", rows)
    yield clock, rows


def test_calls_go_on_where_the_last_stopped_and_decide_as_the_whole_pass(
    tmp_path: Path,
    whole: Outcome,
    clocked: tuple[_Clock, _Rows],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, rows = clocked
    with _memory(tmp_path / "parts.db") as mem:
        updater = mem.updater
        decide = updater.decide

        def taking_a_second(items: Sequence[UpdateItem]) -> list[UpdateAction]:
            clock.now += 1.0
            return decide(items)

        monkeypatch.setattr(updater, "decide", taking_a_second)

        def call(seconds: float) -> update_pending.PendingUpdate:
            return update_pending.update_pending(
                mem.store, mem.embedder, updater, Scope(USER), 20, 10, -1.0,
                clock.now + seconds, step=3,
            )  # fmt: skip

        def whole_scope(*args: object, **kwargs: object) -> None:
            raise AssertionError("the whole scope's neighbours were built")

        monkeypatch.setattr(update, "nearest_earlier", whole_scope)
        monkeypatch.setattr(update, "scope_queue", whole_scope)
        calls = [call(-1.0)]  # past its deadline already: one step all the same
        assert not calls[0].report.complete and 0 < calls[0].brought_up_to_date <= 3
        calls.append(call(0.5))  # a step's decide takes a second: one step a call
        while not calls[-1].report.complete and len(calls) < 20:
            calls.append(call(0.5))
        assert len(calls) > 2
        # a step a call (an entry a later step changed is brought up to date again)
        assert all(c.brought_up_to_date <= 3 for c in calls)
        assert max(rows.asked) <= 3  # each step's neighbours: its entries, not the scope
        assert _outcome(mem) == whole
        rows.asked.clear()
        again = call(60.0)
        assert again.brought_up_to_date == 0 and rows.asked == [] and again.report.complete


def test_a_memory_changed_since_is_brought_up_to_date_again(tmp_path: Path) -> None:
    with _memory(tmp_path / "m.db") as mem:
        first = _settle(mem)[0]  # every memory but the repeats it deleted
        assert first.brought_up_to_date == len(_turns()) - len(first.report.deleted)
        assert mem.offline_update_pending(max_seconds=60, user_id=USER).brought_up_to_date == 0
        pottery = next(e for e in mem.list_entries(limit=100, user_id=USER) if "pottery" in e.text)
        mem.update(pottery.id, "I signed up for a pottery class at the museum again.", user_id=USER)
        mem.add_memory(
            {"content": "These days my favourite tea is rooibos.", "speaker_name": "Lena",
             "timestamp": "2023-12-10T10:00:00"},
            force_extract=True, user_id=USER,
        )  # fmt: skip
        again = _settle(mem)[0]
        # the edited memory, the new one, and the one memory said after the pottery class
        # (fewer earlier memories than the review shows: any edit before it reaches it)
        assert again.brought_up_to_date == 3 and again.report.reviewed > 0
        with pytest.raises(InvalidInputError, match="max_seconds"):
            mem.offline_update_pending(max_seconds=0, user_id=USER)


def test_what_the_updater_deferred_stays_pending(tmp_path: Path) -> None:
    with _memory(tmp_path / "m.db") as mem:

        def call(updater: Updater) -> update_pending.PendingUpdate:
            return update_pending.update_pending(
                mem.store, mem.embedder, updater, Scope(USER), 20, 10, -1.0, 1e18
            )

        deferring = _Deferring(mem.updater)
        first = call(deferring)
        deferred = set(first.report.deferred)
        assert deferred and first.brought_up_to_date == len(_turns()) - len(deferred)
        # asked once a call (the call's second look from the start leaves them)
        assert len(deferring.reviewed) == len({newer for newer, _ in deferring.reviewed})
        second = call(_Asked(mem.updater))
        taken = second.brought_up_to_date + len(second.report.deleted)
        assert taken >= len(deferred) and second.report.examined


def _whole_pass(mem: LightMemory) -> None:
    mem.construct_update_queue_all_entries(user_id=USER)
    mem.offline_update_all_entries(0.8, user_id=USER)


def _settle(mem: LightMemory, most: int = 4) -> list[update_pending.PendingUpdate]:
    """A server's update calls until one completes (what a call changed after its view of
    the store, a memory it superseded, is the next call's)."""
    calls = [mem.offline_update_pending(max_seconds=60, user_id=USER)]
    while not calls[-1].report.complete:
        assert len(calls) < most, calls
        calls.append(mem.offline_update_pending(max_seconds=60, user_id=USER))
    return calls


def _replaced_by(mem: LightMemory, word: str) -> str:
    entries = mem.list_entries({"kind": "entry"}, limit=1000, user_id=USER)
    text = {e.id: e.text for e in entries}
    return next(text.get(e.superseded_by, "") for e in entries if word in e.text)


@pytest.mark.parametrize("bring_up", [_settle, _whole_pass], ids=["pending", "whole"])
def test_an_edit_is_offered_to_the_later_memories_that_may_replace_it(
    tmp_path: Path, bring_up: object
) -> None:
    """An earlier memory edited into one a later memory changes ("I live in Chicago" said
    before "we moved to Denver") is superseded by it, as the whole-scope pass decides."""
    with _memory(tmp_path / "m.db") as mem:
        _settle(mem)
        ines = next(e for e in mem.list_entries(limit=100, user_id=USER) if "Ines" in e.text)
        mem.update(ines.id, "I live in Chicago, near the lake.", user_id=USER)
        assert _replaced_by(mem, "Chicago") == ""
        assert callable(bring_up)
        bring_up(mem)
        assert "Denver" in _replaced_by(mem, "Chicago")
        before = _outcome(mem)
        _whole_pass(mem)  # nothing left that the whole pass would decide otherwise
        assert _outcome(mem) == before


def test_a_backlog_said_before_is_offered_to_the_later_memories(tmp_path: Path) -> None:
    """A memory said in January but stored after the later ones were brought up to date
    is superseded by the later one that changes it, as the whole-scope pass decides."""
    boston, *rest = _turns()
    outcomes = []
    for name in ("pending", "whole"):
        with LightMemory.from_config({"store": {"path": str(tmp_path / f"{name}.db")}}) as mem:
            mem.add_memory(rest, force_extract=True, user_id=USER)
            _settle(mem)
            mem.add_memory(boston, force_extract=True, user_id=USER)
            if name == "pending":
                rows = _Rows()
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(update_pending, "build_queue", rows)
                    done = mem.offline_update_pending(max_seconds=60, user_id=USER)
                # the backlog and the later ones it reaches, each taken once in the call
                assert 1 < done.brought_up_to_date == sum(rows.asked)
                assert not done.report.complete  # Boston, superseded after it was taken
                _settle(mem)
                assert _settle(mem)[0].brought_up_to_date == 0
            else:
                _whole_pass(mem)
            assert "Denver" in _replaced_by(mem, "Boston")
            outcomes.append(_outcome(mem))
    assert outcomes[0] == outcomes[1]


def test_another_updater_brings_every_memory_up_to_date_again(tmp_path: Path) -> None:
    with _memory(tmp_path / "m.db") as mem:

        def call(updater: Updater) -> update_pending.PendingUpdate:
            return update_pending.update_pending(
                mem.store, mem.embedder, updater, Scope(USER), 20, 10, -1.0, 1e18
            )

        first = call(_Asked(mem.updater, "model a"))
        kept = len(mem.list_entries({"kind": "entry"}, limit=100, user_id=USER))
        assert first.brought_up_to_date == kept
        for _ in range(3):  # what the first call superseded, shown to the later ones again
            if call(_Asked(mem.updater, "model a")).report.complete:
                break
        assert call(_Asked(mem.updater, "model a")).brought_up_to_date == 0
        other = _Asked(mem.updater, "model b")
        assert call(other).brought_up_to_date == kept and other.reviewed


def _facts(n: int) -> list[dict[str, Any]]:
    """``n`` distinct everyday facts, one a day."""
    people = ["sister", "brother", "cousin", "neighbour", "colleague", "uncle"]
    names = ["Ana", "Bo", "Cem", "Dita", "Eli", "Finn", "Gus", "Hana", "Ivo", "Jun"]
    did = [
        "bought a red bicycle", "adopted a grey kitten", "started learning the cello",
        "ran a marathon", "opened a bakery", "repaired an old clock", "planted an apple tree",
        "painted the kitchen blue", "wrote a short novel", "joined a chess club",
    ]  # fmt: skip
    places = ["Lisbon", "Oslo", "Nairobi", "Quito", "Hanoi", "Perth"]
    combos = [(a, b, c) for a in range(6) for b in range(10) for c in range(10)]
    random.Random(1).shuffle(combos)
    return [
        {
            "id": f"f{i}",
            "speaker_name": "Lena",
            "content": f"My {people[a]} {names[b]} {did[c]} in {places[(a + b + c) % 6]}.",
            "timestamp": (datetime(2023, 1, 1) + timedelta(days=i)).isoformat(),
        }
        for i, (a, b, c) in enumerate(combos[:n])
    ]


def test_an_edit_reaches_only_the_later_memories_it_is_near(tmp_path: Path) -> None:
    """Of the memories said after an edited one, only those whose review it would join
    (at least as like them as the last earlier memory they were shown) are taken again."""
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        mem.add_memory(_facts(120), force_extract=True, user_id=USER)
        _settle(mem)
        entries = mem.list_entries({"kind": "entry"}, limit=1000, user_id=USER)
        entries.sort(key=lambda e: e.timestamp or datetime.min)
        edited = entries[3]
        mem.update(edited.id, "My sister Ana moved to a flat near the harbour.", user_id=USER)
        done = _settle(mem)[0]
        later = len(entries) - 4
        assert 1 + update.REVIEW_K <= done.brought_up_to_date < 1 + later


def test_recheck_shows_every_memory_again_over_this_and_the_following_calls(
    tmp_path: Path,
) -> None:
    with _memory(tmp_path / "m.db") as mem:
        asked = _Asked(mem.updater, "the same updater throughout")
        mem.updater = asked
        kept = _settle(mem)[0].brought_up_to_date
        assert _settle(mem)[0].brought_up_to_date == 0
        asked.reviewed.clear()
        again = mem.offline_update_pending(max_seconds=60, user_id=USER, recheck=True)
        assert again.brought_up_to_date == kept and again.report.skipped == 0
        assert asked.reviewed and _settle(mem)[-1].brought_up_to_date == 0
        with pytest.raises(InvalidInputError, match=r"^recheck: expected a boolean"):
            mem.offline_update_pending(max_seconds=60, user_id=USER, recheck=1)  # type: ignore[arg-type]


def test_a_memory_shown_a_new_one_online_still_gets_its_own_review(tmp_path: Path) -> None:
    """The online update shows an earlier memory stored late to the later memories it may
    change; that is no review of theirs: an edited one among them stays pending."""
    boston, *rest = _turns()
    config = {"store": {"path": str(tmp_path / "m.db")}, "update": "online"}
    with LightMemory.from_config(config) as mem:
        mem.add_memory(rest, force_extract=True, user_id=USER)
        _settle(mem)
        denver = next(e for e in mem.list_entries(limit=100, user_id=USER) if "Denver" in e.text)
        mem.update(denver.id, "We moved to Denver last month, we love the mountains.", user_id=USER)
        mem.add_memory(boston, force_extract=True, user_id=USER)  # said in January
        assert "Denver" in _replaced_by(mem, "Boston")  # shown to the Denver memory online
        key = update.updater_key(mem.updater)
        assert key is not None
        pending = mem.store.unchecked_entries(Scope(USER), "review", key, 0, 100)
        late = next(e for e in mem.list_entries(limit=100, user_id=USER) if "Boston" in e.text)
        # and the backlog: online, it was shown only to the later memories the search found
        assert {(p.id, p.moved) for p in pending} == {(denver.id, True), (late.id, True)}
        assert _settle(mem)[0].brought_up_to_date >= 1


def test_after_the_whole_pass_nothing_is_pending(tmp_path: Path) -> None:
    """The whole-scope pass marks what its review brought up to date (the first memory
    too, with no earlier one to be shown): a server's next request takes nothing (once a
    second pass showed the later memories what the first superseded)."""
    with _memory(tmp_path / "m.db") as mem:
        _whole_pass(mem)
        key = update.updater_key(mem.updater)
        assert key is not None
        pending = mem.store.unchecked_entries(Scope(USER), "review", key, 0, 100)
        texts = {e.id: e.text for e in mem.list_entries(limit=100, user_id=USER)}
        # what its review superseded changed after the view its checks were made from
        assert [texts[p.id] for p in pending] == ["Boston near harbour"]
        _whole_pass(mem)
        done = _settle(mem)[0]
        assert done.brought_up_to_date == 0 and done.report.reviewed == 0


def _behind_a_year_of_facts(mem: LightMemory) -> list[MemoryEntry]:
    """The conversation after 40 facts of the year before (so that the memory edited
    below has later memories beyond its reach), brought up to date; oldest first."""
    facts = _facts(40)
    for n, fact in enumerate(facts):
        fact["timestamp"] = (datetime(2022, 1, 1) + timedelta(days=n)).isoformat()
    mem.add_memory(facts, force_extract=True, user_id=USER)
    mem.add_memory(_turns(), force_extract=True, user_id=USER)
    _settle(mem)
    entries = mem.list_entries({"kind": "entry"}, limit=1000, user_id=USER)
    return sorted(entries, key=lambda e: e.timestamp or datetime.min)


def _ends_as_the_whole_pass(mem: LightMemory) -> None:
    _settle(mem)
    assert "Denver" in _replaced_by(mem, "Chicago")
    before = _outcome(mem)
    _whole_pass(mem)
    assert _outcome(mem) == before


@pytest.mark.parametrize("others", ["a user", "another server", "a user, as it reads"])
def test_an_edit_while_a_call_runs_is_taken_from_a_view_that_has_it(
    store_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch, others: str
) -> None:
    """A memory edited after a call read the vectors (by a user, or by a user and another
    server's call that takes it) is not settled from the vectors read before the edit."""
    with (
        LightMemory.from_config({"store": store_config}) as mem,
        LightMemory.from_config({"store": store_config}) as other,
    ):
        entries = _behind_a_year_of_facts(mem)
        edited = entries[10]  # a fact of the year before, beyond the reach of "Denver"
        # something pending before it, so the call has read the vectors when it is edited
        mem.store.flag_update_checks("review", [entries[0].id], time.time())
        edits: list[MemoryEntry] = []
        chicago = "I live in Chicago, near the lake."

        def edit() -> None:
            if not edits:
                edits.append(other.update(edited.id, chicago, user_id=USER))
                if others == "another server":
                    update_pending.update_pending(
                        other.store, other.embedder, other.updater, Scope(USER), 20, 10,
                        0.8, -1.0, step=2,
                    )  # fmt: skip

        def editing_meanwhile(*args: Any, **kwargs: Any) -> dict[str, list[ScoredId]]:
            edit()
            return update.build_queue(*args, **kwargs)

        if others == "a user, as it reads":  # the edit lands just after the vectors are read

            def reading(store: Any, scope: Scope) -> Any:
                read = update.scope_vectors(store, scope)
                edit()
                return read

            monkeypatch.setattr(update_pending, "scope_vectors", reading)
        else:
            monkeypatch.setattr(update_pending, "build_queue", editing_meanwhile)
        update_pending.update_pending(
            mem.store, mem.embedder, mem.updater, Scope(USER), 20, 10, 0.8, 1e18, step=1
        )
        assert edits
        monkeypatch.undo()
        _ends_as_the_whole_pass(mem)


def test_a_memory_the_updater_rewrites_is_taken_again_with_its_new_text(
    tmp_path: Path,
) -> None:
    """A model that merges an earlier memory into new words changes its vector after the
    call read them: the next call reviews it as it reads now."""

    class Merging(_Asked):
        def __init__(self, inner: Updater, target: str) -> None:
            super().__init__(inner, "merging")
            self.target, self.done = target, False

        def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
            out = super().decide(items)
            if not self.done and any(e.id == self.target for it in items for e, _ in it.candidates):
                self.done = True
                text = "I live in Chicago, near the lake."
                out.append(UpdateAction("update", self.target, "merged", new_text=text))
            return out

    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        entries = _behind_a_year_of_facts(mem)
        target = entries[10]  # a fact of the year before, beyond the reach of "Denver"
        merging = Merging(mem.updater, target.id)
        mem.updater = merging
        mem.store.forget_update_checks(Scope(USER))  # every item asked again, to merge
        update_pending.update_pending(  # every pair to decide (threshold -1): it merges
            mem.store, mem.embedder, merging, Scope(USER), 20, 20, -1.0, 1e18
        )
        assert merging.done
        key = update.updater_key(merging)
        assert key is not None
        pending = mem.store.unchecked_entries(Scope(USER), "review", key, 0, 1000)
        assert target.id in {p.id for p in pending if p.moved}  # its vector changed after
        mem.updater = merging.inner
        _ends_as_the_whole_pass(mem)


def test_an_edit_in_a_scope_built_online_reaches_only_the_memories_it_is_near(
    tmp_path: Path,
) -> None:
    """The online update records the floor of what its search found, as a whole review
    does: one edit takes the same later memories again as in a scope built offline."""
    taken = []
    for mode in ("offline", "online"):
        config = {"store": {"path": str(tmp_path / f"{mode}.db")}, "update": mode}
        with LightMemory.from_config(config) as mem:
            facts = _facts(120)
            for batch in [facts] if mode == "offline" else [[f] for f in facts]:
                mem.add_memory(batch, force_extract=True, user_id=USER)
            _settle(mem)
            entries = mem.list_entries({"kind": "entry"}, limit=1000, user_id=USER)
            entries.sort(key=lambda e: e.timestamp or datetime.min)
            moved = "My sister Ana moved to a flat near the harbour."
            mem.update(entries[3].id, moved, user_id=USER)
            taken.append(_settle(mem)[0].brought_up_to_date)
    assert taken[1] <= taken[0] < 1 + len(entries) - 4


def test_a_backlog_added_online_is_left_for_the_bounded_update_to_offer(
    tmp_path: Path,
) -> None:
    """Online, a memory said before stored ones is shown only to those its search finds;
    it stays pending, so the bounded update offers it to every later memory it reaches.
    One said after them all is up to date at once."""
    config = {"store": {"path": str(tmp_path / "m.db")}, "update": "online"}
    with LightMemory.from_config(config) as mem:
        mem.add_memory(_turns(), force_extract=True, user_id=USER)
        _settle(mem)
        for turn, text, when in (
            ("early", "I collect old maps of the harbour.", "2022-05-01T10:00:00"),
            ("late", "I collect old railway tickets.", "2024-05-01T10:00:00"),
        ):
            said = {"id": turn, "speaker_name": "Lena", "content": text, "timestamp": when}
            mem.add_memory(said, force_extract=True, user_id=USER)
        key = update.updater_key(mem.updater)
        assert key is not None
        pending = mem.store.unchecked_entries(Scope(USER), "review", key, 0, 100)
        texts = {e.id: e.text for e in mem.list_entries(limit=100, user_id=USER)}
        assert [(texts[p.id], p.moved) for p in pending] == [("collect maps harbour", True)]
        assert _settle(mem)[0].brought_up_to_date >= 1


@pytest.mark.parametrize("keep", [10, 30])
def test_a_floor_covers_what_the_decide_stage_was_shown_too(tmp_path: Path, keep: int) -> None:
    """The whole pass's decide stage shows each memory its queue row: one longer than the
    review's nearest records no floor (any earlier memory new or changed may join it)."""
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        mem.add_memory(_facts(40), force_extract=True, user_id=USER)
        mem.construct_update_queue_all_entries(keep, keep, user_id=USER)
        mem.offline_update_all_entries(0.8, user_id=USER)
        last = max(mem.list_entries(limit=100, user_id=USER), key=lambda e: e.timestamp or 0)
        key = update.updater_key(mem.updater)
        assert key is not None
        floors = mem.store.load_update_reach(Scope(USER), "review", key)
        assert (floors[last.id] is None) == (keep > update.REVIEW_K)
        # the bounded update's floor is that of the row it built, as long as the queue's
        mem.store.forget_update_checks(Scope(USER))
        update_pending.update_pending(
            mem.store, mem.embedder, mem.updater, Scope(USER), keep, keep, 0.8, 1e18
        )
        ids, matrix, groups, said = update.scope_vectors(mem.store, Scope(USER))
        times = [said[i] for i in ids]
        k = max(keep, update.REVIEW_K)
        built = update.build_queue(ids, matrix, groups, k, k, times=times)
        floors = mem.store.load_update_reach(Scope(USER), "review", key)
        assert floors[last.id] == pytest.approx(built[last.id][k - 1][1])


def test_a_flag_keeps_the_latest_change_and_only_a_later_view_clears_it(
    store_config: dict[str, Any],
) -> None:
    with LightMemory.from_config({"store": store_config}) as mem:
        mem.add_memory(_turns()[:2], force_extract=True, user_id=USER)
        a, b = sorted(e.id for e in mem.list_entries({"kind": "entry"}, limit=9, user_id=USER))
        store, view = mem.store, time.time() + 1000  # a view after every change they had

        def pending() -> set[str]:
            found = store.unchecked_entries(Scope(USER), "review", "k", 0, 10)
            return {p.id for p in found} & {a, b}

        store.mark_update_checked("review", "k", {a: None, b: 0.5}, view)
        assert pending() == set()
        store.flag_update_checks("review", [a], view + 20)  # an earlier memory changed then
        store.flag_update_checks("review", [a], view + 10)  # an older change: the later stays
        store.mark_update_checked("review", "k", {a: None}, view + 15)  # a view before it
        assert pending() == {a}
        assert store.load_update_reach(Scope(USER), "review", "k") == {b: 0.5}  # a: pending
        store.mark_update_checked("review", "k", {a: None}, view + 30)
        assert pending() == set()


def test_a_memory_the_stored_queue_does_not_hold_is_left_to_the_bounded_update(
    tmp_path: Path,
) -> None:
    """The whole pass over a queue built before a memory was stored reviews it but never
    showed it to the decide stage: it stays pending, and a server's call decides it."""
    with _memory(tmp_path / "m.db") as mem:
        _whole_pass(mem)
        again = {"id": "again", "speaker_name": "Lena", "timestamp": "2023-11-10T10:00:00",
                 "content": "I really love hiking in the Alps every summer."}  # fmt: skip
        mem.add_memory(again, force_extract=True, user_id=USER)
        mem.offline_update_all_entries(0.8, user_id=USER)  # the queue of before
        key = update.updater_key(mem.updater)
        assert key is not None
        pending = mem.store.unchecked_entries(Scope(USER), "review", key, 0, 100)
        entries = mem.list_entries({"kind": "entry"}, limit=100, user_id=USER)
        late = [e.id for e in entries if "again" in e.source_ids]
        assert late and set(late) <= {p.id for p in pending}
        _settle(mem)
        before = _outcome(mem)
        _whole_pass(mem)  # with a queue built now: nothing left to decide otherwise
        assert _outcome(mem) == before
