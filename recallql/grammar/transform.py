"""Turn lark's parse tree into the AST, with source spans, in a pass of its own.

Kept apart from the parser (not a Transformer passed into ``Lark(...)``) so that every node
gets its span and errors raised here are plain :class:`QueryError`\\ s, not ``VisitError``.
Structural checks live here: clause order and repetition, clauses a statement does not take,
option names, ``EXPLAIN`` options, mixed parameter styles. Value ranges: ``checks.py``.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Tree

from recallql.grammar import literals
from recallql.grammar.clauses import ClauseCollector
from recallql.grammar.errors import ParameterError, QuerySyntaxError
from recallql.grammar.limits import MAX_DEPTH
from recallql.grammar.literals import span_of, token_at
from recallql.grammar.nodes import (
    And,
    Between,
    Comparison,
    Contains,
    Identifier,
    InList,
    IsNull,
    Like,
    Node,
    Not,
    Or,
    Parameter,
    Span,
    StringLiteral,
)
from recallql.grammar.statements import (
    Describe,
    Explain,
    Retrieve,
    Search,
    ShowCollections,
    ShowLineage,
    ShowSession,
    ShowSessions,
    StatementBase,
)

__all__ = ["AstBuilder"]


_OPS = {"EQ": "=", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


#: Predicate trees that hold no predicate: they add no nesting level.
_LEAVES = frozenset({"comparison", "in_list", "between", "like", "contains", "is_null"})


class AstBuilder:
    """Builds the statements of one source text.

    Args:
        text: the source the tree was parsed from (kept on every statement as ``source``).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.parameters: list[Parameter] = []
        self.depth = 0

    def script(self, tree: Tree) -> list[StatementBase]:
        """Build every statement of a ``script`` tree, in order."""
        return [self.statement(child) for child in tree.children if isinstance(child, Tree)]

    def statement(self, tree: Tree) -> StatementBase:
        """Build one statement; parameters are numbered from 0 within it."""
        self.parameters = []
        node = getattr(self, tree.data)(tree)
        self._check_parameter_style()
        return node

    def error(self, message: str, span: Span, **kwargs: Any) -> QuerySyntaxError:
        """A syntax error about ``span`` of this text."""
        return QuerySyntaxError(message, text=self.text, span=span, **kwargs)

    # ---- statements -------------------------------------------------------------------

    def _query_fields(self, clauses: list[Tree], statement: str) -> dict[str, Any]:
        collector = ClauseCollector(self, statement)
        for clause in clauses:
            collector.add(clause)
        return collector.fields

    def _base(self, tree: Tree) -> dict[str, Any]:
        return {"span": span_of(tree), "source": self.text}

    def _finish(self, cls: type[StatementBase], fields: dict[str, Any]) -> StatementBase:
        return cls.model_construct(parameters=tuple(self.parameters), **fields)

    def search(self, tree: Tree) -> StatementBase:
        """``SEARCH ident clause*``."""
        collection = self.ident(tree.children[1])
        fields = self._query_fields(tree.children[2:], "SEARCH")
        if "matching" not in fields and "near" not in fields:
            at = collection.span.end
            raise self.error(
                "SEARCH needs MATCHING <text> or NEAR <vector parameter>",
                Span(at, at),
                expected=["MATCHING", "NEAR"],
                hint=f"e.g. SEARCH {collection.to_text()} MATCHING 'backup policy'"
                "; RETRIEVE ranks without text",
            )
        return self._finish(Search, {**self._base(tree), "collection": collection, **fields})

    def retrieve(self, tree: Tree) -> StatementBase:
        """``RETRIEVE [count] FROM ident clause*``."""
        children = tree.children
        count = None
        if not (isinstance(children[1], Token) and children[1].type == "FROM"):
            count = self.value(children[1])
            children = [children[0], *children[2:]]
        collection = self.ident(children[2])
        fields = self._query_fields(children[3:], "RETRIEVE")
        if count is not None and "limit" in fields:
            limit_tree = next(c for c in children[3:] if c.data == "limit")
            raise self.error(
                "the count is given twice: RETRIEVE n and LIMIT",
                span_of(limit_tree.children[0]),
                hint="give the count once: RETRIEVE 5 FROM c ... or RETRIEVE FROM c ... LIMIT 5",
            )
        return self._finish(
            Retrieve, {**self._base(tree), "collection": collection, "count": count, **fields}
        )

    def explain(self, tree: Tree) -> StatementBase:
        """``EXPLAIN [ANALYZE] [VERBOSE] [FORMAT TEXT|JSON] statement`` (options in any order)."""
        flags: dict[str, Any] = {}
        for option in tree.children[1:-1]:
            first = token_at(option, 0)
            name = first.type.lower()
            if name in flags:
                raise self.error(
                    f"duplicate EXPLAIN option {first.type}",
                    span_of(option),
                    hint="give each EXPLAIN option once",
                )
            flags[name] = token_at(option, 1).type.lower() if name == "format" else True
        inner = getattr(self, tree.children[-1].data)(tree.children[-1])
        return self._finish(Explain, {**self._base(tree), "statement": inner, **flags})

    def show_collections(self, tree: Tree) -> StatementBase:
        """``SHOW COLLECTIONS``."""
        return self._finish(ShowCollections, self._base(tree))

    def show_sessions(self, tree: Tree) -> StatementBase:
        """``SHOW SESSIONS [WHERE ...] [LIMIT n] [OFFSET m]``."""
        fields = self._query_fields(tree.children[2:], "SHOW SESSIONS")
        return self._finish(ShowSessions, {**self._base(tree), **fields})

    def show_session(self, tree: Tree) -> StatementBase:
        """``SHOW SESSION id``."""
        session = self.session_id(tree.children[2])
        return self._finish(ShowSession, {**self._base(tree), "session": session})

    def show_lineage(self, tree: Tree) -> StatementBase:
        """``SHOW LINEAGE id``."""
        session = self.session_id(tree.children[2])
        return self._finish(ShowLineage, {**self._base(tree), "session": session})

    def describe(self, tree: Tree) -> StatementBase:
        """``DESCRIBE ident``."""
        collection = self.ident(tree.children[1])
        return self._finish(Describe, {**self._base(tree), "collection": collection})

    # ---- names and values -------------------------------------------------------------

    def ident(self, tree: Tree) -> Identifier:
        """An identifier: bare, double-quoted, or a non-reserved keyword (as written)."""
        token = token_at(tree, 0)
        if token.type != "QUOTED_NAME":
            return Identifier.model_construct(name=str(token), quoted=False, span=span_of(token))
        name = token[1:-1].replace('""', '"')
        if not name:
            raise self.error(
                "empty quoted name",
                span_of(token),
                hint='a quoted name needs at least one character: "my field"',
            )
        return Identifier.model_construct(name=name, quoted=True, span=span_of(token))

    def session_id(self, item: Tree | Token) -> Node:
        """A session id: string literal, parameter, or a bare name taken as the string."""
        if isinstance(item, Tree) and item.data == "ident":
            name = self.ident(item)
            return StringLiteral.model_construct(value=name.name, span=name.span)
        return self.value(item)

    def value(self, item: Tree | Token) -> Node:
        """A literal, parameter, duration, timestamp or identifier."""
        if isinstance(item, Tree):
            return getattr(self, item.data)(item)
        if item.type == "PARAM":
            return self._parameter(name=item[1:], span=span_of(item))
        if item.type == "QMARK":
            return self._parameter(index=len(self.parameters), span=span_of(item))
        return literals.token_literal(item, self.text)

    def _parameter(self, **fields: Any) -> Parameter:
        node = Parameter.model_construct(**fields)
        self.parameters.append(node)
        return node

    def timestamp(self, tree: Tree) -> Node:
        """``TIMESTAMP 'iso-8601'``."""
        return literals.timestamp(token_at(tree, 1), span_of(tree))

    def duration(self, tree: Tree) -> Node:
        """``<number> DAYS|HOURS|MINUTES|SECONDS``."""
        return literals.duration(token_at(tree, 0), token_at(tree, 1), span_of(tree), self.text)

    def _check_parameter_style(self) -> None:
        if not self.parameters:
            return
        positional = self.parameters[0].name is None
        odd = next((p for p in self.parameters if (p.name is None) != positional), None)
        if odd is not None:
            raise ParameterError(
                "a statement cannot mix ? and :name parameters",
                text=self.text,
                span=odd.span,
                hint="use either ? (bound by position) or :name (bound by name) throughout",
            )

    # ---- predicates -------------------------------------------------------------------

    def predicate(self, tree: Tree) -> Node:
        """Any predicate tree, at most :data:`MAX_DEPTH` levels deep.

        A level is a ``( ... )``, a ``NOT`` or an AND / OR chain; the comparison at the bottom
        is none. `limits.check_limits` has already counted the parentheses and NOTs (at most
        64); a chain inside another (``(a OR b AND (...))``) is what can go further here.
        """
        if tree.data in _LEAVES:
            return getattr(self, tree.data)(tree)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(
                f"the WHERE predicate is nested more than {MAX_DEPTH} levels deep "
                "(parentheses, NOTs, and AND / OR chains inside one another)",
                span_of(tree),
                hint="use fewer nested parentheses, NOTs or AND / OR groups",
            )
        try:
            return getattr(self, tree.data)(tree)
        finally:
            self.depth -= 1

    def or_pred(self, tree: Tree) -> Node:
        """``a OR b OR ...``."""
        items = tuple(self.predicate(child) for child in tree.children[::2])
        return Or.model_construct(items=items, span=span_of(tree))

    def and_pred(self, tree: Tree) -> Node:
        """``a AND b AND ...``."""
        items = tuple(self.predicate(child) for child in tree.children[::2])
        return And.model_construct(items=items, span=span_of(tree))

    def not_(self, tree: Tree) -> Node:
        """``NOT p``."""
        return Not.model_construct(item=self.predicate(tree.children[1]), span=span_of(tree))

    def group(self, tree: Tree) -> Node:
        """``( p )``: the inner predicate."""
        return self.predicate(tree.children[1])

    def comparison(self, tree: Tree) -> Node:
        """``field <op> value``."""
        field, _, value = tree.children
        return Comparison.model_construct(
            field=self.ident(field), op=_OPS[token_at(tree, 1).type], value=self.value(value),
            span=span_of(tree),
        )

    def _negated(self, tree: Tree) -> tuple[Identifier, bool, list[Any]]:
        children = tree.children
        negated = isinstance(children[1], Token) and children[1].type == "NOT"
        return self.ident(children[0]), negated, children[3 if negated else 2 :]

    def in_list(self, tree: Tree) -> Node:
        """``field [NOT] IN (v, ...)`` or ``field [NOT] IN :list``."""
        field, negated, rest = self._negated(tree)
        if len(rest) == 1:  # one parameter bound to a list
            return InList.model_construct(field=field, values=(self.value(rest[0]),),
                                          negated=negated, list_parameter=True,
                                          span=span_of(tree))
        values = tuple(self.value(child) for child in rest[1:-1:2])
        return InList.model_construct(
            field=field, values=values, negated=negated, span=span_of(tree)
        )

    def between(self, tree: Tree) -> Node:
        """``field [NOT] BETWEEN low AND high``."""
        field, negated, rest = self._negated(tree)
        return Between.model_construct(
            field=field,
            low=self.value(rest[0]),
            high=self.value(rest[2]),
            negated=negated,
            span=span_of(tree),
        )

    def like(self, tree: Tree) -> Node:
        """``field [NOT] LIKE pattern``."""
        field, negated, rest = self._negated(tree)
        return Like.model_construct(
            field=field, pattern=self.value(rest[0]), negated=negated, span=span_of(tree)
        )

    def contains(self, tree: Tree) -> Node:
        """``field CONTAINS value``."""
        field, _, value = tree.children
        return Contains.model_construct(
            field=self.ident(field), value=self.value(value), span=span_of(tree)
        )

    def is_null(self, tree: Tree) -> Node:
        """``field IS [NOT] NULL``."""
        negated = len(tree.children) == 4
        return IsNull.model_construct(
            field=self.ident(tree.children[0]), negated=negated, span=span_of(tree)
        )
