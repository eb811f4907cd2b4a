"""Error messages: golden renderings, hints, value checks with a caret, the error classes."""

from __future__ import annotations

import pickle
import re
import unicodedata
from pathlib import Path

import pytest
import wcwidth

from recallql.grammar import (
    ParameterError,
    QueryError,
    QuerySemanticError,
    QuerySyntaxError,
    parse,
)

GOLDEN_FILE = Path(__file__).parent / "fixtures" / "grammar" / "errors.txt"


def load_golden() -> list[tuple[str, str, str]]:
    """Cases of ``errors.txt``: ``=== id``, the query lines, ``---``, the exact message."""
    cases = []
    for block in GOLDEN_FILE.read_text(encoding="utf-8").split("\n=== ")[1:]:
        head, _, rendered = block.partition("\n---\n")
        name, _, text = head.partition("\n")
        cases.append((name, text, rendered.rstrip("\n")))
    return cases


GOLDEN = load_golden()


def test_golden_file_has_the_common_mistakes() -> None:
    assert len(GOLDEN) >= 8
    assert any("end of input" in rendered for _, _, rendered in GOLDEN)
    assert any("\n" in text for _, text, _ in GOLDEN)


@pytest.mark.parametrize(("text", "rendered"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN])
def test_golden_rendering(text: str, rendered: str) -> None:
    with pytest.raises(QueryError) as info:
        parse(text)
    assert str(info.value) == rendered


HINTS = [
    ("misspelled-keyword", "SEARCH docs MATCHNG 'x'", "did you mean 'MATCHING'?"),
    ("using-option-first", "SEARCH d MATCHING 'x' USING SEMANTIC (ef = 64)",
     "hold a method first: (exact), (ann) or (ann, ef = 64)"),
    ("misspelled-statement", "SERCH docs MATCHING 'x'", "did you mean 'SEARCH'?"),
    ("not-a-statement", "SELECT * FROM docs", "statements start with SEARCH"),
    ("no-separator", "SHOW COLLECTIONS SHOW SESSIONS", "separate statements with ';'"),
    ("glued-number", "SEARCH d MATCHING 'x' LIMIT5", "put a space after LIMIT: LIMIT 5"),
    ("glued-unit", "SEARCH d MATCHING 'x' WITH RECENCY (half_life = 30DAYS)", "30 DAYS"),
    ("unquoted-text", "SEARCH d MATCHING backup", "MATCHING 'backup'"),
    ("as-of-string", "SEARCH d MATCHING 'x' AS OF '2025-01-01'", "AS OF TIMESTAMP '2025-01-01'"),
    ("vector-brackets", "SEARCH d NEAR [0.1, 0.2]", "a vector is only ever a parameter"),
    ("double-equals", "SEARCH d MATCHING 'x' WHERE a == 1", "single '='"),
    ("bang", "SEARCH d MATCHING 'x' WHERE a ! 1", "'!='"),
    ("offset-word", "SEARCH d MATCHING 'x' OFFSET some", "OFFSET takes a whole number"),
    ("bare-colon", "SEARCH d MATCHING : q", "name parameters like this: :query"),
    ("duplicate-clause", "SEARCH d MATCHING 'x' LIMIT 1 LIMIT 2", "give each clause once"),
    ("contradiction", "SEARCH d MATCHING 'x' WITH SIGNAL BOOST WITHOUT SIGNAL BOOST",
     "give each clause once"),
    ("duplicate-option", "SEARCH d MATCHING 'x' FUSE RRF (k = 1, K = 2)", "give each option once"),
    ("count-twice", "RETRIEVE 3 FROM d LIMIT 3", "give the count once"),
    ("show-sessions-clause", "SHOW SESSIONS FOR SESSION s",
     "SHOW SESSIONS takes WHERE, LIMIT, OFFSET"),
    ("group-options", "SEARCH d MATCHING 'x' GROUP BY DOCUMENT (budget = 5)",
     "remove the parentheses"),
    ("shape", "SEARCH d MATCHING 'x' WITH RECENCY (shape = gaus)", "did you mean 'GAUSS'?"),
    ("unit-missing", "SEARCH d MATCHING 'x' WITH RECENCY (half_life = 30)", "30 DAYS"),
    ("field-param", "SEARCH d MATCHING 'x' WITH RECENCY (field = :f)", "field = created_at"),
    ("shape-param", "SEARCH d MATCHING 'x' WITH RECENCY (shape = :f)", "shape = EXP"),
    ("explain-twice", "EXPLAIN VERBOSE VERBOSE SEARCH d MATCHING 'x'", "each EXPLAIN option once"),
    ("unterminated-name", 'SEARCH d MATCHING \'x\' WHERE "tag = 1', 'close the name with "'),
    ("empty-name", "SEARCH \"\" MATCHING 'x'", "at least one character"),
    ("digit-name", "SEARCH 9lives MATCHING 'x'", 'double-quote it: "9lives"'),
    ("missing-from", "RETRIEVE 5 docs", "RETRIEVE 5 FROM docs"),
    ("field-as-value", "SEARCH d MATCHING 'x' WHERE a = b", "text values go in single quotes: 'b'"),
    ("explain-show", "EXPLAIN SHOW COLLECTIONS", "EXPLAIN takes a SEARCH or RETRIEVE"),
    # `'it\'s'` hinted "did you mean 'AS'?"; curly quotes pasted from a document had no hint
    ("backslash-quote", "SEARCH d MATCHING 'it\\'s here'",
     "a backslash does not escape a quote; double it: 'it''s'"),
    ("backslash-quote-end", "SEARCH d MATCHING 'x\\' LIMIT 5'",
     "a backslash does not escape a quote; double it: 'it''s'"),
    ("curly-quotes", "SEARCH d MATCHING \u2018backup\u2019", "use straight quotes"),
    ("curly-double-quotes", "SEARCH d MATCHING 'x' WHERE \u201ctag\u201d = 1",
     "use straight quotes"),
    ("show-session-unquoted", "SHOW SESSION s-42", "session ids are string literals: "
     "SHOW SESSION 's-42'"),
    ("show-lineage-unquoted", "SHOW LINEAGE ops-7", "session ids are string literals: "
     "SHOW LINEAGE 'ops-7'"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "hint"), [h[1:] for h in HINTS], ids=[h[0] for h in HINTS])
def test_hints_for_common_mistakes(text: str, hint: str) -> None:
    with pytest.raises(QueryError) as info:
        parse(text)
    assert hint in info.value.hint


@pytest.mark.parametrize(("text", "hint"), [
    ("SHOW SESSIONS MATCHNG", None),                     # SHOW SESSIONS never takes MATCHING
    ("SHOW SESSIONS LIMT 5", "did you mean 'LIMIT'?"),
    ("RETRIEVE 5 FROM docs LIMT 3", None),               # the count is given: no LIMIT
    ("SEARCH docs LIMIT 5 MATCHNG 'x'", "did you mean 'MATCHING'?"),  # out of order, spelt
])
def test_a_misspelt_keyword_is_matched_to_the_clauses_the_statement_takes(text, hint):
    with pytest.raises(QueryError) as info:
        parse(text)
    assert info.value.hint == hint


VALUE_CHECKS = [
    ("weight", "SEARCH d MATCHING 'x' WITH RECENCY (weight = -1)", "weight", "-1"),
    ("weight-float", "SEARCH d MATCHING 'x' WITH RECENCY (weight = -0.5)", "weight", "-0.5"),
    ("half-life-zero", "SEARCH d MATCHING 'x' WITH RECENCY (half_life = 0 DAYS)", "half_life",
     "0 DAYS"),
    ("half-life-negative", "SEARCH d MATCHING 'x' WITH RECENCY (half_life = -2 HOURS)",
     "half_life", "-2 HOURS"),
    ("limit-zero", "SEARCH d MATCHING 'x' LIMIT 0", "LIMIT", "0"),
    ("limit-negative", "SEARCH d MATCHING 'x' LIMIT -3", "LIMIT", "-3"),
    ("offset-negative", "SEARCH d MATCHING 'x' LIMIT 3 OFFSET -1", "OFFSET", "-1"),
    ("rrf-k-zero", "SEARCH d MATCHING 'x' FUSE RRF (k = 0)", "RRF k", "0"),
    ("rrf-k-negative", "SEARCH d MATCHING 'x' FUSE RRF (k = -60.0)", "RRF k", "-60.0"),
    ("keywords", "SEARCH d MATCHING 'x' WITH SESSION BOOST (keywords = -0.1)", "keywords", "-0.1"),
    ("velocity", "SEARCH d MATCHING 'x' WITH SESSION BOOST (velocity = -1)", "velocity", "-1"),
    ("entities", "SEARCH d MATCHING 'x' WITH SESSION BOOST (entities = -2)", "entities", "-2"),
    ("budget", "SEARCH m MATCHING 'x' GROUP BY CONVERSATION (budget = 0)", "budget", "0"),
    ("retrieve-zero", "RETRIEVE 0 FROM docs", "RETRIEVE count", "0"),
    ("empty-text", "SEARCH d MATCHING ''", "MATCHING text", "''"),
    ("empty-session", "SEARCH d MATCHING 'x' FOR SESSION ''", "session id", "''"),
    ("weight-string", "SEARCH d MATCHING 'x' WITH RECENCY (weight = 'high')", "weight", "'high'"),
    ("limit-show", "SHOW SESSIONS LIMIT 0", "LIMIT", "0"),
    ("like-number", "SEARCH d MATCHING 'x' WHERE a LIKE 5", "LIKE pattern", "5"),
    ("shape-value", "SEARCH d MATCHING 'x' WITH RECENCY (shape = 3)", "shape", "3"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "name", "token"), [v[1:] for v in VALUE_CHECKS], ids=[v[0] for v in VALUE_CHECKS]
)
def test_invalid_values_name_the_parameter_with_a_caret(text: str, name: str, token: str) -> None:
    with pytest.raises(QuerySemanticError) as info:
        parse(text)
    err = info.value
    assert err.message.startswith(name)
    start, end = err.span
    assert text[start:end] == token
    caret_line = str(err).splitlines()[3]
    assert caret_line == "  " + " " * start + "^" * (end - start)


# One rule for every option value (docs/language.md, Errors): a value the grammar reads but
# the clause does not take — out of range, or a name not among the clause's choices — is a
# QuerySemanticError with the caret under the value and a did-you-mean where one is close.
# `normalization = zscore` and the USING method / ef were QuerySyntaxErrors, unlike
# `shape = CUBIC` and `LIMIT 0`.
OPTION_VALUES = [
    ("normalization-unknown", "SEARCH d MATCHING 'x' FUSE CONVEX (normalization = zscore)",
     "zscore", "normalization takes a name, minmax or tmm, not zscore", "minmax: "),
    ("normalization-typo", "SEARCH d MATCHING 'x' FUSE CONVEX (normalization = minmx)",
     "minmx", "normalization takes a name, minmax or tmm, not minmx", "did you mean 'minmax'?"),
    ("normalization-number", "SEARCH d MATCHING 'x' FUSE CONVEX (normalization = 3)", "3",
     "normalization takes a name, minmax or tmm, not 3", "minmax: "),
    ("normalization-parameter", "SEARCH d MATCHING 'x' FUSE CONVEX (normalization = :n)", ":n",
     "normalization takes a name, minmax or tmm, not a parameter", "minmax: "),
    ("ef-high", "SEARCH d MATCHING 'x' USING SEMANTIC (ann, ef = 100001)", "100001",
     "ef = 100001 is out of range", "ef is the HNSW candidate list: 1 … 100,000"),
    ("ef-zero", "SEARCH d MATCHING 'x' USING HYBRID (ann, ef = 0)", "0",
     "ef = 0 is out of range", "ef is the HNSW candidate list: 1 … 100,000"),
    ("method-typo", "SEARCH d MATCHING 'x' USING SEMANTIC (exakt)", "exakt",
     "unknown semantic search method 'exakt'", "did you mean 'exact'?"),
    ("shape-unknown", "SEARCH d MATCHING 'x' WITH RECENCY (shape = CUBIC)", "CUBIC",
     "shape must be EXP, GAUSS or LINEAR, found CUBIC", None),
    ("shape-typo", "SEARCH d MATCHING 'x' WITH RECENCY (shape = GAUS)", "GAUS",
     "shape must be EXP, GAUSS or LINEAR, found GAUS", "did you mean 'GAUSS'?"),
    ("normalization-string", "SEARCH d MATCHING 'x' FUSE CONVEX (normalization = 'TMM')",
     "'TMM'", "normalization takes a name, minmax or tmm, not 'TMM'",
     "write the name without quotes: normalization = tmm"),
    ("shape-string", "SEARCH d MATCHING 'x' WITH RECENCY (shape = 'gauss')", "'gauss'",
     "shape must be EXP, GAUSS or LINEAR, found 'gauss'",
     "write the name without quotes: shape = GAUSS"),
    ("alpha", "SEARCH d MATCHING 'x' FUSE CONVEX (alpha = 1.5)", "1.5",
     "alpha must be between 0 and 1, got 1.5", None),
    ("window", "SEARCH d MATCHING 'x' FUSE RRF (window = 0)", "0",
     "window must be at least 1, got 0", "window is how many candidates each leg returns"),
    ("leg-weight", "SEARCH d MATCHING 'x' FUSE RRF (weights = (lexical = -1))", "-1",
     "FUSE weight must not be negative, got -1", "leg weights are numbers >= 0"),
    ("context", "SEARCH d MATCHING 'x' WITH CONTEXT (after = -1)", "-1",
     "after must not be negative, got -1", None),
    ("limit", "SEARCH d MATCHING 'x' LIMIT 0", "0", "LIMIT must be at least 1, got 0",
     "LIMIT takes a positive whole number"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "token", "message", "hint"), [v[1:] for v in OPTION_VALUES],
                         ids=[v[0] for v in OPTION_VALUES])
def test_option_values_follow_one_rule(text: str, token: str, message: str,
                                       hint: str | None) -> None:
    with pytest.raises(QueryError) as info:
        parse(text)
    err = info.value
    assert (type(err), err.message) == (QuerySemanticError, message)
    start, end = err.span
    assert text[start:end] == token
    assert str(err).splitlines()[3] == "  " + " " * start + "^" * (end - start)
    assert err.hint == hint if hint is None else err.hint.startswith(hint)


@pytest.mark.parametrize(("text", "message"), [
    ("SEARCH d MATCHING 'x' USING SEMANTIC (exact, ef = 10)", "ef applies to (ann), not (exact)"),
    ("SEARCH d MATCHING 'x' USING SEMANTIC (ann, eff = 10)", "unknown semantic search option"),
    ("SEARCH d MATCHING 'x' USING LEXICAL (exact)", "USING LEXICAL has no semantic leg"),
    ("SEARCH d MATCHING 'x' FUSE RRF (alpha = 0.5)", "option 'alpha' is for FUSE CONVEX"),
    ("SEARCH d MATCHING 'x' FUSE CONVEX (normalisation = tmm)", "unknown option"),
], ids=["ef-with-exact", "option-name", "lexical-method", "option-of-other-method",
        "option-name-typo"])  # fmt: skip
def test_option_names_and_places_stay_syntax_errors(text: str, message: str) -> None:
    """An option name the clause does not know, or an option in a clause that does not take
    it, is structure: `QuerySyntaxError`."""
    with pytest.raises(QuerySyntaxError, match=re.escape(message)):
        parse(text)


@pytest.mark.parametrize(
    "text",
    ["SEARCH d MATCHING 'x' WITH RECENCY (weight = 0)", "SEARCH d MATCHING 'x' LIMIT 1 OFFSET 0",
     "SEARCH d MATCHING 'x' WITH SIGNAL BOOST (dislike = -0.5)", "SEARCH d MATCHING ' '",
     "SEARCH d MATCHING 'x' FUSE RRF (k = 0.5)",
     "SEARCH d MATCHING 'x' WHERE a = -9223372036854775808",
     "SEARCH d MATCHING 'x' WHERE a = 9223372036854775807"],
    ids=["weight-zero", "offset-zero", "negative-signal-weight", "blank-text", "small-k",
         "int64-min", "int64-max"],
)  # fmt: skip
def test_boundary_values_are_accepted(text: str) -> None:
    assert parse(text).to_text() == text


@pytest.mark.parametrize(
    ("text", "message"),
    [("SEARCH d MATCHING 'x' LIMIT 9223372036854775808", "whole number out of range"),
     ("SEARCH d MATCHING 'x' WHERE a = -9223372036854775809", "whole number out of range"),
     ("SEARCH d MATCHING 'x' WHERE a = 1e400", "number out of range"),
     ("SEARCH d MATCHING 'x' WHERE " + "NOT " * 100 + "a = 1", "nested more than 64 levels")],
    ids=["int64", "below-int64", "float", "nesting"],
)  # fmt: skip
def test_limits(text: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError, match=message):
        parse(text)


# ---- the error classes ------------------------------------------------------------------


def test_hierarchy() -> None:
    for cls in (QuerySyntaxError, QuerySemanticError, ParameterError):
        assert issubclass(cls, QueryError)
    assert issubclass(QueryError, ValueError)


def test_engine_can_raise_a_semantic_error_with_a_caret() -> None:
    text = "SEARCH dcos MATCHING 'x'"
    stmt = parse(text)
    err = QuerySemanticError("unknown collection 'dcos'", text=stmt.source,
                             span=stmt.collection.span, hint="did you mean 'docs'?")  # fmt: skip
    assert str(err) == (
        "QuerySemanticError: unknown collection 'dcos' (line 1, column 8)\n\n"
        "  SEARCH dcos MATCHING 'x'\n"
        "         ^^^^\n"
        "  hint: did you mean 'docs'?"
    )
    assert (err.line, err.column, err.expected) == (1, 8, [])


def test_error_without_location_renders_message_and_hint() -> None:
    err = ParameterError("unexpected parameter :x", hint="remove it")
    assert str(err) == "ParameterError: unexpected parameter :x\n\n  hint: remove it"
    assert err.line is None and err.column is None


def test_caret_is_clipped_to_the_line_and_tabs_are_kept() -> None:
    err = QuerySyntaxError("m", text="a\tb c\nnext", span=(2, 9))
    assert str(err).splitlines()[2:] == ["  a\tb c", "   \t^^^"]


@pytest.mark.parametrize("column", [5, 150, 395], ids=["start", "middle", "end"])
def test_long_lines_are_cut_around_the_caret(column: int) -> None:
    text = "x" * 400
    err = QuerySyntaxError("m", text=text[: column - 1] + "#" + text[column:],
                           span=(column - 1, column))  # fmt: skip
    shown, caret = str(err).splitlines()[2:4]
    assert len(shown) <= 2 + 100 + 2
    assert shown[caret.index("^")] == "#"


@pytest.mark.parametrize("filler", ["日本語", "😀", "\x1b", "e\u0301", "\t"],
                         ids=["cjk", "emoji", "escape", "combining", "tab"])
def test_long_lines_are_cut_by_terminal_columns(filler: str) -> None:
    """Was: the cut counted characters, so 100 CJK characters (200 columns) or escapes
    (`\x1b`: 4 columns each) made an excerpt that wraps in a terminal, where the caret no
    longer stands under its token; a cut could also start with a lone combining mark."""
    text = "SEARCH d MATCHING '" + filler * 150 + "' LIMIT ten"
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    shown, caret = str(info.value).splitlines()[2:4]
    expanded = shown.expandtabs(8)
    assert wcwidth.wcswidth(expanded) <= 2 + 100 + 2
    column = caret.expandtabs(8).index("^")
    assert wcwidth.wcswidth(expanded[:expanded.index("ten")]) == column
    assert caret.endswith("^^^") and unicodedata.combining(shown[3]) == 0  # "  …" then a base


def test_errors_pickle() -> None:
    err = QuerySyntaxError("bad", text="x y", span=(2, 3), expected=["a name"], hint="h")
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is QuerySyntaxError and str(copy) == str(err)
    assert copy.expected == ["a name"]


LARK_NAME = re.compile(r"^(__ANON|\$END|NAME$|QUOTED_NAME$|STRING$|INT$|FLOAT$|PARAM$|QMARK$|LPAR$"
                       r"|RPAR$|COMMA$|SEMI$|EQ$|NE$|LT$|LE$|GT$|GE$)")  # fmt: skip


@pytest.mark.parametrize("text", [g[1] for g in GOLDEN] + [h[1] for h in HINTS])
def test_expected_uses_friendly_names(text: str) -> None:
    with pytest.raises(QueryError) as info:
        parse(text)
    for name in info.value.expected:
        assert not LARK_NAME.match(name), name
    assert not re.search(r"__ANON|\$END|\bQUOTED_NAME\b|\bQMARK\b|\bLPAR\b", str(info.value))


def test_control_characters_of_the_text_are_escaped_in_the_message() -> None:
    """Was: the excerpt (and a quoted value in the message) carried ESC and NUL raw, so
    printing an error to a terminal obeyed them (here: switch to red); and a CJK or emoji
    text put the caret one column left per wide character (see the golden cases)."""
    text = "SEARCH docs MATCHING 'a\x1b[31m\x00' LIMIT ten"
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert str(info.value) == (
        "QuerySyntaxError: expected a whole number or a parameter after LIMIT, found 'ten' "
        "(line 1, column 38)\n"
        "\n"
        "  SEARCH docs MATCHING 'a\\x1b[31m\\x00' LIMIT ten\n"
        "                                             ^^^\n"
        "  hint: LIMIT takes a positive whole number, e.g. LIMIT 10")
    assert info.value.text == text and info.value.column == 38
    error = QuerySemanticError("no session 'a\x1b]0;title\x07'", text="SHOW SESSION :s",
                               span=(13, 15))
    assert str(error).splitlines()[0] == ("QuerySemanticError: no session "
                                          "'a\\x1b]0;title\\x07' (line 1, column 14)")
