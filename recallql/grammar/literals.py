"""Decode literal tokens (strings, numbers, constants, timestamps, durations) into AST nodes."""

from __future__ import annotations

import math
from typing import cast

from lark import Token, Tree

from recallql.grammar.errors import QuerySyntaxError
from recallql.grammar.nodes import (
    BooleanLiteral,
    Duration,
    FloatLiteral,
    IntegerLiteral,
    Node,
    NullLiteral,
    Span,
    StringLiteral,
    TimestampLiteral,
)

__all__ = ["span_of", "token_at", "token_literal", "timestamp", "duration", "decode_string"]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

_UNITS = {"DAY": "DAYS", "HOUR": "HOURS", "MINUTE": "MINUTES", "SECOND": "SECONDS"}


def span_of(item: Tree | Token) -> Span:
    """The source span of a token, or of a tree (from its meta)."""
    if isinstance(item, Token):
        return Span(item.start_pos or 0, item.end_pos or 0)
    return Span(item.meta.start_pos, item.meta.end_pos)


def token_at(tree: Tree, index: int) -> Token:
    """Child `index` of `tree`, where the grammar puts a token (lark types children as
    ``Tree | Token``)."""
    return cast(Token, tree.children[index])


def decode_string(token: str) -> str:
    """The value of a single-quoted string token: quotes removed, ``''`` read as ``'``."""
    return token[1:-1].replace("''", "'")


def number(token: Token, text: str) -> int | float:
    """The value of an INT or FLOAT token.

    Raises:
        QuerySyntaxError: the number is outside the signed 64-bit range (int) or not finite.
    """
    if token.type == "INT":
        value: int | float = int(token)
        if not INT64_MIN <= value <= INT64_MAX:
            raise QuerySyntaxError(
                "whole number out of range",
                text=text,
                span=span_of(token),
                hint=f"whole numbers go from {INT64_MIN} to {INT64_MAX}",
            )
        return value
    value = float(token)
    if not math.isfinite(value):
        raise QuerySyntaxError(
            "number out of range",
            text=text,
            span=span_of(token),
            hint="numbers must be finite, e.g. 1e300",
        )
    return value


def token_literal(token: Token, text: str) -> Node:
    """The literal node of a STRING, INT, FLOAT, TRUE, FALSE or NULL token."""
    span = span_of(token)
    kind = token.type
    if kind == "STRING":
        return StringLiteral.model_construct(value=decode_string(token), span=span)
    if kind == "INT":
        return IntegerLiteral.model_construct(value=number(token, text), span=span)
    if kind == "FLOAT":
        return FloatLiteral.model_construct(value=number(token, text), span=span)
    if kind in ("TRUE", "FALSE"):
        return BooleanLiteral.model_construct(value=kind == "TRUE", span=span)
    if kind == "NULL":
        return NullLiteral.model_construct(value=None, span=span)
    raise AssertionError(f"not a literal token: {kind}")  # the grammar never gets here


def timestamp(string: Token, span: Span) -> TimestampLiteral:
    """The node of ``TIMESTAMP '<text>'``; ``string`` is the STRING token. The text is kept as
    written: the engine parses it (the grammar parses no timestamps)."""
    return TimestampLiteral.model_construct(value=decode_string(string), span=span)


def duration(amount: Token, unit: Token, span: Span, text: str) -> Duration:
    """The node of ``<number> <unit>``; singular units are stored plural."""
    name = unit.type
    return Duration.model_construct(
        value=number(amount, text), unit=_UNITS.get(name, name), span=span
    )
