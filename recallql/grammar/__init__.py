"""The recallql language front-end: text -> AST, parameter binding, errors.

    >>> from recallql.grammar import parse, bind
    >>> stmt = parse("search docs matching :q limit 5")
    >>> stmt.to_text()
    'SEARCH docs MATCHING :q LIMIT 5'
    >>> bind(stmt, q="backup").matching_text
    'backup'

See ``docs/language.md`` for every statement, clause and AST node. This package imports
nothing else of the project.
"""

from recallql.grammar import render as _render  # noqa: F401  (registers the canonical renderers)
from recallql.grammar.bind import bind
from recallql.grammar.errors import (
    ParameterError,
    QueryError,
    QuerySemanticError,
    QuerySyntaxError,
)
from recallql.grammar.keywords import NON_RESERVED, RESERVED
from recallql.grammar.nodes import (
    And,
    AnyPredicate,
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
    Predicate,
    Scalar,
    ScalarLiteral,
    Span,
    StringLiteral,
    TimestampLiteral,
    Value,
    VectorLiteral,
)
from recallql.grammar.parser import clear_cache, parse, parse_script
from recallql.grammar.statements import (
    Boost,
    Describe,
    Explain,
    Fuse,
    GroupBy,
    NamedValue,
    NoRecency,
    NoSignalBoost,
    Option,
    OptionList,
    OptionValue,
    QueryStatement,
    RecencyBoost,
    Retrieve,
    Search,
    SessionBoost,
    ShowCollections,
    ShowLineage,
    ShowSession,
    ShowSessions,
    SignalBoost,
    Statement,
    StatementBase,
    Using,
    WithContext,
)
from recallql.grammar.suggest import did_you_mean
from recallql.grammar.timestamps import format_timestamp

__all__ = [
    "parse", "parse_script", "bind", "clear_cache", "did_you_mean", "format_timestamp",
    "QueryError", "QuerySyntaxError", "QuerySemanticError", "ParameterError",
    "RESERVED", "NON_RESERVED",
    "Span", "Node", "Identifier", "ScalarLiteral", "Scalar", "Value", "StringLiteral",
    "IntegerLiteral", "FloatLiteral", "BooleanLiteral", "NullLiteral", "TimestampLiteral",
    "Duration", "VectorLiteral", "Parameter",
    "Predicate", "AnyPredicate", "Comparison", "InList", "Between", "Like", "Contains", "IsNull",
    "And", "Or", "Not",
    "Option", "OptionValue", "NamedValue", "OptionList", "Using", "RecencyBoost", "NoRecency",
    "SessionBoost", "SignalBoost",
    "NoSignalBoost", "Boost", "WithContext", "Fuse", "GroupBy",
    "StatementBase", "QueryStatement", "Search", "Retrieve", "Explain", "ShowCollections",
    "ShowSessions", "ShowSession", "ShowLineage", "Describe", "Statement",
]  # fmt: skip
