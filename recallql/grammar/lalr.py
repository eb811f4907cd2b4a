"""The one LALR parser for ``recallql.lark``, built once on first use (shared by `parser`, which
parses, and `diagnostics`, which replays a failed parse to say what was expected)."""

from __future__ import annotations

import functools

from lark import Lark


@functools.cache
def lark_parser() -> Lark:
    """The one LALR parser for ``recallql.lark`` (built on first use)."""
    return Lark.open(
        "recallql.lark",
        rel_to=__file__,
        start="script",
        parser="lalr",
        lexer="basic",
        propagate_positions=True,
    )
