"""Semantic errors from the analyzer: names, types, values — always a QueryError with a caret."""

from __future__ import annotations

import re

import numpy as np
import pytest
from engine_helpers import doc, make_db, q, vec

import recallql


@pytest.fixture(scope="module")
def db():
    return make_db([doc("a", "alpha", "beta", vec(1, 0, 0, 0), team="x", year=2020, ok=True,
                        tags=["t1"], at="2024-01-01")],
                   fields={"team": "str", "year": "int", "ok": "bool", "tags": "list[str]",
                           "at": "timestamp"})


@pytest.mark.parametrize(
    ("stmt", "message", "hint"),
    [
        pytest.param("SEARCH kbb MATCHING 'x'", "unknown collection 'kbb'", "did you mean 'kb'?",
                     id="collection"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE tema = 'x'", "unknown field 'tema'",
                     "did you mean 'team'?", id="field"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE title = 'x'", "'title' is a BM25 text field",
                     "MATCHING", id="text-field"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE year = 'abc'",
                     "field 'year' is int; expected a number, got 'abc'", None,
                     id="int-vs-string"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE tags CONTAINS 5",
                     "field 'tags' is list[str]; expected a string, got 5", None,
                     id="contains-number"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE tags != 't1'",
                     "'!=' does not apply to list[str] field 'tags'", "NOT tags CONTAINS",
                     id="not-equal-on-list"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE ok = 1", "field 'ok' is bool", None,
                     id="bool-vs-int"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE team = NULL", "never true", "IS NULL",
                     id="eq-null"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE year LIKE '20%'", "LIKE needs a string field",
                     None, id="like-int"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE tags > 'a'", "does not apply to list[str]",
                     None, id="order-on-list"),
        pytest.param("SEARCH kb MATCHING 'x' WHERE at > 'yesterday'", "not an ISO-8601",
                     "TIMESTAMP", id="bad-timestamp-string"),
        pytest.param("SEARCH kb MATCHING 'x' WITH RECENCY (field = team)", "not a timestamp",
                     None, id="recency-field-type"),
        pytest.param("SEARCH kb MATCHING 'x' WITH RECENCY (field = nope)", "unknown field 'nope'",
                     None, id="recency-field-unknown"),
        pytest.param("SEARCH kb MATCHING 'x' GROUP BY CONVERSATION", "needs a collection of "
                     "messages", "messages", id="conversation-on-docs"),
    ],
)
def test_semantic_errors_have_a_caret(db, stmt, message, hint):
    with pytest.raises(recallql.QuerySemanticError) as err:
        db.execute(stmt)
    text = str(err.value)
    assert message in text
    assert "^" in text and err.value.line == 1 and err.value.column >= 1
    if hint:
        assert hint in text


def test_near_dimension_mismatch_names_both(db):
    with pytest.raises(recallql.ParameterError) as err:
        db.execute("SEARCH kb MATCHING 'x' NEAR :v", v=q(vec(1, 0)))
    assert "dimension 2" in str(err.value) and "expects 4" in str(err.value)


def test_filters_accept_every_type(db):
    for where in ("year = 2020", "year BETWEEN 2019 AND 2021", "ok = TRUE", "tags CONTAINS 't1'",
                  "team LIKE 'x%'", "at > TIMESTAMP '2023-01-01T00:00:00Z'",
                  "at > '2023-01-01'", "team IN ('x', 'y')", "year IS NOT NULL",
                  "(team = 'x' OR team = 'y') AND NOT year < 2000"):
        assert db.execute(f"SEARCH kb MATCHING 'alpha' WHERE {where}").ids() == ["a"], where
    for where in ("year = 2021", "ok = FALSE", "tags CONTAINS 't2'", "team NOT LIKE 'x%'",
                  "at < '2023-01-01'", "team NOT IN ('x')", "year IS NULL"):
        assert db.execute(f"SEARCH kb MATCHING 'alpha' WHERE {where}").ids() == [], where


def test_parameters_bind_filter_values(db):
    with pytest.raises(recallql.ParameterError):
        db.execute("SEARCH kb MATCHING :t WHERE team = ?", "x", t="alpha")
    assert db.execute("SEARCH kb MATCHING :t WHERE team = :team", t="alpha",
                      team="x").ids() == ["a"]
    assert db.execute("SEARCH kb MATCHING ? WHERE year >= ?", "alpha", 2020).ids() == ["a"]
    hostile = "x' OR '1' = '1"
    assert db.execute("SEARCH kb MATCHING :t WHERE team = :team", t="alpha",
                      team=hostile).ids() == []


def test_session_boost_without_for_session_is_an_error(db):
    with pytest.raises(recallql.QuerySemanticError) as err:
        db.execute("SEARCH kb MATCHING 'x' WITH SESSION BOOST (keywords = 1)")
    assert "needs FOR SESSION" in str(err.value) and "^" in str(err.value)


def test_signal_boost_names_must_be_policy_names(db):
    with pytest.raises(recallql.QuerySemanticError) as err:
        db.execute("SEARCH kb MATCHING 'x' WITH SIGNAL BOOST (rewrad = 0.5)")
    assert "did you mean 'reward'?" in str(err.value)
    assert db.execute("SEARCH kb MATCHING 'alpha' WITH SIGNAL BOOST (reward = 0.5)").ids() == ["a"]


@pytest.mark.parametrize("stmt", [
    "SEARCH kb USING LEXICAL NEAR :v",
    "RETRIEVE FROM kb USING LEXICAL NEAR :v",
])
def test_near_with_using_lexical_and_no_text_is_an_error(db, stmt):
    """NEAR feeds only the semantic leg: USING LEXICAL without MATCHING planned no leg at all
    and returned zero rows (SEARCH) or boosts only (RETRIEVE), without a word."""
    with pytest.raises(recallql.QuerySemanticError) as err:
        db.execute(stmt, v=q(vec(1, 0, 0, 0)))
    assert "USING LEXICAL needs MATCHING text" in str(err.value)
    assert err.value.column == stmt.index("USING") + 1
    assert "USING SEMANTIC" in (err.value.hint or "")


def test_near_with_using_lexical_and_text_runs_the_lexical_leg(db):
    """With MATCHING the vector is unused, as a FUSE weight for a leg not run is."""
    result = db.execute("SEARCH kb MATCHING 'alpha' USING LEXICAL NEAR :v", v=q(vec(1, 0, 0, 0)))
    assert result.ids() == ["a"]
    assert [r.code.value for r in result.rows[0].reasons][0] == "LEXICAL_MATCH"


@pytest.mark.parametrize(("where", "value", "message"), [
    ("team = :v", 42, "value for team (parameter :v) must be a string (team is str), got int 42"),
    ("tags CONTAINS :v", 5, "value for tags (parameter :v) must be a string (tags is list[str]), "
                            "got int 5"),
    ("ok = :v", "yes", "value for ok (parameter :v) must be TRUE or FALSE (ok is bool), got str "
                       "'yes'"),
], ids=["str", "list", "bool"])
def test_a_mistyped_parameter_is_a_parameter_error_saying_what_it_got(db, where, value,
                                                                      message):
    with pytest.raises(recallql.ParameterError, match=re.escape(message)) as err:
        db.execute(f"SEARCH kb MATCHING 'x' WHERE {where}", v=value)
    assert "^^" in str(err.value)


def test_equality_and_in_on_a_list_field_test_membership(db):
    """`tags = 't1'` and `tags IN (...)` mean "an element is", as CONTAINS (documented)."""
    for where in ("tags = 't1'", "tags IN ('t1', 'zz')", "tags CONTAINS 't1'"):
        assert db.execute(f"RETRIEVE 5 FROM kb WHERE {where}").ids() == ["a"]
    assert db.execute("RETRIEVE 5 FROM kb WHERE tags = 'zz'").ids() == []


def test_a_like_pattern_ending_in_the_escape_character_is_refused(db):
    """`LIKE '%\\'` was taken as a literal backslash at the end (PostgreSQL refuses it)."""
    with pytest.raises(recallql.QuerySemanticError, match="must not end with the escape") as err:
        db.execute("SEARCH kb MATCHING 'x' WHERE team LIKE '%\\'")
    assert "^^^^" in str(err.value) and "\\\\" in str(err.value)
    assert db.execute("RETRIEVE 5 FROM kb WHERE team LIKE '%\\\\'").ids() == []  # escaped: fine
    assert db.execute("RETRIEVE 5 FROM kb WHERE team LIKE 'x%'").ids() == ["a"]


@pytest.mark.parametrize(("output", "message"), [
    (lambda n: [["1", "0"]] * n,
     "embedder 'emb' failed: NotRealNumbers: must be a sequence of numbers, got str values"),
    (lambda n: None,
     "embedder 'emb' failed: NotRealNumbers: must be a sequence of numbers, got NoneType"),
    (lambda n: np.ones((0, 2)),
     "embedder 'emb' failed: ValueError: returned shape (0, 2) for one text, expected (1, dim)"),
], ids=["strings", "none", "no-row"])
def test_an_embedder_that_returns_no_vector_for_the_query_names_itself(output, message):
    """Was: strings were parsed into a query vector (as ingest did), and an empty output was a
    raw IndexError from planning; now an `ExecutionError` names the embedder, as the other
    failures of a statement name their operator."""
    from recallql.engine.executor import ExecutionError

    calls = {"n": 0}

    def emb(texts):
        calls["n"] += 1
        return np.ones((len(texts), 2)) if calls["n"] == 1 else output(len(texts))

    emb.dim, emb.name = 2, "emb"
    db = recallql.connect(embedder=None)
    db.create_collection("c", ("t",), dim=2, embedder=emb)
    db.ingest("c", [{"id": "a", "t": "alpha"}])
    with pytest.raises(ExecutionError) as info:
        db.execute("SEARCH c MATCHING 'alpha'")
    assert str(info.value) == message


def test_an_embedder_that_raises_during_ingest_is_an_ingest_error_naming_it():
    """Was: the embedder's own exception (here RuntimeError) came through `ingest` raw, while
    a statement wrapped the same failure in an `ExecutionError` naming the embedder; now ingest
    names it too, and the batch writes nothing."""
    state = {"down": False}

    def emb(texts):
        if state["down"]:
            raise RuntimeError("model server down")
        return np.ones((len(texts), 2))

    emb.dim, emb.name = 2, "emb"
    db = recallql.connect(embedder=None)
    db.create_collection("c", ("t",), dim=2, embedder=emb)
    db.ingest("c", [{"id": "a", "t": "alpha"}])
    state["down"] = True
    with pytest.raises(recallql.IngestError) as info:
        db.ingest("c", [{"id": "b", "t": "beta"}, {"id": "c", "t": "gamma"}])
    assert str(info.value) == ("field 'vector': embedder 'emb' failed: RuntimeError: model "
                               "server down; nothing was written")
    assert isinstance(info.value.__cause__, RuntimeError)
    state["down"] = False
    assert db.execute("RETRIEVE 10 FROM c").ids() == ["a"]
