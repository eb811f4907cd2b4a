"""`USING SEMANTIC (ann, ef = N)`: a per-statement HNSW search breadth (Qdrant's ``hnsw_ef``,
LanceDB's ``.ef()``): the grammar and its errors, the window check, the graph searches using
it (raised to k when lower), EXPLAIN's why, and answers that stay exact cosines."""

from __future__ import annotations

import numpy as np
import pytest
from engine_helpers import semantic_line

import recallql
from recallql.grammar import QuerySyntaxError, parse
from recallql.index import graphs, semantic

DIM = 8
QUERY = np.linspace(-1, 1, DIM).astype(np.float32)


@pytest.fixture
def db(monkeypatch):
    monkeypatch.setattr(graphs, "GRAPH_MIN_ROWS", 64)
    monkeypatch.setattr(semantic, "EXACT_MAX_ROWS", 50)
    database = recallql.connect(None, embedder=None)
    database.store.background_graphs = False
    database.create_collection("notes", ("body",), {"tenant": str}, dim=DIM, embedder=None)
    vecs = np.random.default_rng(3).normal(size=(400, DIM)).astype(np.float32)
    database.ingest("notes", [{"id": f"i{j:03d}", "body": f"note {j}", "tenant": f"t{j % 4}",
                               "vector": vecs[j]} for j in range(400)])
    assert database.store.build_graphs() == 1
    yield database
    database.close()


def test_the_clause_parses_and_renders():
    stmt = parse("search notes using semantic (ANN, EF = 600) near :v limit 5")
    assert (stmt.using.method, stmt.using.ef) == ("ann", 600)
    assert stmt.to_text() == "SEARCH notes USING SEMANTIC (ann, ef = 600) NEAR :v LIMIT 5"
    assert parse(stmt.to_text()).using == stmt.using.model_copy(
        update={"span": parse(stmt.to_text()).using.span})
    assert parse("SEARCH notes USING SEMANTIC (ann) NEAR :v").using.ef is None


@pytest.mark.parametrize(("text", "message", "caret"), [
    ("SEARCH notes USING SEMANTIC (exact, ef = 300) NEAR :v", "ef applies to (ann)", "ef"),
    ("SEARCH notes USING SEMANTIC (ann, eff = 300) NEAR :v", "unknown semantic search option",
     "eff"),
])
def test_bad_ef_is_refused_with_a_caret(text, message, caret):
    with pytest.raises(QuerySyntaxError) as err:
        parse(text)
    assert message in str(err.value)
    start, end = err.value.span
    assert text[start:end] == caret


@pytest.mark.parametrize(("text", "message", "caret"), [
    ("SEARCH notes USING SEMANTIC (ann, ef = 0) NEAR :v", "ef = 0 is out of range", "0"),
    ("SEARCH notes USING SEMANTIC (ann, ef = 100001) NEAR :v", "out of range", "100001"),
])
def test_ef_out_of_range_is_a_value_error_with_a_caret(text, message, caret):
    """A value out of range is a QuerySemanticError, as `LIMIT 0` (docs/language.md, Errors)."""
    with pytest.raises(recallql.QuerySemanticError) as err:
        parse(text)
    assert message in str(err.value)
    start, end = err.value.span
    assert text[start:end] == caret


@pytest.mark.parametrize("text", [
    "SEARCH notes USING SEMANTIC (ann, ef = 50) NEAR :v LIMIT 5",
    "SEARCH notes USING HYBRID (ANN,EF=50)NEAR :v",
    "SEARCH notes USING SEMANTIC (ann, ef = 50 -- 2 is too few\n) NEAR :v",
], ids=["canonical", "tight", "comment"])
def test_ef_below_the_window_is_refused_with_the_caret_under_ef(db, text):
    """The caret was under the whole USING clause; it goes under the value, as every other
    value check's."""
    with pytest.raises(recallql.QuerySemanticError, match="below the semantic leg's window of "
                       "100 rows") as err:
        db.execute(text, v=QUERY)
    start, end = err.value.span
    assert text[start:end] == "50"


@pytest.mark.parametrize("text", [
    "SEARCH notes USING SEMANTIC (ann, ef = 300) NEAR :v",
    "SEARCH notes USING HYBRID (ANN,EF=300)NEAR :v",
    "SEARCH notes USING SEMANTIC (ann, -- breadth)\n ef = 300 -- was 128)\n) NEAR :v",
], ids=["canonical", "tight", "comments"])
def test_the_grammar_records_where_the_ef_value_is(text):
    """`Using.ef_span` is the token's own span (errors found after parsing put the caret there,
    whatever comments the clause holds); no ef, no span."""
    using = parse(text).using
    assert using.ef == 300
    start, end = using.ef_span
    assert text[start:end] == "300"
    assert parse("SEARCH notes USING SEMANTIC (ann) NEAR :v").using.ef_span is None


def test_the_graph_searches_with_the_statement_ef(db):
    base = "SEARCH notes USING SEMANTIC ({}) NEAR :v WITHOUT RECENCY LIMIT 10"
    default = semantic_line(db.explain(base.format("ann"), v=QUERY))
    wide = semantic_line(db.explain(base.format("ann, ef = 300"), v=QUERY))
    # k = ⌈2·(100 + 16)⌉ = 232, capped at max(n_g, min(8192, 0.25 · 400 rows)) = 100
    assert "1 × (n_g 100, k 100, ef 128)" in default["why"]
    assert "1 × (n_g 100, k 100, ef 300)" in wide["why"]
    assert wide["why"].endswith("ef = max(300 (USING SEMANTIC (ann, ef = 300)), k)]")
    assert wide["ef"] == 300 and "ef" not in default
    exact = db.execute(base.format("exact"), v=QUERY)
    got = db.execute(base.format("ann, ef = 300"), v=QUERY)
    assert got.ids() == exact.ids() and [r.score for r in got.rows] == [
        r.score for r in exact.rows]
