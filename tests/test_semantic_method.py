"""The semantic leg's method, chosen per statement or forced by `USING SEMANTIC (exact)`:
the planner rule (exact for a small eligible set, ANN above), EXPLAIN's method= and why=,
Result.stats, the LegBatches round trip, and the grammar."""

from __future__ import annotations

import numpy as np
import pytest
from engine_helpers import semantic_line

import recallql
from recallql.engine.legs import LegBatches
from recallql.grammar import QuerySemanticError, QuerySyntaxError, parse
from recallql.index import graphs, semantic

DIM = 8


@pytest.fixture
def db(monkeypatch):
    monkeypatch.setattr(graphs, "GRAPH_MIN_ROWS", 64)
    monkeypatch.setattr(semantic, "EXACT_MAX_ROWS", 50)
    database = recallql.connect(None, embedder=None)
    database.store.background_graphs = False
    database.create_collection("notes", ("body",), {"tenant": str, "session": str}, dim=DIM,
                               embedder=None)
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(400, DIM)).astype(np.float32)
    for start in range(0, 400, 100):
        database.ingest("notes", [{"id": f"i{j}", "body": f"note {j} word{j % 9}",
                                   "tenant": f"t{j % 4}", "session": f"s{j % 20}",
                                   "vector": vecs[j]} for j in range(start, start + 100)])
    assert database.store.build_graphs() == 4
    yield database
    database.close()


QUERY = np.linspace(-1, 1, DIM).astype(np.float32)


WHY_ANN = ("400 eligible rows > 50: ANN with oversampling; n = 100 over 4 graphs: "
           "4 × (n_g 38, k 38, ef 128) [n_g = min(n, ⌈n·s + 3·√(n·s·(1 − s))⌉), s = the "
           "graph's share of the eligible rows; k = ⌈2·(n_g + 16) / f⌉, f = the eligible "
           "fraction of the graph, at most its rows and max(n_g, min(8192, 0.25 of its "
           "rows)); ef = max(128, k)]")


def test_the_method_follows_the_eligible_row_count(db):
    plain = semantic_line(db.explain("SEARCH notes USING SEMANTIC NEAR :v LIMIT 5", v=QUERY))
    assert plain["method"] == "ann"
    assert plain["why"] == WHY_ANN  # n_g = ⌈100·0.25 + 3·√(100·0.25·0.75)⌉ = ⌈25 + 12.99⌉
    session = semantic_line(db.explain(
        "SEARCH notes USING SEMANTIC NEAR :v WHERE session = 's3' LIMIT 5", v=QUERY))
    assert session["method"] == "exact"
    assert session["why"] == "20 eligible rows ≤ 50: scanned exactly"


def test_using_semantic_exact_forces_the_scan_and_answers_agree(db):
    forced = db.explain("SEARCH notes USING SEMANTIC (exact) NEAR :v LIMIT 10", v=QUERY)
    props = semantic_line(forced)
    assert (props["method"], props["why"]) == ("exact", "USING SEMANTIC (exact)")
    ann = db.execute("SEARCH notes USING SEMANTIC NEAR :v WITHOUT RECENCY LIMIT 10", v=QUERY)
    exact = db.execute("SEARCH notes USING SEMANTIC (exact) NEAR :v WITHOUT RECENCY LIMIT 10",
                       v=QUERY)
    assert [r.id for r in ann.rows] == [r.id for r in exact.rows]
    assert [r.score for r in ann.rows] == [r.score for r in exact.rows]
    assert ann.stats["legs"]["semantic"]["method"] == "ann"
    assert exact.stats["legs"]["semantic"]["why"] == "USING SEMANTIC (exact)"


def test_hybrid_exact_applies_to_its_semantic_leg(db):
    props = semantic_line(db.explain("SEARCH notes MATCHING 'word3' USING HYBRID (exact) "
                                     "NEAR :v LIMIT 5", v=QUERY))
    assert props["method"] == "exact"


def test_leg_batches_keep_the_method_through_json(db):
    plan = db.plan("SEARCH notes USING SEMANTIC NEAR :v LIMIT 5", v=QUERY)
    batches = db.run_legs(plan)
    back = LegBatches.from_json(batches.to_json())
    assert {b.name: (b.method, b.why) for b in back.legs}["semantic"] == ("ann", WHY_ANN)
    assert [b.method for b in back.legs] == [b.method for b in batches.legs]


def test_grammar_of_the_method():
    stmt = parse("SEARCH notes USING SEMANTIC (EXACT) NEAR :v")
    assert stmt.using.method == "exact"
    assert stmt.to_text() == "SEARCH notes USING SEMANTIC (exact) NEAR :v"
    assert parse("SEARCH notes USING SEMANTIC NEAR :v").using.method is None
    with pytest.raises(QuerySemanticError, match="unknown semantic search method 'exakt'") as e:
        parse("SEARCH notes USING SEMANTIC (exakt) NEAR :v")
    assert "did you mean 'exact'" in str(e.value)
    with pytest.raises(QuerySyntaxError, match="USING LEXICAL has no semantic leg"):
        parse("SEARCH notes MATCHING 'x' USING LEXICAL (exact)")
