"""Scanning statement text as the grammar's lexer sees it (strings, quoted identifiers,
comments), without parsing: where statements end and whether the text ends inside a string.
Shared by input handling and completion.

The shell asks after every key (is the input complete? which continuation prompt does each
line get?), so scanning is incremental: `Scanner` keeps the state at the end of the last text
and at each line start, and a text that extends it (typing, an un-bracketed paste) costs only
its new characters. Rescanning the whole buffer per key made a pasted 17k-character statement
quadratic.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Scan", "Scanner", "quote_before_line", "scan"]


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


# modes of the state machine (one character at a time, no lookahead)
_CODE, _QUOTED, _QUOTE_SEEN, _DASH, _COMMENT = range(5)


@dataclass
class _State:
    """The scan state after some prefix: `mode`, the open `quote`, `last` (and `before_dash`,
    `last` before a ``-`` that may start a comment), how many separators and backslashes."""

    mode: int = _CODE
    quote: str = ""
    last: str = ""
    before_dash: str = ""
    separators: int = 0
    backslashes: int = 0

    def copy(self) -> _State:
        return _State(self.mode, self.quote, self.last, self.before_dash, self.separators,
                      self.backslashes)


@dataclass
class _Scanned:
    """A scanned text: the state at its end and before each of its newlines."""

    text: str = ""
    end: _State = field(default_factory=_State)
    separators: list[int] = field(default_factory=list)
    backslashes: list[int] = field(default_factory=list)
    newlines: list[int] = field(default_factory=list)  # offsets of the "\n"
    at_newline: list[_State] = field(default_factory=list)  # the state before each


class Scanner:
    """Incremental `scan`: remembers the last text scanned; a text that shares a prefix with
    it is scanned from the last line start (or the end) inside that prefix. `steps` counts the
    characters stepped through (the work done), for tests.

    Thread-safe (one lock); the shell uses one `Scanner` per process (`scan`).
    """

    def __init__(self) -> None:
        self._done = _Scanned()
        self._lock = threading.Lock()
        self.steps = 0

    def scan(self, text: str) -> Scan:
        """`text` scanned (see `scan`)."""
        with self._lock:
            done = self._update(text)
            end = done.end
            quote = end.quote if end.mode == _QUOTED else ""
            return Scan(done.separators[:end.separators], end.last, bool(quote), quote,
                        tuple(done.backslashes[:end.backslashes]))

    def quote_before_line(self, text: str, line: int) -> str:
        """The quote (``'``, ``"`` or "") the text before line `line` (0-based) of `text` ends
        inside (see `quote_before_line`)."""
        with self._lock:
            done = self._update(text)
            if line <= 0:
                return ""
            state = done.at_newline[line - 1] if line <= len(done.at_newline) else done.end
            return state.quote if state.mode == _QUOTED else ""

    def _update(self, text: str) -> _Scanned:
        done = self._done
        if text == done.text:
            return done
        if text.startswith(done.text):
            start, state = len(done.text), done.end.copy()
        else:
            start, state = self._restart(done, text)
        self._step(done, text, start, state)
        done.text = text
        return done

    @staticmethod
    def _restart(done: _Scanned, text: str) -> tuple[int, _State]:
        """Where to resume for a `text` that differs from the scanned one: the last line start
        in their common prefix (its state), with the lists cut back to it."""
        # the common prefix, found by halving (C-speed comparisons, no Python loop per char)
        low, high = 0, min(len(text), len(done.text))
        while low < high:
            mid = (low + high + 1) // 2
            if text[:mid] == done.text[:mid]:
                low = mid
            else:
                high = mid - 1
        same = low
        line = bisect.bisect_left(done.newlines, same)  # newlines strictly inside the prefix
        del done.newlines[line:], done.at_newline[line:]
        if line:
            start = done.newlines[-1]
            state = done.at_newline[-1].copy()
            done.newlines.pop()
            done.at_newline.pop()
        else:
            start, state = 0, _State()
        del done.separators[state.separators:], done.backslashes[state.backslashes:]
        return start, state

    def _step(self, done: _Scanned, text: str, start: int, s: _State) -> None:
        self.steps += len(text) - start
        for i in range(start, len(text)):
            ch = text[i]
            if ch == "\n":
                done.newlines.append(i)
                done.at_newline.append(s.copy())
            if s.mode == _QUOTE_SEEN:
                if ch == s.quote:  # '' or "" escape
                    s.mode, s.last = _QUOTED, ch
                    continue
                s.mode, s.quote = _CODE, ""
            elif s.mode == _DASH:
                if ch == "-":
                    s.mode, s.last = _COMMENT, s.before_dash
                    continue
                s.mode = _CODE
            if s.mode == _QUOTED:
                s.last = ch
                if ch == s.quote:
                    s.mode = _QUOTE_SEEN
            elif s.mode == _COMMENT:
                if ch == "\n":
                    s.mode = _CODE
            elif ch in "'\"":
                s.mode, s.quote, s.last = _QUOTED, ch, ch
            elif ch == "-":
                s.mode, s.before_dash, s.last = _DASH, s.last, ch
            elif not ch.isspace():
                s.last = ch
                if ch == ";":
                    done.separators.append(i)
                    s.separators += 1
                elif ch == "\\":
                    done.backslashes.append(i)
                    s.backslashes += 1
        done.end = s


_SCANNER = Scanner()


def scan(text: str) -> Scan:
    """Scan statement text the way the grammar's lexer sees it: ``'...'`` strings and
    ``"..."`` identifiers (with doubled quotes inside), ``--`` comments to the end of line.
    Incremental across calls (see `Scanner`)."""
    return _SCANNER.scan(text)


def quote_before_line(text: str, line: int) -> str:
    """The quote the text before line `line` (0-based) of `text` ends inside: ``'`` in a
    string, ``"`` in a quoted identifier, "" otherwise ("" for line 0; past the last line, the
    quote the whole text ends inside).
    Incremental like `scan`: no rescan per line."""
    return _SCANNER.quote_before_line(text, line)
