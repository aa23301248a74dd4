"""An offline update pass shows its updater only what it was not shown before unchanged:
a repeated pass asks nothing, a changed memory is asked about again, a pass that stopped
resumes where it stopped, and another updater (or ``recheck``) is shown everything."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory
from lightmem.errors import BackendError, InvalidInputError
from lightmem.pipeline.update import UpdateAction, UpdateItem, Updater, UpdateReport, run_update
from lightmem.types import Scope

_SAID = [
    "I live in Boston, near the harbour.",
    "I love hiking in the Alps every summer.",
    "My sister Ines visited from Porto for the weekend.",
    "I really love hiking in the Alps every summer.",
    "The bakery on our street finally sells rye bread.",
    "We moved to Denver last month, I love the mountains.",
    "I planted tomatoes and basil on the balcony.",
    "My favourite tea is jasmine green tea.",
    "I signed up for a pottery class at the museum.",
    "These days my favourite tea is a smoky lapsang.",
]

USER = "lena"
Item = tuple[str, frozenset[str]]  # a newer entry and the earlier ones shown with it


class _Asked:
    """An updater that records each item it is shown and passes it on; it fails (as a
    model server that went away) once it has decided ``fail_after`` batches."""

    def __init__(
        self, inner: Updater, signature: str | None = None, fail_after: int | None = None
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.pairs_per_call = 1  # a batch per item: a failure falls between items
        self.signature = signature or inner.signature
        self.fail_after = fail_after
        self.decided: list[Item] = []
        self.reviewed: list[Item] = []

    @staticmethod
    def _items(items: Sequence[UpdateItem]) -> list[Item]:
        return [(it.newer.id, frozenset(e.id for e, _ in it.candidates)) for it in items]

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        if self.fail_after is not None and len(self.decided) >= self.fail_after:
            raise BackendError("model server unavailable")
        self.decided += self._items(items)
        return self.inner.decide(items)

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        self.reviewed += self._items(items)
        return self.inner.review(items)

    @property
    def asked(self) -> list[Item]:
        return self.decided + self.reviewed


def _turns() -> list[dict[str, Any]]:
    return [
        {
            "id": f"t{i}",
            "speaker_name": "Lena",
            "content": text,
            "timestamp": f"2023-{1 + i:02d}-10T10:00:00",
        }
        for i, text in enumerate(_SAID)
    ]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[LightMemory]:
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as m:
        m.add_memory(_turns(), force_extract=True, user_id=USER)
        m.construct_update_queue_all_entries(user_id=USER)
        yield m


def _pass(mem: LightMemory, updater: Updater, recheck: bool = False) -> UpdateReport:
    # every queued pair is given to decide (threshold -1): both stages have items
    return run_update(mem.store, mem.embedder, updater, Scope(USER), -1.0, recheck=recheck)


def _state(mem: LightMemory) -> list[tuple[str, str]]:
    """Each memory's text and the text of the one that replaced it (ids differ by store)."""
    entries = mem.list_entries({"kind": "entry"}, limit=1000, user_id=USER)
    text = {e.id: e.text for e in entries}
    return sorted((e.text, text.get(e.superseded_by, "")) for e in entries)


def test_a_repeated_pass_asks_only_what_changed_since(mem: LightMemory) -> None:
    first = _Asked(mem.updater)
    done = _pass(mem, first)
    assert first.decided and first.reviewed and done.skipped == 0
    assert done.superseded  # Boston by Denver, jasmine by lapsang
    changed = {*done.updated, *done.superseded}
    # the second pass is shown again only the items holding a memory the first changed
    again = _Asked(mem.updater)
    second = _pass(mem, again)
    assert again.asked and all(changed & {newer, *earlier} for newer, earlier in again.asked)
    assert second.skipped == len(first.asked) - len(again.asked)
    settled = _state(mem)
    third = _Asked(mem.updater)
    report = _pass(mem, third)
    assert third.asked == [] and report.examined == report.reviewed == 0
    assert report.skipped == len(first.asked) and _state(mem) == settled
    assert report.to_dict()["skipped"] == report.skipped


def test_a_memory_changed_meanwhile_is_asked_about_again(mem: LightMemory) -> None:
    _pass(mem, _Asked(mem.updater))
    _pass(mem, _Asked(mem.updater))  # settled
    pottery = next(e for e in mem.list_entries(limit=100, user_id=USER) if "pottery" in e.text)
    # its prompt text only: what it is indexed under, so its neighbours, stay the same
    vec = mem.embedder.embed([pottery.search_text])[0]
    mem.store.update_entry(replace(pottery, text="pottery class, museum"), vec, "edited")
    again = _Asked(mem.updater)
    _pass(mem, again)
    assert again.asked
    assert all(pottery.id in {newer, *earlier} for newer, earlier in again.asked)


def test_recheck_and_another_updater_are_shown_everything(mem: LightMemory) -> None:
    _pass(mem, _Asked(mem.updater))
    _pass(mem, _Asked(mem.updater))
    settled = _pass(mem, _Asked(mem.updater))
    for updater, recheck in ((_Asked(mem.updater), True), (_Asked(mem.updater, "model-b"), False)):
        report = _pass(mem, updater, recheck)
        assert report.skipped == 0 and len(updater.asked) == settled.skipped
    # the facade's flag, checked
    again = mem.offline_update_all_entries(recheck=True, user_id=USER)
    assert again.skipped == 0 and mem.offline_update_all_entries(user_id=USER).skipped > 0
    with pytest.raises(InvalidInputError, match="recheck"):
        mem.offline_update_all_entries(recheck="yes", user_id=USER)  # type: ignore[arg-type]


def test_a_pass_that_failed_resumes_where_it_stopped(mem: LightMemory, tmp_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(tmp_path / "whole.db")}}) as whole:
        whole.add_memory(_turns(), force_extract=True, user_id=USER)
        whole.construct_update_queue_all_entries(user_id=USER)
        once = _Asked(whole.updater)
        _pass(whole, once)
        expected = _state(whole)
    failing = _Asked(mem.updater, fail_after=3)
    with pytest.raises(BackendError):
        _pass(mem, failing)
    assert len(failing.decided) == 3
    resumed = _Asked(mem.updater)
    _pass(mem, resumed)
    # what the failed pass decided and did not change is not asked again
    assert len(resumed.decided) < len(once.decided)
    _pass(mem, _Asked(mem.updater))
    assert _state(mem) == expected


def test_a_purge_leaves_no_check_of_what_it_erased(mem: LightMemory, tmp_path: Path) -> None:
    _pass(mem, _Asked(mem.updater))
    db = sqlite3.connect(tmp_path / "m.db")
    try:
        ids = {r[0] for r in db.execute("SELECT entry_id FROM update_checks")}
        assert ids
        gone = mem.purge(sorted(ids)[0], user_id=USER)
        assert gone.removed["update_checks"] >= 1
        left = {r[0] for r in db.execute("SELECT entry_id FROM update_checks")}
        assert sorted(ids)[0] not in left
        mem.purge(user_id=USER)  # the whole scope
        assert db.execute("SELECT count(*) FROM update_checks").fetchone() == (0,)
    finally:
        db.close()
