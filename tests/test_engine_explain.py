"""EXPLAIN (SPEC §5): the same execution as the statement, exact arithmetic, golden text."""

from __future__ import annotations

import json
import re
from datetime import datetime

import numpy as np
import pytest
from engine_helpers import NOW, doc, left_sum, make_db, q, vec

import recallql


@pytest.fixture
def db():
    items = [
        doc("backups/retention.md#0", "Backup retention policy",
            "Keep daily backups for 30 days and monthly backups for a year.", vec(1, 0, 0, 0),
            created_at="2020-12-01T00:00:00Z", doc_id="backups/retention.md", position=0,
            team="ops"),
        doc("backups/retention.md#1", "Backup retention policy",
            "Monthly backups move to cold storage.", vec(0.9, 0.3, 0, 0),
            created_at="2020-12-01T00:00:00Z", doc_id="backups/retention.md", position=1,
            team="ops"),
        doc("backups/schedule.md#0", "Backup schedule", "Nightly backups at 02:00 UTC.",
            vec(0.7, 0.7, 0, 0), created_at="2026-11-20T00:00:00Z",
            doc_id="backups/schedule.md", team="ops"),
        doc("security/creds.md#0", "Rotate credentials", "Rotate API keys every 90 days.",
            vec(0, 0, 1, 0), created_at="2027-01-01T00:00:00Z", doc_id="security/creds.md",
            team="sec"),
        doc("misc/undated.md#0", "Retention of logs", "Logs are kept for a week.",
            vec(0.2, 0, 0, 1), doc_id="misc/undated.md"),
    ]
    return make_db(items, fields={"team": "str"})


V = q(vec(1, 0.1, 0, 0))
STATEMENTS = {
    "hybrid": "EXPLAIN SEARCH kb MATCHING 'backup retention policy' NEAR :v LIMIT 4",
    "filtered_grouped": "EXPLAIN SEARCH kb MATCHING 'backup retention' NEAR :v WHERE team = 'ops' "
                        "WITH RECENCY (weight = 0.01, half_life = 30 DAYS, shape = GAUSS) "
                        "GROUP BY DOCUMENT LIMIT 2 OFFSET 1",
    "no_terms": "EXPLAIN SEARCH kb MATCHING 'the of and' NEAR :v LIMIT 3",
    "lexical_k": "EXPLAIN SEARCH kb MATCHING 'retention' USING LEXICAL WITHOUT RECENCY "
                 "FUSE RRF (k = 10) LIMIT 3",
    "retrieve_missing_session": "EXPLAIN RETRIEVE 3 FROM kb WHERE team IN ('ops', 'sec') "
                                "FOR SESSION 'nobody'",
    "future_and_missing_dates": "EXPLAIN SEARCH kb MATCHING 'rotate credentials logs' NEAR :v "
                                "WITH RECENCY (weight = 0.1, half_life = 7 DAYS) LIMIT 5",
}


def share(rank: int, k: float = 60.0, legs: int = 2) -> float:
    """SPEC §4.2: a leg's RRF share, (1 / (k + rank)) / (L / (k + 1))."""
    return (1.0 / (k + rank)) / (legs / (k + 1.0))


def age_days(iso: str) -> float:
    """SPEC §4.5: age = max(0, now - field) in days (now: the test clock, 2026-11-30Z)."""
    return max(0.0, (NOW - datetime.fromisoformat(iso)).total_seconds() / 86400.0)


def cosine(d: tuple[float, ...]) -> float:
    """Cosine of a document vector with the query V = (1, 0.1, 0, 0), by hand in float64."""
    qv, dv = np.array([1.0, 0.1, 0.0, 0.0]), np.array(d, dtype=np.float64)
    return float(dv @ qv / (np.linalg.norm(dv) * np.linalg.norm(qv)))


R0, R1, SCHED, CREDS, UNDATED = ("backups/retention.md#0", "backups/retention.md#1",
                                 "backups/schedule.md#0", "security/creds.md#0",
                                 "misc/undated.md#0")
COS = {R0: cosine((1, 0, 0, 0)), R1: cosine((0.9, 0.3, 0, 0)), SCHED: cosine((0.7, 0.7, 0, 0)),
       CREDS: 0.0, UNDATED: cosine((0.2, 0, 0, 1))}
OLD = 0.005 * 0.5 ** (age_days("2020-12-01T00:00:00Z") / 365)  # default recency, a 2020 item


def mm(x: float, lo: float, hi: float) -> float:
    """Min-max normalisation (Bruch et al., TOIS 2023): (x − lo) / (hi − lo)."""
    return (x - lo) / (hi - lo)


#: One score per golden file, derived by hand from SPEC §4 and docs/scoring.md: the default
#: fusion is the convex combination 0.5·φ_lex + 0.5·φ_sem (φ min-max over each leg's window;
#: the semantic minimum is creds' cosine 0 whenever it is a candidate; every lexical leg here
#: holds all its matches, fewer than its window of 100, so its minimum is BM25 0), plus the
#: context credit 0.5 · the neighbour's relevance (retention.md#0 and #1 are neighbours), plus
#: the boosts.
#: Inputs: the BM25 scores of the lexical leg (`bm25`, from the rows' reasons) and the cosines
#: computed by hand from the vectors (float32 storage: 1e-6). (row id, expected score(bm25)).
HAND_DERIVED = {
    # schedule: no neighbour; lexical min = 0 (leg not full), max = retention#1; EXP recency 10 days
    "hybrid": (SCHED, lambda b: 0.5 * mm(b[SCHED], 0.0, b[R1])
               + 0.5 * COS[SCHED] / COS[R0]
               + 0.005 * 0.5 ** (age_days("2026-11-20T00:00:00Z") / 365)),
    # WHERE team = 'ops' leaves retention#0/#1 and schedule; schedule is the semantic minimum
    # (φ = 0) and the weakest of 3 lexical matches (φ = bm25 / the best, lo = 0); GAUSS recency
    # 0.01 · 0.5^((10/30)²)
    "filtered_grouped": (SCHED, lambda b: 0.5 * mm(b[SCHED], 0.0, max(b[R0], b[R1])) + 0.0
                         + 0.01 * 0.5 ** ((10.0 / 30.0) ** 2)),
    # semantic leg only (W = 1): retention#1's φ + half of retention#0's relevance (its φ = 1)
    "no_terms": (R1, lambda b: COS[R1] / COS[R0] + 0.5 * 1.0 + OLD),
    # FUSE RRF (k = 10), one leg: rank 2 → (1/12)/(1/11) = 11/12; its neighbour retention#0 has
    # rank 3 → 11/13, credited at half
    "lexical_k": (R1, lambda b: 11 / 12 + 0.5 * (11 / 13)),
    # no legs and no session: only recency, 10 days old
    "retrieve_missing_session": (SCHED, lambda b: 0.005 * 0.5 ** (10 / 365)),
    # creds: lexical maximum (φ = 1) and semantic minimum (φ = 0), future date: full weight 0.1
    "future_and_missing_dates": (CREDS, lambda b: 0.5 * 1.0 + 0.0 + 0.1),
}
#: Statements whose rows give BM25 scores the golden's rows do not show (OFFSET skips them).
BM25_FROM = {"filtered_grouped": "SEARCH kb MATCHING 'backup retention' USING LEXICAL "
                                 "WHERE team = 'ops' WITHOUT RECENCY"}
#: Goldens whose hand-derived score holds exactly (no cosine by hand in it).
EXACT = {"filtered_grouped", "lexical_k", "retrieve_missing_session", "future_and_missing_dates"}


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_explain_text_golden(db, golden, name):
    explain = db.execute(STATEMENTS[name], v=V) if ":v" in STATEMENTS[name] \
        else db.execute(STATEMENTS[name])
    assert isinstance(explain, recallql.engine.models.Explain)
    golden(f"explain_{name}.txt", explain.to_text())
    row_id, derive = HAND_DERIVED[name]
    rows = list(explain.result.rows)
    if name in BM25_FROM:
        rows += db.execute(BM25_FROM[name]).rows
    bm25 = {r.id: x.bm25 for r in rows for x in r.reasons if x.bm25 is not None}
    score = derive(bm25)
    (row,) = [r for r in explain.result.rows if r.id == row_id]
    assert row.score == (score if name in EXACT else pytest.approx(score, abs=1e-6))
    assert f"{row_id}  score={row.score:.5f}" in explain.to_text()


def test_hybrid_golden_context_credit_by_hand(db):
    """retention#1: lexical maximum (φ = 1), semantic φ = cos1/cos0, plus half of retention#0's
    relevance 0.5·φ_lex(#0) + 0.5·1, plus the 2020 recency."""
    explain = db.execute(STATEMENTS["hybrid"], v=V)
    b = {r.id: x.bm25 for r in explain.result.rows for x in r.reasons if x.bm25 is not None}
    rel0 = 0.5 * mm(b[R0], 0.0, b[R1]) + 0.5 * 1.0  # lexical lo = 0: the leg holds every match
    expected = 0.5 * 1.0 + 0.5 * COS[R1] / COS[R0] + 0.5 * rel0 + OLD
    row = explain.result.rows[0]
    assert row.id == R1 and row.score == pytest.approx(expected, abs=1e-6)
    ctx = next(x for x in row.reasons if x.code.value == "CONTEXT_MATCH")
    assert (ctx.neighbour, ctx.side, ctx.weight) == (R0, "before", 0.5)
    assert ctx.contribution == 0.5 * ctx.relevance
    assert ctx.relevance == pytest.approx(rel0, abs=1e-6)


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_explain_rows_equal_statement_rows(db, name):
    text = STATEMENTS[name].removeprefix("EXPLAIN ")
    params = {"v": V} if ":v" in text else {}
    plain = db.execute(text, **params)
    explained = db.execute("EXPLAIN " + text, **params)
    analyzed = db.explain(text, analyze=True, **params)
    for other in (explained.result, analyzed.result):
        assert other.ids() == plain.ids()
        assert [r.score for r in other.rows] == [r.score for r in plain.rows]
        assert [r.reasons for r in other.rows] == [r.reasons for r in plain.rows]


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_contributions_sum_exactly_to_the_score(db, name):
    text = STATEMENTS[name]
    explain = db.execute(text, v=V) if ":v" in text else db.execute(text)
    assert explain.rows
    for row in explain.rows:
        assert left_sum(row) == row.score


def test_explain_analyze_adds_rows_and_times(db):
    text = db.explain("SEARCH kb MATCHING 'backup' NEAR :v LIMIT 2", v=V, analyze=True).to_text()
    lines = text.splitlines()
    assert re.fullmatch(r"TopK: k=2 offset=0  rows=\d+→2 time=\d+\.\d{3}ms", lines[0])
    assert re.search(r"^      LexicalScan: .*  rows=\d+ time=", text, re.M)
    assert "stats: " in text


def test_an_operator_without_properties_prints_its_name_without_a_colon(db):
    """RETRIEVE without MATCHING or WHERE printed a bare ``EligibleScan:``; an operator line
    is ``Name: key=value``, or just ``Name`` when it has nothing to show (as DataFusion)."""
    lines = db.explain("RETRIEVE 2 FROM kb").to_text().splitlines()
    assert lines[:4] == ["TopK: k=2 offset=0", "  RecencyBoost: field=created_at weight=0.005 "
                         "half_life=365d shape=EXP", "    SignalBoost: reward=0.1",
                         "      EligibleScan"]
    filtered = db.explain("RETRIEVE 2 FROM kb WHERE team = 'ops'").to_text().splitlines()
    assert filtered[3] == "      EligibleScan: filter=pushed"
    analyzed = db.explain("RETRIEVE 2 FROM kb", analyze=True).to_text().splitlines()
    assert re.fullmatch(r"      EligibleScan  rows=5 time=\d+\.\d{3}ms", analyzed[3])
    assert not [line for line in lines + analyzed if re.search(r":( |$)", line)
                and line.rstrip().endswith(":")]


def test_explain_json_has_the_same_content(db):
    explain = db.execute("EXPLAIN FORMAT JSON SEARCH kb MATCHING 'backup' NEAR :v LIMIT 2", v=V)
    data = json.loads(explain.to_json())
    assert data["plan"]["operator"] == "TopK"
    assert [r["id"] for r in data["result"]["rows"]] == explain.result.ids()
    assert data["result"]["rows"][0]["reasons"][0]["code"] == "LEXICAL_MATCH"
    restored = recallql.engine.models.Explain.model_validate_json(explain.to_json())
    assert restored.to_text() == explain.to_text()


def test_explain_verbose_adds_bm25_explanations(db):
    text = db.explain("SEARCH kb MATCHING 'backup' USING LEXICAL LIMIT 1", verbose=True).to_text()
    plain = db.explain("SEARCH kb MATCHING 'backup' USING LEXICAL LIMIT 1").to_text()
    assert "idf, computed as log(1 + (N - n + 0.5) / (n + 0.5))" in text
    assert "k1, term saturation parameter" in text
    assert "idf" not in plain


def test_explain_has_no_side_effects(db):
    before = db.execute("SEARCH kb MATCHING 'backup' NEAR :v", v=V)
    for _ in range(3):
        db.explain("SEARCH kb MATCHING 'backup' NEAR :v", v=V, analyze=True)
    after = db.execute("SEARCH kb MATCHING 'backup' NEAR :v", v=V)
    assert before.rows == after.rows


def test_explain_notes_bm25_statistics_that_count_removed_rows_until_a_rebuild(db):
    """Issue 12 item 5: the Lucene rule is shown in EXPLAIN — how many deleted or replaced
    rows BM25's statistics still count, and what makes them exact."""
    statement = "EXPLAIN SEARCH kb MATCHING 'backup' USING LEXICAL"
    assert db.execute(statement).notes == [] and "note:" not in db.execute(statement).to_text()
    db.delete("kb", ["security/creds.md#0"])
    assert db.execute(statement).notes == [
        "BM25 statistics count 1 deleted or replaced row (N=5, 4 live); `recallql optimize` "
        "(Python: `db.reindex(only_needed=True)`) makes them exact"]
    db.ingest("kb", [doc("misc/undated.md#0", "Retention of logs", "Kept for two weeks.",
                           vec(0.2, 0, 0, 1), doc_id="misc/undated.md")])
    counted = db.snapshot("kb").bm25_documents()
    assert counted == 6  # 5 ingested + the replacement: the deleted and replaced rows count
    note = ("BM25 statistics count 2 deleted or replaced rows (N=6, 4 live); `recallql optimize` "
            "(Python: `db.reindex(only_needed=True)`) makes them exact")
    explain = db.execute(statement)
    assert explain.notes == [note] and f"\nnote: {note}\n" in explain.to_text()
    assert recallql.engine.models.Explain.model_validate_json(explain.to_json()).notes == [note]
    assert db.execute(f"{statement} AS OF TIMESTAMP '2026-12-01'").notes == []  # not under AS OF
    assert db.execute("EXPLAIN RETRIEVE 2 FROM kb").notes == []  # no lexical leg
    db.reindex(["kb"], only_needed=True)
    assert db.snapshot("kb").bm25_documents() == 4 and db.execute(statement).notes == []


def test_an_empty_leg_shows_empty_bounds_not_nan(db):
    """A lexical leg that matched nothing printed `bounds=(lexical=[nan, nan], ...)`."""
    explain = db.execute("EXPLAIN SEARCH kb MATCHING 'zzzz' NEAR :v", v=V)
    fusion = next(line for line in explain.to_text().splitlines() if "ConvexFusion" in line)
    assert "bounds=(lexical=empty, semantic=[" in fusion and "nan" not in fusion


def test_plan_floats_print_without_float_noise(db):
    """Was: `FUSE CONVEX (alpha = 0.7)` printed `weights=(lexical=0.30000000000000004, ...)`
    (1 − 0.7 as repr shows it); the text prints 12 significant digits, JSON keeps the float."""
    explain = db.explain("SEARCH kb MATCHING 'backup' NEAR :v FUSE CONVEX (alpha = 0.7) LIMIT 1",
                         v=V)
    assert "weights=(lexical=0.3, semantic=0.7)" in explain.to_text()
    fusion = explain.plan.children[0].children[0]
    assert fusion.properties["weights"] == {"lexical": 1 - 0.7, "semantic": 0.7}
    text = db.explain("SEARCH kb MATCHING 'backup' WITH RECENCY (weight = 0.123456789012345)"
                      ).to_text()
    assert "weight=0.123456789012 " in text


def test_huge_whole_floats_in_the_plan_stay_floats(db):
    """Was: `FUSE RRF (k = 1e300)` printed `k=1000000000000000052504760255204420248704468…`
    (301 digits, in the text and as an int in JSON) because whole floats became ints."""
    explain = db.explain("SEARCH kb MATCHING 'backup' WITH RECENCY (weight = 1e20, "
                         "half_life = 1e300 DAYS) FUSE RRF (k = 1e300, weights = (lexical = 1e300))"
                         " LIMIT 1")
    text = explain.to_text()
    assert "weight=1e+20 half_life='1e+300d'" in text
    assert "k=1e+300 " in text and "weights=(lexical=1e+300)" in text
    recency = explain.plan.children[0]
    fusion = recency.children[0]
    assert recency.properties["weight"] == 1e20 and isinstance(recency.properties["weight"], float)
    assert fusion.properties["k"] == 1e300 and isinstance(fusion.properties["k"], float)
    assert "k=60 " in db.explain("SEARCH kb MATCHING 'backup' FUSE RRF LIMIT 1").to_text()
