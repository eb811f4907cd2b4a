"""Build the clauses of SEARCH / RETRIEVE / SHOW SESSIONS and check their order and repetition.

The grammar accepts clauses in any order so that a misplaced clause gets a precise message
("WHERE must come before LIMIT") instead of a bare "unexpected token". The order is
:data:`CLAUSE_ORDER`; the boost clauses share one place and may come in any order among
themselves, but each boost (recency, session boost, signal boost) is given at most once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from lark import Tree

from recallql.grammar.errors import QuerySemanticError
from recallql.grammar.literals import span_of, token_at
from recallql.grammar.nodes import Identifier, Span
from recallql.grammar.statements import (
    Fuse,
    GroupBy,
    NamedValue,
    NoRecency,
    NoSignalBoost,
    Option,
    OptionList,
    RecencyBoost,
    SessionBoost,
    SignalBoost,
    Using,
    WithContext,
)
from recallql.grammar.suggest import did_you_mean

#: The methods ``USING SEMANTIC (...)`` may force (default: chosen per statement).
SEMANTIC_METHODS = ("exact", "ann")
#: ``USING SEMANTIC (ann, ef = N)``: the accepted HNSW search breadths (usearch walks a
#: candidate list of ef rows; past 100,000 a graph search costs more than an exact scan of a
#: million rows).
EF_RANGE = (1, 100_000)

if TYPE_CHECKING:
    from recallql.grammar.transform import AstBuilder

__all__ = ["ClauseCollector", "CLAUSE_ORDER", "OPTION_NAMES"]

CLAUSE_ORDER = (
    "MATCHING, USING, NEAR, WHERE, FOR SESSION, WITH/WITHOUT boosts and WITH CONTEXT (any "
    "order among them), FUSE, GROUP BY, AS OF, LIMIT, OFFSET"
)


class _Clause(NamedTuple):
    title: str  # keywords that open it, as shown in messages
    rank: int  # place in CLAUSE_ORDER
    slot: str  # the statement field it fills (boosts: the boost family)


_CLAUSES: dict[str, _Clause] = {
    "matching": _Clause("MATCHING", 0, "matching"),
    "using": _Clause("USING", 1, "using"),
    "near": _Clause("NEAR", 2, "near"),
    "where": _Clause("WHERE", 3, "where"),
    "for_session": _Clause("FOR SESSION", 4, "session"),
    "with_recency": _Clause("WITH RECENCY", 5, "recency"),
    "without_recency": _Clause("WITHOUT RECENCY", 5, "recency"),
    "with_session_boost": _Clause("WITH SESSION BOOST", 5, "session_boost"),
    "with_signal_boost": _Clause("WITH SIGNAL BOOST", 5, "signal_boost"),
    "without_signal_boost": _Clause("WITHOUT SIGNAL BOOST", 5, "signal_boost"),
    "with_context": _Clause("WITH CONTEXT", 5, "context"),
    "fuse": _Clause("FUSE", 6, "fuse"),
    "group_by": _Clause("GROUP BY", 7, "group_by"),
    "as_of": _Clause("AS OF", 8, "as_of"),
    "limit": _Clause("LIMIT", 9, "limit"),
    "offset": _Clause("OFFSET", 10, "offset"),
}

_BOOST_SLOTS = frozenset({"recency", "session_boost", "signal_boost"})

_ALLOWED: dict[str, frozenset[str] | None] = {
    "SEARCH": None,
    "RETRIEVE": None,
    "SHOW SESSIONS": frozenset({"where", "limit", "offset"}),
}

#: FUSE options that belong to one method only.
_FUSE_ONLY = {"k": "rrf", "alpha": "convex", "normalization": "convex"}

OPTION_NAMES: dict[str, tuple[str, ...] | None] = {
    "WITH RECENCY": ("weight", "half_life", "field", "shape"),
    "WITH SESSION BOOST": ("keywords", "velocity", "entities"),
    "WITH SIGNAL BOOST": None,  # any signal name
    "FUSE": ("k", "window", "weights", "alpha", "normalization"),
    "WITH CONTEXT": ("before", "after"),
    "GROUP BY DOCUMENT": (),
    "GROUP BY CONVERSATION": ("budget",),
}
"""Option names each clause takes (None: any name)."""


def head_span(tree: Tree, words: int) -> Span:
    """Span of the first ``words`` keyword tokens of a clause tree."""
    return Span(tree.meta.start_pos, token_at(tree, words - 1).end_pos or 0)


class ClauseCollector:
    """Collects the clause trees of one statement into AST fields, checking as it goes.

    Args:
        builder: the AstBuilder (values, identifiers, errors).
        statement: ``"SEARCH"``, ``"RETRIEVE"`` or ``"SHOW SESSIONS"``.

    Attributes:
        fields: statement field name -> node; ``boosts`` is a tuple in source order.
    """

    def __init__(self, builder: AstBuilder, statement: str) -> None:
        self.builder = builder
        self.statement = statement
        self.allowed = _ALLOWED[statement]
        self.fields: dict[str, Any] = {}
        self.seen: dict[str, tuple[str, Span]] = {}  # slot -> (title, head span)
        self.last: tuple[int, str] | None = None  # (rank, title) of the furthest clause

    def add(self, tree: Tree) -> None:
        """Check one clause against those before it and store its node."""
        clause = _CLAUSES[tree.data]
        span = head_span(tree, len(clause.title.split()))
        self._check_place(clause, span)
        node = getattr(self, tree.data)(tree)
        if clause.slot in _BOOST_SLOTS:
            self.fields["boosts"] = (*self.fields.get("boosts", ()), node)
        else:
            self.fields[clause.slot] = node

    def _check_place(self, clause: _Clause, span: Span) -> None:
        error = self.builder.error
        if self.allowed is not None and clause.slot not in self.allowed:
            takes = ", ".join(c.title for c in _CLAUSES.values() if c.slot in self.allowed)
            raise error(
                f"{self.statement} does not take {clause.title}",
                span,
                hint=f"{self.statement} takes {takes}",
            )
        earlier = self.seen.get(clause.slot)
        if earlier is not None:
            message = (
                f"duplicate {clause.title} clause"
                if earlier[0] == clause.title
                else f"{clause.title} contradicts the earlier {earlier[0]}"
            )
            raise error(message, span, hint="give each clause once")
        if self.last is not None and clause.rank < self.last[0]:
            raise error(
                f"{clause.title} must come before {self.last[1]}",
                span,
                hint=f"clauses go in this order: {CLAUSE_ORDER}",
            )
        self.seen[clause.slot] = (clause.title, span)
        self.last = (clause.rank, clause.title)

    # ---- one method per clause rule ---------------------------------------------------

    def matching(self, tree: Tree) -> Any:
        """``MATCHING <string | param>``."""
        return self.builder.value(tree.children[1])

    def using(self, tree: Tree) -> Any:
        """``USING HYBRID | LEXICAL | SEMANTIC [(exact | ann [, ef = N])]``."""
        mode = token_at(tree, 1).type.lower()
        method, ef, ef_span = None, None, None
        if len(tree.children) > 2:  # LPAR ident RPAR
            name = self.builder.ident(tree.children[3])
            method = name.name.lower()
            if method not in SEMANTIC_METHODS:
                raise self._value_error(
                    f"unknown semantic search method {name.name!r}", name.span,
                    hint=did_you_mean(name.name, SEMANTIC_METHODS)
                    or "USING SEMANTIC (exact) scans every eligible row; (ann) uses the graph")
            if mode == "lexical":
                raise self.builder.error(
                    f"USING LEXICAL has no semantic leg for ({method})", span_of(tree),
                    hint="the method applies to USING SEMANTIC or USING HYBRID")
        if len(tree.children) > 5:  # LPAR ident COMMA ident EQ INT RPAR
            ef, ef_span = self._ef(tree, method), span_of(token_at(tree, 7))
        return Using.model_construct(mode=mode, method=method, ef=ef, ef_span=ef_span,
                                     span=span_of(tree))

    def _ef(self, tree: Tree, method: str | None) -> int:
        """The ``ef = N`` of ``USING SEMANTIC (ann, ef = N)``, checked."""
        name = self.builder.ident(tree.children[5])
        value = token_at(tree, 7)
        if name.name.lower() != "ef":
            raise self.builder.error(
                f"unknown semantic search option {name.name!r}", name.span,
                hint=did_you_mean(name.name, ("ef",)) or "the option is ef, the HNSW search "
                "breadth: USING SEMANTIC (ann, ef = 400)")
        if method != "ann":
            raise self.builder.error(
                f"ef applies to (ann), not ({method})", name.span,
                hint="an exact scan has no search breadth: USING SEMANTIC (ann, ef = 400)")
        ef = int(str(value))
        low, high = EF_RANGE
        if not low <= ef <= high:
            raise self._value_error(
                f"ef = {ef} is out of range", span_of(value),
                hint=f"ef is the HNSW candidate list: {low:,} … {high:,} (default 128; it is "
                "raised to the candidates the leg asks for)")
        return ef

    def _value_error(self, message: str, span: Span, hint: str | None) -> QuerySemanticError:
        """A value the grammar takes but the clause does not (a name not among its choices, a
        number out of its range): a `QuerySemanticError`, as `checks.validate` raises."""
        return QuerySemanticError(message, text=self.builder.text, span=span, hint=hint)

    def near(self, tree: Tree) -> Any:
        """``NEAR <param>``."""
        return self.builder.value(tree.children[1])

    def where(self, tree: Tree) -> Any:
        """``WHERE <predicate>``."""
        return self.builder.predicate(tree.children[1])

    def for_session(self, tree: Tree) -> Any:
        """``FOR SESSION <id>``."""
        return self.builder.session_id(tree.children[2])

    def with_recency(self, tree: Tree) -> Any:
        """``WITH RECENCY [(options)]``."""
        options = self._options(tree.children[2:], "WITH RECENCY")
        return RecencyBoost.model_construct(options=options, span=span_of(tree))

    def without_recency(self, tree: Tree) -> Any:
        """``WITHOUT RECENCY``."""
        return NoRecency.model_construct(span=span_of(tree))

    def with_session_boost(self, tree: Tree) -> Any:
        """``WITH SESSION BOOST [(options)]``."""
        options = self._options(tree.children[3:], "WITH SESSION BOOST")
        return SessionBoost.model_construct(options=options, span=span_of(tree))

    def with_signal_boost(self, tree: Tree) -> Any:
        """``WITH SIGNAL BOOST [(options)]``."""
        options = self._options(tree.children[3:], "WITH SIGNAL BOOST")
        return SignalBoost.model_construct(options=options, span=span_of(tree))

    def without_signal_boost(self, tree: Tree) -> Any:
        """``WITHOUT SIGNAL BOOST``."""
        return NoSignalBoost.model_construct(span=span_of(tree))

    def with_context(self, tree: Tree) -> Any:
        """``WITH CONTEXT [(before = n, after = m)]``."""
        options = self._options(tree.children[2:], "WITH CONTEXT")
        return WithContext.model_construct(options=options, span=span_of(tree))

    def fuse(self, tree: Tree) -> Any:
        """``FUSE RRF | CONVEX [(k = n, window = n, alpha = a, normalization = minmax | tmm,
        weights = (leg = w, ...))]``; which option fits which method is checked later."""
        method = token_at(tree, 1).type.lower()
        options = []
        for option in self._options(tree.children[2:], "FUSE"):
            allowed = _FUSE_ONLY.get(option.name.name)
            if allowed is not None and allowed != method:
                raise self.builder.error(
                    f"option {option.name.name!r} is for FUSE {allowed.upper()}, not "
                    f"FUSE {method.upper()}", option.name.span,
                    hint=f"write FUSE {allowed.upper()} ({option.name.name} = ...)")
            options.append(self._normalization(option)
                           if option.name.name == "normalization" else option)
        return Fuse.model_construct(method=method, options=tuple(options), span=span_of(tree))

    def _normalization(self, option: Option) -> Option:
        """``normalization = minmax | tmm``: a name is stored in lower case; whether it is one
        of the two is a value check (`recallql.grammar.checks`, a `QuerySemanticError`)."""
        value = option.value
        if not isinstance(value, Identifier):
            return option
        ident = Identifier.model_construct(name=value.name.lower(), quoted=False, span=value.span)
        return Option.model_construct(name=option.name, value=ident, span=option.span)

    def group_by(self, tree: Tree) -> Any:
        """``GROUP BY DOCUMENT | CONVERSATION [(budget = n)]``."""
        kind = token_at(tree, 2).type
        options = self._options(tree.children[3:], f"GROUP BY {kind}")
        return GroupBy.model_construct(kind=kind.lower(), options=options, span=span_of(tree))

    def as_of(self, tree: Tree) -> Any:
        """``AS OF <timestamp | param>``."""
        return self.builder.value(tree.children[2])

    def limit(self, tree: Tree) -> Any:
        """``LIMIT <int | param>``."""
        return self.builder.value(tree.children[1])

    def offset(self, tree: Tree) -> Any:
        """``OFFSET <int | param>``."""
        return self.builder.value(tree.children[1])

    # ---- options ----------------------------------------------------------------------

    def _options(self, rest: list[Any], clause: str) -> tuple[Option, ...]:
        if not rest:
            return ()
        allowed = OPTION_NAMES[clause]
        options: list[Option] = []
        seen: set[str] = set()
        for tree in rest[0].children[1:-1:2]:
            option = self._option(tree, clause, allowed)
            key = option.name.name.lower() if allowed is not None else option.name.name
            if key in seen:
                raise self.builder.error(
                    f"duplicate option {option.name.name!r} in {clause}",
                    option.name.span,
                    hint="give each option once",
                )
            seen.add(key)
            options.append(option)
        return tuple(options)

    def _option(self, tree: Tree, clause: str, allowed: tuple[str, ...] | None) -> Option:
        name = self.builder.ident(tree.children[0])
        value = self._option_value(tree.children[2], name, clause)
        if allowed is not None:
            key = name.name.lower()
            if key not in allowed:
                raise self._unknown_option(name, clause, allowed)
            name = Identifier.model_construct(name=key, quoted=name.quoted, span=name.span)
            if key == "shape" and isinstance(value, Identifier):
                value = value.model_copy(update={"name": value.name.upper()})
        return Option.model_construct(name=name, value=value, span=span_of(tree))

    def _option_value(self, item: Any, name: Identifier, clause: str) -> Any:
        """An option's value; a parenthesised list only for ``FUSE ... weights``."""
        if not (isinstance(item, Tree) and item.data == "options"):
            return self.builder.value(item)
        if clause != "FUSE" or name.name.lower() != "weights":
            raise self.builder.error(
                f"option {name.name!r} of {clause} takes one value, not a list",
                span_of(item),
                hint="only FUSE ... (weights = (lexical = 1.0, semantic = 0.5)) takes a list",
            )
        return self._weights(item)

    def _weights(self, tree: Tree) -> OptionList:
        """``(leg = number, ...)``: leg names folded to lower case, each at most once."""
        items: list[NamedValue] = []
        seen: set[str] = set()
        for option in tree.children[1:-1:2]:
            name = self.builder.ident(option.children[0])
            key = name.name.lower()
            value = option.children[2]
            if isinstance(value, Tree) and value.data == "options":
                raise self.builder.error("a leg weight is a number, not a list",
                                         span_of(value), hint="e.g. weights = (lexical = 2.0)")
            if key in seen:
                raise self.builder.error(f"duplicate leg {name.name!r} in FUSE weights",
                                         name.span, hint="give each leg's weight once")
            seen.add(key)
            ident = Identifier.model_construct(name=key, quoted=name.quoted, span=name.span)
            items.append(NamedValue.model_construct(name=ident, value=self.builder.value(value),
                                                    span=span_of(option)))
        return OptionList.model_construct(items=tuple(items), span=span_of(tree))

    def _unknown_option(self, name: Identifier, clause: str, allowed: tuple[str, ...]) -> Any:
        if not allowed:
            return self.builder.error(
                f"{clause} takes no options",
                name.span,
                hint=f"remove the parentheses after {clause}",
            )
        return self.builder.error(
            f"unknown option {name.name!r} for {clause}",
            name.span,
            expected=list(allowed),
            hint=did_you_mean(name.name, allowed),
        )
