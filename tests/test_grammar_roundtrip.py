"""Canonical text: parse(q).to_text() == q for every fixture line; other spellings normalise."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter

from recallql.grammar import Statement, parse, parse_script

FIXTURE = Path(__file__).parent / "fixtures" / "grammar" / "canonical.sql"
CANONICAL = [line for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_fixture_is_large_enough() -> None:
    assert len(CANONICAL) >= 40
    assert len(set(CANONICAL)) == len(CANONICAL)


@pytest.mark.parametrize("query", CANONICAL, ids=range(len(CANONICAL)))
def test_canonical_round_trip(query: str) -> None:
    assert parse(query).to_text() == query


@pytest.mark.parametrize("query", CANONICAL, ids=range(len(CANONICAL)))
def test_parsed_nodes_pass_validation(query: str) -> None:
    """The transformer builds nodes without validation; prove they are valid models."""
    statement = parse(query)
    dumped = statement.model_dump()
    assert TypeAdapter(Statement).validate_python(dumped) == statement


def test_fixture_covers_every_clause_and_literal() -> None:
    text = "\n".join(CANONICAL)
    for needle in [
        "MATCHING", "USING HYBRID", "USING LEXICAL", "USING SEMANTIC", "NEAR :v", "WHERE",
        " IN (", "NOT IN", "BETWEEN", "NOT BETWEEN", " LIKE ", "NOT LIKE", "CONTAINS",
        "IS NULL", "IS NOT NULL", " AND ", " OR ", "NOT (", "FOR SESSION", "WITH RECENCY (",
        "WITHOUT RECENCY", "WITH SESSION BOOST (", "WITH SIGNAL BOOST (", "WITHOUT SIGNAL BOOST",
        "FUSE RRF (k", "weights = (lexical", "GROUP BY DOCUMENT", "GROUP BY CONVERSATION (budget",
        "AS OF TIMESTAMP",
        "LIMIT", "OFFSET", "RETRIEVE 10 FROM", "RETRIEVE FROM", "EXPLAIN ANALYZE VERBOSE FORMAT",
        "SHOW COLLECTIONS", "SHOW SESSIONS WHERE", "SHOW SESSION ", "SHOW LINEAGE", "DESCRIBE",
        "''", " DAYS", " HOURS", " MINUTES", " SECONDS", "TRUE", "FALSE", "NULL", "0.5", "-1.25",
        "?", ":q", '"my field"', "!=", "<=", ">=",
    ]:  # fmt: skip
        assert needle in text, needle


NON_CANONICAL = [
    ("lower case", "search docs matching 'x' limit 5", "SEARCH docs MATCHING 'x' LIMIT 5"),
    ("mixed case", "SeArCh docs MaTcHiNg 'x' wItH rEcEnCy",
     "SEARCH docs MATCHING 'x' WITH RECENCY"),
    ("spaces", "  SEARCH\tdocs \n MATCHING   'x'  ", "SEARCH docs MATCHING 'x'"),
    ("semicolon", "SEARCH docs MATCHING 'x';", "SEARCH docs MATCHING 'x'"),
    ("comments", "-- find\nSEARCH docs -- the collection\nMATCHING 'x' -- text\n;",
     "SEARCH docs MATCHING 'x'"),
    ("comment-like text in string", "SEARCH docs MATCHING '-- not a comment'",
     "SEARCH docs MATCHING '-- not a comment'"),
    ("needless quotes", 'SEARCH "docs" MATCHING \'x\' WHERE "tag" = 1',
     "SEARCH docs MATCHING 'x' WHERE tag = 1"),
    ("needless parens", "SEARCH d MATCHING 'x' WHERE ((a = 1)) AND (b = 2)",
     "SEARCH d MATCHING 'x' WHERE a = 1 AND b = 2"),
    ("sql not-equal", "SEARCH d MATCHING 'x' WHERE a <> 1", "SEARCH d MATCHING 'x' WHERE a != 1"),
    ("no spaces", "SEARCH d MATCHING'x'WHERE a=1 AND b>=2 LIMIT 3",
     "SEARCH d MATCHING 'x' WHERE a = 1 AND b >= 2 LIMIT 3"),
    ("singular unit", "SEARCH d MATCHING 'x' WITH RECENCY (half_life = 1 day)",
     "SEARCH d MATCHING 'x' WITH RECENCY (half_life = 1 DAYS)"),
    ("option case", "SEARCH d MATCHING 'x' WITH RECENCY (Weight = 1, SHAPE = gauss)",
     "SEARCH d MATCHING 'x' WITH RECENCY (weight = 1, shape = GAUSS)"),
    ("plus sign and exponent", "SEARCH d MATCHING 'x' WHERE a = +5 AND b = 1e3 AND c = .5",
     "SEARCH d MATCHING 'x' WHERE a = 5 AND b = 1000.0 AND c = 0.5"),
    # a TIMESTAMP keeps its text as written (the engine parses it when the statement runs)
    ("timestamp offset", "SEARCH d MATCHING 'x' AS OF TIMESTAMP '2025-01-31T02:00:00+02:00'",
     "SEARCH d MATCHING 'x' AS OF TIMESTAMP '2025-01-31T02:00:00+02:00'"),
    ("naive timestamp", "SEARCH d MATCHING 'x' AS OF TIMESTAMP '2025-01-31 08:15'",
     "SEARCH d MATCHING 'x' AS OF TIMESTAMP '2025-01-31 08:15'"),
    ("date only", "SEARCH d MATCHING 'x' AS OF timestamp '2025-01-31'",
     "SEARCH d MATCHING 'x' AS OF TIMESTAMP '2025-01-31'"),
    ("bare session id", "SEARCH d MATCHING 'x' FOR SESSION s42",
     "SEARCH d MATCHING 'x' FOR SESSION 's42'"),
    ("quoted session id", 'SHOW SESSION "s-1"', "SHOW SESSION 's-1'"),
    ("explain option order", "explain format json verbose analyze search d matching 'x'",
     "EXPLAIN ANALYZE VERBOSE FORMAT JSON SEARCH d MATCHING 'x'"),
    ("boolean case", "SEARCH d MATCHING 'x' WHERE a = true OR b = False OR c IS null",
     "SEARCH d MATCHING 'x' WHERE a = TRUE OR b = FALSE OR c IS NULL"),
]  # fmt: skip


@pytest.mark.parametrize(("given", "canonical"), [c[1:] for c in NON_CANONICAL],
                         ids=[c[0] for c in NON_CANONICAL])  # fmt: skip
def test_other_spellings_give_canonical_text(given: str, canonical: str) -> None:
    assert parse(given).to_text() == canonical
    assert parse(canonical).to_text() == canonical


def test_script_of_all_fixture_lines_round_trips() -> None:
    script = ";\n".join(CANONICAL) + ";"
    statements = parse_script(script)
    assert [s.to_text() for s in statements] == CANONICAL
