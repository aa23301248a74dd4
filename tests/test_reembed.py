"""Re-embedding a store with another embedder (issue 16): every vector (entries of every
kind and scope, graph nodes, skill triggers in nodes and graph history) recomputed, the
store switched atomically, the old embedder refused afterwards, a crash leaving the store
as it was and a rerun resuming; on SQLite and PostgreSQL, and from the command line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from lightmem import LightMemory, SQLiteStore, WordLlamaEmbedder
from lightmem.cli.main import main
from lightmem.errors import BackendError, StoreError
from lightmem.fluxmem import FluxMemAgent, StepResult
from lightmem.store.ann_index import IndexPolicy
from lightmem.store.base import MemoryStore
from lightmem.store.entries import SQLStore
from lightmem.store.values import Vector
from lightmem.types import Filters, NodeKind, Scope

NEW_DIM = 128  # wordllama truncated: another identity and another dimension
_KINDS: tuple[NodeKind, ...] = ("semantic", "episodic", "procedural")


class FailingEmbedder(WordLlamaEmbedder):
    """The new embedder, failing on its ``fail_at``-th call (a crash mid-way)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(NEW_DIM)
        self.calls = 0
        self.fail_at = fail_at

    def embed(self, texts: Sequence[str], *, op: str = "embed") -> Vector:
        self.calls += 1
        if self.calls == self.fail_at:
            raise BackendError("simulated crash of the embedder")
        return super().embed(texts, op=op)


class Recording(WordLlamaEmbedder):
    """The new embedder, keeping the texts it was asked to embed."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str], *, op: str = "embed") -> Vector:
        self.texts += texts
        return super().embed(texts, op=op)


class Permuted(WordLlamaEmbedder):
    """Another embedder of the same dimension (wordllama's dimensions in another order)."""

    name = "wordllama-permuted:256"

    def __init__(self) -> None:
        super().__init__()
        self.name = Permuted.name

    def _embed(self, texts: Sequence[str]) -> Any:
        return super()._embed(texts)[:, ::-1]


@pytest.fixture(scope="module")
def new() -> WordLlamaEmbedder:
    return WordLlamaEmbedder(NEW_DIM)


def _fill(mem: LightMemory, conversation: list[dict[str, Any]]) -> list[str]:
    """Entries of two users (one superseded, one updated), a FluxMem graph with a graduated
    skill (its trigger in the node and in the graph history) and one whose episode is gone;
    returns the two skills' ids."""
    mem.add_memory(conversation, force_extract=True, user_id="maya")
    mem.add_memory(conversation[:6], force_extract=True, user_id="bob")
    first, second = mem.list_entries(user_id="maya", limit=2)
    mem.update(first.id, "Maya signed up for the Lisbon half marathon.", user_id="maya")
    mem.store.set_validity(second.id, second.scope, first.id, None, "superseded in a test")
    agent = FluxMemAgent.on_store(mem.store, mem.embedder, user_id="maya")
    agent.add_knowledge("Ines swims on Tuesday evenings.", source="note")
    done = agent.run_task("book the physio", lambda ctx: StepResult("booked", None, True))
    gone = agent.run_task("buy running shoes", lambda ctx: StepResult("bought", None, True))
    graph = mem.store.graph()
    skills = []
    for episode in (done.episode_id, gone.episode_id):
        sid = agent.add_skill("physio", ["call", "book"], episodes=[episode])
        skill = graph.get_node(sid)
        assert skill is not None
        trigger = [round(float(x), 5) for x in mem.embedder.embed(["old trigger"])[0]]
        data = {**skill.data, "graduated": True, "trigger": trigger}
        vec = mem.embedder.embed([skill.text])[0]
        graph.update_node(replace(skill, data=data), vec, "graduated in a test")
        graph.update_node(replace(skill, data={**data, "pems": 1.0}), vec, "again")
        skills.append(sid)
    store = cast(SQLStore, mem.store)
    with store.db.transaction() as s:  # the second skill's episode is gone (row and vector)
        store.graph().index.delete(s, gone.episode_id)
    return skills


def _unit(rows: np.ndarray) -> np.ndarray:
    mean: np.ndarray = rows.mean(axis=0)
    unit: np.ndarray = mean / np.linalg.norm(mean)
    return unit.astype(np.float32)


def _expected(store: MemoryStore, embedder: WordLlamaEmbedder) -> dict[str, np.ndarray]:
    """Each entry's vector as the pipeline makes it with ``embedder``: its search text's,
    or, for a topic summary, the centroid of its turns'."""
    ids, _, _ = store.vectors(Scope(), Filters())
    out = {}
    for eid, e in store.get_entries(ids).items():
        turns = [m.search_text for m in store.get_messages(e.scope, e.source_ids)]
        if e.kind == "summary" and "\n".join(turns) == e.original_text:
            out[eid] = _unit(embedder.embed(turns))
        else:
            out[eid] = embedder.embed([e.search_text])[0]
    return out


def _stored(store: MemoryStore) -> dict[str, np.ndarray]:
    ids, matrix, _ = store.vectors(Scope(), Filters())
    return dict(zip(ids, matrix, strict=True))


def _staged(store: MemoryStore) -> int:
    with cast(SQLStore, store).db.read() as s:
        return int(s.one("SELECT count(*) FROM reembed_vectors")[0])


def test_reembed_rewrites_every_vector_and_switches_the_store(
    store_config: dict[str, Any], conversation: list[dict[str, Any]], new: WordLlamaEmbedder
) -> None:
    with LightMemory.from_config({"store": store_config}) as mem:
        old = mem.embedder
        live_skill, orphan_skill = _fill(mem, conversation)
        kinds = {e.kind for e in mem.list_entries(user_id="maya", limit=1000)}
        assert kinds == {"entry", "summary"}
        n_entries = len(_stored(mem.store))
        n_nodes = sum(len(mem.store.graph().node_vectors(k, Scope())[0]) for k in _KINDS)
        a, b = list(_stored(mem.store))[:2]
        mem.store.save_update_queue({a: [(b, 0.9)]})  # scores of the old vectors
        report = mem.store.reembed(new, batch=7)
        assert report.update_queue_cleared == 1 and not mem.store.load_update_queue(Scope())
        assert report.embedder_from == f"{old.name} (256-d)"
        assert report.embedder_to == f"{new.name} ({NEW_DIM}-d)"
        assert report.entries == n_entries and report.nodes == n_nodes
        # two skills, each in its node and in 4 history snapshots (2 updates x before/after,
        # minus the first update's before): 2 x (1 + 3); the orphan's 4 are dropped
        assert (report.triggers, report.triggers_dropped) == (4, 4)
        assert _staged(mem.store) == 0

        stored, expected = _stored(mem.store), _expected(mem.store, new)
        assert stored.keys() == expected.keys()
        for eid, vec in expected.items():
            np.testing.assert_allclose(stored[eid], vec, atol=1e-5, err_msg=eid)

        graph = mem.store.graph()
        for kind in _KINDS:
            ids, matrix = graph.node_vectors(kind, Scope())
            nodes = graph.get_nodes(ids)
            want = new.embed([nodes[i].text for i in ids])
            np.testing.assert_allclose(matrix, want, atol=1e-5)
        live, orphan = graph.get_node(live_skill), graph.get_node(orphan_skill)
        assert live is not None and orphan is not None
        episode = graph.get_nodes(live.data["source_episodes"])
        task = next(iter(episode.values())).data["task"]
        np.testing.assert_allclose(live.data["trigger"], new.embed([task])[0], atol=1e-5)
        assert "trigger" not in orphan.data
        events = [e for e in graph.graph_history(100, scope=Scope()) if e["target_id"] == live.id]
        snaps = [e[k] for e in events for k in ("before", "after") if e[k]]
        triggers = [s["data"]["trigger"] for s in snaps if "trigger" in s["data"]]
        assert len(triggers) == 3
        for t in triggers:
            np.testing.assert_allclose(t, new.embed([task])[0], atol=1e-5)

    old_config = {"store": store_config, "text_embedder": {"model_name": "wordllama"}}
    with pytest.raises(StoreError, match="was built with"):
        LightMemory.from_config(old_config)  # the old embedder is refused
    with LightMemory.from_config({"store": store_config}) as mem:  # none named: the new one
        assert mem.embedder.name == new.name
    with LightMemory.from_config({"store": store_config}, embedder=new) as mem:
        query = "which knee hurt after the 10k?"
        q = new.embed([query])[0]
        maya = {e.id for e in mem.list_entries(user_id="maya", limit=1000)}
        best = sorted(maya, key=lambda eid: -float(expected[eid] @ q))[:5]
        found = mem.store.vector_search(q, Scope(user_id="maya"), Filters(), 5)
        assert [eid for eid, _ in found] == best
        hits = mem.retrieve(query, limit=5, mode="embedding", user_id="maya")
        assert "knee" in hits[0].entry.original_text
        assert mem.retrieve("Lisbon half marathon", limit=3, user_id="bob")
        mem.add_memory(
            [{"role": "user", "content": "I also run on Sundays."}],
            user_id="bob",
            force_extract=True,
        )  # new writes take the new embedder
        assert mem.store.integrity_check() == []


def test_a_crash_mid_way_leaves_the_store_as_it_was_and_a_rerun_resumes(
    store_config: dict[str, Any], conversation: list[dict[str, Any]], new: WordLlamaEmbedder
) -> None:
    with LightMemory.from_config({"store": store_config}) as mem:
        _fill(mem, conversation)
        before = _stored(mem.store)
        failing = FailingEmbedder(fail_at=4)
        with pytest.raises(BackendError, match="simulated crash"):
            mem.store.reembed(failing, batch=5)
        assert failing.calls == 4
        staged = _staged(mem.store)
        assert staged > 0  # the three batches before the crash
        after = _stored(mem.store)
        assert after.keys() == before.keys()
        for eid, vec in before.items():
            np.testing.assert_array_equal(after[eid], vec)
        assert mem.retrieve("knee", limit=3, user_id="maya")  # still the old embedder's
        assert mem.store.integrity_check() == []

    with LightMemory.from_config({"store": store_config}) as mem:  # reopens with the old one
        with cast(SQLStore, mem.store).db.read() as s:
            done = {r[0] for r in s.all("SELECT digest FROM reembed_vectors")}
        rerun = Recording(NEW_DIM)
        report = mem.store.reembed(rerun, batch=5)
        assert report.texts_resumed == staged
        again = {hashlib.sha256(t.encode()).hexdigest() for t in rerun.texts}
        assert rerun.texts and not again & done  # nothing staged is embedded twice
        stored, expected = _stored(mem.store), _expected(mem.store, new)
        for eid, vec in expected.items():
            np.testing.assert_allclose(stored[eid], vec, atol=1e-5)
    with LightMemory.from_config({"store": store_config}, embedder=new) as mem:
        assert mem.retrieve("knee", limit=3, user_id="maya")


def test_a_purge_drops_the_vectors_an_interrupted_reembed_staged(
    store_config: dict[str, Any], conversation: list[dict[str, Any]]
) -> None:
    with LightMemory.from_config({"store": store_config}) as mem:
        mem.add_memory(conversation, force_extract=True, user_id="maya")
        with pytest.raises(BackendError, match="simulated crash"):
            mem.store.reembed(FailingEmbedder(fail_at=3), batch=5)
        assert _staged(mem.store) > 0
        mem.purge(user_id="maya")
        assert _staged(mem.store) == 0


def test_a_crash_in_the_switch_rolls_everything_back(
    store_config: dict[str, Any], conversation: list[dict[str, Any]], new: WordLlamaEmbedder
) -> None:
    """A row written after the staging is embedded in the switch; an error there leaves
    the old vectors, the old identity and (PostgreSQL) the old column and index."""
    with LightMemory.from_config({"store": store_config}) as mem:
        mem.add_memory(conversation, force_extract=True, user_id="maya")
        before = _stored(mem.store)

        class WritesThenFails(FailingEmbedder):
            def embed(self, texts: Sequence[str], *, op: str = "embed") -> Vector:
                if self.calls == 0:  # another writer adds a memory during the staging
                    mem.add_memory(
                        [{"role": "user", "content": "A new turn, written meanwhile."}],
                        user_id="maya",
                        force_extract=True,
                    )
                return super().embed(texts, op=op)

        failing = WritesThenFails(fail_at=2)  # call 1 stages the entries, call 2 is the switch
        with pytest.raises(BackendError, match="simulated crash"):
            mem.store.reembed(failing, batch=1000)
        after = _stored(mem.store)
        assert failing.calls == 2 and _staged(mem.store) > 0  # it failed in the switch
        assert set(before) < set(after)  # the new turn's entry and topic summary
        for eid, vec in before.items():
            np.testing.assert_array_equal(after[eid], vec)
        assert mem.retrieve("written meanwhile", limit=1, user_id="maya")
        assert mem.store.integrity_check() == []
    with LightMemory.from_config({"store": store_config}) as mem:  # still the old embedder
        report = mem.store.reembed(new)
        assert report.entries == len(after)
        stored, expected = _stored(mem.store), _expected(mem.store, new)
        for eid, vec in expected.items():
            np.testing.assert_allclose(stored[eid], vec, atol=1e-5)


@pytest.mark.parametrize("store_config", ["postgres"], indirect=True)
def test_postgres_vector_column_and_hnsw_index_take_the_new_dimension(
    store_config: dict[str, Any], conversation: list[dict[str, Any]], new: WordLlamaEmbedder
) -> None:
    import psycopg

    with LightMemory.from_config({"store": store_config}) as mem:
        mem.add_memory(conversation, force_extract=True, user_id="maya")
        mem.store.reembed(new)
    with psycopg.connect(store_config["dsn"], autocommit=True) as conn:
        col = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'embedding'",
            (f"{store_config['schema']}.entries",),
        ).fetchone()
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = 'entries_hnsw'",
            (store_config["schema"],),
        ).fetchone()
    assert col is not None and col[0] == f"vector({NEW_DIM})"
    assert index is not None and f"halfvec({NEW_DIM})" in index[0]


def test_sqlite_saved_index_is_rebuilt_for_the_new_vectors(
    tmp_path: Path, conversation: list[dict[str, Any]], new: WordLlamaEmbedder
) -> None:
    path = tmp_path / "saved.db"
    policy = IndexPolicy(persist_min_rows=1, save_after=1)
    old = WordLlamaEmbedder()
    store = SQLiteStore(path, index_policy=policy)
    with LightMemory(store, old) as mem:
        mem.add_memory(conversation, force_extract=True, user_id="maya")
        mem.retrieve("knee", user_id="maya")
    saved = Path(str(path) + ".index")
    assert saved.exists()
    old_bytes = saved.read_bytes()
    store = SQLiteStore(path, index_policy=policy)
    store.bind_embedder(old.name, old.dim)
    store.reembed(new)
    store.close()
    assert saved.exists() and saved.read_bytes() != old_bytes
    store = SQLiteStore(path, index_policy=policy)
    with LightMemory(store, new) as mem:
        assert store.entry_index.saved.load is not None
        hits = mem.retrieve("which knee hurt?", limit=3, mode="embedding", user_id="maya")
        assert "knee" in hits[0].entry.original_text
        assert store.entry_index.cache is not None and store.entry_index.cache.dim == NEW_DIM


def test_sqlite_stale_saved_index_is_not_used_after_a_crash_before_its_rebuild(
    tmp_path: Path, conversation: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the switch's commit and before the saved file was rebuilt: the file
    (same dimension, same rows) must not be read as the new vectors."""
    path = tmp_path / "stale.db"
    policy = IndexPolicy(persist_min_rows=1, save_after=1)
    store = SQLiteStore(path, index_policy=policy)
    with LightMemory(store, WordLlamaEmbedder()) as mem:
        mem.add_memory(conversation, force_extract=True, user_id="maya")
        mem.retrieve("knee", user_id="maya")
    permuted = Permuted()
    store = SQLiteStore(path, index_policy=policy)
    store.bind_embedder("wordllama:l2_supercat:256", 256)
    monkeypatch.setattr(type(store.entry_index), "after_reembed", lambda self, dim: None)
    store.reembed(permuted)
    store.db.close()  # no close-time save either: the process died
    monkeypatch.undo()
    store = SQLiteStore(path, index_policy=policy)
    with LightMemory(store, permuted) as mem:
        query = permuted.embed(["which knee hurt?"])[0]
        found = store.vector_search(query, Scope(user_id="maya"), Filters(), 3)
        want = _expected(store, permuted)
        best = sorted(want, key=lambda eid: -float(want[eid] @ query))[:3]
        assert [eid for eid, _ in found] == best


def test_cli_re_embed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "cli.db")
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps([{"role": "user", "content": "My knee hurt after the 10k."}]))
    new_cfg = tmp_path / "new.json"
    new_cfg.write_text(json.dumps({"text_embedder": {"configs": {"embedding_dims": NEW_DIM}}}))
    assert main(["--store", store, "add", str(conv)]) == 0
    capsys.readouterr()
    assert main(["--store", store, "re-embed", "--config", str(new_cfg), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries"] >= 1 and report["embedder_to"].endswith(f"({NEW_DIM}-d)")
    # the store opens with its new embedder, with or without a config naming it
    assert main(["--store", store, "search", "knee"]) == 0
    assert "knee" in capsys.readouterr().out
    assert main(["--store", store, "--config", str(new_cfg), "search", "knee"]) == 0
    assert "knee" in capsys.readouterr().out
    old_cfg = tmp_path / "old.json"
    old_cfg.write_text(json.dumps({"text_embedder": {"model_name": "wordllama"}}))
    assert main(["--store", store, "--config", str(old_cfg), "search", "knee"]) == 2
    assert "was built with" in capsys.readouterr().err
    # back to the default by name; a config naming another store is refused
    assert main(["--store", store, "re-embed", "--embedder", "wordllama"]) == 0
    assert "Re-embedded" in capsys.readouterr().out
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"store": {"path": str(tmp_path / "x.db")}, "text_embedder": {}}))
    assert main(["--store", store, "re-embed", "--config", str(other)]) == 2
    assert "names another store" in capsys.readouterr().err
    assert main(["--store", str(tmp_path / "none.db"), "re-embed", "--embedder", "wordllama"]) == 2
