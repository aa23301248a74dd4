"""PostgreSQL full text cut and ranked the way the SQLite BM25 index cuts and ranks it.

PostgreSQL's text search configurations split on its parser's word boundaries, so Chinese
and Japanese clauses become single "words", and the ``english`` configuration stems
differently from the Snowball stemmer the SQLite index uses. Instead, each entry and graph
node carries ``search_terms``: its index terms from :meth:`Stemmer.tokens
<lightmem.store.text_index.Stemmer.tokens>` (segmented per message by :mod:`lightmem.lang`,
lower-cased, Snowball-stemmed), joined by spaces. The ``tsvector`` holds exactly those
terms (``array_to_tsvector``: no parser, so no dependence on the database's locale, and
stricter than the ``simple`` configuration, which would still re-split them); queries are
cut the same way, so a question matches the same entries on both backends, and
:func:`bm25_sql` ranks them with the same BM25."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lightmem.store.text_index import IDF_FLOOR, K1, MAX_DOCUMENT_TERMS, B, Stemmer, document_terms

__all__ = [
    "CAP_ENTRY_TERMS_SQL",
    "FILL_BATCH",
    "POSTINGS_FUNCTION_SQL",
    "POSTINGS_INDEX",
    "POSTINGS_SQL",
    "bm25_sql",
    "entry_terms",
    "fill_search_terms",
    "index_text",
    "postings_bm25_sql",
    "query_lexemes",
    "tsquery_text",
]

#: Rows whose terms a migration fills per batch.
FILL_BATCH = 2_000


def index_text(text: str, stemmer: Stemmer) -> str:
    """The ``search_terms`` value of a graph node's ``text``: its stemmed index terms,
    space-separated (as SQLite's FTS5 indexes a node, whole)."""
    return " ".join(stemmer.tokens(text))


def entry_terms(text: str, stemmer: Stemmer) -> str:
    """The ``search_terms`` value of an entry's search text: its first
    :data:`~lightmem.store.text_index.MAX_DOCUMENT_TERMS` stemmed terms, as the SQLite
    store's BM25 index holds them."""
    return " ".join(document_terms(text, stemmer))


#: Entries stored before their terms were capped: cut to the same first terms (a stemmed
#: term holds no space; the postings follow by the update trigger).
CAP_ENTRY_TERMS_SQL = f"""
UPDATE entries SET search_terms =
    array_to_string((string_to_array(search_terms, ' '))[1:{MAX_DOCUMENT_TERMS}], ' ')
WHERE array_length(string_to_array(search_terms, ' '), 1) > {MAX_DOCUMENT_TERMS}"""


def query_lexemes(terms: Sequence[str], stemmer: Stemmer) -> list[str]:
    """The distinct index terms of query ``terms`` (each cut and stemmed like a document),
    in first-seen order."""
    seen: dict[str, None] = {}
    for t in terms:
        for stem in stemmer.tokens(t):
            seen.setdefault(stem, None)
    return list(seen)


def tsquery_text(lexemes: Sequence[str]) -> str:
    """A ``tsquery`` OR-query of ``lexemes`` ("" when none), each quoted so that no
    character of it is read as an operator; the lexemes are taken verbatim, as the
    ``tsvector`` holds them."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in lexemes)


def fill_search_terms(
    conn: Any,
    table: str,
    source: str,
    stemmer: Stemmer,
    terms: Callable[[str, Stemmer], str] = index_text,
) -> int:
    """Set ``search_terms`` (``terms`` of column ``source``) on every row of ``table`` (in
    the current schema) that has none, in batches on connection ``conn`` (inside its
    transaction). Returns how many rows were filled."""
    filled = 0
    last = 0
    while True:
        rows = conn.execute(
            f"SELECT rid, {source} FROM {table} WHERE search_terms IS NULL AND rid > %s "
            "ORDER BY rid LIMIT %s",
            (last, FILL_BATCH),
        ).fetchall()
        if not rows:
            return filled
        conn.execute(
            f"UPDATE {table} AS t SET search_terms = u.terms "
            "FROM unnest(%s::bigint[], %s::text[]) AS u(rid, terms) WHERE t.rid = u.rid",
            ([r[0] for r in rows], [terms(r[1], stemmer) for r in rows]),
        )
        filled += len(rows)
        last = int(rows[-1][0])


def bm25_sql(table: str, n_lexemes: int, where: str) -> str:
    """One query ranking ``table``'s rows by Okapi BM25 with the SQLite index's constants
    and formula (:mod:`lightmem.store.text_index`), so both backends rank alike.

    The GIN index finds the rows holding any query lexeme; each lexeme's document
    frequency is counted over all of them (like SQLite's, over the whole table, not the
    filtered part), the document count and total length come from ``text_stats``; rows
    passing ``where`` are ranked. ``OFFSET 0`` and ``MATERIALIZED`` keep each row's term
    array and the idf values computed once. Parameters, in order: the ``n_lexemes`` lexemes, the
    parameters of ``where``, the tsquery text, the table name, the limit."""
    idx = range(1, n_lexemes + 1)
    tf = ", ".join(["cardinality(array_positions(t, %s))"] * n_lexemes)
    df = ", ".join(f"count(*) FILTER (WHERE tf[{i}] > 0)" for i in idx)
    idf = ", ".join(
        f"greatest({IDF_FLOOR}, ln(greatest(st.n - d.df[{i}], 0) + 0.5) - ln(d.df[{i}] + 0.5))"
        for i in idx
    )
    score = " + ".join(
        f"w.idf[{i}] * m.tf[{i}] * {K1 + 1} / (m.tf[{i}] + {K1} * ({1 - B} + {B} * m.dl / w.avgdl))"
        for i in idx
    )
    return f"""
WITH m AS MATERIALIZED (
    SELECT rid, id, ok, cardinality(t)::float8 AS dl, ARRAY[{tf}]::float8[] AS tf
    FROM (SELECT rid, id, string_to_array(search_terms, ' ') AS t, ({where}) AS ok
          FROM {table} WHERE tsv @@ %s::tsquery OFFSET 0) AS x
),
st AS (
    SELECT greatest(sum(docs), 1)::float8 AS n,
           CASE WHEN sum(terms) > 0 THEN sum(terms)::float8 / greatest(sum(docs), 1)
                ELSE 1.0 END AS avgdl
    FROM text_stats WHERE tbl = %s
),
w AS MATERIALIZED (
    SELECT ARRAY[{idf}] AS idf, st.avgdl
    FROM (SELECT ARRAY[{df}]::float8[] AS df FROM m) AS d, st
)
SELECT m.id, {score} AS score FROM m, w WHERE m.ok ORDER BY score DESC, m.rid LIMIT %s"""


# -- entry postings -------------------------------------------------------------------------
# Scoring from the GIN index reads every matching row from the heap and splits its terms
# (about 15 ms for a 3-word query over 1M entries). Instead each entry's terms are kept as
# postings, one row per (term, entry) with the term's count and the entry's length, under a
# btree that holds them all: a query reads each lexeme's postings with an index-only scan,
# sums BM25 per entry, and only the best-scored entries are fetched for the scope and filter
# check. Statement triggers keep the postings equal to ``search_terms`` on every write path
# (inserts, COPY, updates that change the terms, deletes), so no caller maintains them.
#: The postings index, dropped and built again around bulk loads.
POSTINGS_INDEX = (
    "CREATE INDEX IF NOT EXISTS entry_postings_term ON entry_postings (term, rid) INCLUDE (tf, dl)"
)
# Postings of the rows of a transition table (``search_terms`` split once per row: without
# ``OFFSET 0`` the planner pulls the split into the unnested rows and splits a row's terms
# again for each of them, so writing an entry of 10,000 terms took 4 s instead of 50 ms).
_ROW_POSTINGS = """SELECT x.term, r.rid, count(*)::integer AS tf, max(r.dl) AS dl
          FROM (SELECT rid, a, cardinality(a) AS dl
                  FROM (SELECT rid, string_to_array(search_terms, ' ') AS a FROM {rows}
                         WHERE search_terms IS NOT NULL{changed} OFFSET 0) AS s) AS r,
               unnest(r.a) AS x(term)
         GROUP BY r.rid, x.term"""
_CHANGED = (
    " AND rid IN (SELECT o.rid FROM old_rows AS o JOIN new_rows AS n ON n.rid = o.rid"
    " WHERE o.search_terms IS DISTINCT FROM n.search_terms)"
)
_OLD_ALL = _ROW_POSTINGS.format(rows="old_rows", changed="")
_OLD_CHANGED = _ROW_POSTINGS.format(rows="old_rows", changed=_CHANGED)
#: The statement trigger's function (a migration step of its own redefines it).
POSTINGS_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION entry_postings_sync() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM entry_postings AS p USING ({_OLD_ALL}) AS o
         WHERE p.term = o.term AND p.rid = o.rid;
    ELSIF TG_OP = 'UPDATE' THEN
        DELETE FROM entry_postings AS p USING ({_OLD_CHANGED}) AS o
         WHERE p.term = o.term AND p.rid = o.rid;
        INSERT INTO entry_postings (term, rid, tf, dl)
        {_ROW_POSTINGS.format(rows="new_rows", changed=_CHANGED)};
    ELSE
        INSERT INTO entry_postings (term, rid, tf, dl)
        {_ROW_POSTINGS.format(rows="new_rows", changed="")};
    END IF;
    RETURN NULL;
END
$$"""
POSTINGS_SQL = f"""
CREATE TABLE IF NOT EXISTS entry_postings (
    term TEXT NOT NULL, rid BIGINT NOT NULL, tf INTEGER NOT NULL, dl INTEGER NOT NULL
);
{POSTINGS_FUNCTION_SQL};
CREATE OR REPLACE TRIGGER entries_postings_insert AFTER INSERT ON entries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_postings_sync();
CREATE OR REPLACE TRIGGER entries_postings_delete AFTER DELETE ON entries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_postings_sync();
CREATE OR REPLACE TRIGGER entries_postings_update AFTER UPDATE ON entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION entry_postings_sync();
INSERT INTO entry_postings (term, rid, tf, dl)
{_ROW_POSTINGS.format(rows="entries", changed="")};
{POSTINGS_INDEX};
DROP INDEX IF EXISTS entries_tsv;
ALTER TABLE entries DROP COLUMN IF EXISTS tsv"""


def postings_bm25_sql(where: str) -> str:
    """One query ranking entries by the same BM25 as :func:`bm25_sql`, from
    ``entry_postings``: each lexeme's document frequency is its postings count, each
    entry's score the sum, in lexeme order, of its postings' terms; entries are then
    fetched best first and checked against ``where`` until the limit is filled.
    Parameters, in order: the lexemes (a text array), the parameters of ``where``, the
    limit."""
    return f"""
WITH q AS MATERIALIZED (
    SELECT q.i, q.term, (SELECT count(*) FROM entry_postings AS p WHERE p.term = q.term) AS df
    FROM unnest(%s::text[]) WITH ORDINALITY AS q(term, i)
),
st AS MATERIALIZED (
    SELECT greatest(sum(docs), 1)::float8 AS n,
           CASE WHEN sum(terms) > 0 THEN sum(terms)::float8 / greatest(sum(docs), 1)
                ELSE 1.0 END AS avgdl
    FROM text_stats WHERE tbl = 'entries'
),
w AS MATERIALIZED (
    SELECT q.i, q.term, st.avgdl,
           greatest({IDF_FLOOR}, ln(greatest(st.n - q.df, 0) + 0.5) - ln(q.df + 0.5)) AS idf
    FROM q, st
),
s AS MATERIALIZED (
    SELECT p.rid,
           sum(w.idf * p.tf::float8 * {K1 + 1}
               / (p.tf::float8 + {K1} * ({1 - B} + {B} * p.dl::float8 / w.avgdl)) ORDER BY w.i)
               AS score
    FROM w JOIN entry_postings AS p ON p.term = w.term
    GROUP BY p.rid
)
SELECT e.id, s.score
FROM (SELECT rid, score FROM s ORDER BY score DESC, rid) AS s
JOIN entries AS e ON e.rid = s.rid
WHERE {where}
ORDER BY s.score DESC, s.rid LIMIT %s"""
