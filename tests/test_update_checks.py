"""An offline update pass shows its updater only what it was not shown before unchanged:
a repeated pass asks nothing, a changed memory is asked about again, a pass that stopped
resumes where it stopped, and another updater (or ``recheck``) is shown everything."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory
from lightmem.cli.main import main
from lightmem.errors import BackendError, InvalidInputError
from lightmem.pipeline import update
from lightmem.pipeline.update import UpdateAction, UpdateItem, Updater, UpdateReport, run_update
from lightmem.pipeline.update_checks import checks_key, item_digest
from lightmem.types import MemoryEntry, Scope

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
        self.signature = signature or "asked"
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
        _pass(whole, _Asked(whole.updater))  # settled
        expected = _state(whole)
    failing = _Asked(mem.updater, fail_after=3)
    with pytest.raises(BackendError):
        _pass(mem, failing)
    assert len(failing.decided) == 3
    resumed = _Asked(mem.updater)
    _pass(mem, resumed)
    # what the failed pass decided and did not change is not asked again
    assert len(resumed.decided) < len(once.decided)
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
        deleted = sorted(left)[0]
        mem.delete(deleted, user_id=USER)  # restorable: its row stays until a purge
        mem.purge(user_id=USER)  # the whole scope, entries deleted before included
        assert db.execute("SELECT count(*) FROM update_checks").fetchone() == (0,)
    finally:
        db.close()


def test_the_digest_holds_every_part_of_what_was_shown() -> None:
    def entry(eid: str, version: int = 1) -> MemoryEntry:
        return MemoryEntry(eid, "text", "text", Scope(USER), version=version)

    a, b, c = entry("a"), entry("b"), entry("c")
    base = item_digest("key", a, [b, c], {"b"})
    for changed in (
        item_digest("other key", a, [b, c], {"b"}),
        item_digest("key", entry("a", 2), [b, c], {"b"}),  # the newer entry changed
        item_digest("key", a, [entry("b", 2), c], {"b"}),  # an earlier one changed
        item_digest("key", a, [c, b], {"b"}),  # shown in another order
        item_digest("key", a, [b], {"b"}),  # one fewer
        item_digest("key", a, [b, c], ()),  # decided otherwise in the pass
    ):
        assert changed != base
    assert item_digest("key", a, [b, c], {"b"}) == base
    assert checks_key("s") == checks_key("s") != checks_key("t")


class _Deferring(_Asked):
    """Defers every item (a model whose answers all had to be dropped): changes nothing."""

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        self.decided += self._items(items)
        return [UpdateAction("defer", it.newer.id, "dropped") for it in items]

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        self.reviewed += self._items(items)
        return [UpdateAction("defer", it.newer.id, "dropped") for it in items]


def test_a_deferred_item_is_shown_again(mem: LightMemory) -> None:
    first = _Deferring(mem.updater)
    _pass(mem, first)
    assert first.decided and first.reviewed
    again = _Deferring(mem.updater)  # nothing changed: the same items, all shown again
    assert _pass(mem, again).skipped == 0 and again.asked == first.asked


class _Unsigned:
    """An updater written before signatures: shown everything, nothing recorded."""

    name = "unsigned"
    pairs_per_call = 10_000

    def __init__(self, inner: Updater) -> None:
        self.inner = inner
        self.items = 0

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        self.items += len(items)
        return self.inner.decide(items)

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        self.items += len(items)
        return self.inner.review(items)


def test_an_updater_without_a_signature_is_shown_everything(
    mem: LightMemory, tmp_path: Path
) -> None:
    for _ in range(3):  # settled: the third asks nothing
        settled = _pass(mem, _Asked(mem.updater))
    assert settled.examined == settled.reviewed == 0
    everything = _Asked(mem.updater)
    _pass(mem, everything, recheck=True)
    db = sqlite3.connect(tmp_path / "m.db")
    try:
        recorded = db.execute("SELECT count(*), max(checked_at) FROM update_checks").fetchone()
        old = _Unsigned(mem.updater)
        report = _pass(mem, old)
        assert report.skipped == 0 and old.items == len(everything.asked)
        again = db.execute("SELECT count(*), max(checked_at) FROM update_checks").fetchone()
        assert again == recorded  # nothing recorded
    finally:
        db.close()


class _Clock:
    """``time.monotonic`` for the update module: advanced by the updater's calls."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_a_pass_stopped_at_its_deadline_resumes(
    mem: LightMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(update, "time", clock)

    class Slow(_Asked):
        def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
            clock.now += 1.0  # each call takes a second
            return super().decide(items)

    first = Slow(mem.updater)
    stopped = run_update(mem.store, mem.embedder, first, Scope(USER), -1.0, deadline=2.5)
    assert not stopped.complete and len(first.decided) == 3 and first.reviewed == []
    resumed = _Asked(mem.updater)
    done = run_update(mem.store, mem.embedder, resumed, Scope(USER), -1.0)
    assert done.complete and resumed.reviewed
    # the three decided items were not asked again (unless the first pass changed them)
    shown_before = {newer for newer, _ in first.decided}
    assert len(shown_before & {newer for newer, _ in resumed.decided}) < 3


def test_the_cli_rechecks_on_request(
    mem: LightMemory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mem.close()
    argv = ["--store", str(tmp_path / "m.db"), "--user-id", USER, "offline-update", "--json"]
    runs = []
    for extra in ([], [], [], ["--recheck"]):  # the second settles what the first changed
        assert main([*argv, *extra]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[0]["skipped"] == 0 and runs[2]["skipped"] > 0 and runs[2]["reviewed"] == 0
    assert runs[3]["skipped"] == 0 and runs[3]["reviewed"] > 0
