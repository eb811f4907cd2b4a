"""``parse`` and ``parse_script``: text to validated AST statements, cached by text.

The grammar (``recallql.lark``) is loaded once, on first use, as an LALR parser with the basic
lexer (every keyword is a keyword everywhere, which is what makes reserved words reserved).
Input limits (size, nesting, IN-list length, tokens; `recallql.grammar.limits`) are checked
first, in one regular-expression pass. Parsing then runs in three passes: lark builds the tree,
:class:`AstBuilder` turns it into nodes with spans (structural checks), :func:`validate` checks
literal values. Any lark exception is
translated into a :class:`QuerySyntaxError`; nothing else escapes.
"""

from __future__ import annotations

import functools

from lark.exceptions import UnexpectedInput

from recallql.grammar.checks import validate
from recallql.grammar.diagnostics import syntax_error
from recallql.grammar.errors import QuerySyntaxError
from recallql.grammar.lalr import lark_parser
from recallql.grammar.limits import check_limits
from recallql.grammar.nodes import Span
from recallql.grammar.statements import StatementBase
from recallql.grammar.transform import AstBuilder

__all__ = ["parse", "parse_script", "clear_cache", "lark_parser"]

CACHE_SIZE = 1024


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse_cached(text: str) -> tuple[StatementBase, ...]:
    check_limits(text)  # before lark: over-limit input is refused in one regex pass
    try:
        tree = lark_parser().parse(text)
    except UnexpectedInput as exc:
        raise syntax_error(exc, text) from None
    statements = AstBuilder(text).script(tree)
    return tuple(validate(statement) for statement in statements)


#: The error for a statement holding a lone surrogate (e.g. bytes that are not UTF-8, read with
#: ``surrogateescape``); the shell, which has no parameters, gives it its own hint.
NOT_UNICODE = "the statement is not valid Unicode text (a lone surrogate)"


def _checked(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"query text must be a str, not {type(text).__name__}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise QuerySyntaxError(
                NOT_UNICODE, text=text,
                span=(exc.start, exc.end), hint="pass text as a parameter, decoded as UTF-8"
            ) from None
    return text


def parse_script(text: str) -> list[StatementBase]:
    """Parse ``;``-separated statements (empty statements and comment-only input allowed).

    Args:
        text: the source; spans of every statement are offsets into it.

    Returns:
        The statements in order (possibly empty). Each statement's ``source`` is ``text``.

    Raises:
        QuerySyntaxError: malformed text (line, column and a caret in ``str(err)``).
        QuerySemanticError: a literal value out of range (``LIMIT 0``, ``weight = -1``).
        ParameterError: ``?`` and ``:name`` mixed in one statement.
        TypeError: ``text`` is not a str.
    """
    return list(_parse_cached(_checked(text)))


def parse(text: str) -> StatementBase:
    """Parse exactly one statement; a trailing ``;`` is optional.

    Results are cached by text (ASTs are immutable, so sharing them is safe).

    Args:
        text: the source, e.g. ``"SEARCH docs MATCHING 'backup' LIMIT 5"``.

    Returns:
        The statement (``Search``, ``Retrieve``, ``Explain``, ``ShowCollections``,
        ``ShowSessions``, ``ShowSession``, ``ShowLineage`` or ``Describe``).

    Raises:
        QuerySyntaxError: malformed text, no statement, or more than one statement.
        QuerySemanticError: a literal value out of range (``LIMIT 0``, ``weight = -1``).
        ParameterError: ``?`` and ``:name`` mixed in one statement.
        TypeError: ``text`` is not a str.
    """
    statements = _parse_cached(_checked(text))
    if len(statements) == 1:
        return statements[0]
    if not statements:
        end = len(text.rstrip())
        raise QuerySyntaxError(
            "expected a statement, found end of input",
            text=text,
            span=Span(end, end),
            expected=["SEARCH", "RETRIEVE", "EXPLAIN", "SHOW", "DESCRIBE"],
            hint="e.g. SEARCH docs MATCHING 'backup policy' LIMIT 5",
        )
    second = statements[1].span
    raise QuerySyntaxError(
        "expected one statement, found a second one",
        text=text,
        span=second,
        hint="one statement per call (db.execute, parse); run several with parse_script() "
             "or the shell",
    )


def clear_cache() -> None:
    """Forget cached parses (benchmarks use it to time cold parses)."""
    _parse_cached.cache_clear()
