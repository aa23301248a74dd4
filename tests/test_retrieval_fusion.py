"""Hybrid fusion (BM25 hits that only share an uninformative term, ties) and the candidate
entries one query fetches (each once, shared by speaker focus, time lift, validity, packing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from lightmem import LightMemory, SQLiteStore, WordLlamaEmbedder
from lightmem.cli.demo import demo_messages
from lightmem.pipeline.candidates import Candidates
from lightmem.pipeline.retrieve import Retriever, rrf
from lightmem.pipeline.retrieve_params import RetrieveParams
from lightmem.store.text_index import BM25Index, Stemmer
from lightmem.types import Filters, MemoryEntry, Scope


def test_a_term_in_half_the_memories_adds_nothing_to_bm25() -> None:
    texts = [
        "Maya: my left knee hurt after the 10k",
        "Maya: I signed up for the half marathon",
        "Assistant: flat routes and vegetarian fuel",
        "Maya: work has been hectic",
    ]
    stemmer = Stemmer()
    hits = dict(BM25Index.build(texts, stemmer).search(["maya", "knee"], stemmer, None, 10))
    assert hits[0] > 0
    # "maya" is in 3 of 4: its BM25 idf is negative, so it is no evidence at all (before:
    # floored at 1e-6, which ordered these rows by length and fusion rewarded that order)
    assert hits[1] == hits[3] == 0.0
    assert 2 not in hits  # still only rows that hold a query term


def test_equal_scores_share_a_rank_in_fusion() -> None:
    dense = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    # BM25: one real hit, then three that only hold the user's name (score 0)
    text = [("x", 2.0), ("c", 0.0), ("a", 0.0), ("b", 0.0)]
    fused = [i for i, _ in rrf([(1.0, dense), (1.0, text)], 60)]
    # the name gives a, b and c the same reward: the dense order decides between them
    assert fused.index("a") < fused.index("b") < fused.index("c")


def test_rank_ties_in_fusion_go_to_the_larger_score_gap() -> None:
    # a leads the dense list by a hair, b leads the text list by a clear margin: equal
    # reciprocal-rank sums, decided by the scores rather than by which list came first
    dense = [("a", 0.530), ("b", 0.527), ("c", 0.2)]
    text = [("b", 4.3), ("a", 3.0), ("c", 1.0)]
    assert [i for i, _ in rrf([(1.0, dense), (1.0, text)], 60)][:2] == ["b", "a"]
    assert [i for i, _ in rrf([(1.0, text), (1.0, dense)], 60)][:2] == ["b", "a"]


class RecordingStore(SQLiteStore):
    """A real SQLite store that records which entries were fetched by id."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.fetched: Counter[str] = Counter()
        self.calls = 0

    def get_entries(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]:
        self.calls += 1
        self.fetched.update(entry_ids)
        return super().get_entries(entry_ids)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fusion") / "demo.db"
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        mem.add_memory(demo_messages(), force_extract=True, user_id="maya")
    return path


@pytest.mark.parametrize(
    "question",
    [
        "When did Maya twist her ankle?",  # speaker focus, time lift, validity, packing
        "What does Maya eat?",  # speaker focus, validity, packing
    ],
)
def test_each_candidate_entry_is_fetched_once_per_query(
    demo_store: Path, embedder: WordLlamaEmbedder, question: str
) -> None:
    store = RecordingStore(str(demo_store))
    try:
        store.bind_embedder(embedder.name, embedder.dim)
        retriever = Retriever(store, embedder)
        params = RetrieveParams(limit=200, budget_tokens=120)
        results = retriever.retrieve(question, Scope("maya"), Filters(), params)
        assert results
        assert max(store.fetched.values()) == 1, store.fetched.most_common(3)
        with LightMemory.from_config({"store": {"path": str(demo_store)}}) as mem:
            plain = mem.retrieve(question, limit=200, budget_tokens=120, user_id="maya")
        assert [r.entry.id for r in results] == [r.entry.id for r in plain]
    finally:
        store.close()


def test_candidates_ask_the_store_only_for_what_is_new(demo_store: Path) -> None:
    store = RecordingStore(str(demo_store))
    try:
        ids = [e.id for e in store.list_entries(Scope("maya"), Filters(), 10, 0)]
        got = Candidates(store)
        assert list(got.get(ids[:4])) == ids[:4]
        assert list(got.get([*ids[2:6], "no-such-id"])) == ids[2:6]
        assert got.get(["no-such-id", ids[0]]) == {ids[0]: got.get([ids[0]])[ids[0]]}
        assert store.calls == got.fetches == 2
        assert store.fetched == Counter([*ids[:6], "no-such-id"])
    finally:
        store.close()


def test_a_retrieval_scores_each_vector_once(tmp_path: Path) -> None:
    """A query naming a speaker searches with its vector and with the vector of the query
    without the name, and speaker focus again with the latter under a speaker filter: the
    rows' scores of the first two searches are reused, and stay right as rows change."""
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        mem.add_memory(demo_messages(), force_extract=True, user_id="maya")
        store = mem.store
        assert isinstance(store, SQLiteStore)
        first = mem.retrieve("What does Maya eat?", user_id="maya")  # names a speaker
        rows = store.entry_index.rows()
        before = rows.scorings
        again = mem.retrieve("What does Maya eat?", user_id="maya")
        assert [r.entry.id for r in again] == [r.entry.id for r in first]
        assert rows.scorings == before  # the same vector: no row scored again
        mem.retrieve("Which race did Maya sign up for?", user_id="maya")
        assert rows.scorings == before + 2  # one scoring for each vector, none for the focus
        # a new row is scored and found; a deleted one is not found any more
        mem.add_memory(
            [{"content": "Maya eats lentil curry every Sunday", "speaker_name": "Maya"}],
            force_extract=True,
            user_id="maya",
        )
        ids = [r.entry.id for r in mem.retrieve("What does Maya eat?", user_id="maya")]
        new = [i for i in ids if i not in {r.entry.id for r in first}]
        assert new
        mem.delete(new[0], user_id="maya")
        after = [r.entry.id for r in mem.retrieve("What does Maya eat?", user_id="maya")]
        assert new[0] not in after


_SCORES = """
import random
from lightmem.store.text_index import BM25Index, Stemmer
rng = random.Random(7)
words = [f"w{i}" for i in range(40)]
texts = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) for _ in range(300)]
stemmer = Stemmer()
index = BM25Index.build(texts, stemmer)
print([s.hex() for _, s in index.search(words[:12], stemmer, None, 300)])
"""


def test_bm25_scores_do_not_depend_on_the_process_hash_seed() -> None:
    """Term contributions are summed in query order: a set's order (per-process string
    hashing) made float32 scores differ in the last bit between runs."""
    outs = set()
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _SCORES], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        outs.add(done.stdout)
    assert len(outs) == 1


def test_a_query_naming_the_speaker_ranks_their_turns_by_content(tmp_path: Path) -> None:
    # Every memory is embedded with its speaker ("Bruno: Ugh, traffic."), so with the name
    # in the query vector Bruno's shortest small talk came first for a question about him.
    turns = [
        "Ugh, traffic again.",
        "I live in Lisbon, close to the river.",
        "Morning! Busy day.",
        "I work as a nurse on night shifts.",
        "Ha, nice.",
        "My sister has two dogs.",
    ]
    msgs = []
    for i, text in enumerate(turns):
        day = f"2024-05-0{1 + i}T10:0"
        msgs += [
            {"id": f"u{i}", "role": "user", "speaker_name": "Bruno", "content": text,
             "timestamp": day + "0"},
            {"id": f"a{i}", "role": "assistant", "speaker_name": "Assistant",
             "content": "Thanks for telling me.", "timestamp": day + "1"},
        ]  # fmt: skip
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        mem.add_memory(msgs, force_extract=True, user_id="bruno")
        for question, turn in [
            ("Which city does Bruno live in?", "u1"),
            ("What is Bruno's job?", "u3"),
            ("Does Bruno's sister have pets?", "u5"),
        ]:
            got = mem.retrieve(question, limit=3, user_id="bruno")
            assert got[0].source_ids == (turn,), (question, [r.entry.original_text for r in got])
