"""Syntax highlighting (a pygments lexer) and completion for the recallql shell.

`RecallQLLexer` follows the token rules of ``recallql/grammar/recallql.lark``: keywords are
case-insensitive whole words, strings are single-quoted with ``''``, identifiers may be
double-quoted, parameters are ``:name`` or ``?``, comments run from ``--`` to the end of line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from pygments.lexer import RegexLexer, words
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Text,
    Whitespace,
)

from recallql.grammar.keywords import KEYWORDS
from recallql.repl.scanning import scan

#: Names that are values of options, not keywords.
SHAPES = ("EXP", "GAUSS", "LINEAR")
#: Option names of the boost, fusion and grouping clauses.
OPTION_NAMES = ("weight", "half_life", "field", "shape", "keywords", "velocity", "entities",
                "reward", "k", "budget")
_KEYWORDS = tuple(sorted(KEYWORDS, key=lambda w: (-len(w), w)))


class RecallQLLexer(RegexLexer):
    """Pygments lexer for recallql statements."""

    name = "recallql"
    aliases = ["recallql", "rql"]
    filenames = ["*.rql"]
    flags = re.IGNORECASE

    tokens = {  # noqa: RUF012 - pygments' class-level table
        "root": [
            (r"\s+", Whitespace),
            (r"--[^\n]*", Comment.Single),
            (r"'(?:[^']|'')*'?", String.Single),
            (r'"(?:[^"]|"")*"?', Name.Variable),
            (r":[A-Za-z_][A-Za-z0-9_]*|\?", Name.Variable.Magic),
            (words(_KEYWORDS, prefix=r"\b", suffix=r"\b"), Keyword),
            (words(SHAPES, prefix=r"\b", suffix=r"\b"), Name.Constant),
            # ASCII digits only, as the grammar reads numbers
            (r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?\b", Number),
            (r"\\[a-z?]+", Keyword.Pseudo),
            (r"<>|!=|<=|>=|[=<>]", Operator),
            (r"[(),;]", Punctuation),
            (r"[A-Za-z_][A-Za-z0-9_]*", Name),
            (r".", Text),
        ],
    }


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_AFTER_COLLECTION_KEYWORD = re.compile(r"\b(?:SEARCH|FROM|DESCRIBE)\s+[A-Za-z_0-9]*$",
                                       re.IGNORECASE)
_COLLECTION_AFTER = re.compile(r"\b(?:SEARCH|FROM|DESCRIBE)\s+([A-Za-z_][A-Za-z0-9_]*)",
                               re.IGNORECASE)
_AFTER_SESSION = re.compile(r"\b(?:FOR\s+SESSION|SHOW\s+SESSION|SHOW\s+LINEAGE)\s+$",
                            re.IGNORECASE)
_AFTER_FIELD_KEYWORD = re.compile(r"(?:\b(?:WHERE|AND|OR|NOT)|\()\s+[A-Za-z_0-9]*$",
                                  re.IGNORECASE)
#: Keyword → what may follow it (completed alone in that position).
_NEXT = {"SHOW": ("COLLECTIONS", "SESSIONS", "SESSION", "LINEAGE"),
         "USING": ("HYBRID", "LEXICAL", "SEMANTIC"),
         "WITH": ("RECENCY", "SESSION", "SIGNAL"), "WITHOUT": ("RECENCY", "SIGNAL"),
         "BY": ("DOCUMENT", "CONVERSATION"), "FOR": ("SESSION",), "FUSE": ("RRF",)}
_AFTER_KEYWORD = re.compile(r"\b(" + "|".join(_NEXT) + r")\s+[A-Za-z]*$", re.IGNORECASE)


def quote_literal(text: str) -> str:
    """`text` as a string literal: single quotes, ``''`` inside."""
    return "'" + text.replace("'", "''") + "'"


class RecallQLCompleter(Completer):
    """Completes by context: nothing inside a string literal or quoted identifier; session ids
    (as string literals) after ``FOR SESSION``, ``SHOW SESSION`` and ``SHOW LINEAGE``;
    collection names after ``SEARCH``, ``FROM`` and ``DESCRIBE``; the statement collection's
    fields after ``WHERE``, ``AND``, ``OR``, ``NOT`` and ``(``; the words a keyword takes after
    ``SHOW``, ``USING``, ``WITH``, ``GROUP BY``, ...; else keywords, fields, option names;
    backslash commands at the start of a line.

    Args:
        catalog: returns ``{collection: [field names]}`` (called per completion, so new
            collections appear).
        commands: the shell's backslash commands (``\\help``, ...).
        sessions: returns session ids (most recent first), or None.
    """

    def __init__(self, catalog: Callable[[], dict[str, list[str]]],
                 commands: Sequence[str] = (),
                 sessions: Callable[[], list[str]] | None = None) -> None:
        self._catalog = catalog
        self._commands = tuple(commands)
        self._sessions = sessions

    def get_completions(self, document: Document, complete_event: CompleteEvent
                        ) -> Iterator[Completion]:
        before = document.text_before_cursor
        line = before.rsplit("\n", 1)[-1]
        if scan(before).open_quote:
            return  # inside a string literal or a quoted identifier: the user's own text
        if line.lstrip().startswith("\\") and " " not in line.strip():
            word = line.strip()
            yield from (Completion(c, -len(word)) for c in self._commands if c.startswith(word))
            return
        if _AFTER_SESSION.search(before) and self._sessions is not None:
            yield from (Completion(quote_literal(s), 0, display=s, display_meta="session")
                        for s in self._sessions())
            return
        match = _WORD.search(before)
        word = match.group(0) if match else ""
        candidates = self._context(before)
        if candidates is None:
            if not word:
                return
            candidates = self._candidates(before)
        yield from self._matches(word, candidates)

    def _context(self, before: str) -> list[str] | None:
        """The only candidates a position allows, or None (anything goes)."""
        if _AFTER_COLLECTION_KEYWORD.search(before):
            return sorted(self._catalog())
        keyword = _AFTER_KEYWORD.search(before)
        if keyword:
            return list(_NEXT[keyword.group(1).upper()])
        if _AFTER_FIELD_KEYWORD.search(before):
            return self._fields(before)
        return None

    def _fields(self, before: str) -> list[str]:
        catalog = self._catalog()
        found = _COLLECTION_AFTER.findall(before)
        current = found[-1] if found and found[-1] in catalog else None
        if current:
            return list(catalog[current])
        return sorted({f for fs in catalog.values() for f in fs})

    def _candidates(self, before: str) -> list[str]:
        catalog = self._catalog()
        fields = self._fields(before)
        others = sorted({f for fs in catalog.values() for f in fs} - set(fields))
        return [*fields, *sorted(catalog), *sorted(KEYWORDS), *OPTION_NAMES, *SHAPES, *others]

    @staticmethod
    def _matches(word: str, candidates: Iterable[str]) -> Iterator[Completion]:
        seen: set[str] = set()
        lowered = word.lower()
        for candidate in candidates:
            if candidate.lower().startswith(lowered) and candidate not in seen \
                    and candidate != word:
                seen.add(candidate)
                keyword = candidate in KEYWORDS
                text = candidate.lower() if keyword and word.islower() else candidate
                yield Completion(text, -len(word), display_meta="keyword" if keyword else None)
