"""Parameter binding: value mapping, vectors, missing / extra / mistyped values, value checks."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from recallql.grammar import (
    BooleanLiteral,
    Duration,
    FloatLiteral,
    IntegerLiteral,
    NullLiteral,
    ParameterError,
    StringLiteral,
    TimestampLiteral,
    VectorLiteral,
    bind,
    parse,
)


def bound_error(text: str, *args: object, **params: object) -> ParameterError:
    with pytest.raises(ParameterError) as info:
        bind(parse(text), *args, **params)
    return info.value


def underlined(err: ParameterError) -> str:
    return err.text[err.span[0] : err.span[1]]


def test_named_binding_gives_canonical_literals() -> None:
    statement = parse("SEARCH docs MATCHING :q WHERE tag = :tag FOR SESSION :s LIMIT :n")
    bound = bind(statement, q="it's", tag="ops", s="s-42", n=5)
    assert bound.to_text() == (
        "SEARCH docs MATCHING 'it''s' WHERE tag = 'ops' FOR SESSION 's-42' LIMIT 5"
    )
    assert bound.parameters == ()
    assert (bound.matching_text, bound.session_id, bound.limit_value) == ("it's", "s-42", 5)
    assert bound.matching.span == statement.matching.span


def test_positional_binding() -> None:
    bound = bind(parse("SEARCH docs MATCHING ? WHERE a IN (?, ?) LIMIT ?"), "x", 1, 2.5, 3)
    assert bound.to_text() == "SEARCH docs MATCHING 'x' WHERE a IN (1, 2.5) LIMIT 3"


def test_a_repeated_name_binds_every_occurrence() -> None:
    bound = bind(parse("SEARCH d MATCHING :q WHERE title = :q OR body CONTAINS :q"), q="x")
    assert bound.to_text() == "SEARCH d MATCHING 'x' WHERE title = 'x' OR body CONTAINS 'x'"


def test_statement_without_parameters_is_returned_as_is() -> None:
    statement = parse("SEARCH d MATCHING 'x'")
    assert bind(statement) is statement


def test_values_for_a_statement_without_parameters_are_rejected() -> None:
    err = bound_error("SEARCH d MATCHING 'x'", q="y")
    assert ":q" in err.message


def test_explain_binds_its_statement() -> None:
    bound = bind(parse("EXPLAIN ANALYZE SEARCH d MATCHING :q"), q="x")
    assert bound.to_text() == "EXPLAIN ANALYZE SEARCH d MATCHING 'x'"
    assert bound.parameters == () and bound.statement.parameters == ()


@pytest.mark.parametrize(
    ("value", "cls", "text"),
    [("a'b", StringLiteral, "'a''b'"), (True, BooleanLiteral, "TRUE"),
     (False, BooleanLiteral, "FALSE"), (7, IntegerLiteral, "7"), (-2.5, FloatLiteral, "-2.5"),
     (-2**63, IntegerLiteral, "-9223372036854775808"),
     (2**63 - 1, IntegerLiteral, "9223372036854775807"),
     (None, NullLiteral, "NULL"), (np.int64(4), IntegerLiteral, "4"),
     (np.float32(0.5), FloatLiteral, "0.5"), (np.bool_(True), BooleanLiteral, "TRUE"),
     (datetime(2025, 1, 31, 8, 0), TimestampLiteral, "TIMESTAMP '2025-01-31T08:00:00.000000Z'"),
     (datetime(2025, 1, 31, 10, 0, tzinfo=timezone(timedelta(hours=2))), TimestampLiteral,
      "TIMESTAMP '2025-01-31T08:00:00.000000Z'")],
    ids=["str", "true", "false", "int", "float", "int64-min", "int64-max", "none", "np-int",
         "np-float", "np-bool",
         "naive-datetime", "aware-datetime"],
)  # fmt: skip
def test_python_values_map_to_literals(value: object, cls: type, text: str) -> None:
    bound = bind(parse("SEARCH d MATCHING 'x' WHERE a = :v"), v=value)
    assert type(bound.where.value) is cls
    assert bound.where.value.to_text() == text


def test_datetimes_bind_as_utc_text() -> None:
    """A bound datetime becomes the `format_timestamp` text (naive means UTC)."""
    bound = bind(parse("SEARCH d MATCHING 'x' AS OF :t"), t=datetime(2025, 1, 31))
    assert bound.as_of.value == "2025-01-31T00:00:00.000000Z"
    later = bind(parse("SEARCH d MATCHING 'x' AS OF :t"),
                 t=datetime(2025, 1, 31, 3, tzinfo=timezone(timedelta(hours=2))))
    assert later.as_of.value == "2025-01-31T01:00:00.000000Z"


@pytest.mark.parametrize(("value", "text"), [
    ("2025-01-31", "2025-01-31"),
    (" 2025-01-31T03:00:00+02:00 ", "2025-01-31T03:00:00+02:00"),
    ("2025-01-31T01:00:00Z", "2025-01-31T01:00:00Z"),
], ids=["date", "offset", "z"])
def test_iso_text_binds_at_as_of_as_a_timestamp_literal(value: str, text: str) -> None:
    """Was: `AS OF :t` refused ISO-8601 text ('must be a datetime'), though `WHERE created_at >
    :t` takes it, so a JSON client (the MCP server's run_statement) could not bind AS OF at
    all. The text becomes a TIMESTAMP literal's, which the engine parses as it parses one
    written in the statement (`parse_timestamp`: naive = UTC)."""
    bound = bind(parse("SEARCH d MATCHING 'x' AS OF :t"), t=value)
    assert bound.as_of.value == text
    assert bound.to_text() == f"SEARCH d MATCHING 'x' AS OF TIMESTAMP '{text}'"


@pytest.mark.parametrize(
    ("value", "text"),
    [(timedelta(days=30), "30 DAYS"), (timedelta(hours=12), "12 HOURS"),
     (timedelta(minutes=90), "90 MINUTES"), (timedelta(seconds=45), "45 SECONDS"),
     (timedelta(seconds=1.5), "1.5 SECONDS")],
    ids=["days", "hours", "minutes", "seconds", "fraction"],
)  # fmt: skip
def test_timedelta_binds_as_duration(value: timedelta, text: str) -> None:
    bound = bind(parse("SEARCH d MATCHING 'x' WITH RECENCY (half_life = :h)"), h=value)
    half_life = bound.recency.half_life
    assert isinstance(half_life, Duration)
    assert half_life.to_text() == text
    assert half_life.days == pytest.approx(value.total_seconds() / 86400)


# ---- vectors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [[0.1, 0.2, 0.3], (1, 2, 3), np.array([0.5, -0.5], dtype=np.float64),
     np.array([1, 2], dtype=np.int32), np.array([0.25, 0.75], dtype=np.float32)],
    ids=["list", "tuple", "float64", "int32", "float32"],
)  # fmt: skip
def test_vector_parameter_at_near(value: object) -> None:
    bound = bind(parse("SEARCH d NEAR :v"), v=value)
    vector = bound.near
    assert isinstance(vector, VectorLiteral)
    assert vector.value.dtype == np.float32 and vector.value.ndim == 1
    assert not vector.value.flags.writeable
    np.testing.assert_array_equal(vector.value, np.asarray(value, dtype=np.float32))
    assert bound.to_text() == "SEARCH d NEAR :v"


def test_bound_vector_is_a_copy() -> None:
    source = np.array([1.0, 2.0], dtype=np.float32)
    bound = bind(parse("SEARCH d NEAR ?"), source)
    source[0] = 99.0
    assert bound.near.value[0] == 1.0


@pytest.mark.parametrize(
    ("value", "fragment"),
    [([0.1, float("nan")], "finite"), ([float("inf")], "finite"), ([1e300], "finite"),
     ([], "non-empty"), (np.zeros((2, 2)), "1-D"), (["a", "b"], "numbers"),
     ([True, False], "numbers"), ([[1], [1, 2]], "vector"), ("0.1,0.2", "vector"), (3.0, "vector")],
    ids=["nan", "inf", "float32-overflow", "empty", "2d", "strings", "bools", "ragged", "str",
         "scalar"],
)  # fmt: skip
def test_bad_vectors_are_rejected(value: object, fragment: str) -> None:
    err = bound_error("SEARCH d NEAR :v LIMIT 3", v=value)
    assert fragment in err.message
    assert "NEAR (parameter :v)" in err.message
    assert underlined(err) == ":v"


@pytest.mark.parametrize(
    "text",
    ["SEARCH d MATCHING :v", "SEARCH d MATCHING 'x' WHERE a = :v", "SEARCH d MATCHING 'x' LIMIT :v",
     "SEARCH d MATCHING 'x' FOR SESSION :v", "SEARCH d MATCHING 'x' WITH RECENCY (weight = :v)"],
    ids=["matching", "where", "limit", "session", "weight"],
)  # fmt: skip
def test_a_vector_is_only_accepted_at_near(text: str) -> None:
    err = bound_error(text, v=[0.1, 0.2])
    assert underlined(err) == ":v"


# ---- missing, extra, mistyped, mixed ----------------------------------------------------


def test_missing_named_parameter_has_a_caret() -> None:
    err = bound_error("SEARCH d MATCHING :q LIMIT :n", q="x")
    assert ":n" in err.message
    assert underlined(err) == ":n"
    assert str(err).splitlines()[3] == "  " + " " * 27 + "^^"


def test_missing_positional_parameter_has_a_caret() -> None:
    err = bound_error("SEARCH d MATCHING ? LIMIT ?", "x")
    assert "?2" in err.message
    assert err.span == (26, 27)


def test_extra_named_parameter_is_named() -> None:
    err = bound_error("SEARCH d MATCHING :q", q="x", limit=5)
    assert ":limit" in err.message


def test_extra_positional_value() -> None:
    err = bound_error("SEARCH d MATCHING ?", "x", "y")
    assert "1 ? parameter, 2 values" in err.message


@pytest.mark.parametrize(
    ("text", "args", "params"),
    [("SEARCH d MATCHING ?", (), {"q": "x"}), ("SEARCH d MATCHING :q", ("x",), {})],
    ids=["names-for-positional", "positions-for-named"],
)
def test_wrong_binding_style(text: str, args: tuple, params: dict) -> None:
    with pytest.raises(ParameterError):
        bind(parse(text), *args, **params)


def test_mixing_styles_is_rejected_at_parse() -> None:
    with pytest.raises(ParameterError) as info:
        parse("SEARCH d MATCHING ? LIMIT :n")
    assert underlined(info.value) == ":n"


MISTYPED = [
    ("limit-str", "SEARCH d MATCHING 'x' LIMIT :p", "ten", "LIMIT (parameter :p) must be a whole"),
    ("limit-bool", "SEARCH d MATCHING 'x' LIMIT :p", True, "LIMIT (parameter :p)"),
    ("limit-float", "SEARCH d MATCHING 'x' LIMIT :p", 5.0, "LIMIT (parameter :p)"),
    ("matching-int", "SEARCH d MATCHING :p", 5, "MATCHING text (parameter :p) must be a str"),
    ("session-int", "SEARCH d MATCHING 'x' FOR SESSION :p", 42, "session id (parameter :p)"),
    ("weight-str", "SEARCH d MATCHING 'x' WITH RECENCY (weight = :p)", "high", "weight"),
    ("weight-nan", "SEARCH d MATCHING 'x' WITH RECENCY (weight = :p)", float("nan"), "finite"),
    ("half-life-int", "SEARCH d MATCHING 'x' WITH RECENCY (half_life = :p)", 30, "timedelta"),
    ("as-of-int", "SEARCH d MATCHING 'x' AS OF :p", 1738281600, "AS OF (parameter :p) must be a "
     "datetime (or a date, a numpy datetime64 or ISO-8601 text), got int 1738281600"),
    ("where-timedelta", "SEARCH d MATCHING 'x' WHERE a = :p", timedelta(1), "durations only"),
    ("where-dict", "SEARCH d MATCHING 'x' WHERE a = :p", {"a": 1}, "value for a"),
    ("where-inf", "SEARCH d MATCHING 'x' WHERE a = :p", float("inf"), "finite"),
    ("where-bigint", "SEARCH d MATCHING 'x' WHERE a = :p", 2**70, "64-bit"),
    ("where-below-int64", "SEARCH d MATCHING 'x' WHERE a = :p", -2**63 - 1, "64-bit"),
    ("like-int", "SEARCH d MATCHING 'x' WHERE a LIKE :p", 5, "LIKE pattern for a"),
    ("show-session-none", "SHOW SESSION :p", None, "session id"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "value", "fragment"), [m[1:] for m in MISTYPED], ids=[m[0] for m in MISTYPED]
)
def test_mistyped_values_name_the_parameter(text: str, value: object, fragment: str) -> None:
    err = bound_error(text, p=value)
    assert fragment in err.message
    assert underlined(err) == ":p"


RANGE = [
    ("weight", "SEARCH d MATCHING 'x' WITH RECENCY (weight = :p)", -1, "weight"),
    ("half-life", "SEARCH d MATCHING 'x' WITH RECENCY (half_life = :p)", timedelta(0), "half_life"),
    ("half-life-negative", "SEARCH d MATCHING 'x' WITH RECENCY (half_life = :p)",
     timedelta(days=-1), "half_life"),
    ("limit", "SEARCH d MATCHING 'x' LIMIT :p", 0, "LIMIT"),
    ("offset", "SEARCH d MATCHING 'x' OFFSET :p", -1, "OFFSET"),
    ("rrf-k", "SEARCH d MATCHING 'x' FUSE RRF (k = :p)", 0, "RRF k"),
    ("velocity", "SEARCH d MATCHING 'x' WITH SESSION BOOST (velocity = :p)", -0.1, "velocity"),
    ("budget", "SEARCH m MATCHING 'x' GROUP BY CONVERSATION (budget = :p)", 0, "budget"),
    ("retrieve-count", "RETRIEVE :p FROM docs", 0, "RETRIEVE count"),
    ("empty-text", "SEARCH d MATCHING :p", "", "MATCHING text"),
    ("empty-session", "RETRIEVE FROM d FOR SESSION :p", "", "session id"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "value", "name"), [r[1:] for r in RANGE], ids=[r[0] for r in RANGE]
)
def test_value_checks_run_on_bound_values(text: str, value: object, name: str) -> None:
    err = bound_error(text, p=value)
    assert err.message.startswith(f"{name} (parameter :p) ")
    assert underlined(err) == ":p"
    lines = str(err).splitlines()
    assert lines[0].startswith("ParameterError: ")
    assert lines[3].strip() == "^^"


def test_positional_value_check_names_the_position() -> None:
    err = bound_error("SEARCH d MATCHING ? LIMIT ?", "x", 0)
    assert err.message.startswith("LIMIT (parameter ?2) must be at least 1")
    assert underlined(err) == "?"


def test_the_first_bad_value_in_the_text_is_reported() -> None:
    err = bound_error("RETRIEVE :c FROM d WHERE a = :w OFFSET :n", c=1, w=[1.0], n=-1)
    assert err.message.startswith("value for a (parameter :w)")
    err = bound_error("RETRIEVE :c FROM d WHERE a = :w", c=0, w=[1.0])
    assert err.message.startswith("RETRIEVE count (parameter :c)")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(["a", "b"], "tag IN ('a', 'b')", id="list"),
        pytest.param(("a",), "tag IN ('a')", id="tuple"),
        pytest.param({"b", "a"}, "tag IN ('a', 'b')", id="set-sorted"),
        pytest.param([1, 2.5, None, True], "tag IN (1, 2.5, NULL, TRUE)", id="mixed-scalars"),
    ],
)
def test_in_list_parameter_expands_to_values(value, expected):
    stmt = bind(parse("SEARCH docs MATCHING 'x' WHERE tag IN :tags"), tags=value)
    assert stmt.to_text() == f"SEARCH docs MATCHING 'x' WHERE {expected}"
    assert not stmt.where.list_parameter and not stmt.parameters


@pytest.mark.parametrize("value", [[], "ab", None, [["nested"]], 5],
                         ids=["empty", "str", "none", "nested", "int"])
def test_in_list_parameter_rejects_non_lists(value):
    with pytest.raises(ParameterError) as err:
        bind(parse("SEARCH docs MATCHING 'x' WHERE tag IN :tags"), tags=value)
    assert "IN list for tag (parameter :tags)" in str(err.value)
    assert err.value.column == 39  # the caret is under :tags


def test_a_dict_given_positionally_says_to_unpack_it() -> None:
    """sqlite3's ``execute(sql, {"q": ...})`` habit: the error says what to do."""
    err = bound_error("SEARCH d MATCHING :q LIMIT :n", {"q": "x", "n": 2})
    assert err.message == ("the statement uses named parameters (:q, :n), but their values came "
                           "as one positional mapping")
    assert err.hint == "unpack it into named values: execute(text, **values)"
    err = bound_error("SEARCH d MATCHING :q", "x")
    assert err.message == ("the statement uses named parameters (:q), but 1 positional value "
                           "was given")
    assert err.hint == "pass the values by name, e.g. q='backup'"


def test_a_tuple_of_every_value_says_to_spread_it() -> None:
    """sqlite3's ``execute(sql, (a, b))`` habit; a single ? given a list (IN, NEAR) is fine."""
    err = bound_error("SEARCH d MATCHING ? LIMIT ?", ("x", 2))
    assert err.message == "missing value for parameter ?2: 2 needed, 1 given"
    assert err.hint == ("the values went in as one tuple: pass them as separate arguments, "
                        "execute(text, *values)")
    assert bound_error("SEARCH d MATCHING ? LIMIT ?", "x").hint is None
    assert bound_error("SEARCH d MATCHING ?", "x", "y").message == (
        "too many values: the statement has 1 ? parameter, 2 values given")


def test_an_embedders_one_row_matrix_at_near_says_to_pass_the_row() -> None:
    """``embedder(["text"])`` is a (1, d) array; NEAR takes its row."""
    err = bound_error("SEARCH d NEAR :v", v=np.ones((1, 4), dtype=np.float32))
    assert err.message.startswith("NEAR (parameter :v) must be a 1-D vector of numbers, got "
                                  "ndarray")
    assert err.hint == ("it has shape (1, 4), one row as an embedder returns for one text: "
                        "pass that row (vectors[0])")
    assert bound_error("SEARCH d NEAR :v", v=np.ones((2, 4))).hint is None


@pytest.mark.parametrize("values", [["ops", "dev"], ("ops",), {"ops"}, np.array(["ops"])])
def test_a_list_for_an_equality_says_to_write_in(values: object) -> None:
    err = bound_error("SEARCH d MATCHING 'x' WHERE team = :t", t=values)
    assert err.message.startswith("value for team (parameter :t) must be a str, bool, int, "
                                  "float, datetime or None")
    assert err.hint == "to match any of several values, write IN :t (WHERE field IN :t)"
    assert underlined(err) == ":t"


def test_values_inside_one_keyword_mapping_say_to_unpack_it() -> None:
    """``execute(text, params={"q": ...})``: :q is missing, and the hint finds it."""
    err = bound_error("SEARCH d MATCHING :q LIMIT :n", params={"q": "x", "n": 2})
    assert err.message == "missing value for parameter :q"
    assert err.hint == "it is inside params=: unpack that mapping, execute(text, **params)"
    assert bound_error("SEARCH d MATCHING :q", other={"z": 1}).hint == "pass q=..."
