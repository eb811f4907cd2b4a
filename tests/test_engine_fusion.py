"""RRF fusion, legs, filters and the literal MATCHING text (SPEC §3.2, §3.3, §4.1, §4.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_helpers import doc, left_sum, make_db, q, reason, vec

import recallql


def share(rank: int, k: float = 60.0, legs: int = 2) -> float:
    return (1.0 / (k + rank)) / (legs / (k + 1.0))


@pytest.fixture
def corpus():
    """Lexical order for 'alpha beta': a1 > a2 > a3; semantic order for e1: s1 > a3 > a1."""
    return make_db([
        doc("a1", "alpha beta", "alpha beta alpha beta", vec(0.2, 1, 0, 0)),
        doc("a2", "alpha beta gamma", "alpha", vec(0, 0, 1, 0)),
        doc("a3", "alpha", "delta", vec(0.7, 0.7, 0, 0)),
        doc("s1", "unrelated words", "nothing here", vec(1, 0, 0, 0)),
    ])


def hybrid(db, text="alpha beta", v=(1, 0, 0, 0), extra="", **params):
    return db.execute(f"SEARCH kb MATCHING :t NEAR :v {extra}", t=text, v=q(v), **params)


def test_rrf_shares_are_exact(corpus):
    rows = {r.id: r for r in hybrid(corpus, extra="WITHOUT RECENCY FUSE RRF").rows}
    lex = {r.id: reason(r, "LEXICAL_MATCH").rank
           for r in rows.values() if any(x.code.value == "LEXICAL_MATCH" for x in r.reasons)}
    assert lex == {"a1": 1, "a2": 2, "a3": 3}
    a1 = rows["a1"]
    assert reason(a1, "LEXICAL_MATCH").contribution == share(1)
    sem_rank = reason(a1, "SEMANTIC_MATCH").rank
    assert reason(a1, "SEMANTIC_MATCH").detail == \
        f"rank={sem_rank}, cosine={reason(a1, 'SEMANTIC_MATCH').cosine:.3f}"
    assert reason(a1, "SEMANTIC_MATCH").contribution == share(sem_rank)
    assert a1.score == share(1) + share(sem_rank)
    s1 = rows["s1"]
    assert reason(s1, "LEG_ABSENT").detail == "leg=lexical"
    assert reason(s1, "LEG_ABSENT").contribution == 0.0
    assert s1.score == 0.0 + share(1)


def test_rank_one_in_every_leg_is_exactly_one():
    db = make_db([doc("x", "alpha", "alpha", vec(1, 0, 0, 0)),
                  doc("y", "beta", "alpha beta", vec(0, 1, 0, 0))])
    row = hybrid(db, "alpha", extra="WITHOUT RECENCY").rows[0]
    assert row.id == "x"
    assert row.score == 1.0


def test_one_leg_plan_normalises_by_one(corpus):
    rows = corpus.execute("SEARCH kb MATCHING 'alpha beta' USING LEXICAL WITHOUT RECENCY "
                          "FUSE RRF").rows
    assert rows[0].score == 1.0
    assert rows[1].score == share(2, legs=1)
    assert all(x.code.value != "SEMANTIC_MATCH" for r in rows for x in r.reasons)


def test_rrf_k_changes_the_shares(corpus):
    rows = hybrid(corpus, extra="WITHOUT RECENCY FUSE RRF (k = 10)").rows
    legs = [r for r in rows[0].reasons if r.code.value in ("LEXICAL_MATCH", "SEMANTIC_MATCH")]
    assert [r.code.value for r in legs] == ["LEXICAL_MATCH", "SEMANTIC_MATCH"]
    for r in legs:
        assert r.contribution == share(r.rank, k=10)


@pytest.mark.parametrize("text", ["C++", "it's", '36"', "{0}", "a:b", "OR hello", "-v flag",
                                  "field:value", "NOT", "AND OR", "title:alpha", "*", "a AND (b",
                                  "\\", "'; DROP TABLE items; --"])
def test_matching_text_is_literal(text):
    db = make_db([doc("w", "words", "hello flag value field alpha b", vec(1, 0, 0, 0)),
                  doc("z", "c plus", "it s 36 0", vec(0, 1, 0, 0))])
    result = db.execute("SEARCH kb MATCHING :t NEAR :v", t=text, v=q(vec(1, 0, 0, 0)))
    assert len(result.rows) >= 1
    assert all(math.isfinite(r.score) for r in result.rows)
    literal = "'" + text.replace("'", "''") + "'"
    again = db.execute(f"SEARCH kb MATCHING {literal} NEAR :v", v=q(vec(1, 0, 0, 0)))
    assert again.ids() == result.ids()


def test_syntax_words_in_text_are_searched_as_words():
    db = make_db([doc("f", "field value", "", vec(0, 1, 0, 0)),
                  doc("o", "other", "", vec(1, 0, 0, 0))])
    rows = db.execute("SEARCH kb MATCHING 'field:value' USING LEXICAL").rows
    assert [r.id for r in rows] == ["f"]
    assert "terms=[field, valu]" in db.explain("SEARCH kb MATCHING 'field:value' "
                                               "USING LEXICAL").to_text()


def test_text_without_terms_runs_semantic_only(corpus):
    result = hybrid(corpus, text="the of and ???")
    assert [w.code.value for w in result.warnings] == ["LEXICAL_LEG_EMPTY"]
    assert result.ids()[0] == "s1"
    missing = reason(result.rows[0], "RECENCY_MISSING_DATE")
    assert result.rows[0].score == 1.0 + missing.contribution


def test_no_lexical_hits_keeps_the_result_shape(corpus):
    result = hybrid(corpus, text="zebra")
    assert len(result.rows) == 4
    for row in result.rows:
        assert reason(row, "LEG_ABSENT").detail == "leg=lexical"
        assert row.score == left_sum(row)


def test_no_vector_runs_lexical_only_with_a_notice(corpus):
    result = corpus.execute("SEARCH kb MATCHING 'alpha beta'")
    assert [w.code.value for w in result.warnings] == ["SEMANTIC_LEG_UNAVAILABLE"]
    assert result.ids() == ["a1", "a2", "a3"]
    assert result.rows[0].score == 1.0


def test_using_semantic_without_embedder_or_vector_is_an_error(corpus):
    with pytest.raises(recallql.QuerySemanticError) as err:
        corpus.execute("SEARCH kb MATCHING 'alpha' USING SEMANTIC")
    assert "NEAR" in str(err.value) and "^" in str(err.value)


def test_empty_text_is_an_error(corpus):
    with pytest.raises(recallql.QueryError):
        corpus.execute("SEARCH kb MATCHING ''")
    with pytest.raises(recallql.ParameterError):
        corpus.execute("SEARCH kb MATCHING :t", t="")


def test_filters_apply_to_both_legs_before_fusion():
    """`hot` is the best match in both legs but filtered out; it must not come back through
    either leg, and with window 1 each leg still returns its best *eligible* row."""
    db = make_db([
        doc("hot", "alpha alpha", "alpha", vec(1, 0, 0, 0), team="red"),
        doc("ok1", "alpha", "x", vec(0.9, 0.1, 0, 0), team="blue"),
        doc("ok2", "beta", "alpha y", vec(0.5, 0.5, 0, 0), team="blue"),
        doc("nul", "alpha alpha", "alpha", vec(1, 0, 0, 0)),
    ], fields={"team": "str"})
    for where in ("team = 'blue'", "team != 'red'", "NOT team = 'red'", "team IN ('blue')"):
        result = db.execute(f"SEARCH kb MATCHING 'alpha' NEAR :v WHERE {where} "
                            "FUSE RRF (window = 1) LIMIT 1", v=q(vec(1, 0, 0, 0)))
        assert result.ids() == ["ok1"], where
        assert result.rows[0].score == pytest.approx(1.0, abs=1e-3)
        assert result.stats["window"] == 1


def test_missing_field_fails_closed_under_not():
    db = make_db([doc("has", "alpha", "", vec(1, 0, 0, 0), team="red"),
                  doc("none", "alpha", "", vec(1, 0, 0, 0))], fields={"team": "str"})
    ids = db.execute("SEARCH kb MATCHING 'alpha' NEAR :v WHERE NOT team = 'blue'",
                     v=q(vec(1, 0, 0, 0))).ids()
    assert ids == ["has"]
    assert db.execute("SEARCH kb MATCHING 'alpha' WHERE team IS NULL").ids() == ["none"]


def test_no_nan_or_duplicates_on_edge_inputs():
    empty = make_db([])
    assert empty.execute("SEARCH kb MATCHING 'alpha' NEAR :v LIMIT 1000",
                         v=q(vec(1, 0, 0, 0))).rows == []
    db = make_db([doc(f"d{i}", "alpha", "alpha " * i, vec(1, i, 0, 0)) for i in range(5)])
    result = db.execute("SEARCH kb MATCHING 'alpha' NEAR :v LIMIT 1000", v=q(vec(1, 0, 0, 0)))
    assert len(result.ids()) == len(set(result.ids())) == 5
    for row in result.rows:
        assert math.isfinite(row.score)
        assert all(math.isfinite(r.contribution) for r in row.reasons)
    with pytest.raises(recallql.IngestError):
        db.ingest("kb", [doc("zero", "z", "z", vec(0, 0, 0, 0))])
    with pytest.raises(recallql.ParameterError):
        db.execute("SEARCH kb MATCHING 'alpha' NEAR :v", v=q(vec(0, 0, 0, 0)))
    with pytest.raises(recallql.ParameterError):
        db.execute("SEARCH kb MATCHING 'alpha' NEAR :v", v=[1.0, float("nan"), 0, 0])
    with pytest.raises(recallql.ParameterError):
        db.execute("SEARCH kb MATCHING 'alpha' NEAR :v", v=q(vec(1, 0, 0)))


def _corpus_items(n: int = 40) -> list[dict]:
    rng = np.random.default_rng(7)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma"]
    items = []
    for i in range(n):
        text = " ".join(rng.choice(words, size=int(rng.integers(1, 6))))
        items.append(doc(f"i{i:02d}", text, text, rng.standard_normal(4).round(1) + 0.01,
                         created_at=f"20{10 + i % 15}-01-01", doc_id=f"doc{i % 7}",
                         position=i // 7))
    return items


def test_results_do_not_depend_on_insertion_order():
    items = _corpus_items()
    forward = make_db(items)
    backward = make_db(list(reversed(items)))
    for stmt in ("SEARCH kb MATCHING 'alpha beta' NEAR :v LIMIT 40",
                 "SEARCH kb MATCHING 'gamma' NEAR :v GROUP BY DOCUMENT LIMIT 5"):
        a = forward.execute(stmt, v=q(vec(1, 0.5, 0, 0)))
        b = backward.execute(stmt, v=q(vec(1, 0.5, 0, 0)))
        assert a.ids() == b.ids()
        assert [r.score for r in a.rows] == [r.score for r in b.rows]


def test_pages_concatenate_to_the_unpaged_list():
    db = make_db(_corpus_items())
    stmt = "SEARCH kb MATCHING 'alpha omega' NEAR :v LIMIT {n} OFFSET {o}"
    full = db.execute(stmt.format(n=30, o=0), v=q(vec(1, 0, 0, 0))).ids()
    pages = []
    for offset in range(0, 30, 7):
        pages += db.execute(stmt.format(n=7, o=offset), v=q(vec(1, 0, 0, 0))).ids()
    assert pages[:30] == full


def test_group_by_document_keeps_each_documents_best_chunk_and_fills_pages():
    """Each of 4 documents has 10 chunks; with a window of 3 the legs first see only one
    document's chunks, so grouping must fetch deeper windows to fill LIMIT 4."""
    items = []
    for d in range(4):
        for p in range(10):
            items.append(doc(f"d{d}#{p}", "alpha " * (10 - d), "chunk text",
                             vec(1, d + p * 0.1, 0, 0), doc_id=f"d{d}", position=p))
    db = make_db(items)
    result = db.execute("SEARCH kb MATCHING 'alpha' NEAR :v FUSE RRF (window = 3) "
                        "GROUP BY DOCUMENT LIMIT 4", v=q(vec(1, 0, 0, 0)))
    assert [r.fields["doc_id"] for r in result.rows] == ["d0", "d1", "d2", "d3"]
    assert [r.fields["position"] for r in result.rows] == [0, 0, 0, 0]
    pages = []
    for offset in range(4):
        pages += db.execute("SEARCH kb MATCHING 'alpha' NEAR :v FUSE RRF (window = 3) GROUP BY "
                            f"DOCUMENT LIMIT 1 OFFSET {offset}", v=q(vec(1, 0, 0, 0))).ids()
    assert pages == result.ids()


def test_retrieve_without_matching_ranks_by_boosts_alone():
    db = make_db([doc("old", "a", "", vec(1, 0, 0, 0), created_at="2001-01-01"),
                  doc("new", "b", "", vec(1, 0, 0, 0), created_at="2026-11-01"),
                  doc("undated", "c", "", vec(1, 0, 0, 0))])
    result = db.execute("RETRIEVE 3 FROM kb")
    assert result.ids() == ["new", "old", "undated"]
    for row in result.rows:
        assert reason(row, "NO_RELEVANCE").contribution == 0.0
        assert row.score == left_sum(row)


@pytest.mark.parametrize("fuse", [
    "FUSE RRF (weights = (lexical = 5e-324))",
    "FUSE RRF (k = 1e300, weights = (lexical = 1e-300))",
], ids=["subnormal-weight", "weight-over-huge-k"])
def test_tiny_fuse_weights_keep_relevance_finite_and_normalised(corpus, fuse):
    """Was: NaN scores (and `NaN` in the MCP server's JSON) — `w/(k + rank)` and `W/(k + 1)`
    both underflowed to 0, and the share was 0/0. Relevance depends on the weights' ratios
    only, so the one leg's first row has relevance exactly 1, as with the default weight."""
    rows = corpus.execute("SEARCH kb MATCHING 'alpha beta' USING LEXICAL WITHOUT RECENCY "
                          + fuse).rows
    assert [r.id for r in rows] == ["a1", "a2", "a3"]
    assert [r.score for r in rows] == sorted((r.score for r in rows), reverse=True)
    assert rows[0].score == 1.0
    assert all(math.isfinite(r.score) and r.score == left_sum(r) for r in rows)
    assert all("nan" not in x.detail for r in rows for x in r.reasons)
