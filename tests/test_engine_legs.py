"""Any number of legs (SPEC §4.1, §4.2): a leg registered through the public leg interface runs
beside the lexical and semantic legs, and weighted RRF gives each leg exactly
`(w/(k + rank)) / (Σ_legs w / (k + 1))`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from engine_helpers import doc, left_sum, make_db, q, vec

import recallql
from recallql.engine import LegContext, LegKind, LegScan, LegSpec, register_leg
from recallql.engine.models import Explain
from recallql.engine.plan import FusionSpec
from recallql.engine.reasons import Reason


@register_leg
@dataclass(frozen=True, eq=False)
class StarsScan(LegScan):
    """Test-only leg: rows ranked by their `stars` field (best first, ties by item id)."""

    name = "StarsScan"

    def describe(self):
        return self.named({"field": "stars", "window": self.spec.window})

    def search(self, ctx: LegContext):
        snap = ctx.snapshot
        column = snap.column("stars")
        stars = np.asarray(column.values(snap.size), np.float64)
        eligible = snap.live & column.present(snap.size)
        if self.spec.filter is not None:
            eligible = eligible & ctx.mask(self.spec.filter)
        rows = np.flatnonzero(eligible)
        ids = [snap.ids[r] for r in rows]
        order = sorted(range(len(rows)), key=lambda i: (-stars[rows[i]], ids[i]))
        top = rows[order][: ctx.fetch_size(self.spec.window)].astype(np.int64)
        return top, stars[top]


K = 60.0
WEIGHTS = (("lexical", 2.0), ("semantic", 1.0), ("stars", 0.5))


@pytest.fixture(scope="module")
def db():
    items = [
        doc("a", "backup policy", "backup backup", vec(1, 0, 0, 0), stars=5.0),
        doc("b", "backup", "restore", vec(0.8, 0.6, 0, 0), stars=3.0),
        doc("c", "schedule", "nightly backup", vec(0, 1, 0, 0), stars=4.0),
        doc("d", "logs", "kept a week", vec(0, 0, 1, 0), stars=3.0),
        doc("e", "unrated", "backup", vec(0.5, 0.5, 0.5, 0.5)),
    ]
    database = make_db(items, fields={"stars": "float"})
    yield database
    database.close()


def three_legs(db, weights=WEIGHTS):
    plan = db.plan("SEARCH kb MATCHING 'backup' NEAR :v WITHOUT RECENCY LIMIT 5",
                   v=q(vec(1, 0.1, 0, 0)))
    stars = LegSpec(name="stars", kind=LegKind.LEXICAL, operator="StarsScan",
                    window=plan.window, filter=plan.filter)
    direct = tuple(leg for leg in plan.legs if leg.kind is not LegKind.CONTEXT)
    return plan.model_copy(update={"legs": (*direct, stars), "fusion": FusionSpec(
        method="rrf", k=K, window=plan.window, weights=weights)})


def share(weight: float, rank: int, total: float) -> float:
    return (weight / (K + rank)) / (total / (K + 1.0))


def test_three_weighted_legs_give_exact_shares(db):
    plan = three_legs(db)
    result = recallql.merge(plan, db.run_legs(plan), db)
    total = 2.0 + 1.0 + 0.5
    weight = dict(WEIGHTS)
    assert result.ids()[0] == "a"  # first in every leg
    for row in result.rows:
        legs = [r for r in row.reasons if r.code in (Reason.LEXICAL_MATCH, Reason.SEMANTIC_MATCH,
                                                     Reason.LEG_ABSENT)]
        assert [r.leg for r in legs] == ["lexical", "semantic", "stars"]
        for r in legs:
            expected = 0.0 if r.rank is None else share(weight[r.leg], r.rank, total)
            assert r.contribution == expected, (row.id, r)
        assert row.score == left_sum(row)
    top = result.rows[0]
    assert [r.rank for r in top.reasons] == [1, 1, 1]
    assert top.score == pytest.approx(1.0, abs=2e-16)  # Σ w/(k+1) / (Σ w/(k+1))
    unrated = next(r for r in result.rows if r.id == "e")
    assert unrated.reasons[2].code is Reason.LEG_ABSENT and unrated.reasons[2].leg == "stars"
    assert unrated.reasons[2].render() == "LEG_ABSENT(leg=stars) +0.00000"


def test_ties_in_a_registered_leg_share_a_rank(db):
    plan = three_legs(db)
    batches = db.run_legs(plan)
    stars = batches.legs[2]
    assert stars.ids.tolist() == ["a", "c", "b", "d"]  # b and d tie at 3.0: item id order
    assert stars.ranks.tolist() == [1, 2, 3, 3]
    result = recallql.merge(plan, batches, db)
    b, d = (next(r for r in result.rows if r.id == i) for i in "bd")
    assert b.reasons[2].detail == "leg=stars, rank=3, bm25=3.000"
    assert b.reasons[2].contribution == d.reasons[2].contribution == share(0.5, 3, 3.5)


def test_equal_weights_are_the_unweighted_rrf_bit_for_bit(db):
    weighted = three_legs(db, weights=(("lexical", 1.0), ("semantic", 1.0), ("stars", 1.0)))
    plain = three_legs(db, weights=())
    a = recallql.merge(weighted, db.run_legs(weighted), db)
    b = recallql.merge(plain, db.run_legs(plain), db)
    assert [(r.id, r.score) for r in a.rows] == [(r.id, r.score) for r in b.rows]
    assert a.rows[0].score == 1.0  # (1/(k+1)) / (3/(k+1)) three times, exactly
    for row in b.rows:
        for r in row.reasons:
            if r.rank is not None:
                assert r.contribution == (1.0 / (K + r.rank)) / (3 / (K + 1.0))


def test_explain_lists_every_leg(db):
    plan = three_legs(db).model_copy(update={"explain": recallql.engine.ExplainSpec()})
    explain = recallql.merge(plan, db.run_legs(plan), db)
    assert isinstance(explain, Explain)
    lines = explain.to_text().splitlines()
    assert lines[1] == ("  RrfFusion: k=60 window=100 legs=3 "
                        "weights=(lexical=2, semantic=1, stars=0.5)")
    assert lines[2].startswith("    LexicalScan: fields=[title, body] terms=[backup]")
    assert lines[3].startswith("    SemanticScan: metric=cosine dim=4")
    assert lines[4] == "    StarsScan: leg=stars field=stars window=100"
    assert explain.result.stats["legs"] == {
        "lexical": {"rows": 4, "window": 100},
        "semantic": {"rows": 5, "window": 100, "method": "exact",
                     "why": "no segment has an ANN index (too few rows)"},
        "stars": {"rows": 4, "window": 100}}


def test_fuse_weights_in_the_language(db):
    text = ("SEARCH kb MATCHING 'backup' NEAR :v WITHOUT RECENCY "
            "FUSE RRF (k = 60, weights = (lexical = 2, semantic = 1)) LIMIT 5")
    result = db.execute(text, v=q(vec(1, 0.1, 0, 0)))
    for row in result.rows:
        for r in row.reasons:
            if r.rank is not None:
                assert r.contribution == share(2.0 if r.leg == "lexical" else 1.0, r.rank, 3.0)
    assert recallql.parse(text).to_text() == text  # canonical text round-trips


def test_default_weights_change_nothing(db):
    v = q(vec(1, 0.1, 0, 0))
    plain = db.execute("SEARCH kb MATCHING 'backup' NEAR :v LIMIT 5", v=v)
    ones = db.execute("SEARCH kb MATCHING 'backup' NEAR :v "
                      "FUSE CONVEX (weights = (lexical = 1, semantic = 1.0)) LIMIT 5", v=v)
    assert [(r.id, r.score, r.reasons) for r in plain.rows] == \
        [(r.id, r.score, r.reasons) for r in ones.rows]


def test_a_weight_of_zero_keeps_the_rank_and_gives_nothing(db):
    result = db.execute("SEARCH kb MATCHING 'backup' NEAR :v WITHOUT RECENCY "
                        "FUSE RRF (weights = (semantic = 0)) LIMIT 5", v=q(vec(1, 0.1, 0, 0)))
    for row in result.rows:
        sem = next(r for r in row.reasons if r.leg == "semantic")
        assert sem.contribution == 0.0 and (sem.rank is not None or sem.code is Reason.LEG_ABSENT)
    assert result.rows[0].score == 1.0  # lexical alone carries the whole relevance


@pytest.mark.parametrize(("weights", "message"), [
    ("(lexicl = 1)", "unknown leg 'lexicl' in FUSE weights"),
    ("(lexical = -0.5)", "FUSE weight must not be negative"),
    ("(lexical = 0, semantic = 0)", "every leg this statement runs has FUSE weight 0"),
    ("(lexical = 'x')", "FUSE weight must be a number"),
    ("2", "weights must be a list"),
])
def test_bad_weights_are_clear_errors(db, weights, message):
    with pytest.raises(recallql.QueryError, match=message) as err:
        db.execute(f"SEARCH kb MATCHING 'backup' NEAR :v FUSE RRF (weights = {weights})",
                   v=q(vec(1, 0, 0, 0)))
    assert "^" in str(err.value)
    if "unknown leg" in message:
        assert "did you mean 'lexical'?" in str(err.value)


def test_register_leg_refuses_a_second_operator_with_the_same_name():
    @dataclass(frozen=True, eq=False)
    class Other(LegScan):
        name = "StarsScan"

    with pytest.raises(ValueError, match="already registered"):
        register_leg(Other)


def test_a_plan_naming_an_unknown_leg_operator_fails_clearly(db):
    plan = three_legs(db)
    bad = plan.model_copy(update={"legs": (*plan.legs[:2], plan.legs[2].model_copy(
        update={"operator": "NoSuchScan"}))})
    with pytest.raises(ValueError, match="unknown leg operator 'NoSuchScan'"):
        db.run_legs(bad)


def test_when_the_legs_left_all_weigh_zero_every_share_is_zero(db):
    """A text of stopwords drops the lexical leg; the semantic leg weighs 0: relevance 0, the
    rows ordered by the total order (best cosine first) — never 0/0."""
    result = db.execute("SEARCH kb MATCHING 'the of' NEAR :v WITHOUT RECENCY "
                        "FUSE RRF (weights = (semantic = 0)) LIMIT 3", v=q(vec(1, 0.1, 0, 0)))
    assert [w.code for w in result.warnings] == [Reason.LEXICAL_LEG_EMPTY]
    assert [r.score for r in result.rows] == [0.0, 0.0, 0.0]
    cosines = [r.reasons[0].cosine for r in result.rows]
    assert cosines == sorted(cosines, reverse=True) and result.rows[0].reasons[0].rank == 1


@pytest.mark.parametrize("text", ["the of", "   ", "?!"], ids=["stopwords", "blank", "punct"])
def test_text_without_terms_and_no_vector_says_that_no_leg_ran(db, text):
    """A text of only stopwords (or blank, or punctuation) on a collection without an embedder
    and without NEAR ran no leg, yet one warning said "ran the semantic leg only" and the other
    "ran the lexical leg only"; both now say no leg ran, in the result and in EXPLAIN."""
    statement = f"SEARCH kb MATCHING '{text}' LIMIT 3"
    result = db.execute(statement)
    assert result.rows == []
    assert [(w.code, w.message) for w in result.warnings] == [
        (Reason.LEXICAL_LEG_EMPTY, "the MATCHING text has no searchable terms (blank, "
         "punctuation or stopwords); the semantic leg cannot run either (no embedder, no NEAR "
         "vector), so no rows"),
        (Reason.SEMANTIC_LEG_UNAVAILABLE, "collection 'kb' has no embedder and no NEAR vector "
         "was given; no leg ran, so no rows")]
    lines = db.explain(statement).to_text().splitlines()
    assert [line for line in lines if line.startswith("warning: ")] == [
        f"warning: {w.code.value}: {w.message}" for w in result.warnings]
    lexical_only = db.execute("SEARCH kb MATCHING 'backup' LIMIT 3")
    assert lexical_only.warnings[0].message.endswith("; ran the lexical leg only")


def test_stopword_text_under_using_lexical_does_not_claim_a_semantic_leg_ran(db):
    """`USING LEXICAL` with only stopwords said "ran the semantic leg only" and returned
    nothing: no leg ran."""
    result = db.execute("SEARCH kb MATCHING 'the of' USING LEXICAL LIMIT 3")
    (notice,) = result.warnings
    assert notice.code == Reason.LEXICAL_LEG_EMPTY and result.rows == []
    assert notice.message == ("the MATCHING text has no searchable terms (blank, punctuation or "
                              "stopwords); USING LEXICAL has no other leg, so no rows")
    hybrid = db.execute("SEARCH kb MATCHING 'the of' NEAR :v LIMIT 3", v=q(vec(1, 0, 0, 0)))
    assert hybrid.warnings[0].message.endswith("ran the semantic leg only")
