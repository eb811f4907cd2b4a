"""``--param`` parsing: type inference, JSON values, and the fallback to the plain string."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import typer

import recallql
from recallql.cli.params import bind_with_fallback, culprit, infer, parse_params, used_by
from recallql.grammar import parse
from recallql.index.embedders import HashEmbedder


@pytest.mark.parametrize(("text", "value"), [
    ("5", 5), ("-3", -3), ("0.25", 0.25), ("1e-3", 0.001), ("true", True), ("FALSE", False),
    ("null", None), ("2024-01-31", datetime(2024, 1, 31, tzinfo=UTC)),
    ("2024-01-31T10:00:00Z", datetime(2024, 1, 31, 10, tzinfo=UTC)),
    ("backup policy", "backup policy"), ("it's", "it's"), ("1e999", "1e999"),
    ("2024-13-45", "2024-13-45"), ("", ""),
], ids=repr)
def test_infer(text, value):
    assert infer(text) == value


def test_parse_params():
    params = parse_params(["q=a=b", "n=3", "v:=[0.5, 1]", "s:=\"42\""])
    assert params["q"].value == "a=b" and not params["q"].inferred
    assert params["n"].value == 3 and params["n"].inferred
    assert params["v"].value == [0.5, 1] and not params["v"].inferred
    assert params["s"].value == "42"


@pytest.mark.parametrize("spec", ["novalue", "=x", "1abc=2", "v:=[1,", "a=1 a=2"])
def test_bad_params_are_usage_errors(spec):
    with pytest.raises(typer.BadParameter):
        parse_params(spec.split(" "))


def test_fallback_to_the_string_where_text_is_needed():
    with recallql.connect(embedder=HashEmbedder()) as db:
        db.ingest("docs", [{"id": "y", "title": "Year 2024 report", "body": "numbers"}])
        db.sessions.create("42", "agent")
        params = parse_params(["q=2024", "s=42", "n=1"])
        stmt = parse("SEARCH docs MATCHING :q FOR SESSION :s LIMIT :n")
        result = bind_with_fallback(lambda values: db.execute(stmt, **values), params)
        assert result.ids() == ["y"] and result.session_snapshot.id == "42"
        with pytest.raises(recallql.ParameterError, match="LIMIT"):  # "x" is a string anyway
            bind_with_fallback(lambda values: db.execute(stmt, **values),
                               parse_params(["q=a", "s=42", "n=x"]))


def test_culprit_and_used_by():
    stmt = parse("SEARCH docs MATCHING :q LIMIT :n")
    with pytest.raises(recallql.ParameterError) as caught:
        recallql.bind(stmt, q="x", n="ten")
    assert culprit(caught.value) == "n"
    assert used_by(stmt, {"q": 1, "other": 2}) == {"q": 1}


def test_when_the_string_does_not_fit_either_the_inferred_values_error_stands():
    """``LIMIT :n`` with ``n=99999999999999999999999`` said 'must be a whole number (int), got
    str' (the fallback's error) instead of naming the 64-bit range."""
    with recallql.connect(embedder=HashEmbedder()) as db:
        stmt = parse("SEARCH docs MATCHING 'x' LIMIT :n")
        with pytest.raises(recallql.ParameterError) as err:
            bind_with_fallback(lambda values: db.execute(stmt, **values),
                               parse_params(["n=99999999999999999999999"]))
    assert "within the 64-bit range, got int 99999999999999999999999" in str(err.value)


def test_a_missing_parameter_is_hinted_with_the_option_that_gives_it():
    """`recallql query "... MATCHING :q"` without -p said "hint: pass q=...", db.execute's
    words; the command line's are -p q=VALUE."""
    with recallql.connect(embedder=HashEmbedder()) as db:
        stmt = parse("SEARCH docs MATCHING :q LIMIT :n")
        with pytest.raises(recallql.ParameterError) as err:
            bind_with_fallback(lambda values: db.execute(stmt, **values),
                               parse_params(["n=3"]))
    assert err.value.hint == "give its value with -p q=VALUE"
    assert str(err.value).endswith("^^\n  hint: give its value with -p q=VALUE")
