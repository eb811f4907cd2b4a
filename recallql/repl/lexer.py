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
            (r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?\b", Number),
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


class RecallQLCompleter(Completer):
    """Completes keywords, collection names, field names (those of the statement's collection
    first), option names and backslash commands.

    Args:
        catalog: returns ``{collection: [field names]}`` (called per completion, so new
            collections appear).
        commands: the shell's backslash commands (``\\help``, ...).
    """

    def __init__(self, catalog: Callable[[], dict[str, list[str]]],
                 commands: Sequence[str] = ()) -> None:
        self._catalog = catalog
        self._commands = tuple(commands)

    def get_completions(self, document: Document, complete_event: CompleteEvent
                        ) -> Iterator[Completion]:
        before = document.text_before_cursor
        line = before.rsplit("\n", 1)[-1]
        if line.lstrip().startswith("\\") and " " not in line.strip():
            word = line.strip()
            yield from (Completion(c, -len(word)) for c in self._commands if c.startswith(word))
            return
        match = _WORD.search(before)
        word = match.group(0) if match else ""
        if not word:
            return
        yield from self._matches(word, self._candidates(before))

    def _candidates(self, before: str) -> list[str]:
        catalog = self._catalog()
        if _AFTER_COLLECTION_KEYWORD.search(before):
            return sorted(catalog)
        found = _COLLECTION_AFTER.findall(before)
        current = found[-1] if found and found[-1] in catalog else None
        fields = list(catalog.get(current, [])) if current else []
        others = sorted({f for c, fs in catalog.items() if c != current for f in fs})
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
