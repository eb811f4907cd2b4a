"""EXPLAIN (SPEC §5): the same execution as the statement, exact arithmetic, golden text."""

from __future__ import annotations

import json
import re

import pytest
from engine_helpers import doc, left_sum, make_db, q, vec

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


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_explain_text_golden(db, golden, name):
    explain = db.execute(STATEMENTS[name], v=V) if ":v" in STATEMENTS[name] \
        else db.execute(STATEMENTS[name])
    assert isinstance(explain, recallql.engine.models.Explain)
    golden(f"explain_{name}.txt", explain.to_text())


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
