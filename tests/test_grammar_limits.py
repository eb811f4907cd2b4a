"""Input limits are checked before parsing (SPEC §3.2, issue 13): statement size, nesting depth
and IN-list length, each a `QuerySyntaxError` with a caret; lark never sees such input.

The time these rejections take is recorded by `benchmarks/bench_parse.py`, not asserted here.
"""

from __future__ import annotations

import pytest

import recallql
from recallql.grammar import limits, parse, parse_script
from recallql.grammar import parser as grammar_parser
from recallql.grammar.errors import QuerySyntaxError


@pytest.fixture
def no_lark(monkeypatch):
    """Make any use of the lark parser fail: a rejection must come from the limit check."""
    grammar_parser.clear_cache()

    def refuse():
        raise AssertionError("lark was asked to parse input over a limit")

    monkeypatch.setattr(grammar_parser, "lark_parser", refuse)
    yield
    grammar_parser.clear_cache()


def test_statement_over_one_mib_is_refused_before_parsing(no_lark):
    text = "SEARCH docs MATCHING '" + "a" * limits.MAX_STATEMENT_BYTES + "'"
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    err = info.value
    assert "1 MiB" in err.message and f"{len(text.encode()):,} bytes" in err.message
    assert err.span == (limits.MAX_STATEMENT_BYTES, limits.MAX_STATEMENT_BYTES + 1)
    assert "parameter" in err.hint and "^" in str(err)


def test_size_counts_utf8_bytes_not_characters(no_lark):
    # 2-byte characters: fewer than 1 MiB characters, more than 1 MiB bytes
    body = "é" * (limits.MAX_STATEMENT_BYTES // 2 + 10)
    with pytest.raises(QuerySyntaxError, match="bytes long"):
        parse(f"SEARCH docs MATCHING '{body}'")


@pytest.mark.parametrize("nest", [
    lambda n: "(" * n + "a = 1" + ")" * n,
    lambda n: "NOT " * n + "a = 1",
    lambda n: "NOT (" * n + "a = 1" + ")" * n,
])
def test_deep_nesting_is_refused_before_parsing(no_lark, nest):
    text = "SEARCH docs MATCHING 'x' WHERE " + nest(100_000)
    with pytest.raises(QuerySyntaxError, match="nested more than 64 levels") as info:
        parse(text)
    start, end = info.value.span
    assert text[start:end] in ("(", "NOT")
    # the caret is on the token that crosses the limit
    assert text[:start].count("(") + text[:start].count("NOT") == limits.MAX_DEPTH


def test_long_in_list_is_refused_before_parsing_and_points_to_list_parameters(no_lark):
    values = ", ".join(str(i) for i in range(100_000))
    text = f"SEARCH docs MATCHING 'x' WHERE n IN ({values})"
    with pytest.raises(QuerySyntaxError, match="more than 1,000 values") as info:
        parse(text)
    err = info.value
    start, end = err.span
    assert text[start:end] == str(limits.MAX_IN_LIST)  # the 1,001st value (0-based 1000)
    assert "IN :" in err.hint


def test_too_many_tokens_are_refused_before_parsing(no_lark):
    """A flat OR chain within 1 MiB took 11 s to parse; it is refused at token 10,001."""
    text = "SEARCH docs MATCHING 'x' WHERE " + " OR ".join(["a = 1"] * 100_000)
    with pytest.raises(QuerySyntaxError, match="more than 10,000 tokens") as info:
        parse(text)
    start = info.value.span[0]
    assert len(text[:start].split()) == limits.MAX_TOKENS  # tokens are space-separated here


def test_limits_hold_inside_strings_comments_and_names():
    """Parentheses, NOTs and commas inside strings, quoted names and comments are text."""
    inner = "(" * 200 + " NOT " * 200 + ", " * 2000
    text = (f"SEARCH docs MATCHING '{inner}' -- {inner}\n"
            f"WHERE \"{inner.replace(' ', '')}\" = 1 AND n IN (1, 2, 3)")
    stmt = parse(text)
    assert stmt.matching.value == inner


def test_statements_at_the_limits_parse():
    depth = limits.MAX_DEPTH  # docs/language.md: 64 levels; the 65th ( or NOT is refused
    parse("SEARCH docs MATCHING 'x' WHERE " + "(" * depth + "a = 1" + ")" * depth)
    parse("SEARCH docs MATCHING 'x' WHERE " + "NOT " * depth + "a = 1")
    parse("SEARCH docs MATCHING 'x' WHERE " + "NOT (" * (depth // 2) + "a = 1" + ")" * (depth // 2))
    values = ", ".join(str(i) for i in range(limits.MAX_IN_LIST))
    stmt = parse(f"SEARCH docs MATCHING 'x' WHERE n IN ({values})")
    assert len(stmt.where.values) == limits.MAX_IN_LIST
    text = "SEARCH docs MATCHING '" + "a" * (limits.MAX_STATEMENT_BYTES - 24) + "'"
    assert len(text.encode()) < limits.MAX_STATEMENT_BYTES
    parse(text)


def test_each_statement_of_a_script_is_checked(no_lark):
    deep = "SEARCH docs MATCHING 'x' WHERE " + "(" * 100 + "a = 1" + ")" * 100
    with pytest.raises(QuerySyntaxError, match="nested more than 64 levels") as info:
        parse_script("SHOW COLLECTIONS; " + deep)
    assert info.value.line == 1 and info.value.column > len("SHOW COLLECTIONS; ")


def test_nesting_depth_restarts_after_a_semicolon(no_lark):
    """An unbalanced statement does not push the next one over the limit: the check sees
    separate statements (lark then reports the unbalanced one as usual)."""
    half = "(" * 40
    text = f"SEARCH docs MATCHING 'x' WHERE {half}a = 1; SEARCH docs MATCHING 'x' WHERE {half}a = 1"
    assert limits.check_limits(text) is None  # no limit error: each statement is 40 deep
    with pytest.raises(QuerySyntaxError, match="nested more than 64 levels"):
        limits.check_limits(f"SEARCH docs MATCHING 'x' WHERE {half * 2}a = 1")  # one, 80 deep


def test_database_execute_refuses_before_touching_storage(tmp_path, no_lark):
    db = recallql.connect(embedder=None)
    with pytest.raises(QuerySyntaxError, match="more than 1,000 values"):
        db.execute("SEARCH docs MATCHING 'x' WHERE id IN (" + "'a', " * 5000 + "'b')")


@pytest.mark.parametrize("nest", [
    lambda n: "(" * n + "a = 1" + ")" * n,
    lambda n: "NOT " * n + "a = 1",
    lambda n: "(a = 1 OR " * (n // 2) + "a = 1" + ")" * (n // 2),
], ids=["parentheses", "nots", "or-chains"])
def test_predicates_64_levels_deep_parse_and_run(nest):
    """Was: the AST builder also counted the comparison at the bottom, so 64 parentheses or
    NOTs, which the limit check lets through, were refused after parsing ("nested more than
    64 levels"), and 32 OR chains in parentheses (64 levels) too."""
    text = "SEARCH t MATCHING 'x' USING LEXICAL WHERE " + nest(limits.MAX_DEPTH)
    stmt = parse(text)
    assert parse(stmt.to_text()).to_text() == stmt.to_text()
    with recallql.connect() as db:
        db.create_collection("t", text_fields=("body",), fields={"a": int}, dim=4,
                             embedder=None)
        db.ingest("t", [{"id": "1", "body": "x", "a": 1}, {"id": "2", "body": "x", "a": 2}])
        assert db.execute(text).ids() == ["1"]  # 64 NOTs: a = 1


def test_or_and_chains_inside_one_another_count_as_levels():
    """An AND / OR chain inside another adds a level after parsing (the limit check counts only
    parentheses and NOTs): `(a = 1 OR b = 2 AND (` is three, so 22 of them are refused with a
    caret, never a traceback (the AST and the plan stay shallow enough to serialise)."""
    inner = "a = 1"
    for _ in range(21):
        inner = f"(a = 1 OR b = 2 AND {inner})"
    stmt = parse("SEARCH docs MATCHING 'x' WHERE " + inner)
    assert len(stmt.model_dump_json()) > 0
    text = "SEARCH docs MATCHING 'x' WHERE (a = 1 OR b = 2 AND " + inner + ")"
    with pytest.raises(QuerySyntaxError, match="nested more than 64 levels deep") as info:
        parse(text)
    assert "AND / OR" in info.value.message and info.value.column is not None
