"""Translate lark's parse errors into :class:`QuerySyntaxError` with friendly wording.

Lark reports terminal names (``NAME``, ``INT``, ``$END``); users read "a collection name",
"a whole number", "end of input". The previous token (found by re-lexing, which only happens
on the error path) gives the context: "expected a whole number after LIMIT". Hints for common
mistakes are in ``hints.py``. An end-of-input error puts the caret just after the last token.
"""

from __future__ import annotations

import re

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from recallql.grammar import hints
from recallql.grammar.errors import QuerySyntaxError
from recallql.grammar.keywords import KEYWORDS, NON_RESERVED
from recallql.grammar.lalr import lark_parser

__all__ = ["syntax_error", "describe_expected", "describe_found"]

IDENT_TERMINALS = frozenset({"NAME", "QUOTED_NAME"}) | NON_RESERVED
VALUE_TERMINALS = frozenset({"STRING", "INT", "FLOAT", "TRUE", "FALSE", "NULL", "TIMESTAMP"})
PARAM_TERMINALS = frozenset({"PARAM", "QMARK"})
OP_TERMINALS = frozenset({"EQ", "NE", "LT", "LE", "GT", "GE"})
PUNCTUATION = {
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "SEMI": "';'",
    "EQ": "'='",
    "NE": "'!='",
    "LT": "'<'",
    "LE": "'<='",
    "GT": "'>'",
    "GE": "'>='",
    "QMARK": "'?'",
}
PHRASES = {"FOR": "FOR SESSION", "GROUP": "GROUP BY", "AS": "AS OF"}
UNIT_TERMINALS = frozenset(
    {"DAYS", "DAY", "HOURS", "HOUR", "MINUTES", "MINUTE", "SECONDS", "SECOND"}
)

# Display order of keywords in "expected" lists: statements, then clauses in clause order.
_ORDER_TEXT = """
SEARCH RETRIEVE EXPLAIN SHOW DESCRIBE ANALYZE VERBOSE FORMAT TEXT JSON COLLECTIONS
SESSIONS SESSION LINEAGE FROM MATCHING USING HYBRID LEXICAL SEMANTIC NEAR WHERE NOT IN
BETWEEN LIKE CONTAINS IS AND OR NULL FOR WITH WITHOUT RECENCY SIGNAL BOOST CONTEXT FUSE RRF CONVEX
GROUP BY DOCUMENT CONVERSATION AS OF TIMESTAMP LIMIT OFFSET DAYS DAY HOURS HOUR MINUTES
MINUTE SECONDS SECOND TRUE FALSE
"""
_RANK = {name: rank for rank, name in enumerate(_ORDER_TEXT.split())}
_PUNCT_ORDER = ("EQ", "NE", "LT", "LE", "GT", "GE", "LPAR", "COMMA", "RPAR", "SEMI")


def syntax_error(exc: UnexpectedInput, text: str) -> QuerySyntaxError:
    """The :class:`QuerySyntaxError` for a lark parse error on ``text``."""
    if isinstance(exc, UnexpectedToken):
        return _unexpected_token(exc, text)
    if isinstance(exc, UnexpectedCharacters):
        return _unexpected_character(exc, text)
    end = len(text)  # UnexpectedEOF: not raised by the LALR parser; kept for safety
    return QuerySyntaxError("unexpected end of input", text=text, span=(end, end))


def _replay(text: str, pos: int) -> tuple[list[Token], set[str]]:
    """Re-parse ``text`` up to offset ``pos``: the tokens before it and what could come next.

    Computing "expected" from the state where lark failed is imprecise: an LALR parser may
    reduce on a lookahead before noticing it does not fit, and a state's action table lists
    terminals that only fit in other contexts. Replaying the tokens before the error and
    asking the interactive parser what it accepts (it tries each terminal on a copy) is exact.
    Only the error path pays for it.
    """
    interactive = lark_parser().parse_interactive(text)
    tokens: list[Token] = []
    try:
        for token in interactive.iter_parse():
            if (token.start_pos or 0) >= pos:
                break
            tokens.append(token)
    except UnexpectedInput:
        pass  # the lexer stops at the bad character itself
    return tokens, set(interactive.accepts())


def _unexpected_token(exc: UnexpectedToken, text: str) -> QuerySyntaxError:
    token: Token = exc.token
    if token.type == "$END":
        end = token.end_pos if token.end_pos is not None else 0
        span = (end, end)
        previous, expected = _replay(text, len(text) + 1)
    else:
        start = token.start_pos or 0  # lark sets both on every lexed token
        span = (start, token.end_pos or start)
        previous, expected = _replay(text, start)
    prev = previous[-1] if previous else None
    names = describe_expected(_clauses_left(expected, previous), prev)
    message = f"expected {join_or(names)}{_after(prev)}, found {describe_found(token)}"
    hint = hints.for_token(token, _clauses_taken(expected, previous), prev, previous)
    return QuerySyntaxError(message, text=text, span=span, expected=names, hint=hint)


def _unexpected_character(exc: UnexpectedCharacters, text: str) -> QuerySyntaxError:
    pos = exc.pos_in_stream or 0  # always set when the lexer raises
    previous, expected = _replay(text, pos)
    prev = previous[-1] if previous else None
    special = hints.for_character(text, pos, prev)
    if special is not None:
        message, width, hint = special
        return QuerySyntaxError(message, text=text, span=(pos, pos + width), hint=hint)
    names = describe_expected(_clauses_left(expected, previous), prev)
    message = f"expected {join_or(names)}{_after(prev)}, found unexpected character {text[pos]!r}"
    return QuerySyntaxError(message, text=text, span=(pos, pos + 1), expected=names)


#: The keyword that opens each clause, with its place in the clause order (clauses.py); the
#: boosts (WITH, WITHOUT) share a place and may repeat. These words open nothing else.
_CLAUSE_RANK = {"MATCHING": 0, "USING": 1, "NEAR": 2, "WHERE": 3, "FOR": 4, "WITH": 5,
                "WITHOUT": 5, "FUSE": 6, "GROUP": 7, "AS": 8, "LIMIT": 9, "OFFSET": 10}
_SHOW_SESSIONS_CLAUSES = frozenset({"WHERE", "LIMIT", "OFFSET"})


def _clauses_left(expected: set[str], previous: list[Token]) -> set[str]:
    """`expected` without the clauses that cannot come next in the statement being parsed.

    The grammar takes clauses in any order (the transformer names a misplaced one), so the
    parser accepts every clause keyword after each clause; "expected MATCHING, USING, ...
    after LIMIT 5" would be wrong. Only clauses after the furthest one written (and another
    boost after a boost) remain; SHOW SESSIONS takes WHERE, LIMIT, OFFSET; `RETRIEVE n` no
    LIMIT.
    """
    tokens = _statement_tokens(previous)
    ranks = [_CLAUSE_RANK[t] for t in tokens if t in _CLAUSE_RANK]
    last = max(ranks, default=-1)
    return {name for name in _clauses_taken(expected, previous)
            if name not in _CLAUSE_RANK or _CLAUSE_RANK[name] > last
            or (_CLAUSE_RANK[name] == last and name in ("WITH", "WITHOUT"))}


def _statement_tokens(previous: list[Token]) -> list[str]:
    """The token types of the statement being parsed (after the last ``;``)."""
    start = max((i + 1 for i, t in enumerate(previous) if t.type == "SEMI"), default=0)
    return [t.type for t in previous[start:]]


def _clauses_taken(expected: set[str], previous: list[Token]) -> set[str]:
    """`expected` without the clauses the statement being parsed never takes (SHOW SESSIONS
    takes WHERE, LIMIT, OFFSET; `RETRIEVE n` no LIMIT), in any order: what a misspelt
    keyword may be (a clause out of order is named by the transformer once it is spelt)."""
    tokens = _statement_tokens(previous)
    left = set(expected)
    if tokens[:2] == ["SHOW", "SESSIONS"]:
        left -= set(_CLAUSE_RANK) - _SHOW_SESSIONS_CLAUSES
    if "RETRIEVE" in tokens:
        at = tokens.index("RETRIEVE") + 1
        if at < len(tokens) and tokens[at] != "FROM":
            left.discard("LIMIT")
    return left


def _after(prev: Token | None) -> str:
    if prev is None:
        return ""
    if prev.type in KEYWORDS:
        return f" after {prev.type}"
    if prev.type in PUNCTUATION:
        return f" after {PUNCTUATION[prev.type]}"
    return ""


def join_or(names: list[str]) -> str:
    """``['a', 'b', 'c']`` -> ``'a, b or c'``."""
    if len(names) <= 1:
        return "".join(names) or "nothing"
    return ", ".join(names[:-1]) + " or " + names[-1]


def describe_found(token: Token) -> str:
    """How a message names the token that was found."""
    if token.type == "$END":
        return "end of input"
    if token.type in KEYWORDS:
        return token.type
    if token.type == "STRING":
        return f"the string {_clip(token)}"
    if token.type == "QUOTED_NAME":
        return f"the quoted name {_clip(token)}"
    return f"'{_clip(token)}'"


def _clip(value: str, limit: int = 40) -> str:
    value = re.sub(r"\s+", " ", value)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def describe_expected(expected: set[str], prev: Token | None) -> list[str]:
    """Friendly names for a set of lark terminal names, in a stable order.

    Args:
        expected: terminal names the parser would accept.
        prev: the token before the error (context for naming identifiers), or None.
    """
    rest = set(expected)
    names: list[str] = []
    if "NAME" in rest:
        rest -= IDENT_TERMINALS
        role = _ident_role(rest, prev)
        if role == "a session id":
            rest -= {"STRING"} | PARAM_TERMINALS
        names.append(role)
    if rest >= VALUE_TERMINALS:
        rest -= VALUE_TERMINALS
        names.append("a value")
    names.extend(_literal_names(rest))
    if rest & PARAM_TERMINALS:
        rest -= PARAM_TERMINALS
        names.append("a parameter")
    if rest >= OP_TERMINALS:
        rest -= OP_TERMINALS
        names.append("a comparison operator")
    if rest >= UNIT_TERMINALS:
        rest -= UNIT_TERMINALS
        names.append("a time unit (DAYS, HOURS, MINUTES, SECONDS)")
    keywords = sorted((n for n in rest if n in KEYWORDS), key=lambda n: _RANK.get(n, 999))
    names.extend(PHRASES.get(n, n) for n in keywords)
    names.extend(PUNCTUATION[n] for n in _PUNCT_ORDER if n in rest)
    if "$END" in rest:
        names.append("end of input")
    return names


def _literal_names(rest: set[str]) -> list[str]:
    names = []
    if {"INT", "FLOAT"} <= rest:
        names.append("a number")
    elif "INT" in rest:
        names.append("a whole number")
    elif "FLOAT" in rest:
        names.append("a number")
    if "STRING" in rest:
        names.append("a string literal")
    if "TIMESTAMP" in rest:
        names.append("a TIMESTAMP literal")
    rest -= {"INT", "FLOAT", "STRING", "TIMESTAMP"}
    return names


def _ident_role(rest: set[str], prev: Token | None) -> str:
    kind = prev.type if prev is not None else None
    if kind in ("SEARCH", "FROM", "DESCRIBE"):
        return "a collection name"
    if kind in ("SESSION", "LINEAGE"):
        return "a session id"
    if "NOT" in rest:
        return "a field name"
    if kind in ("LPAR", "COMMA"):
        return "an option name"
    return "a name"
