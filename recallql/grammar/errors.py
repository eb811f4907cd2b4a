"""Errors of the recallql language, rendered with the offending source line and a caret.

Every error a user can cause with query text or parameters is a :class:`QueryError`;
``str(err)`` is the complete message::

    QuerySyntaxError: expected a whole number after LIMIT, found 'ten' (line 1, column 34)

      SEARCH docs MATCHING 'x' LIMIT ten
                                     ^^^
      hint: LIMIT takes a positive whole number, e.g. LIMIT 10

The engine raises :class:`QuerySemanticError` (unknown collection or field) and
:class:`ParameterError` the same way, passing the statement text and the offending node's span::

    raise QuerySemanticError(
        "unknown collection 'dcos'", text=text, span=stmt.collection.span,
        hint="did you mean 'docs'?")
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

import wcwidth

EXCERPT_WIDTH = 100
"""Longest source line shown in full; longer lines are cut around the caret."""

__all__ = ["QueryError", "QuerySyntaxError", "QuerySemanticError", "ParameterError", "locate",
           "printable"]


def locate(text: str, offset: int) -> tuple[int, int]:
    """Return the 1-based ``(line, column)`` of character ``offset`` in ``text``.

    Offsets past the end are clamped to ``len(text)`` (the position just after the last
    character), which is where end-of-input errors point.
    """
    offset = max(0, min(offset, len(text)))
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


class QueryError(ValueError):
    """Root of all query errors: a mistake in query text or in the values bound to it.

    Args:
        message: what is wrong, one line, without the location (it is appended).
        text: the full source text the span refers to ("" when there is none).
        span: ``(start, end)`` character offsets of the offending token in ``text``;
            ``start == end`` marks a position (e.g. end of input). None: no location.
        expected: friendly names of what would have been accepted (``'a whole number'``,
            ``'SESSION'``, ``"')'"``), never lark terminal names.
        hint: an optional suggestion, shown on its own line.

    Attributes:
        message, text, span, expected, hint: as given (``expected`` as a list).
        line, column: 1-based position of ``span.start``, or None without a span.
    """

    def __init__(
        self,
        message: str,
        *,
        text: str = "",
        span: tuple[int, int] | None = None,
        expected: Iterable[str] = (),
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.text = text
        self.span = None if span is None else (int(span[0]), int(span[1]))
        self.expected = list(expected)
        self.hint = hint
        self.line: int | None = None
        self.column: int | None = None
        if self.span is not None:
            self.line, self.column = locate(text, self.span[0])

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self) -> tuple[Any, ...]:
        kwargs = {
            "text": self.text,
            "span": self.span,
            "expected": self.expected,
            "hint": self.hint,
        }
        return (_rebuild, (type(self), self.message, kwargs))

    def render(self) -> str:
        """Render the message, the offending line with a caret under the span, and the hint."""
        head = f"{type(self).__name__}: {printable(self.message)}"
        if self.line is not None:
            head += f" (line {self.line}, column {self.column})"
        parts = [head]
        excerpt = self._excerpt()
        if excerpt:
            parts.append("")
            parts.extend(excerpt)
        if self.hint:
            if not excerpt:
                parts.append("")
            parts.append(f"  hint: {printable(self.hint)}")
        return "\n".join(parts)

    def _excerpt(self) -> list[str]:
        if self.span is None:
            return []
        start = max(0, min(self.span[0], len(self.text)))
        line_start = self.text.rfind("\n", 0, start) + 1
        line_end = self.text.find("\n", start)
        line = self.text[line_start : line_end if line_end >= 0 else len(self.text)].rstrip("\r")
        column = start - line_start
        width = max(1, min(self.span[1], line_start + len(line)) - start)
        line, column, width = _window(line, column, width)
        shown = [_shown(ch) for ch in line]
        pad = "".join("\t" if ch == "\t" else " " * _width(ch) for ch in shown[:column])
        carets = sum(_width(ch) for ch in shown[column : column + width])
        return [f"  {''.join(shown)}", f"  {pad}{'^' * max(1, carets)}"]


#: Bidirectional formatting characters: shown raw they reorder the rest of the excerpt on
#: screen (so the caret points elsewhere) and can disguise the text (CVE-2021-42574).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                  "\u2066\u2067\u2068\u2069")


def _shown(ch: str) -> str:
    """How one character of the source appears in an excerpt: control characters (NUL, ESC,
    which a terminal would obey) and bidi controls as their Python escapes, the rest as is."""
    if ch in "\t\n" or not (unicodedata.category(ch) == "Cc" or ch in _BIDI):
        return ch
    return repr(ch)[1:-1]


#: What `_shown` escapes, as one class: the control characters (category Cc is exactly
#: U+0000–U+001F and U+007F–U+009F) but tab and newline, and the bidi controls.
_ESCAPED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(_BIDI)) + "]")


def printable(message: str) -> str:
    """`message` (which may quote values: a session id, a name, a text) with control and bidi
    characters escaped, as in an error's excerpt, so printing it never drives a terminal
    (ESC sequences) or reorders the line (U+202E). Tabs and newlines stay. One regex scan:
    tables pass every cell of every row through it."""
    return _ESCAPED.sub(lambda found: _shown(found.group(0)), message)


def _width(shown: str) -> int:
    """Terminal columns of a shown character (wcwidth: 2 for CJK and emoji, 0 for combining
    marks and joiners), so the caret stands under its token."""
    width = wcwidth.wcswidth(shown)
    return len(shown) if width < 0 else width


def _window(line: str, column: int, width: int, size: int = EXCERPT_WIDTH) -> tuple[str, int, int]:
    """Cut a long line to about ``size`` terminal columns around the caret, marking cuts with
    '…': columns as shown, so a line of CJK text or escapes does not wrap (a wrapped excerpt
    puts the caret under the wrong place), and a cut never leaves a combining mark without its
    base character."""
    cells = [8 if ch == "\t" else _width(_shown(ch)) for ch in line]  # a tab: at most 8
    if sum(cells) <= size:
        return line, column, width
    width = max(1, min(width, _fits(cells, column, size // 2)))
    left = column - _fits(cells[column - 1 :: -1] if column else [], 0, size // 3)
    while left > 0 and sum(cells[left - 1 :]) <= size:  # near the end: fill the window
        left -= 1
    while 0 < left < column and cells[left] == 0:
        left += 1
    right = left + _fits(cells, left, size)
    shown = ("…" if left else "") + line[left:right] + ("…" if right < len(line) else "")
    return shown, column - left + (1 if left else 0), width


def _fits(cells: list[int], start: int, size: int) -> int:
    """How many characters from `start` fit in `size` columns."""
    used = count = 0
    for cell in cells[start:]:
        if used + cell > size:
            break
        used, count = used + cell, count + 1
    return count


def _rebuild(cls: type[QueryError], message: str, kwargs: dict[str, Any]) -> QueryError:
    return cls(message, **kwargs)


class QuerySyntaxError(QueryError):
    """The text is not a well-formed statement: a bad token, a missing or misplaced clause,
    a duplicate clause or option, an unknown option name, an invalid TIMESTAMP text."""


class QuerySemanticError(QueryError):
    """The statement is well formed but means nothing valid: an out-of-range value
    (``LIMIT 0``, ``weight = -1``), an empty MATCHING text, or (raised by the engine's analyzer)
    an unknown collection or field, with a did-you-mean hint."""


class ParameterError(QueryError):
    """A parameter is missing, unexpected, of the wrong type or out of range, or the statement
    mixes ``?`` and ``:name`` parameters. The caret points at the parameter in the text."""
