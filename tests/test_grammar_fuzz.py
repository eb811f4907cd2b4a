"""Property tests: bad input only ever raises QueryError subclasses, and every error renders.

Inputs: random text, token soup, and canonical statements mutated by deleting, duplicating,
swapping or replacing tokens, inserting characters and truncating. Whatever parses must print
canonical text that parses back to itself.
"""

from __future__ import annotations

import re
from datetime import UTC
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallql.grammar import QueryError, bind, parse, parse_script
from recallql.grammar.errors import printable
from recallql.grammar.keywords import KEYWORDS

FIXTURE = Path(__file__).parent / "fixtures" / "grammar" / "canonical.sql"
CANONICAL = [line for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[\w.:+-]+|\S")
VOCABULARY = sorted(KEYWORDS) + [
    "(", ")", ",", ";", "=", "!=", "<>", "<", "<=", ">", ">=", "?", ":q", "'x'", "''", '"f"',
    "1", "-1", "0", "2.5", "1e999", "99999999999999999999", "docs", "--", "'", '"', "[", "#",
]  # fmt: skip
LARK_NAME = re.compile(r"__ANON|\$END|^(NAME|QUOTED_NAME|STRING|INT|FLOAT|PARAM|QMARK|LPAR|RPAR"
                       r"|COMMA|SEMI|EQ|NE|LT|LE|GT|GE)$")  # fmt: skip

FUZZ = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_error(err: QueryError, text: str) -> None:
    rendered = str(err)
    # the message keeps the user's characters; its rendering escapes control and bidi ones
    assert rendered.startswith(f"{type(err).__name__}: {printable(err.message)}")
    assert not any(ch in rendered for ch in "\x1b\x00\u202e")
    for name in err.expected:
        assert not LARK_NAME.search(name), name
    if err.message.startswith("expected "):  # other messages may quote the user's values
        assert not LARK_NAME.search(err.message.split(", found")[0])
    if err.span is None:
        return
    start, end = err.span
    assert 0 <= start <= end <= len(text)
    lines = text.split("\n")
    assert 1 <= err.line <= len(lines)
    assert 1 <= err.column <= len(lines[err.line - 1]) + 1
    assert any(line.strip() and set(line.strip()) == {"^"} for line in rendered.split("\n"))


def check_text(text: str) -> None:
    try:
        statements = parse_script(text)
    except QueryError as err:
        check_error(err, text)
        return
    for statement in statements:
        canonical = statement.to_text()
        assert parse(canonical).to_text() == canonical
    try:
        parse(text)
    except QueryError as err:
        assert len(statements) != 1
        check_error(err, text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(CANONICAL))
    tokens = TOKEN.findall(text)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(tokens) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert"]))
        if op == "delete" and len(tokens) > 1:
            del tokens[i]
        elif op == "duplicate":
            tokens.insert(i, tokens[i])
        elif op == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif op == "replace":
            tokens[i] = draw(st.sampled_from(VOCABULARY))
        else:
            tokens.insert(i, draw(st.sampled_from(VOCABULARY)))
    joined = draw(st.sampled_from([" ", "", "\n", " -- c\n"])).join(tokens)
    if draw(st.booleans()):
        position = draw(st.integers(0, len(joined)))
        joined = joined[:position] + draw(st.characters()) + joined[position:]
    if draw(st.booleans()):
        joined = joined[: draw(st.integers(0, len(joined)))]
    return joined


@FUZZ
@given(st.text(max_size=80))
def test_random_text(text: str) -> None:
    check_text(text)


@FUZZ
@given(st.lists(st.sampled_from(VOCABULARY), max_size=14).map(" ".join))
def test_token_soup(text: str) -> None:
    check_text(text)


@FUZZ
@given(mutated())
def test_mutated_canonical_statements(text: str) -> None:
    check_text(text)


WITH_PARAMETERS = [line for line in CANONICAL if ":" in line or "?" in line]
VALUES = st.one_of(
    st.text(max_size=10), st.integers(-(2**65), 2**65), st.floats(), st.booleans(), st.none(),
    st.datetimes(timezones=st.sampled_from([None, UTC])), st.timedeltas(),
    st.lists(st.floats(width=32), max_size=4), st.lists(st.text(max_size=2), max_size=2),
)  # fmt: skip


@FUZZ
@given(st.sampled_from(WITH_PARAMETERS), st.data())
def test_binding_random_values(text: str, data: st.DataObject) -> None:
    statement = parse(text)
    names = {p.name for p in statement.parameters}
    try:
        if None in names:
            args = [data.draw(VALUES) for _ in statement.parameters]
            bound = bind(statement, *args)
        else:
            bound = bind(statement, **{name: data.draw(VALUES) for name in names})
    except QueryError as err:
        check_error(err, text)
        return
    assert bound.parameters == ()
    canonical = bound.to_text()
    assert parse(canonical).to_text() == canonical


def test_fuzz_sources_are_not_trivial() -> None:
    assert len(WITH_PARAMETERS) >= 15
