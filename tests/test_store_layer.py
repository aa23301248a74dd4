"""The storage layer as a whole: old stores migrate, errors say what happened, bad stored
values never break a read, a read-only file still answers, and the package's imports and
public names stay sound."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

import lightmem
from lightmem import InvalidInputError, LightMemory, MemoryEntry, Message, SQLiteStore, StoreError
from lightmem.ledger import UsageRecord
from lightmem.store.sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from lightmem.types import Edge, Filters, Node, Scope

DIM = 8
FIXTURE = Path(__file__).parent / "fixtures" / "store-b3bd570.db"
ROOT = Path(__file__).resolve().parents[1]


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _entry(i: int, text: str, **extra: object) -> MemoryEntry:
    now = datetime.now(UTC)
    return MemoryEntry(
        id=f"e{i}",
        text=text,
        original_text=text,
        scope=Scope("u"),
        created_at=now,
        updated_at=now,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    return path


# -- migrations ---------------------------------------------------------------------------
def test_a_store_written_by_b3bd570_opens_and_migrates(old_store: Path) -> None:
    """The fixture was written by the store code of commit b3bd570 (schema version 1)."""
    with sqlite3.connect(old_store) as raw:
        assert raw.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("1",)
    with SQLiteStore(old_store) as store:
        store.bind_embedder("test", DIM)
        with store.db.read() as s:
            assert int(s.one("SELECT value FROM meta WHERE key='schema_version'")[0]) == (
                SCHEMA_VERSION
            )
            applied = [r[1] for r in s.all("SELECT * FROM schema_migrations ORDER BY version")]
            assert applied == [m.name for m in MIGRATIONS[1:]]
        alice = Scope("alice")
        assert store.counts(alice)["entries"] == 1 and store.counts(alice)["summaries"] == 1
        assert store.get_entry("e1", alice).text == "Alice moved to Paris"  # type: ignore[union-attr]
        assert store.get_entry("e1", alice).event_time is None  # type: ignore[union-attr]
        assert [h.op for h in store.history("e0", alice)] == ["add", "delete"]
        snap = store.history("e0", alice)[0].after
        restored = store.restore_entry(MemoryEntry.from_dict(snap), _vec(0), "t")  # type: ignore[arg-type]
        assert restored.version == 2
        assert store.load_update_queue(alice) == {"e1": [("e3", 0.9)]}
        assert [m.message.id for m in store.buffered(alice, "segmented")] == ["m2"]
        assert store.text_search(["chess"], Scope("bob"), Filters(), 3)[0][0] == "e2"
        assert store.vector_search(_vec(2), Scope(), Filters(), 1)[0][0] == "e2"
        assert store.usage()[0].calls == 3
        graph = store.graph()
        # Old graph rows were given their node's scope by the migration step.
        assert len(graph.graph_history(scope=alice)) == 4
        assert graph.graph_history(scope=Scope("bob")) == []
        assert graph.graph_counts(Scope("bob"))["ground_edges"] == 0
        assert graph.graph_counts(alice)["ground_edges"] == 1
        assert [e.dst for e in graph.edges("ground", scope=alice)] == ["n2"]
        graph.undo(4, lambda _t: _vec(30), scope=alice)
        assert graph.get_node("n1").text == "The key is under the mat"  # type: ignore[union-attr]
        assert store.integrity_check() == []


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 999"):
        SQLiteStore(path)


# -- errors -------------------------------------------------------------------------------
def test_a_full_disk_is_a_store_error_with_the_cause_and_leaves_the_store_sound(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "full.db")
    store.bind_embedder("test", DIM)
    store.commit_extraction([(_entry(0, "before the disk filled"), _vec(0))], [])
    with store.db.read() as s:
        pages = s.one("PRAGMA page_count")[0]
        s.raw.execute(f"PRAGMA max_page_count = {pages + 1}")  # a disk with one page free
    big = "x" * 20_000
    with pytest.raises(StoreError, match="full"):
        for i in range(1, 50):
            store.commit_extraction([(_entry(i, f"{big} {i}"), _vec(i))], [])
    assert store.counts(Scope("u"))["entries"] == 1
    assert store.integrity_check() == []
    with pytest.raises(StoreError, match="full"):
        store.record_usage([UsageRecord("embed", "x" * 50_000, 1)])
    store.close()


def test_a_read_only_store_answers_reads_and_keeps_usage_in_memory(old_store: Path) -> None:
    SQLiteStore(old_store).close()  # migrated once, writable
    with SQLiteStore(old_store, read_only=True) as store:
        assert store.db.read_only
        store.bind_embedder("test", DIM)
        alice = Scope("alice")
        assert store.vector_search(_vec(1), alice, Filters(), 1)
        assert store.list_entries(alice, Filters(), 10, 0)
        assert store.history("e1", alice)
        store.record_usage([UsageRecord("embed", "search", 2, 2)])
        assert {(r.op, r.calls) for r in store.usage()} == {("embed", 3), ("search", 2)}
        with pytest.raises(StoreError, match="read-only"):
            store.delete_entry("e1", alice, "t")


def test_a_file_the_process_cannot_write_opens_read_only(
    old_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import read_only_file

    with SQLiteStore(old_store) as writable:  # migrated once, as any first open does
        expected = writable.counts(Scope())
    try:
        read_only_file(old_store, monkeypatch)
        with SQLiteStore(old_store) as store:
            assert store.db.read_only and store.counts(Scope()) == expected
            assert expected["entries"] > 0
            with pytest.raises(StoreError, match="read-only"):
                store.delete_entry("e1", Scope("alice"), "t")
    finally:
        old_store.chmod(0o644)


def test_the_library_searches_a_read_only_store(tmp_path: Path, embedder: object) -> None:
    from lightmem import LightMemory

    path = tmp_path / "lib.db"
    with LightMemory.from_config({"store": {"path": str(path)}}, embedder=embedder) as m:  # type: ignore[arg-type]
        m.add_memory({"content": "Maya keeps bees in Lyon"}, force_extract=True, user_id="maya")
    with LightMemory(store=SQLiteStore(path, read_only=True), embedder=embedder) as mem:  # type: ignore[arg-type]
        hits = mem.retrieve("bees", user_id="maya")
        assert any("bees" in h.entry.original_text for h in hits)
        assert mem.stats(user_id="maya")["entries"] >= 1


# -- bad stored values --------------------------------------------------------------------
def test_stored_nan_and_bad_text_never_break_a_read(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "bad.db")
    store.bind_embedder("test", DIM)
    store.commit_extraction([(_entry(i, f"word{i}"), _vec(i)) for i in range(3)], [])
    store.add_messages(Scope("u"), [(Message(id="m1", role="user", content="hi"), "hi")])
    with sqlite3.connect(tmp_path / "bad.db") as raw:  # as an older lightmem wrote them
        raw.execute(
            """UPDATE entries SET metadata = '{"mood": NaN, "event_id": "v"}' WHERE id='e0'"""
        )
        raw.execute("""UPDATE entries SET metadata = '{"k": "\\ud800"}' WHERE id = 'e1'""")
        raw.execute("UPDATE entries SET text = CAST(X'41EDA080' AS TEXT) WHERE id = 'e2'")
        raw.execute("UPDATE messages SET metadata = '{\"x\": Infinity}'")
        raw.execute("UPDATE history SET after = '{\"metadata\": {\"m\": NaN}}' WHERE entry_id='e0'")
    u = Scope("u")
    assert len(store.list_entries(u, Filters(), 10, 0)) == 3
    assert store.list_entries(u, Filters(event_id="v"), 10, 0) == []  # unreadable: no match
    assert store.get_entry("e0", u).metadata == {"mood": "NaN", "event_id": "v"}  # type: ignore[union-attr]
    assert store.get_entry("e1", u).metadata == {"k": "\ufffd"}  # type: ignore[union-attr]
    assert store.get_entry("e2", u).text.startswith("A\ufffd")  # type: ignore[union-attr]
    assert store.vector_search(_vec(0), u, Filters(event_id="v"), 3) == []
    assert store.text_search(["word1"], u, Filters(), 3)[0][0] == "e1"
    assert store.get_messages(u, ["m1"])[0].metadata == {"x": "Infinity"}
    assert store.history("e0", u)[0].after == {"metadata": {"m": "NaN"}}
    json.dumps([e.to_dict() for e in store.list_entries(u, Filters(), 10, 0)], allow_nan=False)
    store.close()


def test_new_writes_refuse_values_json_cannot_hold(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "w.db")
    store.bind_embedder("test", DIM)
    bad = Message(id="m1", role="user", content="hi", metadata={"mood": float("nan")})
    with pytest.raises(InvalidInputError, match=r"messages\[0\]\.metadata: NaN"):
        store.add_messages(Scope("u"), [(bad, "hi")])
    with pytest.raises(InvalidInputError, match="metadata: NaN"):
        store.commit_extraction([(_entry(1, "x", metadata={"v": float("inf")}), _vec(1))], [])
    with pytest.raises(InvalidInputError, match="surrogate"):
        store.commit_extraction([(_entry(2, "lone \ud800"), _vec(2))], [])
    with pytest.raises(InvalidInputError, match=r"node\.data: NaN"):
        store.graph().add_node(Node("n", "semantic", "t", data={"w": float("nan")}), _vec(3), "t")
    assert store.counts(Scope())["entries"] == 0 and store.integrity_check() == []
    store.close()


def test_graph_edge_reads_and_undo_respect_scope(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "g.db") as store:
        g = store.graph()
        a, b = Scope("alice"), Scope("bob")
        g.add_node(Node("a1", "semantic", "alice fact", a), _vec(1), "t")
        g.add_node(Node("a2", "episodic", "alice episode", a), _vec(2), "t")
        g.add_node(Node("b1", "semantic", "bob fact", b), _vec(3), "t")
        g.add_edge(Edge("ground", "a1", "a2"), "t")
        assert g.edges(scope=b) == [] and len(g.edges(scope=a)) == 1
        assert all("alice" not in json.dumps(h) for h in g.graph_history(scope=b))
        seq = g.graph_history(scope=a)[-1]["seq"]
        with pytest.raises(lightmem.NotFoundError):
            g.undo(seq, lambda _t: _vec(0), scope=b)
        g.undo(seq, lambda _t: _vec(0), scope=a)
        assert g.edges(scope=a) == []


# -- the package --------------------------------------------------------------------------
_IMPORT_EACH = textwrap.dedent(
    """
    import importlib, os, pkgutil, sys, lightmem
    # Importing any lightmem module runs the package's __init__ first, which imports the
    # modules it exports in a fixed order: those import the same way whichever module is
    # asked for, so only the others need a fresh package each (walk_packages below imports
    # subpackages, so this is taken before it).
    base = {k for k in sys.modules if k.startswith("lightmem")}
    names = sorted(m.name for m in pkgutil.walk_packages(lightmem.__path__, "lightmem."))
    names.append("fluxmem")
    names = [n for n in names if n not in base]

    def ours():
        return [k for k in sys.modules if k.startswith(("lightmem", "fluxmem"))]

    # Every module once, so that the libraries they use are loaded here (as they would be
    # in a long-lived process); failures are reported by the fresh imports below.
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    for k in ours():
        del sys.modules[k]
    import lightmem  # the package as a fresh __init__ leaves it, and nothing else of ours
    assert set(ours()) == base, sorted(set(ours()) ^ base)

    def import_first(name):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith(("lightmem", "fluxmem")):
                return f"{name}: {exc!r}"
        except Exception as exc:
            return f"{name}: {exc!r}"
        return ""

    failed = []
    for name in names:
        # A fresh lightmem for each module (a forked copy of this process, whose package
        # is as its __init__ left it): a cycle shows when its module is imported first.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                said = import_first(name)
            except BaseException as exc:
                said = f"{name}: {exc!r}"
            os.write(w, said.encode("utf-8", "backslashreplace"))
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            said = f.read().decode()
        status = os.waitpid(pid, 0)[1]
        if said:
            failed.append(said)
        elif status != 0:
            failed.append(f"{name}: the importing process ended with status {status}")
    print("\\n".join(failed))
    """
)


def test_every_module_imports_on_its_own() -> None:
    """Each module imported first into a fresh package (one forked process per module)."""
    # A few CPU-seconds; the timeout is only a safety net on a loaded machine.
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH], capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_the_storage_layer_has_no_import_cycle() -> None:
    """Module-level and deferred imports among ``lightmem.store`` and ``lightmem.types``."""
    import ast

    src = ROOT / "src" / "lightmem" / "store"
    graph: dict[str, set[str]] = {}
    for f in src.glob("*.py"):
        mod = f"lightmem.store.{f.stem}" if f.stem != "__init__" else "lightmem.store"
        deps: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                deps.add(node.module)
        graph[mod] = {d for d in deps if d.startswith("lightmem.store.")}
    seen: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        if seen.get(m) == 1:
            raise AssertionError("import cycle: " + " -> ".join([*path, m]))
        if seen.get(m) == 2:
            return
        seen[m] = 1
        for d in sorted(graph.get(m, ())):
            visit(d, [*path, m])
        seen[m] = 2

    for m in sorted(graph):
        visit(m, [])


def test_all_matches_the_documented_public_api() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- public-api -->(.*?)<!-- /public-api -->", readme, re.S)
    assert block, "README: the public API list is missing"
    documented = set(re.findall(r"`(\w+)`", block.group(1)))
    assert documented == set(lightmem.__all__)
    assert lightmem.__all__ == sorted(lightmem.__all__)
    for name in lightmem.__all__:
        assert getattr(lightmem, name).__module__.startswith("lightmem"), name


def test_every_module_says_what_it_exports_and_is_imported_by_it() -> None:
    """Each module of ``lightmem`` has an ``__all__`` of names bound there (what it
    imports only by naming it: a declared re-export), and every ``from lightmem.x import
    name`` in the package takes a name from ``x.__all__``, a submodule or a dunder
    (``__version__``): nothing is imported through a module that merely imported it, nor
    from outside a module's interface."""
    import ast

    pkg = ROOT / "src" / "lightmem"
    exports: dict[str, list[str]] = {}
    trees: dict[str, ast.Module] = {}
    problems: list[str] = []
    for f in sorted(pkg.rglob("*.py")):
        parts = f.relative_to(pkg.parent).with_suffix("").parts
        mod = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = trees[mod] = ast.parse(f.read_text())
        defined = {
            t.id
            for n in tree.body
            for t in (
                n.targets
                if isinstance(n, ast.Assign)
                else [n.target]
                if isinstance(n, ast.AnnAssign)
                else []
            )
            if isinstance(t, ast.Name)
        } | {
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        # What a module imports it may re-export, by naming it in its __all__.
        defined |= {
            (a.asname or a.name).split(".")[0]
            for n in tree.body
            if isinstance(n, ast.ImportFrom | ast.Import)
            for a in n.names
        }
        found = [
            n.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
        ]
        if not found or not isinstance(found[0], ast.List | ast.Tuple):
            problems.append(f"{mod}: no __all__ list")
            continue
        names = [e.value for e in found[0].elts if isinstance(e, ast.Constant)]
        exports[mod] = [str(x) for x in names]
        problems += [
            f"{mod}.__all__: {x!r} is not defined there" for x in names if x not in defined
        ]
    for mod, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            src = node.module
            if src not in exports:
                continue  # another package, or a module already reported above
            for a in node.names:
                if a.name in exports[src] or f"{src}.{a.name}" in trees or a.name[:2] == "__":
                    continue
                problems.append(f"{mod}: imports {a.name!r} from {src}, not in its __all__")
    assert problems == []


def test_no_private_attribute_is_reached_across_modules() -> None:
    """``x._name`` only on ``self``/``cls`` in the storage layer and its callers' files."""
    pattern = re.compile(r"(?<![\w.])(?!self\b|cls\b)([a-z_]\w*)\._[a-z]\w*")
    files = [*sorted((ROOT / "src" / "lightmem" / "store").glob("*.py"))]
    hits = [
        f"{f.name}: {line.strip()}"
        for f in files
        for line in f.read_text().splitlines()
        if pattern.search(line) and not line.lstrip().startswith("#")
    ]
    assert hits == []


def test_a_closed_memory_refuses_reads_and_writes_with_a_store_error(tmp_path: Path) -> None:
    mem = LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}})
    mem.add_memory([{"id": "t1", "content": "I like tea."}], force_extract=True)
    mem.close()
    with pytest.raises(StoreError, match="closed"):
        mem.retrieve("tea")
    with pytest.raises(StoreError, match="closed"):
        mem.add_memory([{"id": "t2", "content": "And coffee."}])
