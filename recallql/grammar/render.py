"""Canonical text of AST nodes: the renderers behind `nodes.render` (``Node.to_text()``).

Canonical form: keywords upper-case, one space between tokens, clauses in grammar order,
strings single-quoted with ``''``, identifiers bare unless they need quoting, floats printed
with ``repr()``, options as ``(name = value, ...)`` in the order written, no trailing ``;``.
For every canonical statement ``q``, ``parse(q).to_text() == q``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallql.grammar.keywords import quote_identifier
from recallql.grammar.nodes import (
    And,
    Between,
    BooleanLiteral,
    Comparison,
    Contains,
    Duration,
    FloatLiteral,
    Identifier,
    InList,
    IntegerLiteral,
    IsNull,
    Like,
    Node,
    Not,
    NullLiteral,
    Or,
    Parameter,
    StringLiteral,
    TimestampLiteral,
    VectorLiteral,
    render,
)
from recallql.grammar.statements import (
    Describe,
    Explain,
    Fuse,
    GroupBy,
    NamedValue,
    NoRecency,
    NoSignalBoost,
    Option,
    OptionList,
    QueryStatement,
    RecencyBoost,
    Retrieve,
    SessionBoost,
    ShowCollections,
    ShowLineage,
    ShowSession,
    ShowSessions,
    SignalBoost,
    Using,
    WithContext,
)

__all__ = ["render", "string_literal", "number"]


def string_literal(value: str) -> str:
    """``value`` as a single-quoted string literal (``'`` doubled)."""
    return "'" + value.replace("'", "''") + "'"


def number(value: int | float) -> str:
    """A number as canonical text: ``str`` for ints, ``repr`` for floats."""
    return repr(value) if isinstance(value, float) else str(value)


def _timestamp(node: TimestampLiteral) -> str:
    return f"TIMESTAMP {string_literal(node.value)}"


def _parameter(node: Parameter) -> str:
    return "?" if node.name is None else f":{node.name}"


def _vector(node: VectorLiteral) -> str:
    return "?" if node.name is None else f":{node.name}"


def _predicate_item(item: Node, parent: type) -> str:
    text = render(item)
    if isinstance(item, And | Or) and (parent is not Or or isinstance(item, Or)):
        return f"({text})"
    return text


def _junction(node: And | Or) -> str:
    word = " AND " if isinstance(node, And) else " OR "
    return word.join(_predicate_item(item, type(node)) for item in node.items)


def _not(node: Not) -> str:
    return f"NOT {_predicate_item(node.item, Not)}"


def _negated(node: Any, word: str) -> str:
    return f"NOT {word}" if node.negated else word


def _in_list(node: InList) -> str:
    if node.list_parameter:
        return f"{render(node.field)} {_negated(node, 'IN')} {render(node.values[0])}"
    values = ", ".join(render(value) for value in node.values)
    return f"{render(node.field)} {_negated(node, 'IN')} ({values})"


def _between(node: Between) -> str:
    head = f"{render(node.field)} {_negated(node, 'BETWEEN')}"
    return f"{head} {render(node.low)} AND {render(node.high)}"


def _like(node: Like) -> str:
    return f"{render(node.field)} {_negated(node, 'LIKE')} {render(node.pattern)}"


def _is_null(node: IsNull) -> str:
    return f"{render(node.field)} IS {'NOT NULL' if node.negated else 'NULL'}"


def _options(options: tuple[Option, ...]) -> str:
    if not options:
        return ""
    return " (" + ", ".join(render(option) for option in options) + ")"


def _clauses(node: QueryStatement) -> list[str]:
    parts = [
        f"MATCHING {render(node.matching)}" if node.matching else "",
        render(node.using) if node.using else "",
        f"NEAR {render(node.near)}" if node.near else "",
        f"WHERE {render(node.where)}" if node.where else "",
        f"FOR SESSION {render(node.session)}" if node.session else "",
        *(render(boost) for boost in node.boosts),
        render(node.context) if node.context else "",
        render(node.fuse) if node.fuse else "",
        render(node.group_by) if node.group_by else "",
        f"AS OF {render(node.as_of)}" if node.as_of else "",
        f"LIMIT {render(node.limit)}" if node.limit else "",
        f"OFFSET {render(node.offset)}" if node.offset else "",
    ]
    return [part for part in parts if part]


def _query(node: QueryStatement) -> str:
    if isinstance(node, Retrieve):
        count = f" {render(node.count)}" if node.count else ""
        head = f"RETRIEVE{count} FROM {render(node.collection)}"
    else:
        head = f"SEARCH {render(node.collection)}"
    return " ".join([head, *_clauses(node)])


def _explain(node: Explain) -> str:
    words = [
        "EXPLAIN",
        "ANALYZE" if node.analyze else "",
        "VERBOSE" if node.verbose else "",
        f"FORMAT {node.format.upper()}" if node.format else "",
        render(node.statement),
    ]
    return " ".join(word for word in words if word)


def _show_sessions(node: ShowSessions) -> str:
    parts = [
        "SHOW SESSIONS",
        f"WHERE {render(node.where)}" if node.where else "",
        f"LIMIT {render(node.limit)}" if node.limit else "",
        f"OFFSET {render(node.offset)}" if node.offset else "",
    ]
    return " ".join(part for part in parts if part)


_RENDERERS: dict[type, Callable[[Any], str]] = {
    Identifier: lambda n: quote_identifier(n.name),
    StringLiteral: lambda n: string_literal(n.value),
    IntegerLiteral: lambda n: str(n.value),
    FloatLiteral: lambda n: repr(n.value),
    BooleanLiteral: lambda n: "TRUE" if n.value else "FALSE",
    NullLiteral: lambda n: "NULL",
    TimestampLiteral: _timestamp,
    Duration: lambda n: f"{number(n.value)} {n.unit}",
    VectorLiteral: _vector,
    Parameter: _parameter,
    Comparison: lambda n: f"{render(n.field)} {n.op} {render(n.value)}",
    InList: _in_list,
    Between: _between,
    Like: _like,
    Contains: lambda n: f"{render(n.field)} CONTAINS {render(n.value)}",
    IsNull: _is_null,
    And: _junction,
    Or: _junction,
    Not: _not,
    Option: lambda n: f"{render(n.name)} = {render(n.value)}",
    NamedValue: lambda n: f"{render(n.name)} = {render(n.value)}",
    OptionList: lambda n: "(" + ", ".join(render(item) for item in n.items) + ")",
    Using: lambda n: f"USING {n.mode.upper()}" + (
        f" ({n.method}{'' if n.ef is None else f', ef = {n.ef}'})" if n.method else ""),
    RecencyBoost: lambda n: "WITH RECENCY" + _options(n.options),
    NoRecency: lambda n: "WITHOUT RECENCY",
    SessionBoost: lambda n: "WITH SESSION BOOST" + _options(n.options),
    SignalBoost: lambda n: "WITH SIGNAL BOOST" + _options(n.options),
    NoSignalBoost: lambda n: "WITHOUT SIGNAL BOOST",
    Fuse: lambda n: f"FUSE {n.method.upper()}" + _options(n.options),
    WithContext: lambda n: "WITH CONTEXT" + _options(n.options),
    GroupBy: lambda n: f"GROUP BY {n.kind.upper()}" + _options(n.options),
    QueryStatement: _query,
    Explain: _explain,
    ShowCollections: lambda n: "SHOW COLLECTIONS",
    ShowSessions: _show_sessions,
    ShowSession: lambda n: f"SHOW SESSION {render(n.session)}",
    ShowLineage: lambda n: f"SHOW LINEAGE {render(n.session)}",
    Describe: lambda n: f"DESCRIBE {render(n.collection)}",
}

for _cls, _renderer in _RENDERERS.items():
    render.register(_cls)(_renderer)
