"""Scanning statement text as the grammar's lexer sees it (strings, quoted identifiers,
comments), without parsing: where statements end and whether the text ends inside a string.
Shared by input handling and completion."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Scan", "scan"]


class Scan(NamedTuple):
    """What `scan` finds in input text.

    Attributes:
        separators: offsets of the ``;`` that end statements (outside strings, quoted
            identifiers and comments).
        last: the last character outside comments and whitespace ("" if none).
        open_quote: whether the text ends inside a string or quoted identifier.
        quote: the quote it ends inside (``'`` or ``"``; "" when none).
        backslashes: offsets of the ``\\`` outside strings, quoted identifiers and comments
            (where a backslash command starts: the language has no other use for one).
    """

    separators: list[int]
    last: str
    open_quote: bool
    quote: str = ""
    backslashes: tuple[int, ...] = ()


def scan(text: str) -> Scan:
    """Scan statement text the way the grammar's lexer sees it: ``'...'`` strings and
    ``"..."`` identifiers (with doubled quotes inside), ``--`` comments to the end of line."""
    separators, last, quote, i = [], "", "", 0
    backslashes: list[int] = []
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                if text[i + 1:i + 2] == quote:  # '' or "" escape
                    i += 1
                else:
                    quote = ""
            last = ch
        elif ch in "'\"":
            quote, last = ch, ch
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif not ch.isspace():
            last = ch
            if ch == ";":
                separators.append(i)
            elif ch == "\\":
                backslashes.append(i)
        i += 1
    return Scan(separators, last, bool(quote), quote, tuple(backslashes))
