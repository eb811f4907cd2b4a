"""Parsing behaviour: keywords, identifiers, literals, parameters, spans, statements, scripts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from lark.lexer import PatternStr

import recallql
from recallql.grammar import (
    NON_RESERVED,
    RESERVED,
    And,
    Between,
    Comparison,
    Contains,
    Describe,
    Duration,
    Explain,
    FloatLiteral,
    Identifier,
    InList,
    IntegerLiteral,
    IsNull,
    Like,
    NoRecency,
    Not,
    Or,
    Parameter,
    ParameterError,
    QuerySyntaxError,
    RecencyBoost,
    Retrieve,
    Search,
    ShowCollections,
    ShowLineage,
    ShowSession,
    ShowSessions,
    SignalBoost,
    StringLiteral,
    TimestampLiteral,
    parse,
    parse_script,
)
from recallql.grammar.parser import lark_parser
from recallql.index.timestamps import parse_timestamp


def where(text: str):
    return parse(f"SEARCH docs MATCHING 'x' WHERE {text}").where


# ---- keywords -------------------------------------------------------------------------


def test_keyword_lists_match_the_grammar() -> None:
    parser = lark_parser()
    keywords = {
        t.name for t in parser.terminals if isinstance(t.pattern, PatternStr) and t.pattern.flags
    }
    assert keywords == RESERVED | NON_RESERVED
    assert RESERVED.isdisjoint(NON_RESERVED)
    ident_terminals = {
        rule.expansion[0].name for rule in parser.rules if rule.origin.name == "ident"
    }
    assert ident_terminals == NON_RESERVED | {"NAME", "QUOTED_NAME"}


@pytest.mark.parametrize(
    "text",
    ["search docs matching 'x' limit 5", "SEARCH DOCS MATCHING 'x' LIMIT 5",
     "Search docs Matching 'x' Limit 5", "sEaRcH docs mAtChInG 'x' lImIt 5"],
    ids=["lower", "upper-name", "title", "mixed"],
)  # fmt: skip
def test_keywords_are_case_insensitive(text: str) -> None:
    statement = parse(text)
    assert isinstance(statement, Search)
    assert statement.limit_value == 5


def test_identifiers_keep_their_case() -> None:
    assert parse("SEARCH Docs MATCHING 'x'").collection.name == "Docs"


def test_glued_keywords_are_one_word_and_a_syntax_error_at_its_column() -> None:
    text = "SEARCH docs MATCHING 'x'\n  FORSESSION s1"
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    err = info.value
    assert (err.line, err.column) == (2, 3)
    assert err.span == (27, 37)
    assert "found 'FORSESSION'" in err.message
    assert "FOR SESSION" in err.hint


@pytest.mark.parametrize(
    "text",
    ["SEARCHdocs MATCHING 'x'", "SEARCH docs MATCHING 'x' LIMIT5",
     "SEARCH docs MATCHING 'x' WHEREa = 1"],
    ids=["statement", "limit", "where"],
)  # fmt: skip
def test_other_glued_keywords_fail(text: str) -> None:
    with pytest.raises(QuerySyntaxError):
        parse(text)


def test_non_reserved_keyword_is_a_session_id() -> None:
    statement = parse("SEARCH docs MATCHING 'x' FOR SESSION format")
    assert statement.session == StringLiteral(value="format", span=(37, 43))
    assert statement.session_id == "format"


@pytest.mark.parametrize("word", sorted(NON_RESERVED))
def test_non_reserved_keywords_are_identifiers(word: str) -> None:
    node = where(f"{word.lower()} = 1")
    assert node.field == Identifier(name=word.lower(), span=node.field.span)
    assert parse(f"DESCRIBE {word}").collection.name == word


@pytest.mark.parametrize("word", sorted(RESERVED))
def test_reserved_words_need_quotes(word: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(f"DESCRIBE {word.lower()}")
    assert info.value.column == 10
    assert f'"{word.lower()}"' in info.value.hint
    node = where(f'"{word.lower()}" = 1')
    assert node.field.name == word.lower()
    assert node.field.quoted
    assert node.to_text() == f'"{word.lower()}" = 1'


def test_where_limit_fails_and_quoted_limit_works() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("SEARCH docs MATCHING 'x' WHERE limit = 3")
    assert info.value.column == 32
    assert "reserved word" in info.value.hint
    assert where('"limit" = 3') == Comparison(
        field=Identifier(name="limit", quoted=True, span=(31, 38)), op="=",
        value=IntegerLiteral(value=3, span=(41, 42)), span=(31, 42))  # fmt: skip


# ---- strings and identifiers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "value"),
    [("'it''s'", "it's"), ("''''", "'"), ("'a''''b'", "a''b"), ("'C++ OR NOT -v {0} a:b'",
     "C++ OR NOT -v {0} a:b"), ("'36\"'", '36"'), ("'two\nlines'", "two\nlines"),
     ("'-- not a comment'", "-- not a comment"), ("'session_id:s2'", "session_id:s2")],
    ids=["doubled", "only-quote", "two-doubled", "syntax-words", "double-quote", "newline",
         "dashes", "colon"],
)  # fmt: skip
def test_string_decoding(literal: str, value: str) -> None:
    assert parse(f"SEARCH docs MATCHING {literal}").matching_text == value


def test_quoted_identifier_decoding() -> None:
    node = where('"say ""hi""" = 1')
    assert node.field.name == 'say "hi"'
    assert node.field.to_text() == '"say ""hi"""'


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [("SEARCH docs MATCHING 'abc", 1, 22), ("SEARCH docs\nMATCHING 'it''s LIMIT 5", 2, 10),
     ("SEARCH docs MATCHING 'x' WHERE a = 'open\nLIMIT 5", 1, 36)],
    ids=["end", "second-line", "runs-to-end"],
)  # fmt: skip
def test_unterminated_string_points_at_opening_quote(text: str, line: int, column: int) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert "unterminated string" in info.value.message
    assert (info.value.line, info.value.column) == (line, column)


# ---- literals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cls", "value"),
    [("42", IntegerLiteral, 42), ("-7", IntegerLiteral, -7), ("+3", IntegerLiteral, 3),
     ("0.25", FloatLiteral, 0.25), ("-1.5e-3", FloatLiteral, -0.0015), ("2E2", FloatLiteral, 200.0),
     (".5", FloatLiteral, 0.5), ("5.", FloatLiteral, 5.0)],
    ids=["int", "negative", "plus", "float", "exponent", "upper-e", "leading-dot", "trailing-dot"],
)  # fmt: skip
def test_numbers(text: str, cls: type, value: object) -> None:
    node = where(f"a = {text}").value
    assert type(node) is cls
    assert node.value == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [("TRUE", True), ("false", False), ("NULL", None)], ids=["true", "false", "null"])
def test_constants(text: str, expected: object) -> None:
    assert where(f"a = {text}").value.value is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2025-01-31T00:00:00Z", datetime(2025, 1, 31, tzinfo=UTC)),
     ("2025-01-31T03:00:00+03:00", datetime(2025, 1, 31, tzinfo=UTC)),
     ("2025-01-31T00:00:00", datetime(2025, 1, 31, tzinfo=UTC)),
     ("2025-01-31", datetime(2025, 1, 31, tzinfo=UTC)),
     ("2025-01-31T10:20:30.5-01:00", datetime(2025, 1, 31, 11, 20, 30, 500000, tzinfo=UTC))],
    ids=["zulu", "offset", "naive", "date", "fraction"],
)  # fmt: skip
def test_timestamps_keep_their_text_and_mean_aware_utc(text: str, expected: datetime) -> None:
    """The grammar keeps the literal's text; the one parser (index.timestamps) reads it."""
    node = parse(f"SEARCH docs MATCHING 'x' AS OF TIMESTAMP '{text}'").as_of
    assert isinstance(node, TimestampLiteral)
    assert node.value == text
    moment = parse_timestamp(node.value).astimezone(UTC)
    assert moment == expected
    assert moment.utcoffset().total_seconds() == 0


@pytest.mark.parametrize("text", ["2025-13-01", "yesterday", "", "2025-01-32T00:00:00Z",
                                  "0001-01-01T00:00:00+05:00"])
def test_invalid_timestamp_has_caret_under_the_string(text: str) -> None:
    """Checked when the statement runs (parse keeps the text), with the caret under it."""
    query = f"SEARCH docs MATCHING 'x' AS OF TIMESTAMP '{text}' LIMIT 3"
    assert parse(query).as_of.value == text
    db = recallql.connect(embedder=None)
    with pytest.raises(QuerySyntaxError, match="invalid TIMESTAMP") as info:
        db.execute(query)
    start, end = info.value.span
    assert query[start:end] == f"'{text}'"


@pytest.mark.parametrize(
    ("text", "value", "unit", "days"),
    [("365 DAYS", 365, "DAYS", 365.0), ("1 day", 1, "DAYS", 1.0), ("12 HOURS", 12, "HOURS", 0.5),
     ("1 hour", 1, "HOURS", 1 / 24), ("30 MINUTES", 30, "MINUTES", 30 / 1440),
     ("1 minute", 1, "MINUTES", 1 / 1440), ("90 seconds", 90, "SECONDS", 90 / 86400),
     ("1 SECOND", 1, "SECONDS", 1 / 86400), ("1.5 DAYS", 1.5, "DAYS", 1.5)],
    ids=["days", "day", "hours", "hour", "minutes", "minute", "seconds", "second", "fraction"],
)  # fmt: skip
def test_durations(text: str, value: float, unit: str, days: float) -> None:
    half_life = parse(f"SEARCH d MATCHING 'x' WITH RECENCY (half_life = {text})").recency.half_life
    assert half_life == Duration(value=value, unit=unit, span=half_life.span)
    assert half_life.days == pytest.approx(days)
    assert half_life.to_text() == f"{value} {unit}"


# ---- parameters and spans ---------------------------------------------------------------


def test_positional_parameters_are_numbered_in_order() -> None:
    statement = parse("SEARCH d MATCHING ? WHERE a = ? AND b IN (?, ?) LIMIT ?")
    assert [p.index for p in statement.parameters] == [0, 1, 2, 3, 4]
    assert statement.matching == Parameter(index=0, span=(18, 19))


def test_named_parameters_are_listed_with_repeats() -> None:
    statement = parse("SEARCH d MATCHING :q WHERE a = :q AND b = :v")
    assert [p.name for p in statement.parameters] == ["q", "q", "v"]


def test_mixing_parameter_styles_is_an_error() -> None:
    with pytest.raises(ParameterError) as info:
        parse("SEARCH d MATCHING :q LIMIT ?")
    assert info.value.column == 28


def test_spans_point_into_the_source() -> None:
    text = "-- comment\nSEARCH docs MATCHING 'x y' WHERE tag IN ('a', 'b') LIMIT 5;"
    statement = parse(text)

    def source(node) -> str:
        return text[node.span.start : node.span.end]

    assert source(statement) == text[11:-1]
    assert source(statement.collection) == "docs"
    assert source(statement.matching) == "'x y'"
    assert source(statement.where) == "tag IN ('a', 'b')"
    assert source(statement.where.values[1]) == "'b'"
    assert source(statement.limit) == "5"
    assert statement.source == text


# ---- predicates -------------------------------------------------------------------------


def test_predicate_precedence() -> None:
    node = where("NOT a = 1 AND b = 2 OR c IS NULL")
    assert isinstance(node, Or)
    first, second = node.items
    assert isinstance(first, And) and isinstance(first.items[0], Not)
    assert isinstance(second, IsNull) and not second.negated


@pytest.mark.parametrize(
    ("text", "cls", "negated"),
    [("a IN (1)", InList, False), ("a NOT IN (1, 2)", InList, True),
     ("a BETWEEN 1 AND 2", Between, False), ("a NOT BETWEEN 1 AND 2", Between, True),
     ("a LIKE 'x%'", Like, False), ("a NOT LIKE 'x%'", Like, True),
     ("a IS NULL", IsNull, False), ("a IS NOT NULL", IsNull, True)],
    ids=["in", "not-in", "between", "not-between", "like", "not-like", "is-null", "not-null"],
)  # fmt: skip
def test_negatable_predicates(text: str, cls: type, negated: bool) -> None:
    node = where(text)
    assert type(node) is cls
    assert node.negated is negated


def test_between_and_binds_to_between() -> None:
    node = where("a BETWEEN 1 AND 2 AND b CONTAINS 'x'")
    assert isinstance(node, And)
    assert isinstance(node.items[0], Between) and node.items[0].high.value == 2
    assert isinstance(node.items[1], Contains)


# ---- statements and clauses -------------------------------------------------------------


def test_search_with_every_clause() -> None:
    statement = parse(
        "SEARCH docs MATCHING 'q' USING LEXICAL NEAR :v WHERE a = 1 FOR SESSION 's' "
        "WITHOUT RECENCY WITH SIGNAL BOOST (reward = 0.5, click = 1) FUSE RRF (k = 60) "
        "GROUP BY DOCUMENT AS OF :t LIMIT 10 OFFSET 20"
    )
    assert statement.using.mode == "lexical"
    assert statement.near == Parameter(name="v", span=statement.near.span)
    assert isinstance(statement.recency, NoRecency)
    assert isinstance(statement.signal_boost, SignalBoost)
    weights = [(name, value.value) for name, value in statement.signal_boost.weights]
    assert weights == [("reward", 0.5), ("click", 1)]
    assert statement.session_boost is None
    assert statement.fuse.k.value == 60
    assert statement.group_by.kind == "document" and statement.group_by.budget is None
    assert (statement.limit_value, statement.offset_value) == (10, 20)


def test_unwritten_options_stay_none() -> None:
    recency = parse("SEARCH d MATCHING 'x' WITH RECENCY (shape = gauss, weight = 2)").recency
    assert isinstance(recency, RecencyBoost)
    assert recency.half_life is None and recency.field is None
    assert recency.shape.name == "GAUSS"
    assert [o.name.name for o in recency.options] == ["shape", "weight"]


def test_retrieve_count_is_its_limit() -> None:
    statement = parse("RETRIEVE 7 FROM messages FOR SESSION current")
    assert isinstance(statement, Retrieve)
    assert statement.limit_value == 7 and statement.limit is None
    assert statement.session_id == "current"
    assert parse("RETRIEVE FROM docs LIMIT 3").limit_value == 3
    assert parse("RETRIEVE FROM docs").limit_value is None


def test_explain() -> None:
    statement = parse("EXPLAIN ANALYZE FORMAT JSON SEARCH d MATCHING :q")
    assert isinstance(statement, Explain)
    assert (statement.analyze, statement.verbose, statement.format) == (True, False, "json")
    assert isinstance(statement.statement, Search)
    assert statement.parameters == statement.statement.parameters
    assert parse("EXPLAIN SEARCH d MATCHING 'x'").format is None


@pytest.mark.parametrize(
    ("text", "cls"),
    [("SHOW COLLECTIONS", ShowCollections), ("SHOW SESSIONS", ShowSessions),
     ("SHOW SESSION 's'", ShowSession), ("SHOW LINEAGE s", ShowLineage),
     ("DESCRIBE docs", Describe)],
    ids=["collections", "sessions", "session", "lineage", "describe"],
)  # fmt: skip
def test_show_and_describe(text: str, cls: type) -> None:
    assert type(parse(text)) is cls


def test_unbound_accessor_asks_for_bind() -> None:
    with pytest.raises(ParameterError, match="bind"):
        _ = parse("SEARCH d MATCHING 'x' LIMIT :n").limit_value


# ---- parse and parse_script -------------------------------------------------------------


def test_parse_script_reads_several_statements() -> None:
    text = ";; SHOW COLLECTIONS;\n-- only a comment\n;DESCRIBE docs\n; SEARCH d MATCHING 'x';"
    statements = parse_script(text)
    assert [type(s) for s in statements] == [ShowCollections, Describe, Search]
    assert text[statements[1].span.start : statements[1].span.end] == "DESCRIBE docs"
    assert all(s.source == text for s in statements)


@pytest.mark.parametrize(
    "text", ["", "   ", "-- nothing\n", ";;"], ids=["empty", "blank", "comment", "semis"]
)
def test_empty_script_is_empty(text: str) -> None:
    assert parse_script(text) == []
    with pytest.raises(QuerySyntaxError, match="expected a statement"):
        parse(text)


def test_parse_rejects_a_second_statement() -> None:
    text = "SHOW COLLECTIONS;\nDESCRIBE docs"
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (2, 1)
    assert "parse_script" in info.value.hint


def test_parse_is_cached_by_text() -> None:
    text = "SEARCH cache_test MATCHING 'x'"
    assert parse(text) is parse(text)
    assert parse(text) is not parse(text + " ")


def test_parse_rejects_non_text() -> None:
    with pytest.raises(TypeError):
        parse(b"SHOW COLLECTIONS")  # type: ignore[arg-type]


# ---- hand-built nodes -------------------------------------------------------------------


def test_hand_built_nodes_validate_and_render() -> None:
    from recallql.grammar import Option, VectorLiteral

    statement = Search(
        collection=Identifier(name="my docs"),
        near=VectorLiteral(value=[1, 2]),
        where=And(items=(Comparison(field=Identifier(name="a"), op="=",
                                    value=IntegerLiteral(value=1)),
                         Not(item=IsNull(field=Identifier(name="b"))))),
        boosts=(RecencyBoost(options=(Option(name=Identifier(name="weight"),
                                             value=FloatLiteral(value=0.5)),)),),
    )  # fmt: skip
    assert statement.to_text() == (
        'SEARCH "my docs" NEAR ? WHERE a = 1 AND NOT b IS NULL WITH RECENCY (weight = 0.5)'
    )
    assert statement.near.value.dtype.name == "float32"
    assert statement.recency.weight.value == 0.5


def test_nodes_are_immutable_and_strict() -> None:
    from pydantic import ValidationError

    node = parse("SEARCH d MATCHING 'x'")
    with pytest.raises(ValidationError):
        node.limit = IntegerLiteral(value=3)  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Identifier(name="a", colour="red")  # type: ignore[call-arg]
