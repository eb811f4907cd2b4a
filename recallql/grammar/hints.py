"""Hints for common mistakes, chosen from the token found, what was expected and what came before.

Each rule is a small function returning a hint or None; the first rule that answers wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lark import Token

from recallql.grammar.keywords import KEYWORDS, NON_RESERVED, RESERVED, STATEMENT_KEYWORDS
from recallql.grammar.suggest import did_you_mean

__all__ = ["for_token", "for_character"]

_UNITS = ("DAYS", "DAY", "HOURS", "HOUR", "MINUTES", "MINUTE", "SECONDS", "SECOND")
_NAMES = NON_RESERVED | {"NAME"}
_NUMBER_WORD = re.compile(r"[+-]?[0-9.][A-Za-z0-9_.]*")

Rule = Callable[[Token, set[str], "Token | None", list[Token]], "str | None"]


_BACKSLASH = "a backslash does not escape a quote; double it: 'it''s'"
#: Typographic quotes (pasted from a document or chat), mistaken for ' and ".
_CURLY = "\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2032\u2033"


def _backslash(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if prev is not None and prev.type == "STRING" and str(prev).endswith("\\'"):
        return _BACKSLASH  # 'it\'s': the string ended at the quote after the backslash
    return None


def _double_quotes(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if token.type == "QUOTED_NAME" and "STRING" in expected:
        return "strings use single quotes; double quotes are for identifiers"
    return None


def _glued(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if token.type != "NAME":
        return None
    word = token.upper()
    for keyword in sorted((k for k in expected if k in KEYWORDS), key=len, reverse=True):
        rest = word[len(keyword) :]
        if word.startswith(keyword) and rest and (rest in KEYWORDS or rest.isdigit()):
            return (
                f"keywords are whole words; put a space after {keyword}: "
                f"{keyword} {token[len(keyword) :]}"
            )
    return None


def _reserved(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if token.type in RESERVED and "NAME" in expected:
        return f'{token.type} is a reserved word; to use it as a name, double-quote it: "{token}"'
    return None


def _count(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if prev is not None and prev.type == "LIMIT":
        return "LIMIT takes a positive whole number, e.g. LIMIT 10"
    if prev is not None and prev.type == "OFFSET":
        return "OFFSET takes a whole number >= 0, e.g. OFFSET 20"
    return None


def _vector(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if prev is not None and prev.type == "NEAR":
        return "a vector is only ever a parameter: NEAR :v, bound to a list or array of numbers"
    return None


def _as_of(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if prev is not None and prev.type == "OF" and token.type == "STRING":
        return f"write AS OF TIMESTAMP {token}"
    return None


def _missing_matching(
    token: Token, expected: set[str], prev: Token | None, previous: list[Token]
) -> str | None:
    if token.type != "STRING" or "MATCHING" not in expected:
        return None
    if len(previous) >= 2 and previous[-2].type in ("SEARCH", "FROM"):
        return f"put MATCHING before the text: {previous[-2]} {previous[-1]} MATCHING {token}"
    return None


def _matching_text(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if prev is None or prev.type != "MATCHING" or token.type == "$END":
        return None
    if token.type in ("NAME", "INT", "FLOAT") or token.type in KEYWORDS:
        return f"put the text in single quotes: MATCHING '{token}'"
    return "MATCHING takes text in single quotes, e.g. MATCHING 'backup policy'"


def _missing_from(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if "FROM" in expected and "NAME" not in expected and token.type in _NAMES:
        head = f"RETRIEVE {prev}" if prev is not None and prev.type != "RETRIEVE" else "RETRIEVE"
        return f"put FROM before the collection: {head} FROM {token}"
    return None


def _unquoted_value(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if "STRING" in expected and "NAME" not in expected and token.type in _NAMES:
        return (
            f"text values go in single quotes: '{token}' (a field cannot be compared with a field)"
        )
    return None


def _unquoted_session(
    token: Token, expected: set[str], prev: Token | None, previous: list[Token]
) -> str | None:
    """``FOR SESSION s-42``: the id lexes as a name and a number, and the parser stops at the
    number; say that session ids are string literals, with the whole id quoted."""
    if prev is None or len(previous) < 3 or token.type == "$END" or \
            prev.end_pos != token.start_pos or prev.type not in _NAMES | {"INT"}:
        return None
    head = (previous[-3].type, previous[-2].type)
    if head not in (("FOR", "SESSION"), ("SHOW", "SESSION"), ("SHOW", "LINEAGE")):
        return None
    quoted = f"{prev}{token}".replace("'", "''")
    return f"session ids are string literals: {' '.join(head)} '{quoted}'"


def _double_equals(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if token.type == "EQ" and prev is not None and prev.type == "EQ":
        return "compare with a single '='"
    return None


def _statement_start(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if token.type in STATEMENT_KEYWORDS and "SEMI" in expected:
        return "separate statements with ';'"
    if token.type in STATEMENT_KEYWORDS and "ANALYZE" in expected:
        return "EXPLAIN takes a SEARCH or RETRIEVE statement"
    if "SEARCH" in expected and token.type != "$END":
        close = (did_you_mean(str(token), sorted(STATEMENT_KEYWORDS), listing=False)
                 if token.type == "NAME" else None)
        return close or "statements start with SEARCH, RETRIEVE, EXPLAIN, SHOW or DESCRIBE"
    return None


def _misspelled(token: Token, expected: set[str], prev: Token | None, _: list) -> str | None:
    if token.type != "NAME":
        return None
    return did_you_mean(str(token), sorted(k for k in expected if k in KEYWORDS), listing=False)


def _using_method(token: Token, expected: set[str], prev: Token | None,
                  previous: list[Token]) -> str | None:
    """``USING SEMANTIC (k = 1)``: the parentheses hold a method first, then its option."""
    if len(previous) < 3 or previous[-2].type != "LPAR" or previous[-3].type not in (
            "HYBRID", "LEXICAL", "SEMANTIC") or token.type != "EQ":
        return None
    return ("the parentheses after USING hold a method first: (exact), (ann) or "
            "(ann, ef = 64)")


_RULES: tuple[Rule, ...] = (
    _using_method,
    _backslash,
    _double_quotes,
    _glued,
    _reserved,
    _count,
    _vector,
    _as_of,
    _missing_matching,
    _matching_text,
    _missing_from,
    _unquoted_value,
    _unquoted_session,
    _double_equals,
    _statement_start,
    _misspelled,
)


def for_token(
    token: Token, expected: set[str], prev: Token | None, previous: list[Token]
) -> str | None:
    """The hint for an unexpected token, or None.

    Args:
        token: the token found (type ``$END`` at end of input).
        expected: lark terminal names the parser would have accepted.
        prev: the token before ``token`` (None at the start).
        previous: every token before ``token``.
    """
    for rule in _RULES:
        hint = rule(token, expected, prev, previous)
        if hint:
            return hint
    return None


def for_character(text: str, pos: int, prev: Token | None) -> tuple[str, int, str | None] | None:
    """Message, caret width and hint for a character the lexer cannot start a token with.

    Returns None when the generic "unexpected character" message fits best.
    """
    char = text[pos]
    line_end = text.find("\n", pos)
    rest_of_line = (len(text) if line_end < 0 else line_end) - pos
    if char == "'":
        return (
            "unterminated string literal",
            rest_of_line,
            _BACKSLASH if "\\'" in text[:pos] else
            "close the string with '; to put a quote inside a string, double it: 'it''s'",
        )
    if char in _CURLY:
        return (
            f"unexpected character {char!r} (a typographic quote)",
            1,
            "use straight quotes: 'text' for strings, \"name\" for names",
        )
    if char == '"':
        return (
            "unterminated quoted name",
            rest_of_line,
            'close the name with "; to put a double quote inside it, double it: "a""b"',
        )
    number = _NUMBER_WORD.match(text, pos)
    if number and any(c.isdigit() for c in number.group()):
        return _bad_number(number.group())
    if char == "[" or (prev is not None and prev.type == "NEAR"):
        return (
            f"unexpected character {char!r}",
            1,
            "a vector is only ever a parameter: NEAR :v, bound to a list or array of numbers",
        )
    if char == ":":
        return ("':' must start a parameter name", 1, "name parameters like this: :query")
    if char == "!":
        return ("unexpected character '!'", 1, "did you mean '!='?")
    if char == "`":
        return ("unexpected character '`'", 1, 'quote names with double quotes: "my field"')
    if char.isdecimal():  # a digit of another script: full-width ３, Arabic-Indic ٣, ...
        return (f"unexpected character {char!r} (the digit {int(char)} of another script)", 1,
                "write numbers with the ASCII digits 0-9")
    return None


def _bad_number(word: str) -> tuple[str, int, str | None]:
    digits = re.match(r"[+-]?[0-9.]+", word)
    tail = word[digits.end() :] if digits else ""
    if tail.upper() in _UNITS:
        hint = f"put a space between the number and the unit: {word[: -len(tail)]} {tail}"
    elif tail and tail.upper() in KEYWORDS:
        hint = f"put a space between the number and {tail.upper()}"
    elif tail:
        hint = 'a name cannot start with a digit; double-quote it: "' + word + '"'
    else:
        hint = None
    return (f"invalid number or name {word!r}", len(word), hint)
