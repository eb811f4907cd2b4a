"""FUSE CONVEX (Bruch et al., TOIS 2023), the context leg (CONTEXT_MATCH) and WITH CONTEXT:
exact arithmetic, reason codes, errors."""

from __future__ import annotations

import pytest
from engine_helpers import doc, left_sum, make_db, q, reason, vec

import recallql
from recallql.grammar.errors import QueryError


@pytest.fixture
def kb():
    """Three chunks of one document (positions 0, 1, 2), one item alone, one more document."""
    return make_db([
        doc("d#0", "intro", "nothing to see", vec(0, 1, 0, 0), doc_id="d", position=0),
        doc("d#1", "alpha", "alpha beta alpha", vec(1, 0, 0, 0), doc_id="d", position=1),
        doc("d#2", "outro", "more words", vec(0, 0, 1, 0), doc_id="d", position=2),
        doc("solo", "alpha", "alpha", vec(0.6, 0.8, 0, 0)),
        doc("e#0", "beta", "beta gamma", vec(0, 0, 0, 1), doc_id="e", position=0),
    ])


def run(db, extra="", text="alpha beta", v=(1, 0, 0, 0), where=""):
    return db.execute(f"SEARCH kb MATCHING :t NEAR :v {where} WITHOUT RECENCY {extra}", t=text,
                      v=q(vec(*v)))


def legs(row):
    return {x.leg: x for x in row.reasons if x.code.value in ("LEXICAL_MATCH", "SEMANTIC_MATCH")}


def test_convex_is_the_default_and_min_max_normalises_each_leg(kb):
    result = run(kb, "FUSE CONVEX (weights = (context = 0))")
    default = run(kb, "FUSE CONVEX (normalization = minmax, weights = (context = 0))")
    assert [(r.id, r.score) for r in result.rows] == [(r.id, r.score) for r in default.rows]
    by = {r.id: r for r in result.rows}
    bm25 = {i: legs(r)["lexical"].bm25 for i, r in by.items() if "lexical" in legs(r)}
    # the lexical leg holds all 3 matches, fewer than its window of 100: the rest of its window
    # would be non-matching rows of BM25 0, so lo = 0 (not the weakest match's score)
    assert len(bm25) == 3
    lo, hi = 0.0, max(bm25.values())
    cos = {i: legs(r)["semantic"].cosine for i, r in by.items()}
    clo, chi = min(cos.values()), max(cos.values())
    for i, row in by.items():
        expected = 0.0
        if i in bm25:
            phi = (bm25[i] - lo) / (hi - lo)
            assert legs(row)["lexical"].norm == phi
            expected += 0.5 * phi
        else:
            assert reason(row, "LEG_ABSENT").leg == "lexical"
            expected += 0.0
        phi = (cos[i] - clo) / (chi - clo)
        assert legs(row)["semantic"].norm == phi
        expected += 0.5 * phi
        assert row.score == expected == left_sum(row)
    assert by["d#1"].score == 1.0  # the maximum of both legs
    assert legs(by["d#1"])["lexical"].detail == \
        f"rank=1, bm25={bm25['d#1']:.3f}, norm=1.00000"


def test_a_leg_that_fills_its_window_is_normalised_by_its_lowest_score(kb):
    # window 2: the lexical leg keeps 2 of its 3 matches, so its lo is the 2nd score (φ = 0)
    result = run(kb, "FUSE CONVEX (window = 2, weights = (context = 0)) LIMIT 2")
    lexical = sorted((legs(r)["lexical"] for r in result.rows if "lexical" in legs(r)),
                     key=lambda x: x.rank)
    assert [x.rank for x in lexical] == [1, 2]
    assert (lexical[0].norm, lexical[1].norm) == (1.0, 0.0)
    full = {r.id: legs(r)["lexical"] for r in run(kb, "FUSE CONVEX (weights = (context = 0))").rows
            if "lexical" in legs(r)}
    weakest = max(full.values(), key=lambda x: x.rank)
    top = min(full.values(), key=lambda x: x.rank)
    assert weakest.norm == (weakest.bm25 - 0.0) / (top.bm25 - 0.0) > 0.0  # a match, not a miss


def test_default_plan_shows_window_and_fusion_in_explain(kb):
    text = kb.execute("EXPLAIN SEARCH kb MATCHING 'alpha' NEAR :v",
                      v=q(vec(1, 0, 0, 0))).to_text()
    lines = text.splitlines()
    assert lines[2].startswith("    ConvexFusion: normalization=minmax window=100 legs=2 "
                               "bounds=(lexical=[")
    assert lines[-1].startswith("   ") and "ContextScan: weight=0.5" in text
    rrf = kb.execute("EXPLAIN SEARCH kb MATCHING 'alpha' NEAR :v FUSE RRF (window = 20)",
                     v=q(vec(1, 0, 0, 0))).to_text()
    assert "    RrfFusion: k=60 window=20 legs=2" in rrf


def test_alpha_is_the_semantic_weight(kb):
    result = run(kb, "FUSE CONVEX (alpha = 0.25, weights = (context = 0))")
    for row in result.rows:
        parts = legs(row)
        if "lexical" in parts:
            assert parts["lexical"].contribution == (0.75 / 1.0) * parts["lexical"].norm
        assert parts["semantic"].contribution == (0.25 / 1.0) * parts["semantic"].norm


def test_tmm_uses_the_theoretical_minimum(kb):
    result = run(kb, "FUSE CONVEX (normalization = tmm, weights = (context = 0))")
    by = {r.id: r for r in result.rows}
    hi = max(legs(r)["semantic"].cosine for r in result.rows)
    for row in result.rows:
        sem = legs(row)["semantic"]
        assert sem.norm == (sem.cosine - (-1.0)) / (hi - (-1.0))
    lex = legs(by["solo"])["lexical"]
    top = legs(by["d#1"])["lexical"].bm25
    assert lex.norm == (lex.bm25 - 0.0) / (top - 0.0)


def test_context_credit_is_half_the_neighbours_relevance(kb):
    plain = {r.id: r.score for r in run(kb, "FUSE CONVEX (weights = (context = 0))").rows}
    result = run(kb)
    by = {r.id: r for r in result.rows}
    for rid, neighbour, side in (("d#0", "d#1", "after"), ("d#2", "d#1", "before")):
        ctx = reason(by[rid], "CONTEXT_MATCH")
        assert (ctx.neighbour, ctx.side, ctx.weight) == (neighbour, side, 0.5)
        assert ctx.relevance == plain[neighbour] == 1.0
        assert ctx.contribution == 0.5 * 1.0
        assert by[rid].score == plain[rid] + 0.5 == left_sum(by[rid])
        assert ctx.render() == (f"CONTEXT_MATCH(neighbour={neighbour}, side={side}, "
                                "relevance=1.00000, weight=0.5) +0.50000")
    # d#1 takes the better of its two neighbours; solo and e#0 have no neighbour
    ctx = reason(by["d#1"], "CONTEXT_MATCH")
    assert ctx.relevance == max(plain["d#0"], plain["d#2"])
    assert all(x.code.value != "CONTEXT_MATCH" for i in ("solo", "e#0") for x in by[i].reasons)


@pytest.fixture
def far():
    """One document of three chunks: a strong match, a chunk that matches nothing, a weak match."""
    return make_db([
        doc("f#0", "alpha", "alpha alpha", doc_id="f", position=0),
        doc("f#1", "filler", "nothing here", doc_id="f", position=1),
        doc("f#2", "alpha", "alpha and many other words", doc_id="f", position=2),
    ])


def lexical(db, where=""):
    return db.execute(f"SEARCH kb MATCHING 'alpha' USING LEXICAL {where} WITHOUT RECENCY")


def test_context_credit_halves_per_step(far):
    """f#2 is two items from f#0: 0.5² · rel(f#0) beats nothing from f#1 (not a candidate).
    One leg (W = 1), holding both matches: lo = 0, so rel = bm25 / the best bm25."""
    by = {r.id: r for r in lexical(far).rows}
    bm25 = {i: reason(by[i], "LEXICAL_MATCH").bm25 for i in ("f#0", "f#2")}
    rel = {i: (b - 0.0) / (bm25["f#0"] - 0.0) for i, b in bm25.items()}
    ctx = reason(by["f#2"], "CONTEXT_MATCH")
    assert (ctx.neighbour, ctx.side, ctx.distance, ctx.relevance) == ("f#0", "before", 2, 1.0)
    assert ctx.contribution == 0.5 ** 2 * 1.0
    assert by["f#2"].score == rel["f#2"] + 0.25 == left_sum(by["f#2"])
    assert ctx.render() == ("CONTEXT_MATCH(neighbour=f#0, side=before, distance=2, "
                            "relevance=1.00000, weight=0.5) +0.25000")
    # f#1 matches nothing: it is f#0's neighbour (0.5 · 1) and f#2's (0.5 · rel(f#2))
    mid = reason(by["f#1"], "CONTEXT_MATCH")
    assert (mid.neighbour, mid.distance, mid.contribution) == ("f#0", 1, 0.5 * 1.0)
    assert by["f#1"].score == 0.0 + 0.5 * 1.0
    assert "distance" not in mid.detail  # one step: the nearest item
    back = reason(by["f#0"], "CONTEXT_MATCH")
    assert (back.neighbour, back.side, back.distance) == ("f#2", "after", 2)
    assert back.contribution == 0.5 ** 2 * rel["f#2"]


def test_context_distance_counts_eligible_items(far):
    """Filtered out, f#1 is not counted: f#0 and f#2 are next to each other."""
    by = {r.id: r for r in lexical(far, "WHERE id != 'f#1'").rows}
    assert set(by) == {"f#0", "f#2"}
    ctx = reason(by["f#2"], "CONTEXT_MATCH")
    assert (ctx.neighbour, ctx.distance, ctx.contribution) == ("f#0", 1, 0.5 * 1.0)


def test_context_weight_and_rrf(kb):
    result = run(kb, "FUSE RRF (weights = (context = 0.25))", text="alpha")
    by = {r.id: r for r in result.rows}
    rel = {i: sum(x.contribution for x in r.reasons if x.code.value.endswith("_MATCH")
                  and x.code.value != "CONTEXT_MATCH") for i, r in by.items()}
    ctx = reason(by["d#0"], "CONTEXT_MATCH")
    assert ctx.contribution == 0.25 * rel["d#1"] and ctx.weight == 0.25


def test_context_credit_skips_filtered_items(kb):
    result = run(kb, where="WHERE id != 'd#1'")
    by = {r.id: r for r in result.rows}
    ctx = reason(by["d#0"], "CONTEXT_MATCH")  # d#1 filtered out: d#2 is d#0's neighbour
    assert ctx.neighbour == "d#2" and "d#1" not in by


def test_with_context_returns_the_surrounding_items(kb):
    result = run(kb, "WITH CONTEXT (before = 1, after = 2) LIMIT 3", text="alpha")
    by = {r.id: r for r in result.rows}
    assert [(c.offset, c.id) for c in by["d#1"].context] == [(-1, "d#0"), (1, "d#2")]
    assert by["solo"].context == []
    dicts = {d["id"]: d for d in result.to_dicts()}
    assert [c["offset"] for c in dicts["d#1"]["context"]] == [-1, 1]
    assert dicts["d#1"]["context"][0]["body"] == "nothing to see"
    assert run(kb, "LIMIT 1").rows[0].context is None
    filtered = run(kb, "WITH CONTEXT", text="alpha", where="WHERE id != 'd#0'")
    (hit,) = [r for r in filtered.rows if r.id == "d#1"]
    assert [(c.offset, c.id) for c in hit.context] == [(1, "d#2")]  # d#0 is filtered out


def test_chunks_at_one_position_are_in_ingest_order():
    """Two chunks of a document at one position (allowed): the one written first comes first,
    whatever their ids, in WITH CONTEXT and in context credit."""
    db = make_db([doc("d#z", "first", "nothing", vec(0, 1, 0, 0), doc_id="d", position=0),
                  doc("d#a", "second", "nothing", vec(0, 0, 1, 0), doc_id="d", position=0)])
    db.ingest("kb", [doc("d#m", "alpha", "alpha", vec(1, 0, 0, 0), doc_id="d", position=1)])
    (hit,) = [r for r in run(db, "WITH CONTEXT (before = 2)", text="alpha").rows
              if r.id == "d#m"]
    assert [(c.offset, c.id) for c in hit.context] == [(-2, "d#z"), (-1, "d#a")]
    by = {r.id: r for r in db.execute("SEARCH kb MATCHING 'alpha' USING LEXICAL").rows}
    assert reason(by["d#a"], "CONTEXT_MATCH").neighbour == "d#m"
    assert "d#z" not in by  # two items away: credit reaches only the nearest on each side


@pytest.mark.parametrize("clause, message", [
    ("FUSE RRF (alpha = 0.5)", "option 'alpha' is for FUSE CONVEX, not FUSE RRF"),
    ("FUSE CONVEX (k = 60)", "option 'k' is for FUSE RRF, not FUSE CONVEX"),
    ("FUSE CONVEX (normalization = zscore)", "normalization takes a name, minmax or tmm, not zsc"),
    ("FUSE CONVEX (alpha = 1.5)", "alpha must be between 0 and 1"),
    ("FUSE CONVEX (weights = (context = 2))", "the context weight must be at most 1"),
    ("FUSE CONVEX (alpha = 0.5, weights = (lexical = 1))", "give alpha or the"),
    ("WITH CONTEXT (before = 101)", "before must be at most 100"),
    ("WITH CONTEXT (around = 1)", "unknown option 'around' for WITH CONTEXT"),
])
def test_bad_fusion_and_context_options(kb, clause, message):
    with pytest.raises(QueryError, match=message.replace("(", r"\(")):
        run(kb, clause)


def test_canonical_text_round_trips():
    text = ("SEARCH kb MATCHING 'x' WITHOUT RECENCY WITH CONTEXT (before = 2, after = 1) "
            "FUSE CONVEX (alpha = 0.3, normalization = tmm, window = 50) LIMIT 5")
    assert recallql.parse(text).to_text() == text


def test_explain_shows_the_window_a_refill_used():
    """GROUP BY DOCUMENT with window 2: the two best chunks are one document, so the page
    under-fills and the refill asks for 2 × 4 = 8; the fusion line shows the window it fused."""
    db = make_db([doc(f"a#{i}", "alpha", "alpha " * (5 - i), vec(1, 0, 0, 0), doc_id="a",
                      position=i) for i in range(3)]
                 + [doc("b#0", "alpha", "alpha", vec(0, 1, 0, 0), doc_id="b", position=0)])
    text = db.execute("EXPLAIN SEARCH kb MATCHING 'alpha' USING LEXICAL WITHOUT RECENCY "
                      "FUSE CONVEX (window = 2) GROUP BY DOCUMENT LIMIT 2").to_text()
    assert "ConvexFusion: normalization=minmax window=8 legs=1" in text
    assert "LexicalScan: fields=[title, body] terms=[alpha] window=8" in text


def test_normalization_is_a_name_not_a_parameter(kb):
    with pytest.raises(QueryError, match="normalization takes a name, minmax or tmm, not a par"):
        kb.execute("SEARCH kb MATCHING 'alpha' FUSE CONVEX (normalization = :n)", n="tmm")


def test_with_context_in_json_output():
    from recallql.ui.render import Catalog, json_data

    db = make_db([doc("d#0", "intro", "before", vec(0, 1, 0, 0), doc_id="d", position=0,
                      created_at="2025-01-02T03:04:05Z"),
                  doc("d#1", "alpha", "alpha", vec(1, 0, 0, 0), doc_id="d", position=1)])
    result = db.execute("SEARCH kb MATCHING 'alpha' USING LEXICAL WITH CONTEXT (before = 1) "
                        "LIMIT 1")
    (row,) = json_data(result, Catalog.of(db))["rows"]
    assert row["id"] == "d#1"
    assert [(c["offset"], c["id"]) for c in row["context"]] == [(-1, "d#0")]
    assert row["context"][0]["fields"]["created_at"] == "2025-01-02T03:04:05.000000Z"
