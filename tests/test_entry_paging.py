"""Reading every entry in pages (window summaries) is paged by key, not by offset: an entry
deleted between two pages makes no other one skip a page. The same on both backends."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from lightmem import Embedder, MemoryEntry
from lightmem.config import build_store, parse_config
from lightmem.pipeline.summarize import summarize_windows
from lightmem.store.base import MemoryStore
from lightmem.types import Filters, Scope

T0 = datetime(2024, 3, 1, tzinfo=UTC)
DIM = 8


def _fill(store: MemoryStore) -> list[str]:
    """Six dated entries, two of them at the same time (their order then is the store's);
    their ids in the store's listing order."""
    store.bind_embedder("test", DIM)
    times = [T0 + timedelta(days=d) for d in (0, 1, 1, 2, 3, 4)]
    rows = []
    for i, at in enumerate(times):
        vec = np.zeros(DIM, dtype=np.float32)
        vec[i % DIM] = 1.0
        text = f"fact number {i}"
        entry = MemoryEntry(
            id=f"e{i}", text=text, original_text=text, scope=Scope("u"), timestamp=at
        )
        rows.append((entry, vec))
    store.commit_extraction(rows, [])
    return [e.id for e in store.list_entries(Scope("u"), Filters(), 100, 0)]


@pytest.fixture
def store(store_config: dict[str, Any]) -> Iterator[MemoryStore]:
    s = build_store(parse_config({"store": store_config}))
    try:
        yield s
    finally:
        s.close()


def test_a_delete_between_pages_skips_no_entry(store: MemoryStore) -> None:
    """Finding 11 (second review): with pages of two, deleting an entry already read makes
    no unread entry slip behind the next page's start; entries come in listing order."""
    order = _fill(store)
    pages = store.iter_entries(Scope("u"), Filters(), 2)
    seen = [next(pages).id, next(pages).id]  # the first page
    store.delete_entry(seen[0], Scope("u"), "test")
    seen += [e.id for e in pages]
    assert seen == order


class _DeletingAfterFirstPage:
    """The store, with one entry deleted by "another writer" once the first page is read."""

    def __init__(self, store: MemoryStore, victim: str, page: int) -> None:
        self._store, self._victim, self._page = store, victim, page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _delete(self) -> None:
        self._store.delete_entry(self._victim, Scope("u"), "another writer")

    def list_entries(
        self, scope: Scope, filters: Filters, limit: int, offset: int
    ) -> list[MemoryEntry]:
        out = self._store.list_entries(scope, filters, limit, offset)
        if offset == 0:
            self._delete()
        return out

    def iter_entries(self, scope: Scope, filters: Filters, page: int) -> Iterator[MemoryEntry]:
        for n, e in enumerate(self._store.iter_entries(scope, filters, page), 1):
            yield e
            if n == self._page:
                self._delete()


class _Axes(Embedder):
    """Texts as vectors on the axes, by length: enough for a store bound to it."""

    name, dim = "test", DIM

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        return np.eye(DIM, dtype=np.float32)[[len(t) % DIM for t in texts]]


class _Recording:
    """A summarizer noting which entries each window's summary was made from."""

    name = "recording"
    prompt_version = ""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def summarize(self, entries: Sequence[MemoryEntry], previous: str) -> str:
        self.seen += [e.id for e in entries]
        return "summary of " + ", ".join(e.id for e in entries)


def test_window_summaries_read_every_entry_despite_a_concurrent_delete(
    store: MemoryStore,
) -> None:
    order = _fill(store)
    racing = _DeletingAfterFirstPage(store, order[0], page=2)
    summarizer = _Recording()
    summarize_windows(
        racing,
        _Axes(),
        summarizer,
        Scope("u"),
        timedelta(days=1),
        "global",
        page=2,
    )
    assert sorted(summarizer.seen) == sorted(order)  # the deleted one was read before


def test_the_newest_graph_nodes_are_read_as_such(store: MemoryStore) -> None:
    from lightmem.types import Node

    store.bind_embedder("test", DIM)
    graph = store.graph()
    for i in range(6):
        vec = np.zeros(DIM, dtype=np.float32)
        vec[i % DIM] = 1.0
        graph.add_node(Node(f"n{i}", "semantic", f"fact {i}"), vec, "test")
    scope = Scope()
    assert [n.id for n in graph.nodes("semantic", scope, 2)] == ["n0", "n1"]
    assert [n.id for n in graph.nodes("semantic", scope, 2, newest=True)] == ["n4", "n5"]
    assert [n.id for n in graph.nodes("semantic", scope, 10, newest=True)] == [
        f"n{i}" for i in range(6)
    ]
