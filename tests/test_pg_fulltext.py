"""PostgreSQL full text: the SQLite BM25 index's terms (Chinese segmented) and its ranking.

Each test runs the same texts through a SQLite store and a PostgreSQL store and compares
what a caller sees: the ranked ids and their BM25 scores."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem import MemoryEntry, SQLiteStore
from lightmem.store.base import MemoryStore
from lightmem.text import content_terms
from lightmem.types import Filters, Node, Scope

FIXTURES = Path(__file__).parent / "fixtures"
DIM = 8
ANN = Scope("ann")


@pytest.fixture(scope="module")
def pg_dsn() -> str:
    from conftest import require_postgres

    return require_postgres()


@pytest.fixture
def pair(pg_dsn: str) -> Iterator[tuple[MemoryStore, Any]]:
    from lightmem.store.postgres import PostgresStore

    lite = SQLiteStore(":memory:")
    pg = PostgresStore(pg_dsn, schema=f"fts_{uuid.uuid4().hex[:10]}", pool_size=2)
    for s in (lite, pg):
        s.bind_embedder("test", DIM)
    yield lite, pg
    lite.close()
    pg.drop()
    pg.close()


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _entry(eid: str, text: str, speaker: str = "", scope: Scope = ANN) -> MemoryEntry:
    return MemoryEntry(id=eid, text=text, original_text=text, scope=scope, speaker_name=speaker)


def _add(stores: tuple[MemoryStore, ...], entries: list[MemoryEntry]) -> None:
    for s in stores:
        s.commit_extraction([(e, _vec(i)) for i, e in enumerate(entries)], [])


def _ranked(store: MemoryStore, query: str, scope: Scope = ANN, k: int = 500) -> list[Any]:
    """Every match (k exceeds the collection), best first."""
    return store.text_search(content_terms(query), scope, Filters(), k)


def _same(pg: list[Any], lite: list[Any]) -> bool:
    """The same entries with the same BM25 scores (SQLite scores in float32; ties may come
    in any order)."""
    a, b = dict(pg), dict(lite)
    return a.keys() == b.keys() and all(abs(a[i] - b[i]) < 1e-4 * max(1.0, b[i]) for i in a)


def _postings_are_the_terms(pg: Any) -> bool:
    """``entry_postings`` holds exactly each entry's terms: count and entry length."""
    from collections import Counter

    with pg.db.read() as s:
        rows = s.raw.execute("SELECT rid, search_terms FROM entries").fetchall()
        held = s.raw.execute("SELECT term, rid, tf, dl FROM entry_postings").fetchall()
    want = Counter(
        (term, rid, tf, len(terms.split()))
        for rid, terms in rows
        for term, tf in Counter(terms.split()).items()
    )
    return Counter(map(tuple, held)) == want


def _zh_turns(sample: int) -> tuple[list[MemoryEntry], list[tuple[str, set[str]]]]:
    data = json.loads((FIXTURES / "zh_conversations.json").read_text(encoding="utf-8"))
    conv = data[sample]["conversation"]
    turns = [
        _entry(t["dia_id"], t["text"], t["speaker"])
        for key in sorted(k for k in conv if k.startswith("session_") and "date" not in k)
        for t in conv[key]
    ]
    qas = [(str(qa["question"]), set(qa["evidence"])) for qa in data[sample]["qa"]]
    return turns, qas


def test_chinese_questions_find_the_same_turns_on_postgres_as_on_sqlite(
    pair: tuple[MemoryStore, Any],
) -> None:
    turns, qas = _zh_turns(0)
    _add(pair, turns)
    found = 0
    for question, evidence in qas:
        lite, pg = (_ranked(s, question) for s in pair)
        assert _same(pg, lite), question
        found += bool(evidence & {i for i, _ in pg[:3]})
    # Chinese words, not whole clauses, are matched: by full text alone (the questions are
    # phrased differently from the turns) at least half find their turn in the top 3
    assert 2 * found >= len(qas)


@pytest.mark.parametrize(
    ("question", "answer"),
    [("王芳对什么过敏？", "芒果"), ("王芳在学什么乐器？", "钢琴"), ("王芳住在哪里？", "杭州")],
)
def test_a_chinese_question_ranks_the_turn_with_the_fact_first(
    pair: tuple[MemoryStore, Any], question: str, answer: str
) -> None:
    texts = [
        "你好王芳，好久不见！",
        "我叫王芳，住在杭州，是一名小学数学老师。",
        "我最近对芒果过敏，吃了一口嘴就肿了。",
        "周末我一般在家练乐器，钢琴跟着网上的老师学了半年。",
        "今天天气真不错。",
    ]
    _add(pair, [_entry(f"t{i}", t, "王芳") for i, t in enumerate(texts)])
    _, pg = pair
    top = pg.text_search(content_terms(question), ANN, Filters(), 3)
    assert top and answer in texts[int(top[0][0][1:])]


def test_english_rankings_are_the_same(
    pair: tuple[MemoryStore, Any], conversation: list[dict[str, Any]]
) -> None:
    _add(pair, [_entry(m["id"], m["content"], m["speaker_name"]) for m in conversation])
    for query in (
        "When is Maya's half marathon?",
        "What lessons does Ines have in the evenings?",
        "running training plan before work",
        "Lisbon",
    ):
        lite, pg = (_ranked(s, query) for s in pair)
        assert pg and _same(pg, lite), query


WORDS = ("apple", "river", "piano", "garden", "tunnel", "violet", "苹果", "钢琴")
OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "update", "delete", "restore"]),
        st.integers(0, 9),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=6, deadline=None)
@given(OPS)
def test_rankings_stay_the_same_through_updates_deletes_and_restores(
    pg_dsn: str, ops: list[tuple[str, int, list[str]]]
) -> None:
    """BM25 depends on the document count and total length: the PostgreSQL triggers must
    keep them exact through every kind of write."""
    from lightmem.store.postgres import PostgresStore

    lite = SQLiteStore(":memory:")
    pg = PostgresStore(pg_dsn, schema=f"fts_{uuid.uuid4().hex[:10]}", pool_size=2)
    try:
        for s in (lite, pg):
            s.bind_embedder("test", DIM)
        for op, i, words in ops:
            text = " ".join(words)
            for s in (lite, pg):
                cur = s.get_entry(f"e{i}", ANN)
                if op == "add" and cur is None:
                    s.commit_extraction([(_entry(f"e{i}", text), _vec(i))], [])
                elif op == "update" and cur is not None:
                    s.update_entry(replace(cur, text=text, original_text=text), _vec(i), "u")
                elif op == "delete" and cur is not None:
                    s.delete_entry(f"e{i}", ANN, "d")
                elif op == "restore" and cur is None and s.history(f"e{i}", ANN):
                    snap = s.history(f"e{i}", ANN)[-1].before
                    if snap is not None:
                        s.restore_entry(MemoryEntry.from_dict(snap), _vec(i), "r")
            for query in (text, "apple violet", "钢琴 river"):
                assert _same(_ranked(pg, query), _ranked(lite, query))
            assert _postings_are_the_terms(pg)
        with pg.db.read() as tx:
            stats = tx.one("SELECT sum(docs), sum(terms) FROM text_stats WHERE tbl = 'entries'")
            real = tx.one(
                "SELECT count(*), coalesce(sum(cardinality(string_to_array(search_terms, ' '))),"
                " 0) FROM entries"
            )
        assert tuple(map(int, stats)) == tuple(map(int, real))
    finally:
        lite.close()
        pg.drop()
        pg.close()


def test_bulk_loads_are_counted_and_ranked_alike(pair: tuple[MemoryStore, Any]) -> None:
    lite, pg = pair
    pg.bulk_reindex_min = 50  # the drop-and-rebuild path of a large load
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, 4)) for _ in range(120)]
    rows = [(_entry(f"b{i}", t), _vec(i)) for i, t in enumerate(texts)]
    for s in (lite, pg):
        s.import_entries(iter(rows))
    for query in ("apple", "tunnel 钢琴", "violet garden river"):
        assert _same(_ranked(pg, query), _ranked(lite, query))
    assert _postings_are_the_terms(pg)
    with pg.db.read() as s:  # the postings index dropped for the load is back
        assert s.one("SELECT to_regclass('entry_postings_term')")[0] is not None
        # and the postings were vacuumed (their visibility map set, so index-only scans
        # need not visit the table, as far as other sessions' open snapshots allow)
        vacuums, analyzes = s.one(
            "SELECT vacuum_count, analyze_count FROM pg_stat_all_tables "
            "WHERE relid = 'entry_postings'::regclass"
        )
        assert vacuums >= 1 and analyzes >= 1


def test_a_selective_filter_still_fills_the_limit(pair: tuple[MemoryStore, Any]) -> None:
    """Entries are ranked before the scope is checked: the best-scored ones belong to
    another scope, and the search goes on past them until ``k`` entries of this one."""
    lite, pg = pair
    other = Scope("bob")
    rows = [_entry(f"o{i}", "apple apple river", scope=other) for i in range(30)]
    rows += [_entry(f"a{i}", f"apple {' '.join(['garden'] * (i + 1))}") for i in range(8)]
    _add(pair, rows)
    for k in (3, 8, 20):
        pg_hits = pg.text_search(["apple"], ANN, Filters(), k)
        assert [h[0] for h in pg_hits] == [f"a{i}" for i in range(min(k, 8))]
        assert _same(pg_hits, lite.text_search(["apple"], ANN, Filters(), k))


def test_graph_nodes_are_segmented_too(pair: tuple[MemoryStore, Any]) -> None:
    _, pg = pair
    texts = ["王芳住在杭州", "王芳对芒果过敏", "用钢琴练习音阶"]
    for i, t in enumerate(texts):
        pg.graph().add_node(Node(id=f"n{i}", kind="semantic", text=t, scope=ANN), _vec(i), "t")
    hits = pg.graph().text_search("semantic", content_terms("谁对芒果过敏？"), ANN, 3)
    assert hits and hits[0][0] == "n1"


def test_entries_of_a_store_made_before_postings_get_theirs(pg_dsn: str) -> None:
    """The ``pg_entry_postings`` step fills postings for the entries already there (and
    entries copied in without terms get theirs when the terms are filled)."""
    import psycopg

    from lightmem.store.postgres import MIGRATIONS, PostgresStore, apply_migrations
    from lightmem.store.postgres_terms import index_text
    from lightmem.store.sql import ENTRY_COLS, entry_params
    from lightmem.store.text_index import Stemmer

    names = [m.name for m in MIGRATIONS]
    schema = f"fts_{uuid.uuid4().hex[:10]}"
    apply_migrations(pg_dsn, schema, MIGRATIONS[: names.index("pg_entry_postings")])
    old = [_entry("o1", "我最近对芒果过敏"), _entry("o2", "Maya trains for the Lisbon marathon")]
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f"SET search_path TO {schema}, public")
        conn.execute("ALTER TABLE entries ADD COLUMN embedding vector(3)")
        for e, terms in zip(old, (index_text(old[0].search_text, Stemmer()), None), strict=True):
            conn.execute(
                f"INSERT INTO entries ({ENTRY_COLS}, speaker_key, search_text, search_terms, "
                f"embedding) VALUES ({', '.join(['%s'] * (len(entry_params(e)) + 4))})",
                (*entry_params(e), "", e.search_text, terms, "[1,0,0]"),
            )
    pg = PostgresStore(pg_dsn, schema=schema, pool_size=2)
    try:
        with pg.db.transaction() as tx:
            pg.fill_search_terms(tx.raw)  # rows written by SQL, as a migration copies them
        assert _postings_are_the_terms(pg)
        assert pg.text_search(content_terms("谁对芒果过敏"), ANN, Filters(), 5)[0][0] == "o1"
        assert pg.text_search(["marathons"], ANN, Filters(), 5)[0][0] == "o2"
    finally:
        pg.drop()
        pg.close()


def test_an_older_schema_is_migrated_and_its_rows_become_searchable(pg_dsn: str) -> None:
    """A store made before the step: its entries and nodes get their terms, the counts
    start from the rows already there."""
    import psycopg

    from lightmem.store.graph_sql import NODE_COLS, node_params
    from lightmem.store.postgres import MIGRATIONS, PostgresStore, apply_migrations
    from lightmem.store.sql import ENTRY_COLS, entry_params

    names = [m.name for m in MIGRATIONS]
    before = MIGRATIONS[: names.index("pg_search_terms")]
    schema = f"fts_{uuid.uuid4().hex[:10]}"
    apply_migrations(pg_dsn, schema, before)
    old = [_entry("o1", "我最近对芒果过敏"), _entry("o2", "Maya trains for the Lisbon marathon")]
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f"SET search_path TO {schema}, public")
        conn.execute("ALTER TABLE entries ADD COLUMN embedding vector(3)")
        conn.execute("CREATE INDEX entries_hnsw ON entries USING hnsw (embedding vector_ip_ops)")
        for e in old:
            conn.execute(
                f"INSERT INTO entries ({ENTRY_COLS}, speaker_key, search_text, embedding) "
                f"VALUES ({', '.join(['%s'] * (len(entry_params(e)) + 3))})",
                (*entry_params(e), "", e.search_text, "[1,0,0]"),
            )
        node = Node(id="n1", kind="semantic", text="王芳住在杭州", scope=ANN)
        conn.execute(
            f"INSERT INTO graph_nodes ({NODE_COLS}, embedding) VALUES ({', '.join(['%s'] * 11)})",
            (*node_params(node), "[1,0,0]"),
        )
    pg = PostgresStore(pg_dsn, schema=schema, pool_size=2)
    try:
        assert pg.text_search(content_terms("谁对芒果过敏"), ANN, Filters(), 5)[0][0] == "o1"
        assert pg.text_search(["marathons"], ANN, Filters(), 5)[0][0] == "o2"
        assert pg.graph().text_search("semantic", ["杭州"], ANN, 5)[0][0] == "n1"
        with pg.db.read() as s:
            assert s.one("SELECT sum(docs) FROM text_stats WHERE tbl = 'entries'")[0] == 2
            assert s.one("SELECT count(*) FROM entries WHERE search_terms IS NULL")[0] == 0
            # the vector index, dropped while the rows were filled, is back
            assert (
                s.one(
                    "SELECT count(*) FROM pg_indexes WHERE indexname = 'entries_hnsw' "
                    "AND schemaname = %s",
                    (schema,),
                )[0]
                == 1
            )
    finally:
        pg.drop()
        pg.close()
