"""The embedded store's search index: IVF beside exact search, kept in place across edits
by two connections, saved beside the file, and rebuilt when the saved copy does not match."""

from __future__ import annotations

import gc
import logging
import os
import sqlite3
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import faiss  # noqa: F401  (the ann extra is part of dev: these tests must not skip)
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem import InvalidInputError, SQLiteStore
from lightmem.store.ann_index import IndexPolicy
from lightmem.store.index_file import MAGIC
from lightmem.types import Filters, MemoryEntry, Scope

DIM = 16
WORDS = ["red", "apple", "green", "tree", "blue", "sky", "pie", "recipe", "river", "stone"]
#: Approximate search on from 8 rows, saved from 8 rows and after every change; the probe
#: and the re-ranked pool cover every row, so results must equal exact search.
EXHAUSTIVE = IndexPolicy(
    ann_min_rows=8,
    exact_allowed=1,
    nprobe=10_000,
    min_candidates=10_000,
    persist_min_rows=8,
    save_after=1,
)


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _entry(i: int, text: str, user: str = "u") -> MemoryEntry:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    return MemoryEntry(
        id=f"e{i}",
        text=text,
        original_text=text,
        scope=Scope(user),
        created_at=now,
        updated_at=now,
    )


def _open(path: Path, policy: IndexPolicy = EXHAUSTIVE) -> SQLiteStore:
    store = SQLiteStore(path, index_policy=policy)
    store.bind_embedder("test", DIM)
    return store


def _fill(store: SQLiteStore, n: int, start: int = 0) -> None:
    rng = np.random.default_rng(start)
    store.commit_extraction(
        [
            (_entry(i, " ".join(rng.choice(WORDS, 3)), "u" if i % 3 else "v"), _vec(i))
            for i in range(start, start + n)
        ],
        [],
    )


def _reference(path: Path, tmp: Path) -> SQLiteStore:
    """The same data, searched by a store built from scratch (a copy with no saved index)."""
    copy = tmp / f"ref-{os.urandom(4).hex()}.db"
    with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    return _open(copy, IndexPolicy(ann_min_rows=10**9, persist_min_rows=10**9))


def _state(store: SQLiteStore) -> tuple[list[object], list[float]]:
    """What the store answers: ids (exact) and scores (compared with a tolerance)."""
    ids: list[object] = []
    scores: list[float] = []
    for q in (1, 5, 77):
        for scope, f in (
            (Scope(), Filters()),
            (Scope("v"), Filters()),
            (Scope(), Filters(kinds=("entry",))),
        ):
            hits = store.vector_search(_vec(q), scope, f, 5)
            ids.append([i for i, _ in hits])
            scores += [s for _, s in hits]
    for words in (["apple"], ["sky", "stone"]):
        hits = store.text_search(words, Scope(), Filters(), 4)
        ids.append(len(hits))
        scores += sorted(s for _, s in hits)  # ties may pick either id
    found, matrix, _ = store.vectors(Scope("u"), Filters())
    ids += [sorted(found), matrix.shape[0]]
    return ids, scores


def _same(a: SQLiteStore, b: SQLiteStore) -> None:
    (ids_a, scores_a), (ids_b, scores_b) = _state(a), _state(b)
    assert ids_a == ids_b
    assert scores_a == pytest.approx(scores_b, abs=1e-5)


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "add_other", "update", "delete", "restore", "reopen"]),
        st.integers(0, 11),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None)
@given(ops)
def test_incremental_ivf_index_matches_a_fresh_exact_search(
    tmp_path_factory: pytest.TempPathFactory, sequence: list[tuple[str, int]]
) -> None:
    """Random writes by two connections; after each, the first connection's index (IVF,
    changed in place, saved and read back on reopen) answers as a fresh exact search."""
    tmp = tmp_path_factory.mktemp("ivf")
    path = tmp / "s.db"
    mine, other = _open(path), _open(path)
    _fill(mine, 12)
    n = 100
    try:
        for op, i in sequence:
            eid = f"e{i}"
            current = mine.get_entry(eid, Scope("u")) or mine.get_entry(eid, Scope("v"))
            if op in ("add", "add_other"):
                n += 1
                _fill(other if op == "add_other" else mine, 1, n)
            elif op == "update" and current is not None:
                mine.update_entry(replace(current, text="blue river"), _vec(i + 500), "t")
            elif op == "delete" and current is not None:
                other.delete_entry(eid, current.scope, "t")
            elif op == "restore" and current is None:
                snaps = [h.after for s in ("u", "v") for h in mine.history(eid, Scope(s))]
                if [x for x in snaps if x]:
                    snap = MemoryEntry.from_dict([x for x in snaps if x][-1])
                    mine.restore_entry(snap, _vec(i + 900), "t")
            elif op == "reopen":
                mine.close()  # saves the index (save_after=1) ...
                mine = _open(path)  # ... and the new connection reads it back
            before = mine.entry_index.cache
            ref = _reference(path, tmp)
            try:
                _same(mine, ref)
            finally:
                ref.close()
            cache = mine.entry_index.cache
            assert cache is not None and cache.ann is not None  # the IVF path was used
            if before is not None:
                assert cache is before  # changed in place, not rebuilt
    finally:
        mine.close()
        other.close()


def test_filtered_search_fills_its_limit_through_the_ivf_index(tmp_path: Path) -> None:
    """A filter that leaves few rows, spread over many clusters: the probe widens until
    ``limit`` results pass, and the results equal exact search."""
    policy = IndexPolicy(ann_min_rows=100, exact_allowed=1, nprobe=1)
    store = _open(tmp_path / "f.db", policy)
    rng = np.random.default_rng(0)
    store.commit_extraction(
        [(_entry(i, "w", "rare" if i % 97 == 0 else "many"), _vec(i)) for i in range(2000)], []
    )
    ref = _reference(tmp_path / "f.db", tmp_path)
    try:
        for q in rng.integers(0, 10_000, 10).tolist():
            got = store.vector_search(_vec(q), Scope("rare"), Filters(), 10)
            want = ref.vector_search(_vec(q), Scope("rare"), Filters(), 10)
            assert len(got) == 10
            assert [i for i, _ in got] == [i for i, _ in want]
        assert store.entry_index.cache is not None and store.entry_index.cache.ann is not None
    finally:
        store.close()
        ref.close()


def test_without_the_ann_extra_a_large_store_searches_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lightmem.store.sqlite_search.ann_available", lambda: False)
    store = _open(tmp_path / "x.db")
    _fill(store, 40)
    ref = _reference(tmp_path / "x.db", tmp_path)
    try:
        _same(store, ref)
        assert store.entry_index.cache is not None and store.entry_index.cache.ann is None
    finally:
        store.close()
        ref.close()


def test_ivf_recall_on_clustered_vectors(tmp_path: Path) -> None:
    """The default probe and re-ranking find the exact neighbours (recall@10 >= 0.9)."""
    rng = np.random.default_rng(1)
    centres = rng.standard_normal((60, DIM)).astype(np.float32)
    m = centres[rng.integers(0, 60, 3000)] + 0.3 * rng.standard_normal((3000, DIM))
    m = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    store = _open(tmp_path / "r.db", IndexPolicy(ann_min_rows=1000, exact_allowed=1))
    store.commit_extraction([(_entry(i, "w"), m[i]) for i in range(3000)], [])
    recalls = []
    for p in rng.integers(0, 3000, 50).tolist():
        q = m[p] + 0.05 * rng.standard_normal(DIM).astype(np.float32)
        truth = {f"e{j}" for j in np.argsort(-(m @ q))[:10]}
        got = {i for i, _ in store.vector_search(q, Scope(), Filters(), 10)}
        recalls.append(len(got & truth) / 10)
    assert store.entry_index.cache is not None and store.entry_index.cache.ann is not None
    # lists_per_sqrt (4) times sqrt(n) lists: finer than sqrt(n), for recall at 1M rows
    assert store.entry_index.cache.ann.nlist == int(4 * np.sqrt(3000))
    store.close()
    assert float(np.mean(recalls)) >= 0.9


def _saved(path: Path) -> Path:
    return Path(str(path) + ".index")


def _damage_vectors(index: Path) -> None:
    """Overwrite the first saved vectors (the first section) with other numbers."""
    data = bytearray(index.read_bytes())
    (size,) = struct.unpack("<Q", data[len(MAGIC) : len(MAGIC) + 8])
    base = -(-(len(MAGIC) + 12 + size) // 64) * 64
    data[base : base + 4 * DIM * 4] = np.full(4 * DIM, 0.5, dtype=np.float32).tobytes()
    index.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        _damage_vectors,
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
        lambda p: p.write_bytes(b"not an index"),
    ],
    ids=["altered", "truncated", "garbage"],
)
def test_a_damaged_saved_index_is_detected_and_rebuilt(
    tmp_path: Path, damage: Callable[[Path], object], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "d.db"
    store = _open(path)
    _fill(store, 40)
    store.vector_search(_vec(0), Scope(), Filters(), 3)  # builds and saves
    store.close()
    index = _saved(path)
    assert index.exists()
    damage(index)
    ref = _reference(path, tmp_path)
    with caplog.at_level(logging.WARNING, logger="lightmem.store"):
        store = _open(path)
        try:
            _same(store, ref)
        finally:
            store.close()
            ref.close()
    assert "rebuilding" in caplog.text
    reopened = _open(path)  # the rebuilt index was saved again and is read back
    with caplog.at_level(logging.WARNING, logger="lightmem.store"):
        caplog.clear()
        reopened.vector_search(_vec(0), Scope(), Filters(), 3)
        reopened.close()
    assert caplog.text == ""


def test_an_index_of_another_store_or_ahead_of_the_store_is_not_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    store = _open(path)
    _fill(store, 40)
    store.vector_search(_vec(0), Scope(), Filters(), 3)
    store.close()
    # another store's file in its place
    other = _open(tmp_path / "other.db")
    _fill(other, 40, 1000)
    other.vector_search(_vec(0), Scope(), Filters(), 3)
    other.close()
    os.replace(_saved(tmp_path / "other.db"), _saved(path))
    with caplog.at_level(logging.WARNING, logger="lightmem.store"):
        store = _open(path)
        assert store.vector_search(_vec(3), Scope(), Filters(), 1)[0][0] == "e3"
        store.close()
    assert "another store" in caplog.text
    # a store restored from a backup, its index saved after later deletes
    backup = tmp_path / "backup.db"
    with sqlite3.connect(path) as src, sqlite3.connect(backup) as dst:
        src.backup(dst)
    store = _open(path)
    store.delete_entry("e3", Scope("v"), "t")
    store.vector_search(_vec(0), Scope(), Filters(), 3)
    store.close()
    os.replace(_saved(path), _saved(backup))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lightmem.store"):
        restored = _open(backup)
        assert restored.vector_search(_vec(3), Scope(), Filters(), 1)[0][0] == "e3"
        restored.close()
    assert "ahead of the store" in caplog.text


_CHILD = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from dataclasses import replace
    from lightmem import InvalidInputError, SQLiteStore
    from lightmem.store import index_file
    from lightmem.store.ann_index import IndexPolicy
    from lightmem.types import Scope
    path, mode = sys.argv[1], sys.argv[2]
    policy = IndexPolicy(ann_min_rows=8, exact_allowed=1, nprobe=10_000,
                         min_candidates=10_000, persist_min_rows=8, save_after=1)
    store = SQLiteStore(path, index_policy=policy)
    store.bind_embedder("test", 16)
    cur = store.get_entry("e4", Scope("u"))
    v = np.ones(16, dtype=np.float32) / 4
    store.update_entry(replace(cur, text="moved stone"), v, "t")
    store.delete_entry("e5", Scope("u"), "t")
    store.vector_search(v, Scope(), __import__("lightmem").Filters(), 3)
    if mode == "during-save":
        index_file.os.replace = lambda *a: os._exit(9)  # dies with the new file unrenamed
        store.close()
    os._exit(9)  # after the SQLite commits, before any index write
    """
)


@pytest.mark.parametrize("mode", ["before-save", "during-save"])
def test_a_crash_between_the_commit_and_the_index_write_is_recovered(
    tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "c.db"
    store = _open(path)
    _fill(store, 40)
    store.vector_search(_vec(0), Scope(), Filters(), 3)
    store.close()
    saved_before = _saved(path).read_bytes()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), mode], env=env, capture_output=True, check=False
    )
    assert done.returncode == 9, done.stderr.decode()
    assert _saved(path).read_bytes() == saved_before  # the saved index is the old one
    ref = _reference(path, tmp_path)
    store = _open(path)
    try:
        _same(store, ref)
        assert store.vector_search(np.full(DIM, 0.25, np.float32), Scope(), Filters(), 1)[0][0] == (
            "e4"
        )
        assert store.get_entry("e5", Scope("u")) is None
        assert "e5" not in store.vectors(Scope(), Filters())[0]
    finally:
        store.close()
        ref.close()


def test_a_damaged_vector_stays_out_of_vector_search_in_the_saved_index_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "v.db"
    store = _open(path)
    _fill(store, 40)
    store.close()
    with sqlite3.connect(path) as conn:  # another tool writes a short blob
        conn.execute(
            "UPDATE vectors SET vec = x'0102' WHERE rid = (SELECT rid FROM entries WHERE id = 'e7')"
        )
    ref = _reference(path, tmp_path)
    for opened in range(2):  # built from the rows, then read back from the saved index
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="lightmem.store"):
            store = _open(path)
            try:
                hits = [i for i, _ in store.vector_search(_vec(7), Scope(), Filters(), 40)]
                assert len(hits) == 39 and "e7" not in hits
                _same(store, ref)
            finally:
                store.close()
        assert ("left a damaged vector out" in caplog.text) == (opened == 0)
        assert _saved(path).exists()
    ref.close()


def test_purge_rewrites_the_saved_index_without_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    store = _open(path)
    _fill(store, 40)
    secret = _entry(999, "zanzibar treasure map", "u")
    secret = replace(secret, id="secret-entry-id")
    store.commit_extraction([(secret, _vec(999))], [])
    store.vector_search(_vec(0), Scope(), Filters(), 3)
    store.close()
    assert b"secret-entry-id" in _saved(path).read_bytes()
    store = _open(path)
    store.purge(Scope("u"), "secret-entry-id")
    store.close()
    data = _saved(path).read_bytes()
    assert b"secret-entry-id" not in data and b"zanzibar" not in data
    assert _vec(999).tobytes() not in data
    store = _open(path)
    assert store.text_search(["zanzibar"], Scope(), Filters(), 3) == []
    store.close()


def _mapped_deleted(index: Path) -> list[str]:
    """Mappings of this process of a removed file at ``index``'s path."""
    gc.collect()
    maps = Path("/proc/self/maps").read_text().splitlines()
    return [m for m in maps if str(index) in m and "(deleted)" in m]


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc (Linux)")
def test_after_a_purge_no_process_keeps_the_old_index_file_mapped(tmp_path: Path) -> None:
    """Columns are mapped from the saved file: after a purge the purging store and every
    other one reading the file let go of the old file (whose blocks hold the purged
    vector) and map the rewritten one."""
    path = tmp_path / "m.db"
    store = _open(path)
    _fill(store, 40)
    store.commit_extraction([(_entry(999, "zanzibar"), _vec(999))], [])
    store.vector_search(_vec(0), Scope(), Filters(), 3)
    store.close()
    index = _saved(path)
    purger, other = _open(path), _open(path)
    try:
        for s in (purger, other):  # both map the saved file
            assert s.vector_search(_vec(999), Scope(), Filters(), 1)[0][0] == "e999"
        purger.purge(Scope("u"), "e999")
        for s in (purger, other):
            assert "e999" not in [i for i, _ in s.vector_search(_vec(999), Scope(), Filters(), 3)]
        assert _mapped_deleted(index) == []
        assert any(str(index) in m for m in Path("/proc/self/maps").read_text().splitlines())
    finally:
        purger.close()
        other.close()


def test_a_bad_index_policy_names_its_field() -> None:
    with pytest.raises(InvalidInputError, match=r"index_policy\.nprobe"):
        IndexPolicy(nprobe=0)


def test_a_failing_catch_up_is_raised_not_taken_for_a_damaged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a file that does not check out is rebuilt: a bug past the file's checks would
    otherwise rebuild the index on every open, unseen."""
    from lightmem.store.saved_index import SavedIndex

    path = tmp_path / "c.db"
    store = _open(path)
    _fill(store, 40)
    store.vector_search(_vec(0), Scope(), Filters(), 3)  # builds and saves
    store.close()

    def broken(*_: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(SavedIndex, "catch_up", broken)
    store = _open(path)
    try:
        with pytest.raises(KeyError, match="a bug"):
            store.vector_search(_vec(0), Scope(), Filters(), 3)
    finally:
        store.close()
